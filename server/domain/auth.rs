//! Who may do what: roles of people, scopes of machine tokens, share links, and the
//! permission every route of the HTTP surface requires ([`Permission`]).
//!
//! Pure: no clock, no randomness, no store. The HTTP layer resolves each request to a
//! [`Principal`] (`services::auth`) and asks [`Principal::may`] before the handler runs.
//!
//! The grid, from the sign-in issue of the team's tracker and the roles Grafana ships
//! (Viewer / Editor / Admin):
//!
//! | permission | what it covers                                        | viewer | operator | editor | admin | `read` token | `operate` token | `ingest` token | `write` token | share link |
//! |------------|-------------------------------------------------------|--------|----------|--------|-------|--------------|-----------------|----------------|---------------|------------|
//! | `Public`   | health, static files, the sign-in page                | ✓      | ✓        | ✓      | ✓     | ✓            | ✓               | ✓              | ✓             | ✓          |
//! | `Read`     | every page and GET of the API                         | ✓      | ✓        | ✓      | ✓     | ✓            | ✓               |                | ✓             | its page   |
//! | `Ingest`   | uploads, line protocol, OTLP, ending runs, gate checks|        |          | ✓      | ✓     |              |                 | ✓              | ✓             |            |
//! | `Operate`  | route operations: start, stop, suspend, resume, reset statistics |  | ✓  | ✓      | ✓     |              | ✓               |                | ✓             |            |
//! | `Write`    | deleting/editing runs, targets, rules, silences, channels, share links |  |  | ✓ | ✓ |              |                 |                | ✓             |            |
//! | `Admin`    | users and tokens                                      |        |          |        | ✓     |              |                 |                |               |            |
//!
//! The operator role is hawtio's operator: someone on call who may stop a misbehaving route
//! or reset its statistics, but not change what harrier stores or watches.

use core::fmt;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A person's role. Ordered: each role may do everything of the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads every page and figure.
    Viewer,
    /// Also starts, stops, suspends and resumes routes and resets their statistics.
    Operator,
    /// Also imports and deletes runs, edits targets, alert rules, silences and channels.
    Editor,
    /// Also manages users and tokens.
    Admin,
}

