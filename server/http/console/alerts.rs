//! The alerts page (`/console/alerts`) and the alerts entry of every page's navigation.
//!
//! The page lists the alerts firing and pending now, the history of the chosen range as a
//! timeline (one lane per alert identity) with its transitions, the rules (with an editor
//! that saves through `/api/v1/alert-rules`), the notification channels (with their last
//! delivery, an editor that saves through `/api/v1/alert-channels` and a "Send test"
//! button) and the silences (`/api/v1/silences`, read and written by `static/alerts.js`).
//! It reads the store and never writes.
//!
//! The navigation badge (firing alerts, coloured by the highest severity) is read once per
//! console request by [`with_badge`] and handed to the templates through a task-local, so
//! no page struct needs to carry it.

use std::collections::{BTreeMap, HashMap};

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Query, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use serde::Deserialize;

use super::{PageError, filters};
use crate::domain::alerts::ChannelView;
use crate::domain::alerts::rule::{Labels, Measure, Rule, Subject};
use crate::domain::alerts::silence::Muter;
use crate::domain::format;
use crate::state::AppState;
use crate::store::{HistoryFilter, HistoryRow, StoredRule};

/// What the navigation's alerts badge shows: firing alerts and the highest severity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NavBadge {
    pub firing: i64,
    /// `sev-critical`, `sev-warning` or `sev-info` (see [`severity_class`]).
    pub class: &'static str,
}

tokio::task_local! {
    static BADGE: NavBadge;
}

/// The badge of the request being rendered (`None` outside [`with_badge`]).
pub fn nav_badge() -> Option<NavBadge> {
    BADGE.try_with(Clone::clone).ok()
}

/// Middleware of the console pages: reads the firing alerts once and renders the page
/// with them in scope. A store error leaves the badge out rather than failing the page.
pub async fn with_badge(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match badge(&state).await {
        Ok(b) => BADGE.scope(b, next.run(req)).await,
        Err(e) => {
            tracing::warn!(error = %e, "reading firing alerts for the nav badge failed");
            next.run(req).await
        }
    }
}

/// [`with_badge`] for console page requests (GET under `/console`, shared pages under
/// `/share`); other requests pass untouched.
pub async fn with_badge_on_pages(state: State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let page = req.method() == axum::http::Method::GET
        && (path.starts_with("/console") && !path.starts_with("/console/sign-in"));
    if page {
        with_badge(state, req, next).await
    } else {
        next.run(req).await
    }
}

/// The nav badge: firing alerts that no silence mutes, coloured by the most severe.
async fn badge(state: &AppState) -> crate::store::Result<NavBadge> {
    if state.store.firing_counts().await?.is_empty() {
        return Ok(NavBadge {
            firing: 0,
            class: "sev-info",
        });
    }
    let alerts = crate::views::alerts::active_alerts(&state.store, crate::now_ms()).await?;
    let mut rank = 0;
    let mut firing = 0;
    for a in alerts
        .iter()
        .filter(|a| a.state == "firing" && a.silenced_by.is_empty())
    {
        firing += 1;
        rank = rank.max(severity_rank(&a.severity));
    }
    Ok(NavBadge {
        firing,
        class: rank_class(rank),
    })
}

/// Orders severities: `critical` (also `page`, `emergency`, `fatal`) 3, `error` (`high`,
/// `major`) 2, `warning` (`warn`, `medium`, `minor`) 1, anything else 0 (info).
pub fn severity_rank(severity: &str) -> u8 {
    match severity.to_ascii_lowercase().as_str() {
        "critical" | "page" | "emergency" | "fatal" | "disaster" => 3,
        "error" | "high" | "major" => 2,
        "warning" | "warn" | "medium" | "minor" => 1,
        _ => 0,
    }
}

fn rank_class(rank: u8) -> &'static str {
    match rank {
        3 => "sev-critical",
        2 => "sev-error",
        1 => "sev-warning",
        _ => "sev-info",
    }
}

/// The CSS class of a severity chip: `sev-critical`, `sev-error`, `sev-warning`, `sev-info`.
pub fn severity_class(severity: &str) -> &'static str {
    rank_class(severity_rank(severity))
}

/// "12 s ago", "4 min 12 s ago", "3 h 04 min ago" (the console's duration format).
pub fn ago(age_ms: i64) -> String {
    let age = age_ms.max(0);
    if age < 60_000 {
        format!("{} s ago", age / 1000)
    } else {
        format!("{} ago", format::duration(Some(age)))
    }
}

/// The evaluation interval for people: "15 s", "1 min", "1 min 30 s".
pub fn interval_text(ms: i64) -> String {
    if ms % 60_000 == 0 && ms < 3_600_000 {
        format!("{} min", ms / 60_000)
    } else if ms < 60_000 && ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format::duration(Some(ms))
    }
}

