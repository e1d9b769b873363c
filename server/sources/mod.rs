//! Sources: readers that turn what comes from outside into domain types.
//!
//! - [`ingest`]: load-tool result files (JMeter, Gatling, k6, Locust, ab, wrk, hey, …) and
//!   the InfluxDB line protocol → runs, with format sniffing;
//! - [`scrape`]: Prometheus/OpenMetrics exposition text and Jolokia JSON → route
//!   observations (the parsers and presets; the scrape loops are a service);
//! - [`seed`]: `harrier-seed` JSON (published figures) → summary-only runs.
//!
//! Pure readers: no database, no HTTP serving, no live hub. They import only the domain.

pub mod ingest;
pub mod scrape;
pub mod seed;
