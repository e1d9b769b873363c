//! Run comparison: figures of 2 to 10 runs side by side, each run's change against the
//! first (the reference), and a verdict per figure that tells a real change from noise.
//!
//! Owns the comparison shapes ([`Comparison`], [`Change`], [`Verdict`]), the block
//! bootstrap ([`bootstrap`]) and the draws a run stores so a comparison need not resample
//! its buckets ([`stored`]), change-point detection over a scenario's runs
//! ([`changepoint`]), gates for `harrier check` ([`gates`]) and the text, Markdown and
//! self-contained HTML renderings ([`render`]). Pure domain code: it knows nothing of
//! axum or SQL; `crate::services::comparisons` loads runs from the store into [`RunInput`]s.
//!
//! How a verdict is reached (shown in the console and the exports):
//! - figures are the runs' exact statistics (docs/numbers.md);
//! - change = run − reference, absolute and in % of the reference (error % changes are
//!   also read in percentage points);
//! - the 95 % interval of the change comes from a block bootstrap of both runs' per-second
//!   buckets (see [`bootstrap`]): resample both runs, drawing blocks at the same relative
//!   places in each (runs of a scenario share their load profile), take the difference,
//!   keep the 2.5th and 97.5th percentiles of [`DEFAULT_RESAMPLES`] differences;
//! - `worse` / `better`: the interval excludes 0 AND the change is at least the minimum
//!   effect (default [`DEFAULT_MIN_EFFECT_PCT`] % of the reference; for error % at least
//!   that share of the reference's error % and at least 0.1 points). Lower is better for
//!   response times and error %, higher for throughput. Otherwise `no_change`.
//! - `null`: no verdict — one of the runs has no per-second data (summary-only runs,
//!   "reported by TOOL"), the figure is missing, or it is the count or the max (the count
//!   is not a performance figure; the max is one sample, no interval can be trusted).

pub mod bootstrap;
pub mod changepoint;
pub mod gates;
pub mod render;
mod sparse;
pub mod stored;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::runs::Stats;
pub use bootstrap::{Draws, SecondIn};

/// Default minimum effect, % of the reference value.
pub const DEFAULT_MIN_EFFECT_PCT: f64 = 5.0;
/// Bootstrap resamples per run and scope.
pub const DEFAULT_RESAMPLES: usize = 1000;
/// Most runs one comparison takes.
pub const MAX_RUNS: usize = 10;
/// Points of the error % effect below which no change is called, whatever the reference.
pub const MIN_ERROR_EFFECT_POINTS: f64 = 0.1;

/// How the verdicts were computed, for people.
pub const METHOD: &str = "Change vs the reference run; 95 % interval from a block bootstrap \
of both runs' per-second buckets (blocks of ≈ √n consecutive seconds drawn at the same relative \
places in both runs, so a ramp is compared with a ramp; 1,000 resamples, seeded); \
a change is called better or worse only when the interval excludes 0 and the change is at least \
the minimum effect. Percentiles of resamples come from merged HDR histograms (≤ 0.1 % error). \
Each run's resamples are drawn once, when it is stored, and kept exactly (no coarser summary).";

/// A figure compared between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    Count,
    ErrorPct,
    MeanMs,
    P50Ms,
    P90Ms,
    P95Ms,
    P99Ms,
    MaxMs,
    ThroughputRps,
    /// Successful requests per second (completed and not failed).
    SuccessfulRps,
    /// The stated capacity of the saturation analysis (successful req/s sustained up to the
    /// first breach), or the sustained rate of a `harrier load find` search (the run total
    /// only; not in [`Figure::ALL`]: it is no per-second figure and is compared in
    /// [`Comparison::capacity`]).
    CapacityRps,
    /// The active users at the stated capacity (the run total only, like
    /// [`Figure::CapacityRps`]).
    CapacityUsers,
}

/// Which way is good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
    /// Neither (the count).
    Neither,
}

