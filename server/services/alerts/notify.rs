//! Notifications, after Alertmanager's dispatcher: the notices of the evaluator's outbox
//! (an episode fired, an episode resolved) are taken into per-channel aggregation groups
//! (`group_by`, default `["alertname"]`), which are flushed `group_wait` after they are
//! created and every `group_interval` after that; a flush sends a message only when the
//! group holds firing alerts not yet notified, resolved alerts not yet notified (with
//! `send_resolved`), all its notified alerts resolved, or `repeat_interval` has passed
//! (Alertmanager's `DedupStage`). Silenced alerts are left out of every message; when a
//! silence ends while an alert still fires, the next flush notifies it.
//!
//! The channels in force are those of `harrier.toml` and those added through the API
//! (stored in `alert_channels`, read on every pass, so a change counts within a second);
//! a stored channel never shadows one of the file. [`send_test`] sends one test message.
//!
//! Groups, their notification log and the delivery log live in the store, not in memory,
//! so a restart neither re-sends a delivered notice nor forgets an undelivered one.
//! Failed sends are retried with exponential backoff (at most one group interval apart).
//!
//! Delivery is at least once: a message is sent, then its group is marked notified, so a
//! replica that dies between the two has the next leader send it again — the only case of
//! a duplicate. Each message carries an `Idempotency-Key` header ([`notification_key`]:
//! the channel, the group, the group's last notification and the alerts told of with their
//! episodes' start times, so the re-sent message has the same key and every other message,
//! a later episode's included, another) and the lease term it was sent under
//! ([`TERM_HEADER`]). Under several replicas only the lease holder sends, and it checks
//! the lease right before each message ([`dispatch_fenced`]).
//! Channel kinds and their messages: [`crate::domain::alerts::channel`].

use std::sync::Arc;
use std::time::Duration as StdDuration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::domain::alerts::channel::*;
use crate::domain::alerts::rule::{Labels, Rule};
use crate::domain::alerts::silence::{Compiled, Muter, all_match};
use crate::services::egress::{Egress, Outbound};
use crate::store::{Delivery, FlushResult, Group, GroupAlert, GroupEntry, Store};

use super::lease::Leader;
use super::pause;

/// What the dispatcher needs besides the store: the channels of `harrier.toml`, harrier's
/// address as the receivers should see it (links, `externalURL`) and the evaluation
/// interval (for the `endsAt` of alerts sent to Alertmanager). The channels added through
/// the API are read from the store on each dispatch (see [`Dispatch::channels_in_force`]).
#[derive(Debug, Clone)]
pub struct Dispatch {
    /// `[[alerts.channels]]` of `harrier.toml`.
    pub channels: Vec<ChannelSpec>,
    pub external_url: String,
    pub evaluation_interval_ms: i64,
}

impl Dispatch {
    /// The channels in force now: those of `harrier.toml`, then the stored ones (see
    /// [`merge_channels`]). The store is read on every call (the table is tiny), so a
    /// channel added, changed or deleted through the API counts from the next dispatch.
    pub async fn channels_in_force(&self, store: &Store) -> crate::store::Result<Vec<ChannelSpec>> {
        let stored = store.list_channels().await?;
        Ok(merge_channels(
            &self.channels,
            stored.into_iter().map(|s| s.channel),
        ))
    }
}

