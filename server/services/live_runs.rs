//! Live runs: load tests that stream their results while they run (InfluxDB line protocol
//! from k6 and JMeter's Backend Listener, see [`crate::sources::ingest::influx`]).
//!
//! Owns the open runs. A run starts with its first point (stored at once with status
//! `live`) and closes (status `complete`) after an idle timeout, JMeter's "ended" event,
//! or `POST /api/v1/runs/{id}/end`. Importing the run's result file with `replace`
//! afterwards swaps the streamed aggregates for exact ones.
//!
//! Acknowledged means stored: [`LiveRuns::write`] returns only once the points it took
//! are committed to the store, so a 204 survives a crash of the process. What is stored
//! is incremental: the run's statistics (bounded by its labels) and only the per-second
//! buckets that changed since the previous store, never the run's whole length. Writes
//! arriving while a store is under way are stored together by the next one (one
//! transaction for many writes). Runs are announced over the websocket once a second.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::domain::runs::intervals::IntervalRun;
use crate::domain::runs::{RunBuilder, RunChanges, RunLimits, Sample};
use crate::services::live::{Event, Hub};
use crate::sources::ingest::influx::{
    self, Classified, LivePoint, Precision, Sender, WriteSummary,
};
use crate::store::{NewRun, Store, StoreError};

/// How long a live run may go without data before any replica (PostgreSQL) marks it
/// complete, ms: twice the idle time-out, at least 2 minutes. Its own replica closes it
/// after the idle time-out, so one still `live` well past that was left by a replica that
/// died.
pub fn abandoned_after_ms(idle_timeout: Duration) -> i64 {
    (2 * idle_timeout.as_millis() as i64).max(120_000)
}

/// How often open runs are announced and idle ones closed.
const TICK: Duration = Duration::from_secs(1);

/// What a run accumulates, by sender.
#[derive(Debug)]
enum Acc {
    /// k6: one sample per request.
    Samples {
        builder: Box<RunBuilder>,
        users: Option<u32>,
    },
    /// JMeter Backend Listener: per-interval aggregates.
    Intervals(Box<IntervalRun>),
}

#[derive(Debug)]
struct OpenRun {
    /// `None` until its row is created (right after the write that started it).
    id: Option<i64>,
    sender: Sender,
    scenario: String,
    acc: Acc,
    last_point: Instant,
    /// Points arrived since the run's changes were last taken for the store.
    dirty: bool,
    /// Changes taken for the store since the last announcement.
    announce: bool,
    /// Changes taken whose store failed, oldest first: stored before newer ones.
    unstored: Vec<RunChanges>,
    ended: bool,
    /// Results (requests or intervals) arrived: only then is the run stored; gauges alone
    /// (k6 `vus` before the first request) wait here.
    has_results: bool,
}

impl OpenRun {
    fn new(sender: Sender, scenario: String, limits: &RunLimits) -> OpenRun {
        let acc = match sender {
            Sender::K6 => {
                let mut builder = Box::new(RunBuilder::with_limits(*limits));
                builder.track_changes();
                Acc::Samples {
                    builder,
                    users: None,
                }
            }
            Sender::JMeter => Acc::Intervals(Box::new(IntervalRun::with_limits(*limits))),
        };
        OpenRun {
            id: None,
            sender,
            scenario,
            acc,
            last_point: Instant::now(),
            dirty: false,
            announce: false,
            unstored: Vec::new(),
            ended: false,
            has_results: false,
        }
    }

    /// Adds a point read on `line` of a write body.
    fn push(&mut self, line: u64, point: &LivePoint<'_>) {
        self.dirty = true;
        self.has_results |= matches!(
            point,
            LivePoint::Request { .. } | LivePoint::Interval { .. }
        );
        self.last_point = Instant::now();
        match (&mut self.acc, point) {
            (
                Acc::Samples { builder, users },
                LivePoint::Request {
                    label,
                    start_ms,
                    elapsed_ms,
                    success,
                    status,
                },
            ) => {
                builder.push(
                    line,
                    &Sample {
                        label,
                        start_ms: *start_ms,
                        elapsed_ms: *elapsed_ms,
                        success: *success,
                        response_code: status,
                        message: if *success { "" } else { status },
                        bytes_received: 0,
                        bytes_sent: 0,
                        active_users: *users,
                        is_transaction: false,
                    },
                );
            }
            (Acc::Samples { users, .. }, LivePoint::Users { users: u, .. }) => *users = Some(*u),
            (
                Acc::Intervals(r),
                LivePoint::Interval {
                    label,
                    t_ms,
                    count,
                    mean_ms,
                    min_ms,
                    max_ms,
                    bytes_received,
                    bytes_sent,
                },
            ) => r.interval(
                label,
                *t_ms,
                *count,
                *mean_ms,
                *min_ms,
                *max_ms,
                *bytes_received,
                *bytes_sent,
            ),
            (Acc::Intervals(r), LivePoint::IntervalErrors { label, t_ms, count }) => {
                r.interval_errors(label, *t_ms, *count)
            }
            (
                Acc::Intervals(r),
                LivePoint::ErrorKind {
                    label,
                    t_ms,
                    code,
                    message,
                    count,
                },
            ) => r.error_kind(label, *t_ms, code, message, *count),
            (Acc::Intervals(r), LivePoint::Users { t_ms, users }) => r.users(*t_ms, *users),
            (_, LivePoint::Ended { .. }) => self.ended = true,
            _ => {}
        }
    }

