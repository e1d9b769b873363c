//! What only the SQLite backend does around the route operations of `ops/routes.rs`: keep
//! the recent intervals held in memory (`recent.rs`) in step with every write, and give
//! pruned pages back to the file system.

use std::collections::HashMap;

use super::SqliteStore;
use crate::store::routes::{RollupDb, RouteWrite};

/// The current rollup row of each route and resolution, as this process last wrote it: a
/// scrape adds its intervals to these instead of reading them back (this process is the
/// only writer of its SQLite file). A route that is not held, or whose last write might
/// not have been committed, is read from SQLite as before, and then held.
#[derive(Debug, Default)]
pub(super) struct HeldRollups {
    /// `(route id, resolution ms)` → the row of its latest bucket.
    rows: HashMap<(i64, i64), RollupDb>,
    /// The token of rows put here before their transaction's commit and not yet known to
    /// be committed. Seen by the next write, it means that commit failed or was cut off
    /// (or is a moment from being confirmed): nothing held can be trusted then.
    pending: Option<u64>,
    next: u64,
}

impl SqliteStore {
    /// Targets were added, changed or deleted: the recent intervals are loaded again.
    pub(super) fn targets_changed(&self) {
        self.recent.invalidate();
        self.forget_rollups();
    }

    /// The rows of `ids` at `resolution` in the bucket starting at `bucket_ms`, as held —
    /// a route whose held row is of an earlier bucket has none yet in this one. `None`
    /// when any of them is not known here: read them from SQLite.
    pub(super) fn held_rollups(
        &self,
        resolution: i64,
        bucket_ms: i64,
        ids: &[i64],
    ) -> Option<Vec<RollupDb>> {
        let mut held = self.rollups.lock().unwrap_or_else(|e| e.into_inner());
        if held.pending.is_some() {
            held.rows.clear();
            held.pending = None;
            return None;
        }
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match held.rows.get(&(*id, resolution)) {
                Some(r) if r.bucket_ms == bucket_ms => out.push(r.clone()),
                Some(r) if r.bucket_ms < bucket_ms => {}
                _ => return None,
            }
        }
        Some(out)
    }

    /// Rows `(resolution, row)` written by a transaction about to commit: held, and
    /// trusted once [`Self::rollups_committed`] gets the token returned.
    pub(super) fn rollups_staged(&self, rows: impl IntoIterator<Item = (i64, RollupDb)>) -> u64 {
        let mut held = self.rollups.lock().unwrap_or_else(|e| e.into_inner());
        if held.pending.take().is_some() {
            held.rows.clear();
        }
        for (resolution, r) in rows {
            held.rows.insert((r.route_id, resolution), r);
        }
        held.next += 1;
        let token = held.next;
        held.pending = Some(token);
        token
    }

    /// The transaction of `token` committed.
    pub(super) fn rollups_committed(&self, token: u64) {
        let mut held = self.rollups.lock().unwrap_or_else(|e| e.into_inner());
        if held.pending == Some(token) {
            held.pending = None;
        }
    }

    fn forget_rollups(&self) {
        let mut held = self.rollups.lock().unwrap_or_else(|e| e.into_inner());
        held.rows.clear();
        held.pending = None;
    }

    /// A scrape of `target_id` was committed (`ids` in `routes` order): its intervals are
    /// held.
    pub(super) fn scraped(
        &self,
        target_id: i64,
        up: bool,
        at_ms: i64,
        routes: &[RouteWrite],
        ids: &[i64],
    ) {
        self.recent.record(target_id, up, at_ms, routes, ids);
    }

    /// Raw intervals before `before_ms` were deleted.
    pub(super) fn pruned(&self, before_ms: i64) {
        self.recent.forget_before(before_ms);
        self.forget_rollups();
    }

    /// After pruning route figures, the freed pages go back to the file system, as after a
    /// run's deletion (see `delete_run`): moved out of the file's end, then the WAL
    /// checkpointed and cut. A failure is logged: the figures are deleted either way.
    pub(super) async fn reclaim_route_space(&self) {
        for pragma in [
            "PRAGMA incremental_vacuum",
            "PRAGMA wal_checkpoint(TRUNCATE)",
        ] {
            if let Err(e) = sqlx::query(pragma).execute(&self.pool).await {
                tracing::warn!(error = %e, "{pragma} after pruning route figures failed");
            }
        }
    }
}
