//! Load runs streamed in by `harrier load run|find --server URL` (scope `ingest`):
//!
//! - `POST /api/v1/load-runs` `{name, scenario?, source, tags?: [[k, v]…], plan}` (plan: the
//!   run's label, schedule, model, planned duration, connections, dispatch limit, workers,
//!   protocol) → 201 `{id, url}`: the run exists at once, status `live`.
//! - `POST /api/v1/load-runs/{id}/ticks` `{ticks: [Tick…]}` (each worker's second: counts,
//!   errors by class, three HDR histograms as base64 V2, the sample groups; see
//!   [`crate::domain::load::Tick`]) → 200 `{samples, stop}` (requests taken so far; `stop`:
//!   the run was stopped from the console, stop the load). A batch is taken whole or not
//!   at all (400 naming the bad tick).
//! - `POST /api/v1/load-runs/{id}/end` `{duration_s?, search?, ended_by?}` → 200 `{id, url,
//!   complete, completed, errors}`: the run's exact figures stored, status `complete` (for
//!   a run shared by agents, once the last one has ended its part: until then `complete`
//!   is false).
//!
//! Load tests the console starts (`[load] enabled = true`): `GET /api/v1/load-tests`
//! (enabled, limits, the test under way), `POST /api/v1/load-tests` (scope `write`; the
//! form, see [`NewLoadTest`]) → 201 `{id, url, command, started_by, started_at_ms}`, `POST
//! /api/v1/load-tests/{id}/stop` → 204.
//!
//! Agents (`harrier load agent`): `POST /api/v1/load-agents/poll` `{name}` (scope `ingest`,
//! a long poll of up to 25 s) → 200 the agent's part of a test started with `agents: N`, or
//! 204; `GET /api/v1/load-agents` lists the waiting ones. An agent's part of a search
//! follows `GET /api/v1/load-runs/{id}/control?after=V` (a long poll: the rate the server's
//! search sets, see [`crate::services::load_runs::Control`]).
//!
//! 404 when the run is not streaming into this replica. Bodies are JSON, at most
//! [`MAX_TICKS_BYTES`].

use axum::Json;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::domain::auth::Permission::*;
use crate::domain::load::Tick;
use crate::error::{Error, Result};
use crate::http::table::Routes;
use crate::http::table::methods::*;
use crate::services::load_runs::{EndLoadRun, OpenLoadRun};
use crate::services::load_tests::NewLoadTest;
use crate::state::AppState;

/// Largest body of a batch of ticks, bytes (a second of many workers with wide histograms
/// is well below 1 MiB).
pub const MAX_TICKS_BYTES: usize = 16 << 20;

pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/load-runs", POST, Ingest, post(open))
        .route(
            "/api/v1/load-runs/{id}/ticks",
            POST,
            Ingest,
            post(ticks).layer(DefaultBodyLimit::max(MAX_TICKS_BYTES)),
        )
        .route("/api/v1/load-runs/{id}/end", POST, Ingest, post(end))
        .route("/api/v1/load-runs/{id}/control", GET, Ingest, get(control))
        .route("/api/v1/load-tests", GET, Read, get(tests))
        .route("/api/v1/load-tests", POST, Write, post(start_test))
        .route("/api/v1/load-tests/{id}/stop", POST, Write, post(stop_test))
        .route("/api/v1/load-agents", GET, Read, get(agents))
        .route("/api/v1/load-agents/poll", POST, Ingest, post(poll_agent))
}

/// `GET /api/v1/load-agents` → `{waiting: [{name, since_ms}]}`: agents ready for a test.
async fn agents(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "waiting": state.load_agents.list().await }))
}

#[derive(Deserialize)]
struct Poll {
    name: String,
}