/// A rule's measure for people: name and unit.
pub fn measure_label(m: Measure) -> &'static str {
    match m {
        Measure::ErrorPct => "error %",
        Measure::ErrorsPerS => "errors/s",
        Measure::ThroughputPerS => "throughput",
        Measure::MeanMs => "mean",
        Measure::P95Ms => "p95",
        Measure::P99Ms => "p99",
        Measure::Inflight => "inflight",
        Measure::TargetDown => "target down",
        Measure::NoExchanges => "no exchanges",
        Measure::PoolUsagePct => "pool usage %",
        Measure::PoolPending => "pool waiting",
    }
}

/// A value of `m` with its unit: "7.41 %", "3.20 /s", "812 ms", "12", "down".
pub fn measure_value(m: Measure, v: Option<f64>) -> String {
    let Some(v) = v.filter(|v| v.is_finite()) else {
        return format::NONE.to_string();
    };
    match m {
        Measure::ErrorPct => format::pct(Some(v)),
        Measure::ErrorsPerS | Measure::ThroughputPerS => format!("{} /s", format::float(v, 2)),
        Measure::MeanMs | Measure::P95Ms | Measure::P99Ms => format::ms(Some(v)),
        Measure::Inflight => format::float(v, if v.fract() == 0.0 { 0 } else { 1 }),
        Measure::TargetDown => (if v > 0.0 { "down" } else { "up" }).to_string(),
        Measure::NoExchanges => (if v > 0.0 { "none" } else { "some" }).to_string(),
        Measure::PoolUsagePct => format!("{} %", format::float(v, 0)),
        Measure::PoolPending => format::float(v, if v.fract() == 0.0 { 0 } else { 1 }),
    }
}

/// The firing condition: "> 5 %", ">= 800 ms", "target down", "no exchanges".
pub fn condition_text(r: &Rule) -> String {
    match r.measure {
        Measure::TargetDown | Measure::NoExchanges => {
            if r.comparison.holds(1.0, r.threshold) && !r.comparison.holds(0.0, r.threshold) {
                measure_label(r.measure).to_string()
            } else {
                format!(
                    "{} {} {}",
                    measure_label(r.measure),
                    r.comparison.as_str(),
                    crate::domain::alerts::rule::fmt_num(r.threshold)
                )
            }
        }
        m => format!(
            "{} {}",
            r.comparison.as_str(),
            threshold_value(m, r.threshold)
        ),
    }
}

/// A threshold with its unit, as written: "5 %", "800 ms", "2.5 /s".
pub fn threshold_value(m: Measure, v: f64) -> String {
    let n = crate::domain::alerts::rule::fmt_num(v);
    match m {
        Measure::ErrorPct => format!("{n} %"),
        Measure::ErrorsPerS | Measure::ThroughputPerS => format!("{n} /s"),
        Measure::MeanMs | Measure::P95Ms | Measure::P99Ms => format!("{n} ms"),
        Measure::PoolUsagePct => format!("{n} % of max"),
        _ => n,
    }
}

/// Which subjects a rule watches, in words: "routes /checkout* of orders", "every route".
pub fn subject_text(s: &Subject) -> String {
    if let Some(sc) = &s.scenario {
        return format!("live runs of {sc}");
    }
    let mut out = match &s.route {
        None => "every route".to_string(),
        Some(g) if g == "*" => "every route".to_string(),
        Some(g) if g.contains(['*', '?']) => format!("routes {g}"),
        Some(g) => format!("route {g}"),
    };
    if let Some(svc) = &s.service {
        out.push_str(&format!(" of {svc}"));
    }
    for (k, v) in &s.labels {
        out.push_str(&format!(" · {k}={v}"));
    }
    out
}

/// The subject of one alert: text and, where there is one, the page to open.
#[derive(Debug, Clone, PartialEq)]
pub struct SubjectView {
    pub text: String,
    pub detail: String,
    pub url: Option<String>,
}

/// Route ids by their identity labels (`service`, `instance`, `route`).
pub type RouteIndex = HashMap<(String, String, String), i64>;

fn subject_of(labels: &Labels, routes: &RouteIndex) -> SubjectView {
    let get = |k: &str| labels.get(k).cloned().unwrap_or_default();
    // a live run (rules with a scenario subject): `scenario`, `run` (its id), `run_name`
    if let Some(run) = labels.get("run").filter(|_| !labels.contains_key("route")) {
        let name = labels
            .get("run_name")
            .filter(|n| !n.is_empty())
            .cloned()
            .unwrap_or_else(|| format!("run {run}"));
        return SubjectView {
            text: name,
            detail: [format!("run {run}"), get("scenario")]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" · "),
            url: run
                .parse::<i64>()
                .ok()
                .map(|id| format!("/console/runs/{id}")),
        };
    }
    // a pool (pool rules): `service`, `target`, `instance`, `kind`, `pool`
    if let (Some(kind), Some(pool)) = (labels.get("kind"), labels.get("pool")) {
        let label =
            crate::domain::pools::PoolKind::parse(kind).map_or(kind.as_str(), |k| k.label());
        return SubjectView {
            text: format!("{label} {pool}"),
            detail: [get("service"), get("instance")]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(" · "),
            url: labels
                .get("service")
                .filter(|s| !s.is_empty())
                .map(|s| format!("{}#pools", crate::views::services::service_url(s))),
        };
    }
    if let Some(route) = labels.get("route") {
        let key = (get("service"), get("instance"), route.clone());
        let detail = [get("service"), get("instance")]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" · ");
        return SubjectView {
            text: route.clone(),
            detail,
            url: routes.get(&key).map(|id| format!("/console/routes/{id}")),
        };
    }
    let text = labels
        .iter()
        .filter(|(k, _)| k.as_str() != "alertname")
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    SubjectView {
        text,
        detail: String::new(),
        url: None,
    }
}

