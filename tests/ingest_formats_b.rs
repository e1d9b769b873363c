//! Load-tool formats beyond JMeter and ab — wrk/wrk2, hey, oha, vegeta, autocannon,
//! Artillery, siege, SoapUI, Taurus — parsed end to end from real files.
//!
//! Sources: `tests/fixtures/<tool>/SOURCE.md` (generated here, or copied from the shared
//! generated samples; SoapUI's are SYNTHETIC, laid out like SoapUI's writer). Public
//! samples (wrk2's README output, vegeta's report) are read from `../shared/fixtures/public/`
//! and recorded as skipped (kind `shared`) when that folder is absent; never committed.
//!
//! Summary-only expectations are read off the tool's own output (the figure as printed);
//! raw-file expectations were computed independently with Python over the same file
//! (stated at each test).

use std::io::Cursor;
use std::path::{Path, PathBuf};

use harrier::domain::runs::Stats;
use harrier::sources::ingest::{self, Format, IngestError, ParsedRun};
use serde_json::json;

#[path = "it/skip.rs"]
mod skip;
use skip::{Kind, skip};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A public sample from `../shared/fixtures/public/`, or `None` (with a printed notice)
/// when the shared folder is not beside the checkout.
fn public(rel: &str) -> Option<Vec<u8>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/public")
        .join(rel);
    match std::fs::read(&path) {
        Ok(b) => Some(b),
        Err(_) => {
            skip(
                Kind::Shared,
                &format!("../shared/fixtures/public: {} is absent", path.display()),
            );
            None
        }
    }
}

fn parse_as(bytes: &[u8], format: Format) -> Result<Vec<ParsedRun>, IngestError> {
    ingest::parse(Cursor::new(bytes), format, "test input")
}

/// Parses with `format`, and checks that `Format::Auto` reads the same file the same way.
fn parse_one(bytes: &[u8], format: Format, tool: &str) -> ParsedRun {
    let mut runs = parse_as(bytes, format).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs.len(), 1);
    let auto = parse_as(bytes, Format::Auto).unwrap_or_else(|e| panic!("auto: {e}"));
    assert_eq!(auto.len(), 1);
    assert_eq!(auto[0].tool, runs[0].tool, "auto picks the same parser");
    assert_eq!(auto[0].data.overall, runs[0].data.overall);
    assert_eq!(runs[0].tool, tool);
    runs.remove(0)
}

/// A figure in ms, `None` when the tool gives none.
type Ms = Option<f64>;

/// count, errors, min, mean, max (ms).
fn basics(s: &Stats) -> (u64, u64, Option<f64>, Option<f64>, Option<f64>) {
    (s.count, s.errors, s.min_ms, s.mean_ms, s.max_ms)
}

/// p50, p90, p95, p99 (ms).
fn pcts(s: &Stats) -> [Option<f64>; 4] {
    [s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms]
}

// ---------------------------------------------------------------- wrk / wrk2

#[test]
fn wrk_clean_run_as_printed() {
    let run = parse_one(&read("wrk/root_latency.txt"), Format::Wrk, "wrk");
    assert!(run.data.summary_only);
    assert_eq!(run.name_hint.as_deref(), Some("127.0.0.1:18431/"));
    assert_eq!(run.data.labels[0].label, "/");
    let o = &run.data.overall;
    // "Latency 44.19ms 5.60ms 61.92ms": wrk prints no minimum.
    assert_eq!(basics(o), (540, 0, None, Some(44.19), Some(61.92)));
    // wrk prints 50/75/90/99 %: no p95.
    assert_eq!(pcts(o), [Some(43.98), Some(47.96), None, Some(61.44)]);
    assert_eq!(o.error_pct, Some(0.0));
    assert_eq!(o.window_ms, Some(3020));
    assert_eq!(o.throughput_rps, Some(178.74));
    // "81.10KB read" = 83 046.4 bytes (KB = 1024 B; wrk rounds to 2 decimals).
    assert_eq!(o.bytes_received, 83_046);
    let r = &run.data.reported;
    assert_eq!(r["threads"], json!(2));
    assert_eq!(r["connections"], json!(8));
    assert_eq!(
        r["thread_stats"]["requests_per_sec_per_thread"]["avg_rps"],
        json!(89.57)
    );
    assert_eq!(r["latency_distribution"]["values_ms"]["75"], json!(44.6));
}

#[test]
fn wrk_non_2xx_responses_are_errors() {
    let run = parse_one(&read("wrk/flaky_latency.txt"), Format::Wrk, "wrk");
    let o = &run.data.overall;
    // "476 requests", "Non-2xx or 3xx responses: 119" (the server fails every 4th).
    assert_eq!(basics(o), (476, 119, None, Some(45.67), Some(55.96)));
    assert_eq!(o.error_pct, Some(119.0 / 476.0 * 100.0));
    assert_eq!(run.data.reported["non_2xx_or_3xx_responses"], json!(119));
}

