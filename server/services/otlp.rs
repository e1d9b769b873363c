//! The OTLP metrics receiver: pushes mapped by [`crate::sources::otlp`] become route
//! intervals written like a scrape's, so pushed routes get the same figures, history,
//! rollups, alerts and live updates as scraped ones.
//!
//! Each pushing service instance (`service.name` + `service.instance.id`) is a target of
//! kind `otlp` (origin `otlp`, named `otlp: SERVICE` or `otlp: SERVICE @ INSTANCE`),
//! created at its first push; it is never scraped. Its interval is the time between its
//! pushes (the SDKs' export interval), so a route missing from its pushes turns `stale`,
//! then `gone`, as scraped ones do; an instance whose pushes stop is marked down after
//! [`MISSED_PUSHES`] of its intervals ([`Receiver::sweep`]), as a scrape marks a target
//! that stops answering. A push is written at the time it arrives.
//!
//! Intervals per route:
//! - **delta** points are the interval's own counts, over `time − start` of the points
//!   (else the time since the instance's previous push); a route seen before that a
//!   delta push leaves out (SDKs send only what changed) had no exchanges in it;
//! - **cumulative** points are compared with the same route's previous push (per series,
//!   a series that went down restarted from 0); a new `start_time` means the process
//!   restarted, so its totals count from zero. The first push of a route is a baseline
//!   (as a first scrape is), unless its start time lies within [`FRESH_START_MS`] of its
//!   time: a service that just started counts its first requests.
//!
//! Runtime, process and pool metrics (OpenTelemetry's `process.*`, `jvm.*`,
//! `db.client.connection.*`; Micrometer's OTLP names) become the same process figures and
//! pool panels a scrape gives ([`crate::sources::otlp::process_samples`]).
//!
//! What is held here (the previous totals) is per process: after a restart the first push
//! of each route is a baseline again. With several replicas behind a load balancer, point
//! an SDK at one replica (or make the balancer sticky per client): the totals of one
//! service are compared where they arrive.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::sync::Mutex;

use crate::domain::routes::{Interval, Observation, RouteRow};
use crate::domain::secrets::{Credentials, Secret};
use crate::services::live::Hub;
use crate::services::live_runs::LiveRuns;
use crate::sources::ingest::influx::{LivePoint, Sender};
use crate::sources::otlp::{K6Label, K6Push, Mapped, PromSample, PushedRoute, ServicePush};
use crate::sources::scrape::process::{self, ProcessReading};
use crate::store::{OTLP_KIND, RouteWrite, ScrapeStatus, Store, TargetSpec};

/// Origin of the targets pushes create (their kind is [`OTLP_KIND`]).
pub const OTLP_ORIGIN: &str = "otlp";
/// A cumulative route first seen this soon after its start time counts from zero, ms.
pub const FRESH_START_MS: i64 = 60_000;
/// The interval assumed before an instance's second push, s (the SDKs' default export
/// interval).
const FIRST_INTERVAL_S: f64 = 60.0;
/// A pushing instance whose pushes stop is down after this many of its intervals.
pub const MISSED_PUSHES: f64 = 3.0;
/// How often quiet pushing instances are looked for, ms.
const SWEEP_MS: u64 = 5_000;
/// What a quiet pushing instance's target says.
pub const QUIET_ERROR: &str = "no push for 3 of its push intervals: the service stopped pushing, or its pushes no longer reach harrier";
/// Pushing service instances kept at once; pushes of further ones are refused.
pub const MAX_PUSH_TARGETS: usize = 1_000;

/// What one push did: data points taken, and those refused with the first reason.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PushOutcome {
    /// Data points stored (mapped or counted as unmapped).
    pub accepted: u64,
    pub rejected: u64,
    pub reason: Option<String>,
}

/// The receiver; cheap to clone.
/// A pushing instance's key: its service and `service.instance.id`.
type InstanceKey = (String, Option<String>);

#[derive(Clone)]
pub struct Receiver {
    store: Store,
    hub: Hub,
    live_runs: LiveRuns,
    instances: Arc<Mutex<HashMap<InstanceKey, Instance>>>,
}

