//! `harrier load run URL`: the open-model load generator on the command line.
//!
//! Owns turning [`LoadRunArgs`] into a [`LoadRequest`] (schedule, request, limits), the
//! Ctrl-C wiring, and printing: one line per second while it runs, the summary at the end,
//! where the run was stored. The work is `services::load`.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::serve::open_hint;
use crate::config::{Config, LoadCommand, LoadRunArgs};
use crate::domain::format::parse_duration_ms;
use crate::domain::load::{ClosedModel, RateProfile, Schedule, Workload};
use crate::services::load::{LoadRequest, run_load};
use crate::sources::load::{EngineSettings, RequestSpec, parse_status_ranges};
use crate::store::Store;

/// Runs a `harrier load …` command.
pub async fn load(command: LoadCommand) -> anyhow::Result<ExitCode> {
    match command {
        LoadCommand::Run(args) => run(*args).await,
    }
}

fn duration_s(flag: &str, s: &str) -> Result<f64, String> {
    parse_duration_ms(s)
        .map(|ms| ms as f64 / 1000.0)
        .ok_or_else(|| format!("{flag} {s:?}: expected a duration such as 500ms, 30s, 2m"))
}

fn rate(flag: &str, s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches("/s").parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 0.0 => Ok(r),
        _ => Err(format!(
            "{flag} {s:?}: expected requests per second, e.g. 500"
        )),
    }
}

/// The schedule the flags describe (see `harrier load run --help`).
pub fn schedule_of(args: &LoadRunArgs) -> Result<Schedule, String> {
    let duration = args
        .duration
        .as_deref()
        .map(|d| duration_s("--duration", d))
        .transpose()?;
    let (profile, natural_s) = match (&args.rate, &args.steps) {
        (Some(r), None) => match r.split_once("..") {
            Some((from, to)) => {
                let over = args
                    .over
                    .as_deref()
                    .ok_or("a ramp (--rate FROM..TO) needs --over, e.g. --over 2m")?;
                let over_s = duration_s("--over", over)?;
                (
                    RateProfile::Ramp {
                        from_per_s: rate("--rate", from)?,
                        to_per_s: rate("--rate", to)?,
                        over_s,
                    },
                    over_s,
                )
            }
            None => {
                if args.over.is_some() {
                    return Err("--over goes with a ramp: --rate FROM..TO".into());
                }
                (
                    RateProfile::Constant {
                        rate_per_s: rate("--rate", r)?,
                    },
                    10.0,
                )
            }
        },
        (None, Some(steps)) => {
            let rates = steps
                .split(',')
                .map(|r| rate("--steps", r))
                .collect::<Result<Vec<f64>, String>>()?;
            let step_s = duration_s("--step-duration", &args.step_duration)?;
            let n = rates.len() as f64;
            (
                RateProfile::Steps {
                    rates_per_s: rates,
                    step_s,
                },
                n * step_s,
            )
        }
        (None, None) => {
            return Err(
                "say how fast: --rate 500, --rate 100..2000 --over 2m, or --steps 100,200,400"
                    .into(),
            );
        }
        (Some(_), Some(_)) => return Err("--rate and --steps exclude each other".into()),
    };
    Ok(Schedule {
        profile,
        duration_s: duration.unwrap_or(natural_s),
        poisson: args.poisson,
        seed: args.seed,
    })
}

/// The workload the flags describe: `--users` (closed model), else the schedule.
pub fn workload_of(args: &LoadRunArgs) -> Result<Workload, String> {
    let Some(users) = args.users else {
        return schedule_of(args).map(Workload::Open);
    };
    if users == 0 {
        return Err("--users must be at least 1".into());
    }
    let think_s = match args.think.trim() {
        "0" | "0ms" | "0s" => 0.0,
        t => duration_s("--think", t)?,
    };
    let duration_s = match &args.duration {
        Some(d) => duration_s("--duration", d)?,
        None => 10.0,
    };
    Ok(Workload::Closed(ClosedModel {
        users,
        think_s,
        duration_s,
    }))
}

