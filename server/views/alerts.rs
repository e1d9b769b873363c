//! Alert read models: the channels in force with their last delivery, for the alerts
//! console and `/api/v1/alert-channels`.

use crate::domain::alerts::channel::ChannelSpec;
use crate::domain::alerts::{ChannelView, LastDelivery};
use crate::store::{Result, Store};

/// Every channel, by name: those of `config` (`harrier.toml`) and the stored ones (a
/// stored one named like one of `config` is left out, as the dispatcher does), each with
/// its last delivery.
pub async fn channel_views(store: &Store, config: &[ChannelSpec]) -> Result<Vec<ChannelView>> {
    let mut views: Vec<ChannelView> = config
        .iter()
        .map(|c| ChannelView {
            channel: c.masked(),
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
