//! Load runs streamed into this server while they run: `harrier load run|find --server URL`
//! opens a run (`POST /api/v1/load-runs`), sends its workers' ticks about once a second
//! (`…/{id}/ticks`) and ends it (`…/{id}/end`, with the search's answer for `load find`).
//!
//! Owns the open streams. Each merges the ticks with the same [`LoadAccumulator`] the
//! generator's process uses, so the stored run — its exact statistics, per-second buckets,
//! the generator's own series (`reported.seconds`) and the summary — is exactly what
//! `harrier load run --db` would have stored. After each batch of ticks the changed buckets
//! are stored (status `live`) and the run is announced over the websocket, so its page
//! climbs while it runs; the end stores the last changes with the full summary (status
//! `complete`). A stream that sends nothing for [`IDLE_TIMEOUT`] is ended with what it
//! has (`reported.ended_by` says so). Streams live in the memory of the replica that
//! opened them: behind a load balancer a generator's requests must reach that one
//! replica (its `--server` is one replica's address, or the balancer is sticky).
//!
//! Must not parse HTTP: `http::api::load` hands over the decoded requests.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::domain::load::{LoadAccumulator, LoadSummary, RunPlan, SecondLine, Tick};
use crate::error::{Error, Result};
use crate::services::live::{Event, Hub};
use crate::store::{NewRun, Store};

/// A stream that sends nothing for this long is ended with what it has.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Most worker threads a stream may declare.
pub const MAX_WORKERS: usize = 1024;
/// Most samples one tick may carry (its groups' counts together): 10 M requests in one
/// worker-second is far beyond any one worker; more is a damaged or hostile request.
pub const MAX_TICK_SAMPLES: u64 = 10_000_000;
/// Latest second a tick may cover (a week).
pub const MAX_SECOND: u32 = 7 * 24 * 3600;

/// What a generator sends to open a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenLoadRun {
    pub name: String,
    /// Scenario [default: none].
    pub scenario: Option<String>,
    /// The loaded URL, shown as the run's source.
    pub source: String,
    #[serde(default)]
    pub tags: Vec<(String, String)>,
    pub plan: RunPlan,
}

/// What a generator sends to end a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EndLoadRun {
    /// The run's length, s, when it was not known in advance (a search): the summary's
    /// offered rate is scheduled / this.
    pub duration_s: Option<f64>,
    /// `harrier load find`'s answer, stored as `reported.search` (the run's `capacity`).
    pub search: Option<serde_json::Value>,
    /// Why the run stopped early (`--abort-on`, Ctrl-C), stored as `reported.ended_by`.
    pub ended_by: Option<String>,
}

/// The rate every agent of a searched run sends at, set by the server's search
/// (`GET /api/v1/load-runs/{id}/control` hands each change to the agents at once).
///
/// Times are ms from the run's common start (each agent's own zero); `rate_per_s` is the
/// whole run's: an agent of `agents` sends `rate_per_s / agents`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Control {
    /// Raised by one on each change (0: nothing set yet).
    pub version: u64,
    pub rate_per_s: f64,
    pub from_ms: u64,
    /// No arrival at or after this (`None`: until the next change).
    pub until_ms: Option<u64>,
    /// The search is over: finish what is in flight and end the part.
    pub stop: bool,
    /// When the server made the change, unix ms (the agents report how late it reached them).
    pub sent_at_unix_ms: i64,
}

/// What the agents of a searched run reported of the rate changes (`reported.control`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ControlDelays {
    /// Rate changes made, the final stop included (the last [`Control::version`]).
    pub changes: u64,
    /// Changes received while the agent waited for them, over all agents (each agent's
    /// first answer, the rate set before it was waiting, and the final stop are not).
    pub received: u64,
    /// From the change on the server to its arrival at an agent, ms: the slowest, and the
    /// mean.
    pub max_delay_ms: f64,
    pub mean_delay_ms: f64,
}

/// A searched run's control side: the rate channel, where merged seconds go, the delays.
struct Controlled {
    rate: watch::Sender<Control>,
    lines: mpsc::UnboundedSender<SecondLine>,
    delays: ControlDelays,
}