/// Sends one test notification to `ch` now, in its kind's format, with one synthetic
/// firing alert `{alertname="HarrierTest", severity="info"}`: `webhook` gets an
/// Alertmanager v4 payload, `slack` a message, `alertmanager` a `POST /api/v2/alerts` whose
/// alert ends [`TEST_ENDS_AFTER_MS`] later. Returns the attempt as a delivery-log entry
/// (group key `{}:{alertname="HarrierTest"}`; `status` the HTTP status when the channel
/// answered, `error` the reason when it did not accept it); the caller stores it.
pub async fn send_test(
    client: &Outbound,
    ch: &ChannelSpec,
    external_url: &str,
    now_ms: i64,
) -> Delivery {
    let labels: Labels = [
        ("alertname".to_string(), TEST_ALERTNAME.to_string()),
        ("severity".to_string(), "info".to_string()),
    ]
    .into();
    let annotations: Labels = [
        (
            "summary".to_string(),
            format!("Test notification from harrier to channel {}", ch.name),
        ),
        (
            "description".to_string(),
            "Sent on request (Send test on /console/alerts, or POST \
             /api/v1/alert-channels/{name}/test); no alert rule fired."
                .to_string(),
        ),
    ]
    .into();
    let (group_key, group_labels) = group_key(&labels, &["alertname".to_string()]);
    let alert = OutAlert {
        status: "firing",
        fingerprint: fingerprint(&labels),
        labels,
        annotations,
        starts_at_ms: now_ms,
        ends_at_ms: None,
        generator_url: format!("{external_url}/console/alerts#channels"),
    };
    let alerts = [alert];
    let (status, error) = match ch.kind.as_str() {
        "alertmanager" => {
            let url = format!("{}/api/v2/alerts", ch.url.expose().trim_end_matches('/'));
            let body = alertmanager_payload(&alerts, now_ms + TEST_ENDS_AFTER_MS);
            post(client, ch, &url, &body, None, None).await
        }
        "slack" => {
            let body = slack_payload(&group_labels, &alerts, external_url);
            post(client, ch, ch.url.expose(), &body, None, None).await
        }
        _ => {
            let body = webhook_payload(&ch.name, &group_key, &group_labels, &alerts, external_url);
            post(client, ch, ch.url.expose(), &body, None, None).await
        }
    };
    Delivery {
        channel: ch.name.clone(),
        group_key,
        at_ms: now_ms,
        firing: 1,
        resolved: 0,
        status,
        error,
    }
}

/// The HTTP client of the notifications, under `egress`: harrier's user agent, no
/// redirects, no default timeout (each channel sets its own).
pub fn client(egress: &Egress) -> Outbound {
    Outbound::notifications(egress)
}

/// What one dispatch pass did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Dispatched {
    /// Notices taken from the outbox.
    pub taken: usize,
    /// Messages accepted by a channel (2xx).
    pub sent: usize,
    /// Messages refused or unanswered (to be retried).
    pub failed: usize,
}

/// The header that carries the alerts lease term a notification was sent under (see
/// [`dispatch_fenced`]): a receiver may refuse a message whose term is lower than one it
/// has already seen.
pub const TERM_HEADER: &str = "Harrier-Lease-Term";

/// POSTs `body` to `url`, with `key` as its `Idempotency-Key` header when given (see
/// [`notification_key`]) and `term` as its [`TERM_HEADER`].
async fn post(
    client: &Outbound,
    ch: &ChannelSpec,
    url: &str,
    body: &Value,
    key: Option<&str>,
    term: Option<i64>,
) -> (Option<i64>, Option<String>) {
    if let Err(refused) = client.check(url).await {
        return (None, Some(format!("{}: {refused}", ch.name)));
    }
    let mut req = client
        .http()
        .post(url)
        .timeout(StdDuration::from_secs_f64(ch.timeout_s))
        .json(body);
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    if let Some(term) = term {
        req = req.header(TERM_HEADER, term);
    }
    let sent = req.send().await;
    match sent {
        Ok(res) if res.status().is_success() => (Some(res.status().as_u16() as i64), None),
        Ok(res) => {
            let code = res.status();
            let text = res.text().await.unwrap_or_default();
            let text: String = text.chars().take(200).collect();
            (
                Some(code.as_u16() as i64),
                Some(format!("{} answered {code}: {}", ch.name, text.trim())),
            )
        }
        Err(e) => (
            None,
            Some(format!("{}: {}", ch.name, send_error_text(ch, e))),
        ),
    }
}

/// A failed send in words, with its causes (`error sending request: client error
/// (Connect): tcp connect error: Connection refused (os error 111)`). The URL is left out
/// where [`ChannelSpec::masked_url`] hides part of it (a Slack URL, a password): the
/// delivery log is shown to everyone.
fn send_error_text(ch: &ChannelSpec, e: reqwest::Error) -> String {
    let e = if ch.url.hides_something() {
        e.without_url()
    } else {
        e
    };
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
        source = cause.source();
    }
    text
}

/// Takes the outbox into the groups of the channels in force (`harrier.toml`'s and the
/// stored ones, read now), then flushes the groups due at `now_ms` (see the module docs).
/// Groups of channels that no longer exist in either place are dropped.
pub async fn dispatch(
    store: &Store,
    client: &Outbound,
    ctx: &Dispatch,
    now_ms: i64,
) -> crate::store::Result<Dispatched> {
    dispatch_fenced(store, client, ctx, None, now_ms).await
}

