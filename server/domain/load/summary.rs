//! A load run's figures: workers' ticks merged into per-second lines, the stored run, the
//! final summary and the generator-limited verdict.
//!
//! Owns [`LoadAccumulator`] (merges [`Tick`]s, feeds the run builder), [`SecondLine`] (one
//! second as the terminal shows it), [`LoadSummary`] (the end of the run) and the rules of
//! [`generator_limits`]. Must not read the clock, print or store: the service calls it and
//! the CLI prints what it returns.
//!
//! The stored run is built by [`RunBuilder`] like every imported run, from samples whose
//! start is the *intended* start and whose elapsed time is the corrected latency (intended
//! start → response, whole ms): its statistics are exact and follow docs/numbers.md to the
//! letter (nearest-rank percentiles, JMeter's throughput, buckets by start second). The
//! samples arrive as groups (see [`Group`]): a group of n equal samples is pushed as its
//! earliest one (carrying the group's bytes), its latest one and n − 2 more at the earliest
//! start, which gives the builder the same first start, last end, buckets and error groups
//! as the samples one by one. Service time and dispatch delay, which a run has no column
//! for, come from the µs HDR histograms (≤ 0.1 % relative error) and are stored in the run's
//! `reported` figures.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde_json::json;

use super::record::{ErrorCounts, Group, GroupKey, Outcome, Tick};
use crate::domain::runs::hdr::histogram_percentile;
use crate::domain::runs::{RunBuilder, RunChanges, RunData, Sample, Stats};

/// Most points of a finished run's `reported.seconds`: a longer run keeps one point per
/// several seconds (see [`SecondsSeries::downsampled`]).
pub const MAX_SERIES_POINTS: usize = 3_600;
/// Points of `reported.seconds` while a run streams into a server (its last seconds).
pub const LIVE_SERIES_POINTS: usize = 600;

/// The generator's own figures over time, stored with the run as `reported.seconds`:
/// columns of equal length, one point per `step_s` seconds (1 unless the run was longer
/// than [`MAX_SERIES_POINTS`] s). What the run's buckets have no column for: the offered
/// rate, the service time (uncorrected latency), the dispatch delay and requests in flight.
///
/// Rates are requests per second (by the second requests were due or ended in, see
/// [`Tick`]); times are ms from the seconds' µs HDR histograms (≤ 0.1 %); a point of
/// several seconds holds their mean rates and the highest of their percentiles and
/// in-flight counts. `null` where a second had no completed request.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SecondsSeries {
    /// Seconds each point covers.
    pub step_s: u32,
    /// Seconds since the run's start at which each point begins.
    pub second: Vec<u32>,
    /// Arrivals due (the offered rate), req/s.
    pub offered: Vec<f64>,
    /// Requests that ended (the achieved rate), req/s.
    pub achieved: Vec<f64>,
    /// Requests that ended in error, per s.
    pub errors: Vec<f64>,
    /// Latency from the intended start (corrected for coordinated omission), ms.
    pub latency_p50_ms: Vec<Option<f64>>,
    pub latency_p99_ms: Vec<Option<f64>>,
    /// Service time from the actual send (uncorrected), ms.
    pub service_p50_ms: Vec<Option<f64>>,
    pub service_p99_ms: Vec<Option<f64>>,
    /// Dispatch delay (intended → actual send), ms.
    pub dispatch_p99_ms: Vec<Option<f64>>,
    /// Most requests in flight at once.
    pub in_flight: Vec<u32>,
    /// Most connections open at once.
    pub connections: Vec<u32>,
}

impl SecondsSeries {
    fn push(&mut self, l: &SecondLine) {
        let ms = |p: &Option<Percentiles>, f: fn(&Percentiles) -> u64| {
            p.as_ref().map(|p| round3(f(p) as f64 / 1000.0))
        };
        self.step_s = 1;
        self.second.push(l.second);
        self.offered.push(l.offered as f64);
        self.achieved.push(l.completed as f64);
        self.errors.push(l.errors.total() as f64);
        self.latency_p50_ms.push(ms(&l.latency, |p| p.p50_us));
        self.latency_p99_ms.push(ms(&l.latency, |p| p.p99_us));
        self.service_p50_ms.push(ms(&l.service, |p| p.p50_us));
        self.service_p99_ms.push(ms(&l.service, |p| p.p99_us));
        self.dispatch_p99_ms.push(ms(&l.dispatch, |p| p.p99_us));
        self.in_flight.push(l.in_flight_max);
        self.connections.push(l.connections_max);
    }

    /// Points held.
    pub fn len(&self) -> usize {
        self.second.len()
    }

    /// Whether no second has been recorded.
    pub fn is_empty(&self) -> bool {
        self.second.is_empty()
    }

