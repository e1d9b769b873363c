//! Alert rules, active alerts, their history and the notification outbox
//! ([`crate::store::alerts`]): written once and compiled into each backend, whose module
//! names its store `Backend`, its database `Db` and connection `Conn`, and its SQL dialect
//! (`push_json_key`).

use super::{Backend, Conn, Db, push_json_key};
use crate::domain::alerts::eval::{Alert, Phase, Transition};
use crate::domain::alerts::rule::Rule;
use crate::store::Result;
use crate::store::alerts::*;
use sqlx::QueryBuilder;

fn push_match(q: &mut QueryBuilder<Db>, filter: &HistoryFilter) {
    if let Some(r) = &filter.rule {
        q.push(" AND rule = ").push_bind(r.clone());
    }
    for (name, value) in &filter.labels {
        // The stored labels are a JSON object of strings: one key read as text.
        q.push(" AND ");
        push_json_key(q, "labels", name);
        q.push(" = ").push_bind(value.clone());
    }
}

/// Ends the active alerts of rules leaving force — `rule` (deleted or changed), or every
/// rule no longer in force: a `resolved` (firing) or `inactive` (pending) history row each,
/// their alerts in the notification groups resolved now (so receivers get the resolved
/// message at the group's next flush instead of repeats of a firing one), then deleted.
async fn end_alerts_of(tx: &mut Conn, rule: Option<&str>, now_ms: i64) -> Result<()> {
    let cond = |q: &mut QueryBuilder<Db>| match rule {
        Some(name) => {
            q.push(" rule = ").push_bind(name.to_string());
        }
        None => {
            q.push(" rule NOT IN (SELECT name FROM alert_rules WHERE deleted_at_ms IS NULL)");
        }
    };
    let mut q = QueryBuilder::<Db>::new(
        "INSERT INTO alert_history (rule, labels, change, value, at_ms) \
         SELECT rule, labels, CASE state WHEN 'firing' THEN 'resolved' ELSE 'inactive' END, \
         value, ",
    );
    q.push_bind(now_ms).push(" FROM alerts WHERE");
    cond(&mut q);
    q.build().execute(&mut *tx).await?;
    let mut q = QueryBuilder::<Db>::new("UPDATE alert_group_alerts SET ends_at_ms = ");
    q.push_bind(now_ms).push(" WHERE ends_at_ms IS NULL AND");
    cond(&mut q);
    q.build().execute(&mut *tx).await?;
    let mut q = QueryBuilder::<Db>::new("DELETE FROM alerts WHERE");
    cond(&mut q);
    q.build().execute(&mut *tx).await?;
    Ok(())
}

impl Backend {
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
             WHERE name = $1 AND deleted_at_ms IS NULL",
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
             VALUES ($1, $2, $3, $4, $5)
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
            "DELETE FROM alert_rules WHERE name = $1 AND name <> $2 AND deleted_at_ms IS NOT NULL",
        )
        .bind(&rule.name)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        // A built-in renamed becomes the user's rule; its old name stays deleted so the
        // next start does not add it again.
        let renamed_builtin: Option<String> = sqlx::query_scalar(
            "SELECT body FROM alert_rules
             WHERE name = $1 AND name <> $2 AND origin = 'builtin' AND deleted_at_ms IS NULL",
        )
        .bind(name)
        .bind(&rule.name)
        .fetch_optional(&mut *tx)
        .await?;
        let done = sqlx::query(
            "UPDATE alert_rules SET name = $1, body = $2, updated_at_ms = $3,
               origin = CASE WHEN $4 THEN 'api' ELSE origin END
             WHERE name = $5 AND deleted_at_ms IS NULL",
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
                   deleted_at_ms) VALUES ($1, $2, 'builtin', $3, $4, $5)",
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
            "UPDATE alert_rules SET deleted_at_ms = $1
             WHERE name = $2 AND origin = 'builtin' AND deleted_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(name)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let deleted = sqlx::query(
            "DELETE FROM alert_rules WHERE name = $1 AND origin <> 'builtin' AND deleted_at_ms IS NULL",
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
                 VALUES ($1, $2, 'builtin', $3, $4) ON CONFLICT (name) DO NOTHING",
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
                 VALUES ($1, $2, 'config', $3, $4)
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
            let mut q = QueryBuilder::<Db>::new("DELETE FROM alert_rules WHERE origin = ");
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
    /// checked last in the same transaction; `None` (nothing saved) when it is not. On
    /// SQLite the transaction holds the database; on PostgreSQL the check takes no lock (a
    /// paused holder must not hold up a takeover): a holder paused between it and the
    /// commit, one round trip, still stores its round.
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
            let mut q = QueryBuilder::<Db>::new("DELETE FROM alerts WHERE rule IN (");
            let mut sep = q.separated(", ");
            for r in chunk {
                sep.push_bind(r);
            }
            q.push(")");
            q.build().execute(&mut *tx).await?;
        }
        for chunk in alerts.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Db>::new(
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
            let mut q = QueryBuilder::<Db>::new(
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
            let mut q = QueryBuilder::<Db>::new(
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
                "SELECT term FROM leases WHERE name = $1 AND holder = $2 AND term = $3 AND expires_at_ms > $4",
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
        let mut q = QueryBuilder::<Db>::new(
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
             WHERE delivered_at_ms IS NULL AND next_attempt_ms <= $1 AND attempts < $2
             ORDER BY id LIMIT $3",
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
