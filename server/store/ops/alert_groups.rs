//! Notification groups and the delivery log ([`crate::store::alert_groups`]): written once,
//! compiled into each backend, whose module names its store `Backend` and its SQL dialect
//! (`least!`, `in_list!`, `each!`, `list`).

use super::{Backend, list};
use crate::domain::alerts::channel::{Group, GroupAlert};
use crate::store::Result;
use crate::store::alert_groups::*;

impl Backend {
    /// Takes notices into groups in one transaction: every entry is added to (or updates)
    /// its group, a new group waiting until its `first_flush_ms`, and the notices
    /// `notice_ids` are marked taken at `now_ms`.
    pub async fn ingest_notices(
        &self,
        notice_ids: &[i64],
        entries: &[GroupEntry],
        now_ms: i64,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for e in entries {
            sqlx::query(concat!(
                "INSERT INTO alert_groups (channel, group_key, group_labels, created_at_ms,
                       next_flush_ms)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (channel, group_key) DO UPDATE SET next_flush_ms = ",
                least!("alert_groups.next_flush_ms", "excluded.next_flush_ms"),
                " WHERE $6"
            ))
            .bind(&e.channel)
            .bind(&e.group_key)
            .bind(json(&e.group_labels))
            .bind(now_ms)
            .bind(e.first_flush_ms)
            .bind(e.flush_now)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO alert_group_alerts (channel, group_key, fingerprint, rule, labels,
                   value, starts_at_ms, ends_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (channel, fingerprint) DO UPDATE SET
                   group_key = excluded.group_key, value = excluded.value,
                   starts_at_ms = excluded.starts_at_ms, ends_at_ms = excluded.ends_at_ms",
            )
            .bind(&e.channel)
            .bind(&e.group_key)
            .bind(&e.fingerprint)
            .bind(&e.rule)
            .bind(json(&e.labels))
            .bind(e.value.filter(|v| v.is_finite()))
            .bind(e.starts_at_ms)
            .bind(e.ends_at_ms)
            .execute(&mut *tx)
            .await?;
        }
        for id in notice_ids {
            sqlx::query(
                "UPDATE alert_notifications SET delivered_at_ms = $1, attempts = attempts + 1
                 WHERE id = $2",
            )
            .bind(now_ms)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Groups whose flush is due at `now_ms`, oldest flush first.
    pub async fn due_groups(&self, now_ms: i64) -> Result<Vec<Group>> {
        let rows: Vec<GroupRow> = sqlx::query_as(
            "SELECT channel, group_key, group_labels, created_at_ms, next_flush_ms,
                    notified_at_ms, notified_firing, notified_resolved, attempts
             FROM alert_groups WHERE next_flush_ms <= $1 ORDER BY next_flush_ms, channel, group_key",
        )
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| Group {
                group_labels: serde_json::from_str(&r.group_labels).unwrap_or_default(),
                notified_firing: serde_json::from_str(&r.notified_firing).unwrap_or_default(),
                notified_resolved: serde_json::from_str(&r.notified_resolved).unwrap_or_default(),
                channel: r.channel,
                group_key: r.group_key,
                created_at_ms: r.created_at_ms,
                next_flush_ms: r.next_flush_ms,
                notified_at_ms: r.notified_at_ms,
                attempts: r.attempts,
            })
            .collect())
    }

    /// The alerts of one group, by labels.
    pub async fn group_alerts(&self, channel: &str, group_key: &str) -> Result<Vec<GroupAlert>> {
        let rows: Vec<GroupAlertRow> = sqlx::query_as(
            "SELECT fingerprint, rule, labels, value, starts_at_ms, ends_at_ms, notified
             FROM alert_group_alerts WHERE channel = $1 AND group_key = $2 ORDER BY labels",
        )
        .bind(channel)
        .bind(group_key)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| GroupAlert {
                labels: serde_json::from_str(&r.labels).unwrap_or_default(),
                fingerprint: r.fingerprint,
                rule: r.rule,
                value: r.value,
                starts_at_ms: r.starts_at_ms,
                ends_at_ms: r.ends_at_ms,
                notified: r.notified,
            })
            .collect())
    }

    /// Marks the alerts `fingerprints` of `channel` as told while firing, right before a
    /// message that tells of them is sent: should the sender die before the message is
    /// settled, whoever flushes the group next knows the receiver may have heard of them,
    /// and tells it when they resolve.
    pub async fn mark_told(&self, channel: &str, fingerprints: &[String]) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for fp in fingerprints {
            sqlx::query(
                "UPDATE alert_group_alerts SET notified = TRUE WHERE channel = $1 AND fingerprint = $2",
            )
            .bind(channel)
            .bind(fp)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// This database's installation key: `candidate` (a random value the caller made) if
    /// none is stored yet, else the stored one — the same for every process using the
    /// database, for its whole life.
    pub async fn installation_key(&self, candidate: &str) -> Result<String> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO installation (id, key) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
        )
        .bind(candidate)
        .execute(&mut *tx)
        .await?;
        let (key,): (String,) = sqlx::query_as("SELECT key FROM installation WHERE id = 1")
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(key)
    }

    /// Settles one flush of group (`channel`, `group_key`) in one transaction: logs the
    /// attempt (when a message was tried), records the notification log entry, drops the
    /// flushed resolved alerts (and the group once it is empty), and sets the next flush.
    pub async fn settle_group(
        &self,
        channel: &str,
        group_key: &str,
        result: &FlushResult,
        delivery: Option<&Delivery>,
        now_ms: i64,
    ) -> Result<()> {
        let mut tx = self.begin_write().await?;
        if let Some(d) = delivery {
            sqlx::query(
                "INSERT INTO alert_group_deliveries (channel, group_key, at_ms, firing, resolved,
                   status, error)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&d.channel)
            .bind(&d.group_key)
            .bind(d.at_ms)
            .bind(d.firing)
            .bind(d.resolved)
            .bind(d.status)
            .bind(&d.error)
            .execute(&mut *tx)
            .await?;
        }
        match result {
            FlushResult::Failed {
                error,
                next_flush_ms,
            } => {
                sqlx::query(
                    "UPDATE alert_groups SET attempts = attempts + 1, last_error = $1,
                       next_flush_ms = $2
                     WHERE channel = $3 AND group_key = $4",
                )
                .bind(error)
                .bind(next_flush_ms)
                .bind(channel)
                .bind(group_key)
                .execute(&mut *tx)
                .await?;
            }
            FlushResult::Done {
                notified,
                remove,
                pushed,
                next_flush_ms,
            } => {
                if let Some((firing, resolved)) = notified {
                    sqlx::query(
                        "UPDATE alert_groups SET notified_at_ms = $1, notified_firing = $2,
                           notified_resolved = $3
                         WHERE channel = $4 AND group_key = $5",
                    )
                    .bind(now_ms)
                    .bind(json(firing))
                    .bind(json(resolved))
                    .bind(channel)
                    .bind(group_key)
                    .execute(&mut *tx)
                    .await?;
                }
                sqlx::query(
                    "UPDATE alert_groups SET attempts = 0, last_error = NULL, next_flush_ms = $1
                     WHERE channel = $2 AND group_key = $3",
                )
                .bind(next_flush_ms)
                .bind(channel)
                .bind(group_key)
                .execute(&mut *tx)
                .await?;
                for fp in remove {
                    sqlx::query(
                        "DELETE FROM alert_group_alerts
                         WHERE channel = $1 AND fingerprint = $2 AND ends_at_ms IS NOT NULL",
                    )
                    .bind(channel)
                    .bind(fp)
                    .execute(&mut *tx)
                    .await?;
                }
                for fp in pushed {
                    sqlx::query(
                        "UPDATE alert_group_alerts SET notified = TRUE
                         WHERE channel = $1 AND fingerprint = $2",
                    )
                    .bind(channel)
                    .bind(fp)
                    .execute(&mut *tx)
                    .await?;
                }
                sqlx::query(
                    "DELETE FROM alert_groups WHERE channel = $1 AND group_key = $2
                       AND NOT EXISTS (SELECT 1 FROM alert_group_alerts a
                                       WHERE a.channel = alert_groups.channel
                                         AND a.group_key = alert_groups.group_key)",
                )
                .bind(channel)
                .bind(group_key)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Drops the groups (and their alerts) of channels that exist no more: neither in
    /// `config` (the names of `harrier.toml`'s channels) nor stored (`alert_channels`). One
    /// transaction, reading the stored names in it, so a channel renamed or added through
    /// the API meanwhile keeps its groups.
    pub async fn drop_groups_of_unknown_channels(&self, config: &[String]) -> Result<()> {
        let mut tx = self.begin_write().await?;
        for sql in [
            concat!(
                "DELETE FROM alert_group_alerts WHERE NOT (channel ",
                in_list!(1),
                ") AND channel NOT IN (SELECT name FROM alert_channels)"
            ),
            concat!(
                "DELETE FROM alert_groups WHERE NOT (channel ",
                in_list!(1),
                ") AND channel NOT IN (SELECT name FROM alert_channels)"
            ),
        ] {
            sqlx::query(sql)
                .bind(list(config))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Adds one attempt to the delivery log (a test notification; group flushes are
    /// logged by [`Backend::settle_group`]).
    pub async fn log_delivery(&self, d: &Delivery) -> Result<()> {
        sqlx::query(
            "INSERT INTO alert_group_deliveries (channel, group_key, at_ms, firing, resolved,
               status, error)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&d.channel)
        .bind(&d.group_key)
        .bind(d.at_ms)
        .bind(d.firing)
        .bind(d.resolved)
        .bind(d.status)
        .bind(&d.error)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The newest delivery-log entry of each of `channels` that has one, by channel name
    /// (one index seek per channel: `alert_group_deliveries_channel`).
    pub async fn last_deliveries(
        &self,
        channels: &[String],
    ) -> Result<std::collections::HashMap<String, Delivery>> {
        let rows: Vec<Delivery> = sqlx::query_as(concat!(
            "SELECT channel, group_key, at_ms, firing, resolved, status, error
             FROM alert_group_deliveries
             WHERE id IN (SELECT (SELECT MAX(d.id) FROM alert_group_deliveries d
                                  WHERE d.channel = j.value)
                          FROM ",
            each!(1, j),
            ")"
        ))
        .bind(list(channels))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|d| (d.channel.clone(), d)).collect())
    }

    /// The delivery log, newest first.
    pub async fn alert_deliveries(&self, limit: i64) -> Result<Vec<Delivery>> {
        Ok(sqlx::query_as(
            "SELECT channel, group_key, at_ms, firing, resolved, status, error
             FROM alert_group_deliveries ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }
}
