//! How an [`Error`] is answered: its HTTP status, and JSON `{"error": "…"}` (with
//! `"field"` when one field is at fault) for `/api`; the console renders it as an error
//! page (see [`crate::http::console::PageError`]).
//!
//! 5xx errors are logged once, here, where they become a response.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::Error;
use crate::sources::ingest::IngestError;

impl Error {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::BadRequest(_) | Error::Field { .. } => StatusCode::BAD_REQUEST,
            Error::Conflict { .. } => StatusCode::CONFLICT,
            Error::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::Ingest(IngestError::TooLarge { .. }) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Ingest(IngestError::Io { .. }) => StatusCode::BAD_REQUEST,
            Error::Ingest(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Error::Store(_) | Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Error::Upstream(_) => StatusCode::BAD_GATEWAY,
        }
    }

    /// The message shown to the user; internal details stay in the log.
    pub fn public_message(&self) -> String {
        let status = self.status();
        if let Error::Upstream(message) = self {
            // The other service's own words are what the user needs; nothing of harrier's.
            tracing::warn!(error = %message, "an agent refused or failed");
            return message.clone();
        }
        if status.is_server_error() {
            tracing::error!(error = %self, "request failed");
            "internal error; the server log has the details".to_string()
        } else {
            self.to_string()
        }
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
