//! Streams samples into a run's aggregates in bounded memory.
//!
//! Owns [`RunBuilder`]: per-label and run statistics (exact, see [`super::StatsAcc`]),
//! per-second buckets with HdrHistograms, error groups and rejected-row bookkeeping. It
//! never sees raw input: parsers in `sources::ingest` hand it [`Sample`]s and rejections.
//!
//! Cardinality: at most [`RunLimits::max_labels`] labels are kept; samples of further labels
//! are counted under [`OTHER_LABELS`] and the number of labels folded is reported
//! ([`RunData::folded_labels`]). Labels longer than [`RunLimits::max_label_chars`] and
//! error messages longer than [`RunLimits::max_message_chars`] are cut and marked with
//! [`TRUNCATION_MARK`](super::limits::TRUNCATION_MARK).
//!
//! Memory: statistics are histograms of distinct values; per-second buckets keep a full
//! histogram only while their second is inside the *open window* (by default
//! [`DEFAULT_OPEN_WINDOW_S`] seconds behind the newest start seen) and are then finalized
//! into their serialized form. Samples arrive roughly, not strictly, in time order (JMeter
//! writes a sample when it ends; distributed runs append batches late), so a sample for an
//! already finalized second is still counted: its bucket is deserialized, updated and
//! serialized again (correct, only slower).

use std::collections::HashMap;
use std::collections::VecDeque;

use hdrhistogram::Histogram;

use super::distribution::Distribution;
use super::hdr::{deserialize_histogram, new_histogram, serialize_histogram};
use super::limits::{OTHER_LABELS, RunLimits, truncate_chars};
use super::{Bucket, ErrorGroup, LabelStats, RejectedRow, RunData, Sample, StatsAcc};

/// Seconds behind the newest sample start for which buckets stay open (full histograms).
///
/// A JMeter row is written when its sample ends, so a sample that started T s ago arrives
/// up to its elapsed time (plus a flush delay) late; 60 s covers every response time but
/// timeouts while keeping at most 61 open histograms per label.
pub const DEFAULT_OPEN_WINDOW_S: i64 = 60;

/// Distinct (label, response code, message) error groups kept per run; further distinct
/// errors are counted in one overflow group per label.
pub const MAX_ERROR_GROUPS: usize = 10_000;

/// Rejected rows whose line and reason are kept; all are counted.
pub const MAX_REJECTED_DETAILS: usize = 1_000;

/// Message of a label's overflow error group.
pub const ERROR_GROUP_OVERFLOW_MESSAGE: &str =
    "(other errors: the run has more than 10000 distinct label/code/message groups)";

/// A live run's changes since the previous [`RunBuilder::take_changes`].
#[derive(Debug, Clone, Default)]
pub struct RunChanges {
    /// The run's statistics, labels, error groups and rejected rows in full; `buckets`
    /// holds the changed buckets in their whole current state (they replace stored ones).
    pub data: RunData,
    /// Samples that arrived for seconds handed out and forgotten earlier: each bucket
    /// holds only the new samples and is *added* to the stored bucket of its label and
    /// second (or stored as it is when there is none).
    pub added: Vec<Bucket>,
}

/// Builds [`RunData`] from a stream of samples in bounded memory.
///
/// Push every accepted sample with [`push`](Self::push) and every damaged row with
/// [`reject`](Self::reject), then call [`finish`](Self::finish).
#[derive(Debug, Clone)]
pub struct RunBuilder {
    limits: RunLimits,
    labels: Vec<LabelAcc>,
    label_index: HashMap<Box<str>, u32, FxBuild>,
    buckets: BucketWindow,
    error_groups: Vec<ErrorGroup>,
    distinct_error_groups: usize,
    samples: u64,
    rejected_rows: u64,
    rejected: Vec<RejectedRow>,
    /// Hashes of the distinct labels folded into [`OTHER_LABELS`] (8 bytes each, at most
    /// [`MAX_FOLDED_TRACKED`]).
    folded: std::collections::HashSet<u64, FxBuild>,
    /// Index of the [`OTHER_LABELS`] label once created.
    other_label: Option<u32>,
}

