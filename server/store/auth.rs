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
    /// `viewer`, `operator`, `editor` or `admin`.
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
    /// `ingest`, `read`, `operate` or `write`.
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

// This group's operations on [`Store`], each answered by the backend the store was
// opened on (`forward!`).
forward! {
    /// How many local users exist (sign-in is on when there is at least one).
    pub async fn count_users(&self) -> Result<i64>;

    /// Adds a user; `None` when the name is taken.
    pub async fn insert_user(
        &self,
        name: &str,
        role: &str,
        password_hash: &str,
        now_ms: i64,
    ) -> Result<Option<i64>>;

    /// Changes a user's role and/or password hash (a new password ends the user's sessions); `false` when there is no such user.
    pub async fn update_user(
        &self,
        name: &str,
        role: Option<&str>,
        password_hash: Option<&str>,
    ) -> Result<bool>;

    /// The user of that name.
    pub async fn user_by_name(&self, name: &str) -> Result<Option<auth::UserRow>>;

    /// Every user, by name.
    pub async fn list_users(&self) -> Result<Vec<auth::UserRow>>;

    /// Deletes a user and its sessions, and revokes the tokens and share links it made;
    /// `false` when there is no such user.
    pub async fn delete_user(&self, name: &str, now_ms: i64) -> Result<bool>;

    /// Stores a new session (its id hashed) of `user_id`; drops expired sessions first.
    pub async fn insert_session(&self, id_hash: &str, user_id: i64, now_ms: i64) -> Result<()>;

    /// The user of a live session (neither idle nor absolute lifetime passed at `now_ms`); refreshes its last-seen time at most once a minute.
    pub async fn session_user(&self, id_hash: &str, now_ms: i64) -> Result<Option<auth::UserRow>>;

    /// Ends a session.
    pub async fn delete_session(&self, id_hash: &str) -> Result<()>;

    /// Stores a single sign-on under way (and drops those older than
    /// [`crate::domain::oidc::LOGIN_TTL_MS`]).
    pub async fn insert_oidc_login(&self, login: &auth::OidcLoginRow) -> Result<()>;

    /// Deletes and returns the sign-on under way of `state_hash`, if it is one started
    /// within [`crate::domain::oidc::LOGIN_TTL_MS`] of `now_ms`: each can be finished once.
    pub async fn take_oidc_login(
        &self,
        state_hash: &str,
        now_ms: i64,
    ) -> Result<Option<auth::OidcLoginRow>>;

    /// The user of provider subject `subject`, its role set to `role`; or, when there is
    /// none, a new user `name` of that subject (no password). `None` when `name` is
    /// taken by another user (a local one, or another subject's).
    pub async fn oidc_user(
        &self,
        subject: &str,
        name: &str,
        role: &str,
        now_ms: i64,
    ) -> Result<Option<auth::UserRow>>;

    /// Counts one failed sign-in under each key (`user:NAME`, `client:ADDR`); drops failures older than the throttling window.
    pub async fn record_sign_in_failure(&self, keys: &[String], now_ms: i64) -> Result<()>;

    /// Failed sign-ins under `key` since `since_ms`: the count and the oldest time.
    pub async fn sign_in_failures(&self, key: &str, since_ms: i64) -> Result<(i64, Option<i64>)>;

    /// Stores a machine token (its secret hashed); returns its id.
    pub async fn insert_token(
        &self,
        name: &str,
        scope: &str,
        secret_hash: &str,
        created_by: &str,
        now_ms: i64,
        expires_at_ms: Option<i64>,
    ) -> Result<i64>;

    /// The token of that id, revoked and expired ones included.
    pub async fn token_by_id(&self, id: i64) -> Result<Option<auth::TokenRow>>;

    /// Every token, newest first.
    pub async fn list_tokens(&self) -> Result<Vec<auth::TokenRow>>;

    /// Records a token's use at `now_ms` (written at most once a minute).
    pub async fn touch_token(&self, id: i64, now_ms: i64) -> Result<()>;

    /// Revokes a token; `false` when there is no such live token.
    pub async fn revoke_token(&self, id: i64, now_ms: i64) -> Result<bool>;

    /// Stores a share link (its secret hashed); returns its id.
    pub async fn insert_share(
        &self,
        subject: &str,
        secret_hash: &str,
        created_by: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<i64>;

    /// The share link of that id.
    pub async fn share_by_id(&self, id: i64) -> Result<Option<auth::ShareRow>>;

    /// Every share link, newest first.
    pub async fn list_shares(&self) -> Result<Vec<auth::ShareRow>>;

    /// Revokes a share link; `false` when there is no such live link.
    pub async fn revoke_share(&self, id: i64, now_ms: i64) -> Result<bool>;

    /// Appends one entry to the audit log.
    pub async fn insert_audit(
        &self,
        at_ms: i64,
        who: &str,
        method: &str,
        path: &str,
        status: i64,
        client: Option<&str>,
    ) -> Result<()>;

    /// Audit entries newest first, older than `before_id` when given.
    pub async fn list_audit(
        &self,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<auth::AuditRow>>;

    /// Takes or renews lease `name` for `holder` until `now_ms + ttl_ms`: the term held
    /// (the same while renewed, one more at every change of holder), or `None` while
    /// another holder's lease runs.
    pub async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Result<Option<i64>>;

    /// Whether `holder` still holds lease `name` in `term` at `now_ms`.
    pub async fn lease_held(
        &self,
        name: &str,
        holder: &str,
        term: i64,
        now_ms: i64,
    ) -> Result<bool>;

    /// Holders of the unexpired leases whose names start with `prefix`, sorted (the live
    /// replicas, when each holds `replica:ID`).
    pub async fn lease_holders(&self, prefix: &str, now_ms: i64) -> Result<Vec<String>>;

    /// Deletes the leases named `prefix…` that expired before `expired_before_ms`; returns
    /// how many.
    pub async fn forget_leases(&self, prefix: &str, expired_before_ms: i64) -> Result<u64>;

    /// Gives lease `name` up (if `holder` has it): another may take it at once.
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<()>;
}
