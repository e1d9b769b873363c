//! Console pages for routes: `/console/routes` (the fleet of targets and every route with
//! its RED figures over the last minute, and a 15 min throughput sparkline) and
//! `/console/routes/{id}` (one route's charts, and under them the pools of the process the
//! route runs in on the same range; data island read by `static/routes.js`).
//!
//! Reads only. Rows carry raw values in `data-value` so the page sorts and so live updates
//! (`routes_updated`, `target_status`) can replace them in place.

use std::collections::BTreeMap;

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, State};
use axum::routing::get;

use super::{PageError, filters};
use crate::domain::format;
use crate::domain::routes::RouteRow;
use crate::error::Error;
use crate::state::AppState;
use crate::store::{HOUR_MS, MINUTE_MS, TargetRow};

use crate::views::routes::{RouteList, RouteListQuery, SPARK_MS};

pub fn routes() -> Routes {
    Routes::new()
        .route("/console/routes", GET, Read, get(routes_page))
        .route("/console/routes/{id}", GET, Read, get(route_page))
}

/// One route as a table row: raw values for sorting and live updates, text for people.
pub struct RouteRowView {
    pub row: RouteRow,
    /// The service's console page.
    pub service_href: String,
    pub state_class: &'static str,
    pub tput: String,
    pub tput_raw: String,
    pub error_pct: String,
    pub error_raw: String,
    /// `" bad"` (red) from 5 % errors, `" warn"` (amber) above 0, else `""`: the rule of
    /// the error-% cards.
    pub error_tone: &'static str,
    pub mean: String,
    pub mean_raw: String,
    pub p95: String,
    pub p95_raw: String,
    pub max: String,
    pub max_raw: String,
    pub inflight: String,
    pub inflight_raw: String,
    pub since: String,
    pub since_raw: String,
    /// SVG polyline points of the sparkline ("" when there is nothing to draw).
    pub spark_points: String,
}

fn raw(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// The badge class of a route state.
pub fn state_class(state: &str) -> &'static str {
    match state {
        "active" => "ok",
        "idle" => "muted",
        "down" => "err",
        _ => "warn",
    }
}

