//! Who may talk to harrier from a browser: which `Host` names the server answers to, which
//! `Origin`s are its own, and whether a listen address may be served without sign-in.
//!
//! Owns [`SitePolicy`] (the Host allowlist and the server's own origins, against DNS
//! rebinding and cross-site requests) and [`exposure_check`] (the start-up refusal to
//! serve the network unprotected). The HTTP layer applies them to every request
//! (`http::guard`). Pure: `core::net` addresses only, no lookups.

use core::net::{IpAddr, SocketAddr};

/// The names and origins the server accepts as its own.
///
/// Always accepted as a Host: `localhost` (and `*.localhost`), every address of
/// 127.0.0.0/8 and `[::1]`, with any port. Added: the host of the public URL and, when the
/// server listens on one specific non-loopback address, that address.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SitePolicy {
    /// Extra host names or address literals (lowercase, IPv6 without brackets).
    extra_hosts: Vec<String>,
    /// The public URL's origin (`https://harrier.example.com`), if one is set.
    public_origin: Option<String>,
}

/// A public URL that cannot name an origin.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("public_url {url:?}: {reason}")]
pub struct PublicUrlError {
    pub url: String,
    pub reason: &'static str,
}

impl SitePolicy {
    /// The policy of a server listening on `listen`, reached as `public_url` (an
    /// `http://` or `https://` URL, path ignored) when it is given.
    pub fn new(listen: SocketAddr, public_url: Option<&str>) -> Result<SitePolicy, PublicUrlError> {
        let mut policy = SitePolicy::default();
        let ip = listen.ip();
        if !ip.is_unspecified() && !ip.is_loopback() {
            policy.extra_hosts.push(ip.to_string());
        }
        if let Some(text) = public_url {
            let err = |reason| PublicUrlError {
                url: text.to_string(),
                reason,
            };
            let url = url::Url::parse(text).map_err(|_| err("not a URL"))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(err("must start with http:// or https://"));
            }
            let host = match url.host() {
                Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
                Some(url::Host::Ipv4(a)) => a.to_string(),
                Some(url::Host::Ipv6(a)) => a.to_string(),
                None => return Err(err("has no host")),
            };
            policy.extra_hosts.push(host);
            policy.public_origin = Some(url.origin().ascii_serialization());
        }
        Ok(policy)
    }

    /// The public URL's origin (`scheme://host[:port]`), if one is set.
    pub fn public_origin(&self) -> Option<&str> {
        self.public_origin.as_deref()
    }

    /// Whether a request whose `Host` header is `host` (`name[:port]`, `[v6][:port]`) is
    /// meant for this server. Text that is not a host is refused.
    pub fn host_allowed(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else {
            return false;
        };
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        if let Ok(ip) = name.parse::<IpAddr>()
            && ip.is_loopback()
        {
            return true;
        }
        self.extra_hosts.contains(&name)
    }

    /// Whether `origin` (an `Origin` header) is one of this server's own for a request
    /// that carried `host` (its `Host` header): the origin names that very host and port
    /// (the page came from this server, as the browser reached it) or is the public URL's.
    /// `null` and anything not `http(s)://authority` are refused.
    pub fn origin_allowed(&self, origin: &str, host: Option<&str>) -> bool {
        if self.public_origin.as_deref() == Some(origin) {
            return true;
        }
        let Some(authority) = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
        else {
            return false;
        };
        match host {
            Some(h) => authority.eq_ignore_ascii_case(h) && self.host_allowed(h),
            None => false,
        }
    }
}

/// The host of a `Host` header, lowercased, without port, brackets or a final dot;
/// `None` when it is not one.
fn host_name(host: &str) -> Option<String> {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        inside
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return None,
            None => host,
        }
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
    {
        return None;
    }
    Some(name)
}

fn is_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// What protects a server that other machines can reach.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Protection {
    /// `--insecure-no-auth` / `insecure_no_auth = true`: serve without sign-in on purpose.
    pub insecure_no_auth: bool,
    /// Local users exist (`harrier user add`): sign-in is on.
    pub users: bool,
    /// `[auth_proxy]` is configured: a reverse proxy signs people in.
    pub auth_proxy: bool,
    /// `[oidc]` is configured: people sign in with an OpenID Connect provider.
    pub oidc: bool,
}

