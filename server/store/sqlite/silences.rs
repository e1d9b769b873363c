//! The SQLite side of [`crate::store::silences`]: its operations on `SqliteStore`.

use super::SqliteStore;
use crate::domain::alerts::silence::{Silence, SilenceSpec};
use crate::store::Result;
use crate::store::silences::*;
impl SqliteStore {
    /// Stores a checked silence; returns it as listed at `now_ms`.
    pub async fn insert_silence(&self, s: &SilenceSpec, now_ms: i64) -> Result<Silence> {
        let matchers = serde_json::to_string(&s.matchers).unwrap_or_else(|_| "[]".into());
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO silences (matchers, starts_at_ms, ends_at_ms, comment, created_by,
               created_at_ms, updated_at_ms)
             VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(&matchers)
        .bind(s.starts_at_ms)
        .bind(s.ends_at_ms)
        .bind(&s.comment)
        .bind(&s.created_by)
        .bind(now_ms)
        .bind(now_ms)
        .fetch_one(&self.pool)
        .await?;
        Ok(Silence {
            id,
            matchers: s.matchers.clone(),
            starts_at_ms: s.starts_at_ms,
            ends_at_ms: s.ends_at_ms,
            comment: s.comment.clone(),
            created_by: s.created_by.clone(),
            state: Silence::state_at(s.starts_at_ms, s.ends_at_ms, now_ms),
        })
    }

    /// The silences, newest first, with their state at `now_ms`; silences expired for
    /// longer than [`SILENCE_RETENTION_MS`] are deleted first.
    pub async fn list_silences(&self, now_ms: i64) -> Result<Vec<Silence>> {
        sqlx::query("DELETE FROM silences WHERE ends_at_ms < ?")
            .bind(now_ms.saturating_sub(SILENCE_RETENTION_MS))
            .execute(&self.pool)
            .await?;
        let rows: Vec<SilenceRow> = sqlx::query_as(
            "SELECT id, matchers, starts_at_ms, ends_at_ms, comment, created_by FROM silences
             ORDER BY created_at_ms DESC, id DESC",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|r| r.into_silence(now_ms)).collect())
    }

    /// The silences active at `now_ms` (started, not ended).
    pub async fn active_silences(&self, now_ms: i64) -> Result<Vec<Silence>> {
        let rows: Vec<SilenceRow> = sqlx::query_as(
            "SELECT id, matchers, starts_at_ms, ends_at_ms, comment, created_by FROM silences
             WHERE starts_at_ms <= ? AND ends_at_ms > ? ORDER BY id",
        )
        .bind(now_ms)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|r| r.into_silence(now_ms)).collect())
    }

    /// Expires silence `id` at `now_ms` (a pending one ends before it starts); `false`
    /// when there is no such silence. An already expired silence is left as it is.
    pub async fn expire_silence(&self, id: i64, now_ms: i64) -> Result<bool> {
        let found: Option<(i64,)> = sqlx::query_as("SELECT id FROM silences WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        if found.is_none() {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE silences SET ends_at_ms = ?, starts_at_ms = MIN(starts_at_ms, ?),
               updated_at_ms = ?
             WHERE id = ? AND ends_at_ms > ?",
        )
        .bind(now_ms)
        .bind(now_ms)
        .bind(now_ms)
        .bind(id)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use sqlx::SqlitePool;

    use super::*;
    use crate::domain::alerts::silence::Matcher;

    fn spec(start: i64, end: i64) -> SilenceSpec {
        SilenceSpec {
            matchers: vec![Matcher::parse("route=/checkout").unwrap()],
            starts_at_ms: start,
            ends_at_ms: end,
            comment: "deploy".into(),
            created_by: "ana".into(),
        }
    }

    #[sqlx::test(migrations = false)]
    async fn silences_list_newest_first_expire_and_age_out(pool: SqlitePool) {
        let store = SqliteStore::from_pool(pool).await.unwrap();
        let a = store.insert_silence(&spec(0, 1_000), 0).await.unwrap();
        let b = store.insert_silence(&spec(500, 2_000), 10).await.unwrap();
        assert_eq!((a.state, b.state), ("active", "pending"));
        let list = store.list_silences(600).await.unwrap();
        assert_eq!(list.iter().map(|s| s.id).collect::<Vec<_>>(), [b.id, a.id]);
        assert_eq!(list[0].matchers, spec(0, 0).matchers);
        assert_eq!(list[0].created_by, "ana");
        assert_eq!(
            store.active_silences(600).await.unwrap().len(),
            2,
            "both in force at 600"
        );

        assert!(store.expire_silence(b.id, 700).await.unwrap());
        assert!(!store.expire_silence(999, 700).await.unwrap());
        let list = store.list_silences(700).await.unwrap();
        assert_eq!((list[0].state, list[0].ends_at_ms), ("expired", 700));
        assert_eq!(store.active_silences(700).await.unwrap()[0].id, a.id);

        // kept for 7 days after the end, then gone
        let week = SILENCE_RETENTION_MS;
        assert_eq!(store.list_silences(1_000 + week).await.unwrap().len(), 1);
        assert!(store.list_silences(2_000 + week).await.unwrap().is_empty());
    }
}
