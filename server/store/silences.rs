//! Silences (`silences`): stored with their matchers as JSON; expired ones are kept for
//! [`SILENCE_RETENTION_MS`] after their end, then dropped when silences are listed.

use crate::domain::alerts::silence::{Matcher, Silence};
use sqlx::FromRow;

/// Expired silences stay listed this long after their end: 7 days (as Alertmanager's
/// `--data.retention` default of 120 h, rounded up to a week).
pub const SILENCE_RETENTION_MS: i64 = 7 * 24 * 3_600_000;

#[derive(FromRow)]
pub(crate) struct SilenceRow {
    pub(crate) id: i64,
    pub(crate) matchers: String,
    pub(crate) starts_at_ms: i64,
    pub(crate) ends_at_ms: i64,
    pub(crate) comment: String,
    pub(crate) created_by: String,
}

impl SilenceRow {
    pub(crate) fn into_silence(self, now_ms: i64) -> Silence {
        let matchers: Vec<Matcher> = serde_json::from_str(&self.matchers).unwrap_or_else(|e| {
            tracing::error!(silence = self.id, error = %e, "stored silence matchers unreadable");
            Vec::new()
        });
        Silence {
            id: self.id,
            matchers,
            starts_at_ms: self.starts_at_ms,
            ends_at_ms: self.ends_at_ms,
            comment: self.comment,
            created_by: self.created_by,
            state: Silence::state_at(self.starts_at_ms, self.ends_at_ms, now_ms),
        }
    }
}

// This group's operations on [`Store`], each answered by the backend the store was
// opened on (`forward!`).
forward! {
    /// Stores a checked silence; returns it as listed at `now_ms`.
    pub async fn insert_silence(&self, s: &SilenceSpec, now_ms: i64) -> Result<Silence>;

    /// The silences, newest first, with their state at `now_ms`; silences expired for
    /// longer than [`SILENCE_RETENTION_MS`] are deleted first.
    pub async fn list_silences(&self, now_ms: i64) -> Result<Vec<Silence>>;

    /// The silences active at `now_ms` (started, not ended).
    pub async fn active_silences(&self, now_ms: i64) -> Result<Vec<Silence>>;

    /// Expires silence `id` at `now_ms` (a pending one ends before it starts); `false`
    /// when there is no such silence. An already expired silence is left as it is.
    pub async fn expire_silence(&self, id: i64, now_ms: i64) -> Result<bool>;
}
