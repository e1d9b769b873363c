//! vegeta output → runs: results encoded as JSON lines (raw) and `vegeta report -type=json`
//! (summary-only).
//!
//! Format (docs/formats.md#vegeta; writers `lib/results.go`, `lib/results_easyjson.go`,
//! `lib/metrics.go` in tsenart/vegeta).
//!
//! **Results** (`vegeta encode --to json`, one object per line: `attack, seq, code,
//! timestamp, latency, bytes_out, bytes_in, error, body[, method, url, headers]`): each
//! line is a [`Sample`]. start = `timestamp` (RFC 3339 with ns and a zone → epoch ms,
//! truncated); elapsed = `latency` (ns) rounded half up to whole ms; success = harrier's
//! one rule for tools without a per-request success flag ([`ERROR_RULE`]): code 0
//! (transport error: no response) or ≥ 400 fails (vegeta's own success ratio also fails
//! the 1xx codes, which no final response carries); response code =
//! `code`, message = `error` (vegeta sets it for transport errors and for codes outside
//! 2xx/3xx); bytes = `bytes_in` / `bytes_out`; label = the URL's path when the line has
//! `url` (vegeta ≥ 12.8), else [`ALL_REQUESTS_LABEL`]. Unlike wrk or hey, vegeta keeps
//! failed requests in its latency figures, and so does harrier here. vegeta's default
//! binary (Go `gob`) results are recognised and refused with the command that converts
//! them.
//!
//! **Report JSON** — mapping to [`Stats`], every figure "reported by vegeta": count =
//! `requests`; errors = Σ `status_codes` with code 0 or ≥ 400, plus any requests the
//! status table misses ([`ERROR_RULE`]); min/mean/max/p50/p90/p95/p99 = `latencies` (ns → ms; `min` and
//! `90th` are missing in older versions); window = `duration` (the attack: earliest to
//! latest request start); throughput = `rate` (requests / attack duration; vegeta's
//! `throughput` counts successes over attack + wait and is kept in `reported`); bytes =
//! `bytes_in.total` / `bytes_out.total`.

use std::io::BufRead;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::summary::{
    ALL_REQUESTS_LABEL, ERROR_RULE, error_pct, error_responses, invalid, is_error_status, ns_to_ms,
    num, one_label_run, parse_json, read_text, uint, url_path, url_without_scheme,
};
use super::{IngestError, ParsedRun};
use crate::domain::runs::{RunBuilder, RunLimits, Sample, Stats};

/// vegeta's percentile rule, stored beside its report's latencies.
pub const PERCENTILE_RULE: &str = "vegeta: estimated by a streaming quantile sketch over all results (errors included), not nearest rank";

/// True when `prefix` is vegeta results as JSON lines, a `report -type=json`, or vegeta's
/// binary gob results (refused by [`parse`] with a hint).
pub fn looks_like(prefix: &[u8]) -> bool {
    let t = prefix.trim_ascii_start();
    let compact: Vec<u8> = t
        .iter()
        .take(512)
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    compact.starts_with(br#"{"latencies":{"total":"#) || is_results_line(t) || is_gob(prefix)
}

fn is_results_line(t: &[u8]) -> bool {
    let first = t.split(|&b| b == b'\n').next().unwrap_or_default();
    first.starts_with(b"{")
        && [
            &b"\"seq\":"[..],
            b"\"code\":",
            b"\"latency\":",
            b"\"timestamp\":",
        ]
        .iter()
        .all(|k| first.windows(k.len()).any(|w| w == *k))
}

/// A Go gob stream whose first type is vegeta's `Result` (fields Attack, Seq, Code…).
fn is_gob(prefix: &[u8]) -> bool {
    let head = &prefix[..prefix.len().min(512)];
    let has = |k: &[u8]| head.windows(k.len()).any(|w| w == k);
    !head.is_empty()
        && head[0] != b'{'
        && has(b"Result")
        && has(b"Attack")
        && has(b"Seq")
        && has(b"Code")
}

/// Reads vegeta results (JSON lines) or a vegeta JSON report.
pub fn parse<R: BufRead>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let head = input.fill_buf().map_err(|source| IngestError::Io {
        source_name: source_name.to_owned(),
        source,
    })?;
    if is_gob(head) {
        return Err(invalid(
            source_name,
            1,
            "vegeta's binary (Go gob) results cannot be read here: convert them with \
             `vegeta encode --to json < results.bin > results.json` and import that",
        ));
    }
    if is_results_line(head.trim_ascii_start()) {
        return parse_results(input, source_name, limits);
    }
    parse_report(input, source_name)
}

