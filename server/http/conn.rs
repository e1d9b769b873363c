//! Connections: the accept loop that serves the router over HTTP/1.1 with a cap on
//! connections served at once, a time-out on reading each request's headers (which also
//! closes kept-alive connections idle that long), and a shutdown with a deadline.
//!
//! When every slot is taken, a new connection does not wait for one to time out: the
//! connection idle longest (no request in flight: not yet sent its headers, or kept alive
//! between requests) of the address holding the most idle connections is closed to make
//! room. A client that holds hundreds of half-open connections and reopens each as soon
//! as it is closed only ever displaces its own, and an honest client's request is served
//! as soon as its headers arrive; a request in flight (a long poll, a download) is never
//! closed this way. Only when every connection has a request in flight do new ones wait.
//!
//! Why not `axum::serve`: it accepts without limit and sets no header-read time-out, so a
//! few hundred half-open connections (slowloris) exhaust the process's file descriptors
//! and the console stops answering; and its graceful shutdown waits for every connection
//! without end. The connection itself is hyper's (`http1::Builder` with
//! `header_read_timeout`, upgrades for the websocket).
//!
//! Must not know routes or handlers: it serves whatever router it is given.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use http_body_util::BodyExt;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::config::ConnectionLimits;

/// How often, at most, the "connection limit reached" warning is logged.
const LIMIT_LOG_EVERY: Duration = Duration::from_secs(10);

/// One connection being served, as the accept loop sees it to choose which to close when
/// every slot is taken.
struct Conn {
    peer: IpAddr,
    /// Requests in flight (their responses not yet fully written).
    busy: AtomicUsize,
    /// When the last request ended (or the connection was accepted), ms since the loop
    /// started.
    idle_since_ms: AtomicU64,
    /// Cancelled to close the connection.
    evict: CancellationToken,
}

