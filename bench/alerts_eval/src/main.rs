//! Times alert evaluation rounds (`alerts::evaluator::evaluate_once`) over `--routes`
//! route subjects (default 10,000) in a real SQLite file or a PostgreSQL database.
//!
//! `alerts_eval DB [--routes 10000] [--ticks 30] [--scrapes 40] [--p95]`
//!
//! DB is a SQLite file path, `sqlite:PATH` or `postgres://user@host:port/database` (an
//! existing database; `Store::connect` creates the tables).
//!
//! Fills DB (when it has no routes yet) with `--scrapes` scrapes 15 s apart of one target
//! exposing `--routes` routes, through the store's own write path
//! (`Store::record_scrape`), the last one ending now; 1 route in 50 fails 20 % of its
//! exchanges, the rest 0–1 %. Then stores the built-in rules plus three more (throughput
//! under 1/s, a service rule on errors/s, and a route-glob rule with hysteresis; with
//! `--p95` a fourth, p95 over 5 s on every route, which merges every interval's histogram) and runs `--ticks` rounds 15 s of evaluation time apart (starting at
//! the last scrape, as `harrier serve` would; a new scrape is written before each round,
//! untimed), each timed with a monotonic clock and by the process's CPU time.
//! Prints one `TICK_MS <ms>` line per round (the first, which creates the alerts and
//! loads the recent intervals into memory, included), then `MEDIAN_MS`, `P95_MS`
//! (nearest rank), `FIRST_TICK_MS`, the median time of the scrape writes between rounds,
//! the process's resident memory (now and peak), `RULES`, `SUBJECTS`, `ACTIVE_ALERTS`.

use std::time::Instant;

use harrier::services::alerts::evaluator::{evaluate_once, seed};
use harrier::domain::alerts::rule::Rule;
use harrier::domain::alerts::AlertsConfig;
use harrier::services::live::Hub;
use harrier::domain::routes::Interval;
use harrier::store::{DatabaseUrl, RouteWrite, ScrapeStatus, Store, TargetSpec};

const LE: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, f64::INFINITY];

fn extra_rules(p95: bool) -> Vec<Rule> {
    let mut rules = serde_json::json!([
        {"name": "RouteIdle", "subject": {"route": "*"}, "measure": "throughput_per_s",
         "comparison": "<", "threshold": 1, "window": "5m", "for": "5m"},
        {"name": "OrdersErrorsPerSecond", "subject": {"service": "orders"},
         "measure": "errors_per_s", "comparison": ">", "threshold": 5, "window": "1m"},
        {"name": "ApiErrorsHysteresis", "subject": {"route": "route-1*"},
         "measure": "error_pct", "comparison": ">", "threshold": 10,
         "recovery_threshold": 5, "window": "2m", "for": "30s", "severity": "critical"}
    ]);
    if p95 {
        rules.as_array_mut().unwrap().push(serde_json::json!(
            {"name": "RouteSlow", "subject": {"route": "*"}, "measure": "p95_ms",
             "comparison": ">", "threshold": 5000, "window": "5m", "for": "2m"}));
    }
    serde_json::from_value(rules).expect("valid rules")
}

/// This process's user + system CPU time so far, ms (`/proc/self/stat`, clock ticks of
/// 10 ms).
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // fields 14 and 15 (utime, stime) are 12 and 13 after the command name
    (ticks(11) + ticks(12)) * 10.0
}

