//! `harrier load run` and `harrier load find`: drive the engine, merge its ticks, report
//! each second (and each search step) and store the run.
//!
//! Owns [`run_load`] (target check, the engine's start, the per-second lines handed to a
//! callback: the CLI prints them, `--abort-on`, and the run stored as it goes: tool
//! `harrier`, its per-second buckets and exact summary built by the run builder, the
//! generator's own figures as `reported`; see [`Keeper`]) and [`find_capacity`] (the saturation search:
//! one engine and one connection set for every step, its rate set by
//! [`crate::domain::load::Search`], a cool-down after each step until nothing is queued or
//! in flight; the answer stored as the run's `reported.search`, which the run's JSON shows
//! as `capacity`). Before either, one test connection ([`load::negotiate`]) learns the
//! protocol the run speaks (ALPN on `https://`) or why connecting fails; both go into the
//! summary and the stored run. Must not print, parse command lines or know HTTP requests.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::domain::load::{
    AbortRule, AbortWatch, LoadAccumulator, LoadSummary, RateProfile, RunPlan, Schedule, Search,
    SearchOutcome, SearchPlan, SecondLine, StepResult, Tick, Workload,
};
use crate::domain::runs::RunChanges;
use crate::error::{Error, Result};
use crate::services::load_runs::OpenLoadRun;
use crate::sources::load::{self, EngineSettings, LoadError, RateControl, RequestSpec, Segment};
use crate::store::{NewRun, Store};

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    pub spec: RequestSpec,
    pub settings: EngineSettings,
    /// Load a target that is neither loopback nor private.
    pub allow_public_target: bool,
    /// Dispatch delay p99 above which the run is generator-limited, µs (`--dispatch-limit`);
    /// `None`: judged against the service time
    /// ([`crate::domain::load::summary::lateness_limit_us`]).
    pub dispatch_limit_us: Option<u64>,
    /// Run name [default: label and schedule].
    pub name: Option<String>,
    /// Scenario [default: method and URL].
    pub scenario: Option<String>,
    pub tags: Vec<(String, String)>,
    /// Stop early when this holds (`--abort-on "errors>50% for 5s"`).
    pub abort_on: Option<AbortRule>,
    /// Where the run is also streamed while it runs (`--server`): first
    /// [`Tap::Open`] (once the protocol is known), then every worker's tick as it is
    /// merged, in order.
    pub tap: Option<tokio::sync::mpsc::UnboundedSender<Tap>>,
}

/// What a run streams out while it runs (see [`LoadRequest::tap`]).
#[derive(Debug)]
pub enum Tap {
    /// The run as a server opens it.
    Open(Box<OpenLoadRun>),
    Tick(Box<Tick>),
}

impl LoadRequest {
    fn tap_open(&self, plan: &RunPlan, name: String) {
        if let Some(tap) = &self.tap {
            let _ = tap.send(Tap::Open(Box::new(OpenLoadRun {
                name,
                scenario: Some(self.scenario_name()),
                source: self.spec.shown_url(),
                tags: self.tags.clone(),
                plan: plan.clone(),
            })));
        }
    }

    fn tap_tick(&self, tick: &Tick) {
        if let Some(tap) = &self.tap {
            let _ = tap.send(Tap::Tick(Box::new(tick.clone())));
        }
    }

    fn scenario_name(&self) -> String {
        self.scenario
            .clone()
            .unwrap_or_else(|| format!("{} {}", self.spec.method, self.spec.shown_url()))
    }
}

/// The stored run.
#[derive(Debug, Clone, Serialize)]
pub struct StoredLoadRun {
    pub id: i64,
    pub name: String,
    /// Console page of the run.
    pub url: String,
}

/// How a load run ended.
#[derive(Debug, Clone)]
pub struct LoadOutcome {
    pub summary: LoadSummary,
    /// `None` without a store, or when no request completed.
    pub run: Option<StoredLoadRun>,
    /// Why the run stopped early by `--abort-on`, or `None`.
    pub aborted: Option<String>,
}

