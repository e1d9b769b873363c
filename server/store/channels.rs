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

// This group's operations on [`Store`], each answered by the backend the store was
// opened on (`forward!`).
forward! {
    /// The stored channels, by name (rows whose JSON no longer reads are logged and left
    /// out).
    pub async fn list_channels(&self) -> Result<Vec<StoredChannel>>;

    /// One stored channel, by name.
    pub async fn get_channel(&self, name: &str) -> Result<Option<StoredChannel>>;

    /// Stores a new channel at `now_ms`; `false` when one of that name is stored.
    pub async fn insert_channel(&self, c: &ChannelSpec, now_ms: i64) -> Result<bool>;

    /// Replaces channel `name` with `c` at `now_ms`, in one transaction. When `c.name`
    /// differs the channel is renamed, and its notification groups and delivery log go
    /// with it (so a rename neither re-sends nor forgets what was sent). `false` when no
    /// channel `name` is stored, or when another stored channel is called `c.name`.
    pub async fn update_channel(&self, name: &str, c: &ChannelSpec, now_ms: i64) -> Result<bool>;

    /// Deletes stored channel `name`; `false` when there is none. Its groups are dropped
    /// by the dispatcher's next pass ([`Store::drop_groups_of_unknown_channels`]); its
    /// delivery log stays.
    pub async fn delete_channel(&self, name: &str) -> Result<bool>;

    /// Deletes the stored channels named in `names` (at start-up: the names
    /// `harrier.toml` now uses, which win); returns the names deleted.
    pub async fn delete_channels_named(&self, names: &[String]) -> Result<Vec<String>>;
}
