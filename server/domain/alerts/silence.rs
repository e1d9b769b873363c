//! Label matchers and silences, after Alertmanager's model
//! (<https://prometheus.io/docs/alerting/latest/alertmanager/#silences>).
//!
//! A matcher is `name OP value` with `OP` one of `=`, `!=`, `=~`, `!~`; regexes are fully
//! anchored (`^(?:value)$`) and a label the alert lacks counts as the empty string, as in
//! Alertmanager. A silence mutes every alert whose labels match all its matchers between
//! `starts_at_ms` and `ends_at_ms`. Silenced alerts are still evaluated and listed; only
//! their notifications are held back.
//!
//! Owns parsing, validation and matching; no SQL, no HTTP, no clock.

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::rule::Labels;

/// How a matcher compares a label's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MatchOp {
    #[serde(rename = "=")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = "=~")]
    Re,
    #[serde(rename = "!~")]
    NotRe,
}

impl MatchOp {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchOp::Eq => "=",
            MatchOp::Ne => "!=",
            MatchOp::Re => "=~",
            MatchOp::NotRe => "!~",
        }
    }
}

/// One label matcher: `{"name": "severity", "value": "critical", "op": "="}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    pub name: String,
    pub value: String,
    pub op: MatchOp,
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{:?}", self.name, self.op.as_str(), self.value)
    }
}

fn label_name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Matcher {
    /// Parses Alertmanager's matcher syntax: `severity=critical`, `route=~"/api/.*"`,
    /// `service!="orders"` (the value may be double-quoted, with `\"` and `\\` escapes).
    pub fn parse(text: &str) -> Result<Matcher, String> {
        let t = text.trim();
        let at = t.find(['=', '!']).ok_or_else(|| {
            format!("{text:?}: expected name=value, name!=value, name=~regex or name!~regex")
        })?;
        let name = t[..at].trim();
        let rest = &t[at..];
        let (op, value) = if let Some(v) = rest.strip_prefix("=~") {
            (MatchOp::Re, v)
        } else if let Some(v) = rest.strip_prefix("!~") {
            (MatchOp::NotRe, v)
        } else if let Some(v) = rest.strip_prefix("!=") {
            (MatchOp::Ne, v)
        } else if let Some(v) = rest.strip_prefix('=') {
            (MatchOp::Eq, v)
        } else {
            return Err(format!("{text:?}: expected =, !=, =~ or !~ after {name:?}"));
        };
        let value = value.trim();
        let value = match value.strip_prefix('"') {
            Some(q) => {
                let inner = q
                    .strip_suffix('"')
                    .ok_or_else(|| format!("{text:?}: the quoted value is not closed"))?;
                inner.replace("\\\"", "\"").replace("\\\\", "\\")
            }
            None => value.to_string(),
        };
        let m = Matcher {
            name: name.to_string(),
            value,
            op,
        };
        m.validate().map_err(|e| format!("{text:?}: {e}"))?;
        Ok(m)
    }

    /// Checks the label name and, for `=~` / `!~`, that the value is a valid regex.
    pub fn validate(&self) -> Result<(), String> {
        if !label_name_ok(&self.name) {
            return Err(format!(
                "name {:?} is not a label name (letters, digits, _; not starting with a digit)",
                self.name
            ));
        }
        if matches!(self.op, MatchOp::Re | MatchOp::NotRe) {
            anchored(&self.value).map_err(|e| format!("bad regex {:?}: {e}", self.value))?;
        }
        Ok(())
    }

    /// Compiles the matcher for repeated use.
    pub fn compile(&self) -> Result<Compiled, String> {
        self.validate()?;
        let re = match self.op {
            MatchOp::Re | MatchOp::NotRe => Some(anchored(&self.value).map_err(|e| e.to_string())?),
            _ => None,
        };
        Ok(Compiled {
            name: self.name.clone(),
            value: self.value.clone(),
            op: self.op,
            re,
        })
    }

    /// Whether `labels` satisfy this matcher (a missing label is the empty string).
    pub fn matches(&self, labels: &Labels) -> bool {
        self.compile().is_ok_and(|c| c.matches(labels))
    }
}

fn anchored(re: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?:{re})$"))
}

/// A matcher with its regex compiled.
#[derive(Debug, Clone)]
pub struct Compiled {
    name: String,
    value: String,
    op: MatchOp,
    re: Option<Regex>,
}

impl Compiled {
    pub fn matches(&self, labels: &Labels) -> bool {
        let v = labels.get(&self.name).map_or("", String::as_str);
        match (self.op, &self.re) {
            (MatchOp::Eq, _) => v == self.value,
            (MatchOp::Ne, _) => v != self.value,
            (MatchOp::Re, Some(re)) => re.is_match(v),
            (MatchOp::NotRe, Some(re)) => !re.is_match(v),
            _ => false,
        }
    }
}

