//! Runs: `runs`, `run_tags`, `run_stats`, `run_buckets`, `run_errors`, `run_rejected`.

use crate::domain::runs::{LabelStats, Stats};
use serde::Serialize;
use sqlx::FromRow;
use std::collections::BTreeMap;

/// SQLite allows 32,766 bound parameters per statement (PostgreSQL 65,535); rows per
/// multi-row INSERT are sized to stay below that.
pub(crate) const MAX_PARAMS: usize = 30_000;

/// Changes to a run's descriptive fields (`None`: leave as is; `Some(None)`: clear).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPatch {
    pub name: Option<String>,
    #[serde(default, with = "double_option")]
    pub scenario: Option<Option<String>>,
    #[serde(default, with = "double_option")]
    pub notes: Option<Option<String>>,
    pub tags: Option<BTreeMap<String, String>>,
}

/// Tells an absent field (`None`) from an explicit `null` (`Some(None)`).
mod double_option {
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

/// One run as stored, for the runs list: the run's row and its total's figures. What is
/// derived from them (successful throughput, the stated capacity, its page) is added by
/// `views::runs::RunListItem`.
#[derive(Debug, Clone, FromRow)]
pub struct RunListRow {
    pub id: i64,
    pub name: String,
    pub scenario: Option<String>,
    pub tool: String,
    pub status: String,
    pub summary_only: bool,
    /// First sample start, unix epoch ms (`None` for summary-only runs without times).
    pub started_at_ms: Option<i64>,
    /// Run window (last end − first start), ms.
    pub duration_ms: Option<i64>,
    pub imported_at_ms: i64,
    /// Requests in the run total.
    pub count: i64,
    pub errors: i64,
    /// errors / count × 100; `None` without samples.
    pub error_pct: Option<f64>,
    pub p95_ms: Option<f64>,
    pub throughput_rps: Option<f64>,
    pub rejected_rows: i64,
    /// True when the run has a time series (per-second buckets): a summary-only run with
    /// one (Locust's stats history) is no mere summary.
    pub has_series: bool,
    /// The kept capacity's key (`v{rule} …`) and JSON, if one was kept.
    pub capacity_key: Option<String>,
    pub capacity_json: Option<String>,
    /// A search's answer (`reported.search.throughput_rps` of a `harrier load find` run).
    pub search_rps: Option<f64>,
}

/// One run with its statistics (`GET /api/v1/runs/{id}`).
#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    pub id: i64,
    pub name: String,
    pub scenario: Option<String>,
    pub tool: String,
    pub source: Option<String>,
    pub status: String,
    /// True when the figures are as reported by the tool (no per-request data).
    pub summary_only: bool,
    pub started_at_ms: Option<i64>,
    pub ended_at_ms: Option<i64>,
    pub imported_at_ms: i64,
    pub rejected_rows: i64,
    /// Distinct labels beyond the label limit, counted under "(other labels)" (0: none).
    pub folded_labels: i64,
    pub notes: Option<String>,
    pub tags: BTreeMap<String, String>,
    /// Figures the tool reported beyond the statistics (ab's failure breakdown, …).
    pub reported: serde_json::Value,
    /// Run totals (transaction-controller rows excluded).
    pub overall: Stats,
    /// Per label, in order of first appearance.
    pub labels: Vec<LabelStats>,
    /// The alert rule that failed the run while it was live (`status` is then
    /// `failed`).
    pub failed_by: Option<FailedBy>,
}

/// The alert rule that failed a live run: `{"rule", "at_ms", "value"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedBy {
    pub rule: String,
    /// When the alert fired, unix ms.
    pub at_ms: i64,
    /// The rule's measure then.
    pub value: Option<f64>,
}

/// A live run's per-second buckets (run total) within a rule's window.
#[derive(Debug, Clone)]
pub struct LiveRunWindow {
    pub id: i64,
    pub name: String,
    pub scenario: Option<String>,
    /// Start of the first bucket in the window, unix ms (`None`: no bucket).
    pub first_start_ms: Option<i64>,
    pub count: i64,
    pub errors: i64,
    /// Sum of response times, ms.
    pub sum_ms: i64,
    /// The buckets' histograms (HdrHistogram V2, ms), for percentiles.
    pub histograms: Vec<Vec<u8>>,
}

