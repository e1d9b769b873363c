//! Comparisons of stored runs: loads runs from the store into [`crate::domain::compare`] inputs,
//! resolves baselines, evaluates `harrier check` gates, builds a scenario's trend (served
//! by [`crate::http::api::compare`], the compare page and `harrier compare`/`check`).
//!
//! Resamples of a run come from, in order: an in-process cache of the runs compared last;
//! the draws stored with the run (`run_resamples`, written at import and when a live run
//! completes, see [`compare::stored`]); else its buckets, resampled on blocking threads —
//! the draws of a complete run are then stored (a cache fill: the run's figures do not
//! change), so a database imported before draws were kept is upgraded run by run.
//!
//! Baselines: `auto` is the scenario's pinned baseline (unless that is the run itself),
//! else the latest earlier run of the scenario whose latest stored check did not fail
//! (runs never checked count, so a scenario that never used `harrier check` gets the
//! previous run).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::domain::compare::gates::{self, Gate, GateResult, Status};
use crate::domain::compare::render::Overlay;
use crate::domain::compare::{
    self, Better, Comparison, Figure, Options, RunInput, RunRef, ScopeInput, ScopeResamples,
    SecondIn, Verdict, changepoint,
};
use crate::error::{Error, Result};
use crate::store::{BucketRow, RunDetail, Store};

fn second(b: BucketRow) -> SecondIn {
    SecondIn {
        start_ms: b.start_ms,
        count: b.count.max(0) as u64,
        errors: b.errors.max(0) as u64,
        sum_ms: b.sum_ms.max(0) as u64,
        max_ms: b.max_ms.max(0) as u64,
        histogram: b.histogram,
    }
}

/// Reads [`Store::run_packed_buckets`]' packed text back into seconds.
fn unpack(packed: &str) -> Option<Vec<SecondIn>> {
    fn hex(s: &str) -> Option<Vec<u8>> {
        let nib = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'A'..=b'F' => Some(c - b'A' + 10),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len() / 2);
        for p in b.chunks_exact(2) {
            out.push(nib(p[0])? << 4 | nib(p[1])?);
        }
        Some(out)
    }
    packed
        .split(';')
        .filter(|b| !b.is_empty())
        .map(|b| {
            let mut f = b.split(',');
            let mut int = || f.next()?.parse::<i64>().ok();
            let (start_ms, count, errors, sum_ms, max_ms) =
                (int()?, int()?, int()?, int()?, int()?);
            Some(SecondIn {
                start_ms,
                count: count.max(0) as u64,
                errors: errors.max(0) as u64,
                sum_ms: sum_ms.max(0) as u64,
                max_ms: max_ms.max(0) as u64,
                histogram: hex(b.rsplit(',').next()?)?,
            })
        })
        .collect()
}

fn run_ref(run: &RunDetail) -> RunRef {
    RunRef {
        id: run.id,
        name: run.name.clone(),
        scenario: run.scenario.clone(),
        tool: run.tool.clone(),
        summary_only: run.summary_only,
        started_at_ms: run.started_at_ms,
        imported_at_ms: run.imported_at_ms,
        url: format!("/console/runs/{}", run.id),
    }
}

/// Builds a comparison input from a run and its seconds per scope (index 0: the total).
fn input_of(run: &RunDetail, labels: bool, per_scope: Vec<Vec<SecondIn>>) -> RunInput {
    let mut per_scope = per_scope.into_iter();
    let mut scopes = vec![ScopeInput {
        label: None,
        stats: run.overall.clone(),
        seconds: per_scope.next().unwrap_or_default(),
    }];
    if labels {
        for l in &run.labels {
            scopes.push(ScopeInput {
                label: Some(l.label.clone()),
                stats: l.stats.clone(),
                seconds: per_scope.next().unwrap_or_default(),
            });
        }
    }
    RunInput {
        run: run_ref(run),
        scopes,
    }
}

