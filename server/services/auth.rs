//! Sign-in: password hashing and checks, sessions, machine tokens, share links, and
//! resolving a request's credentials to a [`Principal`].
//!
//! Sign-in is **on** as soon as the store holds one user (`harrier user add`); with no
//! user every request is [`Principal::Open`], as before sign-in existed (the server then
//! listens on loopback, or was told `--insecure-no-auth`). Whether users exist is read
//! from the store at most every [`ENABLED_TTL_MS`], so a user added by the command line
//! turns sign-in on in a running server within that time.
//!
//! Passwords: Argon2id (RustCrypto `argon2`, its defaults: 19 MiB, 2 passes, 1 lane —
//! OWASP's recommended minimum) as PHC strings; hashed and verified on the blocking
//! threads, at most [`HASHING_TURNS`] at once, so a flood of sign-ins cannot take the
//! async threads or all the memory. An unknown user name costs one verification too (of
//! a dummy hash), so response times do not tell which names exist.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use axum::http::{HeaderMap, header};
use tokio::sync::Semaphore;

use crate::domain::auth::{
    self, AuthProxy, Principal, Role, SHARE_PREFIX, SIGN_IN_MAX_FAILURES, SIGN_IN_WINDOW_MS, Scope,
    ShareSubject, TOKEN_PREFIX,
};
use crate::store::Store;

/// How long a checked token or session is believed without asking the database again, ms.
/// Changes made through this server apply at once ([`Auth::forget_checked`]); changes made
/// elsewhere (the CLI, another replica) within this long.
pub const CREDENTIAL_TTL_MS: i64 = 5_000;
/// Credentials remembered at most (then the stale ones, or all, are forgotten).
pub const CREDENTIAL_CACHE_MAX: usize = 10_000;

/// How long the "are there users" answer is reused, ms.
pub const ENABLED_TTL_MS: i64 = 2_000;
/// Password hashes computed at once (each takes 19 MiB and a core for tens of ms).
pub const HASHING_TURNS: usize = 2;

/// The session cookie's name behind HTTPS: the `__Host-` prefix makes browsers refuse it
/// unless it is `Secure`, has `Path=/` and no `Domain` (no other host can set or read it).
pub const SECURE_COOKIE: &str = "__Host-harrier_session";
/// Over plain HTTP (loopback, a LAN): browsers drop `Secure` cookies there, so the
/// session cookie goes without the prefix.
pub const PLAIN_COOKIE: &str = "harrier_session";

/// Why a request's credentials were refused (the message of its 401).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialError {
    /// A token that is malformed, unknown, revoked or expired.
    BadToken,
    /// A share link that is malformed, unknown, revoked or expired.
    BadShare,
}

impl CredentialError {
    pub fn message(self) -> &'static str {
        match self {
            CredentialError::BadToken => {
                "the token is unknown, revoked or expired (create one with `harrier token create`)"
            }
            CredentialError::BadShare => "this share link is unknown, revoked or expired",
        }
    }
}

/// The outcome of a sign-in attempt.
#[derive(Debug)]
pub enum SignIn {
    /// Signed in: the new session's id (for the cookie; only its hash is stored) and who.
    Ok {
        session: String,
        principal: Principal,
    },
    /// Wrong name or password (which one is not said).
    Refused,
    /// Too many failures of this name or client lately: try again after this many seconds.
    Throttled { retry_after_s: i64 },
}

/// Sign-in state shared by every request; cheap to clone.
#[derive(Clone)]
pub struct Auth {
    store: Store,
    enabled: Arc<AtomicBool>,
    checked_ms: Arc<AtomicI64>,
    hashing: Arc<Semaphore>,
    /// One password check at a time per client address: a flood of sign-ins from one
    /// address queues behind itself, not in front of everyone else's
    /// (entries are dropped once nobody waits on them).
    per_client: Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, Arc<Semaphore>>>>,
    /// Behind HTTPS (the public URL is `https://`): cookies are `Secure` and `__Host-`.
    pub secure_cookies: bool,
    /// `[auth_proxy]`: a reverse proxy names the signed-in user in a header.
    proxy: Option<Arc<AuthProxy>>,
    /// Credentials checked lately (key: `t:`/`s:` and the credential's SHA-256), with
    /// the principal and when: a request does not cost a database read per credential.
    checked: Arc<std::sync::Mutex<std::collections::HashMap<String, (Principal, i64)>>>,
    /// Sign-in stays on even with no users (a server on a non-loopback address that
    /// started because users existed must not fall open when the last one is removed).
    required: bool,
}

