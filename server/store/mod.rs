//! The store: the only layer that speaks SQL, behind one backend-neutral type.
//!
//! The rest of the code calls [`Store`], whose methods are operations (`insert_runs`,
//! `route_rows`, `record_transition`, …), never SQL. The tables come in groups (runs,
//! routes, alerts, channels, …): a group's file here (`runs.rs`, `alerts.rs`, …) holds its
//! row types and declares its operations in a `forward!` block, which sends each call to
//! the backend the store was opened on; `ops/NAME.rs` writes the group's operations once
//! for both databases (SQL with `$1`, `$2`, … placeholders, which both bind by number),
//! compiled into each backend by `shared_operations!`. Each backend is a folder
//! (`sqlite/`, `postgres/`) that names its store, database and the few SQL fragments that
//! differ (`least!`, `in_list!`, …), and keeps what only it does (SQLite's writer turn and
//! in-memory recent intervals, PostgreSQL's COPY, LISTEN/NOTIFY). Must not know about
//! HTTP, file formats or the console.
//!
//! A new table: its two migrations (`migrations/sqlite/`, `migrations/postgres/`), its
//! group's file here (row type and operation declarations) and `ops/` file; a new group
//! also adds a line to `shared_operations!` and its `mod` line here.

pub use crate::domain::alerts::channel::{Group, GroupAlert};
pub use crate::domain::runs::NewRun;
pub use alert_groups::{Delivery, FlushResult, GroupEntry};
pub use alerts::{HistoryFilter, HistoryRow, LeaseTerm, Notification, StoredRule};
pub use channels::StoredChannel;
pub use compare::{CheckRow, PackedBuckets, ScenarioItem};
pub use recent::{MAX_WINDOW_MS, RouteSubject, RouteWindows, subject_labels};
pub use routes::{
    BUILTIN_ORIGIN, HOUR_MS, IntervalScope, MINUTE_MS, ProcessPoint, ROLLUPS_MS, Retention,
    RouteInfo, RouteWrite, RunBand, ScrapeStatus, StoredInterval, TEN_MINUTES_MS, TargetRow,
    TargetSpec, WindowNeed, url_instance,
};
pub use runs::{
    BucketRow, ErrorRow, FailedBy, LiveRunWindow, RejectedRowRow, RunDetail, RunListRow, RunPatch,
};
pub use silences::SILENCE_RETENTION_MS;

use std::path::{Path, PathBuf};

use sqlx::SqlitePool;

// The names the groups' operation declarations use: `forward!` brings this module's names
// into scope where it declares them.
use crate::domain::alerts::channel::ChannelSpec;
use crate::domain::alerts::eval::{Alert, Transition};
use crate::domain::alerts::rule::Rule;
use crate::domain::alerts::silence::{Silence, SilenceSpec};
use crate::domain::routes::Figures;
use crate::domain::runs::distribution::Distribution;
use crate::domain::runs::{RunChanges, RunData, RunLimits};

/// Handle to harrier's database; cheap to clone. Its methods are the store's operations;
/// each is answered by the backend the store was opened on.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend,
}

/// The database behind a [`Store`]. A backend is a folder of this module implementing every
/// operation under the same name and signature; [`dispatch!`] sends each call to it.
#[derive(Debug, Clone)]
enum Backend {
    Sqlite(sqlite::SqliteStore),
    Postgres(postgres::PostgresStore),
}

/// Calls one operation on the store's backend: `dispatch!(self, db => db.op(args).await)`.
/// A new backend adds one arm here and nowhere else.
macro_rules! dispatch {
    ($store:ident, $db:ident => $call:expr) => {
        match &$store.backend {
            Backend::Sqlite($db) => $call,
            Backend::Postgres($db) => $call,
        }
    };
}

