//! Gatling, k6 and Locust files parsed end to end: real tool outputs and the edge cases
//! EC19, EC24 and EC27.
//!
//! Public samples (copied from public repositories, never committed here) are read from
//! `../shared/fixtures/public/` beside the project; when that folder is absent the tests
//! that need it are recorded as skipped (`skip(Kind::Shared, …)`). Generated samples (k6,
//! Locust, see `tests/fixtures/*/SOURCE.md`) and the edge cases are committed under
//! `tests/fixtures/`.
//!
//! Expected figures were computed independently of harrier, with small Python scripts over
//! the same files (nearest rank ⌈p/100 · n⌉; Gatling's binary layout decoded by a separate
//! decoder written from Gatling's writer, docs/formats.md#gatling), or read off the tool's own report where the test
//! says so.

use std::fs::File;
use std::io::{BufReader, Cursor};
use std::path::{Path, PathBuf};

use harrier::domain::runs::{RunData, RunLimits, Stats};
use harrier::sources::ingest::{self, Format, IngestError, ParsedRun};
use serde_json::Value;

#[path = "it/skip.rs"]
mod skip;
use skip::{Kind, skip};

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A public sample, or `None` (after saying so) when `../shared` is not there.
fn public(rel: &str) -> Option<PathBuf> {
    let root = manifest().join("../shared/fixtures/public");
    if !root.is_dir() {
        skip(
            Kind::Shared,
            "../shared/fixtures/public is not beside the checkout",
        );
        return None;
    }
    Some(root.join(rel))
}

fn fixture(rel: &str) -> PathBuf {
    manifest().join("tests/fixtures").join(rel)
}

/// Parses `path` with the default limits, except that times from 1970 on are plausible:
/// some public fixtures are the tools' own unit-test data (Gatling's
/// `v3.12.0_fixture_text_simulation.log` times its requests 1 s after the epoch), which
/// harrier's default window (1990–2100) rejects row by row.
fn parse_path(path: &Path, format: Format) -> Result<Vec<ParsedRun>, IngestError> {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut limits = RunLimits::default();
    limits.samples.min_start_ms = 0;
    ingest::parse_with(
        BufReader::new(file),
        format,
        &path.file_name().unwrap().to_string_lossy(),
        &limits,
    )
}

/// The one run in `path`, read with format sniffing; its tool must be `tool`.
fn one_run(path: &Path, tool: &str) -> ParsedRun {
    let mut runs = parse_path(path, Format::Auto).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs.len(), 1, "{}: one run", path.display());
    let run = runs.remove(0);
    assert_eq!(run.tool, tool, "{}", path.display());
    run
}

fn label<'a>(run: &'a RunData, name: &str) -> &'a Stats {
    &run.labels
        .iter()
        .find(|l| l.label == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = run.labels.iter().map(|l| l.label.as_str()).collect();
            panic!("no label {name:?}; labels: {names:?}")
        })
        .stats
}

/// count, errors, min, max, sum of response times (ms), p50, p90, p95, p99.
type Figures = (u64, u64, f64, f64, f64, f64, f64, f64, f64);

fn figures(s: &Stats) -> Figures {
    let sum = s.mean_ms.expect("mean") * s.count as f64;
    (
        s.count,
        s.errors,
        s.min_ms.expect("min"),
        s.max_ms.expect("max"),
        (sum * 1e6).round() / 1e6,
        s.p50_ms.expect("p50"),
        s.p90_ms.expect("p90"),
        s.p95_ms.expect("p95"),
        s.p99_ms.expect("p99"),
    )
}

// ---- expected.json comparison (as tests/ingest_edge_cases.rs) ----

fn case_dir(id: &str) -> PathBuf {
    fixture("edge-cases").join(id)
}

