//! Comparison pages: `/console/compare?runs=A,B,…` (figures, deltas and verdicts per label
//! and overall, overlay charts), `/console/compare.html?runs=…` (the self-contained HTML
//! export as a download) and `/console/scenarios/{name}` (a scenario's trend with its
//! baseline, regressions and change points). Chart data goes into JSON islands read by
//! `static/compare.js`.

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, RawQuery, State};
use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::{PageError, filters, tool_name};
use crate::domain::compare::render::{self, COLORS};
use crate::domain::compare::{Comparison, Figure, Verdict};
use crate::domain::format;
use crate::error::Error;
use crate::services::comparisons::{self, CompareQuery, TREND_FIGURES, Trend};
use crate::state::AppState;

/// Routes of the comparison pages.
pub fn routes() -> Routes {
    Routes::new()
        .route("/console/compare", GET, Read, get(compare_page))
        .route("/console/compare.html", GET, Read, get(compare_export))
        .route("/console/scenarios/{name}", GET, Read, get(scenario_page))
}

/// A run heading a column.
pub struct RunHead {
    pub id: i64,
    pub name: String,
    pub url: String,
    pub tool_name: String,
    pub summary_only: bool,
    /// Index of its colour in `render::COLORS` (CSS class `swatch-N`).
    pub swatch: usize,
    pub started: String,
    pub started_ms: Option<i64>,
}

/// One cell: the run's value, its change vs the reference, the verdict.
pub struct CellView {
    pub value: String,
    pub raw: String,
    /// "+12 ms", empty for the reference.
    pub delta: String,
    /// "+4.3 %", empty when unknown.
    pub delta_pct: String,
    /// "worse" | "better" | "same" | "" (no verdict).
    pub class: &'static str,
    /// Badge text and class ("err" / "ok" / "muted").
    pub verdict: Option<(&'static str, &'static str)>,
    /// The interval, for the tooltip.
    pub title: String,
    pub present: bool,
}

pub struct FigureRow {
    pub name: &'static str,
    pub key: &'static str,
    pub title: &'static str,
    pub cells: Vec<CellView>,
}

pub struct ScopeView {
    pub title: String,
    pub anchor: String,
    pub is_total: bool,
    pub rows: Vec<FigureRow>,
    /// Verdicts "worse" in this scope.
    pub worse: usize,
    pub better: usize,
}

/// A reference choice: the run order with that run first.
pub struct RefOption {
    pub value: String,
    pub text: String,
    pub selected: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "compare.html")]
struct ComparePage {
    nav: &'static str,
    runs: Vec<RunHead>,
    scopes: Vec<ScopeView>,
    ref_options: Vec<RefOption>,
    min_effect_pct: String,
    any_summary: bool,
    method: String,
    export_url: String,
    api_url: String,
    data_json: String,
}

fn figure_title(f: Figure) -> &'static str {
    match f {
        Figure::Count => "Requests, counted once",
        Figure::ErrorPct => "errors / requests × 100 · lower is better · change in points",
        Figure::MeanMs => "Arithmetic mean · lower is better",
        Figure::P50Ms | Figure::P90Ms | Figure::P95Ms | Figure::P99Ms => {
            "Nearest rank on exact values · lower is better"
        }
        Figure::MaxMs => "Slowest sample · no verdict (one sample)",
        Figure::ThroughputRps => {
            "count / (last end − first start), failed requests included · higher is better"
        }
        Figure::SuccessfulRps => {
            "(count − errors) / (last end − first start): requests that did not fail · higher is better"
        }
        Figure::CapacityRps | Figure::CapacityUsers => {
            "The stated capacity: successful req/s (and users) sustained up to the first breach of a ramp — the knee, p95 doubling or errors past 1 % — or the rate a harrier load find search sustained · higher is better · noise: its standard error"
        }
    }
}

