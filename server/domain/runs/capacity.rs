//! Saturation: for a run whose load ramps or steps, where successful throughput stops
//! growing (the knee) and where p95 and errors pass their limits (the breaches), told
//! apart, and the capacity the run shows: the successful throughput it sustained up to the
//! first of them.
//!
//! Definition (docs/numbers.md "Saturation", stated on the run page):
//!
//! - **Successful throughput** is completed requests that did not fail, per second.
//!   Saturation is judged on it alone: a flood of fast failures (503s from a full queue,
//!   resets, refusals) adds to "throughput" but never counts as growth, and is an error
//!   breach.
//! - **Levels.** The seconds of the rising part of the run (up to the last second at peak
//!   load; a ramp-down is not a level; the run's last, partial second and seconds with no
//!   completed request are left out) are grouped by active users: one level per distinct
//!   user count (a stepped ramp), or up to 20 even bands for a smooth ramp (judged per
//!   window of users). A level needs 20 samples. In a stepped ramp, a level held for less
//!   than a quarter of the typical level's time (the seconds-weighted median) whose users
//!   lie between two held levels' is a transition between steps (the tool adding users)
//!   and is left out. Per level:
//!   throughput = Σcount / seconds, successful throughput = Σ(count − errors) / seconds, p95
//!   from the merged per-second HDR histograms, error % = Σerrors / Σcount × 100. Levels
//!   weigh by their seconds everywhere.
//! - **Knee** (piecewise-linear fit on successful throughput): the levels are split in two;
//!   below the split, successful throughput follows the growth line `X = b · users` (least
//!   squares through zero: a closed system with no users serves nothing); above it, the
//!   plateau `X = P` (the seconds-weighted mean). The split with the smallest squared error
//!   is kept; the knee is where the two meet, `users = P / b` (kept between the two levels
//!   either side of the split). This is the asymptote intersection of operational analysis,
//!   `N* = (D + Z) / D_max` (Denning & Buzen 1978; Jain, *The Art of Computer Systems
//!   Performance Analysis*, §33.6): for N workers of service time S and think time Z it is
//!   `N · (S + Z) / S` users at `N / S` requests/s. Successful throughput counts as stopped
//!   only when the load rose at least 20 % past the knee, the plateau spans at least 5
//!   seconds, and across the plateau it grew by less than a quarter of the growth line's
//!   slope. Otherwise the run has no knee.
//! - **Low-load p95** (the latency breach's reference): the p95 of the lowest level that
//!   holds at least [`MIN_BASELINE_SAMPLES`] successful requests and a known, non-zero
//!   p95 (a tool's placeholder `0` or `N/A` before its first response is no p95). Below
//!   1 ms it counts as 1 ms, the resolution of the histograms.
//! - **Latency breach**: the first level above the baseline's whose p95 passes twice the
//!   low-load p95. **Error breach**: the first level whose error % passes 1 %. A breach
//!   holds: each level's figure is taken without its single worst second, and the passing
//!   levels from the breach on must span at least 5 seconds in a row, so one noisy second
//!   never decides.
//! - **Capacity** (what the run states): the successful throughput sustained up to the
//!   first sustained breach, whichever of knee, latency or errors comes first as the load
//!   rises, with the users there: the plateau and the knee's users when the knee comes
//!   first, otherwise the successful throughput and users of the last level before the
//!   breach. A run with none of them has no capacity figure: "no saturation in this run";
//!   nor has a run whose errors pass 1 % from its lowest level on ("no capacity: the run
//!   breaches from its lowest load level").
//! - Runs whose seconds carry no histogram but a p95 the tool reported per row (Locust's
//!   stats history, see [`find_with_reported_p95`]): a level's p95 is the median of the
//!   p95s reported for its seconds (without the highest), "as reported by" the tool.
//!
//! Runs without active users (offered-rate runs) have no levels here: no offered rate is
//! stored per second yet. Pure: no clock, files or network.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::hdr::{deserialize_histogram, histogram_percentile};
use super::timeseries::BucketIn;
use crate::domain::format;

/// Version of this rule: raise it when its answers change, so capacities kept in the
/// store are computed again.
pub const RULE_VERSION: u32 = 4;

/// Samples a level needs before its figures count.
const MIN_LEVEL_SAMPLES: u64 = 20;
/// Successful requests the low-load level needs before its p95 is the baseline.
pub const MIN_BASELINE_SAMPLES: u64 = 50;
/// The low-load p95 counts as at least this, ms (the histograms' resolution).
const MIN_BASELINE_MS: u64 = 1;
/// Most levels a smooth ramp is cut into.
const MAX_LEVELS: u32 = 20;
/// A stepped ramp's level shorter than this fraction of the seconds-weighted median level
/// is a transition between steps.
const TRANSITION_FRACTION: f64 = 0.25;
/// Error % above which errors breach.
pub const ERROR_PCT_LIMIT: f64 = 1.0;
/// p95 above this multiple of the low-load p95 breaches.
pub const P95_FACTOR: f64 = 2.0;
/// Seconds a breach (or the plateau past a knee) must span.
const HOLD_S: u64 = 5;
/// The load must rise this fraction past the knee for throughput to count as stopped.
const KNEE_MIN_LOAD_RISE: f64 = 0.2;
/// Across the plateau, successful throughput may grow at most this fraction of the growth
/// line's slope (requests/s per user) for it to count as stopped.
const KNEE_MAX_PLATEAU_SLOPE: f64 = 0.25;

