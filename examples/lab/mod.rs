//! The lab: a service of known capacity, shared by `examples/pool_service.rs` (the
//! command) and the integration tests (in process). A fixed pool of `workers`, each request
//! taking a service time drawn uniformly from `service_min..=service_max`, so the capacity
//! is C = workers / mean service time (20 workers of 40–60 ms: 400 req/s; 30 workers of
//! 10 ms: 3,000 req/s).
//!
//! Past C it overloads in one of three ways ([`Overload`]):
//! - `503`: at most `queue` requests wait; one more is answered 503 at once.
//! - `queue`: every request waits its turn, however long; a client that gives up first
//!   (its timeout) has still booked its worker's time, as a server that cannot tell would.
//! - `refuse`: a listener with a small backlog that accepts a connection only while fewer
//!   than `workers + queue` are open (kept alive, each holds its slot until closed, as a
//!   thread-per-connection server's would); the rest wait in the kernel's backlog or are
//!   dropped there (Linux drops a SYN when the accept queue is full: the client sees its
//!   connect retried or timed out). The connections let in are served at C while they are
//!   enough to keep the workers busy; a connection closed after each response would hand
//!   its place to the dropped SYNs' retries, and the service would idle between them.
//!
//! Time is kept exactly: each worker's next free instant, not a timer per worker, so a
//! timer that fires late delays that response but never the next request's start, and the
//! capacity stays C on a busy machine. It counts what it served and refused each second
//! ([`Lab::tick`]) and measures its capacity: the mean served per second over the seconds
//! in which it was saturated (a request waited or was refused in that second and the one
//! before). Listens on loopback or a private address only: it is a test target.
#![allow(dead_code)] // each user (the example, the tests) takes a part

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// What the lab does with a request it cannot start at once when the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overload {
    /// A fast 503 once `queue` requests wait.
    Reject503,
    /// No bound: requests wait until served or until their client gives up.
    Queue,
    /// Connections beyond `workers + queue` are left to the listen backlog.
    Refuse,
}

impl Overload {
    /// `503`, `queue` or `refuse`.
    pub fn parse(s: &str) -> Option<Overload> {
        match s {
            "503" => Some(Overload::Reject503),
            "queue" => Some(Overload::Queue),
            "refuse" => Some(Overload::Refuse),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Overload::Reject503 => "503",
            Overload::Queue => "queue",
            Overload::Refuse => "refuse",
        }
    }
}

/// The lab's settings.
#[derive(Debug, Clone)]
pub struct LabConfig {
    pub workers: usize,
    /// Each request's service time is uniform in `service_min..=service_max`.
    pub service_min: Duration,
    pub service_max: Duration,
    /// Requests that may wait (`503`), or connections open beyond `workers` (`refuse`).
    pub queue: usize,
    pub overload: Overload,
    /// The listen backlog (`refuse`; the others use the system's default).
    pub backlog: u32,
}

impl LabConfig {
    /// `workers` of exactly `service`, `queue` waiting, fast 503s past that.
    pub fn fixed(workers: usize, service: Duration, queue: usize) -> LabConfig {
        LabConfig {
            workers,
            service_min: service,
            service_max: service,
            queue,
            overload: Overload::Reject503,
            backlog: 1024,
        }
    }

    /// Mean service time.
    pub fn mean_service(&self) -> Duration {
        (self.service_min + self.service_max) / 2
    }

    /// C = workers / mean service time, requests/s.
    pub fn capacity_rps(&self) -> f64 {
        self.workers as f64 / self.mean_service().as_secs_f64()
    }
}

/// A running lab's state and counters.
pub struct Lab {
    pub config: LabConfig,
    state: Mutex<LabState>,
    /// Requests answered 200.
    pub served: AtomicU64,
    /// Requests answered 503 (`503` only).
    pub refused: AtomicU64,
    /// Requests whose client went away before their answer.
    pub abandoned: AtomicU64,
    /// Requests that had to wait for a worker, or were refused.
    waited: AtomicU64,
    seconds: Mutex<Seconds>,
}

struct LabState {
    /// When each worker is next free.
    free_at: BinaryHeap<Reverse<Instant>>,
    /// Start times of the requests waiting (ascending).
    starts: VecDeque<Instant>,
    /// The service-time draw (splitmix64).
    seed: u64,
}

/// What [`Lab::tick`] keeps between seconds.
#[derive(Default)]
struct Seconds {
    last: (u64, u64, u64),
    /// Every worker was busy at the last tick.
    busy_before: bool,
    /// Seconds counted and requests served in them, for the measured capacity.
    saturated_s: u64,
    saturated_served: u64,
}

