//! What the load generator records per request, and how a worker's second is handed over.
//!
//! Owns [`Outcome`] (success or the error class), [`Recorder`] (one per worker thread: the
//! request's three times into HDR histograms, and the samples grouped for the run) and
//! [`Tick`] (what a worker hands over once a second). Must not read the clock or talk to
//! the network: the engine in `sources::load` measures, this module only counts.
//!
//! The three times of a request (ns from the run's start, read from one monotonic clock):
//! - *intended*: when the schedule meant it to start;
//! - *picked*: when a connection took it up (a free connection at once; else after waiting
//!   for one, or for a new one to open);
//! - *done*: when the last byte of the response was read (or the error happened).
//!
//! latency = done − intended (the headline: corrected for coordinated omission, as wrk2's
//! `expected_latency_start`); service time = done − picked (what a closed-loop tool that
//! times from its own send reports, connection set-up included); dispatch delay = picked −
//! intended (the generator's own lateness). latency = service time + dispatch delay.
//!
//! Hot path: [`Recorder::record`] allocates nothing once its group map has grown to the
//! second's distinct (start second, elapsed ms, outcome) keys; histograms are allocated
//! once per second per worker, when the tick is handed over.

use std::collections::HashMap;

use hdrhistogram::Histogram;

use crate::domain::runs::hdr::SIGNIFICANT_DIGITS;

/// How a request ended. Every class but `Ok` is an error (the run's success flag).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// A response whose status is expected and whose body passed the check.
    Ok,
    /// The connection could not be opened.
    Connect,
    /// No complete response within `--timeout` (measured from the pick-up).
    Timeout,
    /// A status outside `--expect-status`.
    Status,
    /// The body lacks `--expect-body-contains`.
    Body,
    /// The connection broke while the request was under way (reset, closed early).
    Transport,
}

impl Outcome {
    /// Every class, in the order of [`ErrorCounts`] (after `Ok`).
    pub const ERRORS: [Outcome; 5] = [
        Outcome::Connect,
        Outcome::Timeout,
        Outcome::Status,
        Outcome::Body,
        Outcome::Transport,
    ];

    /// Short name: `ok`, `connect`, `timeout`, `status`, `body`, `transport`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Connect => "connect",
            Outcome::Timeout => "timeout",
            Outcome::Status => "status",
            Outcome::Body => "body",
            Outcome::Transport => "transport",
        }
    }

    /// The message stored with error samples of this class (groups the run's errors).
    pub fn message(self) -> &'static str {
        match self {
            Outcome::Ok => "OK",
            Outcome::Connect => "connect error: the connection could not be opened",
            Outcome::Timeout => "timeout: no complete response within --timeout",
            Outcome::Status => "status outside --expect-status",
            Outcome::Body => "body check failed: --expect-body-contains not found",
            Outcome::Transport => "transport error: the connection broke during the request",
        }
    }
}

/// Errors by class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorCounts {
    pub connect: u64,
    pub timeout: u64,
    pub status: u64,
    pub body: u64,
    pub transport: u64,
}

impl ErrorCounts {
    /// All errors.
    pub fn total(&self) -> u64 {
        self.connect + self.timeout + self.status + self.body + self.transport
    }

    /// The count of one class (`Ok` has none here: 0).
    pub fn of(&self, o: Outcome) -> u64 {
        match o {
            Outcome::Ok => 0,
            Outcome::Connect => self.connect,
            Outcome::Timeout => self.timeout,
            Outcome::Status => self.status,
            Outcome::Body => self.body,
            Outcome::Transport => self.transport,
        }
    }

    fn count(&mut self, o: Outcome) {
        match o {
            Outcome::Ok => {}
            Outcome::Connect => self.connect += 1,
            Outcome::Timeout => self.timeout += 1,
            Outcome::Status => self.status += 1,
            Outcome::Body => self.body += 1,
            Outcome::Transport => self.transport += 1,
        }
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &ErrorCounts) {
        self.connect += other.connect;
        self.timeout += other.timeout;
        self.status += other.status;
        self.body += other.body;
        self.transport += other.transport;
    }

