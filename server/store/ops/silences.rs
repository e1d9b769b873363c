//! Silences ([`crate::store::silences`]): written once, compiled into each backend, whose
//! module names its store `Backend` (the SQL binds `$1`, `$2`, … on both databases).

use super::Backend;
use crate::domain::alerts::silence::{Silence, SilenceSpec};
use crate::store::Result;
use crate::store::silences::*;

impl Backend {
    /// Stores a checked silence; returns it as listed at `now_ms`.
    pub async fn insert_silence(&self, s: &SilenceSpec, now_ms: i64) -> Result<Silence> {
        let matchers = serde_json::to_string(&s.matchers).unwrap_or_else(|_| "[]".into());
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO silences (matchers, starts_at_ms, ends_at_ms, comment, created_by,
               created_at_ms, updated_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
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
        sqlx::query("DELETE FROM silences WHERE ends_at_ms < $1")
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
             WHERE starts_at_ms <= $1 AND ends_at_ms > $2 ORDER BY id",
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
        let found: Option<(i64,)> = sqlx::query_as("SELECT id FROM silences WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        if found.is_none() {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE silences SET ends_at_ms = $1,
               starts_at_ms = CASE WHEN starts_at_ms < $1 THEN starts_at_ms ELSE $1 END,
               updated_at_ms = $1
             WHERE id = $2 AND ends_at_ms > $1",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(true)
    }
}
