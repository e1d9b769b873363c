//! A route's figures over time: which stored resolution a range reads, and the points.
//!
//! The stored series are raw (one interval per scrape), 1 min and 1 h rollups. A range
//! reads the coarsest series that still gives about [`TARGET_POINTS`] points and that its
//! retention still covers; the intervals are then summed into `step_ms` buckets (by the
//! interval's time: the scrape for raw rows, the bucket start for rollups), and each bucket
//! gives the [`Figures`] of its intervals.

use serde::Serialize;

use super::{Figures, Interval};

/// Points a range aims at (uPlot draws far more, but a chart is ~1,000 px wide).
pub const TARGET_POINTS: i64 = 1000;

/// Resolutions: raw (`0`), 1 min, 1 h.
pub const RESOLUTIONS_MS: [i64; 3] = [0, 60_000, 3_600_000];

/// The name of a resolution: `raw`, `1m`, `1h`.
pub fn resolution_name(ms: i64) -> &'static str {
    match ms {
        0 => "raw",
        60_000 => "1m",
        _ => "1h",
    }
}

/// The resolution to read for `from_ms…to_ms`: the coarsest whose step is at most
/// range / [`TARGET_POINTS`] among those whose retention (`keep_ms`, same order as
/// [`RESOLUTIONS_MS`]) reaches back to `from_ms`; the finest such one when none is fine
/// enough.
pub fn resolution_for(from_ms: i64, to_ms: i64, now_ms: i64, keep_ms: [i64; 3]) -> i64 {
    let ideal = (to_ms - from_ms).max(0) / TARGET_POINTS;
    let available: Vec<i64> = RESOLUTIONS_MS
        .iter()
        .zip(keep_ms)
        .filter(|(_, keep)| from_ms >= now_ms - keep)
        .map(|(r, _)| *r)
        .collect();
    if available.is_empty() {
        return RESOLUTIONS_MS[2];
    }
    available
        .iter()
        .rev()
        .find(|r| **r <= ideal)
        .copied()
        .unwrap_or(available[0])
}

/// A route's time series (`GET /api/v1/routes/{id}/timeseries`): parallel arrays, `null`
/// where a bucket has no figure.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RouteSeries {
    pub from_ms: i64,
    pub to_ms: i64,
    /// `raw`, `1m` or `1h`: the stored series read.
    pub resolution: &'static str,
    pub step_ms: i64,
    /// Bucket start, unix ms.
    pub t_ms: Vec<i64>,
    pub throughput_per_s: Vec<Option<f64>>,
    pub errors_per_s: Vec<Option<f64>>,
    pub error_pct: Vec<Option<f64>>,
    pub mean_ms: Vec<Option<f64>>,
    pub p50_ms: Vec<Option<f64>>,
    pub p95_ms: Vec<Option<f64>>,
    pub p99_ms: Vec<Option<f64>>,
    pub max_ms: Vec<Option<f64>>,
    pub inflight: Vec<Option<f64>>,
}

impl RouteSeries {
    fn push(&mut self, t: i64, f: Option<&Figures>) {
        self.t_ms.push(t);
        let get = |g: &dyn Fn(&Figures) -> Option<f64>| f.and_then(g);
        self.throughput_per_s.push(get(&Figures::throughput_per_s));
        self.errors_per_s.push(get(&Figures::failed_per_s));
        self.error_pct.push(get(&Figures::error_pct));
        self.mean_ms.push(get(&Figures::mean_ms));
        self.p50_ms.push(get(&|f| f.quantile_ms(0.5)));
        self.p95_ms.push(get(&|f| f.quantile_ms(0.95)));
        self.p99_ms.push(get(&|f| f.quantile_ms(0.99)));
        self.max_ms.push(get(&Figures::max_ms));
        self.inflight.push(get(&|f| f.inflight));
    }
}

/// Sums `points` (time, interval; sorted by time) into `step_ms` buckets. A gap of more
/// than 2.5 steps (or intervals) between buckets gets a `null` point so charts break the
/// line instead of drawing across missing data.
pub fn build(
    points: &[(i64, &Interval)],
    from_ms: i64,
    to_ms: i64,
    resolution_ms: i64,
    step_ms: i64,
) -> RouteSeries {
    let step = step_ms.max(1);
    let mut out = RouteSeries {
        from_ms,
        to_ms,
        resolution: resolution_name(resolution_ms),
        step_ms: step,
        ..RouteSeries::default()
    };
    let mut buckets: Vec<(i64, Figures, i64)> = Vec::new();
    for (t, iv) in points {
        let b = t - t.rem_euclid(step);
        match buckets.last_mut() {
            Some((bt, f, _)) if *bt == b => f.add(iv),
            _ => {
                let mut f = Figures::default();
                f.add(iv);
                buckets.push((b, f, iv.interval_ms.max(resolution_ms)));
            }
        }
    }
    let mut prev_t: Option<i64> = None;
    for (t, f, spacing) in &buckets {
        if let Some(p) = prev_t
            && (t - p) as f64 > 2.5 * step.max(*spacing) as f64
        {
            out.push(p + step, None);
        }
        out.push(*t, Some(f));
        prev_t = Some(*t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;
    const D: i64 = 24 * H;

    #[test]
    fn coarsest_resolution_that_gives_enough_points() {
        let now = 100 * D;
        let keep = [48 * H, 30 * D, 365 * D];
        assert_eq!(resolution_for(now - 15 * 60_000, now, now, keep), 0);
        assert_eq!(resolution_for(now - 6 * H, now, now, keep), 0);
        // 24 h / 1000 = 86 s ≥ 1 min
        assert_eq!(resolution_for(now - 24 * H, now, now, keep), 60_000);
        // 30 days / 1000 = 43 min: 1 min rollups
        assert_eq!(resolution_for(now - 29 * D, now, now, keep), 60_000);
        // a year: hourly
        assert_eq!(resolution_for(now - 90 * D, now, now, keep), H);
        // 3 days back: raw is gone, 1 min it is
        assert_eq!(
            resolution_for(now - 3 * D, now - 3 * D + H, now, keep),
            60_000
        );
    }

    #[test]
    fn steps_sum_intervals_and_gaps_break_lines() {
        let iv = |n: f64| Interval {
            interval_ms: 10_000,
            exchanges: Some(n),
            failed: Some(n / 10.0),
            duration_sum_s: Some(n * 0.02),
            duration_count: Some(n),
            ..Interval::default()
        };
        let (a, b, c) = (iv(100.0), iv(300.0), iv(50.0));
        let pts = [(10_000, &a), (20_000, &b), (90_000, &c)];
        let s = build(&pts, 0, 100_000, 0, 20_000);
        assert_eq!(s.t_ms, [0, 20_000, 40_000, 80_000]);
        assert_eq!(s.throughput_per_s[0], Some(10.0));
        assert_eq!(s.throughput_per_s[1], Some(30.0));
        assert_eq!(s.throughput_per_s[2], None);
        assert_eq!(s.error_pct[3], Some(10.0));
        assert!((s.mean_ms[1].unwrap() - 20.0).abs() < 1e-9);
    }
}
