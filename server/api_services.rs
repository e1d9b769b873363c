//! Services: the routes of one service name with its instances and the process figures
//! scraped beside them.
//!
//! - `GET /api/v1/services` → `[{"name", "url", "instances", "instances_up", "routes",
//!   "routes_active"}]` by name (`url`: its console page);
//! - `GET /api/v1/services/{name}` → `{"name", "instances": [InstanceRow…], "routes":
//!   [RouteRow…] (1 min window), "process": [{"instance", "metric", "unit", "value",
//!   "at_ms"}…]}` (the latest reading of each process figure; empty when the service
//!   exposes none); 404 for a name no route or target has;
//! - `GET /api/v1/services/{name}/timeseries?from=&to=&instance=` (unix ms; default the last
//!   hour; `instance` optional) → `{"from_ms", "to_ms", "resolution": "raw"|"1m"|"10m"|"1h",
//!   "series": [{"instance", "metric", "unit", "t_ms": […], "mean": […], "max": […]}]}`:
//!   the stored series that gives at least 300 points, like route charts.
//!
//! A service is a route's `service` (Camel context, `application`/`job` label, or the
//! target's service name); its targets are those its routes come from plus those whose
//! service name it is. Process figures belong to a target and instance (one process), so a
//! target exposing several Camel contexts shows the same process on each. Metric names and
//! units: [`crate::routes::process`]. Errors are `{"error": "…"}`.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::api_routes::{RouteList, RouteListQuery, list_page};
use crate::app::AppState;
use crate::error::{Error, Result};
use crate::routes::RouteRow;
use crate::routes::series;
use crate::store::{HOUR_MS, ProcessPoint, TargetRow};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/services", get(list_services))
        .route("/api/v1/services/{name}", get(get_service))
        .route(
            "/api/v1/services/{name}/timeseries",
            get(service_timeseries),
        )
}

/// The unit of a stored process metric, as shown next to its figures.
pub fn unit(metric: &str) -> &'static str {
    match metric {
        m if m.ends_with("_pct") => "%",
        m if m.ends_with("_bytes") || m.starts_with("pool:") => "bytes",
        "threads" => "threads",
        "gc_ms_per_s" => "ms/s",
        "gc_pauses_per_s" => "/s",
        "open_fds" | "max_fds" => "files",
        "uptime_s" => "s",
        _ => "",
    }
}

/// A service in the list.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceItem {
    pub name: String,
    pub url: String,
    pub instances: usize,
    pub instances_up: usize,
    pub routes: usize,
    pub routes_active: usize,
}

/// One instance of a service.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceRow {
    pub instance: String,
    pub target_id: i64,
    pub target: String,
    pub target_url: String,
    /// `up`; `down` (target not answering); `stale` (missing from the target's latest
    /// good scrape) or `gone` (missing for 5 scrapes or more: e.g. the old instance of a
    /// restarted service); `pending` (not scraped yet).
    pub state: String,
    pub last_scrape_ms: Option<i64>,
    /// The last scrape that had its routes or process figures, unix ms.
    pub last_seen_ms: Option<i64>,
    pub last_error: Option<String>,
    pub routes: usize,
}

/// The `console/services/{name}` link.
pub fn service_url(name: &str) -> String {
    let mut out = String::from("/console/services/");
    for b in name.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Everything about one service; `None` when no route or target has that name.
pub struct ServiceDetail {
    pub name: String,
    pub instances: Vec<InstanceRow>,
    pub routes: Vec<RouteRow>,
    pub process: Vec<ProcessPoint>,
    pub targets: Vec<TargetRow>,
}

fn instance_state(t: &TargetRow, last_seen: Option<i64>) -> &'static str {
    match (t.up, t.last_scrape_ms, last_seen) {
        (None, _, _) => "pending",
        (Some(false), _, _) => "down",
        (Some(true), Some(scrape), Some(seen)) if seen < scrape => {
            let interval = (t.interval_s * 1000.0) as i64;
            if scrape - seen >= crate::routes::GONE_AFTER_SCRAPES * interval {
                "gone"
            } else {
                "stale"
            }
        }
        _ => "up",
    }
}

