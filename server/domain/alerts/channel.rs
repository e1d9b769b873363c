//! Alert channels and their messages, pure: a channel's settings and validation
//! ([`ChannelSpec`], masked URLs), notification grouping keys and fingerprints
//! (Alertmanager's), the dedup rule of a group flush ([`needs_update`]), retry backoff, and
//! the payload of each channel kind:
//! - `webhook`: the Alertmanager webhook payload, version 4
//!   (<https://prometheus.io/docs/alerting/latest/configuration/#webhook_config>), one
//!   message per group flush, so anything that takes Alertmanager's webhooks takes ours;
//! - `slack`: a Slack incoming-webhook message (`text` and one attachment coloured by
//!   severity and state, with the summaries, the labels and a link to the console);
//! - `alertmanager`: `POST {url}/api/v2/alerts` as Prometheus does: firing alerts are
//!   re-sent every minute with `endsAt` = now + 4 × max(evaluation interval, 1 min),
//!   resolved ones once with `endsAt` = the resolution time; Alertmanager groups them.
//!
//! Sending, on a schedule, is [`crate::services::alerts::notify`]'s.

use serde::{Deserialize, Serialize};

use crate::domain::secrets::{OriginOnly, Secret};
use serde_json::{Value, json};

use super::rule::{Duration, Labels, Rule, render};
use super::silence::{Compiled, Matcher};

/// First retry after 1 s, doubling up to 5 min.
pub const BACKOFF_BASE_MS: i64 = 1_000;
pub const BACKOFF_MAX_MS: i64 = 300_000;

/// How often an alertmanager channel is sent the firing alerts again (Prometheus'
/// `--rules.alert.resend-delay`): 1 min.
pub const RESEND_DELAY_MS: i64 = 60_000;

/// The channel kinds.
pub const KINDS: [&str; 3] = ["webhook", "slack", "alertmanager"];

/// What stands for the hidden part of a masked URL (see [`ChannelSpec::masked_url`]).
pub const MASK: &str = crate::domain::secrets::MASK;

/// A channel that does not make sense: the field, as named in `[[alerts.channels]]` and
/// in the API's JSON (`url`, `matchers`, …), and what is expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ChannelError {
    pub field: &'static str,
    pub message: String,
}

fn default_kind() -> String {
    "webhook".into()
}

fn default_timeout_s() -> f64 {
    10.0
}

fn default_group_by() -> Vec<String> {
    vec!["alertname".into()]
}

fn default_group_wait() -> Duration {
    Duration(30_000)
}

fn default_group_interval() -> Duration {
    Duration(300_000)
}

fn default_repeat_interval() -> Duration {
    Duration(4 * 3_600_000)
}

fn yes() -> bool {
    true
}

/// `[[alerts.channels]]`: where notices go. Timing defaults are Alertmanager's.
///
/// ```toml
/// [[alerts.channels]]
/// name = "ops"
/// kind = "webhook"            # webhook | slack | alertmanager
/// url = "http://127.0.0.1:9095/hook"   # alertmanager: its base URL
/// matchers = ["severity=critical"]     # Alertmanager matcher syntax; none: every alert
/// group_by = ["alertname"]    # ["..."]: every label
/// group_wait = "30s"
/// group_interval = "5m"
/// repeat_interval = "4h"
/// send_resolved = true
/// timeout_s = 10
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSpec {
    pub name: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    /// Used in full to send; shown (formatted, serialized) as `scheme://host[:port]/…`.
    pub url: Secret<OriginOnly>,
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
    /// Alerts this channel gets: every matcher must match (none: every alert).
    #[serde(default)]
    pub matchers: Vec<String>,
    #[serde(default = "default_group_by")]
    pub group_by: Vec<String>,
    /// Wait before the first message of a new group (to gather its alerts).
    #[serde(default = "default_group_wait")]
    pub group_wait: Duration,
    /// Wait before a message about alerts added to a group already notified.
    #[serde(default = "default_group_interval")]
    pub group_interval: Duration,
    /// Wait before a message is sent again for a group whose alerts did not change.
    #[serde(default = "default_repeat_interval")]
    pub repeat_interval: Duration,
    /// Whether resolved alerts are notified.
    #[serde(default = "yes")]
    pub send_resolved: bool,
}

impl ChannelSpec {
    /// A channel of `kind` with every other setting at its default.
    pub fn new(name: &str, kind: &str, url: &str) -> ChannelSpec {
        ChannelSpec {
            name: name.into(),
            kind: kind.into(),
            url: url.into(),
            timeout_s: default_timeout_s(),
            matchers: Vec::new(),
            group_by: default_group_by(),
            group_wait: default_group_wait(),
            group_interval: default_group_interval(),
            repeat_interval: default_repeat_interval(),
            send_resolved: true,
        }
    }

