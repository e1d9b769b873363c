//! The load generator's engine: sends HTTP/1.1 requests on an arrival schedule and hands
//! over what it measured once a second.
//!
//! Owns [`RequestSpec`] (what to send and what counts as success, parsed from the command
//! line's URL, method, headers and body), the target check ([`resolve_target`]: loopback
//! and private addresses only unless allowed) and [`start`], which runs the schedule on
//! worker threads. Must not touch the store, the live hub or the terminal: it is a source
//! of [`Tick`]s; `services::load` turns them into a run.
//!
//! How it sends (open model, after wrk2's `src/wrk.c` and vegeta's `lib/attack.go`): each
//! worker thread runs a current-thread tokio runtime and takes every n-th arrival of the
//! schedule. Its dispatcher sleeps until an arrival's intended time, queues the intended
//! time, and wakes an idle connection, or opens a new one (a task driving one hyper
//! HTTP/1.1 connection with keep-alive, as oha's `src/client.rs` does) while fewer than the
//! worker's share of `--max-connections` are open; otherwise the request waits in the
//! queue with its intended time, counted as having waited. A connection takes the oldest
//! queued request; every request is timed from its intended start, so a stalled service
//! shows in the latency of every request that should have gone out meanwhile (no
//! coordinated omission).
//!
//! Hot path: no channel message and no allocation of ours per request (hyper allocates
//! its request and response state); a worker records into its own [`Recorder`] and sends one
//! [`Tick`] per second.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::domain::load::{ClosedModel, Outcome, Recorder, Schedule, Tick, Timing, Workload};

/// Why a load run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    NotAllowed(String),
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("cannot start the generator: {0}")]
    Start(String),
}

/// What every request sends and what counts as a success.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub method: Method,
    /// Scheme, host and port as given (for people and the run's label).
    pub url: String,
    /// Host and port as in the URL (the `Host` header).
    pub authority: String,
    /// Host to resolve (IPv6 without brackets).
    pub host: String,
    /// Port to connect to.
    pub port: u16,
    /// Origin-form target (`/path?query`).
    pub path: Uri,
    /// Headers sent with every request (`Host` and `User-Agent` included).
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Accepted statuses, inclusive ranges.
    pub expect_status: Vec<(u16, u16)>,
    /// The response body must contain these bytes.
    pub expect_body: Option<Vec<u8>>,
    /// Longest a request may take from its pick-up to the last byte of its response.
    pub timeout: Duration,
}

impl RequestSpec {
    /// A spec from the command line's values. `headers` are `Name: value` strings; the
    /// default status range is 200–399 (k6's default expected range).
    pub fn new(
        url: &str,
        method: &str,
        headers: &[String],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<RequestSpec, LoadError> {
        let parsed = url::Url::parse(url)
            .map_err(|e| LoadError::BadInput(format!("{url} is not a URL: {e}")))?;
        match parsed.scheme() {
            "http" => {}
            "https" => {
                return Err(LoadError::BadInput(
                    "https is not supported yet: the generator speaks HTTP/1.1 over plain TCP"
                        .into(),
                ));
            }
            other => {
                return Err(LoadError::BadInput(format!(
                    "{url}: scheme {other} is not http"
                )));
            }
        }
        let host = parsed
            .host_str()
            .ok_or_else(|| LoadError::BadInput(format!("{url} has no host")))?;
        let port = parsed.port_or_known_default().unwrap_or(80);
        let authority = match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let path_and_query = match parsed.query() {
            Some(q) => format!("{}?{q}", parsed.path()),
            None => parsed.path().to_string(),
        };
        let path: Uri = path_and_query
            .parse()
            .map_err(|e| LoadError::BadInput(format!("{url}: bad path: {e}")))?;
        let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes())
            .map_err(|_| LoadError::BadInput(format!("{method} is not an HTTP method")))?;
        let mut map = HeaderMap::new();
        map.insert(
            hyper::header::HOST,
            HeaderValue::from_str(&authority)
                .map_err(|_| LoadError::BadInput(format!("{authority} is not a valid host")))?,
        );
        map.insert(
            hyper::header::USER_AGENT,
            HeaderValue::from_static(concat!("harrier/", env!("CARGO_PKG_VERSION"))),
        );
        for h in headers {
            let (name, value) = h
                .split_once(':')
                .ok_or_else(|| LoadError::BadInput(format!("header {h:?} is not `Name: value`")))?;
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| LoadError::BadInput(format!("{name:?} is not a header name")))?;
            let value = HeaderValue::from_str(value.trim())
                .map_err(|_| LoadError::BadInput(format!("{value:?} is not a header value")))?;
            map.insert(name, value);
        }
        Ok(RequestSpec {
            method,
            url: url.to_string(),
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            authority,
            port,
            path,
            headers: map,
            body: Bytes::from(body),
            expect_status: vec![(200, 399)],
            expect_body: None,
            timeout,
        })
    }

    /// `GET /orders`: the run's label.
    pub fn label(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    /// Bytes of one request as written: request line, headers (with `content-length` when
    /// there is a body), blank line, body.
    pub fn bytes_per_request(&self) -> u64 {
        let line = self.method.as_str().len() + 1 + self.path.to_string().len() + 11;
        let headers: usize = self
            .headers
            .iter()
            .map(|(n, v)| n.as_str().len() + 2 + v.len() + 2)
            .sum();
        let length = if self.body.is_empty() {
            0
        } else {
            "content-length: \r\n".len() + self.body.len().to_string().len()
        };
        (line + headers + length + 2 + self.body.len()) as u64
    }

    fn status_ok(&self, status: u16) -> bool {
        self.expect_status
            .iter()
            .any(|&(lo, hi)| (lo..=hi).contains(&status))
    }

    fn request(&self) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(self.body.clone()));
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.path.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// Parses `--expect-status`: `200-399`, `200,201,404`, `200-299,404`.
pub fn parse_status_ranges(s: &str) -> Result<Vec<(u16, u16)>, LoadError> {
    let bad = || LoadError::BadInput(format!("--expect-status {s:?}: expected e.g. 200-299,404"));
    s.split(',')
        .map(|part| {
            let part = part.trim();
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
            let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
            if lo > hi || !(100..=999).contains(&lo) || hi > 999 {
                return Err(bad());
            }
            Ok((lo, hi))
        })
        .collect()
}

