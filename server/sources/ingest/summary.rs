//! Shared pieces of the summary-only and small-file parsers (wrk, hey text, oha JSON,
//! vegeta report, autocannon, Artillery, siege, SoapUI).
//!
//! Owns: reading a whole (small) input as text or JSON with errors that name the line and
//! column, the unit conversions the tools need (seconds, nanoseconds and unit-suffixed
//! numbers → ms), and the one-label [`ParsedRun`] a summary becomes. Must not: decide what
//! a figure means — each format's module documents its own mapping to [`Stats`].

use std::io::{BufRead, Read};

use serde_json::{Map, Value};

use super::{IngestError, ParsedRun};
use crate::domain::runs::{LabelStats, RunBuilder, RunData, Sample, SampleLimits, Stats};

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

/// The highest request rate a summary may claim, requests per second: 10⁸, two orders of
/// magnitude above what the fastest load generators reach on one machine, and above any
/// distributed test's. A count that needs more in the stated duration is impossible.
pub const MAX_PLAUSIBLE_RPS: f64 = 1e8;

/// Why a tool's reported figures (`stats` of `what`, e.g. a label) cannot be true, if they
/// cannot: a time that is negative, not a number, or longer than `limits.max_elapsed_ms`;
/// more failures than requests; an error percentage outside 0–100; percentiles that
/// decrease (p50 ≤ p90 ≤ p95 ≤ p99), a mean outside min–max; a start outside the
/// timestamp window or a duration longer than it; a rate above [`MAX_PLAUSIBLE_RPS`] or a
/// request count that would need one in the stated duration.
pub fn implausible(stats: &Stats, limits: &SampleLimits, what: &str) -> Option<String> {
    let max_ms = limits.max_elapsed_ms as f64;
    let times = [
        ("min", stats.min_ms),
        ("mean", stats.mean_ms),
        ("max", stats.max_ms),
        ("p50", stats.p50_ms),
        ("p90", stats.p90_ms),
        ("p95", stats.p95_ms),
        ("p99", stats.p99_ms),
    ];
    for (name, v) in times {
        let Some(v) = v else { continue };
        if !v.is_finite() {
            return Some(format!("{what}: {name} response time {v} is not a number"));
        }
        if v < 0.0 {
            return Some(format!("{what}: {name} response time {v} ms is negative"));
        }
        if v > max_ms {
            return Some(format!(
                "{what}: {name} response time {v} ms is longer than the limit of {} ms (limits.max_elapsed_ms in harrier.toml)",
                limits.max_elapsed_ms
            ));
        }
    }
    if stats.errors > stats.count {
        return Some(format!(
            "{what}: {} failures is more than the {} requests",
            stats.errors, stats.count
        ));
    }
    if let Some(p) = stats.error_pct
        && !(p.is_finite() && (0.0..=100.0 + 1e-9).contains(&p))
    {
        return Some(format!(
            "{what}: error percentage {p} is not between 0 and 100"
        ));
    }
    let mut previous: Option<(&str, f64)> = None;
    for (name, v) in &times[3..] {
        let Some(v) = *v else { continue };
        if let Some((before, b)) = previous
            && v < b
        {
            return Some(format!(
                "{what}: percentiles decrease: {name} {v} ms is below {before} {b} ms"
            ));
        }
        previous = Some((name, v));
    }
    if let (Some(min), Some(max)) = (stats.min_ms, stats.max_ms) {
        if min > max {
            return Some(format!("{what}: min {min} ms is above max {max} ms"));
        }
        // Printed figures are rounded: 1 % (and 0.01 ms) of slack.
        let slack = (max.abs() * 0.01).max(0.01);
        if let Some(mean) = stats.mean_ms
            && (mean < min - slack || mean > max + slack)
        {
            return Some(format!(
                "{what}: mean {mean} ms is outside min {min} – max {max} ms"
            ));
        }
    }
    if let Some(start) = stats.first_start_ms
        && !limits.start_ok(start)
    {
        return Some(format!(
            "{what}: start {start} ms is outside the accepted window [{}, {}) ms (limits.min_timestamp / limits.max_timestamp in harrier.toml)",
            limits.min_start_ms, limits.max_start_ms
        ));
    }
    let span = limits
        .max_start_ms
        .saturating_sub(limits.min_start_ms)
        .max(0);
    if let Some(w) = stats.window_ms {
        if w < 0 {
            return Some(format!("{what}: duration {w} ms is negative"));
        }
        if w > span {
            return Some(format!(
                "{what}: duration {w} ms is longer than the accepted timestamp window ({span} ms)"
            ));
        }
        if w > 0 && stats.count as f64 > MAX_PLAUSIBLE_RPS * (w as f64 / 1000.0) + 1.0 {
            return Some(format!(
                "{what}: {} requests cannot fit in {w} ms at any sane rate (at most {MAX_PLAUSIBLE_RPS:e} per second)",
                stats.count
            ));
        }
    }
    if let Some(r) = stats.throughput_rps
        && !(r.is_finite() && (0.0..=MAX_PLAUSIBLE_RPS).contains(&r))
    {
        return Some(format!(
            "{what}: throughput {r} requests per second is impossible (0 to {MAX_PLAUSIBLE_RPS:e})"
        ));
    }
    None
}

