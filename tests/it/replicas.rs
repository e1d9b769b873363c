//! Several `harrier serve` replicas on one database: the alerts lease gives the evaluator
//! and notifier to one of them at a time, hands it over when the holder stops, and fences
//! a holder that lost it (`services::alerts::lease`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use harrier::domain::alerts::rule::Duration as RuleDuration;
use harrier::services::alerts::lease::{ALERTS_LEASE, Leader};
use harrier::store::{DatabaseUrl, Store};
use tokio_util::sync::CancellationToken;

use crate::helpers::*;
use crate::skip::{Kind, skip};

#[tokio::test]
async fn a_lease_has_one_holder_at_a_time_and_its_term_grows_with_each_new_holder() {
    let (store, _config, _dir) = fresh_store().await;
    let t = 1_000_000;
    let ttl = 3_000;
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "a", t, ttl)
            .await
            .unwrap(),
        Some(1)
    );
    // B while A's lease runs: refused; A renews in the same term.
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "b", t + 1_000, ttl)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "a", t + 2_000, ttl)
            .await
            .unwrap(),
        Some(1)
    );
    assert!(
        store
            .lease_held(ALERTS_LEASE, "a", 1, t + 4_999)
            .await
            .unwrap()
    );
    // A stops renewing: once its lease has run out B takes it, in a new term…
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "b", t + 4_999, ttl)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "b", t + 5_000, ttl)
            .await
            .unwrap(),
        Some(2)
    );
    // …and A, resuming with its old term, holds nothing and cannot take it back.
    assert!(
        !store
            .lease_held(ALERTS_LEASE, "a", 1, t + 5_001)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "a", t + 5_001, ttl)
            .await
            .unwrap(),
        None
    );
    // Released at shutdown: the next candidate takes it at once, term 3.
    store.release_lease(ALERTS_LEASE, "b").await.unwrap();
    assert!(
        !store
            .lease_held(ALERTS_LEASE, "b", 2, t + 5_002)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "a", t + 5_002, ttl)
            .await
            .unwrap(),
        Some(3)
    );
}

/// Two evaluator loops on one PostgreSQL database (two replicas): one leads; when it stops
/// without releasing (killed), the other leads within the lease time-out plus a round, and
/// the stopped one, were it to resume, is fenced off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_evaluate_one_at_a_time_and_hand_over_when_the_leader_dies() {
    if on_postgres() {
        skip(
            Kind::Backend,
            "runs in the SQLite pass: it starts its replicas on PostgreSQL itself",
        );
        return;
    }
    let Some((server, _pg)) = postgres_server("replicas sharing one database") else {
        return;
    };
    let (first, config, _dir) = fresh_store_on(Some(&server)).await;
    let url = config.database_url.clone().unwrap();
    assert!(matches!(url, DatabaseUrl::Postgres(_)));
    let second = Store::connect(&url).await.unwrap();
    let mut alerts = config.alerts.clone();
    alerts.evaluation_interval = RuleDuration(1_000);
    alerts.builtin_rules = false;
    let alerts = Arc::new(alerts);
    let start = |store: Store| {
        let leader = Arc::new(Leader::new(store.clone(), 1_000));
        let task = tokio::spawn(harrier::services::alerts::evaluator::run(
            store,
            harrier::services::live::Hub::new(),
            alerts.clone(),
            Arc::new(tokio::sync::Notify::new()),
            leader.clone(),
            CancellationToken::new(),
        ));
        (leader, task)
    };
    let (a, task_a) = start(first.clone());
    let (b, task_b) = start(second);
    assert_eq!(a.ttl_ms, 3_000);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let terms = (a.term(), b.term());
    assert!(
        (terms.0 == 1) ^ (terms.1 == 1) && terms.0 + terms.1 == 1,
        "exactly one leads, in term 1: {terms:?}"
    );
    let (leader, leader_task, other, other_task) = if terms.0 == 1 {
        (a, task_a, b, task_b)
    } else {
        (b, task_b, a, task_a)
    };
    // The leader dies: no release.
    leader_task.abort();
    let died = Instant::now();
    while other.term() != 2 {
        assert!(
            died.elapsed() < Duration::from_millis(3_000 + 1_000 + 1_500),
            "no takeover within the lease time-out plus a round"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = died.elapsed();
    // The old leader, resuming, holds nothing: its notifier would send nothing.
    assert!(!leader.still_held(harrier::now_ms()).await);
    assert!(other.still_held(harrier::now_ms()).await);
    eprintln!(
        "takeover {} ms after the leader died (lease 3000 ms, rounds 1000 ms)",
        took.as_millis()
    );
    other_task.abort();
}

/// A `harrier serve` on the PostgreSQL database `url`, on a free loopback port; killed when
/// dropped. Returns it and its base URL.
fn serve_replica(url: &str, dir: &std::path::Path) -> (crate::server::Proc, String) {
    serve_replica_on(url, dir, 0)
}

/// [`serve_replica`] on `port` (0: any free one).
fn serve_replica_on(url: &str, dir: &std::path::Path, port: u16) -> (crate::server::Proc, String) {
    let config = dir.join("harrier.toml");
    std::fs::write(&config, "self_scrape = false\nlive_idle_timeout_s = 2\n").unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_harrier"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--database-url",
            url,
        ])
        .arg("--config")
        .arg(&config)
        .current_dir(dir)
        .env("HARRIER_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start harrier");
    let base = crate::server::printed_url(&mut child);
    (crate::server::Proc(child), base)
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next message of `ws` whose `type` is `kind` (others skipped), with when it came;
/// `None` after `limit`.
async fn next_of(
    ws: &mut Socket,
    kind: &str,
    limit: Duration,
) -> Option<(serde_json::Value, Instant)> {
    use futures_util::StreamExt;
    let end = Instant::now() + limit;
    loop {
        let left = end.checked_duration_since(Instant::now())?;
        let msg = tokio::time::timeout(left, ws.next()).await.ok()??.ok()?;
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg {
            let v: serde_json::Value = serde_json::from_str(&t).unwrap();
            if v["type"] == kind {
                return Some((v, Instant::now()));
            }
        }
    }
}

