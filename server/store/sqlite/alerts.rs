//! The SQLite side of [`crate::store::alerts`]: its operations on `SqliteStore`.

use super::SqliteStore;
use crate::domain::alerts::eval::{Alert, Phase, Transition};
use crate::domain::alerts::rule::Rule;
use crate::store::Result;
use crate::store::alerts::*;
use sqlx::{QueryBuilder, Sqlite};
fn push_match(q: &mut QueryBuilder<Sqlite>, filter: &HistoryFilter) {
    if let Some(r) = &filter.rule {
        q.push(" AND rule = ").push_bind(r.clone());
    }
    for (name, value) in &filter.labels {
        // A JSON path with the name quoted, so any label name is one key.
        let path = format!("$.\"{}\"", name.replace('"', ""));
        q.push(" AND json_extract(labels, ")
            .push_bind(path)
            .push(") = ")
            .push_bind(value.clone());
    }
}

/// Ends the active alerts of rules leaving force — `rule` (deleted or changed), or every
/// rule no longer in force: a `resolved` (firing) or `inactive` (pending) history row each,
/// their alerts in the notification groups resolved now (so receivers get the resolved
/// message at the group's next flush instead of repeats of a firing one), then deleted.
async fn end_alerts_of(
    tx: &mut sqlx::SqliteConnection,
    rule: Option<&str>,
    now_ms: i64,
) -> Result<()> {
    let cond = |q: &mut QueryBuilder<Sqlite>| match rule {
        Some(name) => {
            q.push(" rule = ").push_bind(name.to_string());
        }
        None => {
            q.push(" rule NOT IN (SELECT name FROM alert_rules WHERE deleted_at_ms IS NULL)");
        }
    };
    let mut q = QueryBuilder::<Sqlite>::new(
        "INSERT INTO alert_history (rule, labels, change, value, at_ms) \
         SELECT rule, labels, CASE state WHEN 'firing' THEN 'resolved' ELSE 'inactive' END, \
         value, ",
    );
    q.push_bind(now_ms).push(" FROM alerts WHERE");
    cond(&mut q);
    q.build().execute(&mut *tx).await?;
    let mut q = QueryBuilder::<Sqlite>::new("UPDATE alert_group_alerts SET ends_at_ms = ");
    q.push_bind(now_ms).push(" WHERE ends_at_ms IS NULL AND");
    cond(&mut q);
    q.build().execute(&mut *tx).await?;
    let mut q = QueryBuilder::<Sqlite>::new("DELETE FROM alerts WHERE");
    cond(&mut q);
    q.build().execute(&mut *tx).await?;
    Ok(())
}

impl SqliteStore {
    /// The rules in force (deleted built-ins left out), by name.
    pub async fn list_alert_rules(&self) -> Result<Vec<StoredRule>> {
        let rows: Vec<RuleRow> = sqlx::query_as(
            "SELECT body, origin, updated_at_ms FROM alert_rules
             WHERE deleted_at_ms IS NULL ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().filter_map(RuleRow::into_stored).collect())
    }