    /// Checks the channel; the error names the field (as in `[[alerts.channels]]` and the
    /// API's JSON) and says what is expected.
    pub fn validate(&self) -> Result<(), ChannelError> {
        let err = |field: &'static str, message: String| Err(ChannelError { field, message });
        let name = self.name.as_str();
        if name.trim().is_empty() || name.chars().count() > 200 {
            return err("name", "must be 1 to 200 characters".into());
        }
        if name.trim() != name {
            return err(
                "name",
                format!("must not start or end with a space, got {name:?}"),
            );
        }
        if let Some(c) = name.chars().find(|c| c.is_control()) {
            return err("name", format!("must not hold the control character {c:?}"));
        }
        if !KINDS.contains(&self.kind.as_str()) {
            return err(
                "kind",
                format!(
                    "must be \"webhook\", \"slack\" or \"alertmanager\", got {:?}",
                    self.kind
                ),
            );
        }
        if self.url.expose().contains(MASK) {
            return err(
                "url",
                "is the masked URL shown by harrier; enter the full URL".into(),
            );
        }
        match url::Url::parse(self.url.expose()) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
            _ => {
                return err(
                    "url",
                    format!(
                        "must be an http:// or https:// URL with a host, got {:?}",
                        self.url
                    ),
                );
            }
        }
        if !(self.timeout_s > 0.0 && self.timeout_s <= 300.0) {
            return err(
                "timeout_s",
                format!("must be above 0 and at most 300, got {}", self.timeout_s),
            );
        }
        if let Err(e) = self.compiled_matchers() {
            return err("matchers", e);
        }
        if self.group_by.iter().any(|l| l.trim().is_empty()) {
            return err("group_by", "label names must not be empty".into());
        }
        if self.group_wait.ms() < 0 {
            return err("group_wait", "must not be negative".into());
        }
        if self.group_interval.ms() < 1 {
            return err("group_interval", "must be longer than 0".into());
        }
        if self.repeat_interval.ms() < 1 {
            return err("repeat_interval", "must be longer than 0".into());
        }
        Ok(())
    }

    /// The URL as answers and pages show it: only its scheme, host and port
    /// (`https://hooks.slack.com/…`): a Slack, Teams or Discord webhook's path is its
    /// token, and any URL may hold credentials.
    pub fn masked_url(&self) -> String {
        self.url.masked()
    }

    /// The channel as answers and pages show it (see [`ChannelSpec::masked_url`]).
    pub fn masked(&self) -> ChannelSpec {
        ChannelSpec {
            url: Secret::new(self.masked_url()),
            ..self.clone()
        }
    }

    /// The host (and port) the channel sends to: `hooks.slack.com`, `127.0.0.1:9093`.
    pub fn target_host(&self) -> String {
        url::Url::parse(self.url.expose())
            .ok()
            .and_then(|u| {
                let host = u.host_str()?.to_string();
                Some(match u.port() {
                    Some(p) => format!("{host}:{p}"),
                    None => host,
                })
            })
            .unwrap_or_default()
    }

    /// The matchers, parsed and compiled; the error names the bad one.
    pub fn compiled_matchers(&self) -> Result<Vec<Compiled>, String> {
        self.matchers
            .iter()
            .enumerate()
            .map(|(i, m)| {
                Matcher::parse(m)
                    .and_then(|m| m.compile())
                    .map_err(|e| format!("matchers[{i}]: {e}"))
            })
            .collect()
    }

    pub fn grouped(&self) -> bool {
        self.kind != "alertmanager"
    }
}

/// `config`'s channels, then the `stored` ones not named like one of them (a stored
/// channel never shadows one of `harrier.toml`; the API refuses such names, and `serve`
/// deletes stored ones that a later `harrier.toml` took the name of) and that validate.
pub fn merge_channels(
    config: &[ChannelSpec],
    stored: impl IntoIterator<Item = ChannelSpec>,
) -> Vec<ChannelSpec> {
    let mut out = config.to_vec();
    for c in stored {
        if config.iter().any(|o| o.name == c.name) {
            continue;
        }
        if let Err(e) = c.validate() {
            tracing::error!(channel = %c.name, error = %e, "stored alert channel invalid; skipped");
            continue;
        }
        out.push(c);
    }
    out
}

/// The `alertname` of the synthetic alert of a test notification.
pub const TEST_ALERTNAME: &str = "HarrierTest";