/// Distinct folded labels counted exactly; beyond this many the count stops growing
/// (and says "at least").
pub const MAX_FOLDED_TRACKED: usize = 1 << 22;

impl Default for RunBuilder {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug, Clone)]
struct LabelAcc {
    name: String,
    // Kept apart so that run totals are the union of every label's `requests` (merged
    // once at the end) instead of a second accumulator updated per sample.
    requests: StatsAcc,
    transactions: StatsAcc,
    /// response code → message → index into `error_groups`.
    error_index: HashMap<Box<str>, HashMap<Box<str>, usize, FxBuild>, FxBuild>,
    overflow_group: Option<usize>,
}

impl LabelAcc {
    /// Every sample of the label (requests and transaction rows alike).
    fn distribution(&self) -> Distribution {
        if self.transactions.count() == 0 {
            return Distribution::from(self.requests.histogram());
        }
        let mut all = self.requests.histogram().clone();
        all.merge(self.transactions.histogram());
        Distribution::from(&all)
    }

    /// The failed samples among [`Self::distribution`]'s.
    fn failed_distribution(&self) -> Distribution {
        if self.transactions.count() == 0 {
            return Distribution::from(self.requests.failed_histogram());
        }
        let mut all = self.requests.failed_histogram().clone();
        all.merge(self.transactions.failed_histogram());
        Distribution::from(&all)
    }

    fn stats(&self) -> LabelStats {
        let stats = match (self.requests.count(), self.transactions.count()) {
            (_, 0) => self.requests.stats(),
            (0, _) => self.transactions.stats(),
            _ => {
                let mut all = self.requests.clone();
                all.merge(&self.transactions);
                all.stats()
            }
        };
        LabelStats {
            label: self.name.clone(),
            is_transaction: self.transactions.count() > 0,
            stats,
        }
    }
}

impl RunBuilder {
    /// A builder with the default open window ([`DEFAULT_OPEN_WINDOW_S`]) and the default
    /// limits ([`RunLimits::default`]).
    pub fn new() -> Self {
        Self::with_open_window_s(DEFAULT_OPEN_WINDOW_S)
    }

    /// A builder with the default open window that holds samples to `limits`.
    pub fn with_limits(limits: RunLimits) -> Self {
        let mut b = Self::new();
        b.limits = limits;
        b
    }

    /// A builder that keeps buckets open for `window_s` seconds behind the newest start
    /// (at least 1). Smaller windows use less memory and finalize more late samples.
    pub fn with_open_window_s(window_s: i64) -> Self {
        RunBuilder {
            limits: RunLimits::default(),
            labels: Vec::new(),
            label_index: HashMap::default(),
            buckets: BucketWindow::new(window_s.max(1)),
            error_groups: Vec::new(),
            distinct_error_groups: 0,
            samples: 0,
            rejected_rows: 0,
            rejected: Vec::new(),
            folded: std::collections::HashSet::default(),
            other_label: None,
        }
    }

    /// Adds the sample read at `line` (1-based, where its row starts; for binary input the
    /// record number): counted when its start and elapsed time are inside the limits
    /// ([`RunLimits::samples`]), else rejected with the reason. Returns the index of the
    /// label it was counted under (the order of [`RunData::labels`]; a folded label's
    /// samples go to [`OTHER_LABELS`]), or `None` when it was rejected.
    pub fn push(&mut self, line: u64, s: &Sample<'_>) -> Option<usize> {
        if let Err(why) = self.limits.samples.check(s.start_ms, s.elapsed_ms) {
            self.reject(line, why);
            return None;
        }
        Some(self.push_checked(s) as usize)
    }