/// What the report says about a ramped run's saturation (`"capacity"` in the run's JSON).
///
/// `users`, `throughput_rps`, `at_ms` and `se_rps` are the stated capacity (all `null`
/// when nothing saturated): what gates (`capacity_rps`, `capacity_users`), comparisons and
/// the runs list read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    /// Active users at the stated capacity (rounded), or `None`.
    pub users: Option<u32>,
    /// The stated capacity: successful requests/s sustained up to the first sustained
    /// breach, or `None` when nothing saturated.
    pub throughput_rps: Option<f64>,
    /// When the load first reached [`Capacity::users`], unix epoch ms, or `None`.
    pub at_ms: Option<i64>,
    /// Standard error of [`Capacity::throughput_rps`], req/s: the standard deviation of the
    /// per-second successful counts it is the mean of / √seconds. What comparisons take as
    /// its noise.
    #[serde(default)]
    pub se_rps: Option<f64>,
    /// What is passed first as the load rises: `"throughput"` (the knee), `"p95"` or
    /// `"errors"`; `None` when nothing is.
    pub limited_by: Option<String>,
    /// p95 of the baseline level, ms (the reference of the latency breach).
    pub low_load_p95_ms: Option<u64>,
    /// Active users of the baseline level.
    #[serde(default)]
    pub low_load_users: Option<u32>,
    /// Where successful throughput stops growing while the load keeps rising.
    pub knee: Option<Knee>,
    /// Where p95 passes twice its low-load value and stays there.
    pub latency_breach: Option<LatencyBreach>,
    /// Where error % passes 1 % and stays there.
    pub error_breach: Option<ErrorBreach>,
    /// The highest level: its active users, throughput and successful throughput.
    pub peak: Peak,
    /// One sentence naming each: "saturates at ~20 users, 398.0 req/s successful; p95
    /// doubles at 45 users; errors pass 1 % at 61 users", or "no saturation in this run:
    /// successful throughput grew to 60.0 req/s at 24 users".
    pub statement: String,
}

/// What [`Capacity::limited_by`] can name.
const LIMITS: [&str; 3] = ["throughput", "p95", "errors"];

/// The knee of the successful-throughput curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// Active users where the growth line meets the plateau (rounded to a whole user).
    pub users: u32,
    /// The plateau: seconds-weighted mean successful throughput of the levels past the
    /// knee, req/s.
    pub throughput_rps: f64,
    /// The plateau's throughput counting failed requests too, req/s.
    #[serde(default)]
    pub completed_rps: f64,
    /// First second whose level reached the knee, unix epoch ms.
    pub at_ms: i64,
    /// Slope of the growth line, successful requests/s per active user.
    pub growth_rps_per_user: f64,
    /// Seconds of the plateau (the levels past the knee).
    pub plateau_s: u64,
    /// Standard error of the plateau's successful throughput, req/s: the standard
    /// deviation of the plateau's per-second successful counts / √seconds.
    pub plateau_se_rps: f64,
}

/// Where p95 passed twice its low-load value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyBreach {
    /// Active users of the first level of the breach.
    pub users: u32,
    /// First second of that level, unix epoch ms.
    pub at_ms: i64,
    /// That level's p95 without its worst second, ms.
    pub p95_ms: u64,
    /// The limit it passed (2 × low-load p95), ms.
    pub limit_ms: f64,
}

/// Where error % passed 1 %.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBreach {
    /// Active users of the first level of the breach.
    pub users: u32,
    /// First second of that level, unix epoch ms.
    pub at_ms: i64,
    /// That level's error % without its worst second.
    pub error_pct: f64,
}

/// The highest load level of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    pub users: u32,
    /// Completed requests/s, failed ones included.
    pub throughput_rps: f64,
    /// Successful requests/s.
    #[serde(default)]
    pub successful_rps: f64,
}

/// One load level: the seconds at which `users` (or a band of users from `users`) were
/// active.
#[derive(Debug)]
struct Level {
    users: u32,
    /// Σ active users over the level's seconds (their mean places a band on the users axis).
    user_seconds: u64,
    seconds: u64,
    first_ms: i64,
    count: u64,
    errors: u64,
    hist: Option<Histogram<u64>>,
    /// The second with the highest p95: (p95 ms, its histogram).
    worst_latency: Option<(u64, Histogram<u64>)>,
    /// The second with the most errors: (count, errors).
    worst_errors: (u64, u64),
    /// p95s the tool reported for seconds without a histogram, ms (placeholders left out).
    reported_p95_ms: Vec<f64>,
    /// Σ (count − errors)² over the level's seconds (the spread of its per-second
    /// successful throughput).
    good_sq: f64,
}

impl Level {
    fn empty(users: u32, first_ms: i64) -> Level {
        Level {
            users,
            user_seconds: 0,
            seconds: 0,
            first_ms,
            count: 0,
            errors: 0,
            hist: None,
            worst_latency: None,
            worst_errors: (0, 0),
            reported_p95_ms: Vec::new(),
            good_sq: 0.0,
        }
    }

    /// One more second of the level: its sample and error counts.
    fn add_counts(&mut self, count: u64, errors: u64) {
        let errors = errors.min(count);
        self.seconds += 1;
        self.count += count;
        self.good_sq += ((count - errors) as f64).powi(2);
        self.errors += errors;
        if errors > self.worst_errors.1 {
            self.worst_errors = (count, errors);
        }
    }

    /// The latency histogram of the second last added.
    fn add_histogram(&mut self, h: Histogram<u64>) {
        if let Some(p95) = histogram_percentile(&h, 95.0)
            && self.worst_latency.as_ref().is_none_or(|(w, _)| p95 > *w)
        {
            self.worst_latency = Some((p95, h.clone()));
        }
        match &mut self.hist {
            Some(acc) => {
                let _ = acc.add(&h);
            }
            None => self.hist = Some(h),
        }
    }

