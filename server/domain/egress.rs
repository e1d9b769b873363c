//! Where harrier may send requests (scrape targets, webhooks, Slack, Alertmanager): the
//! egress policy, against server-side request forgery.
//!
//! Owns [`EgressPolicy`]: the decision on a URL ([`EgressPolicy::check_url`]), a host name
//! ([`EgressPolicy::check_name`]) and an address actually about to be connected to
//! ([`EgressPolicy::check_ip`]). Hosts are normalised the way browsers and HTTP clients
//! read them first (`2130706433`, `0x7f.1`, `017700000001` are 127.0.0.1;
//! `[::ffff:127.0.0.1]` is 127.0.0.1), so a trick spelling decides like the plain one.
//!
//! Always refused, unless an `allow` entry names them: the unspecified addresses
//! (0.0.0.0/8, `::`), link-local ones (169.254.0.0/16 — cloud metadata at 169.254.169.254
//! among them — and fe80::/10), AWS's IPv6 metadata address fd00:ec2::254, multicast and
//! broadcast, and harrier's own listen address (its own API). Loopback and private
//! addresses are allowed by default: scraping services on one's own machine or network
//! is what harrier is for. Pure: `core::net` addresses, no lookups (the HTTP client's
//! resolver hook calls [`EgressPolicy::check_ip`] on what it resolved).

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;
use serde::Deserialize;

/// `[egress]` in `harrier.toml`.
///
/// ```toml
/// [egress]
/// allow = ["169.254.170.2/32", "metrics.internal"]  # reached even if refused otherwise
/// deny = ["10.20.0.0/16", "*.corp.example"]          # never reached
/// default = "allow"                                  # or "deny": only `allow` is reached
/// ```
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EgressConfig {
    /// CIDRs (`10.0.0.0/8`, `fd00::/8`), addresses or host names (`*.example.com` for a
    /// domain and its subdomains) that may be reached: an address here is reached even
    /// when it is of a kind refused by default.
    #[serde(default)]
    pub allow: Vec<String>,
    /// CIDRs, addresses or host names never reached (checked before `allow`).
    #[serde(default)]
    pub deny: Vec<String>,
    /// What happens to what neither list names: `"allow"` (the default) or `"deny"`.
    pub default: Option<String>,
}

/// One entry of `allow` or `deny`.
#[derive(Debug, Clone, PartialEq)]
enum Entry {
    Net(IpNet),
    /// A lowercase host name; `suffix` when written `*.name` (matches `name` and below).
    Name {
        name: String,
        suffix: bool,
    },
}

impl Entry {
    fn parse(text: &str) -> Result<Entry, String> {
        let t = text.trim();
        if let Ok(net) = t.parse::<IpNet>() {
            return Ok(Entry::Net(net.trunc()));
        }
        if let Some(ip) = normalise_host(t) {
            return Ok(Entry::Net(IpNet::from(ip)));
        }
        let (suffix, name) = match t.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, t),
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let valid = !name.is_empty()
            && name.split('.').all(|l| {
                !l.is_empty()
                    && l.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if !valid {
            return Err(format!(
                "{text:?} is neither a CIDR (10.0.0.0/8), an address nor a host name"
            ));
        }
        Ok(Entry::Name { name, suffix })
    }

    fn matches_ip(&self, ip: IpAddr) -> bool {
        matches!(self, Entry::Net(net) if net.contains(&ip))
    }

    fn matches_name(&self, host: &str) -> bool {
        match self {
            Entry::Name { name, suffix } => {
                host == name
                    || (*suffix
                        && host
                            .strip_suffix(name.as_str())
                            .is_some_and(|rest| rest.ends_with('.')))
            }
            Entry::Net(_) => false,
        }
    }
}

/// Why a destination is refused; `Display` names the host and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The host (or address) refused, as normalised.
    pub host: String,
    pub reason: &'static str,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is refused by the egress policy: {} (see [egress] in harrier.toml)",
            self.host, self.reason
        )
    }
}

