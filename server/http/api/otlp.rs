//! OTLP/HTTP metrics: `POST /v1/metrics` and `POST /otlp/v1/metrics` (the paths SDKs
//! and collectors append to an endpoint), as the OTLP specification's HTTP transport
//! describes (<https://opentelemetry.io/docs/specs/otlp/#otlphttp>).
//!
//! Bodies: `application/x-protobuf` or `application/json`, optionally
//! `Content-Encoding: gzip`, at most [`MAX_WRITE_BYTES`] decompressed (the line-protocol
//! writes' limit and gzip ratio guard). The ingest token goes in
//! `Authorization: Bearer hrt_…` (SDKs: `OTEL_EXPORTER_OTLP_HEADERS`).
//!
//! Answers, in the request's encoding:
//! - 200 with an `ExportMetricsServiceResponse`; when points were refused (past the
//!   route or series limits, or more pushing services than kept), its `partial_success`
//!   says how many and why — the rest was stored;
//! - 400 (unreadable body: truncated protobuf, bad JSON, bad gzip), 413 (too large),
//!   415 (another content type): a `google.rpc.Status` (`code`, `message`); nothing stored.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceResponse,
};

use crate::domain::auth::Permission::*;
use crate::http::api::write::MAX_WRITE_BYTES;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use crate::sources::ingest::{GunzipError, gunzip_limited};
use crate::sources::otlp::{self, Encoding, MAX_SERIES_PER_ROUTE, PushLimits};
use crate::state::AppState;

/// The OTLP routes.
pub fn routes() -> Routes {
    Routes::new()
        .route(
            "/v1/metrics",
            POST,
            Ingest,
            post(export).layer(DefaultBodyLimit::max(MAX_WRITE_BYTES)),
        )
        .route(
            "/otlp/v1/metrics",
            POST,
            Ingest,
            post(export).layer(DefaultBodyLimit::max(MAX_WRITE_BYTES)),
        )
        .route("/v1/traces", POST, Ingest, post(not_metrics))
        .route("/v1/logs", POST, Ingest, post(not_metrics))
        .route("/otlp/v1/traces", POST, Ingest, post(not_metrics))
        .route("/otlp/v1/logs", POST, Ingest, post(not_metrics))
}

/// Traces and logs sent to harrier's endpoint (an SDK given the base endpoint exports all
/// three signals there): 404 with a status an SDK logs, in the request's encoding.
async fn not_metrics(headers: HeaderMap) -> Response {
    let encoding = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(Encoding::from_content_type)
        .unwrap_or(Encoding::Protobuf);
    status(
        StatusCode::NOT_FOUND,
        encoding,
        UNIMPLEMENTED,
        "harrier receives OTLP metrics only (POST /v1/metrics): point traces and logs \
         elsewhere, or set OTEL_TRACES_EXPORTER=none and OTEL_LOGS_EXPORTER=none"
            .to_string(),
    )
}

/// `google.rpc.Status`, the body of OTLP's error answers (only the two fields harrier
/// fills; `details` left out).
#[derive(Clone, PartialEq, prost::Message)]
struct Status {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// gRPC status codes used in the `code` of a [`Status`].
const INVALID_ARGUMENT: i32 = 3;
const RESOURCE_EXHAUSTED: i32 = 8;
const UNIMPLEMENTED: i32 = 12;
const INTERNAL: i32 = 13;

fn status(http: StatusCode, encoding: Encoding, code: i32, message: String) -> Response {
    metrics::counter!("harrier_otlp_requests_total", "result" => "refused").increment(1);
    let body = match encoding {
        Encoding::Protobuf => prost::Message::encode_to_vec(&Status { code, message }),
        Encoding::Json => {
            serde_json::to_vec(&serde_json::json!({"code": code, "message": message}))
                .expect("a JSON object")
        }
    };
    (
        http,
        [(header::CONTENT_TYPE, encoding.content_type())],
        body,
    )
        .into_response()
}

async fn export(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(encoding) = Encoding::from_content_type(content_type) else {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Encoding::Json,
            INVALID_ARGUMENT,
            format!(
                "Content-Type {content_type:?} is not OTLP: send application/x-protobuf or application/json"
            ),
        );
    };
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return status(
                StatusCode::PAYLOAD_TOO_LARGE,
                encoding,
                RESOURCE_EXHAUSTED,
                format!(
                    "body larger than the limit of {MAX_WRITE_BYTES} bytes; nothing was stored (export smaller batches)"
                ),
            );
        }
        Err(e) => {
            return status(
                e.status(),
                encoding,
                INVALID_ARGUMENT,
                format!("body could not be read: {e}"),
            );
        }
    };
    let content_encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity");
    let raw;
    let bytes: &[u8] = if content_encoding.eq_ignore_ascii_case("gzip") {
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
                return status(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    encoding,
                    RESOURCE_EXHAUSTED,
                    format!("body refused: {why}"),
                );
            }
            Err(GunzipError::Invalid(e)) => {
                return status(
                    StatusCode::BAD_REQUEST,
                    encoding,
                    INVALID_ARGUMENT,
                    format!("gzip body could not be read, nothing was stored: {e}"),
                );
            }
        }
    } else if content_encoding.eq_ignore_ascii_case("identity") {
        &body
    } else {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            encoding,
            INVALID_ARGUMENT,
            format!("Content-Encoding {content_encoding:?} is not supported: send gzip or none"),
        );
    };
    let decoded = match otlp::decode(bytes, encoding) {
        Ok(r) => r,
        Err(why) => {
            return status(
                StatusCode::BAD_REQUEST,
                encoding,
                INVALID_ARGUMENT,
                format!("{why}; nothing was stored"),
            );
        }
    };
    let mapped = otlp::map(
        &decoded.request,
        PushLimits {
            max_routes: state.config.max_routes_per_target,
            max_series_per_route: MAX_SERIES_PER_ROUTE,
            max_name_chars: state.config.run_limits.max_label_chars,
        },
    )
    .with_unread(&decoded);
    drop(decoded);
    // In a task of its own: a client that gives up waiting (k6 cancels its last export at
    // the end of a test) must not stop a push half-written, its totals taken as the
    // previous ones but its intervals never stored.
    let receiver = state.otlp.clone();
    let pushed = tokio::spawn(async move { receiver.push(mapped, crate::now_ms()).await });
    let outcome = match pushed.await.unwrap_or_else(|e| {
        Err(crate::store::StoreError::Conflict(format!(
            "the push stopped: {e}"
        )))
    }) {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(error = %e, "storing an OTLP push failed");
            return status(
                StatusCode::SERVICE_UNAVAILABLE,
                encoding,
                INTERNAL,
                format!("the push could not be stored, retry later: {e}"),
            );
        }
    };
    metrics::counter!("harrier_otlp_requests_total", "result" => "ok").increment(1);
    metrics::counter!("harrier_otlp_points_total", "result" => "accepted")
        .increment(outcome.accepted);
    metrics::counter!("harrier_otlp_points_total", "result" => "rejected")
        .increment(outcome.rejected);
    let answer = ExportMetricsServiceResponse {
        partial_success: (outcome.rejected > 0).then(|| ExportMetricsPartialSuccess {
            rejected_data_points: outcome.rejected as i64,
            error_message: outcome.reason.unwrap_or_default(),
        }),
    };
    let body = match encoding {
        Encoding::Protobuf => prost::Message::encode_to_vec(&answer),
        Encoding::Json => serde_json::to_vec(&answer).expect("a response serializes"),
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, encoding.content_type())],
        body,
    )
        .into_response()
}