struct Stream {
    acc: LoadAccumulator,
    /// Set for a run whose rate this server's search drives (see [`Control`]).
    controlled: Option<Controlled>,
    workers: usize,
    last_seen: Instant,
    /// Generators (agents) still to end their part; the run ends with the last.
    parts_left: usize,
    /// What the parts that ended said (longest duration, first reason).
    ended: EndLoadRun,
    /// Asked to stop: the next answer to each generator's ticks says so.
    stop: bool,
}

/// What a batch of ticks did.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TicksTaken {
    /// Requests taken so far.
    pub samples: u64,
    /// The run was stopped (from the console): the generator stops its load.
    pub stop: bool,
}

/// One open stream (`None` once it has ended), locked while its ticks are merged.
type StreamCell = Arc<Mutex<Option<Stream>>>;

/// The open streams; cheap to clone.
#[derive(Clone)]
pub struct LoadRuns {
    streams: Arc<Mutex<HashMap<i64, StreamCell>>>,
    store: Store,
    hub: Hub,
}

impl LoadRuns {
    pub fn new(store: Store, hub: Hub) -> LoadRuns {
        LoadRuns {
            streams: Arc::default(),
            store,
            hub,
        }
    }

    /// Opens a run (stored at once, status `live`) and returns its id. Errors:
    /// `BadRequest` for a plan without workers or with more than [`MAX_WORKERS`].
    pub async fn open(&self, run: OpenLoadRun) -> Result<i64> {
        self.open_parts(run, 1).await
    }

    /// [`open`](Self::open) for a run whose load `parts` generators share (agents): their
    /// ticks carry worker numbers from one range (`plan.workers` in all), and the run ends
    /// when each has ended its part (or on the idle time-out).
    pub async fn open_parts(&self, run: OpenLoadRun, parts: usize) -> Result<i64> {
        self.open_with(run, parts, None).await
    }

    /// [`open_parts`](Self::open_parts) for a run whose rate this server drives (a search on
    /// agents): returns its id, the sender of rate changes the agents wait on
    /// ([`control`](Self::control)) and the run's seconds, merged over every agent, as
    /// they complete.
    pub async fn open_controlled(
        &self,
        run: OpenLoadRun,
        parts: usize,
    ) -> Result<(
        i64,
        watch::Sender<Control>,
        mpsc::UnboundedReceiver<SecondLine>,
    )> {
        let rate = watch::Sender::new(Control::default());
        let (lines, seconds) = mpsc::unbounded_channel();
        let controlled = Controlled {
            rate: rate.clone(),
            lines,
            delays: ControlDelays::default(),
        };
        let id = self.open_with(run, parts, Some(controlled)).await?;
        Ok((id, rate, seconds))
    }

    async fn open_with(
        &self,
        run: OpenLoadRun,
        parts: usize,
        controlled: Option<Controlled>,
    ) -> Result<i64> {
        if run.plan.workers == 0 || run.plan.workers > MAX_WORKERS {
            return Err(Error::BadRequest(format!(
                "plan.workers must be 1 to {MAX_WORKERS}, not {}",
                run.plan.workers
            )));
        }
        if run.name.trim().is_empty() {
            return Err(Error::BadRequest("name must not be empty".into()));
        }
        let id = self
            .store
            .create_live_run(&NewRun {
                name: run.name.clone(),
                scenario: run.scenario.clone(),
                tool: "harrier".into(),
                // Masked again here: a client of an older version may send it whole.
                source: Some(crate::domain::secrets::mask_url(&run.source)),
                tags: run.tags.clone(),
                imported_at_ms: crate::now_ms(),
            })
            .await?;
        let workers = run.plan.workers;
        let mut acc = LoadAccumulator::new(run.plan);
        acc.track_changes();
        self.streams.lock().await.insert(
            id,
            Arc::new(Mutex::new(Some(Stream {
                acc,
                controlled,
                workers,
                last_seen: Instant::now(),
                parts_left: parts.max(1),
                ended: EndLoadRun::default(),
                stop: false,
            }))),
        );
        if let Ok(Some(item)) = crate::views::runs::run_list_item(&self.store, id).await {
            self.hub.publish(&Event::RunImported { run: item });
        }
        metrics::gauge!("harrier_load_streams_open").increment(1.0);
        tracing::info!(run = id, "load run streaming in");
        Ok(id)
    }

    async fn stream(&self, id: i64) -> Result<StreamCell> {
        self.streams.lock().await.get(&id).cloned().ok_or_else(|| {
            Error::NotFound(format!(
                "load stream of run {id} (ended, idle for more than {} s, or opened on another replica)",
                IDLE_TIMEOUT.as_secs()
            ))
        })
    }

