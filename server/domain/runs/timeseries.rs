//! Over-time series of a run (or one label) from its stored per-second buckets.
//!
//! Long runs are merged into wider buckets so a chart gets at most [`MAX_POINTS`] points;
//! seconds without samples are filled (count 0, latency `null`) so a pause shows as a pause.
//! Percentiles per bucket come from the merged HDR histograms (3 significant digits: at
//! most 0.1 % relative error; values below 2,048 ms are exact).

use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use serde::Serialize;

/// Most points a series carries (uPlot draws ~4k points per series comfortably).
pub const MAX_POINTS: i64 = 2_000;

/// One stored bucket, as the store hands it over.
#[derive(Debug, Clone)]
pub struct BucketIn<'a> {
    pub start_ms: i64,
    pub count: u64,
    pub errors: u64,
    pub sum_ms: u64,
    pub max_ms: u64,
    pub active_users: Option<u32>,
    /// HdrHistogram V2 serialization of the bucket's latencies, ms.
    pub histogram: &'a [u8],
}

/// Column-oriented series, one entry per bucket (`GET /api/v1/runs/{id}/timeseries`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    /// The label, or `null` for all requests of the run.
    pub label: Option<String>,
    /// Width of each bucket, ms (1,000 unless the run was merged into wider buckets).
    pub bucket_ms: i64,
    /// True when the last bucket holds less than a full width of data (not a dip).
    pub last_bucket_partial: bool,
    /// How the figures were computed.
    pub hdr_note: &'static str,
    /// Who computed the per-bucket percentiles: `null` when harrier did (HDR histograms),
    /// else the tool that reported them (Locust's stats history).
    pub percentiles_reported_by: Option<&'static str>,
    /// Bucket start, unix epoch ms.
    pub t_ms: Vec<i64>,
    pub count: Vec<u64>,
    pub errors: Vec<u64>,
    /// errors / count × 100; `null` for an empty bucket.
    pub error_pct: Vec<Option<f64>>,
    /// count / bucket width in seconds.
    pub throughput_rps: Vec<f64>,
    pub mean_ms: Vec<Option<f64>>,
    pub max_ms: Vec<Option<f64>>,
    pub p50_ms: Vec<Option<f64>>,
    pub p90_ms: Vec<Option<f64>>,
    pub p95_ms: Vec<Option<f64>>,
    pub p99_ms: Vec<Option<f64>>,
    /// Highest active-user count in the bucket; `null` when the tool did not write it.
    pub active_users: Vec<Option<u32>>,
}

const HDR_NOTE: &str = "Per-bucket percentiles come from HDR histograms (3 significant digits, \
at most 0.1 % relative error); buckets hold the samples that started in them.";

struct Acc {
    count: u64,
    errors: u64,
    sum_ms: u64,
    max_ms: u64,
    users: Option<u32>,
    hist: Option<Histogram<u64>>,
}

impl Acc {
    fn new() -> Acc {
        Acc {
            count: 0,
            errors: 0,
            sum_ms: 0,
            max_ms: 0,
            users: None,
            hist: None,
        }
    }

    fn add(&mut self, b: &BucketIn<'_>, de: &mut Deserializer) {
        self.count += b.count;
        self.errors += b.errors;
        self.sum_ms += b.sum_ms;
        self.max_ms = self.max_ms.max(b.max_ms);
        self.users = match (self.users, b.active_users) {
            (Some(a), Some(c)) => Some(a.max(c)),
            (a, c) => a.or(c),
        };
        if let Ok(h) = de.deserialize::<u64, _>(&mut &b.histogram[..]) {
            match &mut self.hist {
                Some(acc) => {
                    let _ = acc.add(&h);
                }
                None => self.hist = Some(h),
            }
        }
    }
}