fn expected(id: &str) -> Value {
    let text = std::fs::read_to_string(case_dir(id).join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("valid JSON")
}

/// Integers exactly, floats within 1e-6 relative (or equal rounded to 6 decimals),
/// `null` ↔ `None`.
fn assert_number(ctx: &str, actual: &Value, expected: &Value) {
    match (actual, expected) {
        (Value::Null, Value::Null) => {}
        (a, e) if e.is_i64() || e.is_u64() => {
            let (a, e) = (a.as_f64(), e.as_f64().expect("number"));
            assert_eq!(a, Some(e), "{ctx}: expected exactly {e}, got {a:?}");
        }
        (a, e) if e.is_f64() => {
            let e = e.as_f64().expect("number");
            let a = a
                .as_f64()
                .unwrap_or_else(|| panic!("{ctx}: expected {e}, got {a}"));
            let round6 = |v: f64| (v * 1e6).round() / 1e6;
            let close = (a - e).abs() <= 1e-6 * e.abs() || round6(a) == round6(e);
            assert!(close, "{ctx}: expected {e}, got {a}");
        }
        (a, e) => assert_eq!(a, e, "{ctx}"),
    }
}

/// Every key of `expected` (figures named like [`Stats`] fields) must match.
fn assert_stats(ctx: &str, actual: &Stats, expected: &Value) {
    let actual = serde_json::to_value(actual).expect("Stats serializes");
    let expected = expected.as_object().expect("object of figures");
    assert!(!expected.is_empty(), "{ctx}: nothing to compare");
    for (key, want) in expected {
        let got = actual
            .get(key)
            .unwrap_or_else(|| panic!("{ctx}: Stats has no field {key}"));
        assert_number(&format!("{ctx}.{key}"), got, want);
    }
}

// ---- Gatling ----

#[test]
fn ec19_gatling_raw_line_feeds_and_tab_in_ko_messages() {
    let exp = expected("EC19");
    let exp = &exp["expected"];
    let run = one_run(&case_dir("EC19").join("simulation.log"), "gatling");
    assert_eq!(run.name_hint.as_deref(), Some("com.example.ShopSimulation"));
    let data = &run.data;
    assert_eq!(Some(data.overall.count), exp["parse"]["requests"].as_u64());
    assert_eq!(
        Some(data.rejected_rows),
        exp["parse"]["rejected_lines"].as_u64()
    );
    assert_stats("EC19.overall", &data.overall, &exp["overall"]);
    let by_request = exp["by_request"].as_object().unwrap();
    let mut got: Vec<&str> = data.labels.iter().map(|l| l.label.as_str()).collect();
    let mut want: Vec<&str> = by_request.keys().map(String::as_str).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "EC19: exactly these requests");
    for l in &data.labels {
        assert_stats(
            &format!("EC19.by_request[{}]", l.label),
            &l.stats,
            &by_request[&l.label],
        );
    }
    for (request, ko) in exp["ko_by_request"].as_object().unwrap() {
        let kos: u64 = data
            .errors
            .iter()
            .filter(|e| &e.label == request)
            .map(|e| e.count)
            .sum();
        assert_eq!(Some(kos), ko.as_u64(), "EC19: KOs of {request}");
    }
    // The whole message is kept: the continuation lines joined with a line feed, the part
    // after the extra TAB joined with a TAB. The case's "first line" stops at either.
    for (request, first) in exp["ko_message_first_lines"].as_object().unwrap() {
        let e = data.errors.iter().find(|e| &e.label == request).unwrap();
        let first_line = e.message.split(['\n', '\t']).next().unwrap();
        assert_eq!(
            Some(first_line),
            first.as_str(),
            "EC19: message of {request}"
        );
    }
    let checkout = data.errors.iter().find(|e| e.label == "checkout").unwrap();
    assert_eq!(
        checkout.message,
        "status.find.in(200,304), but actually found 502: <html>\n<body>Bad gateway</body>\n</html>"
    );
    let cart = data.errors.iter().find(|e| e.label == "cart").unwrap();
    assert_eq!(
        cart.message,
        "status.find.is(200), but actually found 500\tInternal error"
    );
    // One user, START at …100 and END at …120 (3.0–3.3 layout: END carries start and end).
    let seconds: Vec<(i64, Option<u32>)> = data
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| (b.start_ms, b.active_users))
        .collect();
    assert_eq!(
        seconds,
        [(1_700_000_000_000, Some(1)), (1_700_000_001_000, Some(1))]
    );
}

/// Gatling 3.9.5 text log beside the report Gatling computed from it (`js/stats.json`).
#[test]
fn gatling_3_9_text_log_matches_gatlings_own_report() {
    let Some(dir) = public("gatling/v3.9.5_report") else {
        return;
    };
    let run = one_run(&dir.join("simulation.log"), "gatling");
    assert_eq!(
        run.name_hint.as_deref(),
        Some("simulations.ComputerDatabaseSimulation")
    );
    let data = &run.data;
    assert_eq!(data.rejected_rows, 0);
    assert_eq!(data.reported["layout"], "text 3.4–3.12");
    assert_eq!(data.reported["gatling_version"], "3.9.5");
    assert_eq!(data.reported["records"]["ASSERTION"], 3);
    // Independently computed (Python, nearest rank) over the 60 REQUEST records.
    assert_eq!(
        figures(&data.overall),
        (60, 0, 13.0, 40.0, 1334.0, 19.0, 32.0, 34.0, 40.0)
    );
    assert_eq!(data.overall.first_start_ms, Some(1_767_826_090_885));
    assert_eq!(data.overall.last_end_ms, Some(1_767_826_102_693));

    // Gatling's report: count, KO, min, max and mean (Gatling rounds the mean to whole ms)
    // must agree per request and for "All Requests".
    let stats: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    let mut compared = 0;
    let entries = stats["contents"].as_object().unwrap().values();
    for (name, s) in entries
        .map(|e| (e["name"].as_str().unwrap(), &e["stats"]))
        .chain([("", &stats["stats"])])
    {
        let ours = if name.is_empty() {
            &data.overall
        } else {
            label(data, name)
        };
        let total = |k: &str| s[k]["total"].as_f64().unwrap();
        assert_eq!(ours.count as f64, total("numberOfRequests"), "{name}");
        assert_eq!(
            ours.errors as f64,
            s["numberOfRequests"]["ko"].as_f64().unwrap()
        );
        assert_eq!(ours.min_ms, Some(total("minResponseTime")), "{name}");
        assert_eq!(ours.max_ms, Some(total("maxResponseTime")), "{name}");
        assert_eq!(
            ours.mean_ms.unwrap().round(),
            total("meanResponseTime"),
            "{name}"
        );
        compared += 1;
    }
    assert_eq!(compared, 4);
    // Percentiles differ where Gatling's rank rule differs from nearest rank. Gatling
    // (percentiles1..4 = 50/75/95/99 here) picks the value at rank round(p/100 · (n − 1)) + 1
    // (its percentiles are approximate: an interpolation between neighbours, rounded),
    // harrier the ⌈p/100 · n⌉-th value:
    // - 02_Get_Comments_For_Post p50, n = 20: sorted …, 10th = 14, 11th = 15 →
    //   harrier 14, Gatling 15; 03_Create_Post p50: 10th = 18, 11th = 19 → 18 vs 19;
    // - All Requests p99, n = 60: harrier the 60th value (40), Gatling the 59th (39).
    // Everywhere else the two rules land on equal values (01 p50: 10th = 11th = 30).
    let p50 = |name: &str| label(data, name).p50_ms.unwrap();
    assert_eq!(
        (
            p50("01_Get_Specific_Post"),
            p50("02_Get_Comments_For_Post"),
            p50("03_Create_Post")
        ),
        (30.0, 14.0, 18.0)
    );
    let gatling_p50: Vec<f64> = stats["contents"]
        .as_object()
        .unwrap()
        .values()
        .map(|e| e["stats"]["percentiles1"]["total"].as_f64().unwrap())
        .collect();
    assert_eq!(gatling_p50, [30.0, 15.0, 19.0]);
    assert_eq!(stats["stats"]["percentiles4"]["total"], 39);
    assert_eq!(data.overall.p99_ms, Some(40.0));
    assert_eq!(stats["stats"]["percentiles3"]["total"], 34);
    assert_eq!(data.overall.p95_ms, Some(34.0));
}

