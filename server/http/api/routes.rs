//! The routes and targets part of the JSON API.
//!
//! - `GET /api/v1/routes?window=1m` → `[RouteRow…]` (see [`RouteRow`]): RED figures per
//!   route over the window (`30s`, `1m`, `5m`, `15m`, `1h`, … up to `24h`; default `1m`).
//!   Optional, applied on the server (see [`RouteListQuery`]): `q` (words that must all
//!   appear in service, instance or route, any case), `service` (exact), `state` (exact:
//!   `active`, `idle`, `down`, `stale`, `gone`, …), `sort` (a row field: `service`, `route`,
//!   `instance`, `state`, `throughput_per_s`, `error_pct`, `mean_ms`, `p95_ms`, `max_ms`,
//!   `inflight`, `last_exchange_ms`; default service then route), `dir` (`asc` | `desc`;
//!   missing figures sort last either way), `own` (`show`, the default, or `hide`:
//!   harrier's own routes, those of its self-scrape target, left out unless `service` is
//!   given). With `offset` and/or `limit` (1–1000, default 100) the answer is one page:
//!   `{"total": matching, "all": every route, "own_hidden": own routes left out, "offset",
//!   "limit", "routes": [RouteRow…]}`; without them, every matching row as an array;
//! - `GET /api/v1/routes/sparklines?ids=1,2,…` (up to 1000 ids) → `{"from_ms", "to_ms",
//!   "step_ms", "routes": {"<id>": [[t_ms, exchanges_per_s], …]}}`: each route's throughput
//!   over the last 15 min in 1 min steps, the minute so far last (only steps with
//!   figures), for the sparklines of a page of the routes table in one request;
//! - `GET /api/v1/routes/{id}?window=` → one `RouteRow`;
//! - `GET /api/v1/routes/{id}/timeseries?from=&to=&step=` → [`RouteSeries`] plus `runs`
//!   (load-test runs overlapping the range that hit the route's service, or do not say what
//!   they hit: `{id, name, started_at_ms, ended_at_ms, url, hit}`, see
//!   [`crate::domain::routes::run_hits`]).
//!   `from`/`to` are unix ms (default: the last hour); `step` is ms or a duration (`30s`,
//!   `5m`; default: range / 1000, at least the stored resolution);
//! - `GET /api/v1/routes/{id}/steps?window=1m` → `{"route_id", "window_s", "to_ms",
//!   "steps": [StepRow…]}`: the route's steps (Camel processors read through Jolokia) in
//!   route order with `step, kind, label, parent, index, level, destination, exchanges,
//!   throughput_per_s, error_pct, mean_ms` (nested steps included), `self_ms` (without
//!   them), `self_share_pct`, `max_ms`, `inflight`, `slowest`, `failing`, `gone` (see
//!   [`crate::domain::routes::steps`]); `[]` for a route without steps;
//! - `GET /api/v1/routes/{id}/steps/timeseries?from=&to=&step=` → `{"t_ms": […], "steps":
//!   [{"id","step","label","level","throughput_per_s","error_pct","mean_ms","self_ms"}],
//!   "resolution", "step_ms", …}`: each step's figures over time, parallel to `t_ms`, from
//!   the same resolutions and retention as the route's series;
//! - `GET /api/v1/routes/{id}/steps/under-load?run=ID` → `{"unit", "levels": [{"load",
//!   "seconds", "exchanges"}], "steps": [{"step","label","level","self_ms": […],
//!   "mean_ms": […]}], "gives_way": {"step","label","load","unit","from_ms","to_ms",
//!   "others_flat","sentence"} | null, "note", "run_statement", …}`: each step's times at
//!   each load level of the run (its users, or a rate search's offered rates) and the step
//!   that gave way (see [`crate::domain::routes::steps`]);
//! - `POST /api/v1/routes/{id}/operations/{name}` (operator role or an `operate` token;
//!   `name` one of `start`, `stop`, `suspend`, `resume`, `reset`) → `{"route_id", "route",
//!   "camel_context", "operation", "state", "mbean"}`: the operation run on the route's
//!   `ManagedRoute` MBean through its Jolokia agent, and the state the agent gave after it.
//!   409 for a route not read through Jolokia, 502 with the agent's own message when it
//!   refuses or does not answer; every call is in the audit log with the route and the
//!   answer (see [`crate::services::route_ops`]);
//! - `GET /api/v1/targets` → `[TargetRow…]` (`id, name, url, kind, interval_s, up,
//!   last_error, last_scrape_ms, samples, …`);
//! - `POST /api/v1/targets` with `{"name","url","kind":"prometheus"|"jolokia","interval_s",
//!   "timeout_s","labels"}` → 201 `TargetRow`, and its scrape loop starts;
//! - `DELETE /api/v1/targets/{id}` → 204 (its routes and figures go too).
//!
//! Missing figures are `null`, never NaN or 0. Errors are `{"error": "…"}`.

use crate::domain::auth::Permission::*;
use crate::http::auth::AuditDetail;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};

use serde::Deserialize;

use crate::domain::format::parse_duration_ms;
use crate::domain::routes::RouteRow;
use crate::error::{Error, Result};
use crate::services::live::Event;
use crate::state::AppState;
use crate::store::{HOUR_MS, TargetSpec};
use crate::views::routes::{
    MAX_LIMIT, RouteList, RouteListQuery, SPARK_MS, SPARK_STEP_MS, WindowQuery, list_page,
    one_route, series_for, sparklines, window_ms,
};

pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/routes", GET, Read, get(list_routes))
        .route(
            "/api/v1/routes/sparklines",
            GET,
            Read,
            get(route_sparklines),
        )
        .route("/api/v1/routes/{id}", GET, Read, get(get_route))
        .route(
            "/api/v1/routes/{id}/timeseries",
            GET,
            Read,
            get(route_timeseries),
        )
        .route("/api/v1/routes/{id}/steps", GET, Read, get(route_steps))
        .route(
            "/api/v1/routes/{id}/steps/timeseries",
            GET,
            Read,
            get(route_steps_timeseries),
        )
        .route(
            "/api/v1/routes/{id}/steps/under-load",
            GET,
            Read,
            get(route_steps_under_load),
        )
        .route(
            "/api/v1/routes/{id}/operations/{name}",
            POST,
            Operate,
            post(route_operation),
        )
        .route("/api/v1/targets", GET, Read, get(list_targets))
        .route("/api/v1/targets", POST, Write, post(create_target))
        .route("/api/v1/targets/{id}", DELETE, Write, delete(delete_target))
}

fn id_of(raw: &str, what: &str) -> Result<i64> {
    raw.parse()
        .map_err(|_| Error::BadRequest(format!("{what} id must be a number, got {raw:?}")))
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

async fn get_route(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<WindowQuery>,
) -> Result<Json<RouteRow>> {
    let id = id_of(&id, "route")?;
    Ok(Json(one_route(&state.store, id, window_ms(&q)?).await?))
}

async fn route_operation(
    State(state): State<AppState>,
    Path((id, name)): Path<(String, String)>,
) -> Result<Response> {
    use crate::sources::scrape::jolokia::RouteOperation;
    let id = id_of(&id, "route")?;
    let op = RouteOperation::parse(&name).ok_or_else(|| {
        Error::BadRequest(format!(
            "operation {name:?}: expected one of {}",
            RouteOperation::NAMES.join(", ")
        ))
    })?;
    // Every call is audited with the route and what the agent answered, refusals too.
    let (mut response, detail) =
        match crate::services::route_ops::operate(&state.store, state.scraper.client(), id, op)
            .await
        {
            Ok(done) => (Json(&done).into_response(), done.audit_text()),
            Err(e) => {
                let detail = format!("{name} route {id}: {e}");
                (e.into_response(), detail)
            }
        };
    response.extensions_mut().insert(AuditDetail(detail));
    Ok(response)
}

#[derive(Deserialize)]
struct SeriesQuery {
    from: Option<String>,
    to: Option<String>,
    step: Option<String>,
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

/// A series query's range and step: `(from, to, step)`, checked.
fn series_range(q: &SeriesQuery) -> Result<(i64, i64, Option<i64>)> {
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
    Ok((from, to, step))
}

async fn route_timeseries(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<SeriesQuery>,
) -> Result<Response> {
    let id = id_of(&id, "route")?;
    let (from, to, step) = series_range(&q)?;
    Ok(
        Json(series_for(&state.store, &state.config.retention, id, from, to, step).await?)
            .into_response(),
    )
}

async fn route_steps(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<WindowQuery>,
) -> Result<Response> {
    let id = id_of(&id, "route")?;
    let view =
        crate::views::steps::step_rows(&state.store, id, window_ms(&q)?, crate::now_ms()).await?;
    Ok(Json(view).into_response())
}

#[derive(Deserialize)]
struct RunQuery {
    run: Option<String>,
}

async fn route_steps_under_load(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<RunQuery>,
) -> Result<Response> {
    let id = id_of(&id, "route")?;
    let run = q
        .run
        .as_deref()
        .ok_or_else(|| Error::BadRequest("run=ID names the load-test run".into()))?;
    let run = id_of(run, "run")?;
    Ok(Json(crate::views::steps::steps_under_run(&state.store, id, run).await?).into_response())
}

async fn route_steps_timeseries(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<SeriesQuery>,
) -> Result<Response> {
    let id = id_of(&id, "route")?;
    let (from, to, step) = series_range(&q)?;
    let series =
        crate::views::steps::step_series(&state.store, &state.config.retention, id, from, to, step)
            .await?;
    Ok(Json(series).into_response())
}

async fn list_targets(State(state): State<AppState>) -> Result<Response> {
    Ok(Json(state.store.list_targets().await?).into_response())
}

async fn create_target(
    State(state): State<AppState>,
    body: std::result::Result<Json<TargetSpec>, axum::extract::rejection::JsonRejection>,
) -> Result<Response> {
    let Json(spec) = body.map_err(|e| Error::BadRequest(format!("target: {}", e.body_text())))?;
    crate::services::scrape::validate(&spec).map_err(Error::BadRequest)?;
    // Refused outright when the egress policy refuses its URL as written (names are
    // decided again, on their addresses, at every scrape).
    if let Err(refusal) = state.egress.policy().check_url(spec.url.expose()) {
        return Err(Error::Field {
            field: "url".into(),
            message: format!("target {:?}: {refusal}", spec.name),
        });
    }
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
