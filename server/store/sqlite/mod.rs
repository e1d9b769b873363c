//! The SQLite backend of the store: the connection pool and the writer turn, the
//! migrations (`migrations/sqlite/`, applied at open), its SQL dialect, the shared
//! operation files of `store/ops/` compiled on it, and what only it does: a run's rows in
//! multi-row statements (`bulk.rs`), the recent route intervals held in memory
//! (`recent.rs`) and kept in step with every write (`upkeep.rs`), pages given back to the
//! file system after deletions. Every import is one transaction, so an import that fails
//! leaves nothing behind.
//!
//! Only [`crate::store`] uses this module; the rest of the code calls [`crate::store::Store`].

pub(super) mod bulk;
pub(super) mod recent;
pub(super) mod upkeep;

// This backend's SQL where the two databases differ, spliced into the shared operations'
// statements with `concat!` (so each statement stays one literal).

/// The smaller of two SQL expressions: `least!("a", "b")`.
macro_rules! least {
    ($a:literal, $b:literal) => {
        concat!("MIN(", $a, ", ", $b, ")")
    };
}

/// The larger of two SQL expressions: `greatest!("a", "b")`.
macro_rules! greatest {
    ($a:literal, $b:literal) => {
        concat!("MAX(", $a, ", ", $b, ")")
    };
}

/// Locks the rows a `SELECT` inside a write transaction read, until the commit:
/// `concat!("SELECT …", for_update!())`. Empty: the writer holds the whole database.
macro_rules! for_update {
    () => {
        ""
    };
}

/// Membership in the list bound as `$N` (a [`list`]): `in_list!(N)` after an expression.
macro_rules! in_list {
    ($n:literal) => {
        concat!("IN (SELECT value FROM json_each($", $n, "))")
    };
}

/// The list bound as `$N` (a [`list`]) as a table `ALIAS` of one column `value`:
/// `each!(N, ALIAS)`.
macro_rules! each {
    ($n:literal, $alias:ident) => {
        concat!("json_each($", $n, ") AS ", stringify!($alias))
    };
}

/// A blob as hexadecimal text (upper case): `hex!("column")`.
macro_rules! hex {
    ($col:literal) => {
        concat!("hex(", $col, ")")
    };
}

/// The number at a path of keys in a JSON text column, or NULL:
/// `json_f64!("column", "key", "key", …)`.
macro_rules! json_f64 {
    ($col:literal $(, $key:literal)+) => {
        concat!("json_extract(", $col, ", '$", $(".", $key,)+ "')")
    };
}

/// Pushes the text of key `key` of the JSON object in `column` (NULL when absent).
fn push_json_key(q: &mut sqlx::QueryBuilder<Db>, column: &'static str, key: &str) {
    // A JSON path with the name quoted, so any key is one key.
    let path = format!("$.\"{}\"", key.replace('"', ""));
    q.push("json_extract(")
        .push(column)
        .push(", ")
        .push_bind(path)
        .push(")");
}

/// A list of names as bound for `in_list!` and `each!`: a JSON array.
fn list(names: &[String]) -> String {
    serde_json::to_string(names).unwrap_or_else(|_| "[]".into())
}

// The operations written once for both backends (the list is in `store/mod.rs`): each file
// is compiled here, on `Backend`, with the dialect above.
shared_operations!();
#[cfg(test)]
mod alerts_tests;

/// This backend's database and connection, as the shared operation files name them.
type Db = sqlx::Sqlite;
type Conn = sqlx::SqliteConnection;

/// This backend's store, as the shared operation files name it.
type Backend = SqliteStore;

