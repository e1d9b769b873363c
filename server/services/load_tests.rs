//! Load tests started from the console (Runs → New load test; `POST /api/v1/load-tests`):
//! the server itself runs `harrier load run` or `harrier load find` and streams the run into
//! its own [`LoadRuns`], so the run's page is the same live view a `--server` run gets.
//!
//! Owns the form's shape ([`NewLoadTest`]), its translation into the generator's flags (the
//! same flags, parsed by the same code, as on the command line — the page shows the
//! equivalent command), the limits of `[load]` ([`LoadTestPolicy`]: off unless enabled, at
//! most `max_rate` and `max_duration`, loopback and private targets unless
//! `allow_public_targets`), one test at a time per server, and stopping it. Never reads a
//! file the form names: the body is the form's text, and the flags that read files are not
//! offered.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::config::{LoadFindArgs, LoadRunArgs, LoadTestPolicy};
use crate::domain::load::{RunPlan, Search, SearchPlan, SecondLine, Tick};
use crate::error::{Error, Result};
use crate::services::load::{FindRequest, LoadRequest, Tap, find_capacity, run_load};
use crate::services::load_agents::{Assignment, LoadAgents};
use crate::services::load_args::{find_request_of, request_of};
use crate::services::load_runs::{Control, EndLoadRun, LoadRuns, OpenLoadRun};
use crate::sources::load::{RateControl, Segment};

/// What the console's form sends. Texts are as the command line takes them (`500`,
/// `100..2000`, `2m`, `p99<200ms,errors<1%`); absent fields take the command's defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NewLoadTest {
    pub url: String,
    /// `run` (a schedule) or `find` (the saturation search).
    pub mode: String,
    pub method: String,
    /// `Name: value`, one per entry.
    pub headers: Vec<String>,
    /// The request body (the same for every request).
    pub body: String,
    /// run: `500`, or a ramp `100..2000` with `over`.
    pub rate: String,
    pub over: String,
    /// run: `100,200,400` with `step_duration`.
    pub steps: String,
    pub step_duration: String,
    /// run: how long requests are scheduled.
    pub duration: String,
    /// find: `p99<200ms,errors<1%` (empty: the capacity rule of imported runs).
    pub slo: String,
    pub start_rate: String,
    pub max_rate: String,
    /// find: the search stops here at the latest.
    pub max_duration: String,
    /// find: the bisection's tolerance (`5%`), how long the last passing rate is held to
    /// confirm it, and after how many failing seconds a step ends early.
    pub tolerance: String,
    pub confirm_duration: String,
    pub fail_after: String,
    /// Dispatch delay p99 above which the generator calls itself limited (`2ms`; empty:
    /// judged against the service time).
    pub dispatch_limit: String,
    pub max_connections: Option<u32>,
    pub timeout: String,
    pub expect_status: String,
    pub expect_body_contains: String,
    pub name: String,
    pub scenario: String,
    /// 0: this server sends the requests; N: N waiting `harrier load agent` processes
    /// share the schedule (each offers 1/N of every rate).
    pub agents: u32,
}

#[derive(Parser)]
#[command(name = "harrier load run", no_binary_name = true)]
struct RunFlags {
    #[command(flatten)]
    args: LoadRunArgs,
}

#[derive(Parser)]
#[command(name = "harrier load find", no_binary_name = true)]
struct FindFlags {
    #[command(flatten)]
    args: LoadFindArgs,
}