/// As [`dispatch`], sending only under `leader`'s lease: right before each message the
/// lease is checked in the database to be still held in the term this replica took, and
/// the pass ends, sending nothing more, when it is not (a replica paused, partitioned or
/// cut off from the database past its lease). Each message carries that term
/// ([`TERM_HEADER`]) besides its `Idempotency-Key`.
pub async fn dispatch_fenced(
    store: &Store,
    client: &Outbound,
    ctx: &Dispatch,
    leader: Option<&Leader>,
    now_ms: i64,
) -> crate::store::Result<Dispatched> {
    let mut out = Dispatched::default();
    let channels = ctx.channels_in_force(store).await?;
    let config_names: Vec<String> = ctx.channels.iter().map(|c| c.name.clone()).collect();
    store.drop_groups_of_unknown_channels(&config_names).await?;
    let compiled: Vec<(&ChannelSpec, Vec<Compiled>)> = channels
        .iter()
        .filter_map(|c| Some((c, c.compiled_matchers().ok()?)))
        .collect();
    let rules: Vec<Rule> = store
        .list_alert_rules()
        .await?
        .into_iter()
        .map(|s| s.rule)
        .collect();
    let rule_of = |name: &str| rules.iter().find(|r| r.name == name);

    // 1. The outbox into the groups.
    let notices = store.undelivered_notifications(1000).await?;
    if !notices.is_empty() {
        let mut entries = Vec::new();
        for n in &notices {
            // A firing notice of a rule gone since (deleted, changed, out of harrier.toml)
            // is not grouped: its alert was ended with the rule.
            if n.change != "resolved" && rule_of(&n.rule).is_none() {
                continue;
            }
            let labels = crate::domain::alerts::alert_labels(&n.rule, &n.labels, rule_of(&n.rule));
            let fp = fingerprint(&labels);
            let resolved = n.change == "resolved";
            for (ch, matchers) in &compiled {
                if !all_match(matchers, &labels) {
                    continue;
                }
                let (key, group_labels) = if ch.grouped() {
                    group_key(&labels, &ch.group_by)
                } else {
                    ("{}:{}".to_string(), Labels::new())
                };
                entries.push(GroupEntry {
                    channel: ch.name.clone(),
                    group_key: key,
                    group_labels,
                    fingerprint: fp.clone(),
                    rule: n.rule.clone(),
                    labels: labels.clone(),
                    value: n.value,
                    starts_at_ms: n.started_at_ms,
                    ends_at_ms: if resolved {
                        Some(n.ended_at_ms.unwrap_or(n.created_at_ms))
                    } else {
                        None
                    },
                    first_flush_ms: if ch.grouped() {
                        now_ms + ch.group_wait.ms()
                    } else {
                        now_ms
                    },
                    flush_now: !ch.grouped(),
                });
            }
        }
        let ids: Vec<i64> = notices.iter().map(|n| n.id).collect();
        store.ingest_notices(&ids, &entries, now_ms).await?;
        out.taken = notices.len();
    }

    // 2. Flush the groups due.
    let groups = store.due_groups(now_ms).await?;
    if groups.is_empty() {
        return Ok(out);
    }
    let muter = Muter::new(&store.active_silences(now_ms).await?, now_ms);
    for g in groups {
        let Some(ch) = channels.iter().find(|c| c.name == g.channel) else {
            continue;
        };
        let alerts = store.group_alerts(&g.channel, &g.group_key).await?;
        let resolved_all: Vec<String> = alerts
            .iter()
            .filter(|a| a.ends_at_ms.is_some())
            .map(|a| a.fingerprint.clone())
            .collect();
        let visible: Vec<&GroupAlert> = alerts
            .iter()
            .filter(|a| muter.silenced_by(&a.labels).is_empty())
            .collect();
        let flushed = if ch.grouped() {
            flush_group(
                store,
                client,
                ctx,
                leader,
                ch,
                &g,
                &visible,
                resolved_all,
                &rule_of,
                now_ms,
            )
            .await
        } else {
            push_alertmanager(
                store,
                client,
                ctx,
                leader,
                ch,
                &g,
                &alerts,
                &visible,
                resolved_all,
                &rule_of,
                now_ms,
            )
            .await
        };
        let Some((result, delivery)) = flushed else {
            return Ok(out);
        };
        if let Some(d) = &delivery {
            let ok = d.error.is_none();
            metrics::counter!("harrier_alert_deliveries_total", "ok" => ok.to_string())
                .increment(1);
            if ok {
                out.sent += 1;
            } else {
                out.failed += 1;
                tracing::warn!(channel = %ch.name, group = %g.group_key,
                    error = d.error.as_deref().unwrap_or(""), "alert notification not delivered");
            }
        }
        store
            .settle_group(&g.channel, &g.group_key, &result, delivery.as_ref(), now_ms)
            .await?;
    }
    Ok(out)
}