    /// One rule in force, by name.
    pub async fn get_alert_rule(&self, name: &str) -> Result<Option<StoredRule>> {
        let row: Option<RuleRow> = sqlx::query_as(
            "SELECT body, origin, updated_at_ms FROM alert_rules
             WHERE name = ? AND deleted_at_ms IS NULL",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.and_then(RuleRow::into_stored))
    }

    /// Adds a rule; `false` when a rule of that name is in force. A deleted built-in of
    /// the same name is replaced.
    pub async fn insert_alert_rule(&self, rule: &Rule, origin: &str, now_ms: i64) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO alert_rules (name, body, origin, created_at_ms, updated_at_ms)
             VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (name) DO UPDATE SET body = excluded.body, origin = excluded.origin,
               created_at_ms = excluded.created_at_ms, updated_at_ms = excluded.updated_at_ms,
               deleted_at_ms = NULL
             WHERE alert_rules.deleted_at_ms IS NOT NULL",
        )
        .bind(&rule.name)
        .bind(rule_json(rule))
        .bind(origin)
        .bind(now_ms)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Replaces rule `name` (which may be renamed to `rule.name`); its active alerts are
    /// dropped (they belong to the old condition). `false` when no such rule is in force.
    pub async fn update_alert_rule(&self, name: &str, rule: &Rule, now_ms: i64) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        // A deleted built-in may hold the new name; it gives way.
        sqlx::query(
            "DELETE FROM alert_rules WHERE name = ? AND name <> ? AND deleted_at_ms IS NOT NULL",
        )
        .bind(&rule.name)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        // A built-in renamed becomes the user's rule; its old name stays deleted so the
        // next start does not add it again.
        let renamed_builtin: Option<String> = sqlx::query_scalar(
            "SELECT body FROM alert_rules
             WHERE name = ? AND name <> ? AND origin = 'builtin' AND deleted_at_ms IS NULL",
        )
        .bind(name)
        .bind(&rule.name)
        .fetch_optional(&mut *tx)
        .await?;
        let done = sqlx::query(
            "UPDATE alert_rules SET name = ?, body = ?, updated_at_ms = ?,
               origin = CASE WHEN ? THEN 'api' ELSE origin END
             WHERE name = ? AND deleted_at_ms IS NULL",
        )
        .bind(&rule.name)
        .bind(rule_json(rule))
        .bind(now_ms)
        .bind(renamed_builtin.is_some())
        .bind(name)
        .execute(&mut *tx)
        .await?;
        if let Some(body) = renamed_builtin {
            sqlx::query(
                "INSERT INTO alert_rules (name, body, origin, created_at_ms, updated_at_ms,
                   deleted_at_ms) VALUES (?, ?, 'builtin', ?, ?, ?)",
            )
            .bind(name)
            .bind(body)
            .bind(now_ms)
            .bind(now_ms)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        end_alerts_of(&mut tx, Some(name), now_ms).await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes rule `name` and its active alerts (a built-in rule is marked deleted so it
    /// is not seeded again). `false` when no such rule is in force.
    pub async fn delete_alert_rule(&self, name: &str, now_ms: i64) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let marked = sqlx::query(
            "UPDATE alert_rules SET deleted_at_ms = ?
             WHERE name = ? AND origin = 'builtin' AND deleted_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(name)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let deleted = sqlx::query(
            "DELETE FROM alert_rules WHERE name = ? AND origin <> 'builtin' AND deleted_at_ms IS NULL",
        )
        .bind(name)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        end_alerts_of(&mut tx, Some(name), now_ms).await?;
        tx.commit().await?;
        Ok(marked + deleted > 0)
    }

    /// At start-up: adds the built-in rules that were never stored (a deleted one stays
    /// deleted) and writes the configuration file's rules over any stored rule of the
    /// same name (`origin = config`). Rules the configuration file no longer has, and
    /// built-ins not in `builtin` (`builtin_rules = false`), are removed with their
    /// active alerts, as Prometheus drops the rules of a reloaded file; built-ins
    /// removed that way come back when turned on again.
    pub async fn seed_alert_rules(
        &self,
        builtin: &[Rule],
        config: &[Rule],
        now_ms: i64,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for r in builtin {
            sqlx::query(
                "INSERT INTO alert_rules (name, body, origin, created_at_ms, updated_at_ms)
                 VALUES (?, ?, 'builtin', ?, ?) ON CONFLICT (name) DO NOTHING",
            )
            .bind(&r.name)
            .bind(rule_json(r))
            .bind(now_ms)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        for r in config {
            sqlx::query(
                "INSERT INTO alert_rules (name, body, origin, created_at_ms, updated_at_ms)
                 VALUES (?, ?, 'config', ?, ?)
                 ON CONFLICT (name) DO UPDATE SET body = excluded.body, origin = 'config',
                   updated_at_ms = excluded.updated_at_ms, deleted_at_ms = NULL
                 WHERE alert_rules.body <> excluded.body OR alert_rules.origin <> 'config'
                   OR alert_rules.deleted_at_ms IS NOT NULL",
            )
            .bind(&r.name)
            .bind(rule_json(r))
            .bind(now_ms)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        for (origin, keep, only_in_force) in [("config", config, false), ("builtin", builtin, true)]
        {
            let mut q = QueryBuilder::<Sqlite>::new("DELETE FROM alert_rules WHERE origin = ");
            q.push_bind(origin);
            if only_in_force {
                q.push(" AND deleted_at_ms IS NULL");
            }
            if !keep.is_empty() {
                q.push(" AND name NOT IN (");
                let mut sep = q.separated(", ");
                for r in keep {
                    sep.push_bind(&r.name);
                }
                q.push(")");
            }
            q.build().execute(&mut *tx).await?;
        }
        end_alerts_of(&mut tx, None, now_ms).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The active alerts (pending and firing), by rule and labels.
    pub async fn list_alerts(&self) -> Result<Vec<Alert>> {
        let rows: Vec<AlertRow> = sqlx::query_as(
            "SELECT rule, labels, state, value, active_since_ms, fired_at_ms,
                    keep_firing_since_ms, last_eval_ms
             FROM alerts ORDER BY rule, labels",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(|r| {
                Some(Alert {
                    state: Phase::parse(&r.state)?,
                    labels: labels_of(&r.labels),
                    rule: r.rule,
                    value: r.value,
                    active_since_ms: r.active_since_ms,
                    fired_at_ms: r.fired_at_ms,
                    keep_firing_since_ms: r.keep_firing_since_ms,
                    last_eval_ms: r.last_eval_ms,
                })
            })
            .collect())
    }

    /// Firing alerts per rule: `(rule, count)`, by rule (the console's nav badge).
    pub async fn firing_counts(&self) -> Result<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT rule, count(*) FROM alerts WHERE state = 'firing' GROUP BY rule ORDER BY rule",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Saves one evaluation round in one transaction: the active alerts of the `rules`
    /// evaluated are replaced by `alerts` (alerts of rules no longer in force are dropped); `transitions` go to the history, and those that
    /// notify (firing, resolved) to the outbox. Returns the outbox ids added.
    pub async fn save_evaluation(
        &self,
        rules: &[String],
        alerts: &[Alert],
        transitions: &[Transition],
        now_ms: i64,
    ) -> Result<Vec<i64>> {
        Ok(self
            .save_evaluation_fenced(None, rules, alerts, transitions, now_ms)
            .await?
            .unwrap_or_default())
    }

    /// As [`Self::save_evaluation`], only while `fence` is held in its term at `now_ms`,
    /// checked last in the same transaction (which holds the database); `None` (nothing
    /// saved) when it is not.
    pub async fn save_evaluation_fenced(
        &self,
        fence: Option<&LeaseTerm<'_>>,
        rules: &[String],
        alerts: &[Alert],
        transitions: &[Transition],
        now_ms: i64,
    ) -> Result<Option<Vec<i64>>> {
        let mut tx = self.begin_write().await?;
        for chunk in rules.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Sqlite>::new("DELETE FROM alerts WHERE rule IN (");
            let mut sep = q.separated(", ");
            for r in chunk {
                sep.push_bind(r);
            }
            q.push(")");
            q.build().execute(&mut *tx).await?;
        }
        for chunk in alerts.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO alerts (rule, labels, state, value, active_since_ms, fired_at_ms, \
                 keep_firing_since_ms, last_eval_ms) ",
            );
            q.push_values(chunk, |mut b, a| {
                b.push_bind(&a.rule)
                    .push_bind(labels_json(&a.labels))
                    .push_bind(a.state.as_str())
                    .push_bind(a.value.filter(|v| v.is_finite()))
                    .push_bind(a.active_since_ms)
                    .push_bind(a.fired_at_ms)
                    .push_bind(a.keep_firing_since_ms)
                    .push_bind(a.last_eval_ms);
            });
            q.build().execute(&mut *tx).await?;
        }
        for chunk in transitions.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO alert_history (rule, labels, change, value, at_ms) ",
            );
            q.push_values(chunk, |mut b, t| {
                b.push_bind(&t.rule)
                    .push_bind(labels_json(&t.labels))
                    .push_bind(t.change.as_str())
                    .push_bind(t.value.filter(|v| v.is_finite()))
                    .push_bind(t.at_ms);
            });
            q.build().execute(&mut *tx).await?;
        }
        // A rule deleted or changed while this round ran: its alerts go (they were
        // evaluated under the old rule).
        end_alerts_of(&mut tx, None, now_ms).await?;
        let notices: Vec<&Transition> = transitions.iter().filter(|t| t.notifies()).collect();
        let mut ids = Vec::new();
        for chunk in notices.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO alert_notifications (rule, labels, change, value, started_at_ms, \
                 ended_at_ms, created_at_ms) ",
            );
            q.push_values(chunk, |mut b, t| {
                let resolved = t.change == crate::domain::alerts::eval::Change::Resolved;
                b.push_bind(&t.rule)
                    .push_bind(labels_json(&t.labels))
                    .push_bind(t.change.as_str())
                    .push_bind(t.value.filter(|v| v.is_finite()))
                    .push_bind(t.alert.fired_at_ms.unwrap_or(t.alert.active_since_ms))
                    .push_bind(resolved.then_some(t.at_ms))
                    .push_bind(now_ms);
            });
            q.push(" RETURNING id");
            let rows: Vec<(i64,)> = q.build_query_as().fetch_all(&mut *tx).await?;
            ids.extend(rows.into_iter().map(|(id,)| id));
        }
        if let Some(f) = fence {
            let held: Option<i64> = sqlx::query_scalar(
                "SELECT term FROM leases WHERE name = ? AND holder = ? AND term = ? AND expires_at_ms > ?",
            )
            .bind(f.name)
            .bind(f.holder)
            .bind(f.term)
            .bind(now_ms)
            .fetch_optional(&mut *tx)
            .await?;
            if held.is_none() {
                return Ok(None);
            }
        }
        tx.commit().await?;
        Ok(Some(ids))
    }

    /// The history, newest first: at most `limit` rows, of one rule when given.
    pub async fn alert_history(&self, rule: Option<&str>, limit: i64) -> Result<Vec<HistoryRow>> {
        let filter = HistoryFilter {
            rule: rule.map(str::to_string),
            ..HistoryFilter::default()
        };
        self.alert_history_filtered(&filter, limit).await
    }

    /// The history rows that `filter` selects, newest first, at most `limit`.
    ///
    /// With `from_ms`, each alert identity that was pending or firing at `from_ms` also
    /// gets its last transition before `from_ms` (so a period that began earlier is
    /// known to be open at the start of the range); those rows count towards `limit`.
    pub async fn alert_history_filtered(
        &self,
        filter: &HistoryFilter,
        limit: i64,
    ) -> Result<Vec<HistoryRow>> {
        let mut q = QueryBuilder::<Sqlite>::new(
            "SELECT id, rule, labels, change, value, at_ms FROM alert_history h WHERE 1 = 1",
        );
        push_match(&mut q, filter);
        if let Some(to) = filter.to_ms {
            q.push(" AND at_ms <= ").push_bind(to);
        }
        if let Some(from) = filter.from_ms {
            q.push(" AND (at_ms >= ")
                .push_bind(from)
                .push(
                    " OR (change IN ('pending', 'firing') AND id IN \
                     (SELECT max(id) FROM alert_history WHERE at_ms < ",
                )
                .push_bind(from);
            push_match(&mut q, filter);
            q.push(" GROUP BY rule, labels)))");
        }
        q.push(" ORDER BY at_ms DESC, id DESC LIMIT ")
            .push_bind(limit);
        let rows: Vec<RawHistory> = q.build_query_as().fetch_all(&self.pool).await?;
        Ok(rows
            .into_iter()
            .map(|r| HistoryRow {
                id: r.id,
                labels: labels_of(&r.labels),
                rule: r.rule,
                change: r.change,
                value: r.value,
                at_ms: r.at_ms,
            })
            .collect())
    }

    /// Notifications not yet delivered whose next attempt is due at `now_ms` and that
    /// have had fewer than `max_attempts` attempts, oldest first.
    pub async fn due_notifications(
        &self,
        now_ms: i64,
        max_attempts: i64,
        limit: i64,
    ) -> Result<Vec<Notification>> {
        let rows: Vec<RawNotification> = sqlx::query_as(
            "SELECT id, rule, labels, change, value, started_at_ms, ended_at_ms, created_at_ms,
                    attempts
             FROM alert_notifications
             WHERE delivered_at_ms IS NULL AND next_attempt_ms <= ? AND attempts < ?
             ORDER BY id LIMIT ?",
        )
        .bind(now_ms)
        .bind(max_attempts)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| Notification {
                id: r.id,
                labels: labels_of(&r.labels),
                rule: r.rule,
                change: r.change,
                value: r.value,
                started_at_ms: r.started_at_ms,
                ended_at_ms: r.ended_at_ms,
                created_at_ms: r.created_at_ms,
                attempts: r.attempts,
            })
            .collect())
    }

    /// Notifications not yet delivered, oldest first (whatever their retry time).
    pub async fn undelivered_notifications(&self, limit: i64) -> Result<Vec<Notification>> {
        self.due_notifications(i64::MAX, i64::MAX, limit).await
    }
}

