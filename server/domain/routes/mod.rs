//! Routes: domain types and statistics for route metrics (RED per Camel route or HTTP
//! handler), from scraped expositions or Jolokia reads.
//!
//! Owns the exposition parser ([`exposition`]), the presets that turn series into route
//! [`Observation`]s ([`presets`], [`jolokia`]), and the arithmetic over consecutive
//! observations ([`Interval`], [`Figures`]). Knows nothing of axum, SQL or HTTP clients.
//!
//! Definitions (docs/numbers.md, "Routes"):
//! - a counter's increase between two scrapes is `v₁ − v₀`, or `v₁` when `v₁ < v₀` (the
//!   counter restarted from 0), per exposed series, then summed; no extrapolation;
//! - throughput = Σ increase of the exchange counter / Σ interval seconds;
//! - error % = Δfailed / Δtotal × 100 (HTTP: 5xx responses over all responses); no
//!   exchanges → no value;
//! - mean = Δsum / Δcount of the duration summary or histogram;
//! - pNN from histogram buckets with Prometheus' `histogram_quantile` rule
//!   ([`histogram_quantile`]) over the bucket increases of the window;
//! - max is the exporter's own figure (Micrometer: the max of its recent window; Jolokia:
//!   Camel's `MaxProcessingTime` since the route's statistics were reset).

pub mod run_hits;
pub mod series;
pub mod steps;

/// Series labels that name the application, and the route label each is kept under
/// beside the service: `(series label, route label)`. The service itself is always the
/// target's (its `service` label, else its configured name), so that a target is one
/// service and alerts written with its name match; a series' own `service` or `job`
/// label is renamed `exported_…`, as Prometheus renames a scraped label that clashes
/// with a target label.
pub const ROUTE_LABELS: &[(&str, &str)] = &[
    ("camelContext", "camel_context"),
    ("application", "application"),
    ("service", "exported_service"),
    ("job", "exported_job"),
];

use serde::Serialize;

/// Where a route's figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Camel Micrometer (`camel_exchanges_total`, `camel_route_policy_seconds_*`).
    Camel,
    /// Spring Boot / Micrometer `http_server_requests_seconds_*`.
    Spring,
    /// `*_http_requests_total` and `*_request_duration_seconds_*` (harrier's own, many others).
    Http,
    /// Camel `ManagedRoute` MBeans read through Jolokia.
    Jolokia,
    /// OpenTelemetry metrics pushed over OTLP (`POST /v1/metrics`).
    Otlp,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Camel => "camel",
            Source::Spring => "spring",
            Source::Http => "http",
            Source::Jolokia => "jolokia",
            Source::Otlp => "otlp",
        }
    }
}

/// The increase of a counter between two readings: `cur − prev`, or `cur` when the counter
/// went down (it restarted from 0).
pub fn counter_delta(prev: f64, cur: f64) -> f64 {
    if cur >= prev { cur - prev } else { cur }
}

/// Increase over consecutive readings `v₀…vₙ` (Σ [`counter_delta`]) and the number of
/// resets seen. NaN readings are skipped.
pub fn increase(values: &[f64]) -> (f64, u32) {
    let mut total = 0.0;
    let mut resets = 0;
    let mut prev: Option<f64> = None;
    for &v in values.iter().filter(|v| !v.is_nan()) {
        if let Some(p) = prev {
            if v < p {
                resets += 1;
            }
            total += counter_delta(p, v);
        }
        prev = Some(v);
    }
    (total, resets)
}

/// A cumulative figure made of one or more exposed series (e.g. one per status code),
/// kept apart so resets are handled per series. Keys are the series' other labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters(pub Vec<(String, f64)>);

impl Counters {
    /// Adds `v` to series `key` (NaN is ignored: no reading).
    pub fn add(&mut self, key: &str, v: f64) {
        if v.is_nan() {
            return;
        }
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some((_, x)) => *x += v,
            None => self.0.push((key.to_string(), v)),
        }
    }

    /// Sum over the series.
    pub fn sum(&self) -> f64 {
        self.0.iter().map(|(_, v)| v).sum()
    }

    /// Increase since `prev`, per series; a series that `prev` lacked started from 0 (the
    /// route existed, so the series is new: its first 500 is an increase of 1). Returns the
    /// increase and the number of series that reset.
    pub fn increase_since(&self, prev: &Counters) -> (f64, u32) {
        let mut total = 0.0;
        let mut resets = 0;
        for (k, v) in &self.0 {
            match prev.0.iter().find(|(pk, _)| pk == k) {
                Some((_, p)) => {
                    if v < p {
                        resets += 1;
                    }
                    total += counter_delta(*p, *v);
                }
                None => total += v.max(0.0),
            }
        }
        (total, resets)
    }
}