fn labels_text(labels: &Labels) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{v}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An alert firing or pending now, as the page shows it.
pub struct AlertRow {
    pub rule: String,
    pub severity: String,
    pub sev_class: &'static str,
    pub state: String,
    pub subject: SubjectView,
    pub value: String,
    pub condition: String,
    pub since_ms: i64,
    pub since: String,
    pub since_abs: String,
    pub summary: String,
    /// The alert's labels with `alertname`, as JSON (the "Silence…" form's matchers).
    pub labels_json: String,
    /// `name=value` pairs of the labels, for the row's data attribute and hover.
    pub labels_text: String,
    /// Ids of the silences muting it ("3, 7"); empty when none.
    pub silenced_by: String,
}

/// One bar of the timeline, placed in % of the range's width.
pub struct Bar {
    pub x_pct: String,
    pub w_pct: String,
    /// `pending` or `firing sev-…`.
    pub class: String,
    pub title: String,
}

/// One alert identity's lane.
pub struct Lane {
    pub rule: String,
    pub subject: SubjectView,
    pub sev_class: &'static str,
    pub labels_text: String,
    pub bars: Vec<Bar>,
}

/// A tick of the timeline's time axis.
pub struct Tick {
    pub x_pct: String,
    pub label: String,
    pub anchor: &'static str,
}

/// One transition in the table under the timeline.
pub struct TransitionRow {
    pub at_ms: i64,
    pub at: String,
    pub rule: String,
    pub subject: SubjectView,
    pub change: String,
    pub change_class: &'static str,
    pub value: String,
}

/// A rule as the rules table shows it.
pub struct RuleRow {
    pub name: String,
    pub subject: String,
    pub measure: String,
    pub condition: String,
    pub window: String,
    pub for_: String,
    pub severity: String,
    pub sev_class: &'static str,
    pub origin: String,
    pub editable: bool,
    pub firing: usize,
    pub pending: usize,
    /// The rule as JSON (the editor's starting point).
    pub json: String,
}

/// A channel as the channels table shows it.
pub struct ChannelRow {
    pub name: String,
    pub kind: String,
    /// The host (and port) it sends to.
    pub target: String,
    /// The URL as shown (a Slack URL masked to scheme and host).
    pub url: String,
    /// Its matchers (none: every alert).
    pub matchers: Vec<String>,
    /// "alertname", "alertname, route", "every label"; "–" for alertmanager channels.
    pub group_by: String,
    /// Durations with their unit ("30 s", "5 min", "4 h"); "–" where the kind has no
    /// groups (alertmanager: pushed at once, again every minute).
    pub group_wait: String,
    pub group_interval: String,
    pub repeat_interval: String,
    pub grouped: bool,
    pub send_resolved: bool,
    /// `config` or `api`.
    pub origin: String,
    pub editable: bool,
    pub last: Option<DeliveryCell>,
    /// The channel as JSON, URL masked (the editor's starting point).
    pub json: String,
}

/// A channel's last delivery attempt, as its table cell shows it.
pub struct DeliveryCell {
    pub at_ms: i64,
    pub at: String,
    pub at_abs: String,
    /// "HTTP 200", or "no answer".
    pub status: String,
    /// `ok` (2xx) or `err`.
    pub status_class: &'static str,
    /// Empty when delivered.
    pub error: String,
    /// "1 firing", "2 firing, 1 resolved".
    pub alerts: String,
}

/// A duration for people, with its unit: "0 s", "30 s", "5 min", "4 h", "1 min 30 s".
pub fn duration_text(ms: i64) -> String {
    if ms == 0 {
        "0 s".to_string()
    } else if ms % 3_600_000 == 0 {
        format!("{} h", ms / 3_600_000)
    } else if ms % 60_000 == 0 {
        format!("{} min", ms / 60_000)
    } else if ms % 1000 == 0 && ms < 60_000 {
        format!("{} s", ms / 1000)
    } else {
        format::duration(Some(ms))
    }
}

