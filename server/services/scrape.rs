//! Scraping: one task per target, each on its own interval, so a slow or failing target
//! never delays another.
//!
//! Targets come from `harrier.toml` (`[[targets]]`, origin `config`), from
//! `POST /api/v1/targets` (origin `api`), and the built-in `harrier` target: harrier's own
//! `/metrics` at its listen address (origin `builtin`, on unless `self_scrape = false`), so a
//! fresh install shows its own routes.
//!
//! Each scrape: an HTTP GET (Prometheus text or OpenMetrics) or one Jolokia POST read, with
//! a timeout and a body limit ([`MAX_BODY_BYTES`]); the series become route observations
//! ([`crate::sources::scrape::presets`], [`crate::sources::scrape::jolokia`]); each route's interval since the
//! previous good scrape is written with the target's status (up, duration, samples, error)
//! in one transaction; `target_status` and `routes_updated` (only rows that changed) go to
//! the live hub. Must not render anything or know about axum.
//!
//! Several replicas on one PostgreSQL database share the targets ([`Shards`]): each
//! replica holds a `replica:ID` lease renewed every second (its heartbeat); every target
//! is scraped by the live replica of highest rendezvous weight for it (highest random
//! weight hashing, Thaler & Ravishankar 1998: when a replica comes or goes, only the
//! targets it gains or loses move). Each replica also runs a loop for every stored target
//! (read each second, so a target added through another replica is picked up); a loop
//! scrapes only while its replica owns the target.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::domain::routes::steps::StepObservation;
use crate::domain::routes::{Interval, Observation, RouteRow};
use crate::services::egress::{Egress, Outbound};
use crate::services::live::{Event, Hub};
use crate::sources::scrape::process::{self, ProcessReading};
use crate::sources::scrape::{exposition, jolokia, presets};
use crate::store::{
    BUILTIN_ORIGIN, Retention, RouteWrite, ScrapeStatus, StepRollupAdd, StepWrite, Store,
    TargetRow, TargetSpec,
};

/// Largest scrape body read, bytes; a larger one fails the scrape.
pub const MAX_BODY_BYTES: usize = 32 << 20;
/// Window of the figures sent in `routes_updated`, ms.
pub const LIVE_WINDOW_MS: i64 = 60_000;
/// How often retention is applied.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// The built-in target's interval and timeout, s.
const SELF_INTERVAL_S: f64 = 10.0;
const SELF_TIMEOUT_S: f64 = 5.0;

const ACCEPT_PROMETHEUS: &str =
    "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1";

/// What the scrape loops need; set once by [`Scraper::start`].
#[derive(Clone)]
struct Running {
    store: Store,
    hub: Hub,
    shutdown: CancellationToken,
    /// Routes kept per target and scrape (`[limits] max_routes_per_target`).
    max_routes: usize,
    shards: Shards,
}

/// Lease name prefix of the replicas' heartbeats (`replica:ID`).
pub const REPLICA_PREFIX: &str = "replica:";
/// How often a replica renews its heartbeat and rereads the replicas and the targets.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// A replica whose heartbeat is this old is gone: its targets move to the others.
pub const REPLICA_TTL_MS: i64 = 3_000;

/// Which targets this replica scrapes: all of them alone (SQLite, or before the first
/// heartbeat), else those for which it has the highest rendezvous weight among the live
/// replicas. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Shards {
    /// This replica's id (random, 64 bits in hex).
    pub me: String,
    live: Arc<std::sync::RwLock<Vec<String>>>,
}

impl Shards {
    fn new() -> Shards {
        Shards {
            me: crate::services::auth::random_secret()[..16].to_string(),
            live: Arc::default(),
        }
    }

    /// Whether this replica scrapes target `id` now.
    pub fn owns(&self, id: i64) -> bool {
        let live = self.live.read().expect("not poisoned");
        live.is_empty() || owner(&live, id) == Some(self.me.as_str())
    }
}

/// The replica of `replicas` that scrapes target `id`: the one of highest weight
/// (rendezvous hashing; ties, with 64-bit weights, are left to the id order).
pub fn owner(replicas: &[String], id: i64) -> Option<&str> {
    replicas
        .iter()
        .max_by_key(|r| (weight(r, id), r.as_str()))
        .map(String::as_str)
}

/// Rendezvous weight of `replica` for target `id`: the first 8 bytes of
/// SHA-256(replica ‖ id) — the same on every replica and every build, unlike `std`'s hasher.
fn weight(replica: &str, id: i64) -> u64 {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(replica.as_bytes());
    h.update(id.to_le_bytes());
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
}

/// The scrape manager; cheap to clone. Created idle with the app state; `start` (called by
/// `serve`) loads the targets and spawns their loops. Targets added before `start` only
/// get stored.
#[derive(Clone)]
pub struct Scraper {
    inner: Arc<Inner>,
}