#[test]
fn gatling_3_3_text_log_with_user_ids() {
    let Some(path) =
        public("gatling/taurus_fixtures/gatling-3.3.1_text_with_userId.simulation.log")
    else {
        return;
    };
    let run = one_run(&path, "gatling");
    let data = &run.data;
    assert_eq!(data.rejected_rows, 0);
    assert_eq!(data.reported["layout"], "text 3.0–3.3");
    assert_eq!(
        figures(&data.overall),
        (100, 0, 80.0, 256.0, 11117.0, 90.0, 201.0, 235.0, 247.0)
    );
    assert_eq!(data.labels.len(), 1);
    assert_eq!(data.labels[0].label, "request_1");
    // 10 users START at …243/…244 and END between …669310 and …669499.
    assert_eq!(data.reported["peak_active_users"], 10);
    let users: Vec<Option<u32>> = data
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| b.active_users)
        .collect();
    assert_eq!(users, [Some(10), Some(10)]);
}

#[test]
fn gatling_3_12_fixture_text_log() {
    let Some(path) = public("gatling/v3.12.0_fixture_text_simulation.log") else {
        return;
    };
    let run = one_run(&path, "gatling");
    assert_eq!(run.name_hint.as_deref(), Some("MySimulation"));
    assert_eq!(
        figures(&run.data.overall),
        (
            8, 0, 2000.0, 9000.0, 40000.0, 4000.0, 9000.0, 9000.0, 9000.0
        )
    );
    assert_eq!(run.data.overall.window_ms, Some(13_000));
    assert_eq!(run.data.reported["description"], "interesting test run");
}

#[test]
fn gatling_binary_logs() {
    let Some(dir) = public("gatling") else {
        return;
    };
    // The smallest real 3.14.3 log: 1 request, 2 USER records, 1 assertion.
    let run = one_run(&dir.join("v3.14.3_report/simulation.log"), "gatling");
    assert_eq!(run.name_hint.as_deref(), Some("example.BasicSimulation"));
    assert_eq!(run.data.reported["gatling_version"], "3.14.3");
    assert_eq!(run.data.reported["scenarios"][0], "Scenario");
    assert_eq!(
        figures(&run.data.overall),
        (1, 0, 458.0, 458.0, 458.0, 458.0, 458.0, 458.0, 458.0)
    );
    assert_eq!(run.data.overall.first_start_ms, Some(1_756_818_245_474));
    assert_eq!(run.data.labels[0].label, "Session");

    // Gatling's own fixture (written by a 3.12.1 snapshot): 2 scenarios, 105 requests.
    let run = one_run(&dir.join("v3.15_fixture_binary_simulation.log"), "gatling");
    let data = &run.data;
    assert_eq!(data.rejected_rows, 0);
    assert_eq!(
        figures(&data.overall),
        (105, 1, 87.0, 368.0, 13492.0, 106.0, 283.0, 303.0, 368.0)
    );
    assert_eq!(data.labels.len(), 11);
    assert_eq!(
        figures(label(data, "Post Redirect 1")),
        (3, 1, 107.0, 109.0, 324.0, 108.0, 109.0, 109.0, 109.0)
    );
    assert_eq!(data.overall.first_start_ms, Some(1_730_757_532_156));
    assert_eq!(data.overall.last_end_ms, Some(1_730_757_548_215));
    assert_eq!(data.reported["records"]["USER"], 24);

    // GROUP records: requests are labelled with their group path.
    let run = one_run(
        &dir.join("taurus_fixtures/gatling-3.14.3_binary_with_groups.simulation.log"),
        "gatling",
    );
    let names: Vec<&str> = run.data.labels.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        names,
        [
            "HttpBin Group / First GET",
            "HttpBin Group / Second GET",
            "HttpBin Group / Delayed GET"
        ]
    );
    assert_eq!(
        figures(&run.data.overall),
        (25, 0, 111.0, 3209.0, 14694.0, 128.0, 1615.0, 1806.0, 3209.0)
    );
    assert_eq!(
        figures(label(&run.data, "HttpBin Group / Delayed GET")),
        (
            7, 0, 1115.0, 3209.0, 11414.0, 1412.0, 3209.0, 3209.0, 3209.0
        )
    );
    assert!(run.data.reported["records"]["GROUP"].as_u64().unwrap() > 0);

    // No USER END records (a run cut short): users stay active to the end.
    let run = one_run(
        &dir.join("taurus_fixtures/gatling-3.14.3_binary.simulation.log"),
        "gatling",
    );
    assert_eq!(
        figures(&run.data.overall),
        (39, 0, 51.0, 494.0, 9126.0, 224.0, 396.0, 452.0, 494.0)
    );
    assert_eq!(run.data.labels.len(), 9);
}

#[test]
fn gatling_binary_log_cut_off_keeps_what_was_read() {
    let Some(path) = public("gatling/v3.15_fixture_binary_simulation.log") else {
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let cut = &bytes[..bytes.len() - 3];
    let mut runs = ingest::parse(Cursor::new(cut), Format::Gatling, "cut.log").unwrap();
    let data = runs.remove(0).data;
    assert_eq!(data.rejected_rows, 1);
    assert!(
        data.rejected[0].reason.contains("cut off"),
        "{}",
        data.rejected[0].reason
    );
    assert!(data.overall.count >= 100, "{}", data.overall.count);
}

#[test]
fn gatling_binary_log_of_an_unknown_version_is_refused_by_name() {
    let Some(path) = public("gatling/v3.14.3_report/simulation.log") else {
        return;
    };
    let mut bytes = std::fs::read(path).unwrap();
    // "3.14.3" → "4.14.3"
    assert_eq!(&bytes[5..11], b"3.14.3");
    bytes[5] = b'4';
    let err = ingest::parse(Cursor::new(bytes), Format::Auto, "future.log").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, IngestError::Invalid { .. }), "{msg}");
    assert!(msg.contains("Gatling 4.14.3"), "{msg}");
}

