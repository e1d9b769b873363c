//! What only the PostgreSQL backend does around the route operations of `ops/routes.rs`:
//! vacuum after pruning. It holds no route data in memory (another replica may write the
//! database), so the other hooks do nothing.

use super::PostgresStore;
use crate::store::routes::{RollupDb, RouteWrite};

impl PostgresStore {
    /// Targets were added, changed or deleted: nothing is held to refresh.
    pub(super) fn targets_changed(&self) {}

    /// A scrape was committed: nothing is held.
    pub(super) fn scraped(&self, _: i64, _: bool, _: i64, _: &[RouteWrite], _: &[i64]) {}

    /// Raw intervals were deleted: nothing is held.
    pub(super) fn pruned(&self, _: i64) {}

    /// Rollup rows are never held here (other replicas write them): always read.
    pub(super) fn held_rollups(&self, _: i64, _: i64, _: &[i64]) -> Option<Vec<RollupDb>> {
        None
    }

    /// Nothing is held.
    pub(super) fn rollups_staged(&self, _: impl IntoIterator<Item = (i64, RollupDb)>) -> u64 {
        0
    }

    /// Nothing is held.
    pub(super) fn rollups_committed(&self, _: u64) {}

    /// After pruning route figures, a plain VACUUM makes the deleted rows' space reusable
    /// at once (as after a run's deletion; never VACUUM FULL, which locks the tables while
    /// it rewrites them). Outside a transaction, so the simple protocol. A failure is
    /// logged.
    pub(super) async fn reclaim_route_space(&self) {
        if let Err(e) = sqlx::raw_sql("VACUUM route_samples, route_rollups, process_series")
            .execute(&self.pool)
            .await
        {
            tracing::warn!(error = %e, "VACUUM after pruning route figures failed");
        }
    }
}
