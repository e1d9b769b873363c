//! InfluxDB-compatible write endpoints, so load tools stream runs into harrier while they
//! run: `POST /write?db=&precision=` (InfluxDB 1.x, JMeter's Backend Listener and k6
//! `--out influxdb`) and `POST /api/v2/write?bucket=&org=&precision=` (2.x clients).
//!
//! Bodies are line protocol, optionally gzip (`Content-Encoding: gzip`), up to
//! [`MAX_WRITE_BYTES`]. Answers follow InfluxDB: 204 when every line was taken; 400 with
//! `{"code": "invalid", "message": …}` naming the first bad lines otherwise (the good
//! lines of a partial write are kept, as InfluxDB does). Also
//! `POST /api/v1/runs/{id}/end` ends a live run now.

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::sources::ingest::influx::Precision;
use crate::sources::ingest::{GunzipError, gunzip_limited};
use crate::state::AppState;

/// Largest write body (after decompression), bytes.
pub const MAX_WRITE_BYTES: usize = 64 << 20;

/// The write routes.
pub fn routes() -> Routes {
    Routes::new()
        .route(
            "/write",
            POST,
            Ingest,
            post(write_v1).layer(DefaultBodyLimit::max(MAX_WRITE_BYTES)),
        )
        .route(
            "/api/v2/write",
            POST,
            Ingest,
            post(write_v2).layer(DefaultBodyLimit::max(MAX_WRITE_BYTES)),
        )
        .route("/api/v1/runs/{id}/end", POST, Ingest, post(end_run))
}

#[derive(Deserialize)]
struct V1Query {
    db: Option<String>,
    precision: Option<String>,
}

#[derive(Deserialize)]
struct V2Query {
    bucket: Option<String>,
    precision: Option<String>,
}

fn influx_error(status: StatusCode, message: String) -> Response {
    (
        status,
        Json(serde_json::json!({"code": "invalid", "message": message})),
    )
        .into_response()
}

/// The answer to a body that could not be read whole: past [`MAX_WRITE_BYTES`] a 413
/// naming the limit.
fn body_refused(e: &BytesRejection) -> Response {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return influx_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "body larger than the limit of {MAX_WRITE_BYTES} bytes for one write; nothing was stored (send smaller batches)"
            ),
        );
    }
    influx_error(e.status(), format!("body could not be read: {e}"))
}

async fn write_v1(
    State(state): State<AppState>,
    Query(q): Query<V1Query>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return body_refused(&e),
    };
    write(
        &state,
        q.db.as_deref().unwrap_or("default"),
        q.precision.as_deref(),
        &headers,
        body,
    )
    .await
}

async fn write_v2(
    State(state): State<AppState>,
    Query(q): Query<V2Query>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(e) => return body_refused(&e),
    };
    write(
        &state,
        q.bucket.as_deref().unwrap_or("default"),
        q.precision.as_deref(),
        &headers,
        body,
    )
    .await
}

async fn write(
    state: &AppState,
    database: &str,
    precision: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let Some(precision) = Precision::from_name(precision) else {
        return influx_error(
            StatusCode::BAD_REQUEST,
            format!("unknown precision {precision:?}; use ns, us, ms or s"),
        );
    };
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("gzip"));
    let raw;
    let bytes: &[u8] = if gzip {
        // The limit counts decompressed bytes, with the imports' ratio guard.
        match gunzip_limited(
            &body,
            MAX_WRITE_BYTES as u64,
            state.config.run_limits.max_gzip_ratio,
        ) {
            Ok(out) => {
                raw = out;
                &raw
            }
            Err(GunzipError::TooLarge(why)) => {
                return influx_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("body refused: {why}"),
                );
            }
            Err(GunzipError::Invalid(e)) => {
                return influx_error(
                    StatusCode::BAD_REQUEST,
                    format!("gzip body could not be read: {e}"),
                );
            }
        }
    } else {
        &body
    };
    let Ok(text) = std::str::from_utf8(bytes) else {
        return influx_error(
            StatusCode::BAD_REQUEST,
            "body is not UTF-8 line protocol".into(),
        );
    };
    match state.live_runs.write(text, precision, database).await {
        Ok(outcome) => {
            metrics::counter!("harrier_live_points_total").increment(outcome.summary.accepted);
            if outcome.summary.rejected.is_empty() {
                return StatusCode::NO_CONTENT.into_response();
            }
            metrics::counter!("harrier_rejected_rows_total")
                .increment(outcome.summary.rejected.len() as u64);
            let first: Vec<String> = outcome
                .summary
                .rejected
                .iter()
                .take(3)
                .map(|(line, why)| format!("line {line}: {why}"))
                .collect();
            influx_error(
                StatusCode::BAD_REQUEST,
                format!(
                    "partial write: {} lines rejected, {} points taken; {}",
                    outcome.summary.rejected.len(),
                    outcome.summary.accepted,
                    first.join("; ")
                ),
            )
        }
        Err(e) => Error::from(e).into_response(),
    }
}

async fn end_run(State(state): State<AppState>, Path(id): Path<String>) -> Result<StatusCode> {
    let id = crate::http::params::run_id(&id)?;
    if state.live_runs.end(id).await {
        state.live_runs.tick().await;
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::BadRequest(format!("run {id} is not live")))
    }
}
