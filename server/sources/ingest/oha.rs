//! oha output → runs: `--output-format json` (summary-only) and `--output-format csv`
//! (one row per request).
//!
//! Format (FORMATS.md §11; writers `src/printer.rs`, `src/result_data.rs` in hatoo/oha).
//! oha keeps a *result* for every request that got a response (whatever its status) and
//! an *error* (time-out, refused connection…) otherwise; its success rate is results /
//! (results + errors), leaving out "aborted due to deadline" errors (requests cut off by
//! `-z`), and every latency figure is over results only.
//!
//! **JSON** — mapping to [`Stats`], every figure "reported by oha":
//! count = Σ `statusCodeDistribution` + Σ `errorDistribution` except deadline aborts;
//! errors = those errors (so error % = 100 − `successRate`·100); min/mean/max =
//! `summary.fastest/average/slowest` (seconds → ms); p50/p90/p95/p99 =
//! `latencyPercentiles` (seconds → ms; oha's rule: `sorted[⌊p/100 · n⌋]`, 0-based, over
//! results); window = `summary.total`; throughput = `summary.requestsPerSec` (oha divides
//! results + errors by the total time); bytes received = `summary.totalData` (bodies).
//! Everything else (histograms, first-byte percentiles, rps distribution, details, status
//! and error distributions, `metrics`) is kept in `reported`.
//!
//! **CSV** (`request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status`,
//! mapped by name): one row per result (errors are not written). Each row is a
//! [`Sample`]: elapsed = `request-duration` rounded half up to whole ms, start =
//! `request-start` (seconds since the run start — no clock time, see
//! [`super::summary::relative_times`]), success = true, bytes received = `bytes`, label
//! [`ALL_REQUESTS_LABEL`]; status-code counts go to `reported`.

use std::io::BufRead;

use serde_json::{Map, Value, json};

use super::summary::{
    ALL_REQUESTS_LABEL, HeaderedCsv, error_pct, invalid, num, one_label_run, parse_json, read_text,
    relative_times, s_to_ms, seconds_text_to_ms, uint,
};
use super::{IngestError, ParsedRun};
use crate::domain::runs::{RunBuilder, RunLimits, Sample, Stats};

/// oha's percentile rule, stored beside its percentile table.
pub const PERCENTILE_RULE: &str =
    "oha: sorted[floor(p/100*n)] (0-based) over responses; errors excluded";

/// oha's message for requests aborted by `-z` (left out of its success rate).
const DEADLINE_ERROR: &str = "aborted due to deadline";

const CSV_HEADER: &[u8] = b"request-start,DNS,DNS+dialup,Response-delay,";

/// True when `prefix` is an oha JSON report (`{"summary":{"successRate"`) or CSV.
pub fn looks_like(prefix: &[u8]) -> bool {
    let t = prefix.trim_ascii_start();
    if t.starts_with(CSV_HEADER) {
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
    parse_report(input, source_name)
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
    let (mut errors, mut deadline) = (0u64, 0u64);
    if let Some(m) = v["errorDistribution"].as_object() {
        for (msg, n) in m {
            let n = uint(Some(n)).unwrap_or(0);
            if msg == DEADLINE_ERROR {
                deadline += n;
            } else {
                errors += n;
            }
        }
    }
    let count = responses + errors;
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
    reported.insert(
        "count_rule".into(),
        json!("responses + errors, without \"aborted due to deadline\" (as oha's success rate)"),
    );
    reported.insert(
        "units".into(),
        json!("as oha wrote them: seconds, except metrics.latency_ms"),
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
    let mut csv = HeaderedCsv::open(input, source_name, "an oha CSV")?;
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
        if let Some(i) = status {
            let code = String::from_utf8_lossy(record[i].trim_ascii()).into_owned();
            let n = codes.entry(code).or_insert(json!(0));
            *n = json!(n.as_u64().unwrap_or(0) + 1);
        }
        builder.push(
            line,
            &Sample {
                label: ALL_REQUESTS_LABEL,
                start_ms: start_ms as i64,
                elapsed_ms,
                success: true,
                response_code: "",
                message: "",
                bytes_received,
                bytes_sent: 0,
                active_users: None,
                is_transaction: false,
            },
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
        "time_base": "offsets from the run start (no clock time in the file)",
        "elapsed_rule": "request-duration seconds rounded half up to whole ms",
    });
    Ok(vec![ParsedRun {
        tool: "oha".to_owned(),
        name_hint: None,
        data,
    }])
}
