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

// This group's operations on [`Store`], each answered by the backend the store was
// opened on (`forward!`).
forward! {
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
}
