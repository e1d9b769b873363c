//! Credentials in target and webhook URLs (issue 17): stored and used in full, shown masked
//! in every answer and page.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;

use crate::helpers::{TestApp, spawn_app};

const SECRETS: [&str; 4] = ["hunter2", "s3cr3tT0ken", "K3yValue9", "ChanTok77"];

async fn post_json(app: &TestApp, uri: &str, body: serde_json::Value) -> crate::helpers::Reply {
    app.send(
        Request::post(uri)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
    )
    .await
}

fn assert_no_secret(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} shows {s}: {text}");
    }
}

#[tokio::test]
async fn target_and_webhook_credentials_are_masked_in_answers_and_pages() {
    let app = spawn_app().await;
    let url =
        "http://scraper:hunter2@127.0.0.1:9/metrics?format=prom&token=s3cr3tT0ken&ApiKey=K3yValue9";
    let r = post_json(
        &app,
        "/api/v1/targets",
        json!({"name": "orders", "url": url, "interval_s": 60, "timeout_s": 5,
               "labels": {"service": "orders"}}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    assert_no_secret("POST /api/v1/targets", &r.text());
    assert_eq!(
        r.json()["url"],
        "http://scraper:…@127.0.0.1:9/metrics?format=prom&token=…&ApiKey=…"
    );
    // Stored in full (the scraper uses it as written).
    let stored = app.state.store.list_targets().await.unwrap();
    assert_eq!(stored[0].url.expose(), url);
    assert!(stored[0].secret_set);

    let r = post_json(
        &app,
        "/api/v1/alert-channels",
        json!({"name": "ops", "kind": "webhook",
               "url": "http://127.0.0.1:9/hook?access_token=ChanTok77"}),
    )
    .await;
    assert!(r.status.is_success(), "{}", r.text());
    assert_no_secret("POST /api/v1/alert-channels", &r.text());

    for uri in [
        "/api/v1/targets",
        "/api/v1/services",
        "/api/v1/services/orders",
        "/api/v1/alert-channels",
        "/console/routes",
        "/console/services/orders",
        "/console/alerts",
    ] {
        let r = app.get(uri).await;
        assert_eq!(r.status, StatusCode::OK, "{uri}: {}", r.text());
        assert_no_secret(uri, &r.text());
    }
    // The fleet panel still shows which target it is.
    let page = app.get("/console/routes").await.text();
    assert!(
        page.contains("http://scraper:…@127.0.0.1:9/metrics?format=prom")
            && page.contains("token=…"),
        "{page}"
    );
}

#[tokio::test]
async fn scrape_errors_never_carry_the_credentials() {
    let app = spawn_app().await;
    let r = post_json(
        &app,
        "/api/v1/targets",
        json!({"name": "orders", "url": "http://x/metrics", "interval_s": 60, "timeout_s": 5}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let mut target = app.state.store.list_targets().await.unwrap().remove(0);
    // A service that answers 500 to one request.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = sock.read(&mut buf).await;
        let _ = sock
            .write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await;
    });
    let client = harrier::services::egress::Outbound::scrapes(
        &harrier::services::egress::Egress::new(Default::default()),
    );
    target.url = format!("http://scraper:hunter2@{addr}/metrics?token=s3cr3tT0ken").into();
    let err = harrier::services::scrape::scrape_once(&client, &target)
        .await
        .err()
        .expect("HTTP 500 is an error");
    assert!(err.contains("500"), "{err}");
    assert!(err.contains(&addr.to_string()), "names the target: {err}");
    assert_no_secret("the error of an answered scrape", &err);
    server.await.unwrap();
    // Nothing listens there any more: a connection error.
    let err = harrier::services::scrape::scrape_once(&client, &target)
        .await
        .err()
        .expect("connection refused");
    assert_no_secret("the error of a refused scrape", &err);
}

/// A canary secret in every place a secret goes — target credentials and query token,
/// webhook, Slack and Alertmanager URLs, from harrier.toml and the API — appears in no
/// answer, page, websocket frame or log line (at `debug`), while scrapes and test sends
/// fail and are retried (their errors logged and stored).
#[tokio::test]
async fn a_canary_secret_appears_nowhere_outside_the_database() {
    use futures_util::StreamExt;

    const CANARY: &str = "CaNaRy7731";
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("harrier.toml");
    std::fs::write(
        &toml,
        format!(
            r#"
[[targets]]
name = "file-target"
url = "http://scraper:{CANARY}@127.0.0.1:9/metrics?token={CANARY}"
interval_s = 1
timeout_s = 1

[alerts]
[[alerts.channels]]
name = "file-slack"
kind = "slack"
url = "http://127.0.0.1:9/services/T0/B0/{CANARY}"

[[alerts.channels]]
name = "file-am"
kind = "alertmanager"
url = "http://am:{CANARY}@127.0.0.1:9"
"#
        ),
    )
    .unwrap();
    let log = dir.path().join("stderr.log");
    let (child, base) = serve_logging(&toml, &dir.path().join("h.db"), "debug", &log);
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("{}/api/v1/live", base.replace("http", "ws")))
            .await
            .unwrap();
    let http = reqwest::Client::new();
    let post =
        |path: &str, body: serde_json::Value| http.post(format!("{base}{path}")).json(&body).send();
    let r = post(
        "/api/v1/targets",
        json!({"name": "api-target", "interval_s": 1, "timeout_s": 1,
               "url": format!("http://{CANARY}@127.0.0.1:9/metrics")}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 201);
    assert!(!r.text().await.unwrap().contains(CANARY));
    for (name, kind, url) in [
        (
            "api-hook",
            "webhook",
            format!("http://127.0.0.1:9/hooks/{CANARY}"),
        ),
        (
            "api-slack",
            "slack",
            format!("http://127.0.0.1:9/services/{CANARY}"),
        ),
        (
            "api-am",
            "alertmanager",
            format!("http://u:{CANARY}@127.0.0.1:9"),
        ),
    ] {
        let r = post(
            "/api/v1/alert-channels",
            json!({"name": name, "kind": kind, "url": url}),
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 201);
        assert!(!r.text().await.unwrap().contains(CANARY));
    }
    // Refused URLs are errors that must not echo the secret either.
    let r = post(
        "/api/v1/alert-channels",
        json!({"name": "bad", "kind": "webhook", "url": format!("ftp://x:{CANARY}@h/")}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    assert_no_canary("a refused channel", &r.text().await.unwrap(), CANARY);
    let r = post(
        "/api/v1/targets",
        json!({"name": "bad", "url": format!("gopher://x:{CANARY}@h/")}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    assert_no_canary("a refused target", &r.text().await.unwrap(), CANARY);
    for name in ["file-slack", "file-am", "api-hook", "api-slack", "api-am"] {
        let r = post(&format!("/api/v1/alert-channels/{name}/test"), json!({}))
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        assert!(text.contains("error"), "{name}: {text}");
        assert_no_canary(name, &text, CANARY);
    }
    // Scrapes of both targets fail (port 9) a few times.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    for path in [
        "/api/v1/targets",
        "/api/v1/alert-channels",
        "/api/v1/alert-channels/api-hook",
        "/api/v1/alert-channels/file-slack",
        "/api/v1/alerts/history",
        "/console/routes",
        "/console/alerts",
        "/console",
        "/metrics",
    ] {
        let text = http
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_no_canary(path, &text, CANARY);
    }
    let targets: serde_json::Value = http
        .get(format!("{base}/api/v1/targets"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let api_target = targets
        .as_array()
        .or_else(|| targets["targets"].as_array())
        .unwrap()
        .iter()
        .find(|t| t["name"] == "api-target")
        .cloned()
        .unwrap();
    assert_eq!(api_target["secret_set"], true, "{api_target}");
    let mut frames = 0;
    while let Ok(Some(Ok(msg))) =
        tokio::time::timeout(std::time::Duration::from_millis(300), ws.next()).await
    {
        frames += 1;
        assert_no_canary(
            "a websocket frame",
            msg.to_text().unwrap_or_default(),
            CANARY,
        );
    }
    assert!(frames > 0, "the websocket said something");
    drop(ws);
    let logged = stop_and_read_log(child, &log);
    assert!(logged.contains("DEBUG"), "debug logging was on");
    assert_no_canary("the log", &logged, CANARY);
    // The database holds them whole (they are used).
    let db = std::fs::read(dir.path().join("h.db")).unwrap_or_default();
    let wal = std::fs::read(dir.path().join("h.db-wal")).unwrap_or_default();
    let stored = String::from_utf8_lossy(&db).to_string() + &String::from_utf8_lossy(&wal);
    assert!(stored.contains(CANARY), "stored whole in the database");
}

/// Starts `harrier serve` on a free port of 127.0.0.1 with `toml` and the SQLite file
/// `db`, its log at `level` written to `log`; returns the process and its base URL.
fn serve_logging(
    toml: &std::path::Path,
    db: &std::path::Path,
    level: &str,
    log: &std::path::Path,
) -> (crate::browser::Proc, String) {
    use std::process::{Command, Stdio};
    let child = Command::new(env!("CARGO_BIN_EXE_harrier"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(toml)
        .arg("--db")
        .arg(db)
        .env("HARRIER_LOG", level)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("start harrier");
    let mut child = crate::browser::Proc(child);
    let base = crate::server::printed_url(&mut child.0);
    (child, base)
}

/// Stops a server with SIGTERM, waits for it, and returns its log.
fn stop_and_read_log(mut child: crate::browser::Proc, log: &std::path::Path) -> String {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status();
    let _ = child.0.wait();
    std::fs::read_to_string(log).unwrap()
}

fn assert_no_canary(what: &str, text: &str, canary: &str) {
    assert!(!text.contains(canary), "{what} shows the secret: {text}");
}

/// A console load test started by a token, with secret headers and a token in its URL: the
/// service receives them whole, and no answer, page (a share link's included), websocket
/// frame or log line (at `info`) shows them; the log names the token that started it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_tests_secrets_are_masked_everywhere_and_the_log_names_who_started_it() {
    use axum::extract::State;
    use axum::http::HeaderMap;
    use futures_util::StreamExt;
    use std::sync::{Arc, Mutex};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    if crate::helpers::sqlite_only("the commands open the SQLite file the test names") {
        return;
    }
    const CANARY: &str = "LoAdSeCrEt4417";
    // The service under load remembers the secret headers it was sent.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    async fn handle(State(seen): State<Arc<Mutex<Vec<String>>>>, h: HeaderMap) -> &'static str {
        let mut seen = seen.lock().unwrap();
        if seen.is_empty() {
            for name in ["authorization", "x-api-key"] {
                let v = h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
                seen.push(v.to_string());
            }
        }
        "ok"
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let svc = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/orders", axum::routing::get(handle))
        .with_state(seen.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let dbs = db.to_str().unwrap();
    let run_cli = |args: &[&str], stdin: &str| {
        let args: Vec<&str> = args.iter().copied().chain(["--db", dbs]).collect();
        let (code, out, err) = crate::signin::harrier(&args, stdin);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    run_cli(
        &["user", "add", "ada", "--role", "admin"],
        "a long passphrase\n",
    );
    let token = run_cli(&["token", "create", "ci-bot", "--scope", "write"], "")
        .trim()
        .to_string();
    let toml = dir.path().join("harrier.toml");
    std::fs::write(
        &toml,
        "[load]\nenabled = true\nmax_rate = 200\nmax_duration = \"30s\"\n",
    )
    .unwrap();
    let log = dir.path().join("stderr.log");
    let (child, base) = serve_logging(&toml, &db, "info", &log);
    let mut ws_req = format!("{}/api/v1/live", base.replace("http", "ws"))
        .into_client_request()
        .unwrap();
    ws_req
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_req).await.unwrap();
    let http = reqwest::Client::new();
    let get = |path: String| {
        let req = http.get(format!("{base}{path}")).bearer_auth(&token);
        async move { req.send().await.unwrap().text().await.unwrap() }
    };

    let r = http
        .post(format!("{base}/api/v1/load-tests"))
        .bearer_auth(&token)
        .json(&json!({
            "url": format!("{svc}/orders?page=2&access_token={CANARY}"),
            "mode": "run", "rate": "50", "duration": "2s",
            "headers": [format!("Authorization: Bearer {CANARY}"),
                        format!("X-Api-Key: {CANARY}"), "Accept: text/plain"],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let started: serde_json::Value = r.json().await.unwrap();
    assert_no_canary("the started test", &started.to_string(), CANARY);
    assert_eq!(started["started_by"], "token:ci-bot", "{started}");
    let command = started["command"].as_str().unwrap();
    assert!(
        command.contains("'Authorization: …'")
            && command.contains("'X-Api-Key: …'")
            && command.contains("'Accept: text/plain'")
            && command.contains("access_token=…"),
        "the command keeps its shape, secrets masked: {command}"
    );
    let id = started["id"].as_i64().unwrap();
    let running = get("/api/v1/load-tests".into()).await;
    assert_no_canary("GET /api/v1/load-tests", &running, CANARY);
    let mut status = String::new();
    for _ in 0..100 {
        let run: serde_json::Value =
            serde_json::from_str(&get(format!("/api/v1/runs/{id}")).await).unwrap();
        status = run["status"].as_str().unwrap_or_default().to_string();
        if status == "complete" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, "complete");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![format!("Bearer {CANARY}"), CANARY.to_string()],
        "the service is sent the headers whole"
    );

    let share: serde_json::Value = http
        .post(format!("{base}/api/v1/share-links"))
        .bearer_auth(&token)
        .json(&json!({"run": id}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let share_path = share["path"].as_str().expect("a share link").to_string();
    let run: serde_json::Value =
        serde_json::from_str(&get(format!("/api/v1/runs/{id}")).await).unwrap();
    let scenario = run["scenario"].as_str().unwrap_or_default().to_string();
    assert!(
        scenario.contains("/orders?page=2&access_token=…"),
        "the scenario still says what was loaded: {scenario}"
    );
    let mut shown = 0;
    for path in [
        "/api/v1/runs".to_string(),
        format!("/api/v1/runs/{id}"),
        format!("/api/v1/runs/{id}/timeseries"),
        format!("/api/v1/runs/{id}/distribution"),
        format!("/api/v1/runs/{id}/stats.csv"),
        format!("/api/v1/runs/{id}/errors"),
        "/api/v1/scenarios".to_string(),
        "/api/v1/audit".to_string(),
        "/console/runs".to_string(),
        format!("/console/runs/{id}"),
        "/console".to_string(),
        share_path,
    ] {
        let text = get(path.clone()).await;
        assert_no_canary(&path, &text, CANARY);
        shown += usize::from(text.contains("/orders"));
    }
    assert!(shown >= 5, "the pages do show the run ({shown})");
    let mut frames = 0;
    while let Ok(Some(Ok(msg))) =
        tokio::time::timeout(std::time::Duration::from_millis(300), ws.next()).await
    {
        frames += 1;
        assert_no_canary(
            "a websocket frame",
            msg.to_text().unwrap_or_default(),
            CANARY,
        );
    }
    assert!(frames > 0, "the websocket said something");
    drop(ws);
    let logged = stop_and_read_log(child, &log);
    assert!(
        logged.contains("console load test started") && logged.contains("token:ci-bot"),
        "the log names the token that started the test: {logged}"
    );
    assert_no_canary("the log", &logged, CANARY);
}
