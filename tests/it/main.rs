//! harrier's integration tests: one binary, in-process HTTP through `router(state).oneshot`,
//! real sockets on 127.0.0.1:0 for the websocket, and the store on real SQLite files.

mod helpers;
/// The lab service of known capacity, shared with `examples/pool_service.rs`.
#[path = "../../examples/lab/mod.rs"]
mod lab;
mod skip;

mod alerts;
mod alerts_console;
mod attack;
mod backends;
mod bounded;
mod browser;
mod camel;
mod capacity_lab;
mod chaos;
mod cli;
mod compare;
mod egress;
mod http;
mod layers;
mod limits;
mod live;
mod live_runs;
mod load;
mod oidc;
mod otlp;
mod permissions;
mod readme;
mod replicas;
mod report;
mod routes;
mod secrets;
mod server;
mod signin;
mod site;
mod store;
mod store_ops;