fn channel_row(v: &ChannelView, now_ms: i64) -> ChannelRow {
    let c = &v.channel;
    let grouped = c.kind != "alertmanager";
    let when_grouped = |ms: i64| {
        if grouped {
            duration_text(ms)
        } else {
            format::NONE.to_string()
        }
    };
    ChannelRow {
        name: c.name.clone(),
        kind: c.kind.clone(),
        target: c.target_host(),
        url: c.masked_url(),
        matchers: c.matchers.clone(),
        group_by: if !grouped {
            format::NONE.to_string()
        } else if c.group_by.iter().any(|l| l == "...") {
            "every label".to_string()
        } else if c.group_by.is_empty() {
            "one group".to_string()
        } else {
            c.group_by.join(", ")
        },
        group_wait: when_grouped(c.group_wait.ms()),
        group_interval: when_grouped(c.group_interval.ms()),
        repeat_interval: when_grouped(c.repeat_interval.ms()),
        grouped,
        send_resolved: c.send_resolved,
        origin: v.origin.to_string(),
        editable: v.origin != "config",
        last: v.last_delivery.as_ref().map(|d| DeliveryCell {
            at_ms: d.at_ms,
            at: ago(now_ms - d.at_ms),
            at_abs: format::time(Some(d.at_ms)),
            status: d
                .status
                .map_or_else(|| "no answer".to_string(), |s| format!("HTTP {s}")),
            status_class: if d.error.is_none() { "ok" } else { "err" },
            error: d.error.clone().unwrap_or_default(),
            alerts: match (d.firing, d.resolved) {
                (f, 0) => format!("{f} firing"),
                (0, r) => format!("{r} resolved"),
                (f, r) => format!("{f} firing, {r} resolved"),
            },
        }),
        json: serde_json::to_string(c).unwrap_or_default(),
    }
}

/// A range choice of the history.
pub struct RangeChoice {
    pub key: &'static str,
    pub label: &'static str,
    pub current: bool,
}

const RANGES: &[(&str, &str, i64)] = &[
    ("1h", "1 h", 3_600_000),
    ("6h", "6 h", 6 * 3_600_000),
    ("24h", "24 h", 24 * 3_600_000),
    ("7d", "7 d", 7 * 24 * 3_600_000),
];

/// Most alerts listed in "Firing and pending now" (firing and the most severe first).
const ALERTS_SHOWN: usize = 500;
/// Most history rows read for the timeline.
const HISTORY_ROWS: i64 = 5000;
/// Most transitions listed under the timeline.
const TRANSITIONS_SHOWN: usize = 200;
/// Most lanes drawn.
const LANES_SHOWN: usize = 60;

#[derive(Template, WebTemplate)]
#[template(path = "alerts.html")]
pub struct AlertsPage {
    pub nav: &'static str,
    pub now_ms: i64,
    pub firing: Vec<AlertRow>,
    pub firing_count: usize,
    pub pending_count: usize,
    /// Active alerts not listed (beyond [`ALERTS_SHOWN`]).
    pub alerts_left_out: usize,
    /// The timeline was drawn from the newest [`HISTORY_ROWS`] transitions only.
    pub history_cut: bool,
    pub history_rows: String,
    pub rule_count: usize,
    /// "2 rules are evaluated", "1 rule is evaluated".
    pub rules_phrase: String,
    pub interval: String,
    pub range_key: &'static str,
    pub range_label: &'static str,
    pub ranges: Vec<RangeChoice>,
    pub lanes: Vec<Lane>,
    pub lanes_left_out: usize,
    pub ticks: Vec<Tick>,
    pub transitions: Vec<TransitionRow>,
    pub transitions_total: usize,
    pub rules: Vec<RuleRow>,
    pub measures: Vec<(&'static str, &'static str)>,
    pub channels: Vec<ChannelRow>,
    pub channel_kinds: &'static [&'static str],
}

/// The active alerts as rows, firing first, the most severe first, then the oldest;
/// at most `limit` rows are built.
pub struct ActiveAlerts {
    pub rows: Vec<AlertRow>,
    pub firing_count: usize,
    pub pending_count: usize,
    /// Active alerts beyond `limit`, not built.
    pub left_out: usize,
}

/// Rows of the active `alerts` under `rules`, their subjects linked through `routes`,
/// their silences from `muter`, ages measured at `now` (unix ms).
pub fn active_rows(
    alerts: &[crate::domain::alerts::eval::Alert],
    rules: &[StoredRule],
    routes: &RouteIndex,
    muter: &Muter,
    now: i64,
    limit: usize,
) -> ActiveAlerts {
    use crate::domain::alerts::eval::Phase;
    let rule_of = |name: &str| rules.iter().find(|r| r.rule.name == name).map(|r| &r.rule);
    // firing first, the most severe first, then the oldest; only the rows shown are built
    let since_of = |a: &crate::domain::alerts::eval::Alert| {
        if a.state == Phase::Firing {
            a.fired_at_ms.unwrap_or(a.active_since_ms)
        } else {
            a.active_since_ms
        }
    };
    let mut order: Vec<(bool, std::cmp::Reverse<u8>, i64, usize)> = alerts
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let sev = rule_of(&a.rule).map_or(0, |r| severity_rank(&r.severity));
            (
                a.state != Phase::Firing,
                std::cmp::Reverse(sev),
                since_of(a),
                i,
            )
        })
        .collect();
    order.sort_unstable();
    let firing_count = alerts.iter().filter(|a| a.state == Phase::Firing).count();
    let pending_count = alerts.len() - firing_count;
    let left_out = alerts.len().saturating_sub(limit);
    let rows: Vec<AlertRow> = order
        .iter()
        .take(limit)
        .map(|&(.., i)| &alerts[i])
        .map(|a| {
            let rule = rule_of(&a.rule);
            let view = crate::domain::alerts::AlertView::new(a, rule, muter);
            let since_ms = since_of(a);
            AlertRow {
                rule: a.rule.clone(),
                sev_class: severity_class(&view.severity),
                severity: view.severity.clone(),
                state: view.state.clone(),
                subject: subject_of(&a.labels, routes),
                value: rule.map_or_else(
                    || {
                        a.value
                            .map(crate::domain::alerts::rule::fmt_num)
                            .unwrap_or_default()
                    },
                    |r| measure_value(r.measure, a.value),
                ),
                condition: rule.map(condition_text).unwrap_or_default(),
                since_ms,
                since: ago(now - since_ms),
                since_abs: format::time(Some(since_ms)),
                summary: view.summary.unwrap_or_default(),
                labels_json: serde_json::to_string(&view.labels).unwrap_or_default(),
                silenced_by: view
                    .silenced_by
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                labels_text: labels_text(&a.labels),
            }
        })
        .collect();
    ActiveAlerts {
        rows,
        firing_count,
        pending_count,
        left_out,
    }
}