/// Polyline points in a 100 × 24 box, y inverted, from `(t, value)` pairs.
fn spark_polyline(points: &[(i64, f64)], from_ms: i64, to_ms: i64) -> String {
    if points.len() < 2 {
        return String::new();
    }
    let max = points.iter().map(|p| p.1).fold(0.0_f64, f64::max);
    let span = (to_ms - from_ms).max(1) as f64;
    points
        .iter()
        .map(|(t, v)| {
            let x = ((t - from_ms) as f64 / span * 100.0).clamp(0.0, 100.0);
            let y = if max > 0.0 {
                23.0 - v / max * 22.0
            } else {
                23.0
            };
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl RouteRowView {
    pub fn new(row: RouteRow, now_ms: i64, spark: &[(i64, f64)]) -> RouteRowView {
        RouteRowView {
            service_href: crate::views::services::service_url(&row.service),
            state_class: state_class(&row.state),
            tput: row
                .throughput_per_s
                .map_or(format::NONE.to_string(), |v| format::float(v, 1)),
            tput_raw: raw(row.throughput_per_s),
            error_pct: row
                .error_pct
                .map_or(format::NONE.to_string(), |v| format::float(v, 2)),
            error_raw: raw(row.error_pct),
            error_tone: super::error_tone(row.error_pct),
            mean: format::ms(row.mean_ms),
            mean_raw: raw(row.mean_ms),
            p95: format::ms(row.p95_ms),
            p95_raw: raw(row.p95_ms),
            max: format::ms(row.max_ms),
            max_raw: raw(row.max_ms),
            inflight: row.inflight.map_or(format::NONE.to_string(), |v| {
                format::float(v, if v.fract() == 0.0 { 0 } else { 1 })
            }),
            inflight_raw: raw(row.inflight),
            since: row.last_exchange_ms.map_or(format::NONE.to_string(), |t| {
                format!("{} ago", format::duration(Some((now_ms - t).max(0))))
            }),
            since_raw: row
                .last_exchange_ms
                .map(|t| t.to_string())
                .unwrap_or_default(),
            spark_points: spark_polyline(spark, now_ms - SPARK_MS, now_ms),
            row,
        }
    }
}

/// A target of the fleet panel.
pub struct TargetView {
    pub t: TargetRow,
    pub status: &'static str,
    pub status_class: &'static str,
    pub last_scrape: String,
    pub duration: String,
    pub samples: String,
}

impl From<TargetRow> for TargetView {
    /// The target as the page shows it: its URL's credentials masked (the URL is a
    /// [`crate::domain::secrets::Secret`]: it renders masked).
    fn from(t: TargetRow) -> Self {
        let (status, status_class) = match t.up {
            Some(true) => ("up", "ok"),
            Some(false) => ("down", "err"),
            None => ("pending", "muted"),
        };
        TargetView {
            status,
            status_class,
            last_scrape: format::time(t.last_scrape_ms),
            duration: format::ms(t.last_duration_ms),
            samples: t.samples.map_or(format::NONE.to_string(), format::int),
            t,
        }
    }
}

/// A service with its instances (fleet summary).
pub struct ServiceView {
    pub name: String,
    /// Its console page.
    pub href: String,
    pub instances: usize,
    pub routes: usize,
    pub down: usize,
}

/// The routes summary on the overview page.
pub struct RoutesSummary {
    pub targets: usize,
    pub targets_up: usize,
    pub targets_down: usize,
    pub routes: usize,
    pub active: usize,
    /// The busiest routes over the last minute, harrier's own left out.
    pub top: Vec<RouteRowView>,
    /// Routes with failed exchanges over the last minute, the highest error % first.
    pub failing: Vec<RouteRowView>,
    /// harrier's own routes (its self-scrape), not listed on the overview.
    pub own: usize,
    /// Scrape targets whose last scrape failed.
    pub down: Vec<TargetDown>,
}

/// A scrape target whose last scrape failed, as the overview lists it.
pub struct TargetDown {
    pub name: String,
    /// Its service's console page.
    pub href: String,
    /// The scrape error ("connection refused", "HTTP 500"…), shortened.
    pub error: String,
    /// When it was last scraped (UTC; the page shows it in local time).
    pub at: String,
    pub at_ms: Option<i64>,
}

/// Routes listed in each overview table.
const SUMMARY_ROWS: usize = 5;

/// Routes summary for the overview page.
pub async fn summary(state: &AppState) -> Result<RoutesSummary, PageError> {
    let now = crate::now_ms();
    let targets = state.store.list_targets().await?;
    let own_targets: Vec<i64> = targets
        .iter()
        .filter(|t| t.is_builtin())
        .map(|t| t.id)
        .collect();
    let rows = crate::views::routes::route_rows(&state.store, None, MINUTE_MS, now).await?;
    let own = rows
        .iter()
        .filter(|r| own_targets.contains(&r.target_id))
        .count();
    let theirs = || rows.iter().filter(|r| !own_targets.contains(&r.target_id));
    let active = rows
        .iter()
        .filter(|r| r.throughput_per_s.is_some_and(|t| t > 0.0))
        .count();
    let mut busy: Vec<&RouteRow> = theirs()
        .filter(|r| r.throughput_per_s.is_some_and(|t| t > 0.0))
        .collect();
    busy.sort_by(|a, b| {
        b.throughput_per_s
            .unwrap_or(0.0)
            .total_cmp(&a.throughput_per_s.unwrap_or(0.0))
    });
    let mut failing: Vec<&RouteRow> = theirs()
        .filter(|r| r.error_pct.is_some_and(|p| p > 0.0))
        .collect();
    failing.sort_by(|a, b| {
        b.error_pct
            .unwrap_or(0.0)
            .total_cmp(&a.error_pct.unwrap_or(0.0))
    });
    Ok(RoutesSummary {
        targets: targets.len(),
        targets_up: targets.iter().filter(|t| t.up == Some(true)).count(),
        targets_down: targets.iter().filter(|t| t.up == Some(false)).count(),
        routes: rows.len(),
        active,
        top: busy
            .into_iter()
            .take(SUMMARY_ROWS)
            .map(|r| RouteRowView::new(r.clone(), now, &[]))
            .collect(),
        failing: failing
            .into_iter()
            .take(SUMMARY_ROWS)
            .map(|r| RouteRowView::new(r.clone(), now, &[]))
            .collect(),
        own,
        down: targets
            .iter()
            .filter(|t| t.up == Some(false))
            .map(|t| TargetDown {
                name: t.name.clone(),
                href: crate::views::services::service_url(&t.service),
                error: t
                    .last_error
                    .as_deref()
                    .map(|e| e.chars().take(120).collect())
                    .unwrap_or_default(),
                at: crate::domain::format::time(t.last_scrape_ms),
                at_ms: t.last_scrape_ms,
            })
            .collect(),
    })
}

/// A column of the routes table: its sort key and how a click on it sorts.
pub struct SortColumn {
    pub label: &'static str,
    pub unit: &'static str,
    pub key: &'static str,
    pub numeric: bool,
    pub title: &'static str,
    /// `ascending`, `descending` or `none` (aria-sort).
    pub aria: &'static str,
    /// The link that sorts by this column (the other direction when it is the current one).
    pub href: String,
}

const COLUMNS: [(&str, &str, &str, bool, &str); 10] = [
    ("Service", "", "service", false, "Service, then instance"),
    ("Route", "", "route", false, ""),
    (
        "State",
        "",
        "state",
        false,
        "active: exchanges in the window; idle: none; stale: missing from the target's latest scrape; down: target not answering",
    ),
    (
        "Throughput",
        "/s",
        "throughput_per_s",
        true,
        "Δexchanges / Δt over the window; counter resets handled",
    ),
    (
        "Error",
        "%",
        "error_pct",
        true,
        "Δfailed / Δtotal × 100 (HTTP: 5xx responses)",
    ),
    ("Mean", "", "mean_ms", true, "Δsum / Δcount"),
    (
        "p95",
        "",
        "p95_ms",
        true,
        "From histogram buckets (Prometheus histogram_quantile); – without buckets",
    ),
    ("Max", "", "max_ms", true, "The exporter's own max"),
    (
        "Inflight",
        "",
        "inflight",
        true,
        "Exchanges in flight at the last scrape",
    ),
    (
        "Last exchange",
        "",
        "last_exchange_ms",
        true,
        "Time since the exchange counter last rose",
    ),
];

/// States offered by the state filter.
pub const STATES: [&str; 5] = ["active", "idle", "stale", "down", "gone"];

/// `/console/routes?…` with the list's filters, sort and `offset`.
fn list_href(list: &RouteList, q: &str, sort: &str, desc: bool, offset: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut add = |k: &str, v: &str| {
        if !v.is_empty() {
            parts.push(format!("{k}={}", urlencoding(v)));
        }
    };
    add("q", q);
    if let Some(w) = WINDOWS
        .iter()
        .find(|w| w.3 == list.window_ms && w.0 != "1m")
    {
        add("window", w.0);
    }
    add("service", list.service.as_deref().unwrap_or(""));
    add("state", list.state.as_deref().unwrap_or(""));
    add("context", list.context.as_deref().unwrap_or(""));
    add("group", list.group.as_deref().unwrap_or(""));
    if !list.hide_own {
        add("own", "show");
    }
    if sort != "service" || desc {
        add("sort", sort);
        add("dir", if desc { "desc" } else { "asc" });
    }
    if offset > 0 {
        add("offset", &offset.to_string());
    }
    if list.limit != Some(crate::views::routes::DEFAULT_LIMIT) {
        add("limit", &list.limit.unwrap_or_default().to_string());
    }
    if parts.is_empty() {
        "/console/routes".into()
    } else {
        format!("/console/routes?{}", parts.join("&"))
    }
}

/// Percent-encodes a query value.
fn urlencoding(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The pager of the routes table.
pub struct Pager {
    /// "1–100 of 5,000 routes" (or "No route matches").
    pub summary: String,
    pub prev: Option<String>,
    pub next: Option<String>,
    pub first: Option<String>,
    pub last: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "routes.html")]
struct RoutesPage {
    nav: &'static str,
    targets: Vec<TargetView>,
    services: Vec<ServiceView>,
    rows: Vec<RouteRowView>,
    down: usize,
    columns: Vec<SortColumn>,
    pager: Pager,
    q: String,
    service: String,
    state: String,
    service_names: Vec<String>,
    /// Route groups (Camel's `routeGroup`) and Camel contexts to filter by, and the chosen.
    group_names: Vec<String>,
    group: String,
    context_names: Vec<String>,
    context: String,
    states: Vec<&'static str>,
    sort: &'static str,
    dir: &'static str,
    limit: usize,
    total: usize,
    all: usize,
    all_text: String,
    /// The window of the figures, one of [`WINDOWS`] (its key).
    window: &'static str,
    /// The window in words ("the last minute").
    window_words: &'static str,
    windows: &'static [(&'static str, &'static str, &'static str, i64)],
    /// harrier's own routes left out of the table.
    own_hidden: usize,
    /// `?own=show`: they are listed.
    own_shown: bool,
    /// This page with harrier's own routes shown or hidden the other way, the rest kept.
    own_toggle: String,
}

/// The windows the routes page offers: key, label, words, length in ms. A short window
/// follows a ramp closely (10 s shows the latest scrape interval when scrapes are further
/// apart); a long one smooths it.
pub const WINDOWS: [(&str, &str, &str, i64); 4] = [
    ("10s", "10 s", "the last 10 s", 10_000),
    ("1m", "1 min", "the last minute", MINUTE_MS),
    ("5m", "5 min", "the last 5 min", 5 * MINUTE_MS),
    ("15m", "15 min", "the last 15 min", 15 * MINUTE_MS),
];

/// The [`WINDOWS`] entry of a `?window=` value (`1m` when absent); 400 for another value.
fn window_choice(
    q: &RouteListQuery,
) -> Result<&'static (&'static str, &'static str, &'static str, i64), PageError> {
    let asked = q.window.as_deref().map(str::trim).filter(|w| !w.is_empty());
    match asked {
        None => Ok(&WINDOWS[1]),
        Some(w) => WINDOWS.iter().find(|c| c.0 == w).ok_or_else(|| {
            crate::error::Error::BadRequest(format!(
                "window must be one of 10s, 1m, 5m, 15m; got {w:?}"
            ))
            .into()
        }),
    }
}

