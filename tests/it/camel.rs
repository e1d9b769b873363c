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
    // Scraped before anyone signs up (sign-in is off until the first user).
    let (id, stop_tx, server) = serve_with_lab(&app, &lab).await;
    let operator = signed_in(&app, "olga", Role::Operator).await;
    let viewer = signed_in(&app, "vera", Role::Viewer).await;
    let operate_token = format!("Bearer {}", token(&app, Scope::Operate).await);
    let read_token = format!("Bearer {}", token(&app, Scope::Read).await);
    assert!(lab.hit("/orders", 5).await.iter().all(|s| *s == 200));
    let orders = app
        .send(as_who("GET", &format!("/api/v1/routes/{id}"), &operator))
        .await
        .json();
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

    // Grouped by Camel context and routeGroup (the lab's orders is in shop-api, audit in ops).
    let names = |q: &'static str| {
        let app = &app;
        async move {
            let mut v: Vec<String> = app
                .get(&format!("/api/v1/routes?{q}"))
                .await
                .json()
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["route"].as_str().unwrap().to_string())
                .collect();
            v.sort();
            v
        }
    };
    until("the route groups stored", 10, || async {
        (names("group=shop-api").await == ["orders"]).then_some(())
    })
    .await;
    assert_eq!(names("group=ops").await, ["audit"]);
    assert_eq!(names("context=shop").await, ["audit", "orders"]);
    assert!(names("context=billing").await.is_empty());
    let page = app.get("/console/routes").await.text();
    assert!(
        page.contains("<option value=\"shop-api\">shop-api</option>"),
        "the routes page offers the groups"
    );
    assert!(
        app.get(&format!("/console/routes/{id}"))
            .await
            .text()
            .contains("/console/routes?group=shop-api")
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
    // The run's page names it too, linking to the route's steps under this run.
    let page = app.get(&format!("/console/runs/{run}")).await.text();
    assert!(
        page.contains("id=\"inside-routes\""),
        "no Inside the routes on the run page"
    );
    assert!(page.contains(&format!("/console/routes/{id}?run={run}#steps-load")));
    assert!(page.contains(sentence), "{sentence}");
    let _ = stop_tx.send(());
    let _ = server.await;
}