/// The connections being served, by a number of the loop's own.
#[derive(Default)]
struct Conns {
    by_id: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Conns {
    fn add(&self, id: u64, conn: Arc<Conn>) {
        if let Ok(mut m) = self.by_id.lock() {
            m.insert(id, conn);
        }
    }

    fn remove(&self, id: u64) {
        if let Ok(mut m) = self.by_id.lock() {
            m.remove(&id);
        }
    }

    /// Closes one idle connection: of the address holding the most idle connections, the
    /// one idle longest. `None` when every connection has a request in flight (or is
    /// already being closed).
    fn evict_one(&self) -> Option<IpAddr> {
        let m = self.by_id.lock().ok()?;
        let idle = || {
            m.values()
                .filter(|c| c.busy.load(Ordering::Acquire) == 0 && !c.evict.is_cancelled())
        };
        let mut per_address: HashMap<IpAddr, usize> = HashMap::new();
        for c in idle() {
            *per_address.entry(c.peer).or_default() += 1;
        }
        let (&address, _) = per_address.iter().max_by_key(|(_, n)| **n)?;
        let victim = idle()
            .filter(|c| c.peer == address)
            .min_by_key(|c| c.idle_since_ms.load(Ordering::Acquire))?;
        victim.evict.cancel();
        Some(address)
    }
}

/// A request in flight on a connection: counted from the request's headers until its
/// response is fully written (the guard travels with the response body).
struct Busy {
    conn: Arc<Conn>,
    epoch: Instant,
}

impl Busy {
    fn new(conn: Arc<Conn>, epoch: Instant) -> Busy {
        conn.busy.fetch_add(1, Ordering::AcqRel);
        Busy { conn, epoch }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conn
            .idle_since_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Release);
        self.conn.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serves `app` on `listener` until `shutdown` completes; then stops accepting, lets the
/// requests in flight finish for up to `limits.shutdown_grace_s` seconds, and closes the
/// connections still open after that (logged with their count). With every slot taken,
/// a new connection makes room by closing an idle one (see the module's documentation).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let conns = Arc::new(Conns::default());
    let epoch = Instant::now();
    let mut next_id: u64 = 0;
    // Cancelled at shutdown: every connection finishes the request in flight and closes.
    let finish = CancellationToken::new();
    // Cancelled when the grace period is over: every connection task then drops its
    // connection, which closes the socket.
    let close_all = CancellationToken::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(limits.header_timeout_s.max(1)))
        .keep_alive(true);
    let mut last_limit_log: Option<Instant> = None;
    let mut last_evict_log: Option<Instant> = None;
    let mut evicted_since_log: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors (EMFILE) or a connection reset before it was
                    // accepted: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                match conns.evict_one() {
                    Some(address) => {
                        evicted_since_log += 1;
                        if last_evict_log.is_none_or(|t| t.elapsed() >= LIMIT_LOG_EVERY) {
                            tracing::warn!(
                                max_connections = limits.max_connections,
                                closed = evicted_since_log,
                                busiest = %address,
                                "connection limit reached; closing the longest-idle connections of the address holding the most to serve new ones"
                            );
                            last_evict_log = Some(Instant::now());
                            evicted_since_log = 0;
                        }
                    }
                    None if last_limit_log.is_none_or(|t| t.elapsed() >= LIMIT_LOG_EVERY) => {
                        tracing::warn!(
                            max_connections = limits.max_connections,
                            "connection limit reached with a request in flight on every connection; new connections wait until one ends (raise [server] max_connections in harrier.toml)"
                        );
                        last_limit_log = Some(Instant::now());
                    }
                    None => {}
                }
                tokio::select! {
                    p = slots.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                    _ = &mut shutdown => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let id = next_id;
        next_id += 1;
        let conn = Arc::new(Conn {
            peer: peer.ip(),
            busy: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(epoch.elapsed().as_millis() as u64),
            evict: CancellationToken::new(),
        });
        conns.add(id, conn.clone());
        // The client's address (sign-in throttling, the audit log) and the address it
        // connected to (the Host check accepts that address literally).
        let local = stream.local_addr().ok();
        let (router, served) = (app.clone(), conn.clone());
        let service = TowerToHyperService::new(tower::service_fn(
            move |mut req: axum::http::Request<hyper::body::Incoming>| {
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                if let Some(local) = local {
                    req.extensions_mut()
                        .insert(crate::http::guard::LocalAddr(local));
                }
                let busy = Busy::new(served.clone(), epoch);
                let router = router.clone();
                async move {
                    let res = router.oneshot(req).await?;
                    // The guard ends with the response's body, once it is written.
                    Ok::<_, std::convert::Infallible>(res.map(|body| {
                        axum::body::Body::new(body.map_frame(move |frame| {
                            let _ = &busy;
                            frame
                        }))
                    }))
                }
            },
        ));
        let conn_fut = builder
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let (finish, close, conns) = (finish.clone(), close_all.clone(), conns.clone());
        tokio::spawn(async move {
            tokio::pin!(conn_fut);
            let mut finishing = false;
            loop {
                tokio::select! {
                    result = conn_fut.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    _ = finish.cancelled(), if !finishing => {
                        conn_fut.as_mut().graceful_shutdown();
                        finishing = true;
                    }
                    _ = close.cancelled() => break,
                    _ = conn.evict.cancelled() => break,
                }
            }
            conns.remove(id);
            drop(permit);
        });
    }
    drop(listener);
    finish.cancel();
    let grace = Duration::from_secs(limits.shutdown_grace_s);
    let all = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    tokio::select! {
        _ = slots.acquire_many(all) => {}
        _ = tokio::time::sleep(grace) => {
            let open = limits.max_connections - slots.available_permits().min(limits.max_connections);
            tracing::warn!(
                connections = open,
                grace_s = limits.shutdown_grace_s,
                "connections still open after the shutdown grace period; closing them"
            );
            close_all.cancel();
        }
    }
    Ok(())
}
