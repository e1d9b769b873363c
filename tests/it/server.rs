//! The `harrier serve` process under abuse: half-open connections (slowloris) with a low
//! file limit, shutdown while connections hang, a second server on the same database,
//! and two first opens of a new database at once.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use harrier::store::Store;

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

/// A child process killed when dropped.
pub(crate) struct Proc(pub(crate) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `harrier serve` on a free port of 127.0.0.1 with `config` as harrier.toml,
/// optionally under a lower open-file limit; returns the process and its base URL.
pub(crate) fn start(dir: &Path, config: &str, nofile: Option<u32>) -> (Proc, String) {
    let toml = dir.join("harrier.toml");
    std::fs::write(&toml, config).unwrap();
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}")).arg("--").arg(HARRIER);
            c
        }
        None => Command::new(HARRIER),
    };
    let mut child = cmd
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&toml)
        .arg("--db")
        .arg(dir.join("h.db"))
        .env("HARRIER_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start harrier");
    let url = printed_url(&mut child);
    (Proc(child), url)
}

/// The base URL a started `harrier serve` prints first on its standard output (piped).
pub(crate) fn printed_url(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .expect("harrier prints its URL");
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .trim_end_matches("/console")
        .to_string()
}

fn addr_of(base: &str) -> String {
    base.trim_start_matches("http://").to_string()
}

/// GET `path` on a new connection, with a time-out; `Some(status line)` when answered.
fn get_within(addr: &str, path: &str, limit: Duration) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    (!line.is_empty()).then_some(line)
}

#[test]
fn half_open_connections_time_out_and_the_console_stays_reachable() {
    let dir = tempfile::tempdir().unwrap();
    let (mut proc, base) = start(
        dir.path(),
        "self_scrape = false\n[server]\nmax_connections = 200\nheader_timeout_s = 2\nshutdown_grace_s = 3\n",
        Some(1024),
    );
    let addr = addr_of(&base);
    assert!(get_within(&addr, "/healthz", Duration::from_secs(5)).is_some());

    // 1,100 connections that send part of a request head and then nothing: more than
    // the server's 1,024 open files allow.
    let mut held = Vec::new();
    for _ in 0..1100 {
        let mut s = TcpStream::connect(&addr).expect("connect (raise this process's file limit?)");
        let _ = s.write_all(b"GET /console HTTP/1.1\r\nHost: x\r\n");
        held.push(s);
    }
    // Each is dropped after the 2 s header time-out, 200 at a time: the console answers
    // within seconds while they are all still open on this side.
    let t0 = Instant::now();
    let mut answered = None;
    while t0.elapsed() < Duration::from_secs(30) {
        if let Some(line) = get_within(&addr, "/healthz", Duration::from_secs(10)) {
            answered = Some(line);
            break;
        }
    }
    let waited = t0.elapsed();
    assert!(
        answered.as_deref().is_some_and(|l| l.contains(" 200 ")),
        "no answer within {waited:?}: {answered:?}"
    );
    assert!(
        waited < Duration::from_secs(25),
        "answered only after {waited:?}"
    );
    assert!(
        proc.0.try_wait().unwrap().is_none(),
        "the server is still running"
    );

    // A half-open connection was closed by the server (it reads end of file), not kept.
    let mut first = held.remove(0);
    first
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 256];
    let n = std::io::Read::read(&mut first, &mut buf).unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(
        n == 0 || text.starts_with("HTTP/1.1 408") || text.starts_with("HTTP/1.1 4"),
        "the half-open connection got {text:?}"
    );

    // SIGTERM with connections still hanging: the process ends within its grace period.
    let pid = proc.0.id().to_string();
    for _ in 0..50 {
        let mut s = TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(b"GET /console HTTP/1.1\r\n");
        held.push(s);
    }
    let t0 = Instant::now();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let mut exited = None;
    while t0.elapsed() < Duration::from_secs(15) {
        if let Some(status) = proc.0.try_wait().unwrap() {
            exited = Some(status);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = t0.elapsed();
    assert!(exited.is_some(), "still running {took:?} after SIGTERM");
    assert!(took < Duration::from_secs(6), "SIGTERM took {took:?}");
    drop(held);
}

#[tokio::test]
async fn a_second_serve_on_the_same_database_stops_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_first, base) = start(dir.path(), "self_scrape = false\n", None);
    let client = reqwest::Client::new();
    // An open live run, which a starting server would otherwise mark complete.
    let t0_ns = 1_700_000_000_000_000_000i64;
    let lines = format!(
        "http_reqs,expected_response=true,name=a,status=200,testid=s value=1 {t0_ns}\n\
         http_req_duration,expected_response=true,name=a,status=200,testid=s value=12 {t0_ns}\n"
    );
    let r = client
        .post(format!("{base}/api/v2/write?org=o&bucket=k6&precision=ns"))
        .body(lines)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let runs: serde_json::Value = client
        .get(format!("{base}/api/v1/runs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = runs["runs"][0]["id"].as_i64().expect("the live run");

    let out = Command::new(HARRIER)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("h.db"))
        .env("HARRIER_LOG", "warn")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("another harrier serve is using the database"),
        "{stderr}"
    );

    let run: serde_json::Value = client
        .get(format!("{base}/api/v1/runs/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        run["status"], "live",
        "the first server's live run is untouched"
    );
}

