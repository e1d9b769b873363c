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
use crate::skip::{Kind, skip};
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
    without_keys(v, CLOCK_KEYS);
}

/// `v` without `keys`, at any depth.
fn without_keys(v: &mut Value, keys: &[&str]) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !keys.contains(&k.as_str()));
            map.values_mut().for_each(|x| without_keys(x, keys));
        }
        Value::Array(items) => items.iter_mut().for_each(|x| without_keys(x, keys)),
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

/// Every GET endpoint of the JSON API over what [`populate`] stored in `app`: the URIs,
/// the run ids and the route ids.
async fn get_uris(sqlite: &TestApp) -> (Vec<String>, Vec<i64>, Vec<i64>) {
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

    (uris, ids, route_ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_get_endpoint_answers_the_same_on_sqlite_and_postgres() {
    if on_postgres() {
        skip(
            Kind::Backend,
            "runs in the SQLite pass: it runs both backends itself",
        );
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

    let (uris, ids, route_ids) = get_uris(&sqlite).await;
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

/// `harrier migrate`: a populated SQLite database (runs, routes, alerts, silences,
/// channels, users, tokens, share links, audit entries) copied into a new PostgreSQL
/// database answers every GET endpoint exactly as before — times included, since rows are
/// copied as they are — the copied token still works, new rows get new ids, and a second
/// migration into the filled database is refused with nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_copies_everything_and_every_answer_stays_the_same() {
    use axum::body::Body;
    use axum::http::{Request, header};
    if on_postgres() {
        skip(
            Kind::Backend,
            "runs in the SQLite pass: it runs both backends itself",
        );
        return;
    }
    let Some((server, _pg)) = postgres_server("harrier migrate") else {
        return;
    };
    let sqlite = app_on(None).await;
    let t0 = harrier::now_ms() - 60_000;
    populate(&sqlite, t0).await;
    let (uris, ids, _) = get_uris(&sqlite).await;
    // Sign-in data: a user, a token (used for every request below), a share link.
    let token = crate::permissions::token(&sqlite, harrier::domain::auth::Scope::Write).await;
    let _ = crate::permissions::signed_in(&sqlite, "ana", harrier::domain::auth::Role::Admin).await;
    let r = sqlite
        .send(
            Request::post("/api/v1/share-links")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(format!(r#"{{"run": {}}}"#, ids[0])))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let share_path = r.json()["path"].as_str().unwrap().to_string();
    // The audit entry of that POST is written beside the answer.
    for _ in 0..100 {
        if !sqlite
            .state
            .store
            .list_audit(None, 10)
            .await
            .unwrap()
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let (target_store, mut target_config, _target_dir) = fresh_store_on(Some(&server)).await;
    let url = match target_config.database_url.clone() {
        Some(harrier::store::DatabaseUrl::Postgres(u)) => u,
        other => panic!("{other:?}"),
    };
    let sqlite_path = sqlite.state.config.db.to_str().unwrap().to_string();
    let migrate = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_harrier"))
            .args([
                "migrate",
                "--from",
                &format!("sqlite:{sqlite_path}"),
                "--to",
                &url,
            ])
            .output()
            .unwrap()
    };
    let out = migrate();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("copied "), "{stdout}");

    target_config.self_scrape = false;
    target_config.alerts.builtin_rules = false;
    let postgres = TestApp {
        state: AppState::new(target_store, target_config),
        _dir: _target_dir,
    };
    // Sign-in's tables, as the admin API lists them.
    let (a, b) = (&sqlite.state.store, &postgres.state.store);
    let json = |v: &dyn erased::Json| v.json();
    assert_eq!(
        json(&a.list_users().await.unwrap()),
        json(&b.list_users().await.unwrap())
    );
    assert_eq!(
        json(&a.list_tokens().await.unwrap()),
        json(&b.list_tokens().await.unwrap())
    );
    assert_eq!(
        json(&a.list_shares().await.unwrap()),
        json(&b.list_shares().await.unwrap())
    );
    assert_eq!(
        json(&a.list_audit(None, 100).await.unwrap()),
        json(&b.list_audit(None, 100).await.unwrap())
    );
    assert!(!a.list_audit(None, 100).await.unwrap().is_empty());
    let mut differences = Vec::new();
    for uri in &uris {
        let a = get_as(&sqlite, uri, &token).await;
        let b = get_as(&postgres, uri, &token).await;
        assert_eq!(a.status, b.status, "{uri}: status");
        assert!(a.status.is_success(), "{uri}: {} {}", a.status, a.text());
        if a.content_type.starts_with("application/json") {
            // Only the range of a chart that ends now is the clock's: stored times must
            // come over unchanged.
            let (mut x, mut y) = (a.json(), b.json());
            without_keys(&mut x, &["from_ms", "to_ms"]);
            without_keys(&mut y, &["from_ms", "to_ms"]);
            if let Some(d) = first_difference(&x, &y, uri) {
                differences.push(d);
            }
        } else if a.body != b.body {
            differences.push(format!("{uri}: bodies differ"));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // The share link works on the new database; new rows continue the ids.
    assert_eq!(postgres.get(&share_path).await.status, StatusCode::OK);
    let r = postgres
        .send(
            Request::post("/api/v1/runs?name=after")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::from(fixture("jmeter/default_props_2.13.jtl")))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    assert_eq!(
        r.json()["runs"][0]["id"].as_i64().unwrap(),
        ids.iter().max().unwrap() + 1
    );
    // A second migration: refused, nothing changed.
    let again = migrate();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds data"));
    let runs = get_as(&postgres, "/api/v1/runs", &token).await.json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), ids.len() + 1);
    eprintln!("{} GET answers equal after harrier migrate", uris.len());
}

/// GET `uri` from `app` with a bearer `token`.
async fn get_as(app: &TestApp, uri: &str, token: &str) -> crate::helpers::Reply {
    use axum::body::Body;
    use axum::http::{Request, header};
    let req = Request::get(uri)
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    app.send(req).await
}

mod erased {
    /// Any serializable value as JSON (for comparing store rows of several types).
    pub trait Json {
        fn json(&self) -> serde_json::Value;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap()
        }
    }
}