#[test]
fn wrk_timeouts_count_as_requests_and_errors() {
    let run = parse_one(&read("wrk/stall_timeout_latency.txt"), Format::Wrk, "wrk");
    let o = &run.data.overall;
    // "72 requests", "Socket errors: … timeout 8": wrk leaves the 8 timed-out requests
    // out of its count and its latency figures; harrier counts them (80) as errors.
    assert_eq!(basics(o), (80, 8, None, Some(43.22), Some(68.01)));
    assert_eq!(o.error_pct, Some(10.0));
    // Requests/sec stays wrk's own: completed requests / duration.
    assert_eq!(o.throughput_rps, Some(23.52));
    assert_eq!(run.data.reported["requests_completed"], json!(72));
    assert_eq!(run.data.reported["socket_errors"]["timeout"], json!(8));
}

/// wrk's printed (unit-suffixed, rounded) figures against the exact ones its Lua `done()`
/// hook printed for the same run.
#[test]
fn wrk_printed_figures_match_its_exact_lua_summary_within_rounding() {
    let run = parse_one(&read("wrk/flaky_with_lua_json.txt"), Format::Wrk, "wrk");
    let o = &run.data.overall;
    let lua = &run.data.reported["script_output"][0];
    assert_eq!(lua["requests"], json!(502));
    assert_eq!(o.count, 502);
    assert_eq!(o.errors, lua["errors"]["status"].as_u64().unwrap());
    // "79.31KB read" → 81 213.44 → 81 213; the hook's exact total is 81 213.
    assert_eq!(o.bytes_received, 81_213);
    assert_eq!(lua["bytes"], json!(81_213));
    // Times: printed in ms with 2 decimals, exact in µs: equal within 0.005 ms.
    let us = |k: &str| lua["latency_us"][k].as_f64().unwrap() / 1000.0;
    for (mine, exact) in [
        (o.mean_ms, us("mean")),
        (o.max_ms, us("max")),
        (o.p50_ms, us("p50")),
        (o.p90_ms, us("p90")),
        (o.p99_ms, us("p99")),
    ] {
        assert!(
            (mine.unwrap() - exact).abs() <= 0.005,
            "{mine:?} vs {exact}"
        );
    }
}

#[test]
fn wrk2_readme_output_uses_the_corrected_histogram() {
    let Some(bytes) = public("wrk2/README_example_latency_output.txt") else {
        return;
    };
    let run = parse_one(&bytes, Format::Wrk, "wrk2");
    let o = &run.data.overall;
    // min = the spectrum's 0.000000 row; mean/max from "Latency 6.60ms 1.92ms 12.50ms".
    assert_eq!(basics(o), (60018, 0, Some(0.921), Some(6.6), Some(12.5)));
    // p95 = the spectrum's 0.950000 row (10.015 ms); the others as printed.
    assert_eq!(pcts(o), [Some(6.67), Some(9.14), Some(10.015), Some(11.18)]);
    assert_eq!(o.throughput_rps, Some(2000.28));
    assert_eq!(o.window_ms, Some(30_000));
    let r = &run.data.reported;
    assert_eq!(
        r["latency_distribution"]["values_ms"]["99.990"],
        json!(12.45)
    );
    assert_eq!(
        r["latency_distribution"]["hdr_footer"]["total_count"],
        json!(39500.0)
    );
    assert_eq!(
        r["latency_distribution"]["spectrum"]["rows"][0],
        json!([0.921, 0.0, 1])
    );
    assert!(r["latency_distribution_uncorrected"].is_null());
    assert_eq!(r["thread_calibration"].as_array().map(Vec::len), Some(2));
    // "Req/Sec 1.04k": k = ×1000.
    assert_eq!(
        r["thread_stats"]["requests_per_sec_per_thread"]["avg_rps"],
        json!(1040.0)
    );
}

// ---------------------------------------------------------------- hey

#[test]
fn hey_text_report_as_printed() {
    let run = parse_one(&read("hey/slow_text.txt"), Format::Hey, "hey");
    assert!(run.data.summary_only);
    let o = &run.data.overall;
    // Fastest 0.0320, Average 0.1220, Slowest 0.1839 secs.
    assert_eq!(basics(o), (300, 0, Some(32.0), Some(122.0), Some(183.9)));
    assert_eq!(
        pcts(o),
        [Some(123.9), Some(160.5), Some(166.2), Some(176.0)]
    );
    assert_eq!(o.window_ms, Some(6208));
    assert_eq!(o.throughput_rps, Some(48.3248));
    assert_eq!(o.bytes_received, 2400);
    let r = &run.data.reported;
    assert_eq!(r["status_codes"], json!({"200": 300}));
    assert_eq!(r["percentiles"]["values_ms"]["10"], json!(80.2));
    assert_eq!(r["details_ms"]["resp wait"]["average_ms"], json!(77.1));
    assert_eq!(r["response_time_histogram"]["rows"][3], json!([0.078, 17]));
}

