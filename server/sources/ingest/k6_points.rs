//! k6 metric points → requests: the regrouping shared by [`super::k6_json`] and
//! [`super::k6_csv`].
//!
//! k6 writes one point per metric per request (docs/formats.md#k6-points-json-and-csv; `lib/netext/httpext/tracer.go`
//! `Trail.SaveSamples` in grafana/k6): `http_reqs` (value 1), `http_req_duration`, five
//! timing points (`http_req_blocked` … `http_req_receiving`) and, since k6 0.31,
//! `http_req_failed` (1 = failed), all with **the same time and tags**, one after another.
//! The time is the request's **end** (`Trail.EndTime`).
//!
//! Definitions:
//! - one request = one `http_reqs` point; its response time = the `http_req_duration`
//!   point with the same time and tags (ms, kept to the nanosecond: k6 writes
//!   `float64(ns) / 1e6`); its failure = the `http_req_failed` point (value ≠ 0);
//! - start = time − http_req_duration, so start + response time = the time k6 wrote
//!   (blocked/connecting time before the request is not part of it, as in k6);
//! - label = the `name` tag, else the `url` tag; response code = the `status` tag; error
//!   message = the `error` tag, else `error_code`;
//! - active users = the `vus` gauge (see [`super::active_users`]);
//! - bytes are 0: k6 counts `data_sent`/`data_received` per iteration, not per request.
//!
//! **`http_req_duration` points only** (a file shrunk with `grep http_req_duration`, a
//! common way to cut k6's very large JSON): when a duration point arrives and no
//! `http_reqs` point has been seen (k6 writes a request's `http_reqs` point first), each
//! duration point is one request, closed at once. Its failure comes from the
//! `expected_response` tag (`"false"` = failed; k6's own flag, what `http_req_failed`
//! would say); without that tag, from the `status` tag by harrier's rule for tools without
//! a flag (status 0 or ≥ 400 fails). `group_duration` and every other metric never count.
//!
//! A file without any `http_req_failed` point (k6 < 0.31, or `responseCallback` set to
//! null) has no failure flag: the error count is then unknown, and every error % is left
//! empty (`None`) rather than shown as 0 (docs/numbers.md: never guess failures from status).
//!
//! Exact figures: [`RunBuilder`] works in whole ms, which would round k6's sub-millisecond
//! durations (0.39 ms → 0). The response times are therefore also kept per label in
//! nanoseconds and the run's and each label's min, mean, max and percentiles (nearest
//! rank) are replaced by exact values (8 bytes per request: 80 MB for ten million
//! requests, against ~3 KB of NDJSON per request). Per-second buckets stay in whole ms.
//!
//! Grouping: points are matched to an open request by (time, tags). Requests close when
//! their `http_req_failed` point arrives, when a second `http_reqs` with the same key
//! arrives (k6 CSV timestamps may have 1 s resolution, so keys repeat), when more than
//! [`MAX_OPEN`] are open, or at the end. A request missing its `http_reqs` or
//! `http_req_duration` point is rejected with the line of its first point.

use std::collections::{BTreeMap, VecDeque};

use serde_json::{Value, json};

use super::active_users::ActiveUsers;
use crate::domain::runs::{RunBuilder, RunData, RunLimits, Sample, Stats, nearest_rank};

/// Requests kept open waiting for more of their points.
pub const MAX_OPEN: usize = 256;

/// A point's tags, sorted by name, empty values left out.
pub type Tags = Vec<(String, String)>;

struct Open {
    line: u64,
    time_ns: i64,
    tags: Tags,
    reqs: bool,
    duration_ns: Option<u64>,
    failed: Option<bool>,
}

/// Regroups points into requests and feeds them to a [`RunBuilder`].
pub struct Regrouper {
    builder: RunBuilder,
    open: VecDeque<Open>,
    /// Exact response times (ns) per label, in the builder's label order.
    /// Nanosecond durations per label, indexed as the builder's labels.
    durations: Vec<Vec<u64>>,
    users: ActiveUsers,
    saw_failed_metric: bool,
    without_failed: u64,
    /// Requests read from an `http_req_duration` point alone (no `http_reqs` in the file).
    duration_only: u64,
    /// Of those, the ones whose failure came from `status` (no `expected_response` tag).
    failure_from_status: u64,
    points: BTreeMap<String, u64>,
    by_status: BTreeMap<String, u64>,
    first_request_ns: Option<i64>,
    last_request_ns: Option<i64>,
    min_start_ns: Option<i64>,
    max_end_ns: Option<i64>,
}