/// Loads a run as a comparison input: the run total and (when `labels`) every label, each
/// with its per-second buckets. `NotFound` when there is no such run.
pub async fn load_run(store: &Store, id: i64, labels: bool) -> Result<RunInput> {
    let run = store
        .get_run(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {id}")))?;
    Ok(input_of(
        &run,
        labels,
        load_seconds(store, &run, labels).await?,
    ))
}

async fn load_seconds(store: &Store, run: &RunDetail, labels: bool) -> Result<Vec<Vec<SecondIn>>> {
    let mut per_scope: Vec<Vec<SecondIn>> = vec![Vec::new(); run.labels.len() + 1];
    if labels {
        let started = std::time::Instant::now();
        let rows = store.run_packed_buckets(run.id).await?;
        for row in &rows {
            if let Some(v) = per_scope.get_mut(row.label_ord as usize) {
                *v = unpack(&row.packed).ok_or_else(|| {
                    Error::Internal(format!(
                        "run {}: stored buckets of scope {} cannot be read",
                        run.id, row.label_ord
                    ))
                })?;
            }
        }
        tracing::debug!(
            run = run.id,
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            bytes = rows.iter().map(|r| r.packed.len()).sum::<usize>(),
            "buckets of every scope read"
        );
    } else {
        per_scope[0] = store
            .run_buckets(run.id, None)
            .await?
            .unwrap_or_default()
            .into_iter()
            .map(second)
            .collect();
    }
    Ok(per_scope)
}

/// (run id, import time, with labels, resamples): a run's buckets never change once
/// imported, so its resamples can be kept (the import time tells a reused id apart).
type CacheKey = (i64, i64, bool, usize);

/// Resamples of the runs compared last, newest at the back.
static RESAMPLE_CACHE: std::sync::Mutex<
    std::collections::VecDeque<(CacheKey, Arc<ScopeResamples>)>,
> = std::sync::Mutex::new(std::collections::VecDeque::new());
/// Runs whose resamples are kept (about 1 MB each with a dozen labels).
const CACHED_RUNS: usize = 40;

fn cache_get(key: CacheKey) -> Option<Arc<ScopeResamples>> {
    let cache = RESAMPLE_CACHE.lock().ok()?;
    cache
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.clone())
}

#[cfg(test)]
fn cache_clear() {
    if let Ok(mut cache) = RESAMPLE_CACHE.lock() {
        cache.clear();
    }
}

fn cache_put(key: CacheKey, value: Arc<ScopeResamples>) {
    if let Ok(mut cache) = RESAMPLE_CACHE.lock() {
        cache.retain(|(k, _)| *k != key);
        cache.push_back((key, value));
        while cache.len() > CACHED_RUNS {
            cache.pop_front();
        }
    }
}

/// A run's stored draws as resamples, one per scope (index 0: the run total, then the
/// labels when `labels`); `None` unless every scope has a usable blob (see
/// [`compare::stored`]).
async fn stored_resamples(
    store: &Store,
    run: &RunDetail,
    labels: bool,
    opts: &Options,
) -> Result<Option<ScopeResamples>> {
    let scopes = if labels { run.labels.len() + 1 } else { 1 };
    let rows = store.run_draws(run.id, !labels).await?;
    let mut out: Vec<Option<Option<compare::bootstrap::Resampled>>> = vec![None; scopes];
    for (ord, blob) in &rows {
        let Some(slot) = usize::try_from(*ord).ok().and_then(|i| out.get_mut(i)) else {
            continue;
        };
        *slot = compare::stored::resampled(blob, opts.resamples);
    }
    Ok(out.into_iter().collect())
}

