//! Sign-in end to end: the sign-in page and session cookie, throttling, tokens in each
//! form tools send them, share links, the audit log, and the command-line side
//! (`harrier user add`, `harrier token create`, `import --server --token`, the start-up
//! refusal on a non-loopback address).

use std::io::Write;
use std::process::{Command, Stdio};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use harrier::domain::auth::{Role, Scope};

use crate::helpers::*;
use crate::permissions::{signed_in, token};

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

fn form(uri: &str, body: &str, cookie: Option<&str>) -> Request<Body> {
    let mut r =
        Request::post(uri).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(c) = cookie {
        r = r.header(header::COOKIE, c);
    }
    r.body(Body::from(body.to_string())).unwrap()
}

fn with_cookie(uri: &str, cookie: &str) -> Request<Body> {
    Request::get(uri)
        .header(header::COOKIE, cookie)
        .body(Body::empty())
        .unwrap()
}

/// `name=value` of a response's `Set-Cookie`, and the whole header.
async fn send_raw(app: &TestApp, req: Request<Body>) -> axum::response::Response {
    use tower::ServiceExt;
    harrier::app::router(app.state.clone())
        .oneshot(req)
        .await
        .unwrap()
}

#[tokio::test]
async fn signing_in_and_out_through_the_console() {
    let app = spawn_app().await;
    // No users: open, and the sign-in page says how to turn it on.
    assert_eq!(app.get("/console/runs").await.status, StatusCode::OK);
    let page = app.get("/console/sign-in").await;
    assert!(page.text().contains("harrier user add"), "{}", page.text());
    // The first user turns sign-in on.
    let _ = signed_in(&app, "ana", Role::Editor).await;
    let r = app.get("/console/runs?sort=name").await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(
        r.location.as_deref(),
        Some("/console/sign-in?next=%2Fconsole%2Fruns%3Fsort%3Dname")
    );
    assert_eq!(
        app.get("/api/v1/runs").await.status,
        StatusCode::UNAUTHORIZED
    );
    // A wrong password: the page again, 401, no cookie.
    let res = send_raw(
        &app,
        form(
            "/console/sign-in",
            "name=ana&password=wrong+horse+battery&next=%2Fconsole%2Fruns",
            None,
        ),
    )
    .await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(res.headers().get(header::SET_COOKIE).is_none());
    // The right one: a session cookie and back where the user was going.
    let res = send_raw(
        &app,
        form(
            "/console/sign-in",
            "name=ana&password=correct+horse+battery&next=%2Fconsole%2Fruns",
            None,
        ),
    )
    .await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()[header::LOCATION], "/console/runs");
    let set = res.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(set.starts_with("harrier_session="), "{set}");
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP on loopback: {set}");
    let cookie = set.split(';').next().unwrap().to_string();
    let page = app.send(with_cookie("/console/runs", &cookie)).await;
    assert_eq!(page.status, StatusCode::OK);
    let who = select_texts(&page.html(), ".whoami");
    assert!(
        who.iter()
            .any(|t| t.contains("ana") && t.contains("editor")),
        "{who:?}"
    );
    // Only its hash is stored.
    let value = cookie.split_once('=').unwrap().1;
    let raw = scalar_raw(
        &app.state.store,
        &format!("SELECT COUNT(*) FROM sessions WHERE id_hash = '{value}'"),
    )
    .await;
    assert_eq!(raw, 0, "the session id itself is not stored");
    // Signing out ends the session: the same cookie no longer works.
    let res = send_raw(&app, form("/console/sign-out", "", Some(&cookie))).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert!(
        res.headers()[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    let again = app.send(with_cookie("/console/runs", &cookie)).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER, "signed out");
    // `next` goes only to a local path.
    let res = send_raw(
        &app,
        form(
            "/console/sign-in",
            "name=ana&password=correct+horse+battery&next=%2F%2Fevil.example%2F",
            None,
        ),
    )
    .await;
    assert_eq!(res.headers()[header::LOCATION], "/console");
}

#[tokio::test]
async fn cookies_behind_https_are_secure_host_cookies() {
    let app = spawn_app_with(|c| {
        c.site = harrier::domain::access::SitePolicy::new(
            "127.0.0.1:7070".parse().unwrap(),
            Some("https://harrier.example.com"),
        )
        .unwrap();
    })
    .await;
    let _ = signed_in(&app, "ana", Role::Viewer).await;
    let res = send_raw(
        &app,
        form(
            "/console/sign-in",
            "name=ana&password=correct+horse+battery",
            None,
        ),
    )
    .await;
    let set = res.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        set.starts_with("__Host-harrier_session=") && set.contains("; Secure"),
        "{set}"
    );
}

