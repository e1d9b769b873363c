//! ApacheBench (ab) text reports → summary-only runs.
//!
//! Format (docs/formats.md#ab; writer `support/ab.c` in apache/httpd): a banner, then
//! `Key:   value` lines, the "Connection Times (ms)" table and the "Percentage of the
//! requests served within a certain time (ms)" table. ab keeps no per-request data in
//! this output, so a run is **summary-only**: every figure is "reported by ab".
//!
//! Mapping to [`Stats`]: count = `Complete requests`; errors = Connect + Receive +
//! Exceptions failures + `Non-2xx responses` (see [`error_count`]; harrier's one rule for
//! tools without a per-request success flag: transport errors + HTTP status ≥ 400, which ab
//! counts as non-2xx). ab's **Length** failures (a body whose length differs from the first
//! response's — normal for any dynamic page) are not errors: they are kept apart in
//! `reported.length_failures` with that explanation. The breakdown line is read in both
//! layouts, `(Connect: 0, Receive: 0, Length: 97, Exceptions: 0)` (ab ≥ 2.3) and the older
//! `(Connect: 0, Length: 97, Exceptions: 0)` (no Receive), by field name; min/mean/max = the `Total:` row of Connection Times (whole ms, as ab
//! rounds them); p50/p90/p95/p99 = the percentage table as printed (ab's rule:
//! `stats[n·i/100]` on the sorted times, not nearest rank); window = `Time taken for
//! tests`; throughput = `Requests per second` as printed; bytes received = `Total
//! transferred`, sent = `Total body sent`. Every raw figure also goes into
//! [`RunData::reported`]. One label per run: the Document Path.
//!
//! A file may hold several reports one after another (a shell loop's `nohup.out`): each
//! becomes its own run, in order, named `host:port/path`. A line that is only a time stamp
//! before a report (`date; ab …`: `date`'s output, ISO 8601, or `date +%s`, see
//! [`super::timestamp::parse_date_line_ms`]) is that run's start, and its end is the start
//! plus `Time taken for tests`. A report that follows another with no time stamp of its
//! own (`date; ab host1; ab host2` in one loop iteration) starts where that one ended;
//! without any time stamp the run has no start time.
//!
//! A report cut off before its final figures (ab killed, a truncated copy) still imports
//! with what it printed, and says so: the run gets a rejected row at the line where the
//! report stops, naming what is missing (`Requests per second`, the Connection Times
//! `Total:` row, the percentage table's `100%` line), and `reported.cut_off = true`. A
//! report without a percentage table at all is complete (`ab -d`).

use std::io::BufRead;

use serde_json::{Map, Value, json};

use super::{IngestError, ParsedRun};
use crate::domain::runs::{LabelStats, RejectedRow, RunData, RunLimits, Stats};

/// ab's percentile rule, stored beside its percentile table.
pub const PERCENTILE_RULE: &str = "ab: stats[n*i/100]";

/// Reads every ab report in `input`.
pub fn parse<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    parse_with(input, source_name, &RunLimits::default())
}