// ---- k6 ----

/// A figure copied from a tool's JSON: serde_json's default float parser may land one
/// unit in the last place away from the shortest representation k6 wrote.
fn assert_near(got: Option<f64>, want: f64) {
    let got = got.unwrap_or_else(|| panic!("expected {want}, got None"));
    assert!(
        (got - want).abs() <= 1e-12 * want.abs(),
        "expected {want}, got {got}"
    );
}

#[test]
fn ec24_k6_ndjson_null_tags_and_mixed_time_offsets() {
    let exp = expected("EC24");
    let exp = &exp["expected"];
    let run = one_run(&case_dir("EC24").join("k6-out.json"), "k6");
    let data = &run.data;
    let r = &data.reported;
    assert_eq!(data.rejected_rows, 0);
    assert_eq!(r["lines"], exp["lines"]);
    assert_eq!(r["metric_definitions"], exp["metric_definitions"]);
    for (metric, n) in exp["points"].as_object().unwrap() {
        assert_eq!(&r["points"][metric], n, "points of {metric}");
    }
    assert_eq!(Some(data.overall.count), exp["http_reqs_total"].as_u64());
    let d = &exp["http_req_duration_ms"];
    for (key, field) in [
        ("count", "count"),
        ("min", "min_ms"),
        ("max", "max_ms"),
        ("mean", "mean_ms"),
        ("p50", "p50_ms"),
        ("p90", "p90_ms"),
        ("p95", "p95_ms"),
        ("p99", "p99_ms"),
    ] {
        let ours = serde_json::to_value(&data.overall).unwrap()[field].clone();
        assert_number(&format!("EC24.{key}"), &ours, &d[key]);
    }
    assert_eq!(&r["requests_by_status"], &exp["by_status"]);
    assert_eq!(r["first_request_utc"], exp["first_request_utc"]);
    assert_eq!(r["last_request_utc"], exp["last_request_utc"]);
    assert_eq!(r["first_request_time_ms"], exp["first_request_epoch_ms"]);
    assert_eq!(r["last_request_time_ms"], exp["last_request_epoch_ms"]);
    assert_eq!(r["vus_max"], exp["vus_max"]);
    // The points carry each request's end; the first request started 95.4 ms before its
    // point (…20.2985669 − 0.0954 s = …20.2031669), the last ended at …21.9.
    assert_eq!(data.overall.first_start_ms, Some(1_700_000_000_203));
    assert_eq!(data.overall.last_end_ms, Some(1_700_000_001_900));
    // The file predates http_req_failed: no error rate rather than a made-up 0 %.
    assert_eq!(data.overall.error_pct, None);
    assert!(r["errors"].as_str().unwrap().starts_with("unknown"));
    // vus gauge: 1 at …20.0, 2 at …21.0.
    let users: Vec<(i64, Option<u32>)> = data
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| (b.start_ms, b.active_users))
        .collect();
    assert_eq!(
        users,
        [(1_700_000_000_000, Some(1)), (1_700_000_001_000, Some(2))]
    );
}

/// The NDJSON and the --summary-export of one k6 1.1.0 run (tests/fixtures/k6/SOURCE.md).
#[test]
fn k6_ndjson_against_the_summary_export_of_the_same_run() {
    let run = one_run(&fixture("k6/points.ndjson.gz"), "k6");
    let data = &run.data;
    assert_eq!(data.rejected_rows, 0);
    let summary = one_run(&fixture("k6/summary-export.json"), "k6");
    assert!(summary.data.summary_only);
    let (ours, k6) = (&data.overall, &summary.data.overall);

    // Equal: count, errors (http_req_failed passes = 6), error rate, min, max.
    assert_eq!((ours.count, ours.errors), (60, 6));
    assert_eq!((k6.count, k6.errors), (60, 6));
    assert_eq!(ours.error_pct, Some(10.0));
    assert_eq!(k6.error_pct, Some(10.0));
    assert_eq!(summary.data.reported["http_req_failed_rate"], 0.1);
    assert_eq!(ours.min_ms, Some(0.389495));
    assert_eq!(k6.min_ms, Some(0.389495));
    assert_eq!(ours.max_ms, Some(1003.908951));
    assert_eq!(k6.max_ms, Some(1003.908951));
    // avg: k6 sums the float ms values, harrier the integer ns: equal to 1e-12.
    assert!((ours.mean_ms.unwrap() - 93.0691841).abs() < 1e-9);
    assert!((k6.mean_ms.unwrap() - ours.mean_ms.unwrap()).abs() < 1e-9);

    // Different by rule: k6 interpolates linearly at 0-based rank p·(n − 1) between
    // neighbours; harrier takes the ⌈p·n⌉-th value (nearest rank). n = 60 (independently
    // computed from the file's http_req_duration points):
    // - med:   k6 rank 29.5 → between the 30th (49.963963) and 31st → 50.07048;
    //          harrier the 30th → 49.963963;
    // - p(90): k6 rank 53.1 → 90.6956774; harrier the 54th → 90.368491;
    // - p(95): k6 rank 56.05, between the 57th (100.867533, the slowest /slow) and the
    //          58th (a 1 s stall) → 145.847…; harrier the 57th → 100.867533;
    // - p(99): k6 rank 58.41 → 1002.1268…; harrier the 60th → 1003.908951.
    assert_eq!(
        (ours.p50_ms, ours.p90_ms, ours.p95_ms, ours.p99_ms),
        (
            Some(49.963963),
            Some(90.368491),
            Some(100.867533),
            Some(1003.908951)
        )
    );
    assert_near(k6.p50_ms, 50.07048);
    assert_near(k6.p90_ms, 90.69567740000001);
    assert_near(k6.p95_ms, 145.84714444999744);
    assert_near(k6.p99_ms, 1002.1268247300001);
    // Throughput: k6's http_reqs.rate divides by the whole test duration (3.27 s incl.
    // start-up and graceful stop); harrier by first request start → last request end.
    assert_near(k6.throughput_rps, 18.369236304701218);
    assert_eq!(ours.first_start_ms, Some(1_795_999_868_231));
    assert_eq!(ours.last_end_ms, Some(1_795_999_871_407));

    // Per label (name tag, else url): the poster scenario's /echo is also a sub-metric in
    // the export (http_req_duration{scenario:poster}): same count, avg, min, max.
    let echo = label(data, "http://127.0.0.1:8099/echo");
    let sub = &summary.data.reported["metrics"]["http_req_duration{scenario:poster}"];
    assert_eq!(echo.count, sub["count"].as_u64().unwrap());
    assert_eq!(echo.min_ms, sub["min"].as_f64());
    assert_eq!(echo.max_ms, sub["max"].as_f64());
    assert!((echo.mean_ms.unwrap() - sub["avg"].as_f64().unwrap()).abs() < 1e-12);
    let names: Vec<(&str, u64, u64)> = data
        .labels
        .iter()
        .map(|l| (l.label.as_str(), l.stats.count, l.stats.errors))
        .collect();
    assert_eq!(
        names,
        [
            ("http://127.0.0.1:8099/echo", 12, 0),
            ("GET /slow", 12, 0),
            ("http://127.0.0.1:8099/flaky", 12, 3),
            ("http://127.0.0.1:8099/notfound", 12, 0),
            ("http://127.0.0.1:8099/stall", 12, 3),
        ]
    );
    // The 404s are expected (responseCallback) so not failures; the stalls time out.
    let stall = data
        .errors
        .iter()
        .find(|e| e.label.ends_with("/stall"))
        .unwrap();
    assert_eq!((stall.response_code.as_str(), stall.count), ("0", 3));
    assert_eq!(stall.message, "request timeout");
    // vus gauge: 2 at …09.2, …10.2, …11.2; the first second has no reading yet (k6
    // writes the gauge once a second), so its user count is unknown, not 0.
    assert_eq!(data.reported["vus_max"], 2);
    let users: Vec<Option<u32>> = data
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| b.active_users)
        .collect();
    assert_eq!(users, [None, Some(2), Some(2), Some(2)]);
}