/// One route's cumulative readings in one scrape. `None` = the source lacks the figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// The target's service (its `service` label, else its name): series never rename it.
    pub service: String,
    pub route: String,
    pub source: Source,
    /// Labels of the series that name the application beside the service, part of the
    /// route's identity (see [`ROUTE_LABELS`]): e.g. `camel_context`.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Exchanges (requests), cumulative.
    pub total: Option<Counters>,
    /// Failed exchanges (HTTP: 5xx responses), cumulative.
    pub failed: Option<Counters>,
    /// Sum of durations, seconds, cumulative.
    pub duration_sum_s: Option<Counters>,
    /// Count of timed exchanges, cumulative.
    pub duration_count: Option<Counters>,
    /// Histogram buckets: upper bound (seconds; `+Inf` last) → cumulative counts.
    pub buckets: Vec<(f64, Counters)>,
    /// The exporter's max duration, seconds.
    pub max_s: Option<f64>,
    /// Exchanges in flight now.
    pub inflight: Option<f64>,
    /// A state the source reports (Jolokia: `Started`, `Stopped`).
    pub state: Option<String>,
    /// When the last exchange completed, as the source reports it (Jolokia).
    pub last_exchange_ms: Option<i64>,
    /// The instance its series name (`instance` or `pod` label); `None`: the target's.
    pub instance: Option<String>,
    /// The group the source puts the route in (Camel's `routeGroup`); not part of its
    /// identity.
    pub group: Option<String>,
}

impl Observation {
    /// An observation with no figures yet.
    pub fn new(service: &str, route: &str, source: Source) -> Observation {
        Observation {
            service: service.to_string(),
            route: route.to_string(),
            source,
            labels: Default::default(),
            total: None,
            failed: None,
            duration_sum_s: None,
            duration_count: None,
            buckets: Vec::new(),
            max_s: None,
            inflight: None,
            state: None,
            last_exchange_ms: None,
            instance: None,
            group: None,
        }
    }

    /// Adds a bucket reading (`le` seconds) of series `key`; the buckets stay sorted by
    /// bound (a new bound is inserted in its place, no re-sort).
    pub fn add_bucket(&mut self, le: f64, key: &str, v: f64) {
        let at = self
            .buckets
            .partition_point(|(b, _)| b.total_cmp(&le).is_lt());
        match self.buckets.get_mut(at) {
            Some((b, c)) if *b == le => c.add(key, v),
            _ => {
                let mut c = Counters::default();
                c.add(key, v);
                self.buckets.insert(at, (le, c));
            }
        }
    }
}

/// What happened to one route between two scrapes (`at_ms − interval_ms` … `at_ms`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Interval {
    pub interval_ms: i64,
    pub exchanges: Option<f64>,
    pub failed: Option<f64>,
    pub duration_sum_s: Option<f64>,
    pub duration_count: Option<f64>,
    /// Bucket increases, cumulative by upper bound (seconds; `+Inf` last).
    pub buckets: Vec<(f64, f64)>,
    pub max_s: Option<f64>,
    pub inflight: Option<f64>,
    /// Series that reset in this interval.
    pub resets: u32,
}

fn delta(prev: &Option<Counters>, cur: &Option<Counters>, resets: &mut u32) -> Option<f64> {
    let cur = cur.as_ref()?;
    let empty = Counters::default();
    let (d, r) = cur.increase_since(prev.as_ref().unwrap_or(&empty));
    *resets += r;
    Some(d)
}

impl Interval {
    /// The interval between two observations of the same route, `interval_ms` apart.
    pub fn between(prev: &Observation, cur: &Observation, interval_ms: i64) -> Interval {
        let mut resets = 0;
        let exchanges = delta(&prev.total, &cur.total, &mut resets);
        let failed = delta(&prev.failed, &cur.failed, &mut resets);
        let duration_sum_s = delta(&prev.duration_sum_s, &cur.duration_sum_s, &mut resets);
        let duration_count = delta(&prev.duration_count, &cur.duration_count, &mut resets);
        let empty = Counters::default();
        // A bound the previous reading lacks (a histogram that changed its bounds) counts
        // from the previous reading's largest bound below it: the counts are cumulative.
        let buckets = cur
            .buckets
            .iter()
            .map(|(le, c)| {
                let p = match prev.buckets.partition_point(|(pl, _)| pl <= le) {
                    0 => &empty,
                    i => &prev.buckets[i - 1].1,
                };
                (*le, c.increase_since(p).0)
            })
            .collect();
        Interval {
            interval_ms,
            exchanges,
            failed,
            duration_sum_s,
            duration_count,
            buckets,
            max_s: cur.max_s,
            inflight: cur.inflight,
            resets,
        }
    }
}