impl NewLoadTest {
    /// The test as the flags of `harrier load run|find` (after the URL), in order.
    pub fn flags(&self) -> Vec<String> {
        let mut out = vec![self.url.trim().to_string()];
        let mut flag = |name: &str, value: &str| {
            let v = value.trim();
            if !v.is_empty() {
                out.push(format!("--{name}"));
                out.push(v.to_string());
            }
        };
        if !self.method.trim().eq_ignore_ascii_case("GET") {
            flag("method", &self.method);
        }
        for h in &self.headers {
            flag("header", h);
        }
        if self.mode == "find" {
            flag("slo", &self.slo);
            flag("start-rate", &self.start_rate);
            flag("max-rate", &self.max_rate);
            flag("max-duration", &self.max_duration);
            flag("tolerance", &self.tolerance);
            flag("step-duration", &self.step_duration);
            flag("confirm-duration", &self.confirm_duration);
            flag("fail-after", &self.fail_after);
        } else {
            flag("rate", &self.rate);
            flag("over", &self.over);
            flag("steps", &self.steps);
            flag("step-duration", &self.step_duration);
            flag("duration", &self.duration);
        }
        if let Some(n) = self.max_connections {
            flag("max-connections", &n.to_string());
        }
        flag("timeout", &self.timeout);
        flag("dispatch-limit", &self.dispatch_limit);
        flag("expect-status", &self.expect_status);
        flag("expect-body-contains", &self.expect_body_contains);
        flag("name", &self.name);
        flag("scenario", &self.scenario);
        out
    }

    /// The test with the server's limits as the search's defaults: an empty max rate or max
    /// duration of `find` becomes `policy`'s (the command's own defaults may lie beyond it).
    pub fn within(mut self, policy: &LoadTestPolicy) -> NewLoadTest {
        if self.mode == "find" {
            if self.max_rate.trim().is_empty() {
                self.max_rate = format!("{}", policy.max_rate);
            }
            if self.max_duration.trim().is_empty() {
                self.max_duration = format!("{}s", policy.max_duration_s.round());
            }
        }
        self
    }

    /// The equivalent command line, for people (`--body-file` stands for the form's body).
    /// It is logged and shown: the URL's credentials and secret query values and the
    /// values of secret headers (`Authorization`, `X-Api-Key`, `Cookie`, …) are masked.
    pub fn command(&self) -> String {
        use crate::domain::secrets::{mask_header_line, mask_url};
        let mode = if self.mode == "find" { "find" } else { "run" };
        let mut words = vec!["harrier".to_string(), "load".into(), mode.into()];
        let flags = self.flags();
        let shown = flags.iter().enumerate().map(|(i, w)| match i {
            0 => mask_url(w),
            _ if flags[i - 1] == "--header" => mask_header_line(w),
            _ => w.clone(),
        });
        words.extend(shown.map(|w| shell_quote(&w)));
        if !self.body.is_empty() {
            words.push("--body-file".into());
            words.push("BODY".into());
        }
        words.join(" ")
    }
}

/// `word` quoted for a POSIX shell when it needs it.
fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A console load test, ready to start.
enum Prepared {
    Run(LoadRequest),
    Find(FindRequest),
}

/// clap's message without its usage block: "invalid value 'x' for '--rate <RATE>': …".
fn clap_message(e: clap::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("the flags are not valid");
    first.trim_start_matches("error: ").to_string()
}

fn bad(m: impl Into<String>) -> Error {
    Error::BadRequest(m.into())
}