    /// "timeout 3, status 2" (classes with a count only), or "none".
    pub fn describe(&self) -> String {
        let parts: Vec<String> = Outcome::ERRORS
            .iter()
            .filter(|&&o| self.of(o) > 0)
            .map(|&o| format!("{} {}", o.name(), self.of(o)))
            .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

/// One request's times, ns from the run's start (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub intended_ns: u64,
    pub picked_ns: u64,
    pub done_ns: u64,
}

impl Timing {
    /// done − intended: the latency corrected for coordinated omission.
    pub fn latency_ns(&self) -> u64 {
        self.done_ns.saturating_sub(self.intended_ns)
    }
    /// done − picked: the service time.
    pub fn service_ns(&self) -> u64 {
        self.done_ns.saturating_sub(self.picked_ns)
    }
    /// picked − intended: the dispatch delay.
    pub fn dispatch_ns(&self) -> u64 {
        self.picked_ns.saturating_sub(self.intended_ns)
    }
}

/// A µs histogram of the generator (3 significant digits, auto-resizing: ≤ 0.1 % error).
pub fn new_us_histogram() -> Histogram<u64> {
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is a valid configuration")
}

/// Samples that share their start second, elapsed ms, outcome and status: the run builder
/// gets them as one group (see [`Group`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct GroupKey {
    /// Intended start, unix epoch seconds (the sample's bucket).
    pub start_s: i64,
    /// Latency (intended → done), whole ms rounded half up.
    pub elapsed_ms: u64,
    pub outcome: Outcome,
    /// HTTP status, 0 when there was no response.
    pub status: u16,
}

/// The samples of one [`GroupKey`]: enough to give the run builder exactly what it would get
/// from the samples one by one (first start, last end, error groups' first and last seen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Group {
    pub count: u64,
    /// Earliest and latest intended start, unix epoch ms.
    pub min_start_ms: i64,
    pub max_start_ms: i64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
}

/// What one worker hands over once a second (and once more when it has finished).
///
/// Live figures are by the second the request *ended* in (what the terminal shows as it
/// happens); the sample groups carry their own start second, the run's buckets are by
/// *intended start* second (docs/numbers.md: buckets are by sample start second).
///
/// Its JSON form is what `harrier load … --server` streams (see
/// `POST /api/v1/load-runs/{id}/ticks`): the counts as numbers, each histogram as base64 of
/// its HdrHistogram V2 encoding, the groups as `[key, group]` pairs — lossless, so a server
/// merging the ticks gets exactly the figures the generator's own process gets.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Tick {
    /// Which worker.
    pub worker: usize,
    /// Seconds since the run's start: this tick covers `[second, second + 1)`.
    pub second: u32,
    /// The worker has finished: no further ticks from it.
    pub last: bool,
    /// Arrivals whose intended start fell in this second.
    pub scheduled: u64,
    /// Requests taken up by a connection in this second.
    pub picked: u64,
    /// Requests that ended (response or error) in this second.
    pub completed: u64,
    pub errors: ErrorCounts,
    /// Latency (intended → done), µs.
    #[serde(with = "v2_base64")]
    pub latency_us: Histogram<u64>,
    /// Service time (picked → done), µs.
    #[serde(with = "v2_base64")]
    pub service_us: Histogram<u64>,
    /// Dispatch delay (intended → picked), µs.
    #[serde(with = "v2_base64")]
    pub dispatch_us: Histogram<u64>,
    /// Arrivals that found every allowed connection busy and waited for one.
    pub waited_for_connection: u64,
    /// Connections opened in this second.
    pub connections_opened: u64,
    /// Most connections open at once in this second.
    pub connections_max: u32,
    /// Most requests in flight (picked, not done) at once in this second.
    pub in_flight_max: u32,
    /// Requests in flight when the tick was handed over (the second's end).
    pub in_flight_end: u32,
    /// Scheduled requests never sent because the run was stopped (Ctrl-C).
    pub unsent: u64,
    /// Sample groups recorded in this second (any start second).
    pub groups: Vec<(GroupKey, Group)>,
}

/// A histogram as base64 of its HdrHistogram V2 encoding (readable by every HdrHistogram
/// implementation), for the JSON form of [`Tick`].
mod v2_base64 {
    use base64::Engine;
    use hdrhistogram::Histogram;
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::domain::runs::hdr::{deserialize_histogram, serialize_histogram};

