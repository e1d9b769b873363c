//! Threshold alerts: the alert-rules API, and rules evaluated over stored route figures
//! (pending → firing → resolved) with their live events, history and notices.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use harrier::domain::alerts::channel::ChannelSpec;
use harrier::domain::alerts::rule::Duration;
use harrier::domain::routes::Interval;
use harrier::services::alerts::evaluator::{evaluate_once, seed};
use harrier::services::alerts::notify::{Dispatch, dispatch};
use harrier::store::{RouteWrite, ScrapeStatus, TargetSpec};
use serde_json::{Value, json};

use crate::helpers::{Reply, TestApp, fixture, spawn_app, spawn_app_with};
use crate::skip::{Kind, skip};

/// A request with a JSON body (shared with the alerts console tests).
pub(crate) async fn send_json(app: &TestApp, method: &str, uri: &str, body: &Value) -> Reply {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    app.send(req).await
}

pub(crate) fn rule(name: &str) -> Value {
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

pub(crate) fn interval(exchanges: f64, failed: f64) -> Interval {
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

pub(crate) fn write(route: &str, iv: Interval) -> RouteWrite {
    RouteWrite {
        labels: Default::default(),
        instance: String::new(),
        service: "orders".into(),
        route: route.into(),
        source: "http".into(),
        state: None,
        last_exchange_ms: None,
        interval: Some(iv),
    }
}

pub(crate) async fn scrape(app: &TestApp, target: i64, at_ms: i64, routes: &[RouteWrite]) {
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

pub(crate) async fn add_target(app: &TestApp) -> i64 {
    let spec = TargetSpec {
        name: "orders".into(),
        url: "http://127.0.0.1:9/metrics".into(),
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
        url: "http://127.0.0.1:9/metrics".into(),
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
    assert_eq!(alerts[0]["labels"]["instance"], "127.0.0.1:9");

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
pub(crate) async fn receiver(fail_first: usize) -> (String, Arc<Mutex<Vec<Value>>>) {
    let (base, got) = receiver_at("/hook", fail_first).await;
    (format!("{base}/hook"), got)
}

/// As [`receiver`], on `path`; returns the base URL.
pub(crate) async fn receiver_at(path: &str, fail_first: usize) -> (String, Arc<Mutex<Vec<Value>>>) {
    let (base, got, _) = receiver_full(path, fail_first).await;
    (base, got)
}

/// The `Idempotency-Key` header of each request a receiver got, in order.
type Keys = Arc<Mutex<Vec<Option<String>>>>;

/// As [`receiver_at`], also keeping each request's `Idempotency-Key` header.
async fn receiver_full(path: &str, fail_first: usize) -> (String, Arc<Mutex<Vec<Value>>>, Keys) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let keys: Keys = Arc::default();
    let (seen, seen_keys) = (got.clone(), keys.clone());
    let app = axum::Router::new().route(
        path,
        axum::routing::post(
            move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<Value>| {
                let (seen, seen_keys) = (seen.clone(), seen_keys.clone());
                async move {
                    seen_keys.lock().unwrap().push(
                        headers
                            .get("idempotency-key")
                            .and_then(|v| v.to_str().ok())
                            .map(str::to_string),
                    );
                    let mut v = seen.lock().unwrap();
                    v.push(body);
                    if v.len() <= fail_first {
                        StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        StatusCode::OK
                    }
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), got, keys)
}

/// A webhook channel with test timings: no group wait, 10 s group interval.
fn quick(name: &str, url: &str) -> ChannelSpec {
    let mut c = ChannelSpec::new(name, "webhook", url);
    c.group_wait = Duration(0);
    c.group_interval = Duration(10_000);
    c.timeout_s = 5.0;
    c
}

fn ctx(channels: Vec<ChannelSpec>) -> Dispatch {
    Dispatch {
        channels,
        external_url: "http://127.0.0.1:7070".into(),
        evaluation_interval_ms: 15_000,
    }
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
    let (base, got, idempotency) = receiver_full("/hook", 1).await;
    let url = format!("{base}/hook");
    let ctx = ctx(vec![quick("ops", &url)]);
    let client = notify_client();
    let deliver = |now: i64| {
        let (client, ctx) = (&client, &ctx);
        async move { dispatch(store, client, ctx, now).await.map(|d| d.sent) }
    };

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
    // The retry of the firing notice carries the first attempt's idempotency key (as a
    // resend after a crash would); the resolved notice has its own.
    let sent_keys = idempotency.lock().unwrap().clone();
    assert!(
        sent_keys
            .iter()
            .all(|k| k.as_ref().is_some_and(|k| k.len() == 16)),
        "{sent_keys:?}"
    );
    assert_eq!(sent_keys[0], sent_keys[1], "retry: same key");
    assert_ne!(sent_keys[1], sent_keys[2], "the next notice: a new key");

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
    assert_eq!((log[0].firing, log[0].resolved), (0, 1));
    assert!(
        log.last()
            .unwrap()
            .error
            .as_deref()
            .unwrap()
            .contains("500")
    );

    // A second episode of the same alert, long after the first resolved: its firing
    // notice has a key of its own (a receiver that drops repeated keys keeps it).
    scrape(
        &app,
        target,
        t0 + 600_000,
        &[write("/checkout", interval(100.0, 30.0))],
    )
    .await;
    evaluate_once(store, &app.state.hub, t0 + 601_000)
        .await
        .unwrap();
    assert_eq!(deliver(t0 + 601_000).await.unwrap(), 1);
    let second = got.lock().unwrap().last().cloned().unwrap();
    assert_eq!(second["status"], "firing");
    let all_keys = idempotency.lock().unwrap().clone();
    assert_eq!(all_keys.len(), 4, "{all_keys:?}");
    assert!(
        !all_keys[..3].contains(&all_keys[3]),
        "the second episode's firing notice has a new key: {all_keys:?}"
    );
}

/// `harrier serve` evaluates on its own every `evaluation_interval` and sends to the
/// configured channel, with the rule and the channel from the configuration.
#[tokio::test]
async fn serve_evaluates_and_notifies_on_its_own() {
    let (store, base, dir) = crate::helpers::fresh_store().await;
    let (url, got) = receiver(0).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    let config = harrier::config::Config {
        db: base.db,
        database_url: base.database_url,
        self_scrape: false,
        alerts: harrier::domain::alerts::AlertsConfig {
            evaluation_interval: harrier::domain::alerts::rule::Duration(1_000),
            builtin_rules: false,
            rules: vec![serde_json::from_value(r).unwrap()],
            channels: vec![quick("ops", &url)],
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

/// Silences: the API of the contract (create, validate naming the field, list newest
/// first with state, expire), and a silenced alert still listed with `silenced_by` and
/// announced with `"silenced": true`.
#[tokio::test]
async fn silences_api_and_silenced_alerts() {
    let app = spawn_app().await;
    let store = &app.state.store;
    let target = add_target(&app).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    let created = send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());

    let bad = |body: Value, field: &'static str| {
        let app = &app;
        async move {
            let r = send_json(app, "POST", "/api/v1/silences", &body).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text());
            let e = r.json()["error"].as_str().unwrap().to_string();
            assert!(e.contains(field), "{body}: {e} should name {field}");
        }
    };
    bad(
        json!({"matchers": [], "duration": "1h", "comment": "x"}),
        "matchers",
    )
    .await;
    bad(
        json!({"matchers": [{"name": "route", "value": "(", "op": "=~"}], "duration": "1h", "comment": "x"}),
        "regex",
    )
    .await;
    bad(
        json!({"matchers": [{"name": "route", "value": "/a", "op": "=="}], "duration": "1h", "comment": "x"}),
        "op",
    )
    .await;
    bad(
        json!({"matchers": [{"name": "route", "value": "/a", "op": "="}], "comment": "x"}),
        "duration",
    )
    .await;
    bad(
        json!({"matchers": [{"name": "route", "value": "/a", "op": "="}], "duration": "1h", "comment": ""}),
        "comment",
    )
    .await;
    let now = harrier::now_ms();
    bad(
        json!({"matchers": [{"name": "route", "value": "/a", "op": "="}],
               "starts_at_ms": now + 10_000, "ends_at_ms": now + 5_000, "comment": "x"}),
        "ends_at_ms",
    )
    .await;

    let mut rx = app.state.hub.subscribe();
    let s = send_json(
        &app,
        "POST",
        "/api/v1/silences",
        &json!({"matchers": [{"name": "alertname", "value": "CheckoutErrors", "op": "="},
                             {"name": "route", "value": "/check.*", "op": "=~"}],
                "duration": "2h", "comment": "deploying checkout", "created_by": "ana"}),
    )
    .await;
    assert_eq!(s.status, StatusCode::CREATED, "{}", s.text());
    let s = s.json();
    assert_eq!(s["state"], "active");
    assert_eq!(s["comment"], "deploying checkout");
    assert_eq!(s["created_by"], "ana");
    assert_eq!(
        s["ends_at_ms"].as_i64().unwrap() - s["starts_at_ms"].as_i64().unwrap(),
        7_200_000
    );
    let id = s["id"].as_i64().unwrap();
    let later = send_json(
        &app,
        "POST",
        "/api/v1/silences",
        &json!({"matchers": [{"name": "service", "value": "billing", "op": "="}],
                "starts_at_ms": now + 3_600_000, "ends_at_ms": now + 7_200_000, "comment": "later"}),
    )
    .await
    .json();
    assert_eq!(later["state"], "pending");
    assert_eq!(later["created_by"], "");
    let list = app.get("/api/v1/silences").await.json();
    let ids: Vec<i64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [later["id"].as_i64().unwrap(), id], "newest first");
    assert_eq!(list[1]["matchers"][1]["op"], "=~");

    let t = harrier::now_ms();
    scrape(
        &app,
        target,
        t,
        &[
            write("/checkout", interval(100.0, 30.0)),
            write("/checkin", interval(100.0, 30.0)),
        ],
    )
    .await;
    evaluate_once(store, &app.state.hub, t + 1_000)
        .await
        .unwrap();
    let alerts = app.get("/api/v1/alerts").await.json();
    assert_eq!(alerts.as_array().unwrap().len(), 2, "{alerts}");
    for a in alerts.as_array().unwrap() {
        assert_eq!(a["silenced_by"], json!([id]), "{a}");
        assert_eq!(a["labels"]["alertname"], "CheckoutErrors");
        assert_eq!(a["severity"], "page");
        assert_eq!(a["state"], "firing");
    }
    let fired = next_event(&mut rx, "alert_firing").await;
    assert_eq!(fired["silenced"], true);

    assert_eq!(
        app.delete(&format!("/api/v1/silences/{id}")).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.delete("/api/v1/silences/999999").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete("/api/v1/silences/abc").await.status,
        StatusCode::NOT_FOUND
    );
    let list = app.get("/api/v1/silences").await.json();
    assert_eq!(list[1]["state"], "expired");
    let alerts = app.get("/api/v1/alerts").await.json();
    assert_eq!(alerts[0]["silenced_by"], json!([]));
}

/// Scrapes `routes` (each 30 % errors when `bad`, clean otherwise) and evaluates at `at`.
async fn tick(app: &TestApp, target: i64, at: i64, routes: &[(&str, bool)]) {
    let writes: Vec<RouteWrite> = routes
        .iter()
        .map(|(r, bad)| write(r, interval(100.0, if *bad { 30.0 } else { 0.0 })))
        .collect();
    scrape(app, target, at - 1_000, &writes).await;
    evaluate_once(&app.state.store, &app.state.hub, at)
        .await
        .unwrap();
}

async fn add_silence(app: &TestApp, route: &str, ends_at_ms: i64) -> i64 {
    let r = send_json(
        app,
        "POST",
        "/api/v1/silences",
        &json!({"matchers": [{"name": "route", "value": route, "op": "="}],
                "starts_at_ms": 0, "ends_at_ms": ends_at_ms, "comment": "maintenance"}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    r.json()["id"].as_i64().unwrap()
}

/// As Alertmanager: a silenced alert sends nothing while silenced; when the silence ends
/// while it still fires, the next group flush notifies it; an alert that fired and
/// resolved entirely under a silence sends nothing at all.
#[tokio::test]
async fn silenced_alerts_are_not_notified_until_the_silence_ends() {
    let app = spawn_app().await;
    let store = &app.state.store;
    let target = add_target(&app).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    r["window"] = json!("10s");
    send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
    let (url, got) = receiver(0).await;
    let ctx = ctx(vec![quick("ops", &url)]);
    let client = notify_client();

    // Silences are read at the real clock time, so the test runs on it too.
    let t0 = harrier::now_ms();
    let end = t0 + 60_000;
    let muted = add_silence(&app, "/checkout", end).await;
    add_silence(&app, "/checkin", end + 3_600_000).await;

    tick(&app, target, t0, &[("/checkout", true), ("/checkin", true)]).await;
    dispatch(store, &client, &ctx, t0).await.unwrap();
    dispatch(store, &client, &ctx, t0 + 10_000).await.unwrap();
    assert!(got.lock().unwrap().is_empty(), "nothing while silenced");
    let alerts = app.get("/api/v1/alerts").await.json();
    assert_eq!(
        alerts.as_array().unwrap().len(),
        2,
        "still evaluated and listed"
    );

    // /checkin resolves while silenced: its firing was never sent, so no resolved either.
    tick(
        &app,
        target,
        t0 + 20_000,
        &[("/checkout", true), ("/checkin", false)],
    )
    .await;
    dispatch(store, &client, &ctx, t0 + 20_000).await.unwrap();
    assert!(got.lock().unwrap().is_empty());

    // The /checkout silence is expired while the alert fires: notified at the next flush.
    assert_eq!(
        app.delete(&format!("/api/v1/silences/{muted}"))
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let now = harrier::now_ms().max(t0 + 30_000);
    tick(&app, target, now, &[("/checkout", true)]).await;
    dispatch(store, &client, &ctx, now).await.unwrap();
    let msgs = got.lock().unwrap().clone();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert_eq!(msgs[0]["status"], "firing");
    let alerts = msgs[0]["alerts"].as_array().unwrap();
    assert_eq!(alerts.len(), 1, "the silenced /checkin is left out");
    assert_eq!(alerts[0]["labels"]["route"], "/checkout");

    // Resolves: one resolved message, nothing after.
    tick(&app, target, now + 20_000, &[("/checkout", false)]).await;
    dispatch(store, &client, &ctx, now + 20_000).await.unwrap();
    dispatch(store, &client, &ctx, now + 40_000).await.unwrap();
    let msgs = got.lock().unwrap().clone();
    let statuses: Vec<&str> = msgs.iter().map(|m| m["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["firing", "resolved"]);
}

/// Grouping: two alerts of one rule within group_wait go out as one message with both;
/// an alert joining the notified group waits for group_interval; an unchanged group is
/// sent again after repeat_interval; channel matchers pick the alerts.
#[tokio::test]
async fn alerts_are_grouped_with_alertmanager_timing() {
    let app = spawn_app().await;
    let store = &app.state.store;
    let target = add_target(&app).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    r["window"] = json!("10s");
    send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
    let (url, got) = receiver(0).await;
    let (other_url, other) = receiver(0).await;
    let mut ops = quick("ops", &url);
    ops.group_wait = Duration(30_000);
    ops.group_interval = Duration(60_000);
    ops.repeat_interval = Duration(600_000);
    let mut critical = quick("critical", &other_url);
    critical.matchers = vec!["severity=critical".into()];
    let ctx = ctx(vec![ops, critical]);
    let client = notify_client();
    let sent = |at: i64| {
        let (client, ctx) = (&client, &ctx);
        async move { dispatch(store, client, ctx, at).await.unwrap().sent }
    };

    let t0 = 1_800_000_000_000;
    tick(&app, target, t0, &[("/checkout", true)]).await;
    assert_eq!(sent(t0).await, 0, "group_wait");
    tick(
        &app,
        target,
        t0 + 15_000,
        &[("/checkout", true), ("/checkin", true)],
    )
    .await;
    assert_eq!(sent(t0 + 15_000).await, 0);
    assert_eq!(sent(t0 + 30_000).await, 1, "group_wait over");
    let msgs = got.lock().unwrap().clone();
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    assert_eq!(m["alerts"].as_array().unwrap().len(), 2);
    assert_eq!(m["groupLabels"], json!({"alertname": "CheckoutErrors"}));
    assert_eq!(m["groupKey"], "{}:{alertname=\"CheckoutErrors\"}");
    assert_eq!(m["commonLabels"]["alertname"], "CheckoutErrors");
    assert_eq!(m["commonLabels"]["service"], "orders");
    assert!(m["commonLabels"].get("route").is_none(), "routes differ");
    assert_eq!(m["truncatedAlerts"], 0);
    let fixture: Value =
        serde_json::from_slice(&fixture("alertmanager/alertmanager-webhook.json")).unwrap();
    assert_eq!(keys(m), keys(&fixture));

    // A third alert joins the notified group: sent at the next group_interval tick.
    tick(
        &app,
        target,
        t0 + 45_000,
        &[("/checkout", true), ("/checkin", true), ("/checkup", true)],
    )
    .await;
    assert_eq!(sent(t0 + 45_000).await, 0);
    assert_eq!(sent(t0 + 90_000).await, 1);
    assert_eq!(
        got.lock().unwrap()[1]["alerts"].as_array().unwrap().len(),
        3
    );
    // Unchanged: nothing until repeat_interval (10 min after the last message).
    assert_eq!(sent(t0 + 150_000).await, 0);
    assert_eq!(sent(t0 + 630_000).await, 0);
    assert_eq!(sent(t0 + 690_000).await, 0, "exactly 10 min: not yet");
    assert_eq!(sent(t0 + 750_000).await, 1, "repeat_interval");
    assert_eq!(got.lock().unwrap().len(), 3);
    assert!(other.lock().unwrap().is_empty(), "severity=critical only");

    // One resolves: one message with it resolved and the other two still firing.
    tick(
        &app,
        target,
        t0 + 760_000,
        &[("/checkout", false), ("/checkin", true), ("/checkup", true)],
    )
    .await;
    assert_eq!(sent(t0 + 780_000).await, 0, "waits for group_interval");
    assert_eq!(sent(t0 + 810_000).await, 1);
    let last = got.lock().unwrap().last().unwrap().clone();
    let statuses: Vec<&str> = last["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses.iter().filter(|s| **s == "resolved").count(), 1);
    assert_eq!(statuses.iter().filter(|s| **s == "firing").count(), 2);
    assert_eq!(last["status"], "firing");
    // and the resolved one is not in the next message
    assert_eq!(sent(t0 + 870_000).await, 0);
}

/// A `prometheus-alertmanager` process on a free loopback port, killed on drop.
struct Alertmanager {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const ALERTMANAGER: &str = "/usr/bin/prometheus-alertmanager";

/// Starts Alertmanager with a minimal configuration (one receiver that sends nowhere),
/// clustering off, storage in a temporary directory; `None` (with a notice) when the
/// binary is absent outside CI.
async fn start_alertmanager() -> Option<Alertmanager> {
    if !std::path::Path::new(ALERTMANAGER).exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{ALERTMANAGER} is missing (scripts/test.sh installs prometheus-alertmanager)"
        );
        skip(
            Kind::Tool,
            &format!("{ALERTMANAGER} not installed (apt-get install prometheus-alertmanager)"),
        );
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("alertmanager.yml");
    std::fs::write(
        &config,
        "route:\n  receiver: nowhere\n  group_wait: 1s\nreceivers:\n  - name: nowhere\n",
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(ALERTMANAGER)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .arg("--log.level=warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let am = Alertmanager {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let client = reqwest::Client::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(r) = client.get(format!("{}/-/ready", am.url)).send().await
            && r.status().is_success()
        {
            return Some(am);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Alertmanager not ready on {} within 30 s",
            am.url
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// A real Alertmanager gets harrier's alert through an `alertmanager` channel and shows
/// it in its own API with harrier's labels and annotations; once resolved it is no
/// longer active there.
#[tokio::test]
async fn a_real_alertmanager_receives_and_resolves_harriers_alerts() {
    let Some(am) = start_alertmanager().await else {
        return;
    };
    let app = spawn_app().await;
    let store = &app.state.store;
    let target = add_target(&app).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    r["window"] = json!("10s");
    let created = send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let ctx = ctx(vec![ChannelSpec::new("am", "alertmanager", &am.url)]);
    let client = reqwest::Client::new();
    let am_alerts = || {
        let client = &client;
        let url = format!("{}/api/v2/alerts", am.url);
        async move {
            let v: Value = client.get(url).send().await.unwrap().json().await.unwrap();
            v.as_array().unwrap().clone()
        }
    };

    // Fired half a minute ago, so that the clean figures below fill the whole window.
    let t = harrier::now_ms() - 30_000;
    tick(&app, target, t, &[("/checkout", true)]).await;
    let d = dispatch(store, &notify_client(), &ctx, harrier::now_ms())
        .await
        .unwrap();
    assert_eq!(
        d.sent,
        1,
        "{d:?} {:?}",
        store.alert_deliveries(5).await.unwrap()
    );
    let listed = am_alerts().await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let a = &listed[0];
    assert_eq!(a["labels"]["alertname"], "CheckoutErrors");
    assert_eq!(a["labels"]["route"], "/checkout");
    assert_eq!(a["labels"]["service"], "orders");
    assert_eq!(a["labels"]["severity"], "page");
    assert_eq!(a["annotations"]["summary"], "Route /checkout 30 % errors");
    assert_eq!(a["status"]["state"], "active");
    assert!(
        a["generatorURL"]
            .as_str()
            .unwrap()
            .ends_with("/api/v1/alert-rules/CheckoutErrors")
    );

    // Resolved: sent with endsAt = the resolution time; Alertmanager drops it from the
    // active alerts.
    let t = harrier::now_ms();
    tick(&app, target, t, &[("/checkout", false)]).await;
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let d = dispatch(store, &notify_client(), &ctx, harrier::now_ms())
        .await
        .unwrap();
    assert_eq!(d.sent, 1, "{d:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let active: Vec<Value> = am_alerts()
            .await
            .into_iter()
            .filter(|a| a["status"]["state"] == "active")
            .collect();
        if active.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still active in Alertmanager: {active:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// One second of a k6 stream for scenario (`testid`) `scenario`: 10 requests, `failed`
/// of them failing.
pub(crate) fn k6_second(scenario: &str, t0: i64, second: i64, failed: i64) -> String {
    let mut out = String::new();
    for i in 0..10 {
        let end_ms = t0 + second * 1000 + 50 + i * 90;
        let (ok, status) = if i < failed {
            ("false", "503")
        } else {
            ("true", "200")
        };
        let ns = end_ms * 1_000_000;
        out.push_str(&format!(
            "http_reqs,expected_response={ok},method=GET,name=GET\\ /items,status={status},testid={scenario} value=1 {ns}\n\
             http_req_duration,expected_response={ok},method=GET,name=GET\\ /items,status={status},testid={scenario} value={}.5 {ns}\n",
            30 + i
        ));
    }
    out
}

/// A scenario rule watches live runs: the run whose error % jumps is marked failed by
/// the rule when its alert fires (visible in `GET /api/v1/runs/{id}` and on the run
/// page); a healthy live run of the same scenario family is not.
#[tokio::test]
async fn a_live_run_whose_errors_jump_is_failed_by_the_rule() {
    use harrier::sources::ingest::influx::Precision;
    let app = spawn_app().await;
    let store = &app.state.store;
    let rule = json!({
        "name": "LiveRunErrors",
        "subject": {"scenario": "*-k6"},
        "measure": "error_pct",
        "comparison": ">",
        "threshold": 5,
        "window": "10s",
        "for": "5s",
        "severity": "critical",
        "summary": "Run {{ labels.run_name }} at {{ value }} % errors"
    });
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &rule).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let mut wrong = rule.clone();
    wrong["name"] = json!("Wrong");
    wrong["measure"] = json!("target_down");
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &wrong).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json()["error"].as_str().unwrap().contains("measure"));

    let live = &app.state.live_runs;
    let t0 = 1_800_000_000_000;
    let mut ids = (0, 0);
    let stream = |second: i64, bad: i64| {
        let live = live.clone();
        async move {
            let mut body = k6_second("checkout-k6", t0, second, bad);
            body.push_str(&k6_second("browse-k6", t0, second, 0));
            let out = live.write(&body, Precision::Ns, "k6").await.unwrap();
            live.tick().await;
            out.run_ids
        }
    };
    for s in 0..10 {
        let got = stream(s, 0).await;
        ids = (got[0], got[1]);
    }
    let (checkout, browse) = ids;
    let round = evaluate_once(store, &app.state.hub, t0 + 10_000)
        .await
        .unwrap();
    assert!(round.transitions.is_empty(), "{:?}", round.transitions);

    // Errors jump to 50 % on checkout-k6.
    for s in 10..15 {
        stream(s, 5).await;
    }
    evaluate_once(store, &app.state.hub, t0 + 15_000)
        .await
        .unwrap();
    let alerts = app.get("/api/v1/alerts").await.json();
    assert_eq!(alerts.as_array().unwrap().len(), 1, "{alerts}");
    assert_eq!(alerts[0]["state"], "pending");
    assert_eq!(alerts[0]["labels"]["run"], checkout.to_string());
    assert_eq!(alerts[0]["labels"]["scenario"], "checkout-k6");
    assert_eq!(
        alerts[0]["value"], 25.0,
        "25 of 100 requests in the last 10 s: {alerts}"
    );
    let run = app.get(&format!("/api/v1/runs/{checkout}")).await.json();
    assert_eq!(run["status"], "live", "pending does not fail the run");
    assert_eq!(run["failed_by"], Value::Null);

    for s in 15..21 {
        stream(s, 5).await;
    }
    evaluate_once(store, &app.state.hub, t0 + 21_000)
        .await
        .unwrap();
    let run = app.get(&format!("/api/v1/runs/{checkout}")).await.json();
    assert_eq!(run["status"], "failed");
    assert_eq!(run["failed_by"]["rule"], "LiveRunErrors");
    assert_eq!(run["failed_by"]["at_ms"], t0 + 21_000);
    assert_eq!(run["failed_by"]["value"], 50.0);
    let healthy = app.get(&format!("/api/v1/runs/{browse}")).await.json();
    assert_eq!(healthy["status"], "live");
    assert_eq!(healthy["failed_by"], Value::Null);

    let page = app.get(&format!("/console/runs/{checkout}")).await;
    let banner = crate::helpers::select_texts(&page.html(), "#run-failed");
    assert_eq!(banner.len(), 1, "{}", page.text());
    assert!(banner[0].contains("LiveRunErrors"), "{}", banner[0]);
    let page = app.get(&format!("/console/runs/{browse}")).await;
    assert!(crate::helpers::select_texts(&page.html(), "#run-failed").is_empty());
}

/// The evaluator's one-pass figures over several windows equal the per-window figures of
/// `GET /api/v1/routes?window=` (sums, max, latest inflight, buckets, and the last
/// interval of a route scraped less often than the window).
#[tokio::test]
async fn window_figures_in_one_pass_equal_route_figures() {
    use harrier::store::WindowNeed;
    let app = spawn_app().await;
    let store = &app.state.store;
    let target = add_target(&app).await;
    let t0 = 1_800_000_000_000;
    for k in 0..30i64 {
        let mut writes = vec![
            write("/a", interval(100.0 + k as f64, (k % 7) as f64)),
            write("/b", interval(10.0, 1.0)),
        ];
        writes[0].interval.as_mut().unwrap().inflight = Some(k as f64);
        writes[0].interval.as_mut().unwrap().max_s = Some(0.01 * (k % 5) as f64);
        if k % 2 == 1 {
            writes.pop(); // /b missing every other scrape
        }
        scrape(&app, target, t0 + k * 15_000, &writes).await;
    }
    // /c: one old interval only (scraped every 2 min)
    let mut slow = interval(50.0, 5.0);
    slow.interval_ms = 120_000;
    scrape(&app, target, t0 + 380_000, &[write("/c", slow)]).await;
    let now = t0 + 29 * 15_000 + 5_000;
    let needs = [
        WindowNeed {
            window_ms: 60_000,
            buckets: true,
            inflight: true,
        },
        WindowNeed {
            window_ms: 300_000,
            buckets: true,
            inflight: true,
        },
        WindowNeed {
            window_ms: 30_000,
            buckets: false,
            inflight: false,
        },
    ];
    // Both paths: SQLite, and the intervals held in memory (loaded on first use).
    for got in [
        store.route_window_figures_sql(&needs, now).await.unwrap(),
        store.route_window_figures(&needs, now).await.unwrap(),
    ] {
        assert_eq!(got.routes.len(), 3);
        for n in &needs {
            let want = store.route_figures(None, n.window_ms, now).await.unwrap();
            for ((info, mut w), g) in want.into_iter().zip(&got.figures[&n.window_ms]) {
                if !n.buckets {
                    w.buckets.clear();
                }
                if !n.inflight {
                    w.inflight = g.inflight;
                }
                assert_figures_eq(g, &w, &format!("{} over {} ms", info.route, n.window_ms));
            }
        }
        assert!(
            got.figures[&30_000][2].exchanges.is_some(),
            "/c keeps its last interval"
        );
    }
    // PostgreSQL holds no intervals in memory (another replica may write): always SQL.
    assert_eq!(
        store
            .route_window_figures(&needs, now)
            .await
            .unwrap()
            .from_memory,
        !crate::helpers::on_postgres()
    );
}

/// `got` equals `want`, sums to rounding (SQLite adds in another order).
fn assert_figures_eq(
    got: &harrier::domain::routes::Figures,
    want: &harrier::domain::routes::Figures,
    what: &str,
) {
    let mut want = want.clone();
    for (g, w, field) in [
        (got.exchanges, &mut want.exchanges, "exchanges"),
        (got.failed, &mut want.failed, "failed"),
        (
            got.duration_sum_s,
            &mut want.duration_sum_s,
            "duration_sum_s",
        ),
        (
            got.duration_count,
            &mut want.duration_count,
            "duration_count",
        ),
    ] {
        if let (Some(a), Some(b)) = (g, *w) {
            crate::helpers::assert_close(a, b, &format!("{what}: {field}"));
            *w = g;
        }
    }
    for ((_, g), (_, w)) in got.buckets.iter().zip(want.buckets.iter_mut()) {
        crate::helpers::assert_close(*g, *w, &format!("{what}: bucket"));
        *w = *g;
    }
    assert_eq!(got, &want, "{what}");
}

/// The route intervals held in memory for the alert evaluator answer exactly as SQLite
/// does through what changes them: scrapes after the load (a new route, a late scrape, a
/// rewrite of the same time, NaN and missing readings), a new target, a target down, a
/// percentile window after a load without buckets, a deleted target and retention; and
/// SQLite answers when memory cannot (a window over 15 min, an evaluation time before the
/// newest data).
#[tokio::test]
async fn route_windows_from_memory_equal_sqlite() {
    use harrier::store::{Retention, WindowNeed};
    let (store, _, _dir) = crate::helpers::fresh_store().await;
    let spec = |name: &str, labels: &[(&str, &str)]| TargetSpec {
        name: name.into(),
        url: format!("http://{name}:9100/metrics").into(),
        kind: "prometheus".into(),
        interval_s: 15.0,
        timeout_s: 5.0,
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let a = store
        .upsert_target(&spec("orders", &[("instance", "orders-1")]), "api", 0)
        .await
        .unwrap()
        .id;
    let write_at = |target: i64, at: i64, up: bool, routes: Vec<RouteWrite>| {
        let store = store.clone();
        async move {
            let status = ScrapeStatus {
                at_ms: at,
                up,
                duration_ms: 1.0,
                samples: 10,
                error: None,
            };
            store.record_scrape(target, &status, &routes).await.unwrap();
        }
    };
    let varied = |k: i64| {
        let mut iv = interval(100.0 + k as f64, (k % 7) as f64);
        iv.duration_sum_s = Some(0.37 * k as f64 + 0.013);
        iv.inflight = (k % 3 != 0).then_some(k as f64);
        iv.max_s = if k % 4 == 0 {
            Some(f64::NAN)
        } else {
            Some(0.01 * k as f64)
        };
        iv.buckets = vec![
            (0.05, 10.0 + k as f64),
            (0.5, 60.0 + k as f64),
            (f64::INFINITY, 100.0 + k as f64),
        ];
        iv
    };
    let t0 = 1_800_000_000_000;
    for k in 0..30 {
        let mut routes = vec![write("/a", varied(k)), write("/b", interval(10.0, 1.0))];
        if k % 2 == 1 {
            routes.pop();
        }
        if k == 3 {
            let mut pod = write("/a", varied(k));
            pod.instance = "pod-7".into();
            routes.push(pod);
        }
        write_at(a, t0 + k * 15_000, true, routes).await;
    }
    let sums = |w: i64| WindowNeed {
        window_ms: w,
        buckets: false,
        inflight: false,
    };
    let all = |w: i64| WindowNeed {
        window_ms: w,
        buckets: true,
        inflight: true,
    };
    let check = |needs: Vec<WindowNeed>, now: i64, memory: bool, what: &'static str| {
        let store = store.clone();
        async move {
            let got = store.route_window_figures(&needs, now).await.unwrap();
            let want = store.route_window_figures_sql(&needs, now).await.unwrap();
            // PostgreSQL holds no intervals in memory: every round reads the database.
            let memory = memory && !crate::helpers::on_postgres();
            assert_eq!(got.from_memory, memory, "{what}: answered from memory");
            assert_eq!(got.routes, want.routes, "{what}: routes");
            assert_eq!(got.target_up, want.target_up, "{what}: targets up");
            for n in &needs {
                for ((s, g), w) in got
                    .routes
                    .iter()
                    .zip(&got.figures[&n.window_ms])
                    .zip(&want.figures[&n.window_ms])
                {
                    let label =
                        format!("{what}: {} {} over {} ms", s.route, s.instance, n.window_ms);
                    assert_figures_eq(g, w, &label);
                }
            }
            got
        }
    };
    let mut now = t0 + 29 * 15_000 + 5_000;
    // First use loads (sums only), then answers from memory.
    let got = check(
        vec![sums(60_000), sums(300_000), sums(30_000)],
        now,
        true,
        "load",
    )
    .await;
    assert_eq!(got.routes.len(), 3);
    assert!(got.figures[&300_000][0].exchanges.unwrap() > 0.0);
    // A percentile window: reloaded with buckets.
    check(vec![all(60_000), sums(300_000)], now, true, "buckets").await;
    // Scrapes after the load: a new route (first without, then with an interval), a NaN
    // reading, a late scrape, a rewrite of the same time.
    let mut fresh = write("/new", interval(5.0, 5.0));
    fresh.interval = None;
    write_at(
        a,
        now + 10_000,
        true,
        vec![write("/a", varied(40)), fresh.clone()],
    )
    .await;
    let mut nan = varied(41);
    nan.exchanges = Some(f64::NAN);
    nan.failed = None;
    fresh.interval = Some(interval(7.0, 7.0));
    // /nan: its only interval has a NaN count, no failed count, an infinite max and a
    // NaN bucket (SQLite keeps none of these).
    let mut only_nan = interval(1.0, 0.0);
    only_nan.exchanges = Some(f64::NAN);
    only_nan.failed = None;
    only_nan.max_s = Some(f64::INFINITY);
    only_nan.inflight = Some(f64::NAN);
    only_nan.buckets = vec![(0.1, f64::NAN), (f64::INFINITY, 1.0)];
    write_at(
        a,
        now + 25_000,
        true,
        vec![write("/a", nan), fresh, write("/nan", only_nan)],
    )
    .await;
    write_at(a, now + 2_000, true, vec![write("/b", interval(33.0, 3.0))]).await;
    write_at(a, now + 10_000, true, vec![write("/a", varied(42))]).await;
    now += 26_000;
    check(
        vec![all(60_000), sums(300_000), sums(30_000)],
        now,
        true,
        "pushes",
    )
    .await;
    // A second target: its first scrape makes memory reload.
    let b = store
        .upsert_target(&spec("billing", &[]), "api", 0)
        .await
        .unwrap()
        .id;
    write_at(b, now + 1_000, true, vec![write("/pay", varied(3))]).await;
    write_at(b, now + 16_000, true, vec![write("/pay", varied(4))]).await;
    now += 20_000;
    check(vec![all(60_000), sums(300_000)], now, true, "new target").await;
    // Its target down (no routes); windows moving on.
    write_at(b, now + 1_000, false, vec![]).await;
    for k in 0..12 {
        write_at(
            a,
            now + 5_000 + k * 15_000,
            true,
            vec![write("/a", varied(50 + k))],
        )
        .await;
    }
    now += 5_000 + 12 * 15_000;
    let got = check(vec![all(60_000), sums(120_000)], now, true, "target down").await;
    assert!(got.target_up.contains(&Some(false)));
    // SQLite answers: a window over 15 min; an evaluation time before the newest data.
    // (PostgreSQL holds nothing in memory: `recent_intervals_held` is always `None` there.)
    let pg = crate::helpers::on_postgres();
    assert!(pg || store.recent_intervals_held().is_some());
    check(vec![sums(20 * 60_000)], now, false, "long window").await;
    assert_eq!(
        store.recent_intervals_held().is_some(),
        !pg,
        "a window over 15 min is read from SQLite; memory keeps what it held"
    );
    check(vec![sums(60_000)], now - 60_000, false, "in the past").await;
    // Deleting a target drops its routes.
    assert!(store.delete_target(b).await.unwrap());
    let got = check(
        vec![all(60_000), sums(300_000)],
        now,
        true,
        "deleted target",
    )
    .await;
    assert!(got.routes.iter().all(|s| s.target_id == a));
    // Retention deleting intervals inside the window.
    let retention = Retention {
        raw_hours: 100.0 / 3_600.0,
        ..Retention::default()
    };
    store.prune_routes(now, &retention).await.unwrap();
    check(vec![all(300_000), sums(60_000)], now, true, "pruned").await;
    // No route rule: nothing held.
    let none = store.route_window_figures(&[], now).await.unwrap();
    assert!(none.routes.is_empty() && store.recent_intervals_held().is_none());
}

/// The route rows (live feed, routes table, Overview) summed from the intervals held in
/// memory equal the same figures summed from the stored samples, at every step of a
/// history with a counter reset, a gap (target down, then back), a route that skips
/// scrapes, a new route after the load, a target scraped less often than the window is
/// long, and windows of 10 s, 1 min and 5 min; after a restart (a second store on the same
/// file, its memory empty) the windows rebuilt once from the store are the same again.
#[tokio::test]
async fn route_rows_from_memory_equal_the_stored_samples_over_resets_gaps_and_a_restart() {
    use harrier::store::{IntervalScope, Store};
    let (store, config, _dir) = crate::helpers::fresh_store().await;
    let pg = crate::helpers::on_postgres();
    let spec = |name: &str, interval_s: f64| TargetSpec {
        name: name.into(),
        url: format!("http://{name}:9100/metrics").into(),
        kind: "prometheus".into(),
        interval_s,
        timeout_s: 1.0,
        labels: Default::default(),
    };
    let fast = store
        .upsert_target(&spec("fast", 1.0), "api", 0)
        .await
        .unwrap()
        .id;
    let slow = store
        .upsert_target(&spec("slow", 120.0), "api", 0)
        .await
        .unwrap()
        .id;
    let scrape = |target: i64, at: i64, up: bool, routes: Vec<RouteWrite>| {
        let store = store.clone();
        async move {
            let status = ScrapeStatus {
                at_ms: at,
                up,
                duration_ms: 1.0,
                samples: 10,
                error: None,
            };
            store.record_scrape(target, &status, &routes).await.unwrap();
        }
    };
    // An interval of `ms` with figures that vary with `k`.
    let varied = |k: i64, ms: i64| {
        let mut iv = interval(3.0 + (k % 5) as f64, (k % 3) as f64);
        iv.interval_ms = ms;
        iv.duration_sum_s = Some(0.011 * k as f64 + 0.002);
        iv.max_s = Some(0.001 * (k % 11) as f64);
        iv.inflight = (k % 4 != 0).then_some((k % 6) as f64);
        iv.buckets = vec![
            (0.005, (k % 2) as f64),
            (0.05, 2.0 + (k % 3) as f64),
            (f64::INFINITY, 3.0 + (k % 5) as f64),
        ];
        iv
    };
    let compare = |now: i64, what: String| {
        let store = store.clone();
        async move {
            // The routes with their targets: from memory once held, as SQLite reads them.
            let infos = store.route_infos(None, None).await.unwrap();
            let sql = store.route_infos_sql(None, None).await.unwrap();
            assert_eq!(infos, sql, "{what}: route infos");
            for target in [fast, slow] {
                let of = store.route_infos(Some(target), None).await.unwrap();
                let sql = store.route_infos_sql(Some(target), None).await.unwrap();
                assert_eq!(of, sql, "{what}: route infos of target {target}");
            }
            for i in &infos {
                let one = store.route_infos(None, Some(i.id)).await.unwrap();
                assert_eq!(one, std::slice::from_ref(i), "{what}: route {}", i.id);
                let other = if i.target_id == fast { slow } else { fast };
                assert!(
                    store
                        .route_infos(Some(other), Some(i.id))
                        .await
                        .unwrap()
                        .is_empty()
                );
            }
            for window in [10_000, 60_000, 300_000] {
                let got = store.route_figures(None, window, now).await.unwrap();
                let infos = store.route_infos(None, None).await.unwrap();
                let want = store
                    .figures_of_sql(infos, IntervalScope::All, window, now)
                    .await
                    .unwrap();
                assert_eq!(got.len(), want.len(), "{what}: routes");
                for ((gi, g), (wi, w)) in got.iter().zip(&want) {
                    assert_eq!(gi.id, wi.id, "{what}: route order");
                    assert_figures_eq(g, w, &format!("{what}: {} over {window} ms", gi.route));
                }
                // Every route of this history has figures in the 5 min window.
                if window == 300_000 {
                    assert!(got.iter().all(|(_, f)| f.intervals > 0), "{what}: {got:?}");
                }
            }
        }
    };
    let t0 = 1_900_000_000_000;
    let mut k = 0;
    // 200 s of 1 s scrapes: /a every time, /b every third, a reset at 50 s, the target
    // down from 120 s to 140 s (no intervals), /c new from 160 s; /slow every 90 s
    // (its target's interval is 120 s).
    for s in 0..200 {
        let at = t0 + s * 1_000;
        if (120..140).contains(&s) {
            scrape(fast, at, false, vec![]).await;
            continue;
        }
        let mut a = varied(k, 1_000);
        if s == 50 {
            a.resets = 1;
        }
        let mut routes = vec![write("/a", a)];
        if s % 3 == 0 {
            routes.push(write("/b", varied(k + 1, 3_000)));
        }
        if s == 140 {
            // Back after the gap: the first scrape has nothing to subtract from.
            routes[0].interval = None;
        }
        if s >= 160 {
            // A route with an instance of its own and labels.
            let mut c = write("/c", varied(k + 2, 1_000));
            c.instance = "pod-1:8080".into();
            c.labels.insert("camel_context".into(), "ctx-1".into());
            routes.push(c);
        }
        // The route's state as its source says, and its own last-exchange time.
        routes[0].state = Some(if s % 4 < 2 { "Started" } else { "Suspended" }.into());
        if s % 7 == 0 {
            routes[0].last_exchange_ms = Some(at - 300);
        }
        if s % 45 == 0 {
            // The same route twice in one scrape: the last one's state, the latest exchange.
            let mut twice = routes[0].clone();
            twice.state = Some("Stopped".into());
            twice.interval = None;
            twice.last_exchange_ms = None;
            routes.push(twice);
        }
        scrape(fast, at, true, routes).await;
        if s % 90 == 0 {
            scrape(slow, at, true, vec![write("/slow", varied(k, 90_000))]).await;
        }
        k += 1;
        if s == 100 {
            compare(at + 500, "first use loads".into()).await;
            assert_eq!(
                store.recent_intervals_held().is_some(),
                !pg,
                "held after use"
            );
        }
        if s % 37 == 0 && s > 100 {
            compare(at + 200, format!("after scrape {s}")).await;
        }
        if s == 150 {
            // A target changed other than by a scrape: what is held is loaded again.
            let mut changed = spec("slow", 120.0);
            changed
                .labels
                .insert("instance".into(), "slow-host:9100".into());
            store.upsert_target(&changed, "api", 0).await.unwrap();
            compare(at + 300, "after a target changed".into()).await;
        }
    }
    let end = t0 + 200_000;
    compare(end, "the end".into()).await;
    if !pg {
        // The routes were answered from memory: a change made behind the store's back is
        // not seen until memory is loaded again.
        crate::helpers::exec_raw(&store, "UPDATE routes SET state = 'Behind'").await;
        let held = store.route_infos(None, None).await.unwrap();
        assert!(held.iter().all(|i| i.state.as_deref() != Some("Behind")));
        let sql = store.route_infos_sql(None, None).await.unwrap();
        assert!(sql.iter().all(|i| i.state.as_deref() == Some("Behind")));
        crate::helpers::exec_raw(&store, "UPDATE routes SET state = NULL").await;
        let mut fixed = spec("slow", 120.0);
        fixed
            .labels
            .insert("instance".into(), "slow-host:9100".into());
        fixed.timeout_s = 2.0;
        store.upsert_target(&fixed, "api", 0).await.unwrap();
        compare(end, "after reloading".into()).await;
    }
    // A route rows ask keeps memory held although the evaluator has no route rule.
    let none = store.route_window_figures(&[], end).await.unwrap();
    assert!(none.routes.is_empty());
    assert_eq!(
        store.recent_intervals_held().is_some(),
        !pg,
        "rows still held"
    );
    let before = store.route_figures(None, 60_000, end).await.unwrap();
    // A restart: a second store on the same file starts with nothing held and rebuilds
    // the windows once from the store.
    let again = Store::connect(&config.database()).await.expect("reopen");
    assert!(again.recent_intervals_held().is_none());
    let after = again.route_figures(None, 60_000, end).await.unwrap();
    assert_eq!(again.recent_intervals_held().is_some(), !pg, "rebuilt");
    assert_eq!(before.len(), after.len());
    for ((bi, b), (_, a)) in before.iter().zip(&after) {
        assert_figures_eq(a, b, &format!("{} after the restart", bi.route));
    }
    // Nothing asked for 15 min: the next scrape drops what was held.
    let later = end + 16 * 60_000;
    scrape(fast, later, true, vec![write("/a", varied(1, 1_000))]).await;
    assert!(
        store.recent_intervals_held().is_none(),
        "dropped when unused"
    );
}

/// An alertmanager channel is sent the firing alerts again every minute (Prometheus'
/// resend delay) with `endsAt` 4 × max(evaluation interval, 1 min) ahead, and the resolved
/// alert once with its resolution time; a silenced alert is not sent.
#[tokio::test]
async fn alertmanager_channels_get_firing_alerts_every_minute() {
    let app = spawn_app().await;
    let store = &app.state.store;
    let target = add_target(&app).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    r["window"] = json!("10s");
    send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
    let (base, got) = receiver_at("/api/v2/alerts", 0).await;
    let ctx = ctx(vec![ChannelSpec::new("am", "alertmanager", &base)]);
    let client = notify_client();
    let sent = |at: i64| {
        let (client, ctx) = (&client, &ctx);
        async move { dispatch(store, client, ctx, at).await.unwrap().sent }
    };
    let t0 = 1_800_000_000_000;
    tick(&app, target, t0, &[("/checkout", true)]).await;
    assert_eq!(sent(t0).await, 1, "pushed at once, no group_wait");
    assert_eq!(sent(t0 + 30_000).await, 0);
    tick(&app, target, t0 + 45_000, &[("/checkout", true)]).await;
    assert_eq!(sent(t0 + 60_000).await, 1, "re-sent after a minute");
    let msgs = got.lock().unwrap().clone();
    assert_eq!(msgs[0][0]["labels"]["alertname"], "CheckoutErrors");
    assert_eq!(msgs[0][0]["startsAt"], "2027-01-15T08:00:00.000Z");
    assert_eq!(
        msgs[0][0]["endsAt"], "2027-01-15T08:04:00.000Z",
        "4 × max(15 s, 1 min) ahead"
    );
    assert_eq!(msgs[1][0]["endsAt"], "2027-01-15T08:05:00.000Z");
    tick(&app, target, t0 + 90_000, &[("/checkout", false)]).await;
    assert_eq!(sent(t0 + 90_000).await, 1, "resolved: at once");
    let last = got.lock().unwrap().last().unwrap().clone();
    assert_eq!(last[0]["endsAt"], "2027-01-15T08:01:30.000Z");
    assert_eq!(sent(t0 + 200_000).await, 0, "nothing left to send");
}

/// A channel as the API takes it: a webhook with no group wait, grouped by every label.
fn channel(name: &str, url: &str) -> Value {
    json!({"name": name, "kind": "webhook", "url": url, "group_wait": "0s",
           "group_interval": "10s", "group_by": ["..."], "timeout_s": 5})
}

/// Polls `done` every 100 ms for up to 15 s.
async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

const SLACK_URL: &str = "https://hooks.slack.com/services/T0000/B0000/XXXXSECRETXXXX";

/// The alert-channels API: validation naming the field (400), names taken by a stored
/// channel or by one of harrier.toml (409), harrier.toml's channels read-only (409), a
/// Slack URL masked in every answer and kept by a PUT that sends it back masked or not at
/// all, renames, deletes.
#[tokio::test]
async fn alert_channels_api_round_trip() {
    let app = spawn_app_with(|c| {
        c.alerts.channels = vec![quick("file-ops", "http://127.0.0.1:9/hook")];
    })
    .await;
    let list = app.get("/api/v1/alert-channels").await.json();
    assert_eq!(
        list,
        json!([{
            "channel": serde_json::to_value(quick("file-ops", "http://127.0.0.1:9/hook")).unwrap(),
            "secret_set": true,
            "origin": "config", "updated_at_ms": null, "last_delivery": null
        }])
    );

    let bad = |body: Value, field: &'static str, says: &'static str| {
        let app = &app;
        async move {
            let r = send_json(app, "POST", "/api/v1/alert-channels", &body).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body}: {}", r.text());
            assert_eq!(r.json()["field"], field, "{body}: {}", r.text());
            let e = r.json()["error"].as_str().unwrap().to_string();
            assert!(e.contains(says), "{body}: {e} should say {says}");
        }
    };
    let mut body = channel("ops", "ftp://127.0.0.1:9/hook");
    bad(body.clone(), "url", "http://").await;
    body["url"] = json!("http://127.0.0.1:9/hook");
    body["kind"] = json!("email");
    bad(body.clone(), "kind", "email").await;
    body["kind"] = json!("webhook");
    body["group_wait"] = json!("2 weeks");
    bad(body.clone(), "group_wait", "2 weeks").await;
    body["group_wait"] = json!("0s");
    body["matchers"] = json!(["severity=~("]);
    bad(body.clone(), "matchers", "matchers[0]").await;
    body.as_object_mut().unwrap().remove("matchers");
    body.as_object_mut().unwrap().remove("url");
    bad(body.clone(), "url", "missing").await;
    bad(channel(" ops", "http://127.0.0.1:9/hook"), "name", "space").await;
    assert_eq!(
        app.get("/api/v1/alert-channels")
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1,
        "nothing stored while invalid"
    );

    let r = send_json(
        &app,
        "POST",
        "/api/v1/alert-channels",
        &channel("file-ops", "http://127.0.0.1:9/hook"),
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    assert_eq!(r.json()["field"], "name");
    assert!(r.text().contains("harrier.toml"), "{}", r.text());

    let mut slack = channel("chat", SLACK_URL);
    slack["kind"] = json!("slack");
    slack["matchers"] = json!(["severity=~\"critical|page\""]);
    let r = send_json(&app, "POST", "/api/v1/alert-channels", &slack).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    assert!(!r.text().contains("SECRET"), "{}", r.text());
    let created = r.json();
    assert_eq!(created["channel"]["url"], "https://hooks.slack.com/…");
    assert_eq!(
        created["channel"]["matchers"][0],
        "severity=~\"critical|page\""
    );
    assert_eq!(created["channel"]["group_wait"], "0s");
    assert_eq!(
        created["channel"]["repeat_interval"], "4h",
        "defaults filled in"
    );
    assert_eq!(created["origin"], "api");
    assert!(created["updated_at_ms"].as_i64().unwrap() > 0);
    assert_eq!(created["last_delivery"], Value::Null);
    let again = send_json(&app, "POST", "/api/v1/alert-channels", &slack).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert_eq!(again.json()["field"], "name");

    let list = app.get("/api/v1/alert-channels").await;
    assert!(!list.text().contains("SECRET"), "{}", list.text());
    let names: Vec<(String, String)> = list
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["channel"]["name"].as_str().unwrap().to_string(),
                v["origin"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("chat".into(), "api".into()),
            ("file-ops".into(), "config".into())
        ]
    );
    let one = app.get("/api/v1/alert-channels/chat").await;
    assert_eq!(one.status, StatusCode::OK);
    assert_eq!(one.json()["channel"]["url"], "https://hooks.slack.com/…");
    let stored_url = |app: &TestApp, name: &'static str| {
        let store = app.state.store.clone();
        async move {
            let url = store.get_channel(name).await.unwrap().unwrap().channel.url;
            url.expose().to_string()
        }
    };
    assert_eq!(stored_url(&app, "chat").await, SLACK_URL);

    // PUT with the masked URL, or none: the stored one is kept.
    let mut edit = one.json()["channel"].clone();
    edit["send_resolved"] = json!(false);
    let r = send_json(&app, "PUT", "/api/v1/alert-channels/chat", &edit).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["channel"]["send_resolved"], false);
    assert_eq!(stored_url(&app, "chat").await, SLACK_URL);
    edit.as_object_mut().unwrap().remove("url");
    edit["group_interval"] = json!("1m");
    let r = send_json(&app, "PUT", "/api/v1/alert-channels/chat", &edit).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["channel"]["group_interval"], "1m");
    assert_eq!(stored_url(&app, "chat").await, SLACK_URL);
    edit["url"] = json!("https://hooks.slack.com/services/T1/B1/NEW");
    send_json(&app, "PUT", "/api/v1/alert-channels/chat", &edit).await;
    assert_eq!(
        stored_url(&app, "chat").await,
        "https://hooks.slack.com/services/T1/B1/NEW"
    );
    edit["timeout_s"] = json!(0);
    let r = send_json(&app, "PUT", "/api/v1/alert-channels/chat", &edit).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["field"], "timeout_s");
    edit["timeout_s"] = json!(5);

    // Renames: not onto a name of harrier.toml; the old name is gone after.
    edit["name"] = json!("file-ops");
    let r = send_json(&app, "PUT", "/api/v1/alert-channels/chat", &edit).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    assert_eq!(r.json()["field"], "name");
    edit["name"] = json!("chat-eu");
    let r = send_json(&app, "PUT", "/api/v1/alert-channels/chat", &edit).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        app.get("/api/v1/alert-channels/chat").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        stored_url(&app, "chat-eu").await,
        "https://hooks.slack.com/services/T1/B1/NEW"
    );
    let r = send_json(&app, "PUT", "/api/v1/alert-channels/nope", &edit).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // harrier.toml's channel: read here, changed there.
    let r = send_json(
        &app,
        "PUT",
        "/api/v1/alert-channels/file-ops",
        &channel("file-ops", "http://127.0.0.1:9/hook"),
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(r.text().contains("harrier.toml"), "{}", r.text());
    let r = app.delete("/api/v1/alert-channels/file-ops").await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(r.text().contains("edit it there"), "{}", r.text());

    assert_eq!(
        app.delete("/api/v1/alert-channels/chat-eu").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.delete("/api/v1/alert-channels/chat-eu").await.status,
        StatusCode::NOT_FOUND
    );
    // any name works in the path, percent-encoded
    let r = send_json(
        &app,
        "POST",
        "/api/v1/alert-channels",
        &channel("team/ops #1", "http://127.0.0.1:9/hook"),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let r = app.get("/api/v1/alert-channels/team%2Fops%20%231").await;
    assert_eq!(r.json()["channel"]["name"], "team/ops #1", "{}", r.text());
    assert_eq!(
        app.delete("/api/v1/alert-channels/team%2Fops%20%231")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let r = send_json(&app, "POST", "/api/v1/alert-channels/nope/test", &json!({})).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(
        app.get("/api/v1/alert-channels")
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// With `harrier serve` running: a channel added through the API gets the next firing
/// notification (no restart), and once deleted it gets nothing more while a channel of
/// harrier.toml goes on getting them; its groups are dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_added_while_serving_gets_the_next_notification_and_none_once_deleted() {
    let (control_url, control) = receiver(0).await;
    let (late_url, late) = receiver(0).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    let mut control_channel = quick("control", &control_url);
    control_channel.group_by = vec!["...".into()];
    let app = spawn_app_with(|c| {
        c.self_scrape = false;
        c.alerts.evaluation_interval = Duration(1_000);
        c.alerts.builtin_rules = false;
        c.alerts.rules = vec![serde_json::from_value(r).unwrap()];
        c.alerts.channels = vec![control_channel];
    })
    .await;
    // (serve scrapes the stored targets: this one on loopback, where nothing answers)
    let spec = TargetSpec {
        name: "orders".into(),
        url: "http://127.0.0.1:9/metrics".into(),
        kind: "prometheus".into(),
        interval_s: 15.0,
        timeout_s: 5.0,
        labels: BTreeMap::new(),
    };
    let target = app
        .state
        .store
        .insert_target(&spec, "api", 0)
        .await
        .unwrap()
        .unwrap()
        .id;
    // stored before harrier.toml took the name: deleted when serving starts
    let stale = harrier::domain::alerts::channel::ChannelSpec::new("control", "webhook", &late_url);
    assert!(app.state.store.insert_channel(&stale, 0).await.unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let shutdown = app.state.shutdown.clone();
    let server = tokio::spawn(harrier::app::serve(
        listener,
        app.state.clone(),
        std::future::pending(),
    ));

    let added = send_json(
        &app,
        "POST",
        "/api/v1/alert-channels",
        &channel("late", &late_url),
    )
    .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.text());
    scrape(
        &app,
        target,
        harrier::now_ms(),
        &[write("/checkout", interval(100.0, 30.0))],
    )
    .await;
    wait_until("the channel added at run time to be notified", || {
        !late.lock().unwrap().is_empty()
    })
    .await;
    let msg = late.lock().unwrap()[0].clone();
    assert_eq!(msg["receiver"], "late");
    assert!(
        app.state
            .store
            .get_channel("control")
            .await
            .unwrap()
            .is_none(),
        "the stored channel named like harrier.toml's is gone"
    );
    assert_eq!(msg["status"], "firing");
    assert_eq!(msg["alerts"][0]["labels"]["route"], "/checkout");
    let listed = app.get("/api/v1/alert-channels/late").await.json();
    assert_eq!(listed["last_delivery"]["status"], 200, "{listed}");
    assert_eq!(listed["last_delivery"]["firing"], 1);

    assert_eq!(
        app.delete("/api/v1/alert-channels/late").await.status,
        StatusCode::NO_CONTENT
    );
    scrape(
        &app,
        target,
        harrier::now_ms(),
        &[write("/checkin", interval(100.0, 30.0))],
    )
    .await;
    wait_until("harrier.toml's channel to be told of /checkin", || {
        control
            .lock()
            .unwrap()
            .iter()
            .any(|m| m["alerts"][0]["labels"]["route"] == "/checkin")
    })
    .await;
    // one more dispatch pass (every second) for a message to the deleted channel to show
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    assert_eq!(
        late.lock().unwrap().len(),
        1,
        "a deleted channel gets nothing more"
    );
    let groups = app.state.store.due_groups(i64::MAX).await.unwrap();
    assert!(
        groups.iter().all(|g| g.channel == "control"),
        "the deleted channel's groups are dropped: {groups:?}"
    );
    assert!(!groups.is_empty());
    shutdown.cancel();
    server.await.unwrap().unwrap();
}

/// Channels added through the API are in SQLite: a new store over the same file lists
/// them and the dispatcher sends to them; one whose name harrier.toml took since gives way
/// to the file's.
#[tokio::test]
async fn stored_channels_survive_a_restart() {
    let (url, got) = receiver(0).await;
    let app = spawn_app().await;
    let mut body = channel("ops", &url);
    body["matchers"] = json!(["route=~\"/check.*\""]);
    let r = send_json(&app, "POST", "/api/v1/alert-channels", &body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let before = r.json();
    let r = send_json(
        &app,
        "POST",
        "/api/v1/alert-channels",
        &channel("ops-eu", "http://127.0.0.1:9/api-hook"),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let TestApp { state, _dir: dir } = app;
    let db = state.config.db.clone();
    let database_url = state.config.database_url.clone();
    if let Some(pool) = state.store.sqlite_pool() {
        pool.close().await;
    }
    drop(state);

    // "restart": a new store and state over the same database
    let database = database_url
        .clone()
        .unwrap_or(harrier::store::DatabaseUrl::Sqlite(db.clone()));
    let store = harrier::store::Store::connect(&database).await.unwrap();
    let app = TestApp {
        state: harrier::app::AppState::new(
            store,
            harrier::config::Config {
                db,
                database_url,
                alerts: harrier::domain::alerts::AlertsConfig {
                    // harrier.toml now has a channel of that name: the file's wins
                    channels: vec![quick("ops-eu", "http://127.0.0.1:9/file-hook")],
                    ..Default::default()
                },
                ..harrier::config::Config::default()
            },
        ),
        _dir: dir,
    };
    let listed = app.get("/api/v1/alert-channels").await.json();
    assert_eq!(listed[0], before, "the same channel, settings and all");
    assert_eq!(listed[1]["origin"], "config");
    // Write-only: the path of a webhook URL may be its token.
    assert_eq!(listed[1]["channel"]["url"], "http://127.0.0.1:9/…");
    assert_eq!(listed[1]["secret_set"], true);
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");

    let store = &app.state.store;
    let target = add_target(&app).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
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
    let file_channels = app.state.config.alerts.channels.clone();
    let sent = dispatch(
        store,
        &harrier::services::alerts::notify::client(&app.state.egress),
        &ctx(file_channels),
        t0 + 1_000,
    )
    .await
    .unwrap();
    assert_eq!((sent.sent, sent.failed), (1, 1), "{sent:?}");
    let msgs = got.lock().unwrap().clone();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["receiver"], "ops");
    assert_eq!(msgs[0]["alerts"][0]["labels"]["route"], "/checkout");
    let log = store.alert_deliveries(10).await.unwrap();
    let failed = log.iter().find(|d| d.channel == "ops-eu").unwrap();
    // The file's ops-eu is port 9, where nothing listens (its URL, write-only, is not in
    // the error); the stored one would have answered.
    let error = failed.error.as_deref().unwrap();
    assert!(
        failed.status.is_none() && error.contains("onnect") && !error.contains("file-hook"),
        "sent to the file's ops-eu, not the stored one: {failed:?}"
    );
}

/// `POST /api/v1/alert-channels/{name}/test` sends one message now in the channel's format
/// (webhook: a valid Alertmanager v4 payload; alertmanager: /api/v2/alerts with a short
/// endsAt; slack: a message), answers the receiver's status and logs the attempt; a Slack
/// URL stays out of the error of a failed send.
#[tokio::test]
async fn test_sends_reach_the_receiver_in_the_channels_format() {
    let (hook_url, hook) = receiver(0).await;
    let (broken_url, _) = receiver(usize::MAX).await;
    let app = spawn_app_with(|c| {
        c.alerts.channels = vec![quick("broken", &broken_url)];
        c.alerts.external_url = Some("http://harrier.test".into());
    })
    .await;
    let r = send_json(
        &app,
        "POST",
        "/api/v1/alert-channels",
        &channel("ops", &hook_url),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());

    let r = send_json(&app, "POST", "/api/v1/alert-channels/ops/test", &json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json(), json!({"status": 200, "error": null}));
    let msgs = hook.lock().unwrap().clone();
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    let fixture: Value = serde_json::from_slice(&fixture(
        "alertmanager/alertmanager-webhook-one-resolved.json",
    ))
    .unwrap();
    assert_eq!(keys(m), keys(&fixture));
    assert_eq!(keys(&m["alerts"][0]), keys(&fixture["alerts"][0]));
    assert_eq!(m["version"], "4");
    assert_eq!(m["receiver"], "ops");
    assert_eq!(m["status"], "firing");
    assert_eq!(m["groupKey"], "{}:{alertname=\"HarrierTest\"}");
    assert_eq!(m["externalURL"], "http://harrier.test");
    let a = &m["alerts"][0];
    assert_eq!(a["labels"]["alertname"], "HarrierTest");
    assert_eq!(a["status"], "firing");
    assert_eq!(a["endsAt"], "0001-01-01T00:00:00Z");
    assert!(
        a["annotations"]["summary"]
            .as_str()
            .unwrap()
            .contains("ops")
    );
    assert_eq!(a["fingerprint"].as_str().unwrap().len(), 16);
    let last = app.get("/api/v1/alert-channels/ops").await.json()["last_delivery"].clone();
    assert_eq!(
        (
            last["status"].clone(),
            last["error"].clone(),
            last["firing"].clone()
        ),
        (json!(200), Value::Null, json!(1))
    );

    // A receiver that refuses: its status and why, also in the list.
    let r = send_json(
        &app,
        "POST",
        "/api/v1/alert-channels/broken/test",
        &json!({}),
    )
    .await;
    assert_eq!(r.json()["status"], 500, "{}", r.text());
    assert!(
        r.json()["error"].as_str().unwrap().contains("500"),
        "{}",
        r.text()
    );
    let last = app.get("/api/v1/alert-channels/broken").await.json()["last_delivery"].clone();
    assert_eq!(last["status"], 500);
    assert_eq!(
        app.state.store.alert_deliveries(10).await.unwrap().len(),
        2,
        "both attempts logged"
    );

    // Alertmanager: its v2 API, one alert ending 5 minutes after it starts.
    let (am_base, am) = receiver_at("/api/v2/alerts", 0).await;
    let mut body = channel("am", &am_base);
    body["kind"] = json!("alertmanager");
    send_json(&app, "POST", "/api/v1/alert-channels", &body).await;
    let r = send_json(&app, "POST", "/api/v1/alert-channels/am/test", &json!({})).await;
    assert_eq!(r.json()["status"], 200, "{}", r.text());
    let posted = am.lock().unwrap()[0].clone();
    assert_eq!(posted[0]["labels"]["alertname"], "HarrierTest");
    let at = |k: &str| {
        time::OffsetDateTime::parse(
            posted[0][k].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap()
    };
    assert_eq!(at("endsAt") - at("startsAt"), time::Duration::minutes(5));

    // Slack: a message; a failed send does not tell the secret URL.
    let (slack_base, slack) = receiver_at("/services/T0/B0/SECRET", 0).await;
    let mut body = channel("chat", &format!("{slack_base}/services/T0/B0/SECRET"));
    body["kind"] = json!("slack");
    send_json(&app, "POST", "/api/v1/alert-channels", &body).await;
    let r = send_json(&app, "POST", "/api/v1/alert-channels/chat/test", &json!({})).await;
    assert_eq!(r.json()["status"], 200, "{}", r.text());
    assert_eq!(slack.lock().unwrap()[0]["text"], "[FIRING:1] HarrierTest");
    let mut body = channel("chat-down", "http://127.0.0.1:9/services/T0/B0/SECRET");
    body["kind"] = json!("slack");
    send_json(&app, "POST", "/api/v1/alert-channels", &body).await;
    let r = send_json(
        &app,
        "POST",
        "/api/v1/alert-channels/chat-down/test",
        &json!({}),
    )
    .await;
    assert_eq!(r.json()["status"], Value::Null, "{}", r.text());
    assert!(!r.json()["error"].as_str().unwrap().is_empty());
    assert!(!r.text().contains("SECRET"), "{}", r.text());
    assert!(
        !app.get("/api/v1/alert-channels")
            .await
            .text()
            .contains("SECRET"),
        "nor does the list"
    );
}

/// A child process killed when dropped (a failing test leaves nothing running).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// Runs `openssl` with `args` in `dir`; false when it is not installed (outside CI).
fn openssl(dir: &std::path::Path, args: &[&str]) -> bool {
    match std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            true
        }
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "openssl is missing ({e}); Debian: apt-get install openssl"
            );
            false
        }
    }
}

/// Channels reach receivers over HTTPS (a Slack incoming webhook is always https): the
/// real binary, trusting a test CA through `SSL_CERT_FILE`, sends a channel's test
/// notification to a TLS receiver on 127.0.0.1 whose certificate that CA signed and
/// scrapes an https target there, and reports a receiver it cannot verify as a
/// certificate error.
#[tokio::test]
async fn channels_and_targets_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("san.cnf"),
        "subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n",
    )
    .unwrap();
    let made = openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=harrier test CA",
        ],
    );
    if !made {
        skip(Kind::Tool, "openssl not installed");
        return;
    }
    openssl(
        d,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "srv.key",
            "-out",
            "srv.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "srv.pem",
            "-days",
            "2",
            "-extfile",
            "san.cnf",
        ],
    );
    // A TLS webhook receiver: appends each body as one line to got.jsonl, answers 200.
    let receiver = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers['Content-Length']))
        with open('got.jsonl', 'ab') as f:
            f.write(body + b'\n')
        self.send_response(200)
        self.send_header('Content-Length', '2')
        self.end_headers()
        self.wfile.write(b'ok')
    def do_GET(self):
        body = b'http_server_requests_seconds_count{uri="/pay",status="200"} 7\n'
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain; version=0.0.4')
        # A length, as real exporters send: over TLS a body that ends only at a close
        # without close_notify is refused as possibly truncated.
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain('srv.pem', 'srv.key')
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    let mut py = Reaped(
        std::process::Command::new("python3")
            .args(["-c", receiver])
            .current_dir(d)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3"),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(py.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let hook = format!("https://127.0.0.1:{}/hook", line.trim());
    let metrics = format!("https://127.0.0.1:{}/metrics", line.trim());
    std::fs::write(
        d.join("harrier.toml"),
        format!(
            "self_scrape = false\n\
             [[targets]]\nname = \"tls-exporter\"\nurl = \"{metrics}\"\ninterval_s = 1\ntimeout_s = 1\n\
             [alerts]\nbuiltin_rules = false\n\
             [[alerts.channels]]\nname = \"tls\"\nkind = \"webhook\"\nurl = \"{hook}\"\n"
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let serve = |ca: &std::path::Path| {
        Reaped(
            std::process::Command::new(env!("CARGO_BIN_EXE_harrier"))
                .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
                .arg("--db")
                .arg(d.join("h.db"))
                .arg("--config")
                .arg(d.join("harrier.toml"))
                .env("SSL_CERT_FILE", ca)
                .env_remove("SSL_CERT_DIR")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("harrier serve"),
        )
    };
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let send_test = |client: reqwest::Client, base: String| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            match client
                .post(format!("{base}/api/v1/alert-channels/tls/test"))
                .json(&json!({}))
                .send()
                .await
            {
                Ok(r) => return r.json::<Value>().await.unwrap(),
                Err(_) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await
                }
                Err(e) => panic!("harrier serve did not answer: {e}"),
            }
        }
    };
    // Trusting the test CA: delivered.
    let harrier = serve(&d.join("ca.pem"));
    let got = send_test(client.clone(), base.clone()).await;
    // ... and an https scrape target is scraped.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let target = loop {
        let targets: Value = client
            .get(format!("{base}/api/v1/targets"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let t = targets[0].clone();
        if t["up"] == json!(true) || std::time::Instant::now() > deadline {
            break t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    drop(harrier);
    assert_eq!(target["up"], json!(true), "{target}");
    assert_eq!(got, json!({"status": 200, "error": null}));
    let bodies = std::fs::read_to_string(d.join("got.jsonl")).unwrap();
    let msg: Value = serde_json::from_str(bodies.lines().next().unwrap()).unwrap();
    assert_eq!(msg["version"], "4");
    assert_eq!(msg["alerts"][0]["labels"]["alertname"], "HarrierTest");
    // Trusting only an unrelated certificate: the receiver cannot be verified.
    let harrier = serve(&d.join("srv.pem"));
    let got = send_test(client, base).await;
    drop(harrier);
    drop(py);
    assert!(got["status"].is_null(), "{got}");
    let error = got["error"].as_str().unwrap_or_default().to_lowercase();
    assert!(error.contains("certificate"), "{got}");
    assert_eq!(
        std::fs::read_to_string(d.join("got.jsonl"))
            .unwrap()
            .lines()
            .count(),
        1,
        "nothing delivered without trust"
    );
}

/// An alert firing when its rule is deleted (or changed) is resolved with it: the receiver
/// gets one resolved message at the group's next flush, no firing repeats after that, and
/// the history ends the alert's period.
#[tokio::test]
async fn deleting_a_firing_rule_resolves_its_alerts_for_the_receivers() {
    let app = spawn_app().await;
    let store = &app.state.store;
    let target = add_target(&app).await;
    let mut r = rule("CheckoutErrors");
    r["for"] = json!("0s");
    let created = send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let (url, got) = receiver(0).await;
    let mut ch = quick("ops", &url);
    ch.repeat_interval = Duration(60_000);
    let ctx = ctx(vec![ch]);
    let client = notify_client();
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
    dispatch(store, &client, &ctx, t0 + 1_000).await.unwrap();
    assert_eq!(got.lock().unwrap().len(), 1);
    // deleted while firing (the API stamps the real clock; the group flushes on ours)
    assert_eq!(
        app.delete("/api/v1/alert-rules/CheckoutErrors")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert!(store.list_alerts().await.unwrap().is_empty());
    for k in 1..=20 {
        evaluate_once(store, &app.state.hub, t0 + 1_000 + k * 15_000)
            .await
            .unwrap();
        dispatch(store, &client, &ctx, t0 + 1_000 + k * 15_000)
            .await
            .unwrap();
    }
    let statuses: Vec<String> = got
        .lock()
        .unwrap()
        .iter()
        .map(|m| m["status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        statuses,
        ["firing", "resolved"],
        "one resolved message, no firing repeats"
    );
    let history = app
        .get("/api/v1/alerts/history?rule=CheckoutErrors")
        .await
        .json();
    // (stamped with the real clock, older than this test's times)
    let changes: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["change"].as_str().unwrap())
        .collect();
    assert_eq!(changes, ["firing", "pending", "resolved"], "{history}");
}

/// The notification client under the default egress policy.
fn notify_client() -> harrier::services::egress::Outbound {
    harrier::services::alerts::notify::client(&harrier::services::egress::Egress::new(
        Default::default(),
    ))
}

/// Pool rules watch the pools read beside the routes (stored as process figures): an HTTP
/// client pool that stays at its max with requests waiting goes pending, then fires after
/// its `for`, with the pool's labels and the window's mean waiting as value; a usage rule
/// fires on it at 100 % but not on a Jetty pool at 50 %; both resolve when the pool
/// drains. A pool measure with a route is refused, naming the field. The alerts page links
/// the pool alert to the service's pools.
#[tokio::test]
async fn a_pool_rule_fires_on_a_full_pool_and_resolves() {
    let app = spawn_app().await;
    let store = &app.state.store;
    let target = add_target(&app).await;
    let waiting = json!({
        "name": "HttpPoolWaiting",
        "subject": {"service": "orders", "labels": {"kind": "httpclient"}},
        "measure": "pool_pending", "comparison": ">", "threshold": 0,
        "window": "1m", "for": "30s", "severity": "critical",
        "summary": "{{ value }} requests wait for a connection of {{ labels.pool }}"
    });
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &waiting).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let at_max = json!({
        "name": "PoolAtMax", "subject": {"service": "orders"},
        "measure": "pool_usage_pct", "comparison": ">=", "threshold": 100, "window": "1m"
    });
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &at_max).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let mut on_route = at_max.clone();
    on_route["name"] = json!("PoolOnRoute");
    on_route["subject"]["route"] = json!("/checkout");
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &on_route).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["field"], "subject.route", "{}", r.text());

    let t0 = 1_800_000_000_000;
    let pools = |http: (f64, f64), jetty_busy: f64| {
        [
            ("pool_active:httpclient:inventory", http.0),
            ("pool_max:httpclient:inventory", 20.0),
            ("pool_pending:httpclient:inventory", http.1),
            ("pool_active:jetty:default", jetty_busy),
            ("pool_max:jetty:default", 200.0),
            ("pool_pending:jetty:default", 0.0),
        ]
        .map(|(m, v)| ("127.0.0.1:9".to_string(), m.to_string(), v))
    };
    store
        .record_process(target, t0, &pools((20.0, 4.0), 100.0))
        .await
        .unwrap();
    store
        .record_process(target, t0 + 15_000, &pools((20.0, 6.0), 100.0))
        .await
        .unwrap();
    evaluate_once(store, &app.state.hub, t0 + 16_000)
        .await
        .unwrap();
    let alerts = app.get("/api/v1/alerts").await.json();
    let find = |alerts: &Value, rule: &str| {
        alerts
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["rule"] == rule)
            .cloned()
    };
    let w = find(&alerts, "HttpPoolWaiting").expect("a waiting alert");
    assert_eq!(w["state"], "pending");
    assert_eq!(w["value"], 5.0, "the mean of 4 and 6 waiting");
    assert_eq!(
        w["labels"],
        json!({"alertname": "HttpPoolWaiting", "severity": "critical", "service": "orders", "target": "orders",
               "instance": "127.0.0.1:9", "kind": "httpclient", "pool": "inventory"})
    );
    let m = find(&alerts, "PoolAtMax").expect("an at-max alert");
    assert_eq!(
        (m["state"].clone(), m["value"].clone()),
        (json!("firing"), json!(100.0))
    );
    assert_eq!(m["labels"]["pool"], "inventory");
    assert_eq!(
        alerts.as_array().unwrap().len(),
        2,
        "the Jetty pool at 50 % is not alerted: {alerts}"
    );

    evaluate_once(store, &app.state.hub, t0 + 46_000)
        .await
        .unwrap();
    let w = find(&app.get("/api/v1/alerts").await.json(), "HttpPoolWaiting").unwrap();
    assert_eq!(w["state"], "firing");
    assert_eq!(
        w["summary"],
        "5 requests wait for a connection of inventory"
    );
    let page = app.get("/console/alerts").await.text();
    assert!(
        page.contains("HTTP client pool inventory")
            && page.contains("/console/services/orders#pools"),
        "the alerts page names the pool and links to it"
    );

    // drained: 6 of 20 in use, none waiting
    store
        .record_process(target, t0 + 100_000, &pools((6.0, 0.0), 100.0))
        .await
        .unwrap();
    let round = evaluate_once(store, &app.state.hub, t0 + 101_000)
        .await
        .unwrap();
    assert_eq!(round.transitions.len(), 2, "{:?}", round.transitions);
    let alerts = app.get("/api/v1/alerts").await.json();
    assert!(
        alerts
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["state"] != "firing" && a["state"] != "pending"),
        "{alerts}"
    );
}

/// Two databases whose alerts fire alike — the same rule on the same route at the same
/// times — send different idempotency keys (each database keeps an installation key of its
/// own), so a receiver shared by both keeps both messages; a database answers with the key
/// it keeps, whatever candidate it is offered later.
#[tokio::test]
async fn two_databases_alike_send_different_idempotency_keys() {
    let (base, got, sent_keys) = receiver_full("/hook", 0).await;
    let url = format!("{base}/hook");
    let t0 = 1_800_000_000_000;
    for _ in 0..2 {
        let app = spawn_app().await;
        let store = &app.state.store;
        let target = add_target(&app).await;
        let mut r = rule("CheckoutErrors");
        r["for"] = json!("0s");
        let created = send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
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
        let ctx = ctx(vec![quick("ops", &url)]);
        let sent = dispatch(store, &notify_client(), &ctx, t0 + 1_000)
            .await
            .unwrap()
            .sent;
        assert_eq!(sent, 1);
        let kept = store.installation_key("a-later-candidate").await.unwrap();
        assert_ne!(kept, "a-later-candidate", "the first key is kept");
        assert_eq!(
            kept,
            store.installation_key("another").await.unwrap(),
            "asked again, the same key"
        );
    }
    let msgs = got.lock().unwrap().clone();
    assert_eq!(msgs.len(), 2);
    assert_eq!(
        msgs[0]["alerts"][0]["fingerprint"], msgs[1]["alerts"][0]["fingerprint"],
        "the same alert"
    );
    let keys = sent_keys.lock().unwrap().clone();
    assert!(keys.iter().all(|k| k.is_some()), "{keys:?}");
    assert_ne!(keys[0], keys[1], "two databases, two keys");
}