/// Whether every matcher matches (an empty list matches everything).
pub fn all_match(matchers: &[Compiled], labels: &Labels) -> bool {
    matchers.iter().all(|m| m.matches(labels))
}

/// A silence, as stored and as `GET /api/v1/silences` shows it (with `state`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Silence {
    pub id: i64,
    pub matchers: Vec<Matcher>,
    pub starts_at_ms: i64,
    pub ends_at_ms: i64,
    pub comment: String,
    pub created_by: String,
    /// `pending` (starts later), `active` or `expired`, at the time of the listing.
    pub state: &'static str,
}

impl Silence {
    /// The state at `now_ms`: `pending` before `starts_at_ms`, `expired` from `ends_at_ms`.
    pub fn state_at(starts_at_ms: i64, ends_at_ms: i64, now_ms: i64) -> &'static str {
        if now_ms >= ends_at_ms {
            "expired"
        } else if now_ms < starts_at_ms {
            "pending"
        } else {
            "active"
        }
    }
}

/// The silences in force at one time, compiled: which of them mute an alert.
#[derive(Debug, Default)]
pub struct Muter {
    silences: Vec<(i64, Vec<Compiled>)>,
}

impl Muter {
    /// Keeps the silences active at `now_ms` (a stored silence that no longer compiles is
    /// left out).
    pub fn new(silences: &[Silence], now_ms: i64) -> Muter {
        Muter {
            silences: silences
                .iter()
                .filter(|s| Silence::state_at(s.starts_at_ms, s.ends_at_ms, now_ms) == "active")
                .filter_map(|s| {
                    let c: Result<Vec<Compiled>, String> =
                        s.matchers.iter().map(Matcher::compile).collect();
                    Some((s.id, c.ok()?))
                })
                .collect(),
        }
    }

    /// Ids of the silences muting an alert with these labels (`alertname`, `severity`
    /// and the subject's labels), ascending.
    pub fn silenced_by(&self, labels: &Labels) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .silences
            .iter()
            .filter(|(_, m)| all_match(m, labels))
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    pub fn is_empty(&self) -> bool {
        self.silences.is_empty()
    }
}

/// `POST /api/v1/silences` body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSilence {
    #[serde(default)]
    pub matchers: Vec<Matcher>,
    #[serde(default)]
    pub starts_at_ms: Option<i64>,
    #[serde(default)]
    pub ends_at_ms: Option<i64>,
    /// Instead of `ends_at_ms`: `"2h"`, counted from the start.
    #[serde(default)]
    pub duration: Option<String>,
    #[serde(default)]
    pub comment: Option<String>,
    #[serde(default)]
    pub created_by: Option<String>,
}

/// A checked silence to store: `(matchers, starts_at_ms, ends_at_ms, comment, created_by)`.
#[derive(Debug, Clone, PartialEq)]
pub struct SilenceSpec {
    pub matchers: Vec<Matcher>,
    pub starts_at_ms: i64,
    pub ends_at_ms: i64,
    pub comment: String,
    pub created_by: String,
}

