//! Single sign-on with OpenID Connect (the `[oidc]` section): the authorization code flow
//! with PKCE (RFC 7636) and a nonce, by the `openidconnect` crate on harrier's own
//! outbound client ([`Outbound::identity`]: the egress policy, no redirects).
//!
//! [`Sso::start`] stores a sign-on under way (the SHA-256 of its `state`, the nonce, the
//! PKCE verifier, where to go after) in the store — any replica can finish it — and
//! gives the provider's authorization URL. [`Sso::finish`] takes that row back (each
//! `state` works once, for [`crate::domain::oidc::LOGIN_TTL_MS`]), exchanges the code with the verifier,
//! checks the ID token (signature against the provider's published keys, issuer,
//! audience, expiry, nonce), maps the groups claim to a role and creates or updates the
//! user of that subject. Starting the session is [`crate::services::auth::Auth`]'s.
//!
//! The provider's metadata and keys (OpenID Connect Discovery 1.0) are fetched at the
//! first sign-on and again after [`METADATA_TTL_MS`], so a provider that is down when
//! harrier starts, or rotates its keys, is picked up. Must not know about HTTP requests
//! from browsers or cookies (that is `http::console::sign_in`).

use std::collections::HashMap;

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreAuthenticationFlow, CoreErrorResponseType,
    CoreGenderClaim, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm,
    CoreProviderMetadata, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AuthorizationCode, Client, ClientId, ClientSecret, CsrfToken,
    EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet, IdTokenFields, IssuerUrl,
    Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, StandardErrorResponse,
    StandardTokenResponse, TokenResponse,
};
use serde::{Deserialize, Serialize};

use crate::domain::auth::{Role, secret_hash};
use crate::domain::oidc::{Oidc, groups_of};
use crate::services::egress::{Egress, IdentityClient, Outbound};
use crate::store::Store;
use crate::store::auth::{OidcLoginRow, UserRow};

/// How long the provider's metadata and keys are reused, ms.
pub const METADATA_TTL_MS: i64 = 5 * 60_000;

/// Every claim of the ID token beyond the standard ones (the groups claim among them).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct OtherClaims {
    #[serde(flatten)]
    claims: HashMap<String, serde_json::Value>,
}

impl AdditionalClaims for OtherClaims {}

type Fields = IdTokenFields<
    OtherClaims,
    EmptyExtraTokenFields,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;
type Tokens = StandardTokenResponse<Fields, CoreTokenType>;
type OidcClient = Client<
    OtherClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    Tokens,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// Why a single sign-on did not sign anyone in. [`SsoError::message`] is what the
/// sign-in page says.
#[derive(Debug, thiserror::Error)]
pub enum SsoError {
    /// The provider could not be reached or answered nonsense (discovery, keys, token
    /// endpoint); the detail goes to the server log.
    #[error("the identity provider could not be used: {0}")]
    Provider(String),
    /// The provider sent the person back with an error (`error=access_denied`, …).
    #[error("the identity provider refused: {0}")]
    Refused(String),
    /// The `state` is unknown, used already, expired, or not this browser's.
    #[error("unknown, used or expired sign-in state")]
    State,
    /// The ID token failed a check (signature, issuer, audience, expiry, nonce).
    #[error("the ID token was refused: {0}")]
    Token(String),
    /// The person is in none of the mapped groups and there is no default role.
    #[error("{name} is in none of the groups that may use harrier")]
    NoRole { name: String },
    /// None of the claims gives a usable user name.
    #[error("the ID token names no usable user name")]
    NoName,
    /// A user of that name exists and is not this person's.
    #[error("the user name {name} is taken by another user")]
    NameTaken { name: String },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl SsoError {
    /// The sentence shown on the sign-in page.
    pub fn message(&self, provider: &str) -> String {
        match self {
            SsoError::Provider(_) => format!(
                "Sign-in with {provider} failed: the identity provider could not be reached \
                 (the server log has the details)."
            ),
            SsoError::Refused(why) => format!("{provider} did not sign you in: {why}."),
            SsoError::State => "This sign-in link is unknown, used already or expired (or was \
                 started in another browser): start again."
                .into(),
            SsoError::Token(_) => format!(
                "Sign-in with {provider} failed: its answer did not pass harrier's checks \
                 (the server log has the details)."
            ),
            SsoError::NoRole { name } => format!(
                "{name} is signed in at {provider} but is in none of the groups that may use \
                 harrier: ask an admin to add you to one."
            ),
            SsoError::NoName => format!(
                "{provider} gave no user name harrier can use (letters, digits and . _ - @)."
            ),
            SsoError::NameTaken { name } => {
                format!("The user name {name} belongs to another harrier user: ask an admin.")
            }
            SsoError::Store(_) => "Sign-in failed: the server log has the details.".into(),
        }
    }

    /// The name the audit log gives the attempt, when the person is known.
    pub fn who(&self) -> Option<&str> {
        match self {
            SsoError::NoRole { name } | SsoError::NameTaken { name } => Some(name),
            _ => None,
        }
    }
}

/// A sign-on started: where to send the browser and the `state` it must bring back.
#[derive(Debug)]
pub struct Started {
    pub authorize_url: String,
    pub state: String,
}

/// A sign-on finished: the user (created or updated), their role now, where to go.
#[derive(Debug)]
pub struct SignedOn {
    pub user: UserRow,
    pub role: Role,
    pub next: String,
}

/// The configured provider; shared by every request.
pub struct Sso {
    pub config: Oidc,
    store: Store,
    outbound: IdentityClient,
    metadata: tokio::sync::Mutex<Option<(CoreProviderMetadata, i64)>>,
}

impl Sso {
    pub fn new(config: Oidc, store: Store, egress: &Egress) -> Sso {
        Sso {
            config,
            store,
            outbound: IdentityClient(Outbound::identity(egress)),
            metadata: tokio::sync::Mutex::new(None),
        }
    }

