//! Threshold alerts: the alert-rules API, and rules evaluated over stored route figures
//! (pending → firing → resolved) with their live events, history and notices.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use harrier::alerts::evaluator::{evaluate_once, seed};
use harrier::alerts::notify::{ChannelSpec, deliver_due};
use harrier::routes::Interval;
use harrier::store::{RouteWrite, ScrapeStatus, TargetSpec};
use serde_json::{Value, json};

use crate::helpers::{Reply, TestApp, fixture, spawn_app};

async fn send_json(app: &TestApp, method: &str, uri: &str, body: &Value) -> Reply {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    app.send(req).await
}

fn rule(name: &str) -> Value {
    json!({
        "name": name,
        "subject": {"route": "/check*"},
        "measure": "error_pct",
        "comparison": ">",
        "threshold": 10,
        "window": "1m",
        "for": "30s",
        "severity": "page",
        "summary": "Route {{ labels.route }} {{ value }} % errors"
    })
}

#[tokio::test]
async fn alert_rules_api_round_trip() {
    let app = spawn_app().await;
    seed(&app.state.store, &app.state.config.alerts)
        .await
        .unwrap();
    let list = app.get("/api/v1/alert-rules").await.json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["RouteErrorRateCritical", "RouteErrorRateWarning"]);
    assert_eq!(list[1]["threshold"], 5.0);
    assert_eq!(list[1]["for"], "2m");
    assert_eq!(list[1]["min_count"], 20);
    assert_eq!(list[1]["origin"], "builtin");

    let created = send_json(&app, "POST", "/api/v1/alert-rules", &rule("CheckoutErrors")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    assert_eq!(created.json()["origin"], "api");
    assert_eq!(created.json()["window"], "1m");
    let again = send_json(&app, "POST", "/api/v1/alert-rules", &rule("CheckoutErrors")).await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    assert!(again.json()["error"].as_str().unwrap().contains("exists"));

    let mut bad = rule("Bad");
    bad["recovery_threshold"] = json!(20);
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("recovery_threshold"),
        "{}",
        r.text()
    );
    let mut bad = rule("Bad");
    bad["comparison"] = json!("=>");
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.json()["error"].as_str().unwrap().contains("=>"),
        "{}",
        r.text()
    );

    let mut changed = rule("CheckoutErrors");
    changed["threshold"] = json!(25);
    let r = send_json(&app, "PUT", "/api/v1/alert-rules/CheckoutErrors", &changed).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        app.get("/api/v1/alert-rules/CheckoutErrors").await.json()["threshold"],
        25.0
    );
    let r = send_json(&app, "PUT", "/api/v1/alert-rules/Nope", &changed).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    assert_eq!(
        app.delete("/api/v1/alert-rules/CheckoutErrors")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/api/v1/alert-rules/CheckoutErrors").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete("/api/v1/alert-rules/CheckoutErrors")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

fn interval(exchanges: f64, failed: f64) -> Interval {
    Interval {
        interval_ms: 15_000,
        exchanges: Some(exchanges),
        failed: Some(failed),
        duration_sum_s: Some(exchanges * 0.05),
        duration_count: Some(exchanges),
        buckets: vec![(0.1, exchanges), (f64::INFINITY, exchanges)],
        max_s: Some(0.1),
        inflight: Some(1.0),
        resets: 0,
    }
}

fn write(route: &str, iv: Interval) -> RouteWrite {
    RouteWrite {
        instance: String::new(),
        service: "orders".into(),
        route: route.into(),
        source: "http".into(),
        state: None,
        last_exchange_ms: None,
        interval: Some(iv),
    }
}

async fn scrape(app: &TestApp, target: i64, at_ms: i64, routes: &[RouteWrite]) {
    let status = ScrapeStatus {
        at_ms,
        up: true,
        duration_ms: 1.0,
        samples: 10,
        error: None,
    };
    app.state
        .store
        .record_scrape(target, &status, routes)
        .await
        .unwrap();
}

async fn add_target(app: &TestApp) -> i64 {
    let spec = TargetSpec {
        name: "orders".into(),
        url: "http://10.0.0.5:9100/metrics".into(),
        kind: "prometheus".into(),
        interval_s: 15.0,
        timeout_s: 5.0,
        labels: BTreeMap::new(),
    };
    app.state
        .store
        .insert_target(&spec, "api", 0)
        .await
        .unwrap()
        .unwrap()
        .id
}

/// Next live event of `type`, skipping others.
async fn next_event(
    rx: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<str>>,
    ty: &str,
) -> Value {
    loop {
        let msg = rx
            .try_recv()
            .unwrap_or_else(|e| panic!("no {ty} event: {e}"));
        let v: Value = serde_json::from_str(&msg).unwrap();
        if v["type"] == ty {
            return v;
        }
    }
}

#[tokio::test]
async fn a_route_error_spike_goes_pending_fires_and_resolves() {
    let app = spawn_app().await;
    let store = &app.state.store;
    let spec = TargetSpec {
        name: "orders".into(),
        url: "http://10.0.0.5:9100/metrics".into(),
        kind: "prometheus".into(),
        interval_s: 15.0,
        timeout_s: 5.0,
        labels: BTreeMap::new(),
    };
    let target = store
        .insert_target(&spec, "api", 0)
        .await
        .unwrap()
        .unwrap()
        .id;
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &rule("CheckoutErrors")).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let mut rx = app.state.hub.subscribe();

    let t0 = 1_800_000_000_000;
    // /checkout: 30 % errors over 100 exchanges; /checkin: 50 % over 10 (under the
    // min-count guard); /search is not watched.
    scrape(
        &app,
        target,
        t0,
        &[
            write("/checkout", interval(100.0, 30.0)),
            write("/checkin", interval(10.0, 5.0)),
            write("/search", interval(100.0, 90.0)),
        ],
    )
    .await;
    let round = evaluate_once(store, &app.state.hub, t0 + 1_000)
        .await
        .unwrap();
    assert_eq!(round.transitions.len(), 1);
    let alerts = app.get("/api/v1/alerts").await.json();
    assert_eq!(alerts.as_array().unwrap().len(), 1, "{alerts}");
    assert_eq!(alerts[0]["rule"], "CheckoutErrors");
    assert_eq!(alerts[0]["state"], "pending");
    assert_eq!(alerts[0]["value"], 30.0);
    assert_eq!(alerts[0]["active_since_ms"], t0 + 1_000);
    assert_eq!(alerts[0]["labels"]["route"], "/checkout");
    assert_eq!(alerts[0]["labels"]["service"], "orders");
    assert_eq!(alerts[0]["labels"]["instance"], "10.0.0.5:9100");

    // 15 s later: still pending (for 30 s); 30 s after it started: firing.
    evaluate_once(store, &app.state.hub, t0 + 16_000)
        .await
        .unwrap();
    assert_eq!(
        app.get("/api/v1/alerts").await.json()[0]["state"],
        "pending"
    );
    let round = evaluate_once(store, &app.state.hub, t0 + 31_000)
        .await
        .unwrap();
    assert_eq!(round.notifications.len(), 1);
    let alerts = app.get("/api/v1/alerts").await.json();
    assert_eq!(alerts[0]["state"], "firing");
    assert_eq!(alerts[0]["fired_at_ms"], t0 + 31_000);
    assert_eq!(alerts[0]["summary"], "Route /checkout 30 % errors");
    let fired = next_event(&mut rx, "alert_firing").await;
    assert_eq!(fired["alert"]["labels"]["route"], "/checkout");
    assert_eq!(fired["alert"]["severity"], "page");

    // Still bad: no second firing.
    let round = evaluate_once(store, &app.state.hub, t0 + 46_000)
        .await
        .unwrap();
    assert!(round.transitions.is_empty());

    // A clean minute: resolved.
    scrape(
        &app,
        target,
        t0 + 60_000,
        &[write("/checkout", interval(100.0, 0.0))],
    )
    .await;
    let round = evaluate_once(store, &app.state.hub, t0 + 62_000)
        .await
        .unwrap();
    assert_eq!(round.notifications.len(), 1);
    assert!(
        app.get("/api/v1/alerts")
            .await
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
    let resolved = next_event(&mut rx, "alert_resolved").await;
    assert_eq!(resolved["resolved_at_ms"], t0 + 62_000);
    assert_eq!(resolved["alert"]["state"], "resolved");

    let history = app
        .get("/api/v1/alerts/history?rule=CheckoutErrors")
        .await
        .json();
    let changes: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["change"].as_str().unwrap())
        .collect();
    assert_eq!(changes, ["resolved", "firing", "pending"]);
    let bad = app.get("/api/v1/alerts/history?limit=0").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

/// A webhook receiver on 127.0.0.1:0 that answers 500 to the first `fail_first` messages
/// and 200 after, keeping every body.
async fn receiver(fail_first: usize) -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let seen = seen.clone();
            async move {
                let mut v = seen.lock().unwrap();
                v.push(body);
                if v.len() <= fail_first {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/hook"), got)
}

fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

#[tokio::test]
async fn webhook_gets_one_firing_and_one_resolved_message_with_retries() {
    let app = spawn_app().await;
    let store = &app.state.store;
    let target = add_target(&app).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    let created = send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let (url, got) = receiver(1).await;
    let channels = [ChannelSpec {
        name: "ops".into(),
        kind: "webhook".into(),
        url,
        timeout_s: 5.0,
    }];
    let client = reqwest::Client::new();
    let ext = "http://127.0.0.1:7070";
    let deliver = |now: i64| deliver_due(store, &client, &channels, ext, now);

    let t0 = 1_800_000_000_000;
    scrape(
        &app,
        target,
        t0,
        &[write("/checkout", interval(100.0, 30.0))],
    )
    .await;
    evaluate_once(store, &app.state.hub, t0 + 1_000)
        .await
        .unwrap();
    // first attempt answered 500: retried after 1 s, not before
    assert_eq!(deliver(t0 + 1_000).await.unwrap(), 0);
    assert_eq!(deliver(t0 + 1_500).await.unwrap(), 0);
    assert_eq!(got.lock().unwrap().len(), 1);
    assert_eq!(deliver(t0 + 2_000).await.unwrap(), 1);
    assert_eq!(got.lock().unwrap().len(), 2);
    // still firing: nothing new to send
    evaluate_once(store, &app.state.hub, t0 + 16_000)
        .await
        .unwrap();
    assert_eq!(deliver(t0 + 16_000).await.unwrap(), 0);
    assert_eq!(got.lock().unwrap().len(), 2);

    scrape(
        &app,
        target,
        t0 + 60_000,
        &[write("/checkout", interval(100.0, 0.0))],
    )
    .await;
    evaluate_once(store, &app.state.hub, t0 + 62_000)
        .await
        .unwrap();
    assert_eq!(deliver(t0 + 62_000).await.unwrap(), 1);
    assert_eq!(deliver(t0 + 70_000).await.unwrap(), 0);

    let msgs = got.lock().unwrap().clone();
    assert_eq!(
        msgs.len(),
        3,
        "one firing (sent twice: one retry) and one resolved"
    );
    let statuses: Vec<&str> = msgs.iter().map(|m| m["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["firing", "firing", "resolved"]);

    // The shape of Alertmanager's own messages (fixture captured from Alertmanager).
    let fixture: Value = serde_json::from_slice(&fixture(
        "alertmanager/alertmanager-webhook-one-resolved.json",
    ))
    .unwrap();
    for m in &msgs {
        assert_eq!(keys(m), keys(&fixture));
        assert_eq!(keys(&m["alerts"][0]), keys(&fixture["alerts"][0]));
        assert_eq!(m["version"], "4");
        assert_eq!(m["receiver"], "ops");
        assert_eq!(m["groupKey"], "{}:{alertname=\"CheckoutErrors\"}");
        assert_eq!(m["alerts"][0]["fingerprint"].as_str().unwrap().len(), 16);
    }
    let firing = &msgs[1]["alerts"][0];
    assert_eq!(firing["labels"]["alertname"], "CheckoutErrors");
    assert_eq!(firing["labels"]["route"], "/checkout");
    assert_eq!(firing["labels"]["severity"], "page");
    assert_eq!(
        firing["annotations"]["summary"],
        "Route /checkout 30 % errors"
    );
    assert_eq!(firing["startsAt"], "2027-01-15T08:00:01Z");
    assert_eq!(firing["endsAt"], "0001-01-01T00:00:00Z");
    let resolved = &msgs[2]["alerts"][0];
    assert_eq!(resolved["status"], "resolved");
    assert_eq!(resolved["startsAt"], firing["startsAt"]);
    assert_eq!(resolved["endsAt"], "2027-01-15T08:01:02Z");
    assert_eq!(
        resolved["fingerprint"], firing["fingerprint"],
        "one alert, one identity"
    );

    let log = store.alert_deliveries(10).await.unwrap();
    let codes: Vec<Option<i64>> = log.iter().rev().map(|d| d.status).collect();
    assert_eq!(codes, [Some(500), Some(200), Some(200)]);
    assert!(
        log.last()
            .unwrap()
            .error
            .as_deref()
            .unwrap()
            .contains("500")
    );
}

/// `harrier serve` evaluates on its own every `evaluation_interval` and sends to the
/// configured channel, with the rule and the channel from the configuration.
#[tokio::test]
async fn serve_evaluates_and_notifies_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harrier.db");
    let store = harrier::store::Store::open(&db).await.unwrap();
    let (url, got) = receiver(0).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    let config = harrier::config::Config {
        db,
        self_scrape: false,
        alerts: harrier::alerts::AlertsConfig {
            evaluation_interval: harrier::alerts::rule::Duration(1_000),
            builtin_rules: false,
            rules: vec![serde_json::from_value(r).unwrap()],
            channels: vec![ChannelSpec {
                name: "ops".into(),
                kind: "webhook".into(),
                url,
                timeout_s: 5.0,
            }],
            external_url: Some("http://harrier.test".into()),
        },
        ..harrier::config::Config::default()
    };
    let state = harrier::app::AppState::new(store, config);
    let app = TestApp {
        state: state.clone(),
        _dir: dir,
    };
    let target = add_target(&app).await;
    let now = harrier::now_ms();
    scrape(
        &app,
        target,
        now,
        &[write("/checkout", interval(100.0, 30.0))],
    )
    .await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let shutdown = state.shutdown.clone();
    let server = tokio::spawn(harrier::app::serve(listener, state, std::future::pending()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while got.lock().unwrap().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no webhook message within 15 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let msg = got.lock().unwrap()[0].clone();
    assert_eq!(msg["status"], "firing");
    assert_eq!(msg["externalURL"], "http://harrier.test");
    assert_eq!(msg["alerts"][0]["labels"]["route"], "/checkout");
    let alerts = app.get("/api/v1/alerts").await.json();
    assert_eq!(alerts[0]["state"], "firing");
    let rules = app.get("/api/v1/alert-rules").await.json();
    assert_eq!(rules[0]["origin"], "config");
    let r = app.delete("/api/v1/alert-rules/CheckoutErrors").await;
    assert_eq!(
        r.status,
        StatusCode::BAD_REQUEST,
        "config rules are changed in harrier.toml"
    );
    shutdown.cancel();
    server.await.unwrap().unwrap();
}

/// `harrier rules test`: the promtool fixture's case passes (0), a wrong expectation
/// fails (1) naming the time and rule, an unreadable file is a usage error (2).
#[test]
fn rules_test_command_exit_codes() {
    let harrier = env!("CARGO_BIN_EXE_harrier");
    let good = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/alerts/route-error-rate.test.toml");
    let out = std::process::Command::new(harrier)
        .args(["rules", "test"])
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUCCESS"));

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.test.toml");
    let text = std::fs::read_to_string(&good).unwrap().replacen(
        "eval_time = \"34m\"",
        "eval_time = \"34m\"\nexp_alerts = [{ labels = { route = \"/checkout\" } }]",
        1,
    );
    std::fs::write(&bad, text).unwrap();
    let out = std::process::Command::new(harrier)
        .args(["rules", "test"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("FAILED") && stdout.contains("34m RouteErrorRateHigh"),
        "{stdout}"
    );

    let out = std::process::Command::new(harrier)
        .args(["rules", "test", "/nonexistent/x.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
