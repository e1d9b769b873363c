//! The routes and targets part of the JSON API.
//!
//! - `GET /api/v1/routes?window=1m` → `[RouteRow…]` (see [`RouteRow`]): RED figures per
//!   route over the window (`30s`, `1m`, `5m`, `15m`, `1h`, … up to `24h`; default `1m`).
//!   Optional, applied on the server (see [`RouteListQuery`]): `q` (words that must all
//!   appear in service, instance or route, any case), `service` (exact), `state` (exact:
//!   `active`, `idle`, `down`, `stale`, `gone`, …), `sort` (a row field: `service`, `route`,
//!   `instance`, `state`, `throughput_per_s`, `error_pct`, `mean_ms`, `p95_ms`, `max_ms`,
//!   `inflight`, `last_exchange_ms`; default service then route), `dir` (`asc` | `desc`;
//!   missing figures sort last either way). With `offset` and/or `limit` (1–1000, default
//!   100) the answer is one page: `{"total": matching, "all": every route, "offset",
//!   "limit", "routes": [RouteRow…]}`; without them, every matching row as an array;
//! - `GET /api/v1/routes/sparklines?ids=1,2,…` (up to 1000 ids) → `{"from_ms", "to_ms",
//!   "step_ms", "routes": {"<id>": [[t_ms, exchanges_per_s], …]}}`: each route's throughput
//!   over the last 15 min in 30 s steps (only steps with figures), for the sparklines of a
//!   page of the routes table in one request;
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
        .route("/api/v1/routes/sparklines", get(route_sparklines))
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
    // missing from the target's latest good scrape: stale, and gone after a few scrapes
    let missed_ms = match (info.target_last_scrape_ms, info.target_up) {
        (Some(t), Some(true)) if info.last_seen_ms < t => Some(t - info.last_seen_ms),
        _ => None,
    };
    let interval_ms = (info.target_interval_s * 1000.0) as i64;
    let state = if info.target_up == Some(false) {
        "down".to_string()
    } else if missed_ms.is_some_and(|m| m >= crate::routes::GONE_AFTER_SCRAPES * interval_ms) {
        "gone".to_string()
    } else if missed_ms.is_some() {
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
        last_seen_ms: info.last_seen_ms,
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

/// The query of `GET /api/v1/routes` and `/console/routes` (see the module docs); every
/// field is optional.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RouteListQuery {
    pub window: Option<String>,
    pub q: Option<String>,
    pub service: Option<String>,
    pub state: Option<String>,
    pub sort: Option<String>,
    pub dir: Option<String>,
    pub offset: Option<String>,
    pub limit: Option<String>,
}

/// Fields the routes list sorts by; the first `TEXT_SORTS` need no figures.
pub const SORT_KEYS: [&str; 11] = [
    "service",
    "route",
    "instance",
    "state",
    "throughput_per_s",
    "error_pct",
    "mean_ms",
    "p95_ms",
    "max_ms",
    "inflight",
    "last_exchange_ms",
];
const TEXT_SORTS: usize = 3;

/// Page size of a paged routes list when none is asked for, and the largest allowed.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 1000;

/// A routes list query, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteList {
    pub window_ms: i64,
    /// Lower-cased words, all of which must appear.
    pub words: Vec<String>,
    pub service: Option<String>,
    pub state: Option<String>,
    /// One of [`SORT_KEYS`].
    pub sort: &'static str,
    pub desc: bool,
    pub offset: usize,
    /// `None`: every matching row, no paging.
    pub limit: Option<usize>,
}