    fn push_checked(&mut self, s: &Sample<'_>) -> u32 {
        let label_idx = match self.label_index.get(s.label) {
            Some(&i) => i,
            None => self.resolve_label(s.label),
        };
        self.samples += 1;
        let label = &mut self.labels[label_idx as usize];
        if s.is_transaction {
            label.transactions.push(s);
        } else {
            label.requests.push(s);
        }
        self.buckets.push(label_idx + 1, !s.is_transaction, s);
        if !s.success {
            self.count_error(label_idx, s);
        }
        label_idx
    }

    /// The label a name not in the index is counted under: its cut form if that is known,
    /// a new label while there is room, else [`OTHER_LABELS`].
    #[cold]
    fn resolve_label(&mut self, label: &str) -> u32 {
        let cut = truncate_chars(label, self.limits.max_label_chars);
        if let Some(&i) = self.label_index.get(cut.as_ref()) {
            return i;
        }
        if self.labels.len() < self.limits.max_labels {
            return self.new_label(&cut);
        }
        if self.folded.len() < MAX_FOLDED_TRACKED {
            use std::hash::BuildHasher;
            self.folded
                .insert(FxBuild::default().hash_one(cut.as_ref()));
        }
        match self.other_label {
            Some(i) => i,
            None => {
                let i = self.new_label(OTHER_LABELS);
                self.other_label = Some(i);
                i
            }
        }
    }

    #[cold]
    fn new_label(&mut self, label: &str) -> u32 {
        let idx = u32::try_from(self.labels.len()).expect("fewer than 2³² labels");
        self.labels.push(LabelAcc {
            name: label.to_owned(),
            requests: StatsAcc::new(),
            transactions: StatsAcc::new(),
            error_index: HashMap::default(),
            overflow_group: None,
        });
        self.label_index.insert(label.into(), idx);
        idx
    }

    fn count_error(&mut self, label_idx: u32, s: &Sample<'_>) {
        let message = truncate_chars(s.message, self.limits.max_message_chars);
        let code = truncate_chars(s.response_code, self.limits.max_label_chars);
        let (message, code) = (message.as_ref(), code.as_ref());
        let label = &mut self.labels[label_idx as usize];
        let known = label
            .error_index
            .get(code)
            .and_then(|m| m.get(message))
            .copied();
        let group = match known {
            Some(g) => g,
            None if self.distinct_error_groups < MAX_ERROR_GROUPS => {
                self.distinct_error_groups += 1;
                let g = self.error_groups.len();
                self.error_groups.push(ErrorGroup {
                    label: label.name.clone(),
                    response_code: code.to_owned(),
                    message: message.to_owned(),
                    count: 0,
                    first_seen_ms: s.start_ms,
                    last_seen_ms: s.start_ms,
                });
                label
                    .error_index
                    .entry(code.into())
                    .or_default()
                    .insert(message.into(), g);
                g
            }
            None => match label.overflow_group {
                Some(g) => g,
                None => {
                    let g = self.error_groups.len();
                    self.error_groups.push(ErrorGroup {
                        label: label.name.clone(),
                        response_code: String::new(),
                        message: ERROR_GROUP_OVERFLOW_MESSAGE.to_owned(),
                        count: 0,
                        first_seen_ms: s.start_ms,
                        last_seen_ms: s.start_ms,
                    });
                    label.overflow_group = Some(g);
                    g
                }
            },
        };
        let e = &mut self.error_groups[group];
        e.count += 1;
        e.first_seen_ms = e.first_seen_ms.min(s.start_ms);
        e.last_seen_ms = e.last_seen_ms.max(s.start_ms);
    }

    /// Counts a row left out of every statistic; details are kept for the first
    /// [`MAX_REJECTED_DETAILS`]. `line` is 1-based, where the row starts.
    pub fn reject(&mut self, line: u64, reason: impl Into<String>) {
        self.reject_with(line, || reason.into());
    }