/// [`parse`], a report whose figures cannot be true under `limits` (see
/// [`super::summary::implausible`]) rejected at the line it starts on.
pub fn parse_with<R: BufRead>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let mut reports: Vec<Report> = Vec::new();
    let mut raw = Vec::new();
    let mut line_no = 0u64;
    // The last time-stamp line (`date` in a shell loop) not yet given to a report: the
    // start of the next report.
    let mut stamp: Option<i64> = None;
    loop {
        raw.clear();
        let n = input
            .read_until(b'\n', &mut raw)
            .map_err(|source| IngestError::Io {
                source_name: source_name.to_owned(),
                source,
            })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let line = String::from_utf8_lossy(&raw);
        let line = line.trim_end_matches(['\n', '\r']);
        if let Some(ms) = super::timestamp::parse_date_line_ms(line) {
            stamp = Some(ms);
            continue;
        }
        let starts_report = line.starts_with("This is ApacheBench")
            || (line.starts_with("Benchmarking ")
                && reports.last().is_none_or(|r| r.benchmarking_seen));
        if starts_report {
            let mut report = Report::new(line_no);
            // A report with no date line of its own follows the one before it in the
            // same loop iteration (`date; ab host1; ab host2`): it starts when that one
            // ended, its start plus its `Time taken for tests`.
            report.started_ms = stamp.take().or_else(|| {
                let prev = reports.last()?;
                let taken_ms = (prev.time_taken_s? * 1000.0).round();
                if !(taken_ms.is_finite() && (0.0..1e12).contains(&taken_ms)) {
                    return None;
                }
                Some(prev.started_ms? + taken_ms as i64)
            });
            reports.push(report);
        }
        if let Some(r) = reports.last_mut() {
            r.read_line(line);
            r.last_line = line_no;
        }
    }
    let Some(first) = reports.first() else {
        return Err(IngestError::Invalid {
            source_name: source_name.to_owned(),
            line: 1,
            message: "no ApacheBench report found (expected a line starting \"This is ApacheBench\" or \"Benchmarking \")"
                .to_owned(),
        });
    };
    let first_line = first.line;
    // Reports without results (ab aborted on a socket error) are not runs; they are
    // reported as rejected lines of the nearest complete run so they are not lost.
    let mut runs: Vec<ParsedRun> = Vec::new();
    let mut orphans: Vec<RejectedRow> = Vec::new();
    for r in reports {
        match r.into_run(limits) {
            Ok(mut run) => {
                run.data.rejected_rows += orphans.len() as u64;
                run.data.rejected.append(&mut orphans);
                runs.push(run);
            }
            Err(orphan) => match runs.last_mut() {
                Some(prev) => {
                    prev.data.rejected_rows += 1;
                    prev.data.rejected.push(orphan);
                }
                None => orphans.push(orphan),
            },
        }
    }
    if runs.is_empty() {
        let why = orphans
            .first()
            .map_or_else(String::new, |o| o.reason.clone());
        return Err(IngestError::Invalid {
            source_name: source_name.to_owned(),
            line: first_line,
            message: why,
        });
    }
    Ok(runs)
}

/// Explanation shown beside ab's Length failures (they are not errors).
pub const LENGTH_NOTE: &str = "body length differed from the first response's — normal for dynamic pages; not counted as errors";

/// ab's headline error count: Connect + Receive + Exceptions failures + Non-2xx responses,
/// at most `complete`. Length failures are left out: ab compares every body's length with
/// the first one, so any dynamic page "fails" (docs/formats.md#ab). Write errors are not
/// counted (ab does not count them as failed either). `breakdown` is
/// `[connect, receive, length, exceptions]` (receive 0 in ab's older layout); without a
/// breakdown line (a cut-off report) the split of `failed` is unknown and all of it
/// counts, overlapping Non-2xx as far as the figures allow.
pub fn error_count(complete: u64, failed: u64, breakdown: Option<[u64; 4]>, non_2xx: u64) -> u64 {
    match breakdown {
        Some([connect, receive, _length, exceptions]) => (connect + receive + exceptions)
            .saturating_add(non_2xx)
            .min(complete),
        None => failed.max(non_2xx).min(complete),
    }
}

/// Reads ab's failure breakdown, `(Connect: 0, Receive: 0, Length: 97, Exceptions: 0)` or
/// the older `(Connect: 0, Length: 97, Exceptions: 0)`, by field name:
/// `[connect, receive, length, exceptions]`. `None` when a field is unreadable or Connect,
/// Length or Exceptions is missing.
pub fn parse_breakdown(line: &str) -> Option<[u64; 4]> {
    let inner = line.trim().strip_prefix('(')?.strip_suffix(')')?;
    let mut out: [Option<u64>; 4] = [None; 4];
    for part in inner.split(',') {
        let (name, n) = part.split_once(':')?;
        let n: u64 = n.trim().parse().ok()?;
        let i = match name.trim() {
            "Connect" => 0,
            "Receive" => 1,
            "Length" => 2,
            "Exceptions" => 3,
            _ => return None,
        };
        out[i] = Some(n);
    }
    Some([out[0]?, out[1].unwrap_or(0), out[2]?, out[3]?])
}