    /// The run's changes to store, oldest first: those whose store failed, then the
    /// changes since the previous call (see [`RunBuilder::take_changes`]).
    fn take_changes(&mut self) -> Vec<RunChanges> {
        self.dirty = false;
        self.announce = true;
        let mut out = std::mem::take(&mut self.unstored);
        out.push(match &mut self.acc {
            Acc::Samples { builder, .. } => builder.take_changes(),
            Acc::Intervals(r) => r.take_changes(),
        });
        out
    }
}

/// The open live runs; cheap to clone.
#[derive(Clone)]
pub struct LiveRuns {
    runs: Arc<Mutex<HashMap<(Sender, String), OpenRun>>>,
    /// Held while changes are taken and stored, so stores happen in the order taken.
    storing: Arc<Mutex<()>>,
    store: Store,
    hub: Hub,
    idle_timeout: Duration,
    limits: RunLimits,
}

/// What a write did.
#[derive(Debug, Default)]
pub struct WriteOutcome {
    pub summary: WriteSummary,
    /// Runs that received points, by id.
    pub run_ids: Vec<i64>,
}

impl LiveRuns {
    /// A manager writing to `store` and announcing on `hub`; a run closes after
    /// `idle_timeout` without points; points are held to `limits`.
    pub fn new(store: Store, hub: Hub, idle_timeout: Duration, limits: RunLimits) -> LiveRuns {
        LiveRuns {
            runs: Arc::default(),
            storing: Arc::default(),
            store,
            hub,
            idle_timeout,
            limits,
        }
    }

    /// Takes one write body (InfluxDB line protocol). `database` is the `db`/`bucket` it
    /// was written to. Returns once the points taken are committed to the store.
    pub async fn write(
        &self,
        body: &str,
        precision: Precision,
        database: &str,
    ) -> Result<WriteOutcome, StoreError> {
        let outcome = self.take_points(body, precision, database).await?;
        self.store_changes().await?;
        Ok(outcome)
    }

