//! The run report: a stored run with what the report derives from its aggregates (Apdex,
//! saturation), its over-time series and its response-time distribution, for the run
//! page and `/api/v1/runs/{id}…`.

use crate::domain::load::SearchOutcome;
use crate::domain::runs::capacity::{self, Capacity};
use crate::domain::runs::distribution::{Apdex, Distribution};
use crate::domain::runs::timeseries::{self, BucketIn};
use crate::error::{Error, Result};
use crate::store::{BucketRow, RunDetail, RunListRow, Store};

/// A run's console page: `/console/runs/{id}`.
pub fn run_url(id: i64) -> String {
    format!("/console/runs/{id}")
}

/// One row of the runs list (`GET /api/v1/runs` items, the live `run_imported` /
/// `run_updated` events, `/console/runs`): the stored row with what is derived from it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunListItem {
    pub id: i64,
    pub name: String,
    pub scenario: Option<String>,
    pub tool: String,
    pub status: String,
    pub summary_only: bool,
    /// First sample start, unix epoch ms (`null` for summary-only runs without times).
    pub started_at_ms: Option<i64>,
    /// Run window (last end − first start), ms.
    pub duration_ms: Option<i64>,
    pub imported_at_ms: i64,
    /// Requests in the run total.
    pub count: i64,
    pub errors: i64,
    /// errors / count × 100; `null` without samples.
    pub error_pct: Option<f64>,
    pub p95_ms: Option<f64>,
    pub throughput_rps: Option<f64>,
    /// Successful requests per second (throughput × (count − errors) / count).
    pub successful_rps: Option<f64>,
    pub rejected_rows: i64,
    /// True when the run has a time series (per-second buckets): a summary-only run with
    /// one (Locust's stats history) is no mere summary.
    pub has_series: bool,
    /// The run's stated capacity, successful req/s: its ramp's (as kept once computed, under
    /// the present rule) or its search's answer; `null` when none is known yet.
    pub capacity_rps: Option<f64>,
    /// Active users at a ramp's capacity.
    pub capacity_users: Option<u32>,
    /// Console page of the run.
    pub url: String,
}

impl From<RunListRow> for RunListItem {
    fn from(row: RunListRow) -> RunListItem {
        // A kept capacity counts only under the present rule (older ones are recomputed
        // when the run is next shown).
        let rule = format!("v{} ", capacity::RULE_VERSION);
        let kept = match (&row.capacity_key, &row.capacity_json) {
            (Some(key), Some(json)) if key.starts_with(&rule) => {
                serde_json::from_str::<serde_json::Value>(json).ok()
            }
            _ => None,
        };
        let capacity_rps = row
            .search_rps
            .or_else(|| kept.as_ref().and_then(|c| c["throughput_rps"].as_f64()));
        let capacity_users = kept
            .as_ref()
            .filter(|_| row.search_rps.is_none())
            .and_then(|c| c["users"].as_u64())
            .and_then(|u| u32::try_from(u).ok());
        RunListItem {
            successful_rps: crate::domain::runs::successful_rps(
                row.count.max(0) as u64,
                row.errors.max(0) as u64,
                row.throughput_rps,
            ),
            capacity_rps,
            capacity_users,
            url: run_url(row.id),
            id: row.id,
            name: row.name,
            scenario: row.scenario,
            tool: row.tool,
            status: row.status,
            summary_only: row.summary_only,
            started_at_ms: row.started_at_ms,
            duration_ms: row.duration_ms,
            imported_at_ms: row.imported_at_ms,
            count: row.count,
            errors: row.errors,
            error_pct: row.error_pct,
            p95_ms: row.p95_ms,
            throughput_rps: row.throughput_rps,
            rejected_rows: row.rejected_rows,
            has_series: row.has_series,
        }
    }
}

/// The runs list, newest first (as [`Store::list_runs`]), each row with what is derived
/// from it.
pub async fn list_runs(store: &Store) -> crate::store::Result<Vec<RunListItem>> {
    Ok(store
        .list_runs()
        .await?
        .into_iter()
        .map(RunListItem::from)
        .collect())
}

/// One row of the runs list (see [`list_runs`]); `None` for an unknown id.
pub async fn run_list_item(store: &Store, id: i64) -> crate::store::Result<Option<RunListItem>> {
    Ok(store.run_list_item(id).await?.map(RunListItem::from))
}

/// The runs of a scenario, oldest first (as [`Store::scenario_runs`]).
pub async fn scenario_runs(
    store: &Store,
    scenario: &str,
) -> crate::store::Result<Vec<RunListItem>> {
    Ok(store
        .scenario_runs(scenario)
        .await?
        .into_iter()
        .map(RunListItem::from)
        .collect())
}

/// The error for a label a run does not have.
pub fn no_label(id: i64, label: Option<&str>) -> Error {
    Error::NotFound(format!("label {:?} in run {id}", label.unwrap_or("")))
}

