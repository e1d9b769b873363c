//! The routes and targets part of the JSON API.
//!
//! - `GET /api/v1/routes?window=1m` → `[RouteRow…]` (see [`RouteRow`]): RED figures per
//!   route over the window (`30s`, `1m`, `5m`, `15m`, `1h`, … up to `24h`; default `1m`);
//! - `GET /api/v1/routes/{id}?window=` → one `RouteRow`;
//! - `GET /api/v1/routes/{id}/timeseries?from=&to=&step=` → [`RouteSeries`] plus `runs`
//!   (load-test runs overlapping the range: `{id, name, started_at_ms, ended_at_ms, url}`).
//!   `from`/`to` are unix ms (default: the last hour); `step` is ms or a duration (`30s`,
//!   `5m`; default: range / 1000, at least the stored resolution);
//! - `GET /api/v1/targets` → `[TargetRow…]` (`id, name, url, kind, interval_s, up,
//!   last_error, last_scrape_ms, samples, …`);
//! - `POST /api/v1/targets` with `{"name","url","kind":"prometheus"|"jolokia","interval_s",
//!   "timeout_s","labels"}` → 201 `TargetRow`, and its scrape loop starts;
//! - `DELETE /api/v1/targets/{id}` → 204 (its routes and figures go too).
//!
//! Missing figures are `null`, never NaN or 0. Errors are `{"error": "…"}`.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::Deserialize;

use crate::app::AppState;
use crate::error::{Error, Result};
use crate::live::Event;
use crate::routes::series::{self, RouteSeries};
use crate::routes::{Figures, RouteRow};
use crate::store::{
    HOUR_MS, IntervalScope, MINUTE_MS, RouteInfo, RunBand, Store, TEN_MINUTES_MS, TargetSpec,
};

/// Largest window of `GET /api/v1/routes`, ms (raw figures are kept 48 h by default).
const MAX_WINDOW_MS: i64 = 24 * HOUR_MS;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/routes", get(list_routes))
        .route("/api/v1/routes/{id}", get(get_route))
        .route("/api/v1/routes/{id}/timeseries", get(route_timeseries))
        .route("/api/v1/targets", get(list_targets).post(create_target))
        .route("/api/v1/targets/{id}", delete(delete_target))
}

/// A duration: `500ms`, `30s`, `5m`, `2h`, `7d`, or a plain number of ms.
pub fn parse_duration_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(p) => (&s[..p], &s[p..]),
        None => (s, "ms"),
    };
    let n: f64 = num.parse().ok()?;
    let factor = match unit {
        "ms" => 1.0,
        "s" => 1000.0,
        "m" | "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return None,
    };
    let ms = (n * factor).round();
    (ms.is_finite() && ms > 0.0 && ms < 1e15).then_some(ms as i64)
}

fn id_of(raw: &str, what: &str) -> Result<i64> {
    raw.parse()
        .map_err(|_| Error::BadRequest(format!("{what} id must be a number, got {raw:?}")))
}

/// A route's row from its stored state and its figures over `window_ms`.
pub fn route_row(info: &RouteInfo, f: &Figures, window_ms: i64) -> RouteRow {
    let stale = matches!(
        (info.target_last_scrape_ms, info.target_up),
        (Some(t), Some(true)) if info.last_seen_ms < t
    );
    let state = if info.target_up == Some(false) {
        "down".to_string()
    } else if stale {
        "stale".to_string()
    } else if let Some(s) = info.state.as_deref().filter(|s| *s != "Started") {
        s.to_string()
    } else if f.exchanges.is_some_and(|n| n > 0.0) {
        "active".to_string()
    } else {
        "idle".to_string()
    };
    RouteRow {
        id: info.id,
        target_id: info.target_id,
        service: info.service.clone(),
        instance: info.instance(),
        route: info.route.clone(),
        source: info.source.clone(),
        state,
        throughput_per_s: f.throughput_per_s(),
        error_pct: f.error_pct(),
        mean_ms: f.mean_ms(),
        p50_ms: f.quantile_ms(0.5),
        p95_ms: f.quantile_ms(0.95),
        p99_ms: f.quantile_ms(0.99),
        max_ms: f.max_ms(),
        inflight: f.inflight,
        last_exchange_ms: info.last_exchange_ms,
        window_s: window_ms as f64 / 1000.0,
        url: format!("/console/routes/{}", info.id),
    }
}

