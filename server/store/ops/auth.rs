//! Sign-in ([`crate::store::auth`]): users, sessions, tokens, share links, the audit log and
//! leases, written once and compiled into each backend, whose module names its store
//! `Backend`.

use super::Backend;
use crate::domain::auth::{SESSION_ABSOLUTE_MS, SESSION_IDLE_MS, SIGN_IN_WINDOW_MS};
use crate::domain::oidc::LOGIN_TTL_MS;
use crate::store::Result;
use crate::store::auth::*;

impl Backend {
    pub async fn count_users(&self) -> Result<i64> {
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM users")
            .fetch_one(&self.pool)
            .await?;
        Ok(n)
    }

    pub async fn insert_user(
        &self,
        name: &str,
        role: &str,
        password_hash: &str,
        now_ms: i64,
    ) -> Result<Option<i64>> {
        let id: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO users (name, role, password_hash, created_at_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (name) DO NOTHING RETURNING id",
        )
        .bind(name)
        .bind(role)
        .bind(password_hash)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        Ok(id.map(|(id,)| id))
    }

    pub async fn update_user(
        &self,
        name: &str,
        role: Option<&str>,
        password_hash: Option<&str>,
    ) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        let found = sqlx::query(
            "UPDATE users SET role = COALESCE($1, role), password_hash = COALESCE($2, password_hash)
             WHERE name = $3",
        )
        .bind(role)
        .bind(password_hash)
        .bind(name)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            > 0;
        if found && password_hash.is_some() {
            // A new password signs the user out everywhere.
            sqlx::query(
                "DELETE FROM sessions WHERE user_id = (SELECT id FROM users WHERE name = $1)",
            )
            .bind(name)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(found)
    }