impl From<LoadError> for Error {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Start(m) => Error::Internal(m),
            other => Error::BadRequest(other.to_string()),
        }
    }
}

/// Runs the load, calls `on_second` with each second as every worker has handed it over,
/// and stores the run in `store` (when given). `cancel` ends the schedule early; what was
/// measured is kept.
pub async fn run_load(
    store: Option<&Store>,
    mut req: LoadRequest,
    cancel: CancellationToken,
    mut on_second: impl FnMut(&SecondLine),
) -> Result<LoadOutcome> {
    req.spec = req.spec.with_default_tls()?;
    let spec = req.spec.clone();
    let allow = req.allow_public_target;
    let addr = tokio::task::spawn_blocking(move || load::resolve_target(&spec, allow))
        .await
        .map_err(|e| Error::Internal(format!("resolving the target stopped: {e}")))??;
    let negotiated = load::negotiate(addr, req.spec.tls.as_ref(), req.spec.version).await;
    let label = req.spec.label();
    let schedule = req.settings.workload.describe();
    let plan = RunPlan {
        label: label.clone(),
        schedule: schedule.clone(),
        open: req.settings.workload.is_open(),
        duration_s: req.settings.workload.duration_s(),
        max_connections: req.settings.max_connections,
        dispatch_limit_us: req
            .dispatch_limit_us
            .unwrap_or(crate::domain::load::DEFAULT_DISPATCH_LIMIT_US),
        dispatch_limit_relative: req.dispatch_limit_us.is_none(),
        workers: req.settings.threads.max(1),
        protocol: negotiated.protocol.describe().to_string(),
        connect_error: negotiated.error.clone(),
    };
    let name = req
        .name
        .clone()
        .unwrap_or_else(|| format!("{label} · {schedule}"));
    req.tap_open(&plan, name.clone());
    let mut acc = LoadAccumulator::new(plan);
    let mut keeper = Keeper::new(store, &req, &name, &mut acc);
    let engine_cancel = cancel.child_token();
    let mut running = load::start(
        req.spec.clone(),
        addr,
        negotiated.protocol,
        &req.settings,
        engine_cancel.clone(),
    )?;
    let mut watch = req.abort_on.clone().map(AbortWatch::new);
    let mut aborted = None;
    while let Some(tick) = running.ticks.recv().await {
        req.tap_tick(&tick);
        for line in acc.push(tick) {
            on_second(&line);
            if aborted.is_none()
                && let Some(why) = watch.as_mut().and_then(|w| w.observe(&line))
            {
                aborted = Some(why);
                engine_cancel.cancel();
            }
        }
        keeper.keep_changes(&mut acc);
    }
    if req.settings.control.is_some() {
        // Driven from outside (an agent's part of a search): as long as it went.
        acc.set_duration_s(running.t0.elapsed().as_secs_f64());
    }
    let (lines, changes, summary) = acc.finish_live();
    for line in &lines {
        on_second(line);
    }
    let run = keeper.finish(changes).await?;
    Ok(LoadOutcome {
        summary,
        run,
        aborted,
    })
}

/// How often a load's changed seconds are handed over (stored, or forgotten without a store).
const KEEP_EVERY: Duration = Duration::from_secs(1);

