//! `/console/services/{name}`: one service — its instances (up, stale or gone, last
//! scrape, error), its routes (each linked), its process figures (KPI cards of the
//! latest readings, charts over a picked range; data island read by `static/services.js`)
//! and its pools (a row per connection, HTTP client or thread pool with the "full"
//! sentence, and a chart per pool on the same range as the process charts). Reads only.

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, State};
use axum::routing::get;

use super::routes::{RangeOpt, RouteRowView};
use super::{PageError, filters};
use crate::domain::format;
use crate::error::Error;
use crate::state::AppState;
use crate::store::HOUR_MS;
use crate::views::services::{InstanceRow, PoolRow, process_timeseries, service_detail};

pub fn routes() -> Routes {
    Routes::new().route("/console/services/{name}", GET, Read, get(service_page))
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

/// A pool row of the page: the figures with their units, formatted.
pub struct PoolView {
    pub p: PoolRow,
    /// Badge class and text of its state.
    pub class: &'static str,
    pub state: &'static str,
    pub active: String,
    pub max: String,
    pub idle: String,
    pub pending: String,
    pub usage: String,
    pub timeouts: String,
}

impl PoolView {
    fn new(p: PoolRow) -> PoolView {
        let n = |v: Option<f64>| v.map_or(format::NONE.to_string(), |v| format::float(v, 0));
        let (class, state) = match p.state {
            "full" => ("err", "full"),
            "at_max" => ("warn", "at max"),
            _ => ("ok", "ok"),
        };
        PoolView {
            class,
            state,
            active: n(p.active),
            max: match p.max {
                None if p.kind == "executor" => "unbounded".into(),
                v => n(v),
            },
            idle: n(p.idle),
            pending: n(p.pending),
            usage: p
                .usage_pct
                .map_or(format::NONE.to_string(), |v| format::float(v, 0)),
            timeouts: p
                .timeouts_per_s
                .map_or(format::NONE.to_string(), |v| format::float(v, 2)),
            p,
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "service.html")]
struct ServicePage {
    nav: &'static str,
    name: String,
    instances: Vec<InstanceView>,
    rows: Vec<RouteRowView>,
    kpis: Vec<ProcKpi>,
    /// Every instance's pools; the charts show those of `shown`.
    pools: Vec<PoolView>,
    /// The sentences of the full pools.
    full: Vec<String>,
    /// The instance the cards and charts show.
    shown: String,
    ranges: Vec<RangeOpt>,
    data_json: String,
    /// OTLP metrics pushed and not mapped: (metric, instance, data points).
    unmapped: Vec<(String, String, String)>,
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
    let several = d.instances.len() > 1;
    let full: Vec<String> = d
        .pools
        .iter()
        .filter(|p| p.state == "full")
        .map(|p| {
            if several {
                format!("{} (instance {})", p.sentence, p.instance)
            } else {
                p.sentence.clone()
            }
        })
        .collect();
    let pools: Vec<PoolView> = d.pools.into_iter().map(PoolView::new).collect();
    let unmapped = state
        .otlp
        .unmapped()
        .await
        .into_iter()
        .filter(|u| u.service == d.name)
        .flat_map(|u| {
            let instance = u.instance.clone().unwrap_or_default();
            u.metrics
                .into_iter()
                .map(move |(m, n)| (m, instance.clone(), format::int(n as i64)))
        })
        .collect();
    Ok(ServicePage {
        unmapped,
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
        full,
        pools,
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
