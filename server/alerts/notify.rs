//! Notifications: the outbox written by the evaluator (one notice when an episode fires,
//! one when it resolves) is delivered to every configured channel, with retries and
//! exponential backoff, and each attempt is logged (`alert_deliveries`).
//!
//! Channel kind `webhook` POSTs the Alertmanager webhook payload, version 4
//! (<https://prometheus.io/docs/alerting/latest/configuration/#webhook_config>), one alert
//! per message, so anything that takes Alertmanager's webhooks takes ours.
//!
//! The backoff lives in the store (attempt count and next attempt time), not in memory, so
//! a restart neither re-sends a delivered notice nor forgets an undelivered one (hence no
//! in-memory retry crate here).

use std::sync::Arc;
use std::time::Duration as StdDuration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::rule::{Labels, Rule, render};
use crate::store::{Delivery, Notification, Store};

/// First retry after 1 s, doubling up to 5 min.
pub const BACKOFF_BASE_MS: i64 = 1_000;
pub const BACKOFF_MAX_MS: i64 = 300_000;
/// Attempts before a notice is given up (it stays in the log with its last error).
pub const DEFAULT_MAX_ATTEMPTS: i64 = 10;

fn default_kind() -> String {
    "webhook".into()
}

fn default_timeout_s() -> f64 {
    10.0
}

/// `[[alerts.channels]]`: where notices go.
///
/// ```toml
/// [[alerts.channels]]
/// name = "ops"
/// kind = "webhook"            # Alertmanager webhook JSON, version 4
/// url = "http://127.0.0.1:9095/hook"
/// timeout_s = 10
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSpec {
    pub name: String,
    #[serde(default = "default_kind")]
    pub kind: String,
    pub url: String,
    #[serde(default = "default_timeout_s")]
    pub timeout_s: f64,
}

impl ChannelSpec {
    pub fn validate(&self) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("name must not be empty".into());
        }
        if self.kind != "webhook" {
            return Err(format!("kind must be \"webhook\", got {:?}", self.kind));
        }
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return Err(format!("url must start with http://, got {:?}", self.url));
        }
        if !(self.timeout_s > 0.0 && self.timeout_s <= 300.0) {
            return Err(format!(
                "timeout_s must be from 0 to 300, got {}",
                self.timeout_s
            ));
        }
        Ok(())
    }
}

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

/// The Alertmanager webhook v4 body for one notice: `labels` are the subject's labels
/// plus `alertname` (the rule) and `severity`; `annotations` the rendered `summary` and
/// `description`.
pub fn webhook_payload(
    receiver: &str,
    n: &Notification,
    rule: Option<&Rule>,
    external_url: &str,
) -> Value {
    let mut labels = n.labels.clone();
    labels.insert("alertname".into(), n.rule.clone());
    if let Some(r) = rule {
        labels.insert("severity".into(), r.severity.clone());
    }
    let mut annotations = Labels::new();
    if let Some(r) = rule {
        if let Some(t) = &r.summary {
            annotations.insert("summary".into(), render(t, r, &n.labels, n.value));
        }
        if let Some(t) = &r.description {
            annotations.insert("description".into(), render(t, r, &n.labels, n.value));
        }
    }
    let status = if n.change == "resolved" {
        "resolved"
    } else {
        "firing"
    };
    let generator = format!("{external_url}/api/v1/alert-rules/{}", n.rule);
    json!({
        "receiver": receiver,
        "status": status,
        "alerts": [{
            "status": status,
            "labels": labels,
            "annotations": annotations,
            "startsAt": rfc3339(Some(n.started_at_ms)),
            "endsAt": rfc3339(n.ended_at_ms),
            "generatorURL": generator,
            "fingerprint": fingerprint(&labels),
        }],
        "groupLabels": {"alertname": n.rule},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": external_url,
        "version": "4",
        "groupKey": format!("{{}}:{{alertname={:?}}}", n.rule),
        "truncatedAlerts": 0,
    })
}