/// A count a tool printed as a number: `Err` (naming `what`) when it is negative,
/// fractional or not finite — never clamped to 0.
pub fn whole_count(v: f64, what: &str) -> Result<u64, String> {
    if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 2f64.powi(63) {
        Ok(v as u64)
    } else {
        Err(format!("impossible figure: {what} {v} is not a count"))
    }
}

/// [`implausible`] as an [`IngestError::Invalid`] at `line`.
pub fn check_figures(
    stats: &Stats,
    limits: &SampleLimits,
    what: &str,
    source_name: &str,
    line: u64,
) -> Result<(), IngestError> {
    match implausible(stats, limits, what) {
        Some(why) => Err(invalid(
            source_name,
            line,
            format!("impossible figure: {why}"),
        )),
        None => Ok(()),
    }
}

/// The 1-based line of the first `"key"` in a JSON `text` (1 when it is not there): where
/// a figure read from a whole-file summary was written.
pub fn json_line(text: &str, key: &str) -> u64 {
    let needle = format!("\"{key}\"");
    text.find(&needle)
        .map_or(1, |at| text[..at].matches('\n').count() as u64 + 1)
}

/// An [`IngestError::Invalid`] at `line`.
pub fn invalid(source_name: &str, line: u64, message: impl Into<String>) -> IngestError {
    IngestError::Invalid {
        source_name: source_name.to_owned(),
        line,
        message: message.into(),
    }
}

/// harrier's one error rule for tools without a per-request success flag (hey, oha, wrk,
/// vegeta, autocannon, siege, Artillery, ab), stored beside their figures: docs/numbers.md
/// ("Runs"). It matches k6's default `expected_response` (200–399), ab's
/// "Non-2xx" and wrk's "Non-2xx or 3xx".
pub const ERROR_RULE: &str = "transport errors (no response) + responses with HTTP status >= 400";

/// [`ERROR_RULE`] for one response: `true` when `code` is 0 (vegeta's and k6's "no
/// response") or an HTTP status ≥ 400.
pub fn is_error_status(code: u16) -> bool {
    code == 0 || code >= 400
}

/// [`ERROR_RULE`] for a status code as a tool printed it (`"500"`, `" 200 "`): a code
/// that is not a number is a failed request (no HTTP status came back).
pub fn is_error_status_text(code: &str) -> bool {
    code.trim().parse::<u16>().map_or(true, is_error_status)
}