    pub async fn user_by_name(&self, name: &str) -> Result<Option<UserRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, password_hash, created_at_ms, oidc_subject FROM users WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn list_users(&self) -> Result<Vec<UserRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, role, password_hash, created_at_ms, oidc_subject FROM users ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn delete_user(&self, name: &str, now_ms: i64) -> Result<bool> {
        let mut tx = self.begin_write().await?;
        // What the user made for machines and outsiders ends with them.
        for table in ["api_tokens", "share_links"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET revoked_at_ms = $1 WHERE created_by = $2 AND revoked_at_ms IS NULL"
            )))
            .bind(now_ms)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("DELETE FROM sessions WHERE user_id = (SELECT id FROM users WHERE name = $1)")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        let gone = sqlx::query("DELETE FROM users WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected()
            > 0;
        tx.commit().await?;
        Ok(gone)
    }

    pub async fn insert_session(&self, id_hash: &str, user_id: i64, now_ms: i64) -> Result<()> {
        // A write transaction (on SQLite in the writer's turn: a sign-in during a long
        // import waits instead of failing).
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM sessions WHERE last_seen_ms < $1 OR created_at_ms < $2")
            .bind(now_ms - SESSION_IDLE_MS)
            .bind(now_ms - SESSION_ABSOLUTE_MS)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO sessions (id_hash, user_id, created_at_ms, last_seen_ms) VALUES ($1, $2, $3, $4)",
        )
        .bind(id_hash)
        .bind(user_id)
        .bind(now_ms)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn session_user(&self, id_hash: &str, now_ms: i64) -> Result<Option<UserRow>> {
        let row: Option<(i64, String, String, String, i64, i64)> = sqlx::query_as(
            "SELECT u.id, u.name, u.role, u.password_hash, u.created_at_ms, s.last_seen_ms
             FROM sessions s JOIN users u ON u.id = s.user_id
             WHERE s.id_hash = $1 AND s.last_seen_ms >= $2 AND s.created_at_ms >= $3",
        )
        .bind(id_hash)
        .bind(now_ms - SESSION_IDLE_MS)
        .bind(now_ms - SESSION_ABSOLUTE_MS)
        .fetch_optional(&self.pool)
        .await?;
        let Some((id, name, role, password_hash, created_at_ms, last_seen)) = row else {
            return Ok(None);
        };
        // A busy database (on SQLite a long import holds the writer) must not sign anyone
        // out: the last-seen time is refreshed when it can be.
        if now_ms - last_seen >= TOUCH_EVERY_MS
            && let Err(e) = sqlx::query("UPDATE sessions SET last_seen_ms = $1 WHERE id_hash = $2")
                .bind(now_ms)
                .bind(id_hash)
                .execute(&self.pool)
                .await
        {
            tracing::warn!(error = %e, "refreshing a session's last-seen time failed");
        }
        Ok(Some(UserRow {
            id,
            name,
            role,
            password_hash,
            created_at_ms,
            oidc_subject: None,
        }))
    }

    pub async fn delete_session(&self, id_hash: &str) -> Result<()> {
        sqlx::query("DELETE FROM sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn record_sign_in_failure(&self, keys: &[String], now_ms: i64) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM sign_in_failures WHERE at_ms < $1")
            .bind(now_ms - SIGN_IN_WINDOW_MS)
            .execute(&mut *tx)
            .await?;
        for key in keys {
            sqlx::query("INSERT INTO sign_in_failures (key, at_ms) VALUES ($1, $2)")
                .bind(key)
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn sign_in_failures(&self, key: &str, since_ms: i64) -> Result<(i64, Option<i64>)> {
        Ok(sqlx::query_as(
            "SELECT COUNT(*), MIN(at_ms) FROM sign_in_failures WHERE key = $1 AND at_ms >= $2",
        )
        .bind(key)
        .bind(since_ms)
        .fetch_one(&self.pool)
        .await?)
    }

    pub async fn insert_token(
        &self,
        name: &str,
        scope: &str,
        secret_hash: &str,
        created_by: &str,
        now_ms: i64,
        expires_at_ms: Option<i64>,
    ) -> Result<i64> {
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO api_tokens (name, scope, secret_hash, created_by, created_at_ms, expires_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(name)
        .bind(scope)
        .bind(secret_hash)
        .bind(created_by)
        .bind(now_ms)
        .bind(expires_at_ms)
        .fetch_one(&self.pool)
        .await?;
        Ok(id)
    }

    pub async fn token_by_id(&self, id: i64) -> Result<Option<TokenRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, scope, secret_hash, created_by, created_at_ms, expires_at_ms,
               last_used_ms, revoked_at_ms FROM api_tokens WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn list_tokens(&self) -> Result<Vec<TokenRow>> {
        Ok(sqlx::query_as(
            "SELECT id, name, scope, secret_hash, created_by, created_at_ms, expires_at_ms,
               last_used_ms, revoked_at_ms FROM api_tokens ORDER BY id DESC",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn touch_token(&self, id: i64, now_ms: i64) -> Result<()> {
        sqlx::query(
            "UPDATE api_tokens SET last_used_ms = $1
             WHERE id = $2 AND (last_used_ms IS NULL OR last_used_ms < $3)",
        )
        .bind(now_ms)
        .bind(id)
        .bind(now_ms - TOUCH_EVERY_MS)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn revoke_token(&self, id: i64, now_ms: i64) -> Result<bool> {
        Ok(sqlx::query(
            "UPDATE api_tokens SET revoked_at_ms = $1 WHERE id = $2 AND revoked_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected()
            > 0)
    }

    pub async fn insert_share(
        &self,
        subject: &str,
        secret_hash: &str,
        created_by: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<i64> {
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO share_links (subject, secret_hash, created_by, created_at_ms, expires_at_ms)
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(subject)
        .bind(secret_hash)
        .bind(created_by)
        .bind(now_ms)
        .bind(expires_at_ms)
        .fetch_one(&self.pool)
        .await?;
        Ok(id)
    }

    pub async fn share_by_id(&self, id: i64) -> Result<Option<ShareRow>> {
        Ok(sqlx::query_as(
            "SELECT id, subject, secret_hash, created_by, created_at_ms, expires_at_ms,
               revoked_at_ms FROM share_links WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?)
    }

    pub async fn list_shares(&self) -> Result<Vec<ShareRow>> {
        Ok(sqlx::query_as(
            "SELECT id, subject, secret_hash, created_by, created_at_ms, expires_at_ms,
               revoked_at_ms FROM share_links ORDER BY id DESC",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn revoke_share(&self, id: i64, now_ms: i64) -> Result<bool> {
        Ok(sqlx::query(
            "UPDATE share_links SET revoked_at_ms = $1 WHERE id = $2 AND revoked_at_ms IS NULL",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&self.pool)
        .await?
        .rows_affected()
            > 0)
    }

    pub async fn insert_audit(
        &self,
        at_ms: i64,
        who: &str,
        method: &str,
        path: &str,
        status: i64,
        client: Option<&str>,
    ) -> Result<()> {
        // Written in the background, in a write transaction (on SQLite in the writer's
        // turn: it waits out a long import).
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO audit_log (at_ms, who, method, path, status, client) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(at_ms)
        .bind(who)
        .bind(method)
        .bind(path)
        .bind(status)
        .bind(client)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM audit_log WHERE at_ms < $1")
            .bind(at_ms - AUDIT_RETENTION_MS)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn list_audit(&self, before_id: Option<i64>, limit: i64) -> Result<Vec<AuditRow>> {
        Ok(sqlx::query_as(
            "SELECT id, at_ms, who, method, path, status, client FROM audit_log
             WHERE id < $1 ORDER BY id DESC LIMIT $2",
        )
        .bind(before_id.unwrap_or(i64::MAX))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<Option<i64>> {
        let term: Option<(i64,)> = sqlx::query_as(
            "INSERT INTO leases (name, holder, term, expires_at_ms) VALUES ($1, $2, 1, $3)
             ON CONFLICT (name) DO UPDATE SET
               term = CASE WHEN leases.holder = excluded.holder AND leases.expires_at_ms > $4
                           THEN leases.term ELSE leases.term + 1 END,
               holder = excluded.holder,
               expires_at_ms = excluded.expires_at_ms
             WHERE leases.holder = excluded.holder OR leases.expires_at_ms <= $5
             RETURNING term",
        )
        .bind(name)
        .bind(holder)
        .bind(now_ms + ttl_ms)
        .bind(now_ms)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        Ok(term.map(|(t,)| t))
    }

    pub async fn lease_held(
        &self,
        name: &str,
        holder: &str,
        term: i64,
        now_ms: i64,
    ) -> Result<bool> {
        let row: Option<(i64,)> = sqlx::query_as(
            "SELECT term FROM leases WHERE name = $1 AND holder = $2 AND term = $3 AND expires_at_ms > $4",
        )
        .bind(name)
        .bind(holder)
        .bind(term)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
    }

    pub async fn lease_holders(&self, prefix: &str, now_ms: i64) -> Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT holder FROM leases WHERE substr(name, 1, length($1)) = $1 AND expires_at_ms > $2 ORDER BY holder",
        )
        .bind(prefix)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(|(h,)| h).collect())
    }

    pub async fn forget_leases(&self, prefix: &str, expired_before_ms: i64) -> Result<u64> {
        Ok(sqlx::query(
            "DELETE FROM leases WHERE substr(name, 1, length($1)) = $1 AND expires_at_ms < $2",
        )
        .bind(prefix)
        .bind(expired_before_ms)
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<()> {
        // Expired now rather than deleted: the next holder's term still grows.
        sqlx::query("UPDATE leases SET expires_at_ms = 0 WHERE name = $1 AND holder = $2")
            .bind(name)
            .bind(holder)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn insert_oidc_login(&self, login: &OidcLoginRow) -> Result<()> {
        let mut tx = self.begin_write().await?;
        sqlx::query("DELETE FROM oidc_logins WHERE created_at_ms < $1")
            .bind(login.created_at_ms - LOGIN_TTL_MS)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO oidc_logins (state_hash, nonce, pkce_verifier, redirect_url, next, created_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&login.state_hash)
        .bind(&login.nonce)
        .bind(&login.pkce_verifier)
        .bind(&login.redirect_url)
        .bind(&login.next)
        .bind(login.created_at_ms)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn take_oidc_login(
        &self,
        state_hash: &str,
        now_ms: i64,
    ) -> Result<Option<OidcLoginRow>> {
        let row: Option<OidcLoginRow> = sqlx::query_as(
            "DELETE FROM oidc_logins WHERE state_hash = $1
             RETURNING state_hash, nonce, pkce_verifier, redirect_url, next, created_at_ms",
        )
        .bind(state_hash)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.filter(|r| r.created_at_ms >= now_ms - LOGIN_TTL_MS && r.created_at_ms <= now_ms))
    }

    pub async fn oidc_user(
        &self,
        subject: &str,
        name: &str,
        role: &str,
        now_ms: i64,
    ) -> Result<Option<UserRow>> {
        let mut tx = self.begin_write().await?;
        let found: Option<UserRow> = sqlx::query_as(
            "UPDATE users SET role = $1 WHERE oidc_subject = $2
             RETURNING id, name, role, password_hash, created_at_ms, oidc_subject",
        )
        .bind(role)
        .bind(subject)
        .fetch_optional(&mut *tx)
        .await?;
        let user = match found {
            Some(u) => Some(u),
            None => {
                sqlx::query_as(
                    "INSERT INTO users (name, role, password_hash, created_at_ms, oidc_subject)
                     VALUES ($1, $2, '', $3, $4)
                     ON CONFLICT (name) DO NOTHING
                     RETURNING id, name, role, password_hash, created_at_ms, oidc_subject",
                )
                .bind(name)
                .bind(role)
                .bind(now_ms)
                .bind(subject)
                .fetch_optional(&mut *tx)
                .await?
            }
        };
        tx.commit().await?;
        Ok(user)
    }
}
