//! Latency histograms of per-second buckets: HdrHistogram, V2 serialization, reading back.
//!
//! Owns the one histogram configuration harrier uses (3 significant digits, values in
//! integer ms, auto-resizing) and the helpers that store, merge and summarise the
//! serialized form kept in [`Bucket::histogram`](super::Bucket::histogram). The store and
//! the API use [`merge_histograms`] and [`summarize_serialized`] to build over-time series
//! for a label or the run from several buckets.
//!
//! Accuracy: with 3 significant digits every value is counted in a bin whose width is at
//! most 0.1 % of the value (values below 2048 ms are exact), so every percentile read here
//! is within 0.1 % of the exact nearest-rank value (it is the highest value of the bin the
//! exact value falls in). Run and label summaries never come from here: they are exact
//! (see [`super::ExactHistogram`]). Format: HdrHistogram "V2" encoding
//! (<https://github.com/HdrHistogram/HdrHistogram/blob/master/src/main/java/org/HdrHistogram/EncodableHistogram.java>),
//! readable by every HdrHistogram implementation.

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::{Counter, Histogram};

use super::stats::nearest_rank;

/// Significant decimal digits kept by bucket histograms (≤ 0.1 % relative error).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Why a stored histogram could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("stored histogram is not valid HdrHistogram V2 data: {0}")]
    Decode(#[from] hdrhistogram::serialization::DeserializeError),
    #[error("stored histograms cannot be merged: {0}")]
    Merge(#[from] hdrhistogram::errors::AdditionError),
}

/// An empty, auto-resizing histogram with harrier's configuration (values in ms).
pub fn new_histogram<T: Counter>() -> Histogram<T> {
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is a valid configuration")
}

/// Serializes `h` in the uncompressed HdrHistogram V2 format.
pub fn serialize_histogram<T: Counter>(h: &Histogram<T>) -> Vec<u8> {
    thread_local! {
        // The serializer keeps a scratch buffer as large as the biggest histogram seen;
        // one per thread spares an allocation per bucket.
        static SERIALIZER: std::cell::RefCell<V2Serializer> = std::cell::RefCell::new(V2Serializer::new());
    }
    SERIALIZER.with_borrow_mut(|s| serialize_with(s, h))
}

fn serialize_with<T: Counter>(serializer: &mut V2Serializer, h: &Histogram<T>) -> Vec<u8> {
    let mut out = Vec::new();
    serializer
        .serialize(h, &mut out)
        // Only counts above i64::MAX or a failing writer can fail; a Vec never fails.
        .expect("V2 serialization into a Vec cannot fail for counts below i64::MAX");
    out
}

/// Reads one serialized histogram back (auto-resizing, so more values can be added).
pub fn deserialize_histogram(bytes: &[u8]) -> Result<Histogram<u64>, HistogramError> {
    let mut h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..])?;
    h.auto(true);
    Ok(h)
}

/// Merges several serialized bucket histograms (e.g. a label's buckets over a minute).
///
/// `Ok(None)` when `parts` is empty; an error when one part is not valid V2 data.
pub fn merge_histograms(parts: &[&[u8]]) -> Result<Option<Histogram<u64>>, HistogramError> {
    let mut iter = parts.iter();
    let Some(first) = iter.next() else {
        return Ok(None);
    };
    let mut merged = deserialize_histogram(first)?;
    let mut deserializer = Deserializer::new();
    for part in iter {
        let h: Histogram<u64> = deserializer.deserialize(&mut &part[..])?;
        merged.add(&h)?;
    }
    Ok(Some(merged))
}

/// Nearest-rank percentile `p` (0 < p ≤ 100) read from a histogram, in ms.
///
/// Same rank rule as the exact statistics (k = ⌈p/100 · n⌉, see [`nearest_rank`]); the
/// value is the highest value of the bin holding the k-th smallest sample, so it is at
/// most 0.1 % above the exact value. `None` when `h` is empty.
pub fn histogram_percentile<T: Counter>(h: &Histogram<T>, p: f64) -> Option<u64> {
    let rank = nearest_rank(h.len(), p);
    if rank == 0 {
        return None;
    }
    let mut seen = 0u64;
    for bin in h.iter_recorded() {
        seen += bin.count_since_last_iteration();
        if seen >= rank {
            return Some(bin.value_iterated_to());
        }
    }
    None
}

/// Latency figures read back from a bucket histogram (all ms).
///
/// Percentiles, mean and max are HDR approximations (≤ 0.1 % relative error). For one
/// bucket or a merge of buckets, an exact mean is Σ`sum_ms` / Σ`count` and an exact max is
/// the largest `max_ms` of the buckets: prefer those when the buckets are at hand.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct HistogramSummary {
    /// Number of values.
    pub count: u64,
    /// Lowest value (bin's lowest equivalent value).
    pub min_ms: u64,
    /// Mean of the bins' middle values.
    pub mean_ms: f64,
    /// Highest value (bin's highest equivalent value).
    pub max_ms: u64,
    pub p50_ms: u64,
    pub p90_ms: u64,
    pub p95_ms: u64,
    pub p99_ms: u64,
}

/// Summarises a histogram; `None` when it is empty.
pub fn summarize_histogram<T: Counter>(h: &Histogram<T>) -> Option<HistogramSummary> {
    if h.is_empty() {
        return None;
    }
    Some(HistogramSummary {
        count: h.len(),
        min_ms: h.min(),
        mean_ms: h.mean(),
        max_ms: h.max(),
        p50_ms: histogram_percentile(h, 50.0)?,
        p90_ms: histogram_percentile(h, 90.0)?,
        p95_ms: histogram_percentile(h, 95.0)?,
        p99_ms: histogram_percentile(h, 99.0)?,
    })
}

/// Merges serialized bucket histograms (one or several) and summarises the result.
///
/// `Ok(None)` when `parts` is empty or every part is empty.
pub fn summarize_serialized(parts: &[&[u8]]) -> Result<Option<HistogramSummary>, HistogramError> {
    Ok(merge_histograms(parts)?
        .as_ref()
        .and_then(summarize_histogram))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_merge() {
        let mut a = new_histogram::<u32>();
        for v in [10, 20, 30, 40] {
            a.record(v).unwrap();
        }
        let mut b = new_histogram::<u32>();
        for v in [50, 60, 70, 80, 90, 100_000] {
            b.record(v).unwrap();
        }
        let (sa, sb) = (serialize_histogram(&a), serialize_histogram(&b));
        let one = summarize_serialized(&[&sa]).unwrap().unwrap();
        assert_eq!(
            (one.count, one.min_ms, one.max_ms, one.p50_ms, one.p99_ms),
            (4, 10, 40, 20, 40)
        );
        let both = summarize_serialized(&[&sa, &sb]).unwrap().unwrap();
        assert_eq!(both.count, 10);
        assert_eq!(both.p50_ms, 50);
        assert_eq!(both.p90_ms, 90);
        // 100 000 ms lands in a 64 ms wide bin: within 0.1 %.
        assert!(
            both.max_ms >= 100_000 && both.max_ms <= 100_100,
            "{}",
            both.max_ms
        );
        assert_eq!(summarize_serialized(&[]).unwrap(), None);
        assert!(summarize_serialized(&[b"nope"]).is_err());
    }
}