#[derive(Debug, Default)]
struct Report {
    line: u64,
    /// When the report's run started: the time-stamp line just before it (`date; ab …`),
    /// if any. Without one the run has no start time (never the import time).
    started_ms: Option<i64>,
    /// The last line read into this report (where a cut-off report stops).
    last_line: u64,
    /// The percentage table's header was read.
    percentiles_started: bool,
    benchmarking_seen: bool,
    in_connection_times: bool,
    in_percentiles: bool,
    version: Option<String>,
    server_software: Option<String>,
    host: Option<String>,
    port: Option<u64>,
    path: Option<String>,
    document_length: Option<Value>,
    concurrency: Option<u64>,
    time_taken_s: Option<f64>,
    complete: Option<u64>,
    failed: Option<u64>,
    breakdown: Option<[u64; 4]>,
    /// The breakdown line had a `Receive:` field (ab 2.3; older ab did not print one).
    breakdown_has_receive: bool,
    write_errors: Option<u64>,
    non_2xx: Option<u64>,
    keep_alive: Option<u64>,
    total_transferred: Option<u64>,
    total_body_sent: Option<u64>,
    html_transferred: Option<u64>,
    requests_per_second: Option<f64>,
    time_per_request_ms: Option<f64>,
    time_per_request_all_ms: Option<f64>,
    transfer_rate_received: Option<f64>,
    transfer_rate_sent: Option<f64>,
    transfer_rate_total: Option<f64>,
    connection_times: Map<String, Value>,
    /// (percent, ms) in printed order.
    percentiles: Vec<(u64, u64)>,
}

/// The first whitespace-separated token of `v`, parsed.
fn first<T: std::str::FromStr>(v: &str) -> Option<T> {
    v.split_whitespace().next()?.parse().ok()
}

impl Report {
    fn new(line: u64) -> Self {
        Report {
            line,
            ..Report::default()
        }
    }

    fn read_line(&mut self, line: &str) {
        let trimmed = line.trim();
        if let Some(rest) = line.strip_prefix("This is ApacheBench, Version ") {
            self.version = rest
                .split_whitespace()
                .next()
                .map(|v| v.trim_end_matches(',').to_owned());
            return;
        }
        if let Some(rest) = line.strip_prefix("Benchmarking ") {
            self.benchmarking_seen = true;
            if self.host.is_none() {
                self.host = rest.split_whitespace().next().map(str::to_owned);
            }
            return;
        }
        if trimmed.starts_with("Connection Times (ms)") {
            self.in_connection_times = true;
            return;
        }
        if trimmed.starts_with("Percentage of the requests served") {
            self.in_connection_times = false;
            self.in_percentiles = true;
            self.percentiles_started = true;
            return;
        }
        if self.in_percentiles {
            if let Some((pct, rest)) = trimmed.split_once('%')
                && let (Ok(pct), Some(ms)) = (pct.trim().parse::<u64>(), first::<u64>(rest))
            {
                self.percentiles.push((pct, ms));
            }
            return;
        }
        if trimmed.starts_with("(Connect:") {
            self.breakdown = parse_breakdown(trimmed);
            self.breakdown_has_receive = trimmed.contains("Receive:");
            return;
        }
        if let Some(v) = trimmed.strip_suffix("kb/s sent") {
            self.transfer_rate_sent = first(v);
            return;
        }
        if let Some(v) = trimmed.strip_suffix("kb/s total") {
            self.transfer_rate_total = first(v);
            return;
        }
        let Some((key, value)) = trimmed.split_once(':') else {
            return;
        };
        let value = value.trim();
        if self.in_connection_times {
            let nums: Vec<f64> = value
                .split_whitespace()
                .filter_map(|t| t.parse().ok())
                .collect();
            let row = match nums[..] {
                [min, mean, sd, median, max] => {
                    json!({"min": min, "mean": mean, "sd": sd, "median": median, "max": max})
                }
                // ab -S: "min avg max".
                [min, mean, max] => json!({"min": min, "mean": mean, "max": max}),
                _ => return,
            };
            self.connection_times
                .insert(key.trim().to_ascii_lowercase(), row);
            return;
        }
        match key {
            "Server Software" => self.server_software = Some(value.to_owned()),
            "Server Hostname" => self.host = Some(value.to_owned()),
            "Server Port" => self.port = first(value),
            "Document Path" => self.path = Some(value.to_owned()),
            "Document Length" => {
                self.document_length =
                    Some(first::<u64>(value).map_or_else(|| Value::from(value), Value::from))
            }
            "Concurrency Level" => self.concurrency = first(value),
            "Time taken for tests" => self.time_taken_s = first(value),
            "Complete requests" => self.complete = first(value),
            "Failed requests" => self.failed = first(value),
            "Write errors" => self.write_errors = first(value),
            "Non-2xx responses" => self.non_2xx = first(value),
            "Keep-Alive requests" => self.keep_alive = first(value),
            "Total transferred" => self.total_transferred = first(value),
            "Total body sent" => self.total_body_sent = first(value),
            "HTML transferred" => self.html_transferred = first(value),
            "Requests per second" => self.requests_per_second = first(value),
            "Time per request" if value.contains("across all concurrent requests") => {
                self.time_per_request_all_ms = first(value)
            }
            "Time per request" => self.time_per_request_ms = first(value),
            "Transfer rate" => self.transfer_rate_received = first(value),
            _ => {}
        }
    }