    /// The last `n` points.
    pub fn tail(&self, n: usize) -> SecondsSeries {
        let from = self.len().saturating_sub(n);
        SecondsSeries {
            step_s: self.step_s,
            second: self.second[from..].to_vec(),
            offered: self.offered[from..].to_vec(),
            achieved: self.achieved[from..].to_vec(),
            errors: self.errors[from..].to_vec(),
            latency_p50_ms: self.latency_p50_ms[from..].to_vec(),
            latency_p99_ms: self.latency_p99_ms[from..].to_vec(),
            service_p50_ms: self.service_p50_ms[from..].to_vec(),
            service_p99_ms: self.service_p99_ms[from..].to_vec(),
            dispatch_p99_ms: self.dispatch_p99_ms[from..].to_vec(),
            in_flight: self.in_flight[from..].to_vec(),
            connections: self.connections[from..].to_vec(),
        }
    }

    /// At most `max` points: runs of `ceil(len / max)` consecutive seconds merged into one
    /// (mean rates, highest percentiles and counts).
    pub fn downsampled(&self, max: usize) -> SecondsSeries {
        let k = self.len().div_ceil(max.max(1)).max(1);
        if k == 1 {
            return self.clone();
        }
        fn mean(v: &[f64]) -> f64 {
            round3(v.iter().sum::<f64>() / v.len() as f64)
        }
        fn worst(v: &[Option<f64>]) -> Option<f64> {
            v.iter().flatten().copied().reduce(f64::max)
        }
        fn most(v: &[u32]) -> u32 {
            v.iter().copied().max().unwrap_or(0)
        }
        SecondsSeries {
            step_s: self.step_s.max(1) * k as u32,
            second: self.second.chunks(k).map(|c| c[0]).collect(),
            offered: self.offered.chunks(k).map(mean).collect(),
            achieved: self.achieved.chunks(k).map(mean).collect(),
            errors: self.errors.chunks(k).map(mean).collect(),
            latency_p50_ms: self.latency_p50_ms.chunks(k).map(worst).collect(),
            latency_p99_ms: self.latency_p99_ms.chunks(k).map(worst).collect(),
            service_p50_ms: self.service_p50_ms.chunks(k).map(worst).collect(),
            service_p99_ms: self.service_p99_ms.chunks(k).map(worst).collect(),
            dispatch_p99_ms: self.dispatch_p99_ms.chunks(k).map(worst).collect(),
            in_flight: self.in_flight.chunks(k).map(most).collect(),
            connections: self.connections.chunks(k).map(most).collect(),
        }
    }
}

/// The least dispatch delay p99 that makes a run generator-limited, µs (without
/// `--dispatch-limit`, the limit is [`lateness_limit_us`], never below this).
///
/// The engine waits on tokio's timer, which fires on whole-millisecond ticks (a request is
/// picked up to 1 ms after its intended time on an idle machine); 2 ms leaves 1 ms for the
/// generator's own work before its lateness counts against it.
pub const DEFAULT_DISPATCH_LIMIT_US: u64 = 2_000;

/// The share of the service time the dispatch delay p99 may reach (see
/// [`lateness_limit_us`]).
pub const LATENESS_SHARE: f64 = 0.5;

/// Dispatch delay p99 above which a run (or a search step) is generator-limited when the
/// user gave no `--dispatch-limit`, µs: [`LATENESS_SHARE`] of the service time p50 it is
/// measured against, and at least [`DEFAULT_DISPATCH_LIMIT_US`].
///
/// Lateness is judged against the service because that is where it does harm: the dispatch
/// delay is part of every latency reported, and a late generator sends what it owes in a
/// burst. A 3 ms scheduling hiccup (another process holding the core for one time slice)
/// is 6 % of a 50 ms response — well inside the capacity rule's margin of twice the probe's
/// p95 — but ten times a 0.3 ms response. Half the service time keeps the generator's part
/// of any latency below a third of it, and a burst of what fell due meanwhile below half
/// the requests the service already holds (Little's law). The floor is the timer's own
/// resolution plus 1 ms for the generator's work.
pub fn lateness_limit_us(service_p50_us: u64) -> u64 {
    DEFAULT_DISPATCH_LIMIT_US.max((service_p50_us as f64 * LATENESS_SHARE) as u64)
}

