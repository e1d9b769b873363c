//! Route operations for operators: start, stop, suspend or resume a Camel route, or reset
//! its statistics, through the Jolokia agent the route is scraped from — what hawtio's
//! Camel plugin offers, here behind the operator role and in the audit log.
//!
//! An operation is two requests to the agent: a search for the route's exact ObjectName
//! (Camel quotes a name only when it needs quoting, so it is read, never rebuilt), then one
//! bulk request of the `exec` and a read of the route's `State`
//! ([`crate::sources::scrape::jolokia`]). Offered only for routes of Jolokia targets:
//! Prometheus text and OTLP carry no way back to the route.

use std::time::Duration;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::services::egress::Outbound;
use crate::sources::scrape::jolokia::{self, RouteOperation};
use crate::store::Store;

/// How long the agent has for each of the two requests.
const AGENT_TIMEOUT: Duration = Duration::from_secs(10);

/// What an operation did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Operated {
    pub route_id: i64,
    pub route: String,
    /// The route's Camel context, when it has one.
    pub camel_context: Option<String>,
    pub operation: RouteOperation,
    /// The route's state as the agent reported it right after (`Started`, `Stopped`,
    /// `Suspended`); `None` when it did not say.
    pub state: Option<String>,
    /// The ObjectName the operation ran on.
    pub mbean: String,
}

impl Operated {
    /// One line for the audit log: the route and the agent's answer.
    pub fn audit_text(&self) -> String {
        format!(
            "{} route {}{}: agent says {}",
            self.operation.as_str(),
            self.route,
            self.camel_context
                .as_deref()
                .map(|c| format!(" (Camel context {c})"))
                .unwrap_or_default(),
            self.state.as_deref().unwrap_or("no state")
        )
    }
}

/// Whether route operations are offered for a route of this source: only what was read
/// through Jolokia.
pub fn offered(source: &str) -> bool {
    source == "jolokia"
}

/// Runs `operation` on route `route_id`. Errors: 404 no such route; 409 a route whose
/// target is not a Jolokia agent (or no longer exists); 502 with the agent's own message
/// when it cannot be reached or refuses.
pub async fn operate(
    store: &Store,
    client: &Outbound,
    route_id: i64,
    operation: RouteOperation,
) -> Result<Operated> {
    let info = store
        .route_infos(None, Some(route_id))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| Error::NotFound(format!("route {route_id}")))?;
    let target = store
        .get_target(info.target_id)
        .await?
        .filter(|t| t.kind == "jolokia");
    let Some(target) = target.filter(|_| offered(&info.source)) else {
        return Err(Error::Conflict {
            field: None,
            message: format!(
                "route {} is read from {} ({}): route operations need a Jolokia target, \
                 which can reach the route's MBean",
                info.route, info.source, info.target_name
            ),
        });
    };
    let labels: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&info.route_labels).unwrap_or_default();
    let context = labels.get("camel_context").cloned();
    let url = target.url.expose();
    client.check(url).await.map_err(Error::Upstream)?;
    let search = ask(client, url, &jolokia::route_search_body()).await?;
    let mbean = jolokia::find_route_mbean(&search, context.as_deref(), &info.route)
        .map_err(Error::Upstream)?;
    let answer = ask(client, url, &jolokia::operation_body(&mbean, operation)).await?;
    let state = jolokia::operation_answer(&answer)
        .map_err(|e| Error::Upstream(format!("the agent refused {}: {e}", operation.as_str())))?;
    Ok(Operated {
        route_id,
        route: info.route,
        camel_context: context,
        operation,
        state,
        mbean,
    })
}

/// One POST of `body` to the agent; its JSON answer.
async fn ask(client: &Outbound, url: &str, body: &Value) -> Result<Value> {
    let reply = client
        .http()
        .post(url)
        .json(body)
        .timeout(AGENT_TIMEOUT)
        .send()
        .await
        .map_err(|e| {
            Error::Upstream(format!(
                "the Jolokia agent did not answer: {}",
                e.without_url()
            ))
        })?;
    let status = reply.status();
    if !status.is_success() {
        return Err(Error::Upstream(format!(
            "the Jolokia agent answered HTTP {status}"
        )));
    }
    let bytes = reply
        .bytes()
        .await
        .map_err(|e| Error::Upstream(format!("reading the agent's answer: {}", e.without_url())))?;
    if bytes.len() > crate::services::scrape::MAX_BODY_BYTES {
        return Err(Error::Upstream("the agent's answer is too large".into()));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::Upstream(format!("the agent's answer is not JSON: {e}")))
}
