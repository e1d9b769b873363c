//! Adding a live run's newest samples to what is stored of it.
//!
//! Several server processes (replicas behind a load balancer) may each receive part of one
//! line-protocol stream. None holds the whole run: each takes the points it received since
//! its previous store as a run of their own (a *delta*: [`super::RunBuilder::finish`] of
//! a fresh builder, or [`super::intervals::IntervalRun::take_delta`]) and adds it to the
//! stored run with [`add_delta`], in one transaction that holds the run's row. Adding is
//! commutative, so the stored run is the same whichever process took which points and in
//! what order they were stored.
//!
//! Exact scopes (runs of individual samples) merge their exact distributions, so every
//! figure — percentiles included — equals what one process fed every sample computes.
//! Scopes without distributions (JMeter's interval aggregates) merge sums: count, errors,
//! sum of elapsed (mean × count), min, max, window, bytes; their percentiles stay unknown.

use std::collections::{HashMap, HashSet};

use super::distribution::Distribution;
use super::limits::{OTHER_LABELS, RunLimits};
use super::{
    Bucket, ERROR_GROUP_OVERFLOW_MESSAGE, ErrorGroup, LabelStats, MAX_ERROR_GROUPS,
    MAX_REJECTED_DETAILS, RunData, Stats, StatsAcc,
};

/// The stored run with a delta added (see [`add_delta`]).
#[derive(Debug)]
pub struct Merged {
    /// The run's aggregates: statistics, distributions, error groups, rejected rows. No
    /// buckets: the delta's buckets are added to the stored ones one by one, under the
    /// label [`Merged::label_of`] gives.
    pub data: RunData,
    /// Delta labels counted under [`OTHER_LABELS`] because the run had its limit of labels.
    folded: HashSet<String>,
}

impl Merged {
    /// The label a delta bucket is added under (its own, or [`OTHER_LABELS`] when the
    /// merge folded it).
    pub fn label_of(&self, b: &Bucket) -> Bucket {
        let mut b = b.clone();
        if let Some(l) = &b.label
            && self.folded.contains(l)
        {
            b.label = Some(OTHER_LABELS.to_owned());
        }
        b
    }
}

/// One scope: its statistics and distributions (empty when not known one by one).
struct Scope {
    label: LabelStats,
    distribution: Distribution,
    failed: Option<Distribution>,
}

impl Scope {
    fn of(data: &RunData, ord: usize, label: LabelStats) -> Scope {
        Scope {
            label,
            distribution: data.distributions.get(ord).cloned().unwrap_or_default(),
            failed: data.failed_distributions.get(ord).cloned(),
        }
    }

    fn is_empty(&self) -> bool {
        self.label.stats.count == 0 && self.label.stats.errors == 0
    }

    fn exact(&self) -> Option<StatsAcc> {
        let failed = self.failed.as_ref()?;
        StatsAcc::from_stored(&self.distribution, failed, &self.label.stats)
    }

    /// Adds `other`'s samples.
    fn add(&mut self, other: &Scope) {
        if other.is_empty() {
            return;
        }
        if self.is_empty() {
            self.label.stats = other.label.stats.clone();
            self.distribution = other.distribution.clone();
            self.failed = other.failed.clone();
            return;
        }
        if let (Some(mut a), Some(b)) = (self.exact(), other.exact()) {
            a.merge(&b);
            self.label.stats = a.stats();
            self.distribution = Distribution::from(a.histogram());
            self.failed = Some(Distribution::from(a.failed_histogram()));
            return;
        }
        // Sums only: interval aggregates (or a stored scope that does not read as exact).
        self.label.stats = add_sums(&self.label.stats, &other.label.stats);
        self.distribution = Distribution::default();
        self.failed = None;
    }
}

