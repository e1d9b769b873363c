//! Locust results → summary-only runs: `PREFIX_stats.csv`, `PREFIX_stats_history.csv`
//! and the `--json` / `--json-file` output.
//!
//! Formats (docs/formats.md#locust; writer `locust/stats.py` — `StatsCSV`, `StatsCSVFileWriter`,
//! `stats_history_csv`, `StatsEntry.serialize` — in locustio/locust). Locust keeps no
//! per-request records in these files, so every run is **summary-only** ("reported by
//! Locust"). Endpoint (label) = `Type` + `" "` + `Name` (`GET /cart`; just the name when
//! the type is empty). Times are ms.
//!
//! Locust's percentiles are its own: it counts response times **rounded** (exact below
//! 100 ms, then to 2 significant digits: 110, 120 … 1000, 1100 …) and takes, for p, the
//! value at 1-based rank ⌊n · p⌋ + 1 (capped at n) — one rank above nearest rank when n · p
//! is whole. Min, max and average are exact.
//!
//! - `_stats.csv`: one row per endpoint plus the run total (empty `Type`, `Name`
//!   `Aggregated`; `None`/`Total` in Locust 0.x), imported as written: count = `Request
//!   Count`, errors = `Failure Count`, mean/min/max = the `… Response Time` columns, p50/
//!   p90/p95/p99 = the `50%`/`90%`/`95%`/`99%` columns, throughput = `Requests/s` (over
//!   the whole run), bytes received = `Average Content Size` × count. `N/A` and the
//!   zeros Locust writes for an endpoint without requests are "no data" (`None`).
//!   Columns are found by header name (Locust 0.x names such as `# requests` too).
//! - `_stats_history.csv` on its own is a **time-series run**: the last row of each
//!   endpoint gives its cumulative `Total …` columns (count, failures, median as p50,
//!   average, min, max). Over time, per second: each row (written every
//!   `CSV_STATS_INTERVAL_SEC`, 1 s by default, `Timestamp` = epoch seconds of the write)
//!   becomes a bucket starting at the previous row's timestamp (the first row: one second
//!   before its own), with count and errors = the **deltas of the cumulative** `Total
//!   Request Count` / `Total Failure Count` (not the trailing `Requests/s` column, which
//!   averages the last 10 s and lags), mean = Δ(`Total Average Response Time` × count) /
//!   Δcount (exact), active users = `User Count`, max = the row's `100%` (Locust's, over
//!   its last-10 s window). A cumulative count that goes down (stats reset) counts from 0
//!   again. The run's window runs from the first to the last bucket holding requests,
//!   throughput = count / window. The per-row percentiles Locust wrote (`50%` … `100%`,
//!   over its trailing 10 s window, by its rounded-bucket rule) are kept, for the
//!   `Aggregated` rows, in [`RunData::reported`] (`history`, each row with its
//!   `bucket_start_ms`) and shown on the charts as "reported by Locust"; buckets carry no
//!   histogram. Imported alone, `_stats.csv` and `_stats_history.csv` each make a run;
//!   given together (with `_failures.csv` and `_exceptions.csv` of the same `--csv` run,
//!   recognised by their shared prefix) they make one run, see [`merge_set`].
//! - `--json` output (an array of `StatsEntry`, no total): per endpoint count, failures,
//!   mean = `total_response_time` / count, exact min and max, percentiles computed here
//!   by Locust's rule from the `response_times` histogram of rounded ms (so they equal
//!   what Locust shows), throughput = count / (`last_request_timestamp` − `start_time`)
//!   as Locust computes it (that window is also the run's window). The total merges every
//!   endpoint, as Locust's `Aggregated` does.
//!
//! The final `_stats.csv` may lag the console summary (docs/formats.md#locust): `--json-file` is
//! the more complete output.

use std::collections::BTreeMap;
use std::io::{BufRead, Read};

use csv::{ReaderBuilder, StringRecord};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{IngestError, ParsedRun};
use crate::domain::runs::{
    Bucket, ErrorGroup, LabelStats, RunData, RunLimits, SampleLimits, Stats,
};

/// Latest timestamp of a stats-history row, unix seconds (2100-01-01).
const MAX_TIMESTAMP_S: i64 = 4_102_444_800;

/// One `_stats_history.csv` row's cumulative figures, for the per-second buckets.
struct HistoryRow {
    ts_s: i64,
    users: Option<u32>,
    count: u64,
    failures: u64,
    /// Total Average Response Time × Total Request Count, ms.
    sum_ms: f64,
    /// The row's `100%` (Locust's max over its last-10 s window), ms.
    window_max_ms: Option<f64>,
}

