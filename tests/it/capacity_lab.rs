//! The stated capacity against a service of known capacity, with real load tools.
//!
//! The lab (`examples/lab`, in process on 127.0.0.1:0): 20 workers, each request 40–60 ms
//! (uniform), so C = 20 / 50 ms = 400 req/s, overloaded three ways: fast 503s once 20
//! requests wait, an unbounded queue, or connections left to a listen backlog of 4 once a
//! tool's ramp has more users than the lab's connection slots (kept-alive connections, each
//! holding a slot: 30 for k6, 80 for JMeter, 125 for Locust — 1.25–1.5 × the users at the
//! knee, so the users let in keep the workers busy, and 20–25 users at the ramp's top are
//! left to the backlog, where the kernel drops their connects). Its capacity as a client
//! sees it is measured first by the peer, wrk (closed loop, 30 connections, below any
//! overload; no ramp): the requests the lab served per second while wrk held it saturated,
//! from 3 s in to its end (the first seconds of `refuse` pay for wrk's burst of connects
//! into the small backlog); once per overload, kept for the other tests of the process.
//!
//! Then a real tool ramps it (k6, Locust, JMeter; each run written by the tool at test time
//! into `$CARGO_TARGET_TMPDIR/capacity-lab/<tool>-<overload>/`, replaced on the next run),
//! the output is imported as a user would (`POST /api/v1/runs`), and the run's `capacity`
//! is checked:
//! - `throughput_rps`, the stated capacity, is the *successful* throughput where it stops
//!   growing: within ±10 % of the lab's measured capacity, whatever the tool counted on top
//!   (a flood of fast 503s or refused connections is not throughput);
//! - `users` at the knee is where Little's law puts it for a closed loop of users with
//!   think time Z: throughput X(N) ≤ min(N / (R₀ + Z), C), so the knee is N* = C × (R₀ + Z)
//!   with R₀ the low-load response time (the 50 ms mean service time). The band is 0.8 N* to
//!   1.5 N*: below N* the users cannot fill the workers (X is at most N / (R₀ + Z), so at
//!   0.8 N* it is at most 0.8 C: not yet the plateau); above, the jitter of the service time
//!   makes the real curve bend before it flattens, a ramp's levels are coarse (a step of
//!   several users, a level that lasts a few seconds) and the tool adds its own time to R₀
//!   — together well under half of N*.
//!
//! Each ramp lasts about 30 s; the ramps run one at a time (a tool's CPU would otherwise
//! slow another's clients, and these have 2 shared cores). They run once, on SQLite: the
//! capacity is computed from the run, not the store. A missing tool is a recorded skip
//! of kind `tool` (scripts/test.sh installs them all; CI fails on one).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::Value;

use crate::helpers::{TestApp, on_postgres, spawn_app};
use crate::lab::{Lab, LabConfig, Overload};
use crate::skip::{Kind, skip};

/// One ramp at a time, across the module.
static RAMPS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The lab's measured capacity per overload (req/s served under wrk, wrk's own figure).
static PEER: std::sync::Mutex<Vec<(Overload, f64, f64)>> = std::sync::Mutex::new(Vec::new());

const WORKERS: usize = 20;
/// Requests that may wait (`503`).
const QUEUE: usize = 20;
/// Mean service time, s.
const SERVICE_S: f64 = 0.050;
/// Every tool's request timeout (connect and response), s.
const TIMEOUT_S: f64 = 2.0;

/// The lab for `overload`; with `refuse`, `slots` connections (the peer's: 30).
fn lab_config(overload: Overload, slots: usize) -> LabConfig {
    LabConfig {
        workers: WORKERS,
        service_min: Duration::from_millis(40),
        service_max: Duration::from_millis(60),
        queue: if overload == Overload::Refuse {
            slots - WORKERS
        } else {
            QUEUE
        },
        overload,
        backlog: 4,
    }
}

