//! `harrier load run`: drives the engine, merges its ticks, reports each second and stores
//! the run.
//!
//! Owns [`run_load`]: target check, the engine's start, the per-second lines (handed to a
//! callback: the CLI prints them), and the run stored like an import (tool `harrier`, its
//! per-second buckets and exact summary built by the run builder, the generator's own
//! figures as `reported`). Must not print, parse command lines or know HTTP requests.

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::domain::load::{LoadAccumulator, LoadSummary, RunPlan, SecondLine};
use crate::error::{Error, Result};
use crate::sources::load::{self, EngineSettings, LoadError, RequestSpec};
use crate::store::{NewRun, Store};

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    pub spec: RequestSpec,
    pub settings: EngineSettings,
    /// Load a target that is neither loopback nor private.
    pub allow_public_target: bool,
    /// Dispatch delay p99 above which the run is generator-limited, µs.
    pub dispatch_limit_us: u64,
    /// Run name [default: label and schedule].
    pub name: Option<String>,
    /// Scenario [default: method and URL].
    pub scenario: Option<String>,
    pub tags: Vec<(String, String)>,
}

/// The stored run.
#[derive(Debug, Clone, Serialize)]
pub struct StoredLoadRun {
    pub id: i64,
    pub name: String,
    /// Console page of the run.
    pub url: String,
}

/// How a load run ended.
#[derive(Debug, Clone)]
pub struct LoadOutcome {
    pub summary: LoadSummary,
    /// `None` without a store, or when no request completed.
    pub run: Option<StoredLoadRun>,
}

impl From<LoadError> for Error {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Start(m) => Error::Internal(m),
            other => Error::BadRequest(other.to_string()),
        }
    }
}

/// Runs the load, calls `on_second` with each second as every worker has handed it over,
/// and stores the run in `store` (when given). `cancel` ends the schedule early; what was
/// measured is kept.
pub async fn run_load(
    store: Option<&Store>,
    req: LoadRequest,
    cancel: CancellationToken,
    mut on_second: impl FnMut(&SecondLine),
) -> Result<LoadOutcome> {
    let spec = req.spec.clone();
    let allow = req.allow_public_target;
    let addr = tokio::task::spawn_blocking(move || load::resolve_target(&spec, allow))
        .await
        .map_err(|e| Error::Internal(format!("resolving the target stopped: {e}")))??;
    let label = req.spec.label();
    let schedule = req.settings.workload.describe();
    let mut acc = LoadAccumulator::new(RunPlan {
        label: label.clone(),
        schedule: schedule.clone(),
        open: req.settings.workload.is_open(),
        duration_s: req.settings.workload.duration_s(),
        max_connections: req.settings.max_connections,
        dispatch_limit_us: req.dispatch_limit_us,
        workers: req.settings.threads.max(1),
    });
    let mut running = load::start(req.spec.clone(), addr, &req.settings, cancel)?;
    while let Some(tick) = running.ticks.recv().await {
        for line in acc.push(tick) {
            on_second(&line);
        }
    }
    let (lines, data, summary) = acc.finish();
    for line in &lines {
        on_second(line);
    }
    let run = match store {
        Some(store) if data.overall.count > 0 => {
            let name = req
                .name
                .clone()
                .unwrap_or_else(|| format!("{label} · {schedule}"));
            let new = NewRun {
                name: name.clone(),
                scenario: Some(
                    req.scenario
                        .clone()
                        .unwrap_or_else(|| format!("{} {}", req.spec.method, req.spec.url)),
                ),
                tool: "harrier".into(),
                source: Some(req.spec.url.clone()),
                tags: req.tags.clone(),
                imported_at_ms: crate::now_ms(),
            };
            let ids = store.insert_runs(&[(new, &data)]).await?;
            metrics::counter!("harrier_runs_imported_total").increment(1);
            metrics::counter!("harrier_samples_imported_total").increment(data.overall.count);
            ids.first().map(|&id| StoredLoadRun {
                id,
                name,
                url: format!("/console/runs/{id}"),
            })
        }
        _ => None,
    };
    Ok(LoadOutcome { summary, run })
}