/// The capacity row of the totals: each run's knee (req/s at users), its change and
/// verdict (see [`crate::domain::compare::CAPACITY_METHOD`]).
fn capacity_row(c: &Comparison) -> Option<FigureRow> {
    if c.capacity.is_empty() || c.capacity.iter().all(|r| r.statement.is_none()) {
        return None;
    }
    let f = Figure::CapacityRps;
    let cells = c
        .capacity
        .iter()
        .map(|r| {
            let ch = r.change.as_ref();
            let verdict = ch.and_then(|c| c.verdict);
            let value = match (r.capacity_rps, r.knee_users) {
                (Some(rps), Some(users)) => format!("{} at ~{users} users", f.format(Some(rps))),
                (Some(rps), None) => format!("{} (search)", f.format(Some(rps))),
                _ if r.peak_rps.is_some() => "no saturation".to_string(),
                _ => format::NONE.to_string(),
            };
            let users = ch
                .and_then(|c| c.users_abs)
                .filter(|u| *u != 0)
                .map(|u| format!(", {u:+} users"))
                .unwrap_or_default();
            CellView {
                value,
                raw: r.capacity_rps.map(|v| v.to_string()).unwrap_or_default(),
                delta: ch
                    .and_then(|c| c.abs_rps)
                    .map(|a| format!("{}{users}", signed_abs(f, a)))
                    .unwrap_or_default(),
                delta_pct: ch.and_then(|c| c.pct).map(signed_pct).unwrap_or_default(),
                class: match verdict {
                    Some(Verdict::Worse) => "worse",
                    Some(Verdict::Better) => "better",
                    Some(Verdict::NoChange) => "same",
                    None => "",
                },
                verdict: verdict.map(|v| {
                    (
                        v.as_str(),
                        match v {
                            Verdict::Worse => "err",
                            Verdict::Better => "ok",
                            Verdict::NoChange => "muted",
                        },
                    )
                }),
                title: match (ch.and_then(|c| c.ci_low.zip(c.ci_high)), &r.statement) {
                    (Some((lo, hi)), Some(st)) => format!(
                        "{st} · 95 % interval of the change: {} … {} %",
                        format::float(lo, 1),
                        format::float(hi, 1)
                    ),
                    (None, Some(st)) => st.clone(),
                    _ => "The load did not ramp: no saturation analysis".into(),
                },
                present: true,
            }
        })
        .collect();
    Some(FigureRow {
        name: f.name(),
        key: f.key(),
        title: figure_title(f),
        cells,
    })
}

fn signed_pct(v: f64) -> String {
    format!(
        "{}{} %",
        if v > 0.0 { "+" } else { "" },
        format::float(v, 1)
    )
}

fn signed_abs(f: Figure, v: f64) -> String {
    let plus = if v > 0.0 { "+" } else { "" };
    match f {
        Figure::Count => format!("{plus}{}", format::int(v as i64)),
        Figure::ErrorPct => format!("{plus}{} pts", format::float(v, 2)),
        _ => format!("{plus}{}", f.format(Some(v))),
    }
}

fn scope_views(c: &Comparison) -> Vec<ScopeView> {
    c.scopes
        .iter()
        .enumerate()
        .map(|(si, s)| {
            let (mut worse, mut better) = (0, 0);
            let mut rows: Vec<FigureRow> = Figure::ALL
                .iter()
                .map(|&f| FigureRow {
                    name: f.name(),
                    key: f.key(),
                    title: figure_title(f),
                    cells: s
                        .runs
                        .iter()
                        .map(|rs| {
                            let ch = rs.change(f);
                            let verdict = ch.and_then(|c| c.verdict);
                            match verdict {
                                Some(Verdict::Worse) => worse += 1,
                                Some(Verdict::Better) => better += 1,
                                _ => {}
                            }
                            let unit = if f == Figure::ErrorPct { " pts" } else { " %" };
                            CellView {
                                value: f.format(rs.get(f)),
                                raw: rs.get(f).map(|v| v.to_string()).unwrap_or_default(),
                                delta: ch
                                    .and_then(|c| c.abs)
                                    .map(|a| signed_abs(f, a))
                                    .unwrap_or_default(),
                                delta_pct: ch
                                    .and_then(|c| c.pct)
                                    .map(signed_pct)
                                    .unwrap_or_default(),
                                class: match verdict {
                                    Some(Verdict::Worse) => "worse",
                                    Some(Verdict::Better) => "better",
                                    Some(Verdict::NoChange) => "same",
                                    None => "",
                                },
                                verdict: verdict.map(|v| {
                                    (
                                        v.as_str(),
                                        match v {
                                            Verdict::Worse => "err",
                                            Verdict::Better => "ok",
                                            Verdict::NoChange => "muted",
                                        },
                                    )
                                }),
                                title: ch
                                    .and_then(|c| c.ci_low.zip(c.ci_high))
                                    .map(|(lo, hi)| {
                                        format!(
                                            "95 % interval of the change: {} … {}{unit}",
                                            format::float(lo, 1),
                                            format::float(hi, 1)
                                        )
                                    })
                                    .unwrap_or_else(|| {
                                        if ch.is_some() && f.has_verdict() {
                                            "No interval: a run has no per-second data".into()
                                        } else {
                                            String::new()
                                        }
                                    }),
                                present: rs.present,
                            }
                        })
                        .collect(),
                })
                .collect();
            if s.label.is_none()
                && let Some(row) = capacity_row(c)
            {
                for cell in &row.cells {
                    match cell.class {
                        "worse" => worse += 1,
                        "better" => better += 1,
                        _ => {}
                    }
                }
                rows.push(row);
            }
            ScopeView {
                title: s
                    .label
                    .clone()
                    .unwrap_or_else(|| "All requests".to_string()),
                anchor: format!("scope-{si}"),
                is_total: s.label.is_none(),
                rows,
                worse,
                better,
            }
        })
        .collect()
}

