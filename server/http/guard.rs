//! The one place that decides whether a request is let in, before any handler runs:
//!
//! 1. **Host** (against DNS rebinding): a request whose `Host` is not one of the server's
//!    own names ([`SitePolicy::host_allowed`]) nor the literal address its connection was
//!    made to gets `421 Misdirected Request`. A request
//!    without `Host` (HTTP/1.0 tools) is no browser's and passes.
//! 2. **Websocket Origin** (against cross-site websocket hijacking): an upgrade whose
//!    `Origin` is not the server's own ([`SitePolicy::origin_allowed`]) gets `403`.
//!    Browsers always send `Origin` on a websocket; an upgrade without it is a tool's.
//! 3. **Cross-site changes** (CSRF): every POST, PUT, PATCH and DELETE goes through
//!    tower-http's [`CsrfLayer`] — allowed when `Sec-Fetch-Site` is `same-origin` or
//!    `none`, when `Origin` is the public URL's or names the very host the request was
//!    sent to, and when neither header is present (curl, k6's and JMeter's InfluxDB
//!    outputs, `harrier import --server`: no browser sends a cross-site request without
//!    them); refused with `403` otherwise.
//!
//! A sign-in check belongs here too, after these (it will let a bearer token through step
//! 3 the same way a missing `Origin` is).
//!
//! Every response carries the security headers of [`protect`]: a Content-Security-Policy
//! allowing only the server's own scripts, styles and connections (no inline script, no
//! framing), `X-Content-Type-Options: nosniff` and `Referrer-Policy: same-origin`.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tower_http::csrf::{CsrfLayer, ProtectionError};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::domain::access::SitePolicy;

/// The Content-Security-Policy of every page: scripts, styles, images, fonts and
/// connections (the live websocket included: `'self'` covers `ws:` to the same host) from
/// this server only; no inline script, no plugins, never inside a frame.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `router` behind the request checks and security headers described above, for a server
/// whose hosts and origins `site` names.
pub fn protect<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    site: &SitePolicy,
) -> Router<S> {
    let mut csrf = CsrfLayer::new();
    if let Some(origin) = site.public_origin() {
        match csrf.clone().add_trusted_origin(origin) {
            Ok(layer) => csrf = layer,
            // SitePolicy checked the URL already; an origin tower-http still refuses is
            // only left out of the trusted ones (same-origin requests pass regardless).
            Err(e) => tracing::warn!(error = %e, "public URL not added as a trusted origin"),
        }
    }
    let csrf = csrf.with_rejection_response(|_: ProtectionError| {
        refusal(
            StatusCode::FORBIDDEN,
            "cross-site request refused: a page of another origin may not change anything \
             here (send it from the console, or from a tool without an Origin header)",
        )
    });
    let site = Arc::new(site.clone());
    router
        .layer(csrf)
        .layer(middleware::from_fn_with_state(site, check_request))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ))
}

/// The address a request's connection was accepted on (set by the accept loop).
#[derive(Debug, Clone, Copy)]
pub struct LocalAddr(pub std::net::SocketAddr);

/// Steps 1 and 2 of the module's list.
async fn check_request(State(site): State<Arc<SitePolicy>>, req: Request, next: Next) -> Response {
    let host = request_host(&req);
    let local = req.extensions().get::<LocalAddr>().map(|l| l.0.ip());
    if let Some(h) = host
        && !site.host_allowed(h)
        && !names_address(h, local)
    {
        tracing::warn!(host = %h.escape_debug(), "request for another host refused");
        return refusal(
            StatusCode::MISDIRECTED_REQUEST,
            "this server does not answer to that Host name: it accepts localhost, \
             127.0.0.0/8, [::1], the address it was reached at and the host of \
             --public-url (set --public-url when users reach harrier through a name)",
        );
    }
    if is_websocket_upgrade(&req)
        && let Some(origin) = req.headers().get(header::ORIGIN)
    {
        let own = origin.to_str().is_ok_and(|o| site.origin_allowed(o, host));
        if !own {
            tracing::warn!("websocket upgrade from another origin refused");
            return refusal(
                StatusCode::FORBIDDEN,
                "websocket refused: the page that opened it is not served by this server",
            );
        }
    }
    next.run(req).await
}

/// Whether `host` (a `Host` header) is the very address the connection was made to,
/// written as an address literal (`192.0.2.2:7070`, `[2001:db8::1]:7070`): a server on
/// `0.0.0.0` reached by its address. A DNS-rebinding page names a host, never the literal
/// address, so this opens nothing to it.
fn names_address(host: &str, local: Option<std::net::IpAddr>) -> bool {
    let Some(local) = local else { return false };
    let name = host
        .strip_prefix('[')
        .and_then(|r| r.split_once(']').map(|(a, _)| a))
        .unwrap_or_else(|| host.rsplit_once(':').map_or(host, |(a, _)| a));
    let local = match local {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(local, std::net::IpAddr::V4),
        v4 => v4,
    };
    name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip == local)
}

/// The host the request was sent to: the absolute-form target's authority, else `Host`.
fn request_host(req: &Request) -> Option<&str> {
    if let Some(a) = req.uri().authority() {
        return Some(a.as_str());
    }
    req.headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{fffd}"))
}

fn is_websocket_upgrade(req: &Request) -> bool {
    let has = |name: HeaderName, token: &str| {
        req.headers().get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    has(header::UPGRADE, "websocket") || has(header::CONNECTION, "upgrade")
}

/// A refusal: JSON `{"error": message}` with `status`.
fn refusal(status: StatusCode, message: &str) -> Response<Body> {
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

#[cfg(test)]
mod tests {
    use super::names_address;

    #[test]
    fn the_literal_address_reached_is_a_host_of_its_own() {
        let local = Some("192.0.2.2".parse().unwrap());
        assert!(names_address("192.0.2.2:7070", local));
        assert!(names_address("192.0.2.2", local));
        assert!(!names_address("192.0.2.3:7070", local));
        assert!(
            !names_address("myhost.lan:7070", local),
            "names need --public-url"
        );
        assert!(!names_address("192.0.2.2:7070", None));
        let v6 = Some("2001:db8::1".parse().unwrap());
        assert!(names_address("[2001:db8::1]:7070", v6));
        let mapped = Some("::ffff:192.0.2.2".parse().unwrap());
        assert!(names_address("192.0.2.2:7070", mapped));
    }
}
