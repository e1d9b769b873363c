//! oha output → runs: `--output-format json` (summary-only) and `--output-format csv`
//! (one row per request).
//!
//! Format (docs/formats.md#oha; writers `src/printer.rs`, `src/result_data.rs` in hatoo/oha).
//! oha keeps a *result* for every request that got a response (whatever its status) and
//! an *error* (time-out, refused connection…) otherwise; its success rate is results /
//! (results + errors), leaving out "aborted due to deadline" errors (requests cut off by
//! `-z`), and every latency figure is over results only. oha has no success flag per
//! response, so harrier's one rule for such tools applies ([`ERROR_RULE`]): a transport
//! error or a response with status ≥ 400 is an error.
//!
//! **JSON** — mapping to [`Stats`], every figure "reported by oha":
//! count = Σ `statusCodeDistribution` + Σ `errorDistribution` except deadline aborts;
//! errors = those errors + the responses with status ≥ 400 in `statusCodeDistribution`
//! (oha's own `successRate` counts those as successes); min/mean/max =
//! `summary.fastest/average/slowest` (seconds → ms); p50/p90/p95/p99 =
//! `latencyPercentiles` (seconds → ms; oha's rule: `sorted[⌊p/100 · n⌋]`, 0-based, over
//! results); window = `summary.total`; throughput = `summary.requestsPerSec` (oha divides
//! results + errors by the total time); bytes received = `summary.totalData` (bodies).
//! Everything else (histograms, first-byte percentiles, rps distribution, details, status
//! and error distributions, `metrics`) is kept in `reported`.
//!
//! **Text** (oha's default output with `--no-tui`, also inside console output: any lines
//! before `Summary:` and after the report): the same mapping as the JSON, from the
//! printed figures — `Success rate`, `Total`, `Slowest`/`Fastest`/`Average` (ms, or secs
//! in older oha), `Requests/sec`, `Total data` (B/KiB/MiB as printed: only as exact as
//! that), `Response time distribution` (`50.00% in 43.9315 ms`), `Status code
//! distribution` (`[200] 161 responses`) and `Error distribution` (`[39] timeout`).
//!
//! **CSV** (`request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status`,
//! mapped by name): one row per result (errors are not written). Each row is a
//! [`Sample`]: elapsed = `request-duration` rounded half up to whole ms, start =
//! `request-start` (seconds since the run start — no clock time, see
//! [`super::summary::relative_times`]), success = `status` < 400 ([`ERROR_RULE`]; a file
//! without that column: true), bytes received = `bytes`, label
//! [`ALL_REQUESTS_LABEL`]; status-code counts go to `reported`.

use std::io::BufRead;

use serde_json::{Map, Value, json};

use super::summary::{
    ALL_REQUESTS_LABEL, ERROR_RULE, HeaderedCsv, error_pct, error_responses, invalid, num,
    one_label_run, parse_json, push_status_sample, read_text, relative_times, s_to_ms,
    seconds_text_to_ms, uint,
};
use super::{IngestError, ParsedRun};
use crate::domain::runs::{RunBuilder, RunLimits, Stats};

/// oha's percentile rule, stored beside its percentile table.
pub const PERCENTILE_RULE: &str =
    "oha: sorted[floor(p/100*n)] (0-based) over responses; errors excluded";

/// oha's message for requests aborted by `-z` (left out of its success rate).
const DEADLINE_ERROR: &str = "aborted due to deadline";

const CSV_HEADER: &[u8] = b"request-start,DNS,DNS+dialup,Response-delay,";

/// True when `prefix` is an oha JSON report (`{"summary":{"successRate"`), CSV, or holds
/// an oha text report (a `Summary:` line — after any other lines — directly followed by
/// `  Success rate:`).
pub fn looks_like(prefix: &[u8]) -> bool {
    let t = prefix.trim_ascii_start();
    if t.starts_with(CSV_HEADER) {
        return true;
    }
    if text_report_offset(prefix).is_some() {
        return true;
    }
    let compact: Vec<u8> = t
        .iter()
        .take(256)
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    compact.starts_with(br#"{"summary":{"successRate""#)
}

/// Reads an oha JSON report or CSV file.
pub fn parse<R: BufRead>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let head = input.fill_buf().map_err(|source| IngestError::Io {
        source_name: source_name.to_owned(),
        source,
    })?;
    if head.trim_ascii_start().starts_with(b"request-start,") {
        return parse_csv(input, source_name, limits);
    }
    if !head.trim_ascii_start().starts_with(b"{") {
        return parse_text(input, source_name);
    }
    parse_report(input, source_name)
}

