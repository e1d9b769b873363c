//! InfluxDB line protocol from load tools that stream while they run.
//!
//! Two senders are understood (anything else is counted as ignored):
//! - **k6** `--out influxdb`: one point per request and metric, measurement = metric name,
//!   field `value`. A request is its `http_req_duration` point (ms); it failed when its
//!   `expected_response` tag is `false` (k6's `http_req_failed` rule); label = `name` tag,
//!   else `url`. k6 stamps request metrics when the request ends, so start = time −
//!   duration. Active users come from the `vus` gauge. The run is keyed by the `testid`
//!   tag, else the database/bucket written to.
//! - **JMeter Backend Listener** (InfluxDB client; docs/formats.md, "Line protocol"; written from
//!   `InfluxdbBackendListenerClient`): measurement `jmeter`, tags `application`,
//!   `transaction`, `statut` (`all`/`ok`/`ko`); fields `count`, `avg`, `min`, `max`, `hit`,
//!   `sb`, `rb`, `pct90.0`…, per send interval (5 s by default); error lines with
//!   `responseCode`/`responseMessage` tags; `transaction=internal` thread counts;
//!   `events` start/end annotations. The run is keyed by `application`.
//!
//! Line syntax comes from the `influxdb-line-protocol` crate; this module only maps
//! points to what they mean. Timestamps are converted with the request's `precision`.

use influxdb_line_protocol::{FieldValue, ParsedLine, parse_lines};

use crate::domain::runs::SampleLimits;

/// Timestamp precision of a write (`precision=` query parameter; nanoseconds by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Ns,
    Us,
    Ms,
    S,
}

impl Precision {
    /// Reads InfluxDB 1.x (`n`, `u`, `ms`, `s`) and 2.x (`ns`, `us`, `ms`, `s`) names.
    pub fn from_name(name: Option<&str>) -> Option<Precision> {
        match name.unwrap_or("ns") {
            "" | "n" | "ns" => Some(Precision::Ns),
            "u" | "us" | "µ" => Some(Precision::Us),
            "ms" => Some(Precision::Ms),
            "s" => Some(Precision::S),
            _ => None,
        }
    }

    fn to_ms(self, t: i64) -> i64 {
        match self {
            Precision::Ns => t.div_euclid(1_000_000),
            Precision::Us => t.div_euclid(1_000),
            Precision::Ms => t,
            Precision::S => t.saturating_mul(1000),
        }
    }
}

/// Which tool a live run streams from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sender {
    K6,
    JMeter,
    /// k6's OpenTelemetry output, pushed over OTLP ([`crate::sources::otlp`]): per-interval
    /// aggregates, as JMeter's.
    K6Otlp,
}

impl Sender {
    pub fn tool(self) -> &'static str {
        match self {
            Sender::K6 | Sender::K6Otlp => "k6",
            Sender::JMeter => "jmeter",
        }
    }

    /// How the stream arrives: the run's `source`.
    pub fn protocol(self) -> &'static str {
        match self {
            Sender::K6Otlp => "OTLP",
            Sender::K6 | Sender::JMeter => "InfluxDB line protocol",
        }
    }

    /// The stream's part of a live run's store key (a k6 run over OTLP never joins one
    /// streamed as line protocol).
    pub fn stream(self) -> &'static str {
        match self {
            Sender::K6Otlp => "k6-otlp",
            s => s.tool(),
        }
    }
}