    /// Like [`reject`](Self::reject), but builds the reason only if its details are kept.
    pub fn reject_with(&mut self, line: u64, reason: impl FnOnce() -> String) {
        self.rejected_rows += 1;
        if self.rejected.len() < MAX_REJECTED_DETAILS {
            self.rejected.push(RejectedRow {
                line,
                reason: reason(),
            });
        }
    }

    /// Samples accepted so far (transaction rows included).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Rows rejected so far.
    pub fn rejected_rows(&self) -> u64 {
        self.rejected_rows
    }

    /// The first rejected row kept, if any.
    pub fn first_rejected(&self) -> Option<&RejectedRow> {
        self.rejected.first()
    }

    /// Buckets currently open (holding a full histogram).
    pub fn open_buckets(&self) -> usize {
        self.buckets.open_count
    }

    /// Buckets already finalized into their serialized form.
    pub fn finalized_buckets(&self) -> usize {
        self.buckets.closed.len()
    }

    /// Finalizes every bucket and returns the run's aggregates (see [`RunData`] for the
    /// order of each list). Error groups are sorted by count, highest first, then by
    /// first-seen time.
    pub fn finish(mut self) -> RunData {
        self.buckets.close_all();
        let closed = std::mem::take(&mut self.buckets.closed);
        let buckets = closed
            .into_iter()
            .map(|((scope, _), b)| (scope, b))
            .collect();
        self.run_data(buckets)
    }

    /// Keeps note of the buckets that change from now on, for
    /// [`take_changes`](Self::take_changes), and forgets buckets once handed out and
    /// finalized, so memory stays flat however long the run. A live run calls it once,
    /// before its first sample; after it [`finish`](Self::finish) holds only the buckets
    /// not yet handed out.
    pub fn track_changes(&mut self) {
        self.buckets.tracking = true;
    }

    /// The run's aggregates as they stand, with only the buckets that changed since the
    /// previous call (see [`RunChanges`]). Open buckets stay open; finalized buckets are
    /// forgotten once handed out. Cost: the labels' statistics, error groups and the
    /// changed buckets — never the run's whole length.
    ///
    /// Storing each call's `data.buckets` by (label, start), replacing, and adding its
    /// `added` buckets to the stored ones, yields exactly `finish()`'s buckets of a
    /// builder that did not track. Needs [`track_changes`](Self::track_changes).
    pub fn take_changes(&mut self) -> RunChanges {
        let (buckets, added) = self.buckets.take_changes();
        let data = self.run_data(buckets);
        let labels = &self.labels;
        let added = added
            .into_iter()
            .map(|(scope, mut b)| {
                b.label = (scope > 0).then(|| labels[scope as usize - 1].name.clone());
                b
            })
            .collect();
        RunChanges { data, added }
    }

    /// Everything but the buckets from the accumulators, with `buckets` named and sorted.
    fn run_data(&self, mut buckets: Vec<(u32, Bucket)>) -> RunData {
        let labels = &self.labels;
        let name = |scope: u32| (scope > 0).then(|| labels[scope as usize - 1].name.as_str());
        buckets.sort_unstable_by(|(sa, a), (sb, b)| {
            name(*sa).cmp(&name(*sb)).then(a.start_ms.cmp(&b.start_ms))
        });
        let buckets = buckets
            .into_iter()
            .map(|(scope, mut b)| {
                b.label = name(scope).map(str::to_owned);
                b
            })
            .collect();
        let mut overall = StatsAcc::new();
        for l in labels {
            overall.merge(&l.requests);
        }
        let mut errors = self.error_groups.clone();
        errors.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then(a.first_seen_ms.cmp(&b.first_seen_ms))
        });
        let mut distributions = vec![Distribution::from(overall.histogram())];
        distributions.extend(labels.iter().map(LabelAcc::distribution));
        let mut failed_distributions = vec![Distribution::from(overall.failed_histogram())];
        failed_distributions.extend(labels.iter().map(LabelAcc::failed_distribution));
        RunData {
            distributions,
            failed_distributions,
            overall: overall.stats(),
            labels: labels.iter().map(LabelAcc::stats).collect(),
            buckets,
            errors,
            rejected_rows: self.rejected_rows,
            rejected: self.rejected.clone(),
            summary_only: false,
            reported: serde_json::Value::Null,
            folded_labels: self.folded.len() as u64,
        }
    }
}