#[test]
fn k6_csv_gives_the_same_requests_as_the_ndjson() {
    let csv = one_run(&fixture("k6/points.csv.gz"), "k6").data;
    let json = one_run(&fixture("k6/points.ndjson.gz"), "k6").data;
    assert_eq!(csv.rejected_rows, 0);
    let strip = |s: &Stats| Stats {
        first_start_ms: None,
        last_end_ms: None,
        window_ms: None,
        throughput_rps: None,
        ..s.clone()
    };
    // Response-time statistics agree exactly (CSV values have 6 decimals = ns).
    assert_eq!(strip(&csv.overall), strip(&json.overall));
    for (c, j) in csv.labels.iter().zip(&json.labels) {
        assert_eq!(c.label, j.label);
        assert_eq!(strip(&c.stats), strip(&j.stats), "{}", c.label);
    }
    assert_eq!(csv.labels.len(), json.labels.len());
    // Times: the CSV stamps are whole seconds (k6's default), so the window differs.
    assert_eq!(csv.reported["first_request_time_ms"], 1_795_999_868_000i64);
    assert_eq!(csv.reported["last_request_time_ms"], 1_795_999_871_000i64);
}

/// Issue 12: k6 JSON shrunk with `grep http_req_duration` (the committed
/// `k6/points_http_req_duration.ndjson` is exactly that of `points.ndjson.gz`): each point
/// is one request, failed when `expected_response` is false. The run equals the full
/// file's — same requests, errors (6) and exact times — and `group_duration` points kept
/// by a wider grep change nothing.
#[test]
fn k6_ndjson_with_only_http_req_duration_points() {
    use std::io::Read;
    let mut full_text = String::new();
    flate2::read::GzDecoder::new(File::open(fixture("k6/points.ndjson.gz")).unwrap())
        .read_to_string(&mut full_text)
        .unwrap();
    let grep = |needles: &[&str]| -> String {
        full_text
            .lines()
            .filter(|l| needles.iter().any(|n| l.contains(n)))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let committed = std::fs::read_to_string(fixture("k6/points_http_req_duration.ndjson")).unwrap();
    assert_eq!(
        committed,
        grep(&["http_req_duration"]),
        "the fixture is the grep"
    );

    let full = one_run(&fixture("k6/points.ndjson.gz"), "k6").data;
    let only = one_run(&fixture("k6/points_http_req_duration.ndjson"), "k6").data;
    assert_eq!(only.rejected_rows, 0, "{:?}", only.rejected);
    assert_eq!(full.overall.count, 60);
    assert_eq!(only.overall, full.overall);
    assert_eq!(only.overall.errors, 6);
    assert_eq!(only.labels, full.labels);
    assert_eq!(only.reported["requests_from_http_req_duration_only"], 60);

    let with_groups = grep(&["http_req_duration", "group_duration"]);
    assert!(with_groups.contains("\"group_duration\""));
    let runs = ingest::parse(Cursor::new(with_groups), Format::Auto, "grouped.ndjson").unwrap();
    assert_eq!(
        runs[0].data.overall, full.overall,
        "group_duration never counts"
    );

    // Without expected_response, the status tag decides (0 or ≥ 400 fails): 3 × 0,
    // 3 × 500 and the 12 × 404 that the script declared expected
    // (`responseCallback: http.expectedStatuses(404)`), which only the tag could tell.
    let no_expected = committed
        .replace("\"expected_response\":\"false\",", "")
        .replace("\"expected_response\":\"true\",", "");
    assert!(
        no_expected
            .lines()
            .filter(|l| l.contains("\"Point\""))
            .all(|l| !l.contains("expected_response"))
    );
    let runs = ingest::parse(Cursor::new(no_expected), Format::Auto, "bare.ndjson").unwrap();
    let o = &runs[0].data.overall;
    assert_eq!((o.count, o.errors), (60, 18));
    assert_eq!(runs[0].data.reported["failures_from_status_tag"], 60);
}

#[test]
fn k6_handle_summary_data_is_a_summary_only_run() {
    let run = one_run(&fixture("k6/handleSummary_data.json"), "k6");
    let d = &run.data;
    assert!(d.summary_only);
    let s = &d.overall;
    assert_eq!((s.count, s.errors), (85, 4));
    assert_near(s.mean_ms, 68.54178796470589);
    assert_near(s.p50_ms, 43.927244);
    assert_near(s.p99_ms, 1001.15909988);
    assert_eq!(s.window_ms, Some(3642));
    assert_eq!(d.reported["input"], "handleSummary data");
    // {"ok": false} is a failed threshold (not inverted in this format) …
    assert_eq!(
        d.reported["thresholds"]["http_req_duration"]["p(95)<100"]["passed"],
        false
    );
    assert_eq!(d.reported["thresholds_failed"], 1);
    let checks = d.reported["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 3);
    assert!(
        checks
            .iter()
            .any(|c| c["name"] == "flaky is 200" && c["fails"] == 2)
    );
    // … while the export writes true for a failed threshold.
    let export = one_run(&fixture("k6/summary-export.json"), "k6").data;
    assert_eq!(export.reported["input"], "--summary-export");
    assert_eq!(
        export.reported["thresholds"]["http_req_duration"]["p(95)<100"]["passed"],
        false
    );
    assert_eq!(
        export.reported["thresholds"]["http_req_failed"]["rate<0.10"]["passed"],
        false
    );
    assert_eq!(
        export.reported["thresholds"]["checks"]["rate>0.9"]["passed"],
        true
    );
    assert_near(export.overall.p99_ms, 1002.1268247300001);
    assert_eq!(export.overall.window_ms, None);
}

#[test]
fn k6_public_2022_ndjson_with_type_first_keys() {
    let Some(path) = public("k6/czrpb_workloads_k6out_head560.ndjson") else {
        return;
    };
    let run = one_run(&path, "k6");
    let d = &run.data;
    assert_eq!(d.rejected_rows, 0);
    // 560 lines cut from a longer file: 50 http_reqs points, the last request lost its
    // http_req_failed point to the cut (counted as not failed, and reported).
    assert_eq!(d.reported["points"]["http_reqs"], 50);
    assert_eq!(d.reported["points"]["http_req_failed"], 49);
    assert_eq!(d.reported["requests_without_http_req_failed"], 1);
    assert_eq!(d.reported["metric_definitions"], 15);
    assert_eq!(d.overall.count, 50);
    assert_eq!(d.overall.errors, 0);
    assert_eq!(d.reported["requests_by_status"]["308"], 25);
    assert_eq!(d.overall.min_ms, Some(126.457969));
    assert_eq!(d.overall.max_ms, Some(143.131211));
    assert_eq!(d.overall.p50_ms, Some(135.582625));
}

// ---- Locust ----

#[test]
fn ec27_locust_stats_quoted_names_aggregated_row_and_na() {
    let exp = expected("EC27");
    let exp = &exp["expected"];
    let run = one_run(&case_dir("EC27").join("input_stats.csv"), "locust");
    let data = &run.data;
    assert!(data.summary_only);
    assert_eq!(data.rejected_rows, 0);
    assert_eq!(Some(data.labels.len() as u64), exp["endpoints"].as_u64());
    let by_endpoint = exp["by_endpoint"].as_object().unwrap();
    let mut got: Vec<&str> = data.labels.iter().map(|l| l.label.as_str()).collect();
    let mut want: Vec<&str> = by_endpoint.keys().map(String::as_str).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "EC27: exactly these endpoints (Type + Name)");
    // The case names the figures after Locust's columns.
    let rename = |v: &Value| -> Value {
        let mut out = serde_json::Map::new();
        for (k, v) in v.as_object().unwrap() {
            let k = match k.as_str() {
                "request_count" => "count",
                "failure_count" => "errors",
                other => other,
            };
            out.insert(k.to_owned(), v.clone());
        }
        Value::Object(out)
    };
    for l in &data.labels {
        assert_stats(
            &format!("EC27.by_endpoint[{}]", l.label),
            &l.stats,
            &rename(&by_endpoint[&l.label]),
        );
    }
    assert_stats("EC27.totals", &data.overall, &rename(&exp["totals"]));
    let sum: u64 = data.labels.iter().map(|l| l.stats.count).sum();
    assert_eq!(Some(sum), exp["sum_of_endpoint_request_counts"].as_u64());
    // The endpoint without requests shows no data, not 0 ms (its row holds 0 and N/A).
    let delete = label(data, "DELETE /cart");
    assert_eq!(
        (
            delete.min_ms,
            delete.max_ms,
            delete.p50_ms,
            delete.throughput_rps
        ),
        (None, None, None, Some(0.0))
    );
    assert_eq!(
        data.reported["percentile_rule"],
        ingest::locust::PERCENTILE_RULE
    );
}

#[test]
fn locust_stats_csv_as_written() {
    let run = one_run(&fixture("locust/run_stats.csv"), "locust");
    let d = &run.data;
    assert!(d.summary_only);
    let o = &d.overall;
    assert_eq!((o.count, o.errors), (330, 82));
    assert_eq!(
        (o.min_ms, o.max_ms, o.p50_ms, o.p90_ms, o.p95_ms, o.p99_ms),
        (
            Some(1.1185760000103073),
            Some(192.7635920000057),
            Some(51.0),
            Some(130.0),
            Some(160.0),
            Some(170.0)
        )
    );
    assert_eq!(o.mean_ms, Some(64.08662969393858));
    assert_eq!(o.throughput_rps, Some(54.861495881108034));
    let names: Vec<&str> = d.labels.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        names,
        [
            "GET /flaky",
            "GET /notfound",
            "GET /slow",
            "POST POST echo, named"
        ]
    );
    let echo = label(d, "POST POST echo, named");
    assert_eq!((echo.count, echo.errors, echo.p95_ms), (40, 31, Some(73.0)));
    // Columns harrier has no slot for stay in `reported`, as Locust wrote them.
    assert_eq!(d.reported["aggregated"]["percentiles_ms"]["99.9%"], 190.0);
    assert_eq!(d.reported["endpoints"][0]["percentiles_ms"]["66%"], 47.0);
    // Known lag (docs/formats.md#locust): the console of the same run said 368 requests and 92
    // failures; the final CSV was written before the last requests were counted. harrier
    // imports what the file says.
    assert_ne!(o.count, 368);
}

