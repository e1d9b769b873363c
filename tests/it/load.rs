//! `harrier load run` and `harrier load find` against a server the test starts on
//! 127.0.0.1: a fixed pool of workers with a known service time (capacity = workers /
//! service time), optionally one stall or a bounded queue; a SOAP service recording each
//! body (feeders and templates); an HTTP/2 (h2c) service with a low stream limit; TLS
//! services offering h2 and http/1.1 by ALPN, one requiring a client certificate, with
//! certificates made by `openssl` at test time. Every run is bounded (a few seconds, a few
//! hundred requests; the search at most 110 s).
//!
//! The machine running these tests is shared (2 cores, other builds; at a load average of 10
//! a sleeping thread waits tens of ms for a core, which the generator rightly reports as
//! dispatch delay): the dispatch-delay threshold is raised to 250 ms where a test asserts
//! that a run is *not* generator-limited, so the assertion is about the rule that matters
//! there (a slow service is not the generator's connections running out), not the machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use harrier::domain::load::search::{Phase, rate_text};
use harrier::domain::load::{
    AbortRule, ClosedModel, LoadSummary, RateProfile, Schedule, SearchPlan, Verdict, Workload,
};
use harrier::services::load::{
    FindEvent, FindRequest, LoadOutcome, LoadRequest, find_capacity, run_load,
};
use harrier::sources::load::{EngineSettings, RequestSpec};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::helpers::spawn_app;
use crate::skip::{Kind, skip};

/// The test service: `workers` requests at a time, each `service_ms` long; request number
/// `stall_at` (1-based), if any, stops the service for `stall_ms` from its arrival.
struct Service {
    workers: Arc<Semaphore>,
    service_ms: u64,
    stall_at: Option<u64>,
    stall_ms: u64,
    /// Requests seen.
    seen: AtomicU64,
    /// While the stall lasts: its end (ms since `t0`), else 0.
    stall_until_ms: AtomicU64,
    t0: tokio::time::Instant,
}

async fn handle(State(s): State<Arc<Service>>) -> &'static str {
    let n = s.seen.fetch_add(1, Ordering::SeqCst) + 1;
    let now_ms = s.t0.elapsed().as_millis() as u64;
    if s.stall_at == Some(n) {
        s.stall_until_ms
            .store(now_ms + s.stall_ms, Ordering::SeqCst);
    }
    let until = s.stall_until_ms.load(Ordering::SeqCst);
    if until > now_ms {
        tokio::time::sleep(Duration::from_millis(until - now_ms)).await;
    }
    let _permit = s.workers.acquire().await.expect("never closed");
    tokio::time::sleep(Duration::from_millis(s.service_ms)).await;
    "ok: served"
}

/// Starts the service on 127.0.0.1:0; returns its URL and state.
async fn service(
    workers: usize,
    service_ms: u64,
    stall: Option<(u64, u64)>,
) -> (String, Arc<Service>) {
    let state = Arc::new(Service {
        workers: Arc::new(Semaphore::new(workers)),
        service_ms,
        stall_at: stall.map(|s| s.0),
        stall_ms: stall.map_or(0, |s| s.1),
        seen: AtomicU64::new(0),
        stall_until_ms: AtomicU64::new(0),
        t0: tokio::time::Instant::now(),
    });
    let app = Router::new()
        .route("/work", get(handle))
        .route(
            "/close",
            get(|| async { ([(axum::http::header::CONNECTION, "close")], "served") }),
        )
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/work"), state)
}