/// Every route's (service, instance, route) labels → its id, to link alert subjects.
pub async fn route_index(state: &AppState) -> Result<RouteIndex, PageError> {
    Ok(state
        .store
        .route_infos(None, None)
        .await?
        .into_iter()
        .map(|i| {
            let l = crate::services::alerts::evaluator::route_labels(&i);
            let get = |k: &str| l.get(k).cloned().unwrap_or_default();
            ((get("service"), get("instance"), get("route")), i.id)
        })
        .collect())
}

#[derive(Deserialize)]
pub struct AlertsQuery {
    range: Option<String>,
}

/// `GET /console/alerts?range=1h|6h|24h|7d` (default 24h; anything else is refused).
pub async fn page(
    State(state): State<AppState>,
    Query(q): Query<AlertsQuery>,
) -> Result<AlertsPage, PageError> {
    let (range_key, range_label, range_ms) = match q.range.as_deref().filter(|s| !s.is_empty()) {
        None => RANGES[2],
        Some(k) => *RANGES.iter().find(|r| r.0 == k).ok_or_else(|| {
            crate::error::Error::BadRequest(format!(
                "range must be one of 1h, 6h, 24h, 7d; got {k:?}"
            ))
        })?,
    };
    let now = crate::now_ms();
    let rules = state.store.list_alert_rules().await?;
    let alerts = state.store.list_alerts().await?;
    let routes = route_index(&state).await?;
    let rule_of = |name: &str| rules.iter().find(|r| r.rule.name == name).map(|r| &r.rule);
    let muter = Muter::new(&state.store.active_silences(now).await?, now);

    let ActiveAlerts {
        rows: firing,
        firing_count,
        pending_count,
        left_out: alerts_left_out,
    } = active_rows(&alerts, &rules, &routes, &muter, now, ALERTS_SHOWN);

    let from = now - range_ms;
    let mut history = state
        .store
        .alert_history_filtered(
            &HistoryFilter {
                from_ms: Some(from),
                to_ms: Some(now),
                ..HistoryFilter::default()
            },
            HISTORY_ROWS,
        )
        .await?;
    // the newest rows only: say so when older transitions of the range were left out
    let history_cut = history.len() as i64 >= HISTORY_ROWS;
    history.reverse(); // oldest first
    let (mut lanes, lanes_total) = timeline(&history, &rules, &routes, from, now);
    let lanes_left_out = lanes_total.saturating_sub(LANES_SHOWN);
    lanes.truncate(LANES_SHOWN);

    let in_range: Vec<&HistoryRow> = history.iter().rev().filter(|h| h.at_ms >= from).collect();
    let transitions = in_range
        .iter()
        .take(TRANSITIONS_SHOWN)
        .map(|h| {
            let rule = rule_of(&h.rule);
            TransitionRow {
                at_ms: h.at_ms,
                at: format::time(Some(h.at_ms)),
                rule: h.rule.clone(),
                subject: subject_of(&h.labels, &routes),
                change: h.change.clone(),
                change_class: match h.change.as_str() {
                    "firing" => rule.map_or("sev-warning", |r| severity_class(&r.severity)),
                    "pending" => "pending",
                    _ => "muted",
                },
                value: rule.map_or_else(
                    || {
                        h.value
                            .map(crate::domain::alerts::rule::fmt_num)
                            .unwrap_or_default()
                    },
                    |r| measure_value(r.measure, h.value),
                ),
            }
        })
        .collect();

    let mut per_rule: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for a in &alerts {
        let e = per_rule.entry(a.rule.as_str()).or_default();
        if a.state == crate::domain::alerts::eval::Phase::Firing {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    let rule_rows = rules
        .iter()
        .map(|s| {
            let (f, p) = per_rule
                .get(s.rule.name.as_str())
                .copied()
                .unwrap_or((0, 0));
            rule_row(s, f, p)
        })
        .collect();
    Ok(AlertsPage {
        nav: "alerts",
        now_ms: now,
        firing,
        firing_count,
        pending_count,
        alerts_left_out,
        history_cut,
        history_rows: format::int(HISTORY_ROWS),
        rule_count: rules.len(),
        rules_phrase: if rules.len() == 1 {
            "1 rule is evaluated".to_string()
        } else {
            format!("{} rules are evaluated", rules.len())
        },
        interval: interval_text(state.config.alerts.evaluation_interval.ms()),
        range_key,
        range_label,
        ranges: RANGES
            .iter()
            .map(|r| RangeChoice {
                key: r.0,
                label: r.1,
                current: r.0 == range_key,
            })
            .collect(),
        lanes,
        lanes_left_out,
        ticks: ticks(from, now),
        transitions,
        transitions_total: in_range.len(),
        rules: rule_rows,
        measures: MEASURES
            .iter()
            .map(|m| (m.as_str(), measure_label(*m)))
            .collect(),
        channels: crate::views::alerts::channel_views(&state.store, &state.config.alerts.channels)
            .await?
            .iter()
            .map(|v| channel_row(v, now))
            .collect(),
        channel_kinds: &crate::domain::alerts::channel::KINDS,
    })
}

const MEASURES: &[Measure] = &[
    Measure::ErrorPct,
    Measure::ErrorsPerS,
    Measure::ThroughputPerS,
    Measure::MeanMs,
    Measure::P95Ms,
    Measure::P99Ms,
    Measure::Inflight,
    Measure::TargetDown,
    Measure::NoExchanges,
    Measure::PoolUsagePct,
    Measure::PoolPending,
];

fn rule_row(s: &StoredRule, firing: usize, pending: usize) -> RuleRow {
    let r = &s.rule;
    RuleRow {
        name: r.name.clone(),
        subject: if r.measure.for_pools() {
            subject_text(&r.subject).replacen("every route", "every pool", 1)
        } else {
            subject_text(&r.subject)
        },
        measure: measure_label(r.measure).to_string(),
        condition: condition_text(r),
        window: r.window.to_string(),
        for_: r.for_.to_string(),
        severity: r.severity.clone(),
        sev_class: severity_class(&r.severity),
        origin: s.origin.clone(),
        editable: s.origin != "config",
        firing,
        pending,
        json: serde_json::to_string(r).unwrap_or_default(),
    }
}

fn pct_of(ms: i64, from: i64, to: i64) -> f64 {
    ((ms - from) as f64 / (to - from).max(1) as f64 * 100.0).clamp(0.0, 100.0)
}

/// The lanes of the timeline over `[from, to]` from the history (oldest first), most
/// recently active first; also the number of lanes before any cut.
fn timeline(
    history: &[HistoryRow],
    rules: &[StoredRule],
    routes: &RouteIndex,
    from: i64,
    to: i64,
) -> (Vec<Lane>, usize) {
    struct Open {
        start: i64,
        phase: String,
        value: Option<f64>,
    }
    struct Acc {
        rule: String,
        labels: Labels,
        bars: Vec<(i64, i64, String, Option<f64>)>,
        open: Option<Open>,
        last_ms: i64,
    }
    let mut lanes: Vec<Acc> = Vec::new();
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    for h in history {
        let key = (h.rule.clone(), labels_text(&h.labels));
        let i = *index.entry(key).or_insert_with(|| {
            lanes.push(Acc {
                rule: h.rule.clone(),
                labels: h.labels.clone(),
                bars: Vec::new(),
                open: None,
                last_ms: h.at_ms,
            });
            lanes.len() - 1
        });
        let lane = &mut lanes[i];
        lane.last_ms = h.at_ms;
        let at = h.at_ms.max(from);
        if let Some(o) = lane.open.take()
            && at > o.start
        {
            // (pending and firing in one evaluation, as with `for = 0s`, is no pending period)
            lane.bars.push((o.start, at, o.phase, o.value));
        }
        if matches!(h.change.as_str(), "pending" | "firing") {
            lane.open = Some(Open {
                start: at,
                phase: h.change.clone(),
                value: h.value,
            });
        }
    }
    for lane in &mut lanes {
        if let Some(o) = lane.open.take() {
            lane.last_ms = to;
            lane.bars.push((o.start, to, o.phase, o.value));
        }
    }
    lanes.retain(|l| !l.bars.is_empty());
    // most recently active first; among alerts still active, the one that changed last
    let latest = |l: &Acc| l.bars.last().map_or(0, |b| b.0);
    lanes.sort_by(|a, b| {
        (b.last_ms, latest(b))
            .cmp(&(a.last_ms, latest(a)))
            .then(a.rule.cmp(&b.rule))
    });
    let total = lanes.len();
    let out = lanes
        .into_iter()
        .map(|l| {
            let rule = rules
                .iter()
                .find(|r| r.rule.name == l.rule)
                .map(|r| &r.rule);
            let sev_class = rule.map_or("sev-warning", |r| severity_class(&r.severity));
            let labels_text = labels_text(&l.labels);
            let bars = l
                .bars
                .iter()
                .map(|(start, end, phase, value)| {
                    let x = pct_of(*start, from, to);
                    let w = (pct_of(*end, from, to) - x).max(0.25);
                    let value_text = rule.map_or_else(
                        || {
                            value
                                .map(crate::domain::alerts::rule::fmt_num)
                                .unwrap_or_default()
                        },
                        |r| measure_value(r.measure, *value),
                    );
                    let ongoing = *end == to;
                    BarParts {
                        x,
                        w,
                        class: if phase == "firing" {
                            format!("firing {sev_class}")
                        } else {
                            "pending".to_string()
                        },
                        title: format!(
                            "{} · {}\n{}\n{} → {} ({})\nvalue {}",
                            l.rule,
                            phase,
                            labels_text,
                            format::time(Some(*start)),
                            if ongoing {
                                "now".to_string()
                            } else {
                                format::time(Some(*end))
                            },
                            format::duration(Some(end - start)),
                            value_text
                        ),
                    }
                    .into()
                })
                .collect();
            Lane {
                subject: subject_of(&l.labels, routes),
                rule: l.rule,
                sev_class,
                labels_text,
                bars,
            }
        })
        .collect();
    (out, total)
}

struct BarParts {
    x: f64,
    w: f64,
    class: String,
    title: String,
}

impl From<BarParts> for Bar {
    fn from(p: BarParts) -> Bar {
        Bar {
            x_pct: format!("{:.3}%", p.x),
            w_pct: format!("{:.3}%", p.w.min(100.0 - p.x).max(0.25)),
            class: p.class,
            title: p.title,
        }
    }
}

/// Five to eight ticks on round times (UTC) across `[from, to]`.
fn ticks(from: i64, to: i64) -> Vec<Tick> {
    let span = (to - from).max(1);
    const STEPS: &[i64] = &[
        600_000,
        900_000,
        1_800_000,
        3_600_000,
        2 * 3_600_000,
        3 * 3_600_000,
        6 * 3_600_000,
        12 * 3_600_000,
        24 * 3_600_000,
    ];
    let step = STEPS
        .iter()
        .copied()
        .find(|s| span / s <= 8)
        .unwrap_or(24 * 3_600_000);
    let mut out = Vec::new();
    let mut t = (from / step + 1) * step;
    while t < to {
        let x = pct_of(t, from, to);
        let full = format::time(Some(t));
        // "2026-11-30 14:00:00 UTC": days show the date, hours the time
        let label = if step >= 24 * 3_600_000 {
            full.get(5..10).unwrap_or_default().to_string()
        } else {
            full.get(11..16).unwrap_or_default().to_string()
        };
        out.push(Tick {
            x_pct: format!("{x:.3}%"),
            label,
            anchor: if x < 3.0 {
                "start"
            } else if x > 97.0 {
                "end"
            } else {
                "middle"
            },
        });
        t += step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::alerts::rule::Comparison;

    fn row(id: i64, change: &str, at_ms: i64, route: &str) -> HistoryRow {
        HistoryRow {
            id,
            rule: "HighErrors".into(),
            labels: [("route".to_string(), route.to_string())].into(),
            change: change.into(),
            value: Some(7.5),
            at_ms,
        }
    }

    #[test]
    fn timeline_bars_follow_the_transitions() {
        let rules = vec![StoredRule {
            rule: Rule::defaults().remove(1),
            origin: "builtin".into(),
            updated_at_ms: 0,
        }];
        let mut rules = rules;
        rules[0].rule.name = "HighErrors".into();
        let h = vec![
            row(1, "firing", 500, "/a"), // began before the range: open at 1000
            row(2, "pending", 2000, "/b"),
            row(3, "firing", 3000, "/b"),
            row(4, "resolved", 5000, "/a"),
            row(5, "resolved", 6000, "/b"),
            row(6, "pending", 8000, "/b"),
            row(7, "pending", 9000, "/c"), // for = 0s: no pending bar
            row(8, "firing", 9000, "/c"),
        ];
        let (lanes, total) = timeline(&h, &rules, &RouteIndex::new(), 1000, 11_000);
        assert_eq!(total, 3);
        assert_eq!(lanes[0].subject.text, "/c");
        assert_eq!(lanes[0].bars.len(), 1);
        assert_eq!(lanes[0].bars[0].class, "firing sev-critical");
        let lanes = &lanes[1..];
        // /b was active last but one (pending until now)
        assert_eq!(lanes[0].subject.text, "/b");
        let b: Vec<(&str, &str, &str)> = lanes[0]
            .bars
            .iter()
            .map(|x| (x.x_pct.as_str(), x.w_pct.as_str(), x.class.as_str()))
            .collect();
        assert_eq!(
            b,
            [
                ("10.000%", "10.000%", "pending"),
                ("20.000%", "30.000%", "firing sev-critical"),
                ("70.000%", "30.000%", "pending"),
            ]
        );
        assert!(lanes[0].bars[2].title.contains("→ now"));
        assert!(
            lanes[0].bars[1].title.contains("value 7.50 %"),
            "{}",
            lanes[0].bars[1].title
        );
        let a = &lanes[1].bars;
        assert_eq!(
            (a[0].x_pct.as_str(), a[0].w_pct.as_str()),
            ("0.000%", "40.000%")
        );
    }

    #[test]
    fn subjects_link_to_their_route_or_run() {
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let mut routes = RouteIndex::new();
        routes.insert(("orders".into(), "a:1".into(), "/checkout".into()), 7);
        let s = subject_of(
            &labels(&[
                ("service", "orders"),
                ("instance", "a:1"),
                ("route", "/checkout"),
            ]),
            &routes,
        );
        assert_eq!(s.url.as_deref(), Some("/console/routes/7"));
        assert_eq!(
            (s.text.as_str(), s.detail.as_str()),
            ("/checkout", "orders · a:1")
        );
        let s = subject_of(
            &labels(&[
                ("scenario", "checkout"),
                ("run", "12"),
                ("run_name", "nightly"),
            ]),
            &routes,
        );
        assert_eq!(s.url.as_deref(), Some("/console/runs/12"));
        assert_eq!(
            (s.text.as_str(), s.detail.as_str()),
            ("nightly", "run 12 · checkout")
        );
    }

    #[test]
    fn values_and_conditions_carry_units() {
        assert_eq!(measure_value(Measure::ErrorPct, Some(7.4074)), "7.41 %");
        assert_eq!(measure_value(Measure::P95Ms, Some(812.3)), "812 ms");
        assert_eq!(measure_value(Measure::ErrorsPerS, Some(3.2)), "3.20 /s");
        assert_eq!(measure_value(Measure::TargetDown, Some(1.0)), "down");
        assert_eq!(measure_value(Measure::MeanMs, None), "–");
        let mut r = Rule::defaults().remove(0);
        assert_eq!(condition_text(&r), "> 5 %");
        r.measure = Measure::TargetDown;
        r.comparison = Comparison::Ge;
        r.threshold = 1.0;
        assert_eq!(condition_text(&r), "target down");
        assert_eq!(subject_text(&r.subject), "every route");
        r.subject.route = Some("/checkout*".into());
        r.subject.service = Some("orders".into());
        assert_eq!(subject_text(&r.subject), "routes /checkout* of orders");
        assert_eq!(ago(4 * 60_000 + 12_000), "4 min 12 s ago");
        assert_eq!(ago(12_400), "12 s ago");
        assert_eq!(interval_text(15_000), "15 s");
        assert_eq!(interval_text(60_000), "1 min");
        assert_eq!(interval_text(90_000), "1 min 30 s");
        assert_eq!(severity_class("critical"), "sev-critical");
        assert_eq!(severity_class("Warning"), "sev-warning");
        assert_eq!(severity_class("whatever"), "sev-info");
    }

    #[test]
    fn channel_timings_carry_units() {
        let t: Vec<String> = [0, 500, 30_000, 90_000, 300_000, 4 * 3_600_000]
            .into_iter()
            .map(duration_text)
            .collect();
        assert_eq!(t, ["0 s", "500 ms", "30 s", "1 min 30 s", "5 min", "4 h"]);
        let mut c = crate::domain::alerts::channel::ChannelSpec::new(
            "chat",
            "slack",
            "https://hooks.slack.com/services/T/B/X",
        );
        c.group_by = vec!["...".into()];
        let view = ChannelView {
            channel: c.masked(),
            secret_set: true,
            origin: "api",
            updated_at_ms: Some(0),
            last_delivery: Some(crate::domain::alerts::LastDelivery {
                at_ms: 1_000,
                status: Some(404),
                error: Some("chat answered 404 Not Found: no_service".into()),
                firing: 1,
                resolved: 0,
            }),
        };
        let row = channel_row(&view, 13_000);
        assert_eq!(
            (row.target.as_str(), row.url.as_str(), row.group_by.as_str()),
            (
                "hooks.slack.com",
                "https://hooks.slack.com/…",
                "every label"
            )
        );
        assert_eq!(
            (row.group_wait.as_str(), row.repeat_interval.as_str()),
            ("30 s", "4 h")
        );
        assert!(!row.json.contains("services/T"), "{}", row.json);
        let last = row.last.unwrap();
        assert_eq!(
            (last.status.as_str(), last.status_class),
            ("HTTP 404", "err")
        );
        assert_eq!(
            (last.at.as_str(), last.alerts.as_str()),
            ("12 s ago", "1 firing")
        );
        let mut am = view.clone();
        am.channel.kind = "alertmanager".into();
        assert_eq!(
            channel_row(&am, 0).group_wait,
            "–",
            "no groups: pushed at once"
        );
    }

    #[test]
    fn ticks_fall_on_round_times() {
        let from = 1_800_000_000_000 - 24 * 3_600_000;
        let t = ticks(from, 1_800_000_000_000);
        assert!((5..=8).contains(&t.len()), "{}", t.len());
        assert!(t.iter().all(|t| t.label.ends_with(":00")));
    }
}