    pub fn serialize<S: Serializer>(h: &Histogram<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(serialize_histogram(h)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Histogram<u64>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map_err(|e| serde::de::Error::custom(format!("histogram is not base64: {e}")))?;
        deserialize_histogram(&bytes).map_err(serde::de::Error::custom)
    }
}

impl Tick {
    /// An empty tick of `worker` for `second`.
    pub fn new(worker: usize, second: u32) -> Tick {
        Tick {
            worker,
            second,
            last: false,
            scheduled: 0,
            picked: 0,
            completed: 0,
            errors: ErrorCounts::default(),
            latency_us: new_us_histogram(),
            service_us: new_us_histogram(),
            dispatch_us: new_us_histogram(),
            waited_for_connection: 0,
            connections_opened: 0,
            connections_max: 0,
            in_flight_max: 0,
            in_flight_end: 0,
            unsent: 0,
            groups: Vec::new(),
        }
    }
}

/// One worker's recorder: counts into the current second's [`Tick`].
#[derive(Debug)]
pub struct Recorder {
    worker: usize,
    /// The run's start, unix epoch ms (the zero of every `*_ns` offset).
    run_start_unix_ms: i64,
    bytes_sent_per_request: u64,
    tick: Tick,
    groups: HashMap<GroupKey, Group, rustc_hash::FxBuildHasher>,
    connections_open: u32,
    in_flight: u32,
    /// Arrivals of the next second dispatched before this second's tick was handed over.
    scheduled_early: u64,
}

impl Recorder {
    /// A recorder for `worker`; `bytes_sent_per_request` is the size of the request as
    /// written (request line, headers, body).
    pub fn new(worker: usize, run_start_unix_ms: i64, bytes_sent_per_request: u64) -> Recorder {
        Recorder {
            worker,
            run_start_unix_ms,
            bytes_sent_per_request,
            tick: Tick::new(worker, 0),
            groups: HashMap::default(),
            connections_open: 0,
            in_flight: 0,
            scheduled_early: 0,
        }
    }

    /// An arrival's intended time (`intended_ns`) came. It counts in the tick of its
    /// intended second, or in a later one if it was dispatched after that tick was handed
    /// over (the timer fires the hand-over and an arrival due on the same tick in either
    /// order, so an arrival due at exactly the boundary is carried to its own second).
    #[inline]
    pub fn scheduled(&mut self, intended_ns: u64, waits_for_connection: bool) {
        if intended_ns / 1_000_000_000 > u64::from(self.tick.second) {
            self.scheduled_early += 1;
        } else {
            self.tick.scheduled += 1;
        }
        self.tick.waited_for_connection += u64::from(waits_for_connection);
    }

    /// A connection took a request up.
    #[inline]
    pub fn picked(&mut self) {
        self.tick.picked += 1;
        self.in_flight += 1;
        self.tick.in_flight_max = self.tick.in_flight_max.max(self.in_flight);
    }

    /// A connection opened: an HTTP/1.1 connection (TCP, TLS), or a shared HTTP/2 one.
    pub fn connection_opened(&mut self) {
        self.connections_open += 1;
        self.tick.connections_opened += 1;
        self.tick.connections_max = self.tick.connections_max.max(self.connections_open);
    }

    /// A connection closed (by the generator, or found closed by the server).
    pub fn connection_closed(&mut self) {
        self.connections_open = self.connections_open.saturating_sub(1);
    }

    /// Scheduled requests dropped unsent because the run was stopped.
    pub fn unsent(&mut self, n: u64) {
        self.tick.unsent += n;
    }

    /// A request ended. `status` is 0 without a response; `bytes_received` counts the
    /// response as read (status line, headers, body).
    #[inline]
    pub fn record(&mut self, t: &Timing, outcome: Outcome, status: u16, bytes_received: u64) {
        self.record_sized(
            t,
            outcome,
            status,
            bytes_received,
            self.bytes_sent_per_request,
        );
    }