/// Percentiles of one time over a scope, µs (nearest rank on the HDR histogram: ≤ 0.1 %).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Percentiles {
    /// `None` when `h` is empty.
    pub fn of(h: &Histogram<u64>) -> Option<Percentiles> {
        Some(Percentiles {
            count: h.len(),
            p50_us: histogram_percentile(h, 50.0)?,
            p90_us: histogram_percentile(h, 90.0)?,
            p99_us: histogram_percentile(h, 99.0)?,
            max_us: h.max(),
        })
    }

    fn ms_json(&self) -> serde_json::Value {
        json!({
            "p50": round3(self.p50_us as f64 / 1000.0),
            "p90": round3(self.p90_us as f64 / 1000.0),
            "p99": round3(self.p99_us as f64 / 1000.0),
            "max": round3(self.max_us as f64 / 1000.0),
        })
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// A time in µs for people: "850 µs", "3.42 ms", "1.25 s".
pub fn us(v: u64) -> String {
    if v < 1000 {
        format!("{v} µs")
    } else if v < 1_000_000 {
        format!("{:.2} ms", v as f64 / 1000.0)
    } else {
        format!("{:.2} s", v as f64 / 1e6)
    }
}

/// What one second of the run looked like, all workers merged (by the second requests
/// ended in; see [`Tick`]).
#[derive(Debug, Clone)]
pub struct SecondLine {
    /// Seconds since the run's start.
    pub second: u32,
    /// Arrivals due in this second (the offered rate, req/s).
    pub offered: u64,
    /// Requests taken up by a connection in this second.
    pub picked: u64,
    /// Requests that ended in this second (the achieved rate, req/s).
    pub completed: u64,
    pub errors: ErrorCounts,
    pub latency: Option<Percentiles>,
    pub service: Option<Percentiles>,
    pub dispatch: Option<Percentiles>,
    pub connections_max: u32,
    pub in_flight_max: u32,
    /// Requests in flight at the second's end.
    pub in_flight_end: u32,
    pub waited_for_connection: u64,
    /// The second's latency histogram (intended start → response), µs.
    pub latency_us: Histogram<u64>,
    /// The second's service-time histogram (actual send → response), µs.
    pub service_us: Histogram<u64>,
    /// The second's dispatch-delay histogram (intended start → actual send), µs.
    pub dispatch_us: Histogram<u64>,
}

impl SecondLine {
    /// One terminal line: "  12 s  offered 500/s  achieved 499/s  errors 0  latency p50 … ".
    pub fn render(&self) -> String {
        let p = |x: &Option<Percentiles>, f: fn(&Percentiles) -> u64| {
            x.as_ref().map_or_else(|| "–".to_string(), |x| us(f(x)))
        };
        let errors = if self.errors.total() == 0 {
            "0".to_string()
        } else {
            format!("{} ({})", self.errors.total(), self.errors.describe())
        };
        let waited = if self.waited_for_connection > 0 {
            format!("  waited for a connection {}", self.waited_for_connection)
        } else {
            String::new()
        };
        format!(
            "{:>4} s  offered {:>6}/s  achieved {:>6}/s  errors {errors}  latency p50 {} p99 {}  service p99 {}  dispatch p99 {}  connections {}  in flight {}{waited}",
            self.second + 1,
            self.offered,
            self.completed,
            p(&self.latency, |x| x.p50_us),
            p(&self.latency, |x| x.p99_us),
            p(&self.service, |x| x.p99_us),
            p(&self.dispatch, |x| x.p99_us),
            self.connections_max,
            self.in_flight_max,
        )
    }
}

/// What the run was asked to do, for the summary and the verdict (also the JSON a
/// generator sends when it opens a run on a server: `POST /api/v1/load-runs`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunPlan {
    /// The run's one label, e.g. `GET /orders`.
    pub label: String,
    /// The workload, for people (`Workload::describe`).
    pub schedule: String,
    /// Open model (arrival schedule) rather than closed (users waiting for responses).
    pub open: bool,
    /// Planned duration, s.
    pub duration_s: f64,
    pub max_connections: u32,
    /// Dispatch delay p99 above which the run is generator-limited, µs (`--dispatch-limit`;
    /// with `dispatch_limit_relative`, the least limit).
    pub dispatch_limit_us: u64,
    /// No `--dispatch-limit` was given: the limit is [`lateness_limit_us`] of the run's
    /// service time p50 (absent from older generators' plans: a fixed limit).
    #[serde(default)]
    pub dispatch_limit_relative: bool,
    /// Worker threads.
    pub workers: usize,
    /// The protocol the connections speak, for people: `HTTP/1.1`, `HTTP/2 over TLS
    /// (ALPN h2)`, `HTTP/2 (h2c, prior knowledge)`.
    pub protocol: String,
    /// Why a test connection made before the run could not be opened (a refused port, a
    /// TLS handshake error), or `None`: every connect error of such a run has this cause.
    pub connect_error: Option<String>,
}

/// The end of a run: what the terminal prints and the run's `reported` figures hold.
#[derive(Debug, Clone)]
pub struct LoadSummary {
    pub schedule: String,
    /// Open model; false: closed model (latency = service time, no correction).
    pub open: bool,
    pub duration_s: f64,
    pub scheduled: u64,
    /// Taken up by a connection (sent, or tried to).
    pub sent: u64,
    pub completed: u64,
    /// Scheduled but never sent because the run was stopped.
    pub unsent: u64,
    pub errors: ErrorCounts,
    /// scheduled / planned duration, req/s.
    pub offered_rps: f64,
    /// The stored run's exact figures (latency in whole ms; throughput as JMeter's).
    pub exact: Stats,
    pub latency: Option<Percentiles>,
    pub service: Option<Percentiles>,
    pub dispatch: Option<Percentiles>,
    pub connections_opened: u64,
    pub connections_max: u32,
    pub in_flight_max: u32,
    pub max_connections: u32,
    pub waited_for_connection: u64,
    /// Why the generator could not drive the run as planned; empty when it could.
    pub generator_limited: Vec<String>,
    /// The protocol the connections spoke (see [`RunPlan::protocol`]).
    pub protocol: String,
    /// See [`RunPlan::connect_error`].
    pub connect_error: Option<String>,
}