/// Whether an address is loopback or private (RFC 1918, RFC 4193, link-local).
fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_local(IpAddr::V4(v4)))
        }
    }
}

/// Resolves the spec's host to the address to connect to. Refuses an address that is not
/// loopback or private unless `allow_public` (a load generator pointed at someone else's
/// service by mistake is an attack).
pub fn resolve_target(spec: &RequestSpec, allow_public: bool) -> Result<SocketAddr, LoadError> {
    let host = spec.host.as_str();
    let addrs: Vec<SocketAddr> = (host, spec.port)
        .to_socket_addrs()
        .map_err(|e| LoadError::Resolve(format!("{host}: {e}")))?
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| LoadError::Resolve(host.to_string()))?;
    if !allow_public && !addrs.iter().all(|a| is_local(a.ip())) {
        return Err(LoadError::NotAllowed(format!(
            "{host} resolves to {}, which is neither loopback nor private; pass --allow-public-target if you mean to load it",
            addr.ip()
        )));
    }
    Ok(addr)
}

/// A constant rate from `from_ns` to `until_ns` (ns from the run's start), set while the
/// run goes: the saturation search drives the engine with these.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Requests per second; 0 sends nothing.
    pub rate_per_s: f64,
    pub from_ns: u64,
    /// No arrival at or after this (`u64::MAX`: none).
    pub until_ns: u64,
    /// The run is over: workers finish what they have and stop.
    pub stop: bool,
}

impl Segment {
    /// Arrival `k` of worker `worker` of `workers` (each takes every n-th arrival of the
    /// segment's even spacing), ns from the run's start; `None` past the segment.
    fn arrival(&self, k: u64, worker: usize, workers: usize) -> Option<u64> {
        if self.stop || self.rate_per_s <= 0.0 {
            return None;
        }
        let i = k as f64 * workers as f64 + worker as f64;
        let t = self.from_ns as f64 + (i * 1e9 / self.rate_per_s).round();
        (t < self.until_ns as f64).then_some(t as u64)
    }
}

/// The rate of a running engine, changed by whoever drives it (instead of a fixed
/// schedule), and what the workers still hold.
#[derive(Debug)]
pub struct RateControl {
    segment: watch::Sender<Segment>,
    /// Per worker: requests queued or in flight.
    outstanding: Vec<AtomicU32>,
}