#[test]
fn locust_stats_history_alone_is_an_over_time_summary() {
    let run = one_run(&fixture("locust/run_stats_history.csv"), "locust");
    let d = &run.data;
    assert!(d.summary_only);
    assert_eq!(d.reported["input"], "stats_history.csv");
    // The last rows (…536) carry the cumulative totals, equal to run_stats.csv's.
    let o = &d.overall;
    assert_eq!((o.count, o.errors), (330, 82));
    assert_eq!(o.p50_ms, Some(51.0));
    assert_eq!(o.mean_ms, Some(64.08662969393858));
    // Windowed percentiles are not run figures.
    assert_eq!((o.p90_ms, o.p95_ms, o.p99_ms), (None, None, None));
    let flaky = label(d, "GET /flaky");
    assert_eq!((flaky.count, flaky.errors), (113, 24));
    assert_near(flaky.max_ms, 89.35187600002337);
    let history = d.reported["history"].as_array().unwrap();
    assert_eq!(history.len(), 7);
    assert_eq!(history[0]["time_ms"], 1_795_999_530_000i64);
    assert_eq!(history[0]["total_requests"], 0);
    assert_eq!(history[0]["window_percentiles_ms"]["50%"], Value::Null);
    assert_eq!(history[6]["users"], 6.0);
    assert_eq!(d.reported["peak_users"], 6.0);
}

