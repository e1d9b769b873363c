//! The SQLite side of [`crate::store::compare`]: its operations on `SqliteStore`.

use super::SqliteStore;
use crate::store::Result;
use crate::store::compare::*;
use crate::store::runs::RunListItem;
impl SqliteStore {
    /// Every bucket of every scope of a run, one row per scope (by scope, buckets by
    /// start). Packed by SQLite because sqlx hands rows over one at a time through a
    /// channel (a few µs each): a comparison of ten runs of a dozen labels reads 60,000
    /// buckets, and this way 130 rows.
    pub async fn run_packed_buckets(&self, id: i64) -> Result<Vec<PackedBuckets>> {
        Ok(sqlx::query_as(
            "SELECT label_ord,
                    group_concat(start_ms || ',' || count || ',' || errors || ',' || sum_ms
                                 || ',' || max_ms || ',' || hex(histogram), ';'
                                 ORDER BY start_ms) AS packed
             FROM run_buckets WHERE run_id = ? GROUP BY label_ord ORDER BY label_ord",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?)
    }

    /// A run's stored bootstrap draws (see [`crate::domain::compare::stored`]), one
    /// `(label_ord, blob)` per scope that has them, by scope; only the run total's when
    /// `total_only`.
    pub async fn run_draws(&self, id: i64, total_only: bool) -> Result<Vec<(i64, Vec<u8>)>> {
        let sql = if total_only {
            "SELECT label_ord, draws FROM run_resamples WHERE run_id = ? AND label_ord = 0"
        } else {
            "SELECT label_ord, draws FROM run_resamples WHERE run_id = ? ORDER BY label_ord"
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
            sqlx::query_as("SELECT key, capacity FROM run_capacities WHERE run_id = ?")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// Keeps (or replaces) a run's capacity.
    pub async fn put_run_capacity(&self, id: i64, key: &str, json: &str) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT OR REPLACE INTO run_capacities (run_id, key, capacity) VALUES (?, ?, ?)",
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
    pub async fn scenario_runs(&self, scenario: &str) -> Result<Vec<RunListItem>> {
        let rows: Vec<RunListItem> = sqlx::query_as(
            "SELECT r.id, r.name, r.scenario, r.tool, r.status, r.summary_only, r.started_at_ms,
                    s.window_ms AS duration_ms, r.imported_at_ms, s.count, s.errors,
                    CASE WHEN s.count > 0 THEN s.errors * 100.0 / s.count END AS error_pct,
                    s.p95_ms, s.throughput_rps, r.rejected_rows,
                    EXISTS (SELECT 1 FROM run_buckets b WHERE b.run_id = r.id AND b.label_ord = 0)
                        AS has_series,
                    k.key AS capacity_key, k.capacity AS capacity_json,
                    CASE WHEN r.tool = 'harrier' THEN json_extract(r.reported, '$.search.throughput_rps') END AS search_rps
             FROM runs r JOIN run_stats s ON s.run_id = r.id AND s.label_ord = 0
              LEFT JOIN run_capacities k ON k.run_id = r.id
             WHERE r.scenario = ?
             ORDER BY COALESCE(r.started_at_ms, r.imported_at_ms), r.id",
        )
        .bind(scenario)
        .fetch_all(&self.pool)
        .await?;
        Ok(crate::store::runs::with_urls(rows))
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
            "INSERT INTO baselines (scenario, run_id, pinned_at_ms) VALUES (?, ?, ?)
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
        Ok(sqlx::query("DELETE FROM baselines WHERE scenario = ?")
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
             WHERE b.scenario = ? AND r.scenario = b.scenario",
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
             VALUES (?, ?, ?, ?, ?)",
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
             WHERE r.scenario = ?
               AND c.id = (SELECT MAX(id) FROM run_checks WHERE run_id = c.run_id)",
        )
        .bind(scenario)
        .fetch_all(&self.pool)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::runs::RunData;
    use crate::store::NewRun;

    async fn run(store: &SqliteStore, name: &str, scenario: &str, at: i64) -> i64 {
        let mut data = RunData::default();
        data.overall.first_start_ms = Some(at);
        store
            .insert_run(
                &NewRun {
                    name: name.into(),
                    scenario: Some(scenario.into()),
                    tool: "jmeter".into(),
                    imported_at_ms: at,
                    ..NewRun::default()
                },
                &data,
            )
            .await
            .unwrap()
    }

    #[sqlx::test(migrations = false)]
    async fn baselines_checks_and_scenarios(pool: sqlx::SqlitePool) {
        let store = SqliteStore::from_pool(pool).await.unwrap();
        let a = run(&store, "a", "checkout", 1_000).await;
        let b = run(&store, "b", "checkout", 2_000).await;
        let _c = run(&store, "c", "search", 3_000).await;
        let ids: Vec<i64> = store
            .scenario_runs("checkout")
            .await
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, [a, b], "oldest first, one scenario");
        assert_eq!(store.pinned_baseline("checkout").await.unwrap(), None);
        store.set_baseline("checkout", a, 5).await.unwrap();
        store.set_baseline("checkout", b, 6).await.unwrap();
        assert_eq!(store.pinned_baseline("checkout").await.unwrap(), Some(b));
        let scenarios = store.list_scenarios().await.unwrap();
        assert_eq!(scenarios[0].scenario, "search");
        assert_eq!(scenarios[1].runs, 2);
        assert_eq!(scenarios[1].baseline_run_id, Some(b));
        store.record_check(a, None, false, "[]", 7).await.unwrap();
        store.record_check(a, None, true, "[]", 8).await.unwrap();
        let checks = store.scenario_checks("checkout").await.unwrap();
        assert_eq!(checks.len(), 1);
        assert!(checks[0].passed, "the latest check counts");
        assert!(store.clear_baseline("checkout").await.unwrap());
        assert!(!store.clear_baseline("checkout").await.unwrap());
        assert_eq!(store.pinned_baseline("checkout").await.unwrap(), None);
        // Deleting the run drops its pin.
        store.set_baseline("checkout", a, 9).await.unwrap();
        store.delete_run(a).await.unwrap();
        assert_eq!(store.pinned_baseline("checkout").await.unwrap(), None);
    }

    #[sqlx::test(migrations = false)]
    async fn draws_are_stored_with_complete_runs_only(pool: sqlx::SqlitePool) {
        use crate::domain::runs::{RunBuilder, Sample};
        let store = SqliteStore::from_pool(pool).await.unwrap();
        let mut b = RunBuilder::new();
        for i in 0..300i64 {
            b.push(
                1,
                &Sample {
                    label: if i % 2 == 0 { "A" } else { "B" },
                    start_ms: 1_700_000_000_000 + i * 100,
                    elapsed_ms: 10 + (i % 7) as u64,
                    success: true,
                    response_code: "200",
                    message: "",
                    bytes_received: 1,
                    bytes_sent: 1,
                    active_users: None,
                    is_transaction: false,
                },
            );
        }
        let data = b.finish();
        let id = store
            .create_live_run(&NewRun {
                name: "live".into(),
                tool: "k6".into(),
                ..NewRun::default()
            })
            .await
            .unwrap();
        // A live snapshot: no draws yet (the data still changes).
        store
            .replace_run_data(id, &data, "live", None)
            .await
            .unwrap();
        assert!(store.run_draws(id, false).await.unwrap().is_empty());
        // Complete: one blob per scope (total, A, B), readable with the default resamples.
        store
            .replace_run_data(id, &data, "complete", None)
            .await
            .unwrap();
        let rows = store.run_draws(id, false).await.unwrap();
        assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 2]);
        for (_, blob) in &rows {
            let r = crate::domain::compare::stored::resampled(
                blob,
                crate::domain::compare::DEFAULT_RESAMPLES,
            );
            assert!(
                r.is_some_and(|r| r.is_some()),
                "a scope with buckets has draws"
            );
        }
        let total = store.run_draws(id, true).await.unwrap();
        assert_eq!(total, rows[..1]);
        // Replaced by hand (as a comparison does for older runs), and dropped with the run.
        store.put_run_draws(id, &[(1, vec![9])]).await.unwrap();
        assert_eq!(store.run_draws(id, false).await.unwrap()[1].1, [9]);
        store.delete_run(id).await.unwrap();
        assert!(store.run_draws(id, false).await.unwrap().is_empty());
    }
}
