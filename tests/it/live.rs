//! The websocket on a real socket: a client connected to `/api/v1/live` hears of an import.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use harrier::app;
use tokio_tungstenite::tungstenite::Message;

use crate::helpers::{fixture, spawn_app};

async fn next_json<S>(ws: &mut S, want: &str) -> serde_json::Value
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .unwrap_or_else(|_| panic!("no {want} message within 10 s"))
            .expect("socket open")
            .expect("message");
        if let Message::Text(text) = msg {
            let v: serde_json::Value = serde_json::from_str(&text).expect("JSON message");
            if v["type"] == want {
                return v;
            }
        }
    }
}

#[tokio::test]
async fn a_live_client_receives_the_import_event() {
    let test = spawn_app().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app::serve(listener, test.state.clone(), async move {
        let _ = stop_rx.await;
    }));

    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/api/v1/live"))
        .await
        .expect("connect");
    let hello = next_json(&mut ws, "hello").await;
    assert!(hello["server_time_ms"].as_i64().unwrap() > 1_700_000_000_000);

    let client = reqwest::Client::new();
    let res = client
        .post(format!("http://{addr}/api/v1/runs?name=live-one"))
        .body(fixture("edge-cases/EC35/input.jtl"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let id = res.json::<serde_json::Value>().await.unwrap()["runs"][0]["id"]
        .as_i64()
        .unwrap();

    let event = next_json(&mut ws, "run_imported").await;
    assert_eq!(event["run"]["id"], id);
    assert_eq!(event["run"]["name"], "live-one");
    assert_eq!(event["run"]["count"], 19);
    assert_eq!(event["run"]["url"], format!("/console/runs/{id}"));
    let done = next_json(&mut ws, "import_done").await;
    assert_eq!(done["run_ids"][0], id);

    let res = client
        .delete(format!("http://{addr}/api/v1/runs/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(next_json(&mut ws, "run_deleted").await["id"], id);

    // The metrics count the connected client.
    let metrics = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("harrier_websocket_clients"), "{metrics}");

    ws.send(Message::Close(None)).await.ok();
    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("graceful shutdown")
        .unwrap()
        .unwrap();
}

/// A client that does not read falls behind; it gets a resync instead of stalling anyone.
#[tokio::test]
async fn a_slow_client_gets_a_resync_and_never_blocks_publishing() {
    let test = spawn_app().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = test.state.clone();
    let shutdown = state.shutdown.clone();
    let server = tokio::spawn(app::serve(listener, state, std::future::pending()));

    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/api/v1/live"))
        .await
        .expect("connect");
    next_json(&mut ws, "hello").await;
    // Publishing 5,000 events with nobody reading must return at once (it never waits).
    let started = std::time::Instant::now();
    for id in 0..5_000 {
        test.state
            .hub
            .publish(&harrier::services::live::Event::RunDeleted { id });
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    let resync = next_json(&mut ws, "resync").await;
    assert!(resync["reason"].as_str().unwrap().contains("missed"));

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("shutdown")
        .unwrap()
        .unwrap();
}
