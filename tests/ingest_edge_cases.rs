//! Every edge case in `tests/fixtures/edge-cases/` (copied byte-exact from
//! `shared/fixtures/edge-cases/`) parsed with format sniffing and compared with its
//! `expected.json`: integers exactly, floats within 1e-6 relative (or equal when rounded
//! to 6 decimals, the precision of the file), `null` ↔ `None`.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use harrier::domain::runs::{RunData, Stats};
use harrier::sources::ingest::{self, Format, ParsedRun};
use serde_json::Value;

fn case_dir(id: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/edge-cases")
        .join(id)
}

fn expected(id: &str) -> Value {
    let text = std::fs::read_to_string(case_dir(id).join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("valid JSON")
}

fn parse_case(id: &str) -> Vec<ParsedRun> {
    let exp = expected(id);
    let input = exp["input"].as_str().expect("input file name");
    let file = File::open(case_dir(id).join(input)).expect("input file");
    ingest::parse(BufReader::new(file), Format::Auto, input).unwrap_or_else(|e| panic!("{id}: {e}"))
}

fn parse_one(id: &str) -> RunData {
    let mut runs = parse_case(id);
    assert_eq!(runs.len(), 1, "{id}: one run");
    let run = runs.remove(0);
    assert_eq!(run.tool, "jmeter");
    run.data
}

/// Compares one number the way the edge-case README says.
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

/// Every key of `expected` (an object of figures named like [`Stats`] fields) must match.
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

/// `parse`, `overall` and `by_label` blocks of a JMeter case.
fn check_jmeter_case(id: &str) -> RunData {
    let exp = expected(id);
    let exp = &exp["expected"];
    let run = parse_one(id);
    if let Some(parse) = exp.get("parse") {
        let samples: u64 = run.labels.iter().map(|l| l.stats.count).sum();
        assert_eq!(
            Some(samples),
            parse["samples"].as_u64(),
            "{id}: samples imported"
        );
        assert_eq!(
            Some(run.rejected_rows),
            parse["rejected_rows"].as_u64(),
            "{id}: rejected rows"
        );
        assert_eq!(
            run.rejected.len() as u64,
            run.rejected_rows,
            "{id}: every rejection has details"
        );
    }
    assert_stats(&format!("{id}.overall"), &run.overall, &exp["overall"]);
    if let Some(by_label) = exp.get("by_label").and_then(Value::as_object) {
        let got: Vec<&str> = run.labels.iter().map(|l| l.label.as_str()).collect();
        let want: Vec<&str> = by_label.keys().map(String::as_str).collect();
        let (mut got_sorted, mut want_sorted) = (got.clone(), want.clone());
        got_sorted.sort_unstable();
        want_sorted.sort_unstable();
        assert_eq!(got_sorted, want_sorted, "{id}: exactly these labels");
        for l in &run.labels {
            assert_stats(
                &format!("{id}.by_label[{:?}]", l.label),
                &l.stats,
                &by_label[&l.label],
            );
        }
    }
    run
}

#[test]
fn ec01_line_feeds_inside_quoted_failure_message() {
    let run = check_jmeter_case("EC01");
    assert!(run.labels.iter().all(|l| l.label != "Fake row"));
    // The failure message keeps its line feed, and groups the error.
    let e = run
        .errors
        .iter()
        .find(|e| e.response_code == "502")
        .expect("502 group");
    assert_eq!(
        e.message,
        "Extracted value missing: item id\nSee log file for further details."
    );
    let e = run
        .errors
        .iter()
        .find(|e| e.response_code == "200")
        .expect("assertion group");
    assert!(
        e.message
            .starts_with("Assertion failed:\n1700000009999,1,Fake row"),
        "{:?}",
        e.message
    );
}

#[test]
fn ec03_labels_with_commas_quotes_and_non_ascii() {
    let run = check_jmeter_case("EC03");
    let labels: Vec<&str> = run.labels.iter().map(|l| l.label.as_str()).collect();
    // Order of first appearance.
    assert_eq!(
        labels,
        [
            "Search, filtered",
            "Search",
            "Ürün listesi",
            "下单",
            "Café \"menu\""
        ]
    );
}

#[test]
fn ec05_pipe_delimiter_without_header() {
    let run = check_jmeter_case("EC05");
    let timeout = run
        .errors
        .iter()
        .find(|e| e.label == "Search")
        .expect("Search error");
    assert_eq!(
        timeout.message,
        "Timeout, no response after 5000 ms, connection closed"
    );
    assert_eq!(
        timeout.response_code,
        "Non HTTP response code: java.net.SocketTimeoutException"
    );
}

#[test]
fn ec07_last_line_cut_off_is_rejected() {
    let run = check_jmeter_case("EC07");
    assert_eq!(run.rejected[0].line, 7);
    assert_eq!(
        run.rejected[0].reason,
        "expected 17 fields, found 8 (row cut off or damaged)"
    );
}

#[test]
fn ec09_xml_sub_results_are_not_samples() {
    let run = check_jmeter_case("EC09");
    assert_eq!(run.labels.len(), 3);
    let dashboard = run
        .errors
        .iter()
        .find(|e| e.label == "Dashboard")
        .expect("Dashboard error");
    assert_eq!(
        dashboard.message,
        "Test failed: text expected to contain /Welcome back/"
    );
    assert_eq!(dashboard.count, 1);
}

#[test]
fn ec11_transaction_rows_per_label_not_in_totals() {
    let run = check_jmeter_case("EC11");
    let exp = expected("EC11");
    let tx: u64 = run
        .labels
        .iter()
        .filter(|l| l.is_transaction)
        .map(|l| l.stats.count)
        .sum();
    let requests: u64 = run
        .labels
        .iter()
        .filter(|l| !l.is_transaction)
        .map(|l| l.stats.count)
        .sum();
    assert_eq!(
        Some(tx),
        exp["expected"]["parse"]["transaction_rows"].as_u64()
    );
    assert_eq!(
        Some(requests),
        exp["expected"]["parse"]["request_rows"].as_u64()
    );
    let flow = run
        .labels
        .iter()
        .find(|l| l.label == "Checkout flow")
        .expect("TX label");
    assert!(flow.is_transaction);
    // Run-level buckets leave the transaction rows out too: 4 requests, 2 per second.
    let run_buckets: Vec<(i64, u64)> = run
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| (b.start_ms, b.count))
        .collect();
    assert_eq!(
        run_buckets,
        [(1_700_000_000_000, 2), (1_700_000_001_000, 2)]
    );
}