/// What is kept of one pushing instance between its pushes.
struct Instance {
    target_id: i64,
    interval_s: f64,
    last_push_ms: Option<i64>,
    /// Cumulative routes: the previous push's readings.
    cumulative: HashMap<(String, BTreeMap<String, String>), PushedRoute>,
    /// Delta routes seen: an empty reading of each (to write an idle interval).
    delta: HashMap<(String, BTreeMap<String, String>), Observation>,
    /// Metrics not mapped, by name: data points seen since the process started.
    unmapped: BTreeMap<String, u64>,
    sent: HashMap<i64, RouteRow>,
    /// The previous push's process readings, per instance, with their time (for rates).
    process: HashMap<Option<String>, (ProcessReading, i64)>,
    /// k6: the previous push's totals per request name.
    k6: HashMap<String, K6Label>,
    /// k6: when `vus` was last read, unix ms.
    k6_vus_ms: Option<i64>,
}

/// The metrics a pushing instance sends that harrier does not map.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Unmapped {
    pub target_id: i64,
    pub service: String,
    pub instance: Option<String>,
    /// Metric name → data points received since this process started.
    pub metrics: BTreeMap<String, u64>,
}

impl Receiver {
    /// Marks down, every few seconds until `shutdown`, the pushing instances that stopped
    /// pushing ([`MISSED_PUSHES`] of their intervals), as a scrape marks a target that
    /// stopped answering; their next push brings them up. Reads the store, so it covers
    /// instances pushed to before a restart or to another replica.
    pub async fn sweep(self, shutdown: tokio_util::sync::CancellationToken) {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(SWEEP_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.mark_quiet(crate::now_ms()).await {
                tracing::warn!(error = %e, "looking for quiet OTLP pushers failed");
            }
        }
    }

    /// One round of [`Receiver::sweep`] at `now_ms`; the targets marked down.
    pub async fn mark_quiet(&self, now_ms: i64) -> crate::store::Result<Vec<i64>> {
        let ids = self
            .store
            .mark_quiet_targets_down(OTLP_KIND, now_ms, MISSED_PUSHES, QUIET_ERROR)
            .await?;
        if ids.is_empty() {
            return Ok(ids);
        }
        let mut instances = self.instances.lock().await;
        for id in &ids {
            let mut fresh = HashMap::new();
            let sent = instances
                .values_mut()
                .find(|i| i.target_id == *id)
                .map_or(&mut fresh, |i| &mut i.sent);
            crate::services::scrape::publish(&self.store, &self.hub, *id, sent).await;
        }
        Ok(ids)
    }

    pub fn new(store: Store, hub: Hub, live_runs: LiveRuns) -> Receiver {
        Receiver {
            store,
            hub,
            live_runs,
            instances: Arc::default(),
        }
    }

    /// What each pushing instance sends that is not mapped, by service.
    pub async fn unmapped(&self) -> Vec<Unmapped> {
        let instances = self.instances.lock().await;
        let mut out: Vec<Unmapped> = instances
            .iter()
            .filter(|(_, i)| !i.unmapped.is_empty())
            .map(|((service, instance), i)| Unmapped {
                target_id: i.target_id,
                service: service.clone(),
                instance: instance.clone(),
                metrics: i.unmapped.clone(),
            })
            .collect();
        out.sort_by(|a, b| (&a.service, &a.instance).cmp(&(&b.service, &b.instance)));
        out
    }

    /// Writes one mapped push (every service instance in it), each instance in one
    /// transaction; `now_ms` is when it arrived.
    pub async fn push(&self, mapped: Mapped, now_ms: i64) -> crate::store::Result<PushOutcome> {
        let mut outcome = PushOutcome {
            rejected: mapped.rejected,
            reason: mapped.reason,
            accepted: 0,
        };
        let total: u64 = mapped.services.iter().map(|s| s.points).sum();
        let mapped_unread = mapped.unread;
        let mut instances = self.instances.lock().await;
        for push in mapped.services {
            let key = (push.service.clone(), push.instance.clone());
            if !instances.contains_key(&key) {
                if instances.len() >= MAX_PUSH_TARGETS {
                    outcome.rejected += push.points;
                    outcome.reason.get_or_insert_with(|| {
                        format!(
                            "more than {MAX_PUSH_TARGETS} pushing service instances; service {} was refused",
                            push.service
                        )
                    });
                    continue;
                }
                let target = self
                    .store
                    .upsert_target(&spec(&push, FIRST_INTERVAL_S), OTLP_ORIGIN, now_ms)
                    .await?;
                instances.insert(
                    key.clone(),
                    Instance {
                        target_id: target.id,
                        interval_s: target.interval_s,
                        last_push_ms: None,
                        cumulative: HashMap::new(),
                        delta: HashMap::new(),
                        unmapped: BTreeMap::new(),
                        sent: HashMap::new(),
                        process: HashMap::new(),
                        k6: HashMap::new(),
                        k6_vus_ms: None,
                    },
                );
            }
            let inst = instances.get_mut(&key).expect("inserted above");
            self.write(inst, push, now_ms).await?;
        }
        // Points that could not be read are in no service's count.
        outcome.accepted = total.saturating_sub(outcome.rejected - mapped_unread);
        Ok(outcome)
    }

