//! Outbound requests under the egress policy, end to end — with addresses of this machine
//! only: `0.0.0.0`, harrier's own port, a name a stub resolver maps to a denied loopback
//! address, redirects to those. Every listener here is on 127.0.0.x and counts the
//! connections it accepts, so "refused" means "never connected", not "failed later".

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use harrier::app;
use harrier::domain::egress::{EgressConfig, EgressPolicy};
use harrier::services::egress::{Egress, Lookup, Outbound};
use harrier::services::scrape::scrape_once;
use harrier::store::TargetSpec;
use serde_json::json;

use crate::alerts::send_json;
use crate::helpers::{TestApp, spawn_app};

/// A loopback HTTP server on `ip` that counts connections and answers each with `answer`
/// (`{self}` in it stands for its own address).
async fn counting_server(ip: &str, answer: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut sock, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            // The whole request head before answering: closing with part of it unread
            // resets the connection, and a client may then send the request again.
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = sock.write_all(answer.as_bytes()).await;
            let _ = sock.shutdown().await;
        }
    });
    (addr, count)
}

const OK_METRICS: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";

/// A server answering `302 Found` to `location`.
async fn redirecting_server(location: String) -> (SocketAddr, Arc<AtomicUsize>) {
    let answer: &'static str = Box::leak(
        format!("HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .into_boxed_str(),
    );
    counting_server("127.0.0.1", answer).await
}

async fn target(app: &TestApp, url: &str) -> harrier::store::TargetRow {
    let spec = TargetSpec {
        name: format!("t{}", url.len()),
        url: url.into(),
        kind: "prometheus".into(),
        interval_s: 15.0,
        timeout_s: 5.0,
        labels: BTreeMap::new(),
    };
    app.state
        .store
        .upsert_target(&spec, "api", 0)
        .await
        .unwrap()
}

/// A stub resolver: `rebound.test` is 127.0.0.3.
fn stub_lookup() -> Lookup {
    Arc::new(|host: String| {
        Box::pin(async move {
            match host.as_str() {
                "rebound.test" => Ok(vec!["127.0.0.3".parse::<IpAddr>().unwrap()]),
                _ => Err(std::io::Error::other(format!(
                    "{host}: unknown to the stub"
                ))),
            }
        })
    })
}