/// A run with what the report derives from its stored aggregates.
pub struct RunReport {
    pub run: RunDetail,
    /// Apdex T, ms.
    pub apdex_t_ms: u64,
    /// Apdex per scope: index 0 the run total, then one per label (`None`: no exact
    /// distribution, e.g. a summary-only run).
    pub apdex: Vec<Option<Apdex>>,
    /// A ramped run's saturation: knee, breaches and statement (`None`: no ramp).
    pub capacity: Option<Capacity>,
    /// The answer of `harrier load find` (a run it stored, `reported.search`), which is
    /// the run's `capacity` in its JSON.
    pub search: Option<SearchOutcome>,
}

impl RunReport {
    /// The run's JSON: [`RunDetail`] plus `apdex_t_ms`, an `apdex` object on `overall` and
    /// on each label (`{t_ms, score, satisfied, tolerating, frustrated}` or `null`), and
    /// `capacity` ([`Capacity`]: `{knee, latency_breach, error_breach, statement, peak,
    /// users, throughput_rps, at_ms, limited_by, low_load_p95_ms}`, or `null` when the load
    /// never ramped; for a run of `harrier load find`, its [`SearchOutcome`]: `{kind:
    /// "search", falls_over_rps, limited_by, sustains_rps, throughput_rps, p99_ms,
    /// in_flight_at_knee, confirmed, complete, tolerance, rule, ended_by, statement,
    /// steps}`).
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.run).unwrap_or_default();
        let apdex = |i: usize| {
            serde_json::to_value(self.apdex.get(i).copied().flatten()).unwrap_or_default()
        };
        v["apdex_t_ms"] = self.apdex_t_ms.into();
        v["overall"]["apdex"] = apdex(0);
        v["overall"]["successful_rps"] = self.run.overall.successful_rps().into();
        if let Some(labels) = v["labels"].as_array_mut() {
            for (i, label) in labels.iter_mut().enumerate() {
                label["apdex"] = apdex(i + 1);
                label["successful_rps"] = self
                    .run
                    .labels
                    .get(i)
                    .and_then(|l| l.stats.successful_rps())
                    .into();
            }
        }
        v["capacity"] = match &self.search {
            Some(search) => serde_json::to_value(search).unwrap_or_default(),
            None => serde_json::to_value(&self.capacity).unwrap_or_default(),
        };
        v
    }
}