    async fn write(
        &self,
        inst: &mut Instance,
        push: ServicePush,
        now_ms: i64,
    ) -> crate::store::Result<()> {
        // The instance's push interval: what its target's stale/gone states count in.
        if let Some(last) = inst.last_push_ms {
            let seen = ((now_ms - last) as f64 / 1000.0).clamp(1.0, 3600.0);
            if (seen - inst.interval_s).abs() > inst.interval_s * 0.25 {
                let t = self
                    .store
                    .upsert_target(&spec(&push, seen.round()), OTLP_ORIGIN, now_ms)
                    .await?;
                inst.interval_s = t.interval_s;
            }
        }
        if let Some(k6) = &push.k6 {
            self.k6_run(inst, &push.service, k6).await?;
        }
        let since_last_ms = inst.last_push_ms.map(|l| now_ms - l);
        // The instance's state (previous totals, delta routes, process readings) changes
        // only once what it was compared for is stored: a push the store refuses (answered
        // 503, sent again by the SDK) is counted again from the same readings.
        let mut writes = Vec::with_capacity(push.routes.len());
        let mut seen_delta = Vec::new();
        let mut new_delta = Vec::new();
        let mut new_cumulative = Vec::new();
        for r in push.routes {
            let key = (r.obs.route.clone(), r.obs.labels.clone());
            if r.delta {
                let interval = delta_interval(&r, since_last_ms);
                writes.push(route_write(&r.obs, interval));
                if !inst.delta.contains_key(&key) {
                    new_delta.push((key.clone(), empty_like(&r.obs)));
                }
                seen_delta.push(key);
            } else {
                let interval = cumulative_interval(inst.cumulative.get(&key), &r);
                writes.push(route_write(&r.obs, interval));
                new_cumulative.push((key, r));
            }
        }
        // Delta routes this push left out: nothing happened on them.
        if let Some(span) = since_last_ms {
            for (key, obs) in &inst.delta {
                if !seen_delta.contains(key) {
                    let iv = Interval {
                        interval_ms: span,
                        exchanges: obs.total.as_ref().map(|_| 0.0),
                        failed: obs.failed.as_ref().map(|_| 0.0),
                        duration_sum_s: obs.duration_sum_s.as_ref().map(|_| 0.0),
                        duration_count: obs.duration_count.as_ref().map(|_| 0.0),
                        ..Interval::default()
                    };
                    writes.push(route_write(obs, Some(iv)));
                }
            }
        }
        // Runtime, process and pool figures, as a scrape's.
        if !push.process.is_empty() {
            let doc = PromSample::exposition(&push.process);
            let mut figures: Vec<(String, String, f64)> = Vec::new();
            let mut readings = Vec::new();
            for (key, reading) in process::readings(&doc, now_ms) {
                let shown = key
                    .clone()
                    .or_else(|| push.instance.clone())
                    .unwrap_or_else(|| "otlp".to_string());
                let before = inst.process.get(&key).map(|(r, t)| (r, now_ms - *t));
                for (metric, v) in reading.figures(before) {
                    figures.push((shown.clone(), metric, v));
                }
                readings.push((key, (reading, now_ms)));
            }
            self.store
                .record_process(inst.target_id, now_ms, &figures)
                .await?;
            inst.process.extend(readings);
        }
        let status = ScrapeStatus {
            at_ms: now_ms,
            up: true,
            duration_ms: 0.0,
            samples: push.points as i64,
            error: None,
        };
        // A push without route metrics (another meter provider of the same instance, an
        // export split in parts) says nothing of the routes: it must not mark them stale.
        let said_nothing =
            writes.is_empty() && !(inst.cumulative.is_empty() && inst.delta.is_empty());
        if !said_nothing {
            self.store
                .record_scrape(inst.target_id, &status, &writes)
                .await?;
        }
        inst.last_push_ms = Some(now_ms);
        inst.delta.extend(new_delta);
        // Kept by move: the next push is compared with them.
        inst.cumulative.extend(new_cumulative);
        for (name, n) in &push.unmapped {
            *inst.unmapped.entry(name.clone()).or_default() += n;
        }
        if !said_nothing {
            crate::services::scrape::publish(
                &self.store,
                &self.hub,
                inst.target_id,
                &mut inst.sent,
            )
            .await;
        }
        Ok(())
    }
}

