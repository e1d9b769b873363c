//! The store: the only layer that speaks SQL, behind one backend-neutral type.
//!
//! The rest of the code calls [`Store`], whose methods are operations (`insert_runs`,
//! `route_rows`, `record_transition`, …), never SQL. Each backend is a folder (`sqlite/`)
//! that implements those operations; must not know about HTTP, file formats or the console.

mod sqlite;

pub use crate::domain::alerts::channel::{Group, GroupAlert};
pub use crate::domain::runs::NewRun;
pub use sqlite::alert_groups::{Delivery, FlushResult, GroupEntry};
pub use sqlite::alerts::{HistoryFilter, HistoryRow, Notification, StoredRule};
pub use sqlite::channels::StoredChannel;
pub use sqlite::compare::{CheckRow, PackedBuckets, ScenarioItem};
pub use sqlite::recent::{MAX_WINDOW_MS, RouteSubject, RouteWindows, subject_labels};
pub use sqlite::routes::{
    HOUR_MS, IntervalScope, MINUTE_MS, ProcessPoint, ROLLUPS_MS, Retention, RouteInfo, RouteWrite,
    RunBand, ScrapeStatus, StoredInterval, TEN_MINUTES_MS, TargetRow, TargetSpec, WindowNeed,
    url_instance,
};
pub use sqlite::runs::{
    BucketRow, ErrorRow, FailedBy, LiveRunWindow, RejectedRowRow, RunDetail, RunListItem, RunPatch,
};
pub use sqlite::silences::SILENCE_RETENTION_MS;

pub use sqlite::SqliteStore as Store;

/// Store failures: the database could not be opened, migrated or queried.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    /// The database file is missing (read-only commands never create one).
    #[error("no database at {0}: import a run first, or pass --db / set db in harrier.toml")]
    Missing(String),
}

// Not `#[from]`: the message already holds the cause, and a chained source would print
// it a second time.
impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::Db(e)
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        StoreError::Migrate(e)
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