/// What to tell the user when no request to `authority` (`host:port`) got a response:
/// every one of `completed` requests ended in a connect or transport error. `cause` is the
/// test connection's error, if it failed. `None` when some request got a response (or none
/// ended).
pub fn unreachable(
    completed: u64,
    errors: &ErrorCounts,
    cause: Option<&str>,
    authority: &str,
) -> Option<String> {
    if completed == 0 || errors.connect + errors.transport < completed {
        return None;
    }
    let cause_lc = cause.unwrap_or("").to_ascii_lowercase();
    // A TLS server "refuses the session" too: the handshake first.
    Some(if cause_lc.contains("tls") {
        format!(
            "{authority}: {}: trust the server's CA with --ca-file, present a client certificate with --client-cert and --client-key if it asks for one, or use http:// if it does not speak TLS",
            cause.unwrap_or("the TLS handshake failed")
        )
    } else if cause_lc.contains("refused") {
        format!(
            "nothing listens at {authority} (connection refused): start the service there, or give the URL it listens at"
        )
    } else if errors.transport > 0 && errors.connect == 0 {
        format!(
            "{authority} accepted connections but closed or reset them before any response: check that the service speaks HTTP on that port (https:// for TLS), and its logs"
        )
    } else {
        format!(
            "no request to {authority} got a response ({}): check the URL's host and port and that the service is up",
            cause.unwrap_or("every connection failed")
        )
    })
}

impl LoadSummary {
    /// See [`unreachable`]: the sentence for a run where no request got a response.
    pub fn unreachable(&self, authority: &str) -> Option<String> {
        unreachable(
            self.completed,
            &self.errors,
            self.connect_error.as_deref(),
            authority,
        )
    }

    /// The summary for people, several lines, every time with its unit.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "harrier load: {}, {}\n",
            self.schedule,
            self.model()
        ));
        let error_pct = self
            .exact
            .error_pct
            .map_or("–".to_string(), |p| format!("{p:.2} %"));
        out.push_str(&format!(
            "requests      {} scheduled, {} sent, {} completed{}; errors {} ({error_pct}: {})\n",
            self.scheduled,
            self.sent,
            self.completed,
            if self.unsent > 0 {
                format!(", {} never sent (stopped)", self.unsent)
            } else {
                String::new()
            },
            self.errors.total(),
            self.errors.describe(),
        ));
        let offered = if self.open {
            format!("{:.1} req/s", self.offered_rps)
        } else {
            "– (closed model: the rate follows the responses)".to_string()
        };
        out.push_str(&format!(
            "rate          offered {offered}, achieved {} (count / (last end − first start))\n",
            self.exact
                .throughput_rps
                .map_or("–".to_string(), |r| format!("{r:.1} req/s")),
        ));
        out.push_str("                   p50         p90         p99         max\n");
        let rows: &[(&str, &Option<Percentiles>, &str)] = if self.open {
            &[
                (
                    "latency",
                    &self.latency,
                    "intended start → response, corrected for coordinated omission",
                ),
                (
                    "service time",
                    &self.service,
                    "actual send → response, as closed-loop tools time it",
                ),
                (
                    "dispatch",
                    &self.dispatch,
                    "intended start → actual send, the generator's lateness",
                ),
            ]
        } else {
            &[(
                "latency",
                &self.service,
                "actual send → response (closed model: nothing to correct)",
            )]
        };
        for (name, p, what) in rows {
            match p {
                Some(p) => out.push_str(&format!(
                    "{name:<13} {:>11} {:>11} {:>11} {:>11}   {what}\n",
                    us(p.p50_us),
                    us(p.p90_us),
                    us(p.p99_us),
                    us(p.max_us)
                )),
                None => out.push_str(&format!("{name:<13} {:>11}   {what}\n", "–")),
            }
        }
        out.push_str(&format!("protocol      {}\n", self.protocol));
        if let Some(e) = &self.connect_error {
            out.push_str(&format!("connect error {e}\n"));
        }
        if self.open {
            out.push_str(&format!(
                "connections   {} opened, at most {} open (--max-connections {}), {} requests waited for one; at most {} in flight\n",
                self.connections_opened,
                self.connections_max,
                self.max_connections,
                self.waited_for_connection,
                self.in_flight_max
            ));
        } else {
            out.push_str(&format!(
                "connections   {} (one per user)\n",
                self.connections_opened
            ));
            out.push_str("generator     closed model: no schedule to keep; the rate is what the users' responses allowed\n");
            return out;
        }
        if self.generator_limited.is_empty() {
            out.push_str("generator     kept its schedule\n");
        } else {
            out.push_str(&format!(
                "generator     GENERATOR-LIMITED: {} — these figures describe the generator, not the service\n",
                self.generator_limited.join("; ")
            ));
        }
        out
    }

    /// The model and how it times requests, for people.
    pub fn model(&self) -> &'static str {
        if self.open {
            "open model: requests start on the arrival schedule, latency from the intended start (corrected for coordinated omission)"
        } else {
            "closed model: each user waits for its response before the next request, latency from the actual send (no coordinated-omission correction)"
        }
    }

    /// The figures a run has no column for, as the run page's "Reported by harrier" rows.
    pub fn reported(&self) -> serde_json::Value {
        let pm = |p: &Option<Percentiles>| p.as_ref().map(Percentiles::ms_json);
        json!({
            "model": self.model(),
            "schedule": self.schedule,
            "offered req/s": self.open.then(|| round3(self.offered_rps)),
            "requests": {
                "scheduled": self.scheduled,
                "sent": self.sent,
                "completed": self.completed,
                "never sent (stopped)": self.unsent,
            },
            "errors by class": {
                "connect": self.errors.connect,
                "timeout": self.errors.timeout,
                "status": self.errors.status,
                "body": self.errors.body,
                "transport": self.errors.transport,
            },
            "latency ms (intended start → response, HDR)": pm(&self.latency),
            "service time ms (actual send → response, HDR)": pm(&self.service),
            "dispatch delay ms (intended start → actual send, HDR)": pm(&self.dispatch),
            "protocol": self.protocol,
            "connect error": self.connect_error,
            "connections": {
                "opened": self.connections_opened,
                "most open": self.connections_max,
                "max allowed": self.max_connections,
                "requests that waited for one": self.waited_for_connection,
                "most in flight": self.in_flight_max,
            },
            "generator": if self.generator_limited.is_empty() {
                "kept its schedule".to_string()
            } else {
                format!("generator-limited: {}", self.generator_limited.join("; "))
            },
        })
    }
}

