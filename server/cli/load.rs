//! `harrier load run URL` and `harrier load find URL`: the open-model load generator and
//! its saturation search on the command line.
//!
//! Owns the Ctrl-C wiring and printing: one line per second (per step for `find`) while it
//! runs, the summary or the answer at the end, where the run was stored. The flags become
//! a request in `services::load_args`; the work is `services::load`.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::load_stream::LoadStream;
use super::serve::open_hint;
use crate::config::{
    Config, LoadAgentArgs, LoadCommand, LoadFindArgs, LoadRequestArgs, LoadRunArgs,
};
use crate::services::load::{FindEvent, LoadRequest, find_capacity, run_load};
use crate::services::load_agents::Assignment;
pub use crate::services::load_args::{find_request_of, request_of, schedule_of, workload_of};
use crate::services::load_runs::EndLoadRun;
use crate::sources::load::RequestSpec;
use crate::store::Store;

/// Runs a `harrier load …` command.
pub async fn load(command: LoadCommand) -> anyhow::Result<ExitCode> {
    match command {
        LoadCommand::Run(args) => run(*args).await,
        LoadCommand::Find(args) => find(*args).await,
        LoadCommand::Agent(args) => agent(args).await,
    }
}

/// Ctrl-C cancels the token (once), saying what happens.
fn cancel_on_ctrl_c() -> CancellationToken {
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nstopping: requests in flight finish, queued ones are not sent");
            c.cancel();
        }
    });
    cancel
}

async fn open_store(
    db: Option<std::path::PathBuf>,
    no_store: bool,
) -> anyhow::Result<Option<(Store, std::path::PathBuf)>> {
    if no_store {
        return Ok(None);
    }
    let db = Config::client_db(db)?;
    Ok(Some((
        Store::open(&db).await.with_context(|| open_hint(&db))?,
        db,
    )))
}

