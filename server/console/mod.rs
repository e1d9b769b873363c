//! The console: server-rendered pages under `/console` (askama templates in `web/`).
//!
//! Pages read the store and never write. Everything but the charts reads without
//! JavaScript; chart data goes into a JSON data island read by `static/harrier.js`.

pub mod format;

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::AppState;
use crate::error::Error;
use crate::runs::Stats;
use crate::store::{ErrorRow, RejectedRowRow, RunDetail, RunListItem};

/// Console routes.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/console", get(overview))
        .route("/console/", get(overview))
        .route("/console/runs", get(runs))
        .route("/console/runs/{id}", get(run))
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
    pub summary_only: bool,
    pub started_raw: i64,
    pub started: String,
    pub duration_raw: String,
    pub duration: String,
    pub count_raw: i64,
    pub count: String,
    pub error_pct_raw: String,
    pub error_pct: String,
    pub error_class: &'static str,
    pub p95_raw: String,
    pub p95: String,
    pub throughput_raw: String,
    pub throughput: String,
}

fn raw_f(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn error_class(pct: Option<f64>) -> &'static str {
    match pct {
        Some(p) if p >= 5.0 => "err",
        Some(p) if p > 0.0 => "warn",
        _ => "",
    }
}

impl From<&RunListItem> for RunRowView {
    fn from(r: &RunListItem) -> Self {
        RunRowView {
            id: r.id,
            url: r.url.clone(),
            name: r.name.clone(),
            scenario: r.scenario.clone().unwrap_or_default(),
            tool: r.tool.clone(),
            summary_only: r.summary_only,
            started_raw: r.started_at_ms.unwrap_or(r.imported_at_ms),
            started: format::time(r.started_at_ms.or(Some(r.imported_at_ms))),
            duration_raw: r.duration_ms.map(|d| d.to_string()).unwrap_or_default(),
            duration: format::duration(r.duration_ms),
            count_raw: r.count,
            count: format::int(r.count),
            error_pct_raw: raw_f(r.error_pct),
            error_pct: format::pct(r.error_pct),
            error_class: error_class(r.error_pct),
            p95_raw: raw_f(r.p95_ms),
            p95: format::ms(r.p95_ms),
            throughput_raw: raw_f(r.throughput_rps),
            throughput: format::rps(r.throughput_rps),
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "overview.html")]
struct OverviewPage {
    nav: &'static str,
    run_count: usize,
    runs: Vec<RunRowView>,
}

async fn overview(State(state): State<AppState>) -> Result<OverviewPage, PageError> {
    let all = state.store.list_runs().await?;
    Ok(OverviewPage {
        nav: "overview",
        run_count: all.len(),
        runs: all.iter().take(10).map(RunRowView::from).collect(),
    })
}

#[derive(Template, WebTemplate)]
#[template(path = "runs.html")]
struct RunsPage {
    nav: &'static str,
    runs: Vec<RunRowView>,
    formats: &'static [&'static str],
}

async fn runs(State(state): State<AppState>) -> Result<RunsPage, PageError> {
    let runs = state.store.list_runs().await?;
    Ok(RunsPage {
        nav: "runs",
        runs: runs.iter().map(RunRowView::from).collect(),
        formats: crate::ingest::Format::NAMES,
    })
}

/// One row of the run page's summary table.
pub struct StatsView {
    pub label: String,
    pub is_total: bool,
    pub is_transaction: bool,
    pub cells: Vec<(String, String)>,
}

/// Column headers of the summary table, with units (same order as [`StatsView::cells`]).
const STATS_COLUMNS: &[(&str, &str)] = &[
    ("Requests", "count"),
    ("Errors", "count"),
    ("Error %", "errors / requests × 100"),
    ("Min", "ms"),
    ("Mean", "ms"),
    ("p50", "nearest rank"),
    ("p90", "nearest rank"),
    ("p95", "nearest rank"),
    ("p99", "nearest rank"),
    ("Max", "ms"),
    ("Throughput", "req/s"),
    ("Received", "bytes"),
    ("Sent", "bytes"),
];