impl core::error::Error for Refusal {}

/// Where a URL leads, once its host is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// An address literal (checked already).
    Addr(SocketAddr),
    /// A host name (its name checked; its addresses are checked when resolved).
    Name { host: String, port: u16 },
}

/// The egress policy: `allow` and `deny` entries, the default, and harrier's own
/// listen addresses. See the module documentation for the order of the decision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EgressPolicy {
    allow: Vec<Entry>,
    deny: Vec<Entry>,
    default_deny: bool,
    own: Vec<SocketAddr>,
}

impl EgressPolicy {
    /// The policy of `[egress]`; `Err` names the entry that is wrong.
    pub fn from_config(c: &EgressConfig) -> Result<EgressPolicy, String> {
        let parse = |list: &[String], key: &str| {
            list.iter()
                .map(|t| Entry::parse(t).map_err(|e| format!("egress.{key}: {e}")))
                .collect::<Result<Vec<_>, _>>()
        };
        let default_deny = match c.default.as_deref() {
            None | Some("allow") => false,
            Some("deny") => true,
            Some(other) => {
                return Err(format!(
                    "egress.default must be \"allow\" or \"deny\", got {other:?}"
                ));
            }
        };
        Ok(EgressPolicy {
            allow: parse(&c.allow, "allow")?,
            deny: parse(&c.deny, "deny")?,
            default_deny,
            own: Vec::new(),
        })
    }

    /// The same policy, also refusing `addr` (where harrier listens; an unspecified
    /// address stands for every loopback and unspecified address on that port).
    pub fn with_own_addr(mut self, addr: SocketAddr) -> EgressPolicy {
        if !self.own.contains(&addr) {
            self.own.push(addr);
        }
        self
    }

    /// Whether `port` is one harrier listens on (a host name there may be harrier itself).
    pub fn is_own_port(&self, port: u16) -> bool {
        self.own.iter().any(|o| o.port() == port)
    }

    /// Decides on `url` (http or https): an address literal is decided now (port included,
    /// for harrier's own address); a host name is decided by name, its addresses later.
    pub fn check_url(&self, url: &str) -> Result<Destination, Refusal> {
        // Credentials in the URL stay out of the message.
        let refuse = |reason| Refusal {
            host: crate::domain::secrets::mask_url(url),
            reason,
        };
        let u = url::Url::parse(url).map_err(|_| refuse("not a URL"))?;
        if !matches!(u.scheme(), "http" | "https") {
            return Err(refuse("only http:// and https:// are sent"));
        }
        let port = u.port_or_known_default().ok_or_else(|| refuse("no port"))?;
        match u.host() {
            Some(url::Host::Ipv4(a)) => self.check_addr(SocketAddr::new(IpAddr::V4(a), port)),
            Some(url::Host::Ipv6(a)) => self.check_addr(SocketAddr::new(IpAddr::V6(a), port)),
            Some(url::Host::Domain(d)) => {
                let host = d.trim_end_matches('.').to_ascii_lowercase();
                self.check_name(&host)?;
                Ok(Destination::Name { host, port })
            }
            None => Err(refuse("no host")),
        }
    }

    fn check_addr(&self, addr: SocketAddr) -> Result<Destination, Refusal> {
        self.check_ip(addr.ip(), Some(addr.port()))?;
        Ok(Destination::Addr(SocketAddr::new(
            canonical(addr.ip()),
            addr.port(),
        )))
    }

    /// Decides on the host name `host` (lowercase): refused when `deny` names it, or
    /// under `default = "deny"` when `allow` names neither it nor (later) its address.
    pub fn check_name(&self, host: &str) -> Result<(), Refusal> {
        if let Some(ip) = normalise_host(host) {
            return self.check_ip(ip, None);
        }
        if self.deny.iter().any(|e| e.matches_name(host)) {
            return Err(Refusal {
                host: host.to_string(),
                reason: "named in deny",
            });
        }
        Ok(())
    }