#[tokio::test]
async fn two_first_opens_of_a_new_database_both_succeed() {
    if crate::helpers::sqlite_only("two processes creating one SQLite file") {
        return;
    }
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("new.db");
        let (a, b) = tokio::join!(Store::open(&db), Store::open(&db));
        assert!(a.is_ok(), "round {round}: {:?}", a.err());
        assert!(b.is_ok(), "round {round}: {:?}", b.err());
        assert_eq!(b.unwrap().list_runs().await.unwrap().len(), 0);
    }
}

/// A JMeter CSV of `labels` distinct labels, 3 samples each (about 75 bytes a row).
fn many_labels_jtl(labels: usize, seed: usize) -> String {
    let mut out = String::from("timeStamp,elapsed,label,responseCode,success,bytes,allThreads\n");
    for i in 0..labels * 3 {
        let label = i % labels;
        out.push_str(&format!(
            "{},{},GET /item/{seed}-{label},200,true,512,{}\n",
            1_700_000_000_000i64 + (i as i64) * 3,
            20 + (i * 7919 + seed) % 180,
            1 + i % 20
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_uploads_all_import() {
    let dir = tempfile::tempdir().unwrap();
    let (_proc, base) = start(dir.path(), "self_scrape = false\n", None);
    let client = reqwest::Client::new();
    let uploads = (0..8).map(|seed| {
        let client = client.clone();
        let url = format!("{base}/api/v1/runs?format=jmeter-csv&name=upload-{seed}");
        let body = many_labels_jtl(2_000, seed);
        tokio::spawn(async move {
            match client.post(url).body(body).send().await {
                Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
                Err(e) => (0, format!("{e:?}")),
            }
        })
    });
    let results = futures_util::future::join_all(uploads).await;
    for r in &results {
        let (status, body) = r.as_ref().unwrap();
        assert_eq!(*status, 201, "{body}");
    }
    let runs: serde_json::Value = client
        .get(format!("{base}/api/v1/runs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 8);
}

/// `kill -9` while a k6-like writer streams: after a restart the run holds every point
/// that was acknowledged with 204 (and none that was never sent).
#[tokio::test]
async fn points_acknowledged_before_a_kill_9_are_stored() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    let dir = tempfile::tempdir().unwrap();
    let (mut first, base) = start(dir.path(), "self_scrape = false\n", None);
    let acked = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let per_batch = 50u64;
    let writer = {
        let (acked, sent, stop, base) = (acked.clone(), sent.clone(), stop.clone(), base.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap();
            let t0_ms = 1_700_000_000_000i64;
            let mut batch = 0i64;
            while !stop.load(Ordering::SeqCst) {
                let mut body = String::new();
                for i in 0..per_batch as i64 {
                    let end_ns = (t0_ms + batch * 1000 + i * 20) * 1_000_000;
                    body.push_str(&format!(
                        "http_req_duration,expected_response=true,name=GET\\ /p{},status=200,testid=crash value={} {end_ns}\n",
                        i % 5,
                        10 + i
                    ));
                }
                // Both write endpoints, alternately.
                let url = if batch % 2 == 0 {
                    format!("{base}/write?db=k6&precision=ns")
                } else {
                    format!("{base}/api/v2/write?org=o&bucket=k6&precision=ns")
                };
                sent.fetch_add(per_batch, Ordering::SeqCst);
                match client.post(url).body(body).send().await {
                    Ok(r) if r.status() == 204 => {
                        acked.fetch_add(per_batch, Ordering::SeqCst);
                    }
                    Ok(r) => panic!("write answered {}", r.status()),
                    Err(_) => break, // the server is gone
                }
                batch += 1;
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while acked.load(Ordering::SeqCst) < 100 * per_batch {
        assert!(Instant::now() < deadline, "writes too slow");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.0.kill().unwrap(); // SIGKILL, mid-stream
    first.0.wait().unwrap();
    stop.store(true, Ordering::SeqCst);
    writer.await.unwrap();
    let (acked, sent) = (acked.load(Ordering::SeqCst), sent.load(Ordering::SeqCst));

    let (_second, base) = start(dir.path(), "self_scrape = false\n", None);
    let runs: serde_json::Value = reqwest::get(format!("{base}/api/v1/runs"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let count = runs[0]["count"].as_u64().unwrap();
    assert!(
        count >= acked && count <= sent,
        "stored {count}, acknowledged {acked}, sent {sent}"
    );
    assert_eq!(count % per_batch, 0, "whole writes only: {count}");
    assert_eq!(runs[0]["status"], "complete");
}

/// 600 connections that send part of a request head and reopen as soon as the server
/// closes them — more than its 512 slots: the console answers within moments all the
/// while (it waited for the 10 s header time-out before), and the churning connections do
/// get closed and reopened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churning_half_open_connections_do_not_make_the_console_wait() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let dir = tempfile::tempdir().unwrap();
    let (proc, base) = start(dir.path(), "self_scrape = false\n", Some(4096));
    let addr = addr_of(&base);
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let mut churners = Vec::new();
    for _ in 0..600 {
        let (addr, stop, opened) = (addr.clone(), stop.clone(), opened.clone());
        churners.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let Ok(mut s) = tokio::net::TcpStream::connect(&addr).await else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                opened.fetch_add(1, Ordering::Relaxed);
                let _ = s.write_all(b"GET /console HTTP/1.1\r\nHost: x\r\n").await;
                let mut buf = [0u8; 512];
                // Until the server closes it (or the test ends).
                loop {
                    match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => break,
                        Ok(Ok(_)) => {}
                        Err(_) if stop.load(Ordering::Relaxed) => return,
                        Err(_) => {}
                    }
                }
            }
        }));
    }
    // Every slot taken by the churning connections.
    while opened.load(Ordering::Relaxed) < 600 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut took = Vec::new();
    for i in 0..40 {
        let path = if i % 2 == 0 {
            "/console"
        } else {
            "/api/v1/runs"
        };
        let t0 = Instant::now();
        let r = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        r.bytes().await.unwrap();
        took.push(t0.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let reopened = opened.load(Ordering::Relaxed);
    for c in churners {
        let _ = c.await;
    }
    took.sort();
    let p95 = took[took.len() * 95 / 100 - 1];
    // The test's bound is loose (a busy machine, a debug build); the benchmark measures.
    assert!(
        p95 < Duration::from_secs(2),
        "console p95 {p95:?} while 600 connections churn: {took:?}"
    );
    assert!(
        reopened > 600,
        "the server closed idle connections to make room ({reopened} opened)"
    );
    drop(proc);
}