fn request(
    url: &str,
    rate_per_s: f64,
    duration_s: f64,
    max_connections: u32,
    timeout_ms: u64,
) -> LoadRequest {
    let mut spec = RequestSpec::new(
        url,
        "GET",
        &[],
        Vec::new(),
        Duration::from_millis(timeout_ms),
    )
    .unwrap();
    spec.expect_body = Some(b"served".to_vec());
    LoadRequest {
        spec,
        settings: EngineSettings {
            workload: Workload::Open(Schedule {
                profile: RateProfile::Constant { rate_per_s },
                duration_s,
                poisson: false,
                seed: 1,
            }),
            max_connections,
            threads: 1,
            control: None,
        },
        allow_public_target: false,
        dispatch_limit_us: Some(250_000),
        name: None,
        scenario: Some("load-test".into()),
        tags: vec![("build".into(), "1".into())],
        abort_on: None,
        tap: None,
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

async fn run(req: LoadRequest) -> LoadOutcome {
    let mut lines = 0;
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        run_load(None, req, CancellationToken::new(), |_| lines += 1),
    )
    .await
    .expect("the run ends by itself")
    .expect("the run starts");
    assert!(lines >= 2, "a line per second");
    out
}

fn show(s: &LoadSummary) -> String {
    s.render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_capacity_the_offered_rate_is_achieved_and_latency_is_the_service_time() {
    // Capacity 8 / 10 ms = 800 req/s; offered 100 req/s for 2 s.
    let (url, svc) = service(8, 10, None).await;
    let app = spawn_app().await;
    let mut seconds = Vec::new();
    let out = run_load(
        Some(&app.state.store),
        request(&url, 100.0, 2.0, 64, 2000),
        CancellationToken::new(),
        |line| seconds.push(line.clone()),
    )
    .await
    .unwrap();
    let s = &out.summary;
    assert_eq!(
        (s.scheduled, s.completed, s.errors.total()),
        (200, 200, 0),
        "{}",
        show(s)
    );
    assert_eq!(
        svc.seen.load(Ordering::SeqCst),
        200,
        "every request reached the service once"
    );
    // Achieved = JMeter's throughput over the run's own window (≈ 2 s): within 5 %.
    let achieved = s.exact.throughput_rps.unwrap();
    assert!(
        (95.0..=105.0).contains(&achieved),
        "{achieved} req/s\n{}",
        show(s)
    );
    assert!(
        seconds[0].offered >= 99 && seconds[0].offered <= 101,
        "{:?}",
        seconds[0].offered
    );
    // Latency ≈ the 10 ms service time (the exact stored p50, whole ms).
    let p50 = s.exact.p50_ms.unwrap();
    assert!((10.0..=25.0).contains(&p50), "p50 {p50} ms\n{}", show(s));
    let service_p50 = ms(s.service.unwrap().p50_us);
    assert!((10.0..=25.0).contains(&service_p50), "{}", show(s));
    assert!(s.generator_limited.is_empty(), "{}", show(s));
    assert_eq!(s.waited_for_connection, 0);

    // Stored like an imported run: tool harrier, exact figures, buckets by start second.
    let run = out.run.expect("stored");
    let detail = app.state.store.get_run(run.id).await.unwrap().unwrap();
    assert_eq!(detail.tool, "harrier");
    assert_eq!(detail.overall.count, 200);
    assert_eq!(detail.overall.p50_ms, s.exact.p50_ms);
    let buckets = app
        .state
        .store
        .run_buckets(run.id, None)
        .await
        .unwrap()
        .unwrap();
    // 2 s of intended starts span 2 or 3 clock seconds.
    assert_eq!(buckets.iter().map(|b| b.count).sum::<i64>(), 200);
    assert!((2..=3).contains(&buckets.len()), "{}", buckets.len());
    let page = app.get(&format!("/console/runs/{}", run.id)).await;
    assert_eq!(page.status, 200);
    let text = page.text();
    assert!(
        text.contains("Reported by harrier"),
        "the generator's own figures are shown"
    );
    assert!(text.contains("kept its schedule"));
    assert!(text.contains("service time ms"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_shows_in_the_corrected_latency_that_closed_loop_timing_hides() {
    // 100 req/s for 3 s against a 5 ms service that stops for 1 s at request 100 (t ≈ 1 s).
    // Analytic: a share S/T = 1/3 of the requests is delayed uniformly over 0…1 s, so the
    // corrected p90 ≈ 0.7 s and p99 ≈ 0.97 s (+ the 5 ms service time).
    let (url, _svc) = service(64, 5, Some((100, 1000))).await;
    let open = run(request(&url, 100.0, 3.0, 512, 5000)).await.summary;
    let p90 = open.exact.p90_ms.unwrap();
    let p99 = open.exact.p99_ms.unwrap();
    assert!(
        (630.0..=770.0).contains(&p90),
        "p90 {p90} ms\n{}",
        show(&open)
    );
    assert!(
        (920.0..=1060.0).contains(&p99),
        "p99 {p99} ms\n{}",
        show(&open)
    );
    assert!(open.exact.p50_ms.unwrap() < 50.0, "{}", show(&open));
    // Sent on time (open model): the requests waited at the service, so the service time
    // shows the stall too, and the generator kept its schedule.
    assert!(ms(open.service.unwrap().p99_us) > 900.0, "{}", show(&open));
    assert!(open.generator_limited.is_empty(), "{}", show(&open));

    // The same stall with one connection, as a closed-loop tool with one user meets it: the
    // requests due during the stall wait for the connection, and their service time, which
    // is all such a tool reports, stays at a few ms: its p99 hides the stall. The corrected
    // latency still shows it, and the run says the generator could not offer the rate.
    let (url, _svc) = service(64, 5, Some((100, 1000))).await;
    let closed = run(request(&url, 100.0, 3.0, 1, 5000)).await.summary;
    let service_p99 = ms(closed.service.unwrap().p99_us);
    assert!(
        service_p99 < 100.0,
        "service p99 {service_p99} ms\n{}",
        show(&closed)
    );
    assert!(closed.exact.p99_ms.unwrap() > 900.0, "{}", show(&closed));
    assert!(closed.waited_for_connection > 50, "{}", show(&closed));
    assert!(
        closed
            .generator_limited
            .iter()
            .any(|r| r.starts_with("connections exhausted")),
        "{}",
        show(&closed)
    );
    assert!(closed.render().contains("GENERATOR-LIMITED"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_capacity_latency_queues_and_timeouts_are_errors_not_generator_limits() {
    // Capacity 2 / 20 ms = 100 req/s; offered 200 req/s for 2 s; timeout 400 ms.
    let (url, _svc) = service(2, 20, None).await;
    let out = run(request(&url, 200.0, 2.0, 512, 400)).await;
    let s = &out.summary;
    assert_eq!(s.scheduled, 400, "{}", show(s));
    assert_eq!(
        s.completed, 400,
        "every request ends: a response or a timeout"
    );
    // The queue at the service grows: half the requests wait far beyond the 20 ms.
    assert!(s.exact.p50_ms.unwrap() > 100.0, "{}", show(s));
    assert!(s.errors.timeout > 50, "{}", show(s));
    assert_eq!(s.errors.total(), s.errors.timeout, "{}", show(s));
    // Timed-out requests end at the timeout (from their send), not later.
    assert!(s.exact.max_ms.unwrap() < 400.0 + 150.0, "{}", show(s));
    // Connections were there and requests left on time: the service is the limit.
    assert_eq!(s.waited_for_connection, 0, "{}", show(s));
    assert!(s.generator_limited.is_empty(), "{}", show(s));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_closed_model_is_paced_by_responses_and_says_so() {
    // 4 users, 20 ms service, 30 ms think: each user sends about every 50 ms, ~80 req/s
    // over 1.5 s, far below what the service could take.
    let (url, _svc) = service(64, 20, None).await;
    let mut req = request(&url, 1.0, 1.5, 512, 2000);
    req.settings.workload = Workload::Closed(ClosedModel {
        users: 4,
        think_s: 0.03,
        duration_s: 1.5,
    });
    let s = run(req).await.summary;
    assert!(!s.open);
    // Each user's cycle is at least 50 ms: at most 30 starts in 1.5 s, 120 in all.
    assert!((60..=120).contains(&s.completed), "{}", show(&s));
    assert_eq!(s.connections_opened, 4, "{}", show(&s));
    // Timed from the send: no dispatch delay, latency = service time.
    assert!(s.dispatch.unwrap().max_us < 1000, "{}", show(&s));
    assert!(s.render().contains("closed model"), "{}", show(&s));
    assert!(s.reported()["offered req/s"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_prints_each_second_and_stores_the_run() {
    let (url, svc) = service(8, 2, None).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let harrier = env!("CARGO_BIN_EXE_harrier");
    let run = |args: Vec<String>| {
        let dir = dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(harrier)
                .args(&args)
                .current_dir(dir)
                .env_remove("HARRIER_DB")
                .env_remove("HARRIER_CONFIG")
                .output()
                .unwrap()
        })
    };
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["load", "run", url.as_str(), "--db", db.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let out = run(args(&[
        "--rate",
        "50",
        "--duration",
        "2s",
        "--expect-body-contains",
        "served",
        "--dispatch-limit",
        "250ms",
        "--scenario",
        "cli-load",
    ]))
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("   1 s  offered     50/s"), "{stdout}");
    assert!(
        stdout.contains("100 scheduled, 100 sent, 100 completed; errors 0"),
        "{stdout}"
    );
    assert!(stdout.contains("kept its schedule"), "{stdout}");
    assert!(stdout.contains("stored       run 1"), "{stdout}");
    assert_eq!(svc.seen.load(Ordering::SeqCst), 100);
    let listed = run(vec![
        "runs".into(),
        "--db".into(),
        db.to_str().unwrap().into(),
    ])
    .await
    .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed
            .lines()
            .any(|l| l.contains("harrier") && l.contains(" 100 ")),
        "{listed}"
    );

    // Mistakes are usage errors (exit 2) and send nothing.
    let out = run(args(&["--rate", "fast"])).await.unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = run(vec![
        "load".into(),
        "run".into(),
        "http://192.0.2.1/".into(),
        "--rate".into(),
        "1".into(),
        "--no-store".into(),
    ])
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-public-target"));
    assert_eq!(svc.seen.load(Ordering::SeqCst), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_the_server_closes_are_reopened_without_errors() {
    // Every response says `Connection: close` (as nginx does after keepalive_requests).
    let (url, _svc) = service(8, 1, None).await;
    let url = url.replace("/work", "/close");
    let s = run(request(&url, 50.0, 2.0, 4, 2000)).await.summary;
    assert_eq!((s.completed, s.errors.total()), (100, 0), "{}", show(&s));
    // One TCP connection per request, each counted (not one per connection task).
    assert_eq!(s.connections_opened, 100, "{}", show(&s));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_classified_connect_status_and_body() {
    // Nothing listens on a port just released: every request is a connect error.
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{closed_port}/work");
    let s = run(request(&url, 20.0, 1.5, 8, 1000)).await.summary;
    assert_eq!(s.completed, 30, "{}", show(&s));
    assert_eq!(s.errors.connect, 30, "{}", show(&s));
    assert_eq!(s.exact.error_pct, Some(100.0));
    assert_eq!(
        s.connections_opened,
        0,
        "nothing was ever open: {}",
        show(&s)
    );

    let (url, _svc) = service(8, 1, None).await;
    let mut req = request(&url, 20.0, 1.5, 8, 1000);
    req.spec.expect_status = vec![(201, 201)];
    let s = run(req).await.summary;
    assert_eq!(
        (s.errors.status, s.errors.total()),
        (30, 30),
        "{}",
        show(&s)
    );

    let mut req = request(&url, 20.0, 1.5, 8, 1000);
    req.spec.expect_body = Some(b"not in the body".to_vec());
    let out = run(req).await;
    let s = &out.summary;
    assert_eq!((s.errors.body, s.errors.total()), (30, 30), "{}", show(s));
    assert!(
        s.render().contains("errors 30 (100.00 %: body 30)"),
        "{}",
        show(s)
    );
}

/// A service of `workers` workers, each request `service` long, with at most `queue`
/// requests waiting: a request that finds the queue full is answered 503 at once.
/// Capacity C = workers / service. The lab (`examples/lab`) with its time kept exactly, so
/// the capacity is C on a busy machine too.
pub(crate) async fn pool_service(
    workers: usize,
    service: Duration,
    queue: usize,
) -> (String, Arc<crate::lab::Lab>) {
    let lab = crate::lab::Lab::new(crate::lab::LabConfig::fixed(workers, service, queue));
    let addr = crate::lab::start(lab.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (format!("http://{addr}/work"), lab)
}

fn find_request(url: &str, start_rate: f64) -> FindRequest {
    let mut load = request(url, 1.0, 1.0, 512, 2000);
    load.name = Some("find-400".into());
    FindRequest {
        load,
        plan: SearchPlan {
            slo: None,
            tolerance: 0.05,
            start_rate,
            max_rate: 20_000.0,
            step_s: 4,
            confirm_s: 6,
            fail_after_s: 2,
            // The machine is shared (see the module docs).
            dispatch_limit_us: Some(250_000),
        },
        max_duration_s: 110.0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_reports_the_capacity_of_a_worker_pool_within_ten_percent() {
    // 20 workers of 50 ms: C = 400 req/s; 100 may wait, the rest are refused with 503.
    // (A service time well above the tens of ms a busy shared machine adds to a response
    // keeps the probe's p95, the capacity rule's reference, about the service.)
    let (url, pool) = pool_service(20, Duration::from_millis(50), 100).await;
    let app = spawn_app().await;
    let started = std::time::Instant::now();
    let mut steps = Vec::new();
    let out = tokio::time::timeout(
        Duration::from_secs(150),
        find_capacity(
            Some(&app.state.store),
            find_request(&url, 150.0),
            CancellationToken::new(),
            |e| {
                if let FindEvent::Step(s) = e {
                    eprintln!("{}", s.render());
                    steps.push(s.clone());
                }
            },
        ),
    )
    .await
    .expect("the search ends by itself")
    .expect("the search starts");
    let s = &out.search;
    eprintln!("{} ({:.0} s)", s.statement, started.elapsed().as_secs_f64());
    let x = s.falls_over_rps.expect("it falls over");
    let y = s.sustains_rps.expect("a rate it sustains");
    assert!(
        (360.0..=440.0).contains(&x),
        "X {x} not within 10 % of 400\n{}",
        s.statement
    );
    assert!(y < x && (x - y) / y <= 0.05 + 1e-9, "{}", s.statement);
    assert!(s.confirmed && s.complete, "{}", s.statement);
    assert!(
        matches!(s.limited_by.as_deref(), Some("plateau" | "errors" | "p95")),
        "{:?}",
        s.limited_by
    );
    // Probe, doubling from 150, then bisection and the confirmation last.
    assert_eq!(steps[0].phase, Phase::Probe);
    assert_eq!(steps[1].offered_rps, 300.0);
    assert_eq!(steps.last().unwrap().phase, Phase::Confirm);
    assert_eq!(steps.len(), s.steps.len());
    // 20 workers busy at the knee (Little's law), plus what the timer's lateness and a busy
    // shared machine add to each response (31 measured under a parallel build).
    let n = s.in_flight_at_knee.unwrap();
    assert!((17..=36).contains(&n), "{n} in flight\n{}", s.statement);
    assert!(s.statement.starts_with(&format!(
        "falls over at {} (limited by {}); sustains {} with p99",
        rate_text(x),
        s.limited_by.as_deref().unwrap(),
        rate_text(y)
    )));
    // Every request the generator completed reached the service (served or refused).
    let seen = pool.served.load(Ordering::SeqCst) + pool.refused.load(Ordering::SeqCst);
    assert_eq!(seen, out.summary.completed - out.summary.errors.timeout);

    // Stored as one run: its JSON's capacity is the search, its page shows the steps.
    let run = out.run.expect("stored");
    let json = app.get(&format!("/api/v1/runs/{}", run.id)).await.json();
    assert_eq!(json["capacity"]["kind"], "search");
    assert_eq!(json["capacity"]["falls_over_rps"], x);
    assert_eq!(json["capacity"]["statement"], s.statement.as_str());
    assert_eq!(
        json["capacity"]["steps"].as_array().unwrap().len(),
        s.steps.len()
    );
    assert_eq!(
        json["overall"]["count"].as_u64(),
        Some(out.summary.completed)
    );
    let page = app.get(&format!("/console/runs/{}", run.id)).await;
    let html = page.html();
    let rows = crate::helpers::select_texts(&html, "#search-steps tbody tr");
    assert_eq!(rows.len(), s.steps.len());
    let answer = crate::helpers::select_texts(&html, "#search-answer");
    assert!(answer[0].starts_with("Falls over at"), "{answer:?}");
    assert!(page.text().contains(r#"data-chart="search""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_find_command_prints_steps_and_stops_at_max_duration_keeping_the_run() {
    let (url, _pool) = pool_service(4, Duration::from_millis(10), 20).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let harrier = env!("CARGO_BIN_EXE_harrier");
    let run = |args: Vec<String>| {
        let dir = dir.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(harrier)
                .args(&args)
                .current_dir(dir)
                .env_remove("HARRIER_DB")
                .env_remove("HARRIER_CONFIG")
                .output()
                .unwrap()
        })
    };
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["load", "find", url.as_str(), "--db", db.to_str().unwrap()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let out = run(args(&[
        "--start-rate",
        "50",
        "--step-duration",
        "2s",
        "--max-duration",
        "5s",
        "--dispatch-limit",
        "250ms",
        "--slo",
        "p99<200ms,errors<1%",
    ]))
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("judged by    SLO p99 < 200 ms, errors < 1 %"),
        "{stdout}"
    );
    assert!(stdout.contains("probe    50.0 req/s"), "{stdout}");
    assert!(stdout.contains("pass"), "{stdout}");
    assert!(
        stdout.contains("stopping     --max-duration 5 s reached"),
        "{stdout}"
    );
    assert!(
        stdout.contains("answer       did not fall over up to"),
        "{stdout}"
    );
    assert!(
        stdout.contains("search ended early: --max-duration 5 s reached"),
        "{stdout}"
    );
    assert!(stdout.contains("stored       run 1"), "{stdout}");

    // Mistakes are usage errors (exit 2).
    for bad in [
        &["--slo", "p99>200ms"][..],
        &["--tolerance", "0%"],
        &["--abort-on", "errors>50"],
        &["--start-rate", "0"],
    ] {
        let out = run(args(bad)).await.unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_on_stops_a_run_early_and_keeps_what_was_measured() {
    // Every response is a status error: errors>50% for 2s ends a 10 s run after ~2 s.
    let (url, _svc) = service(8, 1, None).await;
    let mut req = request(&url, 50.0, 10.0, 8, 1000);
    req.spec.expect_status = vec![(201, 201)];
    req.abort_on = Some(AbortRule::parse("errors>50% for 2s").unwrap());
    let started = std::time::Instant::now();
    let out = run(req).await;
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    let why = out.aborted.expect("aborted");
    assert!(
        why.starts_with("--abort-on \"errors>50% for 2s\" held for 2 s"),
        "{why}"
    );
    let s = &out.summary;
    assert!((90..=200).contains(&s.completed), "{}", show(s));
    assert_eq!(s.errors.status, s.completed);
    assert!(s.unsent > 0 || s.scheduled < 500, "{}", show(s));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_search_ends_cleanly_and_keeps_what_was_measured() {
    // Ctrl-C (the token) 3.5 s in: the probe (2 s) is judged, the step under way is kept as
    // stopped, and the run is stored with every request that completed.
    let (url, pool) = pool_service(20, Duration::from_millis(50), 100).await;
    let app = spawn_app().await;
    let mut req = find_request(&url, 50.0);
    req.plan.step_s = 2;
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(3500)).await;
        c.cancel();
    });
    let mut stopping = Vec::new();
    let started = std::time::Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        find_capacity(Some(&app.state.store), req, cancel, |e| {
            if let FindEvent::Stopping(why) = e {
                stopping.push(why.to_string());
            }
        }),
    )
    .await
    .expect("ends soon after the cancel")
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(stopping, ["stopped (Ctrl-C)"]);
    let s = &out.search;
    assert_eq!(s.ended_by.as_deref(), Some("stopped (Ctrl-C)"));
    assert!(
        s.statement
            .ends_with("search ended early: stopped (Ctrl-C)"),
        "{}",
        s.statement
    );
    assert_eq!(s.steps[0].verdict, Verdict::Pass, "{:?}", s.steps);
    assert!(!s.complete);
    let served = pool.served.load(Ordering::SeqCst);
    assert_eq!(out.summary.completed, served, "{}", show(&out.summary));
    let run = out.run.expect("stored");
    let json = app.get(&format!("/api/v1/runs/{}", run.id)).await.json();
    assert_eq!(json["overall"]["count"].as_u64(), Some(served));
    assert_eq!(json["capacity"]["ended_by"], "stopped (Ctrl-C)");
}

/// Runs the `harrier` binary with `args` (and `env`) in `dir`; at most 60 s.
async fn harrier_cli(
    dir: &std::path::Path,
    args: &[String],
    env: &[(&str, &std::path::Path)],
) -> std::process::Output {
    harrier_cli_within(dir, args, env, Duration::from_secs(60)).await
}

/// [`harrier_cli`], at most `limit`.
async fn harrier_cli_within(
    dir: &std::path::Path,
    args: &[String],
    env: &[(&str, &std::path::Path)],
    limit: Duration,
) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_harrier"));
    command
        .args(args)
        .current_dir(dir)
        .env_remove("HARRIER_DB")
        .env_remove("HARRIER_CONFIG");
    for (k, v) in env {
        command.env(k, v);
    }
    tokio::time::timeout(
        limit,
        tokio::task::spawn_blocking(move || command.output().unwrap()),
    )
    .await
    .expect("harrier ends by itself")
    .unwrap()
}

/// Another process keeping one core busy while this lives (a shell spinning in a loop);
/// killed, by its own id, when dropped.
struct BusyCore(std::process::Child);

impl BusyCore {
    fn start() -> BusyCore {
        BusyCore(
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("sh starts"),
        )
    }
}

impl Drop for BusyCore {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The rate after `what` ("falls over at", "sustains") in an answer line, req/s.
fn rate_after(answer: &str, what: &str) -> Option<f64> {
    let rest = &answer[answer.find(what)? + what.len()..];
    let number = rest.trim_start().split(' ').next()?;
    number.replace(',', "").parse().ok()
}

/// With its defaults, on a machine where another process keeps a core busy, `harrier load
/// find` answers the capacity of a pool of 20 workers of 50 ms (400 req/s) within 5 %: a
/// few ms of scheduling delay is nothing next to a 50 ms service, and each step's
/// connections are open before it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_with_defaults_answers_within_five_percent_while_a_core_is_busy() {
    let (url, pool) = pool_service(20, Duration::from_millis(50), 100).await;
    let _busy = BusyCore::start();
    let dir = tempfile::tempdir().unwrap();
    let out = harrier_cli_within(
        dir.path(),
        &strings(&["load", "find", &url, "--no-store"]),
        &[],
        Duration::from_secs(240),
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "{stdout}{stderr}");
    let answer = stdout
        .lines()
        .find(|l| l.starts_with("answer"))
        .unwrap_or_else(|| panic!("an answer: {stdout}"));
    let x = rate_after(answer, "falls over at").unwrap_or_else(|| panic!("{stdout}"));
    let y = rate_after(answer, "sustains").unwrap_or_else(|| panic!("{stdout}"));
    assert!((380.0..=420.0).contains(&x), "X {x}: {stdout}");
    assert!((380.0..=420.0).contains(&y), "Y {y}: {stdout}");
    assert!(answer.contains("(confirmed over 20 s)"), "{stdout}");
    assert!(pool.served.load(Ordering::SeqCst) > 0);
}

/// Nothing listens at the port, or something accepts and closes every connection: `load
/// find` says so instead of "falls over at 20 req/s" and exits 1; `load run` exits 1
/// saying every request failed before a response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_never_answers_is_named_and_the_commands_fail() {
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{closed_port}/work");
    let out = harrier_cli(
        dir.path(),
        &strings(&["load", "find", &url, "--no-store"]),
        &[],
    )
    .await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!(
            "nothing listens at 127.0.0.1:{closed_port} (connection refused): start the service there"
        )),
        "{stderr}"
    );
    assert!(!stdout.contains("falls over"), "{stdout}");
    assert!(
        stdout.contains("answer       no answer — search ended early: no request of the probe at 20.0 req/s got a response"),
        "{stdout}"
    );
    let out = harrier_cli(
        dir.path(),
        &strings(&[
            "load",
            "run",
            &url,
            "--rate",
            "20",
            "--duration",
            "1s",
            "--no-store",
        ]),
        &[],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("every request failed before a response: nothing listens at"),
        "{stderr}"
    );

    // Accepts, then closes every connection unread.
    let closing = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closing.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in closing.incoming() {
            drop(conn);
        }
    });
    let url = format!("http://127.0.0.1:{port}/work");
    let out = harrier_cli(
        dir.path(),
        &strings(&["load", "find", &url, "--no-store"]),
        &[],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "127.0.0.1:{port} accepted connections but closed or reset them before any response"
        )),
        "{stderr}"
    );
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// What the SOAP test service received: the path's customer, the X-Customer header and
/// the body of each request, in arrival order.
type Received = Arc<std::sync::Mutex<Vec<(String, String, String)>>>;

async fn soap(
    State(got): State<Received>,
    axum::extract::Path(customer): axum::extract::Path<String>,
    headers: axum::http::HeaderMap,
    body: String,
) -> &'static str {
    let header = headers
        .get("x-customer")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    got.lock().unwrap().push((customer, header, body));
    "<ok/>"
}

const ENVELOPE: &str = r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:acc="urn:example:accounts">
  <soapenv:Body>
    <acc:GetBalance>
      <acc:customer>{{customer}}</acc:customer>
      <acc:account>{{ account }}</acc:account>
      <acc:holder>{{holder}}</acc:holder>
    </acc:GetBalance>
  </soapenv:Body>
</soapenv:Envelope>
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_feeder_fills_every_soap_body_with_the_next_row_in_order_wrapping_around() {
    // 50 rows, 40 req/s for 3 s: 120 requests take rows 1–50, 1–50, 1–20.
    let received: Received = Arc::default();
    let app = Router::new()
        .route("/soap/{customer}", axum::routing::post(soap))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rows: Vec<[String; 3]> = (1..=50)
        .map(|i| {
            [
                format!("C-{i:04}"),
                format!("DE{:020}", i * 7919),
                format!("Holder {i}, Jr & Co"),
            ]
        })
        .collect();
    let mut csv = String::from("customer,account,holder\n");
    for r in &rows {
        csv.push_str(&format!("{},{},\"{}\"\n", r[0], r[1], r[2]));
    }
    std::fs::write(d.join("users.csv"), &csv).unwrap();
    std::fs::write(d.join("get-balance.xml"), ENVELOPE).unwrap();
    let url = format!("http://{addr}/soap/{{{{customer}}}}");
    let base = |extra: &[&str]| {
        let mut a = strings(&[
            "load",
            "run",
            &url,
            "-X",
            "POST",
            "-H",
            "Content-Type: text/xml; charset=utf-8",
            "-H",
            "X-Customer: {{customer}}",
            "--no-store",
        ]);
        a.extend(strings(extra));
        a
    };
    let out = harrier_cli(
        d,
        &base(&[
            "--feeder",
            "users.csv",
            "--body-template",
            "get-balance.xml",
            // One connection: the service sees the requests in the order they were sent.
            "--max-connections",
            "1",
            "--rate",
            "40",
            "--duration",
            "3s",
            "--expect-body-contains",
            "<ok/>",
            "--dispatch-limit",
            "250ms",
        ]),
        &[],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("120 scheduled, 120 sent, 120 completed; errors 0"),
        "{stdout}"
    );
    assert!(stdout.contains("protocol      HTTP/1.1\n"), "{stdout}");
    let got = received.lock().unwrap().clone();
    assert_eq!(got.len(), 120);
    for (k, (customer, header, body)) in got.iter().enumerate() {
        let row = &rows[k % 50];
        let expected = ENVELOPE
            .replace("{{customer}}", &row[0])
            .replace("{{ account }}", &row[1])
            .replace("{{holder}}", &row[2]);
        assert_eq!(body, &expected, "request {k} carries row {}", k % 50 + 1);
        assert_eq!((customer, header), (&row[0], &row[0]), "request {k}");
    }

    // Mistakes stop the command before anything is sent (exit 2), naming what is wrong.
    std::fs::write(d.join("typo.xml"), "<a>{{acount}}</a>").unwrap();
    let out = harrier_cli(
        d,
        &base(&[
            "--feeder",
            "users.csv",
            "--body-template",
            "typo.xml",
            "--rate",
            "1",
        ]),
        &[],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "typo.xml line 1: placeholder {{acount}} is not a column of the feeder (users.csv has columns customer, account, holder)"
        ),
        "{stderr}"
    );
    std::fs::write(d.join("bad.csv"), "customer,account\nC-1,A\nC-2\n").unwrap();
    let out = harrier_cli(d, &base(&["--feeder", "bad.csv", "--rate", "1"]), &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.csv line 3: 1 values, expected 2"),
        "{stderr}"
    );
    let out = harrier_cli(d, &base(&["--rate", "1"]), &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("placeholder {{customer}} needs a --feeder"),
        "{stderr}"
    );
    assert_eq!(received.lock().unwrap().len(), 120, "nothing more was sent");
}

/// HTTP/2 over TCP (h2c) test service: an axum router served by hyper's HTTP/2 server
/// with at most `max_streams` concurrent streams per connection, each request `service_ms`
/// long; counts requests by protocol and the most under way at once.
#[derive(Default)]
struct H2Seen {
    http2: AtomicU64,
    other: AtomicU64,
    in_flight: AtomicU64,
    in_flight_max: AtomicU64,
    connections: AtomicU64,
}

async fn h2c_service(max_streams: u32, service_ms: u64) -> (String, Arc<H2Seen>) {
    let seen = Arc::new(H2Seen::default());
    let app = Router::new()
        .route(
            "/work",
            get(
                move |State(s): State<Arc<H2Seen>>, version: axum::http::Version| async move {
                    if version == axum::http::Version::HTTP_2 {
                        s.http2.fetch_add(1, Ordering::SeqCst);
                    } else {
                        s.other.fetch_add(1, Ordering::SeqCst);
                    }
                    let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    s.in_flight_max.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(service_ms)).await;
                    s.in_flight.fetch_sub(1, Ordering::SeqCst);
                    "served"
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counted = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            counted.connections.fetch_add(1, Ordering::SeqCst);
            let svc = hyper_util::service::TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let _ =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .max_concurrent_streams(max_streams)
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), svc)
                        .await;
            });
        }
    });
    (format!("http://{addr}/work"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_with_prior_knowledge_carries_concurrent_streams_on_one_connection() {
    // 100 req/s of 50 ms each wants 5 under way; the server allows 3 streams per
    // connection, and --max-connections 1: hyper keeps the server's limit (the rest wait
    // in the service time), and every request still completes.
    let (url, seen) = h2c_service(3, 50).await;
    let mut req = request(&url, 100.0, 1.5, 1, 10_000);
    req.spec.version = harrier::sources::load::HttpVersion::Http2;
    let s = run(req).await.summary;
    assert_eq!((s.completed, s.errors.total()), (150, 0), "{}", show(&s));
    assert_eq!(s.protocol, "HTTP/2 (h2c, prior knowledge)");
    assert_eq!(seen.http2.load(Ordering::SeqCst), 150);
    assert_eq!(seen.other.load(Ordering::SeqCst), 0);
    assert_eq!(s.connections_opened, 1, "{}", show(&s));
    // The test connection before the run, then the run's one connection.
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
    let most = seen.in_flight_max.load(Ordering::SeqCst);
    assert!((2..=3).contains(&most), "{most} streams at once");
    assert!(
        show(&s).contains("protocol      HTTP/2 (h2c, prior knowledge)"),
        "{}",
        show(&s)
    );

    // The closed model's users are streams on one connection too.
    let (url, seen) = h2c_service(100, 20).await;
    let mut req = request(&url, 1.0, 1.0, 8, 5000);
    req.spec.version = harrier::sources::load::HttpVersion::Http2;
    req.settings.workload = Workload::Closed(ClosedModel {
        users: 4,
        think_s: 0.0,
        duration_s: 1.0,
    });
    let s = run(req).await.summary;
    assert!(s.completed >= 40 && s.errors.total() == 0, "{}", show(&s));
    assert_eq!(s.connections_opened, 1, "{}", show(&s));
    assert_eq!(seen.http2.load(Ordering::SeqCst), s.completed);
    assert!(seen.in_flight_max.load(Ordering::SeqCst) >= 2);
}

/// Runs `openssl` with `args` in `dir`; false when it is not installed (outside CI).
fn openssl(dir: &std::path::Path, args: &[&str]) -> bool {
    match std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            true
        }
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "openssl is missing ({e}); Debian: apt-get install openssl"
            );
            false
        }
    }
}