/// Reads service `name`.
pub async fn service_detail(state: &AppState, name: &str) -> Result<Option<ServiceDetail>> {
    let now = crate::now_ms();
    let q = RouteListQuery {
        service: Some(name.to_string()),
        ..RouteListQuery::default()
    };
    let routes = list_page(&state.store, &RouteList::parse(&q, false)?, now)
        .await?
        .routes;
    let all_targets = state.store.list_targets().await?;
    let route_targets: BTreeSet<i64> = routes.iter().map(|r| r.target_id).collect();
    let targets: Vec<TargetRow> = all_targets
        .into_iter()
        .filter(|t| route_targets.contains(&t.id) || t.service == name)
        .collect();
    if targets.is_empty() && routes.is_empty() {
        return Ok(None);
    }
    let ids: Vec<i64> = targets.iter().map(|t| t.id).collect();
    let process = state.store.process_latest(&ids).await?;
    // instances: (target, instance) of the routes, the process figures, the targets
    let mut seen: BTreeMap<(i64, String), (Option<i64>, usize)> = BTreeMap::new();
    for r in &routes {
        let e = seen.entry((r.target_id, r.instance.clone())).or_default();
        e.0 = Some(e.0.map_or(r.last_seen_ms, |s| s.max(r.last_seen_ms)));
        e.1 += 1;
    }
    for p in &process {
        let e = seen.entry((p.target_id, p.instance.clone())).or_default();
        e.0 = Some(e.0.map_or(p.at_ms, |s| s.max(p.at_ms)));
    }
    for t in &targets {
        if !seen.keys().any(|(id, _)| *id == t.id) {
            seen.insert(
                (t.id, t.instance.clone()),
                (t.last_scrape_ms.filter(|_| t.up == Some(true)), 0),
            );
        }
    }
    let instances = seen
        .into_iter()
        .filter_map(|((tid, instance), (last_seen, n))| {
            let t = targets.iter().find(|t| t.id == tid)?;
            Some(InstanceRow {
                state: instance_state(t, last_seen).to_string(),
                instance,
                target_id: tid,
                target: t.name.clone(),
                target_url: t.url.clone(),
                last_scrape_ms: t.last_scrape_ms,
                last_seen_ms: last_seen,
                last_error: t.last_error.clone(),
                routes: n,
            })
        })
        .collect();
    Ok(Some(ServiceDetail {
        name: name.to_string(),
        instances,
        routes,
        process,
        targets,
    }))
}

/// Per service: its (target, instance) pairs, those live, its routes, those active.
type ServiceTally = (
    BTreeSet<(i64, String)>,
    BTreeSet<(i64, String)>,
    usize,
    usize,
);

async fn list_services(State(state): State<AppState>) -> Result<Json<Vec<ServiceItem>>> {
    let now = crate::now_ms();
    let rows = list_page(
        &state.store,
        &RouteList::parse(&RouteListQuery::default(), false)?,
        now,
    )
    .await?
    .routes;
    let targets = state.store.list_targets().await?;
    let mut by: BTreeMap<String, ServiceTally> = BTreeMap::new();
    for r in &rows {
        let e = by.entry(r.service.clone()).or_default();
        e.0.insert((r.target_id, r.instance.clone()));
        if !matches!(r.state.as_str(), "down" | "stale" | "gone") {
            e.1.insert((r.target_id, r.instance.clone()));
        }
        e.2 += 1;
        if r.state == "active" {
            e.3 += 1;
        }
    }
    for t in &targets {
        if !by.contains_key(&t.service) {
            let e = by.entry(t.service.clone()).or_default();
            e.0.insert((t.id, t.instance.clone()));
            if t.up == Some(true) {
                e.1.insert((t.id, t.instance.clone()));
            }
        }
    }
    Ok(Json(
        by.into_iter()
            .map(|(name, (all, up, routes, active))| ServiceItem {
                url: service_url(&name),
                name,
                instances: all.len(),
                instances_up: up.len(),
                routes,
                routes_active: active,
            })
            .collect(),
    ))
}