/// Buckets from one scope's history rows (see the module docs); `label` `None` = the run.
fn history_buckets(
    label: Option<&str>,
    rows: &[HistoryRow],
    out: &mut BTreeMap<(Option<String>, i64), Bucket>,
) {
    let mut prev: Option<&HistoryRow> = None;
    for row in rows {
        let (p_count, p_failures, p_sum, p_ts) = match prev {
            // A cumulative count that went down: Locust's stats were reset.
            Some(p) if row.count >= p.count => (p.count, p.failures, p.sum_ms, p.ts_s),
            Some(p) => (0, 0, 0.0, p.ts_s),
            None => (0, 0, 0.0, row.ts_s - 1),
        };
        prev = Some(row);
        let count = row.count - p_count;
        let errors = row.failures.saturating_sub(p_failures).min(count);
        let sum_ms = if count > 0 {
            (row.sum_ms - p_sum).max(0.0).round() as u64
        } else {
            0
        };
        let start_ms = p_ts.saturating_mul(1000);
        let b = out
            .entry((label.map(str::to_owned), start_ms))
            .or_insert_with(|| Bucket {
                label: label.map(str::to_owned),
                start_ms,
                count: 0,
                errors: 0,
                sum_ms: 0,
                min_ms: 0,
                max_ms: 0,
                active_users: None,
                histogram: Vec::new(),
            });
        // Cumulative figures near u64::MAX (a damaged or hostile file) saturate.
        b.count = b.count.saturating_add(count);
        b.errors = b.errors.saturating_add(errors);
        b.sum_ms = b.sum_ms.saturating_add(sum_ms);
        if count > 0 {
            let max = row.window_max_ms.map_or(0, |m| m.round() as u64);
            b.max_ms = b.max_ms.max(max);
        }
        b.active_users = match (b.active_users, row.users) {
            (Some(a), Some(u)) => Some(a.max(u)),
            (a, u) => a.or(u),
        };
    }
}

/// Sets the window and throughput of `s` from its buckets (first to last bucket holding
/// requests, each one second wide).
fn window_from_buckets(s: &mut Stats, buckets: &[&Bucket]) {
    let with_requests = || buckets.iter().filter(|b| b.count > 0);
    let (Some(first), Some(last)) = (
        with_requests().map(|b| b.start_ms).min(),
        with_requests().map(|b| b.start_ms).max(),
    ) else {
        return;
    };
    let end = last + 1000;
    s.first_start_ms = Some(first);
    s.last_end_ms = Some(end);
    s.window_ms = Some(end - first);
    s.throughput_rps = Some(s.count as f64 * 1000.0 / (end - first) as f64);
}

/// Locust's percentile rule, stored beside its figures.
pub const PERCENTILE_RULE: &str = "Locust: response times rounded (exact below 100 ms, 2 significant digits above); value at rank floor(n*p)+1";

/// Reads one Locust file (which one is sniffed from its first bytes).
pub fn parse<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    parse_with(input, source_name, &RunLimits::default())
}

/// [`parse`], a row (or `--json` entry) whose figures cannot be true under `limits` (see
/// [`super::summary::implausible`]; negative or fractional counts too) rejected with its
/// line.
pub fn parse_with<R: BufRead>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let io_err = |source| IngestError::Io {
        source_name: source_name.to_owned(),
        source,
    };
    let head = input.fill_buf().map_err(io_err)?;
    if head.trim_ascii_start().starts_with(b"[") {
        return parse_json(input, source_name, &limits.samples);
    }
    let first_line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let history = String::from_utf8_lossy(first_line).contains("User Count");
    parse_csv(
        input,
        source_name,
        history,
        &limits.samples,
        limits.max_line_bytes,
    )
}

fn invalid(source_name: &str, line: u64, message: impl Into<String>) -> IngestError {
    IngestError::Invalid {
        source_name: source_name.to_owned(),
        line,
        message: message.into(),
    }
}

/// Header columns, found by name (case-insensitive; 2.x and 0.x names).
struct Columns {
    fields: usize,
    timestamp: Option<usize>,
    users: Option<usize>,
    kind: Option<usize>,
    name: usize,
    count: usize,
    failures: usize,
    median: Option<usize>,
    average: Option<usize>,
    min: Option<usize>,
    max: Option<usize>,
    content_size: Option<usize>,
    rps: Option<usize>,
    fps: Option<usize>,
    /// (header as written, percent) of the percentile columns.
    percentiles: Vec<(usize, String, f64)>,
}

