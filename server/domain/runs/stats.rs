//! Exact statistics over one scope (the run, or one label), in bounded memory.
//!
//! Owns [`ExactHistogram`] (exact counts of integer-ms values, for nearest-rank
//! percentiles), [`nearest_rank`] (the rank rule of docs/numbers.md) and [`StatsAcc`] (the
//! running count/errors/min/max/sum/window/bytes that becomes a [`Stats`]). Knows nothing
//! of files, buckets or storage.

use std::collections::BTreeMap;

use super::{Sample, Stats};

/// Values below this are counted in a dense array (index = value in ms); values at or
/// above it in a sorted map. 2¹⁶ ms ≈ 65 s covers almost every response time while
/// capping the dense part at 512 KiB per scope, so a run with many labels stays small.
const DENSE_CAP_MS: u64 = 1 << 16;

/// Exact counts of integer-ms values, for nearest-rank percentiles.
///
/// Memory is proportional to the largest value below 2¹⁶ ms (dense counts, grown lazily)
/// plus the number of *distinct* values above it, never to the number of samples.
#[derive(Debug, Clone, Default)]
pub struct ExactHistogram {
    dense: Vec<u64>,
    sparse: BTreeMap<u64, u64>,
    count: u64,
}

impl ExactHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one value (ms).
    #[inline]
    pub fn record(&mut self, value_ms: u64) {
        self.count += 1;
        if value_ms < DENSE_CAP_MS {
            let i = value_ms as usize;
            if i >= self.dense.len() {
                // Grow to the next power of two so repeated growth stays amortised.
                self.dense.resize((i + 1).next_power_of_two(), 0);
            }
            self.dense[i] += 1;
        } else {
            *self.sparse.entry(value_ms).or_insert(0) += 1;
        }
    }

    /// Counts `n` occurrences of one value (ms).
    pub fn record_n(&mut self, value_ms: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.count += n;
        if value_ms < DENSE_CAP_MS {
            let i = value_ms as usize;
            if i >= self.dense.len() {
                self.dense.resize((i + 1).next_power_of_two(), 0);
            }
            self.dense[i] += n;
        } else {
            *self.sparse.entry(value_ms).or_insert(0) += n;
        }
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &ExactHistogram) {
        if self.dense.len() < other.dense.len() {
            self.dense.resize(other.dense.len(), 0);
        }
        for (mine, theirs) in self.dense.iter_mut().zip(&other.dense) {
            *mine += theirs;
        }
        for (&v, &n) in &other.sparse {
            *self.sparse.entry(v).or_insert(0) += n;
        }
        self.count += other.count;
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Values in ascending order with their counts (zero counts skipped).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let dense = self
            .dense
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(v, &n)| (v as u64, n));
        dense.chain(self.sparse.iter().map(|(&v, &n)| (v, n)))
    }

    /// The `rank`-th smallest value (1-based), `None` when `rank` is 0 or exceeds the count.
    pub fn value_at_rank(&self, rank: u64) -> Option<u64> {
        if rank == 0 || rank > self.count {
            return None;
        }
        let mut seen = 0u64;
        for (value, n) in self.iter() {
            seen += n;
            if seen >= rank {
                return Some(value);
            }
        }
        None
    }

    /// Nearest-rank percentile `p` (0 < p ≤ 100) in ms: the ⌈p/100 · n⌉-th smallest value
    /// (see [`nearest_rank`]). `None` when the histogram is empty.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        self.value_at_rank(nearest_rank(self.count, p))
    }

    /// Several nearest-rank percentiles in one pass; `ps` in any order.
    pub fn percentiles<const N: usize>(&self, ps: [f64; N]) -> [Option<u64>; N] {
        let ranks = ps.map(|p| nearest_rank(self.count, p));
        let mut out = [None; N];
        if self.count == 0 {
            return out;
        }
        let mut seen = 0u64;
        let mut missing = N;
        for (value, n) in self.iter() {
            seen += n;
            for (slot, &rank) in out.iter_mut().zip(&ranks) {
                if slot.is_none() && seen >= rank {
                    *slot = Some(value);
                    missing -= 1;
                }
            }
            if missing == 0 {
                break;
            }
        }
        out
    }
}

