//! Capacity: for a run whose load ramps or steps, the point where the service falls over.
//!
//! Definition (harrier's, stated in the console): group the run's seconds by active users
//! (each distinct level while the load rises, or up to 20 even bands for a smooth ramp);
//! the low-load p95 is the p95 of the first level with enough samples; the service
//! saturates at the first higher level whose error % passes 1 % or whose p95 passes twice
//! the low-load p95. Capacity is the highest throughput sustained at the levels before it.
//! A run whose load never ramped (fewer than three levels) or never saturated has none.

use hdrhistogram::Histogram;
use serde::Serialize;

use super::hdr::{deserialize_histogram, histogram_percentile};
use super::timeseries::BucketIn;

/// Samples a level needs before its figures count.
const MIN_LEVEL_SAMPLES: u64 = 20;
/// Most levels a smooth ramp is cut into.
const MAX_LEVELS: u32 = 20;
/// Error % above which a level is saturated.
const ERROR_PCT_LIMIT: f64 = 1.0;
/// p95 above this multiple of the low-load p95 means saturated.
const P95_FACTOR: f64 = 2.0;

/// Where a ramped run saturated (`"capacity"` in the run's JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    /// Active users at the level where a limit was first passed.
    pub users: u32,
    /// Highest throughput sustained at the levels below that one, requests/s.
    pub throughput_rps: f64,
    /// First second of the saturated level, unix epoch ms.
    pub at_ms: i64,
    /// Which limit was passed: `"errors"` (error % > 1) or `"p95"` (p95 > 2 × low load).
    pub limited_by: &'static str,
    /// p95 at low load, ms (the reference of the p95 limit).
    pub low_load_p95_ms: Option<u64>,
    /// Error % and p95 (ms) at the saturated level.
    pub error_pct: f64,
    pub p95_ms: Option<u64>,
}

/// One load level: the seconds at which `users` were active.
#[derive(Debug)]
struct Level {
    users: u32,
    seconds: u64,
    first_ms: i64,
    count: u64,
    errors: u64,
    hist: Option<Histogram<u64>>,
}

impl Level {
    fn throughput(&self) -> f64 {
        self.count as f64 / self.seconds as f64
    }
    fn error_pct(&self) -> f64 {
        self.errors as f64 * 100.0 / self.count as f64
    }
    fn p95(&self) -> Option<u64> {
        self.hist
            .as_ref()
            .and_then(|h| histogram_percentile(h, 95.0))
    }
}

