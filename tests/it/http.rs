//! The JSON API, the console pages and the safety rails, in process.

use axum::body::Body;
use axum::http::{Request, StatusCode};

use crate::helpers::{assert_close, fixture, select_texts, spawn_app};

/// EC01: quoted failure messages with line feeds; exact run and label figures.
#[tokio::test]
async fn import_then_read_a_run_with_exact_statistics() {
    let app = spawn_app().await;
    let reply = app
        .import(
            "name=ec01&scenario=catalog&tag=build=7",
            fixture("edge-cases/EC01/input.jtl"),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let created = reply.json();
    let run = &created["runs"][0];
    assert_eq!(run["samples"], 4);
    assert_eq!(run["rejected_rows"], 0);
    let id = run["id"].as_i64().unwrap();
    assert_eq!(run["url"], format!("/console/runs/{id}"));

    let detail = app.get(&format!("/api/v1/runs/{id}")).await;
    assert_eq!(detail.status, StatusCode::OK);
    let d = detail.json();
    assert_eq!(d["name"], "ec01");
    assert_eq!(d["scenario"], "catalog");
    assert_eq!(d["tool"], "jmeter");
    assert_eq!(d["tags"]["build"], "7");
    assert_eq!(d["rejected_rows"], 0);
    let o = &d["overall"];
    assert_eq!(o["count"], 4);
    assert_eq!(o["errors"], 2);
    assert_close(o["error_pct"].as_f64().unwrap(), 50.0, "error_pct");
    assert_close(o["mean_ms"].as_f64().unwrap(), 191.25, "mean_ms");
    assert_eq!(o["p50_ms"].as_f64(), Some(120.0));
    assert_eq!(o["p90_ms"].as_f64(), Some(340.0));
    assert_eq!(o["first_start_ms"], 1_700_000_000_000i64);
    assert_eq!(o["last_end_ms"], 1_700_000_000_810i64);
    assert_eq!(o["window_ms"], 810);
    assert_close(
        o["throughput_rps"].as_f64().unwrap(),
        4.938272,
        "throughput",
    );
    let labels: Vec<&str> = d["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["Get catalog", "Get item"],
        "no 'Fake row' label from inside a quoted field"
    );
    assert_eq!(d["labels"][1]["errors"], 2);
    assert_close(
        d["labels"][1]["throughput_rps"].as_f64().unwrap(),
        2.631579,
        "label throughput",
    );
}

/// EC16: a header-only file is a run with no samples: every undefined figure is null.
#[tokio::test]
async fn an_empty_run_has_nulls_not_zeros() {
    let app = spawn_app().await;
    let reply = app.import("", fixture("edge-cases/EC16/input.jtl")).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let id = reply.json()["runs"][0]["id"].as_i64().unwrap();
    let d = app.get(&format!("/api/v1/runs/{id}")).await.json();
    let o = &d["overall"];
    assert_eq!(o["count"], 0);
    for key in [
        "error_pct",
        "min_ms",
        "mean_ms",
        "max_ms",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "window_ms",
        "throughput_rps",
    ] {
        assert!(o[key].is_null(), "{key} must be null, got {}", o[key]);
    }
    let page = app.get(&format!("/console/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    let cells = select_texts(&page.html(), "#label-table tfoot tr.total td.num");
    assert_eq!(cells[2], "–", "error % of an empty run shows a dash");
    assert_eq!(cells[4], "–", "mean of an empty run shows a dash");
    assert!(!page.text().contains("NaN"));
}

/// EC07: a row cut off at the end is rejected with its line, and shown on the run page.
#[tokio::test]
async fn damaged_rows_are_counted_and_shown_with_line_numbers() {
    let app = spawn_app().await;
    let reply = app
        .import("format=jmeter-csv", fixture("edge-cases/EC07/input.jtl"))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let run = &reply.json()["runs"][0];
    assert_eq!(run["samples"], 5);
    assert_eq!(run["rejected_rows"], 1);
    let id = run["id"].as_i64().unwrap();
    let rejected = app.get(&format!("/api/v1/runs/{id}/rejected")).await.json();
    let line = rejected["rejected"][0]["line"].as_i64().unwrap();
    let text = String::from_utf8(fixture("edge-cases/EC07/input.jtl")).unwrap();
    assert_eq!(
        line as usize,
        text.lines().count(),
        "the cut-off row is the file's last line"
    );
    let page = app.get(&format!("/console/runs/{id}")).await.html();
    let rows = select_texts(&page, "#rejected-table tbody td.num");
    assert_eq!(rows, [line.to_string()]);
}

/// EC11: transaction-controller rows are listed per label but excluded from totals.
#[tokio::test]
async fn transaction_rows_are_not_counted_twice() {
    let app = spawn_app().await;
    let reply = app.import("", fixture("edge-cases/EC11/input.jtl")).await;
    let id = reply.json()["runs"][0]["id"].as_i64().unwrap();
    let d = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(d["overall"]["count"], 4);
    assert_close(d["overall"]["mean_ms"].as_f64().unwrap(), 282.5, "mean");
    let tx = d["labels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["label"] == "Checkout flow")
        .expect("TX label");
    assert_eq!(tx["is_transaction"], true);
    assert_eq!(tx["count"], 2);
}

/// EC22 and a two-report ab file: one run per report, named after host and path.
#[tokio::test]
async fn ab_reports_become_summary_runs_one_per_report() {
    let app = spawn_app().await;
    let reply = app
        .import("format=ab", fixture("edge-cases/EC22/ab-output.txt"))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let id = reply.json()["runs"][0]["id"].as_i64().unwrap();
    let d = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(d["tool"], "ab");
    assert_eq!(d["summary_only"], true);
    assert_eq!(d["overall"]["count"], 2000);
    assert_eq!(
        d["overall"]["errors"], 2000,
        "Non-2xx responses are errors although 'Failed requests: 0'"
    );
    assert_close(
        d["overall"]["error_pct"].as_f64().unwrap(),
        100.0,
        "error_pct",
    );
    assert_eq!(d["overall"]["p95_ms"].as_f64(), Some(18.0));

    let mut two = fixture("ab/slow_stdout.txt");
    two.extend(fixture("ab/error_stdout.txt"));
    let reply = app.import("filename=nohup.out", two).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let runs = reply.json()["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 2);
    let names: Vec<&str> = runs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names[0].ends_with("/slow"), "{names:?}");
    assert!(names[1].ends_with("/error"), "{names:?}");
    assert_eq!(runs[0]["samples"], 300);
    assert_eq!(runs[1]["samples"], 200);
}

/// An unreadable file is a clear error naming the supported formats, and leaves nothing.
#[tokio::test]
async fn unknown_format_is_a_clear_error_and_stores_nothing() {
    let app = spawn_app().await;
    let reply = app
        .import(
            "filename=notes.txt",
            b"hello, this is not a load test result\n".to_vec(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY);
    let err = reply.json()["error"].as_str().unwrap().to_string();
    assert!(err.contains("notes.txt"), "{err}");
    assert!(err.contains("jmeter-csv") && err.contains("ab"), "{err}");
    assert_eq!(
        app.get("/api/v1/runs").await.json()["runs"]
            .as_array()
            .unwrap()
            .len(),
        0
    );

    let reply = app
        .import("format=tsung", fixture("edge-cases/EC01/input.jtl"))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert!(
        reply.json()["error"]
            .as_str()
            .unwrap()
            .contains("supported")
    );
}

/// Multipart upload (the browser form without JS) imports the `file` field.
#[tokio::test]
async fn multipart_upload_imports_the_file_field() {
    let app = spawn_app().await;
    let boundary = "XyZboundary";
    let mut body = Vec::new();
    body.extend(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"scenario\"\r\n\r\nshop\r\n"
        )
        .as_bytes(),
    );
    body.extend(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"ec35.jtl\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes());
    body.extend(fixture("edge-cases/EC35/input.jtl"));
    body.extend(format!("\r\n--{boundary}--\r\n").as_bytes());
    let req = Request::post("/api/v1/runs")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(Body::from(body))
        .unwrap();
    let reply = app.send(req).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    let run = &reply.json()["runs"][0];
    assert_eq!(run["name"], "ec35");
    assert_eq!(run["samples"], 19);
    let id = run["id"].as_i64().unwrap();
    assert_eq!(
        app.get(&format!("/api/v1/runs/{id}")).await.json()["scenario"],
        "shop"
    );
}

/// EC35: per-second buckets by start second, the spike second, the partial last bucket.
#[tokio::test]
async fn timeseries_buckets_by_start_second() {
    let app = spawn_app().await;
    let id = app
        .import("", fixture("edge-cases/EC35/input.jtl"))
        .await
        .json()["runs"][0]["id"]
        .as_i64()
        .unwrap();
    let s = app
        .get(&format!("/api/v1/runs/{id}/timeseries"))
        .await
        .json();
    assert_eq!(s["bucket_ms"], 1000);
    let t: Vec<i64> = s["t_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(
        t,
        (0..5)
            .map(|i| 1_700_000_000_000 + i * 1000)
            .collect::<Vec<_>>()
    );
    let count: Vec<u64> = s["count"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(count, [5, 5, 5, 3, 1]);
    assert_eq!(s["errors"][2], 4);
    assert_close(s["error_pct"][2].as_f64().unwrap(), 80.0, "spike error %");
    assert_close(s["mean_ms"][3].as_f64().unwrap(), 121.666667, "bucket mean");
    assert_eq!(s["max_ms"][2].as_f64(), Some(1100.0));
    assert_eq!(s["last_bucket_partial"], true);

    let missing = app
        .get(&format!("/api/v1/runs/{id}/timeseries?label=nope"))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

/// The console's upload names the raw body with Content-Disposition (UTF-8 form wins).
#[tokio::test]
async fn raw_upload_takes_its_name_from_content_disposition() {
    let app = spawn_app().await;
    let req = Request::post("/api/v1/runs")
        .header(
            "content-disposition",
            "attachment; filename=\"r_sum_.jtl\"; filename*=UTF-8''r%C3%A9sum%C3%A9.jtl",
        )
        .body(Body::from(fixture("edge-cases/EC01/input.jtl")))
        .unwrap();
    let reply = app.send(req).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text());
    assert_eq!(reply.json()["runs"][0]["name"], "résumé");
    let id = reply.json()["runs"][0]["id"].as_i64().unwrap();
    assert_eq!(
        app.get(&format!("/api/v1/runs/{id}")).await.json()["source"],
        "résumé.jtl"
    );
}

#[tokio::test]
async fn list_and_delete_runs() {
    let app = spawn_app().await;
    let a = app
        .import("name=first", fixture("edge-cases/EC01/input.jtl"))
        .await
        .json()["runs"][0]["id"]
        .as_i64()
        .unwrap();
    let b = app
        .import("name=second", fixture("edge-cases/EC35/input.jtl"))
        .await
        .json()["runs"][0]["id"]
        .as_i64()
        .unwrap();
    let list = app.get("/api/v1/runs").await.json();
    let ids: Vec<i64> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(ids.contains(&a) && ids.contains(&b));
    assert_eq!(
        app.delete(&format!("/api/v1/runs/{a}")).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get(&format!("/api/v1/runs/{a}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&format!("/api/v1/runs/{a}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/api/v1/runs/abc").await.status,
        StatusCode::BAD_REQUEST
    );
    // GET changes nothing, POST to a GET-only path is refused.
    let refused = app
        .send(
            Request::post(format!("/api/v1/runs/{b}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(refused.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        app.get("/api/v1/runs").await.json()["runs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn console_pages_render_runs_with_units() {
    let app = spawn_app().await;
    let empty = app.get("/console/runs").await;
    assert_eq!(empty.status, StatusCode::OK);
    assert!(empty.content_type.starts_with("text/html"));
    assert_eq!(
        select_texts(&empty.html(), "#runs-empty .empty-title"),
        ["No runs yet"]
    );
    // The command it suggests names the server as the browser reached it.
    for page in ["/console/runs", "/console"] {
        let reply = app
            .send(
                Request::get(page)
                    .header("host", "localhost:7195")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{page}");
        assert_eq!(
            select_texts(&reply.html(), "#runs-empty code"),
            ["harrier import results.jtl --scenario checkout --server http://localhost:7195"],
            "{page}"
        );
    }

    let id = app
        .import(
            "name=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
            fixture("edge-cases/EC01/input.jtl"),
        )
        .await
        .json()["runs"][0]["id"]
        .as_i64()
        .unwrap();
    let list = app.get("/console/runs").await;
    let html = list.html();
    assert_eq!(
        select_texts(&html, "#runs-empty[hidden]").len(),
        1,
        "empty state hidden once a run exists"
    );
    let names = select_texts(&html, "#runs-table tbody td a");
    assert_eq!(
        names,
        ["<script>alert(1)</script>"],
        "names are escaped, shown as text"
    );
    assert!(!list.text().contains("<script>alert(1)"));

    let page = app.get(&format!("/console/runs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.html();
    let labels = select_texts(&html, "#label-table tbody td.name");
    assert_eq!(labels, ["Get catalog", "Get item"]);
    let headers = select_texts(&html, "#label-table thead th");
    assert_eq!(headers[5], "Mean ms", "units in the column headers");
    assert_eq!(headers[11], "Throughput req/s");
    let total = select_texts(&html, "#label-table tfoot tr.total td.num");
    assert_eq!(total[0], "4");
    assert_eq!(total[2], "50.00");
    assert_eq!(total[4], "191.3", "mean 191.25 ms");
    assert_eq!(total[7], "340", "p95");
    assert_eq!(total[10], "4.9");
    let kpis = select_texts(&html, ".kpi .kpi-value");
    assert_eq!(kpis[1], "50.00%", "error rate card");
    assert_eq!(kpis[3], "4.9req/s");
    let data = select_texts(&html, "script#run-data");
    let island: serde_json::Value = serde_json::from_str(&data[0]).expect("data island is JSON");
    assert_eq!(island["timeseries"]["count"].as_array().unwrap().len(), 1);
    assert_eq!(island["run"]["id"], id);
    assert_eq!(
        island["timeseries"]["count"][0], 4,
        "all four samples start in one second"
    );

    let overview = app.get("/console").await;
    assert_eq!(overview.status, StatusCode::OK);
    assert_eq!(
        select_texts(&overview.html(), "#runs-table tbody tr").len(),
        1
    );

    let missing = app.get("/console/runs/999").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.content_type.starts_with("text/html"));
    assert!(missing.text().contains("run 999 not found"));
}

#[tokio::test]
async fn health_metrics_and_static_files() {
    let app = spawn_app().await;
    let health = app.get("/healthz").await;
    assert_eq!(health.status, StatusCode::OK);
    assert_eq!(health.json()["status"], "ok");

    app.import("", fixture("edge-cases/EC07/input.jtl")).await;
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(metrics.content_type.starts_with("text/plain"));
    let text = metrics.text();
    assert!(
        text.contains("harrier_http_request_duration_seconds_bucket{method=\"POST\",path=\"/api/v1/runs\",status=\"201\",le=\"0.005\"}")
            || text.contains("harrier_http_request_duration_seconds_bucket{")
                && text.contains("path=\"/api/v1/runs\""),
        "latency is a histogram with buckets per matched path:\n{text}"
    );
    assert!(!text.contains("quantile=\""), "no summaries");
    assert!(text.contains("harrier_runs_imported_total"));
    assert!(text.contains("harrier_rejected_rows_total"));

    let css = app.get("/static/harrier.css").await;
    assert_eq!(css.status, StatusCode::OK);
    assert!(css.content_type.starts_with("text/css"));
    assert_eq!(
        app.get("/static/nope.js").await.status,
        StatusCode::NOT_FOUND
    );
    let unknown = app.get("/api/v1/nothing").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert!(unknown.json()["error"].is_string());
}

/// An input over `max_import_bytes` is refused whole (413), never stored cut short.
#[tokio::test]
async fn an_import_over_the_size_limit_stores_nothing() {
    let mut app = spawn_app().await;
    let mut config = (*app.state.config).clone();
    config.max_import_bytes = 1_000;
    app.state.config = std::sync::Arc::new(config);
    let big = fixture("jmeter/csv_header_allcols.jtl");
    assert!(big.len() > 1_000);
    let reply = app.import("", big).await;
    assert_eq!(
        reply.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        reply.text()
    );
    let err = reply.json()["error"].as_str().unwrap().to_string();
    assert!(
        err.contains("nothing was stored") && err.contains("max_import_bytes"),
        "{err}"
    );
    assert_eq!(
        app.get("/api/v1/runs").await.json()["runs"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
    // A small file still goes through.
    assert_eq!(
        app.import("", fixture("edge-cases/EC01/input.jtl"))
            .await
            .status,
        StatusCode::CREATED
    );
}

/// A multipart upload that breaks off mid-file stores nothing.
#[tokio::test]
async fn a_broken_multipart_upload_stores_nothing() {
    let app = spawn_app().await;
    let boundary = "b0undary";
    let mut body = Vec::new();
    body.extend(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"cut.jtl\"\r\n\r\n").as_bytes());
    body.extend(fixture("jmeter/csv_header_allcols.jtl"));
    // No closing boundary: the body ends inside the file part.
    let req = Request::post("/api/v1/runs")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(Body::from(body))
        .unwrap();
    let reply = app.send(req).await;
    assert!(
        reply.status.is_client_error(),
        "{} {}",
        reply.status,
        reply.text()
    );
    assert!(
        reply.json()["error"]
            .as_str()
            .unwrap()
            .contains("nothing was stored"),
        "{}",
        reply.text()
    );
    assert_eq!(
        app.get("/api/v1/runs").await.json()["runs"]
            .as_array()
            .unwrap()
            .len(),
        0
    );
}

#[tokio::test]
async fn unknown_runs_and_wrong_methods_answer_in_json() {
    let app = spawn_app().await;
    for path in [
        "/api/v1/runs/999/errors",
        "/api/v1/runs/999/rejected",
        "/api/v1/runs/999/distribution",
    ] {
        let reply = app.get(path).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
        assert!(
            reply.json()["error"].as_str().unwrap().contains("run 999"),
            "{path}"
        );
    }
    let reply = app
        .send(Request::put("/api/v1/runs").body(Body::empty()).unwrap())
        .await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(reply.json()["error"].as_str().unwrap().contains("PUT"));
}

fn get_with(uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut req = Request::get(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(Body::empty()).unwrap()
}

fn header(reply: &crate::helpers::Reply, name: &str) -> Option<String> {
    reply
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

#[tokio::test]
async fn text_answers_are_compressed_when_asked_and_only_then() {
    use std::io::Read;
    let app = spawn_app().await;
    app.import("", fixture("edge-cases/EC11/input.jtl")).await;
    for uri in ["/console", "/console/runs", "/api/v1/runs"] {
        let plain = app.send(get_with(uri, &[])).await;
        assert_eq!(plain.status, StatusCode::OK, "{uri}");
        assert_eq!(header(&plain, "content-encoding"), None, "{uri}: not asked");

        let gz = app
            .send(get_with(uri, &[("accept-encoding", "gzip")]))
            .await;
        assert_eq!(
            header(&gz, "content-encoding").as_deref(),
            Some("gzip"),
            "{uri}"
        );
        assert!(gz.body.len() < plain.body.len(), "{uri}: gzip is smaller");
        let mut text = Vec::new();
        flate2::read::GzDecoder::new(&gz.body[..])
            .read_to_end(&mut text)
            .unwrap();
        // Pages carry a per-request nonce or times; the JSON list is the same whole.
        if uri.starts_with("/api") {
            assert_eq!(text, plain.body, "{uri}: the same answer once decompressed");
        } else {
            assert!(String::from_utf8_lossy(&text).contains("</html>"), "{uri}");
        }

        let br = app
            .send(get_with(uri, &[("accept-encoding", "br;q=1, gzip;q=0.5")]))
            .await;
        assert_eq!(
            header(&br, "content-encoding").as_deref(),
            Some("br"),
            "{uri}"
        );
        let mut text = Vec::new();
        brotli::Decompressor::new(&br.body[..], 4096)
            .read_to_end(&mut text)
            .unwrap();
        assert!(!text.is_empty(), "{uri}");
    }
}

#[tokio::test]
async fn pages_link_static_files_by_hashed_names_cached_for_good() {
    let app = spawn_app().await;
    let page = app.get("/console").await;
    let html = page.html();
    let sel = scraper::Selector::parse("link[rel=stylesheet], script[src]").unwrap();
    let urls: Vec<String> = html
        .select(&sel)
        .filter_map(|e| e.value().attr("href").or(e.value().attr("src")))
        .map(str::to_string)
        .collect();
    let css = urls
        .iter()
        .find(|u| u.starts_with("/static/harrier.") && u.ends_with(".css"))
        .unwrap_or_else(|| panic!("no hashed harrier.css in {urls:?}"));
    assert_ne!(css, "/static/harrier.css", "the page links the hashed name");

    let hashed = app.get(css).await;
    assert_eq!(hashed.status, StatusCode::OK);
    assert!(hashed.content_type.starts_with("text/css"));
    assert_eq!(
        header(&hashed, "cache-control").as_deref(),
        Some("public, max-age=31536000, immutable")
    );

    // The plain name still answers, revalidated by its ETag.
    let plain = app.get("/static/harrier.css").await;
    assert_eq!(plain.status, StatusCode::OK);
    assert_eq!(plain.body, hashed.body);
    assert_eq!(header(&plain, "cache-control").as_deref(), Some("no-cache"));
    let etag = header(&plain, "etag").expect("an ETag");
    let again = app
        .send(get_with("/static/harrier.css", &[("if-none-match", &etag)]))
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert!(again.body.is_empty());
    let changed = app
        .send(get_with(
            "/static/harrier.css",
            &[("if-none-match", "\"other\"")],
        ))
        .await;
    assert_eq!(changed.status, StatusCode::OK);

    // Compressed once, at its best, and only once (the layer leaves it alone).
    for (coding, unpack) in [
        (
            "br",
            Box::new(|b: &[u8]| {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut brotli::Decompressor::new(b, 4096), &mut out)
                    .unwrap();
                out
            }) as Box<dyn Fn(&[u8]) -> Vec<u8>>,
        ),
        (
            "gzip",
            Box::new(|b: &[u8]| {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(b), &mut out).unwrap();
                out
            }),
        ),
    ] {
        let packed = app
            .send(get_with(css, &[("accept-encoding", coding)]))
            .await;
        assert_eq!(header(&packed, "content-encoding").as_deref(), Some(coding));
        assert_eq!(header(&packed, "vary").as_deref(), Some("accept-encoding"));
        assert!(packed.body.len() * 3 < hashed.body.len(), "{coding}");
        assert_eq!(unpack(&packed.body), hashed.body, "{coding}");
    }

    // Every file a page links exists under its hashed name.
    for u in &urls {
        assert_eq!(app.get(u).await.status, StatusCode::OK, "{u}");
    }
}
