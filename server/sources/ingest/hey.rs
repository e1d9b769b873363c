//! hey output → runs: the text report (summary-only) and `-o csv` (one row per request).
//!
//! Format (docs/formats.md#hey; writer `requester/print.go`, `requester/report.go` in rakyll/hey).
//!
//! **Text** (`Summary:` … `Status code distribution:`): summary-only, every figure
//! "reported by hey". hey counts a request that got *any* response (a 500 too) as a
//! response and a transport failure (time-out, refused connection) as an error; errors are
//! left out of every latency figure. hey has no success flag, so harrier's one rule for such
//! tools applies ([`ERROR_RULE`]): a transport error or a response with status ≥ 400 is an
//! error. Mapping to [`Stats`]: count = status-code responses + `Error distribution`
//! entries (hey's `Requests/sec` uses the same total); errors = the error entries + the
//! responses whose status is ≥ 400 (`Status code distribution`); min/mean/max = `Fastest`/`Average`/`Slowest` (seconds, 4 decimals → ms);
//! p50/p90/p95/p99 = the `Latency distribution` lines as printed — hey's rule takes, for
//! each p, the first of the *successful* sorted times whose `i·100/n ≥ p`, and with fewer
//! than 100 successful requests its last entry is printed as `0% in 0.0000 secs`: such a
//! line is kept in `reported` but no percentile is read from it; window = `Total`;
//! throughput = `Requests/sec` as printed; bytes received = `Total data` (bodies only).
//!
//! **CSV** (`response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset`,
//! columns mapped by name): one row per *successful* request (hey writes no row for an
//! error), seconds with 4 decimals. Each row is a [`Sample`]: elapsed = `response-time`
//! rounded half up to whole ms (the text, not a float, is rounded), start = `offset`
//! (seconds since the test start: the file holds no clock time, see
//! [`super::summary::relative_times`]), success = `status-code` < 400 ([`ERROR_RULE`]; a
//! file without that column: true), label [`ALL_REQUESTS_LABEL`]. The status-code counts
//! are kept in `reported`.

use std::io::BufRead;

use serde_json::{Map, Value, json};

use super::summary::{
    ALL_REQUESTS_LABEL, ERROR_RULE, HeaderedCsv, error_pct, error_responses, invalid,
    one_label_run, push_status_sample, read_text, relative_times, s_to_ms, seconds_text_to_ms,
};
use super::{IngestError, ParsedRun};
use crate::domain::runs::{RunBuilder, RunLimits, Stats};

/// hey's percentile rule, stored beside its percentile table.
pub const PERCENTILE_RULE: &str =
    "hey: first successful sorted time whose i*100/n >= p (errors excluded)";

const CSV_HEADER: &[u8] = b"response-time,DNS+dialup,DNS,Request-write,";

/// True when `prefix` is a hey CSV (its header) or holds a hey text report (a `Summary:`
/// line — after any number of other lines: shell prompts, `date` output — followed by
/// `  Total:` and, within the report, `Latency distribution:` or `Status code
/// distribution:`).
pub fn looks_like(prefix: &[u8]) -> bool {
    let trimmed = prefix.trim_ascii_start();
    if trimmed.starts_with(CSV_HEADER) {
        return true;
    }
    let text = String::from_utf8_lossy(prefix);
    let mut lines = text.lines().map(str::trim_end);
    let summary = lines.by_ref().position(|l| l.trim() == "Summary:");
    summary.is_some()
        && text.contains("\n  Total:\t")
        && text.contains("secs")
        && (text.contains("Latency distribution:") || text.contains("Status code distribution:"))
}

/// Reads a hey text report or CSV file.
pub fn parse<R: BufRead>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let head = input.fill_buf().map_err(|source| IngestError::Io {
        source_name: source_name.to_owned(),
        source,
    })?;
    if head.trim_ascii_start().starts_with(b"response-time,") {
        return parse_csv(input, source_name, limits);
    }
    parse_text(input, source_name)
}