/// How long the test alert sent to an `alertmanager` channel lasts: 5 min (Alertmanager
/// resolves it by itself then).
pub const TEST_ENDS_AFTER_MS: i64 = 5 * 60_000;

/// Delay before retry number `attempts` (1 = after the first failure): 1 s, 2 s, 4 s, …
/// capped at 5 min.
pub fn backoff_ms(attempts: i64) -> i64 {
    let exp = (attempts - 1).clamp(0, 20) as u32;
    BACKOFF_BASE_MS.saturating_mul(1 << exp).min(BACKOFF_MAX_MS)
}

/// Alertmanager's fingerprint of a label set: FNV-1a 64 over the sorted names and values,
/// each followed by the 0xff separator (prometheus/common `model.LabelSet.Fingerprint`),
/// as 16 hex digits.
pub fn fingerprint(labels: &Labels) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut add = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    };
    for (k, v) in labels {
        k.bytes().for_each(&mut add);
        add(0xff);
        v.bytes().for_each(&mut add);
        add(0xff);
    }
    format!("{h:016x}")
}

/// The idempotency key of one group notification, sent as the `Idempotency-Key` header:
/// the same for every attempt at the same notice — a retry after a failed send, or a
/// resend after a crash between the send and its record (delivery is at least once) — and
/// different for every other message: the next notice of the group (a re-notify follows a
/// recorded notification), a resolved notice (other alerts resolved), and the first notice
/// of a later episode of the same alerts (each alert is named with the time its episode
/// began, so a group that resolved, was removed and fires again gets a new key). Derived
/// from the database's installation key (a random value kept in the database: two
/// databases whose alerts fire alike still send different keys, the replicas of one send the
/// same), the channel, the group, the group's last recorded notification (`notified_at_ms`)
/// and the `(fingerprint, starts_at_ms)` of the firing and resolved alerts sent: FNV-1a 64
/// as hex, like [`fingerprint`].
pub fn notification_key(
    installation: &str,
    channel: &str,
    group_key: &str,
    notified_at_ms: Option<i64>,
    firing: &[(&str, i64)],
    resolved: &[(&str, i64)],
) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut add = |bytes: &[u8]| {
        for b in bytes.iter().chain([0xff].iter()) {
            h ^= *b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    };
    add(installation.as_bytes());
    add(channel.as_bytes());
    add(group_key.as_bytes());
    add(&notified_at_ms.unwrap_or(-1).to_le_bytes());
    let mut sorted = firing.to_vec();
    sorted.sort();
    for (fp, starts) in sorted {
        add(fp.as_bytes());
        add(&starts.to_le_bytes());
    }
    add(b"resolved");
    let mut sorted = resolved.to_vec();
    sorted.sort();
    for (fp, starts) in sorted {
        add(fp.as_bytes());
        add(&starts.to_le_bytes());
    }
    format!("{h:016x}")
}

/// RFC 3339 UTC to the second, as Alertmanager writes it; `0001-01-01T00:00:00Z` for none.
pub fn rfc3339(ms: Option<i64>) -> String {
    let Some(ms) = ms else {
        return "0001-01-01T00:00:00Z".into();
    };
    let fmt = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| t.format(fmt).ok())
        .unwrap_or_else(|| "0001-01-01T00:00:00Z".into())
}

