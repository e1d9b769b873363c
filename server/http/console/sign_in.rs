//! Sign-in pages: `GET/POST /console/sign-in`, `POST /console/sign-out`, and shared
//! read-only pages `GET /share/{link}`.
//!
//! The session cookie: `HttpOnly; SameSite=Lax; Path=/`, `Secure` with the `__Host-`
//! prefix behind HTTPS ([`crate::services::auth::SECURE_COOKIE`]); a new session id at
//! every sign-in (the old one, if any, is ended), deleted at sign-out.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::domain::auth::Permission::*;
use crate::domain::auth::{Principal, SESSION_ABSOLUTE_MS, ShareSubject, safe_next};
use crate::http::table::Routes;
use crate::http::table::methods::*;
use crate::services::auth::{PLAIN_COOKIE, SECURE_COOKIE, SignIn, cookie};
use crate::state::AppState;

pub fn routes() -> Routes {
    Routes::new()
        .route("/console/sign-in", GET, Public, get(sign_in_page))
        .route("/console/sign-in", POST, Public, post(sign_in))
        .route("/console/sign-out", POST, Public, post(sign_out))
        .route("/share/{link}", GET, Public, get(shared_page))
        .route("/console/admin", GET, Admin, get(admin_page))
}

#[derive(Template, WebTemplate)]
#[template(path = "sign_in.html")]
struct SignInPage {
    nav: &'static str,
    /// Sign-in is off (no users).
    off: bool,
    next: String,
    name: String,
    error: Option<String>,
}

#[derive(Deserialize)]
struct NextQuery {
    next: Option<String>,
}

async fn sign_in_page(
    State(state): State<AppState>,
    axum::Extension(p): axum::Extension<Principal>,
    Query(q): Query<NextQuery>,
) -> Response {
    let next = safe_next(q.next.as_deref());
    if matches!(p, Principal::User { .. }) {
        return Redirect::to(&next).into_response();
    }
    SignInPage {
        nav: "",
        off: !state.auth.enabled(crate::now_ms()).await,
        next,
        name: String::new(),
        error: None,
    }
    .into_response()
}

#[derive(Deserialize)]
struct SignInForm {
    name: String,
    password: String,
    next: Option<String>,
}

async fn sign_in(State(state): State<AppState>, req: Request) -> Response {
    let client = crate::http::auth::client_addr(&req);
    let old = cookie(req.headers(), state.auth.cookie_name()).map(str::to_string);
    let audit = req
        .extensions()
        .get::<crate::http::auth::AuditWho>()
        .cloned();
    let Form(form): Form<SignInForm> =
        match <Form<SignInForm> as axum::extract::FromRequest<AppState>>::from_request(req, &state)
            .await
        {
            Ok(f) => f,
            Err(e) => return (StatusCode::BAD_REQUEST, format!("{e}")).into_response(),
        };
    let next = safe_next(form.next.as_deref());
    // The audit log names who tried (a name that is not a user's is cut to 64 characters).
    let tried: String = crate::domain::auth::normalize_user_name(&form.name)
        .chars()
        .take(64)
        .filter(|c| !c.is_control())
        .collect();
    if let Some(a) = &audit {
        a.set(format!("sign-in:{tried}"));
    }
    let page = |status: StatusCode, error: String| {
        let mut r = SignInPage {
            nav: "",
            off: false,
            next: next.clone(),
            name: form.name.clone(),
            error: Some(error),
        }
        .into_response();
        *r.status_mut() = status;
        r
    };
    let now = crate::now_ms();
    match state
        .auth
        .sign_in(form.name.trim(), &form.password, client, now)
        .await
    {
        Ok(SignIn::Ok { session, principal }) => {
            if let Some(old) = old {
                let _ = state.auth.sign_out(&old).await;
            }
            tracing::info!(user = %principal.who(), "signed in");
            let mut r = Redirect::to(&next).into_response();
            set_cookie(
                &mut r,
                &session_cookie(&state, &session, SESSION_ABSOLUTE_MS / 1000),
            );
            r
        }
        Ok(SignIn::Refused) => page(
            StatusCode::UNAUTHORIZED,
            "Wrong user name or password.".into(),
        ),
        Ok(SignIn::Throttled { retry_after_s }) => {
            let mut r = page(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "Too many failed sign-ins: try again in {}.",
                    crate::domain::format::duration(Some(retry_after_s * 1000))
                ),
            );
            if let Ok(v) = HeaderValue::from_str(&retry_after_s.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            r
        }
        Err(e) => {
            tracing::error!(error = %e, "sign-in failed");
            page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Sign-in failed: the server log has the details.".into(),
            )
        }
    }
}