#[cfg(test)]
mod tests {
    use sqlx::SqlitePool;

    use super::*;
    use crate::domain::alerts::eval::{Change, Measured, evaluate};
    use crate::domain::alerts::rule::Duration;

    const MIN: i64 = 60_000;

    fn rule() -> Rule {
        let mut r = Rule::defaults().remove(0);
        r.name = "HighErrors".into();
        r.for_ = Duration(2 * MIN);
        r
    }

    fn measured(v: f64) -> Vec<Measured> {
        vec![Measured {
            labels: std::sync::Arc::new(
                [
                    ("route".to_string(), "/checkout".to_string()),
                    ("service".to_string(), "orders".to_string()),
                ]
                .into(),
            ),
            value: Some(v),
            count: Some(100.0),
        }]
    }

    /// One evaluation round through the store, as the evaluator loop does it.
    async fn round(store: &SqliteStore, r: &Rule, v: f64, t: i64) -> Vec<Transition> {
        let prev = store.list_alerts().await.unwrap();
        let o = evaluate(r, &measured(v), &prev, t);
        store
            .save_evaluation(std::slice::from_ref(&r.name), &o.alerts, &o.transitions, t)
            .await
            .unwrap();
        o.transitions
    }

    #[sqlx::test(migrations = false)]
    async fn rules_round_trip_and_builtins_stay_deleted(pool: SqlitePool) {
        let store = SqliteStore::from_pool(pool).await.unwrap();
        let builtin = Rule::defaults();
        store.seed_alert_rules(&builtin, &[], 1).await.unwrap();
        let names: Vec<String> = store
            .list_alert_rules()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.rule.name)
            .collect();
        assert_eq!(names, ["RouteErrorRateCritical", "RouteErrorRateWarning"]);

