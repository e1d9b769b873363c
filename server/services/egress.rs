//! The HTTP clients of outbound requests (scrapes, webhooks, Slack, Alertmanager) under
//! the egress policy ([`crate::domain::egress`]).
//!
//! [`Egress`] holds the policy in force (harrier's own listen address is added when the
//! server binds) and how host names are resolved. [`Outbound`] is a reqwest client built
//! on it, enforcing the policy three ways:
//!
//! - [`Outbound::check`] before each request: the URL's host, address literals in any
//!   spelling, and for a host name on harrier's own port its addresses;
//! - a resolver hook (`reqwest::dns::Resolve`): the addresses a host name resolves to
//!   are filtered when the connection is made, so a name that resolves (or rebinds) to a
//!   refused address is never connected to;
//! - redirects: not followed for notifications ([`Outbound::notifications`]) and single
//!   sign-on ([`Outbound::identity`]); for scrapes ([`Outbound::scrapes`]) each hop's URL
//!   is checked like the first (at most 5 hops).

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect;

use crate::domain::egress::{Destination, EgressPolicy, Refusal};

/// Resolves a host name to its addresses (the system resolver unless replaced).
pub type Lookup = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>>
        + Send
        + Sync,
>;

/// Most redirects a scrape follows.
const MAX_REDIRECTS: usize = 5;

/// The egress policy in force and the name lookup; cheap to clone (shared).
#[derive(Clone)]
pub struct Egress {
    policy: Arc<RwLock<EgressPolicy>>,
    lookup: Lookup,
}

impl Egress {
    /// `policy` with the system resolver.
    pub fn new(policy: EgressPolicy) -> Egress {
        Egress::with_lookup(
            policy,
            Arc::new(|host: String| {
                Box::pin(async move {
                    Ok(tokio::net::lookup_host((host.as_str(), 0))
                        .await?
                        .map(|a| a.ip())
                        .collect())
                })
            }),
        )
    }

    /// `policy`, resolving host names with `lookup` instead of the system's resolver.
    pub fn with_lookup(policy: EgressPolicy, lookup: Lookup) -> Egress {
        Egress {
            policy: Arc::new(RwLock::new(policy)),
            lookup,
        }
    }

    /// Refuses `addr` from now on: where this server listens.
    pub fn add_own_addr(&self, addr: SocketAddr) {
        let mut p = self.policy.write().unwrap_or_else(|e| e.into_inner());
        *p = p.clone().with_own_addr(addr);
    }