use sqlx::SqlitePool;
use sqlx::sqlite::{
    SqliteAutoVacuum, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use crate::store::{Result, StoreError};

/// Handle to harrier's database; cheap to clone.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// Recent route intervals held for the alert evaluator.
    recent: std::sync::Arc<recent::Recent>,
    /// Each route's current rollup rows as this process last wrote them (`upkeep.rs`).
    rollups: std::sync::Arc<std::sync::Mutex<upkeep::HeldRollups>>,
    /// Held by every write transaction of this process: SQLite lets one writer in at a
    /// time, and writers that meet in SQLite wait at most the busy time-out (then fail
    /// with "database is locked"); queued here they wait their turn however long the
    /// transaction ahead takes (a big import), in arrival order.
    writer: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// A write transaction and this process's writer turn, held together (see
/// [`SqliteStore::begin_write`]).
pub(super) struct WriteTx {
    pub tx: sqlx::Transaction<'static, sqlx::Sqlite>,
    _turn: tokio::sync::OwnedMutexGuard<()>,
}

impl std::ops::Deref for WriteTx {
    type Target = sqlx::SqliteConnection;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl std::ops::DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

impl WriteTx {
    /// Commits; the writer turn is given up after the commit.
    pub async fn commit(self) -> Result<()> {
        self.tx.commit().await?;
        Ok(())
    }
}

/// An error of opening a new file while another process opens it too: `SQLITE_BUSY`
/// ("database is locked") or a migration that ran into the other's.
fn is_open_race(e: &StoreError) -> bool {
    match e {
        StoreError::Db(sqlx::Error::Database(d)) => d.code().as_deref() == Some("5"),
        StoreError::Migrate(_) => true,
        _ => false,
    }
}

impl SqliteStore {
    /// Opens (creating if missing) the SQLite file at `path` in WAL mode and applies the
    /// migrations.
    pub async fn open(path: &Path) -> Result<SqliteStore> {
        // Pages are read through a memory map (up to 256 MiB) and each connection caches
        // 16 MiB: the alert evaluator reads a window of every route each round, and page
        // reads through pread dominated its profile (bench/alerts_eval.sh).
        // Incremental auto-vacuum (set before the first table of a new file; migration 0016
        // converts an older file) lets a run's deletion return its pages to the file
        // system (see `runs.rs`, `delete_run`).
        // The WAL is checkpointed every 10,000 pages (~40 MiB) instead of SQLite's 1,000: a
        // scrape changes a few pages per route, and a checkpoint writes each page changed since
        // the last one back into the file once, so fewer checkpoints write fewer bytes
        // (1,000 routes scraped every second: 16 → 11 MB/s, bench/route_scrape_peer.sh).
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .auto_vacuum(SqliteAutoVacuum::Incremental)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            .pragma("mmap_size", "268435456")
            .pragma("cache_size", "-16384")
            .pragma("wal_autocheckpoint", "10000");
        // Two processes opening a new file at once: the first connection's switch to WAL
        // needs the file to itself, so the other gets "database is locked" at once (the
        // busy time-out does not cover it); and both may see no migration applied, so the
        // second's CREATE TABLE fails. Either way, close everything and open again: by
        // then the other has finished.
        let mut tries = 0u64;
        loop {
            let attempt = async {
                let pool = SqlitePoolOptions::new()
                    .max_connections(8)
                    .connect_with(options.clone())
                    .await?;
                if let Err(e) = sqlx::migrate!("./migrations/sqlite").run(&pool).await {
                    pool.close().await;
                    return Err(StoreError::from(e));
                }
                Ok(pool)
            };
            match attempt.await {
                Ok(pool) => return Ok(SqliteStore::wrap(pool)),
                Err(e) if tries < 5 && is_open_race(&e) => {
                    tries += 1;
                    tracing::debug!(error = %e, "opening the database raced another process; trying again");
                    tokio::time::sleep(Duration::from_millis(100 * tries)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Opens an existing database file (for commands that only read); a missing file is
    /// [`StoreError::Missing`] instead of a new, empty database.
    pub async fn open_existing(path: &Path) -> Result<SqliteStore> {
        if !path.exists() {
            return Err(StoreError::Missing(path.display().to_string()));
        }
        SqliteStore::open(path).await
    }

    /// Opens an in-memory database (one connection, so every query sees the same data).
    pub async fn open_in_memory() -> Result<SqliteStore> {
        let options = SqliteConnectOptions::from_str("sqlite::memory:")?.foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await?;
        SqliteStore::from_pool(pool).await
    }

    /// Wraps an existing pool and applies the migrations (used by `#[sqlx::test]`).
    pub async fn from_pool(pool: SqlitePool) -> Result<SqliteStore> {
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(SqliteStore::wrap(pool))
    }

    fn wrap(pool: SqlitePool) -> SqliteStore {
        SqliteStore {
            pool,
            recent: Default::default(),
            rollups: Default::default(),
            writer: Default::default(),
        }
    }

    /// Begins a write transaction (`BEGIN IMMEDIATE`: the write lock is taken at once, so
    /// a transaction that reads first never fails upgrading) after this process's writer
    /// turn.
    pub(super) async fn begin_write(&self) -> Result<WriteTx> {
        let turn = self.writer.clone().lock_owned().await;
        let tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        Ok(WriteTx { tx, _turn: turn })
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
