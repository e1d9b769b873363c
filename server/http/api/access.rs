//! Sign-in's API: who am I, users, machine tokens, share links and the audit log.
//!
//! - `GET /api/v1/whoami` → `{sign_in, kind, name, role|scope}` (anyone);
//! - `GET /api/v1/users`, `POST /api/v1/users` `{name, role, password}`,
//!   `DELETE /api/v1/users/{name}` (Admin);
//! - `GET /api/v1/tokens`, `POST /api/v1/tokens` `{name, scope, expires_days?}` → the
//!   token, shown this once (`token`), `DELETE /api/v1/tokens/{id}` revokes (Admin);
//! - `GET /api/v1/share-links`, `POST /api/v1/share-links`
//!   `{run: ID | compare: [IDs] | scenario: NAME, expires_days?}` → `{url}` shown once,
//!   `DELETE /api/v1/share-links/{id}` revokes (Editor);
//! - `GET /api/v1/audit?before=ID&limit=N` → newest first (Admin).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;

use crate::domain::auth::Permission::*;
use crate::domain::auth::{self, Principal, Role, SHARE_PREFIX, Scope, ShareSubject, TOKEN_PREFIX};
use crate::error::{Error, Result};
use crate::http::table::Routes;
use crate::http::table::methods::*;
use crate::services::auth::random_secret;
use crate::state::AppState;

pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/whoami", GET, Public, get(whoami))
        .route("/api/v1/users", GET, Admin, get(list_users))
        .route("/api/v1/users", POST, Admin, post(create_user))
        .route("/api/v1/users/{name}", DELETE, Admin, delete(delete_user))
        .route("/api/v1/tokens", GET, Admin, get(list_tokens))
        .route("/api/v1/tokens", POST, Admin, post(create_token))
        .route("/api/v1/tokens/{id}", DELETE, Admin, delete(revoke_token))
        .route("/api/v1/share-links", GET, Write, get(list_shares))
        .route("/api/v1/share-links", POST, Write, post(create_share))
        .route(
            "/api/v1/share-links/{id}",
            DELETE,
            Write,
            delete(revoke_share),
        )
        .route("/api/v1/audit", GET, Admin, get(audit))
}

/// Default lifetime of tokens (90 days) and share links (30 days).
pub const TOKEN_DAYS: i64 = 90;
pub const SHARE_DAYS: i64 = 30;
const DAY_MS: i64 = 24 * 3_600_000;

async fn whoami(
    State(state): State<AppState>,
    axum::Extension(p): axum::Extension<Principal>,
) -> Json<serde_json::Value> {
    let sign_in = state.auth.enabled(crate::now_ms()).await;
    Json(match &p {
        Principal::User { name, role, .. } => {
            serde_json::json!({"sign_in": sign_in, "kind": "user", "name": name, "role": role})
        }
        Principal::Token { name, scope, .. } => {
            serde_json::json!({"sign_in": sign_in, "kind": "token", "name": name, "scope": scope})
        }
        other => serde_json::json!({"sign_in": sign_in, "kind": other.who()}),
    })
}

async fn list_users(
    State(state): State<AppState>,
) -> Result<Json<Vec<crate::store::auth::UserRow>>> {
    Ok(Json(state.store.list_users().await?))
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
    role: String,
    password: String,
}

async fn create_user(
    State(state): State<AppState>,
    Json(mut u): Json<NewUser>,
) -> Result<Response> {
    auth::check_user_name(u.name.trim()).map_err(Error::BadRequest)?;
    u.name = auth::normalize_user_name(&u.name);
    auth::check_password(&u.password).map_err(Error::BadRequest)?;
    let role = Role::parse(&u.role).ok_or_else(|| {
        Error::BadRequest(format!(
            "role {:?}: expected viewer, operator, editor or admin",
            u.role
        ))
    })?;
    let hash = state
        .auth
        .hash_password(&u.password)
        .await
        .map_err(|e| Error::Internal(e.to_string()))?;
    let now = crate::now_ms();
    match state
        .store
        .insert_user(&u.name, role.as_str(), &hash, now)
        .await?
    {
        Some(id) => {
            state.auth.recheck();
            Ok((
                StatusCode::CREATED,
                Json(serde_json::json!({"id": id, "name": u.name, "role": role})),
            )
                .into_response())
        }
        None => Err(Error::Conflict {
            field: Some("name".into()),
            message: format!("a user named {:?} exists", u.name),
        }),
    }
}

async fn delete_user(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode> {
    let name = auth::normalize_user_name(&name);
    if let Some(why) = crate::services::auth::last_admin(&state.store, &name).await? {
        return Err(Error::Conflict {
            field: None,
            message: why,
        });
    }
    if state.store.delete_user(&name, crate::now_ms()).await? {
        state.auth.recheck();
        state.auth.forget_checked();
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound(format!("user {name:?}")))
    }
}

async fn list_tokens(
    State(state): State<AppState>,
) -> Result<Json<Vec<crate::store::auth::TokenRow>>> {
    Ok(Json(state.store.list_tokens().await?))
}

#[derive(Deserialize)]
struct NewToken {
    name: String,
    scope: String,
    /// Days until it expires; 0 never [default: 90].
    expires_days: Option<i64>,
}