/// `POST /api/v1/load-agents/poll` `{name}`: waits up to 25 s for this agent's part of a
/// load test → 200 [`crate::services::load_agents::Assignment`], or 204 when none came
/// (poll again).
async fn poll_agent(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<axum::response::Response> {
    use axum::response::IntoResponse;
    let poll: Poll = body_of(&body, "expected {name} as JSON")?;
    let name = poll.name.trim().chars().take(128).collect::<String>();
    if name.is_empty() {
        return Err(Error::BadRequest("name must not be empty".into()));
    }
    let wait = crate::services::load_agents::POLL_WAIT;
    Ok(tokio::select! {
        a = state.load_agents.poll(name, wait) => match a {
            Some(a) => Json(a).into_response(),
            None => StatusCode::NO_CONTENT.into_response(),
        },
        _ = state.shutdown.cancelled() => StatusCode::NO_CONTENT.into_response(),
    })
}

/// `GET /api/v1/load-tests`: whether the console may start load tests, its limits, and the
/// test under way (`running`: `{id, url, command, started_by, started_at_ms}` or null).
async fn tests(State(state): State<AppState>) -> Json<Value> {
    let p = state.load_tests.policy();
    Json(json!({
        "enabled": p.enabled,
        "max_rate": p.max_rate,
        "max_duration_s": p.max_duration_s,
        "allow_public_targets": p.allow_public_targets,
        "running": state.load_tests.running().await,
    }))
}

/// `POST /api/v1/load-tests` (a [`NewLoadTest`]) → 201 `{id, url, command, …}` once the
/// run exists; 400 naming what is wrong (or that `[load]` is off); 409 while another runs.
async fn start_test(
    State(state): State<AppState>,
    axum::Extension(who): axum::Extension<crate::domain::auth::Principal>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>)> {
    let test: NewLoadTest = body_of(
        &body,
        "expected {url, mode: run|find, method, headers, body, rate, duration, slo, …} as JSON",
    )?;
    // The user's name, `token:NAME` for a token (as in the audit log); `anonymous` when
    // sign-in is off.
    let by = match who {
        crate::domain::auth::Principal::Open => "anonymous".to_string(),
        p => p.who(),
    };
    let running = state.load_tests.start(test, by).await?;
    Ok((
        StatusCode::CREATED,
        Json(serde_json::to_value(&running).unwrap_or_default()),
    ))
}

/// `POST /api/v1/load-tests/{id}/stop` → 204; 404 when no test of run `id` is running.
async fn stop_test(State(state): State<AppState>, Path(id): Path<String>) -> Result<StatusCode> {
    let id = crate::http::params::run_id(&id)?;
    if state.load_tests.stop(id).await {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound(format!("a running load test of run {id}")))
    }
}

/// The body as `T`, or a 400 saying where the JSON is wrong.
fn body_of<T: DeserializeOwned>(body: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| Error::BadRequest(format!("{what}: {e}")))
}

async fn open(State(state): State<AppState>, body: Bytes) -> Result<(StatusCode, Json<Value>)> {
    let run: OpenLoadRun = body_of(
        &body,
        "expected {name, scenario, source, tags, plan} as JSON",
    )?;
    let id = state.load_runs.open(run).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"id": id, "url": format!("/console/runs/{id}")})),
    ))
}

#[derive(Deserialize)]
struct Ticks {
    ticks: Vec<Tick>,
}

async fn ticks(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>> {
    let id = crate::http::params::run_id(&id)?;
    let batch: Ticks = body_of(&body, "expected {ticks: [...]} as JSON")?;
    let taken = state.load_runs.ticks(id, batch.ticks).await?;
    Ok(Json(serde_json::to_value(taken).unwrap_or_default()))
}

#[derive(Deserialize)]
struct ControlQuery {
    /// The version the agent has; the answer waits for a newer one.
    #[serde(default)]
    after: u64,
    /// How late the agent received version `after`, ms (reported once per change).
    delay_ms: Option<f64>,
}

/// `GET /api/v1/load-runs/{id}/control?after=V[&delay_ms=D]`: the rate of a search on agents,
/// a long poll: answers at once when the rate's version is above `after`, else when it
/// changes (within 25 s: then the same version, poll again) →
/// [`crate::services::load_runs::Control`].
async fn control(
    State(state): State<AppState>,
    Path(id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<ControlQuery>,
) -> Result<Json<Value>> {
    let id = crate::http::params::run_id(&id)?;
    if let Some(d) = q.delay_ms.filter(|d| d.is_finite()) {
        state.load_runs.control_received(id, d).await;
    }
    let mut rate = state.load_runs.control(id).await?;
    let wait = crate::services::load_agents::POLL_WAIT;
    tokio::select! {
        _ = tokio::time::timeout(wait, rate.wait_for(|c| c.version > q.after)) => {}
        _ = state.shutdown.cancelled() => {}
    }
    let now = *rate.borrow();
    Ok(Json(serde_json::to_value(now).unwrap_or_default()))
}

async fn end(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>> {
    let id = crate::http::params::run_id(&id)?;
    let end: EndLoadRun = if body.is_empty() {
        EndLoadRun::default()
    } else {
        body_of(&body, "expected {duration_s, search, ended_by} as JSON")?
    };
    let summary = state.load_runs.end(id, end).await?;
    Ok(Json(json!({
        "id": id,
        "url": format!("/console/runs/{id}"),
        "complete": summary.is_some(),
        "completed": summary.as_ref().map(|s| s.completed),
        "errors": summary.as_ref().map(|s| s.errors.total()),
    })))
}