/// One stored per-second bucket.
#[derive(Debug, Clone, FromRow)]
pub struct BucketRow {
    pub start_ms: i64,
    pub count: i64,
    pub errors: i64,
    pub sum_ms: i64,
    pub min_ms: i64,
    pub max_ms: i64,
    pub active_users: Option<i64>,
    pub histogram: Vec<u8>,
}

/// One group of errors (same label, response code and message).
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct ErrorRow {
    pub label: String,
    pub response_code: String,
    pub message: String,
    pub count: i64,
    pub first_seen_ms: i64,
    pub last_seen_ms: i64,
}

/// One row the import rejected.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct RejectedRowRow {
    pub line: i64,
    pub reason: String,
}

#[derive(FromRow)]
pub(crate) struct RunRow {
    pub(crate) id: i64,
    pub(crate) name: String,
    pub(crate) scenario: Option<String>,
    pub(crate) tool: String,
    pub(crate) source: Option<String>,
    pub(crate) status: String,
    pub(crate) summary_only: bool,
    pub(crate) started_at_ms: Option<i64>,
    pub(crate) ended_at_ms: Option<i64>,
    pub(crate) imported_at_ms: i64,
    pub(crate) rejected_rows: i64,
    pub(crate) folded_labels: i64,
    pub(crate) notes: Option<String>,
    pub(crate) reported: String,
    pub(crate) failed_rule: Option<String>,
    pub(crate) failed_at_ms: Option<i64>,
    pub(crate) failed_value: Option<f64>,
}

#[derive(FromRow)]
pub(crate) struct StatsRow {
    pub(crate) label_ord: i64,
    pub(crate) label: Option<String>,
    pub(crate) is_transaction: bool,
    pub(crate) count: i64,
    pub(crate) errors: i64,
    pub(crate) min_ms: Option<f64>,
    pub(crate) mean_ms: Option<f64>,
    pub(crate) max_ms: Option<f64>,
    pub(crate) p50_ms: Option<f64>,
    pub(crate) p90_ms: Option<f64>,
    pub(crate) p95_ms: Option<f64>,
    pub(crate) p99_ms: Option<f64>,
    pub(crate) first_start_ms: Option<i64>,
    pub(crate) last_end_ms: Option<i64>,
    pub(crate) window_ms: Option<i64>,
    pub(crate) throughput_rps: Option<f64>,
    pub(crate) bytes_received: i64,
    pub(crate) bytes_sent: i64,
}

impl StatsRow {
    pub(crate) fn stats(&self) -> Stats {
        let count = self.count.max(0) as u64;
        let errors = self.errors.max(0) as u64;
        Stats {
            count,
            errors,
            error_pct: (count > 0).then(|| errors as f64 * 100.0 / count as f64),
            min_ms: self.min_ms,
            mean_ms: self.mean_ms,
            max_ms: self.max_ms,
            p50_ms: self.p50_ms,
            p90_ms: self.p90_ms,
            p95_ms: self.p95_ms,
            p99_ms: self.p99_ms,
            first_start_ms: self.first_start_ms,
            last_end_ms: self.last_end_ms,
            window_ms: self.window_ms,
            throughput_rps: self.throughput_rps,
            bytes_received: self.bytes_received.max(0) as u64,
            bytes_sent: self.bytes_sent.max(0) as u64,
        }
    }
}

/// A run's start or end as a clock time: some tools (hey and oha CSV) write only offsets
/// from the test's start, which are not times of day and stay out of `started_at_ms`.
pub(crate) fn clock_time(ms: Option<i64>) -> Option<i64> {
    ms.filter(|t| *t >= crate::sources::ingest::timestamp::MIN_PLAUSIBLE_MS)
}

pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Rows per multi-row INSERT for a statement with `columns` bound values per row.
pub(crate) fn chunk_rows(columns: usize) -> usize {
    MAX_PARAMS / columns
}

