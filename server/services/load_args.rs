//! The load generator's flags (`harrier load run|find`, and the console's load tests,
//! which are given the same flags) turned into a [`LoadRequest`] / [`FindRequest`]:
//! schedule or search plan, the request (method, headers, body, feeder and template, TLS
//! files, expected status and body), limits and naming. Errors name the flag and what it
//! expects. Reads the files the flags name (`--body-file`, `--feeder`, `--body-template`,
//! `--ca-file`, client certificates).

use std::time::Duration;

use anyhow::Context;

use crate::config::{LoadFindArgs, LoadRequestArgs, LoadRunArgs};
use crate::domain::format::parse_duration_ms;
use crate::domain::load::{
    AbortRule, ClosedModel, Feeder, RateProfile, Schedule, SearchPlan, Slo, Workload,
};
use crate::services::load::{FindRequest, LoadRequest};
use crate::sources::load::{
    EngineSettings, HttpVersion, RequestSpec, TlsFiles, parse_status_ranges,
};

pub fn duration_s(flag: &str, s: &str) -> Result<f64, String> {
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
    request_from(&args.url, workload, &args.request)
}

/// The request of `url` with `workload` and the shared flags.
pub fn request_from(
    url: &str,
    workload: Workload,
    args: &LoadRequestArgs,
) -> anyhow::Result<LoadRequest> {
    let timeout_s = duration_s("--timeout", &args.timeout).map_err(anyhow::Error::msg)?;
    let dispatch_limit_s = args
        .dispatch_limit
        .as_deref()
        .map(|d| duration_s("--dispatch-limit", d))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let body = match &args.body_file {
        Some(path) => {
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?
        }
        None => Vec::new(),
    };
    let feeder = args.feeder.as_deref().map(read_feeder).transpose()?;
    let template = match &args.body_template {
        Some(path) => Some((
            path.display().to_string(),
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read --body-template {}", path.display()))?,
        )),
        None => None,
    };
    let mut spec = RequestSpec::new(
        url,
        &args.method,
        &args.headers,
        body,
        Duration::from_secs_f64(timeout_s),
    )?
    .with_tls_files(TlsFiles {
        ca_file: args.ca_file.as_deref(),
        client_cert: args.client_cert.as_deref().zip(args.client_key.as_deref()),
    })?
    .with_feed(
        feeder,
        template.as_ref().map(|(n, t)| (n.as_str(), t.as_str())),
    )?;
    spec.version = match (args.http1, args.http2) {
        (true, _) => HttpVersion::Http1,
        (_, true) => HttpVersion::Http2,
        _ => HttpVersion::Auto,
    };
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
            control: None,
        },
        allow_public_target: args.allow_public_target,
        dispatch_limit_us: dispatch_limit_s.map(|s| (s * 1e6).round() as u64),
        name: args.name.clone(),
        scenario: args.scenario.clone(),
        tags: args.tags.clone(),
        abort_on: args
            .abort_on
            .as_deref()
            .map(AbortRule::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        tap: None,
    })
}

/// Reads `--feeder FILE`: JSON Lines when it ends in `.jsonl` or `.ndjson`, else CSV.
fn read_feeder(path: &std::path::Path) -> anyhow::Result<Feeder> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read --feeder {}", path.display()))?;
    let name = path.display().to_string();
    let jsonl = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl") || e.eq_ignore_ascii_case("ndjson"));
    let feeder = if jsonl {
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| anyhow::anyhow!("{name}: not UTF-8 text: {e}"))?;
        Feeder::from_jsonl(&name, text)
    } else {
        Feeder::from_csv(&name, &bytes)
    };
    Ok(feeder?)
}

fn percent(flag: &str, s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 100.0 => Ok(p / 100.0),
        _ => Err(format!("{flag} {s:?}: expected a percentage, e.g. 5%")),
    }
}

fn whole_seconds(flag: &str, s: &str) -> Result<u32, String> {
    let d = duration_s(flag, s)?;
    Ok(d.round().clamp(1.0, 86_400.0) as u32)
}

/// The search the flags describe.
pub fn find_request_of(args: &LoadFindArgs) -> anyhow::Result<FindRequest> {
    let err = anyhow::Error::msg;
    let max_duration_s = duration_s("--max-duration", &args.max_duration).map_err(err)?;
    let workload = Workload::Open(Schedule {
        profile: RateProfile::Constant { rate_per_s: 0.0 },
        duration_s: max_duration_s,
        poisson: false,
        seed: 1,
    });
    let load = request_from(&args.url, workload, &args.request)?;
    let start_rate = rate("--start-rate", &args.start_rate).map_err(err)?;
    let max_rate = rate("--max-rate", &args.max_rate).map_err(err)?;
    if start_rate < 1.0 || max_rate < start_rate {
        return Err(err(format!(
            "--start-rate {start_rate} must be at least 1 and at most --max-rate {max_rate}"
        )));
    }
    let plan = SearchPlan {
        slo: args
            .slo
            .as_deref()
            .map(Slo::parse)
            .transpose()
            .map_err(err)?,
        tolerance: percent("--tolerance", &args.tolerance).map_err(err)?,
        start_rate,
        max_rate,
        step_s: whole_seconds("--step-duration", &args.step_duration).map_err(err)?,
        confirm_s: whole_seconds("--confirm-duration", &args.confirm_duration).map_err(err)?,
        fail_after_s: whole_seconds("--fail-after", &args.fail_after).map_err(err)?,
        dispatch_limit_us: load.dispatch_limit_us,
    };
    Ok(FindRequest {
        load,
        plan,
        max_duration_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(line: &[&str]) -> LoadRunArgs {
        let mut argv = vec!["harrier", "load", "run", "http://127.0.0.1:1/"];
        argv.extend_from_slice(line);
        match crate::config::Cli::parse_from(argv).command {
            Some(crate::config::Command::Load(crate::config::LoadCommand::Run(a))) => *a,
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
        assert_eq!(r.dispatch_limit_us, None);
        let r = request_of(&args(&["--rate", "5", "--dispatch-limit", "100ms"])).unwrap();
        assert_eq!(r.dispatch_limit_us, Some(100_000));
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
