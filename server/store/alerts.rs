//! Alert tables: rules (`alert_rules`), active alerts with their timers (`alerts`), the
//! history of transitions (`alert_history`), and the notification outbox with its delivery
//! outbox (`alert_notifications`), which the dispatcher (`alerts::notify`) takes into its
//! notification groups (`store::alert_groups`).
//!
//! An evaluation round is saved in one transaction ([`SqliteStore::save_evaluation`]): the new
//! states, their transitions and the notices they raise, so a restart resumes the `for`
//! timers and neither loses nor re-sends a notification.

use crate::domain::alerts::rule::{Labels, Rule};
use serde::Serialize;
use sqlx::FromRow;

pub(crate) const BATCH_ROWS: usize = 500;

/// A lease held in a term (`leases`), checked inside a write transaction so that a
/// holder that lost it writes nothing (fencing; `services::alerts::lease`).
#[derive(Debug, Clone, Copy)]
pub struct LeaseTerm<'a> {
    pub name: &'a str,
    pub holder: &'a str,
    pub term: i64,
}

/// A stored rule and where it came from (`builtin`, `config` or `api`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredRule {
    #[serde(flatten)]
    pub rule: Rule,
    pub origin: String,
    pub updated_at_ms: i64,
}

#[derive(FromRow)]
pub(crate) struct RuleRow {
    pub(crate) body: String,
    pub(crate) origin: String,
    pub(crate) updated_at_ms: i64,
}

impl RuleRow {
    pub(crate) fn into_stored(self) -> Option<StoredRule> {
        match serde_json::from_str::<Rule>(&self.body) {
            Ok(rule) => Some(StoredRule {
                rule,
                origin: self.origin,
                updated_at_ms: self.updated_at_ms,
            }),
            Err(e) => {
                tracing::error!(error = %e, body = %self.body, "stored alert rule unreadable; skipped");
                None
            }
        }
    }
}

#[derive(FromRow)]
pub(crate) struct AlertRow {
    pub(crate) rule: String,
    pub(crate) labels: String,
    pub(crate) state: String,
    pub(crate) value: Option<f64>,
    pub(crate) active_since_ms: i64,
    pub(crate) fired_at_ms: Option<i64>,
    pub(crate) keep_firing_since_ms: Option<i64>,
    pub(crate) last_eval_ms: i64,
}

/// One transition in the history (`GET /api/v1/alerts/history`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRow {
    pub id: i64,
    pub rule: String,
    pub labels: Labels,
    /// `pending`, `firing`, `resolved` or `inactive`.
    pub change: String,
    pub value: Option<f64>,
    pub at_ms: i64,
}

#[derive(FromRow)]
pub(crate) struct RawHistory {
    pub(crate) id: i64,
    pub(crate) rule: String,
    pub(crate) labels: String,
    pub(crate) change: String,
    pub(crate) value: Option<f64>,
    pub(crate) at_ms: i64,
}

/// Which history rows to read (`GET /api/v1/alerts/history`); every given part must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryFilter {
    /// The rule's name, exactly.
    pub rule: Option<String>,
    /// Labels the alert must carry with exactly these values (`service`, `route`, …).
    pub labels: Labels,
    /// Transitions at or after this time, unix ms (see [`Store::alert_history_filtered`](super::Store::alert_history_filtered)).
    pub from_ms: Option<i64>,
    /// Transitions at or before this time, unix ms.
    pub to_ms: Option<i64>,
}

/// A notice to deliver: an episode fired or resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notification {
    pub id: i64,
    pub rule: String,
    pub labels: Labels,
    /// `firing` or `resolved`.
    pub change: String,
    pub value: Option<f64>,
    pub started_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    pub created_at_ms: i64,
    pub attempts: i64,
}

#[derive(FromRow)]
pub(crate) struct RawNotification {
    pub(crate) id: i64,
    pub(crate) rule: String,
    pub(crate) labels: String,
    pub(crate) change: String,
    pub(crate) value: Option<f64>,
    pub(crate) started_at_ms: i64,
    pub(crate) ended_at_ms: Option<i64>,
    pub(crate) created_at_ms: i64,
    pub(crate) attempts: i64,
}

/// Labels as stored: a JSON object with sorted keys (the alert's identity).
pub(crate) fn labels_json(l: &Labels) -> String {
    serde_json::to_string(l).unwrap_or_else(|_| "{}".into())
}

pub(crate) fn labels_of(s: &str) -> Labels {
    serde_json::from_str(s).unwrap_or_default()
}

pub(crate) fn rule_json(r: &Rule) -> String {
    serde_json::to_string(r).unwrap_or_default()
}
