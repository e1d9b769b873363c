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
    assert_eq!(stored[0].url, url);

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
    target.url = format!("http://scraper:hunter2@{addr}/metrics?token=s3cr3tT0ken");
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
