//! The console: server-rendered pages under `/console` (askama templates in `web/`).
//!
//! Pages read the store and never write. Everything but the charts reads without
//! JavaScript; chart data goes into a JSON data island read by `static/harrier.js`.

pub mod alerts;
mod compare;
mod routes;
mod services;
mod sign_in;

/// Template filters.
mod filters {
    /// The URL of a static file by its hashed name: `{{ "harrier.css"|asset }}` →
    /// `/static/harrier.3f9a0c1d2e.css` (see [`crate::http::assets::url`]).
    #[askama::filter_fn]
    pub fn asset(file: &str, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(crate::http::assets::url(file))
    }

    /// Shows "–" (undefined) as a muted dash; anything else as escaped text.
    #[askama::filter_fn]
    pub fn nullable(
        s: &str,
        _: &dyn askama::Values,
    ) -> askama::Result<askama::filters::Safe<String>> {
        if s == crate::domain::format::NONE {
            return Ok(askama::filters::Safe(
                "<span class=\"num-null\">–</span>".to_string(),
            ));
        }
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '"' => out.push_str("&quot;"),
                '\'' => out.push_str("&#39;"),
                c => out.push(c),
            }
        }
        Ok(askama::filters::Safe(out))
    }
}

/// How a tool is named in the console.
pub fn tool_name(tool: &str) -> String {
    match tool {
        "jmeter" => "JMeter".into(),
        "gatling" => "Gatling".into(),
        "locust" => "Locust".into(),
        "soapui" => "SoapUI".into(),
        "vegeta" => "Vegeta".into(),
        "artillery" => "Artillery".into(),
        "taurus" => "Taurus".into(),
        other => other.into(),
    }
}

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::domain::format;
use crate::domain::runs::Stats;
use crate::domain::runs::capacity::Capacity;
use crate::domain::runs::distribution::Apdex;
use crate::error::Error;
use crate::state::AppState;
use crate::store::{ErrorRow, RejectedRowRow, RunDetail};
use crate::views::runs::RunListItem;

/// Console routes.
pub fn routes() -> Routes {
    Routes::new()
        .route("/console", GET, Read, get(overview))
        .route("/console/", GET, Read, get(overview))
        .route("/console/runs", GET, Read, get(runs))
        .route("/console/runs/{id}", GET, Read, get(run))
        .route("/console/alerts", GET, Read, get(alerts::page))
        .merge(routes::routes())
        .merge(services::routes())
        .merge(compare::routes())
        .merge(sign_in::routes())
}

/// A console error, rendered as an HTML page.
pub struct PageError(pub Error);

impl<E: Into<Error>> From<E> for PageError {
    fn from(e: E) -> Self {
        PageError(e.into())
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "error.html")]
struct ErrorPage {
    nav: &'static str,
    status: u16,
    title: String,
    message: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = self.0.status();
        let page = ErrorPage {
            nav: "",
            status: status.as_u16(),
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            message: self.0.public_message(),
        };
        (status, page).into_response()
    }
}

/// The fallback for unknown paths: JSON under `/api`, an error page elsewhere.
pub async fn not_found(uri: Uri) -> Response {
    let what = format!("page {}", uri.path());
    if uri.path().starts_with("/api/") {
        return Error::NotFound(what).into_response();
    }
    PageError(Error::NotFound(what)).into_response()
}

/// One run as a row of a runs table: raw values for sorting, formatted text for people.
pub struct RunRowView {
    pub id: i64,
    pub url: String,
    pub name: String,
    pub scenario: String,
    pub tool: String,
    pub tool_name: String,
    pub summary_only: bool,
    /// Still being streamed in (a live run).
    pub live: bool,
    pub started_raw: i64,
    pub started: String,
    /// True when the tool gave no start time and `started` is the import time.
    pub started_is_import: bool,
    pub duration_raw: String,
    pub duration: String,
    pub count_raw: i64,
    pub count: String,
    pub error_pct_raw: String,
    pub error_pct: String,
    pub error_bad: bool,
    pub p95_raw: String,
    pub p95: String,
    pub throughput_raw: String,
    pub throughput: String,
    pub successful_raw: String,
    pub successful: String,
    pub capacity_raw: String,
    pub capacity: String,
    /// "at 20 users" (a ramp's), "search" (a search's answer), or empty.
    pub capacity_users: String,
    /// Whether the run's latest `harrier check` passed its gates (`None`: never checked).
    pub gate: Option<bool>,
}

impl RunRowView {
    /// Rows of `runs` with the verdicts of their latest checks.
    async fn with_verdicts<'a>(
        state: &AppState,
        runs: impl Iterator<Item = &'a RunListItem>,
    ) -> Result<Vec<RunRowView>, PageError> {
        let verdicts: std::collections::HashMap<i64, bool> = state
            .store
            .latest_check_verdicts()
            .await?
            .into_iter()
            .collect();
        Ok(runs
            .map(|r| RunRowView {
                gate: verdicts.get(&r.id).copied(),
                ..RunRowView::from(r)
            })
            .collect())
    }
}

