//! The Camel-shaped lab (`tests/lab/CamelLab.java`: Camel 4's `ManagedRoute` and
//! `ManagedProcessor` MBeans served by Debian's real Jolokia agent, with a real HTTP
//! endpoint whose steps take real time) scraped by harrier: route operations, steps.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use harrier::domain::auth::{Role, Scope};
use harrier::store::TargetSpec;
use serde_json::{Value, json};

use crate::browser::Proc;
use crate::helpers::*;
use crate::permissions::{signed_in, token};
use crate::skip::{Kind, skip};

const JOLOKIA_JARS: &str = "/usr/share/java/jolokia-core.jar:/usr/share/java/json-simple.jar";

/// The lab, running; killed when dropped.
pub(crate) struct CamelLab {
    _proc: Proc,
    _dir: tempfile::TempDir,
    pub port: u16,
}

impl CamelLab {
    /// Compiles and starts the lab: `pool` permits in front of the legacy step, which
    /// sleeps `legacy_ms`; each order line's marshal spins `marshal_ms`. `None` (the test
    /// recorded as skipped for a missing tool) without `javac` or Jolokia.
    pub(crate) async fn start(pool: u32, legacy_ms: u32, marshal_ms: u32) -> Option<CamelLab> {
        if !Path::new("/usr/share/java/jolokia-core.jar").is_file() {
            skip(
                Kind::Tool,
                "Debian's libjolokia-core-java is not installed (scripts/test.sh --install-only)",
            );
            return None;
        }
        if Command::new("javac").arg("-version").output().is_err() {
            skip(
                Kind::Tool,
                "javac (openjdk-17-jdk-headless) is not installed",
            );
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lab/CamelLab.java");
        let out_dir = dir.path().to_path_buf();
        let compiled = tokio::task::spawn_blocking(move || {
            Command::new("javac")
                .args(["-nowarn", "-d"])
                .arg(&out_dir)
                .args(["-cp", JOLOKIA_JARS])
                .arg(src)
                .output()
                .expect("javac starts")
        })
        .await
        .unwrap();
        assert!(
            compiled.status.success(),
            "javac CamelLab.java: {}",
            String::from_utf8_lossy(&compiled.stderr)
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("java")
            .args(["-cp", &format!("{}:{JOLOKIA_JARS}", dir.path().display())])
            .arg("CamelLab")
            .args([u32::from(port), pool, legacy_ms, marshal_ms].map(|v| v.to_string()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("java starts");
        let stdout = child.stdout.take().unwrap();
        let proc = Proc(child);
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        });
        let line = tokio::time::timeout(Duration::from_secs(60), line)
            .await
            .expect("the lab starts within 60 s")
            .unwrap()
            .unwrap();
        assert_eq!(line.trim(), format!("listening {port}"));
        Some(CamelLab {
            _proc: proc,
            _dir: dir,
            port,
        })
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub(crate) fn jolokia(&self) -> String {
        self.url("/jolokia")
    }

    /// `n` requests to `path`, each waited for; the statuses.
    pub(crate) async fn hit(&self, path: &str, n: usize) -> Vec<u16> {
        let http = reqwest::Client::new();
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let r = http.get(self.url(path)).send().await.unwrap();
            out.push(r.status().as_u16());
        }
        out
    }

    /// Attribute values of the lab's own MBean of `kind` (`routes`, `processors`) and
    /// `name`, read straight from its Jolokia agent.
    pub(crate) async fn read(&self, kind: &str, name: &str, attributes: &[&str]) -> Value {
        let body = json!({
            "type": "read",
            "mbean": format!("org.apache.camel:context=shop,type={kind},name=\"{name}\""),
            "attribute": attributes,
        });
        let r: Value = reqwest::Client::new()
            .post(self.jolokia())
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["status"], 200, "{r}");
        r["value"].clone()
    }
}

/// Waits until `check` gives a value, polling every 200 ms for at most `secs`.
pub(crate) async fn until<F, Fut, T>(what: &str, secs: u64, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {secs} s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A request as `who` (a `Cookie` or `Authorization` header value).
fn as_who(method: &str, uri: &str, who: &str) -> Request<Body> {
    let b = Request::builder().method(method).uri(uri);
    let b = if who.starts_with("Bearer ") {
        b.header(header::AUTHORIZATION, who)
    } else {
        b.header(header::COOKIE, who)
    };
    b.body(Body::empty()).unwrap()
}

/// The scraped route `route` of the lab, as `who` sees it in `/api/v1/routes`.
async fn lab_route(app: &TestApp, who: &str, route: &str) -> Option<Value> {
    let list = app.send(as_who("GET", "/api/v1/routes", who)).await.json();
    list.as_array()?
        .iter()
        .find(|r| r["route"] == route && r["source"] == "jolokia")
        .cloned()
}

/// Issue 29, route operations: a viewer is refused (403) and the route keeps running; an
/// operator (a session, then an `operate` token) stops, suspends, resumes and resets the
/// lab's route through its real Jolokia agent — the lab obeys (503 while stopped, counters
/// zero after a reset) and harrier shows the new state within a scrape; an unknown
/// operation is 400, a route read from Prometheus text 409, an agent that is gone 502 with
/// its error; every call is in the audit log with the route and the agent's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_stop_suspend_resume_and_reset_a_route_through_jolokia() {
    let Some(lab) = CamelLab::start(4, 2, 0).await else {
        return;
    };
    let app = spawn_app().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(harrier::app::serve(
        listener,
        app.state.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let operator = signed_in(&app, "olga", Role::Operator).await;
    let viewer = signed_in(&app, "vera", Role::Viewer).await;
    let operate_token = format!("Bearer {}", token(&app, Scope::Operate).await);
    let read_token = format!("Bearer {}", token(&app, Scope::Read).await);
    let shop = app
        .state
        .store
        .insert_target(
            &TargetSpec {
                name: "shop".into(),
                url: lab.jolokia().into(),
                kind: "jolokia".into(),
                interval_s: 1.0,
                timeout_s: 1.0,
                labels: Default::default(),
            },
            "api",
            harrier::now_ms(),
        )
        .await
        .unwrap()
        .unwrap();
    // As `POST /api/v1/targets` does.
    app.state.scraper.spawn(shop);
    assert!(lab.hit("/orders", 5).await.iter().all(|s| *s == 200));
    let orders = until("the lab's orders route scraped", 30, || async {
        lab_route(&app, &operator, "orders").await
    })
    .await;
    let id = orders["id"].as_i64().unwrap();
    assert_eq!(orders["labels"]["camel_context"], "shop");
    let op = |name: &str, who: &str| {
        app.send(as_who(
            "POST",
            &format!("/api/v1/routes/{id}/operations/{name}"),
            who,
        ))
    };

    // A viewer and a read token may not.
    for who in [&viewer, &read_token] {
        let r = op("stop", who).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
        assert!(
            r.text().contains("operator role or an operate token"),
            "{}",
            r.text()
        );
    }
    assert_eq!(lab.hit("/orders", 1).await, [200], "the route still runs");

    // The operator stops it: the lab's route is stopped, harrier shows it.
    let r = op("stop", &operator).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let done = r.json();
    assert_eq!(done["state"], "Stopped", "{done}");
    assert_eq!(done["operation"], "stop");
    assert_eq!(done["camel_context"], "shop");
    assert_eq!(
        done["mbean"],
        "org.apache.camel:context=shop,name=\"orders\",type=routes"
    );
    assert_eq!(
        lab.hit("/orders", 1).await,
        [503],
        "the lab's route is stopped"
    );
    assert_eq!(
        lab.read("routes", "orders", &["State"]).await["State"],
        "Stopped"
    );
    let started = std::time::Instant::now();
    until("harrier showing the route Stopped", 10, || async {
        let r = app
            .send(as_who("GET", &format!("/api/v1/routes/{id}"), &operator))
            .await
            .json();
        (r["state"] == "Stopped").then_some(())
    })
    .await;
    // Within a scrape (1 s) and the time to store it, on a busy machine.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // Start, suspend and resume with the operate token.
    for (name, state, status) in [
        ("start", "Started", 200),
        ("suspend", "Suspended", 503),
        ("resume", "Started", 200),
    ] {
        let r = op(name, &operate_token).await;
        assert_eq!(r.status, StatusCode::OK, "{name}: {}", r.text());
        assert_eq!(r.json()["state"], state, "{name}");
        assert_eq!(lab.hit("/orders", 1).await, [status], "{name}");
    }

    // Reset: the route's and its steps' counters start again from zero.
    assert!(lab.hit("/orders", 3).await.iter().all(|s| *s == 200));
    let before = lab.read("routes", "orders", &["ExchangesTotal"]).await;
    assert!(before["ExchangesTotal"].as_i64().unwrap() >= 9, "{before}");
    let r = op("reset", &operator).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["state"], "Started");
    assert_eq!(
        lab.read("routes", "orders", &["ExchangesTotal"]).await["ExchangesTotal"],
        0
    );
    assert_eq!(
        lab.read("processors", "to1", &["ExchangesTotal"]).await["ExchangesTotal"],
        0,
        "the steps' statistics are reset too"
    );

    // What cannot be done says why.
    let r = op("kill", &operator).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.text().contains("start, stop, suspend, resume, reset"),
        "{}",
        r.text()
    );
    let r = op("stop", &operator).await;
    assert_eq!(r.status, StatusCode::OK);
    let r = app
        .send(as_who(
            "POST",
            "/api/v1/routes/999999/operations/stop",
            &operator,
        ))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.text());
    // A route read from Prometheus text has no way back to it.
    let prom = app
        .state
        .store
        .insert_target(
            &TargetSpec {
                name: "prom".into(),
                url: "http://127.0.0.1:9/metrics".into(),
                kind: "prometheus".into(),
                interval_s: 3600.0,
                timeout_s: 1.0,
                labels: Default::default(),
            },
            "api",
            harrier::now_ms(),
        )
        .await
        .unwrap()
        .unwrap();
    let ids = app
        .state
        .store
        .record_scrape(
            prom.id,
            &harrier::store::ScrapeStatus {
                at_ms: harrier::now_ms(),
                up: true,
                duration_ms: 1.0,
                samples: 1,
                error: None,
            },
            &[harrier::store::RouteWrite {
                service: "prom".into(),
                route: "orders".into(),
                labels: Default::default(),
                source: "camel".into(),
                state: None,
                last_exchange_ms: None,
                interval: None,
                instance: String::new(),
            }],
        )
        .await
        .unwrap();
    let r = app
        .send(as_who(
            "POST",
            &format!("/api/v1/routes/{}/operations/stop", ids[0]),
            &operator,
        ))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    assert!(r.text().contains("need a Jolokia target"), "{}", r.text());