#[tokio::test]
async fn five_failures_throttle_the_name_then_429_with_retry_after() {
    let app = spawn_app().await;
    let _ = signed_in(&app, "ana", Role::Viewer).await;
    for i in 0..5 {
        let r = app
            .send(form(
                "/console/sign-in",
                "name=ana&password=not+the+one",
                None,
            ))
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "attempt {i}");
    }
    // Even the right password waits now.
    let res = send_raw(
        &app,
        form(
            "/console/sign-in",
            "name=ana&password=correct+horse+battery",
            None,
        ),
    )
    .await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: i64 = res.headers()[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=300).contains(&retry), "{retry}");
    // Another user is not held up by ana's failures (no client address here).
    let _ = signed_in(&app, "bo", Role::Viewer).await;
    let r = app
        .send(form(
            "/console/sign-in",
            "name=bo&password=correct+horse+battery",
            None,
        ))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
}

/// Issue 27: wrong passwords for ana sent from one address throttle that address (and
/// the pair), never ana herself: she signs in at once from another address. A hundred
/// concurrent bogus sign-ins from one address queue behind each other, not in front of
/// her: her sign-in is answered before most of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_from_one_address_do_not_lock_a_user_out_elsewhere() {
    let app = spawn_app().await;
    let _ = signed_in(&app, "ana", Role::Admin).await;
    let from = |peer: &str, body: &str| {
        let mut req = form("/console/sign-in", body, None);
        let addr: std::net::SocketAddr = format!("{peer}:40000").parse().unwrap();
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(addr));
        req
    };
    for i in 0..6 {
        let r = app
            .send(from("127.0.0.66", "name=ana&password=not+the+one"))
            .await;
        let expected = if i < 5 {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::TOO_MANY_REQUESTS
        };
        assert_eq!(r.status, expected, "attempt {i}");
    }
    // The attacker's address is held up, even with the right password …
    let r = app
        .send(from(
            "127.0.0.66",
            "name=ana&password=correct+horse+battery",
        ))
        .await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    // … ana at her own address is not.
    let r = app
        .send(from("127.0.0.7", "name=ana&password=correct+horse+battery"))
        .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());

    // A flood of concurrent bogus sign-ins from one (new) address.
    let router = harrier::app::router(app.state.clone());
    let mut flood = Vec::new();
    for i in 0..100 {
        let router = router.clone();
        let mut req = form(
            "/console/sign-in",
            &format!("name=nobody{i}&password=x"),
            None,
        );
        let addr: std::net::SocketAddr = "127.0.0.99:40000".parse().unwrap();
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(addr));
        flood.push(tokio::spawn(async move {
            use tower::ServiceExt;
            router.oneshot(req).await.unwrap().status()
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let r = app
        .send(from("127.0.0.8", "name=ana&password=correct+horse+battery"))
        .await;
    // How many of the flood were answered before her: with one shared queue, nearly all.
    let ahead = flood.iter().filter(|f| f.is_finished()).count();
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
    for f in flood {
        let status = f.await.unwrap();
        assert!(
            status == StatusCode::UNAUTHORIZED || status == StatusCode::TOO_MANY_REQUESTS,
            "{status}"
        );
    }
    assert!(
        ahead < 50,
        "a real sign-in waited behind {ahead} of 100 bogus ones from another address"
    );
}

#[tokio::test]
async fn tokens_work_in_each_form_tools_send_and_stop_when_revoked() {
    let app = spawn_app().await;
    let _ = signed_in(&app, "ana", Role::Admin).await;
    let ingest = token(&app, Scope::Ingest).await;
    assert!(ingest.starts_with("hrt_"), "{ingest}");
    // An upload with Authorization: Bearer.
    let r = app
        .send(
            Request::post("/api/v1/runs?name=ci")
                .header(header::AUTHORIZATION, format!("Bearer {ingest}"))
                .body(Body::from(fixture("jmeter/default_props_2.13.jtl")))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    // InfluxDB v2's `Token` header on /api/v2/write, and basic auth on /write (k6, JMeter).
    let line = "http_req_duration,name=home,status=200 value=12.5 1764000000000000000\n";
    let r = app
        .send(
            Request::post("/api/v2/write?bucket=k6&precision=ns")
                .header(header::AUTHORIZATION, format!("Token {ingest}"))
                .body(Body::from(line))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text());
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("k6:{ingest}"));
    let r = app
        .send(
            Request::post("/write?db=k6")
                .header(header::AUTHORIZATION, format!("Basic {basic}"))
                .body(Body::from(line))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text());
    // An ingest token reads nothing.
    let r = app
        .send(
            Request::get("/api/v1/runs")
                .header(header::AUTHORIZATION, format!("Bearer {ingest}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    // Its use is recorded.
    let id: i64 = ingest
        .trim_start_matches("hrt_")
        .split('_')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let row = app.state.store.token_by_id(id).await.unwrap().unwrap();
    assert!(row.last_used_ms.is_some());
    // A wrong secret, then the revoked token: 401 with what to do.
    let (head, _) = ingest.rsplit_once('_').unwrap();
    let wrong = format!("{head}_{}", "0".repeat(64));
    for bad in [wrong.as_str(), "hrt_999_x", "not-a-token"] {
        let r = app
            .send(
                Request::post("/api/v1/runs?name=x")
                    .header(header::AUTHORIZATION, format!("Bearer {bad}"))
                    .body(Body::from(fixture("jmeter/default_props_2.13.jtl")))
                    .unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{bad}");
        assert!(r.text().contains("token"), "{}", r.text());
    }
    // Revoked through the API (the server forgets the checked token at once).
    let admin = signed_in(&app, "root", Role::Admin).await;
    let r = app
        .send(
            Request::delete(format!("/api/v1/tokens/{id}"))
                .header(header::COOKIE, &admin)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text());
    let r = app
        .send(
            Request::post("/api/v1/runs?name=late")
                .header(header::AUTHORIZATION, format!("Bearer {ingest}"))
                .body(Body::from(fixture("jmeter/default_props_2.13.jtl")))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "revoked");
    // The token list never shows secrets or their hashes.
    let list = app.send(with_cookie("/api/v1/tokens", &admin)).await;
    assert_eq!(list.status, StatusCode::OK);
    let hash = harrier::domain::auth::secret_hash(ingest.rsplit_once('_').unwrap().1);
    assert!(
        !list.text().contains(&hash) && !list.text().contains(&ingest),
        "{}",
        list.text()
    );
    assert_eq!(list.json().as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_share_link_shows_its_run_and_nothing_else() {
    let app = spawn_app().await;
    let r = app
        .import(
            "name=before-tuning",
            fixture("jmeter/default_props_2.13.jtl"),
        )
        .await;
    let run = r.json()["runs"][0]["id"].as_i64().unwrap();
    let editor = signed_in(&app, "ed", Role::Editor).await;
    let viewer = signed_in(&app, "vi", Role::Viewer).await;
    let body = format!(r#"{{"run": {run}, "expires_days": 7}}"#);
    let share = |cookie: &str| {
        Request::post("/api/v1/share-links")
            .header(header::COOKIE, cookie)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.clone()))
            .unwrap()
    };
    assert_eq!(app.send(share(&viewer)).await.status, StatusCode::FORBIDDEN);
    let created = app.send(share(&editor)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let path = created.json()["path"].as_str().unwrap().to_string();
    assert!(path.starts_with("/share/hrs_"), "{path}");
    // Anyone with the link sees the run page, without the navigation.
    let page = app.get(&path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text());
    assert!(page.text().contains("before-tuning"));
    assert!(
        select_texts(&page.html(), "nav.nav a").is_empty(),
        "no navigation"
    );
    assert!(page.text().contains("Shared read-only view"));
    let html = page.html();
    for hidden in [
        ".breadcrumbs",
        "#run-edit-form",
        "#baseline-pin",
        "[data-share-run]",
        ".actions",
    ] {
        assert!(
            select_texts(&html, hidden).is_empty(),
            "{hidden} on a shared page"
        );
    }
    // A viewer sees the run without the controls it may not use; an editor with them.
    let viewer_page = app
        .send(with_cookie(&format!("/console/runs/{run}"), &viewer))
        .await
        .html();
    for hidden in ["#run-edit-form", "[data-share-run]"] {
        assert!(
            select_texts(&viewer_page, hidden).is_empty(),
            "{hidden} for a viewer"
        );
    }
    assert!(
        !select_texts(&viewer_page, ".actions").is_empty(),
        "CSV, JSON, compare stay"
    );
    let viewer_runs = app.send(with_cookie("/console/runs", &viewer)).await.html();
    assert!(
        select_texts(&viewer_runs, "#upload-form").is_empty(),
        "no upload for a viewer"
    );
    let editor_page = app
        .send(with_cookie(&format!("/console/runs/{run}"), &editor))
        .await
        .html();
    for shown in ["#run-edit-form", "[data-share-run]"] {
        assert!(
            !select_texts(&editor_page, shown).is_empty(),
            "{shown} for an editor"
        );
    }
    // The page's own figure requests carry the link in a cookie scoped to the run's API.
    let res = send_raw(&app, Request::get(&path).body(Body::empty()).unwrap()).await;
    let set: Vec<String> = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let share_cookie = set
        .iter()
        .find(|c| c.starts_with(&format!("harrier_share_{run}=")))
        .unwrap_or_else(|| panic!("{set:?}"));
    assert!(
        share_cookie.contains(&format!("Path=/api/v1/runs/{run}"))
            && share_cookie.contains("HttpOnly")
    );
    let cookie = share_cookie.split(';').next().unwrap();
    for (uri, want) in [
        (format!("/api/v1/runs/{run}/timeseries"), StatusCode::OK),
        (format!("/api/v1/runs/{run}/distribution"), StatusCode::OK),
        ("/api/v1/runs".to_string(), StatusCode::UNAUTHORIZED),
        ("/console/runs".to_string(), StatusCode::SEE_OTHER),
    ] {
        assert_eq!(
            app.send(with_cookie(&uri, cookie)).await.status,
            want,
            "{uri}"
        );
    }
    let r = app
        .send(
            Request::delete(format!("/api/v1/runs/{run}"))
                .header(header::COOKIE, cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "reads only");
    // The link opens nothing else: as a credential it is refused everywhere.
    let link = path.trim_start_matches("/share/");
    for uri in [
        "/api/v1/runs",
        "/console/runs",
        &format!("/api/v1/runs/{run}"),
    ] {
        let r = app
            .send(
                Request::get(uri)
                    .header(header::AUTHORIZATION, format!("Bearer {link}"))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{uri}");
    }
    // A changed secret and then the revoked link: 404.
    let (head, _) = link.rsplit_once('_').unwrap();
    let forged = format!("/share/{head}_{}", "a".repeat(64));
    assert_eq!(app.get(&forged).await.status, StatusCode::NOT_FOUND);
    let id = created.json()["id"].as_i64().unwrap();
    let r = app
        .send(
            Request::delete(format!("/api/v1/share-links/{id}"))
                .header(header::COOKIE, &editor)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        app.get(&path).await.status,
        StatusCode::NOT_FOUND,
        "revoked"
    );
}

#[tokio::test]
async fn changes_allowed_and_refused_are_in_the_audit_log() {
    let app = spawn_app().await;
    let r = app
        .import("name=doomed", fixture("jmeter/default_props_2.13.jtl"))
        .await;
    let run = r.json()["runs"][0]["id"].as_i64().unwrap();
    let viewer = signed_in(&app, "vi", Role::Viewer).await;
    let editor = signed_in(&app, "ed", Role::Editor).await;
    let admin = signed_in(&app, "ad", Role::Admin).await;
    let del = |cookie: &str| {
        Request::delete(format!("/api/v1/runs/{run}"))
            .header(header::COOKIE, cookie)
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(app.send(del(&viewer)).await.status, StatusCode::FORBIDDEN);
    // A cross-site request is refused before sign-in is looked at, and logged too.
    let cross = Request::delete(format!("/api/v1/runs/{run}"))
        .header(header::COOKIE, &editor)
        .header(header::ORIGIN, "http://evil.example")
        .header("sec-fetch-site", "cross-site")
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.send(cross).await.status, StatusCode::FORBIDDEN);
    assert_eq!(app.send(del(&editor)).await.status, StatusCode::NO_CONTENT);
    // The log is written beside the answer: wait for it.
    let path = format!("/api/v1/runs/{run}");
    let mut entries = Vec::new();
    for _ in 0..100 {
        let list = app.send(with_cookie("/api/v1/audit", &admin)).await;
        assert_eq!(list.status, StatusCode::OK);
        entries = list
            .json()
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["path"] == path.as_str())
            .map(|e| {
                (
                    e["who"].as_str().unwrap().to_string(),
                    e["status"].as_i64().unwrap(),
                )
            })
            .collect();
        if entries.len() == 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    entries.sort();
    assert_eq!(
        entries,
        vec![
            ("ed".to_string(), 204),
            ("unchecked".to_string(), 403),
            ("vi".to_string(), 403)
        ]
    );
    let viewer_reads = app.send(with_cookie("/api/v1/audit", &viewer)).await;
    assert_eq!(viewer_reads.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn an_auth_proxy_signs_people_in_only_from_its_address() {
    let app = spawn_app_with(|c| {
        c.auth_proxy = Some(
            harrier::domain::auth::AuthProxy::from_config(
                &harrier::domain::auth::AuthProxyConfig {
                    header: "X-Forwarded-User".into(),
                    proxies: vec!["127.0.0.1/32".into()],
                    groups_header: Some("X-Forwarded-Groups".into()),
                    editor_groups: vec!["perf".into()],
                    ..Default::default()
                },
            )
            .unwrap(),
        );
    })
    .await;
    let from = |peer: &str, user: Option<&str>, groups: Option<&str>, method: &str, uri: &str| {
        let mut r = Request::builder().method(method).uri(uri);
        if let Some(u) = user {
            r = r.header("x-forwarded-user", u);
        }
        if let Some(g) = groups {
            r = r.header("x-forwarded-groups", g);
        }
        let mut req = r.body(Body::empty()).unwrap();
        let addr: std::net::SocketAddr = format!("{peer}:40000").parse().unwrap();
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(addr));
        req
    };
    // No users, yet sign-in is on: the proxy does it.
    let who = app
        .send(from(
            "127.0.0.1",
            Some("ana"),
            Some("dev, perf"),
            "GET",
            "/api/v1/whoami",
        ))
        .await
        .json();
    assert_eq!(who["kind"], "user");
    assert_eq!(who["name"], "ana");
    assert_eq!(who["role"], "editor");
    assert_eq!(who["sign_in"], true);
    let page = app
        .send(from(
            "127.0.0.1",
            Some("ana"),
            Some("perf"),
            "GET",
            "/console/runs",
        ))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        select_texts(&page.html(), ".whoami")
            .iter()
            .any(|t| t.contains("ana"))
    );
    // The same header from anywhere else is not believed.
    let r = app
        .send(from(
            "127.0.0.2",
            Some("ana"),
            Some("perf"),
            "GET",
            "/api/v1/runs",
        ))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // The proxy without a user: anonymous. A user without an editor group: a viewer.
    let r = app
        .send(from("127.0.0.1", None, None, "GET", "/api/v1/runs"))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = app
        .send(from(
            "127.0.0.1",
            Some("bo"),
            Some("dev"),
            "DELETE",
            "/api/v1/runs/1",
        ))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
}

/// Runs `harrier ARGS` with `stdin`; exit code, stdout, stderr.
pub(crate) fn harrier(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(HARRIER)
        .args(args)
        .env_remove("HARRIER_TOKEN")
        .env_remove("HARRIER_DB")
        .env_remove("HARRIER_DATABASE_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn users_and_tokens_from_the_command_line() {
    if sqlite_only("the commands open the SQLite file the test names") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let db = db.to_str().unwrap();
    let (code, _, err) = harrier(
        &["user", "add", "ana", "--role", "admin", "--db", db],
        "short\n",
    );
    assert_eq!(code, 2, "too short: {err}");
    assert!(err.contains("at least 8"), "{err}");
    let (code, out, err) = harrier(
        &["user", "add", "ana", "--role", "admin", "--db", db],
        "a long passphrase\n",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("sign-in is now on"), "{out}");
    let (code, _, err) = harrier(
        &["user", "add", "ana", "--role", "viewer", "--db", db],
        "x\n",
    );
    assert_eq!(code, 2);
    assert!(err.contains("exists"), "{err}");
    let (code, out, _) = harrier(&["user", "list", "--db", db], "");
    assert_eq!(code, 0);
    assert!(out.contains("ana") && out.contains("admin"), "{out}");
    let (code, token, err) = harrier(
        &[
            "token",
            "create",
            "ci",
            "--scope",
            "ingest",
            "--expires",
            "30d",
            "--db",
            db,
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    let token = token.trim().to_string();
    assert!(token.starts_with("hrt_") && token.len() >= 70, "{token}");
    assert!(err.contains("shown this once"), "{err}");
    let (code, out, _) = harrier(&["token", "list", "--db", db], "");
    assert_eq!(code, 0);
    assert!(
        out.contains("ci") && out.contains("ingest") && !out.contains(&token),
        "{out}"
    );
    let (code, _, err) = harrier(
        &[
            "token",
            "create",
            "x",
            "--scope",
            "ingest",
            "--expires",
            "soon",
            "--db",
            db,
        ],
        "",
    );
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = harrier(
        &["token", "create", "", "--scope", "ingest", "--db", db],
        "",
    );
    assert_eq!(code, 2, "an empty name: {err}");
    let (code, _, err) = harrier(&["user", "remove", "ana", "--db", db], "");
    assert_eq!(code, 2, "the only admin stays: {err}");

    // A server on a non-loopback address starts now that a user exists; and an import
    // through it needs the token.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut serve = Command::new(HARRIER)
        .args(["serve", "--listen", &format!("0.0.0.0:{port}"), "--db", db])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let server = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            up = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/jmeter/default_props_2.13.jtl");
    let file = file.to_str().unwrap();
    let without = harrier(&["import", file, "--server", &server], "");
    // A file bigger than what the server reads of a refused upload: the answer may be lost
    // to the closed connection, and the client still says what is missing.
    let big_path = dir.path().join("big.jtl");
    let small = std::fs::read_to_string(file).unwrap();
    let (head, rows) = small.split_once('\n').unwrap();
    let mut big = format!("{head}\n");
    while big.len() < 12 << 20 {
        big.push_str(rows);
    }
    std::fs::write(&big_path, big).unwrap();
    let big_without = harrier(
        &["import", big_path.to_str().unwrap(), "--server", &server],
        "",
    );
    let wrong = harrier(
        &[
            "import",
            file,
            "--server",
            &server,
            "--token",
            "hrt_nope_0000",
        ],
        "",
    );
    let with = harrier(
        &["import", file, "--server", &server, "--token", &token],
        "",
    );
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(up, "serve on 0.0.0.0 with a user did not start");
    assert_ne!(without.0, 0, "no token: {without:?}");
    assert!(
        without.2.contains("token"),
        "says what is missing: {without:?}"
    );
    assert_ne!(big_without.0, 0, "no token, big file: {big_without:?}");
    assert!(
        big_without.2.contains("token"),
        "says what is missing for a big file too: {big_without:?}"
    );
    assert_ne!(wrong.0, 0, "a wrong token: {wrong:?}");
    assert!(
        wrong.2.contains("token"),
        "says the token is wrong: {wrong:?}"
    );
    assert_eq!(with.0, 0, "{with:?}");
    assert!(
        with.1.contains("imported") || with.1.contains("run"),
        "{with:?}"
    );
}

/// In real Chromium: an editor signs in through the form (the session cookie reaches the
/// websocket and the upload), a page of another origin in the same browser — which now
/// holds the session cookie — tries every request it can send without asking and changes
/// nothing, and signing out sends the browser back to the sign-in page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_editor_signs_in_in_the_browser_and_other_pages_still_change_nothing() {
    use fantoccini::Locator;
    use std::time::Duration;

    use crate::attack::{attack_page, attacker_site, run_attack};
    use crate::browser::{browser, fixture_path, start_harrier};

    if sqlite_only("the commands open the SQLite file the test names") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("harrier.db");
    let dbs = db.to_str().unwrap();
    let (code, _, err) = harrier(
        &["user", "add", "ed", "--role", "editor", "--db", dbs],
        "a long passphrase\n",
    );
    assert_eq!(code, 0, "{err}");
    let (_, read_token, _) = harrier(
        &["token", "create", "reader", "--scope", "write", "--db", dbs],
        "",
    );
    let read_token = read_token.trim().to_string();
    let (_harrier, base) = start_harrier(&db);
    let http = reqwest::Client::new();
    let api = |path: &str| {
        http.get(format!("{base}{path}"))
            .bearer_auth(&read_token)
            .send()
    };
    // A run to attack, imported with the token.
    let jtl = std::fs::read_to_string(fixture_path("edge-cases/EC35/input.jtl")).unwrap();
    let r = http
        .post(format!("{base}/api/v1/runs?name=kept%20run"))
        .bearer_auth(&read_token)
        .body(jtl.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let run_id = r.json::<serde_json::Value>().await.unwrap()["runs"][0]["id"]
        .as_i64()
        .unwrap();

    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));
    client.goto(&format!("{base}/console/runs")).await.unwrap();
    let url = client.current_url().await.unwrap();
    assert_eq!(url.path(), "/console/sign-in", "{url}");
    client
        .find(Locator::Css("#sign-in-name"))
        .await
        .unwrap()
        .send_keys("ed")
        .await
        .unwrap();
    client
        .find(Locator::Css("#sign-in-password"))
        .await
        .unwrap()
        .send_keys("a long passphrase")
        .await
        .unwrap();
    client
        .find(Locator::Css(".sign-in-form button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let who = wait()
        .for_element(Locator::Css(".whoami"))
        .await
        .expect("signed in");
    assert!(who.text().await.unwrap().contains("ed"));
    assert_eq!(client.current_url().await.unwrap().path(), "/console/runs");
    wait()
        .for_element(Locator::Css("#live-status[data-state=\"live\"]"))
        .await
        .expect("the websocket opens with the session");

    // Another origin, in the same signed-in browser.
    let page = attack_page(&base, run_id, &jtl);
    let site = attacker_site("127.0.0.2", page).await;
    let results = run_attack(&client, &format!("http://{site}/")).await;
    assert_ne!(results["ws"], "open", "websocket opened: {results}");
    let runs: serde_json::Value = api("/api/v1/runs").await.unwrap().json().await.unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["name"], "kept run");
    let rules: serde_json::Value = api("/api/v1/alert-rules")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!rules.to_string().contains("EvilRule"), "{rules}");

    // The console's own upload works with the session; then sign out.
    client.goto(&format!("{base}/console/runs")).await.unwrap();
    client
        .find(Locator::Css("#upload-form input[type=file]"))
        .await
        .unwrap()
        .send_keys(fixture_path("edge-cases/EC11/input.jtl").to_str().unwrap())
        .await
        .unwrap();
    client
        .find(Locator::Css("#upload-form button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait()
        .for_element(Locator::Css("#upload-result a[href^=\"/console/runs/\"]"))
        .await
        .expect("the console's upload works when signed in");
    client
        .find(Locator::Css(".whoami button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait()
        .for_element(Locator::Css(".sign-in-form"))
        .await
        .expect("back at sign-in");
    client.goto(&format!("{base}/console/runs")).await.unwrap();
    assert_eq!(
        client.current_url().await.unwrap().path(),
        "/console/sign-in"
    );
    let _ = client.close().await;
}

/// What a fresh-user pass found, each fixed: an exposed server does not fall open when its
/// last user goes; tokens and share links end with the user who made them; the last admin
/// stays; look-alike names are refused and names compare in lowercase; token names without
/// control characters; the audit log names who tried to sign in, cuts long paths and skips
/// anonymous changes to paths that do not exist; share links only to what exists.
#[tokio::test]
async fn fresh_user_findings() {
    let json_req = |method: &str, uri: &str, cookie: &str, body: &str| {
        Request::builder()
            .method(method)
            .uri(uri)
            .header(header::COOKIE, cookie)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap()
    };
    // A server on 0.0.0.0 with no users is not open.
    let exposed = spawn_app_with(|c| c.listen = "0.0.0.0:7070".parse().unwrap()).await;
    assert_eq!(
        exposed.get("/api/v1/runs").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(exposed.get("/api/v1/whoami").await.json()["sign_in"], true);

    let app = spawn_app().await;
    let boss = signed_in(&app, "boss", Role::Admin).await;
    // The only admin cannot be removed.
    let r = app
        .send(json_req("DELETE", "/api/v1/users/boss", &boss, ""))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.text());
    assert!(r.text().contains("only admin"), "{}", r.text());
    // Names: look-alikes refused, case folded.
    let add = |name: &str| {
        json_req(
            "POST",
            "/api/v1/users",
            &boss,
            &format!(r#"{{"name": "{name}", "role": "admin", "password": "long enough pw"}}"#),
        )
    };
    assert_eq!(
        app.send(add("\u{430}na")).await.status,
        StatusCode::BAD_REQUEST
    );
    let r = app.send(add("Temp")).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    assert_eq!(r.json()["name"], "temp");
    assert_eq!(app.send(add("TEMP")).await.status, StatusCode::CONFLICT);
    let temp = match app
        .state
        .auth
        .sign_in("TeMp", "long enough pw", None, harrier::now_ms())
        .await
        .unwrap()
    {
        harrier::services::auth::SignIn::Ok { session, .. } => format!("harrier_session={session}"),
        other => panic!("{other:?}"),
    };
    // Temp makes a token and a share link, then is removed: both stop working.
    let r = app
        .send(json_req(
            "POST",
            "/api/v1/tokens",
            &temp,
            r#"{"name": "temp-tok", "scope": "write"}"#,
        ))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let tok = r.json()["token"].as_str().unwrap().to_string();
    let bad_name = app
        .send(json_req(
            "POST",
            "/api/v1/tokens",
            &temp,
            "{\"name\": \"a\\u001b[31mb\", \"scope\": \"read\"}",
        ))
        .await;
    assert_eq!(
        bad_name.status,
        StatusCode::BAD_REQUEST,
        "{}",
        bad_name.text()
    );
    let imported = app
        .send(
            Request::post("/api/v1/runs?name=r")
                .header(header::AUTHORIZATION, format!("Bearer {tok}"))
                .body(Body::from(fixture("jmeter/default_props_2.13.jtl")))
                .unwrap(),
        )
        .await;
    assert_eq!(imported.status, StatusCode::CREATED);
    let run = imported.json()["runs"][0]["id"].as_i64().unwrap();
    // Share links only to what exists.
    let share = |body: String| json_req("POST", "/api/v1/share-links", &temp, &body);
    assert_eq!(
        app.send(share(format!(r#"{{"compare": [{run}, 999]}}"#)))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.send(share(r#"{"scenario": "nope"}"#.into()))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let link = app.send(share(format!(r#"{{"run": {run}}}"#))).await.json()["path"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(app.get(&link).await.status, StatusCode::OK);
    let r = app
        .send(json_req("DELETE", "/api/v1/users/Temp", &boss, ""))
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text());
    let r = app
        .send(
            Request::get("/api/v1/runs")
                .header(header::AUTHORIZATION, format!("Bearer {tok}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::UNAUTHORIZED,
        "the removed user's token: {}",
        r.text()
    );
    assert_eq!(
        app.get(&link).await.status,
        StatusCode::NOT_FOUND,
        "their share link"
    );

    // The audit log: who tried to sign in; long paths cut; anonymous junk not logged.
    let _ = app
        .send(form(
            "/console/sign-in",
            "name=Boss&password=nope+nope+nope",
            None,
        ))
        .await;
    let long = format!("/api/v1/runs/{}", "9".repeat(2000));
    assert!(
        app.send(json_req("DELETE", &long, &boss, ""))
            .await
            .status
            .is_client_error()
    );
    for i in 0..20 {
        let r = app
            .send(
                Request::post(format!("/flood/{i}"))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND);
    }
    let mut rows = Vec::new();
    for _ in 0..100 {
        rows = app.state.store.list_audit(None, 100).await.unwrap();
        if rows.iter().any(|r| r.who == "sign-in:boss")
            && rows.iter().any(|r| r.path.ends_with('…'))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        rows.iter()
            .any(|r| r.who == "sign-in:boss" && r.status == 401),
        "{rows:?}"
    );
    let cut = rows
        .iter()
        .find(|r| r.path.ends_with('…'))
        .expect("the long path, cut");
    assert!(cut.path.len() <= 304, "{}", cut.path.len());
    assert!(
        !rows.iter().any(|r| r.path.starts_with("/flood/")),
        "anonymous junk is not logged"
    );
}

/// A checked token is believed for `CREDENTIAL_TTL_MS` without asking the database: a
/// revocation made elsewhere (the CLI, another replica) applies within that time, one made
/// through this server at once.
#[tokio::test]
async fn checked_tokens_are_believed_five_seconds_then_asked_again() {
    let app = spawn_app().await;
    let _ = signed_in(&app, "ana", Role::Admin).await;
    let t = token(&app, Scope::Read).await;
    let id: i64 = t
        .trim_start_matches("hrt_")
        .split('_')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let mut headers = axum::http::HeaderMap::new();
    headers.insert(
        header::AUTHORIZATION,
        format!("Bearer {t}").parse().unwrap(),
    );
    let auth = &app.state.auth;
    let t0 = harrier::now_ms();
    assert!(auth.resolve(&headers, None, t0).await.is_ok());
    // Revoked in the database by someone else.
    assert!(app.state.store.revoke_token(id, t0).await.unwrap());
    let ttl = harrier::services::auth::CREDENTIAL_TTL_MS;
    assert!(
        auth.resolve(&headers, None, t0 + ttl - 1).await.is_ok(),
        "still believed"
    );
    assert!(
        auth.resolve(&headers, None, t0 + ttl).await.is_err(),
        "asked again: revoked"
    );
    // Through this server: at once.
    let t2 = token(&app, Scope::Read).await;
    headers.insert(
        header::AUTHORIZATION,
        format!("Bearer {t2}").parse().unwrap(),
    );
    let now = harrier::now_ms();
    assert!(auth.resolve(&headers, None, now).await.is_ok());
    let id2: i64 = t2
        .trim_start_matches("hrt_")
        .split('_')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(app.state.store.revoke_token(id2, now).await.unwrap());
    auth.forget_checked();
    assert!(auth.resolve(&headers, None, now + 1).await.is_err());
}