impl Role {
    pub const NAMES: [&'static str; 4] = ["viewer", "operator", "editor", "admin"];

    /// `viewer`, `operator`, `editor` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }

    /// Reads a role name (case-insensitive).
    pub fn parse(text: &str) -> Option<Role> {
        match text.trim().to_ascii_lowercase().as_str() {
            "viewer" => Some(Role::Viewer),
            "operator" => Some(Role::Operator),
            "editor" => Some(Role::Editor),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a machine token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Send results only: uploads, line protocol (k6, JMeter), ending live runs, gate
    /// checks. Reads nothing: the token a CI job or a load tool holds.
    Ingest,
    /// Read everything a Viewer reads (`harrier runs`, `compare`, dashboards).
    Read,
    /// Everything an Operator does: read, and route operations (a runbook's script).
    Operate,
    /// Everything an Editor does.
    Write,
}

impl Scope {
    pub const NAMES: [&'static str; 4] = ["ingest", "read", "operate", "write"];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Read => "read",
            Scope::Operate => "operate",
            Scope::Write => "write",
        }
    }

    pub fn parse(text: &str) -> Option<Scope> {
        match text.trim().to_ascii_lowercase().as_str() {
            "ingest" => Some(Scope::Ingest),
            "read" => Some(Scope::Read),
            "operate" => Some(Scope::Operate),
            "write" => Some(Scope::Write),
            _ => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a route requires (see the module's grid).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    Public,
    Read,
    Ingest,
    /// Route operations (after `Ingest` only so that every state-changing permission sorts
    /// at or above `Ingest`; an operator may not ingest).
    Operate,
    Write,
    Admin,
}

impl Permission {
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Public => "public",
            Permission::Read => "read",
            Permission::Ingest => "ingest",
            Permission::Operate => "operate",
            Permission::Write => "write",
            Permission::Admin => "admin",
        }
    }
}

/// What a share link shows: one run, one comparison (its run ids, in order) or one
/// scenario's trend.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ShareSubject {
    Run { id: i64 },
    Compare { runs: Vec<i64> },
    Scenario { name: String },
}

/// Who is asking, as resolved from the request's credentials.
#[derive(Debug, Clone, PartialEq)]
pub enum Principal {
    /// Sign-in is not configured (no users): everything is open, as before sign-in
    /// existed (the server then listens on loopback, or was told `--insecure-no-auth`).
    Open,
    /// No credentials.
    Anonymous,
    /// A signed-in person.
    User { id: i64, name: String, role: Role },
    /// A machine token.
    Token { id: i64, name: String, scope: Scope },
    /// A read-only share link, reaching only its subject.
    Share { id: i64, subject: ShareSubject },
}

impl Principal {
    /// Whether this principal may use a route requiring `permission`. A share link's
    /// `Read` is limited further to its subject's pages by the share handlers; here it
    /// gets `Public` only (its pages are served under `/share/…`).
    pub fn may(&self, permission: Permission) -> bool {
        use Permission as P;
        match (self, permission) {
            (_, P::Public) => true,
            (Principal::Open, _) => true,
            (Principal::Anonymous, _) => false,
            (Principal::User { role, .. }, p) => match p {
                P::Public | P::Read => true,
                P::Operate => *role >= Role::Operator,
                P::Ingest | P::Write => *role >= Role::Editor,
                P::Admin => *role == Role::Admin,
            },
            (Principal::Token { scope, .. }, p) => match (scope, p) {
                (_, P::Admin) => false,
                (Scope::Ingest, P::Ingest) => true,
                (Scope::Ingest, _) => false,
                (Scope::Read, P::Read) => true,
                (Scope::Read, _) => false,
                (Scope::Operate, P::Read | P::Operate) => true,
                (Scope::Operate, _) => false,
                (Scope::Write, _) => true,
            },
            (Principal::Share { .. }, _) => false,
        }
    }

    /// Whether a share link reaches `path` for reading: its run's API
    /// (`/api/v1/runs/{id}` and below), or those of the runs of its comparison — what its
    /// page asks for while it renders (time series per label, distributions).
    pub fn share_reaches(&self, path: &str) -> bool {
        let runs: &[i64] = match self {
            Principal::Share {
                subject: ShareSubject::Run { id },
                ..
            } => core::slice::from_ref(id),
            Principal::Share {
                subject: ShareSubject::Compare { runs },
                ..
            } => runs,
            _ => return false,
        };
        runs.iter().any(|id| {
            let base = format!("/api/v1/runs/{id}");
            path == base || path.strip_prefix(&base).is_some_and(|r| r.starts_with('/'))
        })
    }

    /// The name shown in the top bar and written to the audit log: the user's name,
    /// `token:NAME`, `share:ID`, `anonymous`, or `open` (no sign-in configured).
    pub fn who(&self) -> String {
        match self {
            Principal::Open => "open".into(),
            Principal::Anonymous => "anonymous".into(),
            Principal::User { name, .. } => name.clone(),
            Principal::Token { name, .. } => format!("token:{name}"),
            Principal::Share { id, .. } => format!("share:{id}"),
        }
    }
}

/// Prefix of API tokens (`hrt_`) and share links (`hrs_`): a token found in a log or a
/// repository is recognisable (as GitHub's `ghp_`), and the two never mix.
pub const TOKEN_PREFIX: &str = "hrt_";
pub const SHARE_PREFIX: &str = "hrs_";

/// A token or share link as handed out: `PREFIX{id}_{secret}` with `secret` 64 hex
/// digits (256 random bits). Only the SHA-256 of the secret is stored; the id finds the
/// row, the hash is compared in constant time ([`secret_matches`]).
pub fn format_credential(prefix: &str, id: i64, secret_hex: &str) -> String {
    format!("{prefix}{id}_{secret_hex}")
}

/// Splits a credential of [`format_credential`]'s shape into id and secret; `None` for
/// anything else (wrong prefix, no id, a secret that is not 64 hex digits).
pub fn parse_credential<'a>(prefix: &str, text: &'a str) -> Option<(i64, &'a str)> {
    let rest = text.trim().strip_prefix(prefix)?;
    let (id, secret) = rest.split_once('_')?;
    if id.is_empty() || id.len() > 18 || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if secret.len() != 64 || !secret.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((id.parse().ok()?, secret))
}

/// SHA-256 of `secret`, as 64 lowercase hex digits: what is stored for session ids,
/// tokens and share links.
pub fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Whether `secret`'s hash equals `stored_hash`, compared in constant time (the time does
/// not depend on where the two first differ).
pub fn secret_matches(secret: &str, stored_hash: &str) -> bool {
    let h = secret_hash(secret);
    h.len() == stored_hash.len() && bool::from(h.as_bytes().ct_eq(stored_hash.as_bytes()))
}

/// Where to go after signing in: `next` when it is a path of this server (`/console/…`),
/// else `/console`. Refused: absolute URLs, scheme-relative `//host`, backslashes (which
/// browsers read as slashes), control characters.
pub fn safe_next(next: Option<&str>) -> String {
    let fallback = || "/console".to_string();
    let Some(n) = next else { return fallback() };
    let ok = n.starts_with('/')
        && !n.starts_with("//")
        && !n.contains('\\')
        && !n.chars().any(|c| c.is_control())
        && n.len() <= 2000;
    if ok { n.to_string() } else { fallback() }
}

/// A user name: 1–64 ASCII letters, digits and `. _ - @`, compared in lowercase
/// ([`normalize_user_name`]) — no look-alike names (Cyrillic `а` beside Latin `a`, `Ana`
/// beside `ana`).
pub fn check_user_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err("a user name has 1 to 64 characters".into());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
    {
        return Err(format!(
            "user name {name:?}: only ASCII letters, digits and . _ - @ are allowed"
        ));
    }
    Ok(())
}