impl Columns {
    fn from_header(h: &StringRecord, history: bool) -> Option<Columns> {
        let find = |names: &[&str]| {
            h.iter()
                .position(|c| names.iter().any(|n| c.trim().eq_ignore_ascii_case(n)))
        };
        let p = if history { "Total " } else { "" };
        let col = |what: &str| {
            let modern = format!("{p}{what} Response Time");
            let old = format!("{p}{what} response time");
            find(&[&modern, &old])
        };
        let percentiles = h
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let c = c.trim();
                let v: f64 = c.strip_suffix('%').unwrap_or(c).parse().ok()?;
                Some((i, c.to_owned(), v))
            })
            .collect();
        Some(Columns {
            fields: h.len(),
            timestamp: find(&["Timestamp"]),
            users: find(&["User Count"]),
            kind: find(&["Type", "Method"]),
            name: find(&["Name"])?,
            count: if history {
                find(&["Total Request Count"])?
            } else {
                find(&["Request Count", "# requests"])?
            },
            failures: if history {
                find(&["Total Failure Count"])?
            } else {
                find(&["Failure Count", "# failures"])?
            },
            median: col("Median"),
            average: col("Average"),
            min: col("Min"),
            max: col("Max"),
            content_size: find(&[&format!("{p}Average Content Size")]),
            rps: find(&["Requests/s"]),
            fps: find(&["Failures/s", "Requests Failed/s"]),
            percentiles,
        })
    }
}

/// A number, or `None` for `N/A` / empty.
fn num(r: &StringRecord, c: Option<usize>) -> Option<f64> {
    let v = r.get(c?)?.trim();
    if v.is_empty() || v.eq_ignore_ascii_case("N/A") {
        return None;
    }
    v.parse().ok()
}

fn endpoint_label(kind: &str, name: &str) -> String {
    if kind.is_empty() {
        name.to_owned()
    } else {
        format!("{kind} {name}")
    }
}

fn is_total(kind: &str, name: &str) -> bool {
    (kind.is_empty() || kind == "None") && (name == "Aggregated" || name == "Total")
}

/// One row's figures (see the module docs for the mapping).
fn row_stats(
    c: &Columns,
    r: &StringRecord,
    history: bool,
    limits: &SampleLimits,
) -> Result<(Stats, Value), String> {
    let whole = |v: f64, what: &str| {
        if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 2f64.powi(63) {
            Ok(v as u64)
        } else {
            Err(format!("impossible figure: {what} {v} is not a count"))
        }
    };
    let count = num(r, Some(c.count)).ok_or("request count is not a number")?;
    let failures = num(r, Some(c.failures)).ok_or("failure count is not a number")?;
    let (count, errors) = (
        whole(count, "request count")?,
        whole(failures, "failure count")?,
    );
    let some = |v: Option<f64>| v.filter(|_| count > 0);
    let pct = |p: f64| {
        c.percentiles
            .iter()
            .find(|(_, _, q)| *q == p)
            .and_then(|&(i, _, _)| some(num(r, Some(i))))
    };
    let avg_size = num(r, c.content_size);
    let stats = Stats {
        count,
        errors,
        error_pct: (count > 0).then(|| errors as f64 / count as f64 * 100.0),
        min_ms: some(num(r, c.min)),
        mean_ms: some(num(r, c.average)),
        max_ms: some(num(r, c.max)),
        p50_ms: if history {
            some(num(r, c.median))
        } else {
            pct(50.0).or(some(num(r, c.median)))
        },
        p90_ms: if history { None } else { pct(90.0) },
        p95_ms: if history { None } else { pct(95.0) },
        p99_ms: if history { None } else { pct(99.0) },
        first_start_ms: None,
        last_end_ms: None,
        window_ms: None,
        throughput_rps: if history { None } else { num(r, c.rps) },
        bytes_received: avg_size.map_or(0, |s| (s * count as f64).round() as u64),
        bytes_sent: 0,
    };
    let name = r.get(c.name).unwrap_or_default();
    if let Some(why) = super::summary::implausible(&stats, limits, name) {
        return Err(format!("impossible figure: {why}"));
    }
    let percentiles: Map<String, Value> = c
        .percentiles
        .iter()
        .map(|(i, h, _)| (h.clone(), json!(num(r, Some(*i)))))
        .collect();
    let raw = json!({
        "type": c.kind.and_then(|i| r.get(i)),
        "name": r.get(c.name),
        "request_count": count,
        "failure_count": errors,
        "median_ms": num(r, c.median),
        "average_ms": num(r, c.average),
        "min_ms": num(r, c.min),
        "max_ms": num(r, c.max),
        "average_content_size_bytes": avg_size,
        "requests_per_s": num(r, c.rps),
        "failures_per_s": num(r, c.fps),
        "percentiles_ms": percentiles,
    });
    Ok((stats, raw))
}

