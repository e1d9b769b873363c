//! Live runs: line protocol streamed the way k6 and JMeter's Backend Listener send it,
//! watched over the websocket on a real socket.

use std::time::Duration;

use futures_util::StreamExt;
use harrier::app;
use tokio_tungstenite::tungstenite::Message;

use crate::helpers::spawn_app;

async fn next_of<S>(
    ws: &mut S,
    want: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(15), ws.next())
            .await
            .unwrap_or_else(|_| panic!("no {want} message within 15 s"))
            .expect("socket open")
            .expect("message");
        if let Message::Text(text) = msg {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            if v["type"] == want && pred(&v) {
                return v;
            }
        }
    }
}

/// Three seconds of a k6 run: 10 requests per second, one failing per second, vus 5.
fn k6_lines(second: i64) -> String {
    let mut out = String::new();
    let t0 = 1_700_000_000_000i64 + second * 1000;
    out.push_str(&format!(
        "vus,testid=checkout-k6 value=5 {}\n",
        t0 * 1_000_000
    ));
    for i in 0..10 {
        let end_ms = t0 + 100 + i * 80;
        let (ok, status) = if i == 9 {
            ("false", "503")
        } else {
            ("true", "200")
        };
        let ns = end_ms * 1_000_000;
        out.push_str(&format!(
            "http_reqs,expected_response={ok},method=GET,name=GET\\ /items,status={status},testid=checkout-k6 value=1 {ns}\n\
             http_req_duration,expected_response={ok},method=GET,name=GET\\ /items,status={status},testid=checkout-k6 value={}.4 {ns}\n",
            40 + i
        ));
    }
    out
}