/// The form as a request within `policy`'s limits. Errors name the field's flag and what
/// it expects.
fn prepare(t: &NewLoadTest, policy: &LoadTestPolicy) -> Result<Prepared> {
    if t.url.trim().is_empty() {
        return Err(Error::Field {
            field: "url".into(),
            message: "the URL to load is missing (http:// or https://)".into(),
        });
    }
    let body = hyper::body::Bytes::from(t.body.clone().into_bytes());
    match t.mode.as_str() {
        "find" => {
            let flags = FindFlags::try_parse_from(t.flags()).map_err(|e| bad(clap_message(e)))?;
            let mut req = find_request_of(&flags.args).map_err(|e| bad(format!("{e:#}")))?;
            if req.plan.max_rate > policy.max_rate {
                return Err(bad(format!(
                    "max rate {} req/s is above this server's limit of {} req/s ([load] max_rate)",
                    req.plan.max_rate, policy.max_rate
                )));
            }
            if req.max_duration_s > policy.max_duration_s {
                return Err(bad(format!(
                    "max duration {} s is above this server's limit of {} s ([load] max_duration)",
                    req.max_duration_s, policy.max_duration_s
                )));
            }
            req.load.spec.body = body;
            req.load.allow_public_target = policy.allow_public_targets;
            Ok(Prepared::Find(req))
        }
        "run" | "" => {
            let flags = RunFlags::try_parse_from(t.flags()).map_err(|e| bad(clap_message(e)))?;
            let mut req = request_of(&flags.args).map_err(|e| bad(format!("{e:#}")))?;
            let duration_s = req.settings.workload.duration_s();
            if duration_s > policy.max_duration_s {
                return Err(bad(format!(
                    "the schedule lasts {duration_s} s, above this server's limit of {} s ([load] max_duration)",
                    policy.max_duration_s
                )));
            }
            let peak = req.settings.workload.peak_rate().unwrap_or(f64::INFINITY);
            if peak > policy.max_rate {
                return Err(bad(format!(
                    "the schedule reaches {peak} req/s, above this server's limit of {} req/s ([load] max_rate)",
                    policy.max_rate
                )));
            }
            req.spec.body = body;
            req.allow_public_target = policy.allow_public_targets;
            Ok(Prepared::Run(req))
        }
        other => Err(Error::Field {
            field: "mode".into(),
            message: format!(
                "mode {other:?}: expected run (a schedule) or find (a saturation search)"
            ),
        }),
    }
}

/// The test under way.
#[derive(Debug, Clone, Serialize)]
pub struct RunningTest {
    /// Its run.
    pub id: i64,
    pub url: String,
    pub command: String,
    pub started_by: String,
    pub started_at_ms: i64,
    #[serde(skip)]
    cancel: CancellationToken,
}

/// The console's load tests; cheap to clone.
#[derive(Clone)]
pub struct LoadTests {
    policy: LoadTestPolicy,
    load_runs: LoadRuns,
    agents: LoadAgents,
    running: Arc<Mutex<Option<RunningTest>>>,
}

/// An agent's part of a console load test as the request it sends: the test's flags
/// parsed as `harrier load run` parses them, every rate divided among the agents.
/// Errors: `BadRequest` naming the flag (a server of another version, or a closed model).
pub fn part_request(a: &Assignment) -> Result<LoadRequest> {
    if a.search {
        // The rates come from the server's search (`control`); the schedule is only the
        // longest the part may last.
        let flags = FindFlags::try_parse_from(&a.flags).map_err(|e| bad(clap_message(e)))?;
        let mut req = find_request_of(&flags.args)
            .map_err(|e| bad(format!("{e:#}")))?
            .load;
        let threads = a.threads.max(1);
        req.settings.threads = threads;
        req.settings.control = Some(RateControl::new(
            threads,
            segment_of(&Control::default(), 1),
        ));
        req.spec.body = hyper::body::Bytes::from(a.body.clone().into_bytes());
        req.allow_public_target = a.allow_public_target;
        return Ok(req);
    }
    let flags = RunFlags::try_parse_from(&a.flags).map_err(|e| bad(clap_message(e)))?;
    let mut req = request_of(&flags.args).map_err(|e| bad(format!("{e:#}")))?;
    req.settings.workload = req
        .settings
        .workload
        .part(a.index, a.agents)
        .ok_or_else(|| bad("agents share open-model schedules only"))?;
    req.settings.threads = a.threads.max(1);
    req.spec.body = hyper::body::Bytes::from(a.body.clone().into_bytes());
    req.allow_public_target = a.allow_public_target;
    Ok(req)
}

/// An agent's segment of a [`Control`]: its share (1/`agents`) of the rate, in ns from the
/// run's start.
pub fn segment_of(c: &Control, agents: u32) -> Segment {
    Segment {
        rate_per_s: c.rate_per_s / f64::from(agents.max(1)),
        from_ns: c.from_ms.saturating_mul(1_000_000),
        until_ns: c.until_ms.map_or(u64::MAX, |u| u.saturating_mul(1_000_000)),
        stop: c.stop,
    }
}

