//! A service of known capacity, to point `harrier load find` at: a fixed pool of workers,
//! a fixed service time and a bounded queue that answers 503 when full. Its capacity is
//! C = workers / service time (20 workers of 50 ms: 400 req/s).
//!
//! ```text
//! cargo run --example pool_service -- --listen 127.0.0.1:9102 --workers 20 --service-ms 50 --queue 100
//! harrier load find http://127.0.0.1:9102/work
//! ```
//!
//! Time is kept exactly: each worker's next free instant, not a timer per worker, so a
//! timer that fires late delays that response but never the next request's start, and the
//! capacity stays C on a busy machine. Prints the requests served and refused each second.
//! Listens on loopback or a private address only (it is a test target).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::time::Instant;

struct Pool {
    state: Mutex<PoolState>,
    service: Duration,
    queue: usize,
    served: AtomicU64,
    refused: AtomicU64,
}

struct PoolState {
    /// When each worker is next free.
    free_at: BinaryHeap<Reverse<Instant>>,
    /// Start times of the requests waiting (ascending).
    starts: VecDeque<Instant>,
}

async fn work(State(p): State<Arc<Pool>>) -> Response {
    let now = Instant::now();
    let done = {
        let Ok(mut st) = p.state.lock() else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        while st.starts.front().is_some_and(|s| *s <= now) {
            st.starts.pop_front();
        }
        if st.starts.len() >= p.queue {
            None
        } else {
            let free = st.free_at.pop().map_or(now, |Reverse(f)| f);
            let start = free.max(now);
            let done = start + p.service;
            st.free_at.push(Reverse(done));
            if start > now {
                st.starts.push_back(start);
            }
            Some(done)
        }
    };
    match done {
        None => {
            p.refused.fetch_add(1, Ordering::Relaxed);
            (StatusCode::SERVICE_UNAVAILABLE, "queue full").into_response()
        }
        Some(done) => {
            tokio::time::sleep_until(done).await;
            p.served.fetch_add(1, Ordering::Relaxed);
            "ok: served".into_response()
        }
    }
}

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let listen: SocketAddr = arg(&args, "--listen", "127.0.0.1:9102".parse().unwrap());
    let workers: usize = arg(&args, "--workers", 20usize).max(1);
    let service_ms: f64 = arg(&args, "--service-ms", 50.0f64).max(0.001);
    let queue: usize = arg(&args, "--queue", 100usize);
    let ip = listen.ip();
    let local = ip.is_loopback()
        || match ip {
            std::net::IpAddr::V4(v4) => v4.is_private(),
            std::net::IpAddr::V6(_) => false,
        };
    if !local {
        eprintln!("pool_service: listen on loopback or a private address, not {ip}");
        std::process::exit(2);
    }
    let now = Instant::now();
    let pool = Arc::new(Pool {
        state: Mutex::new(PoolState {
            free_at: (0..workers).map(|_| Reverse(now)).collect(),
            starts: VecDeque::new(),
        }),
        service: Duration::from_secs_f64(service_ms / 1000.0),
        queue,
        served: AtomicU64::new(0),
        refused: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/work", get(work))
        .with_state(pool.clone());
    let listener = match tokio::net::TcpListener::bind(listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("pool_service: cannot listen on {listen}: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "pool_service on http://{listen}/work: {workers} workers × {service_ms} ms, queue {queue}: capacity {:.1} req/s",
        workers as f64 * 1000.0 / service_ms
    );
    let p = pool.clone();
    tokio::spawn(async move {
        let (mut last_served, mut last_refused) = (0, 0);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let (s, r) = (
                p.served.load(Ordering::Relaxed),
                p.refused.load(Ordering::Relaxed),
            );
            if s != last_served || r != last_refused {
                println!(
                    "served {:>6}/s  refused {:>6}/s",
                    s - last_served,
                    r - last_refused
                );
            }
            (last_served, last_refused) = (s, r);
        }
    });
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("pool_service: {e}");
    }
}