#[test]
fn hey_text_errors_count_and_its_broken_p99_is_not_read() {
    let run = parse_one(&read("hey/stall_timeout_text.txt"), Format::Hey, "hey");
    let o = &run.data.overall;
    // 80 responses + 20 time-outs ("Error distribution: [20] …"); hey's Requests/sec uses
    // the same 100: 100 / 7.5094 s = 13.3166. Latency figures exclude the time-outs.
    assert_eq!(basics(o), (100, 20, Some(0.6), Some(35.5), Some(60.7)));
    assert_eq!(o.error_pct, Some(20.0));
    // hey printed "0% in 0.0000 secs" where p99 belongs (fewer than 100 successes).
    assert_eq!(pcts(o), [Some(44.0), Some(55.3), Some(59.5), None]);
    assert_eq!(o.throughput_rps, Some(13.3166));
    let r = &run.data.reported;
    assert_eq!(r["percentiles"]["values_ms"]["0"], json!(0.0));
    assert_eq!(r["error_distribution"][0]["count"], json!(20));
    assert!(
        r["error_distribution"][0]["message"]
            .as_str()
            .unwrap()
            .contains("Client.Timeout exceeded")
    );
}

/// Expected figures computed independently with Python over the same file:
/// `csv.DictReader`, each `response-time` / `offset` as `Decimal(s) * 1000` rounded
/// `ROUND_HALF_UP` to whole ms, nearest rank `sorted[ceil(p/100*n) - 1]`.
#[test]
fn hey_csv_rows_are_samples() {
    let run = parse_one(&read("hey/flaky.csv"), Format::Hey, "hey");
    assert!(!run.data.summary_only);
    assert_eq!(run.data.rejected_rows, 0);
    let o = &run.data.overall;
    // sum of the 300 rounded times = 14 462 ms. hey's own (unrounded) mean of the same
    // rows is 48.1413 ms: whole-ms samples shift the mean by 0.07 ms here, and the 0.6 ms
    // fastest request counts as 1 ms. The 82 rows with status-code 500 are errors (no
    // success flag in hey: status ≥ 400 fails).
    assert_eq!(
        basics(o),
        (300, 82, Some(1.0), Some(14_462.0 / 300.0), Some(76.0))
    );
    assert_eq!(pcts(o), [Some(48.0), Some(56.0), Some(63.0), Some(72.0)]);
    // window = max(offset + time) − min(offset) = 2 473 ms.
    assert_eq!(o.window_ms, Some(2473));
    assert_eq!(o.throughput_rps, Some(300.0 * 1000.0 / 2473.0));
    // Offsets from the test start, not clock times: no run start.
    assert_eq!((o.first_start_ms, o.last_end_ms), (None, None));
    // Per-second buckets by offset: 129, 124, 47 requests.
    let seconds: Vec<(i64, u64)> = run
        .data
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| (b.start_ms, b.count))
        .collect();
    assert_eq!(seconds, [(0, 129), (1000, 124), (2000, 47)]);
    // hey writes 500s as ordinary rows: counted as errors, grouped by their code.
    assert_eq!(
        run.data.reported["status_codes"],
        json!({"200": 218, "500": 82})
    );
    let groups: Vec<(&str, u64)> = run
        .data
        .errors
        .iter()
        .map(|e| (e.response_code.as_str(), e.count))
        .collect();
    assert_eq!(groups, [("500", 82)]);
}

/// Issue 12: a real hey run against a server that answers 500 to 7 of 8 requests
/// (`error-rule/SOURCE.md`). hey itself reports no errors (its "Error distribution" is
/// absent); its status table says 1,750 × 500 of 2,000.
#[test]
fn hey_http_500s_are_errors_text_and_csv() {
    let text = parse_one(
        &read("error-rule/hey_mostly500_text.txt"),
        Format::Hey,
        "hey",
    );
    let o = &text.data.overall;
    assert_eq!((o.count, o.errors), (2000, 1750));
    assert_eq!(o.error_pct, Some(87.5));
    let r = &text.data.reported;
    assert_eq!(r["status_codes"], json!({"200": 250, "500": 1750}));
    assert_eq!(
        (
            r["transport_errors"].as_u64(),
            r["error_responses"].as_u64()
        ),
        (Some(0), Some(1750))
    );
    assert!(r["errors_rule"].as_str().unwrap().contains(">= 400"));

    let csv = parse_one(&read("error-rule/hey_mostly500.csv"), Format::Hey, "hey");
    let o = &csv.data.overall;
    assert_eq!((o.count, o.errors, o.error_pct), (2000, 1750, Some(87.5)));
    // Per second too: the over-time error % is not 0.
    let per_second: u64 = csv
        .data
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| b.errors)
        .sum();
    assert_eq!(per_second, 1750);
}