fn parse_csv<R: Read>(
    input: R,
    source_name: &str,
    history: bool,
    limits: &SampleLimits,
    max_line_bytes: usize,
) -> Result<Vec<ParsedRun>, IngestError> {
    let (input, record_end) = super::bounded::RecordCap::new(input, max_line_bytes);
    let mut rdr = ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(input);
    let mut header = StringRecord::new();
    match rdr.read_record(&mut header) {
        Ok(true) => {}
        Ok(false) => return Err(invalid(source_name, 1, "empty file")),
        Err(e) => return Err(invalid(source_name, 1, e.to_string())),
    }
    let Some(c) = Columns::from_header(&header, history) else {
        return Err(invalid(
            source_name,
            1,
            if history {
                "not a Locust stats_history.csv: the header must name Name, Total Request Count and Total Failure Count"
            } else {
                "not a Locust stats.csv: the header must name Name, Request Count (or # requests) and Failure Count (or # failures)"
            },
        ));
    };
    // Endpoints in first-appearance order; history: the last row of each wins.
    let mut endpoints: Vec<(String, Stats, Value)> = Vec::new();
    let mut total: Option<(Stats, Value)> = None;
    let mut series = Vec::new();
    let mut history_rows: BTreeMap<Option<String>, Vec<HistoryRow>> = BTreeMap::new();
    let mut rejected = Vec::new();
    let mut record = StringRecord::new();
    loop {
        let line = rdr.position().line();
        match rdr.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => record_end.mark(),
            Err(e) => {
                rejected.push((line, format!("unreadable row: {e}")));
                if record_end.over(max_line_bytes) {
                    break;
                }
                continue;
            }
        }
        // The row's line: the reader counts a row's line feed once it reads on, so its
        // position before a row names the line before it (Locust rows are one line each).
        let line = rdr.position().line();
        if record.len() != c.fields {
            rejected.push((
                line,
                format!(
                    "expected {} fields as in the header, found {} (row cut off or damaged)",
                    c.fields,
                    record.len()
                ),
            ));
            continue;
        }
        let kind = c.kind.and_then(|i| record.get(i)).unwrap_or("").trim();
        let name = &record[c.name];
        let (stats, raw) = match row_stats(&c, &record, history, limits) {
            Ok(v) => v,
            Err(why) => {
                rejected.push((line, why));
                continue;
            }
        };
        let total_row = is_total(kind, name);
        let mut bucket_start_ms = None;
        if history {
            let Some(ts_s) = num(&record, c.timestamp).map(|t| t as i64) else {
                rejected.push((line, "Timestamp is not a number of seconds".to_owned()));
                continue;
            };
            // Seconds since 1970 up to 2100: anything else is no clock time (and would
            // overflow as ms).
            if !(0..=MAX_TIMESTAMP_S).contains(&ts_s) {
                rejected.push((
                    line,
                    format!("Timestamp {ts_s} is not a time between 1970 and 2100"),
                ));
                continue;
            }
            let scope = (!total_row).then(|| endpoint_label(kind, name));
            let rows = history_rows.entry(scope).or_default();
            bucket_start_ms = Some(rows.last().map_or(ts_s - 1, |p| p.ts_s) * 1000);
            rows.push(HistoryRow {
                ts_s,
                users: num(&record, c.users).map(|u| u as u32),
                count: stats.count,
                failures: stats.errors,
                sum_ms: stats.mean_ms.unwrap_or(0.0) * stats.count as f64,
                window_max_ms: c
                    .percentiles
                    .iter()
                    .find(|(_, _, p)| *p == 100.0)
                    .and_then(|&(i, _, _)| num(&record, Some(i))),
            });
        }
        if total_row {
            if history {
                let ts = num(&record, c.timestamp);
                series.push(json!({
                    "time_ms": ts.map(|t| (t * 1000.0) as i64),
                    "bucket_start_ms": bucket_start_ms,
                    "users": num(&record, c.users),
                    "requests_per_s": num(&record, c.rps),
                    "failures_per_s": num(&record, c.fps),
                    "total_requests": stats.count,
                    "total_failures": stats.errors,
                    "window_percentiles_ms": c.percentiles.iter().map(|(i, h, _)| (h.clone(), json!(num(&record, Some(*i))))).collect::<Map<_, _>>(),
                }));
            }
            total = Some((stats, raw));
            continue;
        }
        let label = endpoint_label(kind, name);
        match endpoints.iter_mut().find(|(l, _, _)| *l == label) {
            Some(e) => {
                e.1 = stats;
                e.2 = raw;
            }
            None => endpoints.push((label, stats, raw)),
        }
    }
    if endpoints.is_empty() && total.is_none() {
        return Err(match rejected.first() {
            Some((line, why)) => invalid(source_name, *line, format!("nothing readable: {why}")),
            None => invalid(source_name, 1, "no rows after the header"),
        });
    }
    let (mut overall, total_raw, total_rule) = match total {
        Some((s, raw)) => (s, raw, "the Aggregated row"),
        None => (
            sum_of(&endpoints),
            Value::Null,
            "summed from the endpoint rows (the file has no Aggregated row)",
        ),
    };
    let peak_users = series
        .iter()
        .filter_map(|p| p["users"].as_f64())
        .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.max(u))));
    let reported = json!({
        "tool": "locust",
        "input": if history { "stats_history.csv" } else { "stats.csv" },
        "percentile_rule": PERCENTILE_RULE,
        "totals": total_rule,
        "endpoints": endpoints.iter().map(|(_, _, raw)| raw.clone()).collect::<Vec<_>>(),
        "aggregated": total_raw,
        "history": if history { Value::from(series) } else { Value::Null },
        "peak_users": peak_users,
    });
    let rejected_rows = rejected.len() as u64;
    let mut buckets: BTreeMap<(Option<String>, i64), Bucket> = BTreeMap::new();
    for (scope, rows) in &history_rows {
        history_buckets(scope.as_deref(), rows, &mut buckets);
    }
    let scope_buckets = |label: Option<&str>| -> Vec<&Bucket> {
        buckets
            .values()
            .filter(|b| b.label.as_deref() == label)
            .collect()
    };
    let mut labels: Vec<LabelStats> = endpoints
        .into_iter()
        .map(|(label, stats, _)| LabelStats {
            label,
            is_transaction: false,
            stats,
        })
        .collect();
    if history {
        window_from_buckets(&mut overall, &scope_buckets(None));
        for l in &mut labels {
            window_from_buckets(&mut l.stats, &scope_buckets(Some(&l.label)));
        }
    }
    Ok(vec![ParsedRun {
        tool: "locust".to_owned(),
        name_hint: None,
        data: RunData {
            overall,
            labels,
            buckets: buckets.into_values().collect(),
            rejected_rows,
            rejected: rejected
                .into_iter()
                .map(|(line, reason)| crate::domain::runs::RejectedRow { line, reason })
                .collect(),
            summary_only: true,
            reported,
            ..RunData::default()
        },
    }])
}

