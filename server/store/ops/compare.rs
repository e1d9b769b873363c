//! Comparisons ([`crate::store::compare`]): packed buckets, bootstrap draws, kept
//! capacities, scenarios, baselines and checks, written once and compiled into each
//! backend, whose module names its store `Backend` and its SQL dialect (`hex!`, `json_f64!`).

use super::Backend;
use crate::store::Result;
use crate::store::compare::*;
use crate::store::runs::RunListRow;

impl Backend {
    /// Every bucket of every scope of a run, one row per scope (by scope, buckets by
    /// start). Packed by the database because sqlx hands rows over one at a time through a
    /// channel (a few µs each): a comparison of ten runs of a dozen labels reads 60,000
    /// buckets, and this way 130 rows.
    pub async fn run_packed_buckets(&self, id: i64) -> Result<Vec<PackedBuckets>> {
        Ok(sqlx::query_as(concat!(
            "SELECT label_ord,
                    string_agg(start_ms || ',' || count || ',' || errors || ',' || sum_ms
                                 || ',' || max_ms || ',' || ",
            hex!("histogram"),
            ", ';' ORDER BY start_ms) AS packed
             FROM run_buckets WHERE run_id = $1 GROUP BY label_ord ORDER BY label_ord"
        ))
        .bind(id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A run's stored bootstrap draws (see [`crate::domain::compare::stored`]), one
    /// `(label_ord, blob)` per scope that has them, by scope; only the run total's when
    /// `total_only`.
    pub async fn run_draws(&self, id: i64, total_only: bool) -> Result<Vec<(i64, Vec<u8>)>> {
        let sql = if total_only {
            "SELECT label_ord, draws FROM run_resamples WHERE run_id = $1 AND label_ord = 0"
        } else {
            "SELECT label_ord, draws FROM run_resamples WHERE run_id = $1 ORDER BY label_ord"
        };
        Ok(sqlx::query_as(sql).bind(id).fetch_all(&self.pool).await?)
    }

    /// Stores (or replaces) bootstrap draws of a run's scopes, one `(label_ord, blob)`
    /// each, in one transaction: for runs stored before draws were kept.
    pub async fn put_run_draws(&self, id: i64, draws: &[(i64, Vec<u8>)]) -> Result<()> {
        let mut tx = self.begin_write().await?;
        super::runs::insert_draws(&mut tx.tx, id, draws).await?;
        tx.commit().await?;
        Ok(())
    }

    /// A run's kept capacity `(key, JSON)`, if any.
    pub async fn run_capacity_kept(&self, id: i64) -> Result<Option<(String, String)>> {
        Ok(
            sqlx::query_as("SELECT key, capacity FROM run_capacities WHERE run_id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Keeps (or replaces) a run's capacity.
    pub async fn put_run_capacity(&self, id: i64, key: &str, json: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO run_capacities (run_id, key, capacity) VALUES ($1, $2, $3)
             ON CONFLICT (run_id) DO UPDATE SET key = EXCLUDED.key, capacity = EXCLUDED.capacity",
        )
        .bind(id)
        .bind(key)
        .bind(json)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The runs of a scenario, oldest first (by start, else import time).
    pub async fn scenario_runs(&self, scenario: &str) -> Result<Vec<RunListRow>> {
        let rows: Vec<RunListRow> = sqlx::query_as(concat!(
            "SELECT r.id, r.name, r.scenario, r.tool, r.status, r.summary_only, r.started_at_ms,
                    s.window_ms AS duration_ms, r.imported_at_ms, s.count, s.errors,
                    CASE WHEN s.count > 0 THEN s.errors * CAST(100.0 AS DOUBLE PRECISION) / s.count END AS error_pct,
                    s.p95_ms, s.throughput_rps, r.rejected_rows,
                    EXISTS (SELECT 1 FROM run_buckets b WHERE b.run_id = r.id AND b.label_ord = 0)
                        AS has_series,
                    k.key AS capacity_key, k.capacity AS capacity_json,
                    CASE WHEN r.tool = 'harrier' THEN ",
            json_f64!("r.reported", "search", "throughput_rps"),
            " END AS search_rps
             FROM runs r JOIN run_stats s ON s.run_id = r.id AND s.label_ord = 0
              LEFT JOIN run_capacities k ON k.run_id = r.id
             WHERE r.scenario = $1
             ORDER BY COALESCE(r.started_at_ms, r.imported_at_ms), r.id"
        ))
        .bind(scenario)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows)
    }

    /// Every scenario with its run count, newest activity first.
    pub async fn list_scenarios(&self) -> Result<Vec<ScenarioItem>> {
        Ok(sqlx::query_as(
            "SELECT r.scenario AS scenario, COUNT(*) AS runs,
                    MAX(COALESCE(r.started_at_ms, r.imported_at_ms)) AS last_run_at_ms,
                    (SELECT b.run_id FROM baselines b WHERE b.scenario = r.scenario) AS baseline_run_id
             FROM runs r WHERE r.scenario IS NOT NULL
             GROUP BY r.scenario ORDER BY last_run_at_ms DESC",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Pins `run_id` as the baseline of `scenario` (replacing any earlier pin).
    pub async fn set_baseline(&self, scenario: &str, run_id: i64, now_ms: i64) -> Result<()> {
        sqlx::query(
            "INSERT INTO baselines (scenario, run_id, pinned_at_ms) VALUES ($1, $2, $3)
             ON CONFLICT (scenario) DO UPDATE SET run_id = excluded.run_id,
                                                   pinned_at_ms = excluded.pinned_at_ms",
        )
        .bind(scenario)
        .bind(run_id)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Unpins the baseline of `scenario`; `false` when none was pinned.
    pub async fn clear_baseline(&self, scenario: &str) -> Result<bool> {
        Ok(sqlx::query("DELETE FROM baselines WHERE scenario = $1")
            .bind(scenario)
            .execute(&self.pool)
            .await?
            .rows_affected()
            > 0)
    }

    /// The pinned baseline of `scenario`, while that run still belongs to it.
    pub async fn pinned_baseline(&self, scenario: &str) -> Result<Option<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT b.run_id FROM baselines b JOIN runs r ON r.id = b.run_id
             WHERE b.scenario = $1 AND r.scenario = b.scenario",
        )
        .bind(scenario)
        .fetch_optional(&self.pool)
        .await?)
    }

    /// Stores one check of a run.
    pub async fn record_check(
        &self,
        run_id: i64,
        baseline_run_id: Option<i64>,
        passed: bool,
        results_json: &str,
        now_ms: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO run_checks (run_id, baseline_run_id, passed, checked_at_ms, results)
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(run_id)
        .bind(baseline_run_id)
        .bind(passed)
        .bind(now_ms)
        .bind(results_json)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The latest check of each run of `scenario` that was ever checked.
    pub async fn latest_check_verdicts(&self) -> Result<Vec<(i64, bool)>> {
        Ok(sqlx::query_as(
            "SELECT run_id, passed FROM run_checks
             WHERE id IN (SELECT MAX(id) FROM run_checks GROUP BY run_id)",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn scenario_checks(&self, scenario: &str) -> Result<Vec<CheckRow>> {
        Ok(sqlx::query_as(
            "SELECT c.run_id, c.baseline_run_id, c.passed, c.checked_at_ms, c.results
             FROM run_checks c JOIN runs r ON r.id = c.run_id
             WHERE r.scenario = $1
               AND c.id = (SELECT MAX(id) FROM run_checks WHERE run_id = c.run_id)",
        )
        .bind(scenario)
        .fetch_all(&self.pool)
        .await?)
    }
}
