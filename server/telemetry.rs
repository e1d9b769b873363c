//! harrier's own metrics, served at `/metrics` in the Prometheus text format.
//!
//! Owns the recorder (metrics-exporter-prometheus, installed once per process) and the HTTP
//! middleware that counts and times every API request by matched path template, method and
//! status. Latencies are histograms with buckets (not summaries), so they aggregate.
//!
//! Series:
//! - `harrier_http_requests_total{method,path,status}` (counter);
//! - `harrier_http_request_duration_seconds{method,path,status}` (histogram, seconds);
//! - `harrier_runs_imported_total`, `harrier_samples_imported_total`,
//!   `harrier_rejected_rows_total` (counters);
//! - `harrier_websocket_clients` (gauge), `harrier_live_lagged_total` (counter);
//! - `harrier_replica_wakes_total{direction="sent"|"received"|"lost"}` (counter): live
//!   updates carried between replicas (PostgreSQL), see `services::fanout`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets in seconds: 1 ms … 60 s.
const LATENCY_BUCKETS_S: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide recorder on first call and returns its handle; later calls
/// return the same handle (a recorder installs once per process).
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix("duration_seconds".to_string()),
                    LATENCY_BUCKETS_S,
                )
                .expect("bucket list is not empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (a test harness); then ours only renders.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

fn describe() {
    metrics::describe_counter!(
        "harrier_http_requests_total",
        "HTTP requests served, by route template, method and status"
    );
    metrics::describe_histogram!(
        "harrier_http_request_duration_seconds",
        metrics::Unit::Seconds,
        "HTTP request latency, by route template, method and status"
    );
    metrics::describe_counter!("harrier_runs_imported_total", "Load-test runs imported");
    metrics::describe_counter!(
        "harrier_samples_imported_total",
        "Samples imported (all runs)"
    );
    metrics::describe_counter!(
        "harrier_rejected_rows_total",
        "Rows rejected by imports (damaged input)"
    );
    metrics::describe_gauge!(
        "harrier_websocket_clients",
        "Connected live (websocket) clients"
    );
    metrics::describe_counter!(
        "harrier_live_lagged_total",
        "Live events a slow client missed (answered by a resync)"
    );
    metrics::describe_counter!(
        "harrier_replica_wakes_total",
        "Live updates announced to (sent) and from (received) other replicas, and times some were lost (connection lost or queue full: clients resynced)"
    );
    metrics::describe_counter!(
        "harrier_alert_evaluations_total",
        "Alert evaluation rounds completed"
    );
    metrics::describe_gauge!(
        "harrier_alert_evaluation_last_duration_seconds",
        metrics::Unit::Seconds,
        "Duration of the last alert evaluation round"
    );
    metrics::describe_counter!(
        "harrier_alert_window_reads_total",
        "Rounds whose route windows came from memory or from SQLite (from)"
    );
    metrics::describe_gauge!(
        "harrier_alert_recent_intervals",
        "Route intervals held in memory for alert evaluation"
    );
    metrics::describe_gauge!(
        "harrier_alert_recent_bytes",
        metrics::Unit::Bytes,
        "Approximate memory of the route intervals held for alert evaluation"
    );
}

/// Runs the recorder's upkeep (histogram rollover) every few seconds until cancelled.
pub async fn upkeep(handle: PrometheusHandle, shutdown: tokio_util::sync::CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => handle.run_upkeep(),
        }
    }
}

/// Middleware: counts and times each request by its matched path template.
pub async fn track_http(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let path = match req.extensions().get::<MatchedPath>() {
        Some(p) => p.as_str().to_owned(),
        None => "unmatched".to_owned(),
    };
    let method = req.method().to_string();
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    let labels = [("method", method), ("path", path), ("status", status)];
    metrics::counter!("harrier_http_requests_total", &labels).increment(1);
    metrics::histogram!("harrier_http_request_duration_seconds", &labels)
        .record(start.elapsed().as_secs_f64());
    response
}