/// Creates a token; the answer is the only place its text ever appears.
pub async fn issue_token(
    state: &AppState,
    name: &str,
    scope: Scope,
    expires_days: i64,
    created_by: &str,
) -> crate::store::Result<(i64, String, Option<i64>)> {
    let now = crate::now_ms();
    let expires = (expires_days > 0).then(|| now + expires_days * DAY_MS);
    let secret = random_secret();
    let id = state
        .store
        .insert_token(
            name,
            scope.as_str(),
            &auth::secret_hash(&secret),
            created_by,
            now,
            expires,
        )
        .await?;
    Ok((
        id,
        auth::format_credential(TOKEN_PREFIX, id, &secret),
        expires,
    ))
}

async fn create_token(
    State(state): State<AppState>,
    axum::Extension(p): axum::Extension<Principal>,
    Json(t): Json<NewToken>,
) -> Result<Response> {
    let name = t.name.trim();
    auth::check_token_name(name).map_err(Error::BadRequest)?;
    let scope = Scope::parse(&t.scope).ok_or_else(|| {
        Error::BadRequest(format!(
            "scope {:?}: expected ingest, read, operate or write",
            t.scope
        ))
    })?;
    let days = t.expires_days.unwrap_or(TOKEN_DAYS);
    if !(0..=3650).contains(&days) {
        return Err(Error::BadRequest("expires_days: 0 (never) to 3650".into()));
    }
    let (id, token, expires) = issue_token(&state, name, scope, days, &p.who()).await?;
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({
            "id": id, "name": name, "scope": scope, "expires_at_ms": expires, "token": token,
            "note": "shown this once: store it now (harrier keeps only its hash)",
        })),
    )
        .into_response())
}

async fn revoke_token(State(state): State<AppState>, Path(id): Path<i64>) -> Result<StatusCode> {
    if state.store.revoke_token(id, crate::now_ms()).await? {
        state.auth.forget_checked();
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound(format!("live token {id}")))
    }
}

async fn list_shares(
    State(state): State<AppState>,
) -> Result<Json<Vec<crate::store::auth::ShareRow>>> {
    Ok(Json(state.store.list_shares().await?))
}

#[derive(Deserialize)]
struct NewShare {
    run: Option<i64>,
    compare: Option<Vec<i64>>,
    scenario: Option<String>,
    expires_days: Option<i64>,
}

async fn create_share(
    State(state): State<AppState>,
    axum::Extension(p): axum::Extension<Principal>,
    Json(s): Json<NewShare>,
) -> Result<Response> {
    let subject = match (s.run, s.compare, s.scenario) {
        (Some(id), None, None) => {
            if state.store.get_run(id).await?.is_none() {
                return Err(Error::NotFound(format!("run {id}")));
            }
            ShareSubject::Run { id }
        }
        (None, Some(runs), None) if (2..=10).contains(&runs.len()) => {
            for id in &runs {
                if state.store.get_run(*id).await?.is_none() {
                    return Err(Error::NotFound(format!("run {id}")));
                }
            }
            ShareSubject::Compare { runs }
        }
        (None, None, Some(name)) if !name.trim().is_empty() => {
            let known = state.store.list_scenarios().await?;
            if !known.iter().any(|s| s.scenario == name) {
                return Err(Error::NotFound(format!("scenario {name:?}")));
            }
            ShareSubject::Scenario { name }
        }
        _ => {
            return Err(Error::BadRequest(
                "share one thing: {\"run\": ID}, {\"compare\": [2 to 10 run ids]} or {\"scenario\": NAME}".into(),
            ));
        }
    };
    let days = s.expires_days.unwrap_or(SHARE_DAYS);
    if !(1..=365).contains(&days) {
        return Err(Error::BadRequest(
            "expires_days: 1 to 365 (share links always expire)".into(),
        ));
    }
    let now = crate::now_ms();
    let secret = random_secret();
    let subject_json = serde_json::to_string(&subject).unwrap_or_default();
    let id = state
        .store
        .insert_share(
            &subject_json,
            &auth::secret_hash(&secret),
            &p.who(),
            now,
            now + days * DAY_MS,
        )
        .await?;
    let path = format!(
        "/share/{}",
        auth::format_credential(SHARE_PREFIX, id, &secret)
    );
    let url = match state.config.site.public_origin() {
        Some(origin) => format!("{origin}{path}"),
        None => path.clone(),
    };
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({
            "id": id, "subject": subject, "expires_at_ms": now + days * DAY_MS,
            "path": path, "url": url,
            "note": "shown this once: whoever has the link sees this page (read-only) until it expires or is revoked",
        })),
    )
        .into_response())
}

async fn revoke_share(State(state): State<AppState>, Path(id): Path<i64>) -> Result<StatusCode> {
    if state.store.revoke_share(id, crate::now_ms()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(Error::NotFound(format!("live share link {id}")))
    }
}

#[derive(Deserialize)]
struct AuditQuery {
    before: Option<i64>,
    limit: Option<i64>,
}

async fn audit(
    State(state): State<AppState>,
    Query(q): Query<AuditQuery>,
) -> Result<Json<Vec<crate::store::auth::AuditRow>>> {
    let limit = q.limit.unwrap_or(200).clamp(1, 1000);
    Ok(Json(state.store.list_audit(q.before, limit).await?))
}
