//! The console in a real browser: the `harrier` binary serves on a free loopback port,
//! Debian's headless Chromium (driven through chromedriver) opens the pages.
//!
//! `scripts/test.sh` installs `chromium` and `chromium-driver`; without them these tests
//! fail with a message saying so.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

/// A child process killed when dropped.
pub(crate) struct Proc(pub(crate) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `harrier serve` on a free port; returns the process and the base URL it printed.
pub(crate) fn start_harrier(db: &Path) -> (Proc, String) {
    let mut child = Command::new(HARRIER)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(db)
        .env("HARRIER_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start harrier");
    let url = crate::server::printed_url(&mut child);
    (Proc(child), url)
}

/// Imports `file` into the running server with the CLI; returns the new run's id.
pub(crate) fn cli_import(base: &str, file: &Path, name: &str) -> i64 {
    let out = Command::new(HARRIER)
        .args(["import", "--server", base, "--name", name])
        .arg(file)
        .output()
        .expect("run harrier import");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "import failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "<file>: run N "name" — S samples …"
    stdout
        .split("run ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no run id in {stdout:?}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A chromedriver on a free loopback port and a headless Chromium session on it.
///
/// Tests end with `let _ = client.close().await`: every check has run by then, and a
/// browser slow to quit on a loaded machine must not fail them (the driver is killed when
/// its `Proc` drops, taking the browser with it).
pub(crate) async fn browser() -> (Proc, Client) {
    let port = free_port();
    let driver = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect(
            "chromedriver not found: run scripts/test.sh, which installs Debian's chromium-driver",
        );
    let driver = Proc(driver);
    let profile = tempfile::tempdir().unwrap().keep();
    let caps = serde_json::json!({
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,1800",
                format!("--user-data-dir={}", profile.display()),
            ]
        }
    });
    let caps = match caps {
        serde_json::Value::Object(map) => map,
        _ => unreachable!(),
    };
    let mut last_err = None;
    for _ in 0..50 {
        match ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(client) => return (driver, client),
            Err(e) => {
                last_err = Some(e);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    panic!("cannot start headless chromium through chromedriver: {last_err:?}");
}

pub(crate) fn fixture_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

async fn text_of(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_report_shows_summary_and_charts_and_runs_list_updates_live() {
    let dir = tempfile::tempdir().unwrap();
    let (_harrier, base) = start_harrier(&dir.path().join("harrier.db"));
    let id = cli_import(
        &base,
        &fixture_path("jmeter/csv_header_allcols.jtl"),
        "browser run",
    );
    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));

    // The run report: summary table per label with units, and the charts drawn.
    client
        .goto(&format!("{base}/console/runs/{id}"))
        .await
        .unwrap();
    let h1 = text_of(&client, "h1").await;
    assert!(
        h1.starts_with("browser run") && h1.contains("JMeter"),
        "{h1}"
    );
    let header = text_of(&client, "#label-table thead").await;
    assert!(
        header.contains("ms") && header.contains("%") && header.contains("req/s"),
        "units shown: {header}"
    );
    let total = text_of(&client, "#label-table tfoot tr.total").await;
    assert!(total.starts_with("Total"), "{total}");
    let labels = client
        .find_all(Locator::Css("#label-table tbody tr"))
        .await
        .unwrap();
    assert!(labels.len() >= 4, "one row per label of the JMeter run");
    for chart in ["latency", "throughput"] {
        let css = format!(".chart[data-chart=\"{chart}\"] canvas");
        wait()
            .for_element(Locator::Css(&css))
            .await
            .unwrap_or_else(|e| panic!("{chart} chart not drawn: {e}"));
    }
    let legend = text_of(&client, ".chart[data-chart=\"latency\"]").await;
    assert!(
        legend.contains("p95"),
        "latency legend names its series: {legend}"
    );
    let drawn: bool = client
        .execute(
            "const c = document.querySelector('.chart[data-chart=\"latency\"] canvas');
             return !!c && c.width > 100 && c.height > 50;",
            vec![],
        )
        .await
        .unwrap()
        .as_bool()
        .unwrap_or(false);
    assert!(drawn, "the latency canvas has a real size");
    if let Ok(png) = client.screenshot().await {
        let _ = std::fs::write(
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("run-report.png"),
            png,
        );
    }

    // The runs list follows imports over the websocket, without a reload.
    client.goto(&format!("{base}/console/runs")).await.unwrap();
    wait()
        .for_element(Locator::Css(&format!(
            "#runs-table tbody tr[data-run-id=\"{id}\"]"
        )))
        .await
        .unwrap();
    client
        .execute("window.__harrierMarker = 42;", vec![])
        .await
        .unwrap();
    wait()
        .for_element(Locator::Css("#live-status[data-state=\"live\"]"))
        .await
        .expect("websocket connected");
    let second = cli_import(
        &base,
        &fixture_path("edge-cases/EC35/input.jtl"),
        "arrived live",
    );
    let row = wait()
        .for_element(Locator::Css(&format!(
            "#runs-table tbody tr[data-run-id=\"{second}\"]"
        )))
        .await
        .expect("the new run appears without a reload");
    let row_text = row.text().await.unwrap();
    assert!(
        row_text.contains("arrived live") && row_text.contains("19"),
        "{row_text}"
    );
    let marker = client
        .execute("return window.__harrierMarker;", vec![])
        .await
        .unwrap();
    assert_eq!(marker, serde_json::json!(42), "the page was not reloaded");

    let _ = client.close().await;
}

/// The upload form sends a file with progress, then links to the new run; SIGTERM then
/// stops the server cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_form_imports_a_file_and_sigterm_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (mut harrier, base) = start_harrier(&dir.path().join("harrier.db"));
    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));

    client.goto(&format!("{base}/console/runs")).await.unwrap();
    let empty = client.find(Locator::Css("#runs-empty")).await.unwrap();
    assert!(
        empty.is_displayed().await.unwrap(),
        "empty state shown before any run"
    );
    // A run that started later than the file below: the upload still comes first.
    let now = harrier::now_ms();
    let recent = dir.path().join("recent.jtl");
    std::fs::write(
        &recent,
        format!("timeStamp,elapsed,label,responseCode,success\n{now},12,Home,200,true\n"),
    )
    .unwrap();
    let recent_id = cli_import(&base, &recent, "recent run");
    wait()
        .for_element(Locator::Css(&format!(
            "#runs-table tbody tr[data-run-id=\"{recent_id}\"]"
        )))
        .await
        .unwrap();
    let file = fixture_path("edge-cases/EC11/input.jtl");
    client
        .find(Locator::Css("#upload-form input[type=file]"))
        .await
        .unwrap()
        .send_keys(file.to_str().unwrap())
        .await
        .unwrap();
    client
        .find(Locator::Css("#upload-form input[name=scenario]"))
        .await
        .unwrap()
        .send_keys("checkout")
        .await
        .unwrap();
    client
        .find(Locator::Css("#upload-form button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let link = wait()
        .for_element(Locator::Css("#upload-result a[href^=\"/console/runs/\"]"))
        .await
        .expect("a link to the imported run");
    let href = link.attr("href").await.unwrap().unwrap();
    let id: i64 = href.rsplit('/').next().unwrap().parse().unwrap();
    // The same run arrived in the table over the websocket.
    wait()
        .for_element(Locator::Css(&format!(
            "#runs-table tbody tr[data-run-id=\"{id}\"]"
        )))
        .await
        .unwrap();
    let first: String = client
        .execute(
            "return document.querySelector('#runs-table tbody tr').dataset.runId;",
            vec![],
        )
        .await
        .unwrap()
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        first,
        id.to_string(),
        "the uploaded run (started 2023) is first, above the one started today"
    );
    let json: serde_json::Value = reqwest::get(format!("{base}/api/v1/runs/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(json["scenario"], "checkout");
    assert_eq!(
        json["source"], "input.jtl",
        "the raw upload is named after the file"
    );
    assert_eq!(json["overall"]["count"], 4);
    let _ = client.close().await;

    let pid = harrier.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = harrier.0.try_wait().unwrap() {
            assert!(status.success(), "harrier exits 0 on SIGTERM, got {status}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "harrier did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A ramped run's report states where throughput stops growing and p95 doubles, and
/// marks the knee on the charts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ramped_run_report_marks_saturation() {
    let dir = tempfile::tempdir().unwrap();
    let (_harrier, base) = start_harrier(&dir.path().join("harrier.db"));
    let file = dir.path().join("ramp.jtl");
    std::fs::write(&file, crate::report::ramped_jtl()).unwrap();
    let id = cli_import(&base, &file, "ramp");
    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));

    client
        .goto(&format!("{base}/console/runs/{id}"))
        .await
        .unwrap();
    let callout = text_of(&client, "#capacity").await;
    assert!(
        callout
            .starts_with("Saturates at ~9 users, 89.1 req/s successful; p95 doubles at 12 users."),
        "{callout}"
    );
    assert!(callout.contains("against 50 ms at low load"), "{callout}");
    wait()
        .for_element(Locator::Css(".chart[data-chart=\"latency\"] canvas"))
        .await
        .expect("latency chart drawn");
    wait()
        .for_element(Locator::Css(".chart[data-chart=\"vs-users\"] canvas"))
        .await
        .expect("against-users chart drawn");
    // The knee's marker is drawn on the canvas: count pixels of the capacity colour in a
    // thin column at the knee's time.
    let marked = client
        .execute(
            r#"
            const u = window.harrier.run.state.charts[0];
            const cap = window.harrier.run.data.capacity.knee;
            const probe = document.createElement('span');
            probe.style.color = 'var(--c-capacity)';
            document.body.append(probe);
            const [r, g, b] = getComputedStyle(probe).color.match(/\d+/g).map(Number);
            probe.remove();
            const x = Math.round(u.valToPos(cap.at_ms, 'x', true));
            const { top, height } = u.bbox;
            const px = u.ctx.getImageData(x - 2, top, 5, height).data;
            let hits = 0;
            for (let i = 0; i < px.length; i += 4) {
              if (Math.abs(px[i] - r) + Math.abs(px[i + 1] - g) + Math.abs(px[i + 2] - b) < 90 && px[i + 3] > 100) hits++;
            }
            return { users: cap.users, hits };
            "#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(marked["users"], 9);
    assert!(
        marked["hits"].as_u64().unwrap() > 20,
        "the knee's line is drawn: {marked}"
    );
    if let Ok(png) = client.screenshot().await {
        let _ = std::fs::write(
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ramp-report.png"),
            png,
        );
    }
    let _ = client.close().await;
}

/// A k6 stream (line protocol at /api/v2/write) shows up in the open runs list as a live
/// run whose request count climbs without a reload, then completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_run_updates_the_open_console() {
    let dir = tempfile::tempdir().unwrap();
    let (_harrier, base) = start_harrier(&dir.path().join("harrier.db"));
    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));
    client.goto(&format!("{base}/console/runs")).await.unwrap();
    wait()
        .for_element(Locator::Css("#live-status[data-state=\"live\"]"))
        .await
        .expect("websocket connected");
    client
        .execute("window.__harrierMarker = 7;", vec![])
        .await
        .unwrap();

    let http = reqwest::Client::new();
    let write = |second: i64| {
        let t0 = 1_700_000_000_000i64 + second * 1000;
        let mut body = String::new();
        for i in 0..20 {
            let ns = (t0 + i * 40) * 1_000_000;
            body.push_str(&format!(
                "http_req_duration,expected_response=true,name=GET\\ /items,status=200,testid=browser-live value={} {ns}\n",
                30 + i
            ));
        }
        http.post(format!("{base}/api/v2/write?bucket=k6&precision=ns"))
            .body(body)
            .send()
    };
    assert_eq!(write(0).await.unwrap().status(), 204);
    let count_of = |n: u64| {
        let client = client.clone();
        async move {
            for _ in 0..100 {
                let v = client
                    .execute(
                        "const r = Array.from(document.querySelectorAll('#runs-table tbody tr')).find(r => r.textContent.includes('browser-live')); return r ? r.cells[2].textContent.trim() + '|' + r.cells[5].textContent.trim() : '';",
                        vec![],
                    )
                    .await
                    .unwrap();
                let text = v.as_str().unwrap_or_default().to_string();
                if text.ends_with(&format!("|{n}")) {
                    return text;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            panic!("the runs list never showed {n} requests for the live run");
        }
    };
    count_of(20).await;
    assert_eq!(write(1).await.unwrap().status(), 204);
    assert_eq!(write(2).await.unwrap().status(), 204);
    let row = count_of(60).await;
    assert_eq!(row, "k6|60", "tool and request count of the live row");
    let runs: serde_json::Value = http
        .get(format!("{base}/api/v1/runs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = runs["runs"][0]["id"].as_i64().unwrap();
    assert_eq!(runs["runs"][0]["status"], "live");
    assert_eq!(
        http.post(format!("{base}/api/v1/runs/{id}/end"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let marker = client
        .execute("return window.__harrierMarker;", vec![])
        .await
        .unwrap();
    assert_eq!(
        marker,
        serde_json::json!(7),
        "updated in place, never reloaded"
    );
    let _ = client.close().await;
}

/// A `harrier load find` run's page: the answer, the step table and the offered/achieved
/// chart drawn by the browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_run_page_shows_its_steps_and_chart() {
    let (url, _pool) = crate::load::pool_service(20, Duration::from_millis(50), 100).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harrier.db");
    let out = tokio::task::spawn_blocking({
        let db = db.clone();
        move || {
            Command::new(HARRIER)
                .args(["load", "find", &url, "--db"])
                .arg(&db)
                .args([
                    "--start-rate",
                    "50",
                    "--step-duration",
                    "2s",
                    "--max-duration",
                    "5s",
                    "--dispatch-limit",
                    "250ms",
                ])
                .output()
                .expect("run harrier load find")
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let steps = stdout.lines().filter(|l| l.starts_with("step ")).count();
    assert!(steps >= 2, "{stdout}");
    let (_harrier, base) = start_harrier(&db);
    let (_driver, client) = browser().await;
    client
        .goto(&format!("{base}/console/runs/1"))
        .await
        .unwrap();
    let answer = text_of(&client, "#search-answer").await;
    assert!(
        answer.ends_with("search ended early: --max-duration 5 s reached."),
        "{answer}"
    );
    client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(".chart[data-chart=\"search\"] canvas"))
        .await
        .expect("search chart drawn");
    let drawn = client
        .execute(
            "const u = window.harrier.run.state.searchChart; return [u.data[0].length, u.data[1][0]];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(drawn[0].as_u64(), Some(steps as u64), "{drawn}");
    assert_eq!(drawn[1].as_f64(), Some(50.0), "{drawn}");
    let rows = client
        .find_all(Locator::Css("#search-steps tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), steps);
    let _ = client.close().await;
}

/// `harrier load run --server`: the run's page, open while the load runs, climbs second by
/// second (its request count, the generator's charts) without reloading, and shows the
/// exact, complete run once the load ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_run_page_climbs_while_the_load_streams_in() {
    let (url, svc) = crate::load::pool_service(20, Duration::from_millis(2), 100).await;
    let dir = tempfile::tempdir().unwrap();
    let (_harrier, base) = start_harrier(&dir.path().join("harrier.db"));
    // The browser first: on a busy machine it takes seconds to start, which the load's
    // 8 s must not spend.
    let (_driver, client) = browser().await;
    let load = Command::new(HARRIER)
        .args(["load", "run", &url, "--server", &base])
        .args([
            "--rate",
            "100",
            // Long enough that a page opened seconds late (a busy machine) still sees it
            // climb.
            "--duration",
            "16s",
            "--dispatch-limit",
            "250ms",
            "-q",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start harrier load run");
    let load = Proc(load);
    let http = reqwest::Client::new();
    let mut id = None;
    for _ in 0..100 {
        let runs: serde_json::Value = http
            .get(format!("{base}/api/v1/runs"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(r) = runs["runs"].as_array().and_then(|a| a.first()) {
            assert_eq!(r["status"], "live", "{r}");
            id = r["id"].as_i64();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let id = id.expect("the load opened its run on the server");
    client
        .goto(&format!("{base}/console/runs/{id}"))
        .await
        .unwrap();
    client
        .execute("window.__harrierMarker = 7;", vec![])
        .await
        .unwrap();
    assert!(text_of(&client, "#run-live").await.starts_with("Live."));
    // The first KPI is the request count; read it while the page stays the same page.
    let requests = || {
        let client = client.clone();
        async move {
            let v = client
                .execute(
                    "return window.__harrierMarker === 7 ? document.querySelector('.kpi .kpi-value').textContent.replace(/[^0-9]/g, '') : 'reloaded';",
                    vec![],
                )
                .await
                .unwrap();
            v.as_str().unwrap_or_default().parse::<u64>().unwrap_or(0)
        }
    };
    let mut counts = vec![requests().await];
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let n = requests().await;
        if n != *counts.last().unwrap() {
            counts.push(n);
        }
        if counts.len() >= 4 {
            break;
        }
    }
    assert!(
        counts.len() >= 4
            && counts.windows(2).all(|w| w[0] < w[1])
            && *counts.last().unwrap() < 1_600,
        "the request count climbs in place while the load runs: {counts:?}"
    );
    let drawn = client
        .execute(
            "const c = window.harrier.run.state.genCharts; return c.length ? c[0].data[0].length : 0;",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        drawn.as_u64().unwrap_or(0) >= 2,
        "generator charts drawn with seconds: {drawn}"
    );

    // The load ends: the page shows the complete run with its exact count.
    let out = tokio::task::spawn_blocking(move || {
        let mut load = load;
        let status = load.0.wait().unwrap();
        let mut stdout = String::new();
        use std::io::Read;
        load.0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        (status, stdout)
    })
    .await
    .unwrap();
    assert!(out.0.success(), "{}", out.1);
    assert!(
        out.1
            .contains(&format!("stored       run {id} on the server")),
        "{}",
        out.1
    );
    client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("body[data-run-status=\"complete\"]"))
        .await
        .expect("the page shows the run complete");
    let final_count = text_of(&client, ".kpi .kpi-value").await;
    assert_eq!(final_count.replace(',', ""), "1600", "{final_count}");
    assert_eq!(svc.served.load(std::sync::atomic::Ordering::SeqCst), 1_600);
    assert!(
        client.find(Locator::Css("#run-live")).await.is_err(),
        "no live callout once complete"
    );
    let _ = client.close().await;
}

/// The Runs page's "New load test" form (`[load] enabled = true`): fill it in, start, land
/// on the run's live page with the equivalent command and a Stop button; Stop ends the run
/// early and the page shows it complete. Without `[load]` the form is not there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_test_started_from_the_console_runs_live_and_stops() {
    let (url, svc) = crate::load::pool_service(20, Duration::from_millis(2), 100).await;
    let dir = tempfile::tempdir().unwrap();
    let (_plain, plain_base) = start_harrier(&dir.path().join("plain.db"));
    let config = dir.path().join("harrier.toml");
    std::fs::write(&config, "[load]\nenabled = true\nmax_rate = 1000\n").unwrap();
    let mut child = Command::new(HARRIER)
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("harrier.db"))
        .env("HARRIER_CONFIG", &config)
        .env("HARRIER_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start harrier");
    let base = crate::server::printed_url(&mut child);
    let _harrier = Proc(child);
    let (_driver, client) = browser().await;
    client
        .goto(&format!("{plain_base}/console/runs"))
        .await
        .unwrap();
    assert!(
        client.find(Locator::Css("#load-form")).await.is_err(),
        "no form without [load] enabled"
    );
    client.goto(&format!("{base}/console/runs")).await.unwrap();
    let field = |css: &'static str| {
        let client = client.clone();
        async move { client.find(Locator::Css(css)).await.unwrap() }
    };
    field("#load-url").await.send_keys(&url).await.unwrap();
    let rate = field("#load-rate").await;
    rate.clear().await.unwrap();
    rate.send_keys("5000").await.unwrap();
    field("#load-start").await.click().await.unwrap();
    let error = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#load-error:not([hidden])"))
        .await
        .expect("a refused test says why")
        .text()
        .await
        .unwrap();
    assert!(error.contains("limit of 1000 req/s"), "{error}");
    rate.clear().await.unwrap();
    rate.send_keys("100").await.unwrap();
    let duration = field("#load-duration").await;
    duration.clear().await.unwrap();
    duration.send_keys("60s").await.unwrap();
    field("#load-start").await.click().await.unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css("body[data-run-status=\"live\"] #load-stop"))
        .await
        .expect("the new run's live page with a Stop button");
    let command = text_of(&client, "#load-command").await;
    assert_eq!(
        command,
        format!("harrier load run {url} --rate 100 --duration 60s --timeout 10s")
    );
    // Let it climb a little, then stop it.
    client
        .wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css(".chart[data-chart=\"gen-rate\"] canvas"))
        .await
        .expect("the generator's charts drawn");
    tokio::time::sleep(Duration::from_secs(2)).await;
    field("#load-stop").await.click().await.unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("body[data-run-status=\"complete\"]"))
        .await
        .expect("the page shows the run complete");
    let count: u64 = text_of(&client, ".kpi .kpi-value")
        .await
        .replace(',', "")
        .parse()
        .unwrap();
    assert!(count > 100 && count < 6_000, "stopped early: {count}");
    assert_eq!(svc.served.load(std::sync::atomic::Ordering::SeqCst), count);
    let reported = text_of(&client, "#reported-h").await;
    assert!(reported.starts_with("Reported by"), "{reported}");
    let _ = client.close().await;
}

/// At 1024 px the runs, alert rules and routes tables fit without scrolling sideways:
/// long names wrap, the start time takes two lines, Edit and Delete stack, the routes
/// table drops its Max and sparkline columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_rules_and_routes_tables_fit_a_1024_px_window() {
    let dir = tempfile::tempdir().unwrap();
    let (_harrier, base) = start_harrier(&dir.path().join("harrier.db"));
    for (file, name) in [
        (
            "oha/stall_timeout_text.txt",
            "stall_timeout_text_against_the_checkout_service",
        ),
        ("wrk/flaky_latency.txt", "127.0.0.1:8099/flaky"),
        (
            "jmeter/csv_header_allcols.jtl",
            "a long run name that has to wrap in a narrow table",
        ),
    ] {
        cli_import(&base, &fixture_path(file), name);
    }
    let (_driver, client) = browser().await;
    client.set_window_size(1024, 900).await.unwrap();
    // How far the table reaches past the box it scrolls in, px (0: it fits).
    let overflow = "const t = document.querySelector(arguments[0]); \
                    const w = t.closest('.table-wrap') || t.parentElement; \
                    return [w.scrollWidth - w.clientWidth, document.documentElement.clientWidth];";
    for (page, table) in [
        ("runs", "#runs-table"),
        ("alerts", "#rules-table"),
        ("routes?own=show", "#routes-table"),
    ] {
        client
            .goto(&format!("{base}/console/{page}"))
            .await
            .unwrap();
        let got = client
            .execute(overflow, vec![serde_json::json!(table)])
            .await
            .unwrap();
        let viewport = got[1].as_i64().unwrap();
        assert!((1000..=1024).contains(&viewport), "viewport {viewport} px");
        assert_eq!(
            got[0].as_i64(),
            Some(0),
            "{table} overflows its box at {viewport} px"
        );
    }
    let _ = client.close().await;
}

/// The upload form takes the CSVs of one Locust run together (several files picked):
/// one multipart upload, one run with the history's time series and the per-name rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_form_imports_the_csvs_of_one_locust_run_as_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let (_harrier, base) = start_harrier(&dir.path().join("harrier.db"));
    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));
    client.goto(&format!("{base}/console/runs")).await.unwrap();
    let paths: Vec<String> = [
        "run_stats.csv",
        "run_stats_history.csv",
        "run_failures.csv",
        "run_exceptions.csv",
    ]
    .iter()
    .map(|f| {
        fixture_path(&format!("locust/{f}"))
            .to_str()
            .unwrap()
            .to_string()
    })
    .collect();
    client
        .find(Locator::Css("#upload-form input[type=file]"))
        .await
        .unwrap()
        .send_keys(&paths.join("\n"))
        .await
        .unwrap();
    client
        .find(Locator::Css("#upload-form button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let link = wait()
        .for_element(Locator::Css("#upload-result a[href^=\"/console/runs/\"]"))
        .await
        .expect("a link to the imported run");
    let href = link.attr("href").await.unwrap().unwrap();
    let id: i64 = href.rsplit('/').next().unwrap().parse().unwrap();
    let _ = client.close().await;
    let runs: serde_json::Value = reqwest::get(format!("{base}/api/v1/runs"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "one run: {runs}");
    let json: serde_json::Value = reqwest::get(format!("{base}/api/v1/runs/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(json["overall"]["count"], 330);
    assert_eq!(json["labels"].as_array().unwrap().len(), 4);
    assert_eq!(
        json["source"],
        "run_stats.csv + run_stats_history.csv + run_failures.csv + run_exceptions.csv"
    );
}