/// Why a run could not be driven as planned (empty: it could). The rules:
/// - a request found every allowed connection busy and waited (connections exhausted: the
///   offered rate was not offered; the latency still counts the wait);
/// - otherwise, the dispatch delay p99 exceeds `dispatch_limit_us` (the generator started
///   requests late: starved of CPU, or too few worker threads); with `service_p50_us` (no
///   `--dispatch-limit` given), the limit is [`lateness_limit_us`] of it, at least
///   `dispatch_limit_us`.
///
/// Neither says anything about the service: a generator-limited run is never "the service
/// fell over".
pub fn generator_limits(
    scheduled: u64,
    waited_for_connection: u64,
    max_connections: u32,
    dispatch: Option<&Percentiles>,
    dispatch_limit_us: u64,
    service_p50_us: Option<u64>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    let limit = match service_p50_us {
        Some(s) => lateness_limit_us(s).max(dispatch_limit_us),
        None => dispatch_limit_us,
    };
    if waited_for_connection > 0 {
        reasons.push(format!(
            "connections exhausted: {waited_for_connection} of {scheduled} requests ({:.1} %) waited for one of the {max_connections} connections (raise --max-connections)",
            waited_for_connection as f64 * 100.0 / scheduled.max(1) as f64
        ));
    } else if let Some(d) = dispatch
        && d.p99_us > limit
    {
        let against = match service_p50_us {
            Some(s) if limit > dispatch_limit_us => {
                format!(" (half the service time p50 {})", us(s))
            }
            _ => String::new(),
        };
        reasons.push(format!(
            "dispatch delay p99 {} is above {}{against}: requests started late (the generator is short of CPU, or needs more --threads)",
            us(d.p99_us),
            us(limit)
        ));
    }
    reasons
}

/// Merges the workers' ticks: per-second lines as seconds complete, the run at the end.
pub struct LoadAccumulator {
    plan: RunPlan,
    builder: RunBuilder,
    /// Ticks of seconds not yet complete, merged.
    pending: BTreeMap<u32, Tick>,
    /// Per worker: the last second it handed over, and whether it has finished.
    last_second: Vec<Option<u32>>,
    finished: Vec<bool>,
    /// Next second to emit.
    next_second: u32,
    totals: Tick,
    statuses: Vec<String>,
    /// Samples pushed into the builder so far.
    pushed: u64,
    /// Every emitted second's generator figures.
    series: SecondsSeries,
}

impl LoadAccumulator {
    /// An accumulator for `plan.workers` workers.
    pub fn new(plan: RunPlan) -> LoadAccumulator {
        let workers = plan.workers.max(1);
        LoadAccumulator {
            plan,
            builder: RunBuilder::new(),
            pending: BTreeMap::new(),
            last_second: vec![None; workers],
            finished: vec![false; workers],
            next_second: 0,
            totals: Tick::new(0, 0),
            statuses: (0..=999).map(|s| s.to_string()).collect(),
            pushed: 0,
            series: SecondsSeries::default(),
        }
    }

    /// For a run stored while it runs: its buckets are taken as they change
    /// ([`take_live_changes`](Self::take_live_changes)) and the run ends with
    /// [`finish_live`](Self::finish_live). Call before the first tick.
    pub fn track_changes(&mut self) {
        self.builder.track_changes();
    }

    /// Samples taken so far (requests that ended).
    pub fn samples(&self) -> u64 {
        self.builder.samples()
    }