/// Per-second buckets: a ring of open seconds plus the finalized ones.
///
/// Scope 0 is the run (non-transaction samples), scope i + 1 is label i.
#[derive(Debug, Clone)]
struct BucketWindow {
    window_s: i64,
    /// Second (start_ms / 1000, floored) of `slots[0]`.
    base_sec: i64,
    /// One slot per second in `base_sec ..= base_sec + len - 1`; each holds one open
    /// bucket per scope that has samples in that second.
    slots: VecDeque<Vec<Option<Box<OpenBucket>>>>,
    open_count: usize,
    closed: HashMap<(u32, i64), Bucket, FxBuild>,
    /// Whether changes are noted (see [`RunBuilder::track_changes`]).
    tracking: bool,
    /// When tracking: samples for seconds already handed out and forgotten, to be added
    /// to the stored buckets (see [`RunChanges::added`]).
    added: HashMap<(u32, i64), Bucket, FxBuild>,
}

#[derive(Debug, Clone)]
struct OpenBucket {
    count: u64,
    errors: u64,
    sum_ms: u64,
    min_ms: u64,
    max_ms: u64,
    active_users: Option<u32>,
    /// Samples arrived since the bucket was last handed out by `take_changes`.
    changed: bool,
    // u32 counts: one second of one label never holds 2³² samples; halves the memory.
    hist: Histogram<u32>,
}

impl OpenBucket {
    fn new() -> Self {
        OpenBucket {
            count: 0,
            errors: 0,
            sum_ms: 0,
            min_ms: u64::MAX,
            max_ms: 0,
            active_users: None,
            changed: false,
            hist: new_histogram(),
        }
    }

    #[inline]
    fn push(&mut self, s: &Sample<'_>) {
        self.count += 1;
        self.changed = true;
        self.errors += u64::from(!s.success);
        self.sum_ms = self.sum_ms.saturating_add(s.elapsed_ms);
        self.min_ms = self.min_ms.min(s.elapsed_ms);
        self.max_ms = self.max_ms.max(s.elapsed_ms);
        self.active_users = self.active_users.max(s.active_users);
        // Auto-resizing histograms accept every value up to i64::MAX / 2 ms.
        let _ = self.hist.record(s.elapsed_ms);
    }

    /// The bucket as it stands, serialized; the open one is left as it is.
    fn to_bucket(&self, start_ms: i64) -> Bucket {
        Bucket {
            label: None,
            start_ms,
            count: self.count,
            errors: self.errors,
            sum_ms: self.sum_ms,
            min_ms: self.min_ms,
            max_ms: self.max_ms,
            active_users: self.active_users,
            histogram: serialize_histogram(&self.hist),
        }
    }

    fn finish(self, start_ms: i64) -> Bucket {
        Bucket {
            label: None,
            start_ms,
            count: self.count,
            errors: self.errors,
            sum_ms: self.sum_ms,
            min_ms: self.min_ms,
            max_ms: self.max_ms,
            active_users: self.active_users,
            histogram: serialize_histogram(&self.hist),
        }
    }
}

impl BucketWindow {
    fn new(window_s: i64) -> Self {
        BucketWindow {
            window_s,
            base_sec: i64::MIN,
            slots: VecDeque::new(),
            open_count: 0,
            closed: HashMap::default(),
            tracking: false,
            added: HashMap::default(),
        }
    }