/// Where a load's figures go while it runs. About once a second the accumulator hands
/// over the buckets that changed ([`LoadAccumulator::take_live_changes`]) and forgets the
/// finished ones, so the generator's memory stays flat however many requests it sends:
/// with a store they go into the run (tool `harrier`, status `live` until the end, opened
/// with the first request that ended — a console on the same database shows it climb),
/// without one they are dropped (the summary keeps the whole run's figures). Storing every
/// hand-over and the last gives exactly the run one insert at the end would.
///
/// The writes run on their own task, in order, so a slow disk never holds up the loop that
/// judges each second; the first failure stops the writes and is returned at the end.
struct Keeper {
    writes: Option<mpsc::UnboundedSender<(RunChanges, &'static str)>>,
    task: Option<tokio::task::JoinHandle<Result<Option<i64>>>>,
    name: String,
    next: tokio::time::Instant,
}

impl Keeper {
    /// Sets `acc` to hand over its changes (before its first tick).
    fn new(
        store: Option<&Store>,
        req: &LoadRequest,
        name: &str,
        acc: &mut LoadAccumulator,
    ) -> Keeper {
        acc.track_changes();
        let (writes, task) = match store {
            Some(store) => {
                let run = NewRun {
                    name: name.to_string(),
                    scenario: Some(req.scenario_name()),
                    tool: "harrier".into(),
                    source: Some(req.spec.shown_url()),
                    tags: req.tags.clone(),
                    imported_at_ms: crate::now_ms(),
                };
                let (tx, rx) = mpsc::unbounded_channel();
                (
                    Some(tx),
                    Some(tokio::spawn(write_changes(store.clone(), run, rx))),
                )
            }
            None => (None, None),
        };
        Keeper {
            writes,
            task,
            name: name.to_string(),
            next: tokio::time::Instant::now() + KEEP_EVERY,
        }
    }

    /// Hands over `acc`'s changes when [`KEEP_EVERY`] has passed since the last time.
    fn keep_changes(&mut self, acc: &mut LoadAccumulator) {
        let now = tokio::time::Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + KEEP_EVERY;
        let changes = acc.take_live_changes();
        if let Some(w) = &self.writes {
            let _ = w.send((changes, "live"));
        }
    }

