//! Who is asking, and whether they may: the two middlewares of sign-in.
//!
//! - [`resolve`] (over every route, inside the Host and cross-site checks of
//!   [`crate::http::guard`]): reads the request's credentials into a [`Principal`] — put
//!   in the request's extensions for handlers and in a task-local for the page templates
//!   ([`signed_in`]); [`audit`], outside every check, writes each state-changing request
//!   to the audit log.
//! - [`authorize`] (in front of each handler, put there by the route table
//!   [`crate::http::table`]): lets the request through when the principal may use the
//!   route's [`Permission`]; else a page request without sign-in goes to the sign-in page,
//!   an API request gets `401` (with `WWW-Authenticate`), and a signed-in user or token
//!   without the permission gets `403` naming what is needed.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::domain::auth::{Permission, Principal};
use crate::services::auth::CredentialError;
use crate::state::AppState;

tokio::task_local! {
    static WHO: Principal;
}

/// The signed-in person of the page being rendered: name and role (`None` for anyone
/// else, and outside a request).
pub fn signed_in() -> Option<(String, &'static str)> {
    WHO.try_with(|p| match p {
        Principal::User { name, role, .. } => Some((name.clone(), role.as_str())),
        _ => None,
    })
    .ok()
    .flatten()
}

/// Whether the page being rendered is seen through a share link (its navigation is left
/// out: the link reaches nothing else).
pub fn via_share_link() -> bool {
    WHO.try_with(|p| matches!(p, Principal::Share { .. }))
        .unwrap_or(false)
}

/// Whether the principal of the page being rendered may use routes requiring
/// `permission` (pages hide buttons it may not use).
pub fn may(permission: Permission) -> bool {
    WHO.try_with(|p| p.may(permission)).unwrap_or(true)
}