    /// The buckets changed since the last call (see [`RunBuilder::take_changes`]), by
    /// scope: whole ones (finalized ones are forgotten) and added ones.
    #[expect(clippy::type_complexity, reason = "two lists of (scope, bucket)")]
    fn take_changes(&mut self) -> (Vec<(u32, Bucket)>, Vec<(u32, Bucket)>) {
        let mut whole: Vec<(u32, Bucket)> = self
            .closed
            .drain()
            .map(|((scope, _), b)| (scope, b))
            .collect();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let sec = self.base_sec + i as i64;
            for (scope, cell) in slot.iter_mut().enumerate() {
                if let Some(b) = cell
                    && b.changed
                {
                    b.changed = false;
                    whole.push((scope as u32, b.to_bucket(sec * 1000)));
                }
            }
        }
        let added = self
            .added
            .drain()
            .map(|((scope, _), b)| (scope, b))
            .collect();
        self.closed.shrink_to(64);
        self.added.shrink_to(64);
        (whole, added)
    }

    /// Counts `s` in its label's bucket (scope `label_scope`) and, when `in_run`, in the
    /// run's bucket (scope 0) of the same second.
    #[inline]
    fn push(&mut self, label_scope: u32, in_run: bool, s: &Sample<'_>) {
        let sec = s.start_ms.div_euclid(1000);
        if self.slots.is_empty() && self.base_sec == i64::MIN {
            // Leave room for samples up to a window earlier than the first one.
            self.base_sec = sec.saturating_sub(self.window_s);
        }
        if sec < self.base_sec {
            if in_run {
                self.push_late(0, sec, s);
            }
            self.push_late(label_scope, sec, s);
            return;
        }
        if sec >= self.base_sec + self.slots.len() as i64 {
            self.advance_to(sec);
        }
        let slot = &mut self.slots[(sec - self.base_sec) as usize];
        let scope = label_scope as usize;
        if slot.len() <= scope {
            slot.resize_with(scope + 1, || None);
        }
        if in_run {
            open_bucket(&mut self.open_count, &mut slot[0]).push(s);
        }
        open_bucket(&mut self.open_count, &mut slot[scope]).push(s);
    }

    /// Makes `sec` the newest open second: finalizes seconds older than the window.
    fn advance_to(&mut self, sec: i64) {
        let new_base = self.base_sec.max(sec - self.window_s);
        while self.base_sec < new_base {
            match self.slots.pop_front() {
                Some(slot) => {
                    self.close_slot(self.base_sec, slot);
                    self.base_sec += 1;
                }
                None => self.base_sec = new_base,
            }
        }
        while self.base_sec + (self.slots.len() as i64) <= sec {
            self.slots.push_back(Vec::new());
        }
    }

    fn close_slot(&mut self, sec: i64, slot: Vec<Option<Box<OpenBucket>>>) {
        for (scope, bucket) in slot.into_iter().enumerate() {
            if let Some(b) = bucket {
                self.open_count -= 1;
                // Tracking: a bucket unchanged since it was handed out is stored as
                // it is and forgotten.
                if !self.tracking || b.changed {
                    self.closed
                        .insert((scope as u32, sec), b.finish(sec * 1000));
                }
            }
        }
    }

    fn close_all(&mut self) {
        while let Some(slot) = self.slots.pop_front() {
            self.close_slot(self.base_sec, slot);
            self.base_sec += 1;
        }
    }

    /// A sample for a second that is no longer open: update its finalized bucket.
    #[cold]
    fn push_late(&mut self, scope: u32, sec: i64, s: &Sample<'_>) {
        let known = self.closed.contains_key(&(scope, sec));
        let map = if self.tracking && !known {
            &mut self.added
        } else {
            &mut self.closed
        };
        match map.get_mut(&(scope, sec)) {
            Some(b) => {
                b.count += 1;
                b.errors += u64::from(!s.success);
                b.sum_ms = b.sum_ms.saturating_add(s.elapsed_ms);
                b.min_ms = b.min_ms.min(s.elapsed_ms);
                b.max_ms = b.max_ms.max(s.elapsed_ms);
                b.active_users = b.active_users.max(s.active_users);
                // The stored bytes were written by `serialize_histogram` above; if they
                // ever fail to read, rebuild from this sample rather than lose the count.
                let mut h = deserialize_histogram(&b.histogram).unwrap_or_else(|_| new_histogram());
                let _ = h.record(s.elapsed_ms);
                b.histogram = serialize_histogram(&h);
            }
            None => {
                let mut b = OpenBucket::new();
                b.push(s);
                map.insert((scope, sec), b.finish(sec * 1000));
            }
        }
    }
}