impl Figure {
    /// Every figure, in table order.
    pub const ALL: [Figure; 10] = [
        Figure::Count,
        Figure::ErrorPct,
        Figure::MeanMs,
        Figure::P50Ms,
        Figure::P90Ms,
        Figure::P95Ms,
        Figure::P99Ms,
        Figure::MaxMs,
        Figure::ThroughputRps,
        Figure::SuccessfulRps,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    /// The JSON key (`"p95_ms"`).
    pub fn key(self) -> &'static str {
        match self {
            Figure::Count => "count",
            Figure::ErrorPct => "error_pct",
            Figure::MeanMs => "mean_ms",
            Figure::P50Ms => "p50_ms",
            Figure::P90Ms => "p90_ms",
            Figure::P95Ms => "p95_ms",
            Figure::P99Ms => "p99_ms",
            Figure::MaxMs => "max_ms",
            Figure::ThroughputRps => "throughput_rps",
            Figure::SuccessfulRps => "successful_rps",
            Figure::CapacityRps => "capacity_rps",
            Figure::CapacityUsers => "capacity_users",
        }
    }

    /// The name people read (`"p95"`).
    pub fn name(self) -> &'static str {
        match self {
            Figure::Count => "Requests",
            Figure::ErrorPct => "Error %",
            Figure::MeanMs => "Mean",
            Figure::P50Ms => "p50",
            Figure::P90Ms => "p90",
            Figure::P95Ms => "p95",
            Figure::P99Ms => "p99",
            Figure::MaxMs => "Max",
            Figure::ThroughputRps => "Throughput",
            Figure::SuccessfulRps => "Successful throughput",
            Figure::CapacityRps => "Capacity",
            Figure::CapacityUsers => "Users at capacity",
        }
    }

    pub fn better(self) -> Better {
        match self {
            Figure::Count => Better::Neither,
            Figure::ThroughputRps
            | Figure::SuccessfulRps
            | Figure::CapacityRps
            | Figure::CapacityUsers => Better::Higher,
            _ => Better::Lower,
        }
    }

    /// True when a verdict is given for this figure.
    pub fn has_verdict(self) -> bool {
        !matches!(self, Figure::Count | Figure::MaxMs)
    }

    /// The figure of a scope's statistics.
    pub fn of(self, s: &Stats) -> Option<f64> {
        match self {
            Figure::Count => Some(s.count as f64),
            Figure::ErrorPct => s.error_pct,
            Figure::MeanMs => s.mean_ms,
            Figure::P50Ms => s.p50_ms,
            Figure::P90Ms => s.p90_ms,
            Figure::P95Ms => s.p95_ms,
            Figure::P99Ms => s.p99_ms,
            Figure::MaxMs => s.max_ms,
            Figure::ThroughputRps => s.throughput_rps,
            Figure::SuccessfulRps => s.successful_rps(),
            Figure::CapacityRps | Figure::CapacityUsers => None,
        }
    }

    /// A value with its unit, for people ("412 ms", "1.20 %", "995.0 req/s").
    pub fn format(self, v: Option<f64>) -> String {
        use crate::domain::format;
        match self {
            Figure::Count => v.map_or(format::NONE.into(), |v| format::int(v as i64)),
            Figure::ErrorPct => format::pct(v),
            Figure::ThroughputRps | Figure::SuccessfulRps | Figure::CapacityRps => format::rps(v),
            Figure::CapacityUsers => v.map_or(format::NONE.into(), |v| {
                format!("{} users", format::int(v.round() as i64))
            }),
            _ => format::ms(v),
        }
    }
}

/// A run as the comparison names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRef {
    pub id: i64,
    pub name: String,
    pub scenario: Option<String>,
    pub tool: String,
    pub summary_only: bool,
    pub started_at_ms: Option<i64>,
    pub imported_at_ms: i64,
    /// Console page of the run.
    pub url: String,
}

/// One scope of a run to compare: its exact statistics and its per-second buckets.
#[derive(Debug, Clone)]
pub struct ScopeInput {
    /// `None`: the run total.
    pub label: Option<String>,
    pub stats: Stats,
    /// Sorted by start; empty for summary-only runs.
    pub seconds: Vec<SecondIn>,
}

/// A run to compare: index 0 of `scopes` is the run total.
#[derive(Debug, Clone)]
pub struct RunInput {
    pub run: RunRef,
    pub scopes: Vec<ScopeInput>,
}

