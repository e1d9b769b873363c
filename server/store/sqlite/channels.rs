//! The SQLite side of [`crate::store::channels`]: its operations on `SqliteStore`.

use super::SqliteStore;
use crate::domain::alerts::channel::ChannelSpec;
use crate::store::Result;
use crate::store::channels::*;
impl SqliteStore {
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
            "SELECT name, body, created_at_ms, updated_at_ms FROM alert_channels WHERE name = ?",
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
             VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING",
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
                sqlx::query_scalar("SELECT 1 FROM alert_channels WHERE name = ?")
                    .bind(&c.name)
                    .fetch_optional(&mut *tx)
                    .await?;
            if taken.is_some() {
                return Ok(false);
            }
        }
        let done = sqlx::query(
            "UPDATE alert_channels SET name = ?, body = ?, updated_at_ms = ? WHERE name = ?",
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
                "UPDATE alert_groups SET channel = ? WHERE channel = ?",
                "UPDATE alert_group_alerts SET channel = ? WHERE channel = ?",
                "UPDATE alert_group_deliveries SET channel = ? WHERE channel = ?",
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
    /// by the dispatcher's next pass ([`SqliteStore::drop_groups_of_unknown_channels`]); its
    /// delivery log stays.
    pub async fn delete_channel(&self, name: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM alert_channels WHERE name = ?")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Deletes the stored channels named in `names` (at start-up: the names
    /// `harrier.toml` now uses, which win); returns the names deleted.
    pub async fn delete_channels_named(&self, names: &[String]) -> Result<Vec<String>> {
        let names_json = serde_json::to_string(names).unwrap_or_else(|_| "[]".into());
        Ok(sqlx::query_scalar(
            "DELETE FROM alert_channels WHERE name IN (SELECT value FROM json_each(?))
             RETURNING name",
        )
        .bind(names_json)
        .fetch_all(&self.pool)
        .await?)
    }
}

#[cfg(test)]
mod tests {
    use sqlx::SqlitePool;

    use super::*;
    use crate::domain::alerts::rule::Duration;
    use crate::store::{Delivery, GroupEntry};

    fn names(v: &[StoredChannel]) -> Vec<&str> {
        v.iter().map(|s| s.channel.name.as_str()).collect()
    }

    #[sqlx::test(migrations = false)]
    async fn channels_round_trip_rename_and_delete(pool: SqlitePool) {
        let store = SqliteStore::from_pool(pool).await.unwrap();
        assert!(store.list_channels().await.unwrap().is_empty());
        let mut ops = ChannelSpec::new("ops", "webhook", "http://127.0.0.1:9095/hook");
        ops.group_wait = Duration(0);
        ops.matchers = vec!["severity=~\"critical|page\"".into()];
        let chat = ChannelSpec::new("chat", "slack", "https://hooks.slack.com/services/T/B/X");
        assert!(store.insert_channel(&ops, 1).await.unwrap());
        assert!(store.insert_channel(&chat, 2).await.unwrap());
        assert!(
            !store.insert_channel(&ops, 3).await.unwrap(),
            "names are unique"
        );
        let all = store.list_channels().await.unwrap();
        assert_eq!(names(&all), ["chat", "ops"]);
        assert_eq!(all[1].channel, ops, "every setting survives the JSON");
        assert_eq!((all[1].created_at_ms, all[1].updated_at_ms), (1, 1));

        // changed in place
        let mut changed = ops.clone();
        changed.send_resolved = false;
        assert!(store.update_channel("ops", &changed, 4).await.unwrap());
        let got = store.get_channel("ops").await.unwrap().unwrap();
        assert_eq!((got.channel.send_resolved, got.updated_at_ms), (false, 4));
        assert_eq!(got.created_at_ms, 1);
        assert!(
            !store.update_channel("nope", &changed, 5).await.unwrap(),
            "unknown"
        );
        changed.name = "chat".into();
        assert!(
            !store.update_channel("ops", &changed, 5).await.unwrap(),
            "cannot rename onto another channel"
        );
        assert_eq!(
            store.get_channel("chat").await.unwrap().unwrap().channel,
            chat
        );

        // renamed: its groups and delivery log go with it
        let entry = GroupEntry {
            channel: "ops".into(),
            group_key: "{}:{}".into(),
            group_labels: Default::default(),
            fingerprint: "f".into(),
            rule: "R".into(),
            labels: Default::default(),
            value: None,
            starts_at_ms: 0,
            ends_at_ms: None,
            first_flush_ms: 0,
            flush_now: false,
        };
        store.ingest_notices(&[], &[entry], 0).await.unwrap();
        let d = Delivery {
            channel: "ops".into(),
            group_key: "{}:{}".into(),
            at_ms: 6,
            firing: 1,
            resolved: 0,
            status: Some(200),
            error: None,
        };
        store.log_delivery(&d).await.unwrap();
        changed.name = "ops-eu".into();
        assert!(store.update_channel("ops", &changed, 7).await.unwrap());
        assert!(store.get_channel("ops").await.unwrap().is_none());
        assert_eq!(
            store.get_channel("ops-eu").await.unwrap().unwrap().channel,
            changed
        );
        let groups = store.due_groups(10).await.unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].channel, "ops-eu");
        let last = store
            .last_deliveries(&["ops-eu".into(), "ops".into()])
            .await
            .unwrap();
        assert_eq!(last.len(), 1);
        assert_eq!(last["ops-eu"].at_ms, 6);

        assert!(store.delete_channel("ops-eu").await.unwrap());
        assert!(!store.delete_channel("ops-eu").await.unwrap());
        assert_eq!(names(&store.list_channels().await.unwrap()), ["chat"]);

        assert_eq!(
            store
                .delete_channels_named(&["chat".into(), "other".into()])
                .await
                .unwrap(),
            ["chat"]
        );
        assert!(store.list_channels().await.unwrap().is_empty());
    }

    #[sqlx::test(migrations = false)]
    async fn groups_of_channels_in_neither_place_are_dropped(pool: SqlitePool) {
        let store = SqliteStore::from_pool(pool).await.unwrap();
        let entry = |channel: &str| GroupEntry {
            channel: channel.into(),
            group_key: "{}:{}".into(),
            group_labels: Default::default(),
            fingerprint: "f".into(),
            rule: "R".into(),
            labels: Default::default(),
            value: None,
            starts_at_ms: 0,
            ends_at_ms: None,
            first_flush_ms: 0,
            flush_now: false,
        };
        let entries: Vec<GroupEntry> = ["file", "api", "gone"].map(entry).into();
        store.ingest_notices(&[], &entries, 0).await.unwrap();
        let api = ChannelSpec::new("api", "webhook", "http://127.0.0.1/hook");
        store.insert_channel(&api, 0).await.unwrap();
        store
            .drop_groups_of_unknown_channels(&["file".into()])
            .await
            .unwrap();
        let left: Vec<String> = store
            .due_groups(1)
            .await
            .unwrap()
            .into_iter()
            .map(|g| g.channel)
            .collect();
        assert_eq!(left, ["api", "file"]);
        store.delete_channel("api").await.unwrap();
        store
            .drop_groups_of_unknown_channels(&["file".into()])
            .await
            .unwrap();
        assert_eq!(store.due_groups(1).await.unwrap().len(), 1);
        assert_eq!(
            store.group_alerts("api", "{}:{}").await.unwrap(),
            [],
            "its alerts went too"
        );
    }

    #[sqlx::test(migrations = false)]
    async fn unreadable_rows_are_skipped(pool: SqlitePool) {
        let store = SqliteStore::from_pool(pool).await.unwrap();
        sqlx::query(
            "INSERT INTO alert_channels (name, body, created_at_ms, updated_at_ms)
             VALUES ('broken', '{\"name\": 1}', 0, 0)",
        )
        .execute(store.pool())
        .await
        .unwrap();
        let ok = ChannelSpec::new("ok", "webhook", "http://127.0.0.1/hook");
        store.insert_channel(&ok, 1).await.unwrap();
        assert_eq!(names(&store.list_channels().await.unwrap()), ["ok"]);
        assert!(store.get_channel("broken").await.unwrap().is_none());
    }
}