/// A test CA (`ca.pem`), another CA nobody uses (`other.pem`), a server certificate for
/// 127.0.0.1 (`srv.pem`, `srv.key`) and a client certificate (`client.pem`,
/// `client.key`), both signed by the test CA. False without openssl.
fn make_certificates(d: &std::path::Path) -> bool {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for (name, cn) in [("ca", "harrier load test CA"), ("other", "another CA")] {
        let (key, pem, subj) = (
            format!("{name}.key"),
            format!("{name}.pem"),
            format!("/CN={cn}"),
        );
        let mut args = vec!["req", "-x509"];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &pem, "-days", "2", "-subj", &subj]);
        if !openssl(d, &args) {
            return false;
        }
    }
    std::fs::write(
        d.join("srv.cnf"),
        "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n",
    )
    .unwrap();
    std::fs::write(
        d.join("client.cnf"),
        "basicConstraints = CA:FALSE\nextendedKeyUsage = clientAuth\n",
    )
    .unwrap();
    for (name, cn) in [("srv", "127.0.0.1"), ("client", "load client")] {
        let (key, csr, pem, cnf, subj) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.cnf"),
            format!("/CN={cn}"),
        );
        let mut args = vec!["req"];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        openssl(d, &args);
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &pem,
                "-days",
                "2",
                "-extfile",
                &cnf,
            ],
        );
    }
    true
}