impl NewSilence {
    /// Checks the request at `now_ms`; the error names the field: no matchers, a bad
    /// matcher or regex, neither or both of `ends_at_ms` and `duration`, an end not after
    /// the start, an empty comment.
    pub fn check(self, now_ms: i64) -> Result<SilenceSpec, String> {
        if self.matchers.is_empty() {
            return Err("matchers: at least one matcher is required".into());
        }
        for (i, m) in self.matchers.iter().enumerate() {
            m.validate().map_err(|e| format!("matchers[{i}]: {e}"))?;
        }
        // Alertmanager refuses silences that would match every alert.
        let empty = Labels::new();
        if self.matchers.iter().all(|m| m.matches(&empty)) {
            return Err(
                "matchers: at least one matcher must not match the empty string (it would silence every alert)"
                    .into(),
            );
        }
        let starts_at_ms = self.starts_at_ms.unwrap_or(now_ms);
        if starts_at_ms < 0 {
            return Err(format!("starts_at_ms: must be unix ms, got {starts_at_ms}"));
        }
        let ends_at_ms = match (self.ends_at_ms, self.duration.as_deref()) {
            (Some(_), Some(_)) => {
                return Err("ends_at_ms, duration: give one of the two, not both".into());
            }
            (None, None) => return Err("ends_at_ms or duration: one of the two is required".into()),
            (Some(e), None) => e,
            (None, Some(d)) => {
                let ms = super::rule::Duration::parse(d)
                    .map_err(|e| format!("duration: {e}"))?
                    .ms();
                if ms <= 0 {
                    return Err(format!("duration: must be longer than 0, got {d:?}"));
                }
                starts_at_ms.saturating_add(ms)
            }
        };
        if ends_at_ms <= starts_at_ms {
            return Err(format!(
                "ends_at_ms: the end ({ends_at_ms}) must be after the start ({starts_at_ms})"
            ));
        }
        if ends_at_ms <= now_ms {
            return Err(format!("ends_at_ms: the end ({ends_at_ms}) is in the past"));
        }
        let comment = self.comment.unwrap_or_default();
        if comment.trim().is_empty() {
            return Err("comment: required, say why the alerts are silenced".into());
        }
        Ok(SilenceSpec {
            matchers: self.matchers,
            starts_at_ms,
            ends_at_ms,
            comment,
            created_by: self.created_by.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn matchers_parse_in_alertmanager_syntax() {
        let m = Matcher::parse("severity=critical").unwrap();
        assert_eq!(
            (m.name.as_str(), m.op, m.value.as_str()),
            ("severity", MatchOp::Eq, "critical")
        );
        let m = Matcher::parse(r#"route=~"/api/.*""#).unwrap();
        assert_eq!((m.op, m.value.as_str()), (MatchOp::Re, "/api/.*"));
        assert_eq!(Matcher::parse("service!=orders").unwrap().op, MatchOp::Ne);
        assert_eq!(Matcher::parse(r#"x!~"a|b""#).unwrap().op, MatchOp::NotRe);
        assert!(Matcher::parse("severity").unwrap_err().contains("expected"));
        assert!(
            Matcher::parse("route=~\"(\"")
                .unwrap_err()
                .contains("bad regex")
        );
        assert!(Matcher::parse("1x=a").unwrap_err().contains("label name"));
        assert!(Matcher::parse("a=\"b").unwrap_err().contains("not closed"));
    }

    #[test]
    fn regexes_are_fully_anchored_and_missing_labels_are_empty() {
        let l = labels(&[("route", "/api/orders"), ("service", "orders")]);
        assert!(Matcher::parse("route=~/api/.*").unwrap().matches(&l));
        assert!(
            !Matcher::parse("route=~/api").unwrap().matches(&l),
            "anchored: a prefix is not a match"
        );
        assert!(Matcher::parse("route!~/api").unwrap().matches(&l));
        assert!(
            Matcher::parse("team=").unwrap().matches(&l),
            "missing = empty"
        );
        assert!(!Matcher::parse("team=~.+").unwrap().matches(&l));
        assert!(Matcher::parse("service!=billing").unwrap().matches(&l));
    }

    #[test]
    fn silences_mute_only_while_active() {
        let s = Silence {
            id: 7,
            matchers: vec![
                Matcher::parse("alertname=HighErrors").unwrap(),
                Matcher::parse("route=~/check.*").unwrap(),
            ],
            starts_at_ms: 100,
            ends_at_ms: 200,
            comment: "deploy".into(),
            created_by: String::new(),
            state: "active",
        };
        let hit = labels(&[("alertname", "HighErrors"), ("route", "/checkout")]);
        let miss = labels(&[("alertname", "HighErrors"), ("route", "/search")]);
        let during = Muter::new(std::slice::from_ref(&s), 150);
        assert_eq!(during.silenced_by(&hit), [7]);
        assert!(during.silenced_by(&miss).is_empty());
        assert!(
            Muter::new(std::slice::from_ref(&s), 99)
                .silenced_by(&hit)
                .is_empty()
        );
        assert!(
            Muter::new(std::slice::from_ref(&s), 200)
                .silenced_by(&hit)
                .is_empty()
        );
        assert_eq!(Silence::state_at(100, 200, 50), "pending");
        assert_eq!(Silence::state_at(100, 200, 200), "expired");
    }

    #[test]
    fn new_silences_name_the_bad_field() {
        let ok = || NewSilence {
            matchers: vec![Matcher::parse("route=/checkout").unwrap()],
            starts_at_ms: None,
            ends_at_ms: None,
            duration: Some("2h".into()),
            comment: Some("deploy".into()),
            created_by: None,
        };
        let s = ok().check(1_000).unwrap();
        assert_eq!((s.starts_at_ms, s.ends_at_ms), (1_000, 1_000 + 7_200_000));
        let err = |f: fn(&mut NewSilence)| {
            let mut n = ok();
            f(&mut n);
            n.check(1_000).unwrap_err()
        };
        assert!(err(|n| n.matchers.clear()).starts_with("matchers"));
        assert!(
            err(|n| {
                n.matchers[0].op = MatchOp::Re;
                n.matchers[0].value = "(".into();
            })
            .contains("bad regex")
        );
        assert!(err(|n| n.matchers[0].value = String::new()).contains("every alert"));
        assert!(err(|n| n.duration = None).starts_with("ends_at_ms or duration"));
        assert!(err(|n| n.ends_at_ms = Some(5_000)).contains("not both"));
        assert!(
            err(|n| {
                n.duration = None;
                n.starts_at_ms = Some(10_000);
                n.ends_at_ms = Some(9_000);
            })
            .starts_with("ends_at_ms")
        );
        assert!(err(|n| n.duration = Some("soon".into())).starts_with("duration"));
        assert!(err(|n| n.comment = Some(" ".into())).starts_with("comment"));
    }
}