/// What one line means for a live run.
#[derive(Debug, Clone, PartialEq)]
pub enum LivePoint<'a> {
    /// One request (k6): a sample.
    Request {
        label: &'a str,
        start_ms: i64,
        elapsed_ms: u64,
        success: bool,
        status: &'a str,
    },
    /// Active users at a time (k6 `vus`, JMeter `meanAT` thread stats).
    Users { t_ms: i64, users: u32 },
    /// A JMeter label's aggregate over one send interval ending at `t_ms` (`statut=all`).
    Interval {
        label: &'a str,
        t_ms: i64,
        count: u64,
        mean_ms: f64,
        min_ms: f64,
        max_ms: f64,
        bytes_received: u64,
        bytes_sent: u64,
    },
    /// Failed samples of a JMeter label in the interval ending at `t_ms` (`statut=ko`).
    IntervalErrors {
        label: &'a str,
        t_ms: i64,
        count: u64,
    },
    /// A request name's figures over `[start_ms, end_ms)`, failures included (k6's
    /// OpenTelemetry output, whose points say when their interval began).
    Span {
        label: &'a str,
        start_ms: i64,
        end_ms: i64,
        count: u64,
        failed: u64,
        mean_ms: f64,
        min_ms: f64,
        max_ms: f64,
    },
    /// Active users over `[start_ms, end_ms]` (a gauge read at `end_ms`).
    UsersOver {
        start_ms: i64,
        end_ms: i64,
        users: u32,
    },
    /// A JMeter error line: response code and message of failed samples.
    ErrorKind {
        label: &'a str,
        t_ms: i64,
        code: &'a str,
        message: &'a str,
        count: u64,
    },
    /// The test ended (JMeter `events` "… ended").
    Ended { t_ms: i64 },
    /// Understood but not needed (other k6 metrics, `statut=ok` lines, cumulated totals).
    Ignored,
}

/// One line, classified.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified<'a> {
    /// 1-based line of the write body the point came from.
    pub line: u64,
    pub sender: Sender,
    /// The run the point belongs to (scenario name).
    pub run_key: String,
    pub point: LivePoint<'a>,
}

/// What a write body held besides its points: bad lines (1-based number, reason) and
/// lines understood but not needed.
#[derive(Debug, Default)]
pub struct WriteSummary {
    pub accepted: u64,
    pub ignored: u64,
    pub rejected: Vec<(u64, String)>,
}

fn tag<'l>(line: &'l ParsedLine<'_>, name: &str) -> Option<&'l str> {
    line.series
        .tag_set
        .as_ref()?
        .iter()
        .find(|(k, _)| k.as_str() == name)
        .map(|(_, v)| v.as_str())
}

fn field(line: &ParsedLine<'_>, name: &str) -> Option<f64> {
    line.field_set
        .iter()
        .find(|(k, _)| k.as_str() == name)
        .and_then(|(_, v)| match v {
            FieldValue::F64(f) => Some(*f),
            FieldValue::I64(i) => Some(*i as f64),
            FieldValue::U64(u) => Some(*u as f64),
            FieldValue::Boolean(b) => Some(f64::from(u8::from(*b))),
            FieldValue::String(_) => None,
        })
}

fn string_field<'l>(line: &'l ParsedLine<'_>, name: &str) -> Option<&'l str> {
    line.field_set
        .iter()
        .find(|(k, _)| k.as_str() == name)
        .and_then(|(_, v)| match v {
            FieldValue::String(s) => Some(s.as_str()),
            _ => None,
        })
}

fn count(v: Option<f64>) -> u64 {
    v.filter(|v| v.is_finite() && *v > 0.0)
        .map_or(0, |v| v.round() as u64)
}