impl Default for Regrouper {
    fn default() -> Self {
        Regrouper {
            builder: RunBuilder::new(),
            open: VecDeque::new(),
            durations: Vec::new(),
            users: ActiveUsers::from_gauge(),
            saw_failed_metric: false,
            without_failed: 0,
            duration_only: 0,
            failure_from_status: 0,
            points: BTreeMap::new(),
            by_status: BTreeMap::new(),
            first_request_ns: None,
            last_request_ns: None,
            min_start_ns: None,
            max_end_ns: None,
        }
    }
}

/// Metrics whose points take part in regrouping (the others are only counted).
pub fn is_request_metric(metric: &str) -> bool {
    matches!(
        metric,
        "http_reqs" | "http_req_duration" | "http_req_failed"
    )
}

impl Regrouper {
    /// A regrouper whose requests are held to `limits` (see [`RunBuilder::push`]).
    pub fn with_limits(limits: &RunLimits) -> Self {
        Regrouper {
            builder: RunBuilder::with_limits(*limits),
            ..Regrouper::default()
        }
    }

    /// Counts a point of any metric (for [`RunData::reported`]).
    pub fn count_point(&mut self, metric: &str) {
        match self.points.get_mut(metric) {
            Some(n) => *n += 1,
            None => {
                self.points.insert(metric.to_owned(), 1);
            }
        }
    }

    /// A `vus` gauge reading.
    pub fn vus(&mut self, time_ns: i64, value: f64) {
        self.users
            .reading(time_ns.div_euclid(1_000_000), value.round() as i64);
    }

    /// Rejects a line that is not a readable point.
    pub fn reject(&mut self, line: u64, reason: impl Into<String>) {
        self.builder.reject(line, reason);
    }

    /// An `http_reqs`, `http_req_duration` or `http_req_failed` point read on `line`.
    pub fn point(&mut self, line: u64, metric: &str, time_ns: i64, value: f64, tags: Tags) {
        let pos = self
            .open
            .iter()
            .position(|o| o.time_ns == time_ns && o.tags == tags);
        match metric {
            "http_reqs" => {
                if let Some(i) = pos {
                    if !self.open[i].reqs {
                        self.open[i].reqs = true;
                        return;
                    }
                    // Same key again: that one is complete, this is the next request.
                    if let Some(o) = self.open.remove(i) {
                        self.close(o);
                    }
                }
                self.open.push_back(Open {
                    line,
                    time_ns,
                    tags,
                    reqs: true,
                    duration_ns: None,
                    failed: None,
                });
            }
            "http_req_duration" => {
                let ns = if value.is_finite() && value >= 0.0 {
                    (value * 1e6).round() as u64
                } else {
                    self.builder.reject(
                        line,
                        format!("http_req_duration {value} is not a duration in ms"),
                    );
                    return;
                };
                // k6 writes a request's http_reqs point before its duration: none seen
                // at all means the file holds duration points only.
                if pos.is_none() && !self.points.contains_key("http_reqs") {
                    let failed = self.failure_from_tags(&tags);
                    self.duration_only += 1;
                    self.close(Open {
                        line,
                        time_ns,
                        tags,
                        reqs: true,
                        duration_ns: Some(ns),
                        failed,
                    });
                    return;
                }
                match pos {
                    Some(i) if self.open[i].duration_ns.is_none() => {
                        self.open[i].duration_ns = Some(ns)
                    }
                    _ => self.open.push_back(Open {
                        line,
                        time_ns,
                        tags,
                        reqs: false,
                        duration_ns: Some(ns),
                        failed: None,
                    }),
                }
            }
            _ => {
                self.saw_failed_metric = true;
                match pos {
                    Some(i) if self.open[i].failed.is_none() => {
                        if let Some(mut o) = self.open.remove(i) {
                            o.failed = Some(value != 0.0);
                            self.close(o);
                        }
                    }
                    _ => self.builder.reject(
                        line,
                        "http_req_failed point without an http_reqs point of the same time and tags",
                    ),
                }
            }
        }
        while self.open.len() > MAX_OPEN {
            if let Some(o) = self.open.pop_front() {
                self.close(o);
            }
        }
    }