fn stats_view(label: &str, is_total: bool, is_transaction: bool, s: &Stats) -> StatsView {
    let f = |v: Option<f64>| (raw_f(v), format::ms(v));
    StatsView {
        label: label.to_string(),
        is_total,
        is_transaction,
        cells: vec![
            (s.count.to_string(), format::int(s.count as i64)),
            (s.errors.to_string(), format::int(s.errors as i64)),
            (raw_f(s.error_pct), format::pct(s.error_pct)),
            f(s.min_ms),
            f(s.mean_ms),
            f(s.p50_ms),
            f(s.p90_ms),
            f(s.p95_ms),
            f(s.p99_ms),
            f(s.max_ms),
            (raw_f(s.throughput_rps), format::rps(s.throughput_rps)),
            (
                s.bytes_received.to_string(),
                format::bytes(s.bytes_received),
            ),
            (s.bytes_sent.to_string(), format::bytes(s.bytes_sent)),
        ],
    }
}

/// A KPI card of the run page.
pub struct Kpi {
    pub caption: &'static str,
    pub value: String,
    pub class: &'static str,
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
struct RunPage {
    nav: &'static str,
    run: RunDetail,
    started: String,
    duration: String,
    kpis: Vec<Kpi>,
    columns: &'static [(&'static str, &'static str)],
    rows: Vec<StatsView>,
    labels: Vec<String>,
    errors: Vec<ErrorView>,
    rejected: Vec<RejectedRowRow>,
    rejected_total: String,
    reported: Vec<(String, String)>,
    /// JSON data island for the charts: `{"run", "timeseries", "timeseries_url"}`.
    data_json: String,
}

async fn run(State(state): State<AppState>, Path(id): Path<String>) -> Result<RunPage, PageError> {
    let id = crate::api::run_id(&id)?;
    let run = state
        .store
        .get_run(id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("run {id}")))?;
    let errors = state.store.run_errors(id).await?;
    let rejected = state.store.run_rejected(id).await?;
    let series = crate::api::series_for(&state, id, None).await?;
    let o = &run.overall;
    let kpis = vec![
        Kpi {
            caption: "Requests",
            value: format::int(o.count as i64),
            class: "",
        },
        Kpi {
            caption: "Error %",
            value: format::pct(o.error_pct),
            class: error_class(o.error_pct),
        },
        Kpi {
            caption: "p95",
            value: format::ms(o.p95_ms),
            class: "",
        },
        Kpi {
            caption: "Throughput",
            value: format::rps(o.throughput_rps),
            class: "",
        },
        Kpi {
            caption: "Mean",
            value: format::ms(o.mean_ms),
            class: "",
        },
        Kpi {
            caption: "Max",
            value: format::ms(o.max_ms),
            class: "",
        },
    ];
    let mut rows = vec![stats_view("All requests", true, false, o)];
    rows.extend(
        run.labels
            .iter()
            .map(|l| stats_view(&l.label, false, l.is_transaction, &l.stats)),
    );
    let reported = match &run.reported {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                (
                    k.replace('_', " "),
                    match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    },
                )
            })
            .collect(),
        _ => Vec::new(),
    };
    let data = serde_json::json!({
        "run": &run,
        "timeseries": series,
        "timeseries_url": format!("/api/v1/runs/{id}/timeseries"),
    });
    Ok(RunPage {
        nav: "runs",
        started: format::time(run.started_at_ms.or(Some(run.imported_at_ms))),
        duration: format::duration(o.window_ms),
        kpis,
        columns: STATS_COLUMNS,
        labels: run.labels.iter().map(|l| l.label.clone()).collect(),
        rows,
        errors: errors
            .into_iter()
            .map(|e| ErrorView {
                count: format::int(e.count),
                first_seen: format::time(Some(e.first_seen_ms)),
                last_seen: format::time(Some(e.last_seen_ms)),
                row: e,
            })
            .collect(),
        rejected,
        rejected_total: format::int(run.rejected_rows),
        reported,
        // `<` escaped so the island can never close its <script> element early.
        data_json: data.to_string().replace('<', "\\u003c"),
        run,
    })
}