/// Loads runs (concurrently) and their resamples, in the order of `ids`: kept in memory
/// from earlier comparisons, else the draws stored with each run, else (runs stored
/// before draws were kept, live runs) resampled from the buckets on blocking threads —
/// the draws of a complete run are then stored for the next comparison.
pub async fn load_resampled(
    store: &Store,
    ids: &[i64],
    labels: bool,
    opts: &Options,
) -> Result<(Vec<RunInput>, Vec<Arc<ScopeResamples>>)> {
    let loads = ids.iter().map(|&id| async move {
        let run = store
            .get_run(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("run {id}")))?;
        let key = (id, run.imported_at_ms, labels, opts.resamples);
        if let Some(hit) = cache_get(key) {
            return Ok::<_, Error>((input_of(&run, labels, Vec::new()), Some(hit), key, false));
        }
        if let Some(r) = stored_resamples(store, &run, labels, opts).await? {
            let input = input_of(&run, labels, Vec::new());
            return Ok((input, Some(Arc::new(r)), key, false));
        }
        tracing::debug!(run = id, "no stored draws: resampling the buckets");
        let seconds = load_seconds(store, &run, labels).await?;
        // Live runs still change; stored draws are made with the default resamples only.
        let keep = run.status != "live" && opts.resamples == compare::DEFAULT_RESAMPLES;
        Ok((input_of(&run, labels, seconds), None, key, keep))
    });
    let loaded = futures_util::future::try_join_all(loads).await?;
    let mut inputs = Vec::with_capacity(loaded.len());
    let mut ready = Vec::with_capacity(loaded.len());
    let mut keys = Vec::with_capacity(loaded.len());
    let mut keep = Vec::with_capacity(loaded.len());
    for (input, hit, key, k) in loaded {
        inputs.push(input);
        ready.push(hit);
        keys.push(key);
        keep.push(k);
    }
    tracing::debug!(
        runs = ids.len(),
        resampling = ready.iter().filter(|r| r.is_none()).count(),
        "runs loaded (those without kept or stored draws are resampled)"
    );
    let opts = *opts;
    let (mut inputs, all, blobs) = tokio::task::spawn_blocking(move || {
        let need: Vec<bool> = ready.iter().map(Option::is_none).collect();
        let drawn = compare::draw_selected(&inputs, &need, &opts);
        let mut blobs: Vec<Option<compare::stored::RunBlobs>> = Vec::with_capacity(drawn.len());
        let all: Vec<Arc<ScopeResamples>> = ready
            .into_iter()
            .zip(drawn)
            .map(|(r, d)| {
                let d = d.unwrap_or_default();
                blobs.push((!d.is_empty()).then(|| {
                    d.iter()
                        .enumerate()
                        .map(|(i, x)| {
                            (
                                i as i64,
                                compare::stored::encode(opts.resamples, x.as_ref()),
                            )
                        })
                        .collect()
                }));
                r.unwrap_or_else(|| {
                    Arc::new(
                        d.iter()
                            .map(|x| x.as_ref().map(|x| x.resampled()))
                            .collect(),
                    )
                })
            })
            .collect();
        (inputs, all, blobs)
    })
    .await
    .map_err(|e| Error::Internal(format!("resampling task: {e}")))?;
    for (i, key) in keys.iter().enumerate() {
        cache_put(*key, all[i].clone());
        if let (true, Some(b)) = (keep[i], &blobs[i])
            && let Err(e) = store.put_run_draws(key.0, b).await
        {
            tracing::warn!(run = key.0, error = %e, "storing a run's bootstrap draws failed");
        }
    }
    // The seconds are no longer needed once resampled.
    for i in &mut inputs {
        for s in &mut i.scopes {
            s.seconds = Vec::new();
        }
    }
    Ok((inputs, all))
}

/// Compares loaded runs with their resamples on a blocking thread.
async fn compare_loaded(
    inputs: Vec<RunInput>,
    resampled: Vec<Arc<ScopeResamples>>,
    opts: &Options,
) -> Result<Comparison> {
    let opts = *opts;
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&ScopeResamples> = resampled.iter().map(|r| r.as_ref()).collect();
        compare::compare_resampled(&inputs, &refs, &opts)
    })
    .await
    .map_err(|e| Error::Internal(format!("comparison task: {e}")))
}

/// Run ids from `"3,5,8"` (spaces allowed).
pub fn parse_ids(text: &str) -> Result<Vec<i64>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| Error::BadRequest(format!("run ids must be numbers, got {s:?}")))
        })
        .collect()
}

/// Checks a comparison's run list and minimum effect.
pub fn validate(ids: &[i64], min_effect_pct: f64) -> Result<()> {
    if !(2..=compare::MAX_RUNS).contains(&ids.len()) {
        return Err(Error::BadRequest(format!(
            "compare takes 2 to {} runs (the first is the reference), got {}",
            compare::MAX_RUNS,
            ids.len()
        )));
    }
    for (i, id) in ids.iter().enumerate() {
        if ids[..i].contains(id) {
            return Err(Error::BadRequest(format!("run {id} is listed twice")));
        }
    }
    if !(min_effect_pct.is_finite() && (0.0..=1000.0).contains(&min_effect_pct)) {
        return Err(Error::BadRequest(format!(
            "min_effect_pct must be a percentage between 0 and 1000, got {min_effect_pct}"
        )));
    }
    Ok(())
}

/// Compares stored runs (the first is the reference), per label and overall.
pub async fn comparison(store: &Store, ids: &[i64], opts: &Options) -> Result<Comparison> {
    validate(ids, opts.min_effect_pct)?;
    let started = std::time::Instant::now();
    let (inputs, resampled) = load_resampled(store, ids, true, opts).await?;
    let loaded = started.elapsed();
    let mut c = compare_loaded(inputs, resampled, opts).await?;
    c.capacity = capacities(store, ids, opts).await?;
    tracing::debug!(
        runs = ids.len(),
        load_ms = loaded.as_secs_f64() * 1e3,
        compare_ms = (started.elapsed() - loaded).as_secs_f64() * 1e3,
        "comparison"
    );
    Ok(c)
}