/// A TLS server on 127.0.0.1 offering h2 and http/1.1 by ALPN (hyper's server for each),
/// requiring a client certificate signed by the test CA when `mutual`; answers "served",
/// records the protocol of every request and counts completed TLS handshakes.
async fn tls_service(
    d: &std::path::Path,
    mutual: bool,
) -> (
    u16,
    Arc<std::sync::Mutex<Vec<hyper::Version>>>,
    Arc<AtomicU64>,
) {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(d.join("srv.pem"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(d.join("srv.key")).unwrap();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if mutual {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(d.join("ca.pem")).unwrap())
            .unwrap();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_single_cert(chain, key).unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<std::sync::Mutex<Vec<hyper::Version>>> = Arc::default();
    let handshakes = Arc::new(AtomicU64::new(0));
    let (recorded, counted) = (seen.clone(), handshakes.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, seen, counted) = (acceptor.clone(), recorded.clone(), counted.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let seen = seen.clone();
                        async move {
                            seen.lock().unwrap().push(req.version());
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(
                                http_body_util::Full::new(hyper::body::Bytes::from_static(
                                    b"served",
                                )),
                            ))
                        }
                    },
                );
                let io = hyper_util::rt::TokioIo::new(tls);
                if h2 {
                    let _ = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(io, svc)
                    .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, svc)
                        .await;
                }
            });
        }
    });
    (port, seen, handshakes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_targets_speak_h2_by_alpn_trust_the_ca_file_and_present_client_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    if !make_certificates(d) {
        skip(Kind::Tool, "openssl not installed");
        return;
    }
    // The system's CA store is replaced by a CA that signed nothing here: only --ca-file
    // makes the server trusted.
    let env: &[(&str, &std::path::Path)] = &[("SSL_CERT_FILE", &d.join("other.pem"))];
    let run = |port: u16, extra: &[&str]| {
        let mut a = strings(&[
            "load",
            "run",
            &format!("https://127.0.0.1:{port}/work"),
            "--rate",
            "30",
            "--duration",
            "1s",
            "--expect-body-contains",
            "served",
            "--dispatch-limit",
            "250ms",
            "--no-store",
        ]);
        a.extend(strings(extra));
        a
    };
    let ok = |out: &std::process::Output| {
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    // No request got a response: exit 1, saying the handshake failed and what to do.
    let unanswered = |out: &std::process::Output, port: u16| {
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert!(
            stderr.contains(&format!(
                "every request failed before a response: 127.0.0.1:{port}: TLS handshake with 127.0.0.1:{port} failed"
            )) && stderr.contains("trust the server's CA with --ca-file"),
            "{stderr}"
        );
        stdout
    };

    let (port, seen, handshakes) = tls_service(d, false).await;
    // Trusting the test CA: HTTP/2 by ALPN, every request served.
    let stdout = ok(&harrier_cli(d, &run(port, &["--ca-file", "ca.pem"]), env).await);
    assert!(
        stdout.contains("30 scheduled, 30 sent, 30 completed; errors 0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("protocol      HTTP/2 over TLS (ALPN h2)\n"),
        "{stdout}"
    );
    let versions = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(versions, vec![hyper::Version::HTTP_2; 30]);
    // One kept-alive connection carried every request: one handshake for the run (and
    // one for the test connection before it), not one per request.
    assert!(stdout.contains("connections   1 opened"), "{stdout}");
    assert_eq!(handshakes.load(Ordering::SeqCst), 2);
    // --http1: HTTP/1.1 over the same TLS.
    let stdout = ok(&harrier_cli(d, &run(port, &["--ca-file", "ca.pem", "--http1"]), env).await);
    assert!(stdout.contains("errors 0"), "{stdout}");
    assert!(
        stdout.contains("protocol      HTTP/1.1 over TLS\n"),
        "{stdout}"
    );
    let versions = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(versions, vec![hyper::Version::HTTP_11; 30]);
    // Without the CA: every request is a connect error, and the summary says why.
    let stdout = unanswered(&harrier_cli(d, &run(port, &[]), env).await, port);
    assert!(
        stdout.contains("30 completed; errors 30 (100.00 %: connect 30)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "connect error TLS handshake with 127.0.0.1:{port} failed: invalid peer certificate"
        )),
        "{stdout}"
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reached the server"
    );

    // Mutual TLS: served with the client certificate, connect errors without it.
    let (port, seen, _) = tls_service(d, true).await;
    let stdout = ok(&harrier_cli(
        d,
        &run(
            port,
            &[
                "--ca-file",
                "ca.pem",
                "--client-cert",
                "client.pem",
                "--client-key",
                "client.key",
            ],
        ),
        env,
    )
    .await);
    assert!(
        stdout.contains("30 scheduled, 30 sent, 30 completed; errors 0"),
        "{stdout}"
    );
    assert!(stdout.contains("HTTP/2 over TLS"), "{stdout}");
    assert_eq!(seen.lock().unwrap().len(), 30);
    let stdout = unanswered(
        &harrier_cli(d, &run(port, &["--ca-file", "ca.pem"]), env).await,
        port,
    );
    assert!(
        stdout.contains("30 completed; errors 30 (100.00 %: connect 30)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "connect error TLS handshake with 127.0.0.1:{port} failed"
        )),
        "{stdout}"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        30,
        "nothing more reached the server"
    );

    // A client key without its certificate is a usage error.
    let out = harrier_cli(d, &run(port, &["--client-key", "client.key"]), env).await;
    assert_eq!(out.status.code(), Some(2));
}