impl RateControl {
    /// A control for `threads` workers, starting with `first`.
    pub fn new(threads: usize, first: Segment) -> Arc<RateControl> {
        Arc::new(RateControl {
            segment: watch::Sender::new(first),
            outstanding: (0..threads.max(1)).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// Replaces the current segment (workers switch at once; arrivals of the new segment
    /// that are already due go out immediately).
    pub fn set(&self, segment: Segment) {
        self.segment.send_replace(segment);
    }

    /// Requests queued or in flight over all workers.
    pub fn outstanding(&self) -> u64 {
        self.outstanding
            .iter()
            .map(|a| u64::from(a.load(Ordering::Relaxed)))
            .sum()
    }
}

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// The schedule (ignored for its rates when `control` is set: the control drives).
    pub workload: Workload,
    /// Connections open at most, over all workers (open model; the closed model opens one
    /// per user).
    pub max_connections: u32,
    /// Worker threads (each a current-thread runtime taking every n-th arrival).
    pub threads: usize,
    /// Rates set while the run goes (open model only), instead of the schedule's.
    pub control: Option<Arc<RateControl>>,
}

/// A running load: its ticks (the channel closes when every worker has finished).
pub struct Running {
    pub ticks: mpsc::UnboundedReceiver<Tick>,
    /// The run's start, unix epoch ms (the zero of every tick's times).
    pub run_start_unix_ms: i64,
    /// The run's start on the monotonic clock (the zero of segments' ns).
    pub t0: Instant,
}

/// Starts the workers. `cancel` stops the schedule early: requests in flight finish (or
/// time out), queued ones are counted as never sent.
pub fn start(
    spec: RequestSpec,
    addr: SocketAddr,
    settings: &EngineSettings,
    cancel: CancellationToken,
) -> Result<Running, LoadError> {
    let threads = match &settings.control {
        Some(c) => c.outstanding.len(),
        None => settings.threads.max(1),
    };
    let max_connections = settings.max_connections.max(threads as u32);
    let (tx, rx) = mpsc::unbounded_channel();
    let spec = Arc::new(spec);
    let run_start_unix_ms = crate::now_ms();
    let t0 = Instant::now();
    for worker in 0..threads {
        // The connections are shared out; the first workers take the remainder.
        let share = max_connections / threads as u32
            + u32::from((worker as u32) < max_connections % threads as u32);
        let ctx = WorkerCtx {
            worker,
            workers: threads,
            spec: spec.clone(),
            addr,
            workload: settings.workload.clone(),
            max_open: share,
            t0,
            run_start_unix_ms,
            cancel: cancel.clone(),
            tx: tx.clone(),
            control: settings.control.clone(),
        };
        std::thread::Builder::new()
            .name(format!("harrier-load-{worker}"))
            .spawn(move || worker_main(ctx))
            .map_err(|e| LoadError::Start(e.to_string()))?;
    }
    Ok(Running {
        ticks: rx,
        run_start_unix_ms,
        t0,
    })
}

struct WorkerCtx {
    worker: usize,
    workers: usize,
    spec: Arc<RequestSpec>,
    addr: SocketAddr,
    workload: Workload,
    max_open: u32,
    t0: Instant,
    run_start_unix_ms: i64,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<Tick>,
    control: Option<Arc<RateControl>>,
}

fn worker_main(ctx: WorkerCtx) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("load worker {}: cannot start its runtime: {e}", ctx.worker);
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, run_worker(ctx));
}

/// One worker's state, shared by its dispatcher, its connections and its ticker (one
/// thread: `Cell`/`RefCell`, never a lock).
struct Shared {
    spec: Arc<RequestSpec>,
    addr: SocketAddr,
    t0: Instant,
    /// Intended start times (ns) of requests waiting for a connection.
    queue: RefCell<VecDeque<u64>>,
    wake: Notify,
    /// Connections waiting for work and not yet claimed by the dispatcher.
    idle: Cell<u32>,
    open: Cell<u32>,
    done: Cell<bool>,
    rec: RefCell<Recorder>,
    /// Requests queued or in flight, published to the rate control (when there is one).
    outstanding: Cell<u32>,
    gauge: Option<(Arc<RateControl>, usize)>,
}

impl Shared {
    fn ns_since_start(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.t0).as_nanos() as u64
    }

    /// `delta` more (or fewer) requests queued or in flight.
    fn outstanding_add(&self, delta: i64) {
        let v = (i64::from(self.outstanding.get()) + delta).max(0) as u32;
        self.outstanding.set(v);
        if let Some((control, w)) = &self.gauge {
            control.outstanding[*w].store(v, Ordering::Relaxed);
        }
    }
}