/// Two scopes' statistics added from their sums (percentiles unknown).
fn add_sums(a: &Stats, b: &Stats) -> Stats {
    let count = a.count + b.count;
    let errors = a.errors + b.errors;
    let sum = |s: &Stats| s.mean_ms.map_or(0.0, |m| m * s.count as f64);
    let pick = |x: Option<f64>, y: Option<f64>, f: fn(f64, f64) -> f64| match (x, y) {
        (Some(x), Some(y)) => Some(f(x, y)),
        (x, y) => x.or(y),
    };
    let first = match (a.first_start_ms, b.first_start_ms) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    let last = match (a.last_end_ms, b.last_end_ms) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    let window_ms = first.zip(last).map(|(f, l)| l - f);
    Stats {
        count,
        errors,
        error_pct: (count > 0).then(|| errors as f64 * 100.0 / count as f64),
        min_ms: pick(a.min_ms, b.min_ms, f64::min),
        mean_ms: (count > 0).then(|| (sum(a) + sum(b)) / count as f64),
        max_ms: pick(a.max_ms, b.max_ms, f64::max),
        p50_ms: None,
        p90_ms: None,
        p95_ms: None,
        p99_ms: None,
        first_start_ms: first,
        last_end_ms: last,
        window_ms,
        throughput_rps: window_ms
            .filter(|w| *w > 0)
            .map(|w| count as f64 * 1000.0 / w as f64),
        bytes_received: a.bytes_received.saturating_add(b.bytes_received),
        bytes_sent: a.bytes_sent.saturating_add(b.bytes_sent),
    }
}

