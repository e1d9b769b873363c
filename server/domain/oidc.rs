//! Single sign-on with OpenID Connect: the `[oidc]` section of harrier.toml as written
//! ([`OidcConfig`]) and checked ([`Oidc`]), the role a person's groups give
//! ([`Oidc::role_for`]) and the user name their claims give ([`Oidc::user_name`]).
//!
//! Pure: no HTTP, no clock, no store. The flow itself (discovery, the authorization
//! request, the code exchange, the ID token checks) is `services::oidc`'s.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::domain::auth::{self, Role};
use crate::domain::secrets::{Hidden, Secret};

/// `[oidc]` in harrier.toml, as written.
///
/// ```toml
/// [oidc]
/// name = "Example SSO"                       # the sign-in button says "Sign in with Example SSO"
/// issuer = "https://sso.example.com/realms/main"
/// client_id = "harrier"
/// client_secret = "…"                        # or the environment's HARRIER_OIDC_CLIENT_SECRET
/// scopes = ["email", "profile", "groups"]    # "openid" is always asked for
/// groups_claim = "groups"                    # the ID token claim listing the person's groups
/// username_claim = "preferred_username"      # else email, else sub
/// default_role = "viewer"                    # omit: people in none of the groups are refused
///
/// [oidc.groups]                              # group → role; the highest role of a person's groups wins
/// "harrier-admins" = "admin"
/// "perf-team" = "editor"
/// ```
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    pub name: Option<String>,
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<Secret<Hidden>>,
    #[serde(default)]
    pub scopes: Vec<String>,
    pub groups_claim: Option<String>,
    pub username_claim: Option<String>,
    #[serde(default)]
    pub groups: BTreeMap<String, String>,
    pub default_role: Option<String>,
}

/// A checked [`OidcConfig`].
#[derive(Debug, Clone, PartialEq)]
pub struct Oidc {
    /// What the sign-in button names.
    pub name: String,
    /// The issuer URL as written (without a final `/`): discovery reads
    /// `{issuer}/.well-known/openid-configuration`, and ID tokens must name it as `iss`.
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<Secret<Hidden>>,
    /// Scopes asked for besides `openid`.
    pub scopes: Vec<String>,
    pub groups_claim: String,
    pub username_claim: String,
    /// Group name → role.
    pub groups: BTreeMap<String, Role>,
    /// The role of someone in none of `groups`; `None`: they are refused.
    pub default_role: Option<Role>,
}

impl Oidc {
    /// Checks the section: an `http(s)` issuer URL without query or fragment, a client id,
    /// role names. `env_secret` (`HARRIER_OIDC_CLIENT_SECRET`) stands in for a missing
    /// `client_secret`.
    pub fn from_config(c: &OidcConfig, env_secret: Option<String>) -> Result<Oidc, String> {
        let issuer = c.issuer.trim().trim_end_matches('/').to_string();
        let url = url::Url::parse(&issuer)
            .map_err(|_| format!("[oidc] issuer {:?}: not a URL", c.issuer))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!(
                "[oidc] issuer {:?}: must be an http:// or https:// URL with a host",
                c.issuer
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!(
                "[oidc] issuer {:?}: may have neither a query nor a fragment",
                c.issuer
            ));
        }
        if c.client_id.trim().is_empty() {
            return Err("[oidc] client_id: the id the provider gave harrier is needed".into());
        }
        let mut groups = BTreeMap::new();
        for (group, role) in &c.groups {
            let r = Role::parse(role).ok_or_else(|| {
                format!(
                    "[oidc.groups] {group:?} = {role:?}: expected viewer, operator, editor or admin"
                )
            })?;
            groups.insert(group.clone(), r);
        }
        let default_role = match &c.default_role {
            None => None,
            Some(r) => Some(Role::parse(r).ok_or_else(|| {
                format!("[oidc] default_role {r:?}: expected viewer, operator, editor or admin")
            })?),
        };
        if groups.is_empty() && default_role.is_none() {
            return Err(
                "[oidc]: nobody could sign in: map groups to roles under [oidc.groups] \
                 (\"perf-team\" = \"editor\") or set default_role"
                    .into(),
            );
        }
        let scopes = c
            .scopes
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty() && s != "openid")
            .collect();
        let name = c
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| url.host_str().unwrap_or("single sign-on").to_string());
        let secret = c
            .client_secret
            .clone()
            .filter(|s| !s.expose().is_empty())
            .or_else(|| env_secret.filter(|s| !s.is_empty()).map(Secret::new));
        Ok(Oidc {
            name,
            issuer,
            client_id: c.client_id.trim().to_string(),
            client_secret: secret,
            scopes,
            groups_claim: c.groups_claim.clone().unwrap_or_else(|| "groups".into()),
            username_claim: c
                .username_claim
                .clone()
                .unwrap_or_else(|| "preferred_username".into()),
            groups,
            default_role,
        })
    }

    /// The role of someone in `groups`: the highest role any of them maps to, else the
    /// default role; `None` when neither gives one (sign-in refused).
    pub fn role_for<'a>(&self, groups: impl IntoIterator<Item = &'a str>) -> Option<Role> {
        groups
            .into_iter()
            .filter_map(|g| self.groups.get(g.trim()).copied())
            .max()
            .or(self.default_role)
    }

    /// The harrier user name of someone with these claims (`claim(name)` gives a string
    /// claim of the ID token): `username_claim`, else `email`, else `sub` — the first that
    /// is a valid user name ([`auth::check_user_name`]), lowercased.
    pub fn user_name<'a>(&self, claim: impl Fn(&str) -> Option<&'a str>) -> Option<String> {
        [self.username_claim.as_str(), "email", "sub"]
            .into_iter()
            .filter_map(&claim)
            .map(str::trim)
            .find(|n| auth::check_user_name(n).is_ok())
            .map(auth::normalize_user_name)
    }
}