/// A `run_stats` row with its distributions: a live run's stored scope, for adding a
/// delta to it (see [`crate::domain::runs::merge`]).
#[derive(FromRow)]
pub(crate) struct StoredScopeRow {
    #[sqlx(flatten)]
    pub(crate) stats: StatsRow,
    pub(crate) distribution: Option<Vec<u8>>,
    pub(crate) failed_distribution: Option<Vec<u8>>,
}

/// The query reading a run's [`StoredScopeRow`]s, in scope order, with the run id's
/// placeholder (`?` or `$1`).
macro_rules! stored_scopes_sql {
    ($id:literal) => {
        concat!(
            "SELECT label_ord, label, is_transaction, count, errors, min_ms, mean_ms, max_ms,
                    p50_ms, p90_ms, p95_ms, p99_ms, first_start_ms, last_end_ms, window_ms,
                    throughput_rps, bytes_received, bytes_sent, distribution, failed_distribution
             FROM run_stats WHERE run_id = ",
            $id,
            " ORDER BY label_ord"
        )
    };
}
pub(crate) use stored_scopes_sql;

/// A live run's stored aggregates without its buckets, as the [`RunData`] a delta is added
/// to. Failed-sample distributions are kept only when every scope has one (exact runs);
/// a damaged distribution reads as empty, so its scope merges by sums.
///
/// [`RunData`]: crate::domain::runs::RunData
pub(crate) fn stored_aggregates(
    scopes: Vec<StoredScopeRow>,
    errors: Vec<ErrorRow>,
    rejected: Vec<RejectedRowRow>,
    rejected_rows: i64,
    folded_labels: i64,
    reported: &str,
) -> crate::domain::runs::RunData {
    use crate::domain::runs::distribution::Distribution;
    use crate::domain::runs::{ErrorGroup, RejectedRow, RunData};
    let mut data = RunData {
        rejected_rows: rejected_rows.max(0) as u64,
        folded_labels: folded_labels.max(0) as u64,
        reported: serde_json::from_str(reported).unwrap_or(serde_json::Value::Null),
        ..RunData::default()
    };
    let all_failed = scopes.iter().all(|s| s.failed_distribution.is_some());
    for s in scopes {
        let stats = s.stats.stats();
        if s.stats.label_ord == 0 {
            data.overall = stats;
        } else {
            data.labels.push(LabelStats {
                label: s.stats.label.clone().unwrap_or_default(),
                is_transaction: s.stats.is_transaction,
                stats,
            });
        }
        data.distributions.push(
            s.distribution
                .and_then(|b| Distribution::decode(&b))
                .unwrap_or_default(),
        );
        if all_failed {
            data.failed_distributions.push(
                s.failed_distribution
                    .and_then(|b| Distribution::decode(&b))
                    .unwrap_or_default(),
            );
        }
    }
    data.errors = errors
        .into_iter()
        .map(|e| ErrorGroup {
            label: e.label,
            response_code: e.response_code,
            message: e.message,
            count: e.count.max(0) as u64,
            first_seen_ms: e.first_seen_ms,
            last_seen_ms: e.last_seen_ms,
        })
        .collect();
    data.rejected = rejected
        .into_iter()
        .map(|r| RejectedRow {
            line: r.line.max(0) as u64,
            reason: r.reason,
        })
        .collect();
    data
}

/// A stored bucket with its scope (0: the run; i: the i-th label).
#[derive(FromRow)]
pub(crate) struct ScopedBucketRow {
    pub(crate) label_ord: i64,
    #[sqlx(flatten)]
    pub(crate) row: BucketRow,
}