async fn find(args: LoadFindArgs) -> anyhow::Result<ExitCode> {
    let req = match find_request_of(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harrier load find: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let store = match &args.request.server {
        Some(_) => None,
        None => open_store(args.request.db.clone(), args.request.no_store).await?,
    };
    let cancel = cancel_on_ctrl_c();
    let mut req = req;
    let stream = stream_to(&args.request, &mut req.load, &cancel);
    println!(
        "harrier load find: {} {} — probe {} req/s, doubling to --max-rate {} req/s, bisecting to {} %; steps of {} s (confirmation {} s), at most {} s; at most {} connections, timeout {}; Ctrl-C stops and keeps what was measured",
        req.load.spec.method,
        req.load.spec.shown_url(),
        req.plan.start_rate,
        req.plan.max_rate,
        req.plan.tolerance * 100.0,
        req.plan.step_s,
        req.plan.confirm_s,
        req.max_duration_s,
        req.load.settings.max_connections,
        args.request.timeout,
    );
    print_feeder(&req.load.spec);
    let authority = host_port(&req.load.spec);
    println!(
        "judged by    {}",
        crate::domain::load::Search::new(req.plan.clone()).rule()
    );
    let verbose = args.verbose;
    let outcome = find_capacity(store.as_ref().map(|(s, _)| s), req, cancel, |event| {
        match event {
            FindEvent::Second(line) if verbose => println!("{}", line.render()),
            FindEvent::Second(_) => return,
            FindEvent::Step(step) => println!("step {:>6} s  {}", step.first_second, step.render()),
            FindEvent::Stopping(why) => println!("stopping     {why}"),
        }
        let _ = std::io::stdout().flush();
    })
    .await;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e @ crate::error::Error::BadRequest(_)) => {
            eprintln!("harrier load find: {e}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(e.into()),
    };
    print!("{}", outcome.summary.render());
    println!("answer       {}", outcome.search.statement);
    print_stored(outcome.run.as_ref(), store.as_ref().map(|(_, db)| db));
    let code = finish_stream(
        stream,
        EndLoadRun {
            duration_s: Some(outcome.summary.duration_s),
            search: serde_json::to_value(&outcome.search).ok(),
            ended_by: outcome.search.ended_by.clone(),
        },
    )
    .await?;
    Ok(unanswered("find", &outcome.summary, &authority).unwrap_or(code))
}

/// `host:port` of the target, the port written even when the URL left it out.
fn host_port(spec: &RequestSpec) -> String {
    if spec.authority.ends_with(&format!(":{}", spec.port)) {
        spec.authority.clone()
    } else {
        format!("{}:{}", spec.authority, spec.port)
    }
}

/// When no request got a response (nothing listens, connections refused or reset): says so
/// and what to do, and the exit code 1.
fn unanswered(
    command: &str,
    summary: &crate::domain::load::LoadSummary,
    authority: &str,
) -> Option<ExitCode> {
    let why = summary.unreachable(authority)?;
    eprintln!("harrier load {command}: every request failed before a response: {why}");
    Some(ExitCode::from(1))
}

fn print_feeder(spec: &RequestSpec) {
    if let Some(feed) = &spec.feed {
        println!(
            "feeder       {}: {} rows, one per request in order, wrapping around",
            feed.feeder.describe(),
            feed.feeder.rows()
        );
    }
}

fn print_stored(
    run: Option<&crate::services::load::StoredLoadRun>,
    db: Option<&std::path::PathBuf>,
) {
    match (run, db) {
        (Some(run), Some(db)) => println!(
            "stored       run {} \"{}\" in {} (tool harrier): {} on the `harrier serve` of that database",
            run.id,
            run.name,
            db.display(),
            run.url
        ),
        (None, Some(_)) => println!("stored       nothing: no request completed"),
        _ => {}
    }
}

async fn run(args: LoadRunArgs) -> anyhow::Result<ExitCode> {
    let req = match request_of(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("harrier load run: {e:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let store = match &args.request.server {
        Some(_) => None,
        None => open_store(args.request.db.clone(), args.request.no_store).await?,
    };
    let ctrl_c = cancel_on_ctrl_c();
    // The stream stops the load (not Ctrl-C) when the server refuses it.
    let cancel = ctrl_c.child_token();
    let mut req = req;
    let stream = stream_to(&args.request, &mut req, &cancel);
    println!(
        "harrier load: {} {} — {}, at most {} connections, timeout {}; Ctrl-C stops and keeps what was measured",
        req.spec.method,
        req.spec.shown_url(),
        req.settings.workload.describe(),
        req.settings.max_connections,
        args.request.timeout,
    );
    print_feeder(&req.spec);
    let authority = host_port(&req.spec);
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
    if let Some(why) = &outcome.aborted {
        println!("aborted      {why}");
    }
    print_stored(outcome.run.as_ref(), store.as_ref().map(|(_, db)| db));
    let ended_by = outcome.aborted.clone().or_else(|| {
        ctrl_c
            .is_cancelled()
            .then(|| "stopped (Ctrl-C)".to_string())
    });
    let code = finish_stream(
        stream,
        EndLoadRun {
            duration_s: Some(outcome.summary.duration_s),
            search: None,
            ended_by,
        },
    )
    .await?;
    Ok(unanswered("run", &outcome.summary, &authority).unwrap_or(code))
}

/// With `--server`: the tap of `req` and the stream it feeds.
fn stream_to(
    args: &LoadRequestArgs,
    req: &mut LoadRequest,
    cancel: &CancellationToken,
) -> Option<LoadStream> {
    let server = args.server.as_deref()?;
    if let Some(t) = &args.token {
        crate::cli::set_token(t.clone());
    }
    let (tap, stream) = LoadStream::start(server, cancel.clone());
    req.tap = Some(tap);
    Some(stream)
}

/// Ends the streamed run (if any) and says where it is.
async fn finish_stream(stream: Option<LoadStream>, end: EndLoadRun) -> anyhow::Result<ExitCode> {
    let Some(stream) = stream else {
        return Ok(ExitCode::SUCCESS);
    };
    match stream.finish(end).await {
        Ok(Some(run)) => {
            println!("stored       run {} on the server: {}", run.id, run.url);
            Ok(ExitCode::SUCCESS)
        }
        Ok(None) => {
            println!("stored       nothing: the run was never opened on the server");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("harrier load: {e:#}");
            Ok(ExitCode::from(1))
        }
    }
}

/// `harrier load agent`: polls `--server` for parts of load tests and runs them.
async fn agent(args: LoadAgentArgs) -> anyhow::Result<ExitCode> {
    if let Some(t) = &args.token {
        crate::cli::set_token(t.clone());
    }
    let base = crate::cli::import::server_base(&args.server);
    let name = args.name.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "agent".into());
        format!("{host}-{}", std::process::id())
    });
    let give_up = match args.wait.as_deref() {
        Some(w) => Some(
            std::time::Instant::now()
                + std::time::Duration::from_secs_f64(
                    crate::services::load_args::duration_s("--wait", w)
                        .map_err(anyhow::Error::msg)?,
                ),
        ),
        None => None,
    };
    let ctrl_c = cancel_on_ctrl_c();
    println!("harrier load agent {name}: waiting for load tests from {base} (Ctrl-C stops)");
    let url = format!("{base}/api/v1/load-agents/poll");
    let mut failures = 0u32;
    loop {
        if ctrl_c.is_cancelled() {
            return Ok(ExitCode::SUCCESS);
        }
        if give_up.is_some_and(|t| std::time::Instant::now() >= t) {
            eprintln!("harrier load agent: no load test came within --wait");
            return Ok(ExitCode::from(1));
        }
        let answer = tokio::select! {
            a = crate::cli::http().post(&url).json(&serde_json::json!({"name": name})).send() => a,
            _ = ctrl_c.cancelled() => return Ok(ExitCode::SUCCESS),
        };
        let response = match answer {
            Ok(r) => r,
            Err(e) => {
                failures += 1;
                if failures == 1 || failures.is_multiple_of(30) {
                    eprintln!("harrier load agent: cannot reach {url} ({e}); trying again");
                }
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                continue;
            }
        };
        failures = 0;
        let status = response.status();
        if status == reqwest::StatusCode::NO_CONTENT {
            continue;
        }
        if !status.is_success() {
            let body: serde_json::Value = response.json().await.unwrap_or_default();
            eprintln!(
                "harrier load agent: {url} answered {status}: {}",
                body["error"].as_str().unwrap_or("refused")
            );
            if matches!(status.as_u16(), 401 | 403) {
                return Ok(ExitCode::from(1));
            }
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            continue;
        }
        let part: Assignment = response
            .json()
            .await
            .with_context(|| format!("{url} answered with something other than a part"))?;
        run_part(&base, &part, &ctrl_c).await;
        if args.once || ctrl_c.is_cancelled() {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

/// Runs one part of a load test and streams it into its run.
async fn run_part(base: &str, part: &Assignment, ctrl_c: &CancellationToken) {
    println!(
        "part {} of {} of run {}: {}",
        part.index + 1,
        part.agents,
        part.run_id,
        part.flags.join(" ")
    );
    let cancel = ctrl_c.child_token();
    let (tap, stream) = LoadStream::join(base, part.run_id, part.worker_offset, cancel.clone());
    let mut follow = None;
    let outcome = match crate::services::load_tests::part_request(part) {
        Ok(mut req) => {
            req.tap = Some(tap);
            if let Some(control) = req.settings.control.clone() {
                follow = Some(tokio::spawn(follow_control(
                    base.to_string(),
                    part.run_id,
                    part.agents,
                    control,
                    cancel.clone(),
                )));
            }
            let wait_ms = part.start_at_ms - crate::now_ms();
            if wait_ms > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(wait_ms.min(60_000) as u64))
                    .await;
            }
            run_load(None, req, cancel.clone(), |line| {
                println!("{}", line.render());
                let _ = std::io::stdout().flush();
            })
            .await
            .map_err(|e| e.to_string())
        }
        Err(e) => {
            drop(tap);
            Err(e.to_string())
        }
    };
    if let Some(f) = follow {
        f.abort();
    }
    let end = match &outcome {
        Ok(o) => {
            print!("{}", o.summary.render());
            EndLoadRun {
                duration_s: Some(o.summary.duration_s),
                search: None,
                ended_by: o.aborted.clone().or_else(|| {
                    ctrl_c
                        .is_cancelled()
                        .then(|| "an agent was stopped (Ctrl-C)".into())
                }),
            }
        }
        Err(e) => {
            eprintln!("harrier load agent: this part failed: {e}");
            EndLoadRun {
                ended_by: Some(format!("an agent's part failed: {e}")),
                ..EndLoadRun::default()
            }
        }
    };
    // A part that never opened its stream still ends its share of the run.
    let finished = match stream.finish(end.clone()).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => end_part(base, part.run_id, &end).await,
        Err(e) => Err(e),
    };
    match finished {
        Ok(()) => println!("part ended: {base}/console/runs/{}", part.run_id),
        Err(e) => eprintln!("harrier load agent: ending the part failed: {e:#}"),
    }
}

