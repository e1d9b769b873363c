//! The same API on both backends: the same fixtures (several formats), targets, scrapes,
//! rules, evaluations, silences and channels go into a SQLite-backed and a
//! PostgreSQL-backed app, and every GET endpoint of the JSON API answers the same JSON on
//! both (times of import and creation aside: they are the clock's).
//!
//! PostgreSQL: `HARRIER_TEST_DATABASE_URL`, else a server started for the test from
//! Debian's `postgresql` binaries; without either the test says it is skipped.

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::alerts::{interval, rule, scrape, send_json, write};
use crate::helpers::{TestApp, fixture, fresh_store_on, on_postgres, postgres_server};
use harrier::app::AppState;
use harrier::services::alerts::evaluator::evaluate_once;
use harrier::store::TargetSpec;

/// Keys whose values are the clock's, not the data's.
const CLOCK_KEYS: &[&str] = &[
    "imported_at_ms",
    "created_at_ms",
    "updated_at_ms",
    "starts_at_ms",
    "ends_at_ms",
    "last_run_at_ms",
    // The range of a chart that ends now.
    "from_ms",
    "to_ms",
];

/// Result files in several formats: (query, fixture).
const IMPORTS: &[(&str, &str)] = &[
    (
        "name=jmeter-csv&scenario=checkout&tag=build=1",
        "jmeter/default_props_2.13.jtl",
    ),
    (
        "name=jmeter-xml&scenario=checkout&tag=build=2",
        "jmeter/results_xml.jtl",
    ),
    ("name=ec01&scenario=checkout", "edge-cases/EC01/input.jtl"),
    ("name=k6&scenario=k6", "k6/points_http_req_duration.ndjson"),
    ("name=k6-summary", "k6/summary-export.json"),
    ("name=locust", "locust/run_stats.csv"),
    // ab writes no times: its trend point would be its import time.
    ("name=ab", "ab/post_stdout.txt"),
    ("name=wrk", "wrk/flaky_latency.txt"),
    ("name=hey", "hey/flaky.csv"),
];

async fn app_on(postgres: Option<&str>) -> TestApp {
    let (store, mut config, dir) = fresh_store_on(postgres).await;
    config.self_scrape = false;
    config.alerts.builtin_rules = false;
    harrier::services::alerts::evaluator::seed(&store, &config.alerts)
        .await
        .unwrap();
    TestApp {
        state: AppState::new(store, config),
        _dir: dir,
    }
}

/// Everything the GET endpoints read, written the same way into `app`.
async fn populate(app: &TestApp, t0: i64) {
    for (query, file) in IMPORTS {
        let r = app.import(query, fixture(file)).await;
        assert_eq!(r.status, StatusCode::CREATED, "{file}: {}", r.text());
    }
    let store = &app.state.store;
    let target = store
        .insert_target(
            &TargetSpec {
                name: "orders".into(),
                url: "http://127.0.0.1:9/metrics".into(),
                kind: "prometheus".into(),
                interval_s: 15.0,
                timeout_s: 5.0,
                labels: [("service".to_string(), "orders".to_string())].into(),
            },
            "api",
            0,
        )
        .await
        .unwrap()
        .unwrap()
        .id;
    let r = send_json(app, "POST", "/api/v1/alert-rules", &rule("CheckoutErrors")).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    for (i, at) in [t0, t0 + 15_000, t0 + 30_000, t0 + 45_000]
        .iter()
        .enumerate()
    {
        let failed = if i < 1 { 1.0 } else { 40.0 };
        scrape(
            app,
            target,
            *at,
            &[
                write("/checkout", interval(100.0, failed)),
                write("/search", interval(250.0 + i as f64, 0.0)),
            ],
        )
        .await;
        evaluate_once(store, &app.state.hub, at + 1_000)
            .await
            .unwrap();
    }
    let r = send_json(
        app,
        "POST",
        "/api/v1/silences",
        &json!({"matchers": [{"name": "route", "value": "/search", "op": "="}],
                "duration": "2h", "comment": "maintenance", "created_by": "ana"}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let r = send_json(
        app,
        "POST",
        "/api/v1/alert-channels",
        &json!({"name": "ops", "kind": "webhook", "url": "http://127.0.0.1:9/hook",
                "group_wait": "0s", "group_interval": "10s", "group_by": ["..."],
                "timeout_s": 5}),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
}

/// `v` without the clock's values.
fn without_clock(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !CLOCK_KEYS.contains(&k.as_str()));
            map.values_mut().for_each(without_clock);
        }
        Value::Array(items) => items.iter_mut().for_each(without_clock),
        _ => {}
    }
}