impl RouteList {
    /// Checks `q`; `paged` gives a page of [`DEFAULT_LIMIT`] rows even without
    /// `offset`/`limit`.
    pub fn parse(q: &RouteListQuery, paged: bool) -> Result<RouteList> {
        let text = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let sort = match text(&q.sort) {
            None => "service",
            Some(s) => SORT_KEYS
                .iter()
                .find(|k| **k == s)
                .copied()
                .ok_or_else(|| {
                    Error::BadRequest(format!(
                        "sort must be one of {}, got {s:?}",
                        SORT_KEYS.join(", ")
                    ))
                })?,
        };
        let desc = match text(&q.dir).as_deref() {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(d) => {
                return Err(Error::BadRequest(format!(
                    "dir must be asc or desc, got {d:?}"
                )));
            }
        };
        let number = |v: &Option<String>, what: &str| -> Result<Option<usize>> {
            text(v)
                .map(|s| {
                    s.parse::<usize>().map_err(|_| {
                        Error::BadRequest(format!("{what} must be a whole number, got {s:?}"))
                    })
                })
                .transpose()
        };
        let offset = number(&q.offset, "offset")?;
        let limit = number(&q.limit, "limit")?;
        if let Some(l) = limit
            && !(1..=MAX_LIMIT).contains(&l)
        {
            return Err(Error::BadRequest(format!(
                "limit must be from 1 to {MAX_LIMIT}, got {l}"
            )));
        }
        let paged = paged || offset.is_some() || limit.is_some();
        Ok(RouteList {
            window_ms: window_ms(&WindowQuery {
                window: q.window.clone(),
            })?,
            words: text(&q.q)
                .map(|t| {
                    t.to_lowercase()
                        .split_whitespace()
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            service: text(&q.service),
            state: text(&q.state),
            sort,
            desc,
            offset: offset.unwrap_or(0),
            limit: paged.then(|| limit.unwrap_or(DEFAULT_LIMIT)),
        })
    }
}

/// One page of the routes list.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RoutePage {
    /// Routes matching the filters.
    pub total: usize,
    /// Every route.
    pub all: usize,
    pub offset: usize,
    pub limit: usize,
    pub routes: Vec<RouteRow>,
}

fn text_key<'a>(key: &str, service: &'a str, route: &'a str, instance: &'a str) -> &'a str {
    match key {
        "route" => route,
        "instance" => instance,
        _ => service,
    }
}

fn figure_key(r: &RouteRow, key: &str) -> Option<f64> {
    match key {
        "throughput_per_s" => r.throughput_per_s,
        "error_pct" => r.error_pct,
        "mean_ms" => r.mean_ms,
        "p95_ms" => r.p95_ms,
        "max_ms" => r.max_ms,
        "inflight" => r.inflight,
        "last_exchange_ms" => r.last_exchange_ms.map(|t| t as f64),
        _ => None,
    }
}

/// The routes list: filtered, sorted and paged on the server. Figures are computed only
/// for the page when neither the sort nor the filters need them (text sorts, no `state`).
pub async fn list_page(
    store: &Store,
    list: &RouteList,
    now_ms: i64,
) -> crate::store::Result<RoutePage> {
    let infos = store.route_infos(None, None).await?;
    let all = infos.len();
    let mut keyed: Vec<(RouteInfo, String)> = infos
        .into_iter()
        .map(|i| {
            let instance = i.instance();
            (i, instance)
        })
        .filter(|(i, instance)| {
            list.service.as_deref().is_none_or(|s| i.service == s)
                && (list.words.is_empty() || {
                    let hay = format!("{} {} {} {}", i.service, instance, i.route, i.source)
                        .to_lowercase();
                    list.words.iter().all(|w| hay.contains(w.as_str()))
                })
        })
        .collect();
    let filtered_all = keyed.len() == all;
    let by_text = |a: &(RouteInfo, String), b: &(RouteInfo, String)| {
        (
            a.0.service.as_str(),
            a.0.route.as_str(),
            a.1.as_str(),
            a.0.id,
        )
            .cmp(&(
                b.0.service.as_str(),
                b.0.route.as_str(),
                b.1.as_str(),
                b.0.id,
            ))
    };
    let needs_figures = list.state.is_some() || !SORT_KEYS[..TEXT_SORTS].contains(&list.sort);
    let (total, rows) = if !needs_figures {
        keyed.sort_by(|a, b| {
            let ka = text_key(list.sort, &a.0.service, &a.0.route, &a.1);
            let kb = text_key(list.sort, &b.0.service, &b.0.route, &b.1);
            let o = ka.cmp(kb);
            let o = if list.desc { o.reverse() } else { o };
            o.then_with(|| by_text(a, b))
        });
        let total = keyed.len();
        let page: Vec<RouteInfo> = match list.limit {
            Some(l) => keyed
                .into_iter()
                .skip(list.offset)
                .take(l)
                .map(|k| k.0)
                .collect(),
            None => keyed.into_iter().map(|k| k.0).collect(),
        };
        let ids: Vec<i64> = page.iter().map(|i| i.id).collect();
        let scope = if filtered_all && list.limit.is_none() {
            IntervalScope::All
        } else {
            IntervalScope::Routes(&ids)
        };
        let rows: Vec<RouteRow> = store
            .figures_of(page, scope, list.window_ms, now_ms)
            .await?
            .iter()
            .map(|(i, f)| route_row(i, f, list.window_ms))
            .collect();
        (total, rows)
    } else {
        keyed.sort_by(by_text);
        let ids: Vec<i64> = keyed.iter().map(|k| k.0.id).collect();
        let scope = if filtered_all {
            IntervalScope::All
        } else {
            IntervalScope::Routes(&ids)
        };
        let infos: Vec<RouteInfo> = keyed.into_iter().map(|k| k.0).collect();
        let mut rows: Vec<RouteRow> = store
            .figures_of(infos, scope, list.window_ms, now_ms)
            .await?
            .iter()
            .map(|(i, f)| route_row(i, f, list.window_ms))
            .filter(|r| list.state.as_deref().is_none_or(|s| r.state == s))
            .collect();
        if list.sort == "state" {
            rows.sort_by(|a, b| {
                let o = a.state.cmp(&b.state);
                if list.desc { o.reverse() } else { o }
            });
        } else if list.sort != "service" {
            // stable: ties keep service, route order; missing figures last either way
            rows.sort_by(
                |a, b| match (figure_key(a, list.sort), figure_key(b, list.sort)) {
                    (Some(x), Some(y)) => {
                        let o = x.total_cmp(&y);
                        if list.desc { o.reverse() } else { o }
                    }
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (None, None) => std::cmp::Ordering::Equal,
                },
            );
        } else if list.desc {
            rows.reverse();
        }
        let total = rows.len();
        let rows = match list.limit {
            Some(l) => rows.into_iter().skip(list.offset).take(l).collect(),
            None => rows,
        };
        (total, rows)
    };
    Ok(RoutePage {
        total,
        all,
        offset: list.offset,
        limit: list.limit.unwrap_or(total),
        routes: rows,
    })
}