fn run_heads(c: &Comparison) -> Vec<RunHead> {
    c.runs
        .iter()
        .enumerate()
        .map(|(i, r)| RunHead {
            id: r.id,
            name: r.name.clone(),
            url: r.url.clone(),
            tool_name: tool_name(&r.tool),
            summary_only: r.summary_only,
            swatch: i % COLORS.len(),
            started: format::time(r.started_at_ms.or(Some(r.imported_at_ms))),
            started_ms: r.started_at_ms,
        })
        .collect()
}

fn ids_text(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// `?run=N&against=baseline|previous` → the comparison of that pair.
async fn resolve_against(state: &AppState, raw: &str) -> Result<Option<String>, PageError> {
    let (mut run, mut against) = (None, None);
    for (k, v) in form_urlencoded::parse(raw.as_bytes()) {
        match k.as_ref() {
            "run" => run = Some(crate::http::params::run_id(&v)?),
            "against" => against = Some(v.into_owned()),
            _ => {}
        }
    }
    let (Some(run), Some(against)) = (run, against) else {
        return Ok(None);
    };
    let other = match against.as_str() {
        "baseline" => comparisons::auto_baseline(&state.store, run)
            .await?
            .map(|b| b.0),
        "previous" => comparisons::previous_run(&state.store, run).await?,
        other => {
            return Err(Error::BadRequest(format!(
                "against must be baseline or previous, got {other:?}"
            ))
            .into());
        }
    };
    let Some(other) = other else {
        return Err(Error::NotFound(format!(
            "a {against} run to compare run {run} with (a run needs a scenario with earlier runs, or a pinned baseline)"
        ))
        .into());
    };
    Ok(Some(format!("/console/compare?runs={other},{run}")))
}

/// `?runs=…&order=reference` (the runs list's tick form, whose boxes come in table order)
/// → the same comparison with its reference first: the scenario's pinned baseline when
/// it is among the runs, else the oldest run; the others oldest first. `None` without
/// `order=reference`. An explicit `runs=a,b,c` keeps its order (the page's reference
/// selector writes one).
async fn reference_first(
    state: &AppState,
    raw: &str,
    q: &CompareQuery,
) -> Result<Option<String>, PageError> {
    let asked =
        form_urlencoded::parse(raw.as_bytes()).any(|(k, v)| k == "order" && v == "reference");
    if !asked || q.ids.is_empty() {
        return Ok(None);
    }
    let runs = crate::views::runs::list_runs(&state.store).await?;
    let mut picked: Vec<&crate::views::runs::RunListItem> =
        runs.iter().filter(|r| q.ids.contains(&r.id)).collect();
    picked.sort_by_key(|r| (r.started_at_ms.unwrap_or(r.imported_at_ms), r.id));
    let mut pinned = None;
    for scenario in picked.iter().filter_map(|r| r.scenario.as_deref()) {
        if let Some(b) = state.store.pinned_baseline(scenario).await? {
            pinned = Some(b);
            break;
        }
    }
    if let Some(i) = pinned.and_then(|b| picked.iter().position(|r| r.id == b)) {
        let b = picked.remove(i);
        picked.insert(0, b);
    }
    // ids not found stay at the end, so the comparison names them in its 404
    let mut ids: Vec<i64> = picked.iter().map(|r| r.id).collect();
    ids.extend(
        q.ids
            .iter()
            .filter(|id| !ids.contains(id))
            .copied()
            .collect::<Vec<_>>(),
    );
    let min_effect = if q.min_effect_pct == crate::domain::compare::DEFAULT_MIN_EFFECT_PCT {
        String::new()
    } else {
        format!("&min_effect_pct={}", q.min_effect_pct)
    };
    Ok(Some(format!(
        "/console/compare?runs={}{min_effect}",
        ids_text(&ids)
    )))
}

pub(crate) async fn compare_page(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Response, PageError> {
    if let Some(to) = resolve_against(&state, raw.as_deref().unwrap_or_default()).await? {
        return Ok(Redirect::to(&to).into_response());
    }
    let q = CompareQuery::parse(raw.as_deref())?;
    if let Some(to) = reference_first(&state, raw.as_deref().unwrap_or_default(), &q).await? {
        return Ok(Redirect::to(&to).into_response());
    }
    let c = comparisons::comparison(&state.store, &q.ids, &q.options()).await?;
    let ids: Vec<i64> = c.runs.iter().map(|r| r.id).collect();
    let min_effect = if q.min_effect_pct == crate::domain::compare::DEFAULT_MIN_EFFECT_PCT {
        String::new()
    } else {
        format!("&min_effect_pct={}", q.min_effect_pct)
    };
    let ref_options = c
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut order = vec![r.id];
            order.extend(ids.iter().filter(|x| **x != r.id));
            RefOption {
                value: ids_text(&order),
                text: format!("#{} {}", r.id, r.name),
                selected: i == 0,
            }
        })
        .collect();
    let data = serde_json::json!({
        "runs": c.runs.iter().enumerate().map(|(i, r)| serde_json::json!({
            "id": r.id, "name": r.name, "color": COLORS[i % COLORS.len()],
            "summary_only": r.summary_only,
            "timeseries_url": format!("/api/v1/runs/{}/timeseries", r.id),
            "distribution_url": format!("/api/v1/runs/{}/distribution", r.id),
        })).collect::<Vec<_>>(),
        "min_effect_pct": c.min_effect_pct,
    });
    let page = ComparePage {
        nav: "runs",
        runs: run_heads(&c),
        scopes: scope_views(&c),
        ref_options,
        min_effect_pct: format::float(c.min_effect_pct, 1),
        any_summary: c.runs.iter().any(|r| r.summary_only),
        method: c.method.clone(),
        export_url: format!("/console/compare.html?runs={}{min_effect}", ids_text(&ids)),
        api_url: format!("/api/v1/compare?runs={}{min_effect}", ids_text(&ids)),
        data_json: data.to_string().replace('<', "\\u003c"),
    };
    Ok(page.into_response())
}

