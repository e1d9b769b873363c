//! A route's figures over time: which stored resolution a range reads, and the points.
//!
//! The stored series are raw (one interval per scrape), 1 min, 10 min and 1 h rollups.
//! A range reads the coarsest series that still gives at least [`MIN_POINTS`] points
//! (range ÷ the series' spacing; raw: the scrape interval) among those that cover the
//! range's start (retention, and for a rollup level added later, its first bucket). With
//! 10 s scrapes that is: up to 5 h raw (≤ 1,800 rows), then 1 min up to ~2.1 days
//! (≤ 3,000 rows), 10 min up to 12.5 days (≤ 1,800 rows), then hourly (30 days: 720 rows).
//! The rows read stay within ~3,000 at every range, and the points within 300–3,000.
//! The intervals are then summed into `step_ms` buckets (by the interval's time: the
//! scrape for raw rows, the bucket start for rollups), and each bucket gives the
//! [`Figures`] of its intervals.

use serde::Serialize;

use super::{Figures, Interval};

/// Points a range aims at when no step is asked for (a chart is ~1,000 px wide).
pub const TARGET_POINTS: i64 = 1000;

/// Fewest points a range may get from a coarser series before a finer one is read.
pub const MIN_POINTS: i64 = 300;

/// Resolutions: raw (`0`), 1 min, 10 min, 1 h.
pub const RESOLUTIONS_MS: [i64; 4] = [0, 60_000, 600_000, 3_600_000];

/// The name of a resolution: `raw`, `1m`, `10m`, `1h`.
pub fn resolution_name(ms: i64) -> &'static str {
    match ms {
        0 => "raw",
        60_000 => "1m",
        600_000 => "10m",
        _ => "1h",
    }
}

/// A stored series a range may read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// `0` (raw) or the rollup bucket, ms.
    pub resolution_ms: i64,
    /// Time between its points, ms (raw: the scrape interval).
    pub spacing_ms: i64,
    /// The oldest time it holds figures for, unix ms (its retention horizon, or later).
    pub covers_from_ms: i64,
}

/// The resolution to read for `from_ms…to_ms` out of `levels` (finest first): the coarsest
/// that covers `from_ms` and gives at least [`MIN_POINTS`] points; the finest covering one
/// when none gives that many; the coarsest level when none covers `from_ms`.
pub fn resolution_for(from_ms: i64, to_ms: i64, levels: &[Level]) -> i64 {
    let range = (to_ms - from_ms).max(0);
    let covering: Vec<&Level> = levels
        .iter()
        .filter(|l| l.covers_from_ms <= from_ms)
        .collect();
    let Some(finest) = covering.first() else {
        return levels.last().map_or(RESOLUTIONS_MS[3], |l| l.resolution_ms);
    };
    covering
        .iter()
        .rev()
        .find(|l| range / l.spacing_ms.max(1) >= MIN_POINTS)
        .unwrap_or(finest)
        .resolution_ms
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

    fn levels(now: i64) -> [Level; 4] {
        let keep = [48 * H, 30 * D, 90 * D, 365 * D];
        let spacing = [10_000, 60_000, 600_000, H];
        std::array::from_fn(|i| Level {
            resolution_ms: RESOLUTIONS_MS[i],
            spacing_ms: spacing[i],
            covers_from_ms: now - keep[i],
        })
    }

    #[test]
    fn coarsest_resolution_that_gives_enough_points() {
        let now = 100 * D;
        let l = levels(now);
        let at = |range: i64| resolution_for(now - range, now, &l);
        assert_eq!(at(15 * 60_000), 0);
        assert_eq!(at(H), 0);
        assert_eq!(at(4 * H), 0); // 1 min: 240 points < 300
        assert_eq!(at(6 * H), 60_000); // 360 points
        assert_eq!(at(24 * H), 60_000);
        assert_eq!(at(2 * D), 60_000); // 10 min: 288 < 300
        assert_eq!(at(3 * D), 600_000); // 432
        assert_eq!(at(7 * D), 600_000);
        assert_eq!(at(12 * D), 600_000); // hourly: 288 < 300
        assert_eq!(at(13 * D), H);
        assert_eq!(at(29 * D), H);
        assert_eq!(at(30 * D), H);
        assert_eq!(at(90 * D), H);
        // no range reads more than 3,000 rows of 10 s scrapes or rollups
        for minutes in (15..=60 * 24 * 400).step_by(7) {
            let range = minutes * 60_000;
            let r = at(range);
            let spacing = l.iter().find(|x| x.resolution_ms == r).unwrap().spacing_ms;
            assert!(
                range / spacing <= 3_000 || r == H,
                "{minutes} min reads {r}"
            );
        }
        // 3 days back: raw is gone, 1 min it is
        assert_eq!(resolution_for(now - 3 * D, now - 3 * D + H, &l), 60_000);
        // a rollup level added later is not read before its first bucket
        let mut late = l;
        late[2].covers_from_ms = now - 2 * D;
        assert_eq!(resolution_for(now - 7 * D, now, &late), 60_000);
        // nothing covers a range two years back: the coarsest
        assert_eq!(resolution_for(now - 800 * D, now - 790 * D, &l), H);
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
