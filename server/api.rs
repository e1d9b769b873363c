//! The JSON API under `/api/v1`.
//!
//! - `GET /api/v1/runs` → `{"runs": [RunListItem…]}`, newest first;
//! - `POST /api/v1/runs?format=&name=&scenario=&tag=k=v&filename=` with the result file as
//!   the raw body, or as multipart form data (a `file` field; `name`, `scenario`, `format`,
//!   `tag` fields allowed too) → 201 `{"runs": [ImportedRun…]}`;
//! - `GET /api/v1/runs/{id}` → [`RunDetail`](crate::store::RunDetail);
//! - `GET /api/v1/runs/{id}/timeseries?label=` → [`Series`](crate::runs::timeseries::Series);
//! - `GET /api/v1/runs/{id}/errors`, `GET /api/v1/runs/{id}/rejected`;
//! - `DELETE /api/v1/runs/{id}` → 204;
//! - `GET /api/v1/live`: the websocket (see [`crate::live::Event`]).
//!
//! Missing values are `null`, never NaN or 0. Errors are `{"error": "…"}` with a 4xx/5xx.

use axum::body::Bytes;
use axum::extract::{
    DefaultBodyLimit, FromRequest, Multipart, Path, Query, RawQuery, Request, State,
    WebSocketUpgrade,
};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::TryStreamExt;
use serde::Deserialize;
use tokio_util::io::StreamReader;

use crate::app::AppState;
use crate::error::{Error, Result};
use crate::import::{self, ImportRequest, Progress};
use crate::ingest::Format;
use crate::live::Event;
use crate::runs::timeseries::{self, BucketIn};

/// Routes of the JSON API.
pub fn router(_state: &AppState) -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/runs",
            get(list_runs)
                .post(create_runs)
                .layer(DefaultBodyLimit::disable()),
        )
        .route("/api/v1/runs/{id}", get(get_run).delete(delete_run))
        .route("/api/v1/runs/{id}/timeseries", get(run_timeseries))
        .route("/api/v1/runs/{id}/errors", get(run_errors))
        .route("/api/v1/runs/{id}/rejected", get(run_rejected))
        .route("/api/v1/live", get(live))
}

/// Parses a run id from the path.
pub fn run_id(raw: &str) -> Result<i64> {
    raw.parse()
        .map_err(|_| Error::BadRequest(format!("run id must be a number, got {raw:?}")))
}

async fn list_runs(State(state): State<AppState>) -> Result<Json<serde_json::Value>> {
    let runs = state.store.list_runs().await?;
    Ok(Json(serde_json::json!({ "runs": runs })))
}

async fn get_run(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response> {
    let id = run_id(&id)?;
    let run = state
        .store
        .get_run(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {id}")))?;
    Ok(Json(run).into_response())
}

async fn delete_run(State(state): State<AppState>, Path(id): Path<String>) -> Result<StatusCode> {
    let id = run_id(&id)?;
    if !state.store.delete_run(id).await? {
        return Err(Error::NotFound(format!("run {id}")));
    }
    state.hub.publish(&Event::RunDeleted { id });
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct SeriesQuery {
    label: Option<String>,
}

/// The over-time series of a run or one of its labels.
pub async fn series_for(
    state: &AppState,
    id: i64,
    label: Option<String>,
) -> Result<timeseries::Series> {
    let run = state
        .store
        .get_run(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {id}")))?;
    let label = label.filter(|l| !l.is_empty());
    let rows = state
        .store
        .run_buckets(id, label.as_deref())
        .await?
        .ok_or_else(|| {
            Error::NotFound(format!(
                "label {:?} in run {id}",
                label.as_deref().unwrap_or("")
            ))
        })?;
    let last_end_ms = match &label {
        None => run.overall.last_end_ms,
        Some(l) => run
            .labels
            .iter()
            .find(|s| &s.label == l)
            .and_then(|s| s.stats.last_end_ms),
    };
    let buckets: Vec<BucketIn> = rows
        .iter()
        .map(|r| BucketIn {
            start_ms: r.start_ms,
            count: r.count.max(0) as u64,
            errors: r.errors.max(0) as u64,
            sum_ms: r.sum_ms.max(0) as u64,
            max_ms: r.max_ms.max(0) as u64,
            active_users: r.active_users.and_then(|u| u32::try_from(u).ok()),
            histogram: &r.histogram,
        })
        .collect();
    Ok(timeseries::build(label, &buckets, last_end_ms))
}

async fn run_timeseries(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<SeriesQuery>,
) -> Result<Response> {
    let id = run_id(&id)?;
    Ok(Json(series_for(&state, id, q.label).await?).into_response())
}

async fn run_errors(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response> {
    let id = run_id(&id)?;
    Ok(Json(serde_json::json!({ "errors": state.store.run_errors(id).await? })).into_response())
}

async fn run_rejected(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response> {
    let id = run_id(&id)?;
    Ok(
        Json(serde_json::json!({ "rejected": state.store.run_rejected(id).await? }))
            .into_response(),
    )
}

/// Import options from the query string (`tag` may repeat).
#[derive(Default)]
struct ImportParams {
    format: Option<String>,
    name: Option<String>,
    scenario: Option<String>,
    filename: Option<String>,
    tags: Vec<(String, String)>,
}

impl ImportParams {
    fn set(&mut self, key: &str, value: String) -> Result<()> {
        let value = value.trim().to_string();
        match key {
            "format" => self.format = Some(value),
            "name" if !value.is_empty() => self.name = Some(value),
            "scenario" if !value.is_empty() => self.scenario = Some(value),
            "filename" if !value.is_empty() => self.filename = Some(value),
            "tag" if !value.is_empty() => match value.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    self.tags.push((k.trim().into(), v.trim().into()))
                }
                _ => {
                    return Err(Error::BadRequest(format!(
                        "tag must be key=value, got {value:?}"
                    )));
                }
            },
            _ => {}
        }
        Ok(())
    }

    fn request(&self, state: &AppState, source: String) -> Result<ImportRequest> {
        let name = self.format.as_deref().unwrap_or("auto");
        let format = Format::from_name(name).ok_or_else(|| {
            Error::BadRequest(format!(
                "unknown format {name:?}; supported: {}",
                Format::NAMES.join(", ")
            ))
        })?;
        Ok(ImportRequest {
            format,
            name: self.name.clone(),
            scenario: self.scenario.clone(),
            tags: self.tags.clone(),
            source,
            max_bytes: state.config.max_import_bytes,
        })
    }
}

async fn create_runs(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    req: Request,
) -> Result<Response> {
    let mut params = ImportParams::default();
    for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        params.set(&k, v.into_owned())?;
    }
    let progress = Progress {
        hub: Some(state.hub.clone()),
        callback: None,
    };
    let is_multipart = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let runs = if is_multipart {
        let mut multipart = Multipart::from_request(req, &state)
            .await
            .map_err(|e| Error::BadRequest(format!("multipart body: {e}")))?;
        import_multipart(&state, &progress, &mut params, &mut multipart).await?
    } else {
        let bytes_total = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let source = params
            .filename
            .clone()
            .or_else(|| disposition_filename(req.headers()))
            .unwrap_or_else(|| "upload".to_string());
        let import_req = params.request(&state, source)?;
        let stream = req
            .into_body()
            .into_data_stream()
            .map_err(std::io::Error::other);
        import::import_async(
            &state.store,
            &progress,
            import_req,
            StreamReader::new(stream),
            bytes_total,
        )
        .await?
    };
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({ "runs": runs })),
    )
        .into_response())
}