    /// The policy in force.
    pub fn policy(&self) -> EgressPolicy {
        self.policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The addresses `host` resolves to that the policy allows; `Err` when there are
    /// none (the refusal of the first one, or the lookup's error).
    async fn allowed_addrs(&self, host: &str, port: Option<u16>) -> Result<Vec<IpAddr>, BoxError> {
        let addrs = (self.lookup)(host.to_string()).await?;
        let policy = self.policy();
        let mut allowed = Vec::new();
        let mut refused = None;
        for ip in addrs {
            match policy.check_resolved(host, ip, port) {
                Ok(()) => allowed.push(ip),
                Err(r) => {
                    refused.get_or_insert(r);
                }
            }
        }
        match (allowed.is_empty(), refused) {
            (false, _) => Ok(allowed),
            (true, Some(r)) => Err(Box::new(Refusal {
                host: format!("{host} ({})", r.host),
                reason: r.reason,
            })),
            (true, None) => Err(format!("{host} has no address").into()),
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The resolver hook: only allowed addresses reach the connector.
struct PolicyResolver(Egress);

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let egress = self.0.clone();
        let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            let ips = egress.allowed_addrs(&host, None).await?;
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// An HTTP client under the egress policy.
#[derive(Clone)]
pub struct Outbound {
    client: reqwest::Client,
    egress: Egress,
}

impl Outbound {
    /// The scrape client: harrier's user agent, 5 s to connect, redirects re-checked.
    pub fn scrapes(egress: &Egress) -> Outbound {
        let policy = egress.clone();
        let redirects = redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_REDIRECTS {
                return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
            }
            let p = policy.policy();
            match p.check_url(attempt.url().as_str()) {
                // A host name on harrier's own port could be harrier itself; its addresses
                // cannot be looked up here, so such a redirect is not followed.
                Ok(Destination::Name { port, .. }) if p.is_own_port(port) => {
                    attempt.error("a redirect to a host name on harrier's own port is not followed")
                }
                Ok(_) => attempt.follow(),
                Err(refusal) => attempt.error(refusal),
            }
        });
        let builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .pool_max_idle_per_host(2)
            .redirect(redirects);
        Outbound::build(egress, builder)
    }

    /// The notification client (webhooks, Slack, Alertmanager): harrier's user agent, no
    /// redirects (a 3xx answer is a failed delivery), no default timeout (each channel
    /// sets its own).
    pub fn notifications(egress: &Egress) -> Outbound {
        Outbound::build(
            egress,
            reqwest::Client::builder().redirect(redirect::Policy::none()),
        )
    }

    /// The single sign-on client (OpenID Connect discovery, keys and the token endpoint):
    /// no redirects, 5 s to connect, 10 s per request.
    pub fn identity(egress: &Egress) -> Outbound {
        Outbound::build(
            egress,
            reqwest::Client::builder()
                .redirect(redirect::Policy::none())
                .connect_timeout(Duration::from_secs(5))
                .timeout(Duration::from_secs(10)),
        )
    }

    /// Sends `request` (its URL checked first, [`check`](Self::check)) and reads the
    /// answer whole, at most [`MAX_ANSWER_BYTES`]: the shape of the `openidconnect` crate's
    /// HTTP client. A `3xx` is returned as it is, never followed.
    pub async fn send_whole(
        &self,
        request: axum::http::Request<Vec<u8>>,
    ) -> Result<axum::http::Response<Vec<u8>>, OutboundError> {
        let url = request.uri().to_string();
        self.check(&url).await.map_err(OutboundError)?;
        let (parts, body) = request.into_parts();
        let mut answer = self
            .client
            .request(parts.method, &url)
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .map_err(|e| OutboundError(e.without_url().to_string()))?;
        let mut whole = Vec::new();
        while let Some(chunk) = answer
            .chunk()
            .await
            .map_err(|e| OutboundError(e.without_url().to_string()))?
        {
            if whole.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(OutboundError(format!(
                    "the answer is larger than {MAX_ANSWER_BYTES} bytes"
                )));
            }
            whole.extend_from_slice(&chunk);
        }
        let mut response = axum::http::Response::new(whole);
        *response.status_mut() = answer.status();
        *response.headers_mut() = answer.headers().clone();
        Ok(response)
    }

    fn build(egress: &Egress, builder: reqwest::ClientBuilder) -> Outbound {
        let client = builder
            .user_agent(concat!("harrier/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(PolicyResolver(egress.clone())))
            .build()
            .unwrap_or_else(|e| {
                // Only a broken TLS backend fails here; a client without the resolver
                // hook would bypass the policy, so every request is refused instead.
                tracing::error!(error = %e, "building the outbound HTTP client failed");
                reqwest::Client::builder()
                    .dns_resolver(Arc::new(RefuseAll))
                    .build()
                    .unwrap_or_default()
            });
        Outbound {
            client,
            egress: egress.clone(),
        }
    }

    /// The reqwest client (send only URLs [`check`](Self::check) passed).
    pub fn http(&self) -> &reqwest::Client {
        &self.client
    }

    /// Whether `url` may be requested now; `Err` says why not (the URL itself is not in
    /// the message: it may hold credentials).
    pub async fn check(&self, url: &str) -> Result<(), String> {
        let policy = self.egress.policy();
        match policy.check_url(url) {
            Ok(Destination::Addr(_)) => Ok(()),
            Ok(Destination::Name { host, port }) if policy.is_own_port(port) => self
                .egress
                .allowed_addrs(&host, Some(port))
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Ok(Destination::Name { .. }) => Ok(()),
            Err(r) => Err(r.to_string()),
        }
    }
}

/// [`Outbound::identity`] as the `openidconnect` crate's HTTP client.
#[derive(Clone)]
pub struct IdentityClient(pub Outbound);

impl<'c> openidconnect::AsyncHttpClient<'c> for IdentityClient {
    type Error = OutboundError;
    type Future = Pin<
        Box<dyn Future<Output = Result<openidconnect::HttpResponse, OutboundError>> + Send + 'c>,
    >;

    fn call(&'c self, request: openidconnect::HttpRequest) -> Self::Future {
        Box::pin(self.0.send_whole(request))
    }
}

/// Largest answer [`Outbound::send_whole`] reads, bytes.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// Why [`Outbound::send_whole`] got no answer (refused by the egress policy, no
/// connection, too large); the URL itself is not in the message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OutboundError(pub String);

/// The resolver of a client that could not be built with the policy's.
struct RefuseAll;

impl Resolve for RefuseAll {
    fn resolve(&self, _: Name) -> Resolving {
        Box::pin(async { Err("no outbound client under the egress policy".into()) })
    }
}
