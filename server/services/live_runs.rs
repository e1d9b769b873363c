//! Live runs: load tests that stream their results while they run (InfluxDB line protocol
//! from k6 and JMeter's Backend Listener, see [`crate::sources::ingest::influx`]).
//!
//! Owns the open runs. A run starts with its first point (stored at once with status
//! `live`), is snapshotted into the store and announced over the websocket every second
//! while points arrive, and closes (status `complete`) after an idle timeout, JMeter's
//! "ended" event, or `POST /api/v1/runs/{id}/end`. Importing the run's result file with
//! `replace` afterwards swaps the streamed aggregates for exact ones.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::domain::runs::intervals::IntervalRun;
use crate::domain::runs::{RunBuilder, RunData, RunLimits, Sample};
use crate::services::live::{Event, Hub};
use crate::sources::ingest::influx::{
    self, Classified, LivePoint, Precision, Sender, WriteSummary,
};
use crate::store::{NewRun, Store, StoreError};

/// How often open runs are snapshotted and announced.
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
    /// Points arrived since the last snapshot.
    dirty: bool,
    ended: bool,
    /// Results (requests or intervals) arrived: only then is the run stored; gauges alone
    /// (k6 `vus` before the first request) wait here.
    has_results: bool,
}

impl OpenRun {
    fn new(sender: Sender, scenario: String, limits: &RunLimits) -> OpenRun {
        let acc = match sender {
            Sender::K6 => Acc::Samples {
                builder: Box::new(RunBuilder::with_limits(*limits)),
                users: None,
            },
            Sender::JMeter => Acc::Intervals(Box::new(IntervalRun::with_limits(*limits))),
        };
        OpenRun {
            id: None,
            sender,
            scenario,
            acc,
            last_point: Instant::now(),
            dirty: false,
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

    fn snapshot(&self) -> RunData {
        match &self.acc {
            Acc::Samples { builder, .. } => (**builder).clone().finish(),
            Acc::Intervals(r) => r.snapshot(),
        }
    }
}

/// The open live runs; cheap to clone.
#[derive(Clone)]
pub struct LiveRuns {
    runs: Arc<Mutex<HashMap<(Sender, String), OpenRun>>>,
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
            store,
            hub,
            idle_timeout,
            limits,
        }
    }

    /// Takes one write body (InfluxDB line protocol). `database` is the `db`/`bucket` it
    /// was written to.
    pub async fn write(
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
                let run = runs
                    .entry(key.clone())
                    .or_insert_with(|| OpenRun::new(key.0, key.1.clone(), &self.limits));
                run.push(c.line, &c.point);
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

    /// Ends the live run `id` now; `false` if it is not live.
    pub async fn end(&self, id: i64) -> bool {
        let mut runs = self.runs.lock().await;
        match runs.values_mut().find(|r| r.id == Some(id)) {
            Some(run) => {
                run.ended = true;
                run.dirty = true;
                true
            }
            None => false,
        }
    }

    /// Whether run `id` is still receiving data.
    pub async fn is_live(&self, id: i64) -> bool {
        self.runs.lock().await.values().any(|r| r.id == Some(id))
    }

    /// Snapshots changed runs, closes idle or ended ones; called every second.
    pub async fn tick(&self) {
        let mut runs = self.runs.lock().await;
        let mut closed = Vec::new();
        for (key, run) in runs.iter_mut() {
            let closing = run.ended || run.last_point.elapsed() >= self.idle_timeout;
            let Some(id) = run.id else {
                if closing {
                    closed.push(key.clone()); // gauges that never led to results
                }
                continue;
            };
            if !run.dirty && !closing {
                continue;
            }
            let data = run.snapshot();
            let status = if closing { "complete" } else { "live" };
            match self.store.replace_run_data(id, &data, status, None).await {
                Ok(_) => {
                    run.dirty = false;
                    if let Ok(Some(item)) = self.store.run_list_item(id).await {
                        self.hub.publish(&Event::RunUpdated { run: item });
                    }
                }
                Err(e) => {
                    tracing::error!(run = id, error = %e, "storing a live run's snapshot failed")
                }
            }
            if closing {
                tracing::info!(run = id, samples = data.overall.count, "live run complete");
                closed.push(key.clone());
            }
        }
        for key in closed {
            runs.remove(&key);
        }
    }

    /// Ticks every second until `shutdown`, then closes every open run.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => self.tick().await,
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
