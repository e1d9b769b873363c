//! Secrets inside URLs: how a scrape-target or webhook URL is shown.
//!
//! Owns [`mask_url`], the one rule every answer, page and log line uses for the URLs of
//! targets and channels: a password (`user:…@`), a user name standing alone (a token used
//! as one, `https://…@host`) and the values of secret-looking query parameters
//! (`?token=…`) are replaced by [`MASK`]. The URL is stored and used in full; only what
//! is shown is masked. Must not do I/O.

use serde::Serializer;

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

fn decode(name: &str) -> String {
    form_urlencoded::parse(format!("{name}=").as_bytes())
        .next()
        .map_or_else(|| name.to_string(), |(k, _)| k.into_owned())
}

/// Serializes a URL field masked (see [`mask_url`]): for `#[serde(serialize_with)]` on
/// fields that answers and live events carry.
pub fn serialize_masked_url<S: Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&mask_url(url))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
