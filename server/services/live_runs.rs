//! Live runs: load tests that stream their results while they run (InfluxDB line protocol
//! from k6 and JMeter's Backend Listener, see [`crate::sources::ingest::influx`]).
//!
//! A run starts with its first results (stored at once with status `live`) and closes
//! (status `complete`) after an idle timeout without data, JMeter's "ended" event, or
//! `POST /api/v1/runs/{id}/end`. Importing the run's result file with `replace`
//! afterwards swaps the streamed aggregates for exact ones.
//!
//! The store holds the run, not this process: each write's points are accumulated here
//! and *added* to the stored run ([`Store::add_live_delta`]), which is found by the
//! stream's key ([`Store::open_live_run`]). So a stream that a load balancer spreads over
//! several replicas is still one run with exact figures, and a run outlives the replica
//! that started it; any replica closes a run gone idle.
//!
//! Acknowledged means stored: [`LiveRuns::write`] returns only once the points it took
//! are committed, so a 204 survives a crash of the process. What is stored per write
//! follows its points (the run's labels and the seconds they touch), never the run's
//! length. Writes arriving while a store is under way are stored together by the next
//! one. Runs are announced over the websocket once a second.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::domain::runs::intervals::{IntervalRun, Source};
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

/// What a k6 run over OTLP is made of, as its run page says it.
const K6_OTLP: Source = Source {
    source: "k6's OpenTelemetry output (OTLP), per export interval",
    percentiles: "not kept: k6's OpenTelemetry histograms have the SDK's default bounds (0, 5, 10, 25, … ms); requests, failures, error % and mean are exact sums of what k6 exported, min and max are since the test's start; k6's own summary has its percentiles",
};

#[derive(Debug)]
struct OpenRun {
    /// The stored run its points were last added to; `None` until the first store.
    id: Option<i64>,
    sender: Sender,
    scenario: String,
    acc: Acc,
    last_point: Instant,
    /// Points arrived since the run's delta was last taken for the store.
    dirty: bool,
    /// Stored since the last announcement.
    announce: bool,
    /// Deltas taken whose store failed: added with the next one.
    unstored: Vec<RunChanges>,
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
            Sender::K6Otlp => Acc::Intervals(Box::new(
                IntervalRun::with_limits(*limits).from_source(K6_OTLP),
            )),
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
            LivePoint::Request { .. } | LivePoint::Interval { .. } | LivePoint::Span { .. }
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
            (
                Acc::Intervals(r),
                LivePoint::Span {
                    label,
                    start_ms,
                    end_ms,
                    count,
                    failed,
                    mean_ms,
                    min_ms,
                    max_ms,
                },
            ) => r.span(
                label, *start_ms, *end_ms, *count, *failed, *mean_ms, *min_ms, *max_ms,
            ),
            (
                Acc::Intervals(r),
                LivePoint::UsersOver {
                    start_ms,
                    end_ms,
                    users,
                },
            ) => r.users_over(*start_ms, *end_ms, *users),
            (_, LivePoint::Ended { .. }) => self.ended = true,
            _ => {}
        }
    }

    /// The deltas to add to the stored run: those whose store failed, then the points
    /// since the previous call as a run of their own (see
    /// [`crate::domain::runs::merge`]).
    fn take_deltas(&mut self, limits: &RunLimits) -> Vec<RunChanges> {
        self.dirty = false;
        let mut out = std::mem::take(&mut self.unstored);
        out.push(match &mut self.acc {
            Acc::Samples { builder, .. } => {
                // A fresh builder per delta: the stored run holds the rest.
                let taken = std::mem::replace(builder, Box::new(RunBuilder::with_limits(*limits)));
                let mut data = taken.finish();
                let added = std::mem::take(&mut data.buckets);
                RunChanges { data, added }
            }
            Acc::Intervals(r) => r.take_delta(),
        });
        out
    }

    /// The store key of the stream: its sender and run key.
    fn key(&self) -> String {
        format!("{}\u{1f}{}", self.sender.stream(), self.scenario)
    }
}