/// Declares store operations on [`Store`], each sent to the backend's method of the same
/// name and arguments: `forward! { /// docs  pub async fn op(&self, a: A) -> Result<T>; … }`.
/// A backend implements each operation under that name (most of them once for both, in
/// the shared operation files).
macro_rules! forward {
    ($(
        $(#[$attr:meta])*
        pub async fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ret:ty;
    )*) => {
        // In a block of its own with the store module's names in scope, so a group's file
        // declares its operations with the types the store exports.
        const _: () = {
            #[allow(unused_imports)]
            use $crate::store::*;
            impl Store {
                $(
                    $(#[$attr])*
                    pub async fn $name(&self $(, $arg: $ty)*) -> $ret {
                        dispatch!(self, db => db.$name($($arg),*).await)
                    }
                )*
            }
        };
    };
}

/// The operation files written once for both databases (`ops/NAME.rs`, SQL with `$1`, `$2`,
/// … placeholders), compiled into each backend by `shared_operations!()` in its `mod.rs`,
/// after the backend has named its `Backend`, `Db`, `Conn` and its SQL dialect. A new
/// table group adds one line here.
macro_rules! shared_operations {
    () => {
        shared_operations! {
            alert_groups "../ops/alert_groups.rs",
            alerts "../ops/alerts.rs",
            auth "../ops/auth.rs",
            channels "../ops/channels.rs",
            compare "../ops/compare.rs",
            routes "../ops/routes.rs",
            runs "../ops/runs.rs",
            silences "../ops/silences.rs",
        }
    };
    ($($name:ident $path:literal,)*) => {
        $(
            #[path = $path]
            #[allow(clippy::duplicate_mod)] // one file, compiled once per backend
            pub(super) mod $name;
        )*
    };
}

// The table groups: each `NAME.rs` holds the group's row types and declares its operations
// (`forward!`); `ops/NAME.rs` writes them once for both backends.
mod alert_groups;
mod alerts;
pub mod auth;
mod channels;
mod compare;
pub mod migrate;
mod postgres;
mod recent;
mod routes;
mod runs;
mod silences;
mod sqlite;

/// Wake-ups from the processes sharing this database (see [`Store::listen`]).
pub struct Listener {
    inner: sqlx::postgres::PgListener,
}

impl Listener {
    /// The next wake-up's payload. `Ok(None)` when the connection was lost and has been
    /// made again: wake-ups sent in between are gone, so what the caller derives from
    /// them must be read afresh. An error when the database cannot be reached (the next
    /// call tries again).
    pub async fn next(&mut self) -> Result<Option<String>> {
        Ok(self
            .inner
            .try_recv()
            .await?
            .map(|n| n.payload().to_string()))
    }
}

/// The exclusive lock of a database file held by `harrier serve` for its whole life: a
/// second `serve` on the same file stops before it changes anything. Released when
/// dropped (and by the operating system when the process ends, however it ends).
#[derive(Debug)]
pub struct ServeLock {
    _file: std::fs::File,
}

/// Takes the serving lock of the SQLite database at `db`: an exclusive `flock` on
/// `{db}.lock` (created if missing). [`StoreError::InUse`] when another process holds it.
pub fn lock_for_serving(db: &Path) -> Result<ServeLock> {
    let path = format!("{}.lock", db.display());
    let lock_err = |error| StoreError::Lock {
        db: db.display().to_string(),
        error,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(lock_err)?;
    match file.try_lock() {
        Ok(()) => Ok(ServeLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::InUse(db.display().to_string())),
        Err(std::fs::TryLockError::Error(e)) => Err(lock_err(e)),
    }
}

/// Where the store lives: `sqlite:PATH` (a file, created if missing) or
/// `postgres://user:password@host:port/database` (an existing PostgreSQL database).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    Sqlite(PathBuf),
    Postgres(String),
}

impl DatabaseUrl {
    /// Reads `sqlite:PATH` (also `sqlite://PATH`), `postgres://…` or `postgresql://…`;
    /// `Err` says what is accepted.
    pub fn parse(text: &str) -> std::result::Result<DatabaseUrl, String> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err("sqlite: needs a file path, e.g. sqlite:harrier.db".into());
            }
            return Ok(DatabaseUrl::Sqlite(PathBuf::from(path)));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(DatabaseUrl::Postgres(text.to_string()));
        }
        Err(format!(
            "unsupported database URL {:?}: expected sqlite:PATH or postgres://user@host:port/database",
            crate::domain::secrets::mask_url(text)
        ))
    }

    /// The database a `--db` value names: a `postgres://…`, `postgresql://…` or `sqlite:…`
    /// URL when it is one (people pass URLs to `--db` too), else the SQLite file at that
    /// path.
    pub fn from_db_arg(db: &Path) -> DatabaseUrl {
        match db.to_str().map(DatabaseUrl::parse) {
            Some(Ok(url)) => url,
            _ => DatabaseUrl::Sqlite(db.to_path_buf()),
        }
    }

    /// The database as shown to people and in logs: the file path, or the URL with its
    /// password masked.
    pub fn shown(&self) -> String {
        match self {
            DatabaseUrl::Sqlite(path) => std::fs::canonicalize(path)
                .unwrap_or_else(|_| path.clone())
                .display()
                .to_string(),
            DatabaseUrl::Postgres(url) => crate::domain::secrets::mask_url(url),
        }
    }
}

impl std::str::FromStr for DatabaseUrl {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        DatabaseUrl::parse(s)
    }
}

impl<'de> serde::Deserialize<'de> for DatabaseUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        DatabaseUrl::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl Store {
    /// Opens the database at `url`, creating a missing SQLite file, and applies that
    /// backend's migrations (`migrations/sqlite/` or `migrations/postgres/`). A PostgreSQL
    /// database must exist; its tables are created on first open.
    pub async fn connect(url: &DatabaseUrl) -> Result<Store> {
        match url {
            DatabaseUrl::Sqlite(path) => Store::open(path).await,
            DatabaseUrl::Postgres(url) => Ok(Store {
                backend: Backend::Postgres(postgres::PostgresStore::open(url).await?),
            }),
        }
    }

