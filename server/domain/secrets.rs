//! Secrets inside URLs: how a scrape-target or webhook URL is shown.
//!
//! Owns [`mask_url`], the one rule every answer, page and log line uses for the URLs of
//! targets and channels: a password (`user:…@`), a user name standing alone (a token used
//! as one, `https://…@host`) and the values of secret-looking query parameters
//! (`?token=…`) are replaced by [`MASK`]. The URL is stored and used in full; only what
//! is shown is masked. Must not do I/O.
//!
//! [`Secret`] carries such a value through the program: its `Debug`, `Display` and
//! `Serialize` show it masked (so a log line, an error, an answer, a websocket frame or an
//! export built from it cannot hold it), and only [`Secret::expose`] gives it whole — to
//! the HTTP client that uses it and the store that keeps it. How much is shown is the
//! type's: [`Credentials`] (a target URL: only its credentials hidden) or [`OriginOnly`]
//! (a webhook, Slack or Alertmanager URL, whose path often is the token: only
//! `scheme://host[:port]/…` shown).

use std::fmt;
use std::marker::PhantomData;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What stands for a hidden part of a URL.
pub const MASK: &str = "…";

/// Query parameter names (compared lowercased, as substrings) whose values are secrets:
/// `token`, `access_token`, `key`, `apikey`, `api_key`, `password`, `secret`, `auth`…
const SECRET_PARAMS: &[&str] = &[
    "token",
    "key",
    "password",
    "passwd",
    "pwd",
    "secret",
    "auth",
    "signature",
    "sig",
    "credential",
];

/// Whether a query parameter named `name` holds a secret (case-insensitive).
pub fn is_secret_param(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_PARAMS.iter().any(|s| lower.contains(s))
}

/// `url` as it may be shown: the password (or a user name without one) and the values of
/// secret-looking query parameters replaced by [`MASK`]; everything else as written. Text
/// that is not a URL is shown whole only if it has neither `@` nor `?`, else as [`MASK`].
pub fn mask_url(url: &str) -> String {
    let opaque = || {
        if url.contains(['@', '?']) {
            MASK.to_string()
        } else {
            url.to_string()
        }
    };
    let mut u = match url::Url::parse(url) {
        Ok(u) if !u.cannot_be_a_base() => u,
        _ => return opaque(),
    };
    let mut changed = false;
    if u.password().is_some() {
        let _ = u.set_password(Some(MASK));
        changed = true;
    } else if !u.username().is_empty() {
        let _ = u.set_username(MASK);
        changed = true;
    }
    if let Some(query) = u.query() {
        let masked: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, value)) if !value.is_empty() && is_secret_param(&decode(name)) => {
                    format!("{name}={MASK}")
                }
                _ => pair.to_string(),
            })
            .collect();
        let masked = masked.join("&");
        if masked != query {
            u.set_query(Some(&masked));
            changed = true;
        }
    }
    if !changed {
        return url.to_string();
    }
    // The url crate percent-encodes the ellipsis; show it as typed.
    u.to_string().replace("%E2%80%A6", MASK)
}

/// A request target (`/path?query`) as it may be shown: the values of secret-looking query
/// parameters replaced by [`MASK`], the rest as written.
pub fn mask_target(target: &str) -> String {
    let Some((path, query)) = target.split_once('?') else {
        return target.to_string();
    };
    let masked: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if !value.is_empty() && is_secret_param(&decode(name)) => {
                format!("{name}={MASK}")
            }
            _ => pair.to_string(),
        })
        .collect();
    format!("{path}?{}", masked.join("&"))
}

/// Header names (compared lowercased, as substrings) whose values are secrets, besides
/// those [`is_secret_param`] names: cookies and sessions.
const SECRET_HEADERS: &[&str] = &["cookie", "session"];

/// Whether a request header named `name` carries a secret (`Authorization`,
/// `Proxy-Authorization`, `X-Api-Key`, `Cookie`, `X-Auth-Token`, …; case-insensitive).
pub fn is_secret_header(name: &str) -> bool {
    let lower = name.trim().to_ascii_lowercase();
    is_secret_param(&lower) || SECRET_HEADERS.iter().any(|s| lower.contains(s))
}

/// A `Name: value` header line as it may be shown: the value replaced by [`MASK`] when the
/// name carries a secret ([`is_secret_header`]); a line without `:` is shown whole.
pub fn mask_header_line(line: &str) -> String {
    match line.split_once(':') {
        Some((name, value)) if is_secret_header(name) && !value.trim().is_empty() => {
            format!("{name}: {MASK}")
        }
        _ => line.to_string(),
    }
}

fn decode(name: &str) -> String {
    form_urlencoded::parse(format!("{name}=").as_bytes())
        .next()
        .map_or_else(|| name.to_string(), |(k, _)| k.into_owned())
}

/// How a [`Secret`] is shown.
pub trait Mask {
    /// `value` as it may be shown.
    fn mask(value: &str) -> String;
}

/// Shows a URL with its credentials and secret query values masked ([`mask_url`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials;

impl Mask for Credentials {
    fn mask(value: &str) -> String {
        mask_url(value)
    }
}

/// Shows only a URL's scheme, host and port (`https://hooks.slack.com/…`); text that is
/// not such a URL as [`MASK`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OriginOnly;

impl Mask for OriginOnly {
    fn mask(value: &str) -> String {
        match url::Url::parse(value) {
            Ok(u) if u.host_str().is_some() => {
                let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
                let rest = if u.path() == "/" && u.query().is_none() && u.username().is_empty() {
                    ""
                } else {
                    MASK
                };
                format!(
                    "{}://{}{port}/{rest}",
                    u.scheme(),
                    u.host_str().unwrap_or_default()
                )
            }
            _ if value.is_empty() => String::new(),
            _ => MASK.to_string(),
        }
    }
}