/// The whole request the flags describe.
pub fn request_of(args: &LoadRunArgs) -> anyhow::Result<LoadRequest> {
    let workload = workload_of(args).map_err(anyhow::Error::msg)?;
    let timeout_s = duration_s("--timeout", &args.timeout).map_err(anyhow::Error::msg)?;
    let dispatch_limit_s =
        duration_s("--dispatch-limit", &args.dispatch_limit).map_err(anyhow::Error::msg)?;
    let body = match &args.body_file {
        Some(path) => {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?
        }
        None => Vec::new(),
    };
    let mut spec = RequestSpec::new(
        &args.url,
        &args.method,
        &args.headers,
        body,
        Duration::from_secs_f64(timeout_s),
    )?;
    spec.expect_status = parse_status_ranges(&args.expect_status)?;
    spec.expect_body = args
        .expect_body_contains
        .as_ref()
        .map(|t| t.as_bytes().to_vec());
    Ok(LoadRequest {
        spec,
        settings: EngineSettings {
            workload,
            max_connections: args.max_connections.max(1),
            threads: args.threads.max(1),
        },
        allow_public_target: args.allow_public_target,
        dispatch_limit_us: (dispatch_limit_s * 1e6).round() as u64,
        name: args.name.clone(),
        scenario: args.scenario.clone(),
        tags: args.tags.clone(),
    })
}

async fn run(args: LoadRunArgs) -> anyhow::Result<ExitCode> {
    let req = match request_of(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harrier load run: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let store = if args.no_store {
        None
    } else {
        let db = Config::client_db(args.db.clone())?;
        Some((Store::open(&db).await.with_context(|| open_hint(&db))?, db))
    };
    let cancel = CancellationToken::new();
    {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nstopping: requests in flight finish, queued ones are not sent");
                cancel.cancel();
            }
        });
    }
    println!(
        "harrier load: {} {} — {}, at most {} connections, timeout {}; Ctrl-C stops and keeps what was measured",
        req.spec.method,
        req.spec.url,
        req.settings.workload.describe(),
        req.settings.max_connections,
        args.timeout,
    );
    let quiet = args.quiet;
    let outcome = run_load(store.as_ref().map(|(s, _)| s), req, cancel, |line| {
        if !quiet {
            println!("{}", line.render());
            let _ = std::io::stdout().flush();
        }
    })
    .await;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e @ crate::error::Error::BadRequest(_)) => {
            eprintln!("harrier load run: {e}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(e.into()),
    };
    print!("{}", outcome.summary.render());
    match (&outcome.run, &store) {
        (Some(run), Some((_, db))) => println!(
            "stored       run {} \"{}\" in {} (tool harrier): `harrier serve` shows it at http://127.0.0.1:7070{}",
            run.id,
            run.name,
            db.display(),
            run.url
        ),
        (None, Some(_)) => println!("stored       nothing: no request completed"),
        _ => {}
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(line: &[&str]) -> LoadRunArgs {
        let mut argv = vec!["harrier", "load", "run", "http://127.0.0.1:1/"];
        argv.extend_from_slice(line);
        match crate::config::Cli::parse_from(argv).command {
            Some(crate::config::Command::Load(LoadCommand::Run(a))) => *a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_make_schedules() {
        let s = schedule_of(&args(&["--rate", "500"])).unwrap();
        assert_eq!(s.profile, RateProfile::Constant { rate_per_s: 500.0 });
        assert_eq!(s.duration_s, 10.0);
        let s = schedule_of(&args(&["--rate", "100..2000", "--over", "2m"])).unwrap();
        assert_eq!(s.duration_s, 120.0);
        assert_eq!(s.expected_count(), 126_000.0);
        let s = schedule_of(&args(&[
            "--steps",
            "100,200,400",
            "--step-duration",
            "30s",
            "--poisson",
        ]))
        .unwrap();
        assert_eq!((s.duration_s, s.poisson), (90.0, true));
        assert!(
            schedule_of(&args(&["--rate", "100..200"]))
                .unwrap_err()
                .contains("--over")
        );
        assert!(schedule_of(&args(&[])).is_err());
        assert!(schedule_of(&args(&["--rate", "fast"])).is_err());
        let r = request_of(&args(&[
            "--rate",
            "5",
            "--expect-status",
            "200,404",
            "-X",
            "post",
        ]))
        .unwrap();
        assert_eq!(r.spec.expect_status, [(200, 200), (404, 404)]);
        assert_eq!(r.spec.method, hyper::Method::POST);
        assert_eq!(r.dispatch_limit_us, 2000);
        let w = workload_of(&args(&[
            "--users",
            "10",
            "--think",
            "100ms",
            "--duration",
            "5s",
        ]))
        .unwrap();
        assert_eq!(
            w,
            Workload::Closed(ClosedModel {
                users: 10,
                think_s: 0.1,
                duration_s: 5.0
            })
        );
        assert!(!w.is_open());
    }
}