fn parse_report<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    let text = read_text(input, source_name, "vegeta JSON report")?;
    let v = parse_json(&text, source_name, "vegeta report")?;
    let lat = &v["latencies"];
    let Some(requests) = uint(v.get("requests")).filter(|_| lat.is_object()) else {
        return Err(invalid(
            source_name,
            1,
            "not a vegeta JSON report: expected \"latencies\" and \"requests\"",
        ));
    };
    let codes = v["status_codes"].as_object();
    let listed: u64 = codes.map_or(0, |m| m.values().filter_map(|n| uint(Some(n))).sum());
    let errors = (codes.map_or(0, error_responses) + requests.saturating_sub(listed)).min(requests);
    let l = |k: &str| num(lat.get(k)).map(ns_to_ms);
    let stats = Stats {
        count: requests,
        errors,
        error_pct: error_pct(errors, requests),
        min_ms: l("min"),
        mean_ms: l("mean"),
        max_ms: l("max"),
        p50_ms: l("50th"),
        p90_ms: l("90th"),
        p95_ms: l("95th"),
        p99_ms: l("99th"),
        first_start_ms: None,
        last_end_ms: None,
        window_ms: num(v.get("duration")).map(|ns| (ns / 1e6).round() as i64),
        throughput_rps: num(v.get("rate")),
        bytes_received: uint(v["bytes_in"].get("total")).unwrap_or(0),
        bytes_sent: uint(v["bytes_out"].get("total")).unwrap_or(0),
    };
    let mut reported = Map::new();
    reported.insert("tool".into(), json!("vegeta"));
    reported.insert("percentile_rule".into(), json!(PERCENTILE_RULE));
    reported.insert(
        "errors_rule".into(),
        json!(format!(
            "{ERROR_RULE}: status_codes with code 0 or >= 400, + requests missing from status_codes"
        )),
    );
    reported.insert(
        "units".into(),
        json!("as vegeta wrote them: durations in ns"),
    );
    if let Value::Object(m) = v {
        reported.extend(m);
    }
    Ok(vec![one_label_run(
        "vegeta",
        None,
        ALL_REQUESTS_LABEL.to_owned(),
        stats,
        Value::Object(reported),
    )])
}

/// The fields of one results line harrier reads.
#[derive(serde::Deserialize)]
struct ResultLine<'a> {
    code: u16,
    #[serde(borrow)]
    timestamp: std::borrow::Cow<'a, str>,
    latency: i64,
    #[serde(default)]
    bytes_out: u64,
    #[serde(default)]
    bytes_in: u64,
    #[serde(default, borrow)]
    error: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    url: Option<std::borrow::Cow<'a, str>>,
}