impl Receiver {
    /// k6's push as the intervals of its live run (named after its service): per request
    /// name, the requests since the previous push, their mean, failures, and k6's min
    /// and max since the start (cumulative points carry no other); and the virtual users.
    async fn k6_run(
        &self,
        inst: &mut Instance,
        run: &str,
        k6: &K6Push,
    ) -> crate::store::Result<()> {
        let intervals: Vec<(&String, K6Interval)> = k6
            .labels
            .iter()
            .filter_map(|(label, cur)| Some((label, k6_interval(inst.k6.get(label), cur)?)))
            .collect();
        let mut points: Vec<LivePoint<'_>> = intervals
            .iter()
            .map(|(label, d)| LivePoint::Span {
                label,
                start_ms: d.start_ms,
                end_ms: d.t_ms,
                count: d.count,
                failed: d.failed,
                mean_ms: d.mean_ms,
                min_ms: d.min_ms,
                max_ms: d.max_ms,
            })
            .collect();
        if let Some((t_ms, vus)) = k6.vus {
            // The gauge holds since its previous reading (else since this push's
            // requests began).
            let since = inst
                .k6_vus_ms
                .or_else(|| intervals.iter().map(|(_, d)| d.start_ms).min())
                .unwrap_or(t_ms);
            points.push(LivePoint::UsersOver {
                start_ms: since,
                end_ms: t_ms,
                users: vus.max(0.0) as u32,
            });
        }
        if !points.is_empty() {
            self.live_runs.push(Sender::K6Otlp, run, &points).await?;
        }
        // Only once stored: a push the store refused is counted again from the same
        // totals by the next one.
        for (label, cur) in &k6.labels {
            inst.k6.insert(label.clone(), cur.clone());
        }
        if let Some((t_ms, _)) = k6.vus {
            inst.k6_vus_ms = Some(t_ms);
        }
        Ok(())
    }
}

/// One request name's interval between two k6 pushes.
#[derive(Debug, Clone, PartialEq)]
pub struct K6Interval {
    /// The interval's span, unix ms: from the previous push's time (the points' start
    /// time on a first or delta push) to this one's.
    pub start_ms: i64,
    pub t_ms: i64,
    pub count: u64,
    pub mean_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub failed: u64,
}

/// The interval between two k6 readings of one request name, by the rules of
/// cumulative and delta routes (module docs); `None` for a baseline or no requests.
pub fn k6_interval(prev: Option<&K6Label>, cur: &K6Label) -> Option<K6Interval> {
    let since_prev = prev.map(|p| p.at_ms);
    let ((count, sum_ms, failed), start_ms) = if cur.delta {
        (
            (cur.count, cur.sum_ms, cur.failed),
            cur.start_ms.or(since_prev),
        )
    } else {
        match prev {
            Some(p) if cur.start_ms <= p.start_ms && cur.count >= p.count => (
                (
                    cur.count - p.count,
                    cur.sum_ms - p.sum_ms,
                    (cur.failed - p.failed).max(0.0),
                ),
                Some(p.at_ms),
            ),
            // A new start time or totals that went down: counted from zero.
            Some(p) => (
                (cur.count, cur.sum_ms, cur.failed),
                cur.start_ms.filter(|s| *s >= p.at_ms).or(Some(p.at_ms)),
            ),
            None => {
                let start = cur.start_ms?;
                if cur.at_ms - start > FRESH_START_MS {
                    return None;
                }
                ((cur.count, cur.sum_ms, cur.failed), Some(start))
            }
        }
    };
    if count < 1.0 {
        return None;
    }
    Some(K6Interval {
        // Without a start time or a previous push: the last second.
        start_ms: start_ms
            .filter(|s| *s < cur.at_ms)
            .unwrap_or(cur.at_ms - 1000),
        t_ms: cur.at_ms,
        count: count.round() as u64,
        mean_ms: sum_ms / count,
        // k6's points carry both; without them the interval's mean is all that is known.
        min_ms: cur.min_ms.unwrap_or(sum_ms / count),
        max_ms: cur.max_ms.unwrap_or(sum_ms / count),
        failed: failed.round() as u64,
    })
}