    /// The run as it stands, with the buckets changed since the previous call (see
    /// [`RunBuilder::take_changes`]); its `reported` holds the model, the schedule and the
    /// last [`LIVE_SERIES_POINTS`] seconds of `seconds`. Needs
    /// [`track_changes`](Self::track_changes).
    pub fn take_live_changes(&mut self) -> RunChanges {
        let mut changes = self.builder.take_changes();
        changes.data.reported = json!({
            "schedule": self.plan.schedule,
            "protocol": self.plan.protocol,
            "seconds": self.series.tail(LIVE_SERIES_POINTS),
        });
        changes
    }

    /// Ends a run stored while it ran: every second not yet emitted, the last changes
    /// (with the full `reported` figures, as [`finish`](Self::finish) gives them) and the
    /// summary. Storing every [`take_live_changes`](Self::take_live_changes) and then
    /// these changes leaves exactly the run [`finish`](Self::finish) would have given.
    pub fn finish_live(mut self) -> (Vec<SecondLine>, RunChanges, LoadSummary) {
        let lines = self.complete_seconds(true);
        let mut changes = self.builder.take_changes();
        let summary = self.summary(&changes.data.overall);
        changes.data.reported = self.reported(&summary);
        (lines, changes, summary)
    }

    /// Takes one worker's tick; returns the seconds that every worker has now handed over,
    /// in order.
    pub fn push(&mut self, tick: Tick) -> Vec<SecondLine> {
        let w = tick.worker.min(self.last_second.len() - 1);
        self.last_second[w] = Some(tick.second);
        self.finished[w] |= tick.last;
        for (key, group) in &tick.groups {
            self.push_group(key, group);
        }
        merge_into(&mut self.totals, &tick, false);
        match self.pending.get_mut(&tick.second) {
            Some(t) => merge_into(t, &tick, true),
            None => {
                let mut t = tick;
                t.groups = Vec::new();
                self.pending.insert(t.second, t);
            }
        }
        self.complete_seconds(false)
    }

    fn complete_seconds(&mut self, all: bool) -> Vec<SecondLine> {
        let mut out = Vec::new();
        while let Some((&second, _)) = self.pending.first_key_value() {
            let ready = all
                || self
                    .last_second
                    .iter()
                    .zip(&self.finished)
                    .all(|(last, done)| *done || last.is_some_and(|l| l >= second));
            if !ready {
                break;
            }
            let t = self.pending.remove(&second).expect("first key exists");
            self.next_second = second + 1;
            // The run's peak is the busiest second, all workers together.
            self.totals.connections_max = self.totals.connections_max.max(t.connections_max);
            self.totals.in_flight_max = self.totals.in_flight_max.max(t.in_flight_max);
            let line = line_of(&t);
            self.series.push(&line);
            out.push(line);
        }
        out
    }

    fn push_group(&mut self, key: &GroupKey, g: &Group) {
        let code = match key.status {
            0 => "",
            s => self.statuses.get(usize::from(s)).map_or("", String::as_str),
        };
        let mut sample = Sample {
            label: &self.plan.label,
            start_ms: g.min_start_ms,
            elapsed_ms: key.elapsed_ms,
            success: key.outcome == Outcome::Ok,
            response_code: code,
            message: key.outcome.message(),
            bytes_received: g.bytes_received,
            bytes_sent: g.bytes_sent,
            active_users: None,
            is_transaction: false,
        };
        // The builder's "line" of a generated sample is its number in the run (1-based).
        self.pushed += 1;
        self.builder.push(self.pushed, &sample);
        sample.bytes_received = 0;
        sample.bytes_sent = 0;
        if g.count >= 2 {
            sample.start_ms = g.max_start_ms;
            self.pushed += 1;
            self.builder.push(self.pushed, &sample);
            sample.start_ms = g.min_start_ms;
            for _ in 2..g.count {
                self.pushed += 1;
                self.builder.push(self.pushed, &sample);
            }
        }
    }

    /// Sets the run's duration (s) when it was not known in advance (a search ends when it
    /// has its answer): the summary's offered rate is scheduled / this duration.
    pub fn set_duration_s(&mut self, duration_s: f64) {
        self.plan.duration_s = duration_s;
    }

    /// Every second not yet emitted (workers that never handed theirs over included), then
    /// the stored run's data and the summary.
    pub fn finish(mut self) -> (Vec<SecondLine>, RunData, LoadSummary) {
        let lines = self.complete_seconds(true);
        let builder = std::mem::take(&mut self.builder);
        let mut data = builder.finish();
        let summary = self.summary(&data.overall);
        data.reported = self.reported(&summary);
        (lines, data, summary)
    }

    /// The summary's `reported` figures and the generator's series (`seconds`).
    fn reported(&self, summary: &LoadSummary) -> serde_json::Value {
        let mut reported = summary.reported();
        reported["seconds"] =
            serde_json::to_value(self.series.downsampled(MAX_SERIES_POINTS)).unwrap_or_default();
        reported
    }

