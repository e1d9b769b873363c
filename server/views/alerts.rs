//! Alert read models: the active alerts as the API and live events show them, a route's
//! subject labels, and the channels in force with their last delivery, for the alerts
//! console and `/api/v1/alerts…`, `/api/v1/alert-channels`.

use crate::domain::alerts::channel::ChannelSpec;
use crate::domain::alerts::eval::Phase;
use crate::domain::alerts::rule::Labels;
use crate::domain::alerts::silence::Muter;
use crate::domain::alerts::{AlertView, ChannelView, LastDelivery};
use crate::store::{Result, Store};

/// Every channel, by name: those of `config` (`harrier.toml`) and the stored ones (a
/// stored one named like one of `config` is left out, as the dispatcher does), each with
/// its last delivery.
pub async fn channel_views(store: &Store, config: &[ChannelSpec]) -> Result<Vec<ChannelView>> {
    let mut views: Vec<ChannelView> = config
        .iter()
        .map(|c| ChannelView {
            channel: c.masked(),
            secret_set: c.url.hides_something(),
            origin: "config",
            updated_at_ms: None,
            last_delivery: None,
        })
        .collect();
    for s in store.list_channels().await? {
        if config.iter().any(|c| c.name == s.channel.name) {
            continue;
        }
        views.push(ChannelView {
            channel: s.channel.masked(),
            secret_set: s.channel.url.hides_something(),
            origin: "api",
            updated_at_ms: Some(s.updated_at_ms),
            last_delivery: None,
        });
    }
    let names: Vec<String> = views.iter().map(|v| v.channel.name.clone()).collect();
    let mut last = store.last_deliveries(&names).await?;
    for v in &mut views {
        v.last_delivery = last.remove(&v.channel.name).map(|d| LastDelivery {
            at_ms: d.at_ms,
            status: d.status,
            error: d.error,
            firing: d.firing,
            resolved: d.resolved,
        });
    }
    views.sort_by(|a, b| a.channel.name.cmp(&b.channel.name));
    Ok(views)
}

/// The active alerts at `now_ms` (pending and firing), firing first, then the oldest,
/// each with its rule's severity and summary and the silences that mute it.
pub async fn active_alerts(store: &Store, now_ms: i64) -> Result<Vec<AlertView>> {
    let muter = Muter::new(&store.active_silences(now_ms).await?, now_ms);
    let rules = store.list_alert_rules().await?;
    let mut alerts = store.list_alerts().await?;
    alerts.sort_by_key(|a| (a.state != Phase::Firing, a.active_since_ms));
    Ok(alerts
        .iter()
        .map(|a| {
            let rule = rules
                .iter()
                .find(|r| r.rule.name == a.rule)
                .map(|r| &r.rule);
            AlertView::new(a, rule, &muter)
        })
        .collect())
}

/// The `service`, `instance` and `route` labels that alerts of route `id` carry; `None`
/// when there is no such route.
pub async fn route_subject(store: &Store, id: i64) -> Result<Option<Labels>> {
    let Some(info) = store.route_infos(None, Some(id)).await?.into_iter().next() else {
        return Ok(None);
    };
    let labels = info.subject_labels();
    Ok(Some(
        labels
            .into_iter()
            .filter(|(k, _)| matches!(k.as_str(), "service" | "instance" | "route"))
            .collect(),
    ))
}