/// Each run's stated capacity (its ramp's saturation analysis, or its search's answer) and
/// its change against the first, see [`compare::CAPACITY_METHOD`].
pub async fn capacities(
    store: &Store,
    ids: &[i64],
    opts: &Options,
) -> Result<Vec<compare::RunCapacity>> {
    let mut out = Vec::with_capacity(ids.len());
    for &id in ids {
        let run = store
            .get_run(id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("run {id}")))?;
        // A `harrier load find` run states the rate it sustained; any other, its ramp's.
        match crate::views::runs::search_outcome(&run) {
            Some(search) => out.push(search_capacity(id, &search)),
            None => {
                let c = crate::views::runs::run_capacity(store, &run).await?;
                out.push(compare::run_capacity(id, c.as_ref()));
            }
        }
    }
    compare::capacity_changes(&mut out, opts.min_effect_pct);
    Ok(out)
}

/// A `harrier load find` run's capacity: the throughput achieved at the highest rate it
/// sustained (`None` when it sustained none). Its noise is not known (a search keeps no
/// per-second spread of its confirmation step), so its changes are judged by the
/// tolerance alone.
fn search_capacity(
    run_id: i64,
    s: &crate::domain::load::search::SearchOutcome,
) -> compare::RunCapacity {
    compare::RunCapacity {
        run_id,
        capacity_rps: s.throughput_rps.or(s.sustains_rps),
        knee_users: None,
        limited_by: s.limited_by.clone(),
        kind: Some("search".to_string()),
        noise_rps: None,
        peak_rps: None,
        peak_users: None,
        statement: Some(s.statement.clone()),
        change: None,
    }
}

/// Where a baseline came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineSource {
    /// Pinned for the scenario.
    Pinned,
    /// The latest earlier run whose latest check passed.
    Passed,
    /// The latest earlier run (never checked).
    Previous,
    /// Named by the caller.
    Given,
}

/// The `auto` baseline of a run (see the module docs), with where it came from.
pub async fn auto_baseline(store: &Store, run_id: i64) -> Result<Option<(i64, BaselineSource)>> {
    let run = store
        .get_run(run_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {run_id}")))?;
    let Some(scenario) = run.scenario else {
        return Ok(None);
    };
    if let Some(pinned) = store.pinned_baseline(&scenario).await?
        && pinned != run_id
    {
        return Ok(Some((pinned, BaselineSource::Pinned)));
    }
    let runs = crate::views::runs::scenario_runs(store, &scenario).await?;
    let checks: HashMap<i64, bool> = store
        .scenario_checks(&scenario)
        .await?
        .into_iter()
        .map(|c| (c.run_id, c.passed))
        .collect();
    let Some(pos) = runs.iter().position(|r| r.id == run_id) else {
        return Ok(None);
    };
    Ok(runs[..pos]
        .iter()
        .rev()
        .find_map(|r| match checks.get(&r.id) {
            Some(true) => Some((r.id, BaselineSource::Passed)),
            Some(false) => None,
            None => Some((r.id, BaselineSource::Previous)),
        }))
}

/// The run of the same scenario just before `run_id`.
pub async fn previous_run(store: &Store, run_id: i64) -> Result<Option<i64>> {
    let run = store
        .get_run(run_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {run_id}")))?;
    let Some(scenario) = run.scenario else {
        return Ok(None);
    };
    let runs = crate::views::runs::scenario_runs(store, &scenario).await?;
    let pos = runs.iter().position(|r| r.id == run_id).unwrap_or(0);
    Ok(pos.checked_sub(1).map(|p| runs[p].id))
}

/// Which baseline a check uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaselineSpec {
    Auto,
    Run(i64),
    None,
}

impl BaselineSpec {
    /// `"auto"`, a run id, or `"none"`.
    pub fn parse(text: &str) -> Result<BaselineSpec> {
        match text.trim() {
            "auto" => Ok(BaselineSpec::Auto),
            "none" => Ok(BaselineSpec::None),
            t => t.parse().map(BaselineSpec::Run).map_err(|_| {
                Error::BadRequest(format!(
                    "baseline must be a run id, auto or none, got {t:?}"
                ))
            }),
        }
    }
}

/// The outcome of `harrier check` on a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckReport {
    pub run: RunRef,
    pub baseline: Option<RunRef>,
    pub baseline_source: Option<BaselineSource>,
    /// True when no gate failed.
    pub passed: bool,
    pub results: Vec<GateResult>,
    pub min_effect_pct: f64,
}