/// Totals when a file has no `Aggregated` row: counts and bytes add up, the mean is
/// count-weighted, min/max are the extremes; percentiles cannot be combined (`None`).
fn sum_of(endpoints: &[(String, Stats, Value)]) -> Stats {
    let count: u64 = endpoints.iter().map(|e| e.1.count).sum();
    let errors: u64 = endpoints.iter().map(|e| e.1.errors).sum();
    let weighted: f64 = endpoints
        .iter()
        .filter_map(|e| Some(e.1.mean_ms? * e.1.count as f64))
        .sum();
    let fold = |f: fn(&Stats) -> Option<f64>, pick: fn(f64, f64) -> f64| {
        endpoints.iter().filter_map(|e| f(&e.1)).reduce(pick)
    };
    Stats {
        count,
        errors,
        error_pct: (count > 0).then(|| errors as f64 / count as f64 * 100.0),
        mean_ms: (count > 0).then(|| weighted / count as f64),
        min_ms: fold(|s| s.min_ms, f64::min),
        max_ms: fold(|s| s.max_ms, f64::max),
        bytes_received: endpoints.iter().map(|e| e.1.bytes_received).sum(),
        ..Stats::default()
    }
}

/// One `StatsEntry` of the `--json` output.
#[derive(Deserialize)]
struct Entry {
    name: String,
    #[serde(default)]
    method: Option<String>,
    num_requests: u64,
    #[serde(default)]
    num_none_requests: u64,
    num_failures: u64,
    total_response_time: f64,
    #[serde(default)]
    min_response_time: Option<f64>,
    #[serde(default)]
    max_response_time: Option<f64>,
    #[serde(default)]
    total_content_length: f64,
    #[serde(default)]
    response_times: BTreeMap<String, u64>,
    #[serde(default)]
    start_time: Option<f64>,
    #[serde(default)]
    last_request_timestamp: Option<f64>,
}

/// Accumulates entries (one endpoint, or all of them for the total).
#[derive(Default)]
struct Acc {
    requests: u64,
    none_requests: u64,
    failures: u64,
    total_ms: f64,
    min_ms: Option<f64>,
    max_ms: Option<f64>,
    content: f64,
    /// rounded ms → count
    hist: BTreeMap<u64, u64>,
    start_s: Option<f64>,
    last_s: Option<f64>,
}

impl Acc {
    fn add(&mut self, e: &Entry) -> Result<(), String> {
        self.requests += e.num_requests;
        self.none_requests += e.num_none_requests;
        self.failures += e.num_failures;
        self.total_ms += e.total_response_time;
        self.min_ms = opt(self.min_ms, e.min_response_time, f64::min);
        self.max_ms = opt(self.max_ms, e.max_response_time, f64::max);
        self.content += e.total_content_length;
        for (k, n) in &e.response_times {
            let ms: f64 = k
                .parse()
                .map_err(|_| format!("response_times key {k:?} is not a number"))?;
            *self.hist.entry(ms.round() as u64).or_insert(0) += n;
        }
        self.start_s = opt(self.start_s, e.start_time, f64::min);
        self.last_s = opt(self.last_s, e.last_request_timestamp, f64::max);
        Ok(())
    }

