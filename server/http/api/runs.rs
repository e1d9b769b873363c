//! The JSON API under `/api/v1`.
//!
//! - `GET /api/v1/runs` → `{"runs": [RunListItem…]}`, newest first;
//! - `POST /api/v1/runs?format=&name=&scenario=&tag=k=v&filename=` with the result file as
//!   the raw body, or as multipart form data (a `file` field; `name`, `scenario`, `format`,
//!   `tag` fields allowed too) → 201 `{"runs": [ImportedRun…]}`. Several `file` fields
//!   holding the files of one Locust `--csv` run (`x_stats.csv`, `x_stats_history.csv`,
//!   `x_failures.csv`, `x_exceptions.csv`) make one run (see
//!   [`crate::sources::ingest::locust::merge_set`]);
//! - `GET /api/v1/runs/{id}?apdex_t_ms=` → [`RunDetail`](crate::store::RunDetail) with
//!   Apdex per scope and `capacity` (see [`RunReport::to_json`]);
//! - `PATCH /api/v1/runs/{id}` with `{"name", "scenario", "notes", "tags"}` (any of them);
//! - `GET /api/v1/runs/{id}/distribution?label=`, `GET /api/v1/runs/{id}/stats.csv`;
//! - `GET /api/v1/runs/{id}/timeseries?label=` → [`Series`](crate::domain::runs::timeseries::Series);
//! - `GET /api/v1/runs/{id}/errors`, `GET /api/v1/runs/{id}/rejected`;
//! - `DELETE /api/v1/runs/{id}` → 204;
//! - `GET /api/v1/live`: the websocket (see [`crate::services::live::Event`]).
//!
//! Missing values are `null`, never NaN or 0. Errors are `{"error": "…"}` with a 4xx/5xx.

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{
    DefaultBodyLimit, FromRequest, Multipart, Path, Query, RawQuery, Request, State,
    WebSocketUpgrade,
};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post};

use futures_util::TryStreamExt;
use serde::Deserialize;
use tokio_util::io::StreamReader;

use crate::error::{Error, Result};
use crate::http::params::run_id;
use crate::services::import::{self, ImportRequest, Progress};
use crate::services::live::Event;
use crate::sources::ingest::Format;
use crate::state::AppState;
use crate::store::RunPatch;
use crate::views::runs::{distribution_json, run_report, series_for};

/// Routes of the runs API (uploads bound their own size: no body limit here).
pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/runs", GET, Read, get(list_runs))
        .route(
            "/api/v1/runs",
            POST,
            Ingest,
            post(create_runs).layer(DefaultBodyLimit::disable()),
        )
        .route("/api/v1/runs/{id}", GET, Read, get(get_run))
        .route("/api/v1/runs/{id}", PATCH, Write, patch(patch_run))
        .route("/api/v1/runs/{id}", DELETE, Write, delete(delete_run))
        .route(
            "/api/v1/runs/{id}/distribution",
            GET,
            Read,
            get(run_distribution),
        )
        .route("/api/v1/runs/{id}/stats.csv", GET, Read, get(run_stats_csv))
        .route(
            "/api/v1/runs/{id}/timeseries",
            GET,
            Read,
            get(run_timeseries),
        )
        .route("/api/v1/runs/{id}/errors", GET, Read, get(run_errors))
        .route("/api/v1/runs/{id}/rejected", GET, Read, get(run_rejected))
        .route("/api/v1/live", GET, Read, get(live))
}

/// `Err(NotFound)` unless run `id` exists.
async fn require_run(state: &AppState, id: i64) -> Result<()> {
    match crate::views::runs::run_list_item(&state.store, id).await? {
        Some(_) => Ok(()),
        None => Err(Error::NotFound(format!("run {id}"))),
    }
}

async fn list_runs(State(state): State<AppState>) -> Result<Json<serde_json::Value>> {
    let runs = crate::views::runs::list_runs(&state.store).await?;
    Ok(Json(serde_json::json!({ "runs": runs })))
}

#[derive(Deserialize)]
struct RunQuery {
    /// Apdex threshold T, ms; default from the configuration (500 ms).
    apdex_t_ms: Option<u64>,
}

async fn get_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<RunQuery>,
) -> Result<Response> {
    let id = run_id(&id)?;
    Ok(Json(
        run_report(&state.store, id, state.apdex_t_ms(q.apdex_t_ms))
            .await?
            .to_json(),
    )
    .into_response())
}