async fn run_worker(ctx: WorkerCtx) {
    let shared = Rc::new(Shared {
        spec: ctx.spec.clone(),
        addr: ctx.addr,
        t0: ctx.t0,
        queue: RefCell::new(VecDeque::with_capacity(1024)),
        wake: Notify::new(),
        idle: Cell::new(0),
        open: Cell::new(0),
        done: Cell::new(false),
        rec: RefCell::new(Recorder::new(
            ctx.worker,
            ctx.run_start_unix_ms,
            ctx.spec.bytes_per_request(),
        )),
        outstanding: Cell::new(0),
        gauge: ctx.control.clone().map(|c| (c, ctx.worker)),
    });
    let last_sent = Rc::new(Cell::new(None::<u32>));
    let ticker =
        tokio::task::spawn_local(ticker(shared.clone(), ctx.tx.clone(), last_sent.clone()));
    match (&ctx.workload, &ctx.control) {
        (Workload::Open(_), Some(control)) => controlled(&ctx, &shared, control).await,
        (Workload::Open(schedule), None) => open_model(&ctx, &shared, schedule).await,
        (Workload::Closed(model), _) => closed_model(&ctx, &shared, model).await,
    }
    ticker.abort();
    let elapsed_s = Instant::now().saturating_duration_since(ctx.t0).as_secs() as u32;
    let second = match last_sent.get() {
        Some(s) => elapsed_s.max(s + 1),
        None => elapsed_s,
    };
    let tick = shared.rec.borrow_mut().take(second, true);
    let _ = ctx.tx.send(tick);
}

/// The closed model: this worker's users (every n-th of them), each on its own connection,
/// send, wait for the response, think, and send again until the duration is over.
async fn closed_model(ctx: &WorkerCtx, shared: &Rc<Shared>, model: &ClosedModel) {
    let end = ctx.t0 + Duration::from_secs_f64(model.duration_s);
    let think = Duration::from_secs_f64(model.think_s);
    let users: Vec<JoinHandle<()>> = (0..model.users as usize)
        .skip(ctx.worker)
        .step_by(ctx.workers)
        .map(|_| {
            let (sh, cancel) = (shared.clone(), ctx.cancel.clone());
            tokio::task::spawn_local(async move {
                sh.rec.borrow_mut().connection_opened();
                let mut conn: Option<Conn> = None;
                let mut body = Vec::new();
                while Instant::now() < end && !cancel.is_cancelled() {
                    // Closed model: a request is meant to start when it is sent.
                    let intended_ns = sh.ns_since_start(Instant::now());
                    sh.rec.borrow_mut().scheduled(intended_ns, false);
                    one_request(&sh, &mut conn, &mut body, intended_ns).await;
                    if !think.is_zero() {
                        tokio::select! {
                            _ = tokio::time::sleep(think) => {}
                            _ = cancel.cancelled() => {}
                        }
                    }
                }
                sh.rec.borrow_mut().connection_closed();
            })
        })
        .collect();
    for u in users {
        let _ = u.await;
    }
}

/// An arrival is due: queue it and wake an idle connection, or open one.
fn dispatch(
    ctx: &WorkerCtx,
    shared: &Rc<Shared>,
    connections: &mut Vec<JoinHandle<()>>,
    intended_ns: u64,
) {
    let (idle, open) = (shared.idle.get(), shared.open.get());
    shared
        .rec
        .borrow_mut()
        .scheduled(intended_ns, idle == 0 && open >= ctx.max_open);
    shared.queue.borrow_mut().push_back(intended_ns);
    shared.outstanding_add(1);
    if idle > 0 {
        shared.idle.set(idle - 1);
        shared.wake.notify_one();
    } else if open < ctx.max_open {
        shared.open.set(open + 1);
        shared.rec.borrow_mut().connection_opened();
        connections.push(tokio::task::spawn_local(connection(shared.clone())));
    }
}

/// The open model: arrivals on the schedule, handed to connections (see the module docs).
async fn open_model(ctx: &WorkerCtx, shared: &Rc<Shared>, schedule: &Schedule) {
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    let mut cancelled = false;
    for intended_ns in schedule.arrivals().skip(ctx.worker).step_by(ctx.workers) {
        let deadline = ctx.t0 + Duration::from_nanos(intended_ns);
        if Instant::now() < deadline {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = ctx.cancel.cancelled() => { cancelled = true; break; }
            }
        } else if ctx.cancel.is_cancelled() {
            cancelled = true;
            break;
        }
        dispatch(ctx, shared, &mut connections, intended_ns);
    }
    wind_down(shared, connections, cancelled).await;
}