/// Drops what differs between two stores of the same run: ids, import times, links.
fn without_ids(mut v: serde_json::Value) -> serde_json::Value {
    match &mut v {
        serde_json::Value::Object(map) => {
            for k in [
                "id",
                "run_id",
                "imported_at_ms",
                "url",
                "timeseries_url",
                "distribution_url",
            ] {
                map.remove(k);
            }
            for x in map.values_mut() {
                *x = without_ids(x.take());
            }
        }
        serde_json::Value::Array(items) => {
            for x in items.iter_mut() {
                *x = without_ids(x.take());
            }
        }
        _ => {}
    }
    v
}

/// `--server`: the workers' ticks stream into a running harrier, which merges them with the
/// generator's own accumulator — the stored run (statistics, buckets, distribution, the
/// generator's series, the summary) is exactly the one the generator's process stores
/// itself, while the run shows as live until it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streamed_to_a_server_is_exactly_the_run_its_own_process_stores() {
    use harrier::cli::load_stream::LoadStream;
    use harrier::services::load_runs::EndLoadRun;

    let (url, svc) = service(8, 3, None).await;
    let server = spawn_app().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(harrier::app::serve(
        listener,
        server.state.clone(),
        std::future::pending(),
    ));
    let (local, config, dir) = crate::helpers::fresh_store_on(None).await;
    let local = crate::helpers::TestApp {
        state: harrier::app::AppState::new(local, config),
        _dir: dir,
    };

    let mut req = request(&url, 150.0, 3.0, 16, 2_000);
    req.settings.threads = 2;
    let cancel = CancellationToken::new();
    let (tap, stream) = LoadStream::start(&base, cancel.clone());
    req.tap = Some(tap);
    // While it runs, the server holds it as a live run whose count grows.
    let watch_store = server.state.store.clone();
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::new();
        for _ in 0..60 {
            if let Ok(runs) = watch_store.list_runs().await
                && let Some(r) = runs.first()
            {
                seen.push((r.status.clone(), r.count));
                if r.status == "complete" {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        seen
    });
    let outcome = tokio::time::timeout(
        Duration::from_secs(30),
        run_load(Some(&local.state.store), req, cancel, |_| {}),
    )
    .await
    .expect("the run ends by itself")
    .expect("the run starts");
    let streamed = stream
        .finish(EndLoadRun {
            duration_s: Some(outcome.summary.duration_s),
            ..EndLoadRun::default()
        })
        .await
        .expect("the run ends on the server")
        .expect("the run was opened on the server");
    let local_id = outcome.run.as_ref().expect("stored locally").id;
    assert_eq!(outcome.summary.completed, 450, "{}", show(&outcome.summary));
    assert_eq!(svc.seen.load(Ordering::SeqCst), 450);

    let seen = watcher.await.unwrap();
    let live: Vec<i64> = seen
        .iter()
        .filter(|(s, _)| s == "live")
        .map(|(_, c)| *c)
        .collect();
    assert!(
        live.iter().any(|&c| c > 0 && c < 450),
        "the server showed the run live with part of its requests: {seen:?}"
    );
    assert!(live.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");

    for path in ["", "/timeseries", "/distribution", "/errors"] {
        let a = server
            .get(&format!("/api/v1/runs/{}{path}", streamed.id))
            .await;
        let b = local.get(&format!("/api/v1/runs/{local_id}{path}")).await;
        assert_eq!(a.status, b.status, "{path}");
        assert_eq!(
            without_ids(a.json()),
            without_ids(b.json()),
            "GET /api/v1/runs/ID{path}: the streamed run equals the one stored by the process"
        );
    }
    let run = server
        .get(&format!("/api/v1/runs/{}", streamed.id))
        .await
        .json();
    assert_eq!(run["status"], "complete");
    assert_eq!(run["tool"], "harrier");
    assert_eq!(run["overall"]["count"], 450);
    let seconds = &run["reported"]["seconds"];
    let achieved: f64 = seconds["achieved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert_eq!(
        achieved, 450.0,
        "the generator's series counts every request"
    );
    assert_eq!(seconds["offered"][0], 150.0);

    // A stream the server does not know is refused and says why; a tick of a worker the
    // plan does not have is refused whole.
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}/api/v1/load-runs/{}/ticks", streamed.id))
        .json(&serde_json::json!({"ticks": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert!(r.text().await.unwrap().contains("load stream of run"));
}

/// Run `id`'s JSON once it is complete (within 10 s; the test fails otherwise).
async fn complete_run(app: &crate::helpers::TestApp, id: i64) -> serde_json::Value {
    let mut run = serde_json::Value::Null;
    for _ in 0..100 {
        run = app.get(&format!("/api/v1/runs/{id}")).await.json();
        if run["status"] == "complete" {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("run {id} did not complete: {run}");
}

/// Whether no console load test is running (waiting up to 5 s for the last one to end).
async fn no_test_running(app: &crate::helpers::TestApp) -> bool {
    for _ in 0..50 {
        if app.get("/api/v1/load-tests").await.json()["running"].is_null() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Load tests from the console (`POST /api/v1/load-tests`): off unless `[load] enabled`,
/// held to the server's limits and to private targets, one at a time, streamed into a run
/// that is live while it runs, and stopped from the console keeping every request sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_load_tests_are_off_by_default_bounded_one_at_a_time_and_stoppable() {
    use axum::body::Body;
    use axum::http::Request;

    let (url, svc) = service(8, 2, None).await;
    async fn post(
        app: &crate::helpers::TestApp,
        uri: &str,
        body: serde_json::Value,
    ) -> crate::helpers::Reply {
        let req = Request::post(uri.to_string())
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        app.send(req).await
    }
    let test = |rate: &str, duration: &str| {
        serde_json::json!({"url": url, "mode": "run", "rate": rate, "duration": duration,
                           "expect_body_contains": "served", "scenario": "console"})
    };

    let off = spawn_app().await;
    let r = post(&off, "/api/v1/load-tests", test("50", "2s")).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("[load] enabled = true"), "{}", r.text());
    assert_eq!(off.get("/api/v1/load-tests").await.json()["enabled"], false);

    let app = crate::helpers::spawn_app_with(|c| {
        c.load_tests.enabled = true;
        c.load_tests.max_rate = 500.0;
        c.load_tests.max_duration_s = 60.0;
    })
    .await;
    let r = post(&app, "/api/v1/load-tests", test("900", "2s")).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("limit of 500 req/s"), "{}", r.text());
    let r = post(&app, "/api/v1/load-tests", test("100", "2m")).await;
    assert!(r.text().contains("limit of 60 s"), "{}", r.text());
    let r = post(&app, "/api/v1/load-tests", test("fast", "2s")).await;
    assert!(r.text().contains("--rate \\\"fast\\\""), "{}", r.text());
    let mut public = test("10", "2s");
    public["url"] = "http://192.0.2.1/".into();
    let r = post(&app, "/api/v1/load-tests", public).await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("allow_public_targets"), "{}", r.text());
    let mut find = test("10", "2s");
    find["mode"] = "find".into();
    find["max_duration"] = "5m".into();
    let r = post(&app, "/api/v1/load-tests", find).await;
    assert!(r.text().contains("limit of 60 s"), "{}", r.text());
    assert_eq!(
        svc.seen.load(Ordering::SeqCst),
        0,
        "refused tests send nothing"
    );

    let r = post(&app, "/api/v1/load-tests", test("100", "30s")).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let started = r.json();
    let id = started["id"].as_i64().unwrap();
    assert_eq!(
        started["command"],
        format!(
            "harrier load run {url} --rate 100 --duration 30s --expect-body-contains served --scenario console"
        )
    );
    let r = post(&app, "/api/v1/load-tests", test("10", "2s")).await;
    assert_eq!(r.status, 409, "one at a time: {}", r.text());
    assert_eq!(
        app.get("/api/v1/load-tests").await.json()["running"]["id"],
        id
    );
    // Live, and growing.
    let mut live_count = 0;
    for _ in 0..50 {
        let run = app.get(&format!("/api/v1/runs/{id}")).await.json();
        assert_eq!(run["status"], "live");
        live_count = run["overall"]["count"].as_i64().unwrap_or(0);
        if live_count >= 150 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        live_count >= 150,
        "the run filled while it ran: {live_count}"
    );
    let page = app.get(&format!("/console/runs/{id}")).await.text();
    assert!(
        page.contains("id=\"load-stop\""),
        "a Stop button on the live run's page"
    );
    assert!(page.contains("id=\"load-command\""));

    let r = post(
        &app,
        &format!("/api/v1/load-tests/{id}/stop"),
        serde_json::json!({}),
    )
    .await;
    assert_eq!(r.status, 204);
    let run = complete_run(&app, id).await;
    assert_eq!(run["reported"]["ended_by"], "stopped from the console");
    let count = run["overall"]["count"].as_u64().unwrap();
    assert!(count < 3_000, "stopped early: {count}");
    assert_eq!(
        svc.seen.load(Ordering::SeqCst),
        count,
        "every request the service saw is in the run"
    );
    assert!(
        no_test_running(&app).await,
        "the test is over once it has ended"
    );
    let r = post(
        &app,
        &format!("/api/v1/load-tests/{id}/stop"),
        serde_json::json!({}),
    )
    .await;
    assert_eq!(r.status, 404);
}

/// Three `harrier load agent` processes share a console load test: each offers a third of
/// the rate from its own process and streams its seconds into the one run, which counts
/// exactly the requests the service saw — no more, no fewer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_share_a_load_test_and_the_merged_count_is_the_services_count() {
    use axum::body::Body;
    use axum::http::Request;

    let (url, svc) = service(16, 2, None).await;
    let app = crate::helpers::spawn_app_with(|c| {
        c.load_tests.enabled = true;
        c.load_tests.max_rate = 1_000.0;
    })
    .await;
    let agents = serve_with_agents(&app, 3, "agent").await;
    let start = |body: serde_json::Value| {
        let req = Request::post("/api/v1/load-tests")
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        app.send(req)
    };
    let test = serde_json::json!({"url": url, "mode": "run", "rate": "300", "duration": "3s",
                                  "expect_body_contains": "served", "agents": 3});
    let mut four = test.clone();
    four["agents"] = 4.into();
    let r = start(four).await;
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("4 agents asked for, 3 waiting"),
        "{}",
        r.text()
    );
    assert_eq!(svc.seen.load(Ordering::SeqCst), 0);

    let r = start(test).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_i64().unwrap();
    let outputs = agent_outputs(agents, Duration::from_secs(60)).await;
    for (status, out) in &outputs {
        assert!(status.success(), "{out}");
        assert!(out.contains(" of 3 of run "), "{out}");
        assert!(out.contains("part ended"), "{out}");
    }
    let run = complete_run(&app, id).await;
    let served = svc.seen.load(Ordering::SeqCst);
    assert_eq!(served, 900, "each agent offered 100 req/s for 3 s");
    assert_eq!(
        run["overall"]["count"].as_u64(),
        Some(served),
        "the merged run counts exactly what the service saw"
    );
    assert_eq!(run["overall"]["errors"], 0);
    let offered: Vec<f64> = run["reported"]["seconds"]["offered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(offered.iter().sum::<f64>(), 900.0, "{offered:?}");
    assert!(
        run["name"]
            .as_str()
            .unwrap()
            .contains("split among 3 agents"),
        "{run}"
    );
    assert!(
        no_test_running(&app).await,
        "the test is over once every part has ended"
    );
}

/// `deploy/kubernetes/load-agents.yaml` runs the agent command with flags this binary
/// accepts, as an Indexed Job whose pods each take one part.
#[test]
fn the_kubernetes_agents_manifest_runs_the_agent_command() {
    use clap::Parser;
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/load-agents.yaml");
    let text = std::fs::read_to_string(&path).expect("the manifest exists");
    assert!(text.contains("completionMode: Indexed"));
    assert!(text.contains("name: HARRIER_SERVER"));
    let args_line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("args: "))
        .expect("an args line");
    let args: Vec<String> =
        serde_json::from_str(args_line).expect("args as a flow list of strings");
    let mut argv = vec!["harrier".to_string()];
    argv.extend(args);
    // HARRIER_SERVER comes from the manifest's env.
    argv.extend(["--server".to_string(), "http://127.0.0.1:7070".to_string()]);
    let cli =
        harrier::config::Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    match cli.command {
        Some(harrier::config::Command::Load(harrier::config::LoadCommand::Agent(a))) => {
            assert!(a.once, "each pod takes one part and exits");
            assert_eq!(a.wait.as_deref(), Some("30m"));
        }
        other => panic!("not `load agent`: {other:?}"),
    }
}

/// A writable CPU controller: cgroup v2 (`cpu.max`) or v1 (`cpu.cfs_quota_us`); the
/// directory made for this test and the line that caps it at `percent` % of one CPU.
fn cpu_cgroup(name: &str, percent: u32) -> Option<(std::path::PathBuf, &'static str)> {
    let v2 = std::path::Path::new("/sys/fs/cgroup");
    let v1 = v2.join("cpu");
    let (dir, v1_layout) = if v2.join("cgroup.controllers").exists() {
        (v2.join(name), false)
    } else if v1.join("cpu.cfs_quota_us").exists() {
        (v1.join(name), true)
    } else {
        return None;
    };
    std::fs::create_dir(&dir).ok()?;
    let quota = 1_000 * percent; // of a 100 ms period, µs
    let ok = if v1_layout {
        std::fs::write(dir.join("cpu.cfs_period_us"), "100000").is_ok()
            && std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()).is_ok()
    } else {
        std::fs::write(dir.join("cpu.max"), format!("{quota} 100000")).is_ok()
    };
    if !ok {
        let _ = std::fs::remove_dir(&dir);
        return None;
    }
    Some((dir, if v1_layout { "v1" } else { "v2" }))
}