/// `GET base + path` with a bearer token, as JSON.
async fn get_json(http: &reqwest::Client, base: &str, token: &str, path: String) -> Value {
    http.get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Signs `name` in through the console's form in `client`.
async fn browser_sign_in(client: &fantoccini::Client, base: &str, name: &str, password: &str) {
    use fantoccini::Locator;
    client
        .goto(&format!("{base}/console/sign-in"))
        .await
        .unwrap();
    client
        .find(Locator::Css("#sign-in-name"))
        .await
        .unwrap()
        .send_keys(name)
        .await
        .unwrap();
    client
        .find(Locator::Css("#sign-in-password"))
        .await
        .unwrap()
        .send_keys(password)
        .await
        .unwrap();
    client
        .find(Locator::Css(".sign-in-form button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(".whoami"))
        .await
        .expect("signed in");
}

/// Issue 29, in headless Chromium against the `harrier` binary with sign-in on: the route
/// diagram nests the lab's steps as Camel does (the choice's when and otherwise side by
/// side, the split around its marshal), marks the pooled call slowest, and its numbers
/// change while load runs; an operator stops the route from the page (confirming the
/// dialog) — the lab stops, the page and then the scrape show it; a viewer's page offers
/// no operations and the API refuses them; a page of another origin in the operator's
/// browser cannot start the route again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_diagram_and_operations_in_the_browser() {
    use crate::attack::{attacker_site, run_attack};
    use crate::browser::{browser, start_harrier};
    use crate::signin::harrier;
    use fantoccini::Locator;

    if sqlite_only("the commands open the SQLite file the test names") {
        return;
    }
    let Some(lab) = CamelLab::start(4, 20, 1).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harrier.db");
    let dbs = db.to_str().unwrap();
    for (name, role) in [("olga", "operator"), ("vera", "viewer")] {
        let (code, _, err) = harrier(
            &["user", "add", name, "--role", role, "--db", dbs],
            "a long passphrase\n",
        );
        assert_eq!(code, 0, "{err}");
    }
    let (code, write_token, err) = harrier(
        &["token", "create", "setup", "--scope", "write", "--db", dbs],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let write_token = write_token.trim().to_string();
    let (_harrier, base) = start_harrier(&db);
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}/api/v1/targets"))
        .bearer_auth(&write_token)
        .json(&json!({"name": "shop", "url": lab.jolokia(), "kind": "jolokia", "interval_s": 1, "timeout_s": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    // Load on the route for the whole test (bounded: at most ~3 minutes).
    let load_url = lab.url("/orders");
    let load = tokio::spawn(async move {
        let c = reqwest::Client::new();
        for i in 0..9_000 {
            let url = if i % 7 == 0 {
                format!("{load_url}?channel=store")
            } else {
                load_url.clone()
            };
            let _ = c.get(url).send().await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let api = |path: String| get_json(&http, &base, &write_token, path);
    let id = until("the orders route", 30, || async {
        let list = api("/api/v1/routes".into()).await;
        list.as_array()?
            .iter()
            .find(|r| r["route"] == "orders" && r["source"] == "jolokia")
            .and_then(|r| r["id"].as_i64())
    })
    .await;
    until("two scrapes of the steps", 30, || async {
        let v = api(format!("/api/v1/routes/{id}/steps")).await;
        v["steps"]
            .as_array()?
            .iter()
            .any(|s| s["exchanges"].as_f64().is_some_and(|n| n > 0.0))
            .then_some(())
    })
    .await;

    let (_driver, client) = browser().await;
    browser_sign_in(&client, &base, "olga", "a long passphrase").await;
    client
        .goto(&format!("{base}/console/routes/{id}"))
        .await
        .unwrap();
    let wait = || client.wait().at_most(Duration::from_secs(20));
    wait()
        .for_element(Locator::Css(
            "#step-tree li.step-node[data-step=\"marshal1\"]",
        ))
        .await
        .expect("the diagram is drawn");
    // The structure, as Camel nests the steps.
    let nested = |css: &'static str| {
        let client = client.clone();
        async move { client.find_all(Locator::Css(css)).await.unwrap().len() }
    };
    assert_eq!(nested("#step-tree li.step-node").await, 8);
    assert_eq!(
        nested("#step-tree > ol.step-tree > li.step-node").await,
        3,
        "log, choice, split at the top"
    );
    assert_eq!(
        nested("li[data-step=\"choice1\"] > ol.step-children.branches > li[data-step=\"when1\"]")
            .await,
        1
    );
    assert_eq!(
        nested(
            "li[data-step=\"choice1\"] > ol.step-children.branches > li[data-step=\"otherwise1\"]"
        )
        .await,
        1
    );
    assert_eq!(
        nested("li[data-step=\"when1\"] > ol > li[data-step=\"to1\"]").await,
        1
    );
    assert_eq!(
        nested("li[data-step=\"otherwise1\"] > ol > li[data-step=\"to2\"]").await,
        1
    );
    assert_eq!(
        nested("li[data-step=\"split1\"] > ol > li[data-step=\"marshal1\"]").await,
        1
    );
    assert_eq!(
        nested("li[data-step=\"to1\"].slowest").await,
        1,
        "the pooled call is the slowest"
    );
    let dest = client
        .find(Locator::Css("li[data-step=\"to1\"] .step-dest"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(dest, "http://legacy/stock");
    // Live: the marshal step's rate changes while the load runs (no reload).
    let rate = || async {
        client
            .find(Locator::Css(
                "li[data-step=\"marshal1\"] > .step-card .step-figs div:first-child dd",
            ))
            .await
            .ok()?
            .text()
            .await
            .ok()
    };
    let first = rate().await.unwrap();
    assert!(first.ends_with("/s"), "{first}");
    until("the marshal step's rate to change live", 20, || async {
        let now = rate().await?;
        (now != first).then_some(())
    })
    .await;

    // The operator stops the route from the page.
    client
        .find(Locator::Css("button[data-route-op=\"stop\"]"))
        .await
        .expect("operations offered to an operator")
        .click()
        .await
        .unwrap();
    client
        .accept_alert()
        .await
        .expect("a confirmation is asked");
    let result = until("the stop's answer on the page", 20, || async {
        let t = client
            .find(Locator::Css("#route-op-result"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        t.contains("Stopped").then_some(t)
    })
    .await;
    assert!(result.starts_with("Stop: done"), "{result}");
    assert_eq!(
        client
            .find(Locator::Css("#route-state"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "Stopped"
    );
    assert_eq!(lab.hit("/orders", 1).await, [503]);
    until("the scrape showing the route stopped", 10, || async {
        (api(format!("/api/v1/routes/{id}")).await["state"] == "Stopped").then_some(())
    })
    .await;

    // A page of another origin, in the operator's browser, tries to start it again.
    let page = format!(
        r#"<!doctype html><html><body><iframe name="f"></iframe>
<form id="f1" method="POST" target="f" action="{base}/api/v1/routes/{id}/operations/start"></form>
<script>
window.results = {{}};
document.getElementById('f1').submit();
fetch('{base}/api/v1/routes/{id}/operations/start', {{method: 'POST', mode: 'no-cors', credentials: 'include'}})
  .then(x => window.results.fetch = 'sent', e => window.results.fetch = 'error:' + e)
  .then(() => setTimeout(() => {{ window.results.done = true; }}, 1500));
</script></body></html>"#
    );
    let site = attacker_site("127.0.0.2", page).await;
    let _ = run_attack(&client, &format!("http://{site}/")).await;
    assert_eq!(
        lab.hit("/orders", 1).await,
        [503],
        "the route stays stopped"
    );
    assert_eq!(
        lab.read("routes", "orders", &["State"]).await["State"],
        "Stopped"
    );

    // A viewer is offered nothing and refused.
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let vera = no_redirects
        .post(format!("{base}/console/sign-in"))
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body("name=vera&password=a+long+passphrase")
        .send()
        .await
        .unwrap();
    let cookie = vera
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.split(';').next())
        .expect("a session cookie")
        .to_string();
    let page = http
        .get(format!("{base}/console/routes/{id}"))
        .header(reqwest::header::COOKIE, &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("id=\"step-tree\""),
        "the viewer sees the steps"
    );
    assert!(
        !page.contains("data-route-op"),
        "no operations for a viewer"
    );
    let r = http
        .post(format!("{base}/api/v1/routes/{id}/operations/start"))
        .header(reqwest::header::COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(lab.hit("/orders", 1).await, [503]);
    load.abort();
    let _ = client.close().await;
}

/// Issue 29: step history is stored like a route's — raw rows per scrape, 1 min / 10 min /
/// 1 h rollups that sum to the raw rows, the routes' retention — and survives a restart
/// (the store opened again gives the same figures); deleting the target takes its steps.
#[tokio::test]
async fn step_history_survives_a_restart_and_rolls_up_like_routes() {
    use harrier::domain::routes::Interval;
    use harrier::store::{Retention, RouteWrite, ScrapeStatus, StepRollupAdd, StepWrite, Store};
    let (store, config, _dir) = fresh_store().await;
    let t = store
        .insert_target(
            &TargetSpec {
                name: "shop".into(),
                url: "http://127.0.0.1:9/jolokia".into(),
                kind: "jolokia".into(),
                interval_s: 15.0,
                timeout_s: 5.0,
                labels: Default::default(),
            },
            "api",
            0,
        )
        .await
        .unwrap()
        .unwrap();
    // Two minutes' buckets: scrapes at 0, 15, … 105 s past a whole hour.
    let base = 1_796_490_000_000_i64;
    assert_eq!(base % 3_600_000, 0, "a whole hour");
    let route = RouteWrite {
        service: "shop".into(),
        route: "orders".into(),
        labels: [("camel_context".to_string(), "shop".to_string())].into(),
        source: "jolokia".into(),
        state: Some("Started".into()),
        last_exchange_ms: None,
        interval: None,
        instance: String::new(),
    };
    let mut route_id = 0;
    for k in 0..8_i64 {
        let at = base + k * 15_000;
        let status = ScrapeStatus {
            at_ms: at,
            up: true,
            duration_ms: 1.0,
            samples: 10,
            error: None,
        };
        route_id = store
            .record_scrape(t.id, &status, std::slice::from_ref(&route))
            .await
            .unwrap()[0];
        let step = |name: &str, parent: Option<&str>, index: i64, ms: f64| StepWrite {
            route_id,
            step: name.into(),
            kind: if name.starts_with("to") {
                "to"
            } else {
                "choice"
            }
            .into(),
            parent: parent.map(str::to_string),
            index,
            level: if parent.is_some() { 2 } else { 1 },
            destination: name
                .starts_with("to")
                .then(|| "http://legacy/stock".to_string()),
            interval: (k > 0).then(|| Interval {
                interval_ms: 15_000,
                exchanges: Some(10.0 + k as f64),
                failed: Some(if k == 3 { 1.0 } else { 0.0 }),
                duration_sum_s: Some((10.0 + k as f64) * ms / 1000.0),
                duration_count: Some(10.0 + k as f64),
                max_s: Some(ms * k as f64 / 1000.0),
                inflight: Some(k as f64),
                ..Default::default()
            }),
            // Known from the second scrape on: its row is not written again.
            known_id: None,
        };
        let writes = [
            step("choice1", None, 0, 25.0),
            step("to1", Some("choice1"), 1, 20.0),
        ];
        let ids = store.record_steps(at, &writes).await.unwrap();
        assert!(ids.iter().all(|id| *id > 0));
        // The writer adds each closed minute's sums to the rollups (here: every interval,
        // at its own minute; rows of one bucket add up).
        let rows: Vec<StepRollupAdd> = writes
            .iter()
            .zip(&ids)
            .filter_map(|(w, id)| Some((w.interval.clone()?, *id)))
            .flat_map(|(iv, id)| {
                let minute = at - at.rem_euclid(60_000);
                [60_000, 600_000, 3_600_000].map(|res| StepRollupAdd {
                    step_id: id,
                    resolution_ms: res,
                    bucket_ms: minute - minute.rem_euclid(res),
                    inflight_sum: iv.inflight,
                    inflight_n: 1,
                    intervals: 1,
                    sums: iv.clone(),
                })
            })
            .collect();
        store.add_step_rollups(&rows).await.unwrap();
    }
    // A step whose shape the writer knows: no row written, its id kept.
    let shapes = store.route_steps(route_id).await.unwrap();
    let to1 = shapes.iter().find(|s| s.step == "to1").unwrap().clone();
    let known = StepWrite {
        route_id,
        step: "to1".into(),
        kind: "changed-but-known".into(),
        parent: None,
        index: 9,
        level: 1,
        destination: None,
        interval: None,
        known_id: Some(to1.id),
    };
    assert_eq!(
        store.record_steps(base + 200_000, &[known]).await.unwrap(),
        [to1.id]
    );
    assert_eq!(store.route_steps(route_id).await.unwrap(), shapes);
    let end = base + 8 * 15_000;
    let read = |store: Store| async move {
        let figures = store.step_figures(route_id, base - 1, end).await.unwrap();
        let raw = store
            .step_series(route_id, base, end, 60_000, 0)
            .await
            .unwrap();
        let minute = store
            .step_series(route_id, base, end, 60_000, 60_000)
            .await
            .unwrap();
        let hour = store
            .step_series(route_id, base, end, 3_600_000, 3_600_000)
            .await
            .unwrap();
        (figures, raw, minute, hour)
    };
    let before = read(store.clone()).await;
    let (figures, raw, minute, hour) = &before;
    assert_eq!(figures.len(), 2);
    let to1 = &figures.iter().find(|(s, _)| s.step == "to1").unwrap().1;
    // Seven intervals of 11 … 17 exchanges.
    assert_eq!(to1.exchanges, Some(98.0));
    assert_eq!(to1.failed, Some(1.0));
    assert_close(to1.mean_ms().unwrap(), 20.0, "to1 mean");
    assert_close(to1.max_ms().unwrap(), 140.0, "to1 max");
    // The 1 min rollups hold what the raw rows hold, bucket by bucket.
    let key = |p: &harrier::store::StepPoint| (p.step_id, p.t_ms);
    let mut r: Vec<_> = raw
        .iter()
        .map(|p| {
            (
                key(p),
                p.figures.exchanges,
                p.figures.duration_sum_s,
                p.figures.max_s,
            )
        })
        .collect();
    let mut m: Vec<_> = minute
        .iter()
        .map(|p| {
            (
                key(p),
                p.figures.exchanges,
                p.figures.duration_sum_s,
                p.figures.max_s,
            )
        })
        .collect();
    r.sort_by_key(|a| a.0);
    m.sort_by_key(|a| a.0);
    assert_eq!(r.len(), 4, "two steps × two minutes");
    for (a, b) in r.iter().zip(&m) {
        assert_eq!(a.0, b.0);
        assert_eq!(a.1, b.1, "exchanges of {:?}", a.0);
        assert_close(a.2.unwrap(), b.2.unwrap(), "duration");
        assert_eq!(a.3, b.3, "max of {:?}", a.0);
    }
    let hour_to1 = hour.iter().find(|p| p.step_id == figures[1].0.id).unwrap();
    assert_eq!(hour_to1.figures.exchanges, Some(98.0));

    // Opened again, as after a restart: the same figures.
    drop(store);
    let again = Store::connect(&config.database()).await.unwrap();
    let after = read(again.clone()).await;
    assert_eq!(before.0, after.0);
    assert_eq!(before.1, after.1);
    assert_eq!(before.2, after.2);
    assert_eq!(before.3, after.3);

    // Retention: raw rows past theirs go, rollups stay.
    let keep_none_raw = Retention {
        raw_hours: 0.0,
        ..config.retention
    };
    let n = again.prune_steps(end + 1, &keep_none_raw).await.unwrap();
    assert_eq!(n, 14, "7 raw rows of each step");
    assert!(
        again
            .step_series(route_id, base, end, 60_000, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        again
            .step_series(route_id, base, end, 60_000, 60_000)
            .await
            .unwrap()
            .len(),
        4
    );
    // The target's deletion takes its routes' steps.
    assert!(again.delete_target(t.id).await.unwrap());
    assert!(again.route_steps(route_id).await.unwrap().is_empty());
}