        let r = rule();
        assert!(store.insert_alert_rule(&r, "api", 2).await.unwrap());
        assert!(
            !store.insert_alert_rule(&r, "api", 3).await.unwrap(),
            "names are unique"
        );
        let got = store.get_alert_rule("HighErrors").await.unwrap().unwrap();
        assert_eq!((got.rule.clone(), got.origin.as_str()), (r.clone(), "api"));

        let mut changed = r.clone();
        changed.threshold = 7.5;
        assert!(
            store
                .update_alert_rule("HighErrors", &changed, 4)
                .await
                .unwrap()
        );
        assert_eq!(
            store
                .get_alert_rule("HighErrors")
                .await
                .unwrap()
                .unwrap()
                .rule
                .threshold,
            7.5
        );
        assert!(!store.update_alert_rule("Nope", &changed, 4).await.unwrap());

        assert!(
            store
                .delete_alert_rule("RouteErrorRateWarning", 5)
                .await
                .unwrap()
        );
        assert!(store.delete_alert_rule("HighErrors", 5).await.unwrap());
        assert!(!store.delete_alert_rule("HighErrors", 5).await.unwrap());
        store.seed_alert_rules(&builtin, &[], 6).await.unwrap();
        let names: Vec<String> = store
            .list_alert_rules()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.rule.name)
            .collect();
        assert_eq!(
            names,
            ["RouteErrorRateCritical"],
            "a deleted built-in is not seeded again"
        );

        // a config rule overrides a stored rule of the same name
        let mut cfg = builtin[1].clone();
        cfg.threshold = 20.0;
        store.seed_alert_rules(&builtin, &[cfg], 7).await.unwrap();
        let c = store
            .get_alert_rule("RouteErrorRateCritical")
            .await
            .unwrap()
            .unwrap();
        assert_eq!((c.rule.threshold, c.origin.as_str()), (20.0, "config"));
    }

    fn names(rules: Vec<StoredRule>) -> Vec<String> {
        rules.into_iter().map(|r| r.rule.name).collect()
    }

    /// A rule removed from harrier.toml, or the built-ins turned off, are not in force
    /// after the next start (with their alerts); a renamed built-in stays the user's.
    #[sqlx::test(migrations = false)]
    async fn rules_removed_from_the_configuration_go_at_the_next_start(pool: SqlitePool) {
        let store = SqliteStore::from_pool(pool).await.unwrap();
        let builtin = Rule::defaults();
        let mut a = rule();
        a.name = "FromFileA".into();
        let mut b = rule();
        b.name = "FromFileB".into();
        store
            .seed_alert_rules(&builtin, &[a.clone(), b.clone()], 1)
            .await
            .unwrap();
        round(&store, &b, 9.0, MIN).await;
        assert_eq!(store.list_alerts().await.unwrap().len(), 1);
        // B removed from the file, built-ins turned off
        store.seed_alert_rules(&[], &[a.clone()], 2).await.unwrap();
        assert_eq!(
            names(store.list_alert_rules().await.unwrap()),
            ["FromFileA"]
        );
        assert!(
            store.list_alerts().await.unwrap().is_empty(),
            "B's alert went with it"
        );
        // built-ins back on
        store
            .seed_alert_rules(&builtin, &[a.clone()], 3)
            .await
            .unwrap();
        assert_eq!(
            names(store.list_alert_rules().await.unwrap()),
            [
                "FromFileA",
                "RouteErrorRateCritical",
                "RouteErrorRateWarning"
            ]
        );
        // a built-in renamed through the API is the user's rule from then on
        let mut renamed = builtin[1].clone();
        renamed.name = "MyErrors".into();
        assert!(
            store
                .update_alert_rule("RouteErrorRateWarning", &renamed, 4)
                .await
                .unwrap()
        );
        store.seed_alert_rules(&builtin, &[a], 5).await.unwrap();
        let rules = store.list_alert_rules().await.unwrap();
        assert_eq!(
            names(rules.clone()),
            ["FromFileA", "MyErrors", "RouteErrorRateCritical"]
        );
        assert_eq!(rules[1].origin, "api");
    }

    #[sqlx::test(migrations = false)]
    async fn restart_in_the_middle_of_pending_resumes_the_for_timer(pool: SqlitePool) {
        let r = rule();
        let store = SqliteStore::from_pool(pool.clone()).await.unwrap();
        store.insert_alert_rule(&r, "api", 0).await.unwrap();
        let t = round(&store, &r, 9.0, 0).await;
        assert_eq!(t[0].change, Change::Pending);
        round(&store, &r, 9.0, MIN).await;
        drop(store);

        // "restart": a new store over the same database
        let store = SqliteStore::from_pool(pool).await.unwrap();
        let alerts = store.list_alerts().await.unwrap();
        assert_eq!(alerts.len(), 1);
        assert_eq!(alerts[0].state, Phase::Pending);
        assert_eq!(
            alerts[0].active_since_ms, 0,
            "the for timer is not restarted"
        );
        assert_eq!(alerts[0].labels["route"], "/checkout");
        let t = round(&store, &r, 9.0, 2 * MIN).await;
        assert_eq!(
            t.iter().map(|t| t.change).collect::<Vec<_>>(),
            [Change::Firing]
        );
        assert_eq!(store.undelivered_notifications(10).await.unwrap().len(), 1);
    }

    #[sqlx::test(migrations = false)]
    async fn restart_while_firing_neither_resends_nor_loses(pool: SqlitePool) {
        let r = rule();
        let store = SqliteStore::from_pool(pool.clone()).await.unwrap();
        store.insert_alert_rule(&r, "api", 0).await.unwrap();
        for i in 0..=2 {
            round(&store, &r, 9.0, i * MIN).await;
        }
        let notes = store.undelivered_notifications(10).await.unwrap();
        assert_eq!(notes.len(), 1);
        assert_eq!(
            (notes[0].change.as_str(), notes[0].started_at_ms),
            ("firing", 2 * MIN)
        );
        // the dispatcher takes the notice into its groups
        store
            .ingest_notices(&[notes[0].id], &[], 2 * MIN)
            .await
            .unwrap();
        drop(store);

        let store = SqliteStore::from_pool(pool).await.unwrap();
        let a = store.list_alerts().await.unwrap();
        assert_eq!(
            (a[0].state, a[0].fired_at_ms),
            (Phase::Firing, Some(2 * MIN))
        );
        // still bad after the restart: no second "firing"
        assert!(round(&store, &r, 9.0, 3 * MIN).await.is_empty());
        assert!(
            store
                .undelivered_notifications(10)
                .await
                .unwrap()
                .is_empty()
        );
        // recovers: one "resolved" notice for the same episode
        let t = round(&store, &r, 1.0, 4 * MIN).await;
        assert_eq!(t[0].change, Change::Resolved);
        let notes = store.undelivered_notifications(10).await.unwrap();
        assert_eq!(notes.len(), 1);
        assert_eq!(
            (
                notes[0].change.as_str(),
                notes[0].started_at_ms,
                notes[0].ended_at_ms
            ),
            ("resolved", 2 * MIN, Some(4 * MIN))
        );
        assert!(store.list_alerts().await.unwrap().is_empty());

        let h = store.alert_history(Some("HighErrors"), 10).await.unwrap();
        let changes: Vec<&str> = h.iter().map(|h| h.change.as_str()).collect();
        assert_eq!(changes, ["resolved", "firing", "pending"]);
    }

    #[sqlx::test(migrations = false)]
    async fn alerts_of_a_rule_deleted_mid_round_are_dropped(pool: SqlitePool) {
        let store = SqliteStore::from_pool(pool).await.unwrap();
        let r = rule();
        store.insert_alert_rule(&r, "api", 0).await.unwrap();
        // the round read the rule, then the rule was deleted before the round saved
        let o = evaluate(&r, &measured(9.0), &[], 0);
        assert!(store.delete_alert_rule(&r.name, 1).await.unwrap());
        store
            .save_evaluation(std::slice::from_ref(&r.name), &o.alerts, &o.transitions, 2)
            .await
            .unwrap();
        assert!(store.list_alerts().await.unwrap().is_empty());

        // renaming a rule onto the name of a deleted built-in works
        store
            .seed_alert_rules(&Rule::defaults(), &[], 3)
            .await
            .unwrap();
        assert!(
            store
                .delete_alert_rule("RouteErrorRateWarning", 4)
                .await
                .unwrap()
        );
        let mut renamed = Rule::defaults().remove(1);
        renamed.name = "RouteErrorRateWarning".into();
        assert!(
            store
                .update_alert_rule("RouteErrorRateCritical", &renamed, 5)
                .await
                .unwrap()
        );
        let names: Vec<String> = store
            .list_alert_rules()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.rule.name)
            .collect();
        assert_eq!(names, ["RouteErrorRateWarning"]);
    }

    #[sqlx::test(migrations = false)]
    async fn history_by_labels_and_time_keeps_periods_open_at_the_start(pool: SqlitePool) {
        let store = SqliteStore::from_pool(pool).await.unwrap();
        let r = rule();
        store.insert_alert_rule(&r, "api", 0).await.unwrap();
        // pending at 1 min, firing at 3 min, resolved at 10 min
        round(&store, &r, 9.0, MIN).await;
        round(&store, &r, 9.0, 3 * MIN).await;
        round(&store, &r, 1.0, 10 * MIN).await;
        let read = |from: Option<i64>, to: Option<i64>, route: &str| {
            let filter = HistoryFilter {
                labels: [("route".to_string(), route.to_string())].into(),
                from_ms: from,
                to_ms: to,
                ..HistoryFilter::default()
            };
            let store = store.clone();
            async move {
                store
                    .alert_history_filtered(&filter, 100)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|h| (h.change, h.at_ms))
                    .collect::<Vec<_>>()
            }
        };
        assert!(store.firing_counts().await.unwrap().is_empty(), "resolved");
        let all = read(None, None, "/checkout").await;
        assert_eq!(
            all,
            [
                ("resolved".to_string(), 10 * MIN),
                ("firing".to_string(), 3 * MIN),
                ("pending".to_string(), MIN),
            ]
        );
        assert!(read(None, None, "/search").await.is_empty());
        // From 5 min: the firing row of 3 min says it was open at 5 min.
        let late = read(Some(5 * MIN), None, "/checkout").await;
        assert_eq!(
            late,
            [
                ("resolved".to_string(), 10 * MIN),
                ("firing".to_string(), 3 * MIN),
            ]
        );
        // From 11 min: closed before the range, nothing.
        assert!(read(Some(11 * MIN), None, "/checkout").await.is_empty());
        // Up to 2 min: only the pending row.
        assert_eq!(
            read(None, Some(2 * MIN), "/checkout").await,
            [("pending".to_string(), MIN)]
        );
    }
}