    /// Merges a batch of ticks, stores the changed buckets and announces the run.
    /// Errors: `NotFound` when the run is not open here; `BadRequest` for a tick of an
    /// unknown worker, a second beyond [`MAX_SECOND`] or more than [`MAX_TICK_SAMPLES`]
    /// samples — nothing of that batch is taken.
    pub async fn ticks(&self, id: i64, ticks: Vec<Tick>) -> Result<TicksTaken> {
        let cell = self.stream(id).await?;
        let mut guard = cell.lock().await;
        let Some(stream) = guard.as_mut() else {
            return Err(Error::NotFound(format!(
                "load stream of run {id} (it has ended)"
            )));
        };
        for (i, t) in ticks.iter().enumerate() {
            let samples: u64 = t.groups.iter().map(|(_, g)| g.count).sum();
            let why = if t.worker >= stream.workers {
                Some(format!(
                    "worker {} is not one of the plan's {} workers",
                    t.worker, stream.workers
                ))
            } else if t.second > MAX_SECOND {
                Some(format!("second {} is beyond {MAX_SECOND}", t.second))
            } else if samples > MAX_TICK_SAMPLES {
                Some(format!(
                    "{samples} samples in one tick (at most {MAX_TICK_SAMPLES})"
                ))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(Error::BadRequest(format!(
                    "tick {i} refused, nothing of this batch was taken: {why}"
                )));
            }
        }
        for t in ticks {
            let lines = stream.acc.push(t);
            if let Some(c) = &stream.controlled {
                for line in lines {
                    let _ = c.lines.send(line);
                }
            }
        }
        stream.last_seen = Instant::now();
        let changes = stream.acc.take_live_changes();
        self.store.store_live_changes(id, &changes, "live").await?;
        let taken = TicksTaken {
            samples: stream.acc.samples(),
            stop: stream.stop,
        };
        drop(guard);
        if let Ok(Some(item)) = crate::views::runs::run_list_item(&self.store, id).await {
            self.hub.publish(&Event::RunUpdated { run: item });
        }
        Ok(taken)
    }

    /// Asks the generators of run `id` to stop (they learn it from the answer to their
    /// next ticks, within about a second); `false` when the run is not streaming here.
    pub async fn request_stop(&self, id: i64) -> bool {
        let Ok(cell) = self.stream(id).await else {
            return false;
        };
        let mut guard = cell.lock().await;
        match guard.as_mut() {
            Some(s) => {
                s.stop = true;
                s.ended
                    .ended_by
                    .get_or_insert_with(|| "stopped from the console".into());
                true
            }
            None => false,
        }
    }

    /// The rate changes of run `id` (a search on agents). Errors: `NotFound` when the run is
    /// not streaming here or its rate is not driven by this server.
    pub async fn control(&self, id: i64) -> Result<watch::Receiver<Control>> {
        let cell = self.stream(id).await?;
        let guard = cell.lock().await;
        guard
            .as_ref()
            .and_then(|s| s.controlled.as_ref())
            .map(|c| c.rate.subscribe())
            .ok_or_else(|| Error::NotFound(format!("rate control of run {id} (not a search)")))
    }

    /// Records that an agent received a rate change `delay_ms` after it was made.
    pub async fn control_received(&self, id: i64, delay_ms: f64) {
        let Ok(cell) = self.stream(id).await else {
            return;
        };
        let mut guard = cell.lock().await;
        if let Some(c) = guard.as_mut().and_then(|s| s.controlled.as_mut()) {
            let d = &mut c.delays;
            let delay_ms = delay_ms.max(0.0);
            d.mean_delay_ms =
                (d.mean_delay_ms * d.received as f64 + delay_ms) / (d.received + 1) as f64;
            d.received += 1;
            d.max_delay_ms = d.max_delay_ms.max(delay_ms);
        }
    }

    /// Sets the answer of the search that drives run `id`'s rate, stored with the run when
    /// it ends (and its `ended_by`, when the search says why it stopped early).
    pub async fn set_search(&self, id: i64, search: serde_json::Value) {
        let Ok(cell) = self.stream(id).await else {
            return;
        };
        let mut guard = cell.lock().await;
        if let Some(s) = guard.as_mut() {
            if let Some(why) = search["ended_by"].as_str() {
                s.ended.ended_by.get_or_insert_with(|| why.to_string());
            }
            s.ended.search = Some(search);
        }
    }