/// The form a user name is stored and looked up in: trimmed, lowercase.
pub fn normalize_user_name(name: &str) -> String {
    name.trim().to_ascii_lowercase()
}

/// A token's name: 1–100 characters, no control characters (names are printed in
/// terminals and tables).
pub fn check_token_name(name: &str) -> Result<(), String> {
    let n = name.trim();
    if n.is_empty() || n.chars().count() > 100 {
        return Err(
            "a token needs a name of 1 to 100 characters (what uses it: \"ci-upload\")".into(),
        );
    }
    if n.chars().any(char::is_control) {
        return Err("a token's name may not hold control characters".into());
    }
    Ok(())
}

/// Passwords: at least 8 characters (NIST SP 800-63B's minimum for user-chosen ones),
/// at most 1024 bytes (hashing cost is bounded).
pub fn check_password(password: &str) -> Result<(), String> {
    if password.chars().count() < 8 {
        return Err("a password needs at least 8 characters".into());
    }
    if password.len() > 1024 {
        return Err("a password may have at most 1024 bytes".into());
    }
    Ok(())
}

/// `[auth_proxy]` in harrier.toml, as written: a reverse proxy that signs people in
/// (oauth2-proxy, Authelia, an SSO gateway) and names them in a request header.
///
/// ```toml
/// [auth_proxy]
/// header = "X-Forwarded-User"          # the signed-in user's name
/// proxies = ["127.0.0.1/32", "::1"]    # only requests from these addresses are believed
/// groups_header = "X-Forwarded-Groups" # optional: comma-separated groups
/// admin_groups = ["harrier-admins"]
/// editor_groups = ["perf-team"]
/// default_role = "viewer"              # anyone else the proxy lets through
/// ```
#[derive(Debug, Clone, Default, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AuthProxyConfig {
    pub header: String,
    pub proxies: Vec<String>,
    pub groups_header: Option<String>,
    #[serde(default)]
    pub admin_groups: Vec<String>,
    #[serde(default)]
    pub editor_groups: Vec<String>,
    pub default_role: Option<String>,
}

/// A checked [`AuthProxyConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct AuthProxy {
    /// Lowercase header name.
    pub header: String,
    pub proxies: Vec<ipnet::IpNet>,
    pub groups_header: Option<String>,
    pub admin_groups: Vec<String>,
    pub editor_groups: Vec<String>,
    pub default_role: Role,
}

impl AuthProxy {
    /// Checks the section: a header name, at least one proxy address or CIDR, a role name.
    pub fn from_config(c: &AuthProxyConfig) -> Result<AuthProxy, String> {
        let header_ok = |h: &str| {
            !h.is_empty()
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if !header_ok(&c.header) {
            return Err(format!(
                "[auth_proxy] header {:?}: not a header name",
                c.header
            ));
        }
        if let Some(g) = &c.groups_header
            && !header_ok(g)
        {
            return Err(format!(
                "[auth_proxy] groups_header {g:?}: not a header name"
            ));
        }
        if c.proxies.is_empty() {
            return Err(
                "[auth_proxy] proxies: name the proxy's addresses (e.g. [\"127.0.0.1/32\"]); \
                        a user header from anywhere else is ignored"
                    .into(),
            );
        }
        let mut proxies = Vec::new();
        for p in &c.proxies {
            let net = p
                .parse::<ipnet::IpNet>()
                .or_else(|_| p.parse::<core::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| format!("[auth_proxy] proxies: {p:?} is not an address or CIDR"))?;
            proxies.push(net);
        }
        let default_role = match &c.default_role {
            None => Role::Viewer,
            Some(r) => Role::parse(r).ok_or_else(|| {
                format!("[auth_proxy] default_role {r:?}: expected viewer, editor or admin")
            })?,
        };
        Ok(AuthProxy {
            header: c.header.to_ascii_lowercase(),
            proxies,
            groups_header: c.groups_header.as_ref().map(|g| g.to_ascii_lowercase()),
            admin_groups: c.admin_groups.clone(),
            editor_groups: c.editor_groups.clone(),
            default_role,
        })
    }

    /// Whether a request from `client` comes from the proxy.
    pub fn trusts(&self, client: Option<core::net::IpAddr>) -> bool {
        client.is_some_and(|ip| {
            let ip = match ip {
                core::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, core::net::IpAddr::V4),
                v4 => v4,
            };
            self.proxies.iter().any(|n| n.contains(&ip))
        })
    }