impl Auth {
    pub fn new(
        store: Store,
        secure_cookies: bool,
        proxy: Option<AuthProxy>,
        required: bool,
    ) -> Auth {
        Auth {
            checked: Arc::default(),
            required,
            proxy: proxy.map(Arc::new),
            store,
            enabled: Arc::new(AtomicBool::new(false)),
            checked_ms: Arc::new(AtomicI64::new(i64::MIN)),
            hashing: Arc::new(Semaphore::new(HASHING_TURNS)),
            per_client: Arc::default(),
            secure_cookies,
        }
    }

    /// The session cookie's name for this server.
    pub fn cookie_name(&self) -> &'static str {
        if self.secure_cookies {
            SECURE_COOKIE
        } else {
            PLAIN_COOKIE
        }
    }

    /// Whether sign-in is on (the store holds a user), read at most every
    /// [`ENABLED_TTL_MS`]. A store error keeps the last answer — and when there is none
    /// yet, counts as on (a database that cannot be read opens nothing).
    pub async fn enabled(&self, now_ms: i64) -> bool {
        if self.proxy.is_some() || self.required {
            return true;
        }
        let checked = self.checked_ms.load(Ordering::Relaxed);
        if checked != i64::MIN && now_ms.saturating_sub(checked) < ENABLED_TTL_MS {
            return self.enabled.load(Ordering::Relaxed);
        }
        match self.store.count_users().await {
            Ok(n) => {
                self.enabled.store(n > 0, Ordering::Relaxed);
                self.checked_ms.store(now_ms, Ordering::Relaxed);
                n > 0
            }
            Err(e) => {
                tracing::error!(error = %e, "reading whether users exist failed");
                checked == i64::MIN || self.enabled.load(Ordering::Relaxed)
            }
        }
    }

    /// Forgets the cached "are there users" answer (after adding or deleting one).
    pub fn recheck(&self) {
        self.checked_ms.store(i64::MIN, Ordering::Relaxed);
    }

    /// Who sent a request with these headers from `client`: a token (`Authorization:
    /// Bearer`, the InfluxDB `Authorization: Token`, or the password of basic auth — what
    /// k6's and JMeter's InfluxDB outputs send), else the auth proxy's user header (only
    /// from the proxy's addresses), else a session cookie, else anonymous. With no users
    /// and no proxy, [`Principal::Open`]. `Err` when a token was sent and is refused.
    pub async fn resolve(
        &self,
        headers: &HeaderMap,
        client: Option<IpAddr>,
        now_ms: i64,
    ) -> Result<Principal, CredentialError> {
        if !self.enabled(now_ms).await {
            return Ok(Principal::Open);
        }
        if let Some(token) = bearer_token(headers) {
            let key = format!("t:{}", auth::secret_hash(&token));
            if let Some(p) = self.cached(&key, now_ms) {
                return Ok(p);
            }
            let p = self.token_principal(&token, now_ms).await?;
            self.remember(key, &p, now_ms);
            return Ok(p);
        }
        if let Some(proxy) = &self.proxy
            && proxy.trusts(client)
            && let Some(name) = headers
                .get(proxy.header.as_str())
                .and_then(|v| v.to_str().ok())
            && auth::check_user_name(name.trim()).is_ok()
        {
            let name = auth::normalize_user_name(name);
            let groups = proxy
                .groups_header
                .as_deref()
                .and_then(|g| headers.get(g))
                .and_then(|v| v.to_str().ok());
            // A local user of that name keeps the role given here; others get the role
            // of their groups.
            let local = self.store.user_by_name(&name).await.ok().flatten();
            return Ok(Principal::User {
                id: local.as_ref().map_or(0, |u| u.id),
                role: local
                    .and_then(|u| Role::parse(&u.role))
                    .unwrap_or_else(|| proxy.role_for(groups)),
                name,
            });
        }
        if let Some(session) =
            cookie(headers, SECURE_COOKIE).or_else(|| cookie(headers, PLAIN_COOKIE))
        {
            let hash = auth::secret_hash(session);
            let key = format!("s:{hash}");
            if let Some(p) = self.cached(&key, now_ms) {
                return Ok(p);
            }
            match self.store.session_user(&hash, now_ms).await {
                Ok(Some(u)) => {
                    let p = Principal::User {
                        id: u.id,
                        role: Role::parse(&u.role).unwrap_or(Role::Viewer),
                        name: u.name,
                    };
                    self.remember(key, &p, now_ms);
                    return Ok(p);
                }
                Ok(None) => {}
                Err(e) => tracing::error!(error = %e, "reading a session failed"),
            }
        }
        // A shared run page's own requests for its figures: the link, in a cookie the
        // share page set for that run's API paths only.
        if let Some(link) = share_cookie(headers)
            && let Ok(p) = self.share_principal(link, now_ms).await
        {
            return Ok(p);
        }
        Ok(Principal::Anonymous)
    }

    /// A credential checked less than [`CREDENTIAL_TTL_MS`] ago: its principal.
    fn cached(&self, key: &str, now_ms: i64) -> Option<Principal> {
        let cache = self.checked.lock().ok()?;
        cache
            .get(key)
            .filter(|(_, at)| now_ms.saturating_sub(*at) < CREDENTIAL_TTL_MS && now_ms >= *at)
            .map(|(p, _)| p.clone())
    }

    fn remember(&self, key: String, p: &Principal, now_ms: i64) {
        if let Ok(mut cache) = self.checked.lock() {
            if cache.len() >= CREDENTIAL_CACHE_MAX {
                cache.retain(|_, (_, at)| now_ms.saturating_sub(*at) < CREDENTIAL_TTL_MS);
                if cache.len() >= CREDENTIAL_CACHE_MAX {
                    cache.clear();
                }
            }
            cache.insert(key, (p.clone(), now_ms));
        }
    }

    /// Forgets every checked credential: called after a change made through this server
    /// (sign-out, a token revoked, a user removed or changed), which then applies at once.
    pub fn forget_checked(&self) {
        if let Ok(mut cache) = self.checked.lock() {
            cache.clear();
        }
    }

    /// The principal of machine token `text`.
    pub async fn token_principal(
        &self,
        text: &str,
        now_ms: i64,
    ) -> Result<Principal, CredentialError> {
        let (id, secret) =
            auth::parse_credential(TOKEN_PREFIX, text).ok_or(CredentialError::BadToken)?;
        let row = match self.store.token_by_id(id).await {
            Ok(Some(row)) => row,
            Ok(None) => {
                // As much work as for a known id: the answer's time does not tell.
                let _ = auth::secret_matches(secret, &"0".repeat(64));
                return Err(CredentialError::BadToken);
            }
            Err(e) => {
                tracing::error!(error = %e, "reading a token failed");
                return Err(CredentialError::BadToken);
            }
        };
        let live = row.revoked_at_ms.is_none() && row.expires_at_ms.is_none_or(|t| now_ms < t);
        if !auth::secret_matches(secret, &row.secret_hash) || !live {
            return Err(CredentialError::BadToken);
        }
        // Written at most once a minute (a write per request would queue every read behind
        // SQLite's writer).
        let stale = row
            .last_used_ms
            .is_none_or(|t| now_ms - t >= crate::store::auth::TOUCH_EVERY_MS);
        if stale && let Err(e) = self.store.touch_token(id, now_ms).await {
            tracing::warn!(error = %e, "recording a token's use failed");
        }
        Ok(Principal::Token {
            id,
            name: row.name,
            scope: Scope::parse(&row.scope).unwrap_or(Scope::Ingest),
        })
    }

    /// The principal of share link `text` (the part of `/share/{text}`).
    pub async fn share_principal(
        &self,
        text: &str,
        now_ms: i64,
    ) -> Result<Principal, CredentialError> {
        let (id, secret) =
            auth::parse_credential(SHARE_PREFIX, text).ok_or(CredentialError::BadShare)?;
        let row = match self.store.share_by_id(id).await {
            Ok(Some(row)) => row,
            Ok(None) => return Err(CredentialError::BadShare),
            Err(e) => {
                tracing::error!(error = %e, "reading a share link failed");
                return Err(CredentialError::BadShare);
            }
        };
        let live = row.revoked_at_ms.is_none() && now_ms < row.expires_at_ms;
        if !auth::secret_matches(secret, &row.secret_hash) || !live {
            return Err(CredentialError::BadShare);
        }
        let subject: ShareSubject =
            serde_json::from_str(&row.subject).map_err(|_| CredentialError::BadShare)?;
        Ok(Principal::Share { id, subject })
    }

    /// Checks `name` and `password` from `client`; on success stores a new session.
    /// Failures count under the (name, client address) pair and under the address;
    /// [`SIGN_IN_MAX_FAILURES`] within [`SIGN_IN_WINDOW_MS`] of either throttle further
    /// attempts (before any hashing). Never under the name alone: wrong passwords sent from
    /// one address must not lock the user out at the address they sign in from. Without a
    /// known address (a test, a Unix socket) the name alone counts.
    pub async fn sign_in(
        &self,
        name: &str,
        password: &str,
        client: Option<IpAddr>,
        now_ms: i64,
    ) -> crate::store::Result<SignIn> {
        let name = auth::normalize_user_name(name);
        let name = name.as_str();
        let keys = match client {
            Some(ip) => vec![format!("user:{name}@{ip}"), format!("client:{ip}")],
            None => vec![format!("user:{name}")],
        };
        let since = now_ms - SIGN_IN_WINDOW_MS;
        for key in &keys {
            let (count, oldest) = self.store.sign_in_failures(key, since).await?;
            if count >= SIGN_IN_MAX_FAILURES {
                let free_at = oldest.unwrap_or(now_ms) + SIGN_IN_WINDOW_MS;
                return Ok(SignIn::Throttled {
                    retry_after_s: ((free_at - now_ms) / 1000).max(1),
                });
            }
        }
        let user = self.store.user_by_name(name).await?;
        let stored = user.as_ref().map(|u| u.password_hash.clone());
        let ok = {
            let _own_turn = self.client_turn(client).await;
            self.verify_password(password, stored).await && user.is_some()
        };
        let Some(user) = user.filter(|_| ok) else {
            self.store.record_sign_in_failure(&keys, now_ms).await?;
            return Ok(SignIn::Refused);
        };
        let session = random_secret();
        self.store
            .insert_session(&auth::secret_hash(&session), user.id, now_ms)
            .await?;
        Ok(SignIn::Ok {
            session,
            principal: Principal::User {
                id: user.id,
                role: Role::parse(&user.role).unwrap_or(Role::Viewer),
                name: user.name,
            },
        })
    }

    /// Starts a session of `user` (signed in some other way: single sign-on), with `role`.
    pub async fn start_session(
        &self,
        user: &crate::store::auth::UserRow,
        role: Role,
        now_ms: i64,
    ) -> crate::store::Result<SignIn> {
        let session = random_secret();
        self.store
            .insert_session(&auth::secret_hash(&session), user.id, now_ms)
            .await?;
        // A role changed by the provider's groups applies at once to this server's cache.
        self.forget_checked();
        Ok(SignIn::Ok {
            session,
            principal: Principal::User {
                id: user.id,
                role,
                name: user.name.clone(),
            },
        })
    }

    /// Ends the session of `cookie_value`.
    pub async fn sign_out(&self, cookie_value: &str) -> crate::store::Result<()> {
        self.forget_checked();
        self.store
            .delete_session(&auth::secret_hash(cookie_value))
            .await
    }

    /// Waits for `client`'s one password check at a time (see `per_client`); `None`
    /// without an address.
    async fn client_turn(&self, client: Option<IpAddr>) -> Option<ClientTurn> {
        let ip = client?;
        let sem = {
            let mut map = self.per_client.lock().ok()?;
            map.entry(ip)
                .or_insert_with(|| Arc::new(Semaphore::new(1)))
                .clone()
        };
        let permit = sem.clone().acquire_owned().await.ok()?;
        Some(ClientTurn {
            _permit: Some(permit),
            ip,
            sem,
            map: self.per_client.clone(),
        })
    }

    /// Whether `password` matches the PHC string `stored`; with `None` (no such user) a
    /// dummy hash is verified instead and the answer is `false`.
    pub async fn verify_password(&self, password: &str, stored: Option<String>) -> bool {
        let Ok(_turn) = self.hashing.acquire().await else {
            return false;
        };
        let password = password.to_string();
        let known = stored.is_some();
        let stored = stored.unwrap_or_else(|| dummy_hash().to_string());
        let verified = tokio::task::spawn_blocking(move || {
            PasswordHash::new(&stored)
                .map(|h| {
                    Argon2::default()
                        .verify_password(password.as_bytes(), &h)
                        .is_ok()
                })
                .unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        verified && known
    }

    /// Hashes `password` (Argon2id, a fresh random salt) on a blocking thread.
    pub async fn hash_password(&self, password: &str) -> anyhow::Result<String> {
        let _turn = self.hashing.acquire().await?;
        let password = password.to_string();
        tokio::task::spawn_blocking(move || hash_password(&password)).await?
    }
}

/// `Some(reason)` when `name` is the only admin (removing or demoting them would leave
/// nobody to manage users and tokens).
pub async fn last_admin(store: &Store, name: &str) -> crate::store::Result<Option<String>> {
    let users = store.list_users().await?;
    let admins: Vec<&str> = users
        .iter()
        .filter(|u| u.role == "admin")
        .map(|u| u.name.as_str())
        .collect();
    Ok((admins == [name]).then(|| {
        format!(
            "{name} is the only admin: make another user admin first (harrier user role NAME admin)"
        )
    }))
}

/// A PHC string of `password` (Argon2id with the crate's default cost, random salt).
pub fn hash_password(password: &str) -> anyhow::Result<String> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| anyhow::anyhow!("no random bytes: {e}"))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| anyhow::anyhow!("salt: {e}"))?;
    Ok(Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| anyhow::anyhow!("hashing the password failed: {e}"))?
        .to_string())
}