/// Route rows over the window ending at `now_ms` (all routes, or one target's).
pub async fn route_rows(
    store: &Store,
    target_id: Option<i64>,
    window_ms: i64,
    now_ms: i64,
) -> crate::store::Result<Vec<RouteRow>> {
    Ok(store
        .route_figures(target_id, window_ms, now_ms)
        .await?
        .iter()
        .map(|(info, f)| route_row(info, f, window_ms))
        .collect())
}

#[derive(Deserialize)]
struct WindowQuery {
    window: Option<String>,
}

fn window_ms(q: &WindowQuery) -> Result<i64> {
    match q.window.as_deref().filter(|w| !w.is_empty()) {
        None => Ok(MINUTE_MS),
        Some(w) => parse_duration_ms(w)
            .filter(|ms| *ms >= 1000 && *ms <= MAX_WINDOW_MS)
            .ok_or_else(|| {
                Error::BadRequest(format!(
                    "window must be a duration from 1s to 24h such as 1m or 15m, got {w:?}"
                ))
            }),
    }
}

async fn list_routes(
    State(state): State<AppState>,
    Query(q): Query<WindowQuery>,
) -> Result<Json<Vec<RouteRow>>> {
    let window = window_ms(&q)?;
    Ok(Json(
        route_rows(&state.store, None, window, crate::now_ms()).await?,
    ))
}

/// One route's row, or 404.
pub async fn one_route(state: &AppState, id: i64, window: i64) -> Result<RouteRow> {
    let infos = state.store.route_infos(None, Some(id)).await?;
    let info = infos
        .into_iter()
        .next()
        .ok_or_else(|| Error::NotFound(format!("route {id}")))?;
    let (info, f) = state
        .store
        .figures_of(
            vec![info],
            IntervalScope::Routes(&[id]),
            window,
            crate::now_ms(),
        )
        .await?
        .pop()
        .expect("one route in, one out");
    Ok(route_row(&info, &f, window))
}

async fn get_route(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<WindowQuery>,
) -> Result<Json<RouteRow>> {
    let id = id_of(&id, "route")?;
    Ok(Json(one_route(&state, id, window_ms(&q)?).await?))
}

#[derive(Deserialize)]
struct SeriesQuery {
    from: Option<String>,
    to: Option<String>,
    step: Option<String>,
}

/// A route's series with the runs that overlap its range.
#[derive(serde::Serialize)]
pub struct SeriesWithRuns {
    pub route_id: i64,
    #[serde(flatten)]
    pub series: RouteSeries,
    pub runs: Vec<RunBand>,
}

/// The series of route `id` over `from_ms…to_ms` (see the module docs).
pub async fn series_for(
    state: &AppState,
    id: i64,
    from_ms: i64,
    to_ms: i64,
    step_ms: Option<i64>,
) -> Result<SeriesWithRuns> {
    let Some(info) = state.store.route_infos(None, Some(id)).await?.pop() else {
        return Err(Error::NotFound(format!("route {id}")));
    };
    let now = crate::now_ms();
    let r = &state.config.retention;
    let keep = [r.raw_ms(), r.minute_ms(), r.ten_minute_ms(), r.hour_ms()];
    let mut levels = Vec::with_capacity(4);
    for (i, res) in series::RESOLUTIONS_MS.into_iter().enumerate() {
        let mut covers_from_ms = now - keep[i];
        if res == TEN_MINUTES_MS {
            // Added after the others: before its first bucket a route has only the others.
            let first = state.store.first_rollup_ms(id, res).await?;
            let needed = first.unwrap_or(i64::MAX);
            if needed > info.first_seen_ms.saturating_add(res) {
                covers_from_ms = covers_from_ms.max(needed);
            }
        }
        levels.push(series::Level {
            resolution_ms: res,
            spacing_ms: if res == 0 {
                (info.target_interval_s * 1000.0).round().max(1000.0) as i64
            } else {
                res
            },
            covers_from_ms,
        });
    }
    let resolution = series::resolution_for(from_ms, to_ms, &levels);
    let ideal = ((to_ms - from_ms) / series::TARGET_POINTS).max(1);
    let step = step_ms.unwrap_or(ideal).max(resolution).max(1);
    let rows = if resolution == 0 {
        state
            .store
            .route_intervals(Some(id), from_ms, to_ms)
            .await?
    } else {
        state
            .store
            .route_rollups(id, resolution, from_ms, to_ms)
            .await?
    };
    let points: Vec<(i64, &crate::routes::Interval)> =
        rows.iter().map(|r| (r.at_ms, &r.interval)).collect();
    Ok(SeriesWithRuns {
        route_id: id,
        series: series::build(&points, from_ms, to_ms, resolution, step),
        runs: state.store.runs_overlapping(from_ms, to_ms).await?,
    })
}