async fn get_service(State(state): State<AppState>, Path(name): Path<String>) -> Result<Response> {
    let d = service_detail(&state, &name)
        .await?
        .ok_or_else(|| Error::NotFound(format!("service {name:?}")))?;
    let process: Vec<serde_json::Value> = d
        .process
        .iter()
        .map(|p| {
            serde_json::json!({
                "instance": p.instance, "metric": p.metric, "unit": unit(&p.metric),
                "value": p.mean, "at_ms": p.at_ms,
            })
        })
        .collect();
    Ok(Json(serde_json::json!({
        "name": d.name,
        "instances": d.instances,
        "routes": d.routes,
        "process": process,
    }))
    .into_response())
}

#[derive(Deserialize)]
struct SeriesQuery {
    from: Option<String>,
    to: Option<String>,
    instance: Option<String>,
}

/// One process metric of one instance over time.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessSeries {
    pub instance: String,
    pub metric: String,
    pub unit: &'static str,
    pub t_ms: Vec<i64>,
    pub mean: Vec<f64>,
    pub max: Vec<f64>,
}

/// Process series of `targets` over `from_ms…to_ms` (see the module docs).
pub async fn process_timeseries(
    state: &AppState,
    targets: &[TargetRow],
    instance: Option<&str>,
    from_ms: i64,
    to_ms: i64,
) -> Result<serde_json::Value> {
    let now = crate::now_ms();
    let r = &state.config.retention;
    let keep = [r.raw_ms(), r.minute_ms(), r.ten_minute_ms(), r.hour_ms()];
    let spacing = targets
        .iter()
        .map(|t| (t.interval_s * 1000.0) as i64)
        .min()
        .unwrap_or(10_000)
        .max(1000);
    let levels: Vec<series::Level> = series::RESOLUTIONS_MS
        .iter()
        .zip(keep)
        .map(|(res, keep)| series::Level {
            resolution_ms: *res,
            spacing_ms: if *res == 0 { spacing } else { *res },
            covers_from_ms: now - keep,
        })
        .collect();
    let resolution = series::resolution_for(from_ms, to_ms, &levels);
    let ids: Vec<i64> = targets.iter().map(|t| t.id).collect();
    let points = state
        .store
        .process_series(&ids, resolution, from_ms, to_ms)
        .await?;
    let mut out: Vec<ProcessSeries> = Vec::new();
    for p in points {
        if instance.is_some_and(|i| i != p.instance) {
            continue;
        }
        match out.last_mut() {
            Some(s) if s.instance == p.instance && s.metric == p.metric => {
                s.t_ms.push(p.at_ms);
                s.mean.push(p.mean);
                s.max.push(p.max);
            }
            _ => out.push(ProcessSeries {
                unit: unit(&p.metric),
                instance: p.instance,
                metric: p.metric,
                t_ms: vec![p.at_ms],
                mean: vec![p.mean],
                max: vec![p.max],
            }),
        }
    }
    Ok(serde_json::json!({
        "from_ms": from_ms,
        "to_ms": to_ms,
        "resolution": series::resolution_name(resolution),
        "series": out,
    }))
}

async fn service_timeseries(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<SeriesQuery>,
) -> Result<Response> {
    let now = crate::now_ms();
    let ms = |raw: Option<&str>, default: i64, what: &str| -> Result<i64> {
        match raw.map(str::trim).filter(|s| !s.is_empty()) {
            None => Ok(default),
            Some(s) => s
                .parse()
                .map_err(|_| Error::BadRequest(format!("{what} must be unix epoch ms, got {s:?}"))),
        }
    };
    let to = ms(q.to.as_deref(), now, "to")?;
    let from = ms(q.from.as_deref(), to - HOUR_MS, "from")?;
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
    let d = service_detail(&state, &name)
        .await?
        .ok_or_else(|| Error::NotFound(format!("service {name:?}")))?;
    let body = process_timeseries(
        &state,
        &d.targets,
        q.instance.as_deref().filter(|s| !s.is_empty()),
        from,
        to,
    )
    .await?;
    Ok(Json(body).into_response())
}
