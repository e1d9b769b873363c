//! Runs ([`crate::store::runs`]): import, list, read, live runs, edit and delete, written
//! once and compiled into each backend, whose module names its store `Backend`, its SQL
//! dialect (`json_f64!`, `for_update!`) and its bulk writers (`bulk.rs`: multi-row INSERTs
//! on SQLite, COPY on PostgreSQL) and space upkeep.

use super::bulk::{insert_aggregates, stored_buckets, upsert_buckets};
use super::{Backend, Db, WriteTx};
use crate::domain::compare::stored;
use crate::domain::runs::distribution::Distribution;
use crate::domain::runs::merge;
use crate::domain::runs::{
    Bucket, LabelStats, NewRun, RunChanges, RunData, RunLimits,
};
use crate::store::Result;
use crate::store::runs::*;
use sqlx::{FromRow, QueryBuilder, Row, Transaction};

/// The runs-list SELECT (run row joined with its total), without WHERE/ORDER.
macro_rules! list_sql {
    () => {
        concat!("SELECT r.id, r.name, r.scenario, r.tool, r.status, r.summary_only, r.started_at_ms,
                s.window_ms AS duration_ms, r.imported_at_ms, s.count, s.errors,
                CASE WHEN s.count > 0 THEN s.errors * CAST(100.0 AS DOUBLE PRECISION) / s.count END AS error_pct,
                s.p95_ms, s.throughput_rps, r.rejected_rows,
                EXISTS (SELECT 1 FROM run_buckets b WHERE b.run_id = r.id AND b.label_ord = 0)
                    AS has_series,
                k.key AS capacity_key, k.capacity AS capacity_json,
                CASE WHEN r.tool = 'harrier' THEN ", json_f64!("r.reported", "search", "throughput_rps"), " END AS search_rps
         FROM runs r JOIN run_stats s ON s.run_id = r.id AND s.label_ord = 0
              LEFT JOIN run_capacities k ON k.run_id = r.id")
    };
}

impl Backend {
    /// Stores runs read from one file in ONE transaction, each with its bootstrap draws
    /// (see [`crate::domain::compare::stored`]): either every run lands or none. Returns
    /// the new ids in order.
    pub async fn insert_runs(
        &self,
        runs: &[(NewRun, &RunData, stored::RunBlobs)],
    ) -> Result<Vec<i64>> {
        let started = std::time::Instant::now();
        let mut tx = self.begin_write().await?;
        let mut ids = Vec::with_capacity(runs.len());
        for (run, data, draws) in runs {
            let id = insert_run_tx(&mut tx.tx, run, data).await?;
            insert_draws(&mut tx.tx, id, draws).await?;
            ids.push(id);
        }
        tx.commit().await?;
        // What an import's store step costs, apart from parsing (bench/pg_copy.sh reads it).
        tracing::debug!(
            runs = runs.len(),
            buckets = runs.iter().map(|(_, d, _)| d.buckets.len()).sum::<usize>(),
            write_ms = started.elapsed().as_secs_f64() * 1e3,
            "runs stored"
        );
        Ok(ids)
    }

    /// Every run, newest first.
    pub async fn list_runs(&self) -> Result<Vec<RunListRow>> {
        let rows = sqlx::query_as(concat!(
            list_sql!(),
            " ORDER BY COALESCE(r.started_at_ms, r.imported_at_ms) DESC, r.id DESC"
        ))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// One run's list row, or `None` if there is no such run.
    pub async fn run_list_item(&self, id: i64) -> Result<Option<RunListRow>> {
        let mut rows: Vec<RunListRow> = sqlx::query_as(concat!(list_sql!(), " WHERE r.id = $1"))
            .bind(id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.pop())
    }

    /// One run with its statistics, or `None` if there is no such run.
    pub async fn get_run(&self, id: i64) -> Result<Option<RunDetail>> {
        let Some(run): Option<RunRow> = sqlx::query_as(
            "SELECT id, name, scenario, tool, source, status, summary_only, started_at_ms,
                    ended_at_ms, imported_at_ms, rejected_rows, folded_labels, notes, reported,
                    failed_rule, failed_at_ms, failed_value
             FROM runs WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let stats: Vec<StatsRow> = sqlx::query_as(
            "SELECT label_ord, label, is_transaction, count, errors, min_ms, mean_ms, max_ms,
                        p50_ms, p90_ms, p95_ms, p99_ms, first_start_ms, last_end_ms, window_ms,
                        throughput_rps, bytes_received, bytes_sent
                 FROM run_stats WHERE run_id = $1 ORDER BY label_ord",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        let tags: Vec<(String, String)> =
            sqlx::query_as("SELECT key, value FROM run_tags WHERE run_id = $1 ORDER BY key")
                .bind(id)
                .fetch_all(&self.pool)
                .await?;
        let overall = stats
            .iter()
            .find(|s| s.label_ord == 0)
            .map(StatsRow::stats)
            .unwrap_or_default();
        let labels = stats
            .iter()
            .filter(|s| s.label_ord > 0)
            .map(|s| LabelStats {
                label: s.label.clone().unwrap_or_default(),
                is_transaction: s.is_transaction,
                stats: s.stats(),
            })
            .collect();
        let failed_by = match (run.failed_rule, run.failed_at_ms) {
            (Some(rule), Some(at_ms)) => Some(FailedBy {
                rule,
                at_ms,
                value: run.failed_value,
            }),
            _ => None,
        };
        Ok(Some(RunDetail {
            status: if failed_by.is_some() {
                "failed".into()
            } else {
                run.status
            },
            failed_by,
            id: run.id,
            name: run.name,
            scenario: run.scenario,
            tool: run.tool,
            source: run.source,
            summary_only: run.summary_only,
            started_at_ms: run.started_at_ms,
            ended_at_ms: run.ended_at_ms,
            imported_at_ms: run.imported_at_ms,
            rejected_rows: run.rejected_rows,
            folded_labels: run.folded_labels,
            notes: run.notes,
            tags: tags.into_iter().collect(),
            reported: serde_json::from_str(&run.reported).unwrap_or(serde_json::Value::Null),
            overall,
            labels,
        }))
    }

    /// The per-second buckets of a run's label (`None`: the run total), by start time.
    /// Returns `None` when the run has no such label.
    pub async fn run_buckets(
        &self,
        id: i64,
        label: Option<&str>,
    ) -> Result<Option<Vec<BucketRow>>> {
        let label_ord: Option<i64> = match label {
            None => Some(0),
            Some(label) => {
                sqlx::query_scalar(
                    "SELECT label_ord FROM run_stats WHERE run_id = $1 AND label = $2",
                )
                .bind(id)
                .bind(label)
                .fetch_optional(&self.pool)
                .await?
            }
        };
        let Some(label_ord) = label_ord else {
            return Ok(None);
        };
        let rows = sqlx::query_as(
            "SELECT start_ms, count, errors, sum_ms, min_ms, max_ms, active_users, histogram
             FROM run_buckets WHERE run_id = $1 AND label_ord = $2 ORDER BY start_ms",
        )
        .bind(id)
        .bind(label_ord)
        .fetch_all(&self.pool)
        .await?;
        Ok(Some(rows))
    }

    /// The exact response-time distribution of a run's label (`None`: the run total);
    /// `Ok(None)` when the run has no such label, an empty distribution when none was
    /// stored (summary-only runs).
    pub async fn run_distribution(
        &self,
        id: i64,
        label: Option<&str>,
    ) -> Result<Option<Distribution>> {
        let row: Option<(Option<Vec<u8>>,)> = match label {
            None => {
                sqlx::query_as("SELECT distribution FROM run_stats WHERE run_id = $1 AND label_ord = 0")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?
            }
            Some(label) => {
                sqlx::query_as("SELECT distribution FROM run_stats WHERE run_id = $1 AND label_ord > 0 AND label = $2")
                    .bind(id)
                    .bind(label)
                    .fetch_optional(&self.pool)
                    .await?
            }
        };
        Ok(row.map(|(blob,)| {
            blob.and_then(|b| Distribution::decode(&b))
                .unwrap_or_default()
        }))
    }

    /// Every scope's distribution of a run, in scope order (0 = run total), with the
    /// distribution of its failed samples (`None`: not stored — a summary-only run or one
    /// imported before harrier kept it).
    pub async fn run_distributions(
        &self,
        id: i64,
    ) -> Result<Vec<(Distribution, Option<Distribution>)>> {
        // (distribution, failed_distribution), each possibly NULL.
        type Blobs = (Option<Vec<u8>>, Option<Vec<u8>>);
        let rows: Vec<Blobs> = sqlx::query_as(
            "SELECT distribution, failed_distribution FROM run_stats WHERE run_id = $1 ORDER BY label_ord",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(b, f)| {
                (
                    b.and_then(|b| Distribution::decode(&b)).unwrap_or_default(),
                    f.and_then(|f| Distribution::decode(&f)),
                )
            })
            .collect())
    }

    /// A run's error groups, most frequent first.
    pub async fn run_errors(&self, id: i64) -> Result<Vec<ErrorRow>> {
        Ok(sqlx::query_as(
            "SELECT label, response_code, message, count, first_seen_ms, last_seen_ms
             FROM run_errors WHERE run_id = $1 ORDER BY count DESC, label",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The rows a run's import rejected (details of the first ones), by line.
    pub async fn run_rejected(&self, id: i64) -> Result<Vec<RejectedRowRow>> {
        Ok(
            sqlx::query_as("SELECT line, reason FROM run_rejected WHERE run_id = $1 ORDER BY line")
                .bind(id)
                .fetch_all(&self.pool)
                .await?,
        )
    }

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
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE runs SET failed_rule = $1, failed_at_ms = $2, failed_value = $3
             WHERE id = $4 AND failed_rule IS NULL",
        )
        .bind(rule)
        .bind(at_ms)
        .bind(value.filter(|v| v.is_finite()))
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The live runs (status `live`) with their run-total buckets starting in
    /// [`now_ms` − `window_ms`, `now_ms`), summed; one query for all runs.
    pub async fn live_run_windows(
        &self,
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<LiveRunWindow>> {
        #[derive(FromRow)]
        struct Row {
            id: i64,
            name: String,
            scenario: Option<String>,
            start_ms: Option<i64>,
            count: Option<i64>,
            errors: Option<i64>,
            sum_ms: Option<i64>,
            histogram: Option<Vec<u8>>,
        }
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT r.id, r.name, r.scenario, b.start_ms, b.count, b.errors, b.sum_ms,
                    b.histogram
             FROM runs r
             LEFT JOIN run_buckets b ON b.run_id = r.id AND b.label_ord = 0
               AND b.start_ms >= $1 AND b.start_ms < $2
             WHERE r.status = 'live'
             ORDER BY r.id, b.start_ms",
        )
        .bind(now_ms - window_ms)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        let mut out: Vec<LiveRunWindow> = Vec::new();
        for r in rows {
            if out.last().is_none_or(|w| w.id != r.id) {
                out.push(LiveRunWindow {
                    id: r.id,
                    name: r.name.clone(),
                    scenario: r.scenario.clone(),
                    first_start_ms: None,
                    count: 0,
                    errors: 0,
                    sum_ms: 0,
                    histograms: Vec::new(),
                });
            }
            let w = out.last_mut().expect("pushed above");
            if let Some(start) = r.start_ms {
                w.first_start_ms.get_or_insert(start);
                w.count += r.count.unwrap_or(0);
                w.errors += r.errors.unwrap_or(0);
                w.sum_ms += r.sum_ms.unwrap_or(0);
                w.histograms.extend(r.histogram);
            }
        }
        Ok(out)
    }

    pub async fn create_live_run(&self, run: &NewRun) -> Result<i64> {
        let mut tx = self.begin_write().await?;
        let id = insert_run_tx(&mut tx.tx, run, &RunData::default()).await?;
        sqlx::query("UPDATE runs SET status = 'live', started_at_ms = NULL WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Replaces a run's aggregates (a live run's newest snapshot, or exact figures from
    /// its result file) in one transaction, and sets its status (`live` or `complete`)
    /// and, when given, its tool and source. `false` if there is no such run.
    ///
    /// `draws` are its bootstrap draws (see [`Backend::insert_runs`]): a `live` run has
    /// none until it completes.
    pub async fn replace_run_data(
        &self,
        id: i64,
        data: &RunData,
        draws: &stored::RunBlobs,
        status: &str,
        tool_source: Option<(&str, &str)>,
    ) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let found = sqlx::query(
            "UPDATE runs SET status = $1, summary_only = $2, started_at_ms = $3, ended_at_ms = $4,
                             rejected_rows = $5, folded_labels = $6, reported = $7,
                             tool = COALESCE($8, tool), source = COALESCE($9, source)
             WHERE id = $10",
        )
        .bind(status)
        .bind(data.summary_only)
        .bind(clock_time(data.overall.first_start_ms))
        .bind(clock_time(data.overall.last_end_ms))
        .bind(to_i64(data.rejected_rows))
        .bind(to_i64(data.folded_labels))
        .bind(data.reported.to_string())
        .bind(tool_source.map(|t| t.0))
        .bind(tool_source.map(|t| t.1))
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            > 0;
        if !found {
            return Ok(false);
        }
        for sql in [
            "DELETE FROM run_stats WHERE run_id = $1",
            "DELETE FROM run_buckets WHERE run_id = $1",
            "DELETE FROM run_errors WHERE run_id = $1",
            "DELETE FROM run_rejected WHERE run_id = $1",
            "DELETE FROM run_resamples WHERE run_id = $1",
            "DELETE FROM run_capacities WHERE run_id = $1",
        ] {
            sqlx::query(sql).bind(id).execute(&mut *tx).await?;
        }
        insert_aggregates(&mut tx.tx, id, data, true).await?;
        insert_draws(&mut tx.tx, id, draws).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Stores a live run's newest changes (see [`crate::store::Store::store_live_changes`]):
    /// statistics, error groups and rejected rows rewritten whole, the changed buckets
    /// upserted, the `added` ones summed into the stored bucket of their second.
    pub async fn store_live_changes(
        &self,
        id: i64,
        changes: &RunChanges,
        status: &str,
    ) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        if !write_live_changes(&mut tx, id, changes, status).await? {
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    /// See [`crate::store::Store::open_live_run`].
    pub async fn open_live_run(&self, key: &str, run: &NewRun, now_ms: i64) -> Result<(i64, bool)> {
        for _ in 0..3 {
            let mut tx = self.begin_write().await?;
            let found: Option<(i64,)> =
                sqlx::query_as("SELECT id FROM runs WHERE live_key = $1 AND status = 'live'")
                    .bind(key)
                    .fetch_optional(&mut *tx)
                    .await?;
            if let Some((id,)) = found {
                return Ok((id, false));
            }
            let id = insert_run_tx(&mut tx.tx, run, &RunData::default()).await?;
            let set = sqlx::query(
                "UPDATE runs SET status = 'live', started_at_ms = NULL, live_key = $1,
                                 live_seen_ms = $2
                 WHERE id = $3",
            )
            .bind(key)
            .bind(now_ms)
            .bind(id)
            .execute(&mut *tx)
            .await;
            match set {
                Ok(_) => {
                    tx.commit().await?;
                    return Ok((id, true));
                }
                // Another process opened the key's run first: use it.
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(sqlx::Error::Protocol(format!(
            "the live run {key:?} was opened and closed three times while it was looked up"
        ))
        .into())
    }

    /// See [`crate::store::Store::add_live_delta`].
    pub async fn add_live_delta(
        &self,
        id: i64,
        delta: &RunChanges,
        limits: &RunLimits,
        now_ms: i64,
    ) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let run: Option<(String, i64, i64, String)> = sqlx::query_as(concat!(
            "SELECT status, rejected_rows, folded_labels, reported FROM runs
             WHERE id = $1 AND live_key IS NOT NULL",
            for_update!()
        ),
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((status, rejected_rows, folded_labels, reported)) = run else {
            return Ok(false);
        };
        if status != "live" {
            return Ok(false);
        }
        let scopes: Vec<StoredScopeRow> = sqlx::query_as(stored_scopes_sql!("$1"))
            .bind(id)
            .fetch_all(&mut *tx)
            .await?;
        let errors: Vec<ErrorRow> = sqlx::query_as(
            "SELECT label, response_code, message, count, first_seen_ms, last_seen_ms
             FROM run_errors WHERE run_id = $1",
        )
        .bind(id)
        .fetch_all(&mut *tx)
        .await?;
        let rejected: Vec<RejectedRowRow> =
            sqlx::query_as("SELECT line, reason FROM run_rejected WHERE run_id = $1 ORDER BY line")
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
        let stored = stored_aggregates(
            scopes,
            errors,
            rejected,
            rejected_rows,
            folded_labels,
            &reported,
        );
        let merged = merge::add_delta(stored, &delta.data, limits);
        let added = delta
            .data
            .buckets
            .iter()
            .chain(&delta.added)
            .map(|b| merged.label_of(b))
            .collect();
        let changes = RunChanges {
            data: merged.data,
            added,
        };
        write_live_changes(&mut tx, id, &changes, "live").await?;
        sqlx::query("UPDATE runs SET live_seen_ms = $1 WHERE id = $2")
            .bind(now_ms)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// See [`crate::store::Store::close_idle_live_runs`].
    pub async fn close_idle_live_runs(&self, seen_before_ms: i64) -> Result<Vec<i64>> {
        let idle: Option<(i64,)> = sqlx::query_as(
            "SELECT id FROM runs
             WHERE status = 'live' AND live_key IS NOT NULL AND live_seen_ms < $1 LIMIT 1",
        )
        .bind(seen_before_ms)
        .fetch_optional(&self.pool)
        .await?;
        if idle.is_none() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin_write().await?;
        let ids: Vec<(i64,)> = sqlx::query_as(
            "UPDATE runs SET status = 'complete'
             WHERE status = 'live' AND live_key IS NOT NULL AND live_seen_ms < $1
             RETURNING id",
        )
        .bind(seen_before_ms)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(ids.into_iter().map(|(id,)| id).collect())
    }

    /// See [`crate::store::Store::end_live_run`].
    pub async fn end_live_run(&self, id: i64) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let ended = sqlx::query(
            "UPDATE runs SET status = 'complete'
             WHERE id = $1 AND status = 'live' AND live_key IS NOT NULL",
        )
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            > 0;
        tx.commit().await?;
        Ok(ended)
    }

    pub async fn close_stale_live_runs(&self, quiet_since_ms: i64) -> Result<u64> {
        Ok(sqlx::query(
            "UPDATE runs SET status = 'complete'
             WHERE status = 'live'
               AND CASE WHEN live_key IS NULL THEN COALESCE(ended_at_ms, imported_at_ms)
                        ELSE live_seen_ms END < $1",
        )
        .bind(quiet_since_ms)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// Changes a run's name, scenario, notes and/or tags (each only when given; `tags`
    /// replaces the whole set). `false` if there is no such run.
    pub async fn update_run(&self, id: i64, patch: &RunPatch) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let found = sqlx::query(
            "UPDATE runs SET name = COALESCE($1, name),
                             scenario = CASE WHEN CAST($2 AS BOOLEAN) THEN $3 ELSE scenario END,
                             notes = CASE WHEN CAST($4 AS BOOLEAN) THEN $5 ELSE notes END
             WHERE id = $6",
        )
        .bind(&patch.name)
        .bind(patch.scenario.is_some())
        .bind(patch.scenario.clone().flatten())
        .bind(patch.notes.is_some())
        .bind(patch.notes.clone().flatten())
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            > 0;
        if found && let Some(tags) = &patch.tags {
            sqlx::query("DELETE FROM run_tags WHERE run_id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            if !tags.is_empty() {
                let mut qb: QueryBuilder<Db> =
                    QueryBuilder::new("INSERT INTO run_tags (run_id, key, value) ");
                qb.push_values(tags, |mut b, (k, v)| {
                    b.push_bind(id).push_bind(k).push_bind(v);
                });
                qb.build().execute(&mut *tx).await?;
            }
        }
        tx.commit().await?;
        Ok(found)
    }

    /// Deletes a run and everything stored for it; `false` if there was no such run. The
    /// space it held is given back (see the backend's `free_deleted_pages` and
    /// `reclaim_run_space`).
    pub async fn delete_run(&self, id: i64) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let deleted = sqlx::query("DELETE FROM runs WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
        if deleted {
            self.free_deleted_pages(&mut tx).await?;
        }
        tx.commit().await?;
        if deleted {
            self.reclaim_run_space(id).await;
        }
        Ok(deleted)
    }

    /// Number of stored runs.
    pub async fn count_runs(&self) -> Result<i64> {
        Ok(sqlx::query("SELECT COUNT(*) FROM runs")
            .fetch_one(&self.pool)
            .await?
            .get(0))
    }
}

async fn insert_run_tx(
    tx: &mut Transaction<'_, Db>,
    run: &NewRun,
    data: &RunData,
) -> Result<i64> {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO runs (name, scenario, tool, source, summary_only, started_at_ms, ended_at_ms,
                           imported_at_ms, rejected_rows, folded_labels, reported)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
    )
    .bind(&run.name)
    .bind(&run.scenario)
    .bind(&run.tool)
    .bind(&run.source)
    .bind(data.summary_only)
    .bind(clock_time(data.overall.first_start_ms))
    .bind(clock_time(data.overall.last_end_ms))
    .bind(run.imported_at_ms)
    .bind(to_i64(data.rejected_rows))
    .bind(to_i64(data.folded_labels))
    .bind(data.reported.to_string())
    .fetch_one(&mut **tx)
    .await?;

    if !run.tags.is_empty() {
        // The last value of a key wins (one statement may not upsert the same key twice on
        // PostgreSQL).
        let tags: std::collections::BTreeMap<&str, &str> = run
            .tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut qb: QueryBuilder<Db> =
            QueryBuilder::new("INSERT INTO run_tags (run_id, key, value) ");
        qb.push_values(&tags, |mut b, (k, v)| {
            b.push_bind(id).push_bind(*k).push_bind(*v);
        });
        qb.push(" ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value");
        qb.build().execute(&mut **tx).await?;
    }
    insert_aggregates(tx, id, data, true).await?;
    Ok(id)
}

/// Writes a run's bootstrap draws, one `(label_ord, blob)` per scope (replacing any).
pub(super) async fn insert_draws(
    tx: &mut Transaction<'_, Db>,
    id: i64,
    draws: &[(i64, Vec<u8>)],
) -> Result<()> {
    for chunk in draws.chunks(chunk_rows(3)) {
        let mut qb: QueryBuilder<Db> =
            QueryBuilder::new("INSERT INTO run_resamples (run_id, label_ord, draws) ");
        qb.push_values(chunk, |mut b, (ord, blob)| {
            b.push_bind(id).push_bind(*ord).push_bind(blob);
        });
        qb.push(" ON CONFLICT (run_id, label_ord) DO UPDATE SET draws = excluded.draws");
        qb.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// The writing half of [`Backend::store_live_changes`] on an open write transaction:
/// `false` (nothing written) if there is no run `id`.
async fn write_live_changes(
    tx: &mut WriteTx,
    id: i64,
    changes: &RunChanges,
    status: &str,
) -> Result<bool> {
    let data = &changes.data;
    let found = sqlx::query(
        "UPDATE runs SET status = $1, started_at_ms = $2, ended_at_ms = $3, rejected_rows = $4,
                         folded_labels = $5, reported = $6
         WHERE id = $7",
    )
    .bind(status)
    .bind(clock_time(data.overall.first_start_ms))
    .bind(clock_time(data.overall.last_end_ms))
    .bind(to_i64(data.rejected_rows))
    .bind(to_i64(data.folded_labels))
    .bind(data.reported.to_string())
    .bind(id)
    .execute(&mut **tx)
    .await?
    .rows_affected()
        > 0;
    if !found {
        return Ok(false);
    }
    for sql in [
        "DELETE FROM run_stats WHERE run_id = $1",
        "DELETE FROM run_errors WHERE run_id = $1",
        "DELETE FROM run_rejected WHERE run_id = $1",
        "DELETE FROM run_capacities WHERE run_id = $1",
    ] {
        sqlx::query(sql).bind(id).execute(&mut **tx).await?;
    }
    insert_aggregates(&mut tx.tx, id, data, false).await?;
    let changed = scoped_buckets(data, &data.buckets);
    upsert_buckets(&mut tx.tx, id, &changed).await?;
    // Added buckets (late samples, a live delta's): summed with the stored bucket of their
    // label and second, read and written back in a few statements whatever their number.
    // A live delta's writer holds the run's row, so no other writer touches them meanwhile.
    let added = scoped_buckets(data, &changes.added);
    if !added.is_empty() {
        let seconds: Vec<i64> = added
            .iter()
            .map(|(_, b)| b.start_ms)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        // The scopes too, so the key (run, scope, second) finds each stored bucket: with
        // the seconds alone every bucket of the run is read, and a long run slows down.
        let ords: Vec<i64> = added
            .iter()
            .map(|(o, _)| *o)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let stored = stored_buckets(&mut tx.tx, id, &ords, &seconds).await?;
        let sums = sum_added_buckets(id, &added, stored)?;
        let rows: Vec<(i64, &Bucket)> = sums.iter().map(|(o, b)| (*o, b)).collect();
        upsert_buckets(&mut tx.tx, id, &rows).await?;
    }
    Ok(true)
}