/// Right before a send: stops at the `before-send` testing point ([`super::pause`]),
/// checks that `leader` still holds the lease in its term, then marks the firing alerts
/// `told` as told ([`Store::mark_told`]). `Some(term)` to send under (`None` inside when
/// unfenced), `None` to send nothing (the lease lost, or the mark not stored).
async fn before_send(
    store: &Store,
    leader: Option<&Leader>,
    channel: &str,
    told: &[String],
) -> Option<Option<i64>> {
    pause::at(pause::Point::BeforeSend);
    let term = match leader {
        None => None,
        Some(leader) => {
            let term = leader.term();
            if term == 0 || !leader.still_held(crate::now_ms()).await {
                tracing::warn!("the alerts lease was lost; this replica sends nothing more");
                return None;
            }
            Some(term)
        }
    };
    if told.is_empty() {
        return Some(term);
    }
    if let Err(e) = store.mark_told(channel, told).await {
        tracing::error!(error = %e, channel, "marking alerts as told failed; not sending");
        return None;
    }
    Some(term)
}

fn retry_at(g: &Group, now_ms: i64, cap_ms: i64) -> i64 {
    now_ms + backoff_ms(g.attempts + 1).min(cap_ms.max(BACKOFF_BASE_MS))
}

#[expect(clippy::too_many_arguments)]
async fn flush_group<'a>(
    store: &Store,
    client: &Outbound,
    ctx: &Dispatch,
    leader: Option<&Leader>,
    ch: &ChannelSpec,
    g: &Group,
    visible: &[&GroupAlert],
    resolved_all: Vec<String>,
    rule_of: &impl Fn(&str) -> Option<&'a Rule>,
    now_ms: i64,
) -> Option<(FlushResult, Option<Delivery>)> {
    let firing: Vec<String> = visible
        .iter()
        .filter(|a| a.ends_at_ms.is_none())
        .map(|a| a.fingerprint.clone())
        .collect();
    let resolved: Vec<String> = visible
        .iter()
        .filter(|a| a.ends_at_ms.is_some())
        .map(|a| a.fingerprint.clone())
        .collect();
    let next = now_ms + ch.group_interval.ms();
    let done = |notified| FlushResult::Done {
        notified,
        remove: resolved_all.clone(),
        pushed: Vec::new(),
        next_flush_ms: next,
    };
    // All resolved, with alerts whose firing message was being sent when its sender
    // stopped (not in the notification log, but the receiver may know of them): tell it.
    let told_unsettled = firing.is_empty()
        && visible.iter().any(|a| {
            a.ends_at_ms.is_some() && a.notified && !g.notified_resolved.contains(&a.fingerprint)
        });
    if !told_unsettled
        && !needs_update(
            g,
            &firing,
            &resolved,
            ch.send_resolved,
            ch.repeat_interval.ms(),
            now_ms,
        )
    {
        return Some((done(None), None));
    }
    let send: Vec<OutAlert> = visible
        .iter()
        .filter(|a| a.ends_at_ms.is_none() || ch.send_resolved)
        .map(|a| OutAlert::new(a, rule_of(&a.rule), &ctx.external_url))
        .collect();
    if send.is_empty() {
        return Some((done(Some((firing, resolved))), None));
    }
    let body = if ch.kind == "slack" {
        slack_payload(&g.group_labels, &send, &ctx.external_url)
    } else {
        webhook_payload(
            &ch.name,
            &g.group_key,
            &g.group_labels,
            &send,
            &ctx.external_url,
        )
    };
    // Each alert named with its episode's start: a later episode is another message.
    let told = |resolved: bool| -> Vec<(&str, i64)> {
        visible
            .iter()
            .filter(|a| a.ends_at_ms.is_some() == resolved)
            .map(|a| (a.fingerprint.as_str(), a.starts_at_ms))
            .collect()
    };
    // This database's key (made on the first notification, kept): keys differ between
    // databases, and agree between the replicas of one and across a crash.
    let installation = match store
        .installation_key(&crate::services::auth::random_secret())
        .await
    {
        Ok(key) => key,
        Err(e) => {
            tracing::error!(error = %e, "reading the installation key failed; not sending");
            return None;
        }
    };
    let key = notification_key(
        &installation,
        &ch.name,
        &g.group_key,
        g.notified_at_ms,
        &told(false),
        &told(true),
    );
    let term = before_send(store, leader, &ch.name, &firing).await?;
    let (status, error) = post(client, ch, ch.url.expose(), &body, Some(&key), term).await;
    if error.is_none() {
        pause::at(pause::Point::AfterSend);
    }
    let delivery = Delivery {
        channel: ch.name.clone(),
        group_key: g.group_key.clone(),
        at_ms: now_ms,
        firing: send.iter().filter(|a| a.status == "firing").count() as i64,
        resolved: send.iter().filter(|a| a.status == "resolved").count() as i64,
        status,
        error: error.clone(),
    };
    let result = match error {
        None => done(Some((firing, resolved))),
        Some(error) => FlushResult::Failed {
            error,
            next_flush_ms: retry_at(g, now_ms, ch.group_interval.ms()),
        },
    };
    Some((result, Some(delivery)))
}