/// A group's labels and key for an alert with `labels` under `group_by` (`["..."]`: every
/// label; labels the alert lacks are left out). The key is Alertmanager's:
/// `{}:{alertname="X", route="/a"}`.
pub fn group_key(labels: &Labels, group_by: &[String]) -> (String, Labels) {
    let group: Labels = if group_by.iter().any(|l| l == "...") {
        labels.clone()
    } else {
        labels
            .iter()
            .filter(|(k, _)| group_by.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let inner: Vec<String> = group.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    (format!("{{}}:{{{}}}", inner.join(", ")), group)
}

/// Alertmanager's `DedupStage.needsUpdate`: whether a flush of `group` with these
/// firing and resolved alerts (fingerprints, silenced ones left out) sends a message.
pub fn needs_update(
    group: &Group,
    firing: &[String],
    resolved: &[String],
    send_resolved: bool,
    repeat_ms: i64,
    now_ms: i64,
) -> bool {
    let Some(notified_at) = group.notified_at_ms else {
        return !firing.is_empty();
    };
    if !firing.iter().all(|f| group.notified_firing.contains(f)) {
        return true;
    }
    if firing.is_empty() {
        // All resolved: tell the receiver if it was told of firing alerts.
        return !group.notified_firing.is_empty();
    }
    if send_resolved && !resolved.iter().all(|r| group.notified_resolved.contains(r)) {
        return true;
    }
    notified_at < now_ms - repeat_ms
}

/// One alert as the receivers see it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutAlert {
    /// `firing` or `resolved`.
    pub status: &'static str,
    pub labels: Labels,
    pub annotations: Labels,
    pub starts_at_ms: i64,
    pub ends_at_ms: Option<i64>,
    pub generator_url: String,
    pub fingerprint: String,
}

impl OutAlert {
    /// `a` with its annotations rendered from `rule` (the rule's `summary` and
    /// `description` templates).
    pub fn new(a: &GroupAlert, rule: Option<&Rule>, external_url: &str) -> OutAlert {
        let mut annotations = Labels::new();
        if let Some(r) = rule {
            if let Some(t) = &r.summary {
                annotations.insert("summary".into(), render(t, r, &a.labels, a.value));
            }
            if let Some(t) = &r.description {
                annotations.insert("description".into(), render(t, r, &a.labels, a.value));
            }
        }
        OutAlert {
            status: if a.ends_at_ms.is_some() {
                "resolved"
            } else {
                "firing"
            },
            labels: a.labels.clone(),
            annotations,
            starts_at_ms: a.starts_at_ms,
            ends_at_ms: a.ends_at_ms,
            generator_url: format!("{external_url}/api/v1/alert-rules/{}", a.rule),
            fingerprint: a.fingerprint.clone(),
        }
    }
}

/// The pairs every map holds with the same value.
fn common(maps: impl Iterator<Item = Labels>) -> Labels {
    let mut out: Option<Labels> = None;
    for m in maps {
        out = Some(match out {
            None => m,
            Some(c) => c.into_iter().filter(|(k, v)| m.get(k) == Some(v)).collect(),
        });
    }
    out.unwrap_or_default()
}

/// The Alertmanager webhook v4 body for one group message (the shape of
/// `fixtures/generated/alertmanager/`): `status` is `firing` while any alert fires;
/// `commonLabels` / `commonAnnotations` the pairs shared by all alerts.
pub fn webhook_payload(
    receiver: &str,
    group_key: &str,
    group_labels: &Labels,
    alerts: &[OutAlert],
    external_url: &str,
) -> Value {
    let status = if alerts.iter().any(|a| a.status == "firing") {
        "firing"
    } else {
        "resolved"
    };
    let items: Vec<Value> = alerts
        .iter()
        .map(|a| {
            json!({
                "status": a.status,
                "labels": a.labels,
                "annotations": a.annotations,
                "startsAt": rfc3339(Some(a.starts_at_ms)),
                "endsAt": rfc3339(a.ends_at_ms),
                "generatorURL": a.generator_url,
                "fingerprint": a.fingerprint,
            })
        })
        .collect();
    json!({
        "receiver": receiver,
        "status": status,
        "alerts": items,
        "groupLabels": group_labels,
        "commonLabels": common(alerts.iter().map(|a| a.labels.clone())),
        "commonAnnotations": common(alerts.iter().map(|a| a.annotations.clone())),
        "externalURL": external_url,
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
    })
}

/// Slack attachment colour: resolved green, firing critical red, warning amber, other
/// severities blue.
pub fn slack_colour(alerts: &[OutAlert]) -> &'static str {
    let firing: Vec<&OutAlert> = alerts.iter().filter(|a| a.status == "firing").collect();
    if firing.is_empty() {
        return "#2eb886";
    }
    let sev = |s: &str| {
        firing
            .iter()
            .any(|a| a.labels.get("severity").map(String::as_str) == Some(s))
    };
    if sev("critical") || sev("page") {
        "#d63232"
    } else if sev("warning") {
        "#daa038"
    } else {
        "#439fe0"
    }
}

