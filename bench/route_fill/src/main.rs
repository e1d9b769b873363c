//! Fills a harrier database with `--days` of 10 s scrapes of `--routes` Camel route(s),
//! through the store's own write path (`Store::record_scrape`, which also writes the 1 min and
//! 1 h rollups), then prunes with the default retention (`Store::prune_routes`) as a running
//! `harrier serve` would. Prints `ROUTE_ID <id>`, `SCRAPES <n>`, `SECONDS <s>`, `NOW_MS <ms>`.
//!
//! `route_fill DB [--days 30] [--routes 1] [--interval-s 10]`
//!
//! The target is stored with origin `api` and an unreachable URL (127.0.0.1:9), so a
//! `harrier serve` on this database keeps it (config sync only removes `config` targets) and
//! its scrapes of it fail harmlessly.

use std::path::PathBuf;
use std::time::Instant;

use harrier::domain::routes::Interval;
use harrier::store::{Retention, RouteWrite, ScrapeStatus, Store, TargetSpec};

const LE: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, f64::INFINITY];

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let db = PathBuf::from(args.next().expect("usage: route_fill DB [--days N] [--routes N]"));
    let (mut days, mut routes, mut every_s) = (30.0f64, 1usize, 10i64);
    while let Some(a) = args.next() {
        let v = args.next().expect("value");
        match a.as_str() {
            "--days" => days = v.parse().unwrap(),
            "--routes" => routes = v.parse().unwrap(),
            "--interval-s" => every_s = v.parse().unwrap(),
            _ => panic!("unknown {a}"),
        }
    }
    let store = Store::open(&db).await.expect("open db");
    let spec = TargetSpec {
        name: "bench-orders".into(),
        url: "http://127.0.0.1:9/metrics".into(),
        kind: "prometheus".into(),
        interval_s: every_s as f64,
        timeout_s: 3.0,
        labels: [("service".to_string(), "orders".to_string())].into(),
    };
    let now = harrier::now_ms();
    let target = store.upsert_target(&spec, "api", now).await.expect("target");
    let step = every_s * 1000;
    let n = (days * 86_400_000.0) as i64 / step;
    let start = now - n * step;
    let mut seed = 0x2545f4914f6cdd1du64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let t0 = Instant::now();
    let mut route_id = 0;
    for i in 0..=n {
        let at = start + i * step;
        // Daily load curve: 20–120 exchanges/s, ~0.5 % failed.
        let hour = ((at / 3_600_000) % 24) as f64;
        let load = 20.0 + 100.0 * (0.5 - 0.5 * (hour / 24.0 * std::f64::consts::TAU).cos());
        let writes: Vec<RouteWrite> = (0..routes)
            .map(|r| {
                let ex = (load * every_s as f64 * (0.8 + 0.4 * rnd())).round();
                let mut cum = 0.0;
                let buckets: Vec<(f64, f64)> = LE
                    .iter()
                    .enumerate()
                    .map(|(k, le)| {
                        cum = if k == LE.len() - 1 { ex } else { (cum + ex * 0.18 * rnd()).min(ex) };
                        (*le, cum)
                    })
                    .collect();
                RouteWrite {
                    labels: Default::default(),
                    instance: String::new(),
                    service: "orders".into(),
                    route: format!("route-{r}"),
                    source: "camel".into(),
                    state: None,
                    last_exchange_ms: None,
                    interval: (i > 0).then(|| Interval {
                        interval_ms: step,
                        exchanges: Some(ex),
                        failed: Some((ex * 0.005 * rnd() * 2.0).round()),
                        duration_sum_s: Some(ex * 0.04 * (0.5 + rnd())),
                        duration_count: Some(ex),
                        buckets,
                        max_s: Some(0.2 + 2.0 * rnd()),
                        inflight: Some((rnd() * 8.0).round()),
                        resets: 0,
                    }),
                }
            })
            .collect();
        let status = ScrapeStatus { at_ms: at, up: true, duration_ms: 3.0, samples: 18 * routes as i64, error: None };
        let ids = store.record_scrape(target.id, &status, &writes).await.expect("record_scrape");
        route_id = ids[0];
        if i % 50_000 == 0 {
            eprintln!("{i}/{n} scrapes, {:.0} s", t0.elapsed().as_secs_f64());
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let pruned = store.prune_routes(harrier::now_ms(), &Retention::default()).await.expect("prune");
    println!("ROUTE_ID {route_id}");
    println!("SCRAPES {}", n + 1);
    println!("SECONDS {secs:.1}");
    println!("PRUNED {pruned}");
    println!("NOW_MS {now}");
}