/// The nearest rank for percentile `p` over `n` values: k = ⌈p/100 · n⌉, at least 1 (0 when
/// n = 0).
///
/// Computed in integer arithmetic on p scaled to millionths, so 95 · 20 / 100 is exactly
/// 19 (floating point would give 19.000000000000004 → 20 for some inputs). `p` is clamped
/// to 0..=100. Source: docs/numbers.md, "Runs" (the classic nearest-rank rule).
pub fn nearest_rank(n: u64, p: f64) -> u64 {
    if n == 0 {
        return 0;
    }
    let p_micro = (p.clamp(0.0, 100.0) * 1_000_000.0).round() as u128;
    let den = 100u128 * 1_000_000;
    let k = (p_micro * n as u128).div_ceil(den);
    k.clamp(1, n as u128) as u64
}

/// Running statistics over one scope: everything [`Stats`] needs, in bounded memory.
#[derive(Debug, Clone, Default)]
pub struct StatsAcc {
    count: u64,
    errors: u64,
    sum_ms: u128,
    min_ms: u64,
    max_ms: u64,
    first_start_ms: i64,
    last_end_ms: i64,
    bytes_received: u64,
    bytes_sent: u64,
    hist: ExactHistogram,
    /// Elapsed values of the failed samples only (Apdex counts them as frustrated).
    failed_hist: ExactHistogram,
}

impl StatsAcc {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one sample.
    #[inline]
    pub fn push(&mut self, s: &Sample<'_>) {
        let end_ms = s
            .start_ms
            .saturating_add(s.elapsed_ms.min(i64::MAX as u64) as i64);
        if self.count == 0 {
            self.min_ms = s.elapsed_ms;
            self.max_ms = s.elapsed_ms;
            self.first_start_ms = s.start_ms;
            self.last_end_ms = end_ms;
        } else {
            self.min_ms = self.min_ms.min(s.elapsed_ms);
            self.max_ms = self.max_ms.max(s.elapsed_ms);
            self.first_start_ms = self.first_start_ms.min(s.start_ms);
            self.last_end_ms = self.last_end_ms.max(end_ms);
        }
        self.count += 1;
        self.errors += u64::from(!s.success);
        self.sum_ms += u128::from(s.elapsed_ms);
        self.bytes_received = self.bytes_received.saturating_add(s.bytes_received);
        self.bytes_sent = self.bytes_sent.saturating_add(s.bytes_sent);
        self.hist.record(s.elapsed_ms);
        if !s.success {
            self.failed_hist.record(s.elapsed_ms);
        }
    }