/// A hash verified for unknown user names (its password is random and forgotten).
fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| hash_password(&random_secret()).unwrap_or_default())
}

/// 256 random bits as 64 hex digits: session ids and the secret part of tokens and
/// share links.
pub fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    // The operating system's generator fails only on systems harrier does not run on;
    // a process that cannot draw random bytes must not hand out guessable secrets.
    getrandom::fill(&mut bytes).expect("the operating system's random generator failed");
    hex::encode(bytes)
}

/// A token from `Authorization`: `Bearer T`, `Token T` (InfluxDB's), or `Basic` with T
/// as the password (any user name).
pub fn bearer_token(headers: &HeaderMap) -> Option<String> {
    use base64::Engine;
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, rest) = value.split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token") {
        return Some(rest.to_string());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (_, password) = text.split_once(':')?;
        return Some(password.to_string());
    }
    None
}

/// Prefix of the cookies a share page sets, one per shared run, for that run's API paths
/// (`harrier_share_3` on `Path=/api/v1/runs/3`).
pub const SHARE_COOKIE_PREFIX: &str = "harrier_share_";

/// The first share cookie of the request.
fn share_cookie(headers: &HeaderMap) -> Option<&str> {
    cookies(headers)
        .find(|(k, _)| k.starts_with(SHARE_COOKIE_PREFIX))
        .map(|(_, v)| v)
}