    /// Whether `host` is named by an `allow` entry (its addresses then pass the default).
    pub fn name_allowed(&self, host: &str) -> bool {
        self.allow.iter().any(|e| e.matches_name(host))
    }

    /// Decides on the address `ip` (port `port` when known; harrier's own address is only
    /// recognised with it): `deny`, then `allow`, then the kinds always refused, then
    /// harrier's own address, then the default.
    pub fn check_ip(&self, ip: IpAddr, port: Option<u16>) -> Result<(), Refusal> {
        self.decide(ip, port, false)
    }

    /// [`check_ip`](Self::check_ip) for an address that `host_allowed` says was reached
    /// through a host name named in `allow` (it passes the default, not the rest).
    pub fn check_resolved(&self, host: &str, ip: IpAddr, port: Option<u16>) -> Result<(), Refusal> {
        self.decide(ip, port, self.name_allowed(host))
    }

    fn decide(&self, ip: IpAddr, port: Option<u16>, name_allowed: bool) -> Result<(), Refusal> {
        let ip = canonical(ip);
        let refuse = |reason| {
            Err(Refusal {
                host: ip.to_string(),
                reason,
            })
        };
        if self.deny.iter().any(|e| e.matches_ip(ip)) {
            return refuse("named in deny");
        }
        if self.allow.iter().any(|e| e.matches_ip(ip)) {
            return Ok(());
        }
        if let Some(reason) = always_refused(ip) {
            return refuse(reason);
        }
        if let Some(port) = port
            && self.own.iter().any(|own| is_own(*own, ip, port))
        {
            return refuse("harrier's own listen address");
        }
        if self.default_deny && !name_allowed {
            return refuse("not named in allow (default = \"deny\")");
        }
        Ok(())
    }
}

/// Why an address is refused whatever the lists say (unless `allow` names it).
fn always_refused(ip: IpAddr) -> Option<&'static str> {
    const EC2_V6_METADATA: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    match ip {
        IpAddr::V4(a) => {
            if a.octets()[0] == 0 {
                Some("an unspecified address (0.0.0.0/8)")
            } else if a.is_link_local() {
                Some("a link-local address (169.254.0.0/16: cloud metadata)")
            } else if a.is_broadcast() || a.is_multicast() {
                Some("a broadcast or multicast address")
            } else {
                None
            }
        }
        IpAddr::V6(a) => {
            if a.is_unspecified() {
                Some("the unspecified address (::)")
            } else if (a.segments()[0] & 0xffc0) == 0xfe80 {
                Some("a link-local address (fe80::/10)")
            } else if a == EC2_V6_METADATA {
                Some("a cloud metadata address (fd00:ec2::254)")
            } else if a.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
    }
}