/// Groups as an ID token may carry them: a JSON array of strings, or one string of
/// comma-separated names.
pub fn groups_of(value: Option<&serde_json::Value>) -> Vec<String> {
    match value {
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str())
            .map(str::to_string)
            .collect(),
        Some(serde_json::Value::String(s)) => s
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// How long a started sign-in waits for the provider to send the person back, ms.
pub const LOGIN_TTL_MS: i64 = 10 * 60_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> OidcConfig {
        OidcConfig {
            issuer: "http://127.0.0.1:9400/".into(),
            client_id: "harrier".into(),
            groups: [
                ("ops".to_string(), "admin".to_string()),
                ("perf".to_string(), "Editor".to_string()),
            ]
            .into(),
            ..Default::default()
        }
    }

    #[test]
    fn groups_map_to_the_highest_role_or_the_default_or_nothing() {
        let o = Oidc::from_config(&config(), None).unwrap();
        assert_eq!(o.issuer, "http://127.0.0.1:9400");
        assert_eq!(o.name, "127.0.0.1");
        assert_eq!(o.groups_claim, "groups");
        assert_eq!(o.role_for(["dev", "perf"]), Some(Role::Editor));
        assert_eq!(o.role_for(["perf", "ops"]), Some(Role::Admin));
        assert_eq!(o.role_for(["perfx"]), None, "refused without default_role");
        let mut c = config();
        c.default_role = Some("viewer".into());
        let o = Oidc::from_config(&c, None).unwrap();
        assert_eq!(o.role_for([]), Some(Role::Viewer));
    }

    #[test]
    fn odd_sections_are_refused_with_the_key_named() {
        let bad = |f: fn(&mut OidcConfig)| {
            let mut c = config();
            f(&mut c);
            Oidc::from_config(&c, None).unwrap_err()
        };
        assert!(bad(|c| c.issuer = "sso.example.com".into()).contains("issuer"));
        assert!(bad(|c| c.issuer = "ftp://sso.example.com".into()).contains("issuer"));
        assert!(bad(|c| c.issuer = "https://sso.example.com/?x=1".into()).contains("query"));
        assert!(bad(|c| c.client_id = " ".into()).contains("client_id"));
        assert!(bad(|c| c.default_role = Some("root".into())).contains("root"));
        assert!(bad(|c| c.groups = [("g".into(), "owner".into())].into()).contains("owner"));
        assert!(bad(|c| c.groups.clear()).contains("default_role"));
    }

    #[test]
    fn the_secret_is_masked_and_may_come_from_the_environment() {
        let mut c = config();
        c.client_secret = Some(Secret::new("s3cret-value"));
        let o = Oidc::from_config(&c, Some("env".into())).unwrap();
        assert_eq!(o.client_secret.as_ref().unwrap().expose(), "s3cret-value");
        assert!(!format!("{o:?}").contains("s3cret"));
        let o = Oidc::from_config(&config(), Some("from-env".into())).unwrap();
        assert_eq!(o.client_secret.unwrap().expose(), "from-env");
    }

    #[test]
    fn user_names_come_from_the_first_usable_claim() {
        let o = Oidc::from_config(&config(), None).unwrap();
        let claims = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| *v)
        };
        assert_eq!(
            o.user_name(claims(&[("preferred_username", "Ana"), ("sub", "1")])),
            Some("ana".into())
        );
        assert_eq!(
            o.user_name(claims(&[
                ("preferred_username", "Ana Lopez"),
                ("email", "ana@x.org")
            ])),
            Some("ana@x.org".into())
        );
        assert_eq!(
            o.user_name(claims(&[("sub", "248289761001")])),
            Some("248289761001".into())
        );
        assert_eq!(o.user_name(claims(&[("sub", "a b")])), None);
        assert_eq!(
            groups_of(Some(&serde_json::json!(["a", "b", 3]))),
            vec!["a", "b"]
        );
        assert_eq!(groups_of(Some(&serde_json::json!("a, b"))), vec!["a", "b"]);
        assert!(groups_of(None).is_empty());
    }
}
