//! The evaluator loop: every `[alerts] evaluation_interval` (15 s by default) each rule in
//! force is evaluated over the route figures of its window (the figures of
//! `GET /api/v1/routes?window=`, summed from the recent intervals the store holds in
//! memory, see [`Store::route_window_figures`]), the round is saved in one transaction,
//! and firing / resolved transitions are published on the live hub.
//!
//! Pool rules (`pool_usage_pct`, `pool_pending`) are evaluated over the pools read beside
//! the routes (process figures `pool_<field>:<kind>:<name>`, see
//! [`crate::domain::pools`]): per scrape for windows up to 15 minutes, 1 min means beyond.
//!
//! Owns the mapping from route and pool figures to a rule's measure. Must not hold state
//! between rounds other than what the store holds (a restart resumes from it).

use std::collections::HashMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::domain::alerts::eval::{self, Change, Measured, Transition};
use crate::domain::alerts::rule::{Labels, Measure, Rule};
use crate::domain::alerts::silence::Muter;
use crate::domain::alerts::{AlertView, AlertsConfig};
use crate::domain::pools::{self, PoolWindow};
use crate::domain::routes::Figures;
use crate::services::live::{Event, Hub};
use crate::store::{LeaseTerm, LiveRunWindow, MINUTE_MS, RouteInfo, Store, WindowNeed};

/// A pool's readings `(at_ms, field, value)`.
type Readings = Vec<(i64, String, f64)>;

/// One pool subject: its labels (`service`, `target`, `instance`, `kind`, `pool`) and its
/// readings.
type PoolSubject = (Arc<Labels>, Readings);