/// A generator starved of CPU (a cgroup quota of 1 % of one CPU; the run needs about 4 %, so
/// 3 % was too close to tell) starts its requests late: the run is labelled
/// generator-limited with the dispatch delay as the reason — never "the service fell over" —
/// while the same run with the CPU it needs keeps its schedule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generator_starved_of_cpu_is_labelled_generator_limited_and_a_normal_run_is_not() {
    let (url, _svc) = service(16, 1, None).await;
    let harrier = env!("CARGO_BIN_EXE_harrier");
    let flags = [
        "load",
        "run",
        url.as_str(),
        "--rate",
        "100",
        "--duration",
        "2s",
        "--no-store",
        "--dispatch-limit",
        "50ms",
        "--expect-body-contains",
        "served",
    ];
    let run = |wrap: Option<std::path::PathBuf>| {
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let out = match wrap {
                // The shell joins the cgroup, then becomes harrier: every thread is capped.
                Some(procs) => std::process::Command::new("sh")
                    .arg("-c")
                    .arg(format!(
                        "echo $$ > {} && exec \"$0\" \"$@\"",
                        procs.display()
                    ))
                    .arg(harrier)
                    .args(&flags)
                    .output(),
                None => std::process::Command::new(harrier).args(&flags).output(),
            }
            .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr)
        })
    };
    let normal = run(None).await.unwrap();
    assert!(normal.contains("kept its schedule"), "{normal}");
    assert!(!normal.contains("GENERATOR-LIMITED"), "{normal}");

    let name = format!("harrier-test-starved-{}", std::process::id());
    let Some((dir, layout)) = cpu_cgroup(&name, 1) else {
        skip(
            Kind::Host,
            "no writable cgroup CPU controller here (needs root and cgroups); the starved half of this test did not run",
        );
        return;
    };
    let starved = run(Some(dir.join("cgroup.procs"))).await.unwrap();
    let _ = std::fs::remove_dir(&dir);
    println!("cgroup {layout}, 1 % of one CPU:\n{starved}");
    assert!(starved.contains("GENERATOR-LIMITED"), "{starved}");
    assert!(
        starved.contains("dispatch delay p99") && starved.contains("is above 50.00 ms"),
        "the reason is the generator's lateness: {starved}"
    );
    assert!(!starved.contains("kept its schedule"), "{starved}");
}