#[tokio::test]
async fn a_k6_stream_becomes_a_live_run_that_completes() {
    let test = spawn_app().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = test.state.shutdown.clone();
    let server = tokio::spawn(app::serve(
        listener,
        test.state.clone(),
        std::future::pending(),
    ));
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/api/v1/live"))
        .await
        .unwrap();
    let client = reqwest::Client::new();

    let write = |body: String| {
        client
            .post(format!(
                "http://{addr}/api/v2/write?org=o&bucket=k6&precision=ns"
            ))
            .body(body)
            .send()
    };
    assert_eq!(write(k6_lines(0)).await.unwrap().status(), 204);
    let started = next_of(&mut ws, "run_imported", |_| true).await;
    let id = started["run"]["id"].as_i64().unwrap();
    assert_eq!(started["run"]["status"], "live");
    assert_eq!(started["run"]["tool"], "k6");
    assert_eq!(
        started["run"]["scenario"], "checkout-k6",
        "keyed by the testid tag"
    );
    // The snapshot lands within a second or two and is announced.
    let update = next_of(&mut ws, "run_updated", |v| v["run"]["count"] == 10).await;
    assert_eq!(update["run"]["status"], "live");

    for s in 1..3 {
        assert_eq!(write(k6_lines(s)).await.unwrap().status(), 204);
    }
    next_of(&mut ws, "run_updated", |v| {
        v["run"]["id"] == id && v["run"]["count"] == 30
    })
    .await;
    let run: serde_json::Value = client
        .get(format!("http://{addr}/api/v1/runs/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "live");
    assert_eq!(run["overall"]["errors"], 3);
    assert_eq!(
        run["overall"]["max_ms"], 49.0,
        "k6 ms floats rounded to whole ms"
    );
    assert_eq!(run["labels"][0]["label"], "GET /items");
    assert_eq!(
        run["name"], "checkout-k6",
        "named after its scenario, no suffix"
    );
    let badge = |html: String| {
        let doc = scraper::Html::parse_document(&html);
        let sel = scraper::Selector::parse(&format!(
            "#runs-table tr[data-run-id=\"{id}\"] td.name .badge"
        ))
        .unwrap();
        doc.select(&sel)
            .map(|e| e.text().collect::<String>())
            .collect::<Vec<_>>()
    };
    let page = |client: reqwest::Client| async move {
        client
            .get(format!("http://{addr}/console/runs"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    assert_eq!(
        badge(page(client.clone()).await),
        ["live"],
        "marked live while live"
    );

    // Ending it explicitly completes it.
    let end = client
        .post(format!("http://{addr}/api/v1/runs/{id}/end"))
        .send()
        .await
        .unwrap();
    assert_eq!(end.status(), 204);
    let done = next_of(&mut ws, "run_updated", |v| {
        v["run"]["id"] == id && v["run"]["status"] == "complete"
    })
    .await;
    assert_eq!(done["run"]["count"], 30);
    assert!(
        badge(page(client.clone()).await).is_empty(),
        "no live mark once complete"
    );
    let series: serde_json::Value = client
        .get(format!("http://{addr}/api/v1/runs/{id}/timeseries"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(series["count"], serde_json::json!([10, 10, 10]));
    assert_eq!(series["active_users"][0], 5);

    // A bad line is reported with its number; the good ones are kept.
    let partial = write("vus value=7 1700000009000000000\nnot line protocol\n".into())
        .await
        .unwrap();
    assert_eq!(partial.status(), 400);
    let body: serde_json::Value = partial.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("line 2"),
        "{body}"
    );

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn jmeter_backend_listener_intervals_and_replacing_with_the_jtl() {
    let app = spawn_app().await;
    let body = "jmeter,application=shop,transaction=GET\\ /slow,statut=all count=12,avg=81.5,min=22.0,max=160.0,hit=12,sb=1200,rb=4560,pct95.0=150.0 1700000005000000000\n\
                jmeter,application=shop,transaction=GET\\ /slow,statut=ko count=2,avg=2.0 1700000005000000000\n\
                jmeter,application=shop,transaction=GET\\ /slow,responseCode=500,responseMessage=Internal\\ Server\\ Error count=2 1700000005000000000\n\
                jmeter,application=shop,transaction=internal minAT=3,maxAT=3,meanAT=3,startedT=3,endedT=0 1700000005000000000\n\
                jmeter,application=shop,transaction=GET\\ /slow,statut=all count=8,avg=50,min=10,max=90,hit=8,sb=800,rb=100 1700000010000000000\n";
    let req = axum::http::Request::post("/write?db=jmeter")
        .body(axum::body::Body::from(body))
        .unwrap();
    assert_eq!(
        app.send(req).await.status,
        axum::http::StatusCode::NO_CONTENT
    );
    app.state.live_runs.tick().await;
    let runs = app.get("/api/v1/runs").await.json();
    let id = runs["runs"][0]["id"].as_i64().unwrap();
    let run = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(run["status"], "live");
    assert_eq!(run["scenario"], "shop");
    assert_eq!(run["overall"]["count"], 20);
    assert_eq!(run["overall"]["errors"], 2);
    assert_eq!(run["overall"]["mean_ms"], (12.0 * 81.5 + 8.0 * 50.0) / 20.0);
    assert!(
        run["overall"]["p95_ms"].is_null(),
        "no percentiles from interval aggregates"
    );
    let errors = app.get(&format!("/api/v1/runs/{id}/errors")).await.json();
    assert_eq!(errors["errors"][0]["message"], "Internal Server Error");

    // Importing while live is refused; after the end, the JTL replaces the aggregates.
    let jtl = crate::helpers::fixture("edge-cases/EC01/input.jtl");
    assert_eq!(
        app.import(&format!("replace={id}"), jtl.clone())
            .await
            .status,
        axum::http::StatusCode::BAD_REQUEST
    );
    assert!(app.state.live_runs.end(id).await);
    app.state.live_runs.tick().await;
    let reply = app.import(&format!("replace={id}"), jtl).await;
    assert_eq!(
        reply.status,
        axum::http::StatusCode::CREATED,
        "{}",
        reply.text()
    );
    let run = app.get(&format!("/api/v1/runs/{id}")).await.json();
    assert_eq!(run["status"], "complete");
    assert_eq!(run["scenario"], "shop", "name, scenario and tags kept");
    assert_eq!(run["overall"]["count"], 4);
    assert_eq!(
        run["overall"]["p95_ms"], 340.0,
        "exact figures from the file"
    );
    assert_eq!(
        app.get("/api/v1/runs").await.json()["runs"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "no second run"
    );
}

/// A long k6 stream (2 h of timestamps, 3 labels, failures, points up to 90 s late) sent
/// in 240 writes: each 204 comes after its points are stored (the run's count follows
/// every write with no tick), and the completed run's figures equal an import of the
/// same samples as a JTL file.
#[tokio::test]
async fn a_long_live_run_stored_write_by_write_equals_its_file_import() {
    let app = spawn_app().await;
    let labels = ["GET /a", "POST /b", "GET /c"];
    let mut seed = 11u64;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    let t0 = 1_700_000_000_000i64;
    let mut jtl = String::from("timeStamp,elapsed,label,responseCode,responseMessage,success\n");
    let mut sent = 0u64;
    for w in 0..240i64 {
        let mut body = String::new();
        for i in 0..40i64 {
            let late = if next() % 8 == 0 {
                (next() % 90_000) as i64
            } else {
                0
            };
            let end_ms = t0 + w * 30_000 + i * 700 - late;
            let elapsed = 5 + next() % 400;
            let label = labels[(next() % 3) as usize];
            let ok = next() % 9 != 0;
            let status = if ok { "200" } else { "503" };
            body.push_str(&format!(
                "http_req_duration,expected_response={ok},name={},status={status},testid=long value={elapsed} {}\n",
                label.replace(' ', "\\ "),
                end_ms * 1_000_000
            ));
            jtl.push_str(&format!(
                "{},{elapsed},{label},{status},{status},{ok}\n",
                end_ms - elapsed as i64
            ));
            sent += 1;
        }
        let req = axum::http::Request::post("/api/v2/write?bucket=k6&precision=ns")
            .body(axum::body::Body::from(body))
            .unwrap();
        assert_eq!(
            app.send(req).await.status,
            axum::http::StatusCode::NO_CONTENT
        );
        if w % 60 == 0 || w == 239 {
            let runs = app.get("/api/v1/runs").await.json();
            assert_eq!(runs["runs"][0]["count"], sent, "stored when acknowledged");
        }
    }
    let id = app.get("/api/v1/runs").await.json()["runs"][0]["id"]
        .as_i64()
        .unwrap();
    assert!(app.state.live_runs.end(id).await);
    app.state.live_runs.tick().await;
    let reply = app.import("name=file", jtl.into_bytes()).await;
    assert_eq!(
        reply.status,
        axum::http::StatusCode::CREATED,
        "{}",
        reply.text()
    );
    let file_id = reply.json()["runs"][0]["id"]
        .as_i64()
        .or_else(|| reply.json()["id"].as_i64())
        .unwrap_or_else(|| panic!("no run id in {}", reply.text()));

    let live = app.get(&format!("/api/v1/runs/{id}")).await.json();
    let file = app.get(&format!("/api/v1/runs/{file_id}")).await.json();
    assert_eq!(live["status"], "complete");
    assert_eq!(live["overall"]["count"], sent);
    assert_eq!(live["overall"], file["overall"]);
    assert_eq!(live["labels"], file["labels"]);
    for part in ["timeseries", "errors"] {
        let a = app.get(&format!("/api/v1/runs/{id}/{part}")).await.json();
        let b = app
            .get(&format!("/api/v1/runs/{file_id}/{part}"))
            .await
            .json();
        assert_eq!(a, b, "{part}");
    }
    let series = app
        .get(&format!("/api/v1/runs/{id}/timeseries"))
        .await
        .json();
    assert!(
        series["count"].as_array().unwrap().len() > 1000,
        "{} points in the series over 2 h",
        series["count"].as_array().unwrap().len()
    );
}
