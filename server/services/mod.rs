//! Services: the work that reads sources, writes the store and tells the live hub.
//!
//! - [`import`]: the import pipeline (file → parser → one store transaction per file);
//! - [`comparisons`]: comparisons of stored runs, baselines, checks and trends;
//! - [`egress`]: the outbound HTTP clients under the egress policy;
//! - [`scrape`]: the scrape loops (one task per target) and retention pruning;
//! - [`route_ops`]: route operations (start, stop, suspend, resume, reset) through the
//!   route's Jolokia agent;
//! - [`otlp`]: the OTLP metrics receiver (pushed routes written like scrapes);
//! - [`live_runs`]: runs streamed while they run (InfluxDB line protocol);
//! - [`load`]: `harrier load run`: the load generator's ticks merged, reported and stored;
//! - [`live`]: the broadcast hub behind the `/api/v1/live` websocket;
//! - [`fanout`]: the hub's events carried to the other replicas (PostgreSQL LISTEN/NOTIFY);
//! - [`auth`]: sign-in, sessions, tokens and share links;
//! - [`oidc`]: single sign-on with an OpenID Connect provider;
//! - [`alerts`]: the alert engine (evaluator loop, notifier to channels).
//!
//! Must not know HTTP requests or pages: handlers in [`crate::http`] call these.

pub mod alerts;
pub mod auth;
pub mod comparisons;
pub mod egress;
pub mod fanout;
pub mod import;
pub mod live;
pub mod live_runs;
pub mod load;
pub mod load_agents;
pub mod load_args;
pub mod load_runs;
pub mod load_tests;
pub mod oidc;
pub mod otlp;
pub mod route_ops;
pub mod scrape;
