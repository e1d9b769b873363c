//! The steps of a route as the API and the route page show them: each step's figures over
//! a window (the route diagram), and each step's figures over time (the step chart).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::domain::routes::Figures;
use crate::domain::routes::series;
use crate::domain::routes::steps::{self, StepRow};
use crate::error::{Error, Result};
use crate::store::{Retention, Store};

/// `GET /api/v1/routes/{id}/steps`: the route's steps over the last `window_s`.
#[derive(Debug, Clone, Serialize)]
pub struct StepsView {
    pub route_id: i64,
    pub window_s: f64,
    /// The window's end, unix ms.
    pub to_ms: i64,
    /// In route order (depth-first: a step's nested steps follow it).
    pub steps: Vec<StepRow>,
}

/// The steps of route `id` over the `window_ms` before `now_ms`.
pub async fn step_rows(store: &Store, id: i64, window_ms: i64, now_ms: i64) -> Result<StepsView> {
    if store.route_infos(None, Some(id)).await?.is_empty() {
        return Err(Error::NotFound(format!("route {id}")));
    }
    let figures = store.step_figures(id, now_ms - window_ms, now_ms).await?;
    let latest = figures
        .iter()
        .map(|(s, _)| s.last_seen_ms)
        .max()
        .unwrap_or(0);
    Ok(StepsView {
        route_id: id,
        window_s: window_ms as f64 / 1000.0,
        to_ms: now_ms,
        steps: steps::rows(figures, latest),
    })
}

/// One step's series: parallel arrays over `t_ms`, `null` where the bucket has no figure.
#[derive(Debug, Clone, Serialize)]
pub struct StepSeries {
    pub id: i64,
    pub step: String,
    pub label: String,
    pub level: i64,
    pub throughput_per_s: Vec<Option<f64>>,
    pub error_pct: Vec<Option<f64>>,
    pub mean_ms: Vec<Option<f64>>,
    pub self_ms: Vec<Option<f64>>,
}

/// `GET /api/v1/routes/{id}/steps/timeseries`.
#[derive(Debug, Clone, Serialize)]
pub struct StepsOverTime {
    pub route_id: i64,
    pub from_ms: i64,
    pub to_ms: i64,
    pub step_ms: i64,
    /// `raw`, `1m`, `10m` or `1h`: what was read.
    pub resolution: &'static str,
    /// Bucket starts, unix ms.
    pub t_ms: Vec<i64>,
    pub steps: Vec<StepSeries>,
}

/// The steps of route `id` over `from_ms…to_ms` in buckets of `step_ms` (default: the
/// range / 1000, at least the resolution read), from the resolution that covers the range
/// as the route's own series does.
pub async fn step_series(
    store: &Store,
    retention: &Retention,
    id: i64,
    from_ms: i64,
    to_ms: i64,
    step_ms: Option<i64>,
) -> Result<StepsOverTime> {
    let Some(info) = store.route_infos(None, Some(id)).await?.pop() else {
        return Err(Error::NotFound(format!("route {id}")));
    };
    let now = crate::now_ms();
    let r = retention;
    let keep = [r.raw_ms(), r.minute_ms(), r.ten_minute_ms(), r.hour_ms()];
    let levels: Vec<series::Level> = series::RESOLUTIONS_MS
        .into_iter()
        .zip(keep)
        .map(|(res, keep)| series::Level {
            resolution_ms: res,
            spacing_ms: if res == 0 {
                (info.target_interval_s * 1000.0).round().max(1000.0) as i64
            } else {
                res
            },
            covers_from_ms: now - keep,
        })
        .collect();
    let resolution = series::resolution_for(from_ms, to_ms, &levels);
    let ideal = ((to_ms - from_ms) / series::TARGET_POINTS).max(1);
    let step = step_ms.unwrap_or(ideal).max(resolution).max(1);
    let shapes = store.route_steps(id).await?;
    let points = store
        .step_series(id, from_ms, to_ms, step, resolution)
        .await?;
    let mut buckets: BTreeMap<i64, BTreeMap<i64, Figures>> = BTreeMap::new();
    for p in points {
        buckets
            .entry(p.t_ms)
            .or_default()
            .insert(p.step_id, p.figures);
    }
    let t_ms: Vec<i64> = buckets.keys().copied().collect();
    let mut out: Vec<StepSeries> = shapes
        .iter()
        .map(|s| StepSeries {
            id: s.id,
            step: s.step.clone(),
            label: s.label(),
            level: s.level,
            throughput_per_s: Vec::with_capacity(t_ms.len()),
            error_pct: Vec::with_capacity(t_ms.len()),
            mean_ms: Vec::with_capacity(t_ms.len()),
            self_ms: Vec::with_capacity(t_ms.len()),
        })
        .collect();
    for figures in buckets.values() {
        let rows = steps::rows(
            shapes
                .iter()
                .map(|s| (s.clone(), figures.get(&s.id).cloned().unwrap_or_default()))
                .collect(),
            i64::MIN,
        );
        for (series, row) in out.iter_mut().zip(rows) {
            let has = row.exchanges.is_some();
            series
                .throughput_per_s
                .push(row.throughput_per_s.filter(|_| has));
            series.error_pct.push(row.error_pct);
            series.mean_ms.push(row.mean_ms);
            series.self_ms.push(row.self_ms);
        }
    }
    Ok(StepsOverTime {
        route_id: id,
        from_ms,
        to_ms,
        step_ms: step,
        resolution: series::resolution_name(resolution),
        t_ms,
        steps: out,
    })
}