/// Builds the series for `label` from buckets sorted by start; `last_end_ms` is the end of
/// the scope's last sample (to tell a partial last bucket).
pub fn build(label: Option<String>, buckets: &[BucketIn<'_>], last_end_ms: Option<i64>) -> Series {
    let mut series = Series {
        label,
        bucket_ms: 1000,
        hdr_note: HDR_NOTE,
        ..Series::default()
    };
    let (Some(first), Some(last)) = (buckets.first(), buckets.last()) else {
        return series;
    };
    // Sized by MAX_POINTS, never by the span: a wider run gets wider buckets.
    let span_s = last.start_ms.saturating_sub(first.start_ms) / 1000 + 1;
    let width_s = (span_s + MAX_POINTS - 1) / MAX_POINTS;
    let bucket_ms = width_s.max(1) * 1000;
    series.bucket_ms = bucket_ms;
    let n = (last.start_ms.saturating_sub(first.start_ms) / bucket_ms + 1) as usize;
    let mut accs: Vec<Acc> = (0..n).map(|_| Acc::new()).collect();
    let mut de = Deserializer::new();
    for b in buckets {
        let i = (b.start_ms.saturating_sub(first.start_ms) / bucket_ms) as usize;
        if let Some(acc) = accs.get_mut(i) {
            acc.add(b, &mut de);
        }
    }
    let width_s = bucket_ms as f64 / 1000.0;
    for (i, acc) in accs.into_iter().enumerate() {
        let t = first.start_ms + i as i64 * bucket_ms;
        series.t_ms.push(t);
        series.count.push(acc.count);
        series.errors.push(acc.errors);
        series.throughput_rps.push(acc.count as f64 / width_s);
        let has = acc.count > 0;
        series
            .error_pct
            .push(has.then(|| acc.errors as f64 * 100.0 / acc.count as f64));
        series
            .mean_ms
            .push(has.then(|| acc.sum_ms as f64 / acc.count as f64));
        series.max_ms.push(has.then_some(acc.max_ms as f64));
        let q = |p: f64| {
            acc.hist
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(|h| h.value_at_quantile(p) as f64)
        };
        series.p50_ms.push(q(0.50));
        series.p90_ms.push(q(0.90));
        series.p95_ms.push(q(0.95));
        series.p99_ms.push(q(0.99));
        series.active_users.push(acc.users);
    }
    let last_start = *series.t_ms.last().unwrap_or(&0);
    series.last_bucket_partial = last_end_ms.is_some_and(|end| end - last_start < bucket_ms);
    series
}

/// Percentiles a tool reported per interval, with the bucket each belongs to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportedPercentiles {
    /// Start of the bucket the interval's requests fall in, unix epoch ms.
    pub bucket_start_ms: i64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// Note for percentiles reported by Locust (its stats history).
pub const LOCUST_NOTE: &str = "Percentiles and max as reported by Locust in each stats-history row: over its \
trailing 10 s window, by its rule (response times rounded to 2 significant digits above 100 ms); \
counts and errors per bucket are the deltas of its cumulative totals.";

/// Replaces the series' percentiles and max by the ones a tool reported (a bucket
/// merged from several intervals takes its last interval's: percentiles of windows
/// cannot be merged); `note` says whose they are.
pub fn use_reported_percentiles(
    series: &mut Series,
    rows: &[ReportedPercentiles],
    tool: &'static str,
    note: &'static str,
) {
    let Some(&first) = series.t_ms.first() else {
        return;
    };
    let width = series.bucket_ms.max(1);
    for v in [
        &mut series.p50_ms,
        &mut series.p90_ms,
        &mut series.p95_ms,
        &mut series.p99_ms,
        &mut series.max_ms,
    ] {
        v.iter_mut().for_each(|x| *x = None);
    }
    for r in rows {
        let Ok(i) = usize::try_from((r.bucket_start_ms - first).div_euclid(width)) else {
            continue;
        };
        if i >= series.t_ms.len() || series.count[i] == 0 {
            continue;
        }
        series.p50_ms[i] = r.p50_ms;
        series.p90_ms[i] = r.p90_ms;
        series.p95_ms[i] = r.p95_ms;
        series.p99_ms[i] = r.p99_ms;
        series.max_ms[i] = r.max_ms;
    }
    series.percentiles_reported_by = Some(tool);
    series.hdr_note = note;
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::{Serializer, V2Serializer};

    fn hist(values: &[u64]) -> Vec<u8> {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in values {
            h.record(*v).unwrap();
        }
        let mut out = Vec::new();
        V2Serializer::new().serialize(&h, &mut out).unwrap();
        out
    }

    #[test]
    fn fills_gaps_and_marks_partial_last_bucket() {
        let h1 = hist(&[100, 200]);
        let h2 = hist(&[300]);
        let buckets = [
            BucketIn {
                start_ms: 10_000,
                count: 2,
                errors: 1,
                sum_ms: 300,
                max_ms: 200,
                active_users: Some(2),
                histogram: &h1,
            },
            BucketIn {
                start_ms: 12_000,
                count: 1,
                errors: 0,
                sum_ms: 300,
                max_ms: 300,
                active_users: None,
                histogram: &h2,
            },
        ];
        let s = build(None, &buckets, Some(12_300));
        assert_eq!(s.t_ms, vec![10_000, 11_000, 12_000]);
        assert_eq!(s.count, vec![2, 0, 1]);
        assert_eq!(s.error_pct, vec![Some(50.0), None, Some(0.0)]);
        assert_eq!(s.mean_ms, vec![Some(150.0), None, Some(300.0)]);
        assert_eq!(s.p99_ms, vec![Some(200.0), None, Some(300.0)]);
        assert!(s.last_bucket_partial);
        let full = build(None, &buckets, Some(13_000));
        assert!(!full.last_bucket_partial);
    }

    #[test]
    fn long_runs_merge_into_wider_buckets() {
        let h = hist(&[10]);
        let buckets: Vec<BucketIn> = (0..5_000)
            .map(|i| BucketIn {
                start_ms: i * 1000,
                count: 1,
                errors: 0,
                sum_ms: 10,
                max_ms: 10,
                active_users: None,
                histogram: &h,
            })
            .collect();
        let s = build(Some("a".into()), &buckets, Some(5_000_000));
        assert_eq!(s.bucket_ms, 3000);
        assert!(s.t_ms.len() as i64 <= MAX_POINTS);
        assert_eq!(s.count.iter().sum::<u64>(), 5_000);
        assert_eq!(s.throughput_rps[0], 1.0);
    }
}