/// Whether a server may listen on `listen` with `protection`: loopback addresses always;
/// any other address (`0.0.0.0`, `::`, a LAN address) only when sign-in is on (a local
/// user exists) or `--insecure-no-auth` says to serve it open. `Err` is the message to
/// print: what is refused and which options exist.
pub fn exposure_check(listen: SocketAddr, protection: Protection) -> Result<(), String> {
    if listen.ip().is_loopback()
        || protection.insecure_no_auth
        || protection.users
        || protection.auth_proxy
        || protection.oidc
    {
        return Ok(());
    }
    Err(format!(
        "refusing to serve on {listen}: sign-in is off (no users exist), so anyone who can \
         reach this address could read, change and delete everything (runs, targets, alert \
         rules, channels). Either add an admin first (harrier user add NAME --role admin; \
         sign-in is then on for the console, and tools use tokens from harrier token \
         create), or configure [oidc] in harrier.toml for single sign-on with an OpenID \
         Connect provider, or [auth_proxy] for a proxy that signs people in, or listen on a loopback address (--listen 127.0.0.1:{port}) behind a \
         reverse proxy that checks who is asking (with --public-url set to the address \
         users open), or pass --insecure-no-auth (insecure_no_auth = true under [server] in \
         harrier.toml) to serve the network without any sign-in.",
        port = listen.port()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> SitePolicy {
        SitePolicy::new("127.0.0.1:7070".parse().unwrap(), None).unwrap()
    }

    #[test]
    fn loopback_names_are_accepted_others_refused() {
        let p = loopback();
        for ok in [
            "localhost",
            "localhost:7070",
            "LOCALHOST.:7070",
            "app.localhost:1",
            "127.0.0.1",
            "127.0.0.1:7070",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:7070",
        ] {
            assert!(p.host_allowed(ok), "{ok}");
        }
        for bad in [
            "rebind.example",
            "rebind.example:7070",
            "127.0.0.1.nip.io:7070",
            "localhost.evil.example",
            "10.0.0.5:7070",
            "0.0.0.0:7070",
            "[::]:7070",
            "[::ffff:127.0.0.1]:7070",
            "2130706433:7070",
            "0x7f.1:7070",
            "",
            "local host",
            "localhost:70x",
            "[::1]x",
            "a/b",
        ] {
            assert!(!p.host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn public_url_and_specific_listen_address_are_added() {
        let p = SitePolicy::new(
            "10.0.0.5:7070".parse().unwrap(),
            Some("https://Harrier.Example.com/base/"),
        )
        .unwrap();
        assert!(p.host_allowed("harrier.example.com"));
        assert!(p.host_allowed("10.0.0.5:7070"));
        assert!(!p.host_allowed("10.0.0.6:7070"));
        assert_eq!(p.public_origin(), Some("https://harrier.example.com"));
        assert!(p.origin_allowed("https://harrier.example.com", Some("127.0.0.1:7070")));
        assert!(!p.origin_allowed("http://harrier.example.com", Some("127.0.0.1:7070")));
        let wild = SitePolicy::new("0.0.0.0:7070".parse().unwrap(), None).unwrap();
        assert!(!wild.host_allowed("0.0.0.0:7070"));
        assert!(SitePolicy::new("127.0.0.1:1".parse().unwrap(), Some("ftp://x")).is_err());
        assert!(SitePolicy::new("127.0.0.1:1".parse().unwrap(), Some("nonsense")).is_err());
    }

    #[test]
    fn origin_must_name_the_host_it_was_sent_to() {
        let p = loopback();
        let host = Some("127.0.0.1:7070");
        assert!(p.origin_allowed("http://127.0.0.1:7070", host));
        assert!(p.origin_allowed("http://localhost:7070", Some("localhost:7070")));
        assert!(!p.origin_allowed("http://127.0.0.2:7070", host));
        assert!(!p.origin_allowed("http://127.0.0.1:8000", host));
        assert!(!p.origin_allowed("null", host));
        assert!(!p.origin_allowed("http://127.0.0.1:7070", None));
        // An allowed Host is required too (a rebinding page is same-origin with itself).
        assert!(!p.origin_allowed("http://rebind.example:7070", Some("rebind.example:7070")));
    }

    #[test]
    fn only_loopback_serves_without_protection() {
        let none = Protection::default();
        assert!(exposure_check("127.0.0.1:7070".parse().unwrap(), none).is_ok());
        assert!(exposure_check("[::1]:7070".parse().unwrap(), none).is_ok());
        for addr in ["0.0.0.0:7070", "[::]:7070", "192.168.1.10:7070"] {
            let msg = exposure_check(addr.parse().unwrap(), none).unwrap_err();
            assert!(
                msg.contains("--insecure-no-auth") && msg.contains("--listen"),
                "{msg}"
            );
            assert!(msg.contains("harrier user add"), "{msg}");
        }
        let insecure = Protection {
            insecure_no_auth: true,
            ..Default::default()
        };
        assert!(exposure_check("0.0.0.0:7070".parse().unwrap(), insecure).is_ok());
        let signed = Protection {
            users: true,
            ..Default::default()
        };
        assert!(exposure_check("0.0.0.0:7070".parse().unwrap(), signed).is_ok());
        let proxied = Protection {
            auth_proxy: true,
            ..Default::default()
        };
        assert!(exposure_check("0.0.0.0:7070".parse().unwrap(), proxied).is_ok());
        let sso = Protection {
            oidc: true,
            ..Default::default()
        };
        assert!(exposure_check("0.0.0.0:7070".parse().unwrap(), sso).is_ok());
    }
}