struct Inner {
    client: Outbound,
    running: Mutex<Option<Running>>,
    tasks: Mutex<HashMap<i64, CancellationToken>>,
    shards: Shards,
}

/// The built-in target for a server listening on `addr`.
pub fn self_target(addr: SocketAddr) -> TargetSpec {
    let host = if addr.ip().is_unspecified() {
        match addr {
            SocketAddr::V4(_) => "127.0.0.1".to_string(),
            SocketAddr::V6(_) => "[::1]".to_string(),
        }
    } else {
        match addr {
            SocketAddr::V4(a) => a.ip().to_string(),
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
        }
    };
    TargetSpec {
        name: "harrier".into(),
        url: format!("http://{host}:{}/metrics", addr.port()).into(),
        kind: "prometheus".into(),
        interval_s: SELF_INTERVAL_S,
        timeout_s: SELF_TIMEOUT_S,
        labels: BTreeMap::from([("service".to_string(), "harrier".to_string())]),
    }
}

/// Checks a target before it is stored; the message says what to send instead.
pub fn validate(spec: &TargetSpec) -> Result<(), String> {
    if spec.name.trim().is_empty() || spec.name.len() > 100 {
        return Err("name must be 1 to 100 characters".into());
    }
    let url = spec.url.expose();
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
        return Err(format!(
            "url must be http:// or https:// with a host, got \"{}\"",
            spec.url
        ));
    }
    if !matches!(spec.kind.as_str(), "prometheus" | "jolokia") {
        return Err(format!(
            "kind must be \"prometheus\" or \"jolokia\", got {:?}",
            spec.kind
        ));
    }
    if !(1.0..=3600.0).contains(&spec.interval_s) {
        return Err(format!(
            "interval_s must be between 1 and 3600, got {}",
            spec.interval_s
        ));
    }
    if !(spec.timeout_s > 0.0 && spec.timeout_s <= spec.interval_s) {
        return Err(format!(
            "timeout_s must be above 0 and at most interval_s ({}), got {}",
            spec.interval_s, spec.timeout_s
        ));
    }
    Ok(())
}

impl Scraper {
    /// Idle scrape loops whose requests go out under `egress`.
    pub fn new(egress: &Egress) -> Scraper {
        let client = Outbound::scrapes(egress);
        Scraper {
            inner: Arc::new(Inner {
                client,
                running: Mutex::new(None),
                tasks: Mutex::new(HashMap::new()),
                shards: Shards::new(),
            }),
        }
    }

    /// Stores the configured and built-in targets (removing configured ones no longer in
    /// the file), spawns a loop per stored target, and applies retention every 10 min.
    /// `self_addr` is where this server listens (`None`: no built-in target).
    pub async fn start(
        &self,
        store: Store,
        hub: Hub,
        shutdown: CancellationToken,
        config: &crate::config::Config,
        self_addr: Option<SocketAddr>,
    ) -> crate::store::Result<()> {
        let now = crate::now_ms();
        for spec in &config.targets {
            if let Err(e) = validate(spec) {
                tracing::error!(target = %spec.name, error = %e, "configured target skipped");
                continue;
            }
            store.upsert_target(spec, "config", now).await?;
        }
        let names: Vec<String> = config.targets.iter().map(|t| t.name.clone()).collect();
        store.delete_targets_not_in("config", &names).await?;
        match self_addr.filter(|_| config.self_scrape) {
            Some(addr) => {
                store
                    .upsert_target(&self_target(addr), BUILTIN_ORIGIN, now)
                    .await?;
            }
            None => {
                store.delete_targets_not_in(BUILTIN_ORIGIN, &[]).await?;
            }
        }
        *self.inner.running.lock().expect("not poisoned") = Some(Running {
            store: store.clone(),
            hub,
            shutdown: shutdown.clone(),
            max_routes: config.max_routes_per_target,
            shards: self.inner.shards.clone(),
        });
        if store.shared() {
            // Known before the first scrape: this replica does not scrape what others do.
            self.heartbeat(&store, crate::now_ms()).await;
        }
        for target in store.list_targets().await? {
            self.spawn(target);
        }
        if store.shared() {
            tokio::spawn(
                self.clone()
                    .membership_loop(store.clone(), shutdown.clone()),
            );
        }
        tokio::spawn(prune_loop(store, config.retention, shutdown));
        Ok(())
    }

