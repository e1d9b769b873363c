//! siege output → summary-only runs: the `-l` log file and the end-of-run summary.
//!
//! Format (docs/formats.md#siege; siege 4.0.x, `src/data.c`, `src/main.c` in JoeDog/siege).
//! **Log** (`siege.log`): header `Date & Time,  Trans,  Elap Time,  Data Trans,  Resp Time,
//! Trans Rate,  Throughput,  Concurrent,    OKAY,   Failed`, one space-padded row per run
//! (several runs append to one log: each row is its own run), `**** … ****` mark lines from
//! `-m` (skipped). **Summary** (stdout): a JSON object `{"transactions": …, "availability":
//! …, …}` with tab padding.
//!
//! siege counts a *transaction* per response below 400 and a *failure* per response
//! ≥ 400 or socket error; `availability` = transactions / (transactions + failures). The
//! figures are rounded to 2 decimals, in seconds and MB, which makes sub-10 ms response
//! times print as `0.00`.
//!
//! Mapping to [`Stats`], every figure "reported by siege": count = transactions + failed;
//! errors = failed; mean = `response_time` (s → ms); min/max = `shortest/longest_transaction`
//! (summary only); no percentiles; window = elapsed time; throughput = transaction rate
//! (successful transactions per second, as siege prints it); bytes received = data
//! transferred (MB × 1 048 576, rounded: only as exact as printed). The log's date is
//! local time without a zone and is kept in `reported` only. Label: [`ALL_REQUESTS_LABEL`].

use std::io::BufRead;

use serde_json::{Value, json};

use super::summary::{
    ALL_REQUESTS_LABEL, ERROR_RULE, error_pct, invalid, num, one_label_run, parse_json, read_text,
    s_to_ms, uint,
};
use super::{IngestError, ParsedRun};
use crate::domain::runs::{RejectedRow, Stats};

const MB: f64 = 1_048_576.0;

/// True when `prefix` is a siege log (its header) or holds a siege JSON summary, also
/// inside console output (any lines before it: siege's banner, a first-run notice, shell
/// prompts; and after it: the "LOG FILE:" notice).
pub fn looks_like(prefix: &[u8]) -> bool {
    let t = prefix.trim_ascii_start();
    if t.starts_with(b"Date & Time,") && t.windows(6).any(|w| w == b"Trans,") {
        return true;
    }
    summary_offset(prefix).is_some()
}

/// The byte offset of the first line that opens a siege JSON summary (`{` and then,
/// whitespace aside, `"transactions":`).
fn summary_offset(text: &[u8]) -> Option<usize> {
    let mut pos = 0;
    for line in text.split(|&b| b == b'\n') {
        let t = line.trim_ascii_start();
        if t.starts_with(b"{") {
            let offset = pos + (line.len() - t.len());
            let compact: Vec<u8> = text[offset..]
                .iter()
                .take(256)
                .copied()
                .filter(|b| !b.is_ascii_whitespace())
                .collect();
            if compact.starts_with(br#"{"transactions":"#) {
                return Some(offset);
            }
        }
        pos += line.len() + 1;
    }
    None
}