    /// Locust's `calculate_response_time_percentile`: walking down from the slowest,
    /// the first value where `num_requests − processed ≤ int(num_requests · p)`.
    fn percentile(&self, p: f64) -> Option<f64> {
        if self.requests == 0 || self.hist.is_empty() {
            return None;
        }
        let k = (self.requests as f64 * p) as u64;
        let mut processed = 0u64;
        for (&ms, &n) in self.hist.iter().rev() {
            processed += n;
            if self.requests.saturating_sub(processed) <= k {
                return Some(ms as f64);
            }
        }
        None
    }

    fn stats(&self) -> Stats {
        let n = self.requests;
        let some = |v: Option<f64>| v.filter(|_| n > 0);
        let window_s = self.start_s.zip(self.last_s).map(|(a, b)| b - a);
        Stats {
            count: n,
            errors: self.failures,
            error_pct: (n > 0).then(|| self.failures as f64 / n as f64 * 100.0),
            min_ms: some(self.min_ms),
            mean_ms: (n > 0).then(|| self.total_ms / n as f64),
            max_ms: some(self.max_ms),
            p50_ms: self.percentile(0.5),
            p90_ms: self.percentile(0.9),
            p95_ms: self.percentile(0.95),
            p99_ms: self.percentile(0.99),
            first_start_ms: self.start_s.map(|s| (s * 1000.0).floor() as i64),
            last_end_ms: self.last_s.map(|s| (s * 1000.0).floor() as i64),
            window_ms: window_s.map(|w| (w * 1000.0).round() as i64),
            throughput_rps: window_s.filter(|&w| w > 0.0).map(|w| n as f64 / w),
            bytes_received: self.content.round() as u64,
            bytes_sent: 0,
        }
    }
}

fn opt(a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}

fn parse_json<R: Read>(
    input: R,
    source_name: &str,
    limits: &SampleLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let entries: Vec<Entry> = serde_json::from_reader(input).map_err(|e| {
        invalid(
            source_name,
            e.line() as u64,
            format!("not Locust --json output (an array of request stats entries): {e}"),
        )
    })?;
    let mut total = Acc::default();
    let mut labels = Vec::with_capacity(entries.len());
    let mut rejected = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let mut acc = Acc::default();
        if let Err(why) = acc.add(e).and_then(|()| total.add(e)) {
            rejected.push(crate::domain::runs::RejectedRow {
                line: i as u64 + 1,
                reason: format!("entry {} ({}): {why}", i + 1, e.name),
            });
            continue;
        }
        let stats = acc.stats();
        if let Some(why) = super::summary::implausible(&stats, limits, &e.name) {
            rejected.push(crate::domain::runs::RejectedRow {
                line: i as u64 + 1,
                reason: format!("entry {}: impossible figure: {why}", i + 1),
            });
            continue;
        }
        labels.push(LabelStats {
            label: endpoint_label(e.method.as_deref().unwrap_or(""), &e.name),
            is_transaction: false,
            stats,
        });
    }
    let reported = json!({
        "tool": "locust",
        "input": "--json",
        "percentile_rule": PERCENTILE_RULE,
        "percentiles_computed_by": "harrier, with Locust's rule, from each entry's response_times histogram",
        "throughput_rule": "Locust: num_requests / (last_request_timestamp − start_time)",
        "none_requests": total.none_requests,
    });
    Ok(vec![ParsedRun {
        tool: "locust".to_owned(),
        name_hint: None,
        data: RunData {
            overall: total.stats(),
            labels,
            rejected_rows: rejected.len() as u64,
            rejected,
            summary_only: true,
            reported,
            ..RunData::default()
        },
    }])
}

/// One file of a Locust `--csv PREFIX` set, by its name's ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CsvPart {
    /// `PREFIX_stats.csv`: per-name rows and the `Aggregated` total.
    Stats,
    /// `PREFIX_stats_history.csv`: the time series.
    History,
    /// `PREFIX_failures.csv`: failure messages per name.
    Failures,
    /// `PREFIX_exceptions.csv`: exceptions in user code.
    Exceptions,
}

/// The prefix and part of a Locust CSV file name (`x_stats_history.csv` → `("x",
/// History)`); `None` for any other name. A directory part is left out of the prefix.
pub fn csv_set_part(file_name: &str) -> Option<(String, CsvPart)> {
    let base = file_name.rsplit(['/', '\\']).next().unwrap_or(file_name);
    [
        ("_stats_history.csv", CsvPart::History),
        ("_stats.csv", CsvPart::Stats),
        ("_failures.csv", CsvPart::Failures),
        ("_exceptions.csv", CsvPart::Exceptions),
    ]
    .into_iter()
    .find_map(|(suffix, part)| {
        base.strip_suffix(suffix)
            .filter(|p| !p.is_empty())
            .map(|p| (p.to_owned(), part))
    })
}