/// Comparison settings.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Smallest change (in % of the reference) that is called better or worse.
    pub min_effect_pct: f64,
    pub resamples: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            min_effect_pct: DEFAULT_MIN_EFFECT_PCT,
            resamples: DEFAULT_RESAMPLES,
        }
    }
}

/// Better, worse, or within noise / below the minimum effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    NoChange,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoChange => "no change",
        }
    }
}

/// One figure of one run against the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// run − reference, in the figure's unit.
    pub abs: Option<f64>,
    /// (run − reference) / reference × 100; `null` when the reference is 0 or missing.
    pub pct: Option<f64>,
    /// 95 % interval of the change from the bootstrap: in % of the reference, except for
    /// `error_pct` where it is in percentage points; `null` without per-second data.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub verdict: Option<Verdict>,
}

/// One run's figures in one scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunScope {
    pub run_id: i64,
    /// False when the run has no such label (every figure is then `null`).
    pub present: bool,
    pub count: Option<u64>,
    pub error_pct: Option<f64>,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub throughput_rps: Option<f64>,
    #[serde(default)]
    pub successful_rps: Option<f64>,
    /// Change per figure key against the reference; `null` for the reference itself.
    pub changes: Option<BTreeMap<Figure, Change>>,
}

impl RunScope {
    pub fn get(&self, f: Figure) -> Option<f64> {
        match f {
            Figure::Count => self.count.map(|c| c as f64),
            Figure::ErrorPct => self.error_pct,
            Figure::MeanMs => self.mean_ms,
            Figure::P50Ms => self.p50_ms,
            Figure::P90Ms => self.p90_ms,
            Figure::P95Ms => self.p95_ms,
            Figure::P99Ms => self.p99_ms,
            Figure::MaxMs => self.max_ms,
            Figure::ThroughputRps => self.throughput_rps,
            Figure::SuccessfulRps => self.successful_rps,
            Figure::CapacityRps | Figure::CapacityUsers => None,
        }
    }

    pub fn change(&self, f: Figure) -> Option<&Change> {
        self.changes.as_ref().and_then(|c| c.get(&f))
    }

    fn new(run_id: i64, stats: Option<&Stats>) -> RunScope {
        let f = |fig: Figure| stats.and_then(|s| fig.of(s));
        RunScope {
            run_id,
            present: stats.is_some(),
            count: stats.map(|s| s.count),
            error_pct: f(Figure::ErrorPct),
            mean_ms: f(Figure::MeanMs),
            p50_ms: f(Figure::P50Ms),
            p90_ms: f(Figure::P90Ms),
            p95_ms: f(Figure::P95Ms),
            p99_ms: f(Figure::P99Ms),
            max_ms: f(Figure::MaxMs),
            throughput_rps: f(Figure::ThroughputRps),
            successful_rps: f(Figure::SuccessfulRps),
            changes: None,
        }
    }
}

/// One scope (the run total, or a label matched by its text) across the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScopeComparison {
    /// `null`: all requests (the run totals).
    pub label: Option<String>,
    /// One per run, in the comparison's order.
    pub runs: Vec<RunScope>,
}

/// The comparison of 2 to 10 runs (`GET /api/v1/compare`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The runs; the first is the reference.
    pub runs: Vec<RunRef>,
    pub min_effect_pct: f64,
    pub resamples: usize,
    pub confidence_pct: f64,
    /// How the verdicts were computed.
    pub method: String,
    /// Index 0: the run totals; then the labels (reference's order first).
    pub scopes: Vec<ScopeComparison>,
    /// Each run's stated capacity (its saturation analysis, or its search's answer), in
    /// `runs` order, with its change against the reference; empty when not computed.
    #[serde(default)]
    pub capacity: Vec<RunCapacity>,
}

/// How capacity changes are judged, for people.
pub const CAPACITY_METHOD: &str = "Capacity is what each run states: for a ramp, the successful throughput (requests that did not fail, per second) sustained up to the first sustained breach — the knee where it stops growing while the load keeps rising, p95 passing twice its low-load value, or errors passing 1 % — and the users there; for a harrier load find search, the throughput at the highest rate it sustained. Its noise is the standard error of that mean (standard deviation of its per-second successful counts / √seconds); a change is called better or worse when |change| > 1.96 × √(se₁² + se₂²) and is at least the minimum effect. A run whose successful throughput still grew at its end, with no breach, has no capacity figure (at least its peak).";