/// How often the ticks of a console test are merged and stored (as `--server` sends them).
const STORE_EVERY: Duration = Duration::from_secs(1);

impl LoadTests {
    pub fn new(policy: LoadTestPolicy, load_runs: LoadRuns, agents: LoadAgents) -> LoadTests {
        LoadTests {
            policy,
            load_runs,
            agents,
            running: Arc::default(),
        }
    }

    /// `[load]` as resolved.
    pub fn policy(&self) -> &LoadTestPolicy {
        &self.policy
    }

    /// The test under way, if any.
    pub async fn running(&self) -> Option<RunningTest> {
        self.running.lock().await.clone()
    }

    /// Starts a test; returns it once its run exists (status `live`). Errors: `BadRequest`
    /// when `[load]` is off, the form is wrong or beyond the limits, or the target is not
    /// allowed; `Conflict` while another test runs.
    pub async fn start(&self, test: NewLoadTest, started_by: String) -> Result<RunningTest> {
        if !self.policy.enabled {
            return Err(bad(
                "load tests from the console are off on this server: an admin turns them on with `[load] enabled = true` in harrier.toml",
            ));
        }
        let test = test.within(&self.policy);
        let prepared = prepare(&test, &self.policy)?;
        let mut slot = self.running.lock().await;
        if let Some(r) = slot.as_ref() {
            return Err(Error::Conflict {
                field: None,
                message: format!(
                    "a load test is already running (run {}, started by {}): stop it or wait for it to end",
                    r.id, r.started_by
                ),
            });
        }
        if test.agents > 0 {
            let cancel = CancellationToken::new();
            let id = match prepared {
                Prepared::Run(req) => self.start_on_agents(&test, &req, None).await?,
                Prepared::Find(find) => {
                    self.start_on_agents(&test, &find.load, Some((&find, cancel.clone())))
                        .await?
                }
            };
            let running = RunningTest {
                id,
                url: format!("/console/runs/{id}"),
                command: test.command(),
                started_by,
                started_at_ms: crate::now_ms(),
                cancel,
            };
            *slot = Some(running.clone());
            // The slot frees itself when the last agent has ended its part.
            let (load_runs, slot_of) = (self.load_runs.clone(), self.running.clone());
            tokio::spawn(async move {
                while load_runs.is_open(id).await {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                let mut slot = slot_of.lock().await;
                if slot.as_ref().is_some_and(|r| r.id == id) {
                    *slot = None;
                }
            });
            tracing::info!(run = id, agents = test.agents, by = %running.started_by, "console load test started on agents");
            return Ok(running);
        }
        let cancel = CancellationToken::new();
        let (tap, taps) = mpsc::unbounded_channel();
        let (opened_tx, opened_rx) = oneshot::channel();
        let forward = tokio::spawn(forward(self.load_runs.clone(), taps, opened_tx));
        let (done_tx, done_rx) = oneshot::channel::<String>();
        let load_runs = self.load_runs.clone();
        let running = self.running.clone();
        let run_cancel = cancel.clone();
        tokio::spawn(async move {
            let ended = match prepared {
                Prepared::Run(mut req) => {
                    req.tap = Some(tap);
                    run_load(None, req, run_cancel.clone(), |_| {})
                        .await
                        .map(|o| EndLoadRun {
                            duration_s: Some(o.summary.duration_s),
                            search: None,
                            ended_by: o.aborted.or_else(|| {
                                run_cancel
                                    .is_cancelled()
                                    .then(|| "stopped from the console".to_string())
                            }),
                        })
                }
                Prepared::Find(mut req) => {
                    req.load.tap = Some(tap);
                    find_capacity(None, req, run_cancel.clone(), |_| {})
                        .await
                        .map(|o| EndLoadRun {
                            duration_s: Some(o.summary.duration_s),
                            search: serde_json::to_value(&o.search).ok(),
                            ended_by: o.search.ended_by.clone(),
                        })
                }
            };
            let id = forward.await.ok().flatten();
            match (ended, id) {
                (Ok(end), Some(id)) => {
                    if let Err(e) = load_runs.end(id, end).await {
                        tracing::warn!(run = id, error = %e, "ending a console load test failed");
                    }
                }
                (Err(e), Some(id)) => {
                    let end = EndLoadRun {
                        ended_by: Some(format!("the load test failed: {e}")),
                        ..EndLoadRun::default()
                    };
                    let _ = load_runs.end(id, end).await;
                }
                (Err(e), None) => {
                    let _ = done_tx.send(e.to_string());
                }
                (Ok(_), None) => {
                    let _ = done_tx.send("the load test ended before its run was opened".into());
                }
            }
            *running.lock().await = None;
        });
        let id = match opened_rx.await {
            Ok(id) => id,
            Err(_) => {
                drop(slot);
                let why = done_rx
                    .await
                    .unwrap_or_else(|_| "the load test did not start".into());
                // The command line's advice, in the console's terms.
                let why = why.replace(
                    "pass --allow-public-target if you mean to load it",
                    "an admin allows such targets with `[load] allow_public_targets = true` in harrier.toml",
                );
                return Err(bad(why));
            }
        };
        let test = RunningTest {
            id,
            url: format!("/console/runs/{id}"),
            command: test.command(),
            started_by,
            started_at_ms: crate::now_ms(),
            cancel,
        };
        *slot = Some(test.clone());
        tracing::info!(run = id, by = %test.started_by, command = %test.command, "console load test started");
        Ok(test)
    }

    /// Opens the run of a test shared by `test.agents` waiting agents and gives each its
    /// part; returns the run's id. With `search`, this server runs the saturation search
    /// and sets every agent's rate step by step (see [`drive_search`]); `cancel` stops it.
    /// Errors: `BadRequest` when fewer agents wait or the target is not allowed.
    async fn start_on_agents(
        &self,
        test: &NewLoadTest,
        req: &LoadRequest,
        search: Option<(&FindRequest, CancellationToken)>,
    ) -> Result<i64> {
        let n = test.agents as usize;
        let waiting = self.agents.list().await.len();
        if waiting < n {
            return Err(Error::Field {
                field: "agents".into(),
                message: format!(
                    "{n} agents asked for, {waiting} waiting: start `harrier load agent --server URL` on {} more machine(s)",
                    n - waiting
                ),
            });
        }
        let spec = req.spec.clone();
        let allow = req.allow_public_target;
        tokio::task::spawn_blocking(move || crate::sources::load::resolve_target(&spec, allow))
            .await
            .map_err(|e| Error::Internal(format!("resolving the target stopped: {e}")))?
            .map_err(|e| {
                bad(e.to_string().replace(
                    "pass --allow-public-target if you mean to load it",
                    "an admin allows such targets with `[load] allow_public_targets = true` in harrier.toml",
                ))
            })?;
        let threads = req.settings.threads.max(1);
        let label = req.spec.label();
        let schedule = match &search {
            Some((find, _)) => format!(
                "saturation search from {}, tolerance {} % · split among {n} agents",
                crate::domain::load::search::rate_text(find.plan.start_rate),
                find.plan.tolerance * 100.0
            ),
            None => format!(
                "{} · split among {n} agents",
                req.settings.workload.describe()
            ),
        };
        let plan = RunPlan {
            label: label.clone(),
            schedule: schedule.clone(),
            open: req.settings.workload.is_open(),
            duration_s: req.settings.workload.duration_s(),
            max_connections: req.settings.max_connections.saturating_mul(n as u32),
            dispatch_limit_us: req
                .dispatch_limit_us
                .unwrap_or(crate::domain::load::DEFAULT_DISPATCH_LIMIT_US),
            dispatch_limit_relative: req.dispatch_limit_us.is_none(),
            workers: n * threads,
            protocol: "negotiated by each agent".into(),
            connect_error: None,
        };
        let open = OpenLoadRun {
            name: req
                .name
                .clone()
                .unwrap_or_else(|| format!("{label} · {schedule}")),
            scenario: Some(
                req.scenario
                    .clone()
                    .unwrap_or_else(|| format!("{} {}", req.spec.method, req.spec.shown_url())),
            ),
            source: req.spec.shown_url(),
            tags: req.tags.clone(),
            plan,
        };
        let start_at_ms = crate::now_ms() + 1_500;
        let id = match &search {
            Some((find, cancel)) => {
                let (id, rate, seconds) = self.load_runs.open_controlled(open, n).await?;
                tokio::spawn(drive_search(
                    self.load_runs.clone(),
                    id,
                    rate,
                    seconds,
                    find.plan.clone(),
                    find.max_duration_s,
                    start_at_ms,
                    cancel.clone(),
                ));
                id
            }
            None => self.load_runs.open_parts(open, n).await?,
        };
        let flags = test.flags();
        let given = self
            .agents
            .give(n, |index| Assignment {
                run_id: id,
                index,
                agents: n as u32,
                flags: flags.clone(),
                body: test.body.clone(),
                threads,
                worker_offset: index as usize * threads,
                allow_public_target: self.policy.allow_public_targets,
                start_at_ms,
                search: search.is_some(),
            })
            .await;
        match given {
            Ok(names) => {
                tracing::info!(run = id, agents = ?names, "load test parts given");
                Ok(id)
            }
            Err(waiting) => {
                if let Some((_, cancel)) = &search {
                    cancel.cancel();
                }
                self.load_runs.request_stop(id).await;
                for _ in 0..n {
                    let _ = self
                        .load_runs
                        .end(
                            id,
                            EndLoadRun {
                                ended_by: Some("the agents left before it started".into()),
                                ..EndLoadRun::default()
                            },
                        )
                        .await;
                }
                Err(bad(format!(
                    "{n} agents asked for, {waiting} still waiting: an agent left as the test started; try again"
                )))
            }
        }
    }

    /// Stops the running test of run `id` (what was measured is kept; agents stop at their
    /// next hand-over, within about a second). `false` when no test of that run is running.
    pub async fn stop(&self, id: i64) -> bool {
        let running = match self.running.lock().await.as_ref() {
            Some(r) if r.id == id => {
                r.cancel.cancel();
                true
            }
            _ => false,
        };
        if running {
            self.load_runs.request_stop(id).await;
        }
        running
    }
}

/// Opens the run in `load_runs` when the load says how (sending its id on `opened`), then
/// merges its ticks about once a second until the load ends; returns the run's id.
async fn forward(
    load_runs: LoadRuns,
    mut taps: mpsc::UnboundedReceiver<Tap>,
    opened: oneshot::Sender<i64>,
) -> Option<i64> {
    let open = match taps.recv().await {
        Some(Tap::Open(open)) => open,
        _ => return None,
    };
    let id = match load_runs.open(*open).await {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(error = %e, "opening a console load test's run failed");
            return None;
        }
    };
    let _ = opened.send(id);
    let mut pending: Vec<Tick> = Vec::new();
    let mut next = tokio::time::Instant::now() + STORE_EVERY;
    loop {
        tokio::select! {
            msg = taps.recv() => match msg {
                Some(Tap::Tick(t)) => { pending.push(*t); continue; }
                Some(Tap::Open(_)) => continue,
                None => break,
            },
            _ = tokio::time::sleep_until(next) => {}
        }
        next = tokio::time::Instant::now() + STORE_EVERY;
        if !pending.is_empty()
            && let Err(e) = load_runs.ticks(id, std::mem::take(&mut pending)).await
        {
            tracing::warn!(run = id, error = %e, "storing a console load test's seconds failed");
        }
    }
    if !pending.is_empty()
        && let Err(e) = load_runs.ticks(id, pending).await
    {
        tracing::warn!(run = id, error = %e, "storing a console load test's last seconds failed");
    }
    Some(id)
}

