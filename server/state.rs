//! What every request handler gets: the store, the live hub, the scrape loops, the
//! settings and the metrics handle ([`AppState`]).

use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::services::egress::Egress;
use crate::services::live::Hub;
use crate::services::live_runs::LiveRuns;
use crate::store::Store;

/// Everything a request handler may need; cheap to clone.
///
/// - `store`: the SQLite store;
/// - `hub`: the live broadcast hub behind `/api/v1/live`;
/// - `metrics`: renders `/metrics`;
/// - `config`: resolved settings;
/// - `live_runs`: runs being streamed in (InfluxDB line protocol);
/// - `load_runs`: runs of `harrier load … --server` streaming in;
/// - `shutdown`: cancelled when the server stops (websocket loops end on it);
/// - `scraper`: the per-target scrape loops (`/api/v1/targets` adds and removes them);
/// - `egress`: where outbound requests may go;
/// - `otlp`: the OTLP metrics receiver.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub hub: Hub,
    pub metrics: PrometheusHandle,
    pub config: Arc<Config>,
    pub live_runs: LiveRuns,
    /// Load runs streaming in from `harrier load … --server`.
    pub load_runs: crate::services::load_runs::LoadRuns,
    /// Load tests started from the console (`[load]`).
    pub load_tests: crate::services::load_tests::LoadTests,
    /// `harrier load agent` processes waiting for their part of a console load test.
    pub load_agents: crate::services::load_agents::LoadAgents,
    pub shutdown: CancellationToken,
    /// The scrape loops (started by [`serve`]).
    pub scraper: crate::services::scrape::Scraper,
    /// The egress policy in force for scrapes and notifications (`[egress]`; `serve`
    /// adds the listen address).
    pub egress: Egress,
    /// Sign-in: who is asking, sessions, tokens.
    pub auth: crate::services::auth::Auth,
    /// Single sign-on with an OpenID Connect provider (`[oidc]`), when configured.
    pub sso: Option<Arc<crate::services::oidc::Sso>>,
    /// The OTLP metrics receiver (`POST /v1/metrics`).
    pub otlp: crate::services::otlp::Receiver,
}

impl AppState {
    /// State over an open store with a fresh hub and the process-wide metrics recorder.
    pub fn new(store: Store, config: Config) -> AppState {
        let hub = Hub::new();
        let idle = std::time::Duration::from_secs(config.live_idle_timeout_s);
        let egress = Egress::new(config.egress.clone());
        let auth_proxy = config.auth_proxy.clone();
        // Single sign-on turns sign-in on before anyone has signed on.
        let auth_required = (!config.listen.ip().is_loopback() && !config.insecure_no_auth)
            || config.oidc.is_some();
        let sso = config
            .oidc
            .clone()
            .map(|o| Arc::new(crate::services::oidc::Sso::new(o, store.clone(), &egress)));
        let secure_cookies = config
            .site
            .public_origin()
            .is_some_and(|o| o.starts_with("https://"));
        let load_runs = crate::services::load_runs::LoadRuns::new(store.clone(), hub.clone());
        let load_agents = crate::services::load_agents::LoadAgents::new();
        let live_runs = LiveRuns::new(store.clone(), hub.clone(), idle, config.run_limits);
        let otlp =
            crate::services::otlp::Receiver::new(store.clone(), hub.clone(), live_runs.clone());
        AppState {
            live_runs,
            load_runs: load_runs.clone(),
            load_tests: crate::services::load_tests::LoadTests::new(
                config.load_tests.clone(),
                load_runs,
                load_agents.clone(),
            ),
            load_agents,
            hub,
            metrics: crate::telemetry::install(),
            config: Arc::new(config),
            shutdown: CancellationToken::new(),
            scraper: crate::services::scrape::Scraper::new(&egress),
            auth: crate::services::auth::Auth::new(
                store.clone(),
                secure_cookies,
                auth_proxy,
                auth_required,
            ),
            sso,
            egress,
            otlp,
            store,
        }
    }
}

impl AppState {
    /// The Apdex threshold T, ms: `asked` when it is given and positive, else the
    /// configured one (500 ms by default).
    pub fn apdex_t_ms(&self, asked: Option<u64>) -> u64 {
        asked.filter(|t| *t > 0).unwrap_or(self.config.apdex_t_ms)
    }
}