/// Evaluates `gates` on a run (against its baseline for relative gates) and, when
/// `record`, stores the result so later `auto` baselines can skip failed runs.
pub async fn check(
    store: &Store,
    run_id: i64,
    spec: BaselineSpec,
    gates: &[Gate],
    opts: &Options,
    record: bool,
) -> Result<CheckReport> {
    let (baseline, source) = match spec {
        BaselineSpec::Auto => match auto_baseline(store, run_id).await? {
            Some((id, s)) => (Some(id), Some(s)),
            None => (None, None),
        },
        BaselineSpec::Run(id) if id == run_id => {
            return Err(Error::BadRequest(format!(
                "run {run_id} cannot be its own baseline"
            )));
        }
        BaselineSpec::Run(id) => (Some(id), Some(BaselineSource::Given)),
        BaselineSpec::None => (None, None),
    };
    let ids: Vec<i64> = baseline.into_iter().chain([run_id]).collect();
    let (inputs, resampled) = load_resampled(store, &ids, true, opts).await?;
    let mut comparison = compare_loaded(inputs, resampled, opts).await?;
    if gates
        .iter()
        .any(|g| matches!(g.figure, Figure::CapacityRps | Figure::CapacityUsers))
    {
        comparison.capacity = capacities(store, &ids, opts).await?;
    }
    let results = gates::evaluate(gates, &comparison);
    let passed = results.iter().all(|r| r.status != Status::Fail);
    if record {
        let json = serde_json::to_string(&results).unwrap_or_else(|_| "[]".into());
        store
            .record_check(run_id, baseline, passed, &json, crate::now_ms())
            .await?;
    }
    let mut runs = comparison.runs.into_iter();
    let (baseline_ref, run_ref) = if baseline.is_some() {
        (runs.next(), runs.next())
    } else {
        (None, runs.next())
    };
    Ok(CheckReport {
        run: run_ref.ok_or_else(|| Error::Internal("comparison lost the run".into()))?,
        baseline: baseline_ref,
        baseline_source: source,
        passed,
        results,
        min_effect_pct: opts.min_effect_pct,
    })
}

/// Figures a scenario's trend follows.
pub const TREND_FIGURES: [Figure; 5] = [
    Figure::P95Ms,
    Figure::P99Ms,
    Figure::MeanMs,
    Figure::ThroughputRps,
    Figure::ErrorPct,
];

/// One run on a scenario's time axis.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrendPoint {
    pub run: RunRef,
    /// Start (or import) time, unix epoch ms: the x of the trend charts.
    pub at_ms: i64,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    pub throughput_rps: Option<f64>,
    pub error_pct: Option<f64>,
    /// Figures on which a run after the baseline is worse than it: the bootstrap verdict
    /// says `worse`, or (without per-second data) the change passes the minimum effect
    /// the wrong way. Empty for the baseline and the runs before it.
    pub regressions: Vec<Figure>,
    /// The latest check: `true` passed, `false` failed, `null` never checked.
    pub check_passed: Option<bool>,
    /// The run's tags (build, concurrency, …): the trend can be drawn against one of them
    /// instead of time.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// A change point on one figure's trend.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrendChange {
    /// First run after the change.
    pub run_id: i64,
    /// Index of that run in `points`.
    pub index: usize,
    /// Mean after / mean before − 1, %.
    pub change_pct: Option<f64>,
    pub p_value: f64,
    /// `better` or `worse` by the figure's direction.
    pub direction: Verdict,
}

/// A scenario's history (`GET /api/v1/scenarios/{name}`, `/console/scenarios/{name}`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trend {
    pub scenario: String,
    /// The run the regressions are judged against: the pinned baseline, else the `auto`
    /// baseline of the newest run.
    pub baseline_run_id: Option<i64>,
    pub baseline_source: Option<BaselineSource>,
    pub min_effect_pct: f64,
    /// Runs, oldest first.
    pub points: Vec<TrendPoint>,
    /// Change points per figure key (E-divisive, see [`changepoint`]).
    pub change_points: BTreeMap<Figure, Vec<TrendChange>>,
    /// Tag keys any of its runs carries, sorted: the axes the trend can be drawn against
    /// besides time.
    #[serde(default)]
    pub tag_keys: Vec<String>,
}

