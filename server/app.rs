//! The application: the router and the serve loop (the state is [`crate::state`]'s).
//!
//! `serve(listener, state, shutdown)` is what `main` and the tests call (tests bind
//! `127.0.0.1:0`). Each resource and page group owns its routes (`http::api::*`,
//! `http::console`); they are merged here
//! with the cross-cutting layers: request metrics, the request checks and security headers
//! (`http::guard`), tracing, panic catching, body limits.

use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Json, Router, middleware};

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::predicate::{DefaultPredicate, Predicate};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::trace::TraceLayer;

pub use crate::state::AppState;

/// Every route with the permission it requires (the table the router is built from).
pub fn routes() -> Routes {
    Routes::new()
        .route("/", GET, Public, get(|| async { Redirect::to("/console") }))
        .route("/healthz", GET, Public, get(healthz))
        // Prometheus' convention, and harrier's own scrape of itself: no credentials.
        .route("/metrics", GET, Public, get(metrics))
        .route(
            "/static/{*path}",
            GET,
            Public,
            get(crate::http::assets::serve),
        )
        .merge(crate::http::api::runs::routes())
        .merge(crate::http::api::write::routes())
        .merge(crate::http::api::otlp::routes())
        .merge(crate::http::api::load::routes())
        .merge(crate::http::api::routes::routes())
        .merge(crate::http::api::services::routes())
        .merge(crate::http::api::compare::routes())
        .merge(crate::http::api::alerts::routes())
        .merge(crate::http::api::access::routes())
        .merge(crate::http::console::routes())
}

/// The whole HTTP surface: [`routes`] behind the cross-cutting layers.
pub fn router(state: AppState) -> Router {
    let routes = routes()
        .map_router(|r| {
            r.route_layer(middleware::from_fn_with_state(
                state.clone(),
                crate::http::console::alerts::with_badge_on_pages,
            ))
        })
        .into_router()
        .fallback(crate::http::console::not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .route_layer(middleware::from_fn(crate::telemetry::track_http))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::http::auth::resolve,
        ));
    crate::http::guard::protect(routes, &state.config.site)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::http::auth::audit,
        ))
        // Level 1 of gzip and of brotli, as nginx compresses by default: on the 470 kB
        // JSON of 1,000 routes gzip 6 took ~6.6 ms and 60 kB, gzip 1 ~2.6 ms and 73 kB,
        // brotli 1 ~1.4 ms and 55 kB (brotli's default here, 4, 3.9 ms). Static files are
        // compressed once at their best (`http/assets.rs`), so this is only dynamic text.
        .layer(
            CompressionLayer::new()
                .quality(CompressionLevel::Precise(1))
                .compress_when(compressible()),
        )
        .layer(TraceLayer::new_for_http())
        .layer(CatchPanicLayer::custom(panic_response))
        .with_state(state)
}

/// Which answers are compressed (gzip or br, as the client accepts): text of 32 bytes and
/// more (tower-http's default: not images, not event streams), never an answer without a
/// body (`101 Switching Protocols` of a websocket, `204`, `304`).
fn compressible() -> impl Predicate {
    DefaultPredicate::new().and(
        |status: StatusCode,
         _: axum::http::Version,
         _: &axum::http::HeaderMap,
         _: &axum::http::Extensions| {
            !matches!(
                status,
                StatusCode::SWITCHING_PROTOCOLS | StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED
            )
        },
    )
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        Json(serde_json::json!({"error": format!("{method} is not allowed on {}", uri.path())})),
    )
        .into_response()
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked; the server goes on");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(serde_json::json!({"error": "internal error"})),
    )
        .into_response()
}

async fn healthz(State(state): State<AppState>) -> Response {
    match state.store.ping().await {
        Ok(()) => Json(serde_json::json!({"status": "ok"})).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "health check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({"status": "database unavailable"})),
            )
                .into_response()
        }
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        state.metrics.render(),
    )
        .into_response()
}

/// Serves `router(state)` on `listener` (and scrapes the targets, harrier's own `/metrics`
/// included, and evaluates the alert rules) until `shutdown` completes, then cancels the
/// state's token (ending websocket loops) and waits for requests in flight.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let token = state.shutdown.clone();
    tokio::spawn(crate::telemetry::upkeep(
        state.metrics.clone(),
        token.clone(),
    ));
    tokio::spawn(crate::services::fanout::run(
        state.store.clone(),
        state.hub.clone(),
        token.clone(),
    ));
    let live_stop = token.clone();
    let live_runs = tokio::spawn(state.live_runs.clone().run(token.clone()));
    let load_runs = tokio::spawn(state.load_runs.clone().run(token.clone()));
    tokio::spawn(state.otlp.clone().sweep(token.clone()));
    let scraper_state = state.clone();
    let self_addr = listener.local_addr().ok();
    if let Some(addr) = self_addr {
        // Scrapes and notifications never reach this server's own API.
        state.egress.add_own_addr(addr);
    }
    tokio::spawn(async move {
        let s = scraper_state;
        if let Err(e) = s
            .scraper
            .start(
                s.store.clone(),
                s.hub.clone(),
                s.shutdown.clone(),
                &s.config,
                self_addr,
            )
            .await
        {
            tracing::error!(error = %e, "starting the scrape loops failed");
        }
    });
    let alerts_wake = Arc::new(tokio::sync::Notify::new());
    let leader = Arc::new(crate::services::alerts::lease::Leader::new(
        state.store.clone(),
        state.config.alerts.evaluation_interval.ms(),
    ));
    tokio::spawn(crate::services::alerts::evaluator::run(
        state.store.clone(),
        state.hub.clone(),
        Arc::new(state.config.alerts.clone()),
        alerts_wake.clone(),
        leader.clone(),
        token.clone(),
    ));
    let external_url = state
        .config
        .alerts
        .external_url
        .clone()
        .unwrap_or_else(|| format!("http://{}", self_addr.map_or(state.config.listen, |a| a)));
    // A channel of harrier.toml wins over one stored through the API under the same
    // name (the API refuses such names, but the file may have changed since).
    let config_channels: Vec<String> = state
        .config
        .alerts
        .channels
        .iter()
        .map(|c| c.name.clone())
        .collect();
    match state.store.delete_channels_named(&config_channels).await {
        Ok(gone) => {
            for name in gone {
                tracing::warn!(channel = %name, "harrier.toml defines an alert channel of the name of one added through the API; the API's one is deleted");
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "deleting stored alert channels named in harrier.toml failed")
        }
    }
    let dispatch = crate::services::alerts::notify::Dispatch {
        channels: state.config.alerts.channels.clone(),
        external_url,
        evaluation_interval_ms: state.config.alerts.evaluation_interval.ms(),
    };
    tokio::spawn(crate::services::alerts::notify::run(
        state.store.clone(),
        state.egress.clone(),
        Arc::new(dispatch),
        alerts_wake,
        leader.clone(),
        token.clone(),
    ));
    let limits = state.config.connections;
    let (scraper, store) = (state.scraper.clone(), state.store.clone());
    let app = router(state);
    let stop = token.clone();
    let served = crate::http::conn::serve(listener, app, limits, async move {
        tokio::select! {
            _ = shutdown => {}
            _ = stop.cancelled() => {}
        }
        token.cancel();
    })
    .await;
    // Open live runs are stored as complete before the process ends; another replica
    // takes the alerts lease at its next round.
    live_stop.cancel();
    let _ = live_runs.await;
    let _ = load_runs.await;
    leader.release().await;
    if store.shared() {
        scraper.leave(&store).await;
    }
    served
}