/// The target of a pushing instance.
fn spec(push: &ServicePush, interval_s: f64) -> TargetSpec {
    let name = match &push.instance {
        Some(i) => format!("otlp: {} @ {i}", push.service),
        None => format!("otlp: {}", push.service),
    };
    let mut labels = BTreeMap::from([("service".to_string(), push.service.clone())]);
    labels.insert(
        "instance".to_string(),
        push.instance.clone().unwrap_or_else(|| "otlp".to_string()),
    );
    TargetSpec {
        name,
        url: Secret::<Credentials>::new("otlp://push".to_string()),
        kind: OTLP_KIND.to_string(),
        interval_s,
        timeout_s: interval_s,
        labels,
    }
}

fn route_write(obs: &Observation, interval: Option<Interval>) -> RouteWrite {
    RouteWrite {
        service: obs.service.clone(),
        route: obs.route.clone(),
        labels: obs.labels.clone(),
        source: obs.source.as_str().to_string(),
        state: None,
        last_exchange_ms: None,
        instance: String::new(),
        interval,
    }
}

/// A reading of the same route with no figures (what a route counts from).
fn empty_like(obs: &Observation) -> Observation {
    let mut o = Observation::new(&obs.service, &obs.route, obs.source);
    o.labels = obs.labels.clone();
    o
}

/// The interval a delta reading is: its own counts over `time − start` (else the time
/// since the previous push; `None` on a first push without a start time).
pub fn delta_interval(r: &PushedRoute, since_last_ms: Option<i64>) -> Option<Interval> {
    let span = match r.start_ms {
        Some(s) if r.at_ms > s => r.at_ms - s,
        _ => since_last_ms?,
    };
    let mut iv = Interval::between(&empty_like(&r.obs), &r.obs, span);
    iv.max_s = r.max_s;
    Some(iv)
}