fn parse_csv<R: BufRead>(
    input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let mut csv = HeaderedCsv::open(input, source_name, "a hey CSV", limits.max_line_bytes)?;
    let col = |name: &[u8]| csv.column(name);
    let (Some(rt), Some(offset)) = (col(b"response-time"), col(b"offset")) else {
        return Err(invalid(
            source_name,
            1,
            "not a hey CSV: the header must name response-time and offset",
        ));
    };
    let status = col(b"status-code");
    // Times are offsets from the run's start, not clock times.
    let mut builder = RunBuilder::with_limits(limits.relative());
    let mut codes: Map<String, Value> = Map::new();
    let mut record = csv::ByteRecord::new();
    while let Some(line) = csv.next_row(&mut record, &mut builder)? {
        let Some(elapsed_ms) = seconds_text_to_ms(&record[rt]) else {
            builder.reject_with(line, || {
                format!(
                    "response-time {:?} is not a number of seconds",
                    String::from_utf8_lossy(&record[rt])
                )
            });
            continue;
        };
        let Some(start_ms) = seconds_text_to_ms(&record[offset]) else {
            builder.reject_with(line, || {
                format!(
                    "offset {:?} is not a number of seconds",
                    String::from_utf8_lossy(&record[offset])
                )
            });
            continue;
        };
        let code = status.map(|i| String::from_utf8_lossy(record[i].trim_ascii()).into_owned());
        push_status_sample(
            &mut builder,
            &mut codes,
            line,
            code.as_deref(),
            start_ms as i64,
            elapsed_ms,
            0,
        );
    }
    if builder.samples() == 0 {
        return Err(csv.nothing_readable(&builder));
    }
    let mut data = builder.finish();
    relative_times(&mut data);
    data.reported = json!({
        "tool": "hey",
        "file": "hey -o csv (one row per successful request; errors are not written)",
        "status_codes": codes,
        "errors_rule": ERROR_RULE,
        "time_base": "offsets from the test start (no clock time in the file)",
        "elapsed_rule": "response-time seconds (4 decimals) rounded half up to whole ms",
    });
    Ok(vec![ParsedRun {
        tool: "hey".to_owned(),
        name_hint: None,
        data,
    }])
}

/// `0.1220 secs` → seconds.
fn secs(v: &str) -> Option<f64> {
    v.trim().strip_suffix("secs")?.trim().parse().ok()
}

