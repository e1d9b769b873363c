//! Services: the routes of one service name with its instances and the process figures
//! scraped beside them.
//!
//! - `GET /api/v1/services` → `[{"name", "url", "instances", "instances_up", "routes",
//!   "routes_active"}]` by name (`url`: its console page);
//! - `GET /api/v1/services/{name}` → `{"name", "instances": [InstanceRow…], "routes":
//!   [RouteRow…] (1 min window), "process": [{"instance", "metric", "unit", "value",
//!   "at_ms"}…], "pools": [PoolRow…]}` (the latest reading of each process figure; empty
//!   when the service exposes none; `pools`: its connection, HTTP client and thread pools,
//!   each `{"instance", "target_id", "kind", "kind_label", "name", "unit", "pending_unit",
//!   "active", "max", "idle", "pending", "timeouts_per_s", "usage_pct", "state":
//!   "ok"|"at_max"|"full", "sentence", "at_ms"}`, see [`crate::domain::pools`]); 404 for a
//!   name no route or target has;
//! - `GET /api/v1/services/{name}/timeseries?from=&to=&instance=` (unix ms; default the last
//!   hour; `instance` optional) → `{"from_ms", "to_ms", "resolution": "raw"|"1m"|"10m"|"1h",
//!   "series": [{"instance", "metric", "unit", "t_ms": […], "mean": […], "max": […]}]}`:
//!   the stored series that gives at least 300 points, like route charts.
//!
//! A service is a route's `service` (Camel context, `application`/`job` label, or the
//! target's service name); its targets are those its routes come from plus those whose
//! service name it is. Process figures belong to a target and instance (one process), so a
//! target exposing several Camel contexts shows the same process on each. Metric names and
//! units: [`crate::sources::scrape::process`]. Errors are `{"error": "…"}`.

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::state::AppState;
use crate::store::HOUR_MS;
use crate::views::services::{ServiceItem, process_timeseries, service_detail, service_list, unit};

pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/services", GET, Read, get(list_services))
        .route("/api/v1/services/{name}", GET, Read, get(get_service))
        .route(
            "/api/v1/services/{name}/timeseries",
            GET,
            Read,
            get(service_timeseries),
        )
}

async fn list_services(State(state): State<AppState>) -> Result<Json<Vec<ServiceItem>>> {
    Ok(Json(service_list(&state.store).await?))
}

async fn get_service(State(state): State<AppState>, Path(name): Path<String>) -> Result<Response> {
    let d = service_detail(&state.store, &name)
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
    let unmapped: Vec<_> = state
        .otlp
        .unmapped()
        .await
        .into_iter()
        .filter(|u| u.service == d.name)
        .collect();
    Ok(Json(serde_json::json!({
        "name": d.name,
        "instances": d.instances,
        "routes": d.routes,
        "process": process,
        "pools": d.pools,
        "unmapped": unmapped,
    }))
    .into_response())
}

#[derive(Deserialize)]
struct SeriesQuery {
    from: Option<String>,
    to: Option<String>,
    instance: Option<String>,
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
    let d = service_detail(&state.store, &name)
        .await?
        .ok_or_else(|| Error::NotFound(format!("service {name:?}")))?;
    let body = process_timeseries(
        &state.store,
        &state.config.retention,
        &d.targets,
        q.instance.as_deref().filter(|s| !s.is_empty()),
        from,
        to,
    )
    .await?;
    Ok(Json(body).into_response())
}