/// Classifies every line of a write body and hands each useful point to `on_point` (its
/// strings borrow from the line, so nothing is copied). `database` is the v1 `db` / v2
/// `bucket` the sender wrote to (a k6 run's key when it has no `testid` tag); `now_ms`
/// stamps lines without a timestamp. A point whose time (or k6 request start and
/// duration) is outside `limits` is a rejected line, like a malformed one; so is a line
/// longer than `max_line_bytes` (not parsed at all).
pub fn parse_write(
    body: &str,
    precision: Precision,
    database: &str,
    now_ms: i64,
    limits: &SampleLimits,
    max_line_bytes: usize,
    mut on_point: impl FnMut(Classified<'_>),
) -> WriteSummary {
    let mut out = WriteSummary::default();
    // Over-long lines are blanked (kept as empty lines, so numbers stay right) and rejected.
    let kept;
    let body = if body.split('\n').any(|l| l.len() > max_line_bytes) {
        let mut text = String::with_capacity(body.len());
        for (i, l) in body.split('\n').enumerate() {
            if i > 0 {
                text.push('\n');
            }
            if l.len() > max_line_bytes {
                out.rejected.push((
                    i as u64 + 1,
                    format!(
                        "line longer than the limit of {max_line_bytes} bytes (limits.max_line_bytes in harrier.toml): skipped unread"
                    ),
                ));
            } else {
                text.push_str(l);
            }
        }
        kept = text;
        kept.as_str()
    } else {
        body
    };
    // Line numbers: the crate skips blank and comment lines, so count them ourselves.
    let mut line_no = 0u64;
    let mut lines = body.split('\n');
    for parsed in parse_lines(body) {
        loop {
            line_no += 1;
            match lines.next() {
                Some(l) if l.trim().is_empty() || l.trim_start().starts_with('#') => continue,
                _ => break,
            }
        }
        let line = match parsed {
            Ok(line) => line,
            Err(e) => {
                out.rejected
                    .push((line_no, format!("not InfluxDB line protocol: {e}")));
                continue;
            }
        };
        let t_ms = line.timestamp.map_or(now_ms, |t| precision.to_ms(t));
        if !limits.start_ok(t_ms) {
            out.rejected.push((
                line_no,
                format!(
                    "timestamp {t_ms} ms is outside the accepted window [{}, {}) ms",
                    limits.min_start_ms, limits.max_start_ms
                ),
            ));
            continue;
        }
        match classify(&line, t_ms, database) {
            Some(mut c) if c.point != LivePoint::Ignored => {
                if let LivePoint::Request {
                    start_ms,
                    elapsed_ms,
                    ..
                } = c.point
                    && let Err(why) = limits.check(start_ms, elapsed_ms)
                {
                    out.rejected.push((line_no, why));
                    continue;
                }
                c.line = line_no;
                out.accepted += 1;
                on_point(c);
            }
            _ => out.ignored += 1,
        }
    }
    out.rejected.sort_by_key(|r| r.0);
    out
}

fn classify<'l>(line: &'l ParsedLine<'_>, t_ms: i64, database: &str) -> Option<Classified<'l>> {
    let measurement = line.series.measurement.as_str();
    if measurement == "jmeter" || (measurement == "events" && tag(line, "application").is_some()) {
        let application = tag(line, "application").unwrap_or("jmeter").to_string();
        let jm = |point| {
            Some(Classified {
                line: 0,
                sender: Sender::JMeter,
                run_key: application.clone(),
                point,
            })
        };
        if measurement == "events" {
            let text = string_field(line, "text").unwrap_or_default();
            return jm(if text.ends_with("ended") {
                LivePoint::Ended { t_ms }
            } else {
                LivePoint::Ignored
            });
        }
        let label = tag(line, "transaction")?;
        if label == "internal" {
            let users = field(line, "meanAT")
                .or_else(|| field(line, "maxAT"))
                .unwrap_or(0.0);
            return jm(LivePoint::Users {
                t_ms,
                users: users.round().max(0.0) as u32,
            });
        }
        if let (Some(code), Some(message)) = (
            tag(line, "responseCode"),
            tag(line, "responseMessage").or(Some("")),
        ) {
            return jm(LivePoint::ErrorKind {
                label,
                t_ms,
                code,
                message,
                count: count(field(line, "count")),
            });
        }
        if label == "all" {
            return jm(LivePoint::Ignored); // cumulated over labels: recomputed from them
        }
        return jm(match tag(line, "statut") {
            Some("all") => LivePoint::Interval {
                label,
                t_ms,
                count: count(field(line, "count")),
                mean_ms: field(line, "avg").unwrap_or(f64::NAN),
                min_ms: field(line, "min").unwrap_or(f64::NAN),
                max_ms: field(line, "max").unwrap_or(f64::NAN),
                bytes_received: count(field(line, "rb")),
                bytes_sent: count(field(line, "sb")),
            },
            Some("ko") => LivePoint::IntervalErrors {
                label,
                t_ms,
                count: count(field(line, "count")),
            },
            _ => LivePoint::Ignored,
        });
    }
    // k6: every metric is its own measurement with a `value` field.
    let value = field(line, "value")?;
    let run_key = tag(line, "testid").map_or_else(|| database.to_string(), str::to_string);
    let k6 = |point| {
        Some(Classified {
            line: 0,
            sender: Sender::K6,
            run_key: run_key.clone(),
            point,
        })
    };
    match measurement {
        "http_req_duration" => {
            let label = tag(line, "name")
                .or_else(|| tag(line, "url"))
                .unwrap_or("(unnamed)");
            let elapsed_ms = if value.is_finite() && value > 0.0 {
                value.round() as u64
            } else {
                0
            };
            let success = tag(line, "expected_response") != Some("false");
            k6(LivePoint::Request {
                label,
                start_ms: t_ms.saturating_sub(i64::try_from(elapsed_ms).unwrap_or(i64::MAX)),
                elapsed_ms,
                success,
                status: tag(line, "status").unwrap_or(""),
            })
        }
        "vus" => k6(LivePoint::Users {
            t_ms,
            users: value.round().max(0.0) as u32,
        }),
        _ if measurement.starts_with("http_")
            || matches!(
                measurement,
                "iterations"
                    | "iteration_duration"
                    | "data_sent"
                    | "data_received"
                    | "checks"
                    | "vus_max"
                    | "group_duration"
            ) =>
        {
            k6(LivePoint::Ignored)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k6_request_points_become_samples() {
        let body = "http_req_duration,expected_response=true,method=GET,name=GET\\ /slow,status=200,url=http://x/slow value=80.4 1700000001000000000\n\
                    http_reqs,name=GET\\ /slow value=1 1700000001000000000\n\
                    http_req_duration,expected_response=false,name=GET\\ /flaky,status=500 value=3 1700000001500000000\n\
                    vus value=12 1700000001000000000\n";
        let (w, points) = collect(body, Precision::Ns, "k6");
        assert!(w.rejected.is_empty(), "{:?}", w.rejected);
        assert_eq!(w.ignored, 1);
        assert_eq!(points.len(), 3);
        assert_eq!(points[0].0, "k6");
        assert_eq!(
            points[0].1,
            "Request GET /slow start=1700000000920 elapsed=80 ok=true status=200"
        );
        assert_eq!(
            points[1].1,
            "Request GET /flaky start=1700000001497 elapsed=3 ok=false status=500"
        );
        assert_eq!(points[2].1, "Users t=1700000001000 users=12");
    }

    #[test]
    fn jmeter_backend_listener_lines() {
        let body = "jmeter,application=shop,transaction=GET\\ /slow,statut=all count=12,avg=81.5,min=22.0,max=160.0,hit=12,sb=1200,rb=4560,pct99.0=158.0 1700000005000000000\n\
                    jmeter,application=shop,transaction=GET\\ /slow,statut=ok count=12,avg=81.5 1700000005000000000\n\
                    jmeter,application=shop,transaction=GET\\ /flaky,statut=ko count=3,avg=2.0 1700000005000000000\n\
                    jmeter,application=shop,transaction=GET\\ /flaky,responseCode=500,responseMessage=Internal\\ Server\\ Error count=3 1700000005000000000\n\
                    jmeter,application=shop,transaction=all,statut=all count=40 1700000005000000000\n\
                    jmeter,application=shop,transaction=internal minAT=3,maxAT=4,meanAT=3.6,startedT=4,endedT=0 1700000005000000000\n\
                    events,application=shop,title=ApacheJMeter text=\"Test name ended\" 1700000009000000000\n\
                    not a line\n";
        let (w, points) = collect(body, Precision::Ns, "jmeter");
        assert_eq!(w.rejected.len(), 1);
        assert_eq!(w.rejected[0].0, 8, "bad line reported with its number");
        let kinds: Vec<&str> = points.iter().map(|p| p.1.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "Interval GET /slow t=1700000005000 count=12 mean=81.5 min=22 max=160 rb=4560 sb=1200",
                "IntervalErrors GET /flaky t=1700000005000 count=3",
                "ErrorKind GET /flaky 500 Internal Server Error count=3",
                "Users t=1700000005000 users=4",
                "Ended t=1700000009000",
            ]
        );
        assert!(points.iter().all(|p| p.0 == "shop"));
        assert_eq!(w.ignored, 2, "statut=ok and the cumulated 'all' line");
    }

    #[test]
    fn absurd_times_and_durations_are_rejected_lines() {
        let body = "http_req_duration,name=a,testid=t value=12 1700000000000000000\n\
                    http_req_duration,name=a,testid=t value=12 9223372036854775807\n\
                    http_req_duration,name=a,testid=t value=1e300 1700000000000000000\n";
        let (w, points) = collect(body, Precision::Ns, "db");
        assert_eq!(points.len(), 1, "{points:?}");
        let lines: Vec<u64> = w.rejected.iter().map(|r| r.0).collect();
        assert_eq!(lines, [2, 3], "{:?}", w.rejected);
        assert!(w.rejected[0].1.contains("outside the accepted window"));
        assert!(w.rejected[1].1.contains("elapsed"));
        let (w, points) = collect(
            "jmeter,application=x,transaction=t,statut=all count=1 9223372036854775807\n",
            Precision::S,
            "db",
        );
        assert!(points.is_empty());
        assert_eq!(w.rejected.len(), 1);
    }

    #[test]
    fn a_line_longer_than_the_limit_is_rejected_unread_and_one_at_it_is_read() {
        let max = crate::domain::runs::limits::DEFAULT_MAX_LINE_BYTES;
        let line = |len: usize| {
            let head = "http_req_duration,testid=t,name=";
            let tail = " value=12 1700000000000000000";
            format!("{head}{}{tail}", "a".repeat(len - head.len() - tail.len()))
        };
        let body = format!("{}\n{}\n{}\n", line(max), line(max + 1), line(100));
        let (w, points) = collect(&body, Precision::Ns, "db");
        assert_eq!(points.len(), 2, "the lines at the limit and under it");
        assert_eq!(w.rejected.len(), 1, "{:?}", w.rejected);
        assert_eq!(w.rejected[0].0, 2);
        assert!(
            w.rejected[0].1.contains("limits.max_line_bytes"),
            "{}",
            w.rejected[0].1
        );
    }

    /// (run key, a text rendering of the point) for each point.
    fn collect(
        body: &str,
        precision: Precision,
        db: &str,
    ) -> (WriteSummary, Vec<(String, String)>) {
        let mut points = Vec::new();
        let w = parse_write(
            body,
            precision,
            db,
            1_700_000_000_000,
            &SampleLimits::default(),
            crate::domain::runs::limits::DEFAULT_MAX_LINE_BYTES,
            |c| {
                let text = match c.point {
                    LivePoint::Request {
                        label,
                        start_ms,
                        elapsed_ms,
                        success,
                        status,
                    } => {
                        format!(
                            "Request {label} start={start_ms} elapsed={elapsed_ms} ok={success} status={status}"
                        )
                    }
                    LivePoint::Users { t_ms, users } => format!("Users t={t_ms} users={users}"),
                    LivePoint::Interval {
                        label,
                        t_ms,
                        count,
                        mean_ms,
                        min_ms,
                        max_ms,
                        bytes_received,
                        bytes_sent,
                    } => format!(
                        "Interval {label} t={t_ms} count={count} mean={mean_ms} min={min_ms} max={max_ms} rb={bytes_received} sb={bytes_sent}"
                    ),
                    LivePoint::IntervalErrors { label, t_ms, count } => {
                        format!("IntervalErrors {label} t={t_ms} count={count}")
                    }
                    LivePoint::Span {
                        label,
                        start_ms,
                        end_ms,
                        count,
                        failed,
                        ..
                    } => format!("Span {label} {start_ms}..{end_ms} count={count} failed={failed}"),
                    LivePoint::UsersOver {
                        start_ms,
                        end_ms,
                        users,
                    } => format!("UsersOver {start_ms}..{end_ms} users={users}"),
                    LivePoint::ErrorKind {
                        label,
                        code,
                        message,
                        count,
                        ..
                    } => format!("ErrorKind {label} {code} {message} count={count}"),
                    LivePoint::Ended { t_ms } => format!("Ended t={t_ms}"),
                    LivePoint::Ignored => "Ignored".into(),
                };
                points.push((c.run_key, text));
            },
        );
        (w, points)
    }

    #[test]
    fn precision_converts_timestamps() {
        let (_, points) = collect("vus value=1 1700000000\n", Precision::S, "k6");
        assert_eq!(points[0].1, "Users t=1700000000000 users=1");
        assert_eq!(Precision::from_name(Some("u")), Some(Precision::Us));
        assert_eq!(Precision::from_name(Some("h")), None);
    }
}
