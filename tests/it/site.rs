//! No way in from another web page or another name: the Host allowlist (DNS rebinding),
//! cross-site changes refused (CSRF), the websocket's Origin check, the security headers on
//! every answer, and the start-up refusal to serve the network without protection.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use axum::body::Body;
use axum::http::Request;
use futures_util::StreamExt;
use harrier::app;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::browser::Proc;
use crate::helpers::{fixture, spawn_app, spawn_app_with};

const LINE: &str = "http_req_duration,name=home,status=200 value=12.5 1700000000000000000\n";

fn post(uri: &str, headers: &[(&str, &str)], body: impl Into<Body>) -> Request<Body> {
    let mut req = Request::post(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.body(body.into()).unwrap()
}

async fn run_count(test: &crate::helpers::TestApp) -> usize {
    let runs = test.get("/api/v1/runs").await.json();
    runs["runs"].as_array().expect("runs list").len()
}

#[tokio::test]
async fn another_host_name_is_refused_on_every_kind_of_route() {
    let test = spawn_app().await;
    for (method, uri) in [
        ("GET", "/console"),
        ("GET", "/api/v1/runs"),
        ("GET", "/static/harrier.js"),
        ("GET", "/metrics"),
        ("POST", "/write?db=k6"),
        ("DELETE", "/api/v1/runs/1"),
        ("GET", "/no/such/page"),
    ] {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "rebind.example:7070")
            .body(Body::from(LINE))
            .unwrap();
        let res = test.send(req).await;
        assert_eq!(res.status, 421, "{method} {uri}: {}", res.text());
        assert!(
            res.json()["error"]
                .as_str()
                .unwrap()
                .contains("--public-url")
        );
    }
    assert_eq!(
        run_count(&test).await,
        0,
        "the refused write stored nothing"
    );
    for host in [
        "127.0.0.1:7070",
        "localhost:7070",
        "[::1]:7070",
        "127.0.0.9",
    ] {
        let req = Request::get("/api/v1/runs")
            .header("host", host)
            .body(Body::empty())
            .unwrap();
        assert_eq!(test.send(req).await.status, 200, "{host}");
    }
}

#[tokio::test]
async fn public_url_host_and_origin_are_the_servers_own() {
    let test = spawn_app_with(|c| {
        c.public_url = Some("https://harrier.example.com".into());
        c.site =
            harrier::domain::access::SitePolicy::new(c.listen, Some("https://harrier.example.com"))
                .unwrap();
    })
    .await;
    let req = post(
        "/write?db=k6",
        &[
            ("host", "harrier.example.com"),
            ("origin", "https://harrier.example.com"),
            ("sec-fetch-site", "same-origin"),
        ],
        LINE,
    );
    assert_eq!(test.send(req).await.status, 204);
    // Behind a proxy that rewrites Host, an old browser's Origin still matches.
    let req = post(
        "/write?db=k6",
        &[
            ("host", "127.0.0.1:7070"),
            ("origin", "https://harrier.example.com"),
        ],
        LINE,
    );
    assert_eq!(test.send(req).await.status, 204);
    let req = post(
        "/write?db=k6",
        &[
            ("host", "harrier.example.com"),
            ("origin", "https://evil.example"),
        ],
        LINE,
    );
    assert_eq!(test.send(req).await.status, 403);
}

#[tokio::test]
async fn cross_site_changes_are_refused_and_tools_without_origin_still_work() {
    let test = spawn_app().await;
    let host = ("host", "127.0.0.1:7070");
    let jtl = fixture("edge-cases/EC35/input.jtl");
    let refused: Vec<Request<Body>> = vec![
        // A text/plain form of another site posting line protocol.
        post(
            "/write?db=k6",
            &[
                host,
                ("origin", "http://127.0.0.2:8000"),
                ("sec-fetch-site", "cross-site"),
                ("content-type", "text/plain"),
            ],
            LINE,
        ),
        post(
            "/api/v2/write?org=o&bucket=k6&precision=ns",
            &[
                host,
                ("origin", "http://evil.example"),
                ("content-type", "text/plain"),
            ],
            LINE,
        ),
        // Another port of the same host is another origin ("same-site" is not enough).
        post(
            "/api/v1/runs?name=x",
            &[
                host,
                ("origin", "http://127.0.0.1:8000"),
                ("sec-fetch-site", "same-site"),
                ("content-type", "multipart/form-data; boundary=b"),
            ],
            jtl.clone(),
        ),
        post(
            "/api/v1/runs?name=x",
            &[host, ("origin", "null")],
            jtl.clone(),
        ),
        Request::delete("/api/v1/runs/1")
            .header("host", "127.0.0.1:7070")
            .header("sec-fetch-site", "cross-site")
            .body(Body::empty())
            .unwrap(),
        post(
            "/api/v1/alert-rules",
            &[
                host,
                ("origin", "http://127.0.0.2:7070"),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            "name=x",
        ),
    ];
    for req in refused {
        let what = format!("{} {}", req.method(), req.uri());
        let res = test.send(req).await;
        assert_eq!(res.status, 403, "{what}: {}", res.text());
        assert!(
            res.json()["error"].as_str().unwrap().contains("cross-site"),
            "{what}"
        );
    }
    assert_eq!(run_count(&test).await, 0, "nothing was stored");

    // No Origin and no Sec-Fetch-Site: curl, k6, JMeter, `harrier import --server`.
    let res = test.send(post("/write?db=k6", &[host], LINE)).await;
    assert_eq!(res.status, 204, "{}", res.text());
    // The console's own requests: same-origin.
    let res = test
        .send(post(
            "/api/v1/runs?name=own",
            &[
                host,
                ("origin", "http://127.0.0.1:7070"),
                ("sec-fetch-site", "same-origin"),
            ],
            jtl.clone(),
        ))
        .await;
    assert_eq!(res.status, 201, "{}", res.text());
    // An old browser without Sec-Fetch-Site, on the page's own origin.
    let res = test
        .send(post(
            "/api/v1/runs?name=old",
            &[host, ("origin", "http://127.0.0.1:7070")],
            jtl,
        ))
        .await;
    assert_eq!(res.status, 201, "{}", res.text());
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let test = spawn_app().await;
    for uri in ["/console", "/api/v1/runs", "/static/harrier.js", "/nope"] {
        let res = oneshot_get(&test, uri).await;
        let csp = res.headers()["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'self'"), "{uri}: {csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{uri}: {csp}");
        assert!(!csp.contains("unsafe-inline"), "{uri}: {csp}");
        assert_eq!(res.headers()["x-content-type-options"], "nosniff", "{uri}");
        assert_eq!(res.headers()["referrer-policy"], "same-origin", "{uri}");
    }
}

