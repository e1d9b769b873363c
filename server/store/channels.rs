//! Alert channels added at run time (`alert_channels`): one row per channel, its
//! [`ChannelSpec`] as JSON. The channels of `harrier.toml` are not stored; the dispatcher
//! merges both (`services::alerts::notify::Dispatch::channels_in_force`). Must not check a channel
//! (the API does, with [`ChannelSpec::validate`]) nor decide which name wins.

use crate::domain::alerts::channel::ChannelSpec;
use serde::Serialize;
use sqlx::FromRow;

/// A stored channel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredChannel {
    pub channel: ChannelSpec,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

#[derive(FromRow)]
pub(crate) struct ChannelRow {
    pub(crate) name: String,
    pub(crate) body: String,
    pub(crate) created_at_ms: i64,
    pub(crate) updated_at_ms: i64,
}

impl ChannelRow {
    pub(crate) fn into_stored(self) -> Option<StoredChannel> {
        match serde_json::from_str::<ChannelSpec>(&self.body) {
            Ok(channel) => Some(StoredChannel {
                channel,
                created_at_ms: self.created_at_ms,
                updated_at_ms: self.updated_at_ms,
            }),
            Err(e) => {
                tracing::error!(channel = %self.name, error = %e, "stored alert channel unreadable; skipped");
                None
            }
        }
    }
}

/// The stored JSON: the channel with its URL whole (serializing a channel masks the URL).
pub(crate) fn body(c: &ChannelSpec) -> String {
    let mut v = serde_json::to_value(c).unwrap_or_else(|_| serde_json::json!({}));
    v["url"] = c.url.expose().into();
    v.to_string()
}