/// A `_failures.csv` read: its error groups, and its rows that did not read as (line,
/// reason).
pub type Failures = (Vec<ErrorGroup>, Vec<(u64, String)>);

fn csv_reader<R: Read>(input: R) -> csv::Reader<R> {
    ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(input)
}

/// `PREFIX_failures.csv` (`Method,Name,Error,Occurrences[,First Seen,Last Seen]`) as error
/// groups: label = `Method Name` as the stats files name it, message = `Error` as Locust
/// wrote it (its `repr()`, newlines as `\n`), count = `Occurrences`, first/last seen from
/// the ISO-8601 columns (Locust ≥ 2.44; `0` without them). Rows that do not read are
/// returned as (line, reason).
pub fn parse_failures<R: Read>(input: R, source_name: &str) -> Result<Failures, IngestError> {
    let mut rdr = csv_reader(input);
    let mut header = StringRecord::new();
    match rdr.read_record(&mut header) {
        Ok(true) => {}
        Ok(false) => return Err(invalid(source_name, 1, "empty file")),
        Err(e) => return Err(invalid(source_name, 1, e.to_string())),
    }
    let find = |n: &str| header.iter().position(|c| c.trim().eq_ignore_ascii_case(n));
    let (Some(method), Some(name), Some(error), Some(occ)) = (
        find("Method"),
        find("Name"),
        find("Error"),
        find("Occurrences"),
    ) else {
        return Err(invalid(
            source_name,
            1,
            "not a Locust failures.csv: the header must name Method, Name, Error and Occurrences",
        ));
    };
    let (first, last) = (find("First Seen"), find("Last Seen"));
    let when = |r: &StringRecord, c: Option<usize>| -> i64 {
        c.and_then(|c| r.get(c))
            .and_then(|t| {
                time::OffsetDateTime::parse(
                    t.trim(),
                    &time::format_description::well_known::Rfc3339,
                )
                .ok()
            })
            .map_or(0, |t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
    };
    let (mut groups, mut rejected) = (Vec::new(), Vec::new());
    let mut r = StringRecord::new();
    loop {
        let line = rdr.position().line();
        match rdr.read_record(&mut r) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                rejected.push((line, format!("unreadable row: {e}")));
                continue;
            }
        }
        let Some(count) = r.get(occ).and_then(|v| v.trim().parse::<u64>().ok()) else {
            rejected.push((line, "Occurrences is not a whole number".to_owned()));
            continue;
        };
        groups.push(ErrorGroup {
            label: endpoint_label(
                r.get(method).unwrap_or("").trim(),
                r.get(name).unwrap_or(""),
            ),
            response_code: String::new(),
            message: r.get(error).unwrap_or("").to_owned(),
            count,
            first_seen_ms: when(&r, first),
            last_seen_ms: when(&r, last),
        });
    }
    Ok((groups, rejected))
}

/// `PREFIX_exceptions.csv` (`Count,Message,Traceback,Nodes`; the traceback a multi-line
/// quoted field) as `[{"count", "message", "traceback", "nodes"}]`: exceptions raised in
/// the test's own code, which Locust counts apart from request failures.
pub fn parse_exceptions<R: Read>(input: R, source_name: &str) -> Result<Value, IngestError> {
    let mut rdr = csv_reader(input);
    let mut header = StringRecord::new();
    match rdr.read_record(&mut header) {
        Ok(true) => {}
        Ok(false) => return Err(invalid(source_name, 1, "empty file")),
        Err(e) => return Err(invalid(source_name, 1, e.to_string())),
    }
    let find = |n: &str| header.iter().position(|c| c.trim().eq_ignore_ascii_case(n));
    let (Some(count), Some(message)) = (find("Count"), find("Message")) else {
        return Err(invalid(
            source_name,
            1,
            "not a Locust exceptions.csv: the header must name Count and Message",
        ));
    };
    let (traceback, nodes) = (find("Traceback"), find("Nodes"));
    let mut out = Vec::new();
    let mut r = StringRecord::new();
    loop {
        let line = rdr.position().line();
        match rdr.read_record(&mut r) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(invalid(source_name, line, format!("unreadable row: {e}"))),
        }
        out.push(json!({
            "count": r.get(count).and_then(|v| v.trim().parse::<u64>().ok()),
            "message": r.get(message),
            "traceback": traceback.and_then(|c| r.get(c)),
            "nodes": nodes.and_then(|c| r.get(c)),
        }));
    }
    Ok(Value::from(out))
}

