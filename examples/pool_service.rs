//! A service of known capacity, to point `harrier load find` or a load tool at: a fixed
//! pool of workers and a service time (exact, or uniform in a range), so its capacity is
//! C = workers / mean service time (20 workers of 50 ms, or of 40–60 ms: 400 req/s; 30
//! workers of 10 ms: 3,000 req/s), and a chosen behaviour past C:
//!
//! ```text
//! cargo run --example pool_service -- --listen 127.0.0.1:9102 --workers 20 --service-ms 50 --queue 100
//! cargo run --example pool_service -- --workers 20 --service-ms 40-60 --queue 20 --overload refuse --backlog 8
//! harrier load find http://127.0.0.1:9102/work
//! ```
//!
//! `--overload 503` (the default): at most `--queue` requests wait, one more gets a 503 at
//! once. `--overload queue`: no bound, requests wait until served or their client gives
//! up. `--overload refuse`: at most workers + queue connections are open at once (kept
//! alive), the rest wait in a listen backlog of `--backlog` or are dropped there by the
//! kernel.
//!
//! Time is kept exactly (each worker's next free instant, not a timer per worker), so the
//! capacity stays C on a busy machine. Prints, each second with traffic, the requests
//! served and refused (with `refuse`: the kernel's listen-queue overflows, machine-wide)
//! and its measured capacity: the mean served per second over the seconds it was
//! saturated. Listens on loopback or a private address only (it is a test target).

#[path = "lab/mod.rs"]
mod lab;

use std::net::SocketAddr;
use std::time::Duration;

use lab::{Lab, LabConfig, Overload};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `50` or `40-60` (ms) → (min, max).
fn service_range(s: &str) -> Option<(Duration, Duration)> {
    let ms = |v: &str| v.trim().parse::<f64>().ok().filter(|m| *m > 0.0);
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (ms(a)?, ms(b)?),
        None => (ms(s)?, ms(s)?),
    };
    (lo <= hi).then(|| {
        (
            Duration::from_secs_f64(lo / 1000.0),
            Duration::from_secs_f64(hi / 1000.0),
        )
    })
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let listen: SocketAddr = arg(&args, "--listen", "127.0.0.1:9102".parse().unwrap());
    let service: String = arg(&args, "--service-ms", "50".to_string());
    let Some((service_min, service_max)) = service_range(&service) else {
        eprintln!("pool_service: --service-ms takes MS or MIN-MAX, not {service}");
        std::process::exit(2);
    };
    let overload: String = arg(&args, "--overload", "503".to_string());
    let Some(overload) = Overload::parse(&overload) else {
        eprintln!("pool_service: --overload takes 503, queue or refuse, not {overload}");
        std::process::exit(2);
    };
    let config = LabConfig {
        workers: arg(&args, "--workers", 20usize).max(1),
        service_min,
        service_max,
        queue: arg(&args, "--queue", 100usize),
        overload,
        backlog: arg(&args, "--backlog", 8u32),
    };
    let lab = Lab::new(config.clone());
    let bound = match lab::start(lab.clone(), listen).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("pool_service: cannot listen on {listen}: {e}");
            std::process::exit(1);
        }
    };
    let limit = match overload {
        Overload::Reject503 => format!("queue {}, then 503", config.queue),
        Overload::Queue => "queue unbounded".to_string(),
        Overload::Refuse => format!(
            "{} connections, backlog {}, then refused",
            config.workers + config.queue,
            config.backlog
        ),
    };
    println!(
        "pool_service on http://{bound}/work: {} workers × {service} ms, {limit}: capacity {:.1} req/s",
        config.workers,
        config.capacity_rps()
    );
    let mut overflows = lab::listen_overflows();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        let s = lab.tick();
        let refused = if overload == Overload::Refuse {
            let now = lab::listen_overflows();
            let d = match (overflows, now) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => 0,
            };
            overflows = now;
            d
        } else {
            s.refused
        };
        if s.served + refused == 0 {
            continue;
        }
        let measured = s.measured_rps.map_or("not yet saturated".to_string(), |c| {
            format!("measured capacity {c:.1} req/s")
        });
        println!(
            "served {:>6}/s  refused {:>6}/s  {}  {measured}",
            s.served,
            refused,
            if s.saturated {
                "saturated"
            } else {
                "         "
            },
        );
    }
    let s = lab.tick();
    println!(
        "pool_service: measured capacity {}",
        s.measured_rps
            .map_or("— (never saturated)".to_string(), |c| format!(
                "{c:.1} req/s"
            ))
    );
}