#[tokio::test]
async fn a_name_resolving_to_a_denied_address_is_never_connected_to() {
    let app = spawn_app().await;
    let (addr, hits) = counting_server("127.0.0.3", OK_METRICS).await;
    let t = target(
        &app,
        &format!("http://rebound.test:{}/metrics", addr.port()),
    )
    .await;

    // Denied: the resolver hook drops the address, nothing connects.
    let deny: EgressConfig = toml::from_str(r#"deny = ["127.0.0.3/32"]"#).unwrap();
    let denied = Egress::with_lookup(EgressPolicy::from_config(&deny).unwrap(), stub_lookup());
    let err = scrape_once(&Outbound::scrapes(&denied), &t)
        .await
        .err()
        .expect("refused");
    assert!(
        err.contains("egress policy") && err.contains("127.0.0.3"),
        "{err}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "no connection was made");

    // The same name under the default policy is scraped: the stub and server work.
    let open = Egress::with_lookup(EgressPolicy::default(), stub_lookup());
    scrape_once(&Outbound::scrapes(&open), &t)
        .await
        .expect("scraped");
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // A name on harrier's own port resolving to harrier's own address: refused before
    // any connection (the name is looked up first).
    open.add_own_addr(addr);
    let err = scrape_once(&Outbound::scrapes(&open), &t)
        .await
        .err()
        .expect("refused");
    assert!(err.contains("own listen address"), "{err}");
    assert_eq!(hits.load(Ordering::SeqCst), 1, "no second connection");
}

/// Serves `app` on 127.0.0.1:0; returns its address and a stop switch.
async fn serve(app: &TestApp) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(app::serve(listener, app.state.clone(), async move {
        let _ = stop_rx.await;
    }));
    (addr, stop_tx)
}

#[tokio::test]
async fn scrapes_refuse_unspecified_own_and_redirected_destinations() {
    let app = spawn_app().await;
    let (own, _stop) = serve(&app).await;
    // The API refuses such a target outright; a name is decided at each scrape.
    let r = app
        .send(
            axum::http::Request::post("/api/v1/targets")
                .header("content-type", "application/json")
                .body(axum::body::Body::from(
                    json!({"name": "md", "url": "http://[::ffff:169.254.169.254]/latest"})
                        .to_string(),
                ))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("link-local"), "{}", r.text());
    let (sink, sink_hits) = counting_server("127.0.0.1", OK_METRICS).await;
    let client = Outbound::scrapes(&app.state.egress);
    let port = own.port();
    for (url, why) in [
        (
            format!("http://0.0.0.0:{}/metrics", sink.port()),
            "unspecified",
        ),
        (format!("http://0:{}/metrics", sink.port()), "unspecified"),
        (
            format!("http://[::]:{}/metrics", sink.port()),
            "unspecified",
        ),
        (
            format!("http://127.0.0.1:{port}/metrics"),
            "own listen address",
        ),
        (
            format!("http://2130706433:{port}/metrics"),
            "own listen address",
        ),
        (
            format!("http://0x7f.1:{port}/metrics"),
            "own listen address",
        ),
        (
            format!("http://017700000001:{port}/metrics"),
            "own listen address",
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/metrics"),
            "own listen address",
        ),
        (
            format!("http://localhost:{port}/metrics"),
            "own listen address",
        ),
    ] {
        let t = target(&app, &url).await;
        let err = scrape_once(&client, &t).await.err().expect(&url);
        assert!(err.contains(why), "{url}: {err}");
    }
    assert_eq!(sink_hits.load(Ordering::SeqCst), 0);

    // Redirects are followed only to allowed places.
    for location in [
        format!("http://0.0.0.0:{}/metrics", sink.port()),
        format!("http://127.0.0.1:{port}/api/v1/runs"),
        format!("http://localhost:{port}/metrics"),
    ] {
        let (redir, redir_hits) = redirecting_server(location.clone()).await;
        let t = target(&app, &format!("http://127.0.0.1:{}/metrics", redir.port())).await;
        let err = scrape_once(&client, &t).await.err().expect(&location);
        assert!(
            err.contains("redirect") || err.contains("egress"),
            "{location}: {err}"
        );
        // Once by this scrape; the server's own scrape loop may also pick up the target
        // just added (on PostgreSQL a notification wakes it at once): at most twice.
        let hits = redir_hits.load(Ordering::SeqCst);
        assert!((1..=2).contains(&hits), "{location}: {hits} requests");
    }
    assert_eq!(
        sink_hits.load(Ordering::SeqCst),
        0,
        "no redirect reached the sink"
    );
    // An allowed redirect is followed.
    let (redir, _) = redirecting_server(format!("http://127.0.0.1:{}/metrics", sink.port())).await;
    let t = target(&app, &format!("http://127.0.0.1:{}/metrics", redir.port())).await;
    scrape_once(&client, &t).await.expect("followed");
    assert_eq!(sink_hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn notifications_refuse_refused_destinations_and_follow_no_redirect() {
    let app = spawn_app().await;
    let (own, _stop) = serve(&app).await;
    let (sink, sink_hits) = counting_server("127.0.0.1", OK_METRICS).await;
    let (redir, redir_hits) =
        redirecting_server(format!("http://127.0.0.1:{}/hook", sink.port())).await;
    let port = own.port();
    let cases = [
        (
            format!("http://0.0.0.0:{}/hook", sink.port()),
            "unspecified",
        ),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/api/v1/runs"),
            "own listen address",
        ),
        (
            format!("http://localhost:{port}/api/v1/runs"),
            "own listen address",
        ),
        (format!("http://127.0.0.1:{}/hook", redir.port()), "302"),
    ];
    for (i, (url, why)) in cases.iter().enumerate() {
        let name = format!("c{i}");
        let r = send_json(
            &app,
            "POST",
            "/api/v1/alert-channels",
            &json!({"name": name, "kind": "webhook", "url": url}),
        )
        .await;
        if why.contains("unspecified") || url.contains("[::ffff") {
            // An address literal the policy refuses is refused when saved…
            assert_eq!(r.status, 400, "{url}: {}", r.text());
            assert_eq!(r.json()["field"], "url");
            assert!(r.text().contains("egress policy"), "{}", r.text());
            // …and when sent, had it been stored before the policy said no.
            let spec = harrier::domain::alerts::channel::ChannelSpec::new(&name, "webhook", url);
            assert!(app.state.store.insert_channel(&spec, 0).await.unwrap());
        } else {
            assert_eq!(r.status, 201, "{url}: {}", r.text());
        }
        let r = send_json(
            &app,
            "POST",
            &format!("/api/v1/alert-channels/{name}/test"),
            &json!({}),
        )
        .await;
        let error = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(error.contains(why), "{url}: {}", r.text());
    }
    assert_eq!(
        redir_hits.load(Ordering::SeqCst),
        1,
        "the webhook was sent once"
    );
    assert_eq!(
        sink_hits.load(Ordering::SeqCst),
        0,
        "its redirect was not followed"
    );
    let runs = app.get("/api/v1/runs").await.json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 0);
}