#[expect(clippy::too_many_arguments)]
async fn push_alertmanager<'a>(
    store: &Store,
    client: &Outbound,
    ctx: &Dispatch,
    leader: Option<&Leader>,
    ch: &ChannelSpec,
    g: &Group,
    alerts: &[GroupAlert],
    visible: &[&GroupAlert],
    resolved_all: Vec<String>,
    rule_of: &impl Fn(&str) -> Option<&'a Rule>,
    now_ms: i64,
) -> Option<(FlushResult, Option<Delivery>)> {
    // Firing: the unsilenced ones. Resolved: those Alertmanager was told of (a silenced
    // one, too, so it does not linger there until its endsAt).
    let send: Vec<OutAlert> = visible
        .iter()
        .copied()
        .filter(|a| a.ends_at_ms.is_none())
        .chain(
            alerts
                .iter()
                .filter(|a| a.ends_at_ms.is_some() && a.notified),
        )
        .map(|a| OutAlert::new(a, rule_of(&a.rule), &ctx.external_url))
        .collect();
    let pushed: Vec<String> = send
        .iter()
        .filter(|a| a.status == "firing")
        .map(|a| a.fingerprint.clone())
        .collect();
    let done = FlushResult::Done {
        notified: None,
        remove: resolved_all,
        pushed,
        next_flush_ms: now_ms + RESEND_DELAY_MS,
    };
    if send.is_empty() {
        return Some((done, None));
    }
    let ends = now_ms + 4 * ctx.evaluation_interval_ms.max(60_000);
    let body = alertmanager_payload(&send, ends);
    let url = format!("{}/api/v2/alerts", ch.url.expose().trim_end_matches('/'));
    let term = before_send(store, leader, &ch.name, &[]).await?;
    let (status, error) = post(client, ch, &url, &body, None, term).await;
    if error.is_none() {
        pause::at(pause::Point::AfterSend);
    }
    let delivery = Delivery {
        channel: ch.name.clone(),
        group_key: g.group_key.clone(),
        at_ms: now_ms,
        firing: send.iter().filter(|a| a.status == "firing").count() as i64,
        resolved: send.iter().filter(|a| a.status == "resolved").count() as i64,
        status,
        error: error.clone(),
    };
    let result = match error {
        None => done,
        Some(error) => FlushResult::Failed {
            error,
            next_flush_ms: retry_at(g, now_ms, RESEND_DELAY_MS),
        },
    };
    Some((result, Some(delivery)))
}