/// Three replicas on one PostgreSQL database: a run imported through A reaches websocket
/// clients on A and C (C within 250 ms of A, p99 over 30 imports), its rename and its
/// deletion through B too; when the database ends the listening connections
/// (`pg_terminate_backend`), C's client is told to resync and later updates still arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_on_one_replica_reach_clients_of_the_others() {
    if on_postgres() {
        skip(
            Kind::Backend,
            "runs in the SQLite pass: it starts its replicas on PostgreSQL itself",
        );
        return;
    }
    let Some((server, _pg)) = postgres_server("live updates across replicas") else {
        return;
    };
    let _turn = REPLICA_TESTS.lock().await;
    let (store, config, dir) = fresh_store_on(Some(&server)).await;
    let Some(DatabaseUrl::Postgres(url)) = config.database_url.clone() else {
        panic!("a PostgreSQL database");
    };
    let work = tempfile::tempdir().unwrap();
    let (proc_a, a) = serve_replica(&url, work.path());
    let (proc_b, b) = serve_replica(&url, work.path());
    let (proc_c, c) = serve_replica(&url, work.path());
    let ws_url = |base: &str| format!("{}/api/v1/live", base.replace("http://", "ws://"));
    let (mut on_a, _) = tokio_tungstenite::connect_async(ws_url(&a)).await.unwrap();
    let (mut on_c, _) = tokio_tungstenite::connect_async(ws_url(&c)).await.unwrap();
    let second = Duration::from_secs(5);
    next_of(&mut on_a, "hello", second)
        .await
        .expect("hello on A");
    next_of(&mut on_c, "hello", second)
        .await
        .expect("hello on C");
    let http = reqwest::Client::new();
    let body = fixture("edge-cases/EC35/input.jtl");
    let import = |name: String| {
        let http = http.clone();
        let body = body.clone();
        let a = a.clone();
        async move {
            let res = http
                .post(format!("{a}/api/v1/runs?name={name}"))
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 201);
            res.json::<serde_json::Value>().await.unwrap()["runs"][0]["id"]
                .as_i64()
                .unwrap()
        }
    };

    let mut lags_ms = Vec::new();
    let mut last = 0;
    for i in 0..30 {
        let id = import(format!("fan-{i}")).await;
        let (ev_a, at_a) = next_of(&mut on_a, "run_imported", second)
            .await
            .expect("run_imported on A");
        let (ev_c, at_c) = next_of(&mut on_c, "run_imported", second)
            .await
            .unwrap_or_else(|| panic!("run {id} imported on A never reached C"));
        assert_eq!(ev_a["run"]["id"], id);
        assert_eq!(ev_c["run"], ev_a["run"], "C shows the row A shows");
        lags_ms.push(at_c.saturating_duration_since(at_a).as_secs_f64() * 1e3);
        last = id;
    }
    lags_ms.sort_by(f64::total_cmp);
    let p50 = lags_ms[lags_ms.len() / 2];
    let p99 = lags_ms[(lags_ms.len() * 99).div_ceil(100) - 1];
    eprintln!(
        "run_imported on C after A: p50 {p50:.1} ms, p99 {p99:.1} ms, max {:.1} ms over {} imports",
        lags_ms[lags_ms.len() - 1],
        lags_ms.len()
    );
    assert!(p99 < 250.0, "p99 {p99:.1} ms: {lags_ms:?}");

    // A rename and a deletion through B reach C.
    let res = http
        .patch(format!("{b}/api/v1/runs/{last}"))
        .json(&serde_json::json!({"name": "renamed on B"}))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let (ev, _) = next_of(&mut on_c, "run_updated", second)
        .await
        .expect("the rename on B reached C");
    assert_eq!(ev["run"]["name"], "renamed on B");
    let res = http
        .delete(format!("{b}/api/v1/runs/{last}"))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let (ev, _) = next_of(&mut on_c, "run_deleted", second)
        .await
        .expect("the deletion on B reached C");
    assert_eq!(ev["id"], last);

    // The database ends every listening connection: C's client is told to resync, and
    // once the connection is made again updates flow as before.
    let ended = scalar_raw(
        &store,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
    )
    .await;
    assert_eq!(ended, 3, "one listening connection per replica");
    let (ev, _) = next_of(&mut on_c, "resync", Duration::from_secs(10))
        .await
        .expect("C's client is told to resync");
    eprintln!("after the listener was ended: {ev}");
    let mut arrived = None;
    let mut sent = Vec::new();
    for i in 0..10 {
        sent.push(import(format!("after-{i}")).await);
        if let Some((ev, _)) = next_of(&mut on_c, "run_imported", Duration::from_secs(1)).await {
            arrived = Some(ev);
            break;
        }
    }
    let ev = arrived.expect("updates reach C again after the connection was made again");
    assert!(
        sent.iter().any(|id| ev["run"]["id"] == *id),
        "{ev} is one of {sent:?}"
    );
    // C stops gracefully: its client is told to reconnect (1012, service restart).
    let status = std::process::Command::new("kill")
        .args(["-TERM", &proc_c.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let close = async {
        use futures_util::StreamExt;
        while let Some(Ok(msg)) = on_c.next().await {
            if let tokio_tungstenite::tungstenite::Message::Close(frame) = msg {
                return frame.map(|f| u16::from(f.code));
            }
        }
        None
    };
    let code = tokio::time::timeout(Duration::from_secs(10), close)
        .await
        .expect("C closes its websocket when it stops");
    assert_eq!(code, Some(1012), "a close that says: reconnect");
    // The replicas end before their database is dropped.
    drop((proc_a, proc_b, proc_c));
    drop(dir);
}

/// Scrapes counted by a replica (`harrier_scrapes_total` summed over its targets).
async fn scrapes_of(http: &reqwest::Client, base: &str) -> f64 {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("harrier_scrapes_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Hits per exporter path between `from` and `to`.
fn hits_between(hits: &[(usize, Instant)], paths: usize, from: Instant, to: Instant) -> Vec<usize> {
    let mut n = vec![0; paths];
    for (p, at) in hits {
        if *at >= from && *at < to {
            n[*p] += 1;
        }
    }
    n
}

/// 300 targets (one loopback exporter serving 300 paths, scraped every second) shared by
/// replicas on one PostgreSQL database: with three, no target is scraped by two (at most
/// one scrape a second each) and each replica scrapes about a third; a fourth takes about
/// a quarter; a replica killed with SIGKILL has its targets picked up within its
/// heartbeat time-out (3 s), a heartbeat (1 s) and an interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_the_scrape_targets() {
    if on_postgres() {
        skip(
            Kind::Backend,
            "runs in the SQLite pass: it starts its replicas on PostgreSQL itself",
        );
        return;
    }
    let Some((server, _pg)) = postgres_server("scrape targets shared by replicas") else {
        return;
    };
    let _turn = REPLICA_TESTS.lock().await;
    const PATHS: usize = 300;
    let hits: Arc<std::sync::Mutex<Vec<(usize, Instant)>>> = Arc::default();
    let exporter = {
        let hits = hits.clone();
        axum::Router::new().route(
            "/m/{i}",
            axum::routing::get(move |axum::extract::Path(i): axum::extract::Path<usize>| {
                let hits = hits.clone();
                async move {
                    hits.lock().unwrap().push((i, Instant::now()));
                    "# no routes here\n"
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let exporter_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, exporter).await });

    let (_store, config, dir) = fresh_store_on(Some(&server)).await;
    let Some(DatabaseUrl::Postgres(url)) = config.database_url.clone() else {
        panic!("a PostgreSQL database");
    };
    let work = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (proc_a, a) = serve_replica(&url, work.path());
    let (mut proc_b, b) = serve_replica(&url, work.path());
    let (proc_c, c) = serve_replica(&url, work.path());
    let http = reqwest::Client::new();
    // Added through A, sixteen at a time.
    {
        use futures_util::StreamExt;
        let statuses: Vec<(u16, String)> = futures_util::stream::iter(0..PATHS)
            .map(|i| {
                let http = http.clone();
                let a = a.clone();
                async move {
                    let res = http
                        .post(format!("{a}/api/v1/targets"))
                        .json(&serde_json::json!({
                            "name": format!("exporter-{i}"),
                            "url": format!("http://{exporter_addr}/m/{i}"),
                            "interval_s": 1,
                            "timeout_s": 0.9,
                        }))
                        .send()
                        .await
                        .unwrap();
                    (res.status().as_u16(), res.text().await.unwrap())
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        for (status, body) in statuses {
            assert_eq!(status, 201, "{body}");
        }
    }
    // Every target scraped (B and C learn of them at their next heartbeat).
    let added = Instant::now();
    eprintln!(
        "{PATHS} targets added in {} ms",
        added.duration_since(started).as_millis()
    );
    loop {
        let seen = hits_between(&hits.lock().unwrap(), PATHS, added, Instant::now());
        if seen.iter().all(|n| *n > 0) {
            break;
        }
        assert!(
            added.elapsed() < Duration::from_secs(15),
            "targets never scraped: {:?}",
            seen.iter()
                .enumerate()
                .filter(|(_, n)| **n == 0)
                .map(|(i, _)| i)
                .take(10)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("all scraped after {} ms", added.elapsed().as_millis());
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Ten intervals with three replicas.
    let replicas = [&a, &b, &c];
    let mut before = Vec::new();
    for r in replicas {
        before.push(scrapes_of(&http, r).await);
    }
    let from = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let to = Instant::now();
    let mut share = Vec::new();
    for (r, b0) in replicas.iter().zip(&before) {
        share.push(scrapes_of(&http, r).await - b0);
    }
    let n = hits_between(&hits.lock().unwrap(), PATHS, from, to);
    let total: f64 = share.iter().sum();
    eprintln!(
        "three replicas, 10 s: scrapes per replica {share:?} (of {total}); per target min {} max {}",
        n.iter().min().unwrap(),
        n.iter().max().unwrap()
    );
    assert!(
        n.iter().all(|k| *k <= 11),
        "a target scraped more than once a second (by two replicas): {:?}",
        n.iter()
            .enumerate()
            .filter(|(_, k)| **k > 11)
            .take(10)
            .collect::<Vec<_>>()
    );
    assert!(n.iter().all(|k| *k >= 3), "a target left unscraped: {n:?}");
    for s in &share {
        let part = s / total;
        assert!((0.2..=0.47).contains(&part), "shares {share:?}");
    }

    // A fourth replica takes about a quarter.
    let (proc_d, d) = serve_replica(&url, work.path());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let replicas = [&a, &b, &c, &d];
    let mut before = Vec::new();
    for r in replicas {
        before.push(scrapes_of(&http, r).await);
    }
    let from = Instant::now();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let to = Instant::now();
    let mut share = Vec::new();
    for (r, b0) in replicas.iter().zip(&before) {
        share.push(scrapes_of(&http, r).await - b0);
    }
    let total: f64 = share.iter().sum();
    let n = hits_between(&hits.lock().unwrap(), PATHS, from, to);
    eprintln!("four replicas, 5 s: scrapes per replica {share:?} (of {total})");
    assert!(
        n.iter().all(|k| *k <= 6),
        "a target scraped twice after the fourth joined"
    );
    let part = share[3] / total;
    assert!((0.1..=0.45).contains(&part), "the fourth's share {share:?}");

    // B dies without a word: its targets are picked up.
    proc_b.0.kill().unwrap();
    let _ = proc_b.0.wait();
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let all = hits.lock().unwrap().clone();
    let mut worst = Duration::ZERO;
    for p in 0..PATHS {
        let mut times: Vec<Instant> = all
            .iter()
            .filter(|(q, _)| *q == p)
            .map(|(_, t)| *t)
            .collect();
        times.sort();
        let last_before = times
            .iter()
            .rev()
            .find(|t| **t < killed)
            .copied()
            .unwrap_or(killed);
        let first_after = times
            .iter()
            .find(|t| **t >= killed + Duration::from_millis(50))
            .copied()
            .unwrap_or_else(|| panic!("target {p} not scraped in 10 s after a replica died"));
        worst = worst.max(first_after.saturating_duration_since(last_before));
    }
    eprintln!(
        "a replica killed: the longest gap in a target's scrapes {} ms",
        worst.as_millis()
    );
    assert!(
        // Its heartbeat expires (3 s), the others read the replicas (each second), then
        // the target's next tick; the gap also holds the interval before the kill.
        // (and 3 s for a loaded machine).
        worst <= Duration::from_millis(3_000 + 1_000 + 2 * 1_000 + 3_000),
        "picked up after {worst:?}"
    );
    drop((proc_a, proc_c, proc_d));
    drop(dir);
}

/// A free TCP port on 127.0.0.1 (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Three replicas behind haproxy (Debian's), restarted one after the other (SIGTERM, then
/// started again) while wrk reads `/api/v1/runs` through haproxy and a k6-style writer
/// streams points to `/api/v2/write`: no failed request, and every acknowledged point is
/// stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_behind_haproxy_fails_no_request_and_loses_no_point() {
    if on_postgres() {
        skip(
            Kind::Backend,
            "runs in the SQLite pass: it starts its replicas on PostgreSQL itself",
        );
        return;
    }
    let (haproxy, wrk) = ("/usr/sbin/haproxy", "/usr/bin/wrk");
    if !std::path::Path::new(haproxy).exists() || !std::path::Path::new(wrk).exists() {
        skip(
            Kind::Tool,
            "a rolling restart needs Debian's haproxy and wrk (scripts/test.sh installs them)",
        );
        return;
    }
    let Some((server, _pg)) = postgres_server("a rolling restart of replicas") else {
        return;
    };
    let _turn = REPLICA_TESTS.lock().await;
    let (_store, config, dir) = fresh_store_on(Some(&server)).await;
    let Some(DatabaseUrl::Postgres(url)) = config.database_url.clone() else {
        panic!("a PostgreSQL database");
    };
    let work = tempfile::tempdir().unwrap();
    let ports = [free_port(), free_port(), free_port()];
    let mut replicas: Vec<crate::server::Proc> = ports
        .iter()
        .map(|p| serve_replica_on(&url, work.path(), *p).0)
        .collect();
    let front = free_port();
    let servers: String = ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("  server r{i} 127.0.0.1:{p} check inter 200ms fall 1 rise 2\n"))
        .collect();
    // Requests that found a replica gone are retried on another (connection refused or
    // closed before any answer: nothing was done); one server connection per request.
    let cfg = format!(
        "global\n  maxconn 512\n\
         defaults\n  mode http\n  timeout connect 1s\n  timeout client 20s\n  timeout server 20s\n\
           retries 3\n  option redispatch 1\n  retry-on conn-failure empty-response\n\
           option http-buffer-request\n  http-reuse never\n  option http-server-close\n\
         frontend front\n  bind 127.0.0.1:{front}\n  default_backend replicas\n\
         backend replicas\n  balance roundrobin\n  option httpchk GET /healthz\n{servers}"
    );
    let cfg_path = work.path().join("haproxy.cfg");
    std::fs::write(&cfg_path, cfg).unwrap();
    let _lb = crate::server::Proc(
        std::process::Command::new(haproxy)
            .args(["-db", "-f"])
            .arg(&cfg_path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start haproxy"),
    );
    let base = format!("http://127.0.0.1:{front}");
    let http = reqwest::Client::new();
    let up = Instant::now();
    while http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .ok()
        != Some(200)
    {
        assert!(
            up.elapsed() < Duration::from_secs(10),
            "haproxy never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await; // every replica seen healthy

    // The writer: 5 points per request, every 20 ms, until told to stop.
    let stop = CancellationToken::new();
    let writer = {
        let (http, base, stop) = (http.clone(), base.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut acked, mut failed) = (Vec::new(), Vec::new());
            let mut n = 0u64;
            while !stop.is_cancelled() {
                let now_ns = harrier::now_ms() * 1_000_000;
                let mut body = String::new();
                let mut values = Vec::new();
                for k in 0..5 {
                    n += 1;
                    values.push(10 + (n * n) % 97);
                    body.push_str(&format!(
                        "http_req_duration,expected_response=true,name=GET\\ /items,status=200,testid=rolling value={} {}\n",
                        values[k as usize],
                        now_ns + k
                    ));
                }
                match http
                    .post(format!("{base}/api/v2/write?bucket=k6&precision=ns"))
                    .body(body)
                    .send()
                    .await
                {
                    Ok(r) if r.status().as_u16() == 204 => acked.extend(values),
                    Ok(r) => failed.push(format!("{}", r.status())),
                    Err(e) => failed.push(e.to_string()),
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (acked, failed)
        })
    };
    let reader = tokio::task::spawn_blocking({
        let target = format!("{base}/api/v1/runs");
        move || {
            std::process::Command::new(wrk)
                .args(["-t1", "-c4", "-d14s", &target])
                .output()
                .expect("run wrk")
        }
    });

    // One replica after the other: SIGTERM, wait for it to end, start it again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (i, port) in ports.iter().enumerate() {
        let pid = replicas[i].0.id();
        let ok = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        let asked = Instant::now();
        while replicas[i].0.try_wait().unwrap().is_none() {
            assert!(
                asked.elapsed() < Duration::from_secs(10),
                "replica {i} did not stop"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!("replica {i} stopped in {} ms", asked.elapsed().as_millis());
        replicas[i] = serve_replica_on(&url, work.path(), *port).0;
        tokio::time::sleep(Duration::from_secs(2)).await; // seen healthy again
    }
    let wrk_out = reader.await.unwrap();
    stop.cancel();
    let (acked, failed) = writer.await.unwrap();
    let report = String::from_utf8_lossy(&wrk_out.stdout).to_string();
    eprintln!("{report}");
    assert!(wrk_out.status.success(), "{report}");
    assert!(
        !report.contains("Non-2xx") && !report.contains("Socket errors"),
        "wrk saw failed requests:\n{report}"
    );
    let requests: u64 = report
        .lines()
        .find(|l| l.contains("requests in"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .expect("wrk's request count");
    assert!(requests > 100, "{report}");
    assert!(failed.is_empty(), "writes failed: {failed:?}");

    // Every acknowledged point is stored, in one run whichever replica took it (it
    // closes 2 s after its last point), with the figures of exactly the values sent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let runs: serde_json::Value = http
        .get(format!("{base}/api/v1/runs?limit=1000"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let items = runs
        .as_array()
        .cloned()
        .or_else(|| runs["runs"].as_array().cloned())
        .unwrap_or_default();
    let stored: u64 = items.iter().filter_map(|r| r["count"].as_u64()).sum();
    eprintln!(
        "rolling restart: wrk {requests} requests, 0 failed; {} points acknowledged in {} runs, {stored} stored",
        acked.len(),
        items.len()
    );
    // Writes went on through the restarts (how many depends on the machine's load: 450
    // to 2,000 seen).
    assert!(acked.len() >= 100, "{}", acked.len());
    assert_eq!(
        (items.len(), stored),
        (1, acked.len() as u64),
        "acknowledged points lost, doubled or split over runs: {items:?}"
    );
    assert_eq!(items[0]["status"], "complete", "{:?}", items[0]);
    let run: serde_json::Value = http
        .get(format!("{base}/api/v1/runs/{}", items[0]["id"]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_exact_figures(&run["overall"], &acked);
    drop(replicas);
    drop(dir);
}

/// One k6 stream and one JMeter stream spread over three replicas (each write to the next
/// replica; eight k6 writers at once, so their first writes race to open the run) are one
/// run each, with exactly the figures of everything sent; a replica ends the k6 run
/// another one opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_spread_over_replicas_is_one_run_with_exact_figures() {
    if on_postgres() {
        skip(
            Kind::Backend,
            "runs in the SQLite pass: it starts its replicas on PostgreSQL itself",
        );
        return;
    }
    let Some((server, _pg)) = postgres_server("a live run spread over replicas") else {
        return;
    };
    let _turn = REPLICA_TESTS.lock().await;
    let (_store, config, _dir) = fresh_store_on(Some(&server)).await;
    let Some(DatabaseUrl::Postgres(url)) = config.database_url.clone() else {
        panic!("a PostgreSQL database");
    };
    let work = tempfile::tempdir().unwrap();
    let replicas: Vec<(crate::server::Proc, String)> =
        (0..3).map(|_| serve_replica(&url, work.path())).collect();
    let bases: Arc<Vec<String>> = Arc::new(replicas.iter().map(|r| r.1.clone()).collect());
    let http = reqwest::Client::new();

    // k6: 8 writers × 25 writes × 4 points over two labels, every 17th point failed.
    let start_ms = harrier::now_ms() - 60_000;
    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let mut writers = Vec::new();
    for w in 0..8u64 {
        let (http, bases, barrier) = (http.clone(), bases.clone(), barrier.clone());
        writers.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut sent: Vec<(&'static str, u64, bool)> = Vec::new();
            for i in 0..25u64 {
                let mut body = String::new();
                for k in 0..4u64 {
                    let n = w * 1_000 + i * 4 + k;
                    let value = 5 + (n * 7_919) % 400;
                    let (label, tag) = if n % 3 == 0 {
                        ("POST /orders", "POST\\ /orders")
                    } else {
                        ("GET /items", "GET\\ /items")
                    };
                    let ok = n % 17 != 0;
                    let ts_ns = (start_ms + (n as i64 * 13) % 50_000) * 1_000_000 + k as i64;
                    body.push_str(&format!(
                        "http_req_duration,expected_response={ok},name={tag},status={},testid=spread value={value} {ts_ns}\n",
                        if ok { 200 } else { 500 }
                    ));
                    sent.push((label, value, ok));
                }
                let base = &bases[((w + i) % 3) as usize];
                let r = http
                    .post(format!("{base}/api/v2/write?bucket=k6&precision=ns"))
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status().as_u16(), 204, "{}", r.text().await.unwrap());
            }
            sent
        }));
    }
    // JMeter: one label's 5-second intervals, each send to the next replica.
    let mut jmeter_count = 0u64;
    let mut jmeter_sum = 0.0f64;
    for k in 0..9u64 {
        let t_ns = (start_ms + 5_000 * (k as i64 + 1)) * 1_000_000;
        let (count, avg) = (40 + k * 3, 20.0 + k as f64);
        jmeter_count += count;
        jmeter_sum += avg * count as f64;
        let body = format!(
            "jmeter,application=spread,transaction=GET\\ /slow,statut=all count={count},avg={avg},min=2.0,max={},hit={count},sb=100,rb=400 {t_ns}\n\
             jmeter,application=spread,transaction=GET\\ /slow,statut=ko count=1,avg=2.0 {t_ns}\n",
            100 + k
        );
        let r = http
            .post(format!("{}/write?db=jmeter", bases[k as usize % 3]))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204, "{}", r.text().await.unwrap());
    }
    let mut sent = Vec::new();
    for w in writers {
        sent.extend(w.await.unwrap());
    }

    let list: serde_json::Value = http
        .get(format!("{}/api/v1/runs", bases[0]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let items = list
        .as_array()
        .cloned()
        .or_else(|| list["runs"].as_array().cloned())
        .unwrap_or_default();
    let of_tool = |tool: &str| -> Vec<serde_json::Value> {
        items
            .iter()
            .filter(|r| r["tool"] == tool)
            .cloned()
            .collect()
    };
    let (k6, jmeter) = (of_tool("k6"), of_tool("jmeter"));
    eprintln!(
        "spread over 3 replicas: {} k6 points in {} run(s), {jmeter_count} JMeter samples in {} run(s)",
        sent.len(),
        k6.len(),
        jmeter.len()
    );
    assert_eq!((k6.len(), jmeter.len()), (1, 1), "{items:?}");
    assert_eq!(k6[0]["status"], "live");

    // A replica that did not open it ends it.
    let id = k6[0]["id"].as_i64().unwrap();
    let r = http
        .post(format!("{}/api/v1/runs/{id}/end", bases[2]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let run: serde_json::Value = http
        .get(format!("{}/api/v1/runs/{id}", bases[1]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "complete");
    let values: Vec<u64> = sent.iter().map(|s| s.1).collect();
    assert_exact_figures(&run["overall"], &values);
    let errors = sent.iter().filter(|s| !s.2).count() as u64;
    assert_eq!(
        run["overall"]["errors"].as_u64(),
        Some(errors),
        "{}",
        run["overall"]
    );
    for label in ["GET /items", "POST /orders"] {
        let stats = run["labels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["label"] == label)
            .unwrap_or_else(|| panic!("label {label}: {}", run["labels"]));
        let mine: Vec<u64> = sent.iter().filter(|s| s.0 == label).map(|s| s.1).collect();
        assert_exact_figures(stats, &mine);
    }

    let jm: serde_json::Value = http
        .get(format!("{}/api/v1/runs/{}", bases[0], jmeter[0]["id"]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let o = &jm["overall"];
    assert_eq!(o["count"].as_u64(), Some(jmeter_count), "{o}");
    assert_eq!(o["errors"].as_u64(), Some(9), "{o}");
    assert_eq!(o["max_ms"].as_f64(), Some(108.0), "{o}");
    let mean = o["mean_ms"].as_f64().unwrap();
    assert!(
        (mean - jmeter_sum / jmeter_count as f64).abs() < 1e-9,
        "{o}"
    );
    drop(replicas);
}

/// Checks a run's (or label's) figures against the elapsed values sent (ms): count, min,
/// max, mean and the nearest-rank percentiles (docs/numbers.md).
fn assert_exact_figures(stats: &serde_json::Value, values: &[u64]) {
    let mut v = values.to_vec();
    v.sort_unstable();
    let n = v.len() as u64;
    let rank = |p: f64| v[(harrier::domain::runs::nearest_rank(n, p) - 1) as usize] as f64;
    let mean = v.iter().sum::<u64>() as f64 / n as f64;
    assert_eq!(stats["count"].as_u64(), Some(n), "{stats}");
    assert_eq!(stats["min_ms"].as_f64(), Some(v[0] as f64), "{stats}");
    assert_eq!(
        stats["max_ms"].as_f64(),
        Some(v[v.len() - 1] as f64),
        "{stats}"
    );
    assert_eq!(stats["mean_ms"].as_f64(), Some(mean), "{stats}");
    for (p, key) in [
        (50.0, "p50_ms"),
        (90.0, "p90_ms"),
        (95.0, "p95_ms"),
        (99.0, "p99_ms"),
    ] {
        assert_eq!(stats[key].as_f64(), Some(rank(p)), "{key}: {stats}");
    }
}
