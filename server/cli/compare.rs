//! `harrier compare`, `harrier check` and `harrier baseline`: against the local database
//! (`--db`) through the library, or a running server (`--server`) through its JSON API.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::{
    BaselineArgs, CheckArgs, CompareArgs, CompareFormat, DEFAULT_DB, SeedArgs, TargetArgs,
};
use crate::domain::compare::gates::{self, Status};
use crate::domain::compare::render::{self, Overlay};
use crate::domain::compare::{Comparison, Options};
use crate::services::comparisons::{self, BaselineSpec, CheckReport, CheckRequest};
use crate::store::{DatabaseUrl, Store};
use anyhow::{Context, bail};

/// Where runs are read: a database file or a running harrier.
enum Source {
    Db(Store),
    Server(String),
}

/// An input error: exit code 2 for `check`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct InputError(String);

async fn source(target: &TargetArgs) -> anyhow::Result<Source> {
    Ok(match &target.server {
        Some(s) => Source::Server(s.trim_end_matches('/').to_string()),
        None => {
            let db = match &target.database_url {
                Some(url) => url.clone(),
                None => DatabaseUrl::Sqlite(
                    target
                        .db
                        .clone()
                        .unwrap_or_else(|| PathBuf::from(DEFAULT_DB)),
                ),
            };
            if let DatabaseUrl::Sqlite(path) = &db
                && !path.exists()
            {
                return Err(InputError(format!(
                    "no database at {} (import runs first, or pass --db or --server)",
                    path.display()
                ))
                .into());
            }
            Source::Db(
                Store::connect(&db)
                    .await
                    .with_context(|| format!("opening {}", db.shown()))?,
            )
        }
    })
}

/// Turns a library error into an input error when the request itself was wrong.
fn lib_err(e: crate::error::Error) -> anyhow::Error {
    match e {
        crate::error::Error::NotFound(_) | crate::error::Error::BadRequest(_) => {
            InputError(e.to_string()).into()
        }
        other => anyhow::Error::new(other),
    }
}

/// Reads a JSON answer; 4xx answers become input errors with the server's message.
async fn answer(res: reqwest::Response, url: &str) -> anyhow::Result<serde_json::Value> {
    let status = res.status();
    let json: serde_json::Value = res
        .json()
        .await
        .with_context(|| format!("{url} answered {status} without JSON"))?;
    if status.is_client_error() {
        return Err(InputError(json["error"].as_str().unwrap_or("bad request").to_string()).into());
    }
    if !status.is_success() {
        bail!("{url}: {}", json["error"].as_str().unwrap_or("failed"));
    }
    Ok(json)
}

async fn get_json(url: &str) -> anyhow::Result<serde_json::Value> {
    let res = crate::cli::http()
        .get(url)
        .send()
        .await
        .with_context(|| format!("cannot reach {url} (is `harrier serve` running there?)"))?;
    answer(res, url).await
}