/// The byte offset of an oha text report's `Summary:` line (followed by `Success rate:`).
fn text_report_offset(text: &[u8]) -> Option<usize> {
    let mut pos = 0;
    let mut lines = text.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim_ascii() == b"Summary:"
            && lines
                .peek()
                .is_some_and(|next| next.trim_ascii_start().starts_with(b"Success rate:"))
        {
            return Some(pos);
        }
        pos += line.len() + 1;
    }
    None
}

/// A time as oha prints it (`43.9315 ms`, `0.0439 secs`, `850 µs`) → ms.
fn text_ms(v: &str) -> Option<f64> {
    let v = v.trim();
    let (n, unit) = v.split_once(' ').unwrap_or((v, "ms"));
    let n: f64 = n.trim().parse().ok()?;
    let factor = match unit.trim() {
        "ms" => 1.0,
        "s" | "sec" | "secs" => 1000.0,
        "µs" | "us" => 0.001,
        "ns" => 1e-6,
        _ => return None,
    };
    Some(super::summary::round_to(n * factor, 6))
}

/// A size as oha prints it (`9 B`, `1.42 KiB`, `3.10 MiB`) → bytes (as exact as printed).
fn text_bytes(v: &str) -> Option<u64> {
    let (n, unit) = v.trim().split_once(' ')?;
    let n: f64 = n.parse().ok()?;
    let factor = match unit.trim() {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1_048_576.0,
        "GiB" => 1_073_741_824.0,
        _ => return None,
    };
    Some((n * factor).round() as u64)
}