    /// The provider's metadata and keys, fetched when missing or older than
    /// [`METADATA_TTL_MS`] (or when `refresh`).
    async fn metadata(&self, now_ms: i64, refresh: bool) -> Result<CoreProviderMetadata, SsoError> {
        let mut cached = self.metadata.lock().await;
        if !refresh
            && let Some((m, at)) = cached.as_ref()
            && now_ms.saturating_sub(*at) < METADATA_TTL_MS
        {
            return Ok(m.clone());
        }
        let issuer = IssuerUrl::new(self.config.issuer.clone())
            .map_err(|e| SsoError::Provider(format!("issuer URL: {e}")))?;
        let m = CoreProviderMetadata::discover_async(issuer, &self.outbound)
            .await
            .map_err(|e| SsoError::Provider(format!("discovery: {}", error_chain(&e))))?;
        *cached = Some((m.clone(), now_ms));
        Ok(m)
    }

    fn client(
        &self,
        metadata: CoreProviderMetadata,
        redirect_url: &str,
    ) -> Result<OidcClient, SsoError> {
        let redirect = RedirectUrl::new(redirect_url.to_string())
            .map_err(|e| SsoError::Provider(format!("redirect URL {redirect_url:?}: {e}")))?;
        Ok(OidcClient::from_provider_metadata(
            metadata,
            ClientId::new(self.config.client_id.clone()),
            self.config
                .client_secret
                .as_ref()
                .map(|s| ClientSecret::new(s.expose().to_string())),
        )
        .set_redirect_uri(redirect))
    }

    /// Starts a sign-on that comes back to `redirect_url` (harrier's
    /// `/auth/oidc/callback`) and then goes to `next` (a local path).
    pub async fn start(
        &self,
        redirect_url: &str,
        next: &str,
        now_ms: i64,
    ) -> Result<Started, SsoError> {
        let client = self.client(self.metadata(now_ms, false).await?, redirect_url)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in &self.config.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.url();
        self.store
            .insert_oidc_login(&OidcLoginRow {
                state_hash: secret_hash(state.secret()),
                nonce: nonce.secret().clone(),
                pkce_verifier: verifier.secret().clone(),
                redirect_url: redirect_url.to_string(),
                next: next.to_string(),
                created_at_ms: now_ms,
            })
            .await?;
        Ok(Started {
            authorize_url: url.to_string(),
            state: state.secret().clone(),
        })
    }

    /// Ends the sign-on of `state` without a user (the provider answered with an error,
    /// or another browser brought it): its row is deleted, so the state cannot be used
    /// again. Whether there was such a sign-on under way.
    pub async fn forget(&self, state: &str, now_ms: i64) -> Result<bool, SsoError> {
        Ok(self
            .store
            .take_oidc_login(&secret_hash(state), now_ms)
            .await?
            .is_some())
    }

    /// Finishes the sign-on of `state` with the provider's `code`: see the module's list.
    pub async fn finish(&self, state: &str, code: &str, now_ms: i64) -> Result<SignedOn, SsoError> {
        let login = self
            .store
            .take_oidc_login(&secret_hash(state), now_ms)
            .await?
            .ok_or(SsoError::State)?;
        let client = self.client(self.metadata(now_ms, false).await?, &login.redirect_url)?;
        let tokens = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| SsoError::Provider(format!("token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(login.pkce_verifier.clone()))
            .request_async(&self.outbound)
            .await
            .map_err(|e| SsoError::Provider(format!("token request: {}", error_chain(&e))))?;
        let id_token = tokens
            .id_token()
            .ok_or_else(|| SsoError::Token("the token answer holds no ID token".into()))?;
        let nonce = Nonce::new(login.nonce.clone());
        let claims = match id_token.claims(&client.id_token_verifier(), &nonce) {
            Ok(c) => c.clone(),
            // Keys may have rotated since they were fetched: once more with fresh ones.
            Err(openidconnect::ClaimsVerificationError::SignatureVerification(_)) => {
                let client =
                    self.client(self.metadata(now_ms, true).await?, &login.redirect_url)?;
                id_token
                    .claims(&client.id_token_verifier(), &nonce)
                    .map_err(|e| SsoError::Token(e.to_string()))?
                    .clone()
            }
            Err(e) => return Err(SsoError::Token(e.to_string())),
        };
        let subject = claims.subject().as_str().to_string();
        let other = &claims.additional_claims().claims;
        let name = self
            .config
            .user_name(|claim| match claim {
                "sub" => Some(subject.as_str()),
                "preferred_username" => claims.preferred_username().map(|u| u.as_str()),
                "email" => claims.email().map(|e| e.as_str()),
                other_claim => other.get(other_claim).and_then(|v| v.as_str()),
            })
            .ok_or(SsoError::NoName)?;
        let groups = groups_of(other.get(&self.config.groups_claim));
        let role = self
            .config
            .role_for(groups.iter().map(String::as_str))
            .ok_or_else(|| SsoError::NoRole { name: name.clone() })?;
        let user = self
            .store
            .oidc_user(&subject, &name, role.as_str(), now_ms)
            .await?
            .ok_or(SsoError::NameTaken { name })?;
        Ok(SignedOn {
            user,
            role,
            next: login.next,
        })
    }
}

/// An error and its sources, `: `-separated (the crate's errors say little on their own).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