fn write_out(output: &Option<PathBuf>, text: &str) -> anyhow::Result<()> {
    match output {
        Some(path) => {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// `harrier compare A B …`
pub async fn compare(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let opts = Options {
        min_effect_pct: args.min_effect_pct,
        ..Options::default()
    };
    let src = source(&args.target).await?;
    let ids = args
        .runs
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let comparison: Comparison = match &src {
        Source::Db(store) => comparisons::comparison(store, &args.runs, &opts)
            .await
            .map_err(lib_err)?,
        Source::Server(base) => {
            let url = format!(
                "{base}/api/v1/compare?runs={ids}&min_effect_pct={}",
                args.min_effect_pct
            );
            serde_json::from_value(get_json(&url).await?)
                .with_context(|| format!("{url} answered an unexpected shape"))?
        }
    };
    let text = match args.format {
        CompareFormat::Table => render::table(&comparison),
        CompareFormat::Json => serde_json::to_string_pretty(&comparison)? + "\n",
        CompareFormat::Markdown => render::markdown(&comparison),
        CompareFormat::Html => {
            let mut overlays = Vec::new();
            for id in &args.runs {
                overlays.push(match &src {
                    Source::Db(store) => comparisons::overlay(store, *id).await.map_err(lib_err)?,
                    Source::Server(base) => {
                        let series = get_json(&format!("{base}/api/v1/runs/{id}/timeseries"))
                            .await
                            .unwrap_or_default();
                        let dist = get_json(&format!("{base}/api/v1/runs/{id}/distribution"))
                            .await
                            .unwrap_or_default();
                        Overlay::from_json(*id, &series, &dist)
                    }
                });
            }
            let now = crate::domain::format::time(Some(crate::now_ms()));
            render::html(&comparison, &overlays, &now)
        }
    };
    write_out(&args.output, &text)?;
    Ok(ExitCode::SUCCESS)
}

/// Exit code of a failed `compare` or `baseline`: 2 for a usage or input error (unknown
/// run, bad argument), 1 otherwise.
pub fn error_code(e: &anyhow::Error) -> ExitCode {
    ExitCode::from(if e.downcast_ref::<InputError>().is_some() {
        2
    } else {
        1
    })
}

/// `harrier check RUN [GATE…]`: 0 pass, 1 fail, 2 usage or input error.
pub async fn check(args: CheckArgs) -> ExitCode {
    match check_inner(args).await {
        Ok(passed) => ExitCode::from(if passed { 0 } else { 1 }),
        Err(e) => {
            // Whatever kept the gates from being evaluated, the run was not judged.
            eprintln!("harrier check: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn check_inner(args: CheckArgs) -> anyhow::Result<bool> {
    let run: i64 = args
        .run
        .trim()
        .parse()
        .map_err(|_| InputError(format!("RUN must be a run id, got {:?}", args.run)))?;
    let parsed = args
        .gates
        .iter()
        .map(|g| gates::parse(g))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| InputError(e.to_string()))?;
    if parsed.is_empty() {
        return Err(InputError(
            "no gates: give at least one, e.g. harrier check 12 'p95<500ms' 'p95 +10%'".into(),
        )
        .into());
    }
    let spec = BaselineSpec::parse(&args.baseline).map_err(|e| InputError(e.to_string()))?;
    let opts = Options {
        min_effect_pct: args.min_effect_pct,
        ..Options::default()
    };
    let report: CheckReport = match source(&args.target).await? {
        Source::Db(store) => comparisons::check(&store, run, spec, &parsed, &opts, !args.no_record)
            .await
            .map_err(lib_err)?,
        Source::Server(base) => {
            let url = format!("{base}/api/v1/runs/{run}/check");
            let body = CheckRequest {
                gates: args.gates.clone(),
                baseline: match spec {
                    BaselineSpec::Auto => "auto".into(),
                    BaselineSpec::Run(id) => id.into(),
                    BaselineSpec::None => serde_json::Value::Null,
                },
                min_effect_pct: Some(args.min_effect_pct),
                record: !args.no_record,
            };
            let res = crate::cli::http()
                .post(&url)
                .json(&body)
                .send()
                .await
                .with_context(|| {
                    format!("cannot reach {url} (is `harrier serve` running there?)")
                })?;
            serde_json::from_value(answer(res, &url).await?)
                .with_context(|| format!("{url} answered an unexpected shape"))?
        }
    };
    let against = match (&report.baseline, report.baseline_source) {
        (Some(b), Some(s)) => format!(
            " against baseline #{} \"{}\" ({})",
            b.id,
            b.name,
            serde_json::to_value(s)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
        _ => " (no baseline)".to_string(),
    };
    outln!(
        "harrier check: run #{} \"{}\"{against}",
        report.run.id,
        report.run.name
    );
    let width = report
        .results
        .iter()
        .map(|r| r.gate.chars().count())
        .max()
        .unwrap_or(0);
    for r in &report.results {
        let tag = match r.status {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skipped => "SKIP",
        };
        outln!("  {tag}  {:<width$}  {}", r.gate, r.message);
    }
    let failed = report
        .results
        .iter()
        .filter(|r| r.status == Status::Fail)
        .count();
    let total = report.results.len();
    outln!(
        "{total} {}: {} passed, {} failed{}",
        if total == 1 { "gate" } else { "gates" },
        report
            .results
            .iter()
            .filter(|r| r.status == Status::Pass)
            .count(),
        failed,
        match report
            .results
            .iter()
            .filter(|r| r.status == Status::Skipped)
            .count()
        {
            0 => String::new(),
            n => format!(", {n} skipped"),
        }
    );
    if let Some(path) = &args.junit {
        let suite = format!(
            "harrier.{}.run-{}",
            report.run.scenario.as_deref().unwrap_or("runs"),
            report.run.id
        );
        std::fs::write(path, gates::junit_xml(&suite, &report.results))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(report.passed)
}

/// `harrier baseline SCENARIO [RUN] [--clear]`
pub async fn baseline(args: BaselineArgs) -> anyhow::Result<ExitCode> {
    let scenario = args.scenario.clone();
    let shown: serde_json::Value = match source(&args.target).await? {
        Source::Db(store) => {
            if let Some(run) = args.run {
                let detail = store
                    .get_run(run)
                    .await?
                    .ok_or_else(|| InputError(format!("run {run} not found")))?;
                if detail.scenario.as_deref() != Some(scenario.as_str()) {
                    return Err(InputError(format!(
                        "run {run} belongs to scenario {:?}, not {scenario:?}",
                        detail.scenario.as_deref().unwrap_or("")
                    ))
                    .into());
                }
                store.set_baseline(&scenario, run, crate::now_ms()).await?;
            } else if args.clear && !store.clear_baseline(&scenario).await? {
                outln!("{scenario}: no pinned baseline");
            }
            let pinned = store.pinned_baseline(&scenario).await?;
            serde_json::json!({"run_id": pinned, "source": pinned.map(|_| "pinned")})
        }
        Source::Server(base) => {
            let url = format!(
                "{base}/api/v1/scenarios/{}/baseline",
                crate::domain::format::path_segment(&scenario)
            );
            let client = crate::cli::http();
            if let Some(run) = args.run {
                let res = client
                    .put(&url)
                    .json(&serde_json::json!({"run_id": run}))
                    .send()
                    .await
                    .with_context(|| format!("cannot reach {url}"))?;
                answer(res, &url).await?;
            } else if args.clear {
                let res = client
                    .delete(&url)
                    .send()
                    .await
                    .with_context(|| format!("cannot reach {url}"))?;
                if res.status() == reqwest::StatusCode::NOT_FOUND {
                    outln!("{scenario}: no pinned baseline");
                }
            }
            get_json(&url).await?
        }
    };
    match (shown["run_id"].as_i64(), shown["source"].as_str()) {
        (Some(id), Some("pinned")) => outln!("{scenario}: baseline run #{id} (pinned)"),
        (Some(id), source) => outln!(
            "{scenario}: no baseline pinned; auto uses run #{id} ({})",
            source.unwrap_or("auto")
        ),
        (None, _) => outln!(
            "{scenario}: no baseline pinned; `auto` uses the latest earlier run that passed its check"
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// `harrier seed FILE…`: published figures as summary-only runs.
pub async fn seed(args: SeedArgs) -> anyhow::Result<ExitCode> {
    let db = args.db.clone().unwrap_or_else(|| PathBuf::from(DEFAULT_DB));
    let store = Store::open(&db)
        .await
        .with_context(|| format!("opening {}", db.display()))?;
    for path in &args.files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| InputError(format!("cannot read {}: {e}", path.display())))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let runs = crate::sources::seed::parse(&text, &name, crate::now_ms())
            .map_err(|e| InputError(e.to_string()))?;
        let batch: Vec<_> = runs.iter().map(|r| (r.run.clone(), &r.data)).collect();
        let ids = crate::services::import::insert_runs(&store, &batch).await?;
        for (id, r) in ids.iter().zip(&runs) {
            if let Some(notes) = &r.notes {
                let patch = crate::store::RunPatch {
                    notes: Some(Some(notes.clone())),
                    ..Default::default()
                };
                store.update_run(*id, &patch).await?;
            }
            outln!(
                "{name}: run {id} \"{}\" (summary, as published)",
                r.run.name
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