/// Delivers the notices due at `now_ms` to every channel that has not yet accepted them;
/// returns how many notices were settled as delivered. With no channel, notices are
/// settled at once (there is nowhere to send them).
pub async fn deliver_due(
    store: &Store,
    client: &reqwest::Client,
    channels: &[ChannelSpec],
    external_url: &str,
    now_ms: i64,
) -> crate::store::Result<usize> {
    let due = store
        .due_notifications(now_ms, DEFAULT_MAX_ATTEMPTS, 100)
        .await?;
    let mut delivered = 0;
    for n in due {
        let rule = store.get_alert_rule(&n.rule).await?.map(|s| s.rule);
        let done_before = store.delivered_channels(n.id).await?;
        let mut last_error = None;
        for ch in channels.iter().filter(|c| !done_before.contains(&c.name)) {
            let body = webhook_payload(&ch.name, &n, rule.as_ref(), external_url);
            let sent = client
                .post(&ch.url)
                .timeout(StdDuration::from_secs_f64(ch.timeout_s))
                .json(&body)
                .send()
                .await;
            let (status, error) = match sent {
                Ok(res) if res.status().is_success() => (Some(res.status().as_u16() as i64), None),
                Ok(res) => (
                    Some(res.status().as_u16() as i64),
                    Some(format!("{} answered {}", ch.name, res.status())),
                ),
                Err(e) => (None, Some(format!("{}: {e}", ch.name))),
            };
            metrics::counter!("harrier_alert_deliveries_total", "ok" => error.is_none().to_string())
                .increment(1);
            if let Some(e) = &error {
                tracing::warn!(channel = %ch.name, notification = n.id, error = %e, "alert notification not delivered");
                last_error = Some(e.clone());
            }
            store
                .record_delivery(&Delivery {
                    notification_id: n.id,
                    channel: ch.name.clone(),
                    at_ms: now_ms,
                    status,
                    error,
                })
                .await?;
        }
        match last_error {
            None => {
                store
                    .settle_notification(n.id, Some(now_ms), now_ms, None)
                    .await?;
                delivered += 1;
            }
            Some(e) => {
                let next = now_ms + backoff_ms(n.attempts + 1);
                store
                    .settle_notification(n.id, None, next, Some(&e))
                    .await?;
            }
        }
    }
    Ok(delivered)
}

/// Delivers notices when the evaluator raises some (`wake`) and retries due ones every
/// second, until `shutdown`.
pub async fn run(
    store: Store,
    channels: Arc<Vec<ChannelSpec>>,
    external_url: String,
    wake: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let client = reqwest::Client::builder()
        .user_agent(concat!("harrier/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = wake.notified() => {}
            _ = tokio::time::sleep(StdDuration::from_secs(1)) => {}
        }
        if let Err(e) =
            deliver_due(&store, &client, &channels, &external_url, crate::now_ms()).await
        {
            tracing::error!(error = %e, "delivering alert notifications failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(
            (1..=4).map(backoff_ms).collect::<Vec<_>>(),
            [1_000, 2_000, 4_000, 8_000]
        );
        assert_eq!(backoff_ms(30), BACKOFF_MAX_MS);
    }

    #[test]
    fn fingerprint_is_alertmanagers() {
        // prometheus/common model.LabelSet{}.Fingerprint() of the empty set is the FNV
        // offset basis; of {a="b"} FNV-1a over "a\xffb\xff".
        assert_eq!(fingerprint(&Labels::new()), "cbf29ce484222325");
        let one: Labels = [("a".to_string(), "b".to_string())].into();
        let mut h: u64 = 0xcbf29ce484222325;
        for b in [b'a', 0xff, b'b', 0xff] {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        assert_eq!(fingerprint(&one), format!("{h:016x}"));
    }

    #[test]
    fn times_are_rfc3339_seconds() {
        assert_eq!(rfc3339(Some(1_795_999_384_000)), "2026-11-30T00:43:04Z");
        assert_eq!(rfc3339(None), "0001-01-01T00:00:00Z");
    }
}
