//! The PostgreSQL backend of the store: the connection pool, the migrations
//! (`migrations/postgres/`, applied at open), its SQL dialect, the shared operation files
//! of `store/ops/` compiled on it, and what only it does: an import's bulk rows
//! (statistics, per-second buckets, error groups, rejected rows) by `COPY … FROM STDIN`
//! (`bulk.rs`, `copy.rs`), `VACUUM` after deletions (`upkeep.rs`), `LISTEN`/`NOTIFY`.
//!
//! Differences from SQLite: every write transaction is a plain `BEGIN` (PostgreSQL takes row
//! locks, so there is no process-wide writer turn; rows read to be rewritten are locked
//! with `for_update!`); the alert evaluator reads its windows from the database every round
//! (no in-memory copy of recent intervals, which another process writing the same database
//! would make stale).
//!
//! Only [`crate::store`] uses this module; the rest of the code calls [`crate::store::Store`].

pub(super) mod bulk;
mod copy;
pub(super) mod upkeep;

// This backend's SQL where the two databases differ, spliced into the shared operations'
// statements with `concat!` (so each statement stays one literal).

/// The smaller of two SQL expressions: `least!("a", "b")`.
macro_rules! least {
    ($a:literal, $b:literal) => {
        concat!("LEAST(", $a, ", ", $b, ")")
    };
}

/// The larger of two SQL expressions: `greatest!("a", "b")`.
macro_rules! greatest {
    ($a:literal, $b:literal) => {
        concat!("GREATEST(", $a, ", ", $b, ")")
    };
}

/// Locks the rows a `SELECT` inside a write transaction read, until the commit:
/// `concat!("SELECT …", for_update!())`.
macro_rules! for_update {
    () => {
        " FOR UPDATE"
    };
}

/// Membership in the list bound as `$N` (a [`list`]): `in_list!(N)` after an expression.
macro_rules! in_list {
    ($n:literal) => {
        concat!("= ANY($", $n, ")")
    };
}

/// The list bound as `$N` (a [`list`]) as a table `ALIAS` of one column `value`:
/// `each!(N, ALIAS)`.
macro_rules! each {
    ($n:literal, $alias:ident) => {
        concat!(
            "unnest($",
            $n,
            "::text[]) AS ",
            stringify!($alias),
            "(value)"
        )
    };
}

/// A blob as hexadecimal text (lower case): `hex!("column")`.
macro_rules! hex {
    ($col:literal) => {
        concat!("encode(", $col, ", 'hex')")
    };
}

/// The number at a path of keys in a JSON text column, or NULL:
/// `json_f64!("column", "key", "key", …)`.
macro_rules! json_f64 {
    ($col:literal, $first:literal $(, $key:literal)*) => {
        concat!("(", $col, "::jsonb #>> '{", $first, $(",", $key,)* "}')::float8")
    };
}

/// Pushes the text of key `key` of the JSON object in `column` (NULL when absent).
fn push_json_key(q: &mut sqlx::QueryBuilder<Db>, column: &'static str, key: &str) {
    q.push("(")
        .push(column)
        .push("::jsonb ->> ")
        .push_bind(key.to_string())
        .push(")");
}

/// A list of names as bound for `in_list!` and `each!`: a text array.
fn list(names: &[String]) -> &[String] {
    names
}

// The operations written once for both backends (the list is in `store/mod.rs`): each file
// is compiled here, on `Backend`, with the dialect above.
shared_operations!();

/// This backend's database and connection, as the shared operation files name them.
type Db = sqlx::Postgres;
type Conn = sqlx::PgConnection;

/// This backend's store, as the shared operation files name it.
type Backend = PostgresStore;

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::store::Result;

/// Handle to a PostgreSQL database; cheap to clone.
#[derive(Debug, Clone)]
pub struct PostgresStore {
    pool: PgPool,
}

/// A write transaction (see [`PostgresStore::begin_write`]).
pub(super) struct WriteTx {
    pub tx: sqlx::Transaction<'static, sqlx::Postgres>,
}

impl std::ops::Deref for WriteTx {
    type Target = sqlx::PgConnection;
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
    pub async fn commit(self) -> Result<()> {
        self.tx.commit().await?;
        Ok(())
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/database`,
    /// which must exist) and applies the migrations. Two processes migrating at once are
    /// serialised by sqlx's advisory lock.
    pub async fn open(url: &str) -> Result<PostgresStore> {
        let mut options: PgConnectOptions = url.parse()?;
        // Each process's connections are named (`pg_stat_activity.application_name`)
        // unless the URL names them: `harrier <process id>`.
        if options.get_application_name().is_none() {
            options = options.application_name(&format!("harrier {}", std::process::id()));
        }
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(PostgresStore { pool })
    }

    /// Begins a write transaction. Unlike SQLite's, it holds no process-wide turn:
    /// PostgreSQL locks the rows it writes, and concurrent transactions wait on them.
    pub(super) async fn begin_write(&self) -> Result<WriteTx> {
        Ok(WriteTx {
            tx: self.pool.begin().await?,
        })
    }

    /// The figures of every route over several windows ending at `now_ms`, for the alert
    /// evaluator: always read from the database ([`PostgresStore::route_window_figures_sql`]).
    pub async fn route_window_figures(
        &self,
        needs: &[crate::store::WindowNeed],
        now_ms: i64,
    ) -> Result<crate::store::RouteWindows> {
        if needs.is_empty() {
            return Ok(crate::store::RouteWindows::default());
        }
        self.route_window_figures_sql(needs, now_ms).await
    }

    /// Route figures are never answered from memory here (other replicas write the same
    /// tables): always `None`, so `figures_of` reads the database.
    pub(super) async fn held_figures(
        &self,
        _infos: &[crate::store::RouteInfo],
        _window_ms: i64,
        _now_ms: i64,
    ) -> Result<Option<Vec<crate::domain::routes::Figures>>> {
        Ok(None)
    }

    /// Routes are never answered from memory here either: always `None`, so
    /// `route_infos` reads the database.
    pub(super) fn held_infos(
        &self,
        _target_id: Option<i64>,
        _route_id: Option<i64>,
    ) -> Option<Vec<crate::store::RouteInfo>> {
        None
    }

    /// The underlying pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Sends `payload` on `channel` to every session listening on it (`pg_notify`; delivered
    /// when this statement's transaction — its own — commits).
    pub async fn notify(&self, channel: &str, payload: &str) -> Result<()> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(channel)
            .bind(payload)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// A connection of its own (taken from the pool for good) listening on `channel`.
    pub async fn listen(&self, channel: &str) -> Result<sqlx::postgres::PgListener> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool).await?;
        listener.listen(channel).await?;
        Ok(listener)
    }

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// No route intervals are held in memory on PostgreSQL: always `None`.
    pub fn recent_intervals_held(&self) -> Option<(usize, usize, usize)> {
        None
    }
}
