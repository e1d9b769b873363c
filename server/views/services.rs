//! Services: the list (instances and routes per service, by name) and one service's
//! detail (instances, routes, process metrics, pools and their series), for
//! `/console/services…` and `/api/v1/services…`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::domain::pools::{self, PoolFigures, PoolKind};
use crate::domain::routes::RouteRow;
use crate::domain::routes::series;
use crate::error::Result;
use crate::store::{ProcessPoint, Retention, Store, TargetRow};
use crate::views::routes::{RouteList, RouteListQuery, list_page};

/// The unit of a stored process metric, as shown next to its figures.
pub fn unit(metric: &str) -> &'static str {
    if let Some(u) = pools::metric_unit(metric) {
        return u;
    }
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
    /// The pools among the process figures, by instance, kind and name.
    pub pools: Vec<PoolRow>,
    pub targets: Vec<TargetRow>,
}

/// One pool of one instance, from its latest figures (see [`crate::domain::pools`]).
#[derive(Debug, Clone, Serialize)]
pub struct PoolRow {
    pub instance: String,
    pub target_id: i64,
    /// `hikaricp`, `jdbc`, `httpclient`, `jetty`, `tomcat`, `executor` or `vertx`.
    pub kind: &'static str,
    /// "HTTP client pool", "Jetty thread pool", …
    pub kind_label: &'static str,
    /// The pool's own name (its `pool`, `name`, `httpclient` or `pool_name` label).
    pub name: String,
    /// The unit of `active`, `max` and `idle`: `connections` or `threads`.
    pub unit: &'static str,
    /// The unit of `pending`: `requests` (waiting for a connection) or `tasks` (queued).
    pub pending_unit: &'static str,
    pub active: Option<f64>,
    /// `None`: not exposed, or unbounded.
    pub max: Option<f64>,
    pub idle: Option<f64>,
    pub pending: Option<f64>,
    /// HikariCP connection timeouts per second since the previous scrape.
    pub timeouts_per_s: Option<f64>,
    /// active / max × 100.
    pub usage_pct: Option<f64>,
    /// `ok`, `at_max` (active ≥ max, nothing waiting) or `full` (active ≥ max and
    /// pending > 0).
    pub state: &'static str,
    /// e.g. "HTTP client pool full: 20 of 20 connections in use, 5 waiting".
    pub sentence: String,
    /// The latest scrape that had one of its figures, unix ms.
    pub at_ms: i64,
}

/// The pools among process figures `points`, by instance, kind and pool name.
pub fn pool_rows(points: &[ProcessPoint]) -> Vec<PoolRow> {
    type Key<'a> = (&'a str, i64, PoolKind, &'a str);
    let mut by: BTreeMap<Key<'_>, (PoolFigures, i64)> = BTreeMap::new();
    for p in points {
        if let Some((field, kind, name)) = pools::parse_metric(&p.metric) {
            let e = by
                .entry((p.instance.as_str(), p.target_id, kind, name))
                .or_default();
            e.0.set(field, p.mean);
            e.1 = e.1.max(p.at_ms);
        }
    }
    by.into_iter()
        .map(|((instance, target_id, kind, name), (f, at_ms))| PoolRow {
            instance: instance.to_string(),
            target_id,
            kind: kind.as_str(),
            kind_label: kind.label(),
            name: name.to_string(),
            unit: kind.unit(),
            pending_unit: kind.pending_unit(),
            usage_pct: f.usage_pct(),
            state: f.state().as_str(),
            sentence: pools::sentence(kind, &f),
            active: f.active,
            max: f.max,
            idle: f.idle,
            pending: f.pending,
            timeouts_per_s: f.timeouts_per_s,
            at_ms,
        })
        .collect()
}

fn instance_state(t: &TargetRow, last_seen: Option<i64>) -> &'static str {
    match (t.up, t.last_scrape_ms, last_seen) {
        (None, _, _) => "pending",
        (Some(false), _, _) => "down",
        (Some(true), Some(scrape), Some(seen)) if seen < scrape => {
            let interval = (t.interval_s * 1000.0) as i64;
            if scrape - seen >= crate::domain::routes::GONE_AFTER_SCRAPES * interval {
                "gone"
            } else {
                "stale"
            }
        }
        _ => "up",
    }
}

/// Reads service `name`.
pub async fn service_detail(store: &Store, name: &str) -> Result<Option<ServiceDetail>> {
    let now = crate::now_ms();
    let q = RouteListQuery {
        service: Some(name.to_string()),
        ..RouteListQuery::default()
    };
    let routes = list_page(store, &RouteList::parse(&q, false)?, now)
        .await?
        .routes;
    let all_targets = store.list_targets().await?;
    let route_targets: BTreeSet<i64> = routes.iter().map(|r| r.target_id).collect();
    let targets: Vec<TargetRow> = all_targets
        .into_iter()
        .filter(|t| route_targets.contains(&t.id) || t.service == name)
        .collect();
    if targets.is_empty() && routes.is_empty() {
        return Ok(None);
    }
    let ids: Vec<i64> = targets.iter().map(|t| t.id).collect();
    let process = store.process_latest(&ids).await?;
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
                target_url: t.url.masked(),
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
        pools: pool_rows(&process),
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

/// Every service, from its routes and targets, by name.
pub async fn service_list(store: &Store) -> Result<Vec<ServiceItem>> {
    let now = crate::now_ms();
    let rows = list_page(
        store,
        &RouteList::parse(&RouteListQuery::default(), false)?,
        now,
    )
    .await?
    .routes;
    let targets = store.list_targets().await?;
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
    Ok(by
        .into_iter()
        .map(|(name, (all, up, routes, active))| ServiceItem {
            url: service_url(&name),
            name,
            instances: all.len(),
            instances_up: up.len(),
            routes,
            routes_active: active,
        })
        .collect())
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
    store: &Store,
    retention: &Retention,
    targets: &[TargetRow],
    instance: Option<&str>,
    from_ms: i64,
    to_ms: i64,
) -> Result<serde_json::Value> {
    let now = crate::now_ms();
    let r = retention;
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
    let points = store
        .process_series(&ids, resolution, from_ms, to_ms, None)
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