/// `GET uri` through the router, the response unread.
async fn oneshot_get(test: &crate::helpers::TestApp, uri: &str) -> axum::response::Response {
    use tower::ServiceExt;
    app::router(test.state.clone())
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn the_websocket_opens_only_for_its_own_pages_and_tools() {
    let test = spawn_app().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app::serve(listener, test.state.clone(), async move {
        let _ = stop_rx.await;
    }));
    let url = format!("ws://{addr}/api/v1/live");
    let with = |headers: &[(&'static str, String)]| {
        let mut req = url.as_str().into_client_request().unwrap();
        for (k, v) in headers {
            req.headers_mut().insert(*k, v.parse().unwrap());
        }
        req
    };
    for headers in [
        vec![("origin", "http://127.0.0.2:8000".to_string())],
        vec![("origin", format!("http://127.0.0.1:{}", addr.port() + 1))],
        vec![("origin", "null".to_string())],
        vec![("host", format!("rebind.example:{}", addr.port()))],
        vec![
            ("host", format!("rebind.example:{}", addr.port())),
            ("origin", format!("http://rebind.example:{}", addr.port())),
        ],
    ] {
        let err = tokio_tungstenite::connect_async(with(&headers))
            .await
            .expect_err("refused");
        let status = match err {
            tokio_tungstenite::tungstenite::Error::Http(res) => res.status().as_u16(),
            e => panic!("{headers:?}: {e}"),
        };
        assert!(status == 403 || status == 421, "{headers:?}: {status}");
    }
    for headers in [
        vec![],
        vec![("origin", format!("http://{addr}"))],
        vec![
            ("host", format!("localhost:{}", addr.port())),
            ("origin", format!("http://localhost:{}", addr.port())),
        ],
    ] {
        let (mut ws, _) = tokio_tungstenite::connect_async(with(&headers))
            .await
            .unwrap_or_else(|e| panic!("{headers:?}: {e}"));
        let hello = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next())
            .await
            .expect("a hello")
            .expect("open")
            .expect("message");
        assert!(hello.to_text().unwrap().contains("hello"), "{headers:?}");
    }
    let _ = stop_tx.send(());
    let _ = server.await;
}

/// `harrier serve` with `args`: its exit status when it stops within 20 s, else `None`
/// (it is serving) and the line it printed.
fn serve_status(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_harrier"))
        .arg("serve")
        .args(args)
        .arg("--db")
        .arg(dir.path().join("h.db"))
        .env("HARRIER_LOG", "warn")
        .env_remove("HARRIER_INSECURE_NO_AUTH")
        .env_remove("HARRIER_PUBLIC_URL")
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start harrier");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    let _ = BufReader::new(stdout).read_line(&mut line);
    if !line.is_empty() {
        let _ = Proc(child);
        return (None, line);
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn serving_the_network_needs_an_explicit_choice() {
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let (code, stderr) = serve_status(&["--listen", listen]);
        assert_eq!(code, Some(2), "{listen}: {stderr}");
        assert!(
            stderr.contains("refusing to serve on")
                && stderr.contains("--insecure-no-auth")
                && stderr.contains("--listen 127.0.0.1"),
            "{stderr}"
        );
    }
    let (code, line) = serve_status(&["--listen", "0.0.0.0:0", "--insecure-no-auth"]);
    assert_eq!(code, None, "serves with --insecure-no-auth: {line}");
    assert!(line.contains("harrier console: http://"), "{line}");
    let (code, line) = serve_status(&["--listen", "127.0.0.1:0"]);
    assert_eq!(code, None, "loopback serves as before: {line}");
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("harrier.toml");
    std::fs::write(
        &toml,
        "listen = \"0.0.0.0:0\"\n[server]\ninsecure_no_auth = true\n",
    )
    .unwrap();
    let (code, line) = serve_status(&["--config", toml.to_str().unwrap()]);
    assert_eq!(code, None, "insecure_no_auth in harrier.toml: {line}");
    let (code, stderr) = serve_status(&["--listen", "127.0.0.1:0", "--public-url", "ftp://x"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("public_url"), "{stderr}");
}