/// One scrape of `routes` routes at `at` through `Store::record_scrape`.
async fn write_scrape(store: &Store, target: i64, routes: usize, at: i64, with_interval: bool) {
    let step = 15_000;
    let mut seed_r = 0x2545f4914f6cdd1du64 ^ (at as u64);
    let mut rnd = move || {
        seed_r ^= seed_r << 13;
        seed_r ^= seed_r >> 7;
        seed_r ^= seed_r << 17;
        (seed_r >> 11) as f64 / (1u64 << 53) as f64
    };
    let writes: Vec<RouteWrite> = (0..routes)
        .map(|r| {
            let ex = (20.0 + 100.0 * rnd()).round();
            let fail = if r % 50 == 0 { 0.2 } else { 0.01 * rnd() };
            let mut cum = 0.0;
            let buckets = LE
                .iter()
                .enumerate()
                .map(|(k, le)| {
                    cum = if k == LE.len() - 1 { ex } else { (cum + ex * 0.18 * rnd()).min(ex) };
                    (*le, cum)
                })
                .collect();
            RouteWrite {
                labels: Default::default(),
                service: "orders".into(),
                route: format!("route-{r}"),
                source: "camel".into(),
                state: None,
                last_exchange_ms: None,
                instance: String::new(),
                interval: with_interval.then(|| Interval {
                    interval_ms: step,
                    exchanges: Some(ex),
                    failed: Some((ex * fail).round()),
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
    let status = ScrapeStatus {
        at_ms: at,
        up: true,
        duration_ms: 3.0,
        samples: 18 * routes as i64,
        error: None,
    };
    store.record_scrape(target, &status, &writes).await.expect("record_scrape");
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let db_arg = args.next().expect("usage: alerts_eval DB [--routes N] [--ticks N]");
    let db = if db_arg.starts_with("sqlite:") || db_arg.contains("://") {
        DatabaseUrl::parse(&db_arg).expect("database URL")
    } else {
        DatabaseUrl::Sqlite(db_arg.clone().into())
    };
    let (mut routes, mut ticks, mut scrapes, mut p95) = (10_000usize, 30usize, 40i64, false);
    while let Some(a) = args.next() {
        if a == "--p95" {
            p95 = true;
            continue;
        }
        let v = args.next().expect("value");
        match a.as_str() {
            "--routes" => routes = v.parse().unwrap(),
            "--ticks" => ticks = v.parse().unwrap(),
            "--scrapes" => scrapes = v.parse().unwrap(),
            _ => panic!("unknown {a}"),
        }
    }
    let store = Store::connect(&db).await.expect("open db");
    let now = harrier::now_ms();
    let step = 15_000;
    let existing = store.route_infos(None, None).await.expect("routes").len();
    let mut target_id = 1;
    let last = if existing == 0 {
        let spec = TargetSpec {
            name: "bench-orders".into(),
            url: "http://127.0.0.1:9/metrics".into(),
            kind: "prometheus".into(),
            interval_s: 15.0,
            timeout_s: 3.0,
            labels: [("service".to_string(), "orders".to_string())].into(),
        };
        let target = store.upsert_target(&spec, "api", now).await.expect("target");
        target_id = target.id;
        let t0 = Instant::now();
        let start = now - (scrapes - 1) * step;
        for i in 0..scrapes {
            write_scrape(&store, target.id, routes, start + i * step, i > 0).await;
        }
        eprintln!("filled {routes} routes × {scrapes} scrapes in {:.1} s", t0.elapsed().as_secs_f64());
        now
    } else {
        eprintln!("{existing} routes already in {}; evaluating at the fill time", db.shown());
        store
            .route_infos(None, None)
            .await
            .expect("routes")
            .iter()
            .filter_map(|r| r.target_last_scrape_ms)
            .max()
            .unwrap_or(now)
    };
    let config = AlertsConfig {
        rules: extra_rules(p95),
        ..AlertsConfig::default()
    };
    seed(&store, &config).await.expect("seed rules");
    let rules = store.list_alert_rules().await.expect("rules").len();
    let hub = Hub::new();
    let mut times = Vec::with_capacity(ticks);
    let mut subjects = 0;
    let mut cpu_times = Vec::with_capacity(ticks);
    let mut write_times: Vec<f64> = Vec::with_capacity(ticks);
    for k in 0..ticks {
        // A new scrape lands between rounds, as under `harrier serve` (not timed).
        let at = last + k as i64 * step;
        if k > 0 {
            let w = Instant::now();
            write_scrape(&store, target_id, routes, at, true).await;
            write_times.push(w.elapsed().as_secs_f64() * 1000.0);
        }
        let cpu = cpu_ms();
        let t = Instant::now();
        let round = evaluate_once(&store, &hub, at + 1_000).await.expect("evaluate");
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        let cpu = cpu_ms() - cpu;
        println!(
            "TICK_MS {ms:.2} cpu_ms={cpu:.0} transitions={}",
            round.transitions.len()
        );
        times.push(ms);
        cpu_times.push(cpu);
        subjects = round.rules;
    }
    cpu_times.sort_by(f64::total_cmp);
    println!(
        "CPU_MEDIAN_MS {:.0} (process user+system time, 10 ms resolution)",
        cpu_times[cpu_times.len() / 2]
    );
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let rank = |p: f64| sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    println!("MEDIAN_MS {:.2}", rank(0.5));
    println!("P95_MS {:.2}", rank(0.95));
    println!("FIRST_TICK_MS {:.2} (includes loading the recent intervals into memory)", times[0]);
    if !write_times.is_empty() {
        write_times.sort_by(f64::total_cmp);
        println!(
            "SCRAPE_WRITE_MEDIAN_MS {:.2} (Store::record_scrape of {routes} routes, untimed in rounds)",
            write_times[write_times.len() / 2]
        );
    }
    if let Some((r, n, bytes)) = store.recent_intervals_held() {
        println!(
            "HELD {r} routes, {n} intervals, ~{:.1} MB in memory",
            bytes as f64 / 1e6
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for key in ["VmRSS", "VmHWM"] {
        if let Some(l) = status.lines().find(|l| l.starts_with(key)) {
            println!("{}", l.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    println!("RULES {rules} (rounds evaluated {subjects} rules)");
    println!("SUBJECTS {}", store.route_infos(None, None).await.expect("routes").len());
    println!("ACTIVE_ALERTS {}", store.list_alerts().await.expect("alerts").len());
}