/// The client's address, when the connection's is known.
pub fn client_addr(req: &Request) -> Option<std::net::IpAddr> {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// Who made a change, filled in by [`resolve`] for [`audit`] (which runs outside the Host
/// and cross-site checks, so it also sees the changes those refuse); the sign-in handler
/// names the user who tried ([`AuditWho::set`]).
#[derive(Clone, Default)]
pub struct AuditWho(Arc<Mutex<Option<String>>>);

impl AuditWho {
    /// Records `who` as the author of the request being audited.
    pub fn set(&self, who: String) {
        if let Ok(mut w) = self.0.lock() {
            *w = Some(who);
        }
    }
}

/// What a handler adds to its request's audit entry (put in the response's extensions):
/// written after the path, e.g. the route an operation ran on and the agent's answer.
#[derive(Clone, Debug)]
pub struct AuditDetail(pub String);

/// The longest detail written after the path, bytes.
const AUDIT_DETAIL_MAX: usize = 500;

/// The longest path written to the audit log, bytes (longer ones are cut, marked `…`).
const AUDIT_PATH_MAX: usize = 300;

/// Writes every state-changing request (POST, PUT, PATCH, DELETE) to the audit log with
/// its answer's status — the ones refused before sign-in (wrong `Host`, cross-site) as
/// `unchecked`. Written beside the answer, never delaying or failing it.
pub async fn audit(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let now = crate::now_ms();
    let method = req.method().to_string();
    let mut path = req.uri().path().to_string();
    if path.len() > AUDIT_PATH_MAX {
        let mut cut = AUDIT_PATH_MAX;
        while !path.is_char_boundary(cut) {
            cut -= 1;
        }
        path.truncate(cut);
        path.push('…');
    }
    let client = client_addr(&req).map(|a| a.to_string());
    let who = AuditWho::default();
    req.extensions_mut().insert(who.clone());
    let response = next.run(req).await;
    let status = i64::from(response.status().as_u16());
    if let Some(AuditDetail(detail)) = response.extensions().get::<AuditDetail>() {
        let mut cut = detail.len().min(AUDIT_DETAIL_MAX);
        while !detail.is_char_boundary(cut) {
            cut -= 1;
        }
        path = format!("{path} — {}", &detail[..cut]);
    }
    let who = who
        .0
        .lock()
        .ok()
        .and_then(|w| w.clone())
        .unwrap_or_else(|| "unchecked".to_string());
    // A change nobody signed in tried on a path that does not exist changes nothing and
    // is not logged (else anyone could flood the log).
    let unknown_path = matches!(status, 404 | 405);
    if unknown_path && (who == "anonymous" || who == "unchecked") {
        return response;
    }
    let store = state.store.clone();
    tokio::spawn(async move {
        if let Err(e) = store
            .insert_audit(now, &who, &method, &path, status, client.as_deref())
            .await
        {
            tracing::warn!(error = %e, "writing the audit log failed");
        }
    });
    response
}

/// Resolves the principal of every request (see the module's list).
pub async fn resolve(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let client = client_addr(&req);
    let principal = match state
        .auth
        .resolve(req.headers(), client, crate::now_ms())
        .await
    {
        Ok(p) => p,
        Err(e) => {
            req.extensions_mut().insert(e);
            Principal::Anonymous
        }
    };
    if let Some(slot) = req.extensions().get::<AuditWho>()
        && let Ok(mut w) = slot.0.lock()
    {
        *w = Some(principal.who());
    }
    req.extensions_mut().insert(principal.clone());
    WHO.scope(principal, next.run(req)).await
}

/// Lets the request through when its principal may use a route requiring `permission`.
pub async fn authorize(State(permission): State<Permission>, req: Request, next: Next) -> Response {
    let principal = req
        .extensions()
        .get::<Principal>()
        .cloned()
        .unwrap_or(Principal::Anonymous);
    if principal.may(permission)
        || (permission == Permission::Read
            && matches!(*req.method(), Method::GET | Method::HEAD)
            && principal.share_reaches(req.uri().path()))
    {
        return next.run(req).await;
    }
    let credential = req.extensions().get::<CredentialError>().copied();
    let mut response = refuse(&principal, permission, credential, &req);
    if !drain_body(req.into_body()).await {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Reads and drops a refused request's body (at most [`DRAIN_BYTES`], for at most
/// [`DRAIN_TIME`]) before the refusal is sent; true when the whole body was read.
///
/// A client uploading a file without a token is still sending when the refusal is ready;
/// a server that answers and closes with the body unread makes the client's kernel see a
/// reset, and the client reports a broken pipe instead of the 401 and its message (the
/// "lingering close" problem web servers such as nginx and Apache solve the same way).
/// A bigger or slower body is not waited for: the answer goes out with
/// `Connection: close`.
async fn drain_body(body: axum::body::Body) -> bool {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut read = 0usize;
    let drained = tokio::time::timeout(DRAIN_TIME, async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { return false };
            if let Some(data) = frame.data_ref() {
                read += data.len();
                if read > DRAIN_BYTES {
                    return false;
                }
            }
        }
        true
    })
    .await;
    drained.unwrap_or(false)
}

/// How much of a refused request's body is read before the refusal goes out (see
/// [`drain_body`]).
const DRAIN_BYTES: usize = 8 << 20;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(2);

fn refuse(
    principal: &Principal,
    permission: Permission,
    credential: Option<CredentialError>,
    req: &Request,
) -> Response {
    let page = req.uri().path().starts_with("/console");
    if matches!(principal, Principal::Anonymous | Principal::Share { .. }) {
        if let Some(e) = credential {
            return unauthorized(e.message());
        }
        if page && matches!(*req.method(), Method::GET | Method::HEAD) {
            let next = req
                .uri()
                .path_and_query()
                .map_or("/console", |p| p.as_str());
            let target: String = form_urlencoded::Serializer::new(String::new())
                .append_pair("next", next)
                .finish();
            return Redirect::to(&format!("/console/sign-in?{target}")).into_response();
        }
        return unauthorized(
            "sign in first: this needs a signed-in user (the console's sign-in page) or a \
             token (Authorization: Bearer hrt_…; create one with `harrier token create`)",
        );
    }
    let needs = match permission {
        Permission::Public | Permission::Read => "read access",
        Permission::Ingest => "the editor role or an ingest token",
        Permission::Operate => "the operator role or an operate token",
        Permission::Write => "the editor role or a write token",
        Permission::Admin => "the admin role",
    };
    let who = match principal {
        Principal::User { name, role, .. } => format!("{name} ({role})"),
        Principal::Token { name, scope, .. } => format!("token {name:?} (scope {scope})"),
        other => other.who(),
    };
    (
        StatusCode::FORBIDDEN,
        Json(serde_json::json!({
            "error": format!("{who} may not {} {}: this needs {needs}", req.method(), req.uri().path()),
        })),
    )
        .into_response()
}

fn unauthorized(message: &str) -> Response {
    let mut r = (
        StatusCode::UNAUTHORIZED,
        Json(serde_json::json!({ "error": message })),
    )
        .into_response();
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"harrier\""),
    );
    r
}

/// Runs `f` (a page render) as `principal`: what the templates see through
/// [`signed_in`], [`via_share_link`] and [`may`].
pub async fn as_principal<F: std::future::Future>(principal: Principal, f: F) -> F::Output {
    WHO.scope(principal, f).await
}