/// Every pool of every target with its readings of the last `window_ms` before `now_ms`.
async fn pool_subjects(
    store: &Store,
    window_ms: i64,
    now_ms: i64,
) -> crate::store::Result<Vec<PoolSubject>> {
    let targets = store.list_targets().await?;
    let ids: Vec<i64> = targets.iter().map(|t| t.id).collect();
    let resolution = if window_ms <= 15 * MINUTE_MS {
        0
    } else {
        MINUTE_MS
    };
    let points = store
        .process_series(&ids, resolution, now_ms - window_ms, now_ms, Some("pool_"))
        .await?;
    // (target id, instance, kind, pool name) → readings
    let mut by: std::collections::BTreeMap<(i64, String, String, String), Readings> =
        Default::default();
    for p in points {
        let Some((field, kind, name)) = pools::parse_metric(&p.metric) else {
            continue;
        };
        by.entry((
            p.target_id,
            p.instance.clone(),
            kind.as_str().to_string(),
            name.to_string(),
        ))
        .or_default()
        .push((p.at_ms, field.to_string(), p.mean));
    }
    Ok(by
        .into_iter()
        .filter_map(|((tid, instance, kind, pool), readings)| {
            let t = targets.iter().find(|t| t.id == tid)?;
            let labels: Labels = [
                ("service", t.service.clone()),
                ("target", t.name.clone()),
                ("instance", instance),
                ("kind", kind),
                ("pool", pool),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            Some((Arc::new(labels), readings))
        })
        .collect())
}

/// A pool rule's measure over the readings in (`now_ms` − `window_ms`, `now_ms`], with the
/// number of scrapes it had.
pub fn pool_measure(
    m: Measure,
    readings: &[(i64, String, f64)],
    window_ms: i64,
    now_ms: i64,
) -> (Option<f64>, f64) {
    let w = PoolWindow::of(
        readings
            .iter()
            .filter(|(t, _, _)| *t > now_ms - window_ms && *t <= now_ms)
            .map(|(t, f, v)| (*t, f.as_str(), *v)),
    );
    let value = match m {
        Measure::PoolUsagePct => w.usage_pct,
        Measure::PoolPending => w.pending,
        _ => None,
    };
    (value, w.scrapes as f64)
}

/// A route subject's labels: `service`, `instance`, `route`, `target`, `source`.
pub fn route_labels(info: &RouteInfo) -> Labels {
    info.subject_labels()
}

/// A rule's measure on one route's figures; `None` when the figure is missing (no
/// exchanges in the window, or the source lacks it). `target_up`: whether the route's
/// target answered its last scrape.
pub fn measure(m: Measure, target_up: Option<bool>, f: &Figures) -> Option<f64> {
    match m {
        Measure::ErrorPct => f.error_pct(),
        Measure::ErrorsPerS => f.failed_per_s(),
        Measure::ThroughputPerS => f.throughput_per_s(),
        Measure::MeanMs => f.mean_ms(),
        Measure::P95Ms => f.quantile_ms(0.95),
        Measure::P99Ms => f.quantile_ms(0.99),
        Measure::Inflight => f.inflight,
        Measure::TargetDown => Some(if target_up == Some(false) { 1.0 } else { 0.0 }),
        Measure::NoExchanges => Some(if f.exchanges.unwrap_or(0.0) > 0.0 {
            0.0
        } else {
            1.0
        }),
        Measure::PoolUsagePct | Measure::PoolPending => None,
    }
}

/// A live run subject's labels: `scenario`, `run` (its id), `run_name`.
pub fn run_labels(w: &LiveRunWindow) -> Labels {
    [
        ("scenario", w.scenario.clone().unwrap_or_default()),
        ("run", w.id.to_string()),
        ("run_name", w.name.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// A rule's measure over a live run's per-second buckets in the window ending at
/// `now_ms`: error % = errors / requests × 100; rates per second over the part of the
/// window the run has covered (at least 1 s); mean = Σ response time / requests;
/// p95 / p99 from the merged bucket histograms (nearest rank). `None` without requests
/// (rates: 0), and for measures not taken on runs.
pub fn run_measure(m: Measure, w: &LiveRunWindow, window_ms: i64, now_ms: i64) -> Option<f64> {
    let count = w.count as f64;
    let covered_ms = match w.first_start_ms {
        Some(first) => (now_ms - first.max(now_ms - window_ms)).clamp(1000, window_ms.max(1000)),
        None => window_ms.max(1000),
    };
    let span_s = covered_ms as f64 / 1000.0;
    let percentile = |p: f64| {
        let parts: Vec<&[u8]> = w.histograms.iter().map(Vec::as_slice).collect();
        crate::domain::runs::hdr::merge_histograms(&parts)
            .ok()
            .flatten()
            .and_then(|h| crate::domain::runs::hdr::histogram_percentile(&h, p))
            .map(|v| v as f64)
    };
    match m {
        Measure::ErrorPct => (w.count > 0).then(|| w.errors as f64 / count * 100.0),
        Measure::ErrorsPerS => Some(w.errors as f64 / span_s),
        Measure::ThroughputPerS => Some(count / span_s),
        Measure::MeanMs => (w.count > 0).then(|| w.sum_ms as f64 / count),
        Measure::P95Ms => percentile(95.0),
        Measure::P99Ms => percentile(99.0),
        Measure::Inflight
        | Measure::TargetDown
        | Measure::NoExchanges
        | Measure::PoolUsagePct
        | Measure::PoolPending => None,
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
    Ok(evaluate_fenced(store, hub, None, now_ms)
        .await?
        .unwrap_or_default())
}

/// As [`evaluate_once`], saving the round only while `fence` (the alerts lease in the term
/// this replica took) is still held, checked in the saving transaction: a replica paused
/// or cut off past its lease stores nothing, so it raises no notice. `None` when the round
/// was dropped so.
pub async fn evaluate_fenced(
    store: &Store,
    hub: &Hub,
    fence: Option<&LeaseTerm<'_>>,
    now_ms: i64,
) -> crate::store::Result<Option<Round>> {
    let rules: Vec<Rule> = store
        .list_alert_rules()
        .await?
        .into_iter()
        .map(|s| s.rule)
        .collect();
    let prev = store.list_alerts().await?;
    // Route figures: one pass over the longest window for all rules' windows.
    let mut needs: Vec<WindowNeed> = Vec::new();
    for rule in rules
        .iter()
        .filter(|r| r.subject.scenario.is_none() && !r.measure.for_pools())
    {
        let w = rule.window.ms();
        let i = match needs.iter().position(|n| n.window_ms == w) {
            Some(i) => i,
            None => {
                needs.push(WindowNeed {
                    window_ms: w,
                    buckets: false,
                    inflight: false,
                });
                needs.len() - 1
            }
        };
        needs[i].buckets |= matches!(rule.measure, Measure::P95Ms | Measure::P99Ms);
        needs[i].inflight |= rule.measure == Measure::Inflight;
    }
    let windows = store.route_window_figures(&needs, now_ms).await?;
    if !needs.is_empty() {
        let from = if windows.from_memory {
            "memory"
        } else {
            "sqlite"
        };
        metrics::counter!("harrier_alert_window_reads_total", "from" => from).increment(1);
    }
    let pool_window = rules
        .iter()
        .filter(|r| r.measure.for_pools())
        .map(|r| r.window.ms())
        .max();
    let pool_subjects = match pool_window {
        Some(w) => pool_subjects(store, w, now_ms).await?,
        None => Vec::new(),
    };
    let mut live: HashMap<i64, Vec<(LiveRunWindow, Arc<Labels>)>> = HashMap::new();
    let mut alerts = Vec::new();
    let mut transitions = Vec::new();
    for rule in &rules {
        let window = rule.window.ms();
        let measured: Vec<Measured> = if rule.measure.for_pools() {
            pool_subjects
                .iter()
                .filter(|(labels, _)| rule.subject.matches(labels))
                .map(|(labels, readings)| {
                    let (value, scrapes) = pool_measure(rule.measure, readings, window, now_ms);
                    Measured {
                        labels: labels.clone(),
                        value,
                        count: Some(scrapes),
                    }
                })
                .collect()
        } else if rule.subject.scenario.is_some() {
            if let std::collections::hash_map::Entry::Vacant(e) = live.entry(window) {
                let runs = store.live_run_windows(window, now_ms).await?;
                e.insert(
                    runs.into_iter()
                        .map(|w| {
                            let labels = Arc::new(run_labels(&w));
                            (w, labels)
                        })
                        .collect(),
                );
            }
            live[&window]
                .iter()
                .filter(|(_, labels)| rule.subject.matches_run(labels))
                .map(|(w, labels)| Measured {
                    labels: labels.clone(),
                    value: run_measure(rule.measure, w, window, now_ms),
                    count: Some(w.count as f64),
                })
                .collect()
        } else {
            let figs = &windows.figures[&window];
            windows
                .routes
                .iter()
                .zip(figs)
                .zip(&windows.target_up)
                .filter(|((s, _), _)| rule.subject.matches(&s.labels))
                .map(|((s, f), up)| Measured {
                    labels: s.labels.clone(),
                    value: measure(rule.measure, *up, f),
                    count: f.exchanges,
                })
                .collect()
        };
        let out = eval::evaluate(rule, &measured, &prev, now_ms);
        alerts.extend(out.alerts);
        transitions.extend(out.transitions);
    }
    let names: Vec<String> = rules.iter().map(|r| r.name.clone()).collect();
    let notifies = transitions
        .iter()
        .any(|t| matches!(t.change, Change::Firing | Change::Resolved));
    if notifies {
        super::pause::at(super::pause::Point::BeforeOutbox);
    }
    let Some(notifications) = store
        .save_evaluation_fenced(fence, &names, &alerts, &transitions, now_ms)
        .await?
    else {
        tracing::warn!("the alerts lease was lost during the round; its results are dropped");
        return Ok(None);
    };
    if !notifications.is_empty() {
        super::pause::at(super::pause::Point::AfterOutbox);
    }
    // A live run watched by a firing scenario rule is failed at that moment.
    for t in transitions.iter().filter(|t| t.change == Change::Firing) {
        let scenario_rule = rules
            .iter()
            .any(|r| r.name == t.rule && r.subject.scenario.is_some());
        let Some(run) = t.labels.get("run").and_then(|r| r.parse::<i64>().ok()) else {
            continue;
        };
        if scenario_rule && store.fail_run(run, &t.rule, t.at_ms, t.value).await? {
            tracing::info!(run, rule = %t.rule, "live run failed by an alert rule");
            if let Some(item) = crate::views::runs::run_list_item(store, run).await? {
                hub.publish(&Event::RunUpdated { run: item });
            }
        }
    }
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
    Ok(Some(Round {
        rules: rules.len(),
        transitions,
        notifications,
    }))
}

/// Seeds the rules, then evaluates every `evaluation_interval` until `shutdown`; `wake`
/// is notified when a round raises notices. A failed
/// round is logged and the next one runs as usual.
pub async fn run(
    store: Store,
    hub: Hub,
    config: Arc<AlertsConfig>,
    wake: Arc<tokio::sync::Notify>,
    leader: Arc<super::lease::Leader>,
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
                // Another replica on the same database evaluates while it holds the lease.
                if !leader.round(crate::now_ms()).await {
                    continue;
                }
                let started = std::time::Instant::now();
                let fence = leader.fence();
                match evaluate_fenced(&store, &hub, Some(&fence), crate::now_ms()).await {
                    Ok(None) => {}
                    Ok(Some(round)) => {
                        metrics::counter!("harrier_alert_evaluations_total").increment(1);
                        metrics::gauge!("harrier_alert_evaluation_last_duration_seconds")
                            .set(started.elapsed().as_secs_f64());
                        let held = store.recent_intervals_held().unwrap_or_default();
                        metrics::gauge!("harrier_alert_recent_intervals").set(held.1 as f64);
                        metrics::gauge!("harrier_alert_recent_bytes").set(held.2 as f64);
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