async fn patch_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Response> {
    let id = run_id(&id)?;
    let patch: RunPatch = serde_json::from_slice(&body).map_err(|e| {
        Error::BadRequest(format!(
            "expected a JSON object with any of name, scenario, notes (strings or null), tags (an object of strings): {e}"
        ))
    })?;
    if patch.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        return Err(Error::BadRequest("name must not be empty".into()));
    }
    {
        use crate::domain::runs::limits::{MAX_NAME_CHARS, MAX_NOTES_CHARS, check_length};
        let too_long = |what: &str, v: Option<&str>, max| {
            v.map_or(Ok(()), |v| check_length(what, v, max))
                .map_err(Error::BadRequest)
        };
        too_long("name", patch.name.as_deref(), MAX_NAME_CHARS)?;
        too_long(
            "scenario",
            patch.scenario.clone().flatten().as_deref(),
            MAX_NAME_CHARS,
        )?;
        too_long(
            "notes",
            patch.notes.clone().flatten().as_deref(),
            MAX_NOTES_CHARS,
        )?;
        for (k, v) in patch.tags.iter().flatten() {
            too_long("a tag key", Some(k), MAX_NAME_CHARS)?;
            too_long(&format!("tag {k:?}"), Some(v), MAX_NAME_CHARS)?;
        }
    }
    if !state.store.update_run(id, &patch).await? {
        return Err(Error::NotFound(format!("run {id}")));
    }
    if let Some(item) = crate::views::runs::run_list_item(&state.store, id).await? {
        state.hub.publish(&Event::RunUpdated { run: item });
    }
    Ok(Json(
        run_report(&state.store, id, state.apdex_t_ms(None))
            .await?
            .to_json(),
    )
    .into_response())
}

#[derive(Deserialize)]
struct LabelQuery {
    label: Option<String>,
}

/// `GET /api/v1/runs/{id}/distribution?label=`: the exact response-time distribution as
/// `{label, count, curve: {p: [...], ms: [...]}, bins: {lower_ms: [...], count: [...]}}`.
async fn run_distribution(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<LabelQuery>,
) -> Result<Response> {
    let id = run_id(&id)?;
    Ok(Json(distribution_json(&state.store, id, q.label).await?).into_response())
}

/// `GET /api/v1/runs/{id}/stats.csv`: the per-label table (and the total) as CSV.
async fn run_stats_csv(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<RunQuery>,
) -> Result<Response> {
    let id = run_id(&id)?;
    let report = run_report(&state.store, id, state.apdex_t_ms(q.apdex_t_ms)).await?;
    let mut w = csv::Writer::from_writer(Vec::new());
    let header = [
        "label",
        "is_transaction",
        "count",
        "errors",
        "error_pct",
        "min_ms",
        "mean_ms",
        "p50_ms",
        "p90_ms",
        "p95_ms",
        "p99_ms",
        "max_ms",
        "throughput_rps",
        "successful_rps",
        "bytes_received",
        "bytes_sent",
        "first_start_ms",
        "last_end_ms",
        "window_ms",
        "apdex",
    ];
    let csv_err = |e: csv::Error| Error::Internal(format!("writing CSV: {e}"));
    w.write_record(header).map_err(csv_err)?;
    let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    let opt_i = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let scopes = std::iter::once(("TOTAL".to_string(), false, &report.run.overall)).chain(
        report
            .run
            .labels
            .iter()
            .map(|l| (l.label.clone(), l.is_transaction, &l.stats)),
    );
    for (i, (label, tx, s)) in scopes.enumerate() {
        let apdex = report.apdex.get(i).copied().flatten().map(|a| a.score);
        w.write_record([
            label,
            tx.to_string(),
            s.count.to_string(),
            s.errors.to_string(),
            opt(s.error_pct),
            opt(s.min_ms),
            opt(s.mean_ms),
            opt(s.p50_ms),
            opt(s.p90_ms),
            opt(s.p95_ms),
            opt(s.p99_ms),
            opt(s.max_ms),
            opt(s.throughput_rps),
            opt(s.successful_rps()),
            s.bytes_received.to_string(),
            s.bytes_sent.to_string(),
            opt_i(s.first_start_ms),
            opt_i(s.last_end_ms),
            opt_i(s.window_ms),
            opt(apdex),
        ])
        .map_err(csv_err)?;
    }
    let body = w
        .into_inner()
        .map_err(|e| Error::Internal(format!("writing CSV: {e}")))?;
    let file = format!("attachment; filename=\"run-{id}-stats.csv\"");
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (header::CONTENT_DISPOSITION, file),
        ],
        body,
    )
        .into_response())
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