/// One request of a per-request CSV without a success flag (hey, oha): counted under its
/// status `code` in `codes`, failed by [`ERROR_RULE`] (a request without a status column
/// succeeds), pushed to `builder` as one sample of the single label.
pub fn push_status_sample(
    builder: &mut RunBuilder,
    codes: &mut Map<String, Value>,
    line: u64,
    code: Option<&str>,
    start_ms: i64,
    elapsed_ms: u64,
    bytes_received: u64,
) {
    if let Some(code) = code {
        let n = codes.entry(code.to_string()).or_insert(Value::from(0u64));
        *n = Value::from(n.as_u64().unwrap_or(0) + 1);
    }
    let success = code.is_none_or(|c| !is_error_status_text(c));
    builder.push(
        line,
        &Sample {
            label: ALL_REQUESTS_LABEL,
            start_ms,
            elapsed_ms,
            success,
            response_code: if success { "" } else { code.unwrap_or("") },
            message: "",
            bytes_received,
            bytes_sent: 0,
            active_users: None,
            is_transaction: false,
        },
    );
}

/// Σ of the counts in a `{"code": count}` map whose code [`is_error_status_text`].
pub fn error_responses(codes: &Map<String, Value>) -> u64 {
    codes
        .iter()
        .filter(|(code, _)| is_error_status_text(code))
        .filter_map(|(_, n)| uint(Some(n)))
        .sum()
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

/// The label of a tool's requests when the file names no URL (hey, oha CSV).
pub const ALL_REQUESTS_LABEL: &str = "all requests";

/// A decimal number of seconds as printed (`0.0037`, `12.000118`) → whole ms, rounded half
/// up on the decimal text itself (no binary rounding: `0.0125` → 13). Exponent notation is
/// read as a float. `None` for anything else or a negative value.
pub fn seconds_text_to_ms(text: &[u8]) -> Option<u64> {
    let t = text.trim_ascii();
    if t.is_empty() || t[0] == b'-' {
        return None;
    }
    if t.iter().any(|&b| b == b'e' || b == b'E') {
        let v: f64 = std::str::from_utf8(t).ok()?.parse().ok()?;
        return (v.is_finite() && v >= 0.0).then(|| (v * 1000.0).round() as u64);
    }
    let (int, frac) = match t.iter().position(|&b| b == b'.') {
        Some(i) => (&t[..i], &t[i + 1..]),
        None => (t, &b""[..]),
    };
    if !int.iter().chain(frac).all(u8::is_ascii_digit) || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let mut ms: u64 = 0;
    for &d in int {
        ms = ms.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    ms = ms.checked_mul(1000)?;
    let mut scale = 100;
    for &d in frac.iter().take(3) {
        ms += u64::from(d - b'0') * scale;
        scale /= 10;
    }
    if frac.get(3).is_some_and(|&d| d >= b'5') {
        ms += 1;
    }
    Some(ms)
}

/// Marks a raw run whose sample starts are offsets from the test start (the file holds no
/// clock time): the run gets no start or end time (the console then shows the import
/// time), while windows, throughput and per-second buckets (seconds since the test start)
/// stay as computed.
pub fn relative_times(data: &mut RunData) {
    for s in std::iter::once(&mut data.overall).chain(data.labels.iter_mut().map(|l| &mut l.stats))
    {
        s.first_start_ms = None;
        s.last_end_ms = None;
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

/// A per-request CSV whose first line names its columns (hey and oha `-o csv`): reads the
/// header, then hands out data rows with their line number, skipping blank lines and
/// rejecting rows whose field count differs from the header's.
pub struct HeaderedCsv<R: Read> {
    rdr: csv::Reader<super::bounded::RecordCap<R>>,
    record_end: super::bounded::RecordMark,
    header: csv::ByteRecord,
    line: u64,
    source_name: String,
}

impl<R: Read> HeaderedCsv<R> {
    /// Reads the header line; an empty input is an error naming `what` (e.g. "a hey CSV").
    /// A row (a quoted field may span lines) longer than `max_line_bytes` stops the
    /// reading with an error naming the limit.
    pub fn open(
        input: R,
        source_name: &str,
        what: &str,
        max_line_bytes: usize,
    ) -> Result<Self, IngestError> {
        let (input, record_end) = super::bounded::RecordCap::new(input, max_line_bytes);
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(input);
        let mut header = csv::ByteRecord::new();
        if !rdr
            .read_byte_record(&mut header)
            .map_err(|e| csv_io(source_name, e))?
        {
            return Err(invalid(
                source_name,
                1,
                format!("empty file: expected {what} header"),
            ));
        }
        record_end.mark();
        Ok(HeaderedCsv {
            rdr,
            record_end,
            header,
            line: 1,
            source_name: source_name.to_owned(),
        })
    }

    /// The position of the column called `name` in the header.
    pub fn column(&self, name: &[u8]) -> Option<usize> {
        self.header.iter().position(|f| f.trim_ascii() == name)
    }

    /// Reads the next data row into `record` and returns its 1-based line, `None` at the end.
    /// Rows with the wrong number of fields go to `builder` as rejected.
    pub fn next_row(
        &mut self,
        record: &mut csv::ByteRecord,
        builder: &mut RunBuilder,
    ) -> Result<Option<u64>, IngestError> {
        let fields = self.header.len();
        while self
            .rdr
            .read_byte_record(record)
            .map_err(|e| csv_io(&self.source_name, e))?
        {
            self.record_end.mark();
            // The line where the row starts (the csv reader skips blank lines itself).
            self.line = record.position().map_or(self.line + 1, csv::Position::line);
            if record.len() == 1 && record[0].is_empty() {
                continue;
            }
            if record.len() != fields {
                builder.reject_with(self.line, || {
                    format!(
                        "expected {fields} fields, found {} (row cut off or damaged)",
                        record.len()
                    )
                });
                continue;
            }
            return Ok(Some(self.line));
        }
        Ok(None)
    }

    /// The error when no row was readable: the first rejected row's problem, or "no rows".
    pub fn nothing_readable(&self, builder: &RunBuilder) -> IngestError {
        let (line, why) = builder.first_rejected().map_or_else(
            || (self.line, "no rows after the header".to_owned()),
            |r| {
                (
                    r.line,
                    format!("nothing readable: the first problem: {}", r.reason),
                )
            },
        );
        invalid(&self.source_name, line, why)
    }
}

fn csv_io(source_name: &str, e: csv::Error) -> IngestError {
    IngestError::Io {
        source_name: source_name.to_owned(),
        source: std::io::Error::other(e),
    }
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
        assert_eq!(seconds_text_to_ms(b"0.0037"), Some(4));
        assert_eq!(seconds_text_to_ms(b"0.0125"), Some(13));
        assert_eq!(seconds_text_to_ms(b"0.0124999"), Some(12));
        assert_eq!(seconds_text_to_ms(b"12.000118"), Some(12_000));
        assert_eq!(seconds_text_to_ms(b"2"), Some(2000));
        assert_eq!(seconds_text_to_ms(b"1.5e-3"), Some(2));
        assert_eq!(seconds_text_to_ms(b"-0.1"), None);
        assert_eq!(seconds_text_to_ms(b"abc"), None);
    }

    #[test]
    fn headered_csv_rejects_rows_with_the_wrong_field_count() {
        let data = b"response-time,offset\n0.1,0.0\n0.2\n0.3,1.0\n\n";
        let mut csv = HeaderedCsv::open(&data[..], "x.csv", "a hey CSV", 1 << 20).unwrap();
        assert_eq!(
            (csv.column(b"offset"), csv.column(b"nope")),
            (Some(1), None)
        );
        let mut builder = RunBuilder::new();
        let mut record = csv::ByteRecord::new();
        let mut lines = Vec::new();
        while let Some(line) = csv.next_row(&mut record, &mut builder).unwrap() {
            lines.push((line, record.len()));
        }
        assert_eq!(lines, [(2, 2), (4, 2)], "the trailing blank line is no row");
        assert_eq!(builder.rejected_rows(), 1);
        assert_eq!(builder.first_rejected().unwrap().line, 3);
        let err = csv.nothing_readable(&builder).to_string();
        assert!(
            err.contains("line 3") && err.contains("expected 2 fields, found 1"),
            "{err}"
        );
        let empty = HeaderedCsv::open(&b""[..], "e.csv", "a hey CSV", 1 << 20)
            .err()
            .unwrap()
            .to_string();
        assert!(
            empty.contains("empty file: expected a hey CSV header"),
            "{empty}"
        );
    }
}