/// Builds a scenario's trend. `NotFound` when no run has that scenario.
pub async fn trend(store: &Store, scenario: &str, opts: &Options) -> Result<Trend> {
    let runs = crate::views::runs::scenario_runs(store, scenario).await?;
    let Some(newest) = runs.last() else {
        return Err(Error::NotFound(format!("scenario {scenario:?}")));
    };
    let (baseline, source) = match store.pinned_baseline(scenario).await? {
        Some(p) => (Some(p), Some(BaselineSource::Pinned)),
        None => match auto_baseline(store, newest.id).await? {
            Some((id, s)) => (Some(id), Some(s)),
            None => (None, None),
        },
    };
    let checks: HashMap<i64, bool> = store
        .scenario_checks(scenario)
        .await?
        .into_iter()
        .map(|c| (c.run_id, c.passed))
        .collect();
    let ids: Vec<i64> = baseline
        .into_iter()
        .chain(runs.iter().map(|r| r.id))
        .collect();
    let (inputs, resampled) = load_resampled(store, &ids, false, opts).await?;
    let comparison = if baseline.is_some() && inputs.len() >= 2 {
        Some(compare_loaded(inputs.clone(), resampled, opts).await?)
    } else {
        None
    };
    let offset = usize::from(baseline.is_some());
    let baseline_pos = baseline.and_then(|b| runs.iter().position(|r| r.id == b));
    let mut tags: Vec<BTreeMap<String, String>> = Vec::with_capacity(runs.len());
    for r in &runs {
        tags.push(
            store
                .get_run(r.id)
                .await?
                .map(|d| d.tags)
                .unwrap_or_default(),
        );
    }
    let mut tag_keys: Vec<String> = tags.iter().flat_map(|t| t.keys().cloned()).collect();
    tag_keys.sort();
    tag_keys.dedup();
    let points: Vec<TrendPoint> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let input = &inputs[i + offset];
            let stats = &input.scopes[0].stats;
            let mut regressions = Vec::new();
            // Only runs after the baseline can regress from it.
            if let Some(c) = &comparison
                && baseline_pos.is_some_and(|b| i > b)
                && let Some(rs) = c.scopes[0].runs.get(i + 1)
            {
                for f in TREND_FIGURES {
                    let Some(ch) = rs.change(f) else { continue };
                    let worse = match ch.verdict {
                        Some(v) => v == Verdict::Worse,
                        None => match f {
                            // Error %: in points, at least the floor a verdict uses.
                            Figure::ErrorPct => ch
                                .abs
                                .is_some_and(|a| a >= compare::MIN_ERROR_EFFECT_POINTS),
                            _ => ch.pct.is_some_and(|e| match f.better() {
                                Better::Lower => e >= opts.min_effect_pct,
                                Better::Higher => -e >= opts.min_effect_pct,
                                Better::Neither => false,
                            }),
                        },
                    };
                    if worse {
                        regressions.push(f);
                    }
                }
            }
            TrendPoint {
                run: input.run.clone(),
                at_ms: r.started_at_ms.unwrap_or(r.imported_at_ms),
                p95_ms: stats.p95_ms,
                p99_ms: stats.p99_ms,
                mean_ms: stats.mean_ms,
                throughput_rps: stats.throughput_rps,
                error_pct: stats.error_pct,
                regressions,
                check_passed: checks.get(&r.id).copied(),
                tags: tags[i].clone(),
            }
        })
        .collect();
    let mut change_points = BTreeMap::new();
    for f in TREND_FIGURES {
        let (idx, values): (Vec<usize>, Vec<f64>) = points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let v = match f {
                    Figure::P95Ms => p.p95_ms,
                    Figure::P99Ms => p.p99_ms,
                    Figure::MeanMs => p.mean_ms,
                    Figure::ThroughputRps => p.throughput_rps,
                    _ => p.error_pct,
                };
                v.map(|v| (i, v))
            })
            .unzip();
        let found = changepoint::detect(&values)
            .into_iter()
            .map(|c| {
                let i = idx[c.index];
                let up = c.change_pct.is_some_and(|p| p > 0.0);
                let worse = match f.better() {
                    Better::Higher => !up,
                    _ => up,
                };
                TrendChange {
                    run_id: points[i].run.id,
                    index: i,
                    change_pct: c.change_pct,
                    p_value: c.p_value,
                    direction: if worse {
                        Verdict::Worse
                    } else {
                        Verdict::Better
                    },
                }
            })
            .collect::<Vec<_>>();
        change_points.insert(f, found);
    }
    Ok(Trend {
        scenario: scenario.to_string(),
        baseline_run_id: baseline,
        baseline_source: source,
        min_effect_pct: opts.min_effect_pct,
        points,
        change_points,
        tag_keys,
    })
}