#[test]
fn ec13_nearest_rank_percentiles() {
    check_jmeter_case("EC13");
}

#[test]
fn ec16_header_only_gives_undefined_figures() {
    let run = check_jmeter_case("EC16");
    assert!(run.labels.is_empty());
    assert!(run.buckets.is_empty());
    assert_eq!(run.overall, Stats::default());
}

#[test]
fn ec22_ab_non_2xx_are_errors() {
    let exp = expected("EC22");
    let exp = &exp["expected"];
    let runs = parse_case("EC22");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run.tool, "ab");
    assert_eq!(
        run.name_hint.as_deref(),
        Some("app.example.test:8080/api/health")
    );
    let d = &run.data;
    assert!(d.summary_only);
    let r = &d.reported;
    let o = &d.overall;
    assert_number(
        "complete_requests",
        &o.count.into(),
        &exp["complete_requests"],
    );
    assert_number("errors", &o.errors.into(), &exp["errors_max"]);
    assert_eq!(o.errors, 2000);
    assert_eq!(o.error_pct, Some(100.0));
    assert_number(
        "error_pct",
        &serde_json::to_value(o.error_pct).unwrap(),
        &exp["error_pct"],
    );
    for key in [
        "failed_requests",
        "non_2xx_responses",
        "errors_min",
        "errors_max",
        "concurrency",
        "time_taken_s",
        "document_length_bytes",
        "total_transferred_bytes",
        "html_transferred_bytes",
    ] {
        assert_number(key, &r[key], &exp[key]);
    }
    assert_eq!(r["failed_breakdown"], exp["failed_breakdown"]);
    assert_number(
        "rps reported",
        &serde_json::to_value(o.throughput_rps).unwrap(),
        &exp["requests_per_second_reported"],
    );
    let computed = o.count as f64 / (o.window_ms.expect("window") as f64 / 1000.0);
    assert_number(
        "rps computed",
        &computed.into(),
        &exp["requests_per_second_computed"],
    );
    assert_number(
        "time per request",
        &r["time_per_request_ms"],
        &exp["mean_ms_per_request"],
    );
    assert_number(
        "time per request, all",
        &r["time_per_request_across_concurrent_ms"],
        &exp["mean_ms_across_concurrent"],
    );
    for (key, want) in exp["connection_times_total_ms"].as_object().unwrap() {
        assert_number(
            &format!("total.{key}"),
            &r["connection_times_ms"]["total"][key],
            want,
        );
    }
    for (key, want) in exp["percentiles_ms"].as_object().unwrap() {
        assert_number(
            &format!("p{key}"),
            &r["percentiles"]["values_ms"][key],
            want,
        );
    }
    assert_eq!(r["percentiles"]["rule"], "ab: stats[n*i/100]");
    // Stats carry the Total row and the printed percentiles.
    assert_eq!(
        (o.min_ms, o.mean_ms, o.max_ms),
        (Some(3.0), Some(12.0), Some(31.0))
    );
    assert_eq!(
        (o.p50_ms, o.p90_ms, o.p95_ms, o.p99_ms),
        (Some(12.0), Some(16.0), Some(18.0), Some(24.0))
    );
    assert_eq!(o.window_ms, Some(1250));
    assert_eq!((o.first_start_ms, o.last_end_ms), (None, None));
    assert_eq!(d.labels.len(), 1);
    assert_eq!(d.labels[0].label, "/api/health");
}