/// One run's capacity in a comparison (see [`CAPACITY_METHOD`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunCapacity {
    pub run_id: i64,
    /// The stated capacity, successful req/s; `null` when nothing saturated.
    pub capacity_rps: Option<f64>,
    /// Active users at the stated capacity (the knee's, or the last level's before the
    /// first breach); `null` without a capacity or for a search (an offered rate has no
    /// users).
    pub knee_users: Option<u32>,
    /// What limited it: `throughput` (the knee), `p95`, `errors`, or a search's reason
    /// (`p99`, `plateau`, `timeouts`, …).
    #[serde(default)]
    pub limited_by: Option<String>,
    /// `"ramp"` (a saturation analysis) or `"search"` (`harrier load find`).
    #[serde(default)]
    pub kind: Option<String>,
    /// Standard error of `capacity_rps`, req/s.
    pub noise_rps: Option<f64>,
    /// The highest load level's successful throughput (req/s) and users; `null` when the
    /// run's load did not ramp (no saturation analysis).
    pub peak_rps: Option<f64>,
    pub peak_users: Option<u32>,
    /// The saturation statement ("saturates at ~20 users, 398.0 req/s successful; …", "no
    /// saturation in this run: …") or the search's; `null` when the load did not ramp.
    pub statement: Option<String>,
    /// Against the reference; `null` for the reference itself.
    pub change: Option<CapacityChange>,
}

/// A run's capacity against the reference's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityChange {
    /// run − reference, req/s; `null` unless both have a knee.
    pub abs_rps: Option<f64>,
    /// In % of the reference.
    pub pct: Option<f64>,
    /// 95 % interval of the change, % of the reference (± 1.96 × the combined standard
    /// error).
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Knee users, run − reference.
    pub users_abs: Option<i64>,
    pub verdict: Option<Verdict>,
}

/// A run's capacity as the saturation analysis stated it (`None`: the load did not ramp).
pub fn run_capacity(
    run_id: i64,
    c: Option<&crate::domain::runs::capacity::Capacity>,
) -> RunCapacity {
    RunCapacity {
        run_id,
        capacity_rps: c.and_then(|c| c.throughput_rps),
        knee_users: c.and_then(|c| c.users),
        limited_by: c.and_then(|c| c.limited_by.clone()),
        kind: c.map(|_| "ramp".to_string()),
        noise_rps: c.and_then(|c| c.se_rps),
        peak_rps: c.map(|c| c.peak.successful_rps),
        peak_users: c.map(|c| c.peak.users),
        statement: c.map(|c| c.statement.clone()),
        change: None,
    }
}

/// Fills each run's change against the first (the reference), see [`CAPACITY_METHOD`].
pub fn capacity_changes(runs: &mut [RunCapacity], min_effect_pct: f64) {
    let Some(reference) = runs.first().cloned() else {
        return;
    };
    for run in runs.iter_mut().skip(1) {
        let both = reference.capacity_rps.zip(run.capacity_rps);
        let abs_rps = both.map(|(r, x)| x - r);
        let pct = both
            .filter(|(r, _)| *r > 0.0)
            .map(|(r, x)| (x - r) / r * 100.0);
        let ci = pct
            .zip(both)
            .zip(reference.noise_rps.zip(run.noise_rps))
            .map(|((pct, (r, _)), (se_r, se_x))| {
                let half = 1.96 * (se_r * se_r + se_x * se_x).sqrt() / r * 100.0;
                (pct - half, pct + half)
            });
        let verdict = pct
            .zip(ci)
            .zip(reference.capacity_rps)
            .map(|((p, ci), r)| verdict(Figure::CapacityRps, p, ci, r, min_effect_pct));
        run.change = Some(CapacityChange {
            abs_rps,
            pct,
            ci_low: ci.map(|c| c.0),
            ci_high: ci.map(|c| c.1),
            users_abs: reference
                .knee_users
                .zip(run.knee_users)
                .map(|(r, x)| i64::from(x) - i64::from(r)),
            verdict,
        });
    }
}