/// The self-contained HTML export, as a download.
async fn compare_export(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Response, PageError> {
    let q = CompareQuery::parse(raw.as_deref())?;
    let c = comparisons::comparison(&state.store, &q.ids, &q.options()).await?;
    let mut overlays = Vec::new();
    for id in &q.ids {
        overlays.push(comparisons::overlay(&state.store, *id).await?);
    }
    let html = render::html(&c, &overlays, &format::time(Some(crate::now_ms())));
    let file = format!(
        "attachment; filename=\"harrier-compare-{}.html\"",
        q.ids
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join("-")
    );
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8".to_string()),
            (header::CONTENT_DISPOSITION, file),
            // Opened from disk or inline it is a document of inline CSS and SVG only:
            // no script, no connection, no frame may run from it.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"
                    .to_string(),
            ),
        ],
        html,
    )
        .into_response())
}

/// One run on the scenario page.
pub struct TrendRow {
    pub id: i64,
    pub name: String,
    pub url: String,
    pub at_ms: i64,
    pub at: String,
    pub summary_only: bool,
    pub is_baseline: bool,
    pub cells: Vec<(String, String)>,
    pub regressions: Vec<&'static str>,
    /// "passed" | "failed" | "".
    pub check: &'static str,
    /// Change points that start at this run: "p95 +23.4 %".
    pub changes: Vec<(String, &'static str)>,
}

/// A change point for the callout list.
pub struct ChangeView {
    pub figure: &'static str,
    pub run_id: i64,
    pub run_name: String,
    pub text: String,
    pub class: &'static str,
}

#[derive(Template, WebTemplate)]
#[template(path = "scenario.html")]
pub(crate) struct ScenarioPage {
    nav: &'static str,
    scenario: String,
    baseline: Option<(i64, String, &'static str)>,
    pinned: bool,
    rows: Vec<TrendRow>,
    changes: Vec<ChangeView>,
    min_effect_pct: String,
    compare_url: String,
    /// Axes the trend can be drawn against: `("", "time")` then the runs' tag keys; the
    /// picked one's value.
    x_options: Vec<(String, String)>,
    x_picked: String,
    /// The runs the picked tag leaves out (they lack it).
    x_untagged: usize,
    data_json: String,
}

fn trend_value(p: &comparisons::TrendPoint, f: Figure) -> Option<f64> {
    match f {
        Figure::P95Ms => p.p95_ms,
        Figure::P99Ms => p.p99_ms,
        Figure::MeanMs => p.mean_ms,
        Figure::ThroughputRps => p.throughput_rps,
        Figure::ErrorPct => p.error_pct,
        _ => None,
    }
}

pub(crate) async fn scenario_page(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<ScenarioPage, PageError> {
    let q = CompareQuery::parse(raw.as_deref())?;
    let t: Trend = comparisons::trend(&state.store, &name, &q.options()).await?;
    // `?x=TAG`: the trend drawn against a tag of the runs instead of time.
    let x_picked = form_urlencoded::parse(raw.as_deref().unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "x")
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty() && v != "time")
        .unwrap_or_default();
    if !x_picked.is_empty() && !t.tag_keys.contains(&x_picked) {
        return Err(Error::BadRequest(format!(
            "x must be time or a tag of this scenario's runs ({}), got {x_picked:?}",
            if t.tag_keys.is_empty() {
                "they have none".to_string()
            } else {
                t.tag_keys.join(", ")
            }
        ))
        .into());
    }
    let x_untagged = if x_picked.is_empty() {
        0
    } else {
        t.points
            .iter()
            .filter(|p| !p.tags.contains_key(&x_picked))
            .count()
    };
    let x_options: Vec<(String, String)> = std::iter::once((String::new(), "time".to_string()))
        .chain(t.tag_keys.iter().map(|k| (k.clone(), format!("tag {k}"))))
        .collect();
    let pinned = state.store.pinned_baseline(&name).await?.is_some();
    let baseline = t.baseline_run_id.and_then(|b| {
        t.points.iter().find(|p| p.run.id == b).map(|p| {
            let how = match t.baseline_source {
                Some(comparisons::BaselineSource::Pinned) => "pinned",
                Some(comparisons::BaselineSource::Passed) => "latest run that passed its check",
                _ => "run before the newest (none pinned)",
            };
            (b, p.run.name.clone(), how)
        })
    });
    let mut changes = Vec::new();
    for (f, cps) in &t.change_points {
        for cp in cps {
            let Some(p) = t.points.get(cp.index) else {
                continue;
            };
            changes.push(ChangeView {
                figure: f.name(),
                run_id: p.run.id,
                run_name: p.run.name.clone(),
                text: format!(
                    "{} {} from run #{} on (p = {})",
                    f.name(),
                    cp.change_pct.map(signed_pct).unwrap_or_default(),
                    p.run.id,
                    format::float(cp.p_value, 3)
                ),
                class: if cp.direction == Verdict::Worse {
                    "err"
                } else {
                    "ok"
                },
            });
        }
    }
    let rows = t
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| TrendRow {
            id: p.run.id,
            name: p.run.name.clone(),
            url: p.run.url.clone(),
            at_ms: p.at_ms,
            at: format::time(Some(p.at_ms)),
            summary_only: p.run.summary_only,
            is_baseline: Some(p.run.id) == t.baseline_run_id,
            cells: TREND_FIGURES
                .iter()
                .map(|f| {
                    let v = trend_value(p, *f);
                    (v.map(|v| v.to_string()).unwrap_or_default(), f.format(v))
                })
                .collect(),
            regressions: p.regressions.iter().map(|f| f.name()).collect(),
            check: match p.check_passed {
                Some(true) => "passed",
                Some(false) => "failed",
                None => "",
            },
            changes: t
                .change_points
                .iter()
                .flat_map(|(f, cps)| {
                    cps.iter().filter(|c| c.index == i).map(|c| {
                        (
                            format!(
                                "{} {}",
                                f.name(),
                                c.change_pct.map(signed_pct).unwrap_or_default()
                            ),
                            if c.direction == Verdict::Worse {
                                "err"
                            } else {
                                "ok"
                            },
                        )
                    })
                })
                .collect(),
        })
        .collect();
    let newest = t.points.last().map(|p| p.run.id);
    let compare_url = match (t.baseline_run_id, newest) {
        (Some(b), Some(n)) if b != n => format!("/console/compare?runs={b},{n}"),
        _ => String::new(),
    };
    let data = serde_json::json!({
        "scenario": &t.scenario,
        "baseline_run_id": t.baseline_run_id,
        "points": &t.points,
        "change_points": &t.change_points,
        "figures": TREND_FIGURES.iter().map(|f| f.key()).collect::<Vec<_>>(),
        "x_tag": (!x_picked.is_empty()).then_some(&x_picked),
    });
    Ok(ScenarioPage {
        nav: "runs",
        scenario: t.scenario.clone(),
        baseline,
        pinned,
        rows,
        changes,
        min_effect_pct: format::float(t.min_effect_pct, 1),
        compare_url,
        x_options,
        x_picked,
        x_untagged,
        data_json: data.to_string().replace('<', "\\u003c"),
    })
}