// ---------------------------------------------------------------- oha

#[test]
fn oha_json_report_as_written() {
    let run = parse_one(&read("oha/flaky_300_json.json"), Format::Oha, "oha");
    assert!(run.data.summary_only);
    let o = &run.data.overall;
    // summary.fastest/average/slowest (seconds) in ms; oha counts a 500 as a success
    // (successRate 1.0), harrier's rule for tools without a success flag does not: the 77
    // HTTP 500s are errors.
    assert_eq!(
        basics(o),
        (300, 77, Some(1.818109), Some(43.177587), Some(48.096772))
    );
    assert_eq!(run.data.reported["error_responses"], json!(77));
    assert_eq!(
        run.data.reported["status_codes"],
        json!({"200": 223, "500": 77})
    );
    assert_eq!(
        pcts(o),
        [
            Some(43.991048),
            Some(44.163408),
            Some(44.300773),
            Some(47.984003)
        ]
    );
    // The same figures, as oha rounded them to 3 decimals in metrics.latency_ms.
    let m = &run.data.reported["metrics"]["latency_ms"];
    assert_eq!(
        (m["p50"].as_f64(), m["p99"].as_f64()),
        (Some(43.991), Some(47.984))
    );
    assert_eq!(o.window_ms, Some(2169));
    assert_eq!(o.throughput_rps, Some(138.32415306130238));
    assert_eq!(o.bytes_received, 3085);
    assert_eq!(
        run.data.reported["statusCodeDistribution"],
        json!({"200": 223, "500": 77})
    );
}

#[test]
fn oha_json_timeouts_are_errors() {
    let run = parse_one(&read("oha/stall_timeout_json.json"), Format::Oha, "oha");
    let o = &run.data.overall;
    // 166 responses + 34 "timeout" errors; successRate 0.83 = 166 / 200.
    assert_eq!(
        basics(o),
        (200, 34, Some(0.510612), Some(36.498541), Some(48.049333))
    );
    assert_eq!(o.error_pct, Some(17.0));
    assert_eq!(run.data.reported["summary"]["successRate"], json!(0.83));
    assert_eq!(
        pcts(o),
        [
            Some(43.928915),
            Some(44.058369),
            Some(44.145711),
            Some(48.016208)
        ]
    );
    assert_eq!(o.window_ms, Some(10_415));
    assert_eq!(o.throughput_rps, Some(19.202949076466695));
}

/// oha's text report (`--no-tui`), as printed: 161 responses + 39 time-outs; "Success
/// rate: 80.50%" = 161 / 200.
#[test]
fn oha_text_report_as_printed() {
    let run = parse_one(&read("oha/stall_timeout_text.txt"), Format::Oha, "oha");
    assert!(run.data.summary_only);
    let o = &run.data.overall;
    assert_eq!(
        basics(o),
        (200, 39, Some(0.3924), Some(35.9617), Some(49.4946))
    );
    assert_eq!(o.error_pct, Some(19.5));
    assert_eq!(
        pcts(o),
        [Some(43.9315), Some(44.1346), Some(46.1445), Some(48.162)]
    );
    assert_eq!(o.window_ms, Some(11_851));
    assert_eq!(o.throughput_rps, Some(16.8763));
    // "Total data: 1.42 KiB": only as exact as printed.
    assert_eq!(o.bytes_received, 1454);
    let r = &run.data.reported;
    assert_eq!(r["status_codes"], json!({"200": 161}));
    assert_eq!(r["error_distribution"], json!({"timeout": 39}));
    assert_eq!(r["latency_percentiles_ms"]["p99.99"], json!(49.4946));
}

/// Expected figures computed independently with Python over the same file: `csv`,
/// `Decimal(s) * 1000` rounded `ROUND_HALF_UP` to whole ms, nearest rank.
#[test]
fn oha_csv_rows_are_samples() {
    let run = parse_one(&read("oha/slow_150.csv"), Format::Oha, "oha");
    assert!(!run.data.summary_only);
    let o = &run.data.overall;
    assert_eq!(
        basics(o),
        (150, 0, Some(64.0), Some(17_015.0 / 150.0), Some(164.0))
    );
    // oha's own rule on the exact seconds (sorted[⌊p/100·n⌋]) gives 115.95, 152.08,
    // 156.02 and 159.95 ms: for n = 150 its p50 is the 76th value where nearest rank takes
    // the 75th, but both round to the same whole ms here.
    assert_eq!(
        pcts(o),
        [Some(116.0), Some(152.0), Some(156.0), Some(160.0)]
    );
    // First request-start 0.000629744 s → 1 ms; last end − first start = 4 320 ms.
    assert_eq!(o.window_ms, Some(4320));
    assert_eq!(o.bytes_received, 1200);
    assert_eq!((o.first_start_ms, o.last_end_ms), (None, None));
    let seconds: Vec<(i64, u64)> = run
        .data
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| (b.start_ms, b.count))
        .collect();
    assert_eq!(
        seconds,
        [(0, 36), (1000, 36), (2000, 34), (3000, 37), (4000, 7)]
    );
    assert_eq!(run.data.reported["status_codes"], json!({"200": 150}));
}

