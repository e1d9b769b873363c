//! Load runs streamed in by `harrier load run|find --server URL` (scope `ingest`):
//!
//! - `POST /api/v1/load-runs` `{name, scenario?, source, tags?: [[k, v]…], plan}` (plan: the
//!   run's label, schedule, model, planned duration, connections, dispatch limit, workers,
//!   protocol) → 201 `{id, url}`: the run exists at once, status `live`.
//! - `POST /api/v1/load-runs/{id}/ticks` `{ticks: [Tick…]}` (each worker's second: counts,
//!   errors by class, three HDR histograms as base64 V2, the sample groups; see
//!   [`crate::domain::load::Tick`]) → 200 `{samples}` (requests taken so far). A batch is
//!   taken whole or not at all (400 naming the bad tick).
//! - `POST /api/v1/load-runs/{id}/end` `{duration_s?, search?, ended_by?}` → 200 `{id, url,
//!   completed, errors}`: the run's exact figures stored, status `complete`.
//!
//! 404 when the run is not streaming into this replica. Bodies are JSON, at most
//! [`MAX_TICKS_BYTES`].

use axum::Json;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::domain::auth::Permission::*;
use crate::domain::load::Tick;
use crate::error::{Error, Result};
use crate::http::table::Routes;
use crate::http::table::methods::*;
use crate::services::load_runs::{EndLoadRun, OpenLoadRun};
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
    let samples = state.load_runs.ticks(id, batch.ticks).await?;
    Ok(Json(json!({ "samples": samples })))
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
        "completed": summary.completed,
        "errors": summary.errors.total(),
    })))
}
