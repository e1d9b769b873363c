//! Connections: the accept loop that serves the router over HTTP/1.1 with a cap on
//! connections served at once, a time-out on reading each request's headers (which also
//! closes kept-alive connections idle that long), and a shutdown with a deadline.
//!
//! Why not `axum::serve`: it accepts without limit and sets no header-read time-out, so a
//! few hundred half-open connections (slowloris) exhaust the process's file descriptors
//! and the console stops answering; and its graceful shutdown waits for every connection
//! without end. The connection itself is hyper's (`http1::Builder` with
//! `header_read_timeout`, upgrades for the websocket).
//!
//! Must not know routes or handlers: it serves whatever router it is given.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
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

/// Serves `app` on `listener` until `shutdown` completes; then stops accepting, lets the
/// requests in flight finish for up to `limits.shutdown_grace_s` seconds, and closes the
/// connections still open after that (logged with their count).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
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
    tokio::pin!(shutdown);
    loop {
        if slots.available_permits() == 0
            && last_limit_log.is_none_or(|t| t.elapsed() >= LIMIT_LOG_EVERY)
        {
            tracing::warn!(
                max_connections = limits.max_connections,
                "connection limit reached; new connections wait until one closes (raise [server] max_connections in harrier.toml)"
            );
            last_limit_log = Some(Instant::now());
        }
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = &mut shutdown => break,
        };
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
        let _ = stream.set_nodelay(true);
        // The client's address (sign-in throttling, the audit log) and the address it
        // connected to (the Host check accepts that address literally).
        let local = stream.local_addr().ok();
        let service = TowerToHyperService::new(app.clone().map_request(
            move |mut req: axum::http::Request<hyper::body::Incoming>| {
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                if let Some(local) = local {
                    req.extensions_mut()
                        .insert(crate::http::guard::LocalAddr(local));
                }
                req
            },
        ));
        let conn = builder
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades();
        let (finish, close) = (finish.clone(), close_all.clone());
        tokio::spawn(async move {
            tokio::pin!(conn);
            let mut finishing = false;
            loop {
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                        break;
                    }
                    _ = finish.cancelled(), if !finishing => {
                        conn.as_mut().graceful_shutdown();
                        finishing = true;
                    }
                    _ = close.cancelled() => break,
                }
            }
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