/// The request's cookies, `(name, value)`, in the order sent.
fn cookies(headers: &HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .map(|(k, v)| (k, v.trim_matches('"')))
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    cookies(headers)
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

/// A client's turn at a password check; on drop, its address leaves the map when nobody
/// else holds or waits for it.
struct ClientTurn {
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
    ip: IpAddr,
    sem: Arc<Semaphore>,
    map: Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, Arc<Semaphore>>>>,
}

impl Drop for ClientTurn {
    fn drop(&mut self) {
        self._permit = None;
        if let Ok(mut map) = self.map.lock()
            // The map's copy and ours: nobody else waits on this address.
            && Arc::strong_count(&self.sem) == 2
        {
            map.remove(&self.ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn tokens_are_read_from_each_authorization_form() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            bearer_token(&h)
        };
        assert_eq!(with("Bearer hrt_1_x").as_deref(), Some("hrt_1_x"));
        assert_eq!(with("Token hrt_1_x").as_deref(), Some("hrt_1_x"));
        // k6: basic auth k6:hrt_1_x
        assert_eq!(with("Basic azY6aHJ0XzFfeA==").as_deref(), Some("hrt_1_x"));
        assert_eq!(with("Digest x"), None);
        assert_eq!(with("Basic !!!"), None);
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; harrier_session_x=2; harrier_session=abc"),
        );
        assert_eq!(cookie(&h, PLAIN_COOKIE), Some("abc"));
        assert_eq!(cookie(&h, SECURE_COOKIE), None);
    }

    #[test]
    fn hashes_verify_their_password_only() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        let parsed = PasswordHash::new(&h).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"correct horse", &parsed)
                .is_ok()
        );
        assert!(
            Argon2::default()
                .verify_password(b"wrong horse", &parsed)
                .is_err()
        );
        assert_ne!(h, hash_password("correct horse").unwrap(), "salted");
    }
}