    fn percentile(&self, p: u64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(q, _)| *q == p)
            .map(|&(_, ms)| ms as f64)
    }

    fn total_row(&self, field: &str) -> Option<f64> {
        self.connection_times.get("total")?.get(field)?.as_f64()
    }

    /// The final figures a complete report prints that this one lacks (empty: complete).
    fn missing_figures(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.requests_per_second.is_none() {
            missing.push("\"Requests per second\"");
        }
        if !self.connection_times.contains_key("total") {
            missing.push("the Connection Times \"Total:\" row");
        }
        // `ab -d` prints no percentage table; a table begun must end with its 100% line.
        if (self.percentiles_started || !self.connection_times.contains_key("total"))
            && self.percentile(100).is_none()
        {
            missing.push("the percentage table's \"100%\" line");
        }
        missing
    }

    fn into_run(self, limits: &RunLimits) -> Result<ParsedRun, RejectedRow> {
        let Some(complete) = self.complete else {
            return Err(RejectedRow {
                line: self.line,
                reason: format!(
                    "ab report{} has no results (no \"Complete requests\" line: ab aborted before finishing?)",
                    self.host
                        .as_deref()
                        .map(|h| format!(" for {h}"))
                        .unwrap_or_default()
                ),
            });
        };
        let failed = self.failed.unwrap_or(0);
        let non_2xx = self.non_2xx.unwrap_or(0);
        for (what, n) in [("Failed requests", failed), ("Non-2xx responses", non_2xx)] {
            if n > complete {
                return Err(RejectedRow {
                    line: self.line,
                    reason: format!(
                        "impossible figure: ab report: {what} {n} is more than the {complete} requests"
                    ),
                });
            }
        }
        let errors = error_count(complete, failed, self.breakdown, non_2xx);
        let length = self.breakdown.map_or(0, |b| b[2]);
        // ab does not say how its socket failures and its non-2xx responses overlap: the
        // headline counts them apart (at most `complete`); this is the range they allow.
        let transport = self.breakdown.map_or(failed, |[c, r, _, e]| c + r + e);
        let errors_max = complete.min(transport.saturating_add(non_2xx));
        let errors_min = transport.max(non_2xx).min(errors_max);
        let window_ms = self.time_taken_s.map(|s| (s * 1000.0).round() as i64);
        let stats = Stats {
            count: complete,
            errors,
            error_pct: (complete > 0).then(|| errors as f64 / complete as f64 * 100.0),
            min_ms: self.total_row("min"),
            mean_ms: self.total_row("mean"),
            max_ms: self.total_row("max"),
            p50_ms: self.percentile(50),
            p90_ms: self.percentile(90),
            p95_ms: self.percentile(95),
            p99_ms: self.percentile(99),
            first_start_ms: self.started_ms,
            last_end_ms: self
                .started_ms
                .zip(window_ms)
                .map(|(s, w)| s.saturating_add(w)),
            window_ms,
            throughput_rps: self.requests_per_second,
            bytes_received: self.total_transferred.unwrap_or(0),
            bytes_sent: self.total_body_sent.unwrap_or(0),
        };
        if let Some(why) = super::summary::implausible(&stats, &limits.samples, "ab report") {
            return Err(RejectedRow {
                line: self.line,
                reason: format!("impossible figure: {why}"),
            });
        }
        let path = self.path.clone().unwrap_or_else(|| "/".to_owned());
        let name_hint = self.host.as_ref().map(|h| match self.port {
            Some(p) => format!("{h}:{p}{path}"),
            None => format!("{h}{path}"),
        });
        let missing = self.missing_figures();
        let cut_off = (!missing.is_empty()).then(|| RejectedRow {
            line: self.last_line,
            reason: format!(
                "the ab report stops here, cut off before its final figures: {} missing; the run shows only what ab printed before the cut",
                missing.join(", ")
            ),
        });
        let reported = json!({
            "tool": "ab",
            "cut_off": cut_off.is_some(),
            "version": self.version,
            "server_software": self.server_software,
            "host": self.host,
            "port": self.port,
            "document_path": self.path,
            "document_length_bytes": self.document_length,
            "concurrency": self.concurrency,
            "time_taken_s": self.time_taken_s,
            "complete_requests": complete,
            "failed_requests": failed,
            "failed_breakdown": self.breakdown.map(|[c, r, l, e]| {
                let mut m = Map::new();
                m.insert("connect".into(), c.into());
                if self.breakdown_has_receive {
                    m.insert("receive".into(), r.into());
                }
                m.insert("length".into(), l.into());
                m.insert("exceptions".into(), e.into());
                Value::Object(m)
            }),
            "errors_min": errors_min,
            "errors_max": errors_max,
            "length_failures": (length > 0).then(|| json!({"count": length, "note": LENGTH_NOTE})),
            "write_errors": self.write_errors,
            "non_2xx_responses": non_2xx,
            "keep_alive_requests": self.keep_alive,
            "errors_rule": if self.breakdown.is_some() || failed == 0 {
                "Connect + Receive + Exceptions failures + Non-2xx responses (transport errors + HTTP status >= 400); Length failures not counted"
            } else {
                "Failed requests (no breakdown line: its split is unknown) overlapping Non-2xx responses"
            },
            "total_transferred_bytes": self.total_transferred,
            "total_body_sent_bytes": self.total_body_sent,
            "html_transferred_bytes": self.html_transferred,
            "requests_per_second": self.requests_per_second,
            "time_per_request_ms": self.time_per_request_ms,
            "time_per_request_across_concurrent_ms": self.time_per_request_all_ms,
            "transfer_rate_kbytes_per_s": {
                "received": self.transfer_rate_received,
                "sent": self.transfer_rate_sent,
                "total": self.transfer_rate_total,
            },
            "connection_times_ms": self.connection_times,
            "percentiles": {
                "rule": PERCENTILE_RULE,
                "values_ms": self.percentiles.iter().map(|(p, ms)| (p.to_string(), Value::from(*ms))).collect::<Map<_, _>>(),
            },
        });
        Ok(ParsedRun {
            tool: "ab".to_owned(),
            name_hint,
            data: RunData {
                overall: stats.clone(),
                labels: vec![LabelStats {
                    label: path,
                    is_transaction: false,
                    stats,
                }],
                summary_only: true,
                reported,
                rejected_rows: u64::from(cut_off.is_some()),
                rejected: cut_off.into_iter().collect(),
                ..RunData::default()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_loop_gives_each_report_the_date_line_before_it() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ab/");
        let slow = std::fs::read_to_string(format!("{dir}slow_stdout.txt")).unwrap();
        let error = std::fs::read_to_string(format!("{dir}error_stdout.txt")).unwrap();
        // `while :; do date; ab …; sleep 60; done >> nohup.out`, two hosts.
        let text = format!(
            "$ nohup ./loop.sh &\nMon Dec  1 15:01:40 UTC 2025\n{slow}\nMon Dec  1 16:02:40 CET 2025\n{error}\n"
        );
        let runs = parse(text.as_bytes(), "nohup.out").unwrap();
        assert_eq!(runs.len(), 2);
        let t0 = 1_764_601_300_000;
        let s0 = &runs[0].data.overall;
        assert_eq!(s0.first_start_ms, Some(t0));
        assert_eq!(s0.last_end_ms, Some(t0 + s0.window_ms.unwrap()));
        assert_eq!(runs[1].data.overall.first_start_ms, Some(t0 + 60_000));
        // `date; ab host1; ab host2` in a loop: the second report of each pair starts
        // where the first ended.
        let text = format!(
            "Mon Dec  1 15:01:40 UTC 2025\n{slow}\n{error}\nMon Dec  1 15:02:40 UTC 2025\n{slow}\n{error}\n"
        );
        let runs = parse(text.as_bytes(), "nohup.out").unwrap();
        assert_eq!(runs.len(), 4);
        let starts: Vec<Option<i64>> = runs.iter().map(|r| r.data.overall.first_start_ms).collect();
        let w0 = runs[0].data.overall.window_ms.unwrap();
        assert_eq!(
            starts,
            [
                Some(t0),
                Some(t0 + w0),
                Some(t0 + 60_000),
                Some(t0 + 60_000 + w0)
            ]
        );
        // Without a date line the times stay unknown.
        let bare = parse(slow.as_bytes(), "slow.txt").unwrap();
        assert_eq!(bare[0].data.overall.first_start_ms, None);
        assert_eq!(bare[0].data.overall.last_end_ms, None);
    }

    #[test]
    fn headline_errors_leave_length_failures_out() {
        // EC22: Failed 0, Non-2xx 2000 of 2000.
        assert_eq!(error_count(2000, 0, None, 2000), 2000);
        // flaky: Failed 103 (all Length), Non-2xx 103 of 400 → the 103 non-2xx.
        assert_eq!(error_count(400, 103, Some([0, 0, 103, 0]), 103), 103);
        // Length-only failures, every status fine: no errors.
        assert_eq!(error_count(100, 10, Some([0, 0, 10, 0]), 0), 0);
        // Receive failures + Non-2xx, at most the complete requests.
        assert_eq!(error_count(100, 60, Some([0, 60, 0, 0]), 70), 100);
        assert_eq!(error_count(100, 7, Some([2, 3, 40, 2]), 5), 12);
        // No breakdown line (cut-off report): all of Failed counts.
        assert_eq!(error_count(100, 10, None, 4), 10);
    }

    #[test]
    fn breakdown_is_read_in_both_layouts() {
        assert_eq!(
            parse_breakdown("    (Connect: 1, Receive: 2, Length: 97, Exceptions: 3)"),
            Some([1, 2, 97, 3])
        );
        assert_eq!(
            parse_breakdown("(Connect: 4, Length: 97, Exceptions: 5)"),
            Some([4, 0, 97, 5])
        );
        assert_eq!(
            parse_breakdown("(Connect: x, Length: 97, Exceptions: 0)"),
            None
        );
        assert_eq!(parse_breakdown("(Connect: 0, Exceptions: 0)"), None);
    }
}
