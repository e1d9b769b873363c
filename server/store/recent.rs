//! What the alert evaluator reads of every route: the routes as alert subjects and their
//! figures over several windows ending at one time ([`crate::store::Store::route_window_figures`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::routes::MINUTE_MS;
use crate::domain::routes::Figures;

/// The longest window answered from memory, ms.
pub const MAX_WINDOW_MS: i64 = 15 * MINUTE_MS;
/// A route with no interval in a window takes its last one from up to this far back (or
/// the window, if longer); the same in both paths.
pub(crate) const LAST_LOOKBACK_MS: i64 = 10 * MINUTE_MS;

/// A route as an alert subject.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSubject {
    pub id: i64,
    pub target_id: i64,
    pub service: String,
    pub route: String,
    pub source: String,
    /// The instance the route runs on (see [`super::RouteInfo::instance`]).
    pub instance: String,
    pub target_name: String,
    /// Its labels as an alert subject: `service`, `instance`, `route`, `target`, `source`,
    /// and the route's own labels beside the service (`camel_context`, …).
    pub labels: Arc<BTreeMap<String, String>>,
}

/// The labels of a route subject: `service` (the target's), `instance`, `route`, `target`,
/// `source`, plus the route's own labels (`route_labels`, e.g. `camel_context`; stored as a
/// JSON object), which never replace those five.
pub fn subject_labels(
    service: &str,
    instance: &str,
    route: &str,
    target: &str,
    source: &str,
    route_labels: &str,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = parse_route_labels(route_labels);
    out.extend(
        [
            ("service", service),
            ("instance", instance),
            ("route", route),
            ("target", target),
            ("source", source),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    out
}

/// A route's stored labels (a JSON object of strings; `{}` or unreadable → none).
pub fn parse_route_labels(json: &str) -> BTreeMap<String, String> {
    serde_json::from_str(json).unwrap_or_default()
}

/// Every route's figures over several windows ending at one time
/// ([`SqliteStore::route_window_figures`]).
#[derive(Debug, Clone, Default)]
pub struct RouteWindows {
    /// Every route, by service, route, target name, instance.
    pub routes: Arc<Vec<RouteSubject>>,
    /// Whether each route's target answered its last scrape (`None`: not scraped yet), in
    /// `routes` order.
    pub target_up: Vec<Option<bool>>,
    /// Per window (ms), one [`Figures`] per route in `routes` order.
    pub figures: HashMap<i64, Vec<Figures>>,
    /// Whether the intervals held in memory answered (else the database did).
    pub from_memory: bool,
}

// This group's operations on [`Store`], each answered by the backend the store was
// opened on (`forward!`).
forward! {
    /// The figures of every route over several windows ending at `now_ms`, as
    /// [`Store::route_figures`] computes them, for the alert evaluator. On SQLite: from the
    /// recent intervals held in memory when they cover the windows (loading them first if
    /// needed), else from the database ([`Store::route_window_figures_sql`]); no windows: no
    /// routes, and the memory is dropped (the evaluator has no route rule). On PostgreSQL
    /// always from the database (another process may write it), `from_memory` false.
    pub async fn route_window_figures(
        &self,
        needs: &[WindowNeed],
        now_ms: i64,
    ) -> Result<RouteWindows>;
}