fn time_ms(raw: Option<&str>, default: i64, what: &str) -> Result<i64> {
    match raw.filter(|s| !s.is_empty()) {
        None => Ok(default),
        Some(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| Error::BadRequest(format!("{what} must be unix epoch ms, got {s:?}"))),
    }
}

async fn route_timeseries(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<SeriesQuery>,
) -> Result<Response> {
    let id = id_of(&id, "route")?;
    let now = crate::now_ms();
    let to = time_ms(q.to.as_deref(), now, "to")?;
    let from = time_ms(q.from.as_deref(), to - HOUR_MS, "from")?;
    if from >= to {
        return Err(Error::BadRequest(format!(
            "from ({from}) must be before to ({to})"
        )));
    }
    if to - from > 400 * 24 * HOUR_MS {
        return Err(Error::BadRequest(
            "a range may span at most 400 days".into(),
        ));
    }
    let step = match q.step.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(parse_duration_ms(s).ok_or_else(|| {
            Error::BadRequest(format!("step must be ms or a duration like 30s, got {s:?}"))
        })?),
    };
    if let Some(step) = step
        && (to - from) / step > 20_000
    {
        return Err(Error::BadRequest(format!(
            "step {step} ms gives more than 20,000 points over this range"
        )));
    }
    Ok(Json(series_for(&state, id, from, to, step).await?).into_response())
}

async fn list_targets(State(state): State<AppState>) -> Result<Response> {
    Ok(Json(state.store.list_targets().await?).into_response())
}

async fn create_target(
    State(state): State<AppState>,
    body: std::result::Result<Json<TargetSpec>, axum::extract::rejection::JsonRejection>,
) -> Result<Response> {
    let Json(spec) = body.map_err(|e| Error::BadRequest(format!("target: {}", e.body_text())))?;
    crate::scrape::validate(&spec).map_err(Error::BadRequest)?;
    let target = state
        .store
        .insert_target(&spec, "api", crate::now_ms())
        .await?
        .ok_or_else(|| {
            Error::BadRequest(format!(
                "a target named {:?} exists; delete it first or pick another name",
                spec.name
            ))
        })?;
    state.scraper.spawn(target.clone());
    state.hub.publish(&Event::TargetStatus {
        target: target.clone(),
    });
    Ok((StatusCode::CREATED, Json(target)).into_response())
}

async fn delete_target(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let id = id_of(&id, "target")?;
    state.scraper.stop(id);
    if !state.store.delete_target(id).await? {
        return Err(Error::NotFound(format!("target {id}")));
    }
    state.hub.publish(&Event::TargetRemoved { id });
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("1m"), Some(60_000));
        assert_eq!(parse_duration_ms("30s"), Some(30_000));
        assert_eq!(parse_duration_ms("1.5h"), Some(5_400_000));
        assert_eq!(parse_duration_ms("250"), Some(250));
        assert_eq!(parse_duration_ms("7d"), Some(604_800_000));
        assert_eq!(parse_duration_ms("1w"), None);
        assert_eq!(parse_duration_ms("-1s"), None);
        assert_eq!(parse_duration_ms(""), None);
    }
}