/// Streams the `file` field of a multipart upload into an import; text fields before it
/// set the options.
async fn import_multipart(
    state: &AppState,
    progress: &Progress,
    params: &mut ImportParams,
    multipart: &mut Multipart,
) -> Result<Vec<import::ImportedRun>> {
    let bad = |e: axum::extract::multipart::MultipartError| {
        Error::BadRequest(format!("multipart body: {e}"))
    };
    while let Some(mut field) = multipart.next_field().await.map_err(bad)? {
        let field_name = field.name().unwrap_or_default().to_string();
        let file_name = field.file_name().map(str::to_string);
        if field_name != "file" && file_name.is_none() {
            let value = field.text().await.map_err(bad)?;
            params.set(&field_name, value)?;
            continue;
        }
        let source = file_name
            .or(params.filename.clone())
            .unwrap_or_else(|| "upload".to_string());
        let import_req = params.request(state, source)?;
        // Chunks go through a channel so a broken upload reaches the parser as a read
        // error (and nothing is stored), not as a clean end of file.
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(16);
        let stream = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let reader = StreamReader::new(Box::pin(stream));
        let (store, progress) = (state.store.clone(), progress.clone());
        let task = tokio::spawn(async move {
            import::import_async(&store, &progress, import_req, reader, None).await
        });
        loop {
            let item = match field.chunk().await {
                Ok(Some(chunk)) => Ok(chunk),
                Ok(None) => break,
                Err(e) => Err(std::io::Error::other(format!("upload broke off: {e}"))),
            };
            let failed = item.is_err();
            if tx.send(item).await.is_err() || failed {
                break; // the parser stopped early, or the upload broke: its result says why
            }
        }
        drop(tx);
        return task
            .await
            .map_err(|e| Error::Internal(format!("import task: {e}")))?;
    }
    Err(Error::BadRequest(
        "multipart body has no `file` field".to_string(),
    ))
}

/// The file name of a `Content-Disposition: attachment; filename="…"; filename*=UTF-8''…`
/// request header (RFC 6266; the UTF-8 form wins), as the console's upload sends it.
fn disposition_filename(headers: &axum::http::HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_DISPOSITION)?.to_str().ok()?;
    let mut plain = None;
    for part in value.split(';').map(str::trim) {
        if let Some(encoded) = part.strip_prefix("filename*=") {
            let encoded = encoded
                .strip_prefix("UTF-8''")
                .or_else(|| encoded.strip_prefix("utf-8''"))?;
            let decoded: String =
                form_urlencoded::parse(format!("f={}", encoded.replace('+', "%2B")).as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())?;
            if !decoded.is_empty() {
                return Some(decoded);
            }
        } else if let Some(name) = part.strip_prefix("filename=") {
            plain = Some(name.trim_matches('"').to_string());
        }
    }
    plain.filter(|n| !n.is_empty())
}

async fn live(State(state): State<AppState>, ws: WebSocketUpgrade) -> Response {
    let (hub, shutdown) = (state.hub.clone(), state.shutdown.clone());
    ws.on_upgrade(move |socket| crate::live::client_loop(socket, hub, shutdown))
}