/// The overlay series of a run (run total) for the HTML export.
pub async fn overlay(store: &Store, id: i64) -> Result<Overlay> {
    let run = store
        .get_run(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {id}")))?;
    let rows = store.run_buckets(id, None).await?.unwrap_or_default();
    let ins: Vec<crate::domain::runs::timeseries::BucketIn<'_>> = rows
        .iter()
        .map(|r| crate::domain::runs::timeseries::BucketIn {
            start_ms: r.start_ms,
            count: r.count.max(0) as u64,
            errors: r.errors.max(0) as u64,
            sum_ms: r.sum_ms.max(0) as u64,
            max_ms: r.max_ms.max(0) as u64,
            active_users: None,
            histogram: &r.histogram,
        })
        .collect();
    let series = crate::domain::runs::timeseries::build(None, &ins, run.overall.last_end_ms);
    let dist = store.run_distribution(id, None).await?.unwrap_or_default();
    let curve = dist.curve();
    let dist_json = serde_json::json!({"curve": {
        "p": curve.iter().map(|c| c.0).collect::<Vec<_>>(),
        "ms": curve.iter().map(|c| c.1).collect::<Vec<_>>(),
    }});
    Ok(Overlay::from_json(
        id,
        &serde_json::to_value(&series).unwrap_or_default(),
        &dist_json,
    ))
}

/// Query of `GET /api/v1/compare` and `/console/compare`: `runs` (comma list, may repeat),
/// `min_effect_pct`.
pub struct CompareQuery {
    pub ids: Vec<i64>,
    pub min_effect_pct: f64,
}

impl CompareQuery {
    pub fn parse(raw: Option<&str>) -> Result<CompareQuery> {
        let mut q = CompareQuery {
            ids: Vec::new(),
            min_effect_pct: compare::DEFAULT_MIN_EFFECT_PCT,
        };
        for (k, v) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            match k.as_ref() {
                "runs" => q.ids.extend(parse_ids(&v)?),
                "min_effect_pct" if !v.trim().is_empty() => {
                    q.min_effect_pct = v.trim().parse().map_err(|_| {
                        Error::BadRequest(format!("min_effect_pct must be a number, got {v:?}"))
                    })?
                }
                _ => {}
            }
        }
        Ok(q)
    }

    pub fn options(&self) -> Options {
        Options {
            min_effect_pct: self.min_effect_pct,
            ..Options::default()
        }
    }
}

/// Body of `POST /api/v1/runs/{id}/check`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    pub gates: Vec<String>,
    /// `"auto"` (default), a run id, or null/`"none"` for no baseline.
    #[serde(default = "auto_json")]
    pub baseline: serde_json::Value,
    pub min_effect_pct: Option<f64>,
    #[serde(default = "yes")]
    pub record: bool,
}

fn auto_json() -> serde_json::Value {
    serde_json::Value::String("auto".into())
}

fn yes() -> bool {
    true
}