/// Whether `ip:port` is harrier's own listen address `own`.
fn is_own(own: SocketAddr, ip: IpAddr, port: u16) -> bool {
    if own.port() != port {
        return false;
    }
    let own_ip = canonical(own.ip());
    if own_ip.is_unspecified() {
        ip.is_loopback() || ip.is_unspecified()
    } else {
        own_ip == ip
    }
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`, `::a.b.c.d`) as the IPv4 it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = a.segments();
                if s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1) {
                    IpAddr::V4(Ipv4Addr::new(
                        (s[6] >> 8) as u8,
                        s[6] as u8,
                        (s[7] >> 8) as u8,
                        s[7] as u8,
                    ))
                } else {
                    IpAddr::V6(a)
                }
            }
        },
        v4 => v4,
    }
}

/// The address `host` stands for when it is an address literal in any spelling a URL
/// parser accepts (`2130706433`, `0x7f.1`, `017700000001`, `127.1`, `[::ffff:7f00:1]`,
/// percent-encoded digits), IPv4-in-IPv6 made IPv4; `None` for a host name.
pub fn normalise_host(host: &str) -> Option<IpAddr> {
    let host = host.trim_end_matches('.');
    let bracketed;
    let host = if host.contains(':') && !host.starts_with('[') {
        bracketed = format!("[{host}]");
        bracketed.as_str()
    } else {
        host
    };
    match url::Host::parse(host).ok()? {
        url::Host::Ipv4(a) => Some(IpAddr::V4(a)),
        url::Host::Ipv6(a) => Some(canonical(IpAddr::V6(a))),
        url::Host::Domain(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> EgressPolicy {
        EgressPolicy::default().with_own_addr("127.0.0.1:7070".parse().unwrap())
    }

    #[test]
    fn hostile_urls_are_refused() {
        let p = policy();
        let hostile = [
            // Cloud metadata and link-local, in every spelling.
            "http://169.254.169.254/latest/meta-data/",
            "http://169.254.169.254:80/",
            "http://169.254.0.1/",
            "http://169.254.255.255/",
            "http://2852039166/",
            "http://0xa9fea9fe/",
            "http://0xA9.0xFE.0xA9.0xFE/",
            "http://0251.0376.0251.0376/",
            "http://025177524776/",
            "http://169.254.43518/",
            "http://169.16689662/",
            "http://[::ffff:169.254.169.254]/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://[0:0:0:0:0:ffff:169.254.169.254]/",
            "http://[::169.254.169.254]/",
            "http://%31%36%39.254.169.254/",
            "http://169.254.169.254./",
            "http://[fe80::1]/",
            "http://[fe80::a9fe:a9fe%25eth0]/",
            "http://[febf:ffff::1]/",
            "http://[fd00:ec2::254]/",
            "http://[FD00:EC2:0:0:0:0:0:254]/",
            // Unspecified.
            "http://0.0.0.0/",
            "http://0.0.0.0:7070/",
            "http://0/",
            "http://0x0/",
            "http://00000000/",
            "http://0.1.2.3/",
            "http://[::]/",
            "http://[::ffff:0.0.0.0]/",
            "http://[0:0:0:0:0:0:0:0]:7070/",
            // harrier itself, in every spelling of 127.0.0.1:7070.
            "http://127.0.0.1:7070/api/v1/runs",
            "http://2130706433:7070/",
            "http://0x7f.1:7070/",
            "http://0x7f000001:7070/",
            "http://017700000001:7070/",
            "http://0177.0.0.1:7070/",
            "http://127.1:7070/",
            "http://127.0.1:7070/",
            "http://[::ffff:127.0.0.1]:7070/",
            "http://[::ffff:7f00:1]:7070/",
            "https://127.0.0.1:7070/",
            // Multicast, broadcast; not HTTP at all.
            "http://224.0.0.1/",
            "http://255.255.255.255/",
            "http://[ff02::1]/",
            "file:///etc/passwd",
            "gopher://127.0.0.1:6379/_INFO",
            "ftp://10.0.0.1/",
            "http://127.0.0.1:9100@169.254.169.254/",
            "http://user:pw@[::ffff:a9fe:a9fe]:8080/",
            "not a url",
        ];
        assert!(hostile.len() >= 40);
        for url in hostile {
            assert!(p.check_url(url).is_err(), "{url} should be refused");
        }
    }

    #[test]
    fn ordinary_targets_pass() {
        let p = policy();
        for url in [
            "http://127.0.0.1:9100/metrics",
            "http://localhost:9100/metrics",
            "http://[::1]:9100/metrics",
            "http://10.0.0.5:9100/metrics",
            "http://192.168.1.20:8080/jolokia",
            "https://hooks.slack.com/services/T/B/x",
            "http://alertmanager.internal:9093",
            "http://127.0.0.2:7070/",
            "http://169.253.0.1/",
        ] {
            assert!(p.check_url(url).is_ok(), "{url}: {:?}", p.check_url(url));
        }
        assert_eq!(
            p.check_url("http://0x7f.1:9100/").unwrap(),
            Destination::Addr("127.0.0.1:9100".parse().unwrap())
        );
        assert_eq!(
            p.check_url("http://Metrics.Internal.:9100/").unwrap(),
            Destination::Name {
                host: "metrics.internal".into(),
                port: 9100
            }
        );
    }

    #[test]
    fn own_address_on_every_interface_and_resolved_addresses() {
        let p = EgressPolicy::default().with_own_addr("0.0.0.0:7070".parse().unwrap());
        for ip in [
            "127.0.0.1",
            "127.5.5.5",
            "::1",
            "0.0.0.0",
            "::ffff:127.0.0.1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(p.check_ip(ip, Some(7070)).is_err(), "{ip}");
            assert!(
                p.check_ip(ip, Some(7071)).is_ok() || ip.is_unspecified(),
                "{ip}"
            );
        }
        // A resolved metadata address is refused whatever the name.
        let md: IpAddr = "169.254.169.254".parse().unwrap();
        assert!(p.check_resolved("metrics.example", md, None).is_err());
        let msg = p.check_ip(md, None).unwrap_err().to_string();
        assert!(
            msg.contains("169.254.169.254") && msg.contains("link-local"),
            "{msg}"
        );
    }

    #[test]
    fn allow_deny_and_default_from_harrier_toml() {
        let c: EgressConfig = toml::from_str(
            r#"
            allow = ["169.254.170.2", "10.1.0.0/16", "*.allowed.example"]
            deny = ["10.1.2.0/24", "evil.example", "*.corp.example"]
            default = "deny"
            "#,
        )
        .unwrap();
        let p = EgressPolicy::from_config(&c).unwrap();
        assert!(p.check_url("http://169.254.170.2/v2/credentials").is_ok());
        assert!(p.check_url("http://169.254.169.254/").is_err());
        assert!(p.check_url("http://10.1.9.9/").is_ok());
        assert!(
            p.check_url("http://10.1.2.3/").is_err(),
            "deny wins over allow"
        );
        assert!(p.check_url("http://10.2.0.1/").is_err(), "default deny");
        assert!(
            p.check_url("http://127.0.0.1:9100/").is_err(),
            "default deny"
        );
        assert!(p.check_url("http://evil.example/").is_err());
        assert!(p.check_url("http://a.b.corp.example/").is_err());
        assert!(
            p.check_url("http://corp.example.evil/").is_ok(),
            "by name: decided later"
        );
        let ip: IpAddr = "203.0.113.7".parse().unwrap();
        assert!(p.check_resolved("x.allowed.example", ip, Some(80)).is_ok());
        assert!(p.check_resolved("other.example", ip, Some(80)).is_err());
        assert!(p.check_resolved("allowed.example", md(), Some(80)).is_err());
        for bad in [
            r#"allow = ["10.0.0.0/33"]"#,
            r#"deny = ["not a host"]"#,
            r#"default = "maybe""#,
        ] {
            let c: EgressConfig = toml::from_str(bad).unwrap();
            assert!(EgressPolicy::from_config(&c).is_err(), "{bad}");
        }
    }

    fn md() -> IpAddr {
        "169.254.169.254".parse().unwrap()
    }

    #[test]
    fn literal_spellings_are_normalised() {
        for (text, ip) in [
            ("2130706433", "127.0.0.1"),
            ("0x7f.1", "127.0.0.1"),
            ("017700000001", "127.0.0.1"),
            ("[::ffff:127.0.0.1]", "127.0.0.1"),
            ("::ffff:127.0.0.1", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("10.0.0.1.", "10.0.0.1"),
            ("[::1]", "::1"),
        ] {
            assert_eq!(normalise_host(text), Some(ip.parse().unwrap()), "{text}");
        }
        assert_eq!(normalise_host("localhost"), None);
        assert_eq!(normalise_host("127.0.0.1.nip.io"), None);
    }
}
