//! Sign-in's tables (`users`, `sessions`, `sign_in_failures`, `api_tokens`,
//! `share_links`, `audit_log`): their row types. Secrets are never stored — passwords as
//! Argon2id PHC strings, session ids, tokens and share links as the SHA-256 of their
//! random part ([`crate::domain::auth::secret_hash`]).

use sqlx::FromRow;

/// A local user.
#[derive(Debug, Clone, FromRow, serde::Serialize)]
pub struct UserRow {
    pub id: i64,
    pub name: String,
    /// `viewer`, `editor` or `admin`.
    pub role: String,
    #[serde(skip)]
    pub password_hash: String,
    pub created_at_ms: i64,
    /// The OpenID Connect provider's `sub` of a user made by single sign-on (who has no
    /// password); `None` for a local user.
    #[sqlx(default)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oidc_subject: Option<String>,
}

/// A single sign-on under way: what the answer of the provider is checked against.
#[derive(Debug, Clone, FromRow, PartialEq)]
pub struct OidcLoginRow {
    /// SHA-256 (hex) of the `state` parameter sent to the provider.
    pub state_hash: String,
    /// The `nonce` the ID token must carry.
    pub nonce: String,
    /// The PKCE code verifier (RFC 7636) sent with the code.
    pub pkce_verifier: String,
    /// The redirect URI sent to the provider (the token request repeats it).
    pub redirect_url: String,
    /// Where to go once signed in (a local path, [`crate::domain::auth::safe_next`]).
    pub next: String,
    pub created_at_ms: i64,
}

/// A machine token (its secret's hash is never shown).
#[derive(Debug, Clone, FromRow, serde::Serialize)]
pub struct TokenRow {
    pub id: i64,
    pub name: String,
    /// `ingest`, `read` or `write`.
    pub scope: String,
    #[serde(skip)]
    pub secret_hash: String,
    pub created_by: String,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub last_used_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
}

/// A read-only share link.
#[derive(Debug, Clone, FromRow, serde::Serialize)]
pub struct ShareRow {
    pub id: i64,
    /// JSON of [`crate::domain::auth::ShareSubject`].
    pub subject: String,
    #[serde(skip)]
    pub secret_hash: String,
    pub created_by: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
}

/// One state-changing request, allowed or refused.
#[derive(Debug, Clone, FromRow, serde::Serialize, PartialEq)]
pub struct AuditRow {
    pub id: i64,
    pub at_ms: i64,
    /// [`crate::domain::auth::Principal::who`].
    pub who: String,
    pub method: String,
    pub path: String,
    /// The HTTP status answered.
    pub status: i64,
    /// The client's address.
    pub client: Option<String>,
}

/// A session lives on while it was used within this long; its last-seen time is written
/// at most once per this interval, ms (a request does not cost a write).
pub const TOUCH_EVERY_MS: i64 = 60_000;

/// Audit entries are kept this long: 90 days, ms.
pub const AUDIT_RETENTION_MS: i64 = 90 * 24 * 3_600_000;