/// A load level of a run: its load, and the spans (unix ms) it was held.
#[derive(Debug, Clone, PartialEq)]
struct LoadLevel {
    load: f64,
    spans: Vec<(i64, i64)>,
}

/// Most levels a smooth ramp of users is cut into.
const MAX_USER_LEVELS: usize = 12;
/// Exchanges of the route's top-level steps a level needs before its step times count.
const MIN_LEVEL_EXCHANGES: f64 = 10.0;

/// The run's load levels and their unit: a rate search's steps (`req/s offered`), else its
/// seconds grouped by active users (`users`; a smooth ramp in up to [`MAX_USER_LEVELS`]
/// even bands). Empty for a run with neither.
async fn run_levels(
    store: &Store,
    run: &crate::store::RunDetail,
) -> Result<(Vec<LoadLevel>, &'static str)> {
    let start = run.started_at_ms.unwrap_or(0);
    if let Some(search) = crate::views::runs::search_outcome(run) {
        let mut levels: Vec<LoadLevel> = Vec::new();
        for s in &search.steps {
            let from = start + i64::from(s.first_second) * 1000;
            let span = (from, from + i64::from(s.seconds.max(1)) * 1000);
            match levels
                .iter_mut()
                .find(|l| (l.load - s.offered_rps).abs() < 1e-9)
            {
                Some(l) => l.spans.push(span),
                None => levels.push(LoadLevel {
                    load: s.offered_rps,
                    spans: vec![span],
                }),
            }
        }
        return Ok((levels, "req/s offered"));
    }
    let buckets = store.run_buckets(run.id, None).await?.unwrap_or_default();
    let users: Vec<(i64, i64)> = buckets
        .iter()
        .filter_map(|b| Some((b.start_ms, b.active_users.filter(|u| *u > 0)?)))
        .collect();
    let (Some(lo), Some(hi)) = (
        users.iter().map(|u| u.1).min(),
        users.iter().map(|u| u.1).max(),
    ) else {
        return Ok((Vec::new(), "users"));
    };
    let distinct: std::collections::BTreeSet<i64> = users.iter().map(|u| u.1).collect();
    let band = if distinct.len() <= MAX_USER_LEVELS {
        None
    } else {
        Some(((hi - lo) as f64 / MAX_USER_LEVELS as f64).max(1.0))
    };
    // Per level: Σ users over its seconds, its seconds, their spans.
    type Band = (f64, f64, Vec<(i64, i64)>);
    let mut by: BTreeMap<i64, Band> = BTreeMap::new();
    for (t, u) in users {
        let key = band.map_or(u, |w| ((u - lo) as f64 / w).floor() as i64);
        let e = by.entry(key).or_default();
        e.0 += u as f64;
        e.1 += 1.0;
        e.2.push((t, t + 1000));
    }
    Ok((
        by.into_values()
            .map(|(sum, n, spans)| LoadLevel {
                load: sum / n,
                spans,
            })
            .collect(),
        "users",
    ))
}

/// One step across a run's load levels.
#[derive(Debug, Clone, Serialize)]
pub struct StepUnderLoad {
    pub step: String,
    pub label: String,
    pub level: i64,
    /// Self time per exchange at each of [`StepsUnderLoad::levels`], ms.
    pub self_ms: Vec<Option<f64>>,
    /// Mean time (nested steps included) at each level, ms.
    pub mean_ms: Vec<Option<f64>>,
}