    fn summary(&self, exact: &Stats) -> LoadSummary {
        let t = &self.totals;
        let latency = Percentiles::of(&t.latency_us);
        let service = Percentiles::of(&t.service_us);
        let dispatch = Percentiles::of(&t.dispatch_us);
        LoadSummary {
            schedule: self.plan.schedule.clone(),
            open: self.plan.open,
            duration_s: self.plan.duration_s,
            scheduled: t.scheduled,
            sent: t.picked,
            completed: t.completed,
            unsent: t.unsent,
            errors: t.errors,
            offered_rps: if self.plan.duration_s > 0.0 {
                t.scheduled as f64 / self.plan.duration_s
            } else {
                0.0
            },
            exact: exact.clone(),
            latency,
            service,
            generator_limited: generator_limits(
                t.scheduled,
                t.waited_for_connection,
                self.plan.max_connections,
                dispatch.as_ref(),
                self.plan.dispatch_limit_us,
                self.plan
                    .dispatch_limit_relative
                    .then(|| service.as_ref().map_or(0, |s| s.p50_us)),
            ),
            dispatch,
            connections_opened: t.connections_opened,
            connections_max: t.connections_max,
            in_flight_max: t.in_flight_max,
            max_connections: self.plan.max_connections,
            waited_for_connection: t.waited_for_connection,
            protocol: self.plan.protocol.clone(),
            connect_error: self.plan.connect_error.clone(),
        }
    }
}

/// Adds `t`'s counts and histograms to `into` (groups are not merged). `same_second`: both
/// are ticks of one second (other workers), so connection and in-flight maxima add up.
fn merge_into(into: &mut Tick, t: &Tick, same_second: bool) {
    into.scheduled += t.scheduled;
    into.picked += t.picked;
    into.completed += t.completed;
    into.errors.add(&t.errors);
    // Auto-resizing histograms of one configuration always add.
    let _ = into.latency_us.add(&t.latency_us);
    let _ = into.service_us.add(&t.service_us);
    let _ = into.dispatch_us.add(&t.dispatch_us);
    into.waited_for_connection += t.waited_for_connection;
    into.connections_opened += t.connections_opened;
    into.unsent += t.unsent;
    if same_second {
        // Workers hold their connections apart: in one second their maxima add up (an
        // upper bound: each worker's peak may fall at another moment of the second).
        into.connections_max += t.connections_max;
        into.in_flight_max += t.in_flight_max;
        into.in_flight_end += t.in_flight_end;
    } else {
        into.connections_max = into.connections_max.max(t.connections_max);
        into.in_flight_max = into.in_flight_max.max(t.in_flight_max);
    }
}

