//! Sources: readers that turn what comes from outside into domain types.
//!
//! - [`ingest`]: load-tool result files (JMeter, Gatling, k6, Locust, ab, wrk, hey, …) and
//!   the InfluxDB line protocol → runs, with format sniffing;
//! - [`scrape`]: Prometheus/OpenMetrics exposition text and Jolokia JSON → route
//!   observations (the parsers and presets; the scrape loops are a service);
//! - [`otlp`]: OpenTelemetry metrics pushed over OTLP/HTTP → route observations per service;
//! - [`seed`]: `harrier-seed` JSON (published figures) → summary-only runs;
//! - [`load`]: the load generator's engine, whose samples are requests it sends itself
//!   (HTTP/1.1 on an arrival schedule) → per-second ticks.
//!
//! Readers: no database, no HTTP serving, no live hub. They import only the domain.

pub mod ingest;
pub mod load;
pub mod otlp;
pub mod scrape;
pub mod seed;