/// How often the search on agents looks whether a cool-down has drained, the time is up
/// or it was stopped.
const SEARCH_POLL: Duration = Duration::from_millis(50);

/// The saturation search of a test shared by agents, on this server: the same [`Search`]
/// `harrier load find` runs, judging the run's seconds merged over every agent as they
/// arrive, its rate changes sent to the agents at once through `rate` (each takes its
/// share). A step is cut short after its failing seconds; the next starts from the next
/// whole second once a merged second has had nothing in flight (the agents' queues have
/// drained). Ends with the answer (stored with the run as `reported.search`), at
/// `max_duration_s`, or on `cancel`; then tells the agents to stop.
#[allow(clippy::too_many_arguments)]
async fn drive_search(
    load_runs: LoadRuns,
    id: i64,
    rate: watch::Sender<Control>,
    mut seconds: mpsc::UnboundedReceiver<SecondLine>,
    plan: SearchPlan,
    max_duration_s: f64,
    start_at_ms: i64,
    cancel: CancellationToken,
) {
    let elapsed_ms = || (crate::now_ms() - start_at_ms).max(0) as u64;
    let set = |c: Control| {
        let version = rate.borrow().version + 1;
        rate.send_replace(Control {
            version,
            sent_at_unix_ms: crate::now_ms(),
            ..c
        });
    };
    let mut search = Search::new(plan);
    let Some(first) = search.next_step(0) else {
        set(Control {
            stop: true,
            ..Control::default()
        });
        return;
    };
    set(Control {
        rate_per_s: first.rate_per_s,
        from_ms: 0,
        until_ms: Some(u64::from(first.seconds) * 1000),
        ..Control::default()
    });
    let mut step_end = first.seconds;
    // Seconds from which a merged second with nothing in flight means drained.
    let mut drain_from: Option<u32> = None;
    let mut drained = false;
    let mut stopped = false;
    let mut poll = tokio::time::interval(SEARCH_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut stop_why: Option<String> = None;
        let mut finished = false;
        tokio::select! {
            line = seconds.recv() => {
                // The run has ended (every agent's part, or idle).
                let Some(line) = line else { break };
                if stopped {
                    continue;
                }
                if let Some(from) = drain_from {
                    drained |= line.second >= from && line.in_flight_max == 0;
                } else if search.in_step() && search.on_second(&line) {
                    let cut_short = line.second + 1 < step_end;
                    search.finish_step();
                    let now_ms = elapsed_ms();
                    if cut_short {
                        set(Control { rate_per_s: 0.0, from_ms: now_ms, ..Control::default() });
                    }
                    drain_from = Some(if cut_short { now_ms.div_ceil(1000) as u32 } else { step_end });
                    drained = false;
                }
            }
            _ = poll.tick(), if !stopped => {
                let now_s = elapsed_ms() as f64 / 1000.0;
                if cancel.is_cancelled() {
                    stop_why = Some("stopped from the console".into());
                } else if now_s >= max_duration_s {
                    stop_why = Some(format!("--max-duration {max_duration_s} s reached"));
                } else if drain_from.is_some() && drained {
                    let from_second = now_s.floor() as u32 + 1;
                    match search.next_step(from_second) {
                        Some(step) => {
                            set(Control {
                                rate_per_s: step.rate_per_s,
                                from_ms: u64::from(from_second) * 1000,
                                until_ms: Some(u64::from(from_second + step.seconds) * 1000),
                                ..Control::default()
                            });
                            step_end = from_second + step.seconds;
                            drain_from = None;
                        }
                        None => finished = true,
                    }
                }
            }
        }
        if let Some(why) = &stop_why
            && !stopped
        {
            search.stop(why);
        }
        if (finished || stop_why.is_some()) && !stopped {
            stopped = true;
            // The answer is stored before the agents hear to stop (the run ends with them).
            if let Ok(outcome) = serde_json::to_value(search.outcome()) {
                load_runs.set_search(id, outcome).await;
            }
            set(Control {
                stop: true,
                ..Control::default()
            });
            tracing::info!(run = id, "search on agents over: the agents stop");
        }
    }
}
