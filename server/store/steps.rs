//! The steps of routes (`route_steps`) and their figures: `step_samples` (one row per step
//! per scrape) and `step_rollups` (1 min, 10 min and 1 h sums), kept as long as the
//! routes' figures at each resolution. A scrape's steps are written after the scrape's own
//! transaction (the routes' ids come from it), in one transaction; a step whose shape the
//! writer knows is stored unchanged is not written again. Rollups are added a closed minute
//! at a time by the writer ([`StepRollupAdd`]): a step costs one sample row per scrape and
//! three rollup rows per minute, where a route costs four rows per scrape.

use crate::domain::routes::Interval;
use crate::domain::routes::steps::StepShape;

/// One step of one scrape to write.
#[derive(Debug, Clone)]
pub struct StepWrite {
    /// The route it belongs to (as the scrape stored it).
    pub route_id: i64,
    pub step: String,
    pub kind: String,
    pub parent: Option<String>,
    pub index: i64,
    pub level: i64,
    pub destination: Option<String>,
    /// What happened since the previous scrape; `None` on the first.
    pub interval: Option<Interval>,
    /// The step's id when the writer knows its row holds this shape: the row is then not
    /// written (nor its last-seen time moved).
    pub known_id: Option<i64>,
}

/// Sums to add to one step rollup row (created when missing).
#[derive(Debug, Clone, PartialEq)]
pub struct StepRollupAdd {
    pub step_id: i64,
    pub resolution_ms: i64,
    pub bucket_ms: i64,
    /// Σ of the intervals (`interval_ms`, counts, durations; `max_s` their max; `inflight`
    /// unused).
    pub sums: Interval,
    /// Intervals summed.
    pub intervals: i64,
    /// Σ inflight readings and how many.
    pub inflight_sum: Option<f64>,
    pub inflight_n: i64,
}

/// A step's figures summed over one time bucket of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPoint {
    pub step_id: i64,
    /// The bucket's start, unix ms.
    pub t_ms: i64,
    pub figures: crate::domain::routes::Figures,
}

// Every operation is answered by the backend the store was opened on (`forward!`).
forward! {
    /// Writes one scrape's steps: the shapes not known (added or updated, last seen at
    /// `at_ms`) and every interval, in one transaction. The steps' ids, in `steps` order.
    pub async fn record_steps(&self, at_ms: i64, steps: &[StepWrite]) -> Result<Vec<i64>>;

    /// Adds sums to step rollup rows, in one transaction.
    pub async fn add_step_rollups(&self, rows: &[StepRollupAdd]) -> Result<()>;

    /// The steps of route `route_id`, in route order (position, then id).
    pub async fn route_steps(&self, route_id: i64) -> Result<Vec<StepShape>>;

    /// Each step of route `route_id` with its figures summed over the scrapes in
    /// `(from_ms, to_ms]` (raw rows), in route order; steps without rows get empty figures.
    pub async fn step_figures(
        &self,
        route_id: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(StepShape, crate::domain::routes::Figures)>>;

    /// The steps' figures of route `route_id` over `[from_ms, to_ms)` in buckets of
    /// `step_ms`, read at `resolution_ms` (0: raw rows; else a rollup resolution).
    pub async fn step_series(
        &self,
        route_id: i64,
        from_ms: i64,
        to_ms: i64,
        step_ms: i64,
        resolution_ms: i64,
    ) -> Result<Vec<StepPoint>>;

    /// Deletes step figures past their retention. Returns the rows deleted.
    pub async fn prune_steps(&self, now_ms: i64, retention: &Retention) -> Result<u64>;
}