async fn routes_page(
    State(state): State<AppState>,
    axum::extract::Query(query): axum::extract::Query<RouteListQuery>,
) -> Result<RoutesPage, PageError> {
    let now = crate::now_ms();
    let window = window_choice(&query)?;
    let mut list = RouteList::parse(&query, true)?;
    list.window_ms = window.3;
    // harrier's own routes are hidden unless asked for (`?own=show`)
    list.hide_own = query.own.as_deref() != Some("show");
    let limit = list.limit.unwrap_or(crate::views::routes::DEFAULT_LIMIT);
    let targets = state.store.list_targets().await?;
    let infos = state.store.route_infos(None, None).await?;
    let mut services: BTreeMap<String, (std::collections::BTreeSet<String>, usize, usize)> =
        BTreeMap::new();
    let context_names: Vec<String> = infos
        .iter()
        .filter_map(|i| i.labels().get("camel_context").cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let group_names: Vec<String> = state
        .store
        .route_groups()
        .await?
        .into_iter()
        .map(|(_, g)| g)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for i in &infos {
        let e = services.entry(i.service.clone()).or_default();
        e.0.insert(i.instance());
        e.1 += 1;
        if i.target_up == Some(false) {
            e.2 += 1;
        }
    }
    drop(infos);
    // The service filter offers services with routes; the fleet list also links services
    // that have none of their own yet (a target exposing only pools or process figures).
    let service_names: Vec<String> = services.keys().cloned().collect();
    for t in &targets {
        services.entry(t.service.clone()).or_insert_with(|| {
            (
                [t.instance.clone()].into_iter().collect(),
                0,
                usize::from(t.up == Some(false)),
            )
        });
    }
    let page = crate::views::routes::list_page(&state.store, &list, now).await?;
    let ids: Vec<i64> = page.routes.iter().map(|r| r.id).collect();
    let sparks = crate::views::routes::sparklines(&state.store, &ids, now).await?;
    let q = query.q.clone().unwrap_or_default();
    let columns = COLUMNS
        .iter()
        .map(|(label, unit, key, numeric, title)| {
            let current = list.sort == *key;
            let desc = if current { !list.desc } else { *numeric };
            SortColumn {
                label,
                unit,
                key,
                numeric: *numeric,
                title,
                aria: match (current, list.desc) {
                    (false, _) => "none",
                    (true, false) => "ascending",
                    (true, true) => "descending",
                },
                href: list_href(&list, &q, key, desc, 0),
            }
        })
        .collect();
    let own_toggle = {
        list.hide_own = !list.hide_own;
        let href = list_href(&list, &q, list.sort, list.desc, 0);
        list.hide_own = !list.hide_own;
        href
    };
    let total = page.total;
    let end = (list.offset + page.routes.len()).min(total);
    let here = |o: usize| list_href(&list, &q, list.sort, list.desc, o);
    let last_offset = if total == 0 {
        0
    } else {
        (total - 1) / limit * limit
    };
    let pager = Pager {
        summary: if total == 0 {
            "No route matches".to_string()
        } else if page.routes.is_empty() {
            format!("Past the last of {} routes", format::int(total as i64))
        } else {
            format!(
                "{}–{} of {} route{}",
                format::int(list.offset as i64 + 1),
                format::int(end as i64),
                format::int(total as i64),
                if total == 1 { "" } else { "s" }
            )
        },
        prev: (list.offset > 0).then(|| here(list.offset.saturating_sub(limit))),
        next: (end < total).then(|| here(list.offset + limit)),
        first: (list.offset > 0).then(|| here(0)),
        last: (end < total && last_offset > list.offset).then(|| here(last_offset)),
    };
    Ok(RoutesPage {
        nav: "routes",
        down: targets.iter().filter(|t| t.up == Some(false)).count(),
        targets: targets.into_iter().map(TargetView::from).collect(),
        service_names,
        group_names,
        group: list.group.clone().unwrap_or_default(),
        context_names,
        context: list.context.clone().unwrap_or_default(),
        services: services
            .into_iter()
            .map(|(name, (instances, routes, down))| ServiceView {
                href: crate::views::services::service_url(&name),
                name,
                instances: instances.len(),
                routes,
                down,
            })
            .collect(),
        rows: page
            .routes
            .into_iter()
            .map(|r| {
                let spark = sparks.get(&r.id).cloned().unwrap_or_default();
                RouteRowView::new(r, now, &spark)
            })
            .collect(),
        columns,
        pager,
        q,
        service: list.service.clone().unwrap_or_default(),
        state: list.state.clone().unwrap_or_default(),
        states: STATES.to_vec(),
        sort: list.sort,
        dir: if list.desc { "desc" } else { "asc" },
        limit,
        total,
        all: page.all,
        // the header counts the routes listed when no filter is set (harrier's own aside
        // while hidden), as the pager does
        all_text: format::int(page.all.saturating_sub(page.own_hidden) as i64),
        window: window.0,
        window_words: window.2,
        windows: &WINDOWS,
        own_hidden: page.own_hidden,
        own_shown: !list.hide_own,
        own_toggle,
    })
}

/// A KPI of the route page.
pub struct RouteKpi {
    pub label: &'static str,
    pub key: &'static str,
    pub value: String,
    pub title: &'static str,
}

/// A button of the range picker.
pub struct RangeOpt {
    pub key: &'static str,
    pub label: &'static str,
    pub pressed: bool,
}

pub const RANGES: [(&str, &str); 6] = [
    ("15m", "15 min"),
    ("1h", "1 h"),
    ("6h", "6 h"),
    ("24h", "24 h"),
    ("7d", "7 days"),
    ("30d", "30 days"),
];

#[derive(Template, WebTemplate)]
#[template(path = "route.html")]
struct RoutePage {
    nav: &'static str,
    ranges: Vec<RangeOpt>,
    view: RouteRowView,
    kpis: Vec<RouteKpi>,
    target: Option<TargetRow>,
    /// The pools of the route's process (its target and instance), charted on the route's
    /// range under its charts.
    pools: Vec<crate::views::services::PoolRow>,
    /// The service page's pools section.
    pools_link: String,
    /// `{route, series, series_url, range_ms, pools: {series_url, instance, series}}` for
    /// `static/routes.js`.
    data_json: String,
    /// Route operations are shown: the route is read through Jolokia and the viewer may
    /// operate.
    operations: bool,
    /// The route's steps are shown (a route read through Jolokia).
    steps: bool,
    /// Its group (Camel's `routeGroup`) and the routes page filtered by it.
    group: Option<(String, String)>,
}

async fn route_page(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<RoutePage, PageError> {
    let id: i64 = id
        .parse()
        .map_err(|_| Error::BadRequest(format!("route id must be a number, got {id:?}")))?;
    let row = crate::views::routes::one_route(&state.store, id, MINUTE_MS).await?;
    let now = crate::now_ms();
    let series = crate::views::routes::series_for(
        &state.store,
        &state.config.retention,
        id,
        now - HOUR_MS,
        now,
        None,
    )
    .await?;
    let target = state.store.get_target(row.target_id).await?;
    // The pools of the process the route runs in: its instance's when it has any, else
    // those of the target's first instance with pools.
    let all =
        crate::views::services::pool_rows(&state.store.process_latest(&[row.target_id]).await?);
    let instance = if all.iter().any(|p| p.instance == row.instance) {
        Some(row.instance.clone())
    } else {
        all.first().map(|p| p.instance.clone())
    };
    let pools: Vec<_> = all
        .into_iter()
        .filter(|p| Some(&p.instance) == instance.as_ref())
        .collect();
    let pool_series = match (&instance, &target) {
        (Some(i), Some(t)) => {
            crate::views::services::process_timeseries(
                &state.store,
                &state.config.retention,
                std::slice::from_ref(t),
                Some(i),
                now - HOUR_MS,
                now,
            )
            .await?
        }
        _ => serde_json::json!({"series": []}),
    };
    let pools_link = format!(
        "{}#pools",
        crate::views::services::service_url(&row.service)
    );
    let data = serde_json::json!({
        "route": &row,
        "series": series,
        "series_url": format!("/api/v1/routes/{id}/timeseries"),
        "steps_url": format!("/api/v1/routes/{id}/steps"),
        "steps_series_url": format!("/api/v1/routes/{id}/steps/timeseries"),
        "range_ms": HOUR_MS,
        "pools": {
            "series_url": format!(
                "/api/v1/services/{}/timeseries",
                crate::views::services::service_url(&row.service).trim_start_matches("/console/services/")
            ),
            "instance": instance,
            "series": pool_series,
        },
    });
    let kpis = vec![
        RouteKpi {
            label: "Throughput",
            key: "throughput_per_s",
            value: format::rps(row.throughput_per_s),
            title: "Δexchanges / Δt over the last minute (counter resets handled)",
        },
        RouteKpi {
            label: "Error rate",
            key: "error_pct",
            value: format::pct(row.error_pct),
            title: "Δfailed / Δtotal × 100 over the last minute (HTTP: 5xx)",
        },
        RouteKpi {
            label: "Mean",
            key: "mean_ms",
            value: format::ms(row.mean_ms),
            title: "Δsum / Δcount over the last minute",
        },
        RouteKpi {
            label: "p95",
            key: "p95_ms",
            value: format::ms(row.p95_ms),
            title: "From histogram buckets, Prometheus histogram_quantile rule",
        },
        RouteKpi {
            label: "Max",
            key: "max_ms",
            value: format::ms(row.max_ms),
            title: "The exporter's own max (Micrometer: recent window; Jolokia: since reset)",
        },
        RouteKpi {
            label: "Inflight",
            key: "inflight",
            value: row
                .inflight
                .map_or(format::NONE.to_string(), |v| format::float(v, 0)),
            title: "Exchanges being processed at the last scrape",
        },
    ];
    Ok(RoutePage {
        nav: "routes",
        ranges: RANGES
            .iter()
            .map(|(key, label)| RangeOpt {
                key,
                label,
                pressed: *key == "1h",
            })
            .collect(),
        steps: row.source == "jolokia",
        group: state
            .store
            .route_groups()
            .await?
            .into_iter()
            .find(|(rid, _)| *rid == id)
            .map(|(_, g)| {
                let link = format!("/console/routes?group={}", urlencoding(&g));
                (g, link)
            }),
        operations: crate::services::route_ops::offered(&row.source)
            && target.as_ref().is_some_and(|t| t.kind == "jolokia")
            && crate::http::auth::may(crate::domain::auth::Permission::Operate),
        view: RouteRowView::new(row, now, &[]),
        kpis,
        // Shown, never used: its URL renders with the credentials masked.
        target,
        pools,
        pools_link,
        // `<` escaped so the island can never close its <script> element early.
        data_json: data.to_string().replace('<', "\\u003c"),
    })
}
