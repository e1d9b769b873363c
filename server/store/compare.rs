//! Comparison data: `baselines`, `run_checks`, a scenario's runs, and every scope's
//! buckets of a run in one query.

use sqlx::FromRow;

/// One scope's buckets packed in one row (see [`Store::run_packed_buckets`](super::Store::run_packed_buckets)).
#[derive(Debug, Clone, FromRow)]
pub struct PackedBuckets {
    /// 0 = the run total, then the labels in order.
    pub label_ord: i64,
    /// `start_ms,count,errors,sum_ms,max_ms,HEX(histogram)` per bucket, `;` between
    /// buckets, by start.
    pub packed: String,
}

/// A scenario with its number of runs (`GET /api/v1/scenarios`).
#[derive(Debug, Clone, serde::Serialize, FromRow)]
pub struct ScenarioItem {
    pub scenario: String,
    pub runs: i64,
    /// Start (or import) of its newest run, unix epoch ms.
    pub last_run_at_ms: i64,
    /// The pinned baseline, if any.
    pub baseline_run_id: Option<i64>,
}

/// The latest stored check of a run.
#[derive(Debug, Clone, serde::Serialize, FromRow)]
pub struct CheckRow {
    pub run_id: i64,
    pub baseline_run_id: Option<i64>,
    pub passed: bool,
    pub checked_at_ms: i64,
    pub results: String,
}