/// Follows the rate the server's search sets for run `id` (a long poll of
/// `GET /api/v1/load-runs/{id}/control`), setting this agent's share on `control` the moment
/// a change arrives and reporting how late it came with the next poll (each change made
/// while the agent was waiting). Returns at the stop;
/// cancels `cancel` (ending the part) when the server stays unreachable for 10 s.
async fn follow_control(
    base: String,
    id: i64,
    agents: u32,
    control: std::sync::Arc<crate::sources::load::RateControl>,
    cancel: CancellationToken,
) {
    use crate::services::load_runs::Control;
    let url = format!("{base}/api/v1/load-runs/{id}/control");
    let mut after = 0u64;
    let mut delay_ms: Option<f64> = None;
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        let mut request = crate::cli::http()
            .get(&url)
            .query(&[("after", after)])
            .timeout(std::time::Duration::from_secs(60));
        if let Some(d) = delay_ms.take() {
            request = request.query(&[("delay_ms", d)]);
        }
        let answer = tokio::select! {
            r = request.send() => r,
            _ = cancel.cancelled() => return,
        };
        let got = match answer {
            Ok(r) if r.status().is_success() => r.json::<Control>().await.ok(),
            _ => None,
        };
        match got {
            Some(c) => {
                failing_since = None;
                if c.version > after {
                    control.set(crate::services::load_tests::segment_of(&c, agents));
                    // The first answer is the rate set before this agent was waiting: no
                    // measure of how fast a change reaches it.
                    delay_ms = (after > 0).then(|| (crate::now_ms() - c.sent_at_unix_ms) as f64);
                    after = c.version;
                    if c.stop {
                        return;
                    }
                }
            }
            None => {
                let since = *failing_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() >= std::time::Duration::from_secs(10) {
                    eprintln!(
                        "harrier load agent: the server's rate stayed out of reach for 10 s; ending this part"
                    );
                    control.set(crate::services::load_tests::segment_of(
                        &Control {
                            stop: true,
                            ..Control::default()
                        },
                        agents,
                    ));
                    cancel.cancel();
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    }
}

async fn end_part(base: &str, id: i64, end: &EndLoadRun) -> anyhow::Result<()> {
    let url = format!("{base}/api/v1/load-runs/{id}/end");
    let r = crate::cli::http().post(&url).json(end).send().await?;
    anyhow::ensure!(r.status().is_success(), "{url} answered {}", r.status());
    Ok(())
}
