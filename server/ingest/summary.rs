//! Shared pieces of the summary-only and small-file parsers (wrk, hey text, oha JSON,
//! vegeta report, autocannon, Artillery, siege, SoapUI).
//!
//! Owns: reading a whole (small) input as text or JSON with errors that name the line and
//! column, the unit conversions the tools need (seconds, nanoseconds and unit-suffixed
//! numbers → ms), and the one-label [`ParsedRun`] a summary becomes. Must not: decide what
//! a figure means — each format's module documents its own mapping to [`Stats`].

use std::io::{BufRead, Read};

use serde_json::Value;

use super::{IngestError, ParsedRun};
use crate::runs::{LabelStats, RunData, Stats};

/// Summary files are a few KB; anything past this is not one (and is not buffered).
pub const MAX_SUMMARY_BYTES: u64 = 64 << 20;

/// Reads the whole input as text (invalid UTF-8 replaced), at most [`MAX_SUMMARY_BYTES`].
pub fn read_text<R: BufRead>(
    input: R,
    source_name: &str,
    what: &str,
) -> Result<String, IngestError> {
    let mut bytes = Vec::new();
    input
        .take(MAX_SUMMARY_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| IngestError::Io {
            source_name: source_name.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > MAX_SUMMARY_BYTES {
        return Err(IngestError::Invalid {
            source_name: source_name.to_owned(),
            line: 1,
            message: format!(
                "larger than {} MiB: not a {what} (a summary is a few KB)",
                MAX_SUMMARY_BYTES >> 20
            ),
        });
    }
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Parses `text` as one JSON value; a syntax error names its line and column.
pub fn parse_json(text: &str, source_name: &str, what: &str) -> Result<Value, IngestError> {
    serde_json::from_str(text).map_err(|e| IngestError::Invalid {
        source_name: source_name.to_owned(),
        line: e.line() as u64,
        message: format!(
            "column {}: not a valid {what} JSON document: {e}",
            e.column()
        ),
    })
}

/// An [`IngestError::Invalid`] at `line`.
pub fn invalid(source_name: &str, line: u64, message: impl Into<String>) -> IngestError {
    IngestError::Invalid {
        source_name: source_name.to_owned(),
        line,
        message: message.into(),
    }
}

/// errors / count × 100; `None` when count is 0.
pub fn error_pct(errors: u64, count: u64) -> Option<f64> {
    (count > 0).then(|| errors as f64 / count as f64 * 100.0)
}

/// Seconds → ms, rounded to 1 ns so that `0.0123` s prints as `12.3`, not `12.299999`.
pub fn s_to_ms(s: f64) -> f64 {
    round_to(s * 1000.0, 6)
}

/// Nanoseconds → ms (exact to the ns).
pub fn ns_to_ms(ns: f64) -> f64 {
    round_to(ns / 1e6, 6)
}

/// `v` rounded to `decimals` decimal places.
pub fn round_to(v: f64, decimals: i32) -> f64 {
    let f = 10f64.powi(decimals);
    (v * f).round() / f
}

/// A JSON number (or numeric string) at `v`.
pub fn num(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A non-negative integer JSON number at `v` (floats with no fraction accepted).
pub fn uint(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A run with one label whose figures are the run's: what a summary-only tool report
/// becomes. `reported` holds everything the tool printed, raw.
pub fn one_label_run(
    tool: &str,
    name_hint: Option<String>,
    label: String,
    stats: Stats,
    reported: Value,
) -> ParsedRun {
    ParsedRun {
        tool: tool.to_owned(),
        name_hint,
        data: RunData {
            overall: stats.clone(),
            labels: vec![LabelStats {
                label,
                is_transaction: false,
                stats,
            }],
            summary_only: true,
            reported,
            ..RunData::default()
        },
    }
}

/// The path of a URL (`http://h:1/a?b` → `/a?b`), `/` when it has none.
pub fn url_path(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    match rest.find('/') {
        Some(i) => rest[i..].to_owned(),
        None => "/".to_owned(),
    }
}

/// The host, port and path of a URL without the scheme (`http://h:1/a` → `h:1/a`).
pub fn url_without_scheme(url: &str) -> String {
    url.split_once("://").map_or(url, |(_, r)| r).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(s_to_ms(0.0123), 12.3);
        assert_eq!(ns_to_ms(1_726_583.0), 1.726583);
        assert_eq!(url_path("http://127.0.0.1:8099/flaky?x=1"), "/flaky?x=1");
        assert_eq!(url_path("http://127.0.0.1:8099"), "/");
        assert_eq!(url_without_scheme("http://h:1/a"), "h:1/a");
    }
}