/// The open bucket in `cell`, created (and counted in `open_count`) on first use.
#[inline]
fn open_bucket<'a>(
    open_count: &mut usize,
    cell: &'a mut Option<Box<OpenBucket>>,
) -> &'a mut OpenBucket {
    cell.get_or_insert_with(|| {
        *open_count += 1;
        Box::new(OpenBucket::new())
    })
}

/// FxHash (rustc's hasher, from the `rustc-hash` crate): labels and small keys are
/// hashed once per sample, and SipHash's DoS resistance buys nothing for a file the user
/// chose to import.
pub(crate) type FxBuild = rustc_hash::FxBuildHasher;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::runs::hdr::summarize_serialized;

    fn sample(label: &str, start_ms: i64, elapsed_ms: u64, success: bool) -> Sample<'_> {
        Sample {
            label,
            start_ms,
            elapsed_ms,
            success,
            response_code: if success { "200" } else { "500" },
            message: if success {
                "OK"
            } else {
                "Internal Server Error"
            },
            bytes_received: 10,
            bytes_sent: 1,
            active_users: Some(3),
            is_transaction: false,
        }
    }

    #[test]
    fn buckets_finalize_behind_the_window_and_late_samples_still_count() {
        let mut b = RunBuilder::with_open_window_s(10);
        for sec in 0..1000i64 {
            b.push(
                1,
                &sample("a", 1_700_000_000_000 + sec * 1000 + 5, 100, true),
            );
            // Open: at most window + 1 seconds, 2 scopes (run + label "a").
            assert!(
                b.open_buckets() <= 22,
                "{} open at second {sec}",
                b.open_buckets()
            );
        }
        assert_eq!(b.open_buckets(), 22);
        assert_eq!(b.finalized_buckets(), 2 * 1000 - 22);
        // A sample for second 3, long finalized, and one for a second that never had data.
        b.push(1, &sample("a", 1_700_000_003_500, 300, false));
        b.push(1, &sample("a", 1_699_999_000_000, 7, true));
        let run = b.finish();
        assert_eq!(run.buckets.len(), 2 * 1001);
        let run_b3 = run
            .buckets
            .iter()
            .find(|b| b.label.is_none() && b.start_ms == 1_700_000_003_000)
            .unwrap();
        assert_eq!(
            (run_b3.count, run_b3.errors, run_b3.sum_ms, run_b3.max_ms),
            (2, 1, 400, 300)
        );
        let s = summarize_serialized(&[&run_b3.histogram]).unwrap().unwrap();
        assert_eq!((s.count, s.min_ms, s.max_ms), (2, 100, 300));
        assert_eq!(run.buckets[0].start_ms, 1_699_999_000_000);
        assert_eq!(run.buckets[0].label, None);
        assert_eq!(run.buckets[1001].label.as_deref(), Some("a"));
        assert_eq!(run.overall.count, 1002);
        assert_eq!(run.errors.len(), 1);
        assert_eq!(run.errors[0].first_seen_ms, 1_700_000_003_500);
    }

    #[test]
    fn error_groups_are_capped_with_an_overflow_group() {
        let mut b = RunBuilder::new();
        let messages: Vec<String> = (0..MAX_ERROR_GROUPS + 5)
            .map(|i| format!("boom {i}"))
            .collect();
        for (i, m) in messages.iter().enumerate() {
            let mut s = sample("a", 1_700_000_000_000 + i as i64, 1, false);
            s.message = m;
            b.push(1, &s);
        }
        let run = b.finish();
        assert_eq!(run.errors.len(), MAX_ERROR_GROUPS + 1);
        assert_eq!(run.errors[0].message, ERROR_GROUP_OVERFLOW_MESSAGE);
        assert_eq!(run.errors[0].count, 5);
        assert_eq!(
            run.errors.iter().map(|e| e.count).sum::<u64>(),
            MAX_ERROR_GROUPS as u64 + 5
        );
    }

    #[test]
    fn rejects_are_all_counted_details_capped() {
        let mut b = RunBuilder::new();
        for line in 1..=1500 {
            b.reject(line, "bad");
        }
        let run = b.finish();
        assert_eq!(run.rejected_rows, 1500);
        assert_eq!(run.rejected.len(), MAX_REJECTED_DETAILS);
        assert_eq!(run.rejected[999].line, 1000);
        assert_eq!(run.overall.count, 0);
        assert_eq!(run.overall.error_pct, None);
    }
    #[test]
    fn changes_upserted_in_turn_equal_the_finished_run() {
        use std::collections::BTreeMap;
        let mut live = RunBuilder::with_open_window_s(5);
        live.track_changes();
        let mut file = RunBuilder::with_open_window_s(5);
        let mut stored: BTreeMap<(Option<String>, i64), Bucket> = BTreeMap::new();
        let labels = ["a", "b", "c"];
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 33
        };
        let mut takes = 0;
        let mut added = 0;
        let mut store = |stored: &mut BTreeMap<(Option<String>, i64), Bucket>, c: RunChanges| {
            for b in c.data.buckets {
                stored.insert((b.label.clone(), b.start_ms), b);
            }
            for b in c.added {
                added += 1;
                match stored.get_mut(&(b.label.clone(), b.start_ms)) {
                    Some(s) => s.add(&b).unwrap(),
                    None => {
                        stored.insert((b.label.clone(), b.start_ms), b);
                    }
                }
            }
        };
        for i in 0..5000i64 {
            // Mostly in order, some late by up to 20 s (beyond the open window).
            let late = if next() % 10 == 0 {
                (next() % 20_000) as i64
            } else {
                0
            };
            let start = 1_700_000_000_000 + i * 37 - late;
            let s = sample(
                labels[(next() % 3) as usize],
                start,
                next() % 900,
                next() % 7 != 0,
            );
            live.push(i as u64 + 1, &s);
            file.push(i as u64 + 1, &s);
            if next() % 50 == 0 {
                takes += 1;
                let c = live.take_changes();
                let n = c.data.buckets.len() + c.added.len();
                assert!(n < 2 * 4 * 40, "{n} buckets in one change");
                store(&mut stored, c);
                // Memory: only the open window and what is not handed out yet.
                assert!(live.finalized_buckets() == 0, "finalized buckets forgotten");
            }
        }
        let last = live.take_changes();
        let (overall, labels_now, errors) = (
            last.data.overall.clone(),
            last.data.labels.clone(),
            last.data.errors.clone(),
        );
        store(&mut stored, last);
        let want = file.finish();
        assert!(takes > 50);
        assert!(added > 0, "late samples for forgotten seconds were added");
        assert_eq!(stored.into_values().collect::<Vec<_>>(), want.buckets);
        assert_eq!(overall, want.overall);
        assert_eq!(labels_now, want.labels);
        assert_eq!(errors, want.errors);
        let none = live.take_changes();
        assert!(none.data.buckets.is_empty() && none.added.is_empty());
    }
}