    /// Renews this replica's heartbeat and rereads the live replicas.
    async fn heartbeat(&self, store: &Store, now_ms: i64) -> bool {
        let shards = &self.inner.shards;
        let name = format!("{REPLICA_PREFIX}{}", shards.me);
        if let Err(e) = store
            .acquire_lease(&name, &shards.me, now_ms, REPLICA_TTL_MS)
            .await
        {
            tracing::warn!(error = %e, "renewing this replica's heartbeat failed");
            return false;
        }
        match store.lease_holders(REPLICA_PREFIX, now_ms).await {
            Ok(live) => {
                metrics::gauge!("harrier_replicas_live").set(live.len() as f64);
                *shards.live.write().expect("not poisoned") = live;
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the live replicas failed");
                false
            }
        }
    }

    /// Every [`HEARTBEAT`]: the heartbeat, then the stored targets (loops started for
    /// targets added through another replica, stopped for ones deleted there); hourly,
    /// heartbeats of replicas gone for an hour are deleted. Ends with `shutdown`, giving
    /// the heartbeat up so the others take this replica's targets at once.
    async fn membership_loop(self, store: Store, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(HEARTBEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut rounds = 0u64;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            let now = crate::now_ms();
            if !self.heartbeat(&store, now).await {
                continue;
            }
            match store.list_targets().await {
                Ok(targets) => self.reconcile(targets),
                Err(e) => tracing::warn!(error = %e, "reading the targets failed"),
            }
            rounds += 1;
            if rounds % 3_600 == 1 {
                let _ = store.forget_leases(REPLICA_PREFIX, now - 3_600_000).await;
            }
        }
        self.leave(&store).await;
    }

    /// Gives this replica's heartbeat up (its targets move to the others at their next
    /// heartbeat).
    pub async fn leave(&self, store: &Store) {
        let shards = &self.inner.shards;
        let name = format!("{REPLICA_PREFIX}{}", shards.me);
        if let Err(e) = store.release_lease(&name, &shards.me).await {
            tracing::warn!(error = %e, "giving this replica's heartbeat up failed");
        }
    }

    /// Runs a loop for exactly the stored `targets`.
    fn reconcile(&self, targets: Vec<TargetRow>) {
        let running: Vec<i64> = self
            .inner
            .tasks
            .lock()
            .expect("not poisoned")
            .keys()
            .copied()
            .collect();
        for id in &running {
            if !targets.iter().any(|t| t.id == *id) {
                self.stop(*id);
            }
        }
        for t in targets {
            if !running.contains(&t.id) {
                self.spawn(t);
            }
        }
    }

    /// Starts the loop of `target` (replacing a running one); a no-op before `start` and
    /// for targets that push (OTLP: nothing to scrape).
    pub fn spawn(&self, target: TargetRow) {
        if target.kind == crate::store::OTLP_KIND {
            return;
        }
        let Some(running) = self.inner.running.lock().expect("not poisoned").clone() else {
            return;
        };
        let token = running.shutdown.child_token();
        if let Some(old) = self
            .inner
            .tasks
            .lock()
            .expect("not poisoned")
            .insert(target.id, token.clone())
        {
            old.cancel();
        }
        tokio::spawn(target_loop(
            self.inner.client.clone(),
            running,
            target,
            token,
        ));
    }

    /// Stops the loop of target `id`.
    pub fn stop(&self, id: i64) {
        if let Some(token) = self.inner.tasks.lock().expect("not poisoned").remove(&id) {
            token.cancel();
        }
    }

    /// Number of running target loops.
    /// The client scrapes go out with (route operations use it too: same agents, same
    /// egress policy).
    pub fn client(&self) -> &Outbound {
        &self.inner.client
    }

    pub fn running_targets(&self) -> usize {
        self.inner.tasks.lock().expect("not poisoned").len()
    }
}

async fn prune_loop(store: Store, retention: Retention, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(PRUNE_EVERY);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {
                match store.prune_routes(crate::now_ms(), &retention).await {
                    Ok(n) if n > 0 => tracing::debug!(rows = n, "route figures past retention deleted"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "pruning route figures failed"),
                }
                if let Err(e) = store.prune_steps(crate::now_ms(), &retention).await {
                    tracing::warn!(error = %e, "pruning step figures failed");
                }
            }
        }
    }
}

/// What one scrape read.
pub struct ScrapeOutcome {
    pub observations: Vec<Observation>,
    /// Process readings per instance (`None`: the target's own).
    pub process: std::collections::BTreeMap<Option<String>, ProcessReading>,
    /// Samples (Jolokia: attribute values) read.
    pub samples: usize,
    /// The routes' steps (Jolokia), in route order.
    pub steps: Vec<StepObservation>,
}

