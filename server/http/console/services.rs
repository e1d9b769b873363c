//! `/console/services/{name}`: one service — its instances (up, stale or gone, last
//! scrape, error), its routes (each linked), and its process figures (KPI cards of the
//! latest readings, charts over a picked range; data island read by `static/services.js`).
//! Reads only.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;

use super::routes::{RangeOpt, RouteRowView};
use super::{PageError, filters};
use crate::domain::format;
use crate::error::Error;
use crate::state::AppState;
use crate::store::HOUR_MS;
use crate::views::services::{InstanceRow, process_timeseries, service_detail};

pub fn router() -> Router<AppState> {
    Router::new().route("/console/services/{name}", get(service_page))
}

/// A KPI card: a process figure with its unit.
pub struct ProcKpi {
    pub label: &'static str,
    pub value: String,
    pub caption: String,
}

/// An instance row of the page.
pub struct InstanceView {
    pub i: InstanceRow,
    pub class: &'static str,
    pub last_scrape: String,
    pub last_seen: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "service.html")]
struct ServicePage {
    nav: &'static str,
    name: String,
    instances: Vec<InstanceView>,
    rows: Vec<RouteRowView>,
    kpis: Vec<ProcKpi>,
    /// The instance the cards and charts show.
    shown: String,
    ranges: Vec<RangeOpt>,
    data_json: String,
}

fn mib(v: f64) -> String {
    format::bytes(v.max(0.0) as u64)
}

async fn service_page(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<ServicePage, PageError> {
    let d = service_detail(&state.store, &name)
        .await?
        .ok_or_else(|| Error::NotFound(format!("service {name:?}")))?;
    let now = crate::now_ms();
    // the instance shown: the first that is up and has process figures, else any with them
    let with_process = |i: &InstanceRow| {
        d.process
            .iter()
            .any(|p| p.instance == i.instance && p.target_id == i.target_id)
    };
    let shown = d
        .instances
        .iter()
        .find(|i| i.state == "up" && with_process(i))
        .or_else(|| d.instances.iter().find(|i| with_process(i)))
        .map(|i| i.instance.clone())
        .unwrap_or_default();
    let get = |metric: &str| {
        d.process
            .iter()
            .find(|p| p.instance == shown && p.metric == metric)
            .map(|p| p.mean)
    };
    let mut kpis = Vec::new();
    let mut kpi = |label: &'static str, value: Option<String>, caption: String| {
        if let Some(value) = value {
            kpis.push(ProcKpi {
                label,
                value,
                caption,
            });
        }
    };
    kpi(
        "CPU",
        get("cpu_pct").map(|v| format!("{} %", format::float(v, 1))),
        "of one core, since the previous scrape".into(),
    );
    if get("cpu_pct").is_none() {
        kpi(
            "CPU",
            get("process_cpu_usage_pct").map(|v| format!("{} %", format::float(v, 1))),
            "of the host's CPUs (process_cpu_usage)".into(),
        );
    }
    kpi(
        "Resident memory",
        get("rss_bytes").map(mib),
        "process RSS".into(),
    );
    kpi(
        "Heap used",
        get("heap_used_bytes").map(mib),
        get("heap_max_bytes").map_or("JVM heap".into(), |m| format!("of {} max", mib(m))),
    );
    kpi(
        "Non-heap used",
        get("nonheap_used_bytes").map(mib),
        "metaspace, code cache, …".into(),
    );
    kpi(
        "Threads",
        get("threads").map(|v| format::float(v, 0)),
        "live".into(),
    );
    kpi(
        "GC time",
        get("gc_ms_per_s").map(|v| format!("{} ms/s", format::float(v, 1))),
        get("gc_pauses_per_s").map_or("pause time per second".into(), |p| {
            format!("{} pauses/s", format::float(p, 2))
        }),
    );
    kpi(
        "Open files",
        get("open_fds").map(|v| format::float(v, 0)),
        get("max_fds").map_or("file descriptors".into(), |m| {
            format!("of {} max", format::float(m, 0))
        }),
    );
    kpi(
        "Uptime",
        get("uptime_s").map(|v| format::duration(Some((v * 1000.0) as i64))),
        "since the process started".into(),
    );
    let series = if shown.is_empty() {
        serde_json::json!({"series": []})
    } else {
        process_timeseries(
            &state.store,
            &state.config.retention,
            &d.targets,
            Some(&shown),
            now - HOUR_MS,
            now,
        )
        .await?
    };
    let data = serde_json::json!({
        "service": &d.name,
        "instance": &shown,
        "series": series,
        "series_url": format!("/api/v1/services/{}/timeseries", urlencode(&d.name)),
        "range_ms": HOUR_MS,
    });
    Ok(ServicePage {
        nav: "routes",
        instances: d
            .instances
            .into_iter()
            .map(|i| InstanceView {
                class: match i.state.as_str() {
                    "up" => "ok",
                    "down" => "err",
                    "pending" => "muted",
                    _ => "warn",
                },
                last_scrape: format::time(i.last_scrape_ms),
                last_seen: i.last_seen_ms.map_or(format::NONE.to_string(), |t| {
                    format!("{} ago", format::duration(Some((now - t).max(0))))
                }),
                i,
            })
            .collect(),
        rows: d
            .routes
            .into_iter()
            .map(|r| RouteRowView::new(r, now, &[]))
            .collect(),
        kpis,
        shown,
        ranges: super::routes::RANGES
            .iter()
            .map(|(key, label)| RangeOpt {
                key,
                label,
                pressed: *key == "1h",
            })
            .collect(),
        data_json: data.to_string().replace('<', "\\u003c"),
        name: d.name,
    })
}

fn urlencode(v: &str) -> String {
    crate::views::services::service_url(v)
        .trim_start_matches("/console/services/")
        .to_string()
}