/// Shows nothing of the value (a client secret, a password): [`MASK`], or nothing for an
/// empty value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hidden;

impl Mask for Hidden {
    fn mask(value: &str) -> String {
        if value.is_empty() {
            String::new()
        } else {
            MASK.to_string()
        }
    }
}

/// A secret text (a URL holding credentials or a token), shown masked by `M` everywhere
/// it is formatted or serialized; [`Secret::expose`] is the one way to the whole value.
/// Deserializes from a plain string. Equal when the whole values are.
pub struct Secret<M: Mask> {
    value: String,
    mask: PhantomData<M>,
}

impl<M: Mask> Secret<M> {
    pub fn new(value: impl Into<String>) -> Self {
        Secret {
            value: value.into(),
            mask: PhantomData,
        }
    }

    /// The whole value: for the client that sends to it and the store that keeps it.
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// The value as it may be shown.
    pub fn masked(&self) -> String {
        M::mask(&self.value)
    }

    /// Whether the shown form hides anything (a value equal to its shown form is no
    /// secret, e.g. `http://127.0.0.1:9100/metrics`).
    pub fn hides_something(&self) -> bool {
        self.masked() != self.value
    }
}

impl<M: Mask> Clone for Secret<M> {
    fn clone(&self) -> Self {
        Secret::new(self.value.clone())
    }
}

impl<M: Mask> PartialEq for Secret<M> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<M: Mask> Eq for Secret<M> {}

impl<M: Mask> fmt::Debug for Secret<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({:?})", self.masked())
    }
}

impl<M: Mask> fmt::Display for Secret<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

impl<M: Mask> Serialize for Secret<M> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.masked())
    }
}

impl<'de, M: Mask> Deserialize<'de> for Secret<M> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret::new)
    }
}

impl<M: Mask> From<&str> for Secret<M> {
    fn from(s: &str) -> Self {
        Secret::new(s)
    }
}

impl<M: Mask> From<String> for Secret<M> {
    fn from(s: String) -> Self {
        Secret::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_targets_and_header_lines_are_masked() {
        assert_eq!(
            mask_target("/orders?page=2&token=s3cr3t&apiKey=k"),
            "/orders?page=2&token=…&apiKey=…"
        );
        assert_eq!(mask_target("/orders/7"), "/orders/7");
        assert_eq!(
            mask_header_line("Authorization: Bearer abc"),
            "Authorization: …"
        );
        assert_eq!(mask_header_line("X-Api-Key:k1"), "X-Api-Key: …");
        assert_eq!(mask_header_line("cookie: sid=1"), "cookie: …");
        assert_eq!(
            mask_header_line("Content-Type: application/json"),
            "Content-Type: application/json"
        );
        assert_eq!(mask_header_line("Accept"), "Accept");
    }

    #[test]
    fn credentials_and_secret_parameters_are_masked() {
        assert_eq!(
            mask_url("http://scraper:hunter2@10.0.0.5:9100/metrics"),
            "http://scraper:…@10.0.0.5:9100/metrics"
        );
        assert_eq!(
            mask_url("https://ghp_abc123@host/metrics"),
            "https://…@host/metrics"
        );
        assert_eq!(
            mask_url("http://h/metrics?format=prom&Token=s3cr3t&ApiKey=k&x=1"),
            "http://h/metrics?format=prom&Token=…&ApiKey=…&x=1"
        );
        assert_eq!(
            mask_url("http://h/hook?access_token=a&PASSWORD=b&client_secret=c&api_key=d"),
            "http://h/hook?access_token=…&PASSWORD=…&client_secret=…&api_key=…"
        );
        let plain = "http://127.0.0.1:9101/metrics?name=orders";
        assert_eq!(mask_url(plain), plain);
        assert_eq!(mask_url("not a url"), "not a url");
        assert_eq!(mask_url("user:pw@nohost"), MASK);
    }

    #[test]
    fn a_secret_is_masked_wherever_it_is_formatted() {
        let hook: Secret<OriginOnly> =
            serde_json::from_str("\"https://hooks.slack.com/services/T0/B0/Xy7Zcanary\"").unwrap();
        assert_eq!(
            hook.expose(),
            "https://hooks.slack.com/services/T0/B0/Xy7Zcanary"
        );
        for shown in [
            format!("{hook}"),
            format!("{hook:?}"),
            format!("{:#?}", Some(&hook)),
            serde_json::to_string(&hook).unwrap(),
            serde_json::json!({ "url": hook }).to_string(),
        ] {
            assert!(!shown.contains("canary"), "{shown}");
            assert!(shown.contains("https://hooks.slack.com/…"), "{shown}");
        }
        assert!(hook.hides_something());
        let am: Secret<OriginOnly> = Secret::new("http://127.0.0.1:9093");
        assert_eq!(am.masked(), "http://127.0.0.1:9093/");
        assert_eq!(
            OriginOnly::mask("http://ops:pw@10.0.0.5:81/"),
            "http://10.0.0.5:81/…"
        );
        assert_eq!(OriginOnly::mask("garbage canary"), MASK);
        let target: Secret<Credentials> = Secret::new("http://u:canary@h:9/metrics?x=1");
        assert_eq!(
            format!("{target:?}"),
            "Secret(\"http://u:…@h:9/metrics?x=1\")"
        );
        assert_eq!(target, Secret::new("http://u:canary@h:9/metrics?x=1"));
        let plain: Secret<Credentials> = Secret::new("http://127.0.0.1:9100/metrics");
        assert!(!plain.hides_something());
    }
}