/// A run's deltas to store: its key here, its key in the store, the stored run its points
/// were last added to, the deltas.
type Pending = ((Sender, String), String, Option<i64>, Vec<RunChanges>);

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
        let (summary, touched) = self.take_points(body, precision, database).await;
        self.store_changes().await?;
        let runs = self.runs.lock().await;
        let run_ids = touched
            .iter()
            .filter_map(|k| runs.get(k).and_then(|r| r.id))
            .collect();
        Ok(WriteOutcome { summary, run_ids })
    }

    /// Takes points already read from another protocol (k6 over OTLP) for the run of
    /// `sender` and `run_key`. Returns once they are committed; the run's id.
    pub async fn push(
        &self,
        sender: Sender,
        run_key: &str,
        points: &[LivePoint<'_>],
    ) -> Result<Option<i64>, StoreError> {
        let key = (sender, run_key.to_string());
        {
            let mut runs = self.runs.lock().await;
            let run = runs
                .entry(key.clone())
                .or_insert_with(|| OpenRun::new(sender, run_key.to_string(), &self.limits));
            for p in points {
                run.push(0, p);
            }
        }
        self.store_changes().await?;
        Ok(self.runs.lock().await.get(&key).and_then(|r| r.id))
    }

    /// Adds a write body's points to the open runs; returns the parse summary and the
    /// keys of the runs that received points.
    async fn take_points(
        &self,
        body: &str,
        precision: Precision,
        database: &str,
    ) -> (WriteSummary, Vec<(Sender, String)>) {
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
            self.limits.max_line_bytes,
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
        (summary, touched)
    }

    /// Adds the points of every open run that received results since its delta was last
    /// taken to the stored run. Stores run one at a time: once this returns, every point
    /// taken before the call is committed.
    async fn store_changes(&self) -> Result<(), StoreError> {
        let _turn = self.storing.lock().await;
        let pending: Vec<Pending> = {
            let mut runs = self.runs.lock().await;
            runs.iter_mut()
                .filter(|(_, r)| r.dirty && r.has_results)
                .map(|(key, r)| (key.clone(), r.key(), r.id, r.take_deltas(&self.limits)))
                .collect()
        };
        let mut failed: Option<StoreError> = None;
        for (key, store_key, cached, deltas) in pending {
            let mut left = deltas.into_iter();
            let mut id = cached;
            if failed.is_none() {
                for d in left.by_ref() {
                    match self.add(&store_key, &key, id, &d).await {
                        Ok(stored_in) => id = Some(stored_in),
                        Err(e) => {
                            failed = Some(e);
                            let mut back = vec![d];
                            back.extend(left.by_ref());
                            left = back.into_iter();
                            break;
                        }
                    }
                }
            }
            let back: Vec<RunChanges> = left.collect();
            let mut runs = self.runs.lock().await;
            if let Some(r) = runs.get_mut(&key) {
                if id.is_some() && id != r.id {
                    r.id = id;
                }
                if back.is_empty() {
                    r.announce |= id.is_some();
                } else {
                    r.dirty = true;
                    r.unstored.extend(back);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Adds one delta to the stream's open run — `cached` if still open, else the one the
    /// store finds or opens for `store_key` — and returns that run's id.
    async fn add(
        &self,
        store_key: &str,
        key: &(Sender, String),
        cached: Option<i64>,
        delta: &RunChanges,
    ) -> Result<i64, StoreError> {
        let now = crate::now_ms();
        if let Some(id) = cached
            && self
                .store
                .add_live_delta(id, delta, &self.limits, now)
                .await?
        {
            return Ok(id);
        }
        // Twice at most: a run found open may close (idle, ended) before the delta lands.
        for _ in 0..2 {
            let (id, created) = self
                .store
                .open_live_run(
                    store_key,
                    &NewRun {
                        name: key.1.clone(),
                        scenario: Some(key.1.clone()),
                        tool: key.0.tool().to_string(),
                        source: Some(key.0.protocol().to_string()),
                        tags: Vec::new(),
                        imported_at_ms: now,
                    },
                    now,
                )
                .await?;
            if self
                .store
                .add_live_delta(id, delta, &self.limits, now)
                .await?
            {
                if created
                    && let Ok(Some(item)) = crate::views::runs::run_list_item(&self.store, id).await
                {
                    self.hub.publish(&Event::RunImported { run: item });
                }
                return Ok(id);
            }
        }
        Err(StoreError::Conflict(format!(
            "the live run of {:?} closed twice while points were added to it",
            key.1
        )))
    }

    /// Ends the live run `id` now, whichever process started it; `false` if it is not
    /// live.
    pub async fn end(&self, id: i64) -> bool {
        {
            let mut runs = self.runs.lock().await;
            for r in runs.values_mut().filter(|r| r.id == Some(id)) {
                r.ended = true;
            }
        }
        if let Err(e) = self.store_changes().await {
            tracing::warn!(run = id, error = %e, "storing a live run's last points failed");
        }
        self.runs.lock().await.retain(|_, r| r.id != Some(id));
        match self.store.end_live_run(id).await {
            Ok(true) => {
                self.closed(id).await;
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::warn!(run = id, error = %e, "ending a live run failed");
                false
            }
        }
    }

    /// Announces a run that was just closed.
    async fn closed(&self, id: i64) {
        if let Ok(Some(item)) = crate::views::runs::run_list_item(&self.store, id).await {
            tracing::info!(run = id, samples = item.count, "live run complete");
            self.hub.publish(&Event::RunUpdated { run: item });
        }
    }

    /// Announces runs stored since the last tick; ends the runs whose sender said so;
    /// forgets the streams this process has not heard from for the idle time-out; closes
    /// every stored live run idle for that long (whichever process started it). Called
    /// every second.
    pub async fn tick(&self) {
        if let Err(e) = self.store_changes().await {
            tracing::warn!(error = %e, "storing live runs failed; retried with the next write or tick");
        }
        let (announce, ended) = {
            let mut runs = self.runs.lock().await;
            let mut announce = Vec::new();
            for r in runs.values_mut() {
                if r.announce
                    && let Some(id) = r.id
                {
                    r.announce = false;
                    announce.push(id);
                }
            }
            let ended: Vec<i64> = runs
                .values()
                .filter(|r| r.ended && r.unstored.is_empty() && !r.dirty)
                .filter_map(|r| r.id)
                .collect();
            runs.retain(|_, r| {
                let done = (r.ended || r.last_point.elapsed() >= self.idle_timeout)
                    && r.unstored.is_empty()
                    && !r.dirty;
                !done
            });
            (announce, ended)
        };
        for id in announce {
            if let Ok(Some(item)) = crate::views::runs::run_list_item(&self.store, id).await {
                self.hub.publish(&Event::RunUpdated { run: item });
            }
        }
        for id in ended {
            match self.store.end_live_run(id).await {
                Ok(true) => self.closed(id).await,
                Ok(false) => {}
                Err(e) => tracing::warn!(run = id, error = %e, "ending a live run failed"),
            }
        }
        let before = crate::now_ms() - self.idle_timeout.as_millis() as i64;
        match self.store.close_idle_live_runs(before).await {
            Ok(ids) => {
                for id in ids {
                    self.closed(id).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "closing idle live runs failed"),
        }
    }

    /// Ticks every second until `shutdown`, then stores what it holds. Alone on a SQLite
    /// file it also closes its open runs (no other process will send to them); on a shared
    /// database they stay open for the other replicas, which close them once idle. Each
    /// minute it also marks load runs left live by a replica that died as complete (see
    /// [`abandoned_after_ms`]).
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
        if !self.store.shared() {
            let mut runs = self.runs.lock().await;
            for run in runs.values_mut() {
                run.ended = true;
            }
        }
        self.tick().await;
    }
}
