//! The one error type of request handlers, views and services. How it is answered (its
//! HTTP status, JSON `{"error": "…"}` for `/api`, an HTML error page for `/console`) is
//! [`crate::http::error`]'s.

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
    /// The caller may not do this (its role or token scope is too narrow); the message
    /// says what is needed.
    #[error("{0}")]
    Forbidden(String),
    /// The uploaded file is not importable.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
    /// A service harrier asked on the caller's behalf (a route's Jolokia agent) failed or
    /// refused: answered 502 with that service's own message.
    #[error("{0}")]
    Upstream(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Error::Store(StoreError::Db(e))
    }
}
