//! Hostile input (issue 17): every input costs memory and time bounded by its size and the
//! documented limits, never by values inside it, and the server stays up.

use std::io::Write;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};

use crate::helpers::{TestApp, spawn_app};

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

const JTL_HEADER: &str = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect\n";

/// A JTL row starting at `start_ms` and taking `elapsed_ms`.
fn jtl_row(start_ms: &str, elapsed_ms: &str, label: &str) -> String {
    format!(
        "{start_ms},{elapsed_ms},{label},200,OK,Group 1-1,text,true,,120,80,1,1,http://x/,5,0,1\n"
    )
}

/// Imports `body` as a JMeter CSV run in scenario `scenario`; the one run's JSON.
async fn import_jtl(app: &TestApp, scenario: &str, body: String) -> serde_json::Value {
    let r = app
        .import(
            &format!("format=jmeter-csv&scenario={scenario}"),
            body.into_bytes(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    r.json()["runs"][0].clone()
}

/// The run's rejected rows as (line, reason).
async fn rejected(app: &TestApp, id: i64) -> Vec<(u64, String)> {
    let r = app.get(&format!("/api/v1/runs/{id}/rejected")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    r.json()["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["line"].as_u64().unwrap(),
                x["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The pages that read a run's per-second data answer, each within `budget`.
async fn pages_answer(app: &TestApp, id: i64, scenario: &str, budget: Duration) {
    for uri in [
        format!("/api/v1/runs/{id}"),
        format!("/api/v1/runs/{id}/timeseries"),
        format!("/console/runs/{id}"),
        format!("/api/v1/scenarios/{scenario}"),
        format!("/console/scenarios/{scenario}"),
    ] {
        let t = Instant::now();
        let r = app.get(&uri).await;
        assert_eq!(r.status, StatusCode::OK, "{uri}: {}", r.text());
        assert!(t.elapsed() < budget, "{uri} took {:?}", t.elapsed());
    }
}

#[tokio::test]
async fn a_jtl_whose_timestamp_is_i64_max_imports_with_that_row_rejected() {
    let app = spawn_app().await;
    // The 263-byte file of the issue: two samples, one stamped 9223372036854775807.
    let body = format!(
        "{JTL_HEADER}{}{}",
        jtl_row("1700000000000", "120", "Login"),
        jtl_row("9223372036854775807", "80", "Login")
    );
    let t = Instant::now();
    let run = import_jtl(&app, "max-ts", body).await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "import took {:?}",
        t.elapsed()
    );
    assert_eq!(run["samples"], 1);
    assert_eq!(run["rejected_rows"], 1);
    let id = run["id"].as_i64().unwrap();
    let rows = rejected(&app, id).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, 3, "the row's line: {rows:?}");
    assert!(rows[0].1.contains("9223372036854775807"), "{rows:?}");
    assert!(
        rows[0].1.contains("outside the accepted window"),
        "{rows:?}"
    );
    pages_answer(&app, id, "max-ts", Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_year_9999_timestamp_and_an_absurd_elapsed_are_rejected_quickly() {
    let app = spawn_app().await;
    let mut body = JTL_HEADER.to_string();
    for i in 0..600 {
        let start = 1_700_000_000_000i64 + i * 500;
        body.push_str(&jtl_row(&start.to_string(), "95", "Search"));
    }
    // 9999-12-31T23:59:59Z, then an elapsed of 1.8e19 ms (both as the issue found them).
    body.push_str(&jtl_row("253402300799000", "95", "Search"));
    body.push_str(&jtl_row("1700000001000", "18000000000000000000", "Search"));
    let t = Instant::now();
    let run = import_jtl(&app, "year-9999", body).await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "import took {:?} (34 s before the fix)",
        t.elapsed()
    );
    assert_eq!(run["samples"], 600);
    assert_eq!(run["rejected_rows"], 2);
    let id = run["id"].as_i64().unwrap();
    let rows = rejected(&app, id).await;
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [602, 603],
        "{rows:?}"
    );
    assert!(rows[1].1.contains("elapsed"), "{rows:?}");
    let r = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(
        r["overall"]["max_ms"], 95.0,
        "no absurd value in the figures"
    );
    let last_end = r["overall"]["last_end_ms"].as_i64().unwrap();
    assert!(last_end < 1_700_000_400_000, "{last_end}");
    pages_answer(&app, id, "year-9999", Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_line_protocol_point_with_an_absurd_timestamp_is_rejected_and_the_run_completes() {
    let app = spawn_app().await;
    let ok_ns = 1_700_000_000_000i64 * 1_000_000;
    let body = format!(
        "http_req_duration,expected_response=true,name=GET\\ /a,status=200,testid=absurd value=42 {ok_ns}\n\
         http_req_duration,expected_response=true,name=GET\\ /a,status=200,testid=absurd value=42 9223372036854775807\n"
    );
    let r = app
        .send(
            Request::post("/api/v2/write?org=o&bucket=k6&precision=ns")
                .body(Body::from(body))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
    assert!(r.text().contains("line 2"), "{}", r.text());
    let runs = app.get("/api/v1/runs").await.json();
    let id = runs["runs"][0]["id"].as_i64().unwrap();
    // The run completes (this is where the server died before: its draws were sized by
    // the span between the two timestamps).
    assert!(app.state.live_runs.end(id).await);
    let t = Instant::now();
    app.state.live_runs.tick().await;
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let run = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(run["status"], "complete");
    assert_eq!(run["overall"]["count"], 1);
    pages_answer(&app, id, "absurd", Duration::from_secs(5)).await;
}

/// Peak resident memory (VmHWM, kB) of process `pid` while it runs, read from
/// /proc/PID/status every 5 ms until it exits; with its exit status.
fn peak_rss_kb(child: &mut std::process::Child) -> (std::process::ExitStatus, u64) {
    let path = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Some(kb) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kb);
        }
        if let Some(status) = child.try_wait().unwrap() {
            return (status, peak);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("harrier import still running after 60 s (peak {peak} kB)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn importing_a_run_with_a_far_future_row_stays_small_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("far.jtl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    f.write_all(JTL_HEADER.as_bytes()).unwrap();
    for i in 0..20_000i64 {
        let start = 1_700_000_000_000 + i * 50;
        let label = ["Login", "Search", "Checkout"][(i % 3) as usize];
        f.write_all(jtl_row(&start.to_string(), &(50 + i % 200).to_string(), label).as_bytes())
            .unwrap();
    }
    // One extra digit in one timestamp (the issue: 35 s and 1.4 GB before the fix).
    f.write_all(jtl_row("17000000010000", "80", "Login").as_bytes())
        .unwrap();
    f.flush().unwrap();
    drop(f);
    let t = Instant::now();
    let mut child = std::process::Command::new(HARRIER)
        .args(["import", "--db"])
        .arg(dir.path().join("h.db"))
        .arg(&path)
        .current_dir(dir.path())
        .env_remove("HARRIER_CONFIG")
        .env_remove("HARRIER_SERVER")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (status, peak_kb) = peak_rss_kb(&mut child);
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(status.success(), "harrier import failed: {out}");
    assert!(
        out.contains("20000 samples") && out.contains("1 rejected rows"),
        "{out}"
    );
    assert!(
        peak_kb < 150 * 1024,
        "peak RSS {peak_kb} kB for a 1.7 MB file"
    );
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

/// A gzip input that expands to `head` followed by `fill` bytes up to about `total`
/// bytes: concatenated gzip members, the filler member (8 MiB of `fill`, ~8 KB
/// compressed) made once and repeated, so a 2 GiB bomb takes ~2 MB and no time to build.
fn gzip_bomb(head: &[u8], fill: u8, total: u64) -> Vec<u8> {
    use flate2::{Compression, write::GzEncoder};
    let mut first = GzEncoder::new(Vec::new(), Compression::best());
    first.write_all(head).unwrap();
    let mut out = first.finish().unwrap();
    const MEMBER: u64 = 8 << 20;
    let mut member = GzEncoder::new(Vec::new(), Compression::best());
    let chunk = vec![fill; 1 << 16];
    for _ in 0..MEMBER / chunk.len() as u64 {
        member.write_all(&chunk).unwrap();
    }
    let member = member.finish().unwrap();
    for _ in 0..total / MEMBER {
        out.extend_from_slice(&member);
    }
    out
}

const TWO_GIB: u64 = 2 << 30;

#[tokio::test]
async fn a_gzip_bomb_upload_is_refused_with_413_and_stores_nothing() {
    let app = spawn_app().await;
    // A JTL whose label field never ends: 2 GiB of 'a' (4.1 GB of memory before the fix).
    let bomb = gzip_bomb(
        format!("{JTL_HEADER}1700000000000,120,").as_bytes(),
        b'a',
        TWO_GIB,
    );
    assert!(bomb.len() < 4 << 20, "{} bytes", bomb.len());
    let t = Instant::now();
    let r = app.import("format=auto&scenario=bomb", bomb).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert!(r.text().contains("decompression bomb"), "{}", r.text());
    assert!(r.text().contains("nothing was stored"), "{}", r.text());
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    let runs = app.get("/api/v1/runs").await.json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0, "{runs}");
    // The server still answers.
    assert_eq!(app.get("/healthz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn the_import_limit_counts_decompressed_bytes() {
    let app = crate::helpers::spawn_app_with(|c| c.max_import_bytes = 1 << 20).await;
    // 3 MB of ordinary rows, ~10 : 1 compressed: under the limit as sent, over it unzipped.
    let mut plain = JTL_HEADER.to_string();
    let mut i = 0i64;
    while plain.len() < 3 << 20 {
        plain.push_str(&jtl_row(
            &(1_700_000_000_000 + i * 7).to_string(),
            &(20 + i % 977).to_string(),
            ["Login", "Search"][(i % 2) as usize],
        ));
        i += 1;
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(plain.as_bytes()).unwrap();
    let gz = gz.finish().unwrap();
    assert!(gz.len() < 1 << 20, "{} bytes compressed", gz.len());
    let r = app.import("format=jmeter-csv", gz).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert!(r.text().contains("once decompressed"), "{}", r.text());
    let runs = app.get("/api/v1/runs").await.json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0, "{runs}");
}

#[tokio::test]
async fn a_gzip_bomb_on_write_is_refused_with_413_and_stores_nothing() {
    let app = spawn_app().await;
    let line = format!(
        "http_req_duration,expected_response=true,name=a,status=200,testid=bomb value=5 {}\n",
        1_700_000_000_000i64 * 1_000_000
    );
    let bomb = gzip_bomb(line.as_bytes(), b'\n', TWO_GIB);
    let t = Instant::now();
    let r = app
        .send(
            Request::post("/write?db=k6")
                .header("content-encoding", "gzip")
                .body(Body::from(bomb))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert!(r.text().contains("nothing was stored"), "{}", r.text());
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    let runs = app.get("/api/v1/runs").await.json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0, "{runs}");
    // The same line, plainly gzipped, is taken.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(line.as_bytes()).unwrap();
    let r = app
        .send(
            Request::post("/write?db=k6")
                .header("content-encoding", "gzip")
                .body(Body::from(gz.finish().unwrap()))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text());
}

#[test]
fn harrier_import_refuses_a_gzip_bomb_in_little_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.jtl.gz");
    std::fs::write(
        &path,
        gzip_bomb(
            format!("{JTL_HEADER}1700000000000,120,").as_bytes(),
            b'a',
            TWO_GIB,
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(HARRIER)
        .args(["import", "--db"])
        .arg(dir.path().join("h.db"))
        .arg(&path)
        .current_dir(dir.path())
        .env_remove("HARRIER_CONFIG")
        .env_remove("HARRIER_SERVER")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (status, peak_kb) = peak_rss_kb(&mut child);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("bomb.jtl.gz") && err.contains("decompression bomb"),
        "{err}"
    );
    assert!(peak_kb < 150 * 1024, "peak RSS {peak_kb} kB");
    let out = std::process::Command::new(HARRIER)
        .args(["runs", "--db"])
        .arg(dir.path().join("h.db"))
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("bomb"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A JTL of `labels` distinct labels, one sample each over 100 s, every tenth failing.
fn many_labels_jtl(labels: usize) -> String {
    let mut body = String::with_capacity(labels * 110);
    body.push_str(JTL_HEADER);
    for i in 0..labels {
        let start = 1_700_000_000_000 + (i as i64 % 100_000);
        if i % 10 == 0 {
            body.push_str(&format!(
                "{start},{},/item/{i},500,Server Error,Group 1-1,text,false,boom,120,80,1,1,http://x/,5,0,1\n",
                10 + i % 90
            ));
        } else {
            body.push_str(&jtl_row(
                &start.to_string(),
                &(10 + i % 90).to_string(),
                &format!("/item/{i}"),
            ));
        }
    }
    body
}

#[tokio::test]
async fn a_hundred_thousand_labels_are_folded_beyond_the_limit_and_the_run_says_so() {
    let app = spawn_app().await;
    let t = Instant::now();
    let run = import_jtl(&app, "labels", many_labels_jtl(100_000)).await;
    assert!(t.elapsed() < Duration::from_secs(120), "{:?}", t.elapsed());
    assert_eq!(run["samples"], 100_000, "every sample counts");
    let id = run["id"].as_i64().unwrap();
    let r = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(r["folded_labels"], 90_000, "{}", r["folded_labels"]);
    let labels = r["labels"].as_array().unwrap();
    assert_eq!(labels.len(), 10_001, "10,000 labels and the fold");
    let other = labels.last().unwrap();
    assert_eq!(other["label"], "(other labels)");
    assert_eq!(other["count"], 90_000);
    assert_eq!(other["errors"], 9_000);
    assert_eq!(r["overall"]["count"], 100_000);
    let page = app.get(&format!("/console/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    let note = crate::helpers::select_texts(&page.html(), "#folded-labels-note");
    assert_eq!(note.len(), 1, "the run page says labels were folded");
    assert!(note[0].contains("90,000 more labels"), "{note:?}");
}

#[test]
fn harrier_import_of_a_hundred_thousand_labels_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("labels.jtl");
    std::fs::write(&path, many_labels_jtl(100_000)).unwrap();
    let t = Instant::now();
    let mut child = std::process::Command::new(HARRIER)
        .args(["import", "--db"])
        .arg(dir.path().join("h.db"))
        .arg(&path)
        .current_dir(dir.path())
        .env_remove("HARRIER_CONFIG")
        .env_remove("HARRIER_SERVER")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (status, peak_kb) = peak_rss_kb(&mut child);
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(status.success(), "{out}");
    assert!(out.contains("100000 samples"), "{out}");
    // 2.3 GB before the label limit; now ~410 MB, most of it the bootstrap draws of the
    // 10,001 kept scopes (~20 KB each), held until they are written.
    assert!(peak_kb < 512 * 1024, "peak RSS {peak_kb} kB");
    assert!(t.elapsed() < Duration::from_secs(120), "{:?}", t.elapsed());
}

#[tokio::test]
async fn long_labels_and_messages_are_cut_with_a_marker() {
    let app = spawn_app().await;
    // Half of limits.max_line_bytes: a longer row is skipped whole.
    let label = "L".repeat(1 << 19);
    let message = "m".repeat(100_000);
    let body = format!(
        "{JTL_HEADER}1700000000000,12,{label},500,Err,Group 1-1,text,false,{message},1,1,1,1,http://x/,1,0,1\n\
         1700000000100,14,{label},500,Err,Group 1-1,text,false,{message},1,1,1,1,http://x/,1,0,1\n"
    );
    let run = import_jtl(&app, "long", body).await;
    let id = run["id"].as_i64().unwrap();
    let r = app.get(&format!("/api/v1/runs/{id}")).await.json();
    let labels = r["labels"].as_array().unwrap();
    assert_eq!(labels.len(), 1, "the same long label is one label");
    let shown = labels[0]["label"].as_str().unwrap();
    assert_eq!(shown.chars().count(), 512);
    assert!(shown.ends_with('…'), "{}", &shown[500..]);
    assert_eq!(labels[0]["count"], 2);
    let errors = app.get(&format!("/api/v1/runs/{id}/errors")).await;
    let text = errors.text();
    assert!(text.len() < 10_000, "{} bytes of errors", text.len());
    assert!(text.contains("mmm…"), "{}", &text[..200.min(text.len())]);
    let page = app.get(&format!("/console/runs/{id}")).await;
    assert!(
        page.body.len() < 200_000,
        "{} bytes of run page",
        page.body.len()
    );
}

#[tokio::test]
async fn a_cut_off_ab_report_imports_with_a_warning_at_the_line_where_it_stops() {
    let app = spawn_app().await;
    let full = String::from_utf8(crate::helpers::fixture("ab/slow_stdout.txt")).unwrap();
    // Cut in the middle of the Connection Times table (after its "Processing:" row, line 29).
    let cut: String = full.lines().take(29).map(|l| format!("{l}\n")).collect();
    assert!(cut.contains("Complete requests") && !cut.contains("Total:"));
    let r = app
        .import("format=ab&scenario=ab-cut", cut.into_bytes())
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let run = &r.json()["runs"][0];
    assert_eq!(run["samples"], 300, "what ab printed before the cut");
    assert_eq!(run["rejected_rows"], 1);
    let id = run["id"].as_i64().unwrap();
    let rows = rejected(&app, id).await;
    assert_eq!(rows[0].0, 29, "the line where the report stops: {rows:?}");
    for needle in ["cut off", "\"Total:\" row", "\"100%\" line"] {
        assert!(rows[0].1.contains(needle), "{needle}: {rows:?}");
    }
    assert!(!rows[0].1.contains("Requests per second"), "{rows:?}");
    let detail = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(detail["reported"]["cut_off"], true);
    assert_eq!(detail["overall"]["p95_ms"], serde_json::Value::Null);
    let page = app.get(&format!("/console/runs/{id}")).await;
    assert!(page.text().contains("cut off before its final figures"));

    // Cut inside the percentage table: only its end is missing.
    let cut: String = full.lines().take(38).map(|l| format!("{l}\n")).collect();
    let r = app.import("format=ab", cut.into_bytes()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let id = r.json()["runs"][0]["id"].as_i64().unwrap();
    let rows = rejected(&app, id).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, 38);
    assert!(rows[0].1.contains("\"100%\" line") && !rows[0].1.contains("Total"));

    // Whole reports carry no such warning (nor does a nohup.out of several).
    for file in [
        "ab/slow_stdout.txt",
        "ab/post_stdout.txt",
        "ab/flaky_keepalive_stdout.txt",
        "ab/error_stdout.txt",
    ] {
        let r = app.import("format=ab", crate::helpers::fixture(file)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{file}: {}", r.text());
        for run in r.json()["runs"].as_array().unwrap() {
            assert_eq!(run["rejected_rows"], 0, "{file}: {run}");
        }
    }
    let loop_out =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/ab-loop.out")).unwrap();
    let r = app.import("format=ab", loop_out).await;
    for run in r.json()["runs"].as_array().unwrap() {
        assert_eq!(run["rejected_rows"], 0, "ab-loop.out: {run}");
    }
}

/// A reader that counts itself started on its first read and then waits for the gate.
struct Gated {
    data: std::io::Cursor<Vec<u8>>,
    started: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    gate: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    first: bool,
}

impl std::io::Read for Gated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.first {
            self.first = false;
            self.started
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let (open, cv) = &*self.gate;
            let mut open = open.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
        }
        self.data.read(buf)
    }
}

/// Heavy imports take turns: while `max_concurrent_imports()` imports are being read,
/// the others wait without reading a byte; once the first ones go through, every one
/// is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn heavy_imports_take_turns() {
    use harrier::services::import::{self, ImportRequest, Progress};
    use std::sync::atomic::Ordering;
    let (store, config, _dir) = crate::helpers::fresh_store().await;
    let turns = import::max_concurrent_imports();
    let started = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let gate = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let jtl = b"timeStamp,elapsed,label,responseCode,success\n1780000000000,12,Home,200,true\n";
    let mut tasks = Vec::new();
    for i in 0..turns + 3 {
        let (store, limits) = (store.clone(), config.run_limits);
        let reader = Gated {
            data: std::io::Cursor::new(jtl.to_vec()),
            started: started.clone(),
            gate: gate.clone(),
            first: true,
        };
        tasks.push(tokio::spawn(async move {
            let req = ImportRequest {
                format: harrier::sources::ingest::Format::Auto,
                name: Some(format!("turn {i}")),
                scenario: None,
                tags: Vec::new(),
                source: format!("turn-{i}.jtl"),
                max_bytes: 1 << 20,
                limits,
                replace: None,
            };
            let progress = Progress {
                hub: None,
                callback: None,
            };
            import::import_reader(&store, &progress, req, reader, None).await
        }));
    }
    // Other tests of this binary import too: wait until our readers hold every turn.
    let deadline = Instant::now() + Duration::from_secs(20);
    while started.load(Ordering::SeqCst) < turns {
        assert!(
            Instant::now() < deadline,
            "{} of {turns} turns taken",
            started.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        started.load(Ordering::SeqCst),
        turns,
        "no more than {turns} imports read at once"
    );
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    for t in tasks {
        let runs = t
            .await
            .unwrap()
            .expect("every import is stored in its turn");
        assert_eq!(runs.len(), 1);
    }
    assert_eq!(started.load(Ordering::SeqCst), turns + 3);
    assert_eq!(store.list_runs().await.unwrap().len(), turns + 3);
}

/// Issue 27: run names, scenarios, tags and notes have length limits (a 4.4 MB name got
/// in before): a caller's too-long name is refused with 400 saying the limit, on import
/// and on edit; the run is unchanged.
#[tokio::test]
async fn run_names_scenarios_tags_and_notes_have_length_limits() {
    let app = crate::helpers::spawn_app().await;
    let long = "n".repeat(harrier::domain::runs::limits::MAX_NAME_CHARS + 1);
    let jtl = crate::helpers::fixture("jmeter/default_props_2.13.jtl");
    for query in [
        format!("name={long}"),
        format!("scenario={long}"),
        format!("tag=build={long}"),
    ] {
        let r = app.import(&query, jtl.clone()).await;
        assert_eq!(
            r.status,
            axum::http::StatusCode::BAD_REQUEST,
            "{}",
            r.text()
        );
        assert!(r.text().contains("at most 256"), "{}", r.text());
    }
    let ok = "n".repeat(harrier::domain::runs::limits::MAX_NAME_CHARS);
    let r = app.import(&format!("name={ok}"), jtl).await;
    assert_eq!(r.status, axum::http::StatusCode::CREATED, "{}", r.text());
    let id = r.json()["runs"][0]["id"].as_i64().unwrap();
    for body in [
        serde_json::json!({ "name": long }),
        serde_json::json!({ "scenario": long }),
        serde_json::json!({ "notes": "x".repeat(20_001) }),
    ] {
        let r = app
            .send(
                axum::http::Request::patch(format!("/api/v1/runs/{id}"))
                    .header(axum::http::header::CONTENT_TYPE, "application/json")
                    .body(axum::body::Body::from(body.to_string()))
                    .unwrap(),
            )
            .await;
        assert_eq!(
            r.status,
            axum::http::StatusCode::BAD_REQUEST,
            "{}",
            r.text()
        );
    }
    let run = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(run["name"], ok.as_str());
}
