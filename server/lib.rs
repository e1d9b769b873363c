//! harrier: a monitoring console for integration routes and load-test runs.
//!
//! Layers, one folder each; imports point down only (docs/architecture.md):
//!
//! ```text
//! main ─► cli ─► app ─► http (api/, console/, conn) ─► state
//!                          │
//!                          ▼
//!                 services ─► views ─► store ─► sources ─► domain
//! ```
//!
//! - [`domain`]: runs, routes, comparison, alert rules and state machine, load schedules,
//!   number formatting; pure (no axum, SQL or I/O);
//! - [`sources`]: readers of outside input (result files, line protocol, exposition text,
//!   Jolokia JSON, seed files) into domain types, and the load generator's HTTP engine;
//! - [`store`]: the only layer with SQL, one backend-neutral [`store::Store`];
//! - [`views`]: read models shared by the API and the console;
//! - [`services`]: import pipeline, comparisons, scrape loops, live runs, live hub, alert
//!   engine, load runs;
//! - [`http`]: the JSON API ([`http::api`]) and the console pages ([`http::console`]);
//! - [`state`]: what every request handler gets; [`app`]: router and serve loop;
//! - [`cli`]: the client commands;
//! - [`config`] (flags, `HARRIER_*`, `harrier.toml`), [`error`] (the request error type),
//!   [`telemetry`] (harrier's own `/metrics`).

pub mod app;
pub mod cli;
pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod services;
pub mod sources;
pub mod state;
pub mod store;
pub mod telemetry;
pub mod views;

/// Now, as unix epoch milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