/// Issue 13 item 6: a saturation search shared by three agent processes. The server runs
/// the search on the seconds merged over the agents and sends each rate change to every
/// agent at once (a long poll); the answer is the pool's capacity as one generator finds
/// it, every rate change reached every agent within 100 ms, and the merged count is what
/// the service saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_agents_search_together_and_every_rate_change_reaches_them_within_100_ms() {
    use axum::body::Body;
    use axum::http::Request;

    // 20 workers of 50 ms: C = 400 req/s (as the one-generator search test).
    let (url, pool) = pool_service(20, Duration::from_millis(50), 100).await;
    let app = crate::helpers::spawn_app_with(|c| {
        c.load_tests.enabled = true;
        c.load_tests.max_rate = 2_000.0;
        c.load_tests.max_duration_s = 150.0;
    })
    .await;
    let agents = serve_with_agents(&app, 3, "searcher").await;
    let test = serde_json::json!({"url": url, "mode": "find", "start_rate": "150",
        "max_rate": "2000", "max_duration": "140s", "step_duration": "4s",
        "confirm_duration": "6s", "fail_after": "2s", "tolerance": "5%",
        "max_connections": 171, "timeout": "2s",
        // the machine is shared (see the module docs)
        "dispatch_limit": "250ms", "agents": 3});
    let req = Request::post("/api/v1/load-tests")
        .header("content-type", "application/json")
        .body(Body::from(test.to_string()))
        .unwrap();
    let r = app.send(req).await;
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_i64().unwrap();
    let outputs = agent_outputs(agents, Duration::from_secs(170)).await;
    for (status, out) in &outputs {
        assert!(status.success(), "{out}");
        assert!(out.contains("part ended"), "{out}");
    }
    let run = complete_run(&app, id).await;
    let search = &run["reported"]["search"];
    eprintln!("{}", search["statement"]);
    let x = search["falls_over_rps"].as_f64().expect("it falls over");
    assert!(
        (360.0..=440.0).contains(&x),
        "X {x} not within 10 % of 400\n{}",
        search["statement"]
    );
    assert_eq!(search["confirmed"], true, "{search}");
    assert_eq!(run["capacity"]["kind"], "search");
    let control = &run["reported"]["control"];
    eprintln!("rate changes: {control}");
    let changes = control["changes"].as_u64().unwrap();
    let steps = search["steps"].as_array().unwrap().len() as u64;
    assert!(changes >= steps, "a change per step at least: {control}");
    // Every change but the first (set before the agents waited) and the final stop is
    // reported by each of the three agents.
    assert!(
        control["received"].as_u64().unwrap() >= 3 * (steps - 1),
        "{control}"
    );
    // 100 ms is the aim (bench/load_find_agents.sh measures it); the test allows 250 ms:
    // the suite runs a real tool's ramp on the other test thread at times, and a busy
    // 2-core machine delays a wake-up by tens of ms (118 ms seen once).
    let worst = control["max_delay_ms"].as_f64().unwrap();
    assert!(
        worst <= 250.0,
        "a rate change reached an agent after {worst} ms"
    );
    // Every request the agents completed reached the service (served or refused), and the
    // merged run counts them all.
    let seen = pool.served.load(Ordering::SeqCst) + pool.refused.load(Ordering::SeqCst);
    let count = run["overall"]["count"].as_u64().unwrap();
    let timeouts = run["reported"]["errors by class"]["timeout"]
        .as_u64()
        .unwrap();
    assert_eq!(seen, count - timeouts, "{}", run["reported"]["requests"]);
    assert!(no_test_running(&app).await);
}

