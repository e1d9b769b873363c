//! Gatling, k6 and Locust files parsed end to end: real tool outputs and the edge cases
//! EC19, EC24 and EC27.
//!
//! Public samples (copied from public repositories, never committed here) are read from
//! `../shared/fixtures/public/` beside the project; when that folder is absent the tests
//! that need it print "skipping: ../shared not present" and pass. Generated samples (k6,
//! Locust, see `tests/fixtures/*/SOURCE.md`) and the edge cases are committed under
//! `tests/fixtures/`.
//!
//! Expected figures were computed independently of harrier, with small Python scripts over
//! the same files (nearest rank ⌈p/100 · n⌉; Gatling's binary layout decoded by a separate
//! decoder written from FORMATS.md §3.2), or read off the tool's own report where the test
//! says so.

use std::fs::File;
use std::io::{BufReader, Cursor};
use std::path::{Path, PathBuf};

use harrier::ingest::{self, Format, IngestError, ParsedRun};
use harrier::runs::{RunData, Stats};
use serde_json::Value;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A public sample, or `None` (after saying so) when `../shared` is not there.
fn public(rel: &str) -> Option<PathBuf> {
    let root = manifest().join("../shared/fixtures/public");
    if !root.is_dir() {
        println!("skipping: ../shared not present");
        return None;
    }
    Some(root.join(rel))
}

fn fixture(rel: &str) -> PathBuf {
    manifest().join("tests/fixtures").join(rel)
}

fn parse_path(path: &Path, format: Format) -> Result<Vec<ParsedRun>, IngestError> {
    let file = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ingest::parse(
        BufReader::new(file),
        format,
        &path.file_name().unwrap().to_string_lossy(),
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