/// Sparkline span and step, ms.
pub const SPARK_MS: i64 = 15 * MINUTE_MS;
pub const SPARK_STEP_MS: i64 = 30_000;

/// Throughput per route over the last [`SPARK_MS`] in [`SPARK_STEP_MS`] steps: `(step
/// start, exchanges/s)` for steps with figures, oldest first.
pub async fn sparklines(
    store: &Store,
    ids: &[i64],
    now_ms: i64,
) -> crate::store::Result<std::collections::HashMap<i64, Vec<(i64, f64)>>> {
    let rows = store
        .intervals_in(IntervalScope::Routes(ids), now_ms - SPARK_MS, now_ms)
        .await?;
    let mut out: std::collections::HashMap<i64, Vec<(i64, f64)>> = Default::default();
    let mut cur: Option<(i64, i64, Figures)> = None;
    let flush = |c: Option<(i64, i64, Figures)>,
                 out: &mut std::collections::HashMap<i64, Vec<(i64, f64)>>| {
        if let Some((id, t, f)) = c {
            let v = f.throughput_per_s();
            let e = out.entry(id).or_default();
            if let Some(v) = v {
                e.push((t, (v * 1000.0).round() / 1000.0));
            }
        }
    };
    for r in rows {
        let t = r.at_ms - r.at_ms.rem_euclid(SPARK_STEP_MS);
        match &mut cur {
            Some((id, bt, f)) if *id == r.route_id && *bt == t => f.add(&r.interval),
            _ => {
                flush(cur.take(), &mut out);
                let mut f = Figures::default();
                f.add(&r.interval);
                cur = Some((r.route_id, t, f));
            }
        }
    }
    flush(cur, &mut out);
    Ok(out)
}

#[derive(Deserialize)]
struct SparkQuery {
    ids: Option<String>,
}

async fn route_sparklines(
    State(state): State<AppState>,
    Query(q): Query<SparkQuery>,
) -> Result<Response> {
    let raw = q.ids.unwrap_or_default();
    let ids: Vec<i64> = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| id_of(s, "route"))
        .collect::<Result<_>>()?;
    if ids.len() > MAX_LIMIT {
        return Err(Error::BadRequest(format!(
            "at most {MAX_LIMIT} ids per request, got {}",
            ids.len()
        )));
    }
    let now = crate::now_ms();
    let lines = sparklines(&state.store, &ids, now).await?;
    let routes: serde_json::Map<String, serde_json::Value> = ids
        .iter()
        .map(|id| {
            (
                id.to_string(),
                serde_json::json!(lines.get(id).cloned().unwrap_or_default()),
            )
        })
        .collect();
    Ok(Json(serde_json::json!({
        "from_ms": now - SPARK_MS,
        "to_ms": now,
        "step_ms": SPARK_STEP_MS,
        "routes": routes,
    }))
    .into_response())
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
    Query(q): Query<RouteListQuery>,
) -> Result<Response> {
    let list = RouteList::parse(&q, false)?;
    let page = list_page(&state.store, &list, crate::now_ms()).await?;
    Ok(match list.limit {
        Some(_) => Json(page).into_response(),
        None => Json(page.routes).into_response(),
    })
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