/// Figures over a window: the sum of consecutive [`Interval`]s.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    /// Σ interval lengths, ms.
    pub span_ms: i64,
    pub exchanges: Option<f64>,
    pub failed: Option<f64>,
    pub duration_sum_s: Option<f64>,
    pub duration_count: Option<f64>,
    pub buckets: Vec<(f64, f64)>,
    /// Largest max reported in the window, seconds.
    pub max_s: Option<f64>,
    /// The latest inflight reading.
    pub inflight: Option<f64>,
    /// Number of intervals added.
    pub intervals: u32,
}

fn add_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The cumulative count of `buckets` (sorted by bound) at upper bound `le`: the count of
/// the largest bound ≤ `le` (no observation lies between two bounds of a set), 0 below
/// the first.
fn count_at(buckets: &[(f64, f64)], le: f64) -> f64 {
    match buckets.partition_point(|(b, _)| *b <= le) {
        0 => 0.0,
        i => buckets[i - 1].1,
    }
}

/// Adds cumulative bucket counts `b` into `acc` (both by upper bound). Sets with other
/// bounds (an exponential histogram that changed scale, a bucket that appeared) are
/// added on the union of the bounds, each set's count at a bound it lacks being its count
/// at its largest bound below (see [`count_at`]), so the sum stays cumulative.
pub fn merge_buckets(acc: &mut Vec<(f64, f64)>, b: &[(f64, f64)]) {
    // The common case, a route's intervals with the same bounds: added in place (a window
    // of a minute at 1 s scrapes merges 60 sets per route per answer).
    if acc.len() == b.len() && acc.iter().zip(b).all(|(x, y)| x.0 == y.0) {
        for (x, y) in acc.iter_mut().zip(b) {
            x.1 += y.1;
        }
        return;
    }
    if b.is_empty() {
        return;
    }
    let mut other = b.to_vec();
    if !other.is_sorted_by(|x, y| x.0 < y.0) {
        other.sort_by(|x, y| x.0.total_cmp(&y.0));
    }
    if acc.is_empty() {
        *acc = other;
        return;
    }
    let mut bounds: Vec<f64> = acc.iter().chain(&other).map(|(le, _)| *le).collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    let merged = bounds
        .iter()
        .map(|&le| (le, count_at(acc, le) + count_at(&other, le)))
        .collect();
    *acc = merged;
}

impl Figures {
    /// Adds one interval (the later one last, so `inflight` is the latest reading).
    pub fn add(&mut self, iv: &Interval) {
        self.add_sums(iv);
        merge_buckets(&mut self.buckets, &iv.buckets);
    }

    /// [`Figures::add`] without the histogram buckets.
    pub fn add_sums(&mut self, iv: &Interval) {
        self.span_ms += iv.interval_ms.max(0);
        self.exchanges = add_opt(self.exchanges, iv.exchanges);
        self.failed = add_opt(self.failed, iv.failed);
        self.duration_sum_s = add_opt(self.duration_sum_s, iv.duration_sum_s);
        self.duration_count = add_opt(self.duration_count, iv.duration_count);
        self.max_s = match (self.max_s, iv.max_s.filter(|m| m.is_finite())) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if iv.inflight.is_some() {
            self.inflight = iv.inflight;
        }
        self.intervals += 1;
    }

    /// The sums as one interval spanning them (`inflight`: the latest reading; no buckets).
    pub fn as_interval(&self) -> Interval {
        Interval {
            interval_ms: self.span_ms,
            exchanges: self.exchanges,
            failed: self.failed,
            duration_sum_s: self.duration_sum_s,
            duration_count: self.duration_count,
            max_s: self.max_s,
            inflight: self.inflight,
            ..Default::default()
        }
    }

    /// Exchanges per second: Σ increase / Σ interval seconds.
    pub fn throughput_per_s(&self) -> Option<f64> {
        let n = self.exchanges?;
        (self.span_ms > 0).then(|| n / (self.span_ms as f64 / 1000.0))
    }

    /// Failed exchanges per second.
    pub fn failed_per_s(&self) -> Option<f64> {
        let n = self.failed?;
        (self.span_ms > 0).then(|| n / (self.span_ms as f64 / 1000.0))
    }

    /// Δfailed / Δtotal × 100; `None` without exchanges.
    pub fn error_pct(&self) -> Option<f64> {
        let total = self.exchanges.filter(|t| *t > 0.0)?;
        Some(self.failed? / total * 100.0)
    }

