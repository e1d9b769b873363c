//! The smallest axum service, to measure a load generator against: `GET /` answers
//! `200 ok` on one thread (a current-thread runtime, as nginx with one worker), so the
//! generator, not the service, is what a benchmark on a 2-core machine finds the limit of.
//!
//! ```text
//! cargo build --release --example hello_service
//! target/release/examples/hello_service --listen 127.0.0.1:18182
//! ```
//!
//! Listens on loopback only (it is a test target).

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use axum::serve::ListenerExt;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let listen: SocketAddr = args
        .iter()
        .position(|a| a == "--listen")
        .and_then(|i| args.get(i + 1))
        .map_or(Ok("127.0.0.1:18182".parse().unwrap()), |s| s.parse())
        .unwrap_or_else(|e| {
            eprintln!("hello_service: --listen: {e}");
            std::process::exit(2);
        });
    if !listen.ip().is_loopback() {
        eprintln!("hello_service: listen on loopback, not {}", listen.ip());
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async move {
        let app = Router::new().route("/", get(|| async { "ok\n" }));
        let listener = match tokio::net::TcpListener::bind(listen).await {
            // Responses go out at once, as nginx's `tcp_nodelay on` (its default).
            Ok(l) => l.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            }),
            Err(e) => {
                eprintln!("hello_service: cannot listen on {listen}: {e}");
                std::process::exit(1);
            }
        };
        eprintln!("hello_service: listening on http://{listen}/");
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("hello_service: {e}");
        }
    });
}