async fn run_timeseries(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<SeriesQuery>,
) -> Result<Response> {
    let id = run_id(&id)?;
    Ok(Json(series_for(&state.store, id, q.label).await?).into_response())
}

async fn run_errors(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response> {
    let id = run_id(&id)?;
    require_run(&state, id).await?;
    Ok(Json(serde_json::json!({ "errors": state.store.run_errors(id).await? })).into_response())
}

async fn run_rejected(State(state): State<AppState>, Path(id): Path<String>) -> Result<Response> {
    let id = run_id(&id)?;
    require_run(&state, id).await?;
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
    replace: Option<i64>,
}

impl ImportParams {
    fn set(&mut self, key: &str, value: String) -> Result<()> {
        let value = value.trim().to_string();
        match key {
            "format" => self.format = Some(value),
            "name" if !value.is_empty() => self.name = Some(value),
            "scenario" if !value.is_empty() => self.scenario = Some(value),
            "filename" if !value.is_empty() => self.filename = Some(value),
            "replace" if !value.is_empty() => self.replace = Some(run_id(&value)?),
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
        // Adding runs is ingest; replacing one changes stored data, as editing does.
        if self.replace.is_some() && !crate::http::auth::may(Write) {
            return Err(Error::Forbidden(
                "replace=ID overwrites a stored run: it needs the editor role or a write \
                 token (an ingest token only adds runs)"
                    .into(),
            ));
        }
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
            limits: state.config.run_limits,
            replace: self.replace,
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
/// set the options. Several file fields make a run each; except the files of one Locust
/// `--csv` run (`x_stats.csv`, `x_stats_history.csv`, `x_failures.csv`,
/// `x_exceptions.csv`): read whole (together within the import limit), they make one run.
/// Files before the first Locust file stream into their imports; files from it on are read
/// whole first.
async fn import_multipart(
    state: &AppState,
    progress: &Progress,
    params: &mut ImportParams,
    multipart: &mut Multipart,
) -> Result<Vec<import::ImportedRun>> {
    let bad = |e: axum::extract::multipart::MultipartError| {
        Error::BadRequest(format!("multipart body: {e}"))
    };
    let mut held: Vec<(String, Vec<u8>)> = Vec::new();
    let mut held_bytes: u64 = 0;
    // Runs of files imported as they streamed in (each file not of a Locust set, before
    // the first one that is).
    let mut streamed: Vec<import::ImportedRun> = Vec::new();
    let mut any_file = false;
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
        if !held.is_empty() || crate::sources::ingest::locust::csv_set_part(&source).is_some() {
            let mut bytes = Vec::new();
            while let Some(chunk) = field.chunk().await.map_err(|e| {
                Error::BadRequest(format!(
                    "{source}: upload broke off: {e}; nothing was stored"
                ))
            })? {
                held_bytes += chunk.len() as u64;
                // Held whole in memory: at most one whole-file summary's worth.
                let max_document = state.config.run_limits.max_document_bytes;
                if held_bytes > max_document {
                    return Err(Error::TooLarge(format!(
                        "{source}: the files of a Locust --csv run are read whole, together at most {max_document} bytes (limits.max_document_bytes in harrier.toml); nothing was stored"
                    )));
                }
                if held_bytes > state.config.max_import_bytes {
                    return Err(Error::TooLarge(format!(
                        "the uploaded files are larger than the import limit of {} bytes together; nothing was stored (raise max_import_bytes in harrier.toml)",
                        state.config.max_import_bytes
                    )));
                }
                bytes.extend_from_slice(&chunk);
            }
            held.push((source, bytes));
            continue;
        }
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
        streamed.extend(
            task.await
                .map_err(|e| Error::Internal(format!("import task: {e}")))??,
        );
        any_file = true;
    }
    if held.is_empty() {
        if !any_file {
            return Err(Error::BadRequest(
                "multipart body has no `file` field".to_string(),
            ));
        }
        return Ok(streamed);
    }
    let format = params.request(state, String::new())?.format;
    let files = held
        .into_iter()
        .map(|(source, bytes)| import::InputFile::bytes(source, bytes))
        .collect();
    let params = &*params;
    let request = |source: &str| params.request(state, source.to_string());
    let imported = import::import_files(
        &state.store,
        &|_: &str| progress.clone(),
        files,
        format,
        &request,
        false,
    )
    .await;
    let mut runs = streamed;
    for (_, result) in imported {
        runs.extend(result?);
    }
    Ok(runs)
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
    ws.on_upgrade(move |socket| crate::services::live::client_loop(socket, hub, shutdown))
}