fn raw_f(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

impl From<&RunListItem> for RunRowView {
    fn from(r: &RunListItem) -> Self {
        RunRowView {
            id: r.id,
            url: r.url.clone(),
            name: r.name.clone(),
            scenario: r.scenario.clone().unwrap_or_default(),
            tool: r.tool.clone(),
            tool_name: tool_name(&r.tool),
            summary_only: r.summary_only && !r.has_series,
            live: r.status == "live",
            started_raw: r.started_at_ms.unwrap_or(r.imported_at_ms),
            started: format::time(r.started_at_ms.or(Some(r.imported_at_ms))),
            started_is_import: r.started_at_ms.is_none(),
            duration_raw: r.duration_ms.map(|d| d.to_string()).unwrap_or_default(),
            duration: format::duration(r.duration_ms),
            count_raw: r.count,
            count: format::count(r.count),
            error_pct_raw: raw_f(r.error_pct),
            error_pct: format::pct(r.error_pct),
            error_bad: r.error_pct.is_some_and(|p| p > 0.0),
            p95_raw: raw_f(r.p95_ms),
            p95: format::ms(r.p95_ms),
            throughput_raw: raw_f(r.throughput_rps),
            throughput: format::rps(r.throughput_rps),
            successful_raw: raw_f(r.successful_rps),
            successful: format::rps(r.successful_rps),
            capacity_raw: raw_f(r.capacity_rps),
            capacity: format::rps(r.capacity_rps),
            capacity_users: match (r.capacity_rps, r.capacity_users, r.tool.as_str()) {
                (Some(_), Some(u), _) => format!("at {} users", format::int(i64::from(u))),
                (Some(_), None, "harrier") => "search".to_string(),
                _ => String::new(),
            },
            gate: None,
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
struct OverviewPage {
    nav: &'static str,
    /// This server's URL, for the `harrier import --server` hint.
    server_url: String,
    run_count: usize,
    runs: Vec<RunRowView>,
    /// Rows the live table keeps.
    limit: Option<usize>,
    routes: routes::RoutesSummary,
    /// The active alerts, the first [`OVERVIEW_ALERTS`] of them built.
    alerts: alerts::ActiveAlerts,
    /// Alert rules in force.
    rule_count: usize,
    /// How often rules are evaluated ("15 s").
    interval: String,
}

/// Recent runs shown on the overview (the live table keeps as many).
const OVERVIEW_RUNS: usize = 10;
/// Active alerts listed on the overview (the alerts page lists them all).
const OVERVIEW_ALERTS: usize = 5;

/// This server's URL as its users reach it, for the commands the console suggests:
/// `public_url` when set, else the request's `Host` (the address the browser used), else
/// the listen address.
fn server_url(state: &AppState, headers: &axum::http::HeaderMap) -> String {
    if let Some(url) = &state.config.public_url {
        return url.trim_end_matches('/').to_string();
    }
    match headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()))
    {
        Some(host) => format!("http://{host}"),
        None => format!("http://{}", state.config.listen),
    }
}

async fn overview(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<OverviewPage, PageError> {
    let all = crate::views::runs::list_runs(&state.store).await?;
    let now = crate::now_ms();
    let rules = state.store.list_alert_rules().await?;
    let active = state.store.list_alerts().await?;
    let muter =
        crate::domain::alerts::silence::Muter::new(&state.store.active_silences(now).await?, now);
    // The routes the active alerts link to; none to look up when nothing fires.
    let index = if active.is_empty() {
        alerts::RouteIndex::default()
    } else {
        alerts::route_index(&state).await?
    };
    Ok(OverviewPage {
        nav: "overview",
        server_url: server_url(&state, &headers),
        run_count: all.len(),
        runs: RunRowView::with_verdicts(&state, all.iter().take(OVERVIEW_RUNS)).await?,
        limit: Some(OVERVIEW_RUNS),
        routes: routes::summary(&state).await?,
        alerts: alerts::active_rows(&active, &rules, &index, &muter, now, OVERVIEW_ALERTS),
        rule_count: rules.len(),
        interval: alerts::interval_text(state.config.alerts.evaluation_interval.ms()),
    })
}

#[derive(Template, WebTemplate)]
#[template(path = "runs.html")]
struct RunsPage {
    nav: &'static str,
    /// This server's URL, for the `harrier import --server` hint.
    server_url: String,
    runs: Vec<RunRowView>,
    limit: Option<usize>,
    /// Known scenarios, offered in the upload form.
    scenarios: Vec<String>,
    /// The "New load test" form, when `[load]` allows it.
    load_form: Option<LoadFormView>,
}

/// The Runs page's "New load test" form: the server's limits, and the test under way.
struct LoadFormView {
    max_rate: String,
    /// The limit as the form's default max rate (no separators).
    max_rate_raw: String,
    max_duration: String,
    public_targets: bool,
    /// (run id, started by) of the test under way.
    running: Option<(i64, String)>,
    /// `harrier load agent` processes waiting for work.
    agents_waiting: usize,
}

async fn runs(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<RunsPage, PageError> {
    let runs = crate::views::runs::list_runs(&state.store).await?;
    let mut scenarios: Vec<String> = runs.iter().filter_map(|r| r.scenario.clone()).collect();
    scenarios.sort();
    scenarios.dedup();
    let policy = state.load_tests.policy();
    let load_form = if policy.enabled {
        Some(LoadFormView {
            max_rate: format::int(policy.max_rate.round() as i64),
            max_rate_raw: format!("{}", policy.max_rate.round()),
            max_duration: format::duration(Some((policy.max_duration_s * 1000.0).round() as i64)),
            public_targets: policy.allow_public_targets,
            agents_waiting: state.load_agents.list().await.len(),
            running: state
                .load_tests
                .running()
                .await
                .map(|r| (r.id, r.started_by)),
        })
    } else {
        None
    };
    Ok(RunsPage {
        nav: "runs",
        server_url: server_url(&state, &headers),
        runs: RunRowView::with_verdicts(&state, runs.iter()).await?,
        limit: None,
        scenarios,
        load_form,
    })
}

/// A column of the per-label table.
pub struct Column {
    pub name: &'static str,
    pub unit: &'static str,
    pub title: &'static str,
}

/// Columns of the per-label table (same order as [`StatsRowView::cells`]).
const COLUMNS: &[Column] = &[
    Column {
        name: "Samples",
        unit: "",
        title: "Requests, counted once; sub-results are not samples",
    },
    Column {
        name: "Errors",
        unit: "",
        title: "Samples whose success flag is false",
    },
    Column {
        name: "Error",
        unit: "%",
        title: "errors / samples × 100",
    },
    Column {
        name: "Min",
        unit: "ms",
        title: "Fastest sample",
    },
    Column {
        name: "Mean",
        unit: "ms",
        title: "Arithmetic mean of the response times",
    },
    Column {
        name: "p50",
        unit: "ms",
        title: "Nearest rank on exact values",
    },
    Column {
        name: "p90",
        unit: "ms",
        title: "Nearest rank on exact values",
    },
    Column {
        name: "p95",
        unit: "ms",
        title: "Nearest rank on exact values",
    },
    Column {
        name: "p99",
        unit: "ms",
        title: "Nearest rank on exact values",
    },
    Column {
        name: "Max",
        unit: "ms",
        title: "Slowest sample",
    },
    Column {
        name: "Throughput",
        unit: "req/s",
        title: "count / (last end − first start)",
    },
    Column {
        name: "Received",
        unit: "KB/s",
        title: "bytes received / 1024 / (last end − first start)",
    },
    Column {
        name: "Sent",
        unit: "KB/s",
        title: "bytes sent / 1024 / (last end − first start)",
    },
];

/// One cell: raw value for sorting, text for people (unit in the column header).
pub struct Cell {
    pub raw: String,
    pub text: String,
    pub bad: bool,
}

/// One row of the per-label table.
pub struct StatsRowView {
    pub label: String,
    pub is_transaction: bool,
    pub cells: Vec<Cell>,
    /// Apdex score (0–1) for the page's T.
    pub apdex: Cell,
}

fn cell_f(v: Option<f64>, decimals: usize) -> Cell {
    Cell {
        raw: raw_f(v),
        text: v.map_or_else(|| format::NONE.to_string(), |v| format::float(v, decimals)),
        bad: false,
    }
}

fn cell_i(v: u64, bad: bool) -> Cell {
    Cell {
        raw: v.to_string(),
        text: format::int(v as i64),
        bad,
    }
}

/// KB/s over the scope's window (`None` without a window).
fn kb_per_s(bytes: u64, window_ms: Option<i64>) -> Option<f64> {
    window_ms
        .filter(|w| *w > 0)
        .map(|w| bytes as f64 / 1024.0 / (w as f64 / 1000.0))
}

/// Response times: integers as integers, fractions to one decimal ("43.6").
fn cell_ms(v: Option<f64>) -> Cell {
    let decimals = if v.is_some_and(|v| v.fract() != 0.0) {
        1
    } else {
        0
    };
    cell_f(v, decimals)
}

/// Which byte columns the run's tool wrote (a run total of 0 means the column was absent,
/// e.g. JMeter 2.13 has no `sentBytes`): those show "–", not a false 0.
#[derive(Clone, Copy)]
struct BytesKnown {
    received: bool,
    sent: bool,
}

fn stats_row(
    label: &str,
    is_transaction: bool,
    s: &Stats,
    known: BytesKnown,
    apdex: Option<Apdex>,
) -> StatsRowView {
    let kb = |b: u64, known: bool| {
        if known {
            kb_per_s(b, s.window_ms)
        } else {
            None
        }
    };
    let mut error_pct = cell_f(s.error_pct, 2);
    error_pct.bad = s.error_pct.is_some_and(|p| p > 0.0);
    let mut apdex = cell_f(apdex.map(|a| a.score), 2);
    apdex.bad = apdex.raw.parse::<f64>().is_ok_and(|score| score < 0.7);
    StatsRowView {
        label: label.to_string(),
        is_transaction,
        apdex,
        cells: vec![
            cell_i(s.count, false),
            cell_i(s.errors, s.errors > 0),
            error_pct,
            cell_ms(s.min_ms),
            cell_ms(s.mean_ms),
            cell_ms(s.p50_ms),
            cell_ms(s.p90_ms),
            cell_ms(s.p95_ms),
            cell_ms(s.p99_ms),
            cell_ms(s.max_ms),
            cell_f(s.throughput_rps, 1),
            cell_f(kb(s.bytes_received, known.received), 2),
            cell_f(kb(s.bytes_sent, known.sent), 2),
        ],
    }
}

/// A KPI card of the run page: value and unit apart, a caption below.
pub struct Kpi {
    pub label: &'static str,
    pub value: String,
    pub unit: &'static str,
    pub caption: String,
    pub title: &'static str,
    /// "", " is-warn" or " is-err".
    pub class: &'static str,
}

/// Splits "1.23 s" into ("1.23", "s").
fn split_unit(text: String) -> (String, &'static str) {
    for unit in ["ms", "s", "%", "req/s"] {
        if let Some(v) = text.strip_suffix(&format!(" {unit}")) {
            return (v.to_string(), unit);
        }
    }
    (text, "")
}

/// A KPI card: the value's unit split off ("1.23 s" → "1.23", "s"), no warning class.
fn kpi(label: &'static str, value: String, caption: String, title: &'static str) -> Kpi {
    let (value, unit) = split_unit(value);
    Kpi {
        label,
        value,
        unit,
        caption,
        title,
        class: "",
    }
}

/// Error % from which a figure is shown red; above 0 and below it, amber.
const ERROR_RED_PCT: f64 = 5.0;

/// An error-% card's class: red from [`ERROR_RED_PCT`], amber above 0.
fn error_class(error_pct: Option<f64>) -> &'static str {
    match error_pct {
        Some(p) if p >= ERROR_RED_PCT => " is-err",
        Some(p) if p > 0.0 => " is-warn",
        _ => "",
    }
}

/// A route's error-% cell class, by the cards' rule: `" bad"` (red) from
/// [`ERROR_RED_PCT`], `" warn"` (amber) above 0 (`static/routes.js` applies the same).
pub fn error_tone(error_pct: Option<f64>) -> &'static str {
    match error_pct {
        Some(p) if p >= ERROR_RED_PCT => " bad",
        Some(p) if p > 0.0 => " warn",
        _ => "",
    }
}

/// The KPI cards of a `harrier load find` run: the figures at the rate it sustained (its
/// confirmation step), not every step mixed; `None` when it sustained no rate.
fn search_kpis(s: &crate::domain::load::SearchOutcome) -> Option<Vec<Kpi>> {
    use crate::domain::load::search::{Phase, Verdict};
    let y = s.sustains_rps?;
    let at_y = s
        .steps
        .iter()
        .filter(|st| st.verdict == Verdict::Pass && (st.offered_rps - y).abs() < 1e-6)
        .max_by_key(|st| (st.phase == Phase::Confirm, st.seconds))?;
    let card = kpi;
    let mut errors = card(
        "Error rate at that rate",
        format::pct(at_y.error_pct),
        format!("{} timed out", format::int(at_y.timeouts as i64)),
        "errors / completed requests × 100 over the step's steady seconds",
    );
    errors.class = error_class(at_y.error_pct);
    Some(vec![
        card(
            "Sustained rate",
            format::rps(Some(y)),
            format!(
                "{} · {} steps",
                if s.confirmed {
                    format!("confirmed over {} s", at_y.seconds)
                } else {
                    "not confirmed".into()
                },
                s.steps.len()
            ),
            "The highest offered rate that passed (Y)",
        ),
        card(
            "Throughput at that rate",
            format::rps(at_y.achieved_rps),
            match s.falls_over_rps {
                Some(x) => format!(
                    "falls over at {}",
                    crate::domain::load::search::rate_text(x)
                ),
                None => "did not fall over".into(),
            },
            "Completed requests per steady second of the confirmation step",
        ),
        card(
            "p99 at that rate",
            format::ms(at_y.p99_ms),
            format!(
                "p95 {} · p50 {}",
                format::ms(at_y.p95_ms),
                format::ms(at_y.p50_ms)
            ),
            "Intended start → response (corrected for coordinated omission)",
        ),
        errors,
        card(
            "In flight at that rate",
            at_y.in_flight
                .map_or_else(|| format::NONE.to_string(), |n| format::float(n, 1)),
            "requests, by Little's law".into(),
            "achieved rate × mean latency",
        ),
    ])
}

fn kpis(run: &RunDetail) -> Vec<Kpi> {
    let o = &run.overall;
    let mut error = kpi(
        "Error rate",
        format::pct(o.error_pct),
        format!("{} errors", format::int(o.errors as i64)),
        "errors / requests × 100",
    );
    error.class = error_class(o.error_pct);
    let rule = if run.summary_only {
        "as reported by the tool"
    } else {
        "nearest rank on exact values"
    };
    vec![
        kpi(
            "Requests",
            format::count(o.count as i64),
            match run.labels.len() {
                1 => "1 label".to_string(),
                n => format!("{n} labels"),
            },
            "Samples in the run total",
        ),
        error,
        kpi(
            "p95 response time",
            format::ms(o.p95_ms),
            format!(
                "p99 {} · p50 {}",
                format::ms(o.p99_ms),
                format::ms(o.p50_ms)
            ),
            rule,
        ),
        kpi(
            "Throughput",
            format::rps(o.throughput_rps),
            if run.summary_only {
                "as reported by the tool".into()
            } else if run.tool == "jmeter" {
                "as JMeter computes it".into()
            } else {
                "all completed requests".into()
            },
            "count / (last end − first start): every completed request, failed ones included",
        ),
        kpi(
            "Successful throughput",
            format::rps(o.successful_rps()),
            "requests that did not fail".into(),
            "(count − errors) / (last end − first start): what capacity is measured on",
        ),
        kpi(
            "Mean response time",
            format::ms(o.mean_ms),
            format!(
                "min {} · max {}",
                format::ms(o.min_ms),
                format::ms(o.max_ms)
            ),
            "Arithmetic mean; min and max are the fastest and slowest single samples",
        ),
    ]
}

/// The run page's saturation statement ([`Capacity::statement`] and its figures).
pub struct CapacityView {
    pub headline: String,
    pub detail: String,
    /// True when throughput stopped growing or a limit was passed (a warning callout).
    pub saturated: bool,
}

fn capacity_text(c: &Capacity) -> CapacityView {
    let mut headline = c.statement.clone();
    if let Some(first) = headline.get(..1) {
        headline.replace_range(..1, &first.to_uppercase());
    }
    let mut detail = Vec::new();
    if let Some(k) = &c.knee {
        let completed = if k.completed_rps > 1.01 * k.throughput_rps {
            format!(
                "; counting failed responses, {} completed there — the rest failed",
                format::rps(Some(k.completed_rps))
            )
        } else {
            String::new()
        };
        detail.push(format!(
            "Successful throughput grows by about {} per user, then levels off at {} from about {} users (first reached at {}){completed}.",
            format::rps(Some(k.growth_rps_per_user)),
            format::rps(Some(k.throughput_rps)),
            format::int(i64::from(k.users)),
            format::time(Some(k.at_ms))
        ));
    }
    if c.limited_by.as_deref() != Some("throughput")
        && let (Some(rps), Some(users)) = (c.throughput_rps, c.users)
    {
        detail.push(format!(
            "Capacity: {} successful at {} users, the last load level before the first breach.",
            format::rps(Some(rps)),
            format::int(i64::from(users))
        ));
    }
    if let Some(b) = &c.latency_breach {
        detail.push(format!(
            "p95 {} at {} users, against {} at low load (limit {}).",
            format::ms(Some(b.p95_ms as f64)),
            format::int(i64::from(b.users)),
            format::ms(c.low_load_p95_ms.map(|v| v as f64)),
            format::ms(Some(b.limit_ms))
        ));
    }
    if let Some(b) = &c.error_breach {
        detail.push(format!(
            "Error % {} at {} users.",
            format::pct(Some(b.error_pct)),
            format::int(i64::from(b.users))
        ));
    }
    CapacityView {
        headline,
        detail: detail.join(" "),
        saturated: c.knee.is_some() || c.latency_breach.is_some() || c.error_breach.is_some(),
    }
}

/// The run page's saturation-search section (a run of `harrier load find`).
pub struct SearchView {
    pub headline: String,
    pub rule: String,
    /// The search fell over somewhere (a warning callout).
    pub saturated: bool,
    pub steps: Vec<SearchStepView>,
}

/// A row of the search's step table.
pub struct SearchStepView {
    pub n: usize,
    pub phase: &'static str,
    pub offered: String,
    pub offered_raw: f64,
    pub achieved: String,
    pub p50: String,
    pub p99: String,
    pub errors: String,
    pub in_flight: String,
    pub verdict: &'static str,
    /// The verdict is not a pass (shown as bad).
    pub bad: bool,
    pub reason: String,
}

fn search_view(s: &crate::domain::load::SearchOutcome) -> SearchView {
    let mut headline = s.statement.clone();
    if let Some(first) = headline.get(..1) {
        headline.replace_range(..1, &first.to_uppercase());
    }
    SearchView {
        headline,
        rule: s.rule.clone(),
        saturated: s.falls_over_rps.is_some(),
        steps: s
            .steps
            .iter()
            .enumerate()
            .map(|(i, st)| SearchStepView {
                n: i + 1,
                phase: st.phase.name(),
                offered: crate::domain::load::search::rate_text(st.offered_rps),
                offered_raw: st.offered_rps,
                achieved: format::rps(st.achieved_rps),
                p50: format::ms(st.p50_ms),
                p99: format::ms(st.p99_ms),
                errors: format::pct(st.error_pct),
                in_flight: st
                    .in_flight
                    .map_or_else(|| format::NONE.to_string(), |n| format::float(n, 1)),
                verdict: st.verdict.name(),
                bad: st.verdict != crate::domain::load::Verdict::Pass,
                reason: match (&st.limited_by, st.reason.is_empty()) {
                    (_, true) => String::new(),
                    (Some(l), false) => format!(
                        "{l}: {}{}",
                        st.reason,
                        if st.cut_short { " (cut short)" } else { "" }
                    ),
                    (None, false) => st.reason.clone(),
                },
            })
            .collect(),
    }
}

/// A row of the errors table.
pub struct ErrorView {
    pub row: ErrorRow,
    pub count: String,
    pub first_seen: String,
    pub last_seen: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "run.html")]
pub(crate) struct RunPage {
    nav: &'static str,
    /// The run has a baseline / a previous run of its scenario to be compared with (the
    /// actions are offered only then; disabled with the reason otherwise).
    has_baseline: bool,
    has_previous: bool,
    /// When an alert rule failed the run while live: (rule, unix ms, time, value).
    failed: Option<(String, i64, String, String)>,
    tool_name: String,
    started: String,
    imported: String,
    duration: String,
    kpis: Vec<Kpi>,
    columns: &'static [Column],
    rows: Vec<StatsRowView>,
    total: StatsRowView,
    has_transactions: bool,
    labels: Vec<String>,
    bucket_hint: String,
    errors: Vec<ErrorView>,
    error_total: String,
    rejected: Vec<RejectedRowRow>,
    rejected_total: String,
    rejected_more: bool,
    /// Says that labels beyond the label limit were folded, when some were.
    folded_note: Option<String>,
    reported: Vec<(String, String)>,
    /// The response-status breakdown the tool reported: (code, count, counts as an error).
    status_codes: Vec<(String, String, bool)>,
    /// The tool has no per-request success flag: errors follow harrier's status rule.
    status_rule: bool,
    /// ab's Length failures (not errors), formatted, when there were any.
    length_failures: Option<String>,
    /// The run has per-second buckets (every raw run; a Locust stats history too).
    has_series: bool,
    /// Who computed the chart's percentiles when not harrier (Locust's stats history).
    percentiles_reported_by: Option<String>,
    apdex_t_ms: u64,
    /// The saturation statement, when the run ramped and saturated.
    capacity: Option<CapacityView>,
    /// The saturation search, for a run of `harrier load find`.
    search: Option<SearchView>,
    /// Tags as "k=v, k=v" for the edit form.
    tags_text: String,
    /// The run is still streaming in (status `live`): the page refreshes its figures.
    live: bool,
    /// A load test of the console is sending this run's load: (equivalent command,
    /// started by).
    load_test: Option<(String, String)>,
    /// A run of `harrier load` with the generator's series (`reported.seconds`).
    has_generator: bool,
    /// JSON data island for the charts: `{"run", "timeseries", "timeseries_url"}`.
    data_json: String,
    /// Routes with steps this run loaded, and the step of each that gave way.
    inside: Vec<crate::views::steps::RouteInside>,
    run: RunDetail,
}

/// Tools without a per-request success flag: an error is a transport error or a status
/// ≥ 400 (docs/numbers.md, "Runs").
const STATUS_RULE_TOOLS: &[&str] = &[
    "hey",
    "oha",
    "wrk",
    "vegeta",
    "autocannon",
    "siege",
    "artillery",
    "ab",
];

/// The status-code table of a run's reported figures (`status_codes`, or oha's
/// `statusCodeDistribution`), sorted by code: (code, count, is an error).
fn status_code_rows(reported: &serde_json::Value) -> Vec<(String, String, bool)> {
    let table = reported
        .get("status_codes")
        .filter(|v| v.is_object())
        .or_else(|| reported.get("statusCodeDistribution"));
    let Some(map) = table.and_then(serde_json::Value::as_object) else {
        return Vec::new();
    };
    let mut rows: Vec<(String, i64)> = map
        .iter()
        .filter_map(|(code, n)| Some((code.clone(), n.as_i64()?)))
        .collect();
    rows.sort_by_key(|(code, _)| code.parse::<u32>().unwrap_or(u32::MAX));
    rows.into_iter()
        .map(|(code, n)| {
            let error = code
                .trim()
                .parse::<u16>()
                .map_or(true, |c| c == 0 || c >= 400);
            (code, format::int(n), error)
        })
        .collect()
}

/// Flattens the tool's reported figures into (name, value) rows: nested objects become one
/// row each ("connection times ms · total" → "min 22 · mean 81 · …"), numeric keys (a
/// percentile table) sort by number, and absent figures (`null`) are left out.
fn reported_rows(value: &serde_json::Value) -> Vec<(String, String)> {
    fn scalar(v: &serde_json::Value) -> Option<String> {
        match v {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Object(_) | serde_json::Value::Array(_) => None,
            other => Some(other.to_string()),
        }
    }
    fn entries(
        map: &serde_json::Map<String, serde_json::Value>,
    ) -> Vec<(&String, &serde_json::Value)> {
        let mut items: Vec<_> = map.iter().collect();
        if items.iter().all(|(k, _)| k.parse::<f64>().is_ok()) {
            items.sort_by(|a, b| {
                a.0.parse::<f64>()
                    .unwrap_or(0.0)
                    .total_cmp(&b.0.parse::<f64>().unwrap_or(0.0))
            });
        }
        items
    }
    fn walk(
        prefix: &str,
        map: &serde_json::Map<String, serde_json::Value>,
        out: &mut Vec<(String, String)>,
    ) {
        for (k, v) in entries(map) {
            let name = if prefix.is_empty() {
                k.replace('_', " ")
            } else {
                format!("{prefix} · {}", k.replace('_', " "))
            };
            match v {
                serde_json::Value::Object(inner) if inner.values().all(|x| !x.is_object()) => {
                    let parts: Vec<String> = entries(inner)
                        .into_iter()
                        .filter_map(|(ik, iv)| scalar(iv).map(|t| format!("{ik}: {t}")))
                        .collect();
                    if !parts.is_empty() {
                        out.push((name, parts.join(" · ")));
                    }
                }
                serde_json::Value::Object(inner) => walk(&name, inner, out),
                other => {
                    if let Some(text) = scalar(other) {
                        out.push((name, text));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    if let serde_json::Value::Object(map) = value {
        walk("", map, &mut out);
    }
    out
}

pub(crate) async fn run(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<RunPage, PageError> {
    let id = crate::http::params::run_id(&id)?;
    let report = crate::views::runs::run_report(&state.store, id, state.apdex_t_ms(None)).await?;
    let crate::views::runs::RunReport {
        run,
        apdex_t_ms,
        apdex,
        capacity,
        search,
    } = report;
    let errors = state.store.run_errors(id).await?;
    let rejected = state.store.run_rejected(id).await?;
    let inside = crate::views::steps::routes_inside_run(&state.store, &run).await?;
    let series = crate::views::runs::series_for(&state.store, id, None).await?;
    let bucket_hint = if series.bucket_ms == 1000 {
        "1 s buckets".to_string()
    } else {
        format!("{} s buckets", series.bucket_ms / 1000)
    };
    // The generator's own series of a `harrier load` run (offered rate, service time,
    // dispatch delay, in flight): see `domain::load::SecondsSeries`.
    let generator = (run.tool == "harrier")
        .then(|| run.reported.get("seconds").cloned())
        .flatten()
        .filter(|v| v.is_object());
    let data = serde_json::json!({
        "run": {
            "id": run.id, "name": &run.name, "tool": &run.tool, "scenario": &run.scenario,
            "started_at_ms": run.started_at_ms, "duration_ms": run.overall.window_ms,
            "summary_only": run.summary_only, "status": &run.status,
        },
        "timeseries": series,
        "generator": generator,
        "timeseries_url": format!("/api/v1/runs/{id}/timeseries"),
        "distribution_url": format!("/api/v1/runs/{id}/distribution"),
        "capacity": &capacity,
        "search": &search,
    });
    // The section's count matches the run's: errors of transaction rows are listed but
    // not counted twice.
    let tx_labels: Vec<&str> = run
        .labels
        .iter()
        .filter(|l| l.is_transaction)
        .map(|l| l.label.as_str())
        .collect();
    let error_total: i64 = errors
        .iter()
        .filter(|e| !tx_labels.contains(&e.label.as_str()))
        .map(|e| e.count)
        .sum();
    let all_bytes =
        |f: fn(&Stats) -> u64| f(&run.overall) > 0 || run.labels.iter().any(|l| f(&l.stats) > 0);
    let known = BytesKnown {
        received: all_bytes(|s| s.bytes_received),
        sent: all_bytes(|s| s.bytes_sent),
    };
    let failed = match &run.failed_by {
        None => None,
        Some(f) => {
            use crate::domain::alerts::rule::Measure;
            let unit = match state.store.get_alert_rule(&f.rule).await? {
                Some(r) => match r.rule.measure {
                    Measure::ErrorPct => " %",
                    Measure::MeanMs | Measure::P95Ms | Measure::P99Ms => " ms",
                    Measure::ErrorsPerS | Measure::ThroughputPerS => " /s",
                    _ => "",
                },
                None => "",
            };
            Some((
                f.rule.clone(),
                f.at_ms,
                format::time(Some(f.at_ms)),
                f.value
                    .map(|v| format!("{}{unit}", crate::domain::alerts::rule::fmt_num(v)))
                    .unwrap_or_else(|| "–".into()),
            ))
        }
    };
    let (has_baseline, has_previous) = if run.scenario.is_some() {
        (
            crate::services::comparisons::auto_baseline(&state.store, run.id)
                .await?
                .is_some(),
            crate::services::comparisons::previous_run(&state.store, run.id)
                .await?
                .is_some(),
        )
    } else {
        (false, false)
    };
    let load_test = state
        .load_tests
        .running()
        .await
        .filter(|t| t.id == run.id)
        .map(|t| (t.command, t.started_by));
    Ok(RunPage {
        inside,
        load_test,
        live: run.status == "live",
        // A live run of `harrier load` gets the panel before its first second arrives.
        has_generator: generator.is_some() || (run.tool == "harrier" && run.status == "live"),
        failed,
        nav: "runs",
        has_baseline,
        has_previous,
        tool_name: tool_name(&run.tool),
        started: format::time(run.started_at_ms),
        imported: format::time(Some(run.imported_at_ms)),
        duration: format::duration(run.overall.window_ms),
        kpis: search
            .as_ref()
            .and_then(search_kpis)
            .unwrap_or_else(|| kpis(&run)),
        columns: COLUMNS,
        rows: run
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                stats_row(
                    &l.label,
                    l.is_transaction,
                    &l.stats,
                    known,
                    apdex.get(i + 1).copied().flatten(),
                )
            })
            .collect(),
        total: stats_row(
            "Total",
            false,
            &run.overall,
            known,
            apdex.first().copied().flatten(),
        ),
        apdex_t_ms,
        capacity: capacity.as_ref().map(capacity_text),
        search: search.as_ref().map(search_view),
        has_transactions: run.labels.iter().any(|l| l.is_transaction),
        labels: run.labels.iter().map(|l| l.label.clone()).collect(),
        bucket_hint,
        error_total: format::int(if run.summary_only {
            run.overall.errors as i64
        } else {
            error_total
        }),
        errors: errors
            .into_iter()
            .map(|e| ErrorView {
                count: format::int(e.count),
                first_seen: format::time(Some(e.first_seen_ms)),
                last_seen: format::time(Some(e.last_seen_ms)),
                row: e,
            })
            .collect(),
        rejected_total: format::int(run.rejected_rows),
        rejected_more: run.rejected_rows > rejected.len() as i64,
        folded_note: (run.folded_labels > 0).then(|| {
            format!(
                "The file has more distinct labels than harrier keeps per run: the samples of {} more labels are counted together under “{}” (limits.max_labels in harrier.toml).",
                format::int(run.folded_labels),
                crate::domain::runs::limits::OTHER_LABELS
            )
        }),
        rejected,
        // A search's answer has its own section.
        reported: reported_rows(&run.reported)
            .into_iter()
            .filter(|(k, _)| search.is_none() || !k.starts_with("search"))
            .collect(),
        status_codes: status_code_rows(&run.reported),
        has_series: !series.t_ms.is_empty(),
        percentiles_reported_by: series.percentiles_reported_by.map(tool_name),
        status_rule: STATUS_RULE_TOOLS.contains(&run.tool.as_str()),
        length_failures: run.reported["length_failures"]["count"]
            .as_i64()
            .filter(|n| *n > 0)
            .map(format::int),
        tags_text: run
            .tags
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
        // `<` escaped so the island can never close its <script> element early.
        data_json: data.to_string().replace('<', "\\u003c"),
        run,
    })
}