/// `stored` (a live run's aggregates as stored, without buckets) with `delta` (the
/// samples since the previous store, as a run of their own) added.
///
/// Labels keep their stored order; new ones follow in the delta's order. A new label
/// beyond `limits.max_labels` is counted under [`OTHER_LABELS`] (its buckets too, see
/// [`Merged::label_of`]). `folded_labels` becomes a lower bound across processes: the
/// largest count one merge or one delta saw (exact names are not kept in the store).
/// Error groups add by label, code and message, at most [`MAX_ERROR_GROUPS`] (further
/// kinds go to their label's overflow group); rejected rows add up, with details of the
/// first [`MAX_REJECTED_DETAILS`].
pub fn add_delta(stored: RunData, delta: &RunData, limits: &RunLimits) -> Merged {
    let mut overall = Scope::of(
        &stored,
        0,
        LabelStats {
            label: String::new(),
            is_transaction: false,
            stats: stored.overall.clone(),
        },
    );
    let mut scopes: Vec<Scope> = stored
        .labels
        .iter()
        .enumerate()
        .map(|(i, l)| Scope::of(&stored, i + 1, l.clone()))
        .collect();
    let mut index: HashMap<String, usize> = scopes
        .iter()
        .enumerate()
        .map(|(i, s)| (s.label.label.clone(), i))
        .collect();
    overall.add(&Scope::of(
        delta,
        0,
        LabelStats {
            label: String::new(),
            is_transaction: false,
            stats: delta.overall.clone(),
        },
    ));
    let mut folded = HashSet::new();
    for (i, l) in delta.labels.iter().enumerate() {
        let part = Scope::of(delta, i + 1, l.clone());
        if part.is_empty() {
            continue;
        }
        let name = if index.contains_key(&l.label)
            || l.label == OTHER_LABELS
            || scopes.len() < limits.max_labels.max(1)
        {
            l.label.clone()
        } else {
            folded.insert(l.label.clone());
            OTHER_LABELS.to_owned()
        };
        match index.get(&name) {
            Some(&j) => scopes[j].add(&part),
            None => {
                let mut new = part;
                new.label.label = name.clone();
                index.insert(name, scopes.len());
                scopes.push(new);
            }
        }
    }

    // Error groups: stored ones, then the delta's added by (label, code, message).
    let mut errors = stored.errors;
    let mut error_index: HashMap<(String, String, String), usize> = errors
        .iter()
        .enumerate()
        .map(|(i, e)| {
            (
                (e.label.clone(), e.response_code.clone(), e.message.clone()),
                i,
            )
        })
        .collect();
    for e in &delta.errors {
        let label = if folded.contains(&e.label) {
            OTHER_LABELS.to_owned()
        } else {
            e.label.clone()
        };
        let mut key = (label, e.response_code.clone(), e.message.clone());
        if !error_index.contains_key(&key) && errors.len() >= MAX_ERROR_GROUPS {
            key = (
                key.0,
                String::new(),
                ERROR_GROUP_OVERFLOW_MESSAGE.to_owned(),
            );
        }
        match error_index.get(&key) {
            Some(&i) => {
                let g = &mut errors[i];
                g.count += e.count;
                g.first_seen_ms = g.first_seen_ms.min(e.first_seen_ms);
                g.last_seen_ms = g.last_seen_ms.max(e.last_seen_ms);
            }
            None => {
                error_index.insert(key.clone(), errors.len());
                errors.push(ErrorGroup {
                    label: key.0,
                    response_code: key.1,
                    message: key.2,
                    count: e.count,
                    first_seen_ms: e.first_seen_ms,
                    last_seen_ms: e.last_seen_ms,
                });
            }
        }
    }
    errors.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then(a.first_seen_ms.cmp(&b.first_seen_ms))
    });

    let mut rejected = stored.rejected;
    let room = MAX_REJECTED_DETAILS.saturating_sub(rejected.len());
    rejected.extend(delta.rejected.iter().take(room).cloned());

    let exact = overall.failed.is_some() && scopes.iter().all(|s| s.failed.is_some());
    let mut distributions = vec![overall.distribution];
    let mut failed_distributions = Vec::new();
    if exact {
        failed_distributions.push(overall.failed.unwrap_or_default());
    }
    let mut labels = Vec::with_capacity(scopes.len());
    for s in scopes {
        distributions.push(s.distribution);
        if exact {
            failed_distributions.push(s.failed.unwrap_or_default());
        }
        labels.push(s.label);
    }
    let folded_labels = stored
        .folded_labels
        .max(delta.folded_labels)
        .max(folded.len() as u64);
    Merged {
        data: RunData {
            overall: overall.label.stats,
            labels,
            buckets: Vec::new(),
            errors,
            rejected_rows: stored.rejected_rows + delta.rejected_rows,
            rejected,
            summary_only: stored.summary_only || delta.summary_only,
            folded_labels,
            reported: if stored.reported.is_null() {
                delta.reported.clone()
            } else {
                stored.reported
            },
            distributions,
            failed_distributions,
        },
        folded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::runs::intervals::IntervalRun;
    use crate::domain::runs::{RunBuilder, Sample};

    fn sample(label: &str, start_ms: i64, elapsed_ms: u64, success: bool) -> Sample<'_> {
        Sample {
            label,
            start_ms,
            elapsed_ms,
            success,
            response_code: if success { "200" } else { "500" },
            message: if success { "" } else { "Internal Server Error" },
            bytes_received: 100,
            bytes_sent: 10,
            active_users: None,
            is_transaction: false,
        }
    }

    /// A deterministic stream of samples over labels a–c with a few errors.
    fn stream(n: u64) -> Vec<(String, i64, u64, bool)> {
        (0..n)
            .map(|i| {
                let label = ["a", "b", "c"][(i * 7 % 3) as usize].to_owned();
                let start = 1_700_000_000_000 + (i as i64 * 37) % 9_000;
                let elapsed = (i * i * 31) % 1_700 + (i % 5) * 70_000 * u64::from(i % 97 == 0);
                (label, start, elapsed, i % 13 != 0)
            })
            .collect()
    }

    #[test]
    fn deltas_added_in_any_split_equal_one_builder_fed_everything() {
        let all = stream(3_000);
        let mut whole = RunBuilder::new();
        for (i, (l, s, e, ok)) in all.iter().enumerate() {
            whole.push(i as u64 + 1, &sample(l, *s, *e, *ok));
        }
        let whole = whole.finish();
        // Three "replicas" each take every third sample, storing after every 250.
        let mut stored = RunData::default();
        for part in 0..3 {
            let mine: Vec<_> = all.iter().skip(part).step_by(3).collect();
            for chunk in mine.chunks(250) {
                let mut b = RunBuilder::new();
                for (i, (l, s, e, ok)) in chunk.iter().enumerate() {
                    b.push(i as u64 + 1, &sample(l, *s, *e, *ok));
                }
                stored = add_delta(stored, &b.finish(), &RunLimits::default()).data;
            }
        }
        assert_eq!(stored.overall, whole.overall);
        let by_name = |d: &RunData| {
            let mut v: Vec<(String, Stats)> = d
                .labels
                .iter()
                .map(|l| (l.label.clone(), l.stats.clone()))
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        assert_eq!(by_name(&stored), by_name(&whole));
        assert_eq!(stored.distributions[0], whole.distributions[0]);
        assert_eq!(
            stored.failed_distributions[0],
            whole.failed_distributions[0]
        );
        let counts = |d: &RunData| {
            let mut v: Vec<(String, String, u64, i64, i64)> = d
                .errors
                .iter()
                .map(|e| {
                    (
                        e.label.clone(),
                        e.message.clone(),
                        e.count,
                        e.first_seen_ms,
                        e.last_seen_ms,
                    )
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(counts(&stored), counts(&whole));
        assert!(whole.overall.p99_ms.is_some() && whole.overall.errors > 0);
    }

    #[test]
    fn a_new_label_beyond_the_limit_is_counted_under_other_labels() {
        let limits = RunLimits {
            max_labels: 2,
            ..RunLimits::default()
        };
        let mut first = RunBuilder::new();
        first.push(1, &sample("a", 1_700_000_001_000, 5, true));
        first.push(2, &sample("b", 1_700_000_001_000, 6, true));
        let stored = add_delta(RunData::default(), &first.finish(), &limits).data;
        let mut next = RunBuilder::new();
        next.push(1, &sample("c", 1_700_000_002_000, 7, false));
        next.push(2, &sample("a", 1_700_000_002_000, 8, true));
        let delta = next.finish();
        let merged = add_delta(stored, &delta, &limits);
        let names: Vec<&str> = merged
            .data
            .labels
            .iter()
            .map(|l| l.label.as_str())
            .collect();
        assert_eq!(names, ["a", "b", OTHER_LABELS]);
        assert_eq!(merged.data.labels[0].stats.count, 2);
        assert_eq!(merged.data.overall.count, 4);
        assert_eq!(merged.data.folded_labels, 1);
        let c_bucket = delta
            .buckets
            .iter()
            .find(|b| b.label.as_deref() == Some("c"))
            .expect("c's bucket");
        assert_eq!(
            merged.label_of(c_bucket).label.as_deref(),
            Some(OTHER_LABELS)
        );
        assert_eq!(merged.data.errors[0].label, OTHER_LABELS);
    }

    #[test]
    fn interval_deltas_add_their_sums() {
        let mut whole = IntervalRun::new();
        let mut a = IntervalRun::new();
        let mut b = IntervalRun::new();
        let mut stored = RunData::default();
        for k in 0..6i64 {
            let t = 1_700_000_005_000 + k * 5_000;
            let (count, mean) = (100 + k as u64 * 10, 20.0 + k as f64);
            whole.interval("x", t, count, mean, 3.0, 90.0 + k as f64, 1_000, 100);
            whole.interval_errors("x", t, k as u64);
            let side = if k % 2 == 0 { &mut a } else { &mut b };
            side.interval("x", t, count, mean, 3.0, 90.0 + k as f64, 1_000, 100);
            side.interval_errors("x", t, k as u64);
            stored = add_delta(stored, &side.take_delta().data, &RunLimits::default()).data;
        }
        let whole = whole.snapshot();
        let (s, w) = (&stored.overall, &whole.overall);
        assert_eq!((s.count, s.errors), (w.count, w.errors));
        assert_eq!((s.min_ms, s.max_ms), (w.min_ms, w.max_ms));
        assert!((s.mean_ms.unwrap() - w.mean_ms.unwrap()).abs() < 1e-9);
        assert_eq!(s.bytes_received, w.bytes_received);
        assert_eq!(s.p99_ms, None);
    }
}