    fn throughput(&self) -> f64 {
        self.count as f64 / self.seconds as f64
    }

    fn successful(&self) -> u64 {
        self.count - self.errors
    }

    /// Successful requests/s.
    fn good_throughput(&self) -> f64 {
        self.successful() as f64 / self.seconds as f64
    }

    /// Standard error of [`Level::good_throughput`], req/s.
    fn good_se(&self) -> f64 {
        se_of(self.seconds as f64, self.successful() as f64, self.good_sq)
    }

    fn mean_users(&self) -> f64 {
        self.user_seconds as f64 / self.seconds as f64
    }

    /// p95 of the level without its worst second (all of it when it has one second).
    fn p95_trimmed(&self) -> Option<u64> {
        let Some(hist) = self.hist.as_ref() else {
            return self.reported_p95_trimmed();
        };
        match &self.worst_latency {
            Some((_, worst)) if self.seconds >= 2 => {
                let mut rest = hist.clone();
                rest.subtract(worst).ok()?;
                histogram_percentile(&rest, 95.0)
            }
            _ => histogram_percentile(hist, 95.0),
        }
    }

    /// Median of the reported per-second p95s, the highest left out when there are two or
    /// more (nearest rank).
    fn reported_p95_trimmed(&self) -> Option<u64> {
        let mut v = self.reported_p95_ms.clone();
        v.sort_by(f64::total_cmp);
        if v.len() >= 2 {
            v.pop();
        }
        let rank = v.len().div_ceil(2).max(1);
        v.get(rank - 1).map(|p| p.round() as u64)
    }

    /// Error % of the level without the second with the most errors.
    fn error_pct_trimmed(&self) -> Option<f64> {
        let (mut count, mut errors) = (self.count, self.errors);
        if self.seconds >= 2 {
            count -= self.worst_errors.0;
            errors -= self.worst_errors.1;
        }
        (count > 0).then(|| errors as f64 * 100.0 / count as f64)
    }
}

/// Standard error of a mean of `n` per-second counts whose sum is `sum` and sum of
/// squares `sum_sq`: the sample standard deviation / √n, per second.
fn se_of(n: f64, sum: f64, sum_sq: f64) -> f64 {
    if n < 2.0 {
        return 0.0;
    }
    let mean = sum / n;
    let var = ((sum_sq - n * mean * mean) / (n - 1.0)).max(0.0);
    (var / n).sqrt()
}

/// A level's figures as the breaches judge them: p95 (in the histograms' unit) and error %,
/// each without the level's worst second (all of it when it has one second).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LevelFigures {
    pub p95: Option<u64>,
    pub error_pct: Option<f64>,
}

/// [`LevelFigures`] of a level made of `seconds`: (samples, errors, latency histogram) per
/// second. The same trimming as the levels of an imported run; `harrier load find` judges
/// its steps with it, so both state capacity the same way.
pub fn level_figures(seconds: &[(u64, u64, &Histogram<u64>)]) -> LevelFigures {
    let mut level = Level::empty(0, 0);
    for (count, errors, h) in seconds {
        level.add_counts(*count, *errors);
        if !h.is_empty() {
            level.add_histogram((*h).clone());
        }
    }
    LevelFigures {
        p95: level.p95_trimmed(),
        error_pct: level.error_pct_trimmed(),
    }
}

/// The latency breach: `p95` passes [`P95_FACTOR`] × `low_load_p95` (same unit).
pub fn latency_breaches(low_load_p95: f64, p95: f64) -> bool {
    p95 > P95_FACTOR * low_load_p95
}

/// The error breach: `error_pct` passes [`ERROR_PCT_LIMIT`].
pub fn errors_breach(error_pct: f64) -> bool {
    error_pct > ERROR_PCT_LIMIT
}