    /// [`Recorder::record`] of a request whose size as written was `bytes_sent` (requests
    /// filled from a feeder differ in size).
    #[inline]
    pub fn record_sized(
        &mut self,
        t: &Timing,
        outcome: Outcome,
        status: u16,
        bytes_received: u64,
        bytes_sent: u64,
    ) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.tick.completed += 1;
        self.tick.errors.count(outcome);
        // Auto-resizing histograms take every value up to i64::MAX / 2 µs.
        let _ = self.tick.latency_us.record(t.latency_ns() / 1000);
        let _ = self.tick.service_us.record(t.service_ns() / 1000);
        let _ = self.tick.dispatch_us.record(t.dispatch_ns() / 1000);
        let start_ms = self.run_start_unix_ms + (t.intended_ns / 1_000_000) as i64;
        let key = GroupKey {
            start_s: start_ms.div_euclid(1000),
            // Whole ms, halves up (as the importers round per-request files).
            elapsed_ms: (t.latency_ns() + 500_000) / 1_000_000,
            outcome,
            status,
        };
        let g = self.groups.entry(key).or_insert(Group {
            count: 0,
            min_start_ms: start_ms,
            max_start_ms: start_ms,
            bytes_received: 0,
            bytes_sent: 0,
        });
        g.count += 1;
        g.min_start_ms = g.min_start_ms.min(start_ms);
        g.max_start_ms = g.max_start_ms.max(start_ms);
        g.bytes_received += bytes_received;
        g.bytes_sent += if outcome == Outcome::Connect {
            0
        } else {
            bytes_sent
        };
    }

    /// Hands over everything since the last tick as the tick of `second`, and starts the
    /// next one. `last` marks the worker's final tick.
    pub fn take(&mut self, second: u32, last: bool) -> Tick {
        let mut tick = std::mem::replace(&mut self.tick, Tick::new(self.worker, second + 1));
        tick.second = second;
        tick.last = last;
        tick.groups = self.groups.drain().collect();
        tick.in_flight_end = self.in_flight;
        // Open connections and requests in flight carry over into the next second.
        self.tick.connections_max = self.connections_open;
        self.tick.in_flight_max = self.in_flight;
        self.tick.scheduled = std::mem::take(&mut self.scheduled_early);
        tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_three_times_and_groups_samples() {
        let mut r = Recorder::new(0, 1_700_000_000_000, 100);
        r.connection_opened();
        for (intended, picked, done) in
            [(0, 1_000_000, 5_000_000), (2_000_000, 2_000_000, 6_400_000)]
        {
            r.scheduled(intended, false);
            r.picked();
            let t = Timing {
                intended_ns: intended,
                picked_ns: picked,
                done_ns: done,
            };
            r.record(&t, Outcome::Ok, 200, 50);
        }
        r.scheduled(4_000_000, true);
        // Due at the 1 s boundary, dispatched before the hand-over: counts in second 1.
        r.scheduled(1_000_000_000, false);
        r.picked();
        let slow = Timing {
            intended_ns: 4_000_000,
            picked_ns: 4_000_000,
            done_ns: 1_004_000_000,
        };
        r.record(&slow, Outcome::Timeout, 0, 0);
        let tick = r.take(0, false);
        assert_eq!((tick.scheduled, tick.picked, tick.completed), (3, 3, 3));
        assert_eq!(tick.waited_for_connection, 1);
        assert_eq!(tick.errors.timeout, 1);
        assert_eq!(tick.errors.describe(), "timeout 1");
        assert_eq!(tick.in_flight_max, 1);
        // 1,000,000 µs lands in a bin at most 0.1 % wide.
        assert!((1_000_000..=1_001_000).contains(&tick.latency_us.max()));
        assert_eq!(tick.dispatch_us.max(), 1000);
        assert_eq!(tick.service_us.min(), 4000);
        let mut groups = tick.groups.clone();
        groups.sort_by_key(|(k, _)| *k);
        // 5 ms and 4.4 ms both round to whole ms separately; the timeout is its own group.
        let keys: Vec<(u64, Outcome)> = groups
            .iter()
            .map(|(k, _)| (k.elapsed_ms, k.outcome))
            .collect();
        assert_eq!(
            keys,
            [(4, Outcome::Ok), (5, Outcome::Ok), (1000, Outcome::Timeout)]
        );
        assert_eq!(groups[0].1.min_start_ms, 1_700_000_000_002);
        assert_eq!(groups[2].1.bytes_sent, 100);
        // The next tick starts empty but knows the open connection.
        let next = r.take(1, true);
        assert_eq!((next.second, next.last, next.completed), (1, true, 0));
        assert_eq!(next.scheduled, 1);
        assert_eq!(next.connections_max, 1);
    }
}
