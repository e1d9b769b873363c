//! Runs streamed as per-interval aggregates (JMeter's Backend Listener): per label, each
//! send interval's count, errors, mean, min and max, with no individual samples.
//!
//! Each interval is spread evenly over the seconds it covers (its count split across them,
//! with the same mean, min and max), so the over-time charts show JMeter's own per-interval
//! rates instead of a spike every five seconds. Run and label percentiles cannot be known
//! from such data and stay `None`; totals, mean, min, max, error % and throughput are exact
//! sums of what JMeter sent. Importing the run's JTL afterwards replaces them with exact
//! figures.
//!
//! Bounded as an import is ([`RunLimits`]): at most `max_labels` labels (the rest are
//! counted under [`OTHER_LABELS`] and [`RunData::folded_labels`] says how many), labels
//! and messages cut to their limits, at most [`MAX_ERROR_GROUPS`] error kinds (further
//! kinds are counted in one overflow group).
//!
//! Bounded in time too: once its changes have been taken ([`IntervalRun::take_changes`],
//! a live run's store), a label's seconds older than [`KEEP_MS`] before its newest
//! interval are forgotten, so a 12-hour stream holds minutes, not hours. Points that still
//! arrive for a forgotten second are handed out as [`RunChanges::added`] buckets, which
//! the store adds to the stored ones: nothing is lost or counted twice.

use std::collections::{BTreeMap, BTreeSet};

use std::collections::{HashMap, HashSet};

use super::builder::{ERROR_GROUP_OVERFLOW_MESSAGE, FxBuild, MAX_ERROR_GROUPS};
use super::hdr::{new_histogram, serialize_histogram};
use super::limits::{OTHER_LABELS, RunLimits, truncate_chars};
use super::{Bucket, ErrorGroup, LabelStats, RunChanges, RunData, Stats};

/// JMeter's default send interval (`backend_influxdb.send_interval`), ms.
pub const DEFAULT_INTERVAL_MS: i64 = 5_000;
/// Longest interval a gap between two sends is taken for, ms.
const MAX_INTERVAL_MS: i64 = 60_000;
/// How long a label's seconds are kept behind its newest interval once taken, ms: five
/// times the longest interval, so in-order sends (JMeter's) never touch a forgotten one.
pub const KEEP_MS: i64 = 5 * MAX_INTERVAL_MS;

#[derive(Debug, Clone, Default)]
struct Acc {
    count: u64,
    errors: u64,
    sum_ms: f64,
    min_ms: Option<f64>,
    max_ms: Option<f64>,
    bytes_received: u64,
    bytes_sent: u64,
}

