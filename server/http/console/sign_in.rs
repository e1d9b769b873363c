//! Sign-in pages: `GET/POST /console/sign-in`, `POST /console/sign-out`, single sign-on
//! (`GET /auth/oidc/start`, `GET /auth/oidc/callback`) and shared read-only pages
//! `GET /share/{link}`.
//!
//! The session cookie: `HttpOnly; SameSite=Lax; Path=/`, `Secure` with the `__Host-`
//! prefix behind HTTPS ([`crate::services::auth::SECURE_COOKIE`]); a new session id at
//! every sign-in (the old one, if any, is ended), deleted at sign-out.
//!
//! Single sign-on: the start sets a second cookie holding the `state` sent to the provider
//! (`harrier_oidc`, `HttpOnly; SameSite=Lax`, 10 minutes); the callback needs it to equal
//! the `state` it is given, so a sign-on started in one browser cannot be finished in
//! another (login CSRF). Callbacks are written to the audit log like password sign-ins.

use super::filters;
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
use crate::services::oidc::SsoError;
use crate::state::AppState;

pub fn routes() -> Routes {
    Routes::new()
        .route("/console/sign-in", GET, Public, get(sign_in_page))
        .route("/console/sign-in", POST, Public, post(sign_in))
        .route("/console/sign-out", POST, Public, post(sign_out))
        .route("/auth/oidc/start", GET, Public, get(oidc_start))
        .route("/auth/oidc/callback", GET, Public, get(oidc_callback))
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
    /// Single sign-on: the provider's name and the start link (with `next`).
    sso: Option<(String, String)>,
}

impl SignInPage {
    fn new(state: &AppState, next: String, error: Option<String>) -> SignInPage {
        let sso = state.sso.as_ref().map(|s| {
            let query: String = form_urlencoded::Serializer::new(String::new())
                .append_pair("next", &next)
                .finish();
            (s.config.name.clone(), format!("/auth/oidc/start?{query}"))
        });
        SignInPage {
            nav: "",
            off: false,
            next,
            name: String::new(),
            error,
            sso,
        }
    }
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
    let mut page = SignInPage::new(&state, next, None);
    page.off = !state.auth.enabled(crate::now_ms()).await;
    page.into_response()
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
        let mut page = SignInPage::new(&state, next.clone(), Some(error));
        page.name = form.name.clone();
        let mut r = page.into_response();
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

/// The cookie that ties a single sign-on to the browser that started it.
const SSO_COOKIE: &str = "harrier_oidc";
/// [`SSO_COOKIE`] behind HTTPS (`Secure`, `Path=/`, no `Domain`).
const SSO_SECURE_COOKIE: &str = "__Host-harrier_oidc";

/// The `Set-Cookie` value of the single sign-on state cookie (`max_age_s` 0 deletes it).
fn sso_cookie(state: &AppState, value: &str, max_age_s: i64) -> String {
    let (name, secure) = if state.auth.secure_cookies {
        (SSO_SECURE_COOKIE, "; Secure")
    } else {
        (SSO_COOKIE, "")
    };
    format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_s}{secure}")
}

/// Where the provider sends people back: the public URL's (`--public-url`), else the
/// origin this request was sent to (its `Host`, which the request checks allowed).
fn callback_url(state: &AppState, headers: &axum::http::HeaderMap) -> String {
    let origin = match &state.config.public_url {
        Some(u) => u.trim_end_matches('/').to_string(),
        None => {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map_or_else(|| state.config.listen.to_string(), str::to_string);
            format!("http://{host}")
        }
    };
    format!("{origin}/auth/oidc/callback")
}