    /// The failure of a request known from its duration point only: `expected_response`
    /// (`"false"` fails), else `status` 0 or ≥ 400; `None` when neither tag is there.
    fn failure_from_tags(&mut self, tags: &Tags) -> Option<bool> {
        let tag = |name: &str| tags.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        match (tag("expected_response"), tag("status")) {
            (Some(expected), _) => Some(expected != "true"),
            (None, Some(status)) => {
                self.failure_from_status += 1;
                Some(super::summary::is_error_status_text(status))
            }
            (None, None) => None,
        }
    }

    fn close(&mut self, o: Open) {
        let Some(duration_ns) = o.duration_ns.filter(|_| o.reqs) else {
            let missing = if o.reqs {
                "http_reqs point without its http_req_duration point (same time and tags)"
            } else {
                "http_req_duration point without its http_reqs point (same time and tags)"
            };
            self.builder.reject(o.line, missing);
            return;
        };
        let tag = |name: &str| {
            o.tags
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let label = tag("name").or(tag("url")).unwrap_or("(no name or url tag)");
        let status = tag("status").unwrap_or("");
        let message = tag("error").or(tag("error_code")).unwrap_or("");
        // A duration beyond i64 ns, or a start before i64::MIN, is no time at all.
        let Some(start_ns) = i64::try_from(duration_ns)
            .ok()
            .and_then(|d| o.time_ns.checked_sub(d))
        else {
            self.builder.reject(
                o.line,
                format!("http_req_duration {duration_ns} ns does not fit a request time"),
            );
            return;
        };
        let failed = o.failed.unwrap_or(false);
        let Some(label_idx) = self.builder.push(
            o.line,
            &Sample {
                label,
                start_ms: start_ns.div_euclid(1_000_000),
                elapsed_ms: duration_ns.saturating_add(500_000) / 1_000_000,
                success: !failed,
                response_code: if failed { status } else { "" },
                message: if failed { message } else { "" },
                bytes_received: 0,
                bytes_sent: 0,
                active_users: None,
                is_transaction: false,
            },
        ) else {
            return; // outside the limits: rejected with its line, counted nowhere
        };
        if o.failed.is_none() {
            self.without_failed += 1;
        }
        *self.by_status.entry(status.to_owned()).or_insert(0) += 1;
        self.first_request_ns = Some(
            self.first_request_ns
                .map_or(o.time_ns, |t| t.min(o.time_ns)),
        );
        self.last_request_ns = Some(self.last_request_ns.map_or(o.time_ns, |t| t.max(o.time_ns)));
        self.min_start_ns = Some(self.min_start_ns.map_or(start_ns, |t| t.min(start_ns)));
        self.max_end_ns = Some(self.max_end_ns.map_or(o.time_ns, |t| t.max(o.time_ns)));
        // Indexed as the builder's labels (a folded label's durations go to its
        // "other labels" row, as its samples do).
        if self.durations.len() <= label_idx {
            self.durations.resize_with(label_idx + 1, Vec::new);
        }
        self.durations[label_idx].push(duration_ns);
    }

    /// Closes every open request and returns the run. `kind` names the input for
    /// [`RunData::reported`]; `extra` is merged into it.
    pub fn finish(mut self, kind: &str, extra: Value) -> (RunData, u64) {
        while let Some(o) = self.open.pop_front() {
            self.close(o);
        }
        let samples = self.builder.samples();
        let mut data = self.builder.finish();
        self.users.apply(&mut data);
        // Duration-only files carry their failure in tags; a request without those tags
        // leaves the error count unknown, as a file without http_req_failed does.
        let errors_known =
            self.saw_failed_metric || (self.duration_only > 0 && self.without_failed == 0);
        // Exact figures from the nanosecond durations.
        let mut all: Vec<u64> = Vec::with_capacity(samples as usize);
        for (l, durations) in data.labels.iter_mut().zip(&mut self.durations) {
            exact(&mut l.stats, durations, None, errors_known);
            all.extend_from_slice(durations);
        }
        let window = self.min_start_ns.zip(self.max_end_ns);
        exact(&mut data.overall, &mut all, window, errors_known);
        let ms = |ns: Option<i64>| ns.map(|t| t.div_euclid(1_000_000));
        let mut reported = json!({
            "tool": "k6",
            "input": kind,
            "points": self.points,
            "requests_by_status": self.by_status,
            "first_request_time_ms": ms(self.first_request_ns),
            "last_request_time_ms": ms(self.last_request_ns),
            "first_request_utc": self.first_request_ns.and_then(utc),
            "last_request_utc": self.last_request_ns.and_then(utc),
            "vus_max": self.users.max(),
            "time_rule": "k6 stamps each request with its end; start = end − http_req_duration",
            "errors": if self.duration_only > 0 && errors_known {
                Value::from("http_req_duration points only: expected_response = false (k6's flag), else status 0 or >= 400")
            } else if errors_known {
                Value::from("http_req_failed = 1")
            } else {
                Value::from("unknown: the file has no http_req_failed points (k6 < 0.31 or responseCallback null)")
            },
            "requests_without_http_req_failed": self.without_failed,
            "requests_from_http_req_duration_only": self.duration_only,
            "failures_from_status_tag": self.failure_from_status,
        });
        if let (Value::Object(r), Value::Object(e)) = (&mut reported, extra) {
            r.extend(e);
        }
        data.reported = reported;
        (data, samples)
    }
}

/// Replaces the duration figures of `s` by exact ones from `durations_ns` (sorted here);
/// `window_ns` = (min start, max end) for the exact throughput of the run.
fn exact(
    s: &mut Stats,
    durations_ns: &mut [u64],
    window_ns: Option<(i64, i64)>,
    errors_known: bool,
) {
    if !errors_known {
        s.error_pct = None;
    }
    if durations_ns.is_empty() {
        return;
    }
    durations_ns.sort_unstable();
    let n = durations_ns.len() as u64;
    let ms = |ns: u64| ns as f64 / 1e6;
    let at = |p: f64| ms(durations_ns[nearest_rank(n, p) as usize - 1]);
    let sum: u128 = durations_ns.iter().map(|&d| u128::from(d)).sum();
    s.min_ms = Some(ms(durations_ns[0]));
    s.max_ms = Some(ms(durations_ns[durations_ns.len() - 1]));
    s.mean_ms = Some(sum as f64 / n as f64 / 1e6);
    s.p50_ms = Some(at(50.0));
    s.p90_ms = Some(at(90.0));
    s.p95_ms = Some(at(95.0));
    s.p99_ms = Some(at(99.0));
    if let Some((start, end)) = window_ns {
        let window = end - start;
        s.first_start_ms = Some(start.div_euclid(1_000_000));
        s.last_end_ms = Some(end.div_euclid(1_000_000));
        s.window_ms = Some(window.div_euclid(1_000_000));
        s.throughput_rps = (window > 0).then(|| n as f64 * 1e9 / window as f64);
    }
}

/// Unix ns → `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` (always 9 fraction digits).
fn utc(ns: i64) -> Option<String> {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns)).ok()?;
    let f = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z"
    );
    t.format(&f).ok()
}