/// The files of one Locust `--csv` run, read.
#[derive(Default)]
pub struct CsvSet {
    /// `_stats.csv`, parsed ([`parse`]).
    pub stats: Option<ParsedRun>,
    /// `_stats_history.csv`, parsed ([`parse`]).
    pub history: Option<ParsedRun>,
    /// `_failures.csv` ([`parse_failures`]): groups and rejected rows.
    pub failures: Option<Failures>,
    /// `_exceptions.csv` ([`parse_exceptions`]).
    pub exceptions: Option<Value>,
    /// The file names given, for the run's record.
    pub inputs: Vec<String>,
}

/// One run from the files of one Locust `--csv` run:
/// - over time (buckets, users, window, throughput, saturation) from `_stats_history.csv`;
/// - per-name rows from `_stats.csv` (Locust's final figures per name, with their
///   percentiles), each given the window of its own history rows when the history has them
///   (`--csv-full-history`);
/// - the run total from the history's last `Aggregated` row, with the whole-run p90/p95/p99
///   of `_stats.csv`'s `Aggregated` row ("reported by Locust"); without a history, the
///   `_stats.csv` run as [`parse`] reads it;
/// - failure messages from `_failures.csv` (the run's error groups), exceptions from
///   `_exceptions.csv` (kept in `reported.exceptions`: not request failures).
///
/// A set needs `_stats.csv` or `_stats_history.csv`: failures alone hold no request counts.
pub fn merge_set(set: CsvSet, source_name: &str) -> Result<ParsedRun, IngestError> {
    let CsvSet {
        stats,
        history,
        failures,
        exceptions,
        inputs,
    } = set;
    let mut run = match (history, stats) {
        (Some(mut h), Some(s)) => {
            let s_total = s.data.overall.clone();
            let o = &mut h.data.overall;
            o.p90_ms = s_total.p90_ms;
            o.p95_ms = s_total.p95_ms;
            o.p99_ms = s_total.p99_ms;
            let run_window = (o.first_start_ms, o.last_end_ms, o.window_ms);
            let history_labels = std::mem::take(&mut h.data.labels);
            h.data.labels = s
                .data
                .labels
                .into_iter()
                .map(|mut l| {
                    match history_labels.iter().find(|hl| hl.label == l.label) {
                        Some(hl) => {
                            l.stats.first_start_ms = hl.stats.first_start_ms;
                            l.stats.last_end_ms = hl.stats.last_end_ms;
                            l.stats.window_ms = hl.stats.window_ms;
                        }
                        None => {
                            (
                                l.stats.first_start_ms,
                                l.stats.last_end_ms,
                                l.stats.window_ms,
                            ) = run_window;
                        }
                    }
                    l
                })
                .collect();
            // Buckets only of the names the run lists (the run's own always).
            let names: std::collections::HashSet<String> =
                h.data.labels.iter().map(|l| l.label.clone()).collect();
            h.data
                .buckets
                .retain(|b| b.label.as_ref().is_none_or(|l| names.contains(l)));
            let r = &mut h.data.reported;
            r["endpoints"] = s.data.reported["endpoints"].clone();
            r["stats_aggregated"] = s.data.reported["aggregated"].clone();
            r["totals"] = json!(
                "count, failures, mean, min, max and the window from the history's last Aggregated row; p90/p95/p99 from the stats.csv Aggregated row"
            );
            if s_total.count != h.data.overall.count {
                r["stats_count_differs"] = json!({
                    "stats_csv": s_total.count,
                    "stats_history_csv": h.data.overall.count,
                });
            }
            h.data.rejected_rows += s.data.rejected_rows;
            h.data.rejected.extend(s.data.rejected);
            h
        }
        (Some(h), None) => h,
        (None, Some(s)) => s,
        (None, None) => {
            return Err(invalid(
                source_name,
                1,
                "a Locust failures.csv or exceptions.csv holds no request counts: give it with the _stats.csv or _stats_history.csv of the same run",
            ));
        }
    };
    if let Some((groups, rejected)) = failures {
        let start = run.data.overall.first_start_ms.unwrap_or(0);
        run.data.errors = groups
            .into_iter()
            .map(|mut g| {
                if g.first_seen_ms == 0 {
                    g.first_seen_ms = start;
                }
                if g.last_seen_ms == 0 {
                    g.last_seen_ms = run.data.overall.last_end_ms.unwrap_or(start);
                }
                g
            })
            .collect();
        run.data.rejected_rows += rejected.len() as u64;
        run.data
            .rejected
            .extend(
                rejected
                    .into_iter()
                    .map(|(line, reason)| crate::domain::runs::RejectedRow {
                        line,
                        reason: format!("failures.csv: {reason}"),
                    }),
            );
    }
    if let Some(e) = exceptions {
        run.data.reported["exceptions"] = e;
    }
    run.data.reported["inputs"] = json!(inputs);
    Ok(run)
}
