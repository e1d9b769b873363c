//! Pure evaluation of one rule at one time: the measured subjects and the previous alert
//! states in, the new states, the transitions (for the history) and the notices (for the
//! channels) out. No clock, no I/O: the evaluator loop supplies `now_ms` and stores the
//! result, so a restart continues from the stored states.
//!
//! The state machine follows Prometheus (`rules/alerting.go`):
//! - inactive → pending when the condition becomes true (`active_since_ms` = now);
//! - pending → firing once it has held for `for` (now − active_since ≥ for); `for = 0`
//!   fires at once; pending → inactive as soon as it is false (no notice);
//! - firing stays firing while the condition holds — with a `recovery_threshold`, while the
//!   value has not crossed that (hysteresis);
//! - firing → resolved once it has been false for `keep_firing_for` (counted from the first
//!   false evaluation, as Prometheus' `KeepFiringSince`), at once without it.
//!
//! An alert's identity is the rule name plus the subject's labels, never the value.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::rule::{Labels, Rule};

/// One subject's figure at evaluation time.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The subject's labels (shared: one set per subject for every rule).
    pub labels: Arc<Labels>,
    /// The rule's measure over its window; `None` when there is no figure (no exchanges).
    pub value: Option<f64>,
    /// Exchanges in the window (for the min-count guard).
    pub count: Option<f64>,
}

/// An active alert's state (inactive alerts have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Pending,
    Firing,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "pending",
            Phase::Firing => "firing",
        }
    }

    pub fn parse(s: &str) -> Option<Phase> {
        match s {
            "pending" => Some(Phase::Pending),
            "firing" => Some(Phase::Firing),
            _ => None,
        }
    }
}

/// One alert: a rule's instance on one subject, pending or firing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub rule: String,
    pub labels: Labels,
    pub state: Phase,
    /// The last measured value.
    pub value: Option<f64>,
    /// When the condition became true (the start of pending), unix ms.
    pub active_since_ms: i64,
    /// When it fired, unix ms.
    pub fired_at_ms: Option<i64>,
    /// The first evaluation at which a firing alert's condition was false (keep-firing).
    pub keep_firing_since_ms: Option<i64>,
    /// Last evaluation, unix ms.
    pub last_eval_ms: i64,
}

impl Alert {
    /// Whether this is the same alert (rule + labels).
    pub fn same(&self, rule: &str, labels: &Labels) -> bool {
        self.rule == rule && &self.labels == labels
    }
}

/// What happened to an alert at one evaluation (a history row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// inactive → pending.
    Pending,
    /// → firing (from pending, or from inactive with `for = 0`).
    Firing,
    /// firing → resolved.
    Resolved,
    /// pending → inactive: the condition cleared before `for` elapsed.
    Inactive,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Pending => "pending",
            Change::Firing => "firing",
            Change::Resolved => "resolved",
            Change::Inactive => "inactive",
        }
    }
}

/// A transition, for the history and (firing / resolved) for notifications.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    pub rule: String,
    pub labels: Labels,
    pub change: Change,
    pub value: Option<f64>,
    pub at_ms: i64,
    /// The alert as it was fired (for resolved: its `fired_at_ms` is the episode's start).
    pub alert: Alert,
}

impl Transition {
    /// Whether the channels are told: one message when an episode fires, one when it
    /// resolves.
    pub fn notifies(&self) -> bool {
        matches!(self.change, Change::Firing | Change::Resolved)
    }
}

/// The result of one evaluation of one rule.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// The rule's active alerts after this evaluation.
    pub alerts: Vec<Alert>,
    pub transitions: Vec<Transition>,
}

/// Evaluates `rule` at `now_ms` over `measured` (the subjects it watches, already
/// filtered) given its previous active alerts `prev`. A subject with a previous alert but
/// no measurement (the route is gone) counts as "condition false".
pub fn evaluate(rule: &Rule, measured: &[Measured], prev: &[Alert], now_ms: i64) -> Outcome {
    let mut out = Outcome::default();
    // Indexed by labels: a round over thousands of subjects stays linear, and a rule
    // without alerts hashes nothing.
    let mine: HashMap<&Labels, &Alert> = prev
        .iter()
        .filter(|a| a.rule == rule.name)
        .map(|a| (&a.labels, a))
        .collect();
    let mut seen: HashSet<&Labels> = HashSet::new();
    for m in measured {
        let prev_alert = if mine.is_empty() {
            None
        } else {
            mine.get(&*m.labels).copied()
        };
        if let Some(a) = prev_alert {
            seen.insert(&a.labels);
        }
        step(rule, m, prev_alert, now_ms, &mut out);
    }
    // Subjects with an alert but no measurement (the route is gone): condition false.
    let mut gone: Vec<&Alert> = mine
        .values()
        .filter(|a| !seen.contains(&a.labels))
        .copied()
        .collect();
    gone.sort_by(|a, b| a.labels.cmp(&b.labels));
    for a in gone {
        let m = Measured {
            labels: Arc::new(a.labels.clone()),
            value: None,
            count: None,
        };
        step(rule, &m, Some(a), now_ms, &mut out);
    }
    out
}