/// Dispatches when the evaluator raises notices (`wake`) and at least every second (group
/// timers, retries), until `shutdown`.
pub async fn run(
    store: Store,
    egress: Egress,
    ctx: Arc<Dispatch>,
    wake: Arc<Notify>,
    leader: Arc<Leader>,
    shutdown: CancellationToken,
) {
    let client = client(&egress);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = wake.notified() => {}
            _ = tokio::time::sleep(StdDuration::from_secs(1)) => {}
        }
        // Fencing: only the replica holding the alerts lease in its term sends.
        if !leader.still_held(crate::now_ms()).await {
            continue;
        }
        if let Err(e) = dispatch_fenced(&store, &client, &ctx, Some(&leader), crate::now_ms()).await
        {
            tracing::error!(error = %e, "dispatching alert notifications failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::alerts::rule::Duration;

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

    fn out(status: &'static str, severity: &str, route: &str) -> OutAlert {
        let labels: Labels = [
            ("alertname", "CheckoutErrors"),
            ("severity", severity),
            ("route", route),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        OutAlert {
            status,
            annotations: [("summary".to_string(), format!("{route} 30 % errors"))].into(),
            fingerprint: fingerprint(&labels),
            labels,
            starts_at_ms: 1_795_999_384_000,
            ends_at_ms: (status == "resolved").then_some(1_795_999_444_000),
            generator_url: "http://h/api/v1/alert-rules/CheckoutErrors".into(),
        }
    }

    #[test]
    fn group_keys_are_alertmanagers() {
        let a = out("firing", "page", "/a").labels;
        assert_eq!(
            group_key(&a, &["alertname".into()]).0,
            "{}:{alertname=\"CheckoutErrors\"}"
        );
        assert_eq!(
            group_key(&a, &["route".into(), "alertname".into(), "team".into()]).0,
            "{}:{alertname=\"CheckoutErrors\", route=\"/a\"}"
        );
        assert_eq!(group_key(&a, &["...".into()]).1, a);
    }

    #[test]
    fn dedup_follows_alertmanager() {
        let g = |at: Option<i64>, f: &[&str], r: &[&str]| Group {
            channel: "c".into(),
            group_key: "k".into(),
            group_labels: Labels::new(),
            created_at_ms: 0,
            next_flush_ms: 0,
            notified_at_ms: at,
            notified_firing: f.iter().map(|s| s.to_string()).collect(),
            notified_resolved: r.iter().map(|s| s.to_string()).collect(),
            attempts: 0,
        };
        let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let h = 3_600_000;
        assert!(needs_update(
            &g(None, &[], &[]),
            &v(&["a"]),
            &[],
            true,
            h,
            0
        ));
        assert!(
            !needs_update(&g(None, &[], &[]), &[], &v(&["a"]), true, h, 0),
            "resolved, never sent"
        );
        assert!(needs_update(
            &g(Some(0), &["a"], &[]),
            &v(&["a", "b"]),
            &[],
            true,
            h,
            1
        ));
        assert!(!needs_update(
            &g(Some(0), &["a", "b"], &[]),
            &v(&["a"]),
            &[],
            false,
            h,
            1
        ));
        assert!(needs_update(
            &g(Some(0), &["a", "b"], &[]),
            &v(&["a"]),
            &v(&["b"]),
            true,
            h,
            1
        ));
        assert!(
            needs_update(&g(Some(0), &["a"], &[]), &[], &v(&["a"]), false, h, 1),
            "all resolved"
        );
        assert!(!needs_update(
            &g(Some(0), &[], &["a"]),
            &[],
            &v(&["a"]),
            true,
            h,
            1
        ));
        assert!(!needs_update(
            &g(Some(0), &["a"], &[]),
            &v(&["a"]),
            &[],
            true,
            h,
            h
        ));
        assert!(
            needs_update(&g(Some(0), &["a"], &[]), &v(&["a"]), &[], true, h, h + 1),
            "repeat"
        );
    }

    #[test]
    fn slack_messages_are_coloured_titled_and_linked() {
        let alerts = [
            out("firing", "critical", "/a"),
            out("resolved", "critical", "/b"),
        ];
        let group: Labels = [("alertname".to_string(), "CheckoutErrors".to_string())].into();
        let m = slack_payload(&group, &alerts, "https://harrier.example.com");
        assert_eq!(m["text"], "[FIRING:1] CheckoutErrors");
        let a = &m["attachments"][0];
        assert_eq!(a["color"], "#d63232");
        assert_eq!(
            a["title_link"],
            "https://harrier.example.com/console/alerts"
        );
        let text = a["text"].as_str().unwrap();
        assert!(
            text.contains("/a 30 % errors") && text.contains("`route=/b`"),
            "{text}"
        );
        assert_eq!(a["fields"][0]["value"], "CheckoutErrors");
        let resolved = slack_payload(&group, &alerts[1..], "http://h");
        assert_eq!(resolved["text"], "[RESOLVED] CheckoutErrors");
        assert_eq!(resolved["attachments"][0]["color"], "#2eb886");
        assert_eq!(slack_colour(&[out("firing", "warning", "/a")]), "#daa038");
    }

    #[test]
    fn alertmanager_payload_is_the_v2_postable_shape() {
        let alerts = [out("firing", "page", "/a"), out("resolved", "page", "/b")];
        let p = alertmanager_payload(&alerts, 1_795_999_624_000);
        let a = p.as_array().unwrap();
        let mut k: Vec<&String> = a[0].as_object().unwrap().keys().collect();
        k.sort();
        assert_eq!(
            k,
            [
                "annotations",
                "endsAt",
                "generatorURL",
                "labels",
                "startsAt"
            ]
        );
        assert_eq!(a[0]["startsAt"], "2026-11-30T00:43:04.000Z");
        assert_eq!(a[0]["endsAt"], "2026-11-30T00:47:04.000Z");
        assert_eq!(a[1]["endsAt"], "2026-11-30T00:44:04.000Z");
        assert_eq!(a[0]["labels"]["route"], "/a");
    }

    #[test]
    fn channel_validation_names_the_field() {
        let mut c = ChannelSpec::new("ops", "slack", "https://hooks.slack.com/x");
        c.validate().unwrap();
        let field = |c: &ChannelSpec| c.validate().unwrap_err().field;
        c.kind = "email".into();
        assert_eq!(field(&c), "kind");
        c.kind = "alertmanager".into();
        c.matchers = vec!["severity=~(".into()];
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "matchers");
        assert!(e.message.starts_with("matchers[0]: "), "{e}");
        c.matchers.clear();
        for url in [
            "ftp://x/y",
            "http://",
            "hooks.slack.com/x",
            "https://hooks.slack.com/…",
        ] {
            c.url = url.into();
            assert_eq!(field(&c), "url", "{url}");
        }
        c.url = "http://127.0.0.1:9093".into();
        c.name = "ops\n".into();
        assert_eq!(field(&c), "name");
        c.name = " ops".into();
        assert_eq!(field(&c), "name");
        c.name = "ops eu".into();
        c.timeout_s = 0.0;
        assert_eq!(field(&c), "timeout_s");
        c.timeout_s = 5.0;
        c.group_interval = Duration(0);
        assert_eq!(field(&c), "group_interval");
    }

    #[test]
    fn stored_channels_never_shadow_the_files() {
        let file = ChannelSpec::new("ops", "webhook", "http://10.0.0.5/hook");
        let same_name = ChannelSpec::new("ops", "slack", "https://hooks.slack.com/x");
        let mut broken = ChannelSpec::new("broken", "webhook", "http://10.0.0.5/hook");
        broken.kind = "email".into();
        let extra = ChannelSpec::new("chat", "slack", "https://hooks.slack.com/y");
        let merged = merge_channels(
            std::slice::from_ref(&file),
            [same_name, broken, extra.clone()],
        );
        assert_eq!(merged, [file, extra]);
    }

    #[test]
    fn channel_urls_are_masked_to_scheme_and_host() {
        let slack = ChannelSpec::new(
            "ops",
            "slack",
            "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
        );
        assert_eq!(slack.masked_url(), "https://hooks.slack.com/…");
        assert_eq!(slack.masked().url.expose(), "https://hooks.slack.com/…");
        assert_eq!(slack.target_host(), "hooks.slack.com");
        let local = ChannelSpec::new("t", "slack", "http://127.0.0.1:8080/services/T/B/X");
        assert_eq!(local.masked_url(), "http://127.0.0.1:8080/…");
        assert_eq!(local.target_host(), "127.0.0.1:8080");
        // A webhook's path may be its token too (Teams, Discord, Mattermost).
        let hook = ChannelSpec::new("h", "webhook", "http://10.0.0.5:9095/hook?x=1");
        assert_eq!(hook.masked_url(), "http://10.0.0.5:9095/…");
        let basic = ChannelSpec::new("b", "webhook", "http://ops:s3cret@10.0.0.5/hook");
        assert_eq!(basic.masked_url(), "http://10.0.0.5/…");
        let am = ChannelSpec::new("a", "alertmanager", "http://127.0.0.1:9093");
        assert_eq!(am.masked_url(), "http://127.0.0.1:9093/");
        assert!(
            !format!("{basic:?}").contains("s3cret"),
            "Debug masks the URL"
        );
        let mut masked = slack.masked();
        assert_eq!(
            masked.validate().unwrap_err().field,
            "url",
            "a mask is no URL"
        );
        masked.url = slack.url.clone();
        assert_eq!(masked, slack);
    }
}