    // The agent gone: its error, as a 502.
    drop(lab);
    let r = op("start", &operator).await;
    assert_eq!(r.status, StatusCode::BAD_GATEWAY, "{}", r.text());
    assert!(r.text().contains("did not answer"), "{}", r.text());

    // Every call is in the audit log, with the route and the answer.
    let audit = until("the audit rows", 10, || async {
        let rows = app.state.store.list_audit(None, 100).await.unwrap();
        (rows
            .iter()
            .filter(|r| r.path.contains("/operations/"))
            .count()
            >= 12)
            .then_some(rows)
    })
    .await;
    let line = |who: &str, path_has: &str, status: i64| {
        audit
            .iter()
            .any(|r| r.who == who && r.path.contains(path_has) && r.status == status)
    };
    assert!(line(
        "vera",
        &format!("/api/v1/routes/{id}/operations/stop"),
        403
    ));
    assert!(line(
        "olga",
        &format!(
            "/api/v1/routes/{id}/operations/stop — stop route orders (Camel context shop): agent says Stopped"
        ),
        200
    ));
    assert!(line(
        "token:t-operate",
        "suspend route orders (Camel context shop): agent says Suspended",
        200
    ));
    assert!(line(
        "olga",
        "reset route orders (Camel context shop): agent says Started",
        200
    ));
    assert!(line("olga", "/operations/kill", 400));
    assert!(line("olga", "need a Jolokia target", 409));
    assert!(line("olga", "start route", 502));
    assert!(
        audit
            .iter()
            .any(|r| r.status == 502 && r.path.contains("did not answer")),
        "{:?}",
        audit.iter().map(|r| &r.path).collect::<Vec<_>>()
    );
    let _ = stop_tx.send(());
    let _ = server.await;
}