// ---------------------------------------------------------------- vegeta

/// Expected figures computed independently with Python over the same file: `json`,
/// latency `(ns + 500_000) // 1_000_000`, start = the RFC 3339 time (zone applied)
/// truncated to ms, success = 200 ≤ code < 400, nearest rank.
#[test]
fn vegeta_results_json_lines_are_samples() {
    let run = parse_one(
        &read("vegeta/SYNTHETIC_results.json"),
        Format::Vegeta,
        "vegeta",
    );
    assert!(!run.data.summary_only);
    assert_eq!(run.data.rejected_rows, 0);
    assert_eq!(run.name_hint.as_deref(), Some("localhost:8112/"));
    assert_eq!(run.data.labels[0].label, "/");
    let o = &run.data.overall;
    // 6 × 503 and 3 × code 0 fail vegeta's rule; the 1 s time-outs stay in the latencies,
    // as in vegeta's own report.
    assert_eq!(
        basics(o),
        (30, 9, Some(1.0), Some(3473.0 / 30.0), Some(1001.0))
    );
    assert_eq!(
        pcts(o),
        [Some(17.0), Some(44.0), Some(1001.0), Some(1001.0)]
    );
    // 2023-10-12T01:13:45.768758779-04:00 = 05:13:45.768 UTC.
    assert_eq!(o.first_start_ms, Some(1_697_087_625_768));
    assert_eq!(o.window_ms, Some(3901));
    assert_eq!(o.bytes_received, 330);
    let errors: Vec<(&str, &str, u64)> = run
        .data
        .errors
        .iter()
        .map(|e| (e.response_code.as_str(), &e.message[..11], e.count))
        .collect();
    assert_eq!(
        errors,
        [("503", "503 Service", 6), ("0", "Get \"http:/", 3)]
    );
    let seconds: Vec<u64> = run
        .data
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| b.count)
        .collect();
    assert_eq!(seconds, [3, 10, 10, 7]);
}

#[test]
fn vegeta_report_json_as_written() {
    let Some(bytes) = public("vegeta/khamonsol_ratelimiter_metrics.json") else {
        return;
    };
    let run = parse_one(&bytes, Format::Vegeta, "vegeta");
    assert!(run.data.summary_only);
    let o = &run.data.overall;
    // status_codes {"0": 390, "200": 8, "503": 202}: 8 successes (success 0.01333).
    assert_eq!(
        basics(o),
        (
            600,
            592,
            Some(1.726583),
            Some(24_397.848_4),
            Some(30_011.387125)
        )
    );
    assert_eq!(
        pcts(o),
        [
            Some(30_001.427216),
            Some(30_003.925709),
            Some(30_005.398387),
            Some(30_008.855_75)
        ]
    );
    // duration 59 899 573 167 ns; rate = requests / duration.
    assert_eq!(o.window_ms, Some(59_900));
    assert_eq!(o.throughput_rps, Some(10.016765867883567));
    assert_eq!(o.bytes_received, 39_898);
    assert_eq!(run.data.reported["throughput"], json!(0.08898676699908954));
}

#[test]
fn vegeta_gob_results_are_refused_with_the_conversion_command() {
    let Some(bytes) = public("vegeta/khamonsol_ratelimiter_results.gob.bin") else {
        return;
    };
    for format in [Format::Auto, Format::Vegeta] {
        let err = parse_as(&bytes, format).unwrap_err().to_string();
        assert!(err.contains("vegeta encode --to json"), "{err}");
    }
}

// ---------------------------------------------------------------- autocannon

#[test]
fn autocannon_json_as_written() {
    let run = parse_one(
        &read("autocannon/flaky.json"),
        Format::Autocannon,
        "autocannon",
    );
    assert!(run.data.summary_only);
    assert_eq!(run.name_hint.as_deref(), Some("127.0.0.1:18431/flaky"));
    assert_eq!(run.data.labels[0].label, "/flaky");
    let o = &run.data.overall;
    // 484 responses, 121 of them HTTP 500 (autocannon's `5xx`): errors under harrier's
    // rule, though autocannon's own `errors` is 0.
    assert_eq!(basics(o), (484, 121, Some(22.0), Some(48.59), Some(97.0)));
    assert_eq!(
        run.data.reported["status_codes"],
        json!({"200": 363, "500": 121})
    );
    // No p95 in autocannon's percentiles (p90, p97_5, p99 are).
    assert_eq!(pcts(o), [Some(44.0), Some(52.0), None, Some(97.0)]);
    assert_eq!(o.first_start_ms, Some(1_796_007_148_297));
    assert_eq!(o.window_ms, Some(3030));
    // requests.average: the mean of the per-second samples (158, 160, 166).
    assert_eq!(o.throughput_rps, Some(161.34));
    assert_eq!(o.bytes_received, 74_657);
    assert_eq!(run.data.reported["non2xx"], json!(121));
    assert_eq!(run.data.reported["latency"]["p97_5"], json!(95));
}