impl Comparison {
    pub fn reference(&self) -> Option<&RunRef> {
        self.runs.first()
    }

    /// The scope of `label` (`None`: the totals).
    pub fn scope(&self, label: Option<&str>) -> Option<&ScopeComparison> {
        self.scopes.iter().find(|s| s.label.as_deref() == label)
    }
}

/// The `lo`..`hi` quantiles of `v` (sorted in place), by rank.
fn interval(v: &mut [f64]) -> Option<(f64, f64)> {
    if v.len() < 20 {
        return None;
    }
    let last = (v.len() - 1) as f64;
    let (lo, hi) = (
        (0.025 * last).floor() as usize,
        (0.975 * last).ceil() as usize,
    );
    // Two selections instead of a sort: this runs per figure, scope and run.
    let low = *v.select_nth_unstable_by(lo, f64::total_cmp).1;
    let high = *v.select_nth_unstable_by(hi, f64::total_cmp).1;
    Some((low, high))
}

/// The verdict for a change of `figure`: `change` is the observed effect (% of the
/// reference; percentage points for error %), `ci` its 95 % interval on the same scale,
/// `reference` the reference's value.
pub fn verdict(
    figure: Figure,
    change: f64,
    ci: (f64, f64),
    reference: f64,
    min_effect_pct: f64,
) -> Verdict {
    let relevant = match figure {
        Figure::ErrorPct => {
            change.abs() >= (reference * min_effect_pct / 100.0).max(MIN_ERROR_EFFECT_POINTS)
        }
        _ => change.abs() >= min_effect_pct,
    };
    let up = ci.0 > 0.0 && change > 0.0;
    let down = ci.1 < 0.0 && change < 0.0;
    if !relevant || !(up || down) {
        return Verdict::NoChange;
    }
    match (figure.better(), up) {
        (Better::Lower, true) | (Better::Higher, false) => Verdict::Worse,
        (Better::Lower, false) | (Better::Higher, true) => Verdict::Better,
        (Better::Neither, _) => Verdict::NoChange,
    }
}

/// The change of one figure of `run` against `reference`.
fn change(
    figure: Figure,
    reference: Option<f64>,
    run: Option<f64>,
    resampled: Option<(&[f64], &[f64])>,
    opts: &Options,
) -> Change {
    let abs = reference.zip(run).map(|(r, x)| x - r);
    let pct = reference
        .zip(run)
        .filter(|(r, _)| *r != 0.0)
        .map(|(r, x)| (x - r) / r * 100.0);
    let mut out = Change {
        abs,
        pct,
        ci_low: None,
        ci_high: None,
        verdict: None,
    };
    let Some((rs, xs)) = resampled else {
        return out;
    };
    let mut diffs: Vec<f64> = rs
        .iter()
        .zip(xs)
        .filter_map(|(r, x)| match figure {
            Figure::ErrorPct => Some(x - r),
            _ => (*r != 0.0).then(|| (x - r) / r * 100.0),
        })
        .collect();
    let Some(ci) = interval(&mut diffs) else {
        return out;
    };
    out.ci_low = Some(ci.0);
    out.ci_high = Some(ci.1);
    let effect = if figure == Figure::ErrorPct { abs } else { pct };
    if let (true, Some(effect), Some(r)) = (figure.has_verdict(), effect, reference) {
        out.verdict = Some(verdict(figure, effect, ci, r, opts.min_effect_pct));
    }
    out
}

/// Compares `runs` (the first is the reference) per scope: the run totals, then every
/// label (matched by its text) in the reference's order, then labels only later runs have.
///
/// Bootstraps each run's scopes on up to as many threads as the machine has cores.
pub fn compare(runs: &[RunInput], opts: &Options) -> Comparison {
    let resampled = resample_all(runs, opts);
    let refs: Vec<&ScopeResamples> = resampled.iter().collect();
    compare_resampled(runs, &refs, opts)
}