fn parse_results<R: BufRead>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let mut builder = RunBuilder::with_limits(*limits);
    let mut codes: Map<String, Value> = Map::new();
    let mut name_hint = None;
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(|source| IngestError::Io {
                source_name: source_name.to_owned(),
                source,
            })?;
        if n == 0 {
            break;
        }
        line += 1;
        let raw = buf.trim_ascii();
        if raw.is_empty() {
            continue;
        }
        let r: ResultLine = match serde_json::from_slice(raw) {
            Ok(r) => r,
            Err(e) => {
                builder.reject_with(line, || format!("not a vegeta result: {e}"));
                continue;
            }
        };
        let Ok(ts) = OffsetDateTime::parse(&r.timestamp, &Rfc3339) else {
            builder.reject_with(line, || {
                format!("timestamp {:?} is not an RFC 3339 time", r.timestamp)
            });
            continue;
        };
        let Ok(latency_ns) = u64::try_from(r.latency) else {
            builder.reject_with(line, || format!("latency {} is negative", r.latency));
            continue;
        };
        let start_ms = (ts.unix_timestamp_nanos() / 1_000_000) as i64;
        let label = r.url.as_deref().map(url_path);
        if name_hint.is_none() {
            name_hint = r.url.as_deref().map(url_without_scheme);
        }
        let code = r.code.to_string();
        let n = codes.entry(code.clone()).or_insert(json!(0));
        *n = json!(n.as_u64().unwrap_or(0) + 1);
        let success = !is_error_status(r.code);
        builder.push(
            line,
            &Sample {
                label: label.as_deref().unwrap_or(ALL_REQUESTS_LABEL),
                start_ms,
                elapsed_ms: latency_ns.saturating_add(500_000) / 1_000_000,
                success,
                response_code: if success { "" } else { &code },
                message: if success { "" } else { &r.error },
                bytes_received: r.bytes_in,
                bytes_sent: r.bytes_out,
                active_users: None,
                is_transaction: false,
            },
        );
    }
    if builder.samples() == 0 {
        let (l, why) = builder.first_rejected().map_or_else(
            || (1, "no results in the file".to_owned()),
            |r| {
                (
                    r.line,
                    format!("nothing readable: the first problem: {}", r.reason),
                )
            },
        );
        return Err(invalid(source_name, l, why));
    }
    let mut data = builder.finish();
    data.reported = json!({
        "tool": "vegeta",
        "file": "vegeta encode --to json (one result per line)",
        "status_codes": codes,
        "errors_rule": ERROR_RULE,
        "elapsed_rule": "latency ns rounded half up to whole ms",
    });
    Ok(vec![ParsedRun {
        tool: "vegeta".to_owned(),
        name_hint,
        data,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_lines_are_rejected_with_their_number() {
        let text = concat!(
            r#"{"attack":"","seq":0,"code":200,"timestamp":"2023-10-12T01:13:45.5-04:00","latency":1500000,"bytes_out":0,"bytes_in":2,"error":"","body":null}"#,
            "\n",
            r#"{"attack":"","seq":1,"code":200,"timestamp":"yesterday","latency":1,"bytes_out":0,"bytes_in":2,"error":"","body":null}"#,
            "\n",
            r#"{"attack":"","seq":2,"code":0,"timestamp":"2023-10-12T05:13:46Z","latency":30000000000,"bytes_out":0,"bytes_in":0,"error":"timeout","body":null}"#,
            "\n",
            r#"{"attack":"","seq":3,"code":200,"times"#,
            "\n",
        );
        let runs = parse(text.as_bytes(), "t", &RunLimits::default()).expect("parses");
        let d = &runs[0].data;
        assert_eq!(d.overall.count, 2);
        assert_eq!(d.overall.errors, 1);
        // 1.5 ms rounds half up to 2 ms; 01:13:45.5-04:00 = 05:13:45.5Z.
        assert_eq!(d.overall.min_ms, Some(2.0));
        assert_eq!(d.overall.first_start_ms, Some(1_697_087_625_500));
        assert_eq!(d.labels[0].label, ALL_REQUESTS_LABEL);
        assert_eq!(
            d.rejected.iter().map(|r| r.line).collect::<Vec<_>>(),
            [2, 4]
        );
        assert_eq!(
            (
                d.errors[0].response_code.as_str(),
                d.errors[0].message.as_str()
            ),
            ("0", "timeout")
        );
    }
}
