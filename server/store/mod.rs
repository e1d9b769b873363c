//! The store: the only layer that speaks SQL, behind one backend-neutral type.
//!
//! The rest of the code calls [`Store`], whose methods are operations (`insert_runs`,
//! `route_rows`, `record_transition`, …), never SQL, each declared once in a `forward!`
//! block that sends it to the backend the store was opened on. Each backend is a folder
//! (`sqlite/`, `postgres/`) implementing those operations under the same names: the table
//! groups both databases share are written once in `ops/` (SQL with `$1`, `$2`, …
//! placeholders, which both bind by number) and compiled into each backend, which names
//! its store, database and the few SQL fragments that differ (`least!`, `in_list!`, …);
//! the rest (runs, routes, recent intervals) is still one file per backend. Row types and
//! pure helpers are the files beside them (`runs.rs`, `routes.rs`, …). Must not know about
//! HTTP, file formats or the console.

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
        impl Store {
            $(
                $(#[$attr])*
                pub async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    dispatch!(self, db => db.$name($($arg),*).await)
                }
            )*
        }
    };
}

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

// The operations of every backend, each forwarded to the backend the store was opened on.
forward! {
    // alert_groups

    /// Takes notices into groups in one transaction: every entry is added to (or updates)
    /// its group, a new group waiting until its `first_flush_ms`, and the notices
    /// `notice_ids` are marked taken at `now_ms`.
    pub async fn ingest_notices(
        &self,
        notice_ids: &[i64],
        entries: &[GroupEntry],
        now_ms: i64,
    ) -> Result<()>;

    /// Groups whose flush is due at `now_ms`, oldest flush first.
    pub async fn due_groups(&self, now_ms: i64) -> Result<Vec<Group>>;

    /// This database's installation key: `candidate` (a random value the caller made) if
    /// none is stored yet, else the stored one — the same for every process using the
    /// database, for its whole life.
    pub async fn installation_key(&self, candidate: &str) -> Result<String>;

    /// The alerts of one group, by labels.
    pub async fn group_alerts(&self, channel: &str, group_key: &str) -> Result<Vec<GroupAlert>>;

    /// Marks the alerts `fingerprints` of `channel` as told while firing, right before a
    /// message that tells of them is sent: should the sender die before the message is
    /// settled, whoever flushes the group next knows the receiver may have heard of them,
    /// and tells it when they resolve.
    pub async fn mark_told(&self, channel: &str, fingerprints: &[String]) -> Result<()>;

    /// Settles one flush of group (`channel`, `group_key`) in one transaction: logs the
    /// attempt (when a message was tried), records the notification log entry, drops the
    /// flushed resolved alerts (and the group once it is empty), and sets the next flush.
    pub async fn settle_group(
        &self,
        channel: &str,
        group_key: &str,
        result: &FlushResult,
        delivery: Option<&Delivery>,
        now_ms: i64,
    ) -> Result<()>;

    /// Drops the groups (and their alerts) of channels that exist no more: neither in
    /// `config` (the names of `harrier.toml`'s channels) nor stored (`alert_channels`). One
    /// transaction, reading the stored names in it, so a channel renamed or added through
    /// the API meanwhile keeps its groups.
    pub async fn drop_groups_of_unknown_channels(&self, config: &[String]) -> Result<()>;

    /// Adds one attempt to the delivery log (a test notification; group flushes are
    /// logged by [`Store::settle_group`]).
    pub async fn log_delivery(&self, d: &Delivery) -> Result<()>;

    /// The newest delivery-log entry of each of `channels` that has one, by channel name
    /// (one index seek per channel: `alert_group_deliveries_channel`).
    pub async fn last_deliveries(
        &self,
        channels: &[String],
    ) -> Result<std::collections::HashMap<String, Delivery>>;

    /// The delivery log, newest first.
    pub async fn alert_deliveries(&self, limit: i64) -> Result<Vec<Delivery>>;

    // alerts

    /// The rules in force (deleted built-ins left out), by name.
    pub async fn list_alert_rules(&self) -> Result<Vec<StoredRule>>;

    /// One rule in force, by name.
    pub async fn get_alert_rule(&self, name: &str) -> Result<Option<StoredRule>>;

    /// Adds a rule; `false` when a rule of that name is in force. A deleted built-in of
    /// the same name is replaced.
    pub async fn insert_alert_rule(&self, rule: &Rule, origin: &str, now_ms: i64) -> Result<bool>;

    /// Replaces rule `name` (which may be renamed to `rule.name`); its active alerts are
    /// dropped (they belong to the old condition). `false` when no such rule is in force.
    pub async fn update_alert_rule(&self, name: &str, rule: &Rule, now_ms: i64) -> Result<bool>;

    /// Deletes rule `name` and its active alerts (a built-in rule is marked deleted so it
    /// is not seeded again). `false` when no such rule is in force.
    pub async fn delete_alert_rule(&self, name: &str, now_ms: i64) -> Result<bool>;

    /// At start-up: adds the built-in rules that were never stored (a deleted one stays
    /// deleted) and writes the configuration file's rules over any stored rule of the
    /// same name (`origin = config`). Rules the configuration file no longer has, and
    /// built-ins not in `builtin` (`builtin_rules = false`), are removed with their
    /// active alerts, as Prometheus drops the rules of a reloaded file; built-ins
    /// removed that way come back when turned on again.
    pub async fn seed_alert_rules(
        &self,
        builtin: &[Rule],
        config: &[Rule],
        now_ms: i64,
    ) -> Result<()>;

    /// The active alerts (pending and firing), by rule and labels.
    pub async fn list_alerts(&self) -> Result<Vec<Alert>>;

    /// Firing alerts per rule: `(rule, count)`, by rule (the console's nav badge).
    pub async fn firing_counts(&self) -> Result<Vec<(String, i64)>>;

    /// Saves one evaluation round in one transaction: the active alerts of the `rules`
    /// evaluated are replaced by `alerts` (alerts of rules no longer in force are dropped); `transitions` go to the history, and those that
    /// notify (firing, resolved) to the outbox. Returns the outbox ids added.
    pub async fn save_evaluation(
        &self,
        rules: &[String],
        alerts: &[Alert],
        transitions: &[Transition],
        now_ms: i64,
    ) -> Result<Vec<i64>>;

    /// As [`Store::save_evaluation`], only while `fence` is held in its term at `now_ms`
    /// (checked in the same transaction); `None`, nothing saved, when it is not.
    pub async fn save_evaluation_fenced(
        &self,
        fence: Option<&LeaseTerm<'_>>,
        rules: &[String],
        alerts: &[Alert],
        transitions: &[Transition],
        now_ms: i64,
    ) -> Result<Option<Vec<i64>>>;

    /// The history, newest first: at most `limit` rows, of one rule when given.
    pub async fn alert_history(&self, rule: Option<&str>, limit: i64) -> Result<Vec<HistoryRow>>;

    /// The history rows that `filter` selects, newest first, at most `limit`.
    ///
    /// With `from_ms`, each alert identity that was pending or firing at `from_ms` also
    /// gets its last transition before `from_ms` (so a period that began earlier is
    /// known to be open at the start of the range); those rows count towards `limit`.
    pub async fn alert_history_filtered(
        &self,
        filter: &HistoryFilter,
        limit: i64,
    ) -> Result<Vec<HistoryRow>>;

    /// Notifications not yet delivered whose next attempt is due at `now_ms` and that
    /// have had fewer than `max_attempts` attempts, oldest first.
    pub async fn due_notifications(
        &self,
        now_ms: i64,
        max_attempts: i64,
        limit: i64,
    ) -> Result<Vec<Notification>>;

    /// Notifications not yet delivered, oldest first (whatever their retry time).
    pub async fn undelivered_notifications(&self, limit: i64) -> Result<Vec<Notification>>;

    // channels

    /// The stored channels, by name (rows whose JSON no longer reads are logged and left
    /// out).
    pub async fn list_channels(&self) -> Result<Vec<StoredChannel>>;

    /// One stored channel, by name.
    pub async fn get_channel(&self, name: &str) -> Result<Option<StoredChannel>>;

    /// Stores a new channel at `now_ms`; `false` when one of that name is stored.
    pub async fn insert_channel(&self, c: &ChannelSpec, now_ms: i64) -> Result<bool>;

    /// Replaces channel `name` with `c` at `now_ms`, in one transaction. When `c.name`
    /// differs the channel is renamed, and its notification groups and delivery log go
    /// with it (so a rename neither re-sends nor forgets what was sent). `false` when no
    /// channel `name` is stored, or when another stored channel is called `c.name`.
    pub async fn update_channel(&self, name: &str, c: &ChannelSpec, now_ms: i64) -> Result<bool>;

    /// Deletes stored channel `name`; `false` when there is none. Its groups are dropped
    /// by the dispatcher's next pass ([`Store::drop_groups_of_unknown_channels`]); its
    /// delivery log stays.
    pub async fn delete_channel(&self, name: &str) -> Result<bool>;

    /// Deletes the stored channels named in `names` (at start-up: the names
    /// `harrier.toml` now uses, which win); returns the names deleted.
    pub async fn delete_channels_named(&self, names: &[String]) -> Result<Vec<String>>;

    // compare

    /// Every bucket of every scope of a run, one row per scope (by scope, buckets by
    /// start). Packed by the database because sqlx hands rows over one at a time through a
    /// channel (a few µs each): a comparison of ten runs of a dozen labels reads 60,000
    /// buckets, and this way 130 rows.
    pub async fn run_packed_buckets(&self, id: i64) -> Result<Vec<PackedBuckets>>;

    /// A run's stored bootstrap draws (see [`crate::domain::compare::stored`]), one
    /// `(label_ord, blob)` per scope that has them, by scope; only the run total's when
    /// `total_only`.
    pub async fn run_draws(&self, id: i64, total_only: bool) -> Result<Vec<(i64, Vec<u8>)>>;

    /// Stores (or replaces) bootstrap draws of a run's scopes, one `(label_ord, blob)`
    /// each, in one transaction: for runs stored before draws were kept.
    pub async fn put_run_draws(&self, id: i64, draws: &[(i64, Vec<u8>)]) -> Result<()>;

    /// A run's kept capacity: `(key, JSON)` as [`Store::put_run_capacity`] stored them, or
    /// `None`. The caller compares the key with the run's present one.
    pub async fn run_capacity_kept(&self, id: i64) -> Result<Option<(String, String)>>;

    /// Keeps (or replaces) a run's capacity as JSON under `key` (what it was computed from).
    /// Writes that replace the run's buckets drop it ([`Store::replace_run_data`],
    /// [`Store::store_live_changes`]); deleting the run deletes it.
    pub async fn put_run_capacity(&self, id: i64, key: &str, json: &str) -> Result<()>;

    /// The runs of a scenario, oldest first (by start, else import time).
    pub async fn scenario_runs(&self, scenario: &str) -> Result<Vec<RunListRow>>;

    /// Every scenario with its run count, newest activity first.
    pub async fn list_scenarios(&self) -> Result<Vec<ScenarioItem>>;

    /// Pins `run_id` as the baseline of `scenario` (replacing any earlier pin).
    pub async fn set_baseline(&self, scenario: &str, run_id: i64, now_ms: i64) -> Result<()>;

    /// Unpins the baseline of `scenario`; `false` when none was pinned.
    pub async fn clear_baseline(&self, scenario: &str) -> Result<bool>;

    /// The pinned baseline of `scenario`, while that run still belongs to it.
    pub async fn pinned_baseline(&self, scenario: &str) -> Result<Option<i64>>;

    /// Stores one check of a run.
    pub async fn record_check(
        &self,
        run_id: i64,
        baseline_run_id: Option<i64>,
        passed: bool,
        results_json: &str,
        now_ms: i64,
    ) -> Result<()>;

    /// Whether the latest check of each run ever checked passed: `(run id, passed)`.
    pub async fn latest_check_verdicts(&self) -> Result<Vec<(i64, bool)>>;

    /// The latest check of each run of `scenario` that was ever checked.
    pub async fn scenario_checks(&self, scenario: &str) -> Result<Vec<CheckRow>>;

    // mod

    /// Checks that the database answers.
    pub async fn ping(&self) -> Result<()>;

    // recent

    /// The figures of every route over several windows ending at `now_ms`, as
    /// [`Store::route_figures`] computes them, for the alert evaluator. On SQLite: from the
    /// recent intervals held in memory when they cover the windows (loading them first if
    /// needed), else from the database ([`Store::route_window_figures_sql`]); no windows: no
    /// routes, and the memory is dropped (the evaluator has no route rule). On PostgreSQL
    /// always from the database (another process may write it), `from_memory` false.
    pub async fn route_window_figures(
        &self,
        needs: &[WindowNeed],
        now_ms: i64,
    ) -> Result<RouteWindows>;

    // routes

    /// Adds a target; `None` when a target of that name exists.
    pub async fn insert_target(
        &self,
        spec: &TargetSpec,
        origin: &str,
        now_ms: i64,
    ) -> Result<Option<TargetRow>>;

    /// Adds or replaces (by name) a target from the configuration or the built-in one; its
    /// id, status and routes stay when it exists.
    pub async fn upsert_target(
        &self,
        spec: &TargetSpec,
        origin: &str,
        now_ms: i64,
    ) -> Result<TargetRow>;

    /// Every target, by name.
    pub async fn list_targets(&self) -> Result<Vec<TargetRow>>;

    pub async fn get_target(&self, id: i64) -> Result<Option<TargetRow>>;

    /// Deletes a target with its routes and their figures; false when there was none.
    pub async fn delete_target(&self, id: i64) -> Result<bool>;

    /// Deletes targets of `origin` whose names are not in `keep` (a config file's targets
    /// that were removed from it). Returns the ids deleted.
    pub async fn delete_targets_not_in(&self, origin: &str, keep: &[String]) -> Result<Vec<i64>>;

    /// Writes one scrape: the target's status, the routes found and their intervals, and
    /// the 1 min / 1 h rollups, in one transaction. Returns the route ids, in `routes` order.
    pub async fn record_scrape(
        &self,
        target_id: i64,
        status: &ScrapeStatus,
        routes: &[RouteWrite],
    ) -> Result<Vec<i64>>;

    /// Deletes figures past their retention. Returns the rows deleted.
    pub async fn prune_routes(&self, now_ms: i64, retention: &Retention) -> Result<u64>;

    /// Routes with their targets; all of them, or those of `target_id`, or the one `route_id`.
    pub async fn route_infos(
        &self,
        target_id: Option<i64>,
        route_id: Option<i64>,
    ) -> Result<Vec<RouteInfo>>;

    /// Raw intervals with `from_ms < at_ms ≤ to_ms`, by route then time; one route or all.
    pub async fn route_intervals(
        &self,
        route_id: Option<i64>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredInterval>>;

    /// The start of route `route_id`'s first rollup bucket at `resolution_ms`, if any.
    pub async fn first_rollup_ms(&self, route_id: i64, resolution_ms: i64) -> Result<Option<i64>>;

    /// Rollup rows of one route at `resolution_ms` whose buckets overlap `from_ms…to_ms`;
    /// `at_ms` is the bucket start, inflight the mean of the readings.
    pub async fn route_rollups(
        &self,
        route_id: i64,
        resolution_ms: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredInterval>>;

    /// Figures per route over the window ending at `now_ms`: all routes, or those of
    /// `target_id`. See [`Store::figures_of`].
    pub async fn route_figures(
        &self,
        target_id: Option<i64>,
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<(RouteInfo, Figures)>>;

    /// Figures of `infos` over the window ending at `now_ms`: the raw intervals whose
    /// scrape falls in the window. A route with none there (its scrapes are further apart
    /// than the window) is given its last interval when that ended less than twice the
    /// longer of the window and the interval ago, so a 1 min window over 2 min scrapes is
    /// not empty. `scope` must cover `infos` (it bounds the window read).
    ///
    /// Reads only the window (one indexed range of `route_samples`), then the last
    /// interval of the routes the window lacked: the cost follows the routes and the
    /// window, never the stored history.
    pub async fn figures_of(
        &self,
        infos: Vec<RouteInfo>,
        scope: IntervalScope<'_>,
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<(RouteInfo, Figures)>>;

    /// Raw intervals with `from_ms < at_ms ≤ to_ms` of the routes in `scope`, by route then
    /// time.
    pub async fn intervals_in(
        &self,
        scope: IntervalScope<'_>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredInterval>>;

    /// Writes one scrape's process figures `(instance, metric, value)` of target
    /// `target_id` at `at_ms`: the scrape row and the 1 min / 10 min / 1 h buckets (sum,
    /// count, max), in one transaction with multi-row upserts.
    pub async fn record_process(
        &self,
        target_id: i64,
        at_ms: i64,
        figures: &[(String, String, f64)],
    ) -> Result<()>;

    /// The latest process figures of targets `target_ids`: `(target_id, instance, metric,
    /// value, at_ms)`, one per instance and metric (the last scrape that had it).
    pub async fn process_latest(&self, target_ids: &[i64]) -> Result<Vec<ProcessPoint>>;

    /// Process figures of targets `target_ids` at `resolution_ms` (0: per scrape) with
    /// `from_ms ≤ bucket_ms ≤ to_ms`, by instance, metric and time; `mean` = sum / n. With
    /// `metric_prefix`, only the metrics whose name starts with it (`pool_`: the pools).
    pub async fn process_series(
        &self,
        target_ids: &[i64],
        resolution_ms: i64,
        from_ms: i64,
        to_ms: i64,
        metric_prefix: Option<&str>,
    ) -> Result<Vec<ProcessPoint>>;

    /// [`Store::route_window_figures`] from the database: the sums come from one aggregate query
    /// over the longest window (no per-route query, no bucket parsing unless
    /// `need.buckets`), the latest inflight reading and the histogram buckets only for the
    /// windows that ask for them.
    pub async fn route_window_figures_sql(
        &self,
        needs: &[WindowNeed],
        now_ms: i64,
    ) -> Result<RouteWindows>;

    /// Runs whose [start, end] overlaps `from_ms…to_ms`, oldest first.
    pub async fn runs_overlapping(&self, from_ms: i64, to_ms: i64) -> Result<Vec<RunBand>>;

    // runs

    /// Stores runs read from one file in ONE transaction: either every run lands or none.
    /// Returns the new ids in order.
    ///
    /// Each run's bootstrap draws are computed here, before the transaction
    /// (see [`crate::domain::compare::stored`]), and stored with it.
    pub async fn insert_runs(&self, runs: &[(NewRun, &RunData)]) -> Result<Vec<i64>>;

    /// Stores one run in one transaction; returns its id.
    pub async fn insert_run(&self, run: &NewRun, data: &RunData) -> Result<i64>;

    /// Every run, newest first.
    pub async fn list_runs(&self) -> Result<Vec<RunListRow>>;

    /// One run's list row, or `None` if there is no such run.
    pub async fn run_list_item(&self, id: i64) -> Result<Option<RunListRow>>;

    /// One run with its statistics, or `None` if there is no such run.
    pub async fn get_run(&self, id: i64) -> Result<Option<RunDetail>>;

    /// The per-second buckets of a run's label (`None`: the run total), by start time.
    /// Returns `None` when the run has no such label.
    pub async fn run_buckets(&self, id: i64, label: Option<&str>) -> Result<Option<Vec<BucketRow>>>;

    /// The exact response-time distribution of a run's label (`None`: the run total);
    /// `Ok(None)` when the run has no such label, an empty distribution when none was
    /// stored (summary-only runs).
    pub async fn run_distribution(
        &self,
        id: i64,
        label: Option<&str>,
    ) -> Result<Option<Distribution>>;

    /// Every scope's distribution of a run, in scope order (0 = run total), with the
    /// distribution of its failed samples (`None`: not stored — a summary-only run or one
    /// imported before harrier kept it).
    pub async fn run_distributions(
        &self,
        id: i64,
    ) -> Result<Vec<(Distribution, Option<Distribution>)>>;

    /// A run's error groups, most frequent first.
    pub async fn run_errors(&self, id: i64) -> Result<Vec<ErrorRow>>;

    /// The rows a run's import rejected (details of the first ones), by line.
    pub async fn run_rejected(&self, id: i64) -> Result<Vec<RejectedRowRow>>;

    /// Creates a run that is still receiving data (`status = 'live'`), with no aggregates
    /// yet; returns its id.
    /// Marks run `id` failed by alert `rule` at `at_ms` with `value`; `false` when it was
    /// already failed (the first failure stands) or does not exist.
    pub async fn fail_run(
        &self,
        id: i64,
        rule: &str,
        at_ms: i64,
        value: Option<f64>,
    ) -> Result<bool>;

    /// The live runs (status `live`) with their run-total buckets starting in
    /// [`now_ms` − `window_ms`, `now_ms`), summed; one query for all runs.
    pub async fn live_run_windows(&self, window_ms: i64, now_ms: i64) -> Result<Vec<LiveRunWindow>>;

    pub async fn create_live_run(&self, run: &NewRun) -> Result<i64>;

    /// Replaces a run's aggregates (a live run's newest snapshot, or exact figures from
    /// its result file) in one transaction, and sets its status (`live` or `complete`)
    /// and, when given, its tool and source. `false` if there is no such run.
    ///
    /// A `complete` run gets its bootstrap draws (see [`Store::insert_runs`]); a `live`
    /// one has none until it completes.
    pub async fn replace_run_data(
        &self,
        id: i64,
        data: &RunData,
        status: &str,
        tool_source: Option<(&str, &str)>,
    ) -> Result<bool>;

    /// Stores a live run's changes since the previous call, in one transaction: the run's
    /// statistics, error groups and rejected rows replace the stored ones, the changed
    /// buckets replace theirs (by label and second), and the `added` buckets are added to
    /// the stored bucket of their label and second (see [`RunChanges`]). Sets the run's
    /// status (`live` or `complete`). `false` if there is no such run.
    ///
    /// Cost follows the run's labels and the changed seconds, never its length. A run
    /// completed this way has no bootstrap draws: the first comparison that needs them
    /// draws them from the stored buckets and keeps them.
    pub async fn store_live_changes(
        &self,
        id: i64,
        changes: &RunChanges,
        status: &str,
    ) -> Result<bool>;

    /// The open live run streamed under `key` (its sender and run key), or a new one
    /// described by `run` when none is open; `true` when it was created. Whichever
    /// process (replica) receives a stream's points finds the same run: at most one run
    /// per key is `live` at a time (a unique index), and a process that loses the race to
    /// create it uses the other's.
    pub async fn open_live_run(&self, key: &str, run: &NewRun, now_ms: i64) -> Result<(i64, bool)>;

    /// Adds `delta` — a live run's points taken by this process since its previous store,
    /// as a run of their own (statistics, distributions, error groups, rejected rows; its
    /// buckets, all in `delta.added` or `delta.data.buckets`, are added to the stored
    /// ones) — to stored run `id` in one transaction that holds the run's row, and notes
    /// `now_ms` as when the run last received data. See
    /// [`crate::domain::runs::merge::add_delta`] for how figures add up. `false` (nothing
    /// stored) when `id` is not an open live run any more: it was ended or went idle.
    ///
    /// Cost follows the run's labels and the delta's seconds, never the run's length.
    pub async fn add_live_delta(
        &self,
        id: i64,
        delta: &RunChanges,
        limits: &RunLimits,
        now_ms: i64,
    ) -> Result<bool>;

    /// Marks open live runs that received no data since `seen_before_ms` complete and
    /// returns their ids. Any process may call it: a run left open by a replica that
    /// stopped is closed by the others.
    pub async fn close_idle_live_runs(&self, seen_before_ms: i64) -> Result<Vec<i64>>;

    /// Marks the open live run `id` complete; `false` if it is not an open live run.
    pub async fn end_live_run(&self, id: i64) -> Result<bool>;

    /// Marks runs left `live` by a process that stopped before they ended as complete:
    /// those whose last data (a line-protocol run: when it last received points; else its
    /// end time, else its import time) is before `quiet_since_ms`
    /// (`i64::MAX`: every live run, for the only process of a SQLite file); returns how
    /// many.
    pub async fn close_stale_live_runs(&self, quiet_since_ms: i64) -> Result<u64>;

    /// Changes a run's name, scenario, notes and/or tags (each only when given; `tags`
    /// replaces the whole set). `false` if there is no such run.
    pub async fn update_run(&self, id: i64, patch: &RunPatch) -> Result<bool>;

    /// Deletes a run and everything stored for it; `false` if there was no such run.
    pub async fn delete_run(&self, id: i64) -> Result<bool>;

    /// Number of stored runs.
    pub async fn count_runs(&self) -> Result<i64>;

    // sign-in: users, sessions, tokens, share links, audit log (`store::auth`)

    /// How many local users exist (sign-in is on when there is at least one).
    pub async fn count_users(&self) -> Result<i64>;

    /// Adds a user; `None` when the name is taken.
    pub async fn insert_user(
        &self,
        name: &str,
        role: &str,
        password_hash: &str,
        now_ms: i64,
    ) -> Result<Option<i64>>;

    /// Changes a user's role and/or password hash (a new password ends the user's sessions); `false` when there is no such user.
    pub async fn update_user(
        &self,
        name: &str,
        role: Option<&str>,
        password_hash: Option<&str>,
    ) -> Result<bool>;

    /// The user of that name.
    pub async fn user_by_name(&self, name: &str) -> Result<Option<auth::UserRow>>;

    /// Every user, by name.
    pub async fn list_users(&self) -> Result<Vec<auth::UserRow>>;

    /// Deletes a user and its sessions, and revokes the tokens and share links it made;
    /// `false` when there is no such user.
    pub async fn delete_user(&self, name: &str, now_ms: i64) -> Result<bool>;

    /// Stores a new session (its id hashed) of `user_id`; drops expired sessions first.
    pub async fn insert_session(&self, id_hash: &str, user_id: i64, now_ms: i64) -> Result<()>;

    /// The user of a live session (neither idle nor absolute lifetime passed at `now_ms`); refreshes its last-seen time at most once a minute.
    pub async fn session_user(&self, id_hash: &str, now_ms: i64) -> Result<Option<auth::UserRow>>;

    /// Ends a session.
    pub async fn delete_session(&self, id_hash: &str) -> Result<()>;

    /// Stores a single sign-on under way (and drops those older than
    /// [`crate::domain::oidc::LOGIN_TTL_MS`]).
    pub async fn insert_oidc_login(&self, login: &auth::OidcLoginRow) -> Result<()>;

    /// Deletes and returns the sign-on under way of `state_hash`, if it is one started
    /// within [`crate::domain::oidc::LOGIN_TTL_MS`] of `now_ms`: each can be finished once.
    pub async fn take_oidc_login(
        &self,
        state_hash: &str,
        now_ms: i64,
    ) -> Result<Option<auth::OidcLoginRow>>;

    /// The user of provider subject `subject`, its role set to `role`; or, when there is
    /// none, a new user `name` of that subject (no password). `None` when `name` is
    /// taken by another user (a local one, or another subject's).
    pub async fn oidc_user(
        &self,
        subject: &str,
        name: &str,
        role: &str,
        now_ms: i64,
    ) -> Result<Option<auth::UserRow>>;

    /// Counts one failed sign-in under each key (`user:NAME`, `client:ADDR`); drops failures older than the throttling window.
    pub async fn record_sign_in_failure(&self, keys: &[String], now_ms: i64) -> Result<()>;

    /// Failed sign-ins under `key` since `since_ms`: the count and the oldest time.
    pub async fn sign_in_failures(&self, key: &str, since_ms: i64) -> Result<(i64, Option<i64>)>;

    /// Stores a machine token (its secret hashed); returns its id.
    pub async fn insert_token(
        &self,
        name: &str,
        scope: &str,
        secret_hash: &str,
        created_by: &str,
        now_ms: i64,
        expires_at_ms: Option<i64>,
    ) -> Result<i64>;

    /// The token of that id, revoked and expired ones included.
    pub async fn token_by_id(&self, id: i64) -> Result<Option<auth::TokenRow>>;

    /// Every token, newest first.
    pub async fn list_tokens(&self) -> Result<Vec<auth::TokenRow>>;

    /// Records a token's use at `now_ms` (written at most once a minute).
    pub async fn touch_token(&self, id: i64, now_ms: i64) -> Result<()>;

    /// Revokes a token; `false` when there is no such live token.
    pub async fn revoke_token(&self, id: i64, now_ms: i64) -> Result<bool>;

    /// Stores a share link (its secret hashed); returns its id.
    pub async fn insert_share(
        &self,
        subject: &str,
        secret_hash: &str,
        created_by: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<i64>;

    /// The share link of that id.
    pub async fn share_by_id(&self, id: i64) -> Result<Option<auth::ShareRow>>;

    /// Every share link, newest first.
    pub async fn list_shares(&self) -> Result<Vec<auth::ShareRow>>;

    /// Revokes a share link; `false` when there is no such live link.
    pub async fn revoke_share(&self, id: i64, now_ms: i64) -> Result<bool>;

    /// Appends one entry to the audit log.
    pub async fn insert_audit(
        &self,
        at_ms: i64,
        who: &str,
        method: &str,
        path: &str,
        status: i64,
        client: Option<&str>,
    ) -> Result<()>;

    /// Audit entries newest first, older than `before_id` when given.
    pub async fn list_audit(
        &self,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<auth::AuditRow>>;

    /// Takes or renews lease `name` for `holder` until `now_ms + ttl_ms`: the term held
    /// (the same while renewed, one more at every change of holder), or `None` while
    /// another holder's lease runs.
    pub async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<Option<i64>>;

    /// Whether `holder` still holds lease `name` in `term` at `now_ms`.
    pub async fn lease_held(
        &self,
        name: &str,
        holder: &str,
        term: i64,
        now_ms: i64,
    ) -> Result<bool>;

    /// Holders of the unexpired leases whose names start with `prefix`, sorted (the live
    /// replicas, when each holds `replica:ID`).
    pub async fn lease_holders(&self, prefix: &str, now_ms: i64) -> Result<Vec<String>>;

    /// Deletes the leases named `prefix…` that expired before `expired_before_ms`; returns
    /// how many.
    pub async fn forget_leases(&self, prefix: &str, expired_before_ms: i64) -> Result<u64>;

    /// Gives lease `name` up (if `holder` has it): another may take it at once.
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<()>;

    // silences

    /// Stores a checked silence; returns it as listed at `now_ms`.
    pub async fn insert_silence(&self, s: &SilenceSpec, now_ms: i64) -> Result<Silence>;

    /// The silences, newest first, with their state at `now_ms`; silences expired for
    /// longer than [`SILENCE_RETENTION_MS`] are deleted first.
    pub async fn list_silences(&self, now_ms: i64) -> Result<Vec<Silence>>;

    /// The silences active at `now_ms` (started, not ended).
    pub async fn active_silences(&self, now_ms: i64) -> Result<Vec<Silence>>;

    /// Expires silence `id` at `now_ms` (a pending one ends before it starts); `false`
    /// when there is no such silence. An already expired silence is left as it is.
    pub async fn expire_silence(&self, id: i64, now_ms: i64) -> Result<bool>;
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