/// Finds the saturation point in a run's per-second buckets (run totals, sorted by start).
pub fn find(buckets: &[BucketIn<'_>]) -> Option<Capacity> {
    let max_users = buckets.iter().filter_map(|b| b.active_users).max()?;
    // The rising part: up to the last second at peak load (a ramp-down is not a level).
    let last_peak = buckets
        .iter()
        .rposition(|b| b.active_users == Some(max_users))?;
    let rising = &buckets[..=last_peak];
    let mut distinct: Vec<u32> = rising.iter().filter_map(|b| b.active_users).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let band = if distinct.len() as u32 <= MAX_LEVELS {
        1
    } else {
        max_users.div_ceil(MAX_LEVELS).max(1)
    };

    let mut levels: Vec<Level> = Vec::new();
    for b in rising {
        let Some(users) = b.active_users else {
            continue;
        };
        if b.count == 0 {
            continue;
        }
        let key = users / band * band;
        let i = match levels.iter().position(|l| l.users == key) {
            Some(i) => i,
            None => {
                levels.push(Level {
                    users: key,
                    seconds: 0,
                    first_ms: b.start_ms,
                    count: 0,
                    errors: 0,
                    hist: None,
                });
                levels.len() - 1
            }
        };
        let level = &mut levels[i];
        level.seconds += 1;
        level.count += b.count;
        level.errors += b.errors;
        level.first_ms = level.first_ms.min(b.start_ms);
        if let Ok(h) = deserialize_histogram(b.histogram) {
            match &mut level.hist {
                Some(acc) => {
                    let _ = acc.add(&h);
                }
                None => level.hist = Some(h),
            }
        }
    }
    levels.retain(|l| l.count >= MIN_LEVEL_SAMPLES);
    levels.sort_by_key(|l| l.users);
    if levels.len() < 3 {
        return None;
    }
    let low_p95 = levels[0].p95();
    for (i, level) in levels.iter().enumerate().skip(1) {
        let by_errors = level.error_pct() > ERROR_PCT_LIMIT;
        let by_p95 = matches!((level.p95(), low_p95), (Some(p), Some(low)) if p as f64 > P95_FACTOR * low as f64);
        if by_errors || by_p95 {
            let throughput_rps = levels[..i]
                .iter()
                .map(Level::throughput)
                .fold(0.0, f64::max);
            return Some(Capacity {
                users: level.users,
                throughput_rps,
                at_ms: level.first_ms,
                limited_by: if by_errors { "errors" } else { "p95" },
                low_load_p95_ms: low_p95,
                error_pct: level.error_pct(),
                p95_ms: level.p95(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::runs::hdr::{new_histogram, serialize_histogram};

    fn second(
        t: i64,
        users: u32,
        count: u64,
        errors: u64,
        latency_ms: u64,
    ) -> (i64, u32, u64, u64, Vec<u8>) {
        let mut h = new_histogram::<u64>();
        h.record_n(latency_ms, count).unwrap();
        (t, users, count, errors, serialize_histogram(&h))
    }

    fn buckets(rows: &[(i64, u32, u64, u64, Vec<u8>)]) -> Vec<BucketIn<'_>> {
        rows.iter()
            .map(|(t, u, c, e, h)| BucketIn {
                start_ms: *t * 1000,
                count: *c,
                errors: *e,
                sum_ms: 0,
                max_ms: 0,
                active_users: Some(*u),
                histogram: h,
            })
            .collect()
    }

    #[test]
    fn a_stepped_run_saturates_where_p95_doubles() {
        // 10 users: 100 req/s at 50 ms; 20: 200 req/s at 60 ms; 30: 250 req/s at 150 ms.
        let mut rows = Vec::new();
        for t in 0..10 {
            rows.push(second(t, 10, 100, 0, 50));
        }
        for t in 10..20 {
            rows.push(second(t, 20, 200, 0, 60));
        }
        for t in 20..30 {
            rows.push(second(t, 30, 250, 0, 150));
        }
        let c = find(&buckets(&rows)).expect("saturates");
        assert_eq!(c.users, 30);
        assert_eq!(c.throughput_rps, 200.0);
        assert_eq!(c.at_ms, 20_000);
        assert_eq!(c.limited_by, "p95");
        assert_eq!(c.low_load_p95_ms, Some(50));
    }

    #[test]
    fn errors_above_one_percent_saturate_first() {
        let mut rows = Vec::new();
        for t in 0..5 {
            rows.push(second(t, 5, 100, 0, 40));
        }
        for t in 5..10 {
            rows.push(second(t, 10, 190, 1, 41));
        }
        for t in 10..15 {
            rows.push(second(t, 15, 200, 10, 45));
        }
        let c = find(&buckets(&rows)).expect("saturates");
        assert_eq!((c.users, c.limited_by, c.at_ms), (15, "errors", 10_000));
        assert_eq!(c.throughput_rps, 190.0);
    }

    #[test]
    fn flat_load_or_healthy_ramp_has_no_capacity() {
        let flat: Vec<_> = (0..30).map(|t| second(t, 10, 100, 0, 50)).collect();
        assert_eq!(find(&buckets(&flat)), None, "load never ramped");
        let healthy: Vec<_> = (0..30)
            .map(|t| second(t, 1 + t as u32 / 10, 100, 0, 50))
            .collect();
        assert_eq!(find(&buckets(&healthy)), None, "never saturated");
        assert_eq!(find(&[]), None);
    }
}
