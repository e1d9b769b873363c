//! Threshold alerts, pure: rules over subject sets ([`rule`]), their evaluation
//! ([`eval`]: inactive → pending → firing → resolved, after Prometheus'
//! `rules/alerting.go`), rule unit tests ([`ruletest`]), silences and label matchers
//! ([`silence`]), and channels with their messages, grouped as Alertmanager does
//! ([`channel`]).
//!
//! Owns the rule model, the state machine and the `[alerts]` settings. The engine that
//! reads the store and sends is [`crate::services::alerts`]; SQL lives in
//! [`crate::store`], HTTP in [`crate::http::api::alerts`].

pub mod channel;
pub mod eval;
pub mod rule;
pub mod ruletest;
pub mod silence;

use serde::{Deserialize, Serialize};

use self::eval::Alert;
use self::rule::{Duration, Labels, Rule};

/// Default time between evaluations: 15 s (Prometheus' default `evaluation_interval`).
pub const DEFAULT_EVALUATION_INTERVAL_MS: i64 = 15_000;

fn default_interval() -> Duration {
    Duration(DEFAULT_EVALUATION_INTERVAL_MS)
}

fn yes() -> bool {
    true
}

/// `[alerts]` in `harrier.toml`.
///
/// ```toml
/// [alerts]
/// evaluation_interval = "15s"
/// builtin_rules = true        # the two route error-rate rules (see Rule::defaults)
///
/// [[alerts.rules]]            # same shape as POST /api/v1/alert-rules
/// name = "CheckoutSlow"
/// subject = { route = "/checkout*" }
/// measure = "p95_ms"
/// comparison = ">"
/// threshold = 800
/// for = "2m"
///
/// [[alerts.channels]]         # Alertmanager-compatible webhook
/// name = "ops"
/// url = "http://127.0.0.1:9095/hook"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertsConfig {
    #[serde(default = "default_interval")]
    pub evaluation_interval: Duration,
    #[serde(default = "yes")]
    pub builtin_rules: bool,
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Where notices go (see [`channel::ChannelSpec`]).
    #[serde(default)]
    pub channels: Vec<channel::ChannelSpec>,
    /// harrier's address as seen by the receivers (`externalURL` in webhook messages);
    /// default `http://` + the listen address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_url: Option<String>,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        AlertsConfig {
            evaluation_interval: default_interval(),
            builtin_rules: true,
            rules: Vec::new(),
            channels: Vec::new(),
            external_url: None,
        }
    }
}

impl AlertsConfig {
    /// Checks the interval (1 s to 1 h) and every rule; names must be unique.
    pub fn validate(&self) -> Result<(), String> {
        let ms = self.evaluation_interval.ms();
        if !(1000..=3_600_000).contains(&ms) {
            return Err(format!(
                "alerts.evaluation_interval must be from 1s to 1h, got {}",
                self.evaluation_interval
            ));
        }
        for (i, r) in self.rules.iter().enumerate() {
            r.validate()
                .map_err(|e| format!("alerts.rules[{i}]: {e}"))?;
            if self.rules[..i].iter().any(|o| o.name == r.name) {
                return Err(format!(
                    "alerts.rules[{i}]: the name {:?} is used twice",
                    r.name
                ));
            }
        }
        for (i, c) in self.channels.iter().enumerate() {
            c.validate()
                .map_err(|e| format!("alerts.channels[{i}] ({}): {e}", c.name))?;
            if self.channels[..i].iter().any(|o| o.name == c.name) {
                return Err(format!(
                    "alerts.channels[{i}]: the name {:?} is used twice",
                    c.name
                ));
            }
        }
        Ok(())
    }
}

/// An active alert as the API and the live events show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertView {
    pub rule: String,
    pub labels: Labels,
    /// `pending` or `firing` (`resolved` in an `alert_resolved` event).
    pub state: String,
    /// The last measured value (the rule's measure over its window); `null` if none.
    pub value: Option<f64>,
    /// When the condition became true, unix ms.
    pub active_since_ms: i64,
    /// When it fired, unix ms.
    pub fired_at_ms: Option<i64>,
    pub severity: String,
    /// The rule's summary template, rendered.
    pub summary: Option<String>,
    /// Ids of the silences muting this alert (empty when none): it is still evaluated
    /// and listed, but not notified.
    pub silenced_by: Vec<i64>,
}

impl AlertView {
    /// The view of `alert` under `rule` (when the rule is known); `muter` holds the
    /// silences in force. `labels` include `alertname` (and `severity` when the rule is
    /// known), as the channels and silences see them.
    pub fn new(alert: &Alert, rule: Option<&Rule>, muter: &silence::Muter) -> AlertView {
        let labels = alert_labels(&alert.rule, &alert.labels, rule);
        AlertView {
            silenced_by: muter.silenced_by(&labels),
            rule: alert.rule.clone(),
            labels,
            state: alert.state.as_str().to_string(),
            value: alert.value.filter(|v| v.is_finite()),
            active_since_ms: alert.active_since_ms,
            fired_at_ms: alert.fired_at_ms,
            severity: rule.map(|r| r.severity.clone()).unwrap_or_default(),
            summary: rule.and_then(|r| {
                r.summary
                    .as_deref()
                    .map(|t| rule::render(t, r, &alert.labels, alert.value))
            }),
        }
    }
}

/// An alert's labels as channels and silences see them: the subject's labels plus
/// `alertname` (the rule's name) and `severity` (when the rule is known).
pub fn alert_labels(rule_name: &str, subject: &Labels, rule: Option<&Rule>) -> Labels {
    let mut labels = subject.clone();
    labels.insert("alertname".into(), rule_name.to_string());
    if let Some(r) = rule {
        labels.insert("severity".into(), r.severity.clone());
    }
    labels
}

/// A channel as the API (`GET /api/v1/alert-channels`) and the console show it: its
/// settings with the URL masked ([`channel::ChannelSpec::masked`]), where it is defined,
/// and its last delivery attempt.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChannelView {
    pub channel: channel::ChannelSpec,
    /// Whether the URL shown hides a part of the stored one (it is write-only: a PUT
    /// without `url`, or with the masked one, keeps it).
    pub secret_set: bool,
    /// `config` (`[[alerts.channels]]` of `harrier.toml`, read-only through the API) or
    /// `api`.
    pub origin: &'static str,
    /// When it was stored or last changed, unix ms; `null` for `config`.
    pub updated_at_ms: Option<i64>,
    /// The newest entry of the delivery log (group notifications and test sends);
    /// `null` when nothing was sent yet.
    pub last_delivery: Option<LastDelivery>,
}

/// One attempt to deliver to a channel, as [`ChannelView`] shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LastDelivery {
    pub at_ms: i64,
    /// The HTTP status, when the channel answered.
    pub status: Option<i64>,
    /// Why it was not delivered (`null` when the channel took it: 2xx).
    pub error: Option<String>,
    /// Alerts in the message, by status.
    pub firing: i64,
    pub resolved: i64,
}