    /// Adds everything `other` has seen (the union of both sample sets).
    pub fn merge(&mut self, other: &StatsAcc) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            self.clone_from(other);
            return;
        }
        self.count += other.count;
        self.errors += other.errors;
        self.sum_ms += other.sum_ms;
        self.min_ms = self.min_ms.min(other.min_ms);
        self.max_ms = self.max_ms.max(other.max_ms);
        self.first_start_ms = self.first_start_ms.min(other.first_start_ms);
        self.last_end_ms = self.last_end_ms.max(other.last_end_ms);
        self.bytes_received = self.bytes_received.saturating_add(other.bytes_received);
        self.bytes_sent = self.bytes_sent.saturating_add(other.bytes_sent);
        self.hist.merge(&other.hist);
        self.failed_hist.merge(&other.failed_hist);
    }

    /// The accumulator of a stored scope: its exact `distribution`, the distribution of
    /// its `failed` samples and, from its `stats`, what the distributions do not hold
    /// (first start, last end, bytes). Count, errors, sum, min and max come from the
    /// distributions, so `from_stored(..).stats()` equals the stored statistics of a scope
    /// whose samples all had integer elapsed values (every sample source's case).
    /// `None` when the distribution is empty but `stats` counts samples (a summary-only or
    /// interval scope: its samples are not known one by one).
    pub fn from_stored(
        distribution: &super::distribution::Distribution,
        failed: &super::distribution::Distribution,
        stats: &Stats,
    ) -> Option<StatsAcc> {
        if distribution.count() != stats.count {
            return None;
        }
        let mut acc = StatsAcc::new();
        if stats.count == 0 {
            return Some(acc);
        }
        for &(v, n) in distribution.values() {
            acc.hist.record_n(v, n);
            acc.sum_ms += u128::from(v) * u128::from(n);
        }
        for &(v, n) in failed.values() {
            acc.failed_hist.record_n(v, n);
        }
        let values = distribution.values();
        acc.count = stats.count;
        acc.errors = failed.count();
        acc.min_ms = values.first().map_or(0, |v| v.0);
        acc.max_ms = values.last().map_or(0, |v| v.0);
        acc.first_start_ms = stats.first_start_ms.unwrap_or(0);
        acc.last_end_ms = stats.last_end_ms.unwrap_or(0);
        acc.bytes_received = stats.bytes_received;
        acc.bytes_sent = stats.bytes_sent;
        Some(acc)
    }

    /// Number of samples pushed.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The exact histogram of elapsed values (ms).
    pub fn histogram(&self) -> &ExactHistogram {
        &self.hist
    }

    /// The exact histogram of the failed samples' elapsed values (ms).
    pub fn failed_histogram(&self) -> &ExactHistogram {
        &self.failed_hist
    }

    /// The statistics so far, following docs/numbers.md: `None` for every figure that is
    /// undefined (no samples; throughput when the window is 0).
    pub fn stats(&self) -> Stats {
        if self.count == 0 {
            return Stats::default();
        }
        let n = self.count as f64;
        let [p50, p90, p95, p99] = self.hist.percentiles([50.0, 90.0, 95.0, 99.0]);
        let window_ms = self.last_end_ms - self.first_start_ms;
        Stats {
            count: self.count,
            errors: self.errors,
            error_pct: Some(self.errors as f64 / n * 100.0),
            min_ms: Some(self.min_ms as f64),
            mean_ms: Some(self.sum_ms as f64 / n),
            max_ms: Some(self.max_ms as f64),
            p50_ms: p50.map(|v| v as f64),
            p90_ms: p90.map(|v| v as f64),
            p95_ms: p95.map(|v| v as f64),
            p99_ms: p99.map(|v| v as f64),
            first_start_ms: Some(self.first_start_ms),
            last_end_ms: Some(self.last_end_ms),
            window_ms: Some(window_ms),
            throughput_rps: (window_ms > 0).then(|| n * 1000.0 / window_ms as f64),
            bytes_received: self.bytes_received,
            bytes_sent: self.bytes_sent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_is_exact() {
        assert_eq!(nearest_rank(20, 95.0), 19);
        assert_eq!(nearest_rank(10, 90.0), 9);
        assert_eq!(nearest_rank(7, 90.0), 7);
        assert_eq!(nearest_rank(100, 99.9), 100);
        assert_eq!(nearest_rank(1000, 99.9), 999);
        assert_eq!(nearest_rank(1, 0.0), 1);
        assert_eq!(nearest_rank(0, 50.0), 0);
    }

    #[test]
    fn percentiles_span_dense_and_sparse() {
        let mut h = ExactHistogram::new();
        for v in [5, 1, 3, 200_000, 70_000, 2, 4, 100_000, 6, 7] {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), Some(5));
        assert_eq!(h.percentile(80.0), Some(70_000));
        assert_eq!(h.percentile(100.0), Some(200_000));
        assert_eq!(h.percentiles([10.0, 90.0]), [Some(1), Some(100_000)]);
        assert_eq!(ExactHistogram::new().percentile(50.0), None);
        let mut other = ExactHistogram::new();
        for v in [0, 70_000, 9] {
            other.record(v);
        }
        h.merge(&other);
        assert_eq!(h.count(), 13);
        assert_eq!(h.iter().take(2).collect::<Vec<_>>(), [(0, 1), (1, 1)]);
        assert_eq!(
            h.iter().filter(|&(v, _)| v == 70_000).collect::<Vec<_>>(),
            [(70_000, 2)]
        );
        assert_eq!(h.percentile(100.0), Some(200_000));
    }
}