#[test]
fn autocannon_timeouts_are_errors_and_requests() {
    let run = parse_one(
        &read("autocannon/stall_timeout.json"),
        Format::Autocannon,
        "autocannon",
    );
    let o = &run.data.overall;
    // requests.total 48 + errors 8 (all time-outs): the 4 requests still in flight at
    // the end (sent 60) are in neither.
    assert_eq!(basics(o), (56, 8, Some(1.0), Some(38.8), Some(67.0)));
    assert_eq!(o.error_pct, Some(8.0 / 56.0 * 100.0));
    assert_eq!(run.data.reported["timeouts"], json!(8));
}

// ---------------------------------------------------------------- Artillery

#[test]
fn artillery_report_per_endpoint() {
    let run = parse_one(
        &read("artillery/report.json"),
        Format::Artillery,
        "artillery",
    );
    assert!(run.data.summary_only);
    let o = &run.data.overall;
    // http.requests 90 = 84 responses + 6 errors.ETIMEDOUT; the 7 HTTP 500s are errors
    // too (status ≥ 400): 13.
    assert_eq!(basics(o), (90, 13, Some(0.0), Some(9.1), Some(38.0)));
    assert_eq!(run.data.reported["status_codes"]["500"], json!(7));
    assert_eq!(pcts(o), [Some(1.0), Some(30.3), Some(34.1), Some(37.0)]);
    assert_eq!(o.first_start_ms, Some(1_796_007_276_448));
    // lastCounterAt − firstCounterAt.
    assert_eq!(o.window_ms, Some(3989));
    assert_eq!(o.throughput_rps, Some(15.0));
    assert_eq!(o.bytes_received, 1113);
    let labels: Vec<(&str, u64, u64, Ms, Ms)> = run
        .data
        .labels
        .iter()
        .map(|l| {
            (
                l.label.as_str(),
                l.stats.count,
                l.stats.errors,
                l.stats.mean_ms,
                l.stats.p90_ms,
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("/flaky", 30, 7, Some(1.3), Some(4.0)),
            ("/slow", 30, 0, Some(23.7), Some(36.2)),
            ("/stall", 30, 6, Some(0.6), Some(1.0)),
        ]
    );
}

// ---------------------------------------------------------------- siege

#[test]
fn siege_log_rows_are_runs() {
    let bytes = read("siege/siege.log");
    let runs = parse_as(&bytes, Format::Siege).unwrap();
    let auto = parse_as(&bytes, Format::Auto).unwrap();
    assert_eq!(auto.len(), 2);
    assert!(auto.iter().all(|r| r.tool == "siege"));
    // count, errors, mean, window, throughput.
    type Row = (u64, u64, Ms, Option<i64>, Option<f64>);
    let figures: Vec<Row> = runs
        .iter()
        .map(|r| {
            let o = &r.data.overall;
            (o.count, o.errors, o.mean_ms, o.window_ms, o.throughput_rps)
        })
        .collect();
    // Trans + Failed; Resp Time 0.00 s (siege's 2 decimals) and 0.03 s.
    assert_eq!(
        figures,
        [
            (2727, 682, Some(0.0), Some(2160), Some(946.76)),
            (386, 0, Some(30.0), Some(2580), Some(149.61)),
        ]
    );
    assert_eq!(
        runs[0].data.reported["logged_at_local_time"],
        json!("2026-11-30 02:52:14")
    );
}

#[test]
fn siege_summary_matches_its_log_row() {
    let run = parse_one(&read("siege/flaky_stdout.txt"), Format::Siege, "siege");
    let o = &run.data.overall;
    // The same run as the log's first row, plus shortest/longest transaction.
    assert_eq!(basics(o), (2727, 682, Some(0.0), Some(0.0), Some(50.0)));
    assert_eq!(o.error_pct, Some(682.0 / 2727.0 * 100.0));
    assert_eq!(run.data.reported["availability"], json!(74.99));
    // 0.03 MB = 31 457 bytes (as exact as siege's 2 decimals).
    assert_eq!(o.bytes_received, 31_457);
}

// ---------------------------------------------------------------- SoapUI

#[test]
fn soapui_statistics_export_per_step() {
    let run = parse_one(
        &read("soapui/SYNTHETIC_LoadTest_1-statistics.txt"),
        Format::Soapui,
        "soapui",
    );
    assert!(run.data.summary_only);
    // The "TestCase:" row: 1 199 test-case iterations, 3 assertion errors.
    let o = &run.data.overall;
    assert_eq!(basics(o), (1199, 3, Some(262.0), Some(295.4), Some(593.0)));
    assert_eq!(pcts(o), [None, None, None, None]);
    assert_eq!(o.throughput_rps, Some(21.95));
    let steps: Vec<(&str, u64, u64, Option<f64>)> = run
        .data
        .labels
        .iter()
        .map(|l| {
            (
                l.label.as_str(),
                l.stats.count,
                l.stats.errors,
                l.stats.mean_ms,
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("GetQuote - Request 1", 1200, 3, Some(45.27)),
            ("Property Transfer", 1200, 0, Some(0.11)),
            ("Delay 250ms", 1199, 0, Some(250.02)),
        ]
    );
    assert_eq!(run.data.labels[0].stats.bytes_received, 2_458_000);
}

#[test]
fn soapui_step_names_with_commas_survive_the_missing_quoting() {
    let text = "Test Step,min,max,avg,last,cnt,tps,bytes,bps,err,rat\n\
                Search, then buy,5,9,7.5,6,10,2.5,100,25,1,10\n\
                TestCase:,5,9,7.5,6,10,2.5,100,25,1,10\n";
    let run = parse_one(text.as_bytes(), Format::Soapui, "soapui");
    assert_eq!(run.data.labels[0].label, "Search, then buy");
    assert_eq!(run.data.labels[0].stats.errors, 1);
}

// ---------------------------------------------------------------- Taurus

/// Expected figures computed independently with Python's `csv` over the same file
/// (nearest rank), and compared with bzt's own `final-stats.csv` for that run: overall
/// `avg_rt` 0.14223 s, `perc_50.0` 0.055, `perc_90.0` 0.160, `perc_95.0` 0.279,
/// `perc_99.0` 1.556, `throughput` (a count) 213, `fail` 63; `/slow` `perc_90.0` 0.171 —
/// all equal to harrier's figures in ms.
#[test]
fn taurus_locust_executor_kpi_jtl() {
    let run = parse_one(
        &read("taurus/kpi_locust_executor.jtl"),
        Format::Taurus,
        "taurus",
    );
    assert!(!run.data.summary_only);
    assert_eq!(run.data.rejected_rows, 0);
    assert_eq!(run.data.reported["executor"], json!("locust"));
    let o = &run.data.overall;
    assert_eq!(
        basics(o),
        (213, 63, Some(4.0), Some(30_295.0 / 213.0), Some(1564.0))
    );
    assert_eq!(
        pcts(o),
        [Some(55.0), Some(160.0), Some(279.0), Some(1556.0)]
    );
    assert_eq!(o.first_start_ms, Some(1_796_000_015_943));
    assert_eq!(o.window_ms, Some(9511));
    assert_eq!(o.bytes_received, 1966);
    let labels: Vec<(&str, u64, u64, Option<f64>)> = run
        .data
        .labels
        .iter()
        .map(|l| {
            (
                l.label.as_str(),
                l.stats.count,
                l.stats.errors,
                l.stats.p90_ms,
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            ("/slow", 54, 0, Some(171.0)),
            ("/flaky", 53, 10, Some(64.0)),
            ("/notfound", 53, 53, Some(61.0)),
            ("/stall", 53, 0, Some(1552.0)),
        ]
    );
    assert!(
        run.data
            .buckets
            .iter()
            .all(|b| b.active_users.is_none_or(|u| u <= 4))
    );
}

// ---------------------------------------------------------------- sniffing

#[test]
fn auto_picks_each_parser() {
    let files = [
        ("wrk/root_latency.txt", "wrk"),
        ("wrk/stall_timeout_latency.txt", "wrk"),
        ("hey/slow_text.txt", "hey"),
        ("hey/flaky.csv", "hey"),
        ("oha/flaky_300_json.json", "oha"),
        ("oha/slow_150.csv", "oha"),
        // hey's layout plus "Success rate:": oha's, not hey's.
        ("oha/stall_timeout_text.txt", "oha"),
        ("vegeta/SYNTHETIC_results.json", "vegeta"),
        ("autocannon/flaky.json", "autocannon"),
        ("artillery/report.json", "artillery"),
        ("siege/siege.log", "siege"),
        ("siege/flaky_stdout.txt", "siege"),
        ("soapui/SYNTHETIC_LoadTest_1-statistics.txt", "soapui"),
        // The Locust executor's header names timeStamp/elapsed/label/success too: it must
        // not be taken for a JMeter JTL.
        ("taurus/kpi_locust_executor.jtl", "taurus"),
        // Unchanged: the older formats still sniff as before.
        ("ab/slow_stdout.txt", "ab"),
    ];
    for (rel, tool) in files {
        let bytes = read(rel);
        assert_eq!(
            ingest::sniff(&bytes).map(|f| format!("{f:?}").to_lowercase()),
            Some(tool.to_owned()),
            "{rel}"
        );
        let runs = parse_as(&bytes, Format::Auto).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(runs.iter().all(|r| r.tool == tool), "{rel}");
    }
    for (rel, tool) in [
        ("wrk2/README_example_latency_output.txt", "wrk2"),
        ("vegeta/khamonsol_ratelimiter_metrics.json", "vegeta"),
    ] {
        let Some(bytes) = public(rel) else { continue };
        let runs = parse_as(&bytes, Format::Auto).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(runs[0].tool, tool, "{rel}");
    }
}

#[test]
fn unsupported_files_are_still_unknown_format() {
    for text in [
        &b"# Release notes\n\nRunning the tests is easy: cargo test.\n"[..],
        br#"{"name": "harrier", "version": "0.1.0", "summary": {"ok": true}}"#,
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
        b"id,name,price\n1,apple,0.5\n",
    ] {
        match parse_as(text, Format::Auto) {
            Err(IngestError::UnknownFormat { supported, .. }) => {
                for name in ["(wrk)", "(hey)", "(oha)", "(vegeta)", "(siege)", "(taurus)"] {
                    assert!(supported.contains(name), "{supported}");
                }
            }
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(text)),
        }
    }
}

// ---------------------------------------------------------------- console output

/// Lines a terminal or a `nohup.out` holds around a tool's report: shell prompts and
/// traces, `date` output, siege's first-run notice — 60 of them, more than any sniffer
/// used to look past.
fn console_preamble() -> String {
    let mut s = String::from(
        "New configuration template added to /root/.siege\nRun siege -C to view the current settings in that file\n$ date\nTue Dec  1 15:25:01 UTC 2026\n",
    );
    for i in 0..56 {
        s.push_str(&format!(
            "+ curl -s http://127.0.0.1:8099/health -> ok ({i})\n"
        ));
    }
    s
}

const CONSOLE_POSTAMBLE: &str =
    "\nLOG FILE: /var/log/siege.log\n$ date\nTue Dec  1 15:25:09 UTC 2026\nuser@host:~$ exit\n";

/// Issue 12: a report inside console output (siege's JSON summary, ab, wrk, hey, oha) is found
/// with any lines before and after it, and gives the same figures as the bare file.
#[test]
fn reports_inside_console_output_read_as_the_bare_file() {
    for (rel, tool) in [
        ("siege/flaky_stdout.txt", "siege"),
        ("ab/slow_stdout.txt", "ab"),
        ("ab/flaky_keepalive_stdout.txt", "ab"),
        ("wrk/flaky_latency.txt", "wrk"),
        ("wrk/stall_timeout_latency.txt", "wrk"),
        ("hey/slow_text.txt", "hey"),
        ("hey/stall_timeout_text.txt", "hey"),
        ("error-rule/hey_mostly500_text.txt", "hey"),
        ("oha/stall_timeout_text.txt", "oha"),
    ] {
        let bare = parse_as(&read(rel), Format::Auto).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let mut wrapped = console_preamble().into_bytes();
        wrapped.extend_from_slice(&read(rel));
        wrapped.extend_from_slice(CONSOLE_POSTAMBLE.as_bytes());
        let runs = parse_as(&wrapped, Format::Auto)
            .unwrap_or_else(|e| panic!("{rel} inside console output: {e}"));
        assert_eq!(runs.len(), bare.len(), "{rel}");
        for (got, want) in runs.iter().zip(&bare) {
            assert_eq!(got.tool, tool, "{rel}");
            let mut got_overall = got.data.overall.clone();
            if tool == "ab" {
                // The `date` line before an ab report is its start (a shell loop's log).
                let start = 1_796_138_701_000; // Tue Dec  1 15:25:01 UTC 2026
                assert_eq!(got_overall.first_start_ms, Some(start), "{rel}");
                assert_eq!(
                    got_overall.last_end_ms,
                    Some(start + got_overall.window_ms.unwrap()),
                    "{rel}"
                );
                (got_overall.first_start_ms, got_overall.last_end_ms) = (None, None);
            }
            assert_eq!(got_overall, want.data.overall, "{rel}");
            let mut got_labels = got.data.labels.clone();
            if tool == "ab" {
                for l in &mut got_labels {
                    (l.stats.first_start_ms, l.stats.last_end_ms) = (None, None);
                }
            }
            assert_eq!(got_labels, want.data.labels, "{rel}");
            assert_eq!(got.data.rejected_rows, want.data.rejected_rows, "{rel}");
        }
    }
}
