//! harrier: a monitoring console for integration routes and load-test runs.
//!
//! Module map (see DESIGN.md "Shape"):
//! - [`config`]: settings from flags, `HARRIER_*` variables and `harrier.toml`;
//! - [`ingest`]: load-tool result files → runs (parsers, format sniffing);
//! - [`runs`]: run domain types and statistics;
//! - [`routes`]: route metrics: exposition parser, presets, RED arithmetic;
//! - [`scrape`]: the scrape loops (one task per target);
//! - [`compare`]: run comparison, bootstrap verdicts, change points, gates (pure);
//! - [`comparisons`]: comparisons of stored runs, baselines, checks, trends, and their API;
//! - [`seed`]: `harrier-seed` JSON (published figures as summary-only runs);
//! - [`store`]: the only module with SQL (SQLite via sqlx);
//! - [`live`]: the broadcast hub behind the `/api/v1/live` websocket;
//! - [`live_runs`]: runs streamed while they run (InfluxDB line protocol);
//! - [`api`]: the JSON API under `/api/v1`; [`api_routes`]: its routes and targets part;
//!   [`api_alerts`]: its alerts and alert-rules part;
//! - [`console`]: server-rendered pages under `/console`;
//! - [`telemetry`]: harrier's own `/metrics`;
//! - [`write`]: InfluxDB line-protocol writes (`/write`, `/api/v2/write`) for live runs;
//! - [`alerts`]: threshold alert rules, their evaluation and notifications;
//! - [`app`]: state, router, serve loop;
//! - [`error`]: the one error type, rendered as JSON or as an error page.

pub mod alerts;
pub mod api;
pub mod api_alerts;
pub mod api_routes;
pub mod api_services;
pub mod app;
pub mod compare;
pub mod comparisons;
pub mod config;
pub mod console;
pub mod error;
pub mod import;
pub mod ingest;
pub mod live;
pub mod live_runs;
pub mod routes;
pub mod runs;
pub mod scrape;
pub mod seed;
pub mod store;
pub mod telemetry;
pub mod write;

/// Now, as unix epoch milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