/// Reads `target` once (no timeout here: the caller bounds it). A target the egress
/// policy refuses is an error saying why (the built-in target, harrier's own `/metrics`,
/// is the one exempt from the rule against harrier's own address).
pub async fn scrape_once(client: &Outbound, target: &TargetRow) -> Result<ScrapeOutcome, String> {
    if !target.is_builtin() {
        client.check(target.url.expose()).await?;
    }
    let client = client.http();
    let request = match target.kind.as_str() {
        "jolokia" => client
            .post(target.url.expose())
            .json(&jolokia::request_body()),
        _ => client
            .get(target.url.expose())
            .header(reqwest::header::ACCEPT, ACCEPT_PROMETHEUS),
    };
    // Errors are shown and logged: never with the URL's credentials.
    let mut response = request
        .send()
        .await
        .map_err(|e| describe(&e.without_url()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("HTTP {status} from {}", target.url.masked()));
    }
    let mut body: Vec<u8> = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| describe(&e.without_url()))?
    {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(format!("response larger than {} MiB", MAX_BODY_BYTES >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    match target.kind.as_str() {
        "jolokia" => {
            let answer: serde_json::Value = serde_json::from_slice(&body)
                .map_err(|e| format!("Jolokia answer is not JSON: {e}"))?;
            let (observations, samples) = jolokia::observations(&answer, &target.service)?;
            let (steps, step_samples) = jolokia::steps(&answer, &target.service);
            Ok(ScrapeOutcome {
                observations,
                samples: samples + step_samples,
                process: Default::default(),
                steps,
            })
        }
        _ => {
            let doc = exposition::parse_bytes(&body).map_err(|e| format!("exposition {e}"))?;
            Ok(ScrapeOutcome {
                samples: doc.sample_count(),
                observations: presets::observations_by_instance(&doc, &target.service),
                process: process::readings(&doc, crate::now_ms()),
                steps: Vec::new(),
            })
        }
    }
}

/// An HTTP client error without reqwest's nesting noise.
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

type RouteKey = (
    String,
    String,
    &'static str,
    Option<String>,
    BTreeMap<String, String>,
);

fn key(o: &Observation) -> RouteKey {
    (
        o.service.clone(),
        o.route.clone(),
        o.source.as_str(),
        o.instance.clone(),
        o.labels.clone(),
    )
}

/// Whether `a` and `b` are the same route ([`key`] without copying it).
fn same_route(a: &Observation, b: &Observation) -> bool {
    a.route == b.route
        && a.service == b.service
        && a.source == b.source
        && a.instance == b.instance
        && a.labels == b.labels
}

/// The previous scrape's observations, to take each route's interval from. A scrape lists
/// its routes in a stable order, so a route is first looked for at its own position (no
/// key copied); only when the routes changed is an index by key built, once a scrape.
#[derive(Default)]
struct Previous {
    list: Vec<Observation>,
    index: Option<HashMap<RouteKey, usize>>,
}

impl Previous {
    fn of(&mut self, i: usize, o: &Observation) -> Option<&Observation> {
        if let Some(p) = self.list.get(i).filter(|p| same_route(p, o)) {
            return Some(p);
        }
        let list = &self.list;
        let index = self
            .index
            .get_or_insert_with(|| list.iter().enumerate().map(|(j, p)| (key(p), j)).collect());
        index.get(&key(o)).map(|&j| &self.list[j])
    }

    fn replace(&mut self, list: Vec<Observation>) {
        self.list = list;
        self.index = None;
    }

    fn clear(&mut self) {
        self.replace(Vec::new());
    }
}

/// One target's loop: scrape on its interval until cancelled.
async fn target_loop(
    client: Outbound,
    running: Running,
    target: TargetRow,
    token: CancellationToken,
) {
    let period = Duration::from_secs_f64(target.interval_s.max(1.0));
    let timeout = Duration::from_secs_f64(target.timeout_s.clamp(0.1, target.interval_s.max(1.0)));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut prev = Previous::default();
    let mut prev_ms: Option<i64> = None;
    let mut sent: HashMap<i64, RouteRow> = HashMap::new();
    let mut prev_process: HashMap<Option<String>, (ProcessReading, i64)> = HashMap::new();
    let mut book = StepBook::default();
    // Each route's group as last written (written again only when it changes).
    let mut groups_written: HashMap<i64, Option<String>> = HashMap::new();
    let mut last_skipped = 0usize;
    let name = target.name.clone();
    loop {
        tokio::select! {
            _ = token.cancelled() => break,
            _ = tick.tick() => {}
        }
        if !running.shards.owns(target.id) {
            // Another replica scrapes it: what was read before would span its scrapes.
            prev.clear();
            prev_ms = None;
            prev_process.clear();
            flush_step_rollups(&running.store, &name, book.drain()).await;
            book = StepBook::default();
            sent.clear();
            continue;
        }
        let at_ms = crate::now_ms();
        let started = Instant::now();
        let outcome = tokio::select! {
            _ = token.cancelled() => break,
            r = tokio::time::timeout(timeout, scrape_once(&client, &target)) => match r {
                Ok(r) => r,
                Err(_) => Err(format!("no answer within {} s", target.timeout_s)),
            },
        };
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        let mut steps = Vec::new();
        let mut groups: Vec<Option<String>> = Vec::new();
        let (status, writes) = match outcome {
            Ok(mut out) => {
                steps = std::mem::take(&mut out.steps);
                // A target exposing more routes than the limit keeps the first ones (in the
                // exporter's stable order) and says so in its status.
                let skipped = out.observations.len().saturating_sub(running.max_routes);
                out.observations.truncate(running.max_routes);
                if skipped != last_skipped && skipped > 0 {
                    tracing::warn!(target = %name, skipped, limit = running.max_routes, "target exposes more routes than limits.max_routes_per_target; the rest are skipped");
                }
                last_skipped = skipped;
                let writes: Vec<RouteWrite> = out
                    .observations
                    .iter()
                    .enumerate()
                    .map(|(i, o)| RouteWrite {
                        service: o.service.clone(),
                        route: o.route.clone(),
                        labels: o.labels.clone(),
                        source: o.source.as_str().to_string(),
                        state: o.state.clone(),
                        last_exchange_ms: o.last_exchange_ms,
                        instance: o.instance.clone().unwrap_or_default(),
                        interval: match (prev.of(i, o), prev_ms) {
                            (Some(p), Some(p_ms)) if at_ms > p_ms => {
                                Some(Interval::between(p, o, at_ms - p_ms))
                            }
                            _ => None,
                        },
                    })
                    .collect();
                groups = out.observations.iter().map(|o| o.group.clone()).collect();
                prev.replace(out.observations);
                prev_ms = Some(at_ms);
                let mut figures: Vec<(String, String, f64)> = Vec::new();
                for (inst, reading) in out.process {
                    let shown = inst.clone().unwrap_or_else(|| target.instance.clone());
                    let before = prev_process.get(&inst).map(|(r, t)| (r, at_ms - *t));
                    for (metric, v) in reading.figures(before) {
                        figures.push((shown.clone(), metric, v));
                    }
                    prev_process.insert(inst, (reading, at_ms));
                }
                if let Err(e) = running
                    .store
                    .record_process(target.id, at_ms, &figures)
                    .await
                {
                    tracing::warn!(target = %name, error = %e, "storing process figures failed");
                }
                (
                    ScrapeStatus {
                        at_ms,
                        up: true,
                        duration_ms,
                        samples: out.samples as i64,
                        error: (skipped > 0).then(|| {
                            format!(
                                "{skipped} routes beyond the limit of {} per target were skipped (limits.max_routes_per_target in harrier.toml)",
                                running.max_routes
                            )
                        }),
                    },
                    writes,
                )
            }
            Err(error) => {
                tracing::debug!(target = %name, %error, "scrape failed");
                (
                    ScrapeStatus {
                        at_ms,
                        up: false,
                        duration_ms,
                        samples: 0,
                        error: Some(error),
                    },
                    Vec::new(),
                )
            }
        };
        let result = if status.up { "ok" } else { "error" };
        metrics::counter!("harrier_scrapes_total", "target" => name.clone(), "result" => result)
            .increment(1);
        let route_ids = match running
            .store
            .record_scrape(target.id, &status, &writes)
            .await
        {
            Ok(ids) => ids,
            Err(e) => {
                // The target may have been deleted meanwhile; the next tick finds out.
                tracing::warn!(target = %name, error = %e, "storing a scrape failed");
                continue;
            }
        };
        let changed: Vec<(i64, Option<String>)> = route_ids
            .iter()
            .zip(&groups)
            // Routes without a group (every Prometheus route) are written only when they
            // had one: nothing per scrape.
            .filter(|(id, g)| match groups_written.get(*id) {
                Some(before) => before != *g,
                None => g.is_some(),
            })
            .map(|(id, g)| (*id, g.clone()))
            .collect();
        if !changed.is_empty() {
            match running.store.set_route_groups(&changed).await {
                Ok(()) => groups_written.extend(changed),
                Err(e) => tracing::warn!(target = %name, error = %e, "storing route groups failed"),
            }
        }
        if !steps.is_empty() {
            let (step_writes, keys) = book.writes(&writes, &route_ids, steps, at_ms);
            match running.store.record_steps(at_ms, &step_writes).await {
                Ok(ids) => {
                    book.stored(&keys, &step_writes, &ids, at_ms);
                    let closed = book.roll(&step_writes, &ids, at_ms);
                    flush_step_rollups(&running.store, &name, closed).await;
                }
                Err(e) => {
                    // Ids it held may be gone (a route pruned): every shape is written next.
                    book.forget_ids();
                    tracing::warn!(target = %name, error = %e, "storing the routes' steps failed");
                }
            }
        }
        if token.is_cancelled() {
            break;
        }
        publish(&running.store, &running.hub, target.id, &mut sent).await;
    }
    // The minutes being summed are stored as they stand.
    flush_step_rollups(&running.store, &name, book.drain()).await;
}

/// Adds closed minutes of step figures to their rollups (a failure is logged: the raw rows
/// hold the same figures).
async fn flush_step_rollups(store: &Store, target: &str, rows: Vec<StepRollupAdd>) {
    if rows.is_empty() {
        return;
    }
    if let Err(e) = store.add_step_rollups(&rows).await {
        tracing::warn!(%target, error = %e, "storing step rollups failed");
    }
}

/// A step's identity on a target: Camel context, route, step id.
type StepKey = (Option<String>, String, String);

/// A step's shape as stored: route id, kind, parent, index, level, destination.
type StepShapeKey = (i64, String, Option<String>, i64, i64, Option<String>);

/// A step's row is written again this often even when its shape is unchanged: its
/// last-seen time, by which a step a redeploy removed shows as gone (within this time).
const STEP_SEEN_EVERY_MS: i64 = 60_000;

/// One step's figures being summed for the minute `bucket_ms`.
struct MinuteSums {
    bucket_ms: i64,
    sums: crate::domain::routes::Figures,
    inflight_sum: Option<f64>,
    inflight_n: i64,
}

impl MinuteSums {
    /// The rows it adds to: its minute, and the 10 min and 1 h buckets that minute is in.
    fn rows(self, step_id: i64) -> impl Iterator<Item = StepRollupAdd> {
        crate::store::ROLLUPS_MS
            .into_iter()
            .map(move |res| StepRollupAdd {
                step_id,
                resolution_ms: res,
                bucket_ms: self.bucket_ms - self.bucket_ms.rem_euclid(res),
                sums: self.sums.as_interval(),
                intervals: i64::from(self.sums.intervals),
                inflight_sum: self.inflight_sum,
                inflight_n: self.inflight_n,
            })
    }
}

/// What a target's loop keeps of its steps between scrapes: each step's last reading (its
/// intervals), its stored id and shape (not written again while unchanged), and the
/// minute of figures being summed for its rollups (added once the minute closes: three
/// rollup rows a minute per step instead of three a scrape).
#[derive(Default)]
struct StepBook {
    prev: HashMap<StepKey, (Observation, i64)>,
    ids: HashMap<StepKey, (i64, StepShapeKey, i64)>,
    minutes: HashMap<i64, MinuteSums>,
}

impl StepBook {
    /// The steps of one scrape as written: each under the route the scrape stored for its
    /// Camel context and route (steps of routes beyond the route limit are dropped), with
    /// its interval since the previous scrape; and their keys.
    fn writes(
        &mut self,
        writes: &[RouteWrite],
        route_ids: &[i64],
        steps: Vec<StepObservation>,
        at_ms: i64,
    ) -> (Vec<StepWrite>, Vec<StepKey>) {
        let route_of: HashMap<(Option<&str>, &str), i64> = writes
            .iter()
            .zip(route_ids)
            .map(|(w, id)| {
                (
                    (
                        w.labels.get("camel_context").map(String::as_str),
                        w.route.as_str(),
                    ),
                    *id,
                )
            })
            .collect();
        let mut next: HashMap<StepKey, (Observation, i64)> = HashMap::with_capacity(steps.len());
        let mut out = Vec::with_capacity(steps.len());
        let mut keys = Vec::with_capacity(steps.len());
        for s in steps {
            let Some(&route_id) = route_of.get(&(s.context.as_deref(), s.route.as_str())) else {
                continue;
            };
            let key = (s.context.clone(), s.route.clone(), s.step.clone());
            let interval = self
                .prev
                .get(&key)
                .filter(|(_, p_ms)| at_ms > *p_ms)
                .map(|(p, p_ms)| Interval::between(p, &s.counters, at_ms - p_ms));
            let shape: StepShapeKey = (
                route_id,
                s.kind.clone(),
                s.parent.clone(),
                s.index,
                s.level,
                s.destination.clone(),
            );
            let known_id = self
                .ids
                .get(&key)
                .filter(|(_, stored, written_ms)| {
                    *stored == shape && at_ms - written_ms < STEP_SEEN_EVERY_MS
                })
                .map(|(id, _, _)| *id);
            out.push(StepWrite {
                route_id,
                step: s.step,
                kind: s.kind,
                parent: s.parent,
                index: s.index,
                level: s.level,
                destination: s.destination,
                interval,
                known_id,
            });
            next.insert(key.clone(), (s.counters, at_ms));
            keys.push(key);
        }
        self.prev = next;
        (out, keys)
    }

    /// Notes the ids of the steps whose rows were written at `at_ms`.
    fn stored(&mut self, keys: &[StepKey], writes: &[StepWrite], ids: &[i64], at_ms: i64) {
        for ((key, w), id) in keys.iter().zip(writes).zip(ids) {
            if w.known_id.is_none() && *id != 0 {
                let shape = (
                    w.route_id,
                    w.kind.clone(),
                    w.parent.clone(),
                    w.index,
                    w.level,
                    w.destination.clone(),
                );
                self.ids.insert(key.clone(), (*id, shape, at_ms));
            }
        }
    }

    fn forget_ids(&mut self) {
        self.ids.clear();
    }

    /// Adds a scrape's intervals to the minutes being summed; the rows of the minutes that
    /// closed (an interval of a later minute, or none since).
    fn roll(&mut self, writes: &[StepWrite], ids: &[i64], at_ms: i64) -> Vec<StepRollupAdd> {
        let minute = at_ms - at_ms.rem_euclid(crate::store::MINUTE_MS);
        let mut closed = Vec::new();
        let done: Vec<i64> = self
            .minutes
            .iter()
            .filter(|(_, m)| m.bucket_ms < minute)
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            if let Some(m) = self.minutes.remove(&id) {
                closed.extend(m.rows(id));
            }
        }
        for (w, id) in writes.iter().zip(ids) {
            let (Some(iv), true) = (&w.interval, *id != 0) else {
                continue;
            };
            let m = self.minutes.entry(*id).or_insert_with(|| MinuteSums {
                bucket_ms: minute,
                sums: Default::default(),
                inflight_sum: None,
                inflight_n: 0,
            });
            m.sums.add_sums(iv);
            // A rollup keeps the mean inflight, not the latest reading.
            if let Some(i) = iv.inflight.filter(|v| v.is_finite()) {
                m.inflight_sum = Some(m.inflight_sum.unwrap_or(0.0) + i);
                m.inflight_n += 1;
            }
        }
        closed
    }

    /// The rows of every minute being summed (the loop ends or loses the target).
    fn drain(&mut self) -> Vec<StepRollupAdd> {
        self.minutes
            .drain()
            .flat_map(|(id, m)| m.rows(id))
            .collect()
    }
}

/// Sends the target's status and the route rows that changed since the last send (`sent`,
/// kept by the caller per target). The rows (a window of every route of the target) are
/// read only while a client of this process listens; other replicas are woken either way
/// and read them for their own. Also what an OTLP push sends.
pub async fn publish(store: &Store, hub: &Hub, target_id: i64, sent: &mut HashMap<i64, RouteRow>) {
    if let Ok(Some(target)) = store.get_target(target_id).await {
        hub.publish(&Event::TargetStatus { target });
    }
    if !hub.has_clients() {
        hub.relay_only(&Event::RoutesUpdated {
            target_id,
            routes: Vec::new(),
        });
        // What was sent is forgotten: a client that comes sends its rows afresh.
        sent.clear();
        return;
    }
    let rows = match crate::views::routes::route_rows(
        store,
        Some(target_id),
        LIVE_WINDOW_MS,
        crate::now_ms(),
    )
    .await
    {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "reading route figures failed");
            return;
        }
    };
    let changed: Vec<RouteRow> = rows
        .into_iter()
        .filter(|r| sent.get(&r.id) != Some(r))
        .collect();
    if changed.is_empty() {
        return;
    }
    for r in &changed {
        sent.insert(r.id, r.clone());
    }
    hub.publish(&Event::RoutesUpdated {
        target_id,
        routes: changed,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each route's previous observation is found whether the routes kept their order,
    /// moved, came or went, and never another route's at the same position.
    #[test]
    fn the_previous_scrape_gives_each_route_its_own_observation() {
        use crate::domain::routes::Source;
        let obs = |route: &str, ctx: &str, total: f64| {
            let mut o = Observation::new("shop", route, Source::Camel);
            o.labels.insert("camel_context".into(), ctx.into());
            o.inflight = Some(total);
            o
        };
        let mut prev = Previous::default();
        prev.replace(vec![
            obs("a", "x", 1.0),
            obs("b", "x", 2.0),
            obs("c", "x", 3.0),
        ]);
        let found = |prev: &mut Previous, now: &[Observation]| -> Vec<Option<f64>> {
            now.iter()
                .enumerate()
                .map(|(i, o)| prev.of(i, o).and_then(|p| p.inflight))
                .collect()
        };
        // same order
        let now = [obs("a", "x", 0.0), obs("b", "x", 0.0), obs("c", "x", 0.0)];
        assert_eq!(found(&mut prev, &now), [Some(1.0), Some(2.0), Some(3.0)]);
        // one gone, one new, the rest moved; a route of another context at b's old place
        let now = [
            obs("b", "x", 0.0),
            obs("b", "y", 0.0),
            obs("c", "x", 0.0),
            obs("d", "x", 0.0),
        ];
        assert_eq!(found(&mut prev, &now), [Some(2.0), None, Some(3.0), None]);
        prev.replace(now.to_vec());
        assert_eq!(found(&mut prev, &[obs("a", "x", 0.0)]), [None]);
        prev.clear();
        assert_eq!(found(&mut prev, &[obs("b", "x", 0.0)]), [None]);
    }

    /// A step's row is written when new or changed and once a minute (its last-seen time),
    /// else known by id; its minute of figures goes to the rollups once the minute closes.
    #[test]
    fn steps_are_written_once_and_their_minutes_rolled_up_when_they_close() {
        use crate::domain::routes::{Counters, Source};
        let write = RouteWrite {
            service: "shop".into(),
            route: "orders".into(),
            labels: [("camel_context".to_string(), "shop".to_string())].into(),
            source: "jolokia".into(),
            state: None,
            last_exchange_ms: None,
            interval: None,
            instance: String::new(),
        };
        let step = |total: f64, kind: &str| {
            let mut c = Counters::default();
            c.add("", total);
            let mut o = Observation::new("shop", "to1", Source::Jolokia);
            o.total = Some(c.clone());
            o.duration_count = Some(c);
            StepObservation {
                context: Some("shop".into()),
                route: "orders".into(),
                step: "to1".into(),
                kind: kind.into(),
                parent: None,
                index: 0,
                level: 1,
                destination: None,
                counters: o,
            }
        };
        let mut book = StepBook::default();
        // A whole minute.
        let minute = 1_796_490_000_000_i64;
        let scrape = |at: i64, total: f64, kind: &str, book: &mut StepBook| {
            let (w, keys) = book.writes(
                std::slice::from_ref(&write),
                &[7],
                vec![step(total, kind)],
                at,
            );
            let known = w[0].known_id;
            book.stored(&keys, &w, &[42], at);
            (known, book.roll(&w, &[42], at))
        };
        // First scrape: written, no interval yet.
        let (known, rows) = scrape(minute + 10_000, 100.0, "to", &mut book);
        assert_eq!((known, rows.len()), (None, 0));
        // Same minute: known, summing.
        let (known, rows) = scrape(minute + 20_000, 110.0, "to", &mut book);
        assert_eq!((known, rows.len()), (Some(42), 0));
        let (_, rows) = scrape(minute + 30_000, 125.0, "to", &mut book);
        assert!(rows.is_empty());
        // The next minute closes it: its sums go to the 1 min, 10 min and 1 h rows.
        let (_, rows) = scrape(minute + 61_000, 130.0, "to", &mut book);
        assert_eq!(rows.len(), 3);
        for r in &rows {
            assert_eq!(r.step_id, 42);
            assert_eq!(r.sums.exchanges, Some(25.0));
            assert_eq!(r.sums.interval_ms, 20_000);
            assert_eq!(r.intervals, 2);
            assert_eq!(r.bucket_ms, minute - minute.rem_euclid(r.resolution_ms));
        }
        // A changed shape is written again; so is an unchanged one after a minute.
        let (known, _) = scrape(minute + 62_000, 131.0, "split", &mut book);
        assert_eq!(known, None);
        let (known, _) = scrape(minute + 63_000, 132.0, "split", &mut book);
        assert_eq!(known, Some(42));
        let (known, _) = scrape(
            minute + 62_000 + STEP_SEEN_EVERY_MS,
            133.0,
            "split",
            &mut book,
        );
        assert_eq!(known, None);
        // What is being summed is handed over whole at the end.
        let left = book.drain();
        assert_eq!(left.len(), 3);
        assert!(book.drain().is_empty());
    }

    #[test]
    fn rendezvous_shares_evenly_and_a_newcomer_only_takes() {
        let three: Vec<String> = ["a1", "b2", "c3"].map(String::from).to_vec();
        let mut four = three.clone();
        four.push("d4".into());
        four.sort();
        let mut counts = HashMap::new();
        let mut moved_between_old = 0;
        let mut to_new = 0;
        for id in 0..3_000 {
            let before = owner(&three, id).unwrap();
            let after = owner(&four, id).unwrap();
            *counts.entry(before).or_insert(0) += 1;
            if after == "d4" {
                to_new += 1;
            } else if after != before {
                moved_between_old += 1;
            }
        }
        for (r, n) in &counts {
            assert!((850..=1150).contains(n), "{r} owns {n} of 3000: {counts:?}");
        }
        assert_eq!(moved_between_old, 0, "targets only move to the newcomer");
        assert!(
            (600..=900).contains(&to_new),
            "the newcomer takes {to_new} of 3000"
        );
        assert_eq!(owner(&[], 1), None);
    }
}
