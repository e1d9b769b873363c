//! Run comparison end to end: the compare, baseline, scenario and check API, the console
//! pages, the `harrier compare` / `check` / `baseline` commands (exit codes, JUnit), the
//! published seeds, and the HTML export and the compare page in a real browser.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use fantoccini::Locator;
use harrier::domain::runs::{RunBuilder, Sample};
use harrier::store::{NewRun, Store};

use crate::helpers::InsertRuns;
use crate::helpers::{TestApp, select_texts, spawn_app};

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

/// SplitMix64, for reproducible synthetic runs.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn gauss(&mut self) -> f64 {
        let (u, v) = (self.next().max(1e-12), self.next());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// A JMeter-like run through the real builder: `seconds` × `per_s` samples of two labels,
/// lognormal response times around 120 ms × `factor`; every 200th sample fails.
async fn synthetic_run(
    store: &Store,
    name: &str,
    scenario: &str,
    seed: u64,
    factor: f64,
    start_ms: i64,
) -> i64 {
    let (seconds, per_s) = (120i64, 25i64);
    let mut rng = Rng(seed);
    let mut b = RunBuilder::new();
    let mut n = 0u64;
    for s in 0..seconds {
        for i in 0..per_s {
            let label = if i % 3 == 0 { "Login" } else { "Search" };
            let elapsed = (120.0 * factor * (0.3 * rng.gauss()).exp()).round() as u64;
            n += 1;
            b.push(
                1,
                &Sample {
                    label,
                    start_ms: start_ms + s * 1000 + i * (1000 / per_s),
                    elapsed_ms: elapsed,
                    success: !n.is_multiple_of(200),
                    response_code: if n.is_multiple_of(200) { "500" } else { "200" },
                    message: "",
                    bytes_received: 100,
                    bytes_sent: 10,
                    active_users: Some(10),
                    is_transaction: false,
                },
            );
        }
    }
    let data = b.finish();
    store
        .insert_run(
            &NewRun {
                name: name.into(),
                scenario: Some(scenario.into()),
                tool: "jmeter".into(),
                imported_at_ms: start_ms,
                ..NewRun::default()
            },
            &data,
        )
        .await
        .unwrap()
}

/// Three runs of "checkout": a reference, the same load again (noise), and a 30 % slower one.
async fn three_runs(store: &Store) -> (i64, i64, i64) {
    let t0 = 1_780_000_000_000;
    let base = synthetic_run(store, "base", "checkout", 1, 1.0, t0).await;
    let again = synthetic_run(store, "again", "checkout", 2, 1.0, t0 + 3_600_000).await;
    let slow = synthetic_run(store, "slow", "checkout", 3, 1.3, t0 + 7_200_000).await;
    (base, again, slow)
}

fn verdict<'a>(
    c: &'a serde_json::Value,
    scope: usize,
    run: usize,
    key: &str,
) -> &'a serde_json::Value {
    &c["scopes"][scope]["runs"][run]["changes"][key]["verdict"]
}

async fn send_json(
    app: &TestApp,
    method: &str,
    uri: &str,
    body: serde_json::Value,
) -> crate::helpers::Reply {
    app.send(
        Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
    )
    .await
}