/// One second's counts, from [`Lab::tick`].
#[derive(Debug, Clone, Copy)]
pub struct Second {
    pub served: u64,
    pub refused: u64,
    pub saturated: bool,
    /// Mean served per second over the saturated seconds so far, or `None`.
    pub measured_rps: Option<f64>,
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Lab {
    pub fn new(config: LabConfig) -> Arc<Lab> {
        let now = Instant::now();
        Arc::new(Lab {
            state: Mutex::new(LabState {
                free_at: (0..config.workers.max(1)).map(|_| Reverse(now)).collect(),
                starts: VecDeque::new(),
                seed: 0x5EED,
            }),
            config,
            served: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
            waited: AtomicU64::new(0),
            seconds: Mutex::new(Seconds::default()),
        })
    }

    /// Books a worker for a request arriving now: when it is done, or `None` when it is
    /// refused (the queue is full).
    fn book(&self, now: Instant) -> Option<Instant> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.starts.front().is_some_and(|s| *s <= now) {
            st.starts.pop_front();
        }
        if self.config.overload == Overload::Reject503 && st.starts.len() >= self.config.queue {
            return None;
        }
        let (lo, hi) = (self.config.service_min, self.config.service_max);
        let service = if hi > lo {
            let u = (splitmix64(&mut st.seed) >> 11) as f64 / (1u64 << 53) as f64;
            lo + (hi - lo).mul_f64(u)
        } else {
            lo
        };
        let Reverse(free) = st.free_at.pop().unwrap_or(Reverse(now));
        let start = free.max(now);
        let done = start + service;
        st.free_at.push(Reverse(done));
        if start > now {
            st.starts.push_back(start);
            self.waited.fetch_add(1, Ordering::Relaxed);
        }
        Some(done)
    }

    /// The counts of the second since the last call (call it once a second).
    pub fn tick(&self) -> Second {
        let now = (
            self.served.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
            self.waited.load(Ordering::Relaxed),
        );
        let busy = {
            let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.free_at
                .peek()
                .is_some_and(|Reverse(f)| *f > Instant::now())
        };
        let mut s = self.seconds.lock().unwrap_or_else(|e| e.into_inner());
        let (served, refused, waited) = (now.0 - s.last.0, now.1 - s.last.1, now.2 - s.last.2);
        s.last = now;
        let saturated = waited + refused > 0 && busy && s.busy_before;
        if saturated {
            s.saturated_s += 1;
            s.saturated_served += served;
        }
        s.busy_before = busy;
        Second {
            served,
            refused,
            saturated,
            measured_rps: (s.saturated_s > 0)
                .then(|| s.saturated_served as f64 / s.saturated_s as f64),
        }
    }
}

/// A booked request: counted abandoned unless it was answered (its future dropped first).
struct Answer<'a>(&'a Lab, bool);

impl Drop for Answer<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.abandoned.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn work(State(lab): State<Arc<Lab>>) -> Response {
    let Some(done) = lab.book(Instant::now()) else {
        lab.refused.fetch_add(1, Ordering::Relaxed);
        return (StatusCode::SERVICE_UNAVAILABLE, "queue full").into_response();
    };
    let mut answer = Answer(&lab, false);
    tokio::time::sleep_until(done).await;
    answer.1 = true;
    lab.served.fetch_add(1, Ordering::Relaxed);
    drop(answer);
    "ok: served".into_response()
}

/// The lab's routes: `GET /work`.
pub fn router(lab: Arc<Lab>) -> Router {
    Router::new().route("/work", get(work)).with_state(lab)
}

/// Whether `addr` is one the lab may listen on (loopback or private).
pub fn local_address(addr: &SocketAddr) -> bool {
    let ip = addr.ip();
    ip.is_loopback()
        || match ip {
            std::net::IpAddr::V4(v4) => v4.is_private(),
            std::net::IpAddr::V6(_) => false,
        }
}

/// Binds `addr` with the lab's backlog (`refuse`) or the default, and serves the lab
/// there in a task of the current runtime. Returns the bound address.
pub async fn start(lab: Arc<Lab>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    if !local_address(&addr) {
        return Err(std::io::Error::other(format!(
            "the lab listens on loopback or a private address, not {}",
            addr.ip()
        )));
    }
    let app = router(lab.clone());
    if lab.config.overload == Overload::Refuse {
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        let listener = socket.listen(lab.config.backlog)?;
        let bound = listener.local_addr()?;
        let gated = Gated {
            listener,
            slots: Arc::new(Semaphore::new(lab.config.workers + lab.config.queue)),
        };
        tokio::spawn(async move {
            let _ = axum::serve(gated, app).await;
        });
        Ok(bound)
    } else {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(bound)
    }
}

/// A listener that accepts only while fewer than `workers + queue` connections are open;
/// a connection holds its slot until it is closed. The connections not accepted wait in the
/// listen backlog, or overflow it.
struct Gated {
    listener: TcpListener,
    slots: Arc<Semaphore>,
}

impl axum::serve::Listener for Gated {
    type Io = SlotStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (SlotStream, SocketAddr) {
        loop {
            let permit = match self.slots.clone().acquire_owned().await {
                Ok(p) => p,
                // never closed
                Err(_) => return std::future::pending().await,
            };
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    return (
                        SlotStream {
                            stream,
                            _slot: permit,
                        },
                        peer,
                    );
                }
                // e.g. too many open files: wait a little, as axum's own listener does
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// An accepted connection and its slot.
struct SlotStream {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
}

impl AsyncRead for SlotStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for SlotStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The kernel's count of connections dropped because a listen queue was full (Linux,
/// `ListenOverflows` in /proc/net/netstat; every listener on the machine), or `None`.
pub fn listen_overflows() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if !names.starts_with("TcpExt:") {
            continue;
        }
        let i = names
            .split_whitespace()
            .position(|n| n == "ListenOverflows")?;
        return values.split_whitespace().nth(i)?.parse().ok();
    }
    None
}