impl CheckRequest {
    pub fn baseline_spec(&self) -> Result<BaselineSpec> {
        match &self.baseline {
            serde_json::Value::Null => Ok(BaselineSpec::None),
            serde_json::Value::Number(n) => n
                .as_i64()
                .map(BaselineSpec::Run)
                .ok_or_else(|| Error::BadRequest(format!("baseline must be a run id, got {n}"))),
            serde_json::Value::String(s) => BaselineSpec::parse(s),
            other => Err(Error::BadRequest(format!(
                "baseline must be a run id, \"auto\" or null, got {other}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::runs::{RunBuilder, Sample};
    use crate::store::NewRun;

    /// Stores a run of 200 s × 30 samples of two labels, response times around 100 ms ×
    /// `factor` (a seeded lognormal spread); every 100th sample fails.
    async fn stored_run(store: &Store, seed: u64, factor: f64, imported_at_ms: i64) -> i64 {
        let mut rng = compare::bootstrap::Rng::new(seed);
        let mut b = RunBuilder::new();
        let t0 = 1_790_000_000_000i64;
        for i in 0..6_000i64 {
            let (u, v) = (rng.unit().max(1e-12), rng.unit());
            let z = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
            b.push(
                1,
                &Sample {
                    label: if i % 3 == 0 { "Login" } else { "Search" },
                    start_ms: t0 + i * 1000 / 30,
                    elapsed_ms: (100.0 * factor * (0.3 * z).exp()).round() as u64,
                    success: i % 100 != 0,
                    response_code: "200",
                    message: "",
                    bytes_received: 10,
                    bytes_sent: 1,
                    active_users: None,
                    is_transaction: false,
                },
            );
        }
        let run = NewRun {
            name: format!("run {seed}"),
            tool: "jmeter".into(),
            imported_at_ms,
            ..NewRun::default()
        };
        crate::services::import::insert_run(store, &run, &b.finish())
            .await
            .unwrap()
    }

    async fn draw_rows(store: &Store) -> Vec<(i64, i64, Vec<u8>)> {
        sqlx::query_as("SELECT run_id, label_ord, draws FROM run_resamples ORDER BY 1, 2")
            .fetch_all(store.sqlite_pool().unwrap())
            .await
            .unwrap()
    }

    #[sqlx::test(migrations = false)]
    async fn stored_draws_and_old_style_runs_compare_alike(pool: sqlx::SqlitePool) {
        let store = Store::from_pool(pool).await.unwrap();
        // Import times no other test uses: the in-process resample cache is keyed by them.
        let a = stored_run(&store, 1, 1.0, 7_100_000_001).await;
        let b = stored_run(&store, 2, 1.3, 7_100_000_002).await;
        let c = stored_run(&store, 3, 1.0, 7_100_000_003).await;
        // The import stored one blob per scope: run total, Login, Search.
        let rows = draw_rows(&store).await;
        let scopes: Vec<(i64, i64)> = rows.iter().map(|r| (r.0, r.1)).collect();
        let want: Vec<(i64, i64)> = [a, b, c]
            .iter()
            .flat_map(|&id| (0..3).map(move |ord| (id, ord)))
            .collect();
        assert_eq!(scopes, want);

        let opts = Options::default();
        cache_clear();
        let from_stored = comparison(&store, &[a, b, c], &opts).await.unwrap();
        let p95 = |c: &Comparison, run: usize| {
            c.scopes[0].runs[run]
                .change(Figure::P95Ms)
                .and_then(|c| c.verdict)
        };
        assert_eq!(p95(&from_stored, 1), Some(Verdict::Worse));
        assert_eq!(p95(&from_stored, 2), Some(Verdict::NoChange));

        // A database from before draws were stored: the comparison resamples the buckets,
        // gives the same figures, intervals and verdicts, and stores the draws again.
        sqlx::query("DELETE FROM run_resamples")
            .execute(store.sqlite_pool().unwrap())
            .await
            .unwrap();
        cache_clear();
        let old_style = comparison(&store, &[a, b, c], &opts).await.unwrap();
        assert_eq!(old_style, from_stored);
        assert_eq!(
            draw_rows(&store).await,
            rows,
            "the same draws, stored again"
        );

        // A blob of another format is not used (and is replaced).
        sqlx::query("UPDATE run_resamples SET draws = x'ff00' WHERE run_id = ?")
            .bind(b)
            .execute(store.sqlite_pool().unwrap())
            .await
            .unwrap();
        cache_clear();
        assert_eq!(
            comparison(&store, &[a, b, c], &opts).await.unwrap(),
            from_stored
        );
        assert_eq!(draw_rows(&store).await, rows);

        // The trend (run totals only) reads the same stored draws.
        cache_clear();
        let (_, totals) = load_resampled(&store, &[a, b], false, &opts).await.unwrap();
        assert_eq!(totals.len(), 2);
        assert_eq!(totals[0].len(), 1, "the run total only");
        assert!(totals[0][0].is_some());
    }

    #[test]
    fn packed_buckets_read_back() {
        let mut h = crate::domain::runs::hdr::new_histogram::<u64>();
        h.record(42).unwrap();
        let bytes = crate::domain::runs::hdr::serialize_histogram(&h);
        let hex: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
        let packed = format!("1000,1,0,42,42,{hex};2000,3,1,30,12,{hex}");
        let s = unpack(&packed).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (
                s[1].start_ms,
                s[1].count,
                s[1].errors,
                s[1].sum_ms,
                s[1].max_ms
            ),
            (2000, 3, 1, 30, 12)
        );
        assert_eq!(s[0].histogram, bytes);
        assert!(unpack("1000,1,0,42").is_none());
        assert!(unpack("1000,1,0,42,42,ZZ").is_none());
        assert_eq!(unpack("").unwrap().len(), 0);
    }
}