async fn start_lab(overload: Overload, slots: usize) -> (Arc<Lab>, String) {
    let lab = Lab::new(lab_config(overload, slots));
    let addr = crate::lab::start(lab.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (lab, format!("http://{addr}/work"))
}

/// `program` on the PATH, or `None`.
fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Runs `cmd` to its end off the runtime's threads; panics with its output when it fails.
async fn run(mut cmd: Command, what: &str) -> std::process::Output {
    let what = what.to_string();
    tokio::task::spawn_blocking(move || {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        assert!(
            out.status.success(),
            "{what}: {}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    })
    .await
    .unwrap()
}

/// The lab's capacity as a closed-loop client sees it: wrk with 30 connections (below the
/// 40 requests that overload `503`; the 30 slots of `refuse`) for 8 s; the requests the lab
/// served from 3 s to 7.5 s, per second. Returns that and wrk's own Requests/sec.
async fn peer_capacity(overload: Overload) -> Option<(f64, f64)> {
    if let Some(&(_, lab, wrk)) = PEER.lock().unwrap().iter().find(|p| p.0 == overload) {
        return Some((lab, wrk));
    }
    let wrk = on_path("wrk")?;
    let (lab, url) = start_lab(overload, 30).await;
    let mut cmd = Command::new(wrk);
    cmd.args(["-t1", "-c30", "-d8s", "--timeout", "2s", &url]);
    let out = tokio::spawn(run(cmd, "wrk"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (t0, s0) = (Instant::now(), lab.served.load(Ordering::Relaxed));
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let (t1, s1) = (Instant::now(), lab.served.load(Ordering::Relaxed));
    let measured = (s1 - s0) as f64 / (t1 - t0).as_secs_f64();
    let text = String::from_utf8_lossy(&out.await.unwrap().stdout).to_string();
    let wrk_rps: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in wrk's output: {text}"));
    println!(
        "capacity-lab: lab ({}) measured {measured:.1} req/s served under wrk (wrk says {wrk_rps:.1} req/s; nominal {:.1})",
        overload.name(),
        lab_config(overload, 30).capacity_rps()
    );
    PEER.lock().unwrap().push((overload, measured, wrk_rps));
    Some((measured, wrk_rps))
}

/// CPU seconds (user + system) of this process's finished child processes: the tools, as
/// the ramps run one at a time (other tests' children count too, if any end meanwhile).
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return f64::NAN;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

/// A tool's ramp: what it wrote and how to import it.
struct Ramp {
    file: PathBuf,
    /// `format=` of the import.
    format: &'static str,
    /// The users' think time, s.
    think_s: f64,
}

fn ramp_dir(tool: &str, overload: Overload) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("capacity-lab")
        .join(format!("{tool}-{}", overload.name()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// k6: a linear ramp (`ramping-vus`) from 1 to 50 virtual users over 30 s, no think time;
/// `--out csv`.
async fn k6(url: &str, dir: &Path) -> Option<Ramp> {
    let k6 = on_path("k6")?;
    let script = dir.join("ramp.js");
    std::fs::write(
        &script,
        format!(
            r#"import http from 'k6/http';
export const options = {{
  discardResponseBodies: true,
  scenarios: {{ ramp: {{ executor: 'ramping-vus', startVUs: 1,
    stages: [{{ duration: '30s', target: 50 }}], gracefulRampDown: '0s', gracefulStop: '0s' }} }},
}};
export default function () {{ http.get('{url}', {{ timeout: '{TIMEOUT_S}s' }}); }}
"#
        ),
    )
    .unwrap();
    let file = dir.join("k6.csv");
    let mut cmd = Command::new(k6);
    cmd.arg("run")
        .arg("--quiet")
        .arg("--no-usage-report")
        .arg("--out")
        .arg(format!("csv={}", file.display()))
        .arg(&script)
        .current_dir(dir);
    run(cmd, "k6 run").await;
    Some(Ramp {
        file,
        format: "k6-csv",
        think_s: 0.0,
    })
}

/// Locust (FastHttpUser): a linear ramp of `rate` users a second to `users`, `run_s` in all
/// (the ramps: 5 a second to 150, 32 s), each user thinking 0.2 s between requests; `--csv`
/// (the `_stats_history.csv` is imported).
async fn locust(url: &str, dir: &Path, users: u32, rate: u32, run_s: u32) -> Option<Ramp> {
    let locust = on_path("locust")?;
    let file = dir.join("locustfile.py");
    std::fs::write(
        &file,
        format!(
            r#"from locust import FastHttpUser, constant, task

class Lab(FastHttpUser):
    wait_time = constant(0.2)
    network_timeout = {TIMEOUT_S}
    connection_timeout = {TIMEOUT_S}

    @task
    def work(self):
        self.client.get("/work")
"#
        ),
    )
    .unwrap();
    let host = url.trim_end_matches("/work");
    let mut cmd = Command::new(locust);
    cmd.args(["-f", "locustfile.py", "--headless", "--only-summary"])
        .args(["-H", host])
        .args(["-u", &users.to_string(), "-r", &rate.to_string()])
        .args(["-t", &format!("{run_s}s"), "--csv", "locust"])
        .args(["--loglevel", "WARNING"])
        .current_dir(dir);
    let out = cmd_output_allowing_failures(cmd).await;
    let history = dir.join("locust_stats_history.csv");
    assert!(history.is_file(), "locust wrote no stats history: {out}");
    Some(Ramp {
        file: history,
        format: "locust",
        think_s: 0.2,
    })
}

/// Locust exits 1 when any request failed (as the 503 and refusal ramps make it): its
/// output is kept, its exit status is not judged.
async fn cmd_output_allowing_failures(mut cmd: Command) -> String {
    tokio::task::spawn_blocking(move || {
        let out = cmd.output().expect("locust starts");
        format!(
            "{}\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
    .await
    .unwrap()
}

/// JMeter 2.13 (the API driver `tests/lab/LabRamp.java`, compiled here): 10 steps of 10
/// users, 3 s each, each user thinking 100 ms (a Constant Timer); CSV JTL.
async fn jmeter(url: &str, dir: &Path) -> Option<Ramp> {
    let home = PathBuf::from(
        std::env::var("JMETER_HOME").unwrap_or_else(|_| "/usr/share/jmeter".to_string()),
    );
    let jar = home.join("bin/ApacheJMeter.jar");
    if !jar.is_file() {
        return None;
    }
    on_path("javac")?;
    let h = home.display();
    let cp = format!(
        "{}:{}:{h}/lib/ext/*:{h}/lib/*",
        dir.display(),
        jar.display()
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lab/LabRamp.java");
    let mut javac = Command::new("javac");
    javac
        .args(["-nowarn", "-d"])
        .arg(dir)
        .args(["-cp", &cp])
        .arg(src);
    run(javac, "javac LabRamp.java").await;
    let file = dir.join("jmeter.jtl");
    let mut java = Command::new("java");
    java.args(["-cp", &cp, "LabRamp", url])
        .arg(&file)
        .args([
            "10",
            "10",
            "3",
            "100",
            &((TIMEOUT_S * 1000.0) as u32).to_string(),
        ])
        .arg(format!("log_file={}", dir.join("jmeter.log").display()))
        .env("JMETER_HOME", &home)
        .current_dir(dir);
    run(java, "JMeter (LabRamp)").await;
    Some(Ramp {
        file,
        format: "jmeter-csv",
        think_s: 0.1,
    })
}

/// Imports `ramp` and returns the run's JSON.
async fn import(app: &TestApp, ramp: &Ramp, name: &str) -> Value {
    let body = std::fs::read(&ramp.file).unwrap();
    let filename = ramp.file.file_name().unwrap().to_string_lossy().to_string();
    let r = app
        .import(
            &format!("format={}&name={name}&filename={filename}", ramp.format),
            body,
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{name}: {}", r.text());
    let id = r.json()["runs"][0]["id"].as_i64().unwrap();
    app.get(&format!("/api/v1/runs/{id}")).await.json()
}

#[derive(Clone, Copy)]
enum Tool {
    K6,
    Locust,
    Jmeter,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::K6 => "k6",
            Tool::Locust => "locust",
            Tool::Jmeter => "jmeter",
        }
    }
}

/// Ramps the lab with `tool` past its capacity and checks the stated capacity (see the
/// module docs).
async fn ramp_and_check(tool: Tool, overload: Overload) {
    let what = format!("{}/{}", tool.name(), overload.name());
    if on_postgres() {
        skip(
            Kind::Backend,
            "runs once, on SQLite (the capacity is the run's, not the store's)",
        );
        return;
    }
    let _one = RAMPS.lock().await;
    let started = Instant::now();
    let Some((measured, wrk_rps)) = peer_capacity(overload).await else {
        skip(
            Kind::Tool,
            "wrk, the peer that measures the lab, is not installed",
        );
        return;
    };
    // connection slots with `refuse`: 1.25–1.5 × the knee's users (see the module docs)
    let slots = match tool {
        Tool::K6 => 30,
        Tool::Locust => 125,
        Tool::Jmeter => 80,
    };
    let (lab, url) = start_lab(overload, slots).await;
    let dir = ramp_dir(tool.name(), overload);
    let cpu0 = children_cpu_s();
    let ramp = match tool {
        Tool::K6 => k6(&url, &dir).await,
        Tool::Locust => locust(&url, &dir, 150, 5, 32).await,
        Tool::Jmeter => jmeter(&url, &dir).await,
    };
    let Some(ramp) = ramp else {
        skip(
            Kind::Tool,
            &format!(
                "{} is not installed (scripts/test.sh --install-only)",
                tool.name()
            ),
        );
        return;
    };
    let ramp_s = started.elapsed().as_secs_f64();
    let tool_cpu_s = children_cpu_s() - cpu0;
    let app = spawn_app().await;
    let run = import(&app, &ramp, &what).await;
    let cap = &run["capacity"];
    let overall = &run["overall"];
    println!(
        "capacity-lab {what}: statement {:?}; throughput_rps {}; users {}; low_load_p95_ms {}; \
         lab measured {measured:.1} req/s (wrk {wrk_rps:.1}); lab served {} refused {} abandoned {}; \
         run count {} errors {}; {ramp_s:.1} s to ramp (the tool's CPU {tool_cpu_s:.1} s), {:.1} s in all",
        cap["statement"].as_str().unwrap_or(""),
        cap["throughput_rps"],
        cap["users"],
        cap["low_load_p95_ms"],
        lab.served.load(Ordering::Relaxed),
        lab.refused.load(Ordering::Relaxed),
        lab.abandoned.load(Ordering::Relaxed),
        overall["count"],
        overall["errors"],
        started.elapsed().as_secs_f64(),
    );
    // The lab was driven past its capacity (or the ramp proves nothing).
    assert!(
        lab.served.load(Ordering::Relaxed) as f64 > 0.4 * measured * 30.0,
        "{what}: the lab served too little for a ramp past its capacity"
    );

    let stated = cap["throughput_rps"]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: no stated capacity: {cap}"));
    assert!(
        (stated - measured).abs() <= 0.10 * measured,
        "{what}: stated capacity {stated:.1} req/s is not within ±10 % of the lab's {measured:.1} req/s \
         (the successful throughput): {}",
        cap["statement"]
    );
    let knee = knee_users(measured, ramp.think_s);
    let users = cap["users"]
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: no users at the knee: {cap}"));
    assert!(
        (0.8 * knee..=1.5 * knee).contains(&users),
        "{what}: the knee at {users} users is outside 0.8–1.5 × N* = C × (R₀ + Z) = {knee:.0} users \
         (Little's law): {}",
        cap["statement"]
    );
}

/// N* = C × (R₀ + Z): the users that fill the workers (Little's law, R₀ the mean service
/// time, Z the think time).
fn knee_users(capacity_rps: f64, think_s: f64) -> f64 {
    capacity_rps * (SERVICE_S + think_s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_ramp_past_fast_503s() {
    ramp_and_check(Tool::K6, Overload::Reject503).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_ramp_into_an_unbounded_queue() {
    ramp_and_check(Tool::K6, Overload::Queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_ramp_past_refused_connections() {
    ramp_and_check(Tool::K6, Overload::Refuse).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locust_ramp_past_fast_503s() {
    ramp_and_check(Tool::Locust, Overload::Reject503).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locust_ramp_into_an_unbounded_queue() {
    ramp_and_check(Tool::Locust, Overload::Queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locust_ramp_past_refused_connections() {
    ramp_and_check(Tool::Locust, Overload::Refuse).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jmeter_ramp_past_fast_503s() {
    ramp_and_check(Tool::Jmeter, Overload::Reject503).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jmeter_ramp_into_an_unbounded_queue() {
    ramp_and_check(Tool::Jmeter, Overload::Queue).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jmeter_ramp_past_refused_connections() {
    ramp_and_check(Tool::Jmeter, Overload::Refuse).await;
}

/// Real Locust writes its first stats-history rows before any request has an answer: user
/// count 0 or a few, percentiles `N/A` or 0. The low-load p95 is the lowest level's, over
/// requests that all took 40 ms or more: never 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locust_first_history_rows_do_not_make_the_low_load_p95_zero() {
    if on_postgres() {
        skip(
            Kind::Backend,
            "runs once, on SQLite (the capacity is the run's, not the store's)",
        );
        return;
    }
    let _one = RAMPS.lock().await;
    let started = Instant::now();
    let (_lab, url) = start_lab(Overload::Reject503, 0).await;
    let dir = ramp_dir("locust-start", Overload::Reject503);
    // 10 users arriving 2 a second, 12 s: well below the capacity
    let Some(ramp) = locust(&url, &dir, 10, 2, 12).await else {
        skip(
            Kind::Tool,
            "locust is not installed (scripts/test.sh --install-only)",
        );
        return;
    };
    let text = std::fs::read_to_string(&ramp.file).unwrap();
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let headers = rows.headers().unwrap().clone();
    let p95 = headers.iter().position(|h| h == "95%").unwrap();
    let name = headers.iter().position(|h| h == "Name").unwrap();
    let first = rows
        .records()
        .map(|r| r.unwrap())
        .find(|r| &r[name] == "Aggregated")
        .unwrap();
    assert!(
        matches!(&first[p95], "N/A" | "0" | "0.0"),
        "the precondition: Locust's first row has no p95 yet, this one says {:?}",
        &first[p95]
    );
    let app = spawn_app().await;
    let run = import(&app, &ramp, "locust-start").await;
    let cap = &run["capacity"];
    println!(
        "capacity-lab locust start rows: statement {:?}; throughput_rps {}; users {}; low_load_p95_ms {}; {:.1} s",
        cap["statement"].as_str().unwrap_or(""),
        cap["throughput_rps"],
        cap["users"],
        cap["low_load_p95_ms"],
        started.elapsed().as_secs_f64()
    );
    let p95 = cap["low_load_p95_ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("no low-load p95: {cap}"));
    assert!(
        p95 >= 40.0,
        "low-load p95 {p95} ms, below the 40 ms every request took: {cap}"
    );
}