/// Reads a siege log (one run per row) or a siege JSON summary (one run).
pub fn parse<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    let text = read_text(input, source_name, "siege log or summary")?;
    let start = text.trim_start();
    if !start.starts_with("Date & Time,")
        && let Some(offset) = summary_offset(text.as_bytes())
    {
        return parse_summary(&text[offset..], source_name);
    }
    if !start.starts_with("Date & Time,") {
        return Err(invalid(
            source_name,
            1,
            "not a siege log (expected the header \"Date & Time,  Trans, …\") or siege JSON summary",
        ));
    }
    let mut runs = Vec::new();
    let mut rejected = Vec::new();
    let mut header: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let t = line.trim();
        if t.is_empty() || t.starts_with("****") {
            continue;
        }
        let fields: Vec<&str> = t.split(',').map(str::trim).collect();
        if t.starts_with("Date & Time,") {
            header = fields.iter().map(|s| s.to_string()).collect();
            continue;
        }
        let get = |name: &str| {
            header
                .iter()
                .position(|h| h == name)
                .and_then(|i| fields.get(i))
                .and_then(|v| v.parse::<f64>().ok())
        };
        let (Some(trans), Some(failed)) = (get("Trans"), get("Failed")) else {
            rejected.push(RejectedRow {
                line: line_no,
                reason: format!(
                    "expected {} comma-separated fields with numeric Trans and Failed",
                    header.len()
                ),
            });
            continue;
        };
        let counts = super::summary::whole_count(trans, "Trans")
            .and_then(|t| Ok((t, super::summary::whole_count(failed, "Failed")?)));
        let (trans, failed) = match counts {
            Ok(v) => v,
            Err(reason) => {
                rejected.push(RejectedRow {
                    line: line_no,
                    reason,
                });
                continue;
            }
        };
        let count = trans.saturating_add(failed);
        let stats = Stats {
            count,
            errors: failed,
            error_pct: error_pct(failed, count),
            mean_ms: get("Resp Time").map(s_to_ms),
            window_ms: get("Elap Time").map(|s| (s * 1000.0).round() as i64),
            throughput_rps: get("Trans Rate"),
            bytes_received: get("Data Trans").map_or(0, |mb| (mb * MB).round() as u64),
            ..Stats::default()
        };
        let reported = json!({
            "tool": "siege",
            "file": "siege -l log (one row per run)",
            "line": line_no,
            "logged_at_local_time": fields.first(),
            "row": header.iter().zip(&fields).map(|(h, v)| (h.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "count_rule": "Trans + Failed (siege: availability = Trans / (Trans + Failed))",
            "errors_rule": format!("{ERROR_RULE}: Failed (siege fails socket errors and responses >= 400)"),
            "units": "seconds, MB (1 MB = 1 048 576 bytes), rounded to 2 decimals by siege",
        });
        runs.push(one_label_run(
            "siege",
            None,
            ALL_REQUESTS_LABEL.to_owned(),
            stats,
            reported,
        ));
    }
    if runs.is_empty() {
        let (line, why) = rejected.first().map_or_else(
            || (1, "siege log without rows".to_owned()),
            |r| (r.line, r.reason.clone()),
        );
        return Err(invalid(source_name, line, why));
    }
    // Damaged rows are not runs: they are listed on the first run so they are not lost.
    runs[0].data.rejected_rows = rejected.len() as u64;
    runs[0].data.rejected = rejected;
    Ok(runs)
}

fn parse_summary(text: &str, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    // siege prints its "LOG FILE: …" notice after the object: read the first value only.
    let first = serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok);
    let v = match first {
        Some(v) => v,
        None => parse_json(text, source_name, "siege summary")?,
    };
    let Some(trans) = uint(v.get("transactions")) else {
        return Err(invalid(
            source_name,
            1,
            "not a siege summary: no \"transactions\"",
        ));
    };
    let failed = uint(v.get("failed_transactions")).unwrap_or(0);
    let count = trans.saturating_add(failed);
    let s = |k: &str| num(v.get(k)).map(s_to_ms);
    let stats = Stats {
        count,
        errors: failed,
        error_pct: error_pct(failed, count),
        min_ms: s("shortest_transaction"),
        mean_ms: s("response_time"),
        max_ms: s("longest_transaction"),
        window_ms: num(v.get("elapsed_time")).map(|s| (s * 1000.0).round() as i64),
        throughput_rps: num(v.get("transaction_rate")),
        bytes_received: num(v.get("data_transferred")).map_or(0, |mb| (mb * MB).round() as u64),
        ..Stats::default()
    };
    let mut reported = serde_json::Map::new();
    reported.insert("tool".into(), json!("siege"));
    reported.insert(
        "count_rule".into(),
        json!("transactions + failed_transactions (siege: availability = transactions / (transactions + failed))"),
    );
    reported.insert(
        "errors_rule".into(),
        json!(format!(
            "{ERROR_RULE}: failed_transactions (siege fails socket errors and responses >= 400)"
        )),
    );
    reported.insert(
        "units".into(),
        json!("as siege printed them: seconds, MB, rounded to 2 decimals"),
    );
    if let Value::Object(m) = v {
        reported.extend(m);
    }
    Ok(vec![one_label_run(
        "siege",
        None,
        ALL_REQUESTS_LABEL.to_owned(),
        stats,
        Value::Object(reported),
    )])
}