/// The interval between a cumulative reading and the route's previous one (see the
/// module docs): `None` for a baseline.
pub fn cumulative_interval(prev: Option<&PushedRoute>, cur: &PushedRoute) -> Option<Interval> {
    let restarted = |p: &PushedRoute| match (p.start_ms, cur.start_ms) {
        (Some(a), Some(b)) => b > a,
        _ => false,
    };
    match prev {
        Some(p) if !restarted(p) => {
            if cur.at_ms <= p.at_ms {
                return None;
            }
            let mut iv = Interval::between(&p.obs, &cur.obs, cur.at_ms - p.at_ms);
            // The max since start says something of this interval only when it rose.
            iv.max_s = match (p.max_s, cur.max_s) {
                (Some(a), Some(b)) if b > a => Some(b),
                (None, Some(b)) => Some(b),
                _ => None,
            };
            Some(iv)
        }
        _ => {
            let start = cur.start_ms?;
            let fresh = cur.at_ms > start && cur.at_ms - start <= FRESH_START_MS;
            let after_restart = prev.is_some();
            if !(fresh || after_restart) || cur.at_ms <= start {
                return None;
            }
            let mut iv = Interval::between(&empty_like(&cur.obs), &cur.obs, cur.at_ms - start);
            iv.max_s = cur.max_s;
            iv.resets += u32::from(after_restart);
            Some(iv)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::routes::Source;

    fn reading(total: f64, start_ms: Option<i64>, at_ms: i64, max_s: Option<f64>) -> PushedRoute {
        let mut obs = Observation::new("shop", "GET /a", Source::Otlp);
        obs.total.get_or_insert_default().add("code=200", total);
        obs.duration_count
            .get_or_insert_default()
            .add("code=200", total);
        obs.duration_sum_s
            .get_or_insert_default()
            .add("code=200", total * 0.01);
        PushedRoute {
            obs,
            delta: false,
            start_ms,
            at_ms,
            max_s,
        }
    }

    #[test]
    fn cumulative_readings_become_intervals_with_baselines_restarts_and_resets() {
        let start = 1_000_000;
        // a long-running process seen for the first time: a baseline
        let old = reading(500.0, Some(start - 3_600_000), start, Some(0.2));
        assert_eq!(cumulative_interval(None, &old), None);
        // a process that started 10 s ago counts its first requests
        let fresh = reading(40.0, Some(start), start + 10_000, Some(0.3));
        let iv = cumulative_interval(None, &fresh).unwrap();
        assert_eq!((iv.interval_ms, iv.exchanges), (10_000, Some(40.0)));
        assert_eq!(iv.max_s, Some(0.3));
        // the next push: the difference; the max did not rise, so it says nothing
        let next = reading(100.0, Some(start), start + 20_000, Some(0.3));
        let iv = cumulative_interval(Some(&fresh), &next).unwrap();
        assert_eq!(
            (iv.interval_ms, iv.exchanges, iv.max_s),
            (10_000, Some(60.0), None)
        );
        assert!((iv.duration_sum_s.unwrap() - 0.6).abs() < 1e-12);
        // a new start time: the process restarted, its totals count from zero
        let restarted = reading(7.0, Some(start + 25_000), start + 30_000, None);
        let iv = cumulative_interval(Some(&next), &restarted).unwrap();
        assert_eq!(
            (iv.interval_ms, iv.exchanges, iv.resets),
            (5_000, Some(7.0), 1)
        );
        // a total that went down under the same start time: a reset of that series
        let down = reading(3.0, Some(start), start + 30_000, None);
        let iv = cumulative_interval(Some(&next), &down).unwrap();
        assert_eq!((iv.exchanges, iv.resets), (Some(3.0), 3));
        // a push not later than the previous one gives nothing
        assert_eq!(cumulative_interval(Some(&next), &next), None);
    }

    #[test]
    fn delta_readings_are_their_own_interval() {
        let mut r = reading(12.0, Some(5_000), 15_000, Some(0.05));
        r.delta = true;
        let iv = delta_interval(&r, None).unwrap();
        assert_eq!(
            (iv.interval_ms, iv.exchanges, iv.max_s),
            (10_000, Some(12.0), Some(0.05))
        );
        r.start_ms = None;
        assert_eq!(delta_interval(&r, None), None);
        assert_eq!(delta_interval(&r, Some(2_000)).unwrap().interval_ms, 2_000);
    }

    #[test]
    fn k6_intervals_span_from_the_previous_push_or_the_test_start() {
        let k6 =
            |count: f64, failed: f64, start_ms: Option<i64>, at_ms: i64, delta: bool| K6Label {
                count,
                sum_ms: count * 10.0,
                min_ms: Some(1.0),
                max_ms: Some(50.0),
                failed,
                delta,
                start_ms,
                at_ms,
            };
        // The first push of a test that began 1.2 s ago: from the test's start.
        let first = k6(30.0, 3.0, Some(100_000), 101_200, false);
        let iv = k6_interval(None, &first).unwrap();
        assert_eq!(
            (iv.start_ms, iv.t_ms, iv.count, iv.failed),
            (100_000, 101_200, 30, 3)
        );
        // The next: from the previous push, the difference.
        let next = k6(50.0, 4.0, Some(100_000), 101_700, false);
        let iv = k6_interval(Some(&first), &next).unwrap();
        assert_eq!(
            (iv.start_ms, iv.t_ms, iv.count, iv.failed),
            (101_200, 101_700, 20, 1)
        );
        assert!((iv.mean_ms - 10.0).abs() < 1e-12);
        // A test seen first long after it began: a baseline, nothing counted.
        assert_eq!(
            k6_interval(None, &k6(30.0, 0.0, Some(0), 101_200, false)),
            None
        );
        // Delta points: their own start; without one, since the previous push.
        let d = k6(5.0, 0.0, Some(101_700), 102_200, true);
        assert_eq!(k6_interval(Some(&next), &d).unwrap().start_ms, 101_700);
        let d = k6(5.0, 0.0, None, 102_200, true);
        assert_eq!(k6_interval(Some(&next), &d).unwrap().start_ms, 101_700);
        assert_eq!(k6_interval(None, &d).unwrap().start_ms, 101_200);
    }
}