/// A level of [`StepsUnderLoad`].
#[derive(Debug, Clone, Serialize)]
pub struct LevelView {
    /// Its load, in [`StepsUnderLoad::unit`].
    pub load: f64,
    /// Seconds the run held it.
    pub seconds: f64,
    /// Exchanges through the route's top-level steps in those seconds (scrape midpoints).
    pub exchanges: f64,
}

/// `GET /api/v1/routes/{id}/steps/under-load?run=ID`: each step's times at each load level
/// of a run, and the step that gave way.
#[derive(Debug, Clone, Serialize)]
pub struct StepsUnderLoad {
    pub route_id: i64,
    pub run_id: i64,
    pub run_name: String,
    pub run_url: String,
    /// `users` or `req/s offered`.
    pub unit: &'static str,
    /// Levels in rising order of load that hold enough exchanges to judge.
    pub levels: Vec<LevelView>,
    pub steps: Vec<StepUnderLoad>,
    pub gives_way: Option<steps::GivesWay>,
    /// Why there is no answer, for people: no levels, no steps in the run's time, …
    pub note: Option<String>,
    /// The run's own statement of where it saturated (capacity or search), when it has one.
    pub run_statement: Option<String>,
}

/// Each step of route `id` at each load level of run `run_id` (see
/// [`crate::domain::routes::steps`] for the rule).
pub async fn steps_under_run(store: &Store, id: i64, run_id: i64) -> Result<StepsUnderLoad> {
    if store.route_infos(None, Some(id)).await?.is_empty() {
        return Err(Error::NotFound(format!("route {id}")));
    }
    let run = store
        .get_run(run_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {run_id}")))?;
    let load = run_load(store, &run).await?;
    steps_under_load(store, id, &load).await
}

/// What of a run every route's steps are judged against: its levels and its statement.
struct RunLoad {
    run_id: i64,
    run_name: String,
    statement: Option<String>,
    levels: Vec<LoadLevel>,
    unit: &'static str,
}

/// A run's [`RunLoad`], read once for all the routes it is laid over.
async fn run_load(store: &Store, run: &crate::store::RunDetail) -> Result<RunLoad> {
    let statement = match crate::views::runs::search_outcome(run) {
        Some(s) => Some(s.statement),
        None => crate::views::runs::run_capacity(store, run)
            .await?
            .map(|c| c.statement),
    };
    let (levels, unit) = run_levels(store, run).await?;
    Ok(RunLoad {
        run_id: run.id,
        run_name: run.name.clone(),
        statement,
        levels,
        unit,
    })
}

/// Route `id`'s steps at the levels of `load`.
async fn steps_under_load(store: &Store, id: i64, load: &RunLoad) -> Result<StepsUnderLoad> {
    let (levels, unit, run_id) = (&load.levels, load.unit, load.run_id);
    let shapes = store.route_steps(id).await?;
    let mut out = StepsUnderLoad {
        route_id: id,
        run_id,
        run_name: load.run_name.clone(),
        run_url: format!("/console/runs/{run_id}"),
        unit,
        levels: Vec::new(),
        steps: Vec::new(),
        gives_way: None,
        note: None,
        run_statement: load.statement.clone(),
    };
    if shapes.is_empty() {
        out.note = Some("the route has no steps (its agent has no processor MBeans)".into());
        return Ok(out);
    }
    let (Some(from), Some(to)) = (
        levels.iter().flat_map(|l| &l.spans).map(|s| s.0).min(),
        levels.iter().flat_map(|l| &l.spans).map(|s| s.1).max(),
    ) else {
        out.note = Some(
            "the run has no load levels: neither virtual users per second nor a rate search's steps"
                .into(),
        );
        return Ok(out);
    };
    // Scrapes that end up to one interval after the run still cover its last seconds.
    let points = store.step_series(id, from, to + 60_000, 1, 0).await?;
    let mut at_level: Vec<BTreeMap<i64, Figures>> = vec![BTreeMap::new(); levels.len()];
    for p in points {
        let mid = p.t_ms - p.figures.span_ms / 2;
        let Some(i) = levels
            .iter()
            .position(|l| l.spans.iter().any(|(a, b)| (*a..*b).contains(&mid)))
        else {
            continue;
        };
        at_level[i]
            .entry(p.step_id)
            .or_default()
            .add_sums(&p.figures.as_interval());
    }
    let mut judged: Vec<(f64, BTreeMap<String, f64>)> = Vec::new();
    let mut order: Vec<usize> = (0..levels.len()).collect();
    order.sort_by(|a, b| levels[*a].load.total_cmp(&levels[*b].load));
    let mut per_step: Vec<StepUnderLoad> = shapes
        .iter()
        .map(|s| StepUnderLoad {
            step: s.step.clone(),
            label: s.label(),
            level: s.level,
            self_ms: Vec::new(),
            mean_ms: Vec::new(),
        })
        .collect();
    for i in order {
        let figures = &at_level[i];
        let exchanges: f64 = shapes
            .iter()
            .filter(|s| s.parent.is_none())
            .filter_map(|s| figures.get(&s.id)?.exchanges)
            .sum();
        if exchanges < MIN_LEVEL_EXCHANGES {
            continue;
        }
        let with: Vec<(crate::domain::routes::steps::StepShape, Figures)> = shapes
            .iter()
            .map(|s| (s.clone(), figures.get(&s.id).cloned().unwrap_or_default()))
            .collect();
        let rows = steps::rows(with.clone(), i64::MIN);
        for (series, row) in per_step.iter_mut().zip(&rows) {
            series.self_ms.push(row.self_ms);
            series.mean_ms.push(row.mean_ms);
        }
        judged.push((levels[i].load, steps::self_times(&with)));
        out.levels.push(LevelView {
            load: levels[i].load,
            seconds: levels[i]
                .spans
                .iter()
                .map(|(a, b)| (b - a) as f64 / 1000.0)
                .sum(),
            exchanges,
        });
    }
    let labels: BTreeMap<String, String> =
        shapes.iter().map(|s| (s.step.clone(), s.label())).collect();
    out.gives_way = steps::gives_way(&judged, &labels, unit);
    out.steps = per_step;
    if out.levels.len() < 2 {
        out.note = Some(format!(
            "{} load level(s) with step figures during the run: two are needed to see a step give way (was the route's target scraped during the run?)",
            out.levels.len()
        ));
    } else if out.gives_way.is_none() {
        out.note = Some(format!(
            "no step's self time doubled (by {} ms or more) as the load rose",
            steps::MIN_GROWTH_MS
        ));
    }
    Ok(out)
}

/// A route with steps that a run loaded, for the run page: what its steps did.
#[derive(Debug, Clone, Serialize)]
pub struct RouteInside {
    pub route_id: i64,
    pub service: String,
    pub route: String,
    /// The route page with this run's steps under load.
    pub url: String,
    /// The step that gave way, as one sentence.
    pub sentence: Option<String>,
    /// Why there is no sentence.
    pub note: Option<String>,
}

/// The routes with steps whose figures cover `run` and whose service it loaded (or that
/// it does not say it missed: a run without a service tag or address), each with the step
/// that gave way.
pub async fn routes_inside_run(
    store: &Store,
    run: &crate::store::RunDetail,
) -> Result<Vec<RouteInside>> {
    use crate::domain::routes::run_hits::{Hit, RunAim};
    if run.started_at_ms.is_none() {
        return Ok(Vec::new());
    }
    let reported = run.reported.to_string();
    let aim = RunAim {
        service_tag: run.tags.get("service").map(String::as_str),
        source: run.source.as_deref(),
        reported: &reported,
    };
    // Only Jolokia routes scraped while the run ran, that it may have loaded; the run's
    // levels are read once, and only when there is such a route.
    let (start, end) = (
        run.started_at_ms.unwrap_or(0),
        run.ended_at_ms.unwrap_or(i64::MAX),
    );
    let candidates: Vec<_> = store
        .route_infos(None, None)
        .await?
        .into_iter()
        .filter(|info| {
            info.source == "jolokia"
                && info.last_seen_ms >= start
                && info.first_seen_ms <= end
                && aim.hits(&info.service, &info.target_url) != Hit::Other
        })
        .collect();
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let load = run_load(store, run).await?;
    if load.levels.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for info in candidates {
        let view = steps_under_load(store, info.id, &load).await?;
        if view.levels.is_empty() {
            continue;
        }
        out.push(RouteInside {
            route_id: info.id,
            service: info.service.clone(),
            route: info.route.clone(),
            url: format!("/console/routes/{}?run={}#steps-load", info.id, run.id),
            sentence: view.gives_way.map(|g| g.sentence),
            note: view.note,
        });
    }
    Ok(out)
}