    /// The role of someone in `groups` (the groups header, comma-separated): admin if one
    /// is an admin group, else editor if one is an editor group, else the default role.
    pub fn role_for(&self, groups: Option<&str>) -> Role {
        let groups: Vec<&str> = groups
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .collect();
        let any = |list: &[String]| groups.iter().any(|g| list.iter().any(|l| l == g));
        if any(&self.admin_groups) {
            Role::Admin
        } else if any(&self.editor_groups) {
            Role::Editor.max(self.default_role)
        } else {
            self.default_role
        }
    }
}

/// Sign-in throttling: this many failures of one user name or one client address within
/// [`SIGN_IN_WINDOW_MS`] refuse further attempts (429) until the oldest leaves the window.
pub const SIGN_IN_MAX_FAILURES: i64 = 5;
pub const SIGN_IN_WINDOW_MS: i64 = 5 * 60_000;

/// A session ends after this long without a request (7 days, Grafana's
/// `login_maximum_inactive_lifetime_duration` default)…
pub const SESSION_IDLE_MS: i64 = 7 * 24 * 3_600_000;
/// …and in any case this long after sign-in (30 days, Grafana's
/// `login_maximum_lifetime_duration` default).
pub const SESSION_ABSOLUTE_MS: i64 = 30 * 24 * 3_600_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_scopes_follow_the_grid() {
        use Permission as P;
        let user = |role| Principal::User {
            id: 1,
            name: "u".into(),
            role,
        };
        let token = |scope| Principal::Token {
            id: 1,
            name: "t".into(),
            scope,
        };
        let share = Principal::Share {
            id: 1,
            subject: ShareSubject::Run { id: 1 },
        };
        let all = [
            P::Public,
            P::Read,
            P::Ingest,
            P::Operate,
            P::Write,
            P::Admin,
        ];
        let grid: [(Principal, [bool; 6]); 11] = [
            (Principal::Open, [true; 6]),
            (
                Principal::Anonymous,
                [true, false, false, false, false, false],
            ),
            (user(Role::Viewer), [true, true, false, false, false, false]),
            (
                user(Role::Operator),
                [true, true, false, true, false, false],
            ),
            (user(Role::Editor), [true, true, true, true, true, false]),
            (user(Role::Admin), [true; 6]),
            (token(Scope::Read), [true, true, false, false, false, false]),
            (
                token(Scope::Operate),
                [true, true, false, true, false, false],
            ),
            (
                token(Scope::Ingest),
                [true, false, true, false, false, false],
            ),
            (token(Scope::Write), [true, true, true, true, true, false]),
            (share, [true, false, false, false, false, false]),
        ];
        for (who, expected) in grid {
            for (p, want) in all.iter().zip(expected) {
                assert_eq!(who.may(*p), want, "{who:?} {p:?}");
            }
        }
    }

    #[test]
    fn a_share_link_reaches_only_its_runs_api() {
        let run = Principal::Share {
            id: 1,
            subject: ShareSubject::Run { id: 3 },
        };
        assert!(run.share_reaches("/api/v1/runs/3"));
        assert!(run.share_reaches("/api/v1/runs/3/timeseries"));
        assert!(!run.share_reaches("/api/v1/runs/31/timeseries"));
        assert!(!run.share_reaches("/api/v1/runs"));
        assert!(!run.share_reaches("/api/v1/runs/4"));
        let cmp = Principal::Share {
            id: 2,
            subject: ShareSubject::Compare { runs: vec![4, 5] },
        };
        assert!(cmp.share_reaches("/api/v1/runs/5/distribution"));
        assert!(!cmp.share_reaches("/api/v1/runs/3/distribution"));
        assert!(!Principal::Anonymous.share_reaches("/api/v1/runs/3"));
    }

    #[test]
    fn credentials_round_trip_and_odd_ones_are_refused() {
        let secret = "ab".repeat(32);
        let t = format_credential(TOKEN_PREFIX, 42, &secret);
        assert_eq!(
            parse_credential(TOKEN_PREFIX, &t),
            Some((42, secret.as_str()))
        );
        assert_eq!(parse_credential(SHARE_PREFIX, &t), None);
        for bad in [
            "",
            "hrt_",
            "hrt_42",
            "hrt__abab",
            "hrt_x_abab",
            &format!("hrt_42_{}", "ab".repeat(31)),
            &format!("hrt_42_{}zz", "ab".repeat(31)),
            &format!("hrt_-1_{}", "ab".repeat(32)),
        ] {
            assert_eq!(parse_credential(TOKEN_PREFIX, bad), None, "{bad}");
        }
        let h = secret_hash(&secret);
        assert!(secret_matches(&secret, &h));
        assert!(!secret_matches(&"ac".repeat(32), &h));
        assert!(!secret_matches(&secret, &h[..63]));
    }

    #[test]
    fn next_is_a_local_path_or_the_console() {
        assert_eq!(
            safe_next(Some("/console/runs/3?x=1")),
            "/console/runs/3?x=1"
        );
        for bad in [
            "https://evil.example/",
            "//evil.example",
            "/\\evil.example",
            "javascript:alert(1)",
            "console",
            "/x\n",
        ] {
            assert_eq!(safe_next(Some(bad)), "/console", "{bad:?}");
        }
        assert_eq!(safe_next(None), "/console");
    }

    #[test]
    fn the_auth_proxy_is_believed_only_from_its_addresses() {
        let p = AuthProxy::from_config(&AuthProxyConfig {
            header: "X-Forwarded-User".into(),
            proxies: vec!["127.0.0.1/32".into(), "::1".into()],
            groups_header: Some("X-Forwarded-Groups".into()),
            admin_groups: vec!["ops".into()],
            editor_groups: vec!["perf".into()],
            default_role: None,
        })
        .unwrap();
        assert_eq!(p.header, "x-forwarded-user");
        assert!(p.trusts(Some("127.0.0.1".parse().unwrap())));
        assert!(p.trusts(Some("::ffff:127.0.0.1".parse().unwrap())));
        assert!(p.trusts(Some("::1".parse().unwrap())));
        assert!(!p.trusts(Some("127.0.0.2".parse().unwrap())));
        assert!(!p.trusts(Some("10.0.0.1".parse().unwrap())));
        assert!(!p.trusts(None));
        assert_eq!(p.role_for(Some("dev, perf")), Role::Editor);
        assert_eq!(p.role_for(Some("perf,ops")), Role::Admin);
        assert_eq!(p.role_for(Some("perfx")), Role::Viewer);
        assert_eq!(p.role_for(None), Role::Viewer);
        let bad = |f: fn(&mut AuthProxyConfig)| {
            let mut c = AuthProxyConfig {
                header: "X-User".into(),
                proxies: vec!["127.0.0.1".into()],
                ..Default::default()
            };
            f(&mut c);
            AuthProxy::from_config(&c).unwrap_err()
        };
        assert!(bad(|c| c.proxies.clear()).contains("proxies"));
        assert!(bad(|c| c.proxies = vec!["everyone".into()]).contains("everyone"));
        assert!(bad(|c| c.header = "X User".into()).contains("header"));
        assert!(bad(|c| c.default_role = Some("root".into())).contains("root"));
    }

    #[test]
    fn names_and_passwords_are_checked() {
        assert!(check_user_name("ana.lopez@team").is_ok());
        assert!(check_user_name("").is_err());
        assert!(check_user_name("a b").is_err());
        assert!(check_user_name("<script>").is_err());
        assert!(check_user_name("\u{430}na").is_err(), "Cyrillic a");
        assert_eq!(normalize_user_name(" Ana "), "ana");
        assert!(check_token_name("ci-upload").is_ok());
        assert!(check_token_name("").is_err());
        assert!(check_token_name(&"x".repeat(101)).is_err());
        assert!(check_token_name("a\u{1b}[31mb").is_err());
        assert!(check_password("short").is_err());
        assert!(check_password("long enough").is_ok());
    }
}
