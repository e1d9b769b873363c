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

// This group's operations on [`Store`], each answered by the backend the store was
// opened on (`forward!`).
forward! {
    /// The rules in force (deleted built-ins left out), by name.
    pub async fn list_alert_rules(&self) -> Result<Vec<StoredRule>>;

    /// One rule in force, by name.
    pub async fn get_alert_rule(&self, name: &str) -> Result<Option<StoredRule>>;

    /// Adds a rule; `false` when a rule of that name is in force. A deleted built-in of
    /// the same name is replaced.
    pub async fn insert_alert_rule(&self, rule: &Rule, origin: &str, now_ms: i64) -> Result<bool>;

    /// Replaces rule `name` (which may be renamed to `rule.name`); its active alerts are
    /// dropped (they belong to the old condition). `false` when no such rule is in force.
    pub async fn update_alert_rule(&self, name: &str, rule: &Rule, now_ms: i64) -> Result<bool>;

    /// Deletes rule `name` and its active alerts (a built-in rule is marked deleted so it
    /// is not seeded again). `false` when no such rule is in force.
    pub async fn delete_alert_rule(&self, name: &str, now_ms: i64) -> Result<bool>;

    /// At start-up: adds the built-in rules that were never stored (a deleted one stays
    /// deleted) and writes the configuration file's rules over any stored rule of the
    /// same name (`origin = config`). Rules the configuration file no longer has, and
    /// built-ins not in `builtin` (`builtin_rules = false`), are removed with their
    /// active alerts, as Prometheus drops the rules of a reloaded file; built-ins
    /// removed that way come back when turned on again.
    pub async fn seed_alert_rules(
        &self,
        builtin: &[Rule],
        config: &[Rule],
        now_ms: i64,
    ) -> Result<()>;

    /// The active alerts (pending and firing), by rule and labels.
    pub async fn list_alerts(&self) -> Result<Vec<Alert>>;

    /// Firing alerts per rule: `(rule, count)`, by rule (the console's nav badge).
    pub async fn firing_counts(&self) -> Result<Vec<(String, i64)>>;

    /// Saves one evaluation round in one transaction: the active alerts of the `rules`
    /// evaluated are replaced by `alerts` (alerts of rules no longer in force are dropped); `transitions` go to the history, and those that
    /// notify (firing, resolved) to the outbox. Returns the outbox ids added.
    pub async fn save_evaluation(
        &self,
        rules: &[String],
        alerts: &[Alert],
        transitions: &[Transition],
        now_ms: i64,
    ) -> Result<Vec<i64>>;

    /// As [`Store::save_evaluation`], only while `fence` is held in its term at `now_ms`
    /// (checked in the same transaction); `None`, nothing saved, when it is not.
    pub async fn save_evaluation_fenced(
        &self,
        fence: Option<&LeaseTerm<'_>>,
        rules: &[String],
        alerts: &[Alert],
        transitions: &[Transition],
        now_ms: i64,
    ) -> Result<Option<Vec<i64>>>;

    /// The history, newest first: at most `limit` rows, of one rule when given.
    pub async fn alert_history(&self, rule: Option<&str>, limit: i64) -> Result<Vec<HistoryRow>>;

    /// The history rows that `filter` selects, newest first, at most `limit`.
    ///
    /// With `from_ms`, each alert identity that was pending or firing at `from_ms` also
    /// gets its last transition before `from_ms` (so a period that began earlier is
    /// known to be open at the start of the range); those rows count towards `limit`.
    pub async fn alert_history_filtered(
        &self,
        filter: &HistoryFilter,
        limit: i64,
    ) -> Result<Vec<HistoryRow>>;

    /// Notifications not yet delivered whose next attempt is due at `now_ms` and that
    /// have had fewer than `max_attempts` attempts, oldest first.
    pub async fn due_notifications(
        &self,
        now_ms: i64,
        max_attempts: i64,
        limit: i64,
    ) -> Result<Vec<Notification>>;

    /// Notifications not yet delivered, oldest first (whatever their retry time).
    pub async fn undelivered_notifications(&self, limit: i64) -> Result<Vec<Notification>>;
}