/// Issue 12: a Locust `_stats_history.csv` is a time-series run. Real file: Locust 2.x,
/// a 20 s ramp to 8 users (`locust/history/SOURCE.md`). Expected per-second figures
/// computed independently with Python's `csv` over the `Aggregated` rows: count and
/// failures = differences of `Total Request Count` / `Total Failure Count` between rows,
/// each in the second that starts at the previous row's `Timestamp`.
#[test]
fn locust_stats_history_is_a_time_series_run() {
    let run = one_run(&fixture("locust/history/ramp_stats_history.csv"), "locust");
    let d = &run.data;
    assert_eq!(d.rejected_rows, 0, "{:?}", d.rejected);
    let o = &d.overall;
    // The last Aggregated row's cumulative totals (equal to ramp_stats.csv's).
    assert_eq!((o.count, o.errors), (749, 44));
    // First second with requests 1796139685, last 1796139703: 19 s.
    assert_eq!(o.first_start_ms, Some(1_796_139_685_000));
    assert_eq!(o.window_ms, Some(19_000));
    assert_eq!(o.throughput_rps, Some(749.0 / 19.0));
    let run_buckets: Vec<(i64, u64, u64, Option<u32>)> = d
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| {
            (
                b.start_ms / 1000 - 1_796_139_684,
                b.count,
                b.errors,
                b.active_users,
            )
        })
        .collect();
    let counts: Vec<u64> = run_buckets.iter().map(|b| b.1).collect();
    assert_eq!(
        counts,
        [
            0, 8, 8, 16, 16, 26, 24, 34, 31, 39, 35, 47, 46, 56, 53, 61, 58, 61, 66, 64
        ]
    );
    let failures: Vec<u64> = run_buckets.iter().map(|b| b.2).collect();
    assert_eq!(
        failures,
        [0, 0, 1, 0, 1, 3, 1, 2, 2, 3, 1, 4, 3, 4, 3, 3, 3, 3, 4, 3]
    );
    let users: Vec<Option<u32>> = run_buckets.iter().map(|b| b.3).collect();
    assert_eq!(users[1..].first(), Some(&Some(1)));
    assert_eq!(users.last(), Some(&Some(8)));
    assert!(users.windows(2).all(|w| w[0] <= w[1]), "a ramp: {users:?}");
    // Locust's trailing Requests/s lags: at 1796139696 it wrote 19.9 /s while 47
    // requests had completed in the second before.
    let row = d.reported["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["time_ms"] == 1_796_139_696_000i64)
        .unwrap();
    assert_eq!(row["requests_per_s"].as_f64(), Some(19.888889));
    assert_eq!(row["bucket_start_ms"], 1_796_139_695_000i64);
    assert_eq!(row["window_percentiles_ms"]["95%"].as_f64(), Some(49.0));
    // Per endpoint too.
    let slow: u64 = d
        .buckets
        .iter()
        .filter(|b| b.label.as_deref() == Some("GET /slow"))
        .map(|b| b.count)
        .sum();
    assert_eq!(slow, label(d, "GET /slow").count);
    assert_eq!(label(d, "GET /flaky").errors, 44);
}