/// [`compare`] with each run's resamples already computed ([`resample_run`], one entry per
/// scope of the run, in the run's scope order) — e.g. kept from an earlier comparison;
/// the runs' `seconds` are then not read.
pub fn compare_resampled(
    runs: &[RunInput],
    resampled: &[&ScopeResamples],
    opts: &Options,
) -> Comparison {
    // Scope keys in order.
    let mut labels: Vec<Option<String>> = vec![None];
    for r in runs {
        for s in r.scopes.iter().filter(|s| s.label.is_some()) {
            if !labels.contains(&s.label) {
                labels.push(s.label.clone());
            }
        }
    }
    // A summary-only run whose tool did not report a count has count 0: unknown, not 0.
    let value = |ri: usize, stats: Option<&Stats>, f: Figure| -> Option<f64> {
        let s = stats?;
        if f == Figure::Count && s.count == 0 && runs[ri].run.summary_only {
            return None;
        }
        f.of(s)
    };
    let find = |ri: usize, label: &Option<String>| -> Option<usize> {
        runs[ri].scopes.iter().position(|s| &s.label == label)
    };
    let scopes = labels
        .iter()
        .map(|label| {
            let ref_scope = find(0, label);
            let ref_stats = ref_scope.map(|i| &runs[0].scopes[i].stats);
            let row = runs
                .iter()
                .enumerate()
                .map(|(ri, run)| {
                    let si = find(ri, label);
                    let stats = si.map(|i| &run.scopes[i].stats);
                    let mut rs = RunScope::new(run.run.id, stats);
                    if value(ri, stats, Figure::Count).is_none() {
                        rs.count = None;
                    }
                    if ri > 0 {
                        let mut changes = BTreeMap::new();
                        for f in Figure::ALL {
                            let samples = match (ref_scope, si) {
                                (Some(a), Some(b)) => resampled[0][a]
                                    .as_ref()
                                    .zip(resampled[ri][b].as_ref())
                                    .and_then(|(x, y)| x.get(f).zip(y.get(f))),
                                _ => None,
                            };
                            let c = change(
                                f,
                                value(0, ref_stats, f),
                                value(ri, stats, f),
                                samples,
                                opts,
                            );
                            changes.insert(f, c);
                        }
                        rs.changes = Some(changes);
                    }
                    rs
                })
                .collect();
            ScopeComparison {
                label: label.clone(),
                runs: row,
            }
        })
        .collect();
    Comparison {
        runs: runs.iter().map(|r| r.run.clone()).collect(),
        min_effect_pct: opts.min_effect_pct,
        resamples: opts.resamples,
        confidence_pct: 95.0,
        method: METHOD.to_string(),
        scopes,
        capacity: Vec::new(),
    }
}

/// A run's resamples, one per scope (`None`: no per-second data).
pub type ScopeResamples = Vec<Option<bootstrap::Resampled>>;

/// Bootstraps every scope of one run (seeded by the label, so the same run always gives
/// the same resamples and resample i of two runs draws the same relative blocks).
pub fn resample_run(run: &RunInput, opts: &Options) -> ScopeResamples {
    draw_run(run, opts)
        .into_iter()
        .map(|d| d.map(|d| d.resampled()))
        .collect()
}

/// The draws of every scope of one run ([`resample_run`] before the figures).
pub fn draw_run(run: &RunInput, opts: &Options) -> Vec<Option<Draws>> {
    run.scopes
        .iter()
        .map(|s| {
            bootstrap::draw(
                &s.seconds,
                opts.resamples,
                bootstrap::seed_for(s.label.as_deref()),
            )
        })
        .collect()
}

/// [`resample_run`] for several runs, on up to as many threads as the machine has cores.
pub fn resample_all(runs: &[RunInput], opts: &Options) -> Vec<ScopeResamples> {
    stored::parallel(runs.len(), |i| resample_run(&runs[i], opts))
}

/// [`draw_run`] for the runs whose `need` is true (`None` for the others), on up to as
/// many threads as the machine has cores.
pub fn draw_selected(
    runs: &[RunInput],
    need: &[bool],
    opts: &Options,
) -> Vec<Option<Vec<Option<Draws>>>> {
    stored::parallel(runs.len(), |i| {
        need.get(i)
            .copied()
            .unwrap_or(false)
            .then(|| draw_run(&runs[i], opts))
    })
}

#[cfg(test)]
mod tests;
