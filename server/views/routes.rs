//! The route table and a route's detail: each route's RED figures over a window
//! ([`route_rows`], [`list_page`]: filtered, sorted and paged), the throughput sparklines,
//! and a route's series with the runs that overlap it, for `/console/routes…` and
//! `/api/v1/routes…`.

use serde::Deserialize;

use crate::domain::format::parse_duration_ms;
use crate::domain::routes::run_hits::Hit;
use crate::domain::routes::series::{self, RouteSeries};
use crate::domain::routes::{Figures, RouteRow};
use crate::error::{Error, Result};
use crate::store::{
    HOUR_MS, IntervalScope, MINUTE_MS, Retention, RouteInfo, RunBand, Store, TEN_MINUTES_MS,
};

/// Largest window of `GET /api/v1/routes`, ms (raw figures are kept 48 h by default).
const MAX_WINDOW_MS: i64 = 24 * HOUR_MS;

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
    } else if missed_ms
        .is_some_and(|m| m >= crate::domain::routes::GONE_AFTER_SCRAPES * interval_ms)
    {
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
        labels: info.labels(),
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
pub struct WindowQuery {
    pub window: Option<String>,
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
    /// `show` (the API's default) or `hide` (the console's) harrier's own routes, those
    /// of its self-scrape target.
    pub own: Option<String>,
    /// Only the routes of this group (Camel's `routeGroup`), exact.
    pub group: Option<String>,
    /// Only the routes of this Camel context (their `camel_context` label), exact.
    pub context: Option<String>,
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
    /// Leave out harrier's own routes (its self-scrape target's) unless a service is
    /// chosen.
    pub hide_own: bool,
    pub group: Option<String>,
    pub context: Option<String>,
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
        let hide_own = match text(&q.own).as_deref() {
            None | Some("show") => false,
            Some("hide") => true,
            Some(o) => {
                return Err(Error::BadRequest(format!(
                    "own must be show or hide, got {o:?}"
                )));
            }
        };
        Ok(RouteList {
            hide_own,
            group: text(&q.group),
            context: text(&q.context),
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
    /// harrier's own routes left out ([`RouteList::hide_own`]).
    pub own_hidden: usize,
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
    let mut infos = store.route_infos(None, None).await?;
    let all = infos.len();
    let mut own_hidden = 0;
    if list.hide_own && list.service.is_none() {
        let own: Vec<i64> = store
            .list_targets()
            .await?
            .iter()
            .filter(|t| t.is_builtin())
            .map(|t| t.id)
            .collect();
        infos.retain(|i| !own.contains(&i.target_id));
        own_hidden = all - infos.len();
    }
    if let Some(g) = &list.group {
        let in_group: std::collections::HashSet<i64> = store
            .route_groups()
            .await?
            .into_iter()
            .filter(|(_, group)| group == g)
            .map(|(id, _)| id)
            .collect();
        infos.retain(|i| in_group.contains(&i.id));
    }
    if let Some(c) = &list.context {
        infos.retain(|i| i.labels().get("camel_context") == Some(c));
    }
    let filtered_all = infos.len() == all;
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
    let filtered_all = filtered_all && keyed.len() == all;
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
        own_hidden,
        offset: list.offset,
        limit: list.limit.unwrap_or(total),
        routes: rows,
    })
}

/// Sparkline span and step, ms.
pub const SPARK_MS: i64 = 15 * MINUTE_MS;
pub const SPARK_STEP_MS: i64 = MINUTE_MS;

/// Throughput per route over the last [`SPARK_MS`] in [`SPARK_STEP_MS`] steps: `(step
/// start, exchanges/s)` for steps with figures, oldest first; the current minute so far
/// last. Read from the 1 min rollups each scrape keeps up to date (15 rows a route, however
/// often it is scraped), not from the raw intervals.
pub async fn sparklines(
    store: &Store,
    ids: &[i64],
    now_ms: i64,
) -> crate::store::Result<std::collections::HashMap<i64, Vec<(i64, f64)>>> {
    let rows = store
        .rollup_counts(ids, SPARK_STEP_MS, now_ms - SPARK_MS, now_ms)
        .await?;
    let mut out: std::collections::HashMap<i64, Vec<(i64, f64)>> = Default::default();
    for (id, t, span_ms, exchanges) in rows {
        let line = out.entry(id).or_default();
        if let Some(n) = exchanges
            && span_ms > 0
        {
            let v = n / (span_ms as f64 / 1000.0);
            line.push((t, (v * 1000.0).round() / 1000.0));
        }
    }
    Ok(out)
}

pub fn window_ms(q: &WindowQuery) -> Result<i64> {
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

/// One route's row, or 404.
pub async fn one_route(store: &Store, id: i64, window: i64) -> Result<RouteRow> {
    let infos = store.route_infos(None, Some(id)).await?;
    let info = infos
        .into_iter()
        .next()
        .ok_or_else(|| Error::NotFound(format!("route {id}")))?;
    let (info, f) = store
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

/// A route's series with the runs that overlap its range and hit its service (or do not
/// say what they hit: `hit` = `unknown`).
#[derive(serde::Serialize)]
pub struct SeriesWithRuns {
    pub route_id: i64,
    #[serde(flatten)]
    pub series: RouteSeries,
    pub runs: Vec<RunBand>,
}

/// The series of route `id` over `from_ms…to_ms` (see the module docs).
pub async fn series_for(
    store: &Store,
    retention: &Retention,
    id: i64,
    from_ms: i64,
    to_ms: i64,
    step_ms: Option<i64>,
) -> Result<SeriesWithRuns> {
    let Some(info) = store.route_infos(None, Some(id)).await?.pop() else {
        return Err(Error::NotFound(format!("route {id}")));
    };
    let now = crate::now_ms();
    let r = retention;
    let keep = [r.raw_ms(), r.minute_ms(), r.ten_minute_ms(), r.hour_ms()];
    let mut levels = Vec::with_capacity(4);
    for (i, res) in series::RESOLUTIONS_MS.into_iter().enumerate() {
        let mut covers_from_ms = now - keep[i];
        if res == TEN_MINUTES_MS {
            // Added after the others: before its first bucket a route has only the others.
            let first = store.first_rollup_ms(id, res).await?;
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
        store.route_intervals(Some(id), from_ms, to_ms).await?
    } else {
        store.route_rollups(id, resolution, from_ms, to_ms).await?
    };
    let points: Vec<(i64, &crate::domain::routes::Interval)> =
        rows.iter().map(|r| (r.at_ms, &r.interval)).collect();
    // Only runs that hit this route's service, or that do not say what they hit — except
    // on harrier's own routes, which no run aims at unless it says so.
    let own = store
        .list_targets()
        .await?
        .iter()
        .any(|t| t.id == info.target_id && t.is_builtin());
    let mut runs = store.runs_overlapping(from_ms, to_ms).await?;
    runs.retain_mut(|r| {
        let hit = r.aim().hits(&info.service, &info.target_url);
        r.hit = Some(hit);
        r.url = crate::views::runs::run_url(r.id);
        hit != Hit::Other && !(own && hit == Hit::Unknown)
    });
    Ok(SeriesWithRuns {
        route_id: id,
        series: series::build(&points, from_ms, to_ms, resolution, step),
        runs,
    })
}