#[test]
fn locust_json_percentiles_by_locusts_rule() {
    let run = one_run(&fixture("locust/run_final_stats.json"), "locust");
    let d = &run.data;
    assert!(d.summary_only);
    // Independently computed with Locust's own algorithm over the file (Python).
    let o = &d.overall;
    assert_eq!((o.count, o.errors), (79, 16));
    assert_eq!(
        (o.p50_ms, o.p90_ms, o.p95_ms, o.p99_ms),
        (Some(55.0), Some(130.0), Some(140.0), Some(170.0))
    );
    assert!((o.mean_ms.unwrap() - 64.17925822784906).abs() < 1e-9);
    assert_near(o.min_ms, 1.3039359999993394);
    assert_near(o.max_ms, 166.39555900002279);
    assert_eq!(o.first_start_ms, Some(1_795_999_550_436));
    assert_eq!(o.last_end_ms, Some(1_795_999_552_483));
    assert!((o.throughput_rps.unwrap() - 38.582813898568716).abs() < 1e-9);
    assert_eq!(o.bytes_received, 747);
    let flaky = label(d, "GET /flaky");
    // n = 26: Locust's p50 is the 14th value (⌊13⌋ + 1) = 12 ms; nearest rank would take
    // the 13th (11 ms). harrier shows Locust's figure for a Locust summary.
    assert_eq!(flaky.p50_ms, Some(12.0));
    assert_eq!((flaky.count, flaky.errors), (26, 5));
    // Locust rounds before counting: /notfound's p90 (66) is above its exact max (65.52).
    let notfound = label(d, "GET /notfound");
    assert_eq!(notfound.p90_ms, Some(66.0));
    assert_near(notfound.max_ms, 65.51948699996046);
    assert_eq!(d.labels.len(), 4);
}

// ---- format sniffing ----

#[test]
fn every_real_file_is_sniffed_as_its_format() {
    let mut files: Vec<(PathBuf, Format, &str)> = vec![
        (
            case_dir("EC19").join("simulation.log"),
            Format::Gatling,
            "gatling",
        ),
        (case_dir("EC24").join("k6-out.json"), Format::K6Json, "k6"),
        (
            case_dir("EC27").join("input_stats.csv"),
            Format::Locust,
            "locust",
        ),
        (fixture("k6/points.ndjson.gz"), Format::K6Json, "k6"),
        (fixture("k6/points.csv.gz"), Format::K6Csv, "k6"),
        (fixture("k6/summary-export.json"), Format::K6Summary, "k6"),
        (
            fixture("k6/handleSummary_data.json"),
            Format::K6Summary,
            "k6",
        ),
        (fixture("locust/run_stats.csv"), Format::Locust, "locust"),
        (
            fixture("locust/run_stats_history.csv"),
            Format::Locust,
            "locust",
        ),
        (
            fixture("locust/run_final_stats.json"),
            Format::Locust,
            "locust",
        ),
    ];
    if let Some(dir) = public("") {
        for (rel, format, tool) in [
            (
                "gatling/v3.9.5_report/simulation.log",
                Format::Gatling,
                "gatling",
            ),
            (
                "gatling/v3.12.0_fixture_text_simulation.log",
                Format::Gatling,
                "gatling",
            ),
            (
                "gatling/taurus_fixtures/gatling-3.3.1_text_with_userId.simulation.log",
                Format::Gatling,
                "gatling",
            ),
            (
                "gatling/v3.14.3_report/simulation.log",
                Format::Gatling,
                "gatling",
            ),
            (
                "gatling/v3.15_fixture_binary_simulation.log",
                Format::Gatling,
                "gatling",
            ),
            (
                "gatling/taurus_fixtures/gatling-3.14.3_binary.simulation.log",
                Format::Gatling,
                "gatling",
            ),
            (
                "gatling/taurus_fixtures/gatling-3.14.3_binary_with_groups.simulation.log",
                Format::Gatling,
                "gatling",
            ),
            (
                "k6/czrpb_workloads_k6out_head560.ndjson",
                Format::K6Json,
                "k6",
            ),
        ] {
            files.push((dir.join(rel), format, tool));
        }
    }
    for (path, format, tool) in &files {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let plain = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut out)
                .unwrap();
            out
        } else {
            bytes
        };
        let prefix = &plain[..plain.len().min(64 * 1024)];
        assert_eq!(ingest::sniff(prefix), Some(*format), "{}", path.display());
        // Auto parses with that parser, and gives the same run as naming the format.
        let auto = parse_path(path, Format::Auto).unwrap();
        let named = parse_path(path, *format).unwrap();
        assert_eq!(auto[0].tool, *tool, "{}", path.display());
        assert_eq!(
            auto[0].data.overall,
            named[0].data.overall,
            "{}",
            path.display()
        );
    }
    // Locust's failures.csv is not a run: it is not claimed by any parser.
    let err = parse_path(&fixture("locust/run_failures.csv"), Format::Auto).unwrap_err();
    assert!(matches!(err, IngestError::UnknownFormat { .. }), "{err}");
    // Every new --format name resolves.
    for (name, format) in [
        ("gatling", Format::Gatling),
        ("k6-json", Format::K6Json),
        ("k6-csv", Format::K6Csv),
        ("k6-summary", Format::K6Summary),
        ("k6", Format::Auto),
        ("locust", Format::Locust),
    ] {
        assert_eq!(Format::from_name(name), Some(format), "{name}");
        assert!(Format::NAMES.contains(&name), "{name} listed");
    }
}

/// Import speed of one big file; not a CI test. Run by hand:
///
/// ```text
/// HARRIER_PERF_FILE=/path/big.ndjson cargo test --release --test ingest_formats_a -- --ignored --nocapture
/// ```
#[test]
#[ignore]
fn speed_of_one_big_file() {
    let Ok(path) = std::env::var("HARRIER_PERF_FILE") else {
        skip(Kind::Env, "set HARRIER_PERF_FILE to a large result file");
        return;
    };
    let bytes = std::fs::metadata(&path).unwrap().len();
    let t = std::time::Instant::now();
    let runs = parse_path(Path::new(&path), Format::Auto).unwrap();
    let s = t.elapsed().as_secs_f64();
    let n = runs[0].data.overall.count;
    println!(
        "{path}: {} {n} requests in {s:.2} s: {:.0} requests/s, {:.1} MB/s",
        runs[0].tool,
        n as f64 / s,
        bytes as f64 / s / 1e6
    );
}