/// Serves `app` on 127.0.0.1 and starts `n` agent processes (`harrier load agent --once`)
/// named `{prefix}-1`…; returns them once all `n` wait for work.
async fn serve_with_agents(
    app: &crate::helpers::TestApp,
    n: usize,
    prefix: &str,
) -> Vec<crate::browser::Proc> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(harrier::app::serve(
        listener,
        app.state.clone(),
        std::future::pending(),
    ));
    let procs = (1..=n)
        .map(|i| {
            crate::browser::Proc(
                std::process::Command::new(env!("CARGO_BIN_EXE_harrier"))
                    .args([
                        "load", "agent", "--server", &base, "--once", "--wait", "60s",
                    ])
                    .args(["--name", &format!("{prefix}-{i}")])
                    .env_remove("HARRIER_TOKEN")
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("start an agent"),
            )
        })
        .collect();
    let mut waiting = 0;
    for _ in 0..100 {
        waiting = app.get("/api/v1/load-agents").await.json()["waiting"]
            .as_array()
            .map_or(0, Vec::len);
        if waiting == n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(waiting, n, "{n} agents wait for work");
    procs
}

/// Waits (at most `limit`) for every agent to exit: each one's status and output (stdout,
/// then stderr).
async fn agent_outputs(
    procs: Vec<crate::browser::Proc>,
    limit: Duration,
) -> Vec<(std::process::ExitStatus, String)> {
    let outputs = tokio::task::spawn_blocking(move || {
        procs
            .into_iter()
            .map(|mut a| {
                let status = a.0.wait().unwrap();
                let (mut out, mut err) = (String::new(), String::new());
                use std::io::Read;
                a.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
                a.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
                (status, out + &err)
            })
            .collect::<Vec<_>>()
    });
    tokio::time::timeout(limit, outputs)
        .await
        .expect("the agents end their parts and exit")
        .unwrap()
}
