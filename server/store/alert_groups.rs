//! Notification groups (`alert_groups`, `alert_group_alerts`) and their delivery log
//! (`alert_group_deliveries`): the state of the notification dispatcher (see
//! `alerts::notify`), kept in the database so a restart neither re-sends nor loses a
//! notification.
//!
//! The evaluator's outbox (`alert_notifications`) is taken into the groups in one
//! transaction ([`SqliteStore::ingest_notices`]); each flush of a group is settled in one
//! transaction ([`SqliteStore::settle_group`]).

use crate::domain::alerts::rule::Labels;
use serde::Serialize;
use sqlx::FromRow;

/// One alert entering a group: `ends_at_ms` is `None` when it fires, the resolution time
/// when it resolves.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupEntry {
    pub channel: String,
    pub group_key: String,
    pub group_labels: Labels,
    pub fingerprint: String,
    pub rule: String,
    /// With `alertname` and `severity`.
    pub labels: Labels,
    pub value: Option<f64>,
    pub starts_at_ms: i64,
    pub ends_at_ms: Option<i64>,
    /// When a new group is first flushed (now + group_wait).
    pub first_flush_ms: i64,
    /// Flush the group at `first_flush_ms` even if it exists (alertmanager channels
    /// push every change at once).
    pub flush_now: bool,
}

#[derive(FromRow)]
pub(crate) struct GroupRow {
    pub(crate) channel: String,
    pub(crate) group_key: String,
    pub(crate) group_labels: String,
    pub(crate) created_at_ms: i64,
    pub(crate) next_flush_ms: i64,
    pub(crate) notified_at_ms: Option<i64>,
    pub(crate) notified_firing: String,
    pub(crate) notified_resolved: String,
    pub(crate) attempts: i64,
}

#[derive(FromRow)]
pub(crate) struct GroupAlertRow {
    pub(crate) fingerprint: String,
    pub(crate) rule: String,
    pub(crate) labels: String,
    pub(crate) value: Option<f64>,
    pub(crate) starts_at_ms: i64,
    pub(crate) ends_at_ms: Option<i64>,
    pub(crate) notified: bool,
}

/// How a flush ended.
#[derive(Debug, Clone, PartialEq)]
pub enum FlushResult {
    /// Done (sent, or nothing needed sending): `notified` is the notification log entry
    /// to record when a message went out (`(firing, resolved)` fingerprints);
    /// `remove` the resolved alerts flushed; `pushed` the alerts an alertmanager channel
    /// received while firing. Next flush at `next_flush_ms`.
    Done {
        notified: Option<(Vec<String>, Vec<String>)>,
        remove: Vec<String>,
        pushed: Vec<String>,
        next_flush_ms: i64,
    },
    /// The channel refused or did not answer: retry at `next_flush_ms`.
    Failed { error: String, next_flush_ms: i64 },
}

/// One attempt to deliver a group's notification to its channel.
#[derive(Debug, Clone, PartialEq, Serialize, FromRow)]
pub struct Delivery {
    pub channel: String,
    pub group_key: String,
    pub at_ms: i64,
    /// Alerts in the message, by status.
    pub firing: i64,
    pub resolved: i64,
    /// The HTTP status, when the channel answered.
    pub status: Option<i64>,
    pub error: Option<String>,
}

pub(crate) fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

// This group's operations on [`Store`], each answered by the backend the store was
// opened on (`forward!`).
forward! {
    /// Takes notices into groups in one transaction: every entry is added to (or updates)
    /// its group, a new group waiting until its `first_flush_ms`, and the notices
    /// `notice_ids` are marked taken at `now_ms`.
    pub async fn ingest_notices(
        &self,
        notice_ids: &[i64],
        entries: &[GroupEntry],
        now_ms: i64,
    ) -> Result<()>;

    /// Groups whose flush is due at `now_ms`, oldest flush first.
    pub async fn due_groups(&self, now_ms: i64) -> Result<Vec<Group>>;

    /// This database's installation key: `candidate` (a random value the caller made) if
    /// none is stored yet, else the stored one — the same for every process using the
    /// database, for its whole life.
    pub async fn installation_key(&self, candidate: &str) -> Result<String>;

    /// The alerts of one group, by labels.
    pub async fn group_alerts(&self, channel: &str, group_key: &str) -> Result<Vec<GroupAlert>>;

    /// Marks the alerts `fingerprints` of `channel` as told while firing, right before a
    /// message that tells of them is sent: should the sender die before the message is
    /// settled, whoever flushes the group next knows the receiver may have heard of them,
    /// and tells it when they resolve.
    pub async fn mark_told(&self, channel: &str, fingerprints: &[String]) -> Result<()>;

    /// Settles one flush of group (`channel`, `group_key`) in one transaction: logs the
    /// attempt (when a message was tried), records the notification log entry, drops the
    /// flushed resolved alerts (and the group once it is empty), and sets the next flush.
    pub async fn settle_group(
        &self,
        channel: &str,
        group_key: &str,
        result: &FlushResult,
        delivery: Option<&Delivery>,
        now_ms: i64,
    ) -> Result<()>;

    /// Drops the groups (and their alerts) of channels that exist no more: neither in
    /// `config` (the names of `harrier.toml`'s channels) nor stored (`alert_channels`). One
    /// transaction, reading the stored names in it, so a channel renamed or added through
    /// the API meanwhile keeps its groups.
    pub async fn drop_groups_of_unknown_channels(&self, config: &[String]) -> Result<()>;

    /// Adds one attempt to the delivery log (a test notification; group flushes are
    /// logged by [`Store::settle_group`]).
    pub async fn log_delivery(&self, d: &Delivery) -> Result<()>;

    /// The newest delivery-log entry of each of `channels` that has one, by channel name
    /// (one index seek per channel: `alert_group_deliveries_channel`).
    pub async fn last_deliveries(
        &self,
        channels: &[String],
    ) -> Result<std::collections::HashMap<String, Delivery>>;

    /// The delivery log, newest first.
    pub async fn alert_deliveries(&self, limit: i64) -> Result<Vec<Delivery>>;
}
