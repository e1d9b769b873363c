//! A small service to watch with harrier: HTTP routes that behave differently, simulated
//! Camel routes, and a built-in load generator so the figures move by themselves.
//!
//! ```text
//! cargo run --example demo_service -- --listen 127.0.0.1:9101 [--rps 20] [--no-load]
//! harrier serve --config examples/demo.toml
//! ```
//!
//! Routes (metrics at `/metrics`, Prometheus text):
//! - `GET /api/orders`: fast (2–10 ms);
//! - `POST /api/checkout`: slow (150–700 ms);
//! - `GET /api/inventory`: fails intermittently (5 % 500s);
//! - `GET /api/payments`: 1 % errors, and for 45 s of every 3 min a spike to ~40 %.
//!
//! HTTP series: `demo_http_requests_total{method,path,status}` and the histogram
//! `demo_http_request_duration_seconds{method,path,status}` (harrier's HTTP preset). Camel
//! series (Camel Micrometer names, context `demo-camel`): routes `orders-to-kafka` (busy,
//! quick) and `invoice-batch` (slow, 2 % failures), with inflight gauges and a duration
//! histogram (harrier's Camel preset).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

const BUCKETS_S: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// xorshift64*: good enough to vary latencies and errors, no dependency.
static SEED: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);

fn random() -> f64 {
    let mut x = SEED.load(Ordering::Relaxed);
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    SEED.store(x, Ordering::Relaxed);
    (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
}

fn between(lo_ms: f64, hi_ms: f64) -> Duration {
    Duration::from_secs_f64((lo_ms + random() * (hi_ms - lo_ms)) / 1000.0)
}

/// Seconds since the Unix epoch, for the spike schedule.
fn epoch_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn orders() -> &'static str {
    tokio::time::sleep(between(2.0, 10.0)).await;
    "[]"
}

async fn checkout() -> &'static str {
    tokio::time::sleep(between(150.0, 700.0)).await;
    "{\"status\":\"accepted\"}"
}

async fn inventory() -> Response {
    tokio::time::sleep(between(5.0, 40.0)).await;
    if random() < 0.05 {
        (StatusCode::INTERNAL_SERVER_ERROR, "stock service timed out").into_response()
    } else {
        "{\"sku\":42,\"stock\":7}".into_response()
    }
}

async fn payments() -> Response {
    let spiking = epoch_s() % 180 < 45;
    tokio::time::sleep(between(20.0, if spiking { 400.0 } else { 80.0 })).await;
    let p_fail = if spiking { 0.4 } else { 0.01 };
    if random() < p_fail {
        (StatusCode::BAD_GATEWAY, "card processor unavailable").into_response()
    } else {
        "{\"paid\":true}".into_response()
    }
}

/// Counts and times each request by route template, method and status.
async fn track(req: Request, next: Next) -> Response {
    let start = Instant::now();
    let path = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched".to_string(), |p| p.as_str().to_string());
    let method = req.method().to_string();
    let response = next.run(req).await;
    let labels = [
        ("method", method),
        ("path", path),
        ("status", response.status().as_u16().to_string()),
    ];
    metrics::counter!("demo_http_requests_total", &labels).increment(1);
    metrics::histogram!("demo_http_request_duration_seconds", &labels)
        .record(start.elapsed().as_secs_f64());
    response
}

fn app(handle: PrometheusHandle) -> Router {
    Router::new()
        .route("/api/orders", get(orders))
        .route("/api/checkout", post(checkout))
        .route("/api/inventory", get(inventory))
        .route("/api/payments", get(payments))
        .route_layer(middleware::from_fn(track))
        .route("/metrics", get(move || async move { handle.render() }))
}

/// One simulated Camel exchange on `route`: inflight up, wait, count, time, inflight down.
async fn camel_exchange(route: &'static str, lo_ms: f64, hi_ms: f64, p_fail: f64) {
    let labels = [
        ("camelContext", "demo-camel"),
        ("routeId", route),
        ("eventType", "route"),
        ("kind", "CamelRoute"),
    ];
    let inflight = metrics::gauge!("camel_exchanges_inflight", &labels);
    inflight.increment(1.0);
    let took = between(lo_ms, hi_ms);
    tokio::time::sleep(took).await;
    metrics::counter!("camel_exchanges_total", &labels).increment(1);
    if random() < p_fail {
        metrics::counter!("camel_exchanges_failed_total", &labels).increment(1);
    } else {
        metrics::counter!("camel_exchanges_succeeded_total", &labels).increment(1);
    }
    metrics::histogram!("camel_route_policy_seconds", &labels).record(took.as_secs_f64());
    inflight.decrement(1.0);
}

/// Sends about `rps` requests per second across the routes, and drives the Camel routes.
async fn load(addr: SocketAddr, rps: f64) {
    let client = reqwest::Client::new();
    let base = format!("http://{addr}");
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rps.max(0.1)));
    loop {
        tick.tick().await;
        let r = random();
        let (method, path) = if r < 0.45 {
            ("GET", "/api/orders")
        } else if r < 0.6 {
            ("POST", "/api/checkout")
        } else if r < 0.8 {
            ("GET", "/api/inventory")
        } else {
            ("GET", "/api/payments")
        };
        let req = match method {
            "POST" => client.post(format!("{base}{path}")),
            _ => client.get(format!("{base}{path}")),
        };
        tokio::spawn(async move {
            let _ = req.send().await;
        });
        tokio::spawn(camel_exchange("orders-to-kafka", 1.0, 15.0, 0.0));
        if random() < 0.1 {
            tokio::spawn(camel_exchange("invoice-batch", 300.0, 2500.0, 0.02));
        }
    }
}

fn usage() -> ! {
    eprintln!("usage: demo_service [--listen 127.0.0.1:9101] [--rps 20] [--no-load]");
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut listen: SocketAddr = "127.0.0.1:9101".parse()?;
    let mut rps = 20.0;
    let mut with_load = true;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().unwrap_or_else(|| usage()).parse()?,
            "--rps" => rps = args.next().unwrap_or_else(|| usage()).parse()?,
            "--no-load" => with_load = false,
            _ => usage(),
        }
    }
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS_S)?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    println!("demo service: http://{addr}/metrics");
    // Camel exports its failure counters from the start; so does the simulation.
    for route in ["orders-to-kafka", "invoice-batch"] {
        let labels = [
            ("camelContext", "demo-camel"),
            ("routeId", route),
            ("eventType", "route"),
            ("kind", "CamelRoute"),
        ];
        metrics::counter!("camel_exchanges_failed_total", &labels).increment(0);
    }
    if with_load {
        tokio::spawn(load(addr, rps));
    }
    axum::serve(listener, app(handle)).await?;
    Ok(())
}