    /// Whether run `id` is still streaming into this server.
    pub async fn is_open(&self, id: i64) -> bool {
        self.streams.lock().await.contains_key(&id)
    }

    /// Ends a run (or, for a run of several generators, one generator's part: `None`
    /// until the last part ends): the last changes and the summary stored, status
    /// `complete`. Errors: `NotFound` when the run is not open here.
    pub async fn end(&self, id: i64, end: EndLoadRun) -> Result<Option<LoadSummary>> {
        let cell = self.stream(id).await?;
        {
            let mut guard = cell.lock().await;
            let Some(stream) = guard.as_mut() else {
                return Err(Error::NotFound(format!(
                    "load stream of run {id} (it has ended)"
                )));
            };
            let e = &mut stream.ended;
            e.duration_s = match (e.duration_s, end.duration_s) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            if e.search.is_none() {
                e.search = end.search;
            }
            if e.ended_by.is_none() {
                e.ended_by = end.ended_by;
            }
            if stream.parts_left > 1 {
                stream.parts_left -= 1;
                stream.last_seen = Instant::now();
                return Ok(None);
            }
        }
        let summary = self.close(id, &cell, EndLoadRun::default()).await?;
        Ok(Some(summary))
    }

    async fn close(&self, id: i64, cell: &StreamCell, end: EndLoadRun) -> Result<LoadSummary> {
        let mut guard = cell.lock().await;
        let Some(mut stream) = guard.take() else {
            return Err(Error::NotFound(format!(
                "load stream of run {id} (it has ended)"
            )));
        };
        self.streams.lock().await.remove(&id);
        metrics::gauge!("harrier_load_streams_open").decrement(1.0);
        let ended = std::mem::take(&mut stream.ended);
        let duration_s = end.duration_s.or(ended.duration_s);
        if let Some(d) = duration_s.filter(|d| d.is_finite() && *d > 0.0) {
            stream.acc.set_duration_s(d);
        }
        let (_, mut changes, summary) = stream.acc.finish_live();
        if let Some(search) = end.search.or(ended.search) {
            changes.data.reported["search"] = search;
        }
        if let Some(why) = ended.ended_by.or(end.ended_by) {
            changes.data.reported["ended_by"] = why.into();
        }
        if let Some(c) = &stream.controlled {
            let delays = ControlDelays {
                changes: c.rate.borrow().version,
                ..c.delays.clone()
            };
            changes.data.reported["control"] = serde_json::to_value(&delays).unwrap_or_default();
        }
        let stored = self
            .store
            .store_live_changes(id, &changes, "complete")
            .await;
        drop(guard);
        stored?;
        if let Ok(Some(item)) = crate::views::runs::run_list_item(&self.store, id).await {
            self.hub.publish(&Event::RunUpdated { run: item });
        }
        tracing::info!(run = id, samples = summary.completed, "load run complete");
        Ok(summary)
    }

    /// Ends streams idle for [`IDLE_TIMEOUT`], every second until `shutdown`; then ends
    /// every open stream with what it has.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => self.end_idle(Some(IDLE_TIMEOUT), "the generator stopped sending").await,
            }
        }
        self.end_idle(None, "the server stopped").await;
    }

    async fn end_idle(&self, idle: Option<Duration>, why: &str) {
        let open: Vec<(i64, StreamCell)> = self
            .streams
            .lock()
            .await
            .iter()
            .map(|(id, c)| (*id, c.clone()))
            .collect();
        for (id, cell) in open {
            let quiet = match cell.try_lock() {
                Ok(g) => g
                    .as_ref()
                    .is_some_and(|s| idle.is_none_or(|t| s.last_seen.elapsed() >= t)),
                Err(_) => idle.is_none(),
            };
            if !quiet {
                continue;
            }
            let end = EndLoadRun {
                ended_by: Some(format!("{why}; the run keeps what arrived")),
                ..EndLoadRun::default()
            };
            match self.close(id, &cell, end).await {
                Ok(_) => tracing::warn!(run = id, "{why}: load run ended with what arrived"),
                Err(e) => tracing::warn!(run = id, error = %e, "ending an idle load run failed"),
            }
        }
    }
}