    /// As [`Store::connect`], but a missing SQLite file is [`StoreError::Missing`] (for
    /// commands that only read).
    pub async fn connect_existing(url: &DatabaseUrl) -> Result<Store> {
        match url {
            DatabaseUrl::Sqlite(path) => Store::open_existing(path).await,
            other => Store::connect(other).await,
        }
    }

    /// Opens (creating if missing) the SQLite file at `path` in WAL mode and applies the
    /// migrations.
    pub async fn open(path: &Path) -> Result<Store> {
        Ok(Store::sqlite(sqlite::SqliteStore::open(path).await?))
    }

    /// Opens an existing database file (for commands that only read); a missing file is
    /// [`StoreError::Missing`] instead of a new, empty database.
    pub async fn open_existing(path: &Path) -> Result<Store> {
        Ok(Store::sqlite(
            sqlite::SqliteStore::open_existing(path).await?,
        ))
    }

    /// Opens an in-memory SQLite database (one connection, so every query sees the same
    /// data).
    pub async fn open_in_memory() -> Result<Store> {
        Ok(Store::sqlite(sqlite::SqliteStore::open_in_memory().await?))
    }

    /// Wraps an existing SQLite pool and applies the migrations (used by `#[sqlx::test]`).
    pub async fn from_pool(pool: SqlitePool) -> Result<Store> {
        Ok(Store::sqlite(sqlite::SqliteStore::from_pool(pool).await?))
    }

    /// The PostgreSQL pool, for tests that must reach under the operations. `None` on
    /// another backend.
    #[doc(hidden)]
    pub fn postgres_pool(&self) -> Option<&sqlx::PgPool> {
        match &self.backend {
            Backend::Postgres(db) => Some(db.pool()),
            Backend::Sqlite(_) => None,
        }
    }

    /// Whether other processes may share this database (PostgreSQL: replicas); SQLite's
    /// file belongs to one `serve`.
    pub fn shared(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
    }

    /// Wakes the other processes on this database listening on `channel` (see
    /// [`Store::listen`]) with `payload` (PostgreSQL caps it below 8,000 bytes: callers
    /// send references, not data). Nothing on SQLite, where one process owns the file.
    pub async fn notify(&self, channel: &str, payload: &str) -> Result<()> {
        match &self.backend {
            Backend::Postgres(db) => db.notify(channel, payload).await,
            Backend::Sqlite(_) => Ok(()),
        }
    }

    /// Listens for [`Store::notify`] wake-ups on `channel` from every process on this
    /// database (PostgreSQL `LISTEN`, on a connection of its own); `None` on SQLite.
    pub async fn listen(&self, channel: &str) -> Result<Option<Listener>> {
        match &self.backend {
            Backend::Postgres(db) => Ok(Some(Listener {
                inner: db.listen(channel).await?,
            })),
            Backend::Sqlite(_) => Ok(None),
        }
    }

    fn sqlite(db: sqlite::SqliteStore) -> Store {
        Store {
            backend: Backend::Sqlite(db),
        }
    }

    /// The SQLite pool, for tests that must reach under the operations (to damage a row,
    /// or read a column no operation returns). `None` on another backend.
    #[doc(hidden)]
    pub fn sqlite_pool(&self) -> Option<&SqlitePool> {
        match &self.backend {
            Backend::Sqlite(db) => Some(db.pool()),
            Backend::Postgres(_) => None,
        }
    }

    /// The route intervals held in memory for the alert evaluator: routes, intervals and
    /// their approximate size in bytes; `None` until the first round loads them.
    pub fn recent_intervals_held(&self) -> Option<(usize, usize, usize)> {
        dispatch!(self, db => db.recent_intervals_held())
    }
}

// Operations of no table group.
forward! {
    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<()>;
}

/// Store failures: the database could not be opened, migrated or queried.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    /// Another `harrier serve` holds the database file's lock.
    #[error(
        "another harrier serve is using the database {0} (it holds {0}.lock): stop it, or pass --db for another database"
    )]
    InUse(String),
    /// The lock file next to the database cannot be created or locked.
    #[error("cannot lock the database {db}: {error}")]
    Lock { db: String, error: std::io::Error },
    /// The database file is missing (read-only commands never create one).
    #[error("no database at {0}: import a run first, or pass --db / set db in harrier.toml")]
    Missing(String),
    /// Data that an operation cannot take as it is (the message says what and where).
    #[error("{0}")]
    Invalid(String),
    /// A write that kept losing to other writers of the same rows (the message says which
    /// and what was tried).
    #[error("database: {0}")]
    Conflict(String),
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