/// The open model at rates set while the run goes ([`RateControl`]): each segment's even
/// arrivals, this worker taking every n-th, until the control says stop.
async fn controlled(ctx: &WorkerCtx, shared: &Rc<Shared>, control: &RateControl) {
    let mut rx = control.segment.subscribe();
    let mut segment = *rx.borrow_and_update();
    let mut k = 0u64;
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    let mut cancelled = false;
    while !segment.stop {
        let next = segment.arrival(k, ctx.worker, ctx.workers);
        let sleep = async {
            match next {
                Some(ns) => tokio::time::sleep_until(ctx.t0 + Duration::from_nanos(ns)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => { cancelled = true; break; }
            changed = rx.changed() => {
                if changed.is_err() {
                    break;
                }
                segment = *rx.borrow_and_update();
                k = 0;
            }
            _ = sleep => {
                if let Some(ns) = next {
                    dispatch(ctx, shared, &mut connections, ns);
                    k += 1;
                }
            }
        }
    }
    wind_down(shared, connections, cancelled).await;
}

/// The schedule is over (or stopped): connections finish the queue (or it is dropped,
/// counted as never sent, when `cancelled`), then end.
async fn wind_down(shared: &Rc<Shared>, connections: Vec<JoinHandle<()>>, cancelled: bool) {
    shared.done.set(true);
    if cancelled {
        let unsent = {
            let mut q = shared.queue.borrow_mut();
            let n = q.len() as u64;
            q.clear();
            n
        };
        shared.rec.borrow_mut().unsent(unsent);
        shared.outstanding_add(-(unsent as i64));
    }
    shared.wake.notify_waiters();
    for c in connections {
        let _ = c.await;
    }
}

/// Hands the worker's recorder over at every whole second from the start.
async fn ticker(
    shared: Rc<Shared>,
    tx: mpsc::UnboundedSender<Tick>,
    last_sent: Rc<Cell<Option<u32>>>,
) {
    let mut second = 0u32;
    loop {
        let boundary = shared.t0 + Duration::from_secs(u64::from(second) + 1);
        tokio::time::sleep_until(boundary).await;
        let tick = shared.rec.borrow_mut().take(second, false);
        last_sent.set(Some(second));
        if tx.send(tick).is_err() {
            return;
        }
        second += 1;
    }
}

/// One keep-alive connection: the hyper handle and the task driving the socket.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Close the socket now, even with a response still under way (after a timeout).
        self.driver.abort();
    }
}

async fn open_connection(addr: SocketAddr) -> Option<Conn> {
    let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    let driver = tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    Some(Conn { sender, driver })
}

/// A connection task: takes queued requests until the schedule is done and the queue empty.
async fn connection(sh: Rc<Shared>) {
    let mut conn: Option<Conn> = None;
    let mut body = Vec::new();
    loop {
        let next = sh.queue.borrow_mut().pop_front();
        let Some(intended_ns) = next else {
            if sh.done.get() {
                break;
            }
            sh.idle.set(sh.idle.get() + 1);
            sh.wake.notified().await;
            continue;
        };
        one_request(&sh, &mut conn, &mut body, intended_ns).await;
    }
    sh.open.set(sh.open.get().saturating_sub(1));
    sh.rec.borrow_mut().connection_closed();
}

/// Sends one request meant to start at `intended_ns`, on `conn`, and records it.
async fn one_request(sh: &Shared, conn: &mut Option<Conn>, body: &mut Vec<u8>, intended_ns: u64) {
    let picked = Instant::now();
    sh.rec.borrow_mut().picked();
    let result = tokio::time::timeout(sh.spec.timeout, exchange(sh, conn, body)).await;
    let (outcome, status, bytes) = match result {
        Ok(r) => r,
        Err(_) => {
            *conn = None;
            (Outcome::Timeout, 0, 0)
        }
    };
    let done = Instant::now();
    let timing = Timing {
        intended_ns,
        picked_ns: sh.ns_since_start(picked),
        done_ns: sh.ns_since_start(done),
    };
    sh.rec.borrow_mut().record(&timing, outcome, status, bytes);
    sh.outstanding_add(-1);
}