/// Starts harrier in-process on `app` with the lab as a Jolokia target scraped every
/// second; the route `orders` once scraped (its id), and the stop sender and server task.
async fn serve_with_lab(
    app: &TestApp,
    lab: &CamelLab,
) -> (
    i64,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(harrier::app::serve(
        listener,
        app.state.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ));
    let shop = app
        .state
        .store
        .insert_target(
            &TargetSpec {
                name: "shop".into(),
                url: lab.jolokia().into(),
                kind: "jolokia".into(),
                interval_s: 1.0,
                timeout_s: 1.0,
                labels: Default::default(),
            },
            "api",
            harrier::now_ms(),
        )
        .await
        .unwrap()
        .unwrap();
    app.state.scraper.spawn(shop);
    let route = until("the lab's orders route scraped", 30, || async {
        let list = app.get("/api/v1/routes").await.json();
        list.as_array()?
            .iter()
            .find(|r| r["route"] == "orders" && r["source"] == "jolokia")
            .cloned()
    })
    .await;
    (route["id"].as_i64().unwrap(), stop_tx, server)
}

/// Issue 29: the steps of a route, read in the same bulk request as the routes, equal the
/// lab's own counters over the same interval (every exchange since the first scrape, read
/// back from the lab's Jolokia after the last), nest as Camel nests them (a choice with a
/// when and an otherwise, a split), name the send steps by their endpoint, and single out
/// the pooled legacy call as the slowest step; their history is there to chart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steps_equal_the_labs_own_counters_and_nest_as_camel_does() {
    let Some(lab) = CamelLab::start(4, 20, 1).await else {
        return;
    };
    let app = spawn_app().await;
    let (id, stop_tx, server) = serve_with_lab(&app, &lab).await;
    // The first scrape read every counter at 0: from here on each exchange is an interval's.
    let steps = until("the route's steps", 30, || async {
        let v = app.get(&format!("/api/v1/routes/{id}/steps")).await.json();
        (v["steps"].as_array()?.len() == 8).then_some(v)
    })
    .await;
    let shape: Vec<(String, String, Value, i64, String)> = steps["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step"].as_str().unwrap().to_string(),
                s["kind"].as_str().unwrap().to_string(),
                s["parent"].clone(),
                s["level"].as_i64().unwrap(),
                s["label"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let row = |step: &str, kind: &str, parent: Value, level: i64, label: &str| {
        (
            step.to_string(),
            kind.to_string(),
            parent,
            level,
            label.to_string(),
        )
    };
    assert_eq!(
        shape,
        vec![
            row("log1", "log", Value::Null, 1, "log"),
            row("choice1", "choice", Value::Null, 1, "choice"),
            row("when1", "when", json!("choice1"), 2, "when"),
            row("to1", "to", json!("when1"), 3, "to(http://legacy/stock)"),
            row("otherwise1", "otherwise", json!("choice1"), 2, "otherwise"),
            row(
                "to2",
                "to",
                json!("otherwise1"),
                3,
                "to(caffeine-cache://stock)"
            ),
            row("split1", "split", Value::Null, 1, "split"),
            row("marshal1", "marshal", json!("split1"), 2, "marshal"),
        ]
    );

    assert!(lab.hit("/orders", 30).await.iter().all(|s| *s == 200));
    assert!(
        lab.hit("/orders?channel=store", 10)
            .await
            .iter()
            .all(|s| *s == 200)
    );
    let names = [
        "log1",
        "choice1",
        "when1",
        "to1",
        "otherwise1",
        "to2",
        "split1",
        "marshal1",
    ];
    let mut theirs = std::collections::BTreeMap::new();
    for n in names {
        theirs.insert(
            n,
            lab.read(
                "processors",
                n,
                &[
                    "ExchangesTotal",
                    "ExchangesCompleted",
                    "TotalProcessingTime",
                ],
            )
            .await,
        );
    }
    assert_eq!(
        theirs["marshal1"]["ExchangesTotal"], 120,
        "3 lines × 40 orders"
    );
    let ours = until("harrier's step counts reaching the lab's", 20, || async {
        let v = app
            .get(&format!("/api/v1/routes/{id}/steps?window=1h"))
            .await
            .json();
        let all = v["steps"].as_array()?.iter().all(|s| {
            s["exchanges"].as_f64()
                == theirs[s["step"].as_str().unwrap()]["ExchangesTotal"].as_f64()
        });
        all.then_some(v)
    })
    .await;
    for s in ours["steps"].as_array().unwrap() {
        let name = s["step"].as_str().unwrap();
        let lab_step = &theirs[name];
        let completed = lab_step["ExchangesCompleted"].as_f64().unwrap();
        let total_ms = lab_step["TotalProcessingTime"].as_f64().unwrap();
        let mean = s["mean_ms"].as_f64();
        if completed > 0.0 {
            assert_close(mean.unwrap(), total_ms / completed, name);
        }
        assert_eq!(s["error_pct"], 0.0, "{name}");
        assert_eq!(s["gone"], false, "{name}");
    }
    let by = |n: &str| {
        ours["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == n)
            .unwrap()
            .clone()
    };
    // The pooled legacy call (20 ms) holds most of the route's own time: the slowest.
    assert_eq!(by("to1")["slowest"], true, "{ours}");
    assert!(
        by("to1")["self_share_pct"].as_f64().unwrap() > 50.0,
        "{ours}"
    );
    // The choice's time is its branches': its self time is ~0.
    assert!(by("choice1")["mean_ms"].as_f64().unwrap() > 10.0);
    assert!(by("choice1")["self_ms"].as_f64().unwrap() < 2.0, "{ours}");

    // The same figures over time, from the stored history.
    let series = app
        .get(&format!("/api/v1/routes/{id}/steps/timeseries"))
        .await
        .json();
    assert_eq!(series["resolution"], "raw");
    let to1 = series["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "to1")
        .unwrap();
    let tput: f64 = to1["throughput_per_s"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .sum();
    assert!(tput > 0.0, "{series}");
    let _ = stop_tx.send(());
    let _ = server.await;
}

/// Issue 29: `harrier load find` against the lab's route (its legacy call behind a pool of
/// 4, 20 ms each: ~200 req/s) while harrier scrapes the lab; the run's steps at each
/// offered rate name the pooled call as the step that gives way, the others flat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_search_names_the_pooled_step_as_the_one_that_gives_way() {
    let Some(lab) = CamelLab::start(4, 20, 0).await else {
        return;
    };
    let app = spawn_app().await;
    let (id, stop_tx, server) = serve_with_lab(&app, &lab).await;
    let base = until("the server's address", 10, || async {
        let t = app.get("/api/v1/targets").await.json();
        t.as_array()?
            .iter()
            .find(|t| t["name"] == "harrier")
            .and_then(|t| t["url"].as_str())
            .map(|u| u.trim_end_matches("/metrics").to_string())
    })
    .await;
    let url = lab.url("/orders");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_harrier"))
            .args([
                "load",
                "find",
                &url,
                "--server",
                &base,
                "--name",
                "orders search",
            ])
            .args(["--start-rate", "25", "--step-duration", "3s"])
            .args(["--confirm-duration", "3s", "--tolerance", "30%"])
            .args(["--max-duration", "90s"])
            .env_remove("HARRIER_DB")
            .env_remove("HARRIER_CONFIG")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("falls over at"), "{stdout}");
    let runs = app.get("/api/v1/runs").await.json();
    let run = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "orders search")
        .unwrap_or_else(|| panic!("the search's run: {runs}"))["id"]
        .as_i64()
        .unwrap();
    // The scrape after the run's last second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let v = app
        .get(&format!("/api/v1/routes/{id}/steps/under-load?run={run}"))
        .await
        .json();
    assert_eq!(v["unit"], "req/s offered", "{v}");
    assert!(v["levels"].as_array().unwrap().len() >= 3, "{v}\n{stdout}");
    let g = &v["gives_way"];
    assert_eq!(g["step"], "to1", "{v}\n{stdout}");
    assert_eq!(g["label"], "to(http://legacy/stock)");
    assert_eq!(g["others_flat"], true, "{v}");
    assert!(
        g["to_ms"].as_f64().unwrap() > 2.0 * g["from_ms"].as_f64().unwrap(),
        "{v}"
    );
    let sentence = g["sentence"].as_str().unwrap();
    assert!(
        sentence.contains("req/s offered to(http://legacy/stock) self time")
            && sentence.ends_with("other steps flat"),
        "{sentence}"
    );
    assert!(
        v["run_statement"]
            .as_str()
            .unwrap()
            .contains("falls over at"),
        "{v}"
    );
    let _ = stop_tx.send(());
    let _ = server.await;
}