/// A Slack incoming-webhook body for one group message
/// (<https://api.slack.com/messaging/webhooks>): `text` is the title (`[FIRING:2]
/// CheckoutErrors`), one attachment coloured by [`slack_colour`] with the title linked to
/// the console's alerts page, each alert's summary and labels, and the group's labels as
/// fields.
pub fn slack_payload(group_labels: &Labels, alerts: &[OutAlert], external_url: &str) -> Value {
    let firing = alerts.iter().filter(|a| a.status == "firing").count();
    let state = if firing > 0 {
        format!("FIRING:{firing}")
    } else {
        "RESOLVED".into()
    };
    let name = group_labels
        .get("alertname")
        .or_else(|| alerts.first().and_then(|a| a.labels.get("alertname")))
        .cloned()
        .unwrap_or_default();
    let title = format!("[{state}] {name}");
    let mut text = String::new();
    for a in alerts {
        let summary = a
            .annotations
            .get("summary")
            .cloned()
            .unwrap_or_else(|| a.labels.get("alertname").cloned().unwrap_or_default());
        let labels: Vec<String> = a
            .labels
            .iter()
            .filter(|(k, _)| k.as_str() != "alertname")
            .map(|(k, v)| format!("`{k}={v}`"))
            .collect();
        let mark = if a.status == "firing" { "🔥" } else { "✅" };
        text.push_str(&format!("{mark} *{summary}*\n{}\n", labels.join(" ")));
    }
    let fields: Vec<Value> = group_labels
        .iter()
        .map(|(k, v)| json!({"title": k, "value": v, "short": true}))
        .collect();
    json!({
        "text": title,
        "attachments": [{
            "color": slack_colour(alerts),
            "title": title,
            "title_link": format!("{external_url}/console/alerts"),
            "text": text.trim_end(),
            "fields": fields,
            "footer": "harrier",
            "mrkdwn_in": ["text"],
        }],
    })
}

/// Alertmanager's `POST /api/v2/alerts` body
/// (<https://github.com/prometheus/alertmanager/blob/main/api/v2/openapi.yaml>, the
/// `postableAlerts` shape): firing alerts end at `firing_ends_at_ms`, resolved ones at
/// their resolution time.
pub fn alertmanager_payload(alerts: &[OutAlert], firing_ends_at_ms: i64) -> Value {
    Value::Array(
        alerts
            .iter()
            .map(|a| {
                json!({
                    "labels": a.labels,
                    "annotations": a.annotations,
                    "startsAt": rfc3339_ms(a.starts_at_ms),
                    "endsAt": rfc3339_ms(a.ends_at_ms.unwrap_or(firing_ends_at_ms)),
                    "generatorURL": a.generator_url,
                })
            })
            .collect(),
    )
}

/// RFC 3339 UTC with milliseconds (Alertmanager's API takes fractional seconds).
pub fn rfc3339_ms(ms: i64) -> String {
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time::OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000)
        .ok()
        .and_then(|t| t.format(fmt).ok())
        .unwrap_or_else(|| "0001-01-01T00:00:00Z".into())
}

/// A group as the dispatcher sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub channel: String,
    pub group_key: String,
    pub group_labels: Labels,
    pub created_at_ms: i64,
    pub next_flush_ms: i64,
    /// The last notification (Alertmanager's notification log): when, and the
    /// fingerprints of its firing and resolved alerts. `None`: never notified.
    pub notified_at_ms: Option<i64>,
    pub notified_firing: Vec<String>,
    pub notified_resolved: Vec<String>,
    /// Failed attempts of the current flush.
    pub attempts: i64,
}

/// An alert in a group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupAlert {
    pub fingerprint: String,
    pub rule: String,
    pub labels: Labels,
    pub value: Option<f64>,
    pub starts_at_ms: i64,
    /// `None` while firing.
    pub ends_at_ms: Option<i64>,
    /// It was (or was about to be) sent while firing: pushed to Alertmanager, or in a
    /// message to another channel whose sending began (the receiver may know of it).
    pub notified: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notification_keys_name_one_message_of_one_episode() {
        let key = |notified, firing: &[(&str, i64)], resolved: &[(&str, i64)]| {
            notification_key(
                "db1",
                "ops",
                "{}:{rule=\"errors\"}",
                notified,
                firing,
                resolved,
            )
        };
        let first = key(None, &[("a1", 1_000)], &[]);
        // A resend of the very message (after a crash) has the same key.
        assert_eq!(first, key(None, &[("a1", 1_000)], &[]));
        // The next episode of the same alert, in a group made anew: another key.
        assert_ne!(first, key(None, &[("a1", 90_000)], &[]));
        // A re-notify of the same episode, and its resolved notice: other keys.
        let renotify = key(Some(5_000), &[("a1", 1_000)], &[]);
        let resolved = key(Some(5_000), &[], &[("a1", 1_000)]);
        assert_ne!(first, renotify);
        assert_ne!(renotify, resolved);
        assert_ne!(first, resolved);
        // The same message from another database: another key.
        assert_ne!(
            first,
            notification_key(
                "db2",
                "ops",
                "{}:{rule=\"errors\"}",
                None,
                &[("a1", 1_000)],
                &[]
            )
        );
        // The order of the alerts does not matter.
        assert_eq!(
            key(None, &[("a1", 1), ("b2", 2)], &[]),
            key(None, &[("b2", 2), ("a1", 1)], &[])
        );
    }
}