impl Acc {
    /// Adds another accumulator of the same label and second.
    fn merge(&mut self, o: &Acc) {
        self.count += o.count;
        self.errors += o.errors;
        self.sum_ms += o.sum_ms;
        self.min_ms = match (self.min_ms, o.min_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max_ms = match (self.max_ms, o.max_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.bytes_received += o.bytes_received;
        self.bytes_sent += o.bytes_sent;
    }

    fn add(&mut self, count: u64, errors: u64, mean: f64, min: f64, max: f64) {
        self.count += count;
        self.errors += errors;
        if mean.is_finite() {
            self.sum_ms += mean * count as f64;
        }
        if min.is_finite() {
            self.min_ms = Some(self.min_ms.map_or(min, |m| m.min(min)));
        }
        if max.is_finite() {
            self.max_ms = Some(self.max_ms.map_or(max, |m| m.max(max)));
        }
    }
}

/// The serialized empty histogram every interval bucket carries.
static EMPTY_HISTOGRAM: std::sync::LazyLock<Vec<u8>> =
    std::sync::LazyLock::new(|| serialize_histogram(&new_histogram::<u64>()));

/// One second's bucket of `label` (the run's when `None`), from its accumulator. No
/// histogram: percentiles are not known from interval aggregates.
fn interval_bucket(label: Option<String>, start_ms: i64, acc: &Acc, users: Option<u32>) -> Bucket {
    Bucket {
        label,
        start_ms,
        count: acc.count,
        errors: acc.errors,
        sum_ms: acc.sum_ms.round().max(0.0) as u64,
        min_ms: acc.min_ms.unwrap_or(0.0).round().max(0.0) as u64,
        max_ms: acc.max_ms.unwrap_or(0.0).round().max(0.0) as u64,
        active_users: users,
        histogram: EMPTY_HISTOGRAM.clone(),
    }
}

#[derive(Debug, Clone, Default)]
struct LabelRun {
    name: String,
    total: Acc,
    /// Second start (ms) → that second's share.
    seconds: BTreeMap<i64, Acc>,
    /// End of the label's previous interval, ms.
    last_t_ms: Option<i64>,
    first_start_ms: Option<i64>,
    last_end_ms: Option<i64>,
    /// Seconds before this (ms) were taken and forgotten; points for them go to `late`.
    forgotten_before: i64,
    /// Second start (ms) → points that arrived after that second was forgotten.
    late: BTreeMap<i64, Acc>,
}

impl LabelRun {
    /// The accumulator of second `s`: the kept one, or the late one once forgotten.
    fn second(&mut self, s: i64) -> &mut Acc {
        if s < self.forgotten_before {
            self.late.entry(s).or_default()
        } else {
            self.seconds.entry(s).or_default()
        }
    }
}

/// Accumulates a run from interval aggregates.
#[derive(Debug, Clone, Default)]
pub struct IntervalRun {
    limits: RunLimits,
    labels: Vec<LabelRun>,
    /// Label name → index into `labels`.
    label_index: HashMap<String, usize, FxBuild>,
    /// Hashes of the labels folded into [`OTHER_LABELS`].
    folded: HashSet<u64, FxBuild>,
    errors: Vec<ErrorGroup>,
    /// (label, code, message) → index into `errors`.
    error_index: HashMap<(String, String, String), usize, FxBuild>,
    /// Second start (ms) → active users.
    users: BTreeMap<i64, u32>,
    /// Seconds (start, ms) changed since the last [`IntervalRun::take_changes`].
    changed: BTreeSet<i64>,
    /// Users of seconds before this (ms) were taken and forgotten.
    users_forgotten_before: i64,
    /// What the run's figures come from, for [`RunData::reported`]; `None`: JMeter's
    /// Backend Listener.
    source: Option<Source>,
}

/// Where an interval run's figures come from and what that allows, as the run page says it.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    pub source: &'static str,
    pub percentiles: &'static str,
}

/// JMeter's Backend Listener (the default).
const JMETER: Source = Source {
    source: "JMeter Backend Listener (InfluxDB line protocol), per send interval",
    percentiles: "not known from interval aggregates; import the run's JTL to replace these figures with exact ones",
};

fn second_of(t_ms: i64) -> i64 {
    t_ms.div_euclid(1000) * 1000
}

impl IntervalRun {
    pub fn new() -> Self {
        Self::with_limits(RunLimits::default())
    }

    /// An empty run held to `limits` (labels, label and message length).
    pub fn with_limits(limits: RunLimits) -> Self {
        IntervalRun {
            limits,
            ..Self::default()
        }
    }

    /// The same run, its figures said to come from `source` (what `reported` shows).
    pub fn from_source(mut self, source: Source) -> Self {
        self.source = Some(source);
        self
    }

    /// The name `name` is counted under: cut to the label limit, or [`OTHER_LABELS`] once
    /// the run has `max_labels` labels.
    fn label_name(&mut self, name: &str) -> String {
        let cut = truncate_chars(name, self.limits.max_label_chars.max(1));
        if self.label_index.contains_key(cut.as_ref())
            || self.labels.len() < self.limits.max_labels.max(1)
        {
            return cut.into_owned();
        }
        use std::hash::BuildHasher;
        if self.folded.len() < super::builder::MAX_FOLDED_TRACKED {
            self.folded
                .insert(FxBuild::default().hash_one(cut.as_ref()));
        }
        OTHER_LABELS.to_string()
    }

    fn label(&mut self, name: &str) -> &mut LabelRun {
        let name = self.label_name(name);
        let i = match self.label_index.get(&name) {
            Some(&i) => i,
            None => {
                self.labels.push(LabelRun {
                    name: name.clone(),
                    ..LabelRun::default()
                });
                self.label_index.insert(name, self.labels.len() - 1);
                self.labels.len() - 1
            }
        };
        &mut self.labels[i]
    }

