//! Stored alert channels ([`crate::store::channels`]): written once, compiled into each
//! backend, whose module names its store `Backend` and its SQL dialect (`in_list!`, `list`).

use super::{Backend, list};
use crate::domain::alerts::channel::ChannelSpec;
use crate::store::Result;
use crate::store::channels::*;

impl Backend {
    /// The stored channels, by name (rows whose JSON no longer reads are logged and left
    /// out).
    pub async fn list_channels(&self) -> Result<Vec<StoredChannel>> {
        let rows: Vec<ChannelRow> = sqlx::query_as(
            "SELECT name, body, created_at_ms, updated_at_ms FROM alert_channels ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .filter_map(ChannelRow::into_stored)
            .collect())
    }

    /// One stored channel, by name.
    pub async fn get_channel(&self, name: &str) -> Result<Option<StoredChannel>> {
        let row: Option<ChannelRow> = sqlx::query_as(
            "SELECT name, body, created_at_ms, updated_at_ms FROM alert_channels WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.and_then(ChannelRow::into_stored))
    }

    /// Stores a new channel at `now_ms`; `false` when one of that name is stored.
    pub async fn insert_channel(&self, c: &ChannelSpec, now_ms: i64) -> Result<bool> {
        let done = sqlx::query(
            "INSERT INTO alert_channels (name, body, created_at_ms, updated_at_ms)
             VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
        )
        .bind(&c.name)
        .bind(body(c))
        .bind(now_ms)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Replaces channel `name` with `c` at `now_ms`, in one transaction. When `c.name`
    /// differs the channel is renamed, and its notification groups and delivery log go
    /// with it (so a rename neither re-sends nor forgets what was sent). `false` when no
    /// channel `name` is stored, or when another stored channel is called `c.name`.
    pub async fn update_channel(&self, name: &str, c: &ChannelSpec, now_ms: i64) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        if c.name != name {
            let taken: Option<i64> =
                sqlx::query_scalar("SELECT CAST(1 AS BIGINT) FROM alert_channels WHERE name = $1")
                    .bind(&c.name)
                    .fetch_optional(&mut *tx)
                    .await?;
            if taken.is_some() {
                return Ok(false);
            }
        }
        let done = sqlx::query(
            "UPDATE alert_channels SET name = $1, body = $2, updated_at_ms = $3 WHERE name = $4",
        )
        .bind(&c.name)
        .bind(body(c))
        .bind(now_ms)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        if c.name != name {
            for table in [
                "UPDATE alert_groups SET channel = $1 WHERE channel = $2",
                "UPDATE alert_group_alerts SET channel = $1 WHERE channel = $2",
                "UPDATE alert_group_deliveries SET channel = $1 WHERE channel = $2",
            ] {
                sqlx::query(table)
                    .bind(&c.name)
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Deletes stored channel `name`; `false` when there is none. Its groups are dropped
    /// by the dispatcher's next pass ([`Backend::drop_groups_of_unknown_channels`]); its
    /// delivery log stays.
    pub async fn delete_channel(&self, name: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM alert_channels WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes the stored channels named in `names` (at start-up: the names
    /// `harrier.toml` now uses, which win); returns the names deleted.
    pub async fn delete_channels_named(&self, names: &[String]) -> Result<Vec<String>> {
        Ok(sqlx::query_scalar(concat!(
            "DELETE FROM alert_channels WHERE name ",
            in_list!(1),
            " RETURNING name"
        ))
        .bind(list(names))
        .fetch_all(&self.pool)
        .await?)
    }
}