fn transition(out: &mut Outcome, change: Change, alert: &Alert, at_ms: i64) {
    out.transitions.push(Transition {
        rule: alert.rule.clone(),
        labels: alert.labels.clone(),
        change,
        value: alert.value,
        at_ms,
        alert: alert.clone(),
    });
}

fn step(rule: &Rule, m: &Measured, prev: Option<&Alert>, now: i64, out: &mut Outcome) {
    match prev {
        None => {
            if !rule.condition(m.value, m.count) {
                return;
            }
            let mut a = Alert {
                rule: rule.name.clone(),
                labels: (*m.labels).clone(),
                state: Phase::Pending,
                value: m.value,
                active_since_ms: now,
                fired_at_ms: None,
                keep_firing_since_ms: None,
                last_eval_ms: now,
            };
            transition(out, Change::Pending, &a, now);
            if rule.for_.ms() == 0 {
                a.state = Phase::Firing;
                a.fired_at_ms = Some(now);
                transition(out, Change::Firing, &a, now);
            }
            out.alerts.push(a);
        }
        Some(p) if p.state == Phase::Pending => {
            let mut a = p.clone();
            a.value = m.value;
            a.last_eval_ms = now;
            if !rule.condition(m.value, m.count) {
                transition(out, Change::Inactive, &a, now);
                return;
            }
            if now - a.active_since_ms >= rule.for_.ms() {
                a.state = Phase::Firing;
                a.fired_at_ms = Some(now);
                transition(out, Change::Firing, &a, now);
            }
            out.alerts.push(a);
        }
        Some(p) => {
            let mut a = p.clone();
            a.value = m.value;
            a.last_eval_ms = now;
            if rule.still_firing(m.value, m.count) {
                a.keep_firing_since_ms = None;
                out.alerts.push(a);
                return;
            }
            let since = *a.keep_firing_since_ms.get_or_insert(now);
            if now - since < rule.keep_firing_for.ms() {
                out.alerts.push(a);
            } else {
                transition(out, Change::Resolved, &a, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::alerts::rule::{Comparison, Duration, Measure, Subject};

    const MIN: i64 = 60_000;

    fn rule(for_min: i64, keep_min: i64) -> Rule {
        Rule {
            name: "RouteErrorRateHigh".into(),
            subject: Subject::default(),
            measure: Measure::ErrorPct,
            comparison: Comparison::Gt,
            threshold: 5.0,
            window: Duration(5 * MIN),
            for_: Duration(for_min * MIN),
            keep_firing_for: Duration(keep_min * MIN),
            recovery_threshold: None,
            min_count: 20,
            severity: "page".into(),
            summary: None,
            description: None,
        }
    }

    fn labels(route: &str) -> Labels {
        [("route".to_string(), route.to_string())].into()
    }

    fn m(route: &str, value: f64, count: f64) -> Measured {
        Measured {
            labels: labels(route).into(),
            value: Some(value),
            count: Some(count),
        }
    }

    /// Runs `rule` over `(t_ms, value, count)` for route `/checkout`; returns the phase
    /// after each step (`None` = inactive) and every transition.
    fn run(rule: &Rule, steps: &[(i64, f64, f64)]) -> (Vec<Option<Phase>>, Vec<Transition>) {
        let mut alerts = Vec::new();
        let mut phases = Vec::new();
        let mut all = Vec::new();
        for &(t, v, c) in steps {
            let o = evaluate(rule, &[m("/checkout", v, c)], &alerts, t);
            alerts = o.alerts;
            phases.push(alerts.first().map(|a| a.state));
            all.extend(o.transitions);
        }
        (phases, all)
    }

    fn changes(ts: &[Transition]) -> Vec<(i64, Change)> {
        ts.iter().map(|t| (t.at_ms, t.change)).collect()
    }

    #[test]
    fn pending_then_firing_after_for() {
        let r = rule(3, 0);
        let steps: Vec<(i64, f64, f64)> = (10..=16).map(|i| (i * MIN, 16.67, 72.0)).collect();
        let (phases, ts) = run(&r, &steps);
        use Phase::*;
        assert_eq!(
            phases,
            [
                Some(Pending),
                Some(Pending),
                Some(Pending),
                Some(Firing),
                Some(Firing),
                Some(Firing),
                Some(Firing)
            ]
        );
        assert_eq!(
            changes(&ts),
            [(10 * MIN, Change::Pending), (13 * MIN, Change::Firing)]
        );
        // one notice per episode
        assert_eq!(ts.iter().filter(|t| t.notifies()).count(), 1);
    }

    #[test]
    fn pending_that_clears_never_fires() {
        let r = rule(3, 0);
        let (phases, ts) = run(
            &r,
            &[(0, 9.0, 50.0), (MIN, 9.0, 50.0), (2 * MIN, 1.0, 50.0)],
        );
        assert_eq!(phases, [Some(Phase::Pending), Some(Phase::Pending), None]);
        assert_eq!(
            changes(&ts),
            [(0, Change::Pending), (2 * MIN, Change::Inactive)]
        );
        assert!(ts.iter().all(|t| !t.notifies()));
    }

    #[test]
    fn keep_firing_for_holds_like_promtool() {
        // The promtool fixture: for 3m, keep_firing_for 5m; true from 12m to 28m, false
        // from 29m; firing at 15m, still firing at 33m, resolved at 34m.
        let r = rule(3, 5);
        let steps: Vec<(i64, f64, f64)> = (11..=35)
            .map(|i| {
                let v = if (12..=28).contains(&i) { 16.67 } else { 4.0 };
                (i * MIN, v, 72.0)
            })
            .collect();
        let (phases, ts) = run(&r, &steps);
        let at = |min: i64| phases[(min - 11) as usize];
        assert_eq!(at(11), None);
        assert_eq!(at(14), Some(Phase::Pending));
        assert_eq!(at(15), Some(Phase::Firing));
        assert_eq!(at(33), Some(Phase::Firing));
        assert_eq!(at(34), None);
        assert_eq!(
            changes(&ts),
            [
                (12 * MIN, Change::Pending),
                (15 * MIN, Change::Firing),
                (34 * MIN, Change::Resolved)
            ]
        );
        assert_eq!(ts[2].alert.fired_at_ms, Some(15 * MIN));
    }

    #[test]
    fn keep_firing_restarts_when_the_condition_returns() {
        let r = rule(0, 2);
        let (phases, _) = run(
            &r,
            &[
                (0, 9.0, 50.0),
                (MIN, 1.0, 50.0),
                (2 * MIN, 9.0, 50.0),
                (3 * MIN, 1.0, 50.0),
                (4 * MIN, 1.0, 50.0),
                (5 * MIN, 1.0, 50.0),
            ],
        );
        use Phase::*;
        assert_eq!(
            phases,
            [
                Some(Firing),
                Some(Firing),
                Some(Firing),
                Some(Firing),
                Some(Firing),
                None
            ]
        );
    }

    #[test]
    fn hysteresis_holds_until_the_recovery_threshold() {
        let mut r = rule(0, 0);
        r.recovery_threshold = Some(3.0);
        let (phases, ts) = run(
            &r,
            &[
                (0, 6.0, 50.0),
                (MIN, 4.0, 50.0),
                (2 * MIN, 3.5, 50.0),
                (3 * MIN, 3.0, 50.0),
                (4 * MIN, 4.0, 50.0),
            ],
        );
        use Phase::*;
        // 4 % and 3.5 % are below the 5 % threshold but above the 3 % recovery: still firing;
        // 3 % has recovered; 4 % afterwards does not re-fire (it is not above 5 %).
        assert_eq!(
            phases,
            [Some(Firing), Some(Firing), Some(Firing), None, None]
        );
        assert_eq!(
            changes(&ts),
            [
                (0, Change::Pending),
                (0, Change::Firing),
                (3 * MIN, Change::Resolved)
            ]
        );
    }

    #[test]
    fn min_count_guard_blocks_low_traffic() {
        // /rare in the promtool fixture: 50 % errors on a handful of exchanges.
        let r = rule(0, 0);
        let (phases, ts) = run(
            &r,
            &[(0, 50.0, 10.0), (MIN, 50.0, 19.0), (2 * MIN, 50.0, 20.0)],
        );
        assert_eq!(phases, [None, None, Some(Phase::Firing)]);
        assert_eq!(ts.len(), 2);
        // a firing alert whose traffic falls under the guard resolves
        let o = evaluate(&r, &[m("/checkout", 50.0, 3.0)], &run_alerts(&r), 3 * MIN);
        assert!(o.alerts.is_empty());
        assert_eq!(o.transitions[0].change, Change::Resolved);
    }

    fn run_alerts(r: &Rule) -> Vec<Alert> {
        evaluate(r, &[m("/checkout", 50.0, 100.0)], &[], 0).alerts
    }

    #[test]
    fn a_short_spike_does_not_fire() {
        // EC35: one bucket of 5 with 4 failures (80 %), the seconds around it clean. The
        // bucket rule (≥ 50 %, ≥ 3 exchanges, for 0) trips in exactly that bucket; a rule
        // with `for: 2s` over the same buckets must not fire.
        let buckets = [
            (0, 0.0, 5.0),
            (1000, 0.0, 5.0),
            (2000, 80.0, 5.0),
            (3000, 0.0, 3.0),
            (4000, 0.0, 1.0),
        ];
        let mut r = rule(0, 0);
        r.comparison = Comparison::Ge;
        r.threshold = 50.0;
        r.min_count = 3;
        let (phases, _) = run(&r, &buckets);
        assert_eq!(phases, [None, None, Some(Phase::Firing), None, None]);
        r.for_ = Duration(2000);
        let (phases, ts) = run(&r, &buckets);
        assert!(phases.iter().all(|p| *p != Some(Phase::Firing)));
        assert!(ts.iter().all(|t| !t.notifies()));
    }

    #[test]
    fn a_counter_reset_is_not_an_alert() {
        // EC33: six scrapes 15 s apart; the service restarts between 30 s and 45 s. With
        // reset handling the interval error % are 0, 7.69, 0, 1.64, 13.79 and only the last
        // interval is above 10 %; last-minus-first arithmetic would claim 23 %.
        let scrapes = [
            include_str!("../../../tests/fixtures/edge-cases/EC33/scrape_00.prom"),
            include_str!("../../../tests/fixtures/edge-cases/EC33/scrape_01.prom"),
            include_str!("../../../tests/fixtures/edge-cases/EC33/scrape_02.prom"),
            include_str!("../../../tests/fixtures/edge-cases/EC33/scrape_03.prom"),
            include_str!("../../../tests/fixtures/edge-cases/EC33/scrape_04.prom"),
            include_str!("../../../tests/fixtures/edge-cases/EC33/scrape_05.prom"),
        ];
        let read = |text: &str, code: &str| -> f64 {
            let key = format!("http_requests_total{{code=\"{code}\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(key.as_str()))
                .and_then(|v| v.trim().parse().ok())
                .expect("counter in scrape")
        };
        let mut r = rule(0, 0);
        r.threshold = 10.0;
        r.min_count = 1;
        let mut alerts = Vec::new();
        let mut fired_at = Vec::new();
        let mut pcts = Vec::new();
        for i in 1..scrapes.len() {
            let ok = crate::domain::routes::counter_delta(
                read(scrapes[i - 1], "200"),
                read(scrapes[i], "200"),
            );
            let bad = crate::domain::routes::counter_delta(
                read(scrapes[i - 1], "500"),
                read(scrapes[i], "500"),
            );
            let total = ok + bad;
            let pct = bad / total * 100.0;
            pcts.push((pct * 1e6).round() / 1e6);
            let t = 1_700_000_000_000 + i as i64 * 15_000;
            let o = evaluate(&r, &[m("/", pct, total)], &alerts, t);
            alerts = o.alerts;
            fired_at.extend(
                o.transitions
                    .iter()
                    .filter(|t| t.change == Change::Firing)
                    .map(|t| t.at_ms),
            );
        }
        assert_eq!(pcts, [0.0, 7.692308, 0.0, 1.639344, 13.793103]);
        assert_eq!(fired_at, [1_700_000_075_000]);
    }

    #[test]
    fn identity_is_rule_and_labels_not_value() {
        let r = rule(2, 0);
        let o1 = evaluate(&r, &[m("/a", 9.0, 50.0), m("/b", 7.0, 50.0)], &[], 0);
        assert_eq!(o1.alerts.len(), 2);
        let o2 = evaluate(
            &r,
            &[m("/a", 30.0, 50.0), m("/b", 7.0, 50.0)],
            &o1.alerts,
            MIN,
        );
        assert_eq!(o2.alerts.len(), 2);
        assert!(o2.transitions.is_empty(), "a new value is not a new alert");
        // /b disappears: its pending alert ends; /a fires after 2 m.
        let o3 = evaluate(&r, &[m("/a", 30.0, 50.0)], &o2.alerts, 2 * MIN);
        assert_eq!(
            changes(&o3.transitions),
            [(2 * MIN, Change::Firing), (2 * MIN, Change::Inactive)]
        );
        assert_eq!(o3.alerts.len(), 1);
        assert_eq!(o3.alerts[0].labels, labels("/a"));
        assert_eq!(o3.alerts[0].active_since_ms, 0);
    }
}
