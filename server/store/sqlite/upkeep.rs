//! What only the SQLite backend does around the route operations of `ops/routes.rs`: keep
//! the recent intervals held in memory (`recent.rs`) in step with every write, and give
//! pruned pages back to the file system.

use super::SqliteStore;
use crate::store::routes::RouteWrite;

impl SqliteStore {
    /// Targets were added, changed or deleted: the recent intervals are loaded again.
    pub(super) fn targets_changed(&self) {
        self.recent.invalidate();
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
