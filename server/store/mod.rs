//! The SQLite store: the only module that speaks SQL.
//!
//! Owns the connection pool, the migrations (`migrations/`, applied at open) and one file
//! per table group (`runs.rs`, `routes.rs`, `compare.rs`, `alerts.rs`, `channels.rs`, …).
//! Writes of many rows go in multi-row statements inside one transaction per import, so an
//! import that fails leaves nothing behind. Must not know about HTTP or file formats.

mod alert_groups;
mod alerts;
mod channels;
mod compare;
mod recent;
mod routes;
mod runs;
mod silences;

pub use alert_groups::{Delivery, FlushResult, Group, GroupAlert, GroupEntry};
pub use alerts::{HistoryFilter, HistoryRow, Notification, StoredRule};
pub use channels::StoredChannel;
pub use compare::{CheckRow, PackedBuckets, ScenarioItem};
pub use recent::{MAX_WINDOW_MS, RouteSubject, RouteWindows, subject_labels};
pub use routes::{
    HOUR_MS, IntervalScope, MINUTE_MS, ProcessPoint, ROLLUPS_MS, Retention, RouteInfo, RouteWrite,
    RunBand, ScrapeStatus, StoredInterval, TEN_MINUTES_MS, TargetRow, TargetSpec, WindowNeed,
    url_instance,
};
pub use runs::{
    BucketRow, ErrorRow, FailedBy, LiveRunWindow, NewRun, RejectedRowRow, RunDetail, RunListItem,
    RunPatch,
};
pub use silences::SILENCE_RETENTION_MS;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

/// Handle to harrier's database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    /// Recent route intervals held for the alert evaluator.
    recent: std::sync::Arc<recent::Recent>,
}

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

impl Store {
    /// Opens (creating if missing) the SQLite file at `path` in WAL mode and applies the
    /// migrations.
    pub async fn open(path: &Path) -> Result<Store> {
        // Pages are read through a memory map (up to 256 MiB) and each connection caches
        // 16 MiB: the alert evaluator reads a window of every route each round, and page
        // reads through pread dominated its profile (bench/alerts_eval.sh).
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            .pragma("mmap_size", "268435456")
            .pragma("cache_size", "-16384");
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        Store::from_pool(pool).await
    }

    /// Opens an existing database file (for commands that only read); a missing file is
    /// [`StoreError::Missing`] instead of a new, empty database.
    pub async fn open_existing(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(StoreError::Missing(path.display().to_string()));
        }
        Store::open(path).await
    }

    /// Opens an in-memory database (one connection, so every query sees the same data).
    pub async fn open_in_memory() -> Result<Store> {
        let options = SqliteConnectOptions::from_str("sqlite::memory:")?.foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        Store::from_pool(pool).await
    }

    /// Wraps an existing pool and applies the migrations (used by `#[sqlx::test]`).
    pub async fn from_pool(pool: SqlitePool) -> Result<Store> {
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Store {
            pool,
            recent: Default::default(),
        })
    }

    /// The underlying pool.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}