#[test]
fn ec35_per_second_buckets_and_partial_last_bucket() {
    let run = check_jmeter_case("EC35");
    let exp = expected("EC35");
    let exp = &exp["expected"];
    let want = exp["buckets"].as_array().unwrap();
    for scope in [None, Some("Checkout")] {
        let got: Vec<_> = run
            .buckets
            .iter()
            .filter(|b| b.label.as_deref() == scope)
            .collect();
        assert_eq!(got.len(), want.len(), "{scope:?}: bucket count");
        for (b, w) in got.iter().zip(want) {
            let ctx = format!("{scope:?} bucket {}", b.start_ms);
            assert_number(&ctx, &b.start_ms.into(), &w["bucket_start_ms"]);
            assert_number(&format!("{ctx} count"), &b.count.into(), &w["count"]);
            assert_number(&format!("{ctx} errors"), &b.errors.into(), &w["errors"]);
            assert_number(&format!("{ctx} mean"), &b.mean_ms().into(), &w["mean_ms"]);
            assert_number(&format!("{ctx} max"), &b.max_ms.into(), &w["max_ms"]);
            // The histogram agrees with the exact figures (values < 2048 ms are exact in HDR).
            let h = harrier::domain::runs::summarize_serialized(&[&b.histogram])
                .unwrap()
                .unwrap();
            assert_eq!(
                (h.count, h.max_ms, h.min_ms),
                (b.count, b.max_ms, b.min_ms),
                "{ctx} histogram"
            );
        }
    }
    // Run-level buckets come first, then the label's.
    assert_eq!(run.buckets[0].label, None);
    assert_eq!(run.buckets[want.len()].label.as_deref(), Some("Checkout"));
    let last = &exp["last_bucket"];
    let last_bucket = run.buckets.iter().rfind(|b| b.label.is_none()).unwrap();
    let run_end = run.overall.last_end_ms.unwrap();
    assert_number("data_until_ms", &run_end.into(), &last["data_until_ms"]);
    assert_number(
        "covered_ms",
        &last_bucket.covered_ms(run_end).into(),
        &last["covered_ms"],
    );
    assert_eq!(
        last_bucket.covered_ms(run_end) < 1000,
        last["partial"].as_bool().unwrap()
    );
    assert_eq!(run.buckets[0].covered_ms(run_end), 1000);
    assert_eq!(run.buckets[0].active_users, Some(2));
}