/// The sign-in page showing `error` with `status` (and never cached: it answers a
/// provider's one-time link).
fn sign_in_error(state: &AppState, status: StatusCode, error: String) -> Response {
    let mut r = SignInPage::new(state, "/console".into(), Some(error)).into_response();
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// `GET /auth/oidc/start?next=PATH`: off to the provider (404 without `[oidc]`).
async fn oidc_start(
    State(state): State<AppState>,
    Query(q): Query<NextQuery>,
    headers: axum::http::HeaderMap,
) -> Response {
    let Some(sso) = state.sso.clone() else {
        return super::PageError(crate::error::Error::NotFound(
            "single sign-on is not configured ([oidc] in harrier.toml)".into(),
        ))
        .into_response();
    };
    let next = safe_next(q.next.as_deref());
    let redirect = callback_url(&state, &headers);
    match sso.start(&redirect, &next, crate::now_ms()).await {
        Ok(started) => {
            let mut r = Redirect::to(&started.authorize_url).into_response();
            set_cookie(
                &mut r,
                &sso_cookie(
                    &state,
                    &started.state,
                    crate::domain::oidc::LOGIN_TTL_MS / 1000,
                ),
            );
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        Err(e) => {
            tracing::error!(error = %e, "starting single sign-on failed");
            sign_in_error(&state, StatusCode::BAD_GATEWAY, e.message(&sso.config.name))
        }
    }
}

#[derive(Deserialize)]
struct CallbackQuery {
    state: Option<String>,
    code: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// `GET /auth/oidc/callback?state=…&code=…` (or `&error=…`): the provider's answer. Signs
/// the person in and goes to where the sign-on started, or shows the sign-in page with
/// why not; either way an entry of the audit log.
async fn oidc_callback(State(state): State<AppState>, req: Request) -> Response {
    let Some(sso) = state.sso.clone() else {
        return super::PageError(crate::error::Error::NotFound(
            "single sign-on is not configured ([oidc] in harrier.toml)".into(),
        ))
        .into_response();
    };
    let client = crate::http::auth::client_addr(&req);
    let now = crate::now_ms();
    let old = cookie(req.headers(), state.auth.cookie_name()).map(str::to_string);
    let browser_state = cookie(req.headers(), SSO_SECURE_COOKIE)
        .or_else(|| cookie(req.headers(), SSO_COOKIE))
        .map(str::to_string);
    let q: CallbackQuery = Query::try_from_uri(req.uri()).map_or(
        CallbackQuery {
            state: None,
            code: None,
            error: None,
            error_description: None,
        },
        |Query(q)| q,
    );
    let provider = sso.config.name.clone();
    let outcome = async move {
        if let Some(error) = &q.error {
            // The provider's own words only for a sign-on this server started; else its
            // error code alone (a crafted link must not put text on this page).
            // (Some providers leave `state` out of an error: this browser's is ended then.)
            let started = match q.state.as_deref().or(browser_state.as_deref()) {
                Some(st) => sso.forget(st, now).await?,
                None => false,
            };
            let text = if started {
                q.error_description.as_deref().unwrap_or(error)
            } else {
                error
            };
            let why: String = text
                .chars()
                .filter(|c| {
                    if started {
                        !c.is_control()
                    } else {
                        c.is_ascii_alphanumeric() || *c == '_'
                    }
                })
                .take(200)
                .collect();
            return Err(SsoError::Refused(why));
        }
        let st = q.state.as_deref().ok_or(SsoError::State)?;
        // The state must be the one this browser was given at the start.
        let same_browser = browser_state.as_deref().is_some_and(|b| {
            crate::domain::auth::secret_matches(b, &crate::domain::auth::secret_hash(st))
        });
        if !same_browser {
            sso.forget(st, now).await?;
            return Err(SsoError::State);
        }
        let code = q.code.as_deref().ok_or(SsoError::State)?;
        sso.finish(st, code, now).await
    }
    .await;
    let (mut r, who, status) = match outcome {
        Ok(done) => match state.auth.start_session(&done.user, done.role, now).await {
            Ok(SignIn::Ok { session, .. }) => {
                if let Some(old) = old {
                    let _ = state.auth.sign_out(&old).await;
                }
                tracing::info!(user = %done.user.name, role = %done.role, "signed in by single sign-on");
                let mut r = Redirect::to(&done.next).into_response();
                set_cookie(
                    &mut r,
                    &session_cookie(&state, &session, SESSION_ABSOLUTE_MS / 1000),
                );
                let status = r.status();
                (r, done.user.name, status)
            }
            Ok(_) | Err(_) => {
                tracing::error!("starting a session after single sign-on failed");
                let status = StatusCode::INTERNAL_SERVER_ERROR;
                (
                    sign_in_error(
                        &state,
                        status,
                        "Sign-in failed: the server log has the details.".into(),
                    ),
                    done.user.name,
                    status,
                )
            }
        },
        Err(e) => {
            let status = match &e {
                SsoError::Provider(_) => StatusCode::BAD_GATEWAY,
                SsoError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
                SsoError::NoRole { .. } | SsoError::NameTaken { .. } => StatusCode::FORBIDDEN,
                _ => StatusCode::UNAUTHORIZED,
            };
            if status.is_server_error() {
                tracing::error!(error = %e, "single sign-on failed");
            } else {
                tracing::warn!(error = %e, "single sign-on refused");
            }
            let who = e.who().unwrap_or("oidc").to_string();
            (
                sign_in_error(&state, status, e.message(&provider)),
                who,
                status,
            )
        }
    };
    // The state cookie has served (or failed) its one sign-on.
    set_cookie(&mut r, &sso_cookie(&state, "", 0));
    let store = state.store.clone();
    let client = client.map(|a| a.to_string());
    tokio::spawn(async move {
        if let Err(e) = store
            .insert_audit(
                now,
                &format!("sign-in:{who}"),
                "GET",
                "/auth/oidc/callback",
                i64::from(status.as_u16()),
                client.as_deref(),
            )
            .await
        {
            tracing::warn!(error = %e, "writing the audit log failed");
        }
    });
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
    /// `password` or `single sign-on`.
    sign_in: &'static str,
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
            sign_in: if u.oidc_subject.is_some() {
                "single sign-on"
            } else {
                "password"
            },
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