async fn sign_out(State(state): State<AppState>, req: Request) -> Response {
    for name in [SECURE_COOKIE, PLAIN_COOKIE] {
        if let Some(v) = cookie(req.headers(), name)
            && let Err(e) = state.auth.sign_out(v).await
        {
            tracing::error!(error = %e, "ending a session failed");
        }
    }
    let mut r = Redirect::to("/console/sign-in").into_response();
    set_cookie(&mut r, &session_cookie(&state, "", 0));
    r
}

/// The session cookie's `Set-Cookie` value (`max_age_s` 0 deletes it).
fn session_cookie(state: &AppState, value: &str, max_age_s: i64) -> String {
    let secure = if state.auth.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_s}{secure}",
        state.auth.cookie_name()
    )
}

fn set_cookie(r: &mut Response, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// A shared page: the run, comparison or scenario trend its link names, read-only, with
/// no navigation; an unknown, revoked or expired link gets 404 (which one is not said).
async fn shared_page(State(state): State<AppState>, Path(link): Path<String>) -> Response {
    let principal = match state.auth.share_principal(&link, crate::now_ms()).await {
        Ok(p) => p,
        Err(e) => {
            return super::PageError(crate::error::Error::NotFound(e.message().into()))
                .into_response();
        }
    };
    let Principal::Share { subject, .. } = &principal else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let subject = subject.clone();
    // The page's scripts ask for its runs' figures (per-label series, distributions):
    // the link goes with them in a cookie scoped to those runs' API paths only.
    let share_runs: Vec<i64> = match &subject {
        ShareSubject::Run { id } => vec![*id],
        ShareSubject::Compare { runs } => runs.clone(),
        ShareSubject::Scenario { .. } => Vec::new(),
    };
    let secure = if state.auth.secure_cookies {
        "; Secure"
    } else {
        ""
    };
    let cookies: Vec<String> = share_runs
        .iter()
        .map(|id| {
            format!(
                "{}{id}={link}; Path=/api/v1/runs/{id}; HttpOnly; SameSite=Strict; Max-Age=86400{secure}",
                crate::services::auth::SHARE_COOKIE_PREFIX
            )
        })
        .collect();
    let render = async move {
        match subject {
            ShareSubject::Run { id } => super::run(State(state), Path(id.to_string()))
                .await
                .into_response(),
            ShareSubject::Compare { runs } => {
                let ids: Vec<String> = runs.iter().map(i64::to_string).collect();
                super::compare::compare_page(
                    State(state),
                    axum::extract::RawQuery(Some(format!("runs={}", ids.join(",")))),
                )
                .await
                .into_response()
            }
            ShareSubject::Scenario { name } => super::compare::scenario_page(
                State(state),
                Path(name),
                axum::extract::RawQuery(None),
            )
            .await
            .into_response(),
        }
    };
    let mut r = crate::http::auth::as_principal(principal, render).await;
    for c in &cookies {
        set_cookie(&mut r, c);
    }
    // The page must not leak its link to the sites it links to, nor be cached by others.
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    r.headers_mut().insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// A token row of the admin page.
struct TokenView {
    id: i64,
    name: String,
    scope: String,
    created_by: String,
    created: String,
    expires: String,
    last_used: String,
    state: &'static str,
    state_class: &'static str,
}

/// A share link row of the admin page.
struct ShareView {
    id: i64,
    shows: String,
    href: String,
    created_by: String,
    created: String,
    expires: String,
    state: &'static str,
    state_class: &'static str,
}

struct UserView {
    name: String,
    role: String,
    created_at_ms: i64,
    created: String,
}

struct AuditView {
    at_ms: i64,
    at: String,
    who: String,
    method: String,
    path: String,
    status: i64,
    status_class: &'static str,
    client: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin.html")]
struct AdminPage {
    nav: &'static str,
    users: Vec<UserView>,
    tokens: Vec<TokenView>,
    shares: Vec<ShareView>,
    audit: Vec<AuditView>,
}

fn state_of(revoked: Option<i64>, expires: Option<i64>, now: i64) -> (&'static str, &'static str) {
    if revoked.is_some() {
        ("revoked", "muted")
    } else if expires.is_some_and(|e| e <= now) {
        ("expired", "muted")
    } else {
        ("live", "ok")
    }
}

/// `/console/admin`: users, tokens (create, revoke), share links (revoke), audit log.
async fn admin_page(State(state): State<AppState>) -> Result<AdminPage, super::PageError> {
    use crate::domain::format::time;
    let now = crate::now_ms();
    let users = state
        .store
        .list_users()
        .await?
        .into_iter()
        .map(|u| UserView {
            created: time(Some(u.created_at_ms)),
            name: u.name,
            role: u.role,
            created_at_ms: u.created_at_ms,
        })
        .collect();
    let tokens = state
        .store
        .list_tokens()
        .await?
        .into_iter()
        .map(|t| {
            let (st, class) = state_of(t.revoked_at_ms, t.expires_at_ms, now);
            TokenView {
                id: t.id,
                name: t.name,
                scope: t.scope,
                created_by: t.created_by,
                created: time(Some(t.created_at_ms)),
                expires: t.expires_at_ms.map_or("never".into(), |e| time(Some(e))),
                last_used: t.last_used_ms.map_or("never".into(), |e| time(Some(e))),
                state: st,
                state_class: class,
            }
        })
        .collect();
    let shares = state
        .store
        .list_shares()
        .await?
        .into_iter()
        .map(|s| {
            let (st, class) = state_of(s.revoked_at_ms, Some(s.expires_at_ms), now);
            let subject: Option<ShareSubject> = serde_json::from_str(&s.subject).ok();
            let (shows, href) = match subject {
                Some(ShareSubject::Run { id }) => {
                    (format!("run #{id}"), format!("/console/runs/{id}"))
                }
                Some(ShareSubject::Compare { runs }) => {
                    let ids: Vec<String> = runs.iter().map(i64::to_string).collect();
                    (
                        format!("comparison of runs {}", ids.join(", ")),
                        format!("/console/compare?runs={}", ids.join(",")),
                    )
                }
                Some(ShareSubject::Scenario { name }) => (
                    format!("scenario {name}"),
                    format!(
                        "/console/scenarios/{}",
                        crate::domain::format::path_segment(&name)
                    ),
                ),
                None => ("(unreadable)".into(), "#".into()),
            };
            ShareView {
                id: s.id,
                shows,
                href,
                created_by: s.created_by,
                created: time(Some(s.created_at_ms)),
                expires: time(Some(s.expires_at_ms)),
                state: st,
                state_class: class,
            }
        })
        .collect();
    let audit = state
        .store
        .list_audit(None, 100)
        .await?
        .into_iter()
        .map(|a| AuditView {
            at: time(Some(a.at_ms)),
            at_ms: a.at_ms,
            who: a.who,
            method: a.method,
            path: a.path,
            status_class: match a.status {
                200..=399 => "ok",
                400..=499 => "warn",
                _ => "err",
            },
            status: a.status,
            client: a.client.unwrap_or_default(),
        })
        .collect();
    Ok(AdminPage {
        nav: "admin",
        users,
        tokens,
        shares,
        audit,
    })
}
