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