fn parse_text<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    let text = read_text(input, source_name, "hey report")?;
    let mut section = "";
    let mut summary: Map<String, Value> = Map::new();
    let mut histogram: Vec<Value> = Vec::new();
    let mut percentiles: Vec<(String, f64)> = Vec::new();
    let mut details: Map<String, Value> = Map::new();
    let mut codes: Map<String, Value> = Map::new();
    let mut error_dist: Vec<Value> = Vec::new();
    let (mut total_s, mut slowest, mut fastest, mut average, mut rps) =
        (None, None, None, None, None);
    let mut total_data = None;
    let mut summary_line = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if !raw.starts_with([' ', '\t']) && line.ends_with(':') {
            section = match line {
                "Summary:" => {
                    summary_line.get_or_insert(i as u64 + 1);
                    "summary"
                }
                "Response time histogram:" => "histogram",
                "Latency distribution:" => "latency",
                "Details (average, fastest, slowest):" => "details",
                "Status code distribution:" => "codes",
                "Error distribution:" => "errors",
                _ => "",
            };
            continue;
        }
        // Every line of a section is indented: an unindented one (a shell prompt, `date`
        // output after the report) ends it.
        if !raw.starts_with([' ', '\t']) && !line.is_empty() {
            section = "";
            continue;
        }
        if line.is_empty() {
            continue;
        }
        match section {
            "summary" => {
                let Some((k, v)) = line.split_once(':') else {
                    continue;
                };
                let v = v.trim();
                match k {
                    "Total" => total_s = secs(v),
                    "Slowest" => slowest = secs(v),
                    "Fastest" => fastest = secs(v),
                    "Average" => average = secs(v),
                    "Requests/sec" => rps = v.parse::<f64>().ok(),
                    "Total data" => {
                        total_data = v
                            .strip_suffix("bytes")
                            .and_then(|n| n.trim().parse::<u64>().ok())
                    }
                    _ => {}
                }
                summary.insert(k.trim().to_owned(), json!(v));
            }
            "histogram" => {
                // "0.032 [1]	|■"
                if let Some((mark, rest)) = line.split_once(" [")
                    && let Some((n, _)) = rest.split_once(']')
                    && let (Ok(mark), Ok(n)) = (mark.trim().parse::<f64>(), n.parse::<u64>())
                {
                    histogram.push(json!([mark, n]));
                }
            }
            "latency" => {
                // "10% in 0.0802 secs"
                if let Some((p, v)) = line.split_once("% in ")
                    && let Some(s) = secs(v)
                {
                    percentiles.push((p.trim().to_owned(), s_to_ms(s)));
                }
            }
            "details" => {
                if let Some((k, v)) = line.split_once(':') {
                    let vals: Vec<f64> = v.split(',').filter_map(secs).map(s_to_ms).collect();
                    if let [avg, fast, slow] = vals[..] {
                        details.insert(
                            k.trim().to_owned(),
                            json!({"average_ms": avg, "fastest_ms": fast, "slowest_ms": slow}),
                        );
                    }
                }
            }
            "codes" => {
                // "[200]	300 responses"
                if let Some(rest) = line.strip_prefix('[')
                    && let Some((code, n)) = rest.split_once(']')
                    && let Some(n) = n
                        .split_whitespace()
                        .next()
                        .and_then(|n| n.parse::<u64>().ok())
                {
                    codes.insert(code.to_owned(), json!(n));
                }
            }
            "errors" => {
                // "[20]	Get "…": context deadline exceeded (…)"
                if let Some(rest) = line.strip_prefix('[')
                    && let Some((n, msg)) = rest.split_once(']')
                    && let Ok(n) = n.parse::<u64>()
                {
                    error_dist.push(json!({"count": n, "message": msg.trim()}));
                }
            }
            _ => {}
        }
    }
    let Some(summary_line) = summary_line else {
        return Err(invalid(
            source_name,
            1,
            "no hey report found (expected a \"Summary:\" line)",
        ));
    };
    let Some(total_s) = total_s else {
        return Err(invalid(
            source_name,
            summary_line,
            "hey report without \"Total:\" in its Summary",
        ));
    };
    let responses: u64 = codes.values().filter_map(Value::as_u64).sum();
    let transport_errors: u64 = error_dist.iter().filter_map(|e| e["count"].as_u64()).sum();
    let error_responses = error_responses(&codes);
    let count = responses + transport_errors;
    let errors = transport_errors + error_responses;
    let pct = |p: &str| percentiles.iter().find(|(q, _)| q == p).map(|&(_, v)| v);
    let stats = Stats {
        count,
        errors,
        error_pct: error_pct(errors, count),
        min_ms: fastest.map(s_to_ms),
        mean_ms: average.map(s_to_ms),
        max_ms: slowest.map(s_to_ms),
        p50_ms: pct("50"),
        p90_ms: pct("90"),
        p95_ms: pct("95"),
        p99_ms: pct("99"),
        first_start_ms: None,
        last_end_ms: None,
        window_ms: Some((total_s * 1000.0).round() as i64),
        throughput_rps: rps,
        bytes_received: total_data.unwrap_or(0),
        bytes_sent: 0,
    };
    let reported = json!({
        "tool": "hey",
        "summary": summary,
        "responses": responses,
        "transport_errors": transport_errors,
        "error_responses": error_responses,
        "count_rule": "responses (status code distribution) + errors (error distribution)",
        "errors_rule": ERROR_RULE,
        "response_time_histogram": {
            "columns": ["mark_s", "count"],
            "rows": histogram,
        },
        "percentiles": {
            "rule": PERCENTILE_RULE,
            "values_ms": percentiles.iter().map(|(p, v)| (p.clone(), json!(v))).collect::<Map<_, _>>(),
        },
        "details_ms": details,
        "status_codes": codes,
        "error_distribution": error_dist,
    });
    Ok(vec![one_label_run(
        "hey",
        None,
        ALL_REQUESTS_LABEL.to_owned(),
        stats,
        reported,
    )])
}