    /// One label's interval ending at `t_ms`: `count` samples with the given mean, min and
    /// max (ms) and bytes.
    #[expect(
        clippy::too_many_arguments,
        reason = "one field per figure JMeter sends"
    )]
    pub fn interval(
        &mut self,
        label: &str,
        t_ms: i64,
        count: u64,
        mean_ms: f64,
        min_ms: f64,
        max_ms: f64,
        bytes_received: u64,
        bytes_sent: u64,
    ) {
        if count == 0 {
            return;
        }
        let len_ms = self
            .label(label)
            .last_t_ms
            .map_or(DEFAULT_INTERVAL_MS, |prev| {
                (t_ms - prev).clamp(1000, MAX_INTERVAL_MS)
            });
        // JMeter's seconds: as many as the interval is long, from the one it starts in.
        let secs = (len_ms / 1000).max(1) as u64;
        self.spread(
            label,
            [t_ms - len_ms, t_ms],
            secs,
            [count, 0],
            [mean_ms, min_ms, max_ms],
            [bytes_received, bytes_sent],
        );
    }

    /// One label's interval over `[start_ms, end_ms)` (a sender that says when its
    /// interval began, k6's OpenTelemetry output): `count` requests of which `failed`
    /// failed, with the given mean, min and max (ms), spread evenly over the seconds the
    /// span touches. A span longer than a minute is taken as its last minute.
    #[expect(
        clippy::too_many_arguments,
        reason = "one field per figure the sender gives"
    )]
    pub fn span(
        &mut self,
        label: &str,
        start_ms: i64,
        end_ms: i64,
        count: u64,
        failed: u64,
        mean_ms: f64,
        min_ms: f64,
        max_ms: f64,
    ) {
        let start = end_ms - (end_ms - start_ms).clamp(1, MAX_INTERVAL_MS);
        // Every second the span touches.
        let secs = ((second_of(end_ms - 1) - second_of(start)) / 1000 + 1) as u64;
        self.spread(
            label,
            [start, end_ms],
            secs,
            [count, failed.min(count)],
            [mean_ms, min_ms, max_ms],
            [0, 0],
        );
    }

    /// Adds `[count, failed]` samples of `label` over `[start, end)`, `secs` seconds from
    /// the one `start` falls in each an even share (failures shared the same way), with
    /// `[mean, min, max]` (ms) and `[received, sent]` bytes.
    fn spread(
        &mut self,
        label: &str,
        [start, end]: [i64; 2],
        secs: u64,
        [count, failed]: [u64; 2],
        [mean_ms, min_ms, max_ms]: [f64; 3],
        [bytes_received, bytes_sent]: [u64; 2],
    ) {
        if count == 0 {
            return;
        }
        let l = self.label(label);
        l.last_t_ms = Some(end);
        l.first_start_ms = Some(l.first_start_ms.map_or(start, |f| f.min(start)));
        l.last_end_ms = Some(l.last_end_ms.map_or(end, |e| e.max(end)));
        l.total.add(count, failed, mean_ms, min_ms, max_ms);
        l.total.bytes_received += bytes_received;
        l.total.bytes_sent += bytes_sent;
        let first = second_of(start);
        let secs = secs.max(1);
        let share = |n: u64, i: u64| n / secs + u64::from(i < n % secs);
        for i in 0..secs {
            let (c, f) = (share(count, i), share(failed, i));
            if c > 0 || f > 0 {
                l.second(first + i as i64 * 1000)
                    .add(c, f, mean_ms, min_ms, max_ms);
            }
        }
        self.changed
            .extend((0..secs).map(|i| first + i as i64 * 1000));
    }

    /// Failed samples of a label in the interval ending at `t_ms` (spread like its count).
    pub fn interval_errors(&mut self, label: &str, t_ms: i64, errors: u64) {
        if errors == 0 {
            return;
        }
        let l = self.label(label);
        l.total.errors += errors;
        let len_ms = DEFAULT_INTERVAL_MS
            .min(t_ms - l.first_start_ms.unwrap_or(t_ms - DEFAULT_INTERVAL_MS))
            .max(1000);
        let secs: Vec<i64> = l
            .seconds
            .range(second_of(t_ms - len_ms)..=second_of(t_ms))
            .map(|(s, _)| *s)
            .collect();
        if secs.is_empty() {
            l.second(second_of(t_ms - 1)).errors += errors;
            self.changed.insert(second_of(t_ms - 1));
            return;
        }
        let n = secs.len() as u64;
        for (i, s) in secs.iter().enumerate() {
            let share = errors / n + u64::from((i as u64) < errors % n);
            if let Some(acc) = l.seconds.get_mut(s) {
                acc.errors += share;
            }
        }
        self.changed.extend(secs);
    }

    /// A kind of error (response code and message) seen `count` times in an interval.
    pub fn error_kind(&mut self, label: &str, t_ms: i64, code: &str, message: &str, count: u64) {
        let label = self.label_name(label);
        let code = truncate_chars(code, self.limits.max_label_chars.max(1)).into_owned();
        let mut message =
            truncate_chars(message, self.limits.max_message_chars.max(1)).into_owned();
        let mut key = (label, code, message.clone());
        if !self.error_index.contains_key(&key) && self.errors.len() >= MAX_ERROR_GROUPS {
            message = ERROR_GROUP_OVERFLOW_MESSAGE.to_string();
            key = (key.0, String::new(), message.clone());
        }
        match self.error_index.get(&key) {
            Some(&i) => {
                let e = &mut self.errors[i];
                e.count += count;
                e.first_seen_ms = e.first_seen_ms.min(t_ms);
                e.last_seen_ms = e.last_seen_ms.max(t_ms);
            }
            None => {
                self.errors.push(ErrorGroup {
                    label: key.0.clone(),
                    response_code: key.1.clone(),
                    message,
                    count,
                    first_seen_ms: t_ms,
                    last_seen_ms: t_ms,
                });
                self.error_index.insert(key, self.errors.len() - 1);
            }
        }
    }

    /// Active users at `t_ms` (dropped when that second is forgotten already: a user
    /// count cannot be added to a stored one).
    pub fn users(&mut self, t_ms: i64, users: u32) {
        if second_of(t_ms) < self.users_forgotten_before {
            return;
        }
        self.users.insert(second_of(t_ms), users);
        self.changed.insert(second_of(t_ms));
    }

    /// `users` active over `[start_ms, end_ms]` (a gauge read at `end_ms`, taken to hold
    /// since the previous reading; at most the last minute of it).
    pub fn users_over(&mut self, start_ms: i64, end_ms: i64, users: u32) {
        let start = start_ms.max(end_ms - MAX_INTERVAL_MS).min(end_ms);
        let mut s = second_of(start);
        while s <= second_of(end_ms) {
            self.users(s, users);
            s += 1000;
        }
    }

    /// Samples received so far.
    pub fn samples(&self) -> u64 {
        self.labels.iter().map(|l| l.total.count).sum()
    }

    /// The run as it stands: statistics in full, buckets of the seconds still kept (all
    /// of them until [`take_changes`](Self::take_changes) is first called).
    pub fn snapshot(&self) -> RunData {
        self.build(None)
    }

    /// Like [`snapshot`](Self::snapshot), but `buckets` holds only the seconds changed
    /// since the previous call (every second at the first call), so its cost follows the
    /// labels and the new seconds, never the run's length. Storing each call's buckets
    /// by (label, start), replacing, then adding its [`RunChanges::added`] buckets (points
    /// for seconds forgotten earlier) yields exactly the buckets of a run fed the same
    /// points that forgot nothing. Afterwards each label's seconds older than [`KEEP_MS`]
    /// before its newest interval are forgotten.
    pub fn take_changes(&mut self) -> RunChanges {
        let changed = std::mem::take(&mut self.changed);
        let data = self.build(Some(&changed));
        let added = self.take_late();
        self.forget_old_seconds();
        RunChanges { data, added }
    }

    /// The points since the previous call as a run of their own — statistics, error
    /// groups, and every second they touched as buckets to *add* ([`RunChanges::added`];
    /// `data.buckets` is empty) — then forgets them, keeping only what places later points
    /// (each label's previous interval end, the label list, the folded labels). For a
    /// process that receives part of a stream and adds its parts to the stored run (see
    /// [`super::merge::add_delta`]). Not to be mixed with
    /// [`take_changes`](Self::take_changes) on one run.
    pub fn take_delta(&mut self) -> RunChanges {
        let mut data = self.build(None);
        let mut added = std::mem::take(&mut data.buckets);
        added.extend(self.take_late());
        for l in &mut self.labels {
            l.total = Acc::default();
            l.seconds.clear();
            l.first_start_ms = None;
            l.last_end_ms = None;
        }
        self.errors.clear();
        self.error_index.clear();
        self.users.clear();
        self.changed.clear();
        RunChanges { data, added }
    }

    /// The late points as buckets to add: per label, and their sum per second for the run.
    fn take_late(&mut self) -> Vec<Bucket> {
        let mut run: BTreeMap<i64, Acc> = BTreeMap::new();
        let mut out = Vec::new();
        for l in &mut self.labels {
            for (s, acc) in std::mem::take(&mut l.late) {
                run.entry(s).or_default().merge(&acc);
                out.push(interval_bucket(Some(l.name.clone()), s, &acc, None));
            }
        }
        let mut all: Vec<Bucket> = run
            .iter()
            .map(|(s, acc)| interval_bucket(None, *s, acc, None))
            .collect();
        all.append(&mut out);
        all
    }

    /// Drops each label's seconds older than [`KEEP_MS`] before its newest interval, and
    /// the users of seconds older than that before the newest of all.
    fn forget_old_seconds(&mut self) {
        let mut newest = i64::MIN;
        for l in &mut self.labels {
            let Some(last) = l.last_t_ms else { continue };
            newest = newest.max(last);
            let cut = second_of(last.saturating_sub(KEEP_MS));
            if cut > l.forgotten_before {
                l.seconds = l.seconds.split_off(&cut);
                l.forgotten_before = cut;
            }
        }
        if newest > i64::MIN {
            let cut = second_of(newest.saturating_sub(KEEP_MS));
            if cut > self.users_forgotten_before {
                self.users = self.users.split_off(&cut);
                self.users_forgotten_before = cut;
            }
        }
    }

    /// The run, with the buckets of the seconds in `only` (all when `None`).
    fn build(&self, only: Option<&BTreeSet<i64>>) -> RunData {
        let stats = |acc: &Acc, first: Option<i64>, last: Option<i64>| {
            let window_ms = first.zip(last).map(|(f, l)| l - f);
            Stats {
                count: acc.count,
                errors: acc.errors,
                error_pct: (acc.count > 0).then(|| acc.errors as f64 * 100.0 / acc.count as f64),
                min_ms: acc.min_ms,
                mean_ms: (acc.count > 0).then(|| acc.sum_ms / acc.count as f64),
                max_ms: acc.max_ms,
                first_start_ms: first,
                last_end_ms: last,
                window_ms,
                throughput_rps: window_ms
                    .filter(|w| *w > 0)
                    .map(|w| acc.count as f64 * 1000.0 / w as f64),
                bytes_received: acc.bytes_received,
                bytes_sent: acc.bytes_sent,
                ..Stats::default()
            }
        };
        let bucket = interval_bucket;
        let mut overall = Acc::default();
        let mut overall_seconds: BTreeMap<i64, Acc> = BTreeMap::new();
        let mut buckets = Vec::new();
        for l in &self.labels {
            overall.merge(&l.total);
            let seconds: Box<dyn Iterator<Item = (&i64, &Acc)>> = match only {
                None => Box::new(l.seconds.iter()),
                Some(only) => Box::new(only.iter().filter_map(|s| l.seconds.get_key_value(s))),
            };
            for (s, acc) in seconds {
                let o = overall_seconds.entry(*s).or_default();
                o.add(
                    acc.count,
                    acc.errors,
                    acc.sum_ms / acc.count.max(1) as f64,
                    acc.min_ms.unwrap_or(f64::NAN),
                    acc.max_ms.unwrap_or(f64::NAN),
                );
                buckets.push(bucket(
                    Some(l.name.clone()),
                    *s,
                    acc,
                    self.users.get(s).copied(),
                ));
            }
        }
        let first = self.labels.iter().filter_map(|l| l.first_start_ms).min();
        let last = self.labels.iter().filter_map(|l| l.last_end_ms).max();
        let mut run_buckets: Vec<Bucket> = overall_seconds
            .iter()
            .map(|(s, acc)| bucket(None, *s, acc, self.users.get(s).copied()))
            .collect();
        run_buckets.append(&mut buckets);
        RunData {
            overall: stats(&overall, first, last),
            labels: self
                .labels
                .iter()
                .map(|l| LabelStats {
                    label: l.name.clone(),
                    is_transaction: false,
                    stats: stats(&l.total, l.first_start_ms, l.last_end_ms),
                })
                .collect(),
            buckets: run_buckets,
            errors: self.errors.clone(),
            folded_labels: self.folded.len() as u64,
            reported: {
                let source = self.source.unwrap_or(JMETER);
                serde_json::json!({
                    "source": source.source,
                    "percentiles": source.percentiles,
                })
            },
            ..RunData::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_beyond_the_limit_are_folded_and_long_names_cut() {
        let mut r = IntervalRun::with_limits(RunLimits {
            max_labels: 2,
            max_label_chars: 8,
            ..RunLimits::default()
        });
        for (i, name) in ["a", "b", "c", "d", "a", "a-very-long-label"]
            .iter()
            .enumerate()
        {
            r.interval(
                name,
                1_700_000_005_000 + i as i64 * 5_000,
                10,
                5.0,
                1.0,
                9.0,
                0,
                0,
            );
        }
        r.error_kind("zzz", 1_700_000_010_000, "500", &"x".repeat(10_000), 2);
        let d = r.snapshot();
        let names: Vec<&str> = d.labels.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(names, ["a", "b", OTHER_LABELS]);
        assert_eq!(d.labels[2].stats.count, 30, "c, d and the long one");
        assert_eq!(d.folded_labels, 4, "c, d, a-very-l…, zzz");
        assert_eq!(d.overall.count, 60);
        assert_eq!(d.errors[0].label, OTHER_LABELS);
        assert_eq!(d.errors[0].message.chars().count(), 2_048);
    }

    #[test]
    fn intervals_spread_over_their_seconds_and_sum_exactly() {
        let mut r = IntervalRun::new();
        // Two 5 s intervals of one label: 12 then 8 samples; 3 failures in the second.
        r.interval("GET /", 10_000, 12, 80.0, 20.0, 160.0, 4560, 1200);
        r.interval("GET /", 15_000, 8, 50.0, 10.0, 90.0, 100, 10);
        r.interval_errors("GET /", 15_000, 3);
        r.users(12_000, 4);
        let d = r.snapshot();
        assert_eq!((d.overall.count, d.overall.errors), (20, 3));
        assert_eq!(d.overall.mean_ms, Some((12.0 * 80.0 + 8.0 * 50.0) / 20.0));
        assert_eq!(
            (d.overall.min_ms, d.overall.max_ms),
            (Some(10.0), Some(160.0))
        );
        assert_eq!(
            (d.overall.first_start_ms, d.overall.last_end_ms),
            (Some(5_000), Some(15_000))
        );
        assert_eq!(d.overall.throughput_rps, Some(2.0));
        assert_eq!(d.overall.p95_ms, None, "no percentiles from aggregates");
        let run: Vec<(i64, u64, u64)> = d
            .buckets
            .iter()
            .filter(|b| b.label.is_none())
            .map(|b| (b.start_ms, b.count, b.errors))
            .collect();
        assert_eq!(run.len(), 10);
        assert_eq!(run.iter().map(|b| b.1).sum::<u64>(), 20);
        assert_eq!(run.iter().map(|b| b.2).sum::<u64>(), 3);
        assert_eq!(run[0], (5_000, 3, 0), "12 over 5 s: 3, 3, 2, 2, 2");
        assert_eq!(
            d.buckets
                .iter()
                .find(|b| b.start_ms == 12_000 && b.label.is_none())
                .unwrap()
                .active_users,
            Some(4)
        );
    }

    #[test]
    fn changes_stored_in_turn_equal_a_run_that_forgets_nothing() {
        use std::collections::BTreeMap;
        // `r` hands out its changes and forgets old seconds; `whole` is fed the same
        // points and never asked, so it keeps every second.
        let mut r = IntervalRun::new();
        let mut whole = IntervalRun::new();
        type Stored = BTreeMap<(Option<String>, i64), Bucket>;
        let mut stored = Stored::new();
        // As the store does: changed buckets replace, added ones add.
        fn store(stored: &mut Stored, c: RunChanges) -> usize {
            let n = c.data.buckets.len() + c.added.len();
            for b in c.data.buckets {
                stored.insert((b.label.clone(), b.start_ms), b);
            }
            for b in c.added {
                match stored.get_mut(&(b.label.clone(), b.start_ms)) {
                    Some(old) => old.add(&b).unwrap(),
                    None => {
                        stored.insert((b.label.clone(), b.start_ms), b);
                    }
                }
            }
            n
        }
        let t0 = 1_700_000_000_000i64;
        for i in 1..=400i64 {
            let t = t0 + i * 5_000;
            for (j, label) in ["a", "b"].iter().enumerate() {
                for run in [&mut r, &mut whole] {
                    // Means that are whole ms, so every bucket's sum is exact.
                    run.interval(
                        label,
                        t,
                        10 + i as u64 % 7,
                        40.0 + j as f64,
                        5.0,
                        90.0,
                        100,
                        10,
                    );
                    if i % 9 == 0 {
                        run.interval_errors(label, t, 3);
                    }
                }
            }
            r.users(t - 2_000, i as u32);
            whole.users(t - 2_000, i as u32);
            if i % 3 == 0 {
                let n = store(&mut stored, r.take_changes());
                // 3 intervals × 5 s × (2 labels + the run), never the whole run.
                assert!(n <= 3 * 5 * 3 + 6, "{n} buckets in one change");
            }
        }
        // 2,000 s streamed: only the last KEEP_MS (+ the newest interval) are held.
        store(&mut stored, r.take_changes());
        let held = r.labels.iter().map(|l| l.seconds.len()).max().unwrap();
        assert!(held <= (KEEP_MS / 1000) as usize + 5, "{held} seconds held");
        assert!(r.users.len() <= (KEEP_MS / 1000) as usize + 5);
        // An interval sent out of order, for a forgotten second: added to what was
        // stored, not lost and not counted twice.
        for run in [&mut r, &mut whole] {
            run.interval("a", t0 + 100 * 5_000, 6, 70.0, 3.0, 300.0, 0, 0);
        }
        let late = r.take_changes();
        assert_eq!(late.added.len(), 2, "the label's second and the run's");
        store(&mut stored, late);
        let mut want = whole.snapshot().buckets;
        want.sort_by(|a, b| (&a.label, a.start_ms).cmp(&(&b.label, b.start_ms)));
        assert_eq!(want.len(), 3 * 400 * 5);
        assert_eq!(stored.values().cloned().collect::<Vec<_>>(), want);
        assert_eq!(r.snapshot().overall, whole.snapshot().overall);
        assert!(r.take_changes().data.buckets.is_empty());
        // Errors of an old interval: counted once, in the label's and the run's buckets.
        let errors = |stored: &Stored, label: Option<&str>| {
            stored
                .values()
                .filter(|b| b.label.as_deref() == label)
                .map(|b| b.errors)
                .sum::<u64>()
        };
        let before = (errors(&stored, Some("b")), errors(&stored, None));
        r.interval_errors("b", t0 + 50 * 5_000, 4);
        store(&mut stored, r.take_changes());
        assert_eq!(
            (errors(&stored, Some("b")), errors(&stored, None)),
            (before.0 + 4, before.1 + 4)
        );
        assert_eq!(r.snapshot().overall.errors, before.1 + 4);
    }

    #[test]
    fn spans_cover_their_own_seconds_with_failures_and_users() {
        let mut r = IntervalRun::new();
        // 10 requests (4 failed) over 12.5 s → 15.5 s: seconds 12, 13, 14, 15.
        r.span("a", 12_500, 15_500, 10, 4, 20.0, 5.0, 80.0);
        r.users_over(12_500, 15_500, 3);
        // Then 3 over 15.5 → 16.0 s: second 15 only.
        r.span("a", 15_500, 16_000, 3, 0, 40.0, 5.0, 90.0);
        let d = r.snapshot();
        assert_eq!(d.overall.first_start_ms, Some(12_500));
        assert_eq!(d.overall.last_end_ms, Some(16_000));
        assert_eq!(d.overall.window_ms, Some(3_500));
        assert_eq!((d.overall.count, d.overall.errors), (13, 4));
        let run: Vec<(i64, u64, u64, Option<u32>)> = d
            .buckets
            .iter()
            .filter(|b| b.label.is_none())
            .map(|b| (b.start_ms, b.count, b.errors, b.active_users))
            .collect();
        assert_eq!(
            run,
            [
                (12_000, 3, 1, Some(3)),
                (13_000, 3, 1, Some(3)),
                (14_000, 2, 1, Some(3)),
                (15_000, 5, 1, Some(3)),
            ]
        );
        // A span of an hour is taken as its last minute; failures never exceed requests.
        let mut long = IntervalRun::new();
        long.span("a", 0, 3_600_000, 60, 99, 1.0, 1.0, 1.0);
        let d = long.snapshot();
        assert_eq!(d.overall.first_start_ms, Some(3_540_000));
        assert_eq!((d.overall.count, d.overall.errors), (60, 60));
        assert_eq!(d.buckets.iter().filter(|b| b.label.is_none()).count(), 60);
    }
}
