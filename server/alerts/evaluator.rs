//! The evaluator loop: every `[alerts] evaluation_interval` (15 s by default) each rule in
//! force is evaluated over the route figures of its window (the figures of
//! `GET /api/v1/routes?window=`), the round is saved in one transaction, and firing /
//! resolved transitions are published on the live hub.
//!
//! Owns the mapping from route figures to a rule's measure. Must not hold state between
//! rounds other than what the store holds (a restart resumes from it).

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::eval::{self, Change, Measured, Transition};
use super::rule::{Labels, Measure, Rule};
use super::silence::Muter;
use super::{AlertView, AlertsConfig};
use crate::live::{Event, Hub};
use crate::routes::Figures;
use crate::store::{RouteInfo, Store};

/// A route subject's labels: `service`, `instance`, `route`, `target`, `source`.
pub fn route_labels(info: &RouteInfo) -> Labels {
    [
        ("service", info.service.clone()),
        ("instance", info.instance()),
        ("route", info.route.clone()),
        ("target", info.target_name.clone()),
        ("source", info.source.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A rule's measure on one route's figures; `None` when the figure is missing (no
/// exchanges in the window, or the source lacks it).
pub fn measure(m: Measure, info: &RouteInfo, f: &Figures) -> Option<f64> {
    match m {
        Measure::ErrorPct => f.error_pct(),
        Measure::ErrorsPerS => f.failed_per_s(),
        Measure::ThroughputPerS => f.throughput_per_s(),
        Measure::MeanMs => f.mean_ms(),
        Measure::P95Ms => f.quantile_ms(0.95),
        Measure::P99Ms => f.quantile_ms(0.99),
        Measure::Inflight => f.inflight,
        Measure::TargetDown => Some(if info.target_up == Some(false) {
            1.0
        } else {
            0.0
        }),
        Measure::NoExchanges => Some(if f.exchanges.unwrap_or(0.0) > 0.0 {
            0.0
        } else {
            1.0
        }),
    }
}

/// Stores the built-in rules (unless turned off) and the configuration file's rules.
pub async fn seed(store: &Store, config: &AlertsConfig) -> crate::store::Result<()> {
    let builtin = if config.builtin_rules {
        Rule::defaults()
    } else {
        Vec::new()
    };
    store
        .seed_alert_rules(&builtin, &config.rules, crate::now_ms())
        .await
}

/// What one round did.
#[derive(Debug, Default)]
pub struct Round {
    pub rules: usize,
    pub transitions: Vec<Transition>,
    /// Outbox ids of the notices raised.
    pub notifications: Vec<i64>,
}

/// Evaluates every rule in force at `now_ms`, saves the round and publishes
/// `alert_firing` / `alert_resolved` events.
pub async fn evaluate_once(store: &Store, hub: &Hub, now_ms: i64) -> crate::store::Result<Round> {
    let rules: Vec<Rule> = store
        .list_alert_rules()
        .await?
        .into_iter()
        .map(|s| s.rule)
        .collect();
    let prev = store.list_alerts().await?;
    let mut figures: HashMap<i64, Vec<(RouteInfo, Figures)>> = HashMap::new();
    let mut alerts = Vec::new();
    let mut transitions = Vec::new();
    for rule in &rules {
        let window = rule.window.ms();
        if let std::collections::hash_map::Entry::Vacant(e) = figures.entry(window) {
            e.insert(store.route_figures(None, window, now_ms).await?);
        }
        let measured: Vec<Measured> = figures[&window]
            .iter()
            .filter_map(|(info, f)| {
                let labels = route_labels(info);
                rule.subject.matches(&labels).then(|| Measured {
                    labels,
                    value: measure(rule.measure, info, f),
                    count: f.exchanges,
                })
            })
            .collect();
        let out = eval::evaluate(rule, &measured, &prev, now_ms);
        alerts.extend(out.alerts);
        transitions.extend(out.transitions);
    }
    let names: Vec<String> = rules.iter().map(|r| r.name.clone()).collect();
    let notifications = store
        .save_evaluation(&names, &alerts, &transitions, now_ms)
        .await?;
    let muter = Muter::new(&store.active_silences(now_ms).await?, now_ms);
    for t in &transitions {
        let rule = rules.iter().find(|r| r.name == t.rule);
        match t.change {
            Change::Firing => {
                let view = AlertView::new(&t.alert, rule, &muter);
                hub.publish(&Event::AlertFiring {
                    silenced: !view.silenced_by.is_empty(),
                    alert: view,
                })
            }
            Change::Resolved => {
                let mut view = AlertView::new(&t.alert, rule, &muter);
                view.state = "resolved".into();
                hub.publish(&Event::AlertResolved {
                    silenced: !view.silenced_by.is_empty(),
                    alert: view,
                    resolved_at_ms: t.at_ms,
                })
            }
            Change::Pending | Change::Inactive => {}
        }
    }
    Ok(Round {
        rules: rules.len(),
        transitions,
        notifications,
    })
}

/// Seeds the rules, then evaluates every `evaluation_interval` until `shutdown`; `wake`
/// is notified when a round raises notices. A failed
/// round is logged and the next one runs as usual.
pub async fn run(
    store: Store,
    hub: Hub,
    config: Arc<AlertsConfig>,
    wake: Arc<tokio::sync::Notify>,
    shutdown: CancellationToken,
) {
    if let Err(e) = seed(&store, &config).await {
        tracing::error!(error = %e, "storing the alert rules failed");
    }
    let every = std::time::Duration::from_millis(config.evaluation_interval.ms().max(1000) as u64);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {
                match evaluate_once(&store, &hub, crate::now_ms()).await {
                    Ok(round) => {
                        metrics::counter!("harrier_alert_evaluations_total").increment(1);
                        if !round.notifications.is_empty() {
                            wake.notify_one();
                        }
                        if !round.transitions.is_empty() {
                            tracing::info!(transitions = round.transitions.len(), "alerts changed");
                        }
                    }
                    Err(e) => {
                        metrics::counter!("harrier_alert_evaluation_failures_total").increment(1);
                        tracing::error!(error = %e, "alert evaluation failed");
                    }
                }
            }
        }
    }
}
