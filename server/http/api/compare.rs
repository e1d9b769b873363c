//! The comparison API:
//!
//! - `GET /api/v1/compare?runs=A,B,…[&min_effect_pct=5]` → [`Comparison`] (2 to 10 runs,
//!   the first is the reference; `runs` may also repeat: `runs=A&runs=B`), with
//!   `capacity`: per run the knee of its saturation analysis (`capacity_rps`, `knee_users`,
//!   `noise_rps`, `peak_rps`, `peak_users`, `statement`) and its `change` against the
//!   reference (see [`compare::RunCapacity`]);
//! - `GET /api/v1/scenarios` → `{"scenarios": [ScenarioItem…]}`;
//! - `GET /api/v1/scenarios/{name}` → [`Trend`];
//! - `GET /api/v1/scenarios/{name}/baseline` → `{"scenario", "run_id", "source"}`
//!   (`source`: `pinned`, `passed` or `previous`; `run_id` null when there is none);
//! - `PUT /api/v1/scenarios/{name}/baseline` `{"run_id": N}` pins a run of that scenario;
//!   `DELETE` unpins (204);
//! - `POST /api/v1/runs/{id}/check` `{"gates": ["p95<500ms", "capacity_rps -10%", …],
//!   "baseline": "auto" | N |
//!   null, "min_effect_pct": 5, "record": true}` → [`CheckReport`] (stored unless `record`
//!   is false).

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};

use serde::Deserialize;

use crate::domain::compare::{self, Options, gates};
use crate::error::{Error, Result};
use crate::http::params::run_id;
use crate::services::comparisons::{
    BaselineSource, CheckRequest, CompareQuery, auto_baseline, check, comparison, trend,
};
use crate::state::AppState;

/// Routes of the comparison API.
pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/compare", GET, Read, get(compare_handler))
        .route("/api/v1/scenarios", GET, Read, get(scenarios_handler))
        .route("/api/v1/scenarios/{name}", GET, Read, get(trend_handler))
        .route(
            "/api/v1/scenarios/{name}/baseline",
            GET,
            Read,
            get(get_baseline),
        )
        .route(
            "/api/v1/scenarios/{name}/baseline",
            PUT,
            Write,
            put(put_baseline),
        )
        .route(
            "/api/v1/scenarios/{name}/baseline",
            DELETE,
            Write,
            delete(delete_baseline),
        )
        // A gate check is recorded (and moves the automatic baseline): what CI sends.
        .route("/api/v1/runs/{id}/check", POST, Ingest, post(check_handler))
}

async fn compare_handler(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Response> {
    let q = CompareQuery::parse(raw.as_deref())?;
    let c = comparison(&state.store, &q.ids, &q.options()).await?;
    Ok(Json(c).into_response())
}

async fn scenarios_handler(State(state): State<AppState>) -> Result<Response> {
    let s = state.store.list_scenarios().await?;
    Ok(Json(serde_json::json!({ "scenarios": s })).into_response())
}

async fn trend_handler(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response> {
    let q = CompareQuery::parse(raw.as_deref())?;
    Ok(Json(trend(&state.store, &name, &q.options()).await?).into_response())
}

async fn get_baseline(State(state): State<AppState>, Path(name): Path<String>) -> Result<Response> {
    let runs = crate::views::runs::scenario_runs(&state.store, &name).await?;
    let Some(newest) = runs.last() else {
        return Err(Error::NotFound(format!("scenario {name:?}")));
    };
    let (run_id, source) = match state.store.pinned_baseline(&name).await? {
        Some(p) => (Some(p), Some(BaselineSource::Pinned)),
        None => auto_baseline(&state.store, newest.id)
            .await?
            .map_or((None, None), |(id, s)| (Some(id), Some(s))),
    };
    Ok(
        Json(serde_json::json!({"scenario": name, "run_id": run_id, "source": source}))
            .into_response(),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineBody {
    run_id: i64,
}

async fn put_baseline(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response> {
    let body: BaselineBody = serde_json::from_slice(&body)
        .map_err(|e| Error::BadRequest(format!("expected {{\"run_id\": N}}: {e}")))?;
    let run = state
        .store
        .get_run(body.run_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {}", body.run_id)))?;
    if run.scenario.as_deref() != Some(name.as_str()) {
        return Err(Error::BadRequest(format!(
            "run {} belongs to scenario {:?}, not {name:?}; set its scenario first (PATCH /api/v1/runs/{})",
            run.id,
            run.scenario.as_deref().unwrap_or(""),
            run.id
        )));
    }
    state
        .store
        .set_baseline(&name, run.id, crate::now_ms())
        .await?;
    Ok(Json(
        serde_json::json!({"scenario": name, "run_id": run.id, "source": BaselineSource::Pinned}),
    )
    .into_response())
}

async fn delete_baseline(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode> {
    if !state.store.clear_baseline(&name).await? {
        return Err(Error::NotFound(format!(
            "pinned baseline of scenario {name:?}"
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}

async fn check_handler(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response> {
    let id = run_id(&id)?;
    let req: CheckRequest = serde_json::from_slice(&body).map_err(|e| {
        Error::BadRequest(format!(
            "expected {{\"gates\": [\"p95<500ms\", …], \"baseline\": \"auto\" | N | null}}: {e}"
        ))
    })?;
    let gates = req
        .gates
        .iter()
        .map(|g| gates::parse(g))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::BadRequest(e.to_string()))?;
    let spec = req.baseline_spec()?;
    let opts = Options {
        min_effect_pct: req
            .min_effect_pct
            .unwrap_or(compare::DEFAULT_MIN_EFFECT_PCT),
        ..Options::default()
    };
    if state.store.get_run(id).await?.is_none() {
        return Err(Error::NotFound(format!("run {id}")));
    }
    let report = check(&state.store, id, spec, &gates, &opts, req.record).await?;
    Ok(Json(report).into_response())
}