/// The first place where `a` and `b` differ, as a JSON path.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()) {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                if let Some(d) = first_difference(va, vb, &format!("{path}.{k}")) {
                    return Some(d);
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (va, vb))| first_difference(va, vb, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: SQLite {a} vs PostgreSQL {b}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_get_endpoint_answers_the_same_on_sqlite_and_postgres() {
    if on_postgres() {
        eprintln!("SKIPPED in the PostgreSQL pass: this test runs both backends itself");
        return;
    }
    let Some((server, _pg)) = postgres_server("the cross-backend comparison") else {
        return;
    };
    let sqlite = app_on(None).await;
    let postgres = app_on(Some(&server)).await;
    let t0 = harrier::now_ms() - 60_000;
    populate(&sqlite, t0).await;
    populate(&postgres, t0).await;

    let runs = sqlite.get("/api/v1/runs").await.json();
    let ids: Vec<i64> = runs["runs"]
        .as_array()
        .or(runs.as_array())
        .expect("a runs list")
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), IMPORTS.len(), "{runs}");
    let routes = sqlite.get("/api/v1/routes?window=5m").await.json();
    let route_ids: Vec<i64> = routes
        .as_array()
        .expect("a routes list")
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(route_ids.len(), 2, "{routes}");

    let mut uris: Vec<String> = [
        "/api/v1/runs",
        "/api/v1/scenarios",
        "/api/v1/scenarios/checkout",
        "/api/v1/routes?window=5m",
        "/api/v1/routes?window=1m",
        "/api/v1/routes/sparklines",
        "/api/v1/targets",
        "/api/v1/services",
        "/api/v1/services/orders",
        "/api/v1/alerts",
        "/api/v1/alerts/history",
        "/api/v1/alert-rules",
        "/api/v1/alert-rules/CheckoutErrors",
        "/api/v1/silences",
        "/api/v1/alert-channels",
        "/api/v1/alert-channels/ops",
    ]
    .map(String::from)
    .to_vec();
    for id in &ids {
        for tail in [
            "",
            "/timeseries",
            "/distribution",
            "/errors",
            "/rejected",
            "/stats.csv",
        ] {
            uris.push(format!("/api/v1/runs/{id}{tail}"));
        }
    }
    let all: Vec<String> = ids.iter().map(i64::to_string).collect();
    uris.push(format!("/api/v1/compare?runs={},{}", all[0], all[1]));
    uris.push(format!("/api/v1/compare?runs={}", all[..4].join(",")));
    for id in &route_ids {
        uris.push(format!("/api/v1/routes/{id}"));
        uris.push(format!("/api/v1/routes/{id}/timeseries"));
    }

    let mut compared = 0;
    let mut differences = Vec::new();
    for uri in &uris {
        let a = sqlite.get(uri).await;
        let b = postgres.get(uri).await;
        assert_eq!(a.status, b.status, "{uri}: status");
        assert!(a.status.is_success(), "{uri}: {} {}", a.status, a.text());
        if a.content_type.starts_with("application/json") {
            let (mut x, mut y) = (a.json(), b.json());
            without_clock(&mut x);
            without_clock(&mut y);
            if let Some(d) = first_difference(&x, &y, uri) {
                differences.push(d);
            }
        } else if a.body != b.body {
            differences.push(format!("{uri}: bodies differ"));
        }
        compared += 1;
    }
    assert!(
        differences.is_empty(),
        "{} of {compared} answers differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
    let history = sqlite.get("/api/v1/alerts/history").await.json();
    assert!(
        history.to_string().contains("firing"),
        "the rule fired, so the history has something to compare: {history}"
    );
    eprintln!(
        "{compared} GET answers equal on SQLite and PostgreSQL ({} runs, {} routes)",
        ids.len(),
        route_ids.len()
    );
}