/// One request on `conn` (opened first when there is none or it was closed): its outcome,
/// status (0 without a response) and bytes received.
///
/// A kept-alive connection the server has just closed (nginx after `keepalive_requests`,
/// an idle timeout) is noticed either before sending or by hyper handing the unsent request
/// back: the request then goes out once more on a new connection. A request that was sent
/// is never sent again.
async fn exchange(
    sh: &Shared,
    conn: &mut Option<Conn>,
    body_buf: &mut Vec<u8>,
) -> (Outcome, u16, u64) {
    let mut request = sh.spec.request();
    let mut fresh = false;
    let response = loop {
        if conn.as_ref().is_none_or(|c| c.sender.is_closed()) {
            *conn = None;
            match open_connection(sh.addr).await {
                Some(c) => *conn = Some(c),
                None => return (Outcome::Connect, 0, 0),
            }
            fresh = true;
        }
        let Some(c) = conn.as_mut() else {
            return (Outcome::Connect, 0, 0);
        };
        if c.sender.ready().await.is_err() {
            *conn = None;
            if fresh {
                return (Outcome::Transport, 0, 0);
            }
            continue;
        }
        match c.sender.try_send_request(request).await {
            Ok(r) => break r,
            Err(mut e) => {
                *conn = None;
                match e.take_message() {
                    Some(unsent) if !fresh => request = unsent,
                    _ => return (Outcome::Transport, 0, 0),
                }
            }
        }
    };
    let status = response.status().as_u16();
    // Status line ("HTTP/1.1 200 OK\r\n" ≈ 17) and headers as parsed.
    let mut bytes: u64 = 17
        + response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().len() + v.len() + 4) as u64)
            .sum::<u64>()
        + 2;
    let check = sh.spec.expect_body.as_deref();
    body_buf.clear();
    let mut incoming = response.into_body();
    while let Some(frame) = incoming.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    bytes += data.len() as u64;
                    if check.is_some() {
                        body_buf.extend_from_slice(data);
                    }
                }
            }
            Err(_) => {
                *conn = None;
                return (Outcome::Transport, status, bytes);
            }
        }
    }
    let outcome = if !sh.spec.status_ok(status) {
        Outcome::Status
    } else if let Some(needle) = check
        && !contains(body_buf, needle)
    {
        Outcome::Body
    } else {
        Outcome::Ok
    };
    (outcome, status, bytes)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_refuse_what_they_cannot_send() {
        let s = RequestSpec::new(
            "http://127.0.0.1:8080/orders?id=1",
            "post",
            &["Content-Type: text/xml".into()],
            b"<a/>".to_vec(),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(s.label(), "POST /orders?id=1");
        assert_eq!(s.authority, "127.0.0.1:8080");
        assert_eq!(s.headers["content-type"], "text/xml");
        assert_eq!(s.headers["host"], "127.0.0.1:8080");
        assert!(s.bytes_per_request() > 4 + 30);
        assert!(
            RequestSpec::new("https://x/", "GET", &[], vec![], Duration::from_secs(1)).is_err()
        );
        assert!(
            RequestSpec::new(
                "http://x/",
                "GET",
                &["nocolon".into()],
                vec![],
                Duration::from_secs(1)
            )
            .is_err()
        );
        assert_eq!(
            parse_status_ranges("200-299, 404").unwrap(),
            [(200, 299), (404, 404)]
        );
        assert!(parse_status_ranges("299-200").is_err());
    }

    #[test]
    fn only_local_targets_unless_allowed() {
        let local = RequestSpec::new(
            "http://127.0.0.1:1/",
            "GET",
            &[],
            vec![],
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(resolve_target(&local, false).unwrap().port(), 1);
        let v6 = RequestSpec::new(
            "http://[::1]:2/",
            "GET",
            &[],
            vec![],
            Duration::from_secs(1),
        )
        .unwrap();
        assert!(resolve_target(&v6, false).unwrap().ip().is_loopback());
        let public = RequestSpec::new(
            "http://192.0.2.1:80/",
            "GET",
            &[],
            vec![],
            Duration::from_secs(1),
        )
        .unwrap();
        let err = resolve_target(&public, false).unwrap_err().to_string();
        assert!(err.contains("--allow-public-target"), "{err}");
        assert!(resolve_target(&public, true).is_ok());
        assert!(is_local("10.1.2.3".parse().unwrap()));
        assert!(is_local("fd00::1".parse().unwrap()));
        assert!(!is_local("8.8.8.8".parse().unwrap()));
    }
}