    /// Adds a write body's points to the open runs (creating the rows of new ones).
    async fn take_points(
        &self,
        body: &str,
        precision: Precision,
        database: &str,
    ) -> Result<WriteOutcome, StoreError> {
        let mut runs = self.runs.lock().await;
        let now = crate::now_ms();
        let mut touched: Vec<(Sender, String)> = Vec::new();
        let limits = self.limits.samples;
        let summary = influx::parse_write(
            body,
            precision,
            database,
            now,
            &limits,
            |c: Classified<'_>| {
                let key = (c.sender, c.run_key);
                if !runs.contains_key(&key) {
                    let run = OpenRun::new(key.0, key.1.clone(), &self.limits);
                    runs.insert(key.clone(), run);
                }
                if let Some(run) = runs.get_mut(&key) {
                    run.push(c.line, &c.point);
                }
                if !touched.contains(&key) {
                    touched.push(key);
                }
            },
        );
        let mut run_ids = Vec::new();
        for key in touched {
            let Some(run) = runs.get_mut(&key) else {
                continue;
            };
            if !run.has_results {
                continue;
            }
            let id = match run.id {
                Some(id) => id,
                None => {
                    let id = self
                        .store
                        .create_live_run(&NewRun {
                            name: run.scenario.clone(),
                            scenario: Some(run.scenario.clone()),
                            tool: run.sender.tool().to_string(),
                            source: Some("InfluxDB line protocol".to_string()),
                            tags: Vec::new(),
                            imported_at_ms: now,
                        })
                        .await?;
                    run.id = Some(id);
                    if let Ok(Some(item)) = self.store.run_list_item(id).await {
                        self.hub.publish(&Event::RunImported { run: item });
                    }
                    id
                }
            };
            run_ids.push(id);
        }
        Ok(WriteOutcome { summary, run_ids })
    }

    /// Stores the changes of every open run that received points since its changes were
    /// last taken. Stores run one at a time, in the order their changes were taken: once
    /// this returns, every point taken before the call is committed.
    async fn store_changes(&self) -> Result<(), StoreError> {
        let _turn = self.storing.lock().await;
        let pending: Vec<((Sender, String), i64, Vec<RunChanges>)> = {
            let mut runs = self.runs.lock().await;
            runs.iter_mut()
                .filter(|(_, r)| r.dirty && r.id.is_some())
                .filter_map(|(key, r)| Some((key.clone(), r.id?, r.take_changes())))
                .collect()
        };
        let mut failed: Option<StoreError> = None;
        for (key, id, changes) in pending {
            let mut left = changes.into_iter();
            if failed.is_none() {
                for c in left.by_ref() {
                    if let Err(e) = self.store.store_live_changes(id, &c, "live").await {
                        failed = Some(e);
                        // Kept, oldest first, for the next store.
                        let mut back = vec![c];
                        back.extend(left.by_ref());
                        left = back.into_iter();
                        break;
                    }
                }
            }
            let back: Vec<RunChanges> = left.collect();
            if !back.is_empty() {
                let mut runs = self.runs.lock().await;
                if let Some(r) = runs.get_mut(&key) {
                    r.dirty = true;
                    let newer = std::mem::replace(&mut r.unstored, back);
                    r.unstored.extend(newer);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Ends the live run `id` now; `false` if it is not live.
    pub async fn end(&self, id: i64) -> bool {
        let mut runs = self.runs.lock().await;
        match runs.values_mut().find(|r| r.id == Some(id)) {
            Some(run) => {
                run.ended = true;
                true
            }
            None => false,
        }
    }

    /// Whether run `id` is still receiving data.
    pub async fn is_live(&self, id: i64) -> bool {
        self.runs.lock().await.values().any(|r| r.id == Some(id))
    }

    /// Announces runs stored since the last tick and closes idle or ended ones; called
    /// every second.
    pub async fn tick(&self) {
        // Closing runs leave the map and have their last changes stored under the store
        // turn, so a write that took points into them returns after they are committed.
        let (closing, announce) = {
            let _turn = self.storing.lock().await;
            let (mut closing, mut announce) = (Vec::new(), Vec::new());
            {
                let mut runs = self.runs.lock().await;
                let keys: Vec<(Sender, String)> = runs
                    .iter()
                    .filter(|(_, r)| r.ended || r.last_point.elapsed() >= self.idle_timeout)
                    .map(|(k, _)| k.clone())
                    .collect();
                for key in keys {
                    if let Some(mut run) = runs.remove(&key)
                        && let Some(id) = run.id
                    {
                        let changes = run.take_changes();
                        closing.push((id, run, changes));
                    }
                }
                for r in runs.values_mut() {
                    if r.announce
                        && let Some(id) = r.id
                    {
                        r.announce = false;
                        announce.push(id);
                    }
                }
            }
            let mut done = Vec::new();
            for (id, run, changes) in closing {
                // The last changes complete the run (earlier ones are a failed store's).
                let n = changes.len();
                let mut ok = true;
                for (i, c) in changes.iter().enumerate() {
                    let status = if i + 1 == n { "complete" } else { "live" };
                    if let Err(e) = self.store.store_live_changes(id, c, status).await {
                        tracing::error!(run = id, error = %e, "storing a live run's last changes failed");
                        ok = false;
                    }
                }
                if ok {
                    done.push((id, run));
                }
            }
            (done, announce)
        };
        for id in announce {
            if let Ok(Some(item)) = self.store.run_list_item(id).await {
                self.hub.publish(&Event::RunUpdated { run: item });
            }
        }
        for (id, run) in closing {
            let samples = match &run.acc {
                Acc::Samples { builder, .. } => builder.samples(),
                Acc::Intervals(r) => r.samples(),
            };
            if let Ok(Some(item)) = self.store.run_list_item(id).await {
                self.hub.publish(&Event::RunUpdated { run: item });
            }
            tracing::info!(run = id, samples, "live run complete");
        }
    }

    /// Ticks every second until `shutdown`, then closes every open run. On a shared
    /// database (replicas) it also marks, each minute, runs left live by a replica that
    /// died as complete (see [`abandoned_after_ms`]).
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut ticks = 0u64;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => self.tick().await,
            }
            ticks += 1;
            if self.store.shared() && ticks.is_multiple_of(60) {
                let before = crate::now_ms() - abandoned_after_ms(self.idle_timeout);
                match self.store.close_stale_live_runs(before).await {
                    Ok(0) => {}
                    Ok(n) => tracing::warn!(
                        runs = n,
                        "live runs left by a replica that stopped marked complete"
                    ),
                    Err(e) => tracing::warn!(error = %e, "closing abandoned live runs failed"),
                }
            }
        }
        {
            let mut runs = self.runs.lock().await;
            for run in runs.values_mut() {
                run.ended = true;
            }
        }
        self.tick().await;
    }
}