    /// Δsum / Δcount, ms; `None` without timed exchanges.
    pub fn mean_ms(&self) -> Option<f64> {
        let count = self.duration_count.filter(|c| *c > 0.0)?;
        Some(self.duration_sum_s? / count * 1000.0)
    }

    /// Quantile `q` (0…1) from the bucket increases, ms (see [`histogram_quantile`]), at
    /// most the window's max when the source reports one: interpolating inside a wide
    /// bucket (all requests under 5 ms in a `0–5 ms` bucket give a p95 of 4.75 ms) must not
    /// state a time longer than any request took.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let v = histogram_quantile(q, &self.buckets, self.duration_count)? * 1000.0;
        Some(match self.max_ms() {
            Some(max) if v > max => max,
            _ => v,
        })
    }

    /// Max, ms.
    pub fn max_ms(&self) -> Option<f64> {
        self.max_s.map(|s| s * 1000.0)
    }
}

/// Prometheus' `histogram_quantile` on one set of cumulative buckets `(upper bound,
/// count)`: buckets sorted by bound; rank = q · count(+Inf); linear interpolation inside
/// the first bucket whose cumulative count ≥ rank (lower bound 0 for the first bucket);
/// a rank in the `+Inf` bucket gives the highest finite bound.
/// (<https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile>)
///
/// `None` (no value) when: fewer than two buckets, no `+Inf` bucket, no observations,
/// counts that are not cumulative, or a `+Inf` count that differs from `count` (when given).
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)], count: Option<f64>) -> Option<f64> {
    if buckets.len() < 2 || q.is_nan() {
        return None;
    }
    let mut b: Vec<(f64, f64)> = buckets.to_vec();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (last_le, observations) = *b.last()?;
    if last_le != f64::INFINITY || observations <= 0.0 || observations.is_nan() {
        return None;
    }
    if let Some(c) = count
        && c != observations
    {
        return None;
    }
    if b.windows(2).any(|w| w[1].1 < w[0].1) {
        return None;
    }
    if q < 0.0 {
        return Some(f64::NEG_INFINITY);
    }
    if q > 1.0 {
        return Some(f64::INFINITY);
    }
    let rank = q * observations;
    let i = b.iter().position(|(_, c)| *c >= rank)?;
    if i == b.len() - 1 {
        return Some(b[b.len() - 2].0);
    }
    if i == 0 && b[0].0 <= 0.0 {
        return Some(b[0].0);
    }
    let (start, below) = if i == 0 { (0.0, 0.0) } else { b[i - 1] };
    let (end, cum) = b[i];
    let in_bucket = cum - below;
    if in_bucket <= 0.0 {
        return Some(end);
    }
    Some(start + (end - start) * (rank - below) / in_bucket)
}

/// Scrape intervals a route may be missing before it counts as `gone` rather than `stale`.
pub const GONE_AFTER_SCRAPES: i64 = 5;

/// One row of the routes list (`GET /api/v1/routes`, `/console/routes`, the
/// `routes_updated` live event). Figures are over the requested window; `null` where the
/// source lacks the figure or the window saw no exchanges.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteRow {
    pub id: i64,
    pub target_id: i64,
    /// The target's service (its `service` label, else its name).
    pub service: String,
    /// Labels beside the service that are part of the route's identity, e.g.
    /// `{"camel_context": "inventory-bridge"}` (see [`ROUTE_LABELS`]); `{}` when none.
    pub labels: std::collections::BTreeMap<String, String>,
    pub instance: String,
    pub route: String,
    /// `camel`, `spring`, `http`, `jolokia` or `otlp`.
    pub source: String,
    /// `active` (exchanges in the window), `idle` (none), `down` (target not answering),
    /// `stale` (missing from the target's latest good scrape), `gone` (missing for
    /// [`GONE_AFTER_SCRAPES`] scrapes or more: e.g. the old instance of a restarted service),
    /// or the source's own state (`Stopped`).
    pub state: String,
    /// The last scrape that had the route, unix ms.
    pub last_seen_ms: i64,
    pub throughput_per_s: Option<f64>,
    pub error_pct: Option<f64>,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub inflight: Option<f64>,
    /// When the last exchange was seen (the scrape at which the counter last rose, or the
    /// source's own timestamp), unix ms.
    pub last_exchange_ms: Option<i64>,
    /// The window the figures cover, s.
    pub window_s: f64,
    /// Console page of the route.
    pub url: String,
}

#[cfg(test)]
mod tests {