#[tokio::test]
async fn compare_api_calls_the_shift_worse_and_the_rerun_unchanged() {
    let app = spawn_app().await;
    let (base, again, slow) = three_runs(&app.state.store).await;
    let r = app
        .get(&format!("/api/v1/compare?runs={base},{again},{slow}"))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let c = r.json();
    assert_eq!(c["runs"][0]["id"], base, "the first run is the reference");
    let labels: Vec<&str> = c["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap_or("(total)"))
        .collect();
    assert_eq!(labels, ["(total)", "Login", "Search"]);
    for key in ["p50_ms", "p95_ms", "mean_ms"] {
        assert_eq!(verdict(&c, 0, 2, key), "worse", "{key} of the slow run");
        assert_eq!(verdict(&c, 0, 1, key), "no_change", "{key} of the re-run");
        assert_eq!(verdict(&c, 1, 2, key), "worse", "{key} of Login");
    }
    let p95 = &c["scopes"][0]["runs"][2]["changes"]["p95_ms"];
    assert!(p95["pct"].as_f64().unwrap() > 20.0, "{p95}");
    assert!(p95["ci_low"].as_f64().unwrap() > 0.0, "{p95}");
    assert!(c["scopes"][0]["runs"][0]["changes"].is_null());
    assert_eq!(c["scopes"][0]["runs"][2]["count"], 3000);

    // A 50 % minimum effect: the 30 % slowdown is no longer called.
    let c = app
        .get(&format!(
            "/api/v1/compare?runs={base}&runs={slow}&min_effect_pct=50"
        ))
        .await
        .json();
    assert_eq!(verdict(&c, 0, 1, "p95_ms"), "no_change");
    assert_eq!(c["min_effect_pct"], 50.0);

    for (q, status) in [
        (format!("runs={base}"), StatusCode::BAD_REQUEST),
        (format!("runs={base},{base}"), StatusCode::BAD_REQUEST),
        (
            "runs=1,2,3,4,5,6,7,8,9,10,11".to_string(),
            StatusCode::BAD_REQUEST,
        ),
        (format!("runs={base},x"), StatusCode::BAD_REQUEST),
        (
            format!("runs={base},{slow}&min_effect_pct=lots"),
            StatusCode::BAD_REQUEST,
        ),
        (format!("runs={base},999"), StatusCode::NOT_FOUND),
    ] {
        let r = app.get(&format!("/api/v1/compare?{q}")).await;
        assert_eq!(r.status, status, "{q}: {}", r.text());
        assert!(r.json()["error"].is_string());
    }
}

#[tokio::test]
async fn baselines_are_pinned_or_the_last_passing_run() {
    let app = spawn_app().await;
    let (base, again, slow) = three_runs(&app.state.store).await;
    let url = "/api/v1/scenarios/checkout/baseline";
    // Nothing pinned, nothing checked: auto is the previous run of the newest.
    let b = app.get(url).await.json();
    assert_eq!(
        (b["run_id"].as_i64(), b["source"].as_str()),
        (Some(again), Some("previous"))
    );

    // A check that fails keeps a run from being the auto baseline of later runs.
    let r = send_json(
        &app,
        "POST",
        &format!("/api/v1/runs/{again}/check"),
        serde_json::json!({"gates": ["p95<1ms"]}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["passed"], false);
    let b = app.get(url).await.json();
    assert_eq!(
        b["run_id"].as_i64(),
        Some(base),
        "run {again} failed its check"
    );

    // Relative gate: the slow run against the auto baseline fails beyond the noise.
    let r = send_json(
        &app,
        "POST",
        &format!("/api/v1/runs/{slow}/check"),
        serde_json::json!({"gates": ["p95 +10%", "error_rate<1%"], "record": false}),
    )
    .await;
    let rep = r.json();
    assert_eq!(rep["baseline"]["id"], base);
    assert_eq!(rep["baseline_source"], "previous");
    assert_eq!(rep["results"][0]["status"], "fail", "{rep}");
    assert!(
        rep["results"][0]["message"]
            .as_str()
            .unwrap()
            .contains("beyond the noise")
    );
    assert_eq!(rep["results"][1]["status"], "pass");

    // Pin, read back, refuse a run of another scenario, unpin.
    let r = send_json(&app, "PUT", url, serde_json::json!({"run_id": slow})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let b = app.get(url).await.json();
    assert_eq!(
        (b["run_id"].as_i64(), b["source"].as_str()),
        (Some(slow), Some("pinned"))
    );
    let other = synthetic_run(
        &app.state.store,
        "other",
        "search",
        9,
        1.0,
        1_790_000_000_000,
    )
    .await;
    let r = send_json(&app, "PUT", url, serde_json::json!({"run_id": other})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json()["error"].as_str().unwrap().contains("search"));
    let r = send_json(&app, "PUT", url, serde_json::json!({"run": 1})).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(app.delete(url).await.status, StatusCode::NO_CONTENT);
    assert_eq!(app.delete(url).await.status, StatusCode::NOT_FOUND);

    // Malformed gates and unknown runs.
    let r = send_json(
        &app,
        "POST",
        &format!("/api/v1/runs/{slow}/check"),
        serde_json::json!({"gates": ["p95 -10%"]}),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = send_json(
        &app,
        "POST",
        "/api/v1/runs/999/check",
        serde_json::json!({"gates": ["p95<1s"]}),
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

/// The runs tables (Overview and Runs) show each run's latest gate verdict.
#[tokio::test]
async fn runs_tables_show_the_latest_gate_verdict() {
    let app = spawn_app().await;
    let (base, again, slow) = three_runs(&app.state.store).await;
    // base fails, then passes (the latest counts); again fails; slow is never checked.
    for (run, gate) in [(base, "p95<1ms"), (again, "p95<1ms"), (base, "p95<60s")] {
        let r = send_json(
            &app,
            "POST",
            &format!("/api/v1/runs/{run}/check"),
            serde_json::json!({ "gates": [gate] }),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    }
    for page in ["/console", "/console/runs"] {
        let html = app.get(page).await.html();
        let badge = |run: i64| {
            select_texts(
                &html,
                &format!("#runs-table tr[data-run-id=\"{run}\"] .badge.gate"),
            )
        };
        assert_eq!(badge(base), ["gate passed"], "{page}");
        assert_eq!(badge(again), ["gate failed"], "{page}");
        assert!(badge(slow).is_empty(), "{page}");
    }
}

#[tokio::test]
async fn scenario_trend_marks_the_regression() {
    let app = spawn_app().await;
    let (base, _again, slow) = three_runs(&app.state.store).await;
    let r = send_json(
        &app,
        "PUT",
        "/api/v1/scenarios/checkout/baseline",
        serde_json::json!({"run_id": base}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
    let t = app.get("/api/v1/scenarios/checkout").await.json();
    assert_eq!(t["baseline_run_id"], base);
    let points = t["points"].as_array().unwrap();
    assert_eq!(points.len(), 3);
    assert_eq!(points[2]["run"]["id"], slow);
    let regs: Vec<&str> = points[2]["regressions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        regs.contains(&"p95_ms") && regs.contains(&"mean_ms"),
        "{regs:?}"
    );
    assert!(points[1]["regressions"].as_array().unwrap().is_empty());
    assert_eq!(
        app.get("/api/v1/scenarios/nope").await.status,
        StatusCode::NOT_FOUND
    );
    let list = app.get("/api/v1/scenarios").await.json();
    assert_eq!(list["scenarios"][0]["scenario"], "checkout");

    // The page: one row per run, the regression badge on the slow one, the charts' island.
    let page = app.get("/console/scenarios/checkout").await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.html();
    assert_eq!(select_texts(&html, "#trend-table tbody tr").len(), 3);
    let slow_row = select_texts(
        &html,
        &format!("#trend-table tr[data-run-id=\"{slow}\"] .regression"),
    );
    assert!(slow_row.iter().any(|t| t == "p95 worse"), "{slow_row:?}");
    assert_eq!(
        select_texts(&html, "tr.is-baseline .badge.info"),
        ["baseline"]
    );
    assert_eq!(
        select_texts(&html, ".chart[data-chart^=\"trend-\"]").len(),
        5
    );
    assert_eq!(select_texts(&html, "script#scenario-data").len(), 1);
}

#[tokio::test]
async fn compare_page_shows_deltas_and_badges_and_the_pickers() {
    let app = spawn_app().await;
    let (base, again, slow) = three_runs(&app.state.store).await;
    let page = app
        .get(&format!("/console/compare?runs={base},{again},{slow}"))
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text());
    let html = page.html();
    assert_eq!(
        select_texts(&html, "section.compare-scope h2"),
        ["All requests", "Login", "Search"]
    );
    let p95 = select_texts(&html, "#scope-0 tr[data-figure=\"p95_ms\"] td");
    assert_eq!(p95.len(), 3);
    assert!(
        p95[2].contains('+') && p95[2].contains("%") && p95[2].ends_with("worse"),
        "{p95:?}"
    );
    assert!(p95[1].ends_with("no change"), "{p95:?}");
    assert!(!select_texts(&html, "#scope-0 td.worse .badge.err.verdict").is_empty());
    // The reference select offers each run first.
    let options = select_texts(&html, "#compare-ref option");
    assert_eq!(options.len(), 3);
    let sel = scraper::Selector::parse("#compare-ref option").unwrap();
    let values: Vec<&str> = html
        .select(&sel)
        .map(|o| o.value().attr("value").unwrap())
        .collect();
    assert_eq!(values[2], format!("{slow},{base},{again}"));
    assert_eq!(select_texts(&html, ".chart[data-chart^=\"cmp-\"]").len(), 4);

    // "Compare with previous" from the run page redirects to the pair.
    let r = app
        .get(&format!("/console/compare?run={slow}&against=previous"))
        .await;
    assert!(r.status.is_redirection());
    let r = app
        .get(&format!("/console/compare?run={base}&against=previous"))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "the first run has none");
    let run_page = app.get(&format!("/console/runs/{slow}")).await.html();
    assert_eq!(select_texts(&run_page, "#compare-baseline").len(), 1);
    assert_eq!(select_texts(&run_page, "a#compare-previous").len(), 1);
    // The scenario's first run has nothing to be compared with: no link to a 404, the
    // actions are shown disabled with the reason.
    let first_page = app.get(&format!("/console/runs/{base}")).await.html();
    assert!(select_texts(&first_page, "a#compare-previous").is_empty());
    assert!(select_texts(&first_page, "a#compare-baseline").is_empty());
    let sel = scraper::Selector::parse("button#compare-previous[disabled]").unwrap();
    let disabled = first_page.select(&sel).next().expect("a disabled action");
    assert!(
        disabled
            .value()
            .attr("title")
            .unwrap()
            .contains("No earlier run"),
        "{:?}",
        disabled.value().attr("title")
    );
    assert_eq!(select_texts(&run_page, "#baseline-pin").len(), 1);
    // The runs list: a checkbox per run and the Compare button.
    let runs = app.get("/console/runs").await.html();
    let sel = scraper::Selector::parse("#runs-table input.compare-pick").unwrap();
    assert_eq!(runs.select(&sel).count(), 3);
    assert_eq!(select_texts(&runs, "#compare-form button"), ["Compare"]);
    // The HTML export download.
    let r = app
        .get(&format!("/console/compare.html?runs={base},{slow}"))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.text().contains("<svg") && !r.text().contains("<script"));
    // Errors are pages.
    let r = app.get("/console/compare?runs=1").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.content_type.starts_with("text/html"));
}

fn harrier(args: &[&str], db: &Path) -> (i32, String, String) {
    let out = Command::new(HARRIER)
        .args(args)
        .arg("--db")
        .arg(db)
        .env("HARRIER_LOG", "warn")
        .output()
        .expect("run harrier");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_check_exit_codes_and_junit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harrier.db");
    let store = Store::open(&db).await.unwrap();
    let (base, _again, slow) = three_runs(&store).await;
    drop(store);
    let (s, b) = (slow.to_string(), base.to_string());

    let (code, out, err) = harrier(
        &[
            "check",
            &b,
            "p95<1s",
            "error_rate<1%",
            "throughput>10/s",
            "label=Login p95<500ms",
        ],
        &db,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("4 gates: 4 passed, 0 failed"), "{out}");
    let (code, out, err) = harrier(&["check", &b, "p95<1s"], &db);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 gate: 1 passed, 0 failed"), "{out}");

    let junit = dir.path().join("junit.xml");
    let (code, out, err) = harrier(
        &[
            "check",
            &s,
            "--baseline",
            &b,
            "p95 +10%",
            "throughput -5%",
            "p95<100ms",
            "--junit",
            junit.to_str().unwrap(),
        ],
        &db,
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FAIL  p95 +10%"), "{out}");
    assert!(out.contains("PASS  throughput -5%"), "same load: {out}");

    // The JUnit report, read back: one test case per gate, two failures.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let mut reader = quick_xml::Reader::from_str(&xml);
    let (mut cases, mut failures) = (Vec::new(), 0);
    loop {
        match reader.read_event().unwrap() {
            quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => {
                match e.name().as_ref() {
                    b"testcase" => cases.push(
                        e.try_get_attribute("name")
                            .unwrap()
                            .unwrap()
                            .unescape_value()
                            .unwrap()
                            .into_owned(),
                    ),
                    b"failure" => failures += 1,
                    b"testsuite" => assert_eq!(
                        e.try_get_attribute("failures")
                            .unwrap()
                            .unwrap()
                            .unescape_value()
                            .unwrap(),
                        "2"
                    ),
                    _ => {}
                }
            }
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(cases, ["p95 +10%", "throughput -5%", "p95<100ms"]);
    assert_eq!(failures, 2);

    // Usage and input errors: 2.
    for args in [
        vec!["check", &s, "p95<<1s"],
        vec!["check", &s, "p95 -10%"],
        vec!["check", "999", "p95<1s"],
        vec!["check", &s],
        vec!["check", &s, "--baseline", "999", "p95 +10%"],
        vec!["check", "seven", "p95<1s"],
    ] {
        let (code, out, err) = harrier(&args, &db);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains("harrier"), "says why: {err}");
    }
    // An unknown flag is clap's usage error: 2 as well.
    let (code, _, _) = harrier(&["check", &s, "--frobnicate"], &db);
    assert_eq!(code, 2);

    // compare: JSON, Markdown, and the one-file HTML.
    let (code, out, _) = harrier(&["compare", &b, &s, "--format", "json"], &db);
    assert_eq!(code, 0);
    let c: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(verdict(&c, 0, 1, "p95_ms"), "worse");
    let (_, md, _) = harrier(&["compare", &b, &s, "--format", "markdown"], &db);
    assert!(md.contains("| Figure |") && md.contains("worse"), "{md}");
    let html = dir.path().join("cmp.html");
    let (code, _, err) = harrier(
        &[
            "compare",
            &b,
            &s,
            "--format",
            "html",
            "-o",
            html.to_str().unwrap(),
        ],
        &db,
    );
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(
        !text.contains("<script") && !text.contains("src=\"http"),
        "self-contained"
    );
    assert_eq!(text.matches("<svg").count(), 4);
    let (code, _, _) = harrier(&["compare", &b, "999"], &db);
    assert_eq!(code, 2, "unknown run");

    // baseline: pin, show, clear.
    let (code, out, _) = harrier(&["baseline", "checkout", &b], &db);
    assert_eq!(code, 0);
    assert!(
        out.contains(&format!("baseline run #{base} (pinned)")),
        "{out}"
    );
    let (code, out, _) = harrier(&["check", &s, "p95 +10%", "--no-record"], &db);
    assert_eq!(code, 1);
    assert!(out.contains("(pinned)"), "{out}");
    let (code, _, _) = harrier(&["baseline", "other-scenario", &b], &db);
    assert_eq!(code, 2);
    let (code, out, _) = harrier(&["baseline", "checkout", "--clear"], &db);
    assert_eq!(code, 0);
    assert!(out.contains("no baseline pinned"), "{out}");
}

fn seeds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seeds")
}

#[tokio::test]
async fn published_seeds_compare_and_trend() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for (i, file) in ["camel-rest-tuning.json", "soa-container-release.json"]
        .iter()
        .enumerate()
    {
        let text = std::fs::read_to_string(seeds_dir().join(file)).unwrap();
        let runs = harrier::sources::seed::parse(&text, file, 1_000_000 * (i as i64 + 1)).unwrap();
        let batch: Vec<_> = runs.iter().map(|r| (r.run.clone(), &r.data)).collect();
        ids.extend(app.state.store.import_runs(&batch).await.unwrap());
    }
    let (soa_old, soa_new) = (ids[3], ids[4]);
    let c = app
        .get(&format!("/api/v1/compare?runs={soa_old},{soa_new}"))
        .await
        .json();
    let tp = &c["scopes"][0]["runs"][1]["changes"]["throughput_rps"];
    assert!((tp["pct"].as_f64().unwrap() - 23.235).abs() < 0.01, "{tp}");
    assert!(tp["verdict"].is_null(), "summary-only: no verdict");
    assert!(
        c["scopes"][0]["runs"][1]["count"].is_null(),
        "count unknown, not 0"
    );

    let c = app
        .get(&format!(
            "/api/v1/compare?runs={},{},{}",
            ids[0], ids[1], ids[2]
        ))
        .await
        .json();
    let mean: Vec<f64> = (1..3)
        .map(|i| {
            c["scopes"][0]["runs"][i]["changes"]["mean_ms"]["pct"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert!(
        (mean[0] + 47.06).abs() < 0.01 && (mean[1] + 76.47).abs() < 0.01,
        "{mean:?}"
    );
    let tp = c["scopes"][0]["runs"][2]["changes"]["throughput_rps"]["pct"]
        .as_f64()
        .unwrap();
    assert!((tp - 258.55).abs() < 0.01, "{tp}");

    // The trend of the tuning: three runs, improving, no regression.
    let t = app.get("/api/v1/scenarios/camel-rest-route").await.json();
    let tps: Vec<f64> = t["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["throughput_rps"].as_f64().unwrap())
        .collect();
    assert_eq!(tps, [550.0, 995.0, 1972.0]);
    assert!(
        t["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["regressions"].as_array().unwrap().is_empty())
    );
    let page = app
        .get(&format!("/console/compare?runs={soa_old},{soa_new}"))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.html();
    let row = select_texts(&html, "#scope-0 tr[data-figure=\"throughput_rps\"] td");
    assert!(row[1].contains("+23.2 %"), "{row:?}");
    assert!(
        select_texts(&html, ".callout")
            .iter()
            .any(|t| t.contains("Summary-only"))
    );
    // Published figures without a request count show "–", not "0".
    let runs = app.get("/console/runs").await.html();
    let row = select_texts(
        &runs,
        &format!("#runs-table tr[data-run-id=\"{soa_old}\"] td"),
    );
    assert!(
        row.iter().any(|c| c == "–") && !row.iter().any(|c| c == "0"),
        "{row:?}"
    );
    let run = app.get(&format!("/console/runs/{soa_old}")).await.html();
    let kpis = select_texts(&run, ".kpi-value");
    assert_eq!(kpis[0], "–", "{kpis:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_export_and_ten_runs_in_the_browser() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harrier.db");
    let store = Store::open(&db).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..10u64 {
        let factor = if i == 9 { 1.4 } else { 1.0 };
        let id = synthetic_run(
            &store,
            &format!("run {i}"),
            "ten",
            100 + i,
            factor,
            1_780_000_000_000 + i as i64 * 3_600_000,
        )
        .await;
        ids.push(id.to_string());
    }
    drop(store);
    let html = dir.path().join("report.html");
    let (code, _, err) = harrier(
        &[
            "compare",
            &ids[0],
            &ids[8],
            &ids[9],
            "--format",
            "html",
            "-o",
            html.to_str().unwrap(),
        ],
        &db,
    );
    assert_eq!(code, 0, "{err}");

    let (_harrier, base) = crate::browser::start_harrier(&db);
    let (_driver, client) = crate::browser::browser().await;

    // The exported file opened from disk: four visible SVG charts with drawn lines.
    client
        .goto(&format!("file://{}", html.display()))
        .await
        .unwrap();
    let charts = client
        .execute(
            "return Array.from(document.querySelectorAll('svg.chart')).map(s => {
               const r = s.getBoundingClientRect();
               return {w: r.width, h: r.height, paths: s.querySelectorAll('path').length,
                       visible: getComputedStyle(s).visibility === 'visible' && r.width > 0};
             });",
            vec![],
        )
        .await
        .unwrap();
    let charts = charts.as_array().unwrap();
    assert_eq!(charts.len(), 4, "{charts:?}");
    for c in charts {
        assert_eq!(c["visible"], true, "{c}");
        assert!(
            c["w"].as_f64().unwrap() > 300.0 && c["h"].as_f64().unwrap() > 80.0,
            "{c}"
        );
        assert_eq!(c["paths"], 3, "one line per run: {c}");
    }
    let worse = client.find_all(Locator::Css(".badge.worse")).await.unwrap();
    assert!(!worse.is_empty(), "the slow run is marked worse");

    // Ten runs on the compare page: every overlay chart drawn with ten series.
    client
        .goto(&format!("{base}/console/compare?runs={}", ids.join(",")))
        .await
        .unwrap();
    let wait = || client.wait().at_most(Duration::from_secs(30));
    for chart in ["cmp-p95", "cmp-rps", "cmp-err", "cmp-pct"] {
        wait()
            .for_element(Locator::Css(&format!(
                ".chart[data-chart=\"{chart}\"] canvas"
            )))
            .await
            .unwrap_or_else(|e| panic!("{chart} not drawn: {e}"));
    }
    let series = client
        .execute(
            "return window.harrier.compare.charts.map(u => u.series.length - 1);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(series, serde_json::json!([10, 10, 10, 10]));
    let heads = client
        .find_all(Locator::Css("#scope-0 thead th"))
        .await
        .unwrap();
    assert_eq!(heads.len(), 11);
    let last = client
        .find(Locator::Css(
            "#scope-0 tr[data-figure=\"p95_ms\"] td:last-child .verdict",
        ))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(last, "worse");
    if let Ok(png) = client.screenshot().await {
        let _ = std::fs::write(
            PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("compare-ten.png"),
            png,
        );
    }

    // The reference select reloads the page with that run first.
    client
        .execute(
            "const s = document.getElementById('compare-ref'); s.selectedIndex = 9; s.dispatchEvent(new Event('change'));",
            vec![],
        )
        .await
        .unwrap();
    let mut first = String::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Ok(row) = client
            .find(Locator::Css("#compare-runs tr:first-child"))
            .await
        {
            first = row.text().await.unwrap_or_default();
            if first.contains("run 9") {
                break;
            }
        }
    }
    assert!(
        first.contains("run 9") && first.contains("reference"),
        "{first}"
    );
    let url = client.current_url().await.unwrap();
    assert!(
        url.query()
            .unwrap_or_default()
            .starts_with(&format!("runs={}", ids[9])),
        "{url}"
    );
    let _ = client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_stored_before_draws_were_kept_still_compare() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harrier.db");
    let store = Store::open(&db).await.unwrap();
    let (base, again, slow) = three_runs(&store).await;
    let draws = || async {
        sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM run_resamples")
            .fetch_one(store.sqlite_pool().unwrap())
            .await
            .unwrap()
    };
    assert_eq!(draws().await, 9, "3 runs × (total, Login, Search)");
    let args = [
        "compare",
        &base.to_string(),
        &again.to_string(),
        &slow.to_string(),
        "--format",
        "json",
    ]
    .map(String::from);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = harrier(&args, &db);
    assert_eq!(code, 0, "{err}");
    let stored: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(verdict(&stored, 0, 2, "p95_ms"), "worse");
    assert_eq!(verdict(&stored, 0, 1, "p95_ms"), "no_change");

    // As in a database imported before the draws were stored.
    sqlx::query("DELETE FROM run_resamples")
        .execute(store.sqlite_pool().unwrap())
        .await
        .unwrap();
    let (code, out, err) = harrier(&args, &db);
    assert_eq!(code, 0, "{err}");
    let old_style: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(old_style, stored, "same figures, intervals and verdicts");
    assert_eq!(draws().await, 9, "the comparison stored the draws again");
}

/// The runs list's tick form sends its boxes in table order (newest first); the
/// comparison it opens has its reference first: the oldest run, or the scenario's pinned
/// baseline when that is among them. An explicit order is kept.
#[tokio::test]
async fn the_picked_reference_comes_first() {
    let app = spawn_app().await;
    let (base, again, slow) = three_runs(&app.state.store).await;
    let r = app
        .get(&format!(
            "/console/compare?order=reference&runs={slow}&runs={again}&runs={base}"
        ))
        .await;
    assert!(r.status.is_redirection(), "{}", r.status);
    assert_eq!(
        r.location.as_deref(),
        Some(format!("/console/compare?runs={base},{again},{slow}").as_str()),
        "the oldest first"
    );
    let pinned = send_json(
        &app,
        "PUT",
        "/api/v1/scenarios/checkout/baseline",
        serde_json::json!({"run_id": again}),
    )
    .await;
    assert!(pinned.status.is_success(), "{}", pinned.text());
    let r = app
        .get(&format!("/console/compare?order=reference&runs={slow}&runs={base}&runs={again}&min_effect_pct=20"))
        .await;
    assert_eq!(
        r.location.as_deref(),
        Some(format!("/console/compare?runs={again},{base},{slow}&min_effect_pct=20").as_str()),
        "the pinned baseline first, then the oldest"
    );
    let page = app
        .get(&format!("/console/compare?runs={slow},{base}"))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    let heads = select_texts(&page.html(), "thead th.num");
    assert!(
        heads[0].starts_with(&format!("#{slow} ")) && heads[0].ends_with("reference"),
        "an explicit order is kept: {heads:?}"
    );
}

/// A stepped JMeter ramp: per step (users, requests per second, response time ms), 10 s
/// each; with `jitter`, the request count alternates ±1 per second (a plateau with noise).
fn ramp_jtl(steps: &[(u32, u32, u32)], jitter: bool) -> Vec<u8> {
    let mut out = String::from(
        "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,bytes,grpThreads,allThreads\n",
    );
    let start = 1_700_000_000_000i64;
    for (step, (users, rps, ms)) in steps.iter().enumerate() {
        for second in 0..10 {
            let t0 = start + (step as i64 * 10 + second) * 1000;
            let n = if jitter && second % 2 == 1 {
                rps + 1
            } else {
                *rps
            };
            for i in 0..n {
                let ts = t0 + i64::from(i) * 1000 / i64::from(n);
                out.push_str(&format!(
                    "{ts},{ms},GET /api,200,OK,T 1-{i},text,true,100,{users},{users}\n"
                ));
            }
        }
    }
    out.into_bytes()
}

/// Issue 12: capacity in comparisons and as a gate. Three ramps of one scenario: the
/// reference stops scaling at ~9 users (≈ 89 req/s), a rerun the same (±1 request a second),
/// and a slower build at ~9 users (≈ 65 req/s). The comparison shows each knee and calls the
/// slower one's capacity worse (beyond the plateaus' noise); `capacity_rps` gates judge it,
/// absolute and against the baseline; the page and the Markdown export show the row.
#[tokio::test]
async fn capacity_is_compared_and_gated() {
    let app = spawn_app().await;
    let import = |name: &str, body: Vec<u8>| {
        let app = &app;
        let q = format!("name={name}&scenario=ramp");
        async move {
            let r = app.import(&q, body).await;
            assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
            r.json()["runs"][0]["id"].as_i64().unwrap()
        }
    };
    let base = import(
        "base",
        ramp_jtl(
            &[(4, 40, 50), (8, 80, 52), (12, 90, 180), (16, 88, 400)],
            false,
        ),
    )
    .await;
    let again = import(
        "again",
        ramp_jtl(
            &[(4, 40, 50), (8, 80, 52), (12, 90, 180), (16, 88, 400)],
            true,
        ),
    )
    .await;
    let slow = import(
        "slow",
        ramp_jtl(
            &[(4, 30, 60), (8, 60, 62), (12, 66, 200), (16, 64, 420)],
            false,
        ),
    )
    .await;
    let c = app
        .get(&format!("/api/v1/compare?runs={base},{again},{slow}"))
        .await
        .json();
    let cap = c["capacity"].as_array().unwrap();
    assert_eq!(cap.len(), 3, "{c}");
    let plateau = (10.0 * 90.0 + 9.0 * 88.0) / 19.0;
    crate::helpers::assert_close(cap[0]["capacity_rps"].as_f64().unwrap(), plateau, "base");
    assert_eq!(cap[0]["knee_users"], 9);
    // noise: the standard error of the plateau's per-second counts (10 × 90, 9 × 88)
    let var = (10.0 * (90.0 - plateau).powi(2) + 9.0 * (88.0 - plateau).powi(2)) / 18.0;
    crate::helpers::assert_close(
        cap[0]["noise_rps"].as_f64().unwrap(),
        (var / 19.0f64).sqrt(),
        "noise",
    );
    assert!(cap[0]["change"].is_null(), "the reference");
    assert_eq!(cap[1]["change"]["verdict"], "no_change", "{}", cap[1]);
    assert!(cap[1]["noise_rps"].as_f64().unwrap() > 0.0);
    let slow_plateau = (10.0 * 66.0 + 9.0 * 64.0) / 19.0;
    crate::helpers::assert_close(
        cap[2]["capacity_rps"].as_f64().unwrap(),
        slow_plateau,
        "slow",
    );
    crate::helpers::assert_close(
        cap[2]["change"]["pct"].as_f64().unwrap(),
        (slow_plateau - plateau) / plateau * 100.0,
        "change %",
    );
    assert_eq!(cap[2]["change"]["verdict"], "worse", "{}", cap[2]);
    assert_eq!(cap[2]["knee_users"], 9);
    assert_eq!(cap[2]["change"]["users_abs"], 0);

    // gates: absolute, and relative to the baseline (beyond the tolerance and the noise)
    let r = send_json(
        &app,
        "POST",
        &format!("/api/v1/runs/{slow}/check"),
        serde_json::json!({"gates": ["capacity_rps>80", "capacity_rps>50", "capacity_rps -10%", "capacity -50%"],
            "baseline": base.to_string(), "record": false}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let rep = r.json();
    let status: Vec<&str> = rep["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["status"].as_str().unwrap())
        .collect();
    assert_eq!(status, ["fail", "pass", "fail", "pass"], "{rep}");
    let msg = rep["results"][2]["message"].as_str().unwrap();
    assert!(msg.contains("more than the noise"), "{msg}");
    assert_eq!(rep["passed"], false);
    // the rerun's capacity is within the noise of the baseline's
    let r = send_json(
        &app,
        "POST",
        &format!("/api/v1/runs/{again}/check"),
        serde_json::json!({"gates": ["capacity_rps -1%"], "baseline": base.to_string(), "record": false}),
    )
    .await;
    assert_eq!(r.json()["results"][0]["status"], "pass", "{}", r.text());
    // a malformed capacity gate is refused with the figures named
    let r = send_json(
        &app,
        "POST",
        &format!("/api/v1/runs/{slow}/check"),
        serde_json::json!({"gates": ["capacity_rps>80ms"]}),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());

    // the page and the Markdown export
    let page = app
        .get(&format!("/console/compare?runs={base},{slow}"))
        .await
        .html();
    let row = select_texts(&page, "#scope-0 tr[data-figure=\"capacity_rps\"] td");
    assert_eq!(row.len(), 2, "{row:?}");
    assert!(row[0].contains("89.1 req/s at ~9 users"), "{row:?}");
    assert!(
        row[1].contains("65.1 req/s") && row[1].ends_with("worse"),
        "{row:?}"
    );
    let md = app
        .get(&format!("/console/compare.html?runs={base},{slow}"))
        .await
        .text();
    assert!(md.contains("<td>Capacity</td>"), "HTML export has the row");
}

/// A run's capacity reads every per-second bucket, so an ended run's is kept in the store
/// once computed: comparisons and the run's JSON read the kept one while its key (rule
/// version, status, counts, times) holds, compute it again when the key is stale, and the
/// kept one goes with the run.
#[tokio::test]
async fn an_ended_runs_capacity_is_kept_and_read_back() {
    let app = spawn_app().await;
    let r = app
        .import(
            "name=kept&scenario=ramp",
            ramp_jtl(
                &[(4, 40, 50), (8, 80, 52), (12, 90, 180), (16, 88, 400)],
                false,
            ),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let id = r.json()["runs"][0]["id"].as_i64().unwrap();
    let r = app
        .import(
            "name=other&scenario=ramp",
            ramp_jtl(&[(4, 30, 60), (8, 60, 62), (12, 66, 200)], false),
        )
        .await;
    let other = r.json()["runs"][0]["id"].as_i64().unwrap();
    let store = &app.state.store;
    let computed = app.get(&format!("/api/v1/runs/{id}")).await.json()["capacity"].clone();
    assert!(
        computed["statement"]
            .as_str()
            .unwrap()
            .starts_with("saturates at"),
        "{computed}"
    );
    let (key, json) = store
        .run_capacity_kept(id)
        .await
        .unwrap()
        .expect("kept once computed");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&json).unwrap(),
        computed
    );

    // read back, not computed: a kept capacity under the present key is what is shown
    let mut marked = computed.clone();
    marked["statement"] = "kept".into();
    store
        .put_run_capacity(id, &key, &marked.to_string())
        .await
        .unwrap();
    let run = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(run["capacity"]["statement"], "kept");
    let c = app
        .get(&format!("/api/v1/compare?runs={id},{other}"))
        .await
        .json();
    assert_eq!(
        c["capacity"][0]["capacity_rps"], computed["throughput_rps"],
        "{c}"
    );

    // a stale key (another rule version, other counts) is computed again and kept anew
    store
        .put_run_capacity(id, "v0 stale", &marked.to_string())
        .await
        .unwrap();
    let run = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(run["capacity"], computed);
    assert_eq!(store.run_capacity_kept(id).await.unwrap().unwrap().0, key);

    // deleting the run deletes what was kept
    assert!(store.delete_run(id).await.unwrap());
    assert!(store.run_capacity_kept(id).await.unwrap().is_none());
}

/// Issue 12: a scenario's trend can be drawn against a tag of its runs (concurrency, build)
/// instead of time: the API lists the tag keys and each run's tags; the page offers them,
/// says how many runs lack the picked one, hands it to the charts, and refuses a tag no
/// run has.
#[tokio::test]
async fn scenario_trend_against_a_tag() {
    let app = spawn_app().await;
    let ramp = ramp_jtl(
        &[(4, 40, 50), (8, 80, 52), (12, 90, 180), (16, 88, 400)],
        false,
    );
    for q in [
        "name=c20&scenario=steps&tag=concurrency=20&tag=build=b1",
        "name=c5&scenario=steps&tag=concurrency=5&tag=build=b2",
        "name=plain&scenario=steps",
    ] {
        let r = app.import(q, ramp.clone()).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    }
    let t = app.get("/api/v1/scenarios/steps").await.json();
    assert_eq!(t["tag_keys"], serde_json::json!(["build", "concurrency"]));
    let tags: Vec<serde_json::Value> = t["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tags"]["concurrency"].clone())
        .collect();
    assert_eq!(
        tags,
        [
            serde_json::json!("20"),
            serde_json::json!("5"),
            serde_json::Value::Null
        ]
    );

    let page = app.get("/console/scenarios/steps?x=concurrency").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text());
    let html = page.html();
    assert_eq!(
        select_texts(&html, "#trend-x option"),
        ["time", "tag build", "tag concurrency"]
    );
    assert_eq!(
        select_texts(&html, "#trend-x option[selected]"),
        ["tag concurrency"]
    );
    assert_eq!(
        select_texts(&html, "#trend-x-untagged"),
        ["1 run without it left out"]
    );
    let island = select_texts(&html, "script#scenario-data");
    let data: serde_json::Value = serde_json::from_str(&island[0]).unwrap();
    assert_eq!(data["x_tag"], "concurrency");
    // on the time axis, no tag is picked
    let html = app.get("/console/scenarios/steps").await.html();
    assert_eq!(select_texts(&html, "#trend-x option[selected]"), ["time"]);
    let r = app.get("/console/scenarios/steps?x=region").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains("build, concurrency"), "{}", r.text());
}

/// Issue 26: a `harrier load find` run's answer is a first-class figure: `capacity_rps`
/// gates read the rate it sustained, `capacity_users` fails saying a search has no users,
/// comparisons show it, and the runs list has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_searchs_answer_is_gated_compared_and_listed() {
    // 4 workers of 10 ms: 400 req/s; two short searches that stop at --max-duration.
    let (url, _pool) = crate::load::pool_service(4, Duration::from_millis(10), 20).await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let db_arg = db.to_str().unwrap().to_string();
    let cli = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            Command::new(HARRIER)
                .args(&args)
                .env_remove("HARRIER_DB")
                .env_remove("HARRIER_CONFIG")
                .env_remove("HARRIER_DATABASE_URL")
                .output()
                .unwrap()
        })
    };
    let owned = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for _ in 0..2 {
        let out = cli(owned(&[
            "load",
            "find",
            &url,
            "--db",
            &db_arg,
            "--start-rate",
            "50",
            "--step-duration",
            "2s",
            "--max-duration",
            "5s",
            "--dispatch-limit",
            "250ms",
        ]))
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let check = |gates: &[&str]| {
        let mut a = owned(&["check", "2", "--db", &db_arg, "--no-record"]);
        a.extend(owned(gates));
        cli(a)
    };
    let out = check(&["capacity_rps>10"]).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("harrier load find"), "{stdout}");
    let out = check(&["capacity_rps>100000"]).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = check(&["capacity_users>1"]).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("not known"), "{stdout}");

    let out = cli(owned(&[
        "compare", "1", "2", "--db", &db_arg, "--format", "json",
    ]))
    .await
    .unwrap();
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    });
    for i in 0..2 {
        assert_eq!(c["capacity"][i]["kind"], "search", "{}", c["capacity"]);
        assert!(c["capacity"][i]["capacity_rps"].as_f64().unwrap() > 10.0);
    }
    let store = Store::open(&db).await.unwrap();
    let rows = harrier::views::runs::list_runs(&store).await.unwrap();
    assert_eq!(rows.len(), 2);
    for (row, listed) in rows
        .iter()
        .zip(c["capacity"].as_array().unwrap().iter().rev())
    {
        assert_eq!(row.capacity_rps, listed["capacity_rps"].as_f64(), "{row:?}");
        assert_eq!(row.capacity_users, None);
    }
}
