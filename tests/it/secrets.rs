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
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

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
    let child = Command::new(env!("CARGO_BIN_EXE_harrier"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&toml)
        .arg("--db")
        .arg(dir.path().join("h.db"))
        .env("HARRIER_LOG", "debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start harrier");
    let mut child = crate::browser::Proc(child);
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_end_matches("/console")
        .to_string();
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
    let _ = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status();
    let _ = child.0.wait();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("DEBUG"), "debug logging was on");
    assert_no_canary("the log", &logged, CANARY);
    // The database holds them whole (they are used).
    let db = std::fs::read(dir.path().join("h.db")).unwrap_or_default();
    let wal = std::fs::read(dir.path().join("h.db-wal")).unwrap_or_default();
    let stored = String::from_utf8_lossy(&db).to_string() + &String::from_utf8_lossy(&wal);
    assert!(stored.contains(CANARY), "stored whole in the database");
}

fn assert_no_canary(what: &str, text: &str, canary: &str) {
    assert!(!text.contains(canary), "{what} shows the secret: {text}");
}
