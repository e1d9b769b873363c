//! The one error type of request handlers, rendered two ways: JSON `{"error": "…"}` for
//! `/api`, and an HTML error page for `/console` (see [`crate::http::console::PageError`]).
//!
//! 5xx errors are logged once, here, where they become a response.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::sources::ingest::IngestError;
use crate::store::StoreError;

/// What went wrong while serving a request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The thing asked for does not exist (`what` names it: "run 42").
    #[error("{0} not found")]
    NotFound(String),
    /// The request itself is wrong; the message says what to send instead.
    #[error("{0}")]
    BadRequest(String),
    /// One field of the request body is wrong: answered 400 `{"error", "field"}`, so a
    /// form can show the message next to the field (`threshold`, `subject.route`, …).
    #[error("{message}")]
    Field { field: String, message: String },
    /// The request clashes with what exists (a name taken, a thing owned by
    /// `harrier.toml`): answered 409 `{"error"}`, with `"field"` when one field is at fault.
    #[error("{message}")]
    Conflict {
        field: Option<String>,
        message: String,
    },
    /// The input is larger than the configured limit.
    #[error("{0}")]
    TooLarge(String),
    /// The uploaded file is not importable.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::BadRequest(_) | Error::Field { .. } => StatusCode::BAD_REQUEST,
            Error::Conflict { .. } => StatusCode::CONFLICT,
            Error::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Ingest(IngestError::Io { .. }) => StatusCode::BAD_REQUEST,
            Error::Ingest(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Error::Store(_) | Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The message shown to the user; internal details stay in the log.
    pub fn public_message(&self) -> String {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(error = %self, "request failed");
            "internal error; the server log has the details".to_string()
        } else {
            self.to_string()
        }
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Store(StoreError::Db(e))
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = match &self {
            Error::Field { field, message }
            | Error::Conflict {
                field: Some(field),
                message,
            } => {
                serde_json::json!({ "error": message, "field": field })
            }
            _ => serde_json::json!({ "error": self.public_message() }),
        };
        (status, Json(body)).into_response()
    }
}