/// Loads a run and derives Apdex (threshold `apdex_t_ms`) and capacity.
pub async fn run_report(store: &Store, id: i64, apdex_t_ms: u64) -> Result<RunReport> {
    let run = store
        .get_run(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {id}")))?;
    let t = apdex_t_ms;
    let scope_errors: Vec<u64> = std::iter::once(run.overall.errors)
        .chain(run.labels.iter().map(|l| l.stats.errors))
        .collect();
    // Failed samples are frustrated; a run stored before their distribution was kept can
    // only be scored when it had no failure.
    let apdex = store
        .run_distributions(id)
        .await?
        .iter()
        .enumerate()
        .map(|(i, (d, failed))| match failed {
            Some(f) => d.apdex(t, f),
            None if scope_errors.get(i).copied().unwrap_or(0) == 0 => {
                d.apdex(t, &Distribution::default())
            }
            None => None,
        })
        .collect();
    let capacity = run_capacity(store, &run).await?;
    let search = search_outcome(&run);
    Ok(RunReport {
        run,
        apdex_t_ms: t,
        apdex,
        capacity,
        search,
    })
}

/// The answer of `harrier load find` stored with a run it made (`reported.search`), or
/// `None` for any other run.
pub fn search_outcome(run: &crate::store::RunDetail) -> Option<SearchOutcome> {
    if run.tool != "harrier" {
        return None;
    }
    serde_json::from_value::<SearchOutcome>(run.reported["search"].clone()).ok()
}

/// The saturation analysis of a stored run (see [`capacity`]); `None` when its load did
/// not ramp.
///
/// Computed from every per-second bucket of the run, so an ended run's is kept in the
/// store ([`Store::put_run_capacity`]) under [`capacity_key`] and read from there while the
/// key holds; a live run's is computed each time.
pub async fn run_capacity(
    store: &Store,
    run: &crate::store::RunDetail,
) -> Result<Option<Capacity>> {
    let key = capacity_key(run);
    if let Some(key) = &key
        && let Some((kept_key, json)) = store.run_capacity_kept(run.id).await?
        && kept_key == *key
    {
        match serde_json::from_str::<Option<Capacity>>(&json) {
            Ok(c) => return Ok(c),
            Err(e) => {
                tracing::warn!(run = run.id, error = %e, "kept capacity unreadable; computing it again")
            }
        }
    }
    let c = compute_capacity(store, run).await?;
    if let Some(key) = key {
        let json = serde_json::to_string(&c).unwrap_or_else(|_| "null".into());
        // Keeping it is an optimisation: a failure (the run deleted meanwhile) is no error.
        if let Err(e) = store.put_run_capacity(run.id, &key, &json).await {
            tracing::warn!(run = run.id, error = %e, "could not keep the run's capacity");
        }
    }
    Ok(c)
}

/// Version of the capacity rule ([`capacity::find_with_reported_p95`]).
const CAPACITY_RULE_VERSION: u32 = capacity::RULE_VERSION;

/// What a kept capacity depends on, as one string: the rule's version and the run's
/// status, counts, mean and maximum and first/last times. `None` for a live run (its buckets still change).
fn capacity_key(run: &crate::store::RunDetail) -> Option<String> {
    (run.status != "live").then(|| {
        format!(
            "v{CAPACITY_RULE_VERSION} {} {} {} {:?} {:?} {:?} {:?}",
            run.status,
            run.overall.count,
            run.overall.errors,
            run.overall.mean_ms,
            run.overall.max_ms,
            run.started_at_ms,
            run.ended_at_ms
        )
    })
}

/// [`run_capacity`] computed from the stored buckets.
async fn compute_capacity(
    store: &Store,
    run: &crate::store::RunDetail,
) -> Result<Option<Capacity>> {
    let rows = store.run_buckets(run.id, None).await?.unwrap_or_default();
    // Locust's stats history keeps no latencies, only the percentiles it reported per row.
    let reported_p95: Vec<(i64, f64)> = if run.reported["input"] == "stats_history.csv" {
        let mut v: Vec<(i64, f64)> = locust_history_percentiles(&run.reported)
            .iter()
            .filter_map(|r| Some((r.bucket_start_ms, r.p95_ms?)))
            // Locust writes 0 before its first response in a window: no p95.
            .filter(|r| r.1 > 0.0)
            .collect();
        v.sort_by_key(|r| r.0);
        v.dedup_by_key(|r| r.0);
        v
    } else {
        Vec::new()
    };
    Ok(capacity::find_with_reported_p95(
        &bucket_ins(&rows),
        &reported_p95,
    ))
}

/// The distribution JSON of a run's label (`None`: all requests).
pub async fn distribution_json(
    store: &Store,
    id: i64,
    label: Option<String>,
) -> Result<serde_json::Value> {
    let label = label.filter(|l| !l.is_empty());
    if store.get_run(id).await?.is_none() {
        return Err(Error::NotFound(format!("run {id}")));
    }
    let d = store
        .run_distribution(id, label.as_deref())
        .await?
        .ok_or_else(|| no_label(id, label.as_deref()))?;
    let curve = d.curve();
    let bins = d.bins(DISTRIBUTION_BINS);
    Ok(serde_json::json!({
        "label": label,
        "count": d.count(),
        "curve": {"p": curve.iter().map(|c| c.0).collect::<Vec<_>>(), "ms": curve.iter().map(|c| c.1).collect::<Vec<_>>()},
        "bins": {"lower_ms": bins.iter().map(|b| b.0).collect::<Vec<_>>(), "count": bins.iter().map(|b| b.1).collect::<Vec<_>>()},
    }))
}

/// Bars of the response-time distribution chart.
const DISTRIBUTION_BINS: usize = 60;

/// The over-time series of a run or one of its labels.
pub async fn series_for(
    store: &Store,
    id: i64,
    label: Option<String>,
) -> Result<timeseries::Series> {
    let run = store
        .get_run(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {id}")))?;
    let label = label.filter(|l| !l.is_empty());
    let rows = store
        .run_buckets(id, label.as_deref())
        .await?
        .ok_or_else(|| no_label(id, label.as_deref()))?;
    let last_end_ms = match &label {
        None => run.overall.last_end_ms,
        Some(l) => run
            .labels
            .iter()
            .find(|s| &s.label == l)
            .and_then(|s| s.stats.last_end_ms),
    };
    let mut series = timeseries::build(label.clone(), &bucket_ins(&rows), last_end_ms);
    if label.is_none() && run.reported["input"] == "stats_history.csv" {
        let rows = locust_history_percentiles(&run.reported);
        timeseries::use_reported_percentiles(&mut series, &rows, "locust", timeseries::LOCUST_NOTE);
    }
    Ok(series)
}

/// The per-row percentiles of a Locust stats-history run (`reported.history`, written by
/// `sources::ingest::locust`).
fn locust_history_percentiles(
    reported: &serde_json::Value,
) -> Vec<timeseries::ReportedPercentiles> {
    let Some(rows) = reported["history"].as_array() else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|r| {
            let p = &r["window_percentiles_ms"];
            Some(timeseries::ReportedPercentiles {
                bucket_start_ms: r["bucket_start_ms"].as_i64()?,
                p50_ms: p["50%"].as_f64(),
                p90_ms: p["90%"].as_f64(),
                p95_ms: p["95%"].as_f64(),
                p99_ms: p["99%"].as_f64(),
                max_ms: p["100%"].as_f64(),
            })
        })
        .collect()
}

/// Stored bucket rows as the series and capacity code reads them.
fn bucket_ins(rows: &[BucketRow]) -> Vec<BucketIn<'_>> {
    rows.iter()
        .map(|r| BucketIn {
            start_ms: r.start_ms,
            count: r.count.max(0) as u64,
            errors: r.errors.max(0) as u64,
            sum_ms: r.sum_ms.max(0) as u64,
            max_ms: r.max_ms.max(0) as u64,
            active_users: r.active_users.and_then(|u| u32::try_from(u).ok()),
            histogram: &r.histogram,
        })
        .collect()
}