    /// Stores the last changes (with the summary's `reported`), status `complete`, and
    /// waits for every write; the stored run, or `None` without a store or when no request
    /// ended.
    async fn finish(mut self, changes: RunChanges) -> Result<Option<StoredLoadRun>> {
        let count = changes.data.overall.count;
        if let Some(w) = self.writes.take() {
            let _ = w.send((changes, "complete"));
        }
        let Some(task) = self.task.take() else {
            return Ok(None);
        };
        let id = task
            .await
            .map_err(|e| Error::Internal(format!("storing the run stopped: {e}")))??;
        let Some(id) = id else { return Ok(None) };
        metrics::counter!("harrier_runs_imported_total").increment(1);
        metrics::counter!("harrier_samples_imported_total").increment(count);
        Ok(Some(StoredLoadRun {
            id,
            name: self.name,
            url: format!("/console/runs/{id}"),
        }))
    }
}

/// [`Keeper`]'s writes: the run opened with the first changes that hold a request, then
/// each batch of changes stored in order; the run's id (`None`: no request ended).
async fn write_changes(
    store: Store,
    run: NewRun,
    mut writes: mpsc::UnboundedReceiver<(RunChanges, &'static str)>,
) -> Result<Option<i64>> {
    let mut id = None;
    while let Some((changes, status)) = writes.recv().await {
        let run_id = match id {
            Some(id) => id,
            None if changes.data.overall.count == 0 => continue,
            None => *id.insert(store.create_live_run(&run).await?),
        };
        store.store_live_changes(run_id, &changes, status).await?;
    }
    Ok(id)
}

/// What `harrier load find` is asked to do.
#[derive(Debug, Clone)]
pub struct FindRequest {
    /// The request, connections, threads, target check, naming and `--abort-on` (its
    /// workload is replaced by the search's rates).
    pub load: LoadRequest,
    pub plan: SearchPlan,
    /// The search stops here at the latest, s.
    pub max_duration_s: f64,
}

/// What the search reports while it runs.
#[derive(Debug)]
pub enum FindEvent<'a> {
    /// A second as every worker has handed it over.
    Second(&'a SecondLine),
    /// A step judged.
    Step(&'a StepResult),
    /// The search stops early: Ctrl-C, `--max-duration`, `--abort-on`.
    Stopping(&'a str),
}

/// How a search ended.
#[derive(Debug, Clone)]
pub struct FindOutcome {
    pub search: SearchOutcome,
    /// The whole run (every step and cool-down) as `load run` summarises it.
    pub summary: LoadSummary,
    pub run: Option<StoredLoadRun>,
}

/// How often the search looks whether a cool-down has drained and whether to stop.
const FIND_POLL: Duration = Duration::from_millis(20);

/// Longest the search waits for a step's connections to open before starting it anyway
/// (the engine goes on opening them in its ramp, and on demand).
const CONNECTIONS_WAIT: Duration = Duration::from_secs(2);

fn segment_of(rate_per_s: f64, from_second: u32, seconds: u32) -> Segment {
    Segment {
        rate_per_s,
        from_ns: u64::from(from_second) * 1_000_000_000,
        until_ns: u64::from(from_second + seconds) * 1_000_000_000,
        stop: false,
    }
}

/// Runs the saturation search (see [`crate::domain::load::search`]): one engine, its rate
/// set step by step; each step's seconds judged as they arrive; a step cut short after
/// its failing seconds; a cool-down after each until nothing is queued or in flight; the
/// next step from the next whole second. Ends when the search has its answer, at
/// `max_duration_s`, on `cancel` (Ctrl-C) or when `--abort-on` holds, keeping what was
/// measured. Stores the run (all steps, one run) with the answer in `reported.search`.
pub async fn find_capacity(
    store: Option<&Store>,
    mut req: FindRequest,
    cancel: CancellationToken,
    mut on_event: impl FnMut(FindEvent<'_>),
) -> Result<FindOutcome> {
    req.load.spec = req.load.spec.with_default_tls()?;
    let spec = req.load.spec.clone();
    let allow = req.load.allow_public_target;
    let addr = tokio::task::spawn_blocking(move || load::resolve_target(&spec, allow))
        .await
        .map_err(|e| Error::Internal(format!("resolving the target stopped: {e}")))??;
    let negotiated = load::negotiate(addr, req.load.spec.tls.as_ref(), req.load.spec.version).await;
    let label = req.load.spec.label();
    let describe = format!(
        "saturation search from {}, tolerance {} %",
        crate::domain::load::search::rate_text(req.plan.start_rate),
        req.plan.tolerance * 100.0
    );
    let threads = req.load.settings.threads.max(1);
    let mut search = Search::new(req.plan.clone());
    let first = search
        .next_step(0)
        .ok_or_else(|| Error::Internal("the search has no first step".into()))?;
    let control: Arc<RateControl> =
        RateControl::new(threads, segment_of(first.rate_per_s, 0, first.seconds));
    control.hold_connections(first.connections);
    let mut step_end = first.seconds;
    let mut settings = req.load.settings.clone();
    settings.threads = threads;
    settings.workload = Workload::Open(Schedule {
        profile: RateProfile::Constant { rate_per_s: 0.0 },
        duration_s: req.max_duration_s,
        poisson: false,
        seed: 1,
    });
    settings.control = Some(control.clone());
    let plan = RunPlan {
        label: label.clone(),
        schedule: describe.clone(),
        open: true,
        duration_s: req.max_duration_s,
        max_connections: settings.max_connections,
        dispatch_limit_us: req
            .load
            .dispatch_limit_us
            .unwrap_or(crate::domain::load::DEFAULT_DISPATCH_LIMIT_US),
        dispatch_limit_relative: req.load.dispatch_limit_us.is_none(),
        workers: threads,
        protocol: negotiated.protocol.describe().to_string(),
        connect_error: negotiated.error.clone(),
    };
    let name = req
        .load
        .name
        .clone()
        .unwrap_or_else(|| format!("{label} · saturation search"));
    req.load.tap_open(&plan, name.clone());
    let mut acc = LoadAccumulator::new(plan);
    let mut keeper = Keeper::new(store, &req.load, &name, &mut acc);
    let engine_cancel = cancel.child_token();
    let mut running = load::start(
        req.load.spec.clone(),
        addr,
        negotiated.protocol,
        &settings,
        engine_cancel.clone(),
    )?;
    let t0 = running.t0;
    let mut watch = req.load.abort_on.clone().map(AbortWatch::new);
    let mut poll = tokio::time::interval(FIND_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut draining = false;
    // The next step, waiting for its connections to open (until the instant given).
    let mut opening: Option<(crate::domain::load::StepPlan, tokio::time::Instant)> = None;
    let mut stopped = false;
    let stop_segment = Segment {
        rate_per_s: 0.0,
        from_ns: 0,
        until_ns: 0,
        stop: true,
    };
    loop {
        let mut stop_why: Option<String> = None;
        tokio::select! {
            tick = running.ticks.recv() => {
                let Some(tick) = tick else { break };
                req.load.tap_tick(&tick);
                for line in acc.push(tick) {
                    on_event(FindEvent::Second(&line));
                    if stopped || stop_why.is_some() {
                        continue;
                    }
                    if let Some(why) = watch.as_mut().and_then(|w| w.observe(&line)) {
                        stop_why = Some(why);
                        continue;
                    }
                    if search.in_step() && opening.is_none() && search.on_second(&line) {
                        let cut_short = line.second + 1 < step_end;
                        if let Some(r) = search.finish_step() {
                            on_event(FindEvent::Step(r));
                        }
                        if cut_short {
                            let now_ns = t0.elapsed().as_nanos() as u64;
                            control.set(Segment { rate_per_s: 0.0, from_ns: now_ns, until_ns: u64::MAX, stop: false });
                        }
                        draining = true;
                    }
                }
                keeper.keep_changes(&mut acc);
            }
            _ = poll.tick(), if !stopped => {
                let now_s = t0.elapsed().as_secs_f64();
                if cancel.is_cancelled() {
                    stop_why = Some("stopped (Ctrl-C)".into());
                } else if now_s >= req.max_duration_s {
                    stop_why = Some(format!("--max-duration {} s reached", req.max_duration_s));
                } else if let Some((step, until)) = opening {
                    // Connections first, then the step from the next whole second.
                    if control.connections_to_open() == 0 || tokio::time::Instant::now() >= until {
                        let from_second = now_s.floor() as u32 + 1;
                        search.start_step_at(from_second);
                        control.set(segment_of(step.rate_per_s, from_second, step.seconds));
                        step_end = from_second + step.seconds;
                        opening = None;
                    }
                } else if draining && control.outstanding() == 0 {
                    let from_second = now_s.floor() as u32 + 1;
                    match search.next_step(from_second) {
                        Some(step) => {
                            control.hold_connections(step.connections);
                            opening = Some((step, tokio::time::Instant::now() + CONNECTIONS_WAIT));
                            draining = false;
                        }
                        None => {
                            control.set(stop_segment);
                            stopped = true;
                        }
                    }
                }
            }
        }
        if let Some(why) = stop_why
            && !stopped
        {
            on_event(FindEvent::Stopping(&why));
            search.stop(&why);
            if let Some(r) = search.steps().last()
                && r.verdict == crate::domain::load::Verdict::Stopped
            {
                on_event(FindEvent::Step(r));
            }
            control.set(stop_segment);
            engine_cancel.cancel();
            stopped = true;
        }
    }
    acc.set_duration_s(t0.elapsed().as_secs_f64());
    let (lines, mut changes, mut summary) = acc.finish_live();
    for line in &lines {
        on_event(FindEvent::Second(line));
    }
    let outcome = search.outcome();
    // The search judged its generator step by step, each step's lateness against that
    // step's service; the whole run's dispatch delay mixes every rate, the failing steps'
    // overload included. Generator-limited is what the search ended on, if anything.
    summary.generator_limited = outcome
        .steps
        .last()
        .filter(|s| s.verdict == crate::domain::load::Verdict::GeneratorLimited)
        .map(|s| {
            format!(
                "the search's last step ({} {}): {}",
                s.phase.name(),
                crate::domain::load::search::rate_text(s.offered_rps),
                s.reason
            )
        })
        .into_iter()
        .collect();
    changes.data.reported["generator"] = summary.reported()["generator"].clone();
    changes.data.reported["search"] = serde_json::to_value(&outcome).unwrap_or_default();
    let run = keeper.finish(changes).await?;
    Ok(FindOutcome {
        search: outcome,
        summary,
        run,
    })
}