    #[test]
    fn buckets_merge_alike_whatever_their_bounds() {
        // Same bounds (added in place), a first set, other bounds, an unsorted set.
        let a = [(0.1, 1.0), (0.5, 2.0), (f64::INFINITY, 3.0)];
        let mut acc = Vec::new();
        merge_buckets(&mut acc, &a);
        merge_buckets(&mut acc, &a);
        assert_eq!(acc, vec![(0.1, 2.0), (0.5, 4.0), (f64::INFINITY, 6.0)]);
        // Other bounds: each set counted at a bound it lacks as at its largest bound below.
        merge_buckets(&mut acc, &[(0.25, 1.0), (0.1, 1.0), (f64::INFINITY, 2.0)]);
        assert_eq!(
            acc,
            vec![(0.1, 3.0), (0.25, 3.0), (0.5, 5.0), (f64::INFINITY, 8.0)]
        );
        let mut unsorted = Vec::new();
        merge_buckets(&mut unsorted, &[(f64::INFINITY, 3.0), (0.1, 1.0)]);
        assert_eq!(unsorted, vec![(0.1, 1.0), (f64::INFINITY, 3.0)]);
        // Two exponential sets at different scales give the counts of their union.
        let mut a = vec![(1.0, 2.0), (2.0, 5.0), (f64::INFINITY, 5.0)];
        merge_buckets(&mut a, &[(1.0, 1.0), (1.5, 4.0), (f64::INFINITY, 4.0)]);
        assert_eq!(
            a,
            vec![(1.0, 3.0), (1.5, 6.0), (2.0, 9.0), (f64::INFINITY, 9.0)]
        );
    }
    use super::*;

    #[test]
    fn histogram_quantile_follows_prometheus() {
        // EC30's rpc_duration_seconds: le 0.5 → 3, +Inf → 4, count 4.
        let b = [(0.5, 3.0), (f64::INFINITY, 4.0)];
        let p50 = histogram_quantile(0.5, &b, Some(4.0)).unwrap();
        assert!((p50 - 0.5 * 2.0 / 3.0).abs() < 1e-12);
        // rank 3.8 falls in +Inf → the highest finite bound
        assert_eq!(histogram_quantile(0.95, &b, Some(4.0)), Some(0.5));
        // +Inf ≠ count, not cumulative, no +Inf, empty: no value
        assert_eq!(histogram_quantile(0.5, &b, Some(5.0)), None);
        assert_eq!(
            histogram_quantile(0.5, &[(0.1, 5.0), (0.5, 3.0), (f64::INFINITY, 6.0)], None),
            None
        );
        assert_eq!(
            histogram_quantile(0.5, &[(0.1, 1.0), (0.5, 2.0)], None),
            None
        );
        assert_eq!(
            histogram_quantile(0.5, &[(0.1, 0.0), (f64::INFINITY, 0.0)], None),
            None
        );
        // interpolation inside a middle bucket
        let b = [(0.1, 10.0), (0.2, 30.0), (0.4, 40.0), (f64::INFINITY, 40.0)];
        let p = histogram_quantile(0.5, &b, None).unwrap(); // rank 20 → 0.1 + 0.1 * 10/20
        assert!((p - 0.15).abs() < 1e-12);
    }

    #[test]
    fn a_percentile_is_never_above_the_max() {
        // Ten requests of 0.1 ms in a 0–5 ms bucket: the interpolated p95 (4.75 ms) is
        // held to the reported max; without a max it stands.
        let mut f = Figures {
            duration_count: Some(10.0),
            buckets: vec![(0.005, 10.0), (f64::INFINITY, 10.0)],
            ..Figures::default()
        };
        assert!((f.quantile_ms(0.95).unwrap() - 4.75).abs() < 1e-9);
        f.max_s = Some(0.0001);
        assert_eq!(f.quantile_ms(0.95), Some(0.1));
        f.max_s = Some(0.010);
        assert!((f.quantile_ms(0.5).unwrap() - 2.5).abs() < 1e-9);
    }

    #[test]
    fn increase_handles_resets() {
        assert_eq!(
            increase(&[100.0, 150.0, 210.0, 20.0, 80.0, 130.0]),
            (240.0, 1)
        );
        assert_eq!(increase(&[0.0, 0.0, 5.0, 0.0, 1.0, 9.0]), (14.0, 1));
        assert_eq!(increase(&[5.0]), (0.0, 0));
    }

    #[test]
    fn new_series_in_a_known_route_count_from_zero() {
        let mut prev = Counters::default();
        prev.add("code=200", 10.0);
        let mut cur = prev.clone();
        cur.add("code=500", 2.0);
        assert_eq!(cur.increase_since(&prev), (2.0, 0));
    }
}