fn parse_text<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    let text = read_text(input, source_name, "oha report")?;
    let Some(offset) = text_report_offset(text.as_bytes()) else {
        return Err(invalid(
            source_name,
            1,
            "no oha report found (expected a \"Summary:\" line followed by \"Success rate:\")",
        ));
    };
    let first_line = text[..offset].lines().count() as u64 + 1;
    let mut section = "";
    let mut summary: Map<String, Value> = Map::new();
    let mut percentiles: Map<String, Value> = Map::new();
    let mut codes: Map<String, Value> = Map::new();
    let mut error_dist: Map<String, Value> = Map::new();
    for raw in text[offset..].lines() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if !raw.starts_with([' ', '\t']) {
            // Every line of a section is indented: an unindented one is a section header,
            // or (console output after the report) ends the report's sections.
            section = match line {
                "Summary:" => "summary",
                "Response time histogram:" => "histogram",
                "Response time distribution:" | "Latency distribution:" => "percentiles",
                "Details (average, fastest, slowest):" => "details",
                "Status code distribution:" => "codes",
                "Error distribution:" => "errors",
                _ => "",
            };
            continue;
        }
        match section {
            "summary" => {
                if let Some((k, v)) = line.split_once(':') {
                    summary.insert(k.trim().to_owned(), json!(v.trim()));
                }
            }
            "percentiles" => {
                // "95.00% in 46.1445 ms"
                if let Some((p, v)) = line.split_once("% in ")
                    && let (Ok(p), Some(ms)) = (p.trim().parse::<f64>(), text_ms(v))
                {
                    percentiles.insert(format!("p{}", super::summary::round_to(p, 2)), json!(ms));
                }
            }
            "codes" | "errors" => {
                // "[200] 161 responses" / "[39] timeout"
                if let Some(rest) = line.strip_prefix('[')
                    && let Some((a, b)) = rest.split_once(']')
                {
                    let b = b.trim();
                    if section == "codes" {
                        if let Some(n) = b
                            .split_whitespace()
                            .next()
                            .and_then(|n| n.parse::<u64>().ok())
                        {
                            codes.insert(a.to_owned(), json!(n));
                        }
                    } else if let Ok(n) = a.parse::<u64>() {
                        error_dist.insert(b.to_owned(), json!(n));
                    }
                }
            }
            _ => {}
        }
    }
    let s = |k: &str| summary.get(k).and_then(Value::as_str);
    let Some(total_ms) = s("Total").and_then(text_ms) else {
        return Err(invalid(
            source_name,
            first_line,
            "oha report without \"Total:\" in its Summary",
        ));
    };
    let responses: u64 = codes.values().filter_map(Value::as_u64).sum();
    let (mut transport_errors, mut deadline) = (0u64, 0u64);
    for (msg, n) in &error_dist {
        let n = n.as_u64().unwrap_or(0);
        if msg == DEADLINE_ERROR {
            deadline += n;
        } else {
            transport_errors += n;
        }
    }
    let error_responses = error_responses(&codes);
    let count = responses + transport_errors;
    let errors = transport_errors + error_responses;
    let p = |k: &str| percentiles.get(k).and_then(Value::as_f64);
    let stats = Stats {
        count,
        errors,
        error_pct: error_pct(errors, count),
        min_ms: s("Fastest").and_then(text_ms),
        mean_ms: s("Average").and_then(text_ms),
        max_ms: s("Slowest").and_then(text_ms),
        p50_ms: p("p50"),
        p90_ms: p("p90"),
        p95_ms: p("p95"),
        p99_ms: p("p99"),
        first_start_ms: None,
        last_end_ms: None,
        window_ms: Some(total_ms.round() as i64),
        throughput_rps: s("Requests/sec").and_then(|v| v.parse().ok()),
        bytes_received: s("Total data").and_then(text_bytes).unwrap_or(0),
        bytes_sent: 0,
    };
    let reported = json!({
        "tool": "oha",
        "file": "oha text report",
        "percentile_rule": PERCENTILE_RULE,
        "summary": summary,
        "latency_percentiles_ms": percentiles,
        "status_codes": codes,
        "error_distribution": error_dist,
        "responses": responses,
        "aborted_by_deadline": deadline,
        "transport_errors": transport_errors,
        "error_responses": error_responses,
        "errors_rule": ERROR_RULE,
        "count_rule": "responses + errors, without \"aborted due to deadline\" (as oha's success rate)",
    });
    Ok(vec![one_label_run(
        "oha",
        None,
        ALL_REQUESTS_LABEL.to_owned(),
        stats,
        reported,
    )])
}