fn line_of(t: &Tick) -> SecondLine {
    SecondLine {
        second: t.second,
        offered: t.scheduled,
        picked: t.picked,
        completed: t.completed,
        errors: t.errors,
        latency: Percentiles::of(&t.latency_us),
        service: Percentiles::of(&t.service_us),
        dispatch: Percentiles::of(&t.dispatch_us),
        connections_max: t.connections_max,
        in_flight_max: t.in_flight_max,
        in_flight_end: t.in_flight_end,
        waited_for_connection: t.waited_for_connection,
        latency_us: t.latency_us.clone(),
        service_us: t.service_us.clone(),
        dispatch_us: t.dispatch_us.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::load::record::{Recorder, Timing};

    /// A run start on a whole second (2023-11-14).
    const BASE_MS: i64 = 1_700_000_000_000;

    fn plan(workers: usize) -> RunPlan {
        RunPlan {
            label: "GET /".into(),
            schedule: "constant 100/s for 2 s".into(),
            open: true,
            duration_s: 2.0,
            max_connections: 10,
            dispatch_limit_us: DEFAULT_DISPATCH_LIMIT_US,
            dispatch_limit_relative: false,
            workers,
            protocol: "HTTP/2 over TLS (ALPN h2)".into(),
            connect_error: None,
        }
    }

    #[test]
    fn grouped_samples_give_the_builder_exact_figures() {
        // Two workers, 200 requests over 2 s: latency 10 ms, except 2 timeouts at 1 s.
        let mut acc = LoadAccumulator::new(plan(2));
        let mut recorders = [Recorder::new(0, BASE_MS, 50), Recorder::new(1, BASE_MS, 50)];
        let mut lines = Vec::new();
        for second in 0..2u64 {
            for i in 0..100u64 {
                let intended_ns = second * 1_000_000_000 + i * 10_000_000;
                let r = &mut recorders[(i % 2) as usize];
                r.scheduled(intended_ns, false);
                r.picked();
                let (done, outcome) = if second == 1 && i < 2 {
                    (intended_ns + 1_000_000_000, Outcome::Timeout)
                } else {
                    (intended_ns + 10_000_000, Outcome::Ok)
                };
                let t = Timing {
                    intended_ns,
                    picked_ns: intended_ns + 100_000,
                    done_ns: done,
                };
                r.record(
                    &t,
                    outcome,
                    if outcome == Outcome::Ok { 200 } else { 0 },
                    100,
                );
            }
            let last = second == 1;
            lines.extend(acc.push(recorders[0].take(second as u32, last)));
            assert_eq!(
                lines.len(),
                second as usize,
                "a second waits for every worker"
            );
            lines.extend(acc.push(recorders[1].take(second as u32, last)));
        }
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].offered, lines[0].completed), (100, 100));
        assert_eq!(lines[1].errors.timeout, 2);
        let (rest, data, summary) = acc.finish();
        assert!(rest.is_empty());
        let o = &data.overall;
        assert_eq!((o.count, o.errors), (200, 2));
        assert_eq!(o.p50_ms, Some(10.0));
        // 2 of 200 are timeouts: the 198th smallest is still 10 ms.
        assert_eq!((o.p99_ms, o.max_ms), (Some(10.0), Some(1000.0)));
        assert_eq!(o.first_start_ms, Some(BASE_MS));
        // The last to end: the second timeout, meant to start at 1.01 s, 1 s long.
        assert_eq!(o.last_end_ms, Some(BASE_MS + 2_010));
        assert_eq!(o.bytes_received, 200 * 100);
        // Buckets by intended start second: 100 in each.
        let run_buckets: Vec<u64> = data
            .buckets
            .iter()
            .filter(|b| b.label.is_none())
            .map(|b| b.count)
            .collect();
        assert_eq!(run_buckets, [100, 100]);
        assert_eq!(data.errors.len(), 1);
        assert_eq!(data.errors[0].count, 2);
        assert_eq!(data.errors[0].first_seen_ms, BASE_MS + 1_000);
        assert_eq!(data.errors[0].last_seen_ms, BASE_MS + 1_010);
        assert_eq!(summary.errors.describe(), "timeout 2");
        assert!(summary.generator_limited.is_empty());
        let d = summary.dispatch.unwrap();
        assert_eq!((d.p99_us, d.count), (100, 200));
        assert_eq!(data.reported["generator"], "kept its schedule");
        assert_eq!(data.reported["errors by class"]["timeout"], 2);
        // Which protocol the connections spoke: in the stored run and the summary.
        assert_eq!(data.reported["protocol"], "HTTP/2 over TLS (ALPN h2)");
        assert!(
            summary
                .render()
                .contains("protocol      HTTP/2 over TLS (ALPN h2)\n")
        );
    }

    #[test]
    fn generator_limits_name_the_reason() {
        let ok = Percentiles {
            count: 100,
            p50_us: 300,
            p90_us: 500,
            p99_us: 900,
            max_us: 1500,
        };
        assert!(generator_limits(100, 0, 10, Some(&ok), 2000, None).is_empty());
        let late = Percentiles {
            p99_us: 5_000,
            ..ok
        };
        let r = generator_limits(100, 0, 10, Some(&late), 2000, None);
        assert_eq!(r.len(), 1);
        assert!(
            r[0].starts_with("dispatch delay p99 5.00 ms is above 2.00 ms"),
            "{r:?}"
        );
        // Without --dispatch-limit: 5 ms late is nothing next to a 50 ms service, but is
        // against a 1 ms one.
        assert!(generator_limits(100, 0, 10, Some(&late), 2000, Some(50_000)).is_empty());
        let r = generator_limits(100, 0, 10, Some(&late), 2000, Some(1_000));
        assert!(
            r[0].starts_with("dispatch delay p99 5.00 ms is above 2.00 ms"),
            "{r:?}"
        );
        let r = generator_limits(100, 0, 10, Some(&late), 2000, Some(8_000));
        assert!(
            r[0].starts_with(
                "dispatch delay p99 5.00 ms is above 4.00 ms (half the service time p50 8.00 ms)"
            ),
            "{r:?}"
        );
        let r = generator_limits(100, 7, 10, Some(&late), 2000, None);
        assert!(
            r[0].starts_with("connections exhausted: 7 of 100 requests (7.0 %)"),
            "{r:?}"
        );
    }

    #[test]
    fn workers_connections_add_up_in_a_second() {
        let mut acc = LoadAccumulator::new(plan(2));
        let mut a = Recorder::new(0, 0, 0);
        let mut b = Recorder::new(1, 0, 0);
        a.connection_opened();
        a.connection_opened();
        b.connection_opened();
        acc.push(a.take(0, true));
        let lines = acc.push(b.take(0, true));
        assert_eq!(lines[0].connections_max, 3);
        let (_, _, summary) = acc.finish();
        assert_eq!(summary.connections_max, 3);
        assert_eq!(summary.connections_opened, 3);
    }

    #[test]
    fn a_finished_worker_does_not_hold_later_seconds() {
        let mut acc = LoadAccumulator::new(plan(2));
        let mut a = Recorder::new(0, 0, 0);
        let mut b = Recorder::new(1, 0, 0);
        assert!(acc.push(a.take(0, true)).is_empty());
        assert_eq!(acc.push(b.take(0, false)).len(), 1);
        assert_eq!(acc.push(b.take(1, false)).len(), 1);
    }
}