/// Buckets to *add* (each with its scope), summed by scope and second with each other and
/// with the `stored` buckets of those scopes and seconds: the rows to write back. Fails
/// only when a stored histogram does not read.
pub(crate) fn sum_added_buckets(
    id: i64,
    added: &[(i64, &crate::domain::runs::Bucket)],
    stored: Vec<ScopedBucketRow>,
) -> crate::store::Result<Vec<(i64, crate::domain::runs::Bucket)>> {
    use crate::domain::runs::Bucket;
    let unreadable = |e: crate::domain::runs::hdr::HistogramError| {
        sqlx::Error::Protocol(format!(
            "run {id}: a stored bucket's histogram does not read: {e}"
        ))
    };
    let mut sums: BTreeMap<(i64, i64), Bucket> = BTreeMap::new();
    for (ord, b) in added {
        match sums.get_mut(&(*ord, b.start_ms)) {
            Some(sum) => sum.add(b).map_err(unreadable)?,
            None => {
                sums.insert((*ord, b.start_ms), (*b).clone());
            }
        }
    }
    for s in stored {
        let Some(sum) = sums.get_mut(&(s.label_ord, s.row.start_ms)) else {
            continue;
        };
        let row = s.row;
        let mut old = Bucket {
            label: sum.label.clone(),
            start_ms: row.start_ms,
            count: row.count.max(0) as u64,
            errors: row.errors.max(0) as u64,
            sum_ms: row.sum_ms.max(0) as u64,
            min_ms: row.min_ms.max(0) as u64,
            max_ms: row.max_ms.max(0) as u64,
            active_users: row.active_users.and_then(|u| u32::try_from(u).ok()),
            histogram: row.histogram,
        };
        old.add(sum).map_err(unreadable)?;
        *sum = old;
    }
    Ok(sums.into_iter().map(|((ord, _), b)| (ord, b)).collect())
}

/// One scope of a run as the bulk writers store it in `run_stats`: `ord` 0 is the run
/// total (no label), then the labels in order; with its encoded response-time
/// distributions (`failed` is an empty blob, not NULL, when the scope had no failure:
/// "none", not "unknown").
pub(crate) struct ScopeRow<'a> {
    pub ord: i64,
    pub label: Option<&'a str>,
    pub is_transaction: bool,
    pub stats: &'a crate::domain::runs::Stats,
    pub distribution: Option<Vec<u8>>,
    pub failed_distribution: Option<Vec<u8>>,
}

/// The `run_stats` rows of `data`, total first.
pub(crate) fn scope_rows(data: &crate::domain::runs::RunData) -> Vec<ScopeRow<'_>> {
    let blob = |ord: usize| {
        data.distributions
            .get(ord)
            .filter(|d| !d.is_empty())
            .map(|d| d.encode())
    };
    let failed_blob = |ord: usize| data.failed_distributions.get(ord).map(|d| d.encode());
    std::iter::once(ScopeRow {
        ord: 0,
        label: None,
        is_transaction: false,
        stats: &data.overall,
        distribution: blob(0),
        failed_distribution: failed_blob(0),
    })
    .chain(data.labels.iter().enumerate().map(|(i, l)| ScopeRow {
        ord: i as i64 + 1,
        label: Some(l.label.as_str()),
        is_transaction: l.is_transaction,
        stats: &l.stats,
        distribution: blob(i + 1),
        failed_distribution: failed_blob(i + 1),
    }))
    .collect()
}

/// `buckets` of a run whose labels are `data`'s, each with its scope's ord (0: the run
/// total, then the labels in order); a bucket of a label the run does not have is left out.
pub(crate) fn scoped_buckets<'a>(
    data: &crate::domain::runs::RunData,
    buckets: &'a [crate::domain::runs::Bucket],
) -> Vec<(i64, &'a crate::domain::runs::Bucket)> {
    let ord_of: std::collections::HashMap<&str, i64> = data
        .labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.label.as_str(), i as i64 + 1))
        .collect();
    buckets
        .iter()
        .filter_map(|b| match &b.label {
            None => Some((0, b)),
            Some(l) => ord_of.get(l.as_str()).map(|ord| (*ord, b)),
        })
        .collect()
}

// This group's operations on [`Store`], each answered by the backend the store was
// opened on (`forward!`).
forward! {
    /// Stores runs read from one file in ONE transaction, each with its bootstrap draws
    /// (computed by the caller: [`crate::domain::compare::stored::precompute`]): either
    /// every run lands or none. Returns the new ids in order.
    pub async fn insert_runs(
        &self,
        runs: &[(NewRun, &RunData, crate::domain::compare::stored::RunBlobs)],
    ) -> Result<Vec<i64>>;

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
    /// `draws` are its bootstrap draws (see [`Store::insert_runs`]): a `live` run has
    /// none until it completes.
    pub async fn replace_run_data(
        &self,
        id: i64,
        data: &RunData,
        draws: &crate::domain::compare::stored::RunBlobs,
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
}