/// Parses an RFC 3339 time with 0–9 fraction digits and `Z` or `±HH:MM` → unix ns.
pub fn parse_rfc3339_ns(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let digits = (i - start).min(9);
        if digits == 0 {
            return None;
        }
        nanos *= 10i64.pow(9 - digits as u32);
    }
    let offset_s = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let v = num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60;
            if *sign == b'-' { -v } else { v }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_with_any_fraction_and_offset() {
        let z = parse_rfc3339_ns("2023-11-14T22:13:20.2985669Z").unwrap();
        assert_eq!(z, 1_700_000_000_298_566_900);
        assert_eq!(
            parse_rfc3339_ns("2023-11-15T06:13:20.2985669+08:00"),
            Some(z)
        );
        assert_eq!(
            parse_rfc3339_ns("2023-11-14T14:13:21.9-08:00"),
            Some(1_700_000_001_900_000_000)
        );
        assert_eq!(
            parse_rfc3339_ns("2023-11-14T22:13:21+00:00"),
            Some(1_700_000_001_000_000_000)
        );
        assert_eq!(
            parse_rfc3339_ns("2026-11-30T00:51:08.243824732Z"),
            Some(1_795_999_868_243_824_732)
        );
        assert_eq!(parse_rfc3339_ns("2023-11-14 22:13:21"), None);
        assert_eq!(parse_rfc3339_ns("2023-11-14T22:13:21.Z"), None);
    }
}
