//! Which load-test runs a route's chart shades: only runs that hit the route's service.
//!
//! A run says what it hit in one of two ways, checked in this order:
//! 1. a `service` tag set at import (`--tag service=orders`): it hit that service;
//! 2. the address it loaded, when its tool reports one: the load generator's target URL
//!    (the run's source), ab's `host`/`port`, wrk's `url`. It hit the route's service when
//!    that host:port is the route's target's (`localhost`, `127.0.0.1` and `[::1]` count as
//!    one host; a URL without a port has its scheme's).
//!
//! A run that says neither (a JTL, a k6 summary) is [`Hit::Unknown`]: shaded, and listed
//! as "target unknown", since harrier cannot tell.

use serde::Serialize;

/// Whether a run hit a route's service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hit {
    /// Its `service` tag names the route's service.
    ServiceTag,
    /// The address it loaded is the route's target's.
    Target,
    /// It says neither what service nor what address it hit.
    Unknown,
    /// It names another service or another address.
    Other,
}

/// What a stored run says about what it hit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunAim<'a> {
    /// Its `service` tag.
    pub service_tag: Option<&'a str>,
    /// Its source (a file name, or the load generator's target URL).
    pub source: Option<&'a str>,
    /// The figures its tool reported beyond the statistics (JSON).
    pub reported: &'a str,
}

impl RunAim<'_> {
    /// The host:port the run loaded, when it says.
    pub fn address(&self) -> Option<String> {
        if let Some(a) = self.source.and_then(url_address) {
            return Some(a);
        }
        let v: serde_json::Value = serde_json::from_str(self.reported).ok()?;
        if let Some(a) = v.get("url").and_then(|u| u.as_str()).and_then(url_address) {
            return Some(a);
        }
        let host = v.get("host")?.as_str()?;
        let port = v.get("port").and_then(|p| p.as_u64()).unwrap_or(80);
        Some(host_port(host, port))
    }

    /// Whether the run hit the service `service`, scraped at `target_url`.
    pub fn hits(&self, service: &str, target_url: &str) -> Hit {
        if let Some(tag) = self.service_tag {
            return if tag == service {
                Hit::ServiceTag
            } else {
                Hit::Other
            };
        }
        match (self.address(), url_address(target_url)) {
            (Some(run), Some(target)) if run == target => Hit::Target,
            (Some(_), Some(_)) => Hit::Other,
            _ => Hit::Unknown,
        }
    }
}

/// `host:port` of an http(s) URL (the scheme's port when none is given); `None` for
/// anything else (a file name).
pub fn url_address(url: &str) -> Option<String> {
    let u = url::Url::parse(url.trim()).ok()?;
    if !matches!(u.scheme(), "http" | "https") {
        return None;
    }
    let host = match u.host()? {
        url::Host::Domain(d) => d.to_ascii_lowercase(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => format!("[{ip}]"),
    };
    Some(host_port(&host, u64::from(u.port_or_known_default()?)))
}

/// `host:port`, with the loopback names made one.
fn host_port(host: &str, port: u64) -> String {
    let host = host.trim().to_ascii_lowercase();
    let host = match host.as_str() {
        "localhost" | "[::1]" | "::1" => "127.0.0.1",
        h => h,
    };
    format!("{host}:{port}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aim<'a>(tag: Option<&'a str>, source: Option<&'a str>, reported: &'a str) -> RunAim<'a> {
        RunAim {
            service_tag: tag,
            source,
            reported,
        }
    }

    #[test]
    fn a_service_tag_decides_first() {
        let target = "http://127.0.0.1:9101/metrics";
        let load = Some("http://127.0.0.1:9101/checkout");
        assert_eq!(
            aim(Some("orders"), None, "{}").hits("orders", target),
            Hit::ServiceTag
        );
        // The tag wins over an address that would match.
        assert_eq!(
            aim(Some("billing"), load, "{}").hits("orders", target),
            Hit::Other
        );
    }

    #[test]
    fn the_address_the_run_loaded_is_compared_with_the_targets() {
        let target = "http://localhost:9101/actuator/prometheus";
        // The load generator's target URL, in its source.
        let load = aim(None, Some("http://127.0.0.1:9101/checkout"), "{}");
        assert_eq!(load.hits("orders", target), Hit::Target);
        assert_eq!(
            load.hits("orders", "http://127.0.0.1:9102/metrics"),
            Hit::Other
        );
        // ab reports host and port; wrk a URL.
        let ab = r#"{"host":"127.0.0.1","port":9101,"document_path":"/slow"}"#;
        assert_eq!(
            aim(None, Some("ab-loop.out"), ab).hits("orders", target),
            Hit::Target
        );
        let wrk = r#"{"url":"http://[::1]:9101/flaky"}"#;
        assert_eq!(
            aim(None, Some("wrk.txt"), wrk).hits("orders", target),
            Hit::Target
        );
        let elsewhere = r#"{"host":"127.0.0.1","port":8099}"#;
        assert_eq!(
            aim(None, None, elsewhere).hits("orders", target),
            Hit::Other
        );
        // A default port is the scheme's.
        assert_eq!(
            aim(None, Some("http://127.0.0.1/x"), "{}").hits("o", "http://localhost:80/m"),
            Hit::Target
        );
        assert_eq!(
            aim(None, Some("https://127.0.0.1/x"), "{}").hits("o", "http://127.0.0.1/m"),
            Hit::Other
        );
    }

    #[test]
    fn a_run_that_says_nothing_is_unknown() {
        let target = "http://127.0.0.1:9101/metrics";
        assert_eq!(
            aim(None, Some("checkout-ramp.jtl"), "{}").hits("o", target),
            Hit::Unknown
        );
        assert_eq!(aim(None, None, "not json").hits("o", target), Hit::Unknown);
        assert_eq!(aim(None, None, "{}").hits("o", "jolokia"), Hit::Unknown);
    }
}