/// Finds the knee and the breaches in a run's per-second buckets (run totals, sorted by
/// start). `None` when the load never ramped: fewer than three levels with 20 samples.
pub fn find(buckets: &[BucketIn<'_>]) -> Option<Capacity> {
    find_with_reported_p95(buckets, &[])
}

/// [`find`] for a run whose buckets carry no histogram but whose tool reported a p95 per
/// second: `reported` is (bucket start, unix epoch ms; p95 ms), sorted by start. A reported
/// p95 of 0 or less is a placeholder (a tool's row before its first response) and is
/// ignored.
pub fn find_with_reported_p95(
    buckets: &[BucketIn<'_>],
    reported: &[(i64, f64)],
) -> Option<Capacity> {
    let levels = levels(buckets, reported)?;
    if levels.len() < 3 {
        return None;
    }
    let top = levels.last()?;
    let peak = Peak {
        users: top.users,
        throughput_rps: top.throughput(),
        successful_rps: top.good_throughput(),
    };
    let first_second_at = |users: u32, fallback: i64| {
        buckets
            .iter()
            .find(|b| b.active_users.is_some_and(|u| u >= users))
            .map_or(fallback, |b| b.start_ms)
    };
    let knee = knee(&levels).map(|mut k| {
        // The marker: the first second the load reached the knee.
        k.at_ms = first_second_at(k.users, levels[0].first_ms);
        k
    });
    // The baseline: the lowest level with enough successful requests and a known p95.
    let baseline = levels
        .iter()
        .position(|l| l.successful() >= MIN_BASELINE_SAMPLES && l.p95_trimmed().is_some());
    let low_p95 = baseline.and_then(|i| levels[i].p95_trimmed());
    let latency_breach = baseline.zip(low_p95).and_then(|(base, low)| {
        let low = low.max(MIN_BASELINE_MS) as f64;
        let i = first_holding(&levels, base + 1, |l| {
            l.p95_trimmed()
                .is_some_and(|p| latency_breaches(low, p as f64))
        })?;
        Some(LatencyBreach {
            users: levels[i].users,
            at_ms: levels[i].first_ms,
            p95_ms: levels[i].p95_trimmed()?,
            limit_ms: P95_FACTOR * low,
        })
    });
    // From the lowest level on: a run that fails from its lowest load has no capacity.
    let error_breach = first_holding(&levels, 0, |l| {
        l.error_pct_trimmed().is_some_and(errors_breach)
    })
    .and_then(|i| {
        Some((
            i,
            ErrorBreach {
                users: levels[i].users,
                at_ms: levels[i].first_ms,
                error_pct: levels[i].error_pct_trimmed()?,
            },
        ))
    });
    // What comes first as the load rises (the knee on a tie: it is where the rest begins).
    let first = [
        knee.as_ref().map(|k| (k.users, 0)),
        latency_breach.as_ref().map(|b| (b.users, 1)),
        error_breach.as_ref().map(|(_, b)| (b.users, 2)),
    ]
    .into_iter()
    .flatten()
    .min_by_key(|(users, what)| (*users, *what))
    .map(|(_, what)| what);
    // The capacity: the plateau at the knee, or the last level before the breach (none
    // when the breach is at the lowest level).
    let level_before = |users: u32| levels.iter().rev().find(|l| l.users < users);
    let stated: Option<(u32, f64, i64, f64)> = match first {
        Some(0) => knee
            .as_ref()
            .map(|k| (k.users, k.throughput_rps, k.at_ms, k.plateau_se_rps)),
        Some(what) => {
            let users = if what == 1 {
                latency_breach.as_ref().map(|b| b.users)
            } else {
                error_breach.as_ref().map(|(_, b)| b.users)
            };
            users.and_then(level_before).map(|l| {
                let u = l.mean_users().round() as u32;
                (
                    u,
                    l.good_throughput(),
                    first_second_at(u, l.first_ms),
                    l.good_se(),
                )
            })
        }
        None => None,
    };
    let limited_by = first.map(|i| LIMITS[i].to_owned());
    let error_breach = error_breach.map(|(_, b)| b);
    let statement = statement(
        stated.map(|s| (s.0, s.1)),
        first,
        knee.as_ref(),
        latency_breach.as_ref(),
        error_breach.as_ref(),
        &peak,
    );
    Some(Capacity {
        users: stated.map(|s| s.0),
        throughput_rps: stated.map(|s| s.1),
        at_ms: stated.map(|s| s.2),
        se_rps: stated.map(|s| s.3),
        limited_by,
        low_load_p95_ms: low_p95,
        low_load_users: baseline.map(|i| levels[i].mean_users().round() as u32),
        knee,
        latency_breach,
        error_breach,
        peak,
        statement,
    })
}

/// The levels of the rising part of the run, by users, each with 20 samples or more.
fn levels(buckets: &[BucketIn<'_>], reported: &[(i64, f64)]) -> Option<Vec<Level>> {
    // The run's last second is partial (not a dip): leave it out.
    let buckets = &buckets[..buckets.len().saturating_sub(1)];
    let max_users = buckets.iter().filter_map(|b| b.active_users).max()?;
    // The rising part: up to the last second at peak load (a ramp-down is not a level).
    let last_peak = buckets
        .iter()
        .rposition(|b| b.active_users == Some(max_users))?;
    let rising = &buckets[..=last_peak];
    let mut distinct: Vec<u32> = rising.iter().filter_map(|b| b.active_users).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let stepped = distinct.len() as u32 <= MAX_LEVELS;
    let band = if stepped {
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
                levels.push(Level::empty(key, b.start_ms));
                levels.len() - 1
            }
        };
        let level = &mut levels[i];
        level.user_seconds += u64::from(users);
        level.first_ms = level.first_ms.min(b.start_ms);
        level.add_counts(b.count, b.errors);
        if b.histogram.is_empty() {
            if let Ok(i) = reported.binary_search_by_key(&b.start_ms, |r| r.0)
                && reported[i].1 > 0.0
            {
                level.reported_p95_ms.push(reported[i].1);
            }
        } else if let Ok(h) = deserialize_histogram(b.histogram) {
            level.add_histogram(h);
        }
    }
    if stepped {
        // Transitions: short levels the load passed through between two held ones (a
        // ramp's first seconds up to its first held level, and the seconds past the last,
        // are the ramp itself and stay).
        let typical = weighted_median_seconds(&levels);
        let held = |l: &Level| l.seconds as f64 >= TRANSITION_FRACTION * typical;
        let held_users = levels.iter().filter(|l| held(l)).map(|l| l.users);
        let (lo, hi) = (held_users.clone().min(), held_users.max());
        if let (Some(lo), Some(hi)) = (lo, hi) {
            levels.retain(|l| held(l) || l.users < lo || l.users > hi);
        }
    }
    levels.retain(|l| l.count >= MIN_LEVEL_SAMPLES);
    levels.sort_by_key(|l| l.users);
    Some(levels)
}

/// The length of the level the median second of the ramp falls in (levels by length).
fn weighted_median_seconds(levels: &[Level]) -> f64 {
    let mut lengths: Vec<u64> = levels.iter().map(|l| l.seconds).collect();
    lengths.sort_unstable();
    let total: u64 = lengths.iter().sum();
    let mut seen = 0;
    for s in lengths {
        seen += s;
        if 2 * seen >= total {
            return s as f64;
        }
    }
    0.0
}

/// The knee by the two-segment fit described in the module docs, or `None` when
/// successful throughput did not stop growing.
fn knee(levels: &[Level]) -> Option<Knee> {
    let point = |l: &Level| (l.mean_users(), l.good_throughput(), l.seconds as f64);
    // (squared error, split, growth slope, plateau)
    let mut best: Option<(f64, usize, f64, f64)> = None;
    for split in 1..levels.len() {
        let (below, above) = levels.split_at(split);
        let (mut sxu, mut suu) = (0.0, 0.0);
        for (u, x, w) in below.iter().map(point) {
            sxu += w * u * x;
            suu += w * u * u;
        }
        let (mut sx, mut sw) = (0.0, 0.0);
        for (_, x, w) in above.iter().map(point) {
            sx += w * x;
            sw += w;
        }
        if suu <= 0.0 || sw <= 0.0 {
            continue;
        }
        let (b, p) = (sxu / suu, sx / sw);
        let sse: f64 = below
            .iter()
            .map(point)
            .map(|(u, x, w)| w * (x - b * u).powi(2))
            .chain(above.iter().map(point).map(|(_, x, w)| w * (x - p).powi(2)))
            .sum();
        if best.is_none_or(|(e, ..)| sse < e) {
            best = Some((sse, split, b, p));
        }
    }
    let (_, split, b, p) = best?;
    if b <= 0.0 {
        return None;
    }
    let above = &levels[split..];
    let users = (p / b).clamp(levels[split - 1].mean_users(), levels[split].mean_users());
    let top_users = above.last()?.mean_users();
    let plateau_s: u64 = above.iter().map(|l| l.seconds).sum();
    if top_users < (1.0 + KNEE_MIN_LOAD_RISE) * users || plateau_s < HOLD_S {
        return None;
    }
    // The plateau's own slope (weighted least squares), when it has two levels or more.
    if above.len() >= 2 {
        let (mut sw, mut su, mut sx) = (0.0, 0.0, 0.0);
        for (u, x, w) in above.iter().map(point) {
            sw += w;
            su += w * u;
            sx += w * x;
        }
        let (mu, mx) = (su / sw, sx / sw);
        let (mut cov, mut var) = (0.0, 0.0);
        for (u, x, w) in above.iter().map(point) {
            cov += w * (u - mu) * (x - mx);
            var += w * (u - mu).powi(2);
        }
        if var > 0.0 && cov / var > KNEE_MAX_PLATEAU_SLOPE * b {
            return None;
        }
    }
    // The plateau's per-second successful counts: their spread gives its standard error.
    let (n, good, good_sq, count) = above.iter().fold((0.0, 0.0, 0.0, 0.0), |(n, s, q, c), l| {
        (
            n + l.seconds as f64,
            s + l.successful() as f64,
            q + l.good_sq,
            c + l.count as f64,
        )
    });
    Some(Knee {
        users: users.round() as u32,
        throughput_rps: p,
        completed_rps: count / n,
        at_ms: 0, // set by `find`, from the seconds
        growth_rps_per_user: b,
        plateau_s,
        plateau_se_rps: se_of(n, good, good_sq),
    })
}

/// Index of the first level (from `from` on) from which `passes` holds for levels
/// spanning at least [`HOLD_S`] seconds in a row.
fn first_holding(levels: &[Level], from: usize, passes: impl Fn(&Level) -> bool) -> Option<usize> {
    let mut i = from;
    while i < levels.len() {
        let mut held_s = 0;
        let mut j = i;
        while j < levels.len() && passes(&levels[j]) {
            held_s += levels[j].seconds;
            if held_s >= HOLD_S {
                return Some(i);
            }
            j += 1;
        }
        i = j + 1;
    }
    None
}

fn users_text(users: u32) -> String {
    format!(
        "{} {}",
        format::int(i64::from(users)),
        if users == 1 { "user" } else { "users" }
    )
}

/// The one sentence of [`Capacity::statement`]: the capacity first, then each breach in
/// the order the load reached it. `stated` is (users, successful req/s); `first` indexes
/// [`LIMITS`].
fn statement(
    stated: Option<(u32, f64)>,
    first: Option<usize>,
    knee: Option<&Knee>,
    latency: Option<&LatencyBreach>,
    errors: Option<&ErrorBreach>,
    peak: &Peak,
) -> String {
    let successful = |rps: f64| format!("{} successful", format::rps(Some(rps)));
    let mut parts = vec![match (stated, first) {
        (Some((users, rps)), Some(0)) => {
            format!("saturates at ~{}, {}", users_text(users), successful(rps))
        }
        (Some((users, rps)), Some(_)) => {
            format!("sustains {} at {}", successful(rps), users_text(users))
        }
        (None, Some(_)) => "no capacity: the run breaches from its lowest load level".to_string(),
        _ => format!(
            "no saturation in this run: successful throughput grew to {} at {}",
            format::rps(Some(peak.successful_rps)),
            users_text(peak.users)
        ),
    }];
    let mut rest: Vec<(u32, String)> = Vec::new();
    if let Some(k) = knee.filter(|_| first != Some(0)) {
        rest.push((
            k.users,
            format!(
                "successful throughput stops growing at ~{} ({})",
                users_text(k.users),
                format::rps(Some(k.throughput_rps))
            ),
        ));
    }
    if let Some(b) = latency {
        rest.push((b.users, format!("p95 doubles at {}", users_text(b.users))));
    }
    if let Some(b) = errors {
        rest.push((
            b.users,
            format!("errors pass 1 % at {}", users_text(b.users)),
        ));
    }
    rest.sort_by_key(|(users, _)| *users);
    parts.extend(rest.into_iter().map(|(_, text)| text));
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::runs::hdr::{new_histogram, serialize_histogram};

    /// One second: (start s, users, count, errors, serialized histogram).
    type Second = (i64, u32, u64, u64, Vec<u8>);

    /// A second whose `count` requests took between `latency_ms` and 1.2 × `latency_ms`.
    fn second(t: i64, users: u32, count: u64, errors: u64, latency_ms: u64) -> Second {
        let mut h = new_histogram::<u64>();
        for i in 0..count {
            h.record(latency_ms + latency_ms * i / count.max(1) / 5)
                .unwrap();
        }
        (t, users, count, errors, serialize_histogram(&h))
    }

    fn buckets(rows: &[Second]) -> Vec<BucketIn<'_>> {
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

    /// A deterministic noise in [-1, 1] (a linear congruential generator).
    struct Noise(u64);
    impl Noise {
        fn next(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        }
    }

    /// A closed-loop service of `workers` workers, each busy `service_ms` per request,
    /// driven by `users` with `think_ms` of think time, one second at a time: throughput
    /// = min(users / (S + Z), N / S) (Little's law, the interactive response time law),
    /// ± `noise` relative; response time = users / throughput − Z (≥ S); past the queue
    /// bound (`queue_bound` waiting requests) the excess users get fast 503s (errors
    /// counted on top of the served requests).
    /// How long a refused request takes, ms.
    const FAST_MS: f64 = 5.0;

    struct ClosedLoop {
        workers: f64,
        service_ms: f64,
        think_ms: f64,
        queue_bound: Option<f64>,
        noise: f64,
    }

    impl ClosedLoop {
        fn knee_users(&self) -> f64 {
            self.workers * (self.service_ms + self.think_ms) / self.service_ms
        }
        fn capacity_rps(&self) -> f64 {
            self.workers * 1000.0 / self.service_ms
        }
        /// `steps` of (users, seconds), one row per second.
        fn run(&self, steps: &[(u32, i64)], seed: u64) -> Vec<Second> {
            let mut noise = Noise(seed);
            let mut rows = Vec::new();
            let mut t = 0;
            for &(users, seconds) in steps {
                let u = f64::from(users);
                let x = (u * 1000.0 / (self.service_ms + self.think_ms)).min(self.capacity_rps());
                let r_ms = (u * 1000.0 / x - self.think_ms).max(self.service_ms);
                // Users neither thinking nor being served are waiting.
                let queued = (u - x * (self.think_ms + self.service_ms) / 1000.0).max(0.0);
                for _ in 0..seconds {
                    let served = (x * (1.0 + self.noise * noise.next())).round() as u64;
                    // Past the queue bound the excess users are answered 503 at once, one
                    // every `FAST_MS` each: a flood of fast failures beside the served
                    // requests, as a gateway or a full accept queue answers.
                    let refused = match self.queue_bound {
                        Some(q) if queued > q => ((queued - q) * 1000.0 / FAST_MS).round() as u64,
                        _ => 0,
                    };
                    rows.push(second(
                        t,
                        users,
                        served + refused,
                        refused,
                        r_ms.round() as u64,
                    ));
                    t += 1;
                }
            }
            rows
        }
    }

    fn assert_near(got: f64, truth: f64, tolerance: f64, what: &str) {
        assert!(
            (got - truth).abs() <= tolerance * truth,
            "{what}: got {got}, truth {truth} (±{} %)",
            tolerance * 100.0
        );
    }

    #[test]
    fn the_knee_of_a_stepped_closed_loop_run_is_where_the_workers_are_all_busy() {
        // 20 workers of 50 ms, 30 ms think time: the knee is at 32 users, 400 req/s.
        let service = ClosedLoop {
            workers: 20.0,
            service_ms: 50.0,
            think_ms: 30.0,
            queue_bound: Some(30.0),
            noise: 0.05,
        };
        let steps: Vec<(u32, i64)> = (1..=8).map(|i| (i * 10, 15)).collect();
        let rows = service.run(&steps, 7);
        let c = find(&buckets(&rows)).expect("a ramp");
        let knee = c.knee.as_ref().expect("throughput stopped growing");
        assert_near(
            f64::from(knee.users),
            service.knee_users(),
            0.15,
            "knee users",
        );
        assert_near(
            knee.throughput_rps,
            service.capacity_rps(),
            0.10,
            "knee req/s",
        );
        assert_eq!(c.users, Some(knee.users), "the capacity is the knee's");
        assert_eq!(c.throughput_rps, Some(knee.throughput_rps));
        assert_eq!(c.limited_by.as_deref(), Some("throughput"));
        // Stored and read back (the run's cached capacity), it is the same capacity.
        let json = serde_json::to_string(&c).expect("serialises");
        assert_eq!(
            serde_json::from_str::<Capacity>(&json).expect("reads back"),
            c
        );
        // p95 doubles once the response time passes twice the low-load one (50 ms):
        // users / 400 req/s − 30 ms > 100 ms from 52 users, i.e. the 60-user step.
        let latency = c.latency_breach.as_ref().expect("p95 doubles");
        assert_eq!(latency.users, 60);
        // 32 users busy or thinking, 30 waiting at most: the excess is refused past 62.
        let errors = c.error_breach.as_ref().expect("errors pass 1 %");
        assert_eq!(errors.users, 70);
        assert_eq!(
            c.statement,
            format!(
                "saturates at ~{} users, {} successful; p95 doubles at 60 users; errors pass 1 % at 70 users",
                knee.users,
                format::rps(Some(knee.throughput_rps))
            )
        );
    }

    #[test]
    fn the_knee_of_a_smooth_ramp_is_found_without_think_time() {
        // 1 → 60 users over 120 s against 20 workers of 40 ms: knee at 20 users, 500 req/s.
        let service = ClosedLoop {
            workers: 20.0,
            service_ms: 40.0,
            think_ms: 0.0,
            queue_bound: None,
            noise: 0.08,
        };
        let steps: Vec<(u32, i64)> = (0..120).map(|t| (1 + t as u32 / 2, 1)).collect();
        let rows = service.run(&steps, 3);
        let knee = find(&buckets(&rows)).and_then(|c| c.knee).expect("a knee");
        assert_near(
            f64::from(knee.users),
            service.knee_users(),
            0.15,
            "knee users",
        );
        assert_near(
            knee.throughput_rps,
            service.capacity_rps(),
            0.10,
            "knee req/s",
        );
        // The marker: the first second at the knee's level.
        let first_at_knee = rows.iter().find(|r| r.1 >= knee.users).unwrap().0;
        assert!((knee.at_ms / 1000 - first_at_knee).abs() <= 4, "{knee:?}");
    }

    #[test]
    fn a_run_that_never_saturates_says_so() {
        // 100 workers: 10 → 60 users never keep more than 60 busy.
        let service = ClosedLoop {
            workers: 100.0,
            service_ms: 50.0,
            think_ms: 50.0,
            queue_bound: Some(10.0),
            noise: 0.05,
        };
        let steps: Vec<(u32, i64)> = (1..=6).map(|i| (i * 10, 10)).collect();
        for seed in 1..20 {
            let rows = service.run(&steps, seed);
            let c = find(&buckets(&rows)).expect("a ramp");
            assert_eq!(c.knee, None, "seed {seed}: {}", c.statement);
            assert_eq!(
                (c.latency_breach.as_ref(), c.error_breach.as_ref()),
                (None, None)
            );
            assert_eq!(c.users, None);
            let top: f64 = rows
                .iter()
                .filter(|r| r.1 == 60)
                .map(|r| r.2 as f64)
                .sum::<f64>()
                / rows.iter().filter(|r| r.1 == 60).count() as f64;
            // the last second is left out (partial), so the peak is within noise of it
            assert_near(c.peak.throughput_rps, top, 0.02, "peak");
            assert_eq!(
                c.statement,
                format!(
                    "no saturation in this run: successful throughput grew to {} at 60 users",
                    format::rps(Some(c.peak.successful_rps))
                )
            );
        }
    }

    #[test]
    fn one_noisy_second_breaches_nothing() {
        // A healthy stepped run (10 → 40 users, 10 s each) with one awful second at 30 users:
        // half its requests fail and take ten times as long.
        let mut rows = Vec::new();
        let mut t = 0;
        for users in [10u32, 20, 30, 40] {
            for s in 0..10 {
                let count = u64::from(users) * 10;
                rows.push(if users == 30 && s == 4 {
                    second(t, users, count, count / 2, 500)
                } else {
                    second(t, users, count, 0, 50)
                });
                t += 1;
            }
        }
        let c = find(&buckets(&rows)).expect("a ramp");
        assert_eq!(c.latency_breach, None);
        assert_eq!(c.error_breach, None);
        assert_eq!(c.knee, None);
        // The same second held for five seconds is a breach.
        for r in rows.iter_mut().filter(|r| r.1 == 30).take(6) {
            *r = second(r.0, 30, r.2, r.2 / 2, 500);
        }
        let c = find(&buckets(&rows)).expect("a ramp");
        assert_eq!(c.latency_breach.map(|b| b.users), Some(30));
        assert_eq!(c.error_breach.map(|b| b.users), Some(30));
    }

    #[test]
    fn reported_p95s_serve_when_seconds_have_no_histogram() {
        // Locust-like: no histograms; the tool reported p95 50 ms at 10 and 20 users, then
        // 150 ms (one second of 400 ms at 20 users, left out as the worst).
        let mut rows = Vec::new();
        let mut reported = Vec::new();
        for (step, users) in [10u32, 20, 30, 40].into_iter().enumerate() {
            for s in 0..10 {
                let t = step as i64 * 10 + s;
                rows.push((t, users, u64::from(users) * 10, 0, Vec::new()));
                let p95 = match (users, s) {
                    (20, 3) => 400.0,
                    (10 | 20, _) => 50.0,
                    _ => 150.0,
                };
                reported.push((t * 1000, p95));
            }
        }
        let c = find_with_reported_p95(&buckets(&rows), &reported).expect("a ramp");
        assert_eq!(c.low_load_p95_ms, Some(50));
        let b = c.latency_breach.expect("p95 150 ms > 2 × 50 ms");
        assert_eq!((b.users, b.p95_ms, b.at_ms), (30, 150, 20_000));
        assert_eq!(
            find(&buckets(&rows)).unwrap().latency_breach,
            None,
            "no p95 known"
        );
    }

    #[test]
    fn a_flood_of_fast_503s_is_no_growth_and_the_capacity_is_the_successful_plateau() {
        // 20 workers of 50 ms, no think time, a queue of 40: the knee is at 20 users and
        // 400 req/s; from 60 users on the excess gets 503s at once, so completed requests
        // rise to thousands per second while successful ones stay at 400.
        let service = ClosedLoop {
            workers: 20.0,
            service_ms: 50.0,
            think_ms: 0.0,
            queue_bound: Some(40.0),
            noise: 0.04,
        };
        let steps: Vec<(u32, i64)> = (1..=10).map(|i| (i * 8, 10)).collect();
        let rows = service.run(&steps, 11);
        let c = find(&buckets(&rows)).expect("a ramp");
        let peak_completed = c.peak.throughput_rps;
        assert!(peak_completed > 3.0 * service.capacity_rps(), "{c:?}");
        assert_near(
            c.throughput_rps.expect("a capacity"),
            service.capacity_rps(),
            0.10,
            "capacity",
        );
        assert_near(
            f64::from(c.users.expect("users")),
            service.knee_users(),
            0.25,
            "users at capacity",
        );
        assert_eq!(c.limited_by.as_deref(), Some("throughput"));
        let knee = c.knee.as_ref().expect("a knee");
        assert!(knee.completed_rps > knee.throughput_rps, "{knee:?}");
        assert!(c.error_breach.is_some(), "the 503s breach");
        assert!(c.statement.starts_with("saturates at ~"), "{}", c.statement);
        assert!(c.statement.contains("req/s successful"), "{}", c.statement);
        assert!(
            c.statement.contains("errors pass 1 % at"),
            "{}",
            c.statement
        );
    }

    #[test]
    fn when_p95_doubles_first_the_capacity_is_the_level_before_it() {
        // Throughput keeps growing with the users, but latency climbs from 30 users on.
        let mut rows = Vec::new();
        let mut t = 0;
        for (users, latency) in [(10u32, 50u64), (20, 60), (30, 150), (40, 200), (50, 250)] {
            for _ in 0..10 {
                rows.push(second(t, users, u64::from(users) * 10, 0, latency));
                t += 1;
            }
        }
        let c = find(&buckets(&rows)).expect("a ramp");
        assert_eq!(c.knee, None);
        assert_eq!(c.latency_breach.as_ref().map(|b| b.users), Some(30));
        assert_eq!(c.limited_by.as_deref(), Some("p95"));
        assert_eq!(c.users, Some(20));
        assert_near(c.throughput_rps.unwrap(), 200.0, 0.001, "capacity");
        assert_eq!(
            c.statement,
            "sustains 200.0 req/s successful at 20 users; p95 doubles at 30 users"
        );
    }

    #[test]
    fn placeholder_percentiles_and_thin_windows_are_no_baseline() {
        // Locust-like: the first rows report p95 0 (no response in the window yet) and the
        // lowest level holds fewer than the baseline's samples.
        let mut rows = Vec::new();
        let mut reported = Vec::new();
        for (step, users) in [2u32, 10, 20, 30, 40].into_iter().enumerate() {
            for s in 0..10 {
                let t = step as i64 * 10 + s;
                let count = if users == 2 { 3 } else { u64::from(users) * 10 };
                rows.push((t, users, count, 0, Vec::new()));
                let p95 = match (users, s) {
                    (2, _) | (10, 0..=2) => 0.0,
                    (10 | 20, _) => 50.0,
                    _ => 80.0,
                };
                reported.push((t * 1000, p95));
            }
        }
        let c = find_with_reported_p95(&buckets(&rows), &reported).expect("a ramp");
        assert_eq!(c.low_load_p95_ms, Some(50));
        assert_eq!(c.low_load_users, Some(10));
        assert_eq!(c.latency_breach, None, "80 ms is below 2 × 50 ms: {c:?}");
    }

    #[test]
    fn one_second_transitions_between_steps_are_not_levels() {
        // Steps of 30 s at 10, 20, 30, 40 users; between them the tool adds users over one
        // second each at in-between counts whose seconds are slow and failing.
        let mut rows = Vec::new();
        let mut t = 0;
        for users in [10u32, 20, 30, 40] {
            if users > 10 {
                rows.push(second(t, users - 5, 500, 50, 900));
                t += 1;
            }
            for _ in 0..30 {
                rows.push(second(t, users, u64::from(users) * 10, 0, 50));
                t += 1;
            }
        }
        let c = find(&buckets(&rows)).expect("a ramp");
        assert_eq!(
            (
                c.knee.as_ref(),
                c.latency_breach.as_ref(),
                c.error_breach.as_ref()
            ),
            (None, None, None),
            "{}",
            c.statement
        );
        assert_eq!(c.low_load_users, Some(10));
        // A ramp's own first seconds, below its first held level, are levels: users added
        // one second at a time up to a long hold are the ramp, not transitions.
        let mut rows = Vec::new();
        for (t, users) in [10u32, 20, 30, 40].into_iter().enumerate() {
            rows.push(second(t as i64, users, u64::from(users) * 10, 0, 50));
        }
        for t in 4..20 {
            rows.push(second(t, 50, 500, 0, 50));
        }
        let c = find(&buckets(&rows)).expect("five levels: a ramp");
        assert_eq!(c.low_load_users, Some(10), "{c:?}");
    }

    #[test]
    fn flat_load_has_no_saturation_figures() {
        let flat: Vec<_> = (0..30).map(|t| second(t, 10, 100, 0, 50)).collect();
        assert_eq!(find(&buckets(&flat)), None, "load never ramped");
        assert_eq!(find(&[]), None);
    }

    #[test]
    fn a_run_that_fails_from_its_lowest_load_has_no_capacity() {
        // Half the requests fail at every level, 1 → 5 users (every other URL a 404).
        let mut rows = Vec::new();
        let mut t = 0;
        for users in 1u32..=5 {
            for _ in 0..3 {
                let count = u64::from(users) * 100;
                rows.push(second(t, users, count, count / 2, 2));
                t += 1;
            }
        }
        let c = find(&buckets(&rows)).expect("a ramp");
        assert_eq!(c.error_breach.as_ref().map(|b| b.users), Some(1));
        assert_eq!((c.users, c.throughput_rps), (None, None));
        assert_eq!(c.limited_by.as_deref(), Some("errors"));
        assert_eq!(
            c.statement,
            "no capacity: the run breaches from its lowest load level; errors pass 1 % at 1 user"
        );
    }
}