fn parse_report<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    let text = read_text(input, source_name, "oha JSON report")?;
    let v = parse_json(&text, source_name, "oha")?;
    let summary = &v["summary"];
    if !summary.is_object() {
        return Err(invalid(
            source_name,
            1,
            "not an oha JSON report: no \"summary\" object",
        ));
    }
    let codes = v["statusCodeDistribution"].as_object();
    let responses: u64 = codes.map_or(0, |m| m.values().filter_map(|n| uint(Some(n))).sum());
    let (mut transport_errors, mut deadline) = (0u64, 0u64);
    if let Some(m) = v["errorDistribution"].as_object() {
        for (msg, n) in m {
            let n = uint(Some(n)).unwrap_or(0);
            if msg == DEADLINE_ERROR {
                deadline += n;
            } else {
                transport_errors += n;
            }
        }
    }
    let error_responses = codes.map_or(0, error_responses);
    let count = responses + transport_errors;
    let errors = transport_errors + error_responses;
    let s = |k: &str| num(summary.get(k)).map(s_to_ms);
    let p = |k: &str| num(v["latencyPercentiles"].get(k)).map(s_to_ms);
    let stats = Stats {
        count,
        errors,
        error_pct: error_pct(errors, count),
        min_ms: s("fastest"),
        mean_ms: s("average"),
        max_ms: s("slowest"),
        p50_ms: p("p50"),
        p90_ms: p("p90"),
        p95_ms: p("p95"),
        p99_ms: p("p99"),
        first_start_ms: None,
        last_end_ms: None,
        window_ms: s("total").map(|ms| ms.round() as i64),
        throughput_rps: num(summary.get("requestsPerSec")),
        bytes_received: uint(summary.get("totalData")).unwrap_or(0),
        bytes_sent: 0,
    };
    let mut reported = Map::new();
    reported.insert("tool".into(), json!("oha"));
    reported.insert("percentile_rule".into(), json!(PERCENTILE_RULE));
    reported.insert("responses".into(), json!(responses));
    reported.insert("aborted_by_deadline".into(), json!(deadline));
    reported.insert("transport_errors".into(), json!(transport_errors));
    reported.insert("error_responses".into(), json!(error_responses));
    reported.insert("errors_rule".into(), json!(ERROR_RULE));
    reported.insert(
        "count_rule".into(),
        json!("responses + errors, without \"aborted due to deadline\" (as oha's success rate)"),
    );
    reported.insert(
        "units".into(),
        json!("as oha wrote them: seconds, except metrics.latency_ms"),
    );
    // One name for the status-code table across tools (the API's `reported.status_codes`).
    reported.insert(
        "status_codes".into(),
        codes.map_or(Value::Null, |m| Value::Object(m.clone())),
    );
    if let Value::Object(m) = v {
        reported.extend(m);
    }
    Ok(vec![one_label_run(
        "oha",
        None,
        ALL_REQUESTS_LABEL.to_owned(),
        stats,
        Value::Object(reported),
    )])
}

fn parse_csv<R: BufRead>(
    input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let mut csv = HeaderedCsv::open(input, source_name, "an oha CSV", limits.max_line_bytes)?;
    let col = |name: &[u8]| csv.column(name);
    let (Some(start), Some(duration)) = (col(b"request-start"), col(b"request-duration")) else {
        return Err(invalid(
            source_name,
            1,
            "not an oha CSV: the header must name request-start and request-duration",
        ));
    };
    let (bytes, status) = (col(b"bytes"), col(b"status"));
    // Times are offsets from the run's start, not clock times.
    let mut builder = RunBuilder::with_limits(limits.relative());
    let mut codes: Map<String, Value> = Map::new();
    let mut record = csv::ByteRecord::new();
    while let Some(line) = csv.next_row(&mut record, &mut builder)? {
        let field = |i: usize| String::from_utf8_lossy(&record[i]).into_owned();
        let (Some(start_ms), Some(elapsed_ms)) = (
            seconds_text_to_ms(&record[start]),
            seconds_text_to_ms(&record[duration]),
        ) else {
            builder.reject_with(line, || {
                format!(
                    "request-start {:?} / request-duration {:?}: expected seconds",
                    field(start),
                    field(duration)
                )
            });
            continue;
        };
        let bytes_received = match bytes.map(|i| record[i].trim_ascii()) {
            None | Some(b"") => 0,
            Some(b) => match std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()) {
                Some(n) => n,
                None => {
                    builder.reject_with(line, || {
                        format!(
                            "bytes {:?} is not a whole number",
                            field(bytes.unwrap_or(0))
                        )
                    });
                    continue;
                }
            },
        };
        let code = status.map(|i| String::from_utf8_lossy(record[i].trim_ascii()).into_owned());
        push_status_sample(
            &mut builder,
            &mut codes,
            line,
            code.as_deref(),
            start_ms as i64,
            elapsed_ms,
            bytes_received,
        );
    }
    if builder.samples() == 0 {
        return Err(csv.nothing_readable(&builder));
    }
    let mut data = builder.finish();
    relative_times(&mut data);
    data.reported = json!({
        "tool": "oha",
        "file": "oha --output-format csv (one row per response; errors are not written)",
        "status_codes": codes,
        "errors_rule": ERROR_RULE,
        "time_base": "offsets from the run start (no clock time in the file)",
        "elapsed_rule": "request-duration seconds rounded half up to whole ms",
    });
    Ok(vec![ParsedRun {
        tool: "oha".to_owned(),
        name_hint: None,
        data,
    }])
}
