//! The permission table: every route of the router × every kind of caller.
//!
//! Walks `harrier::app::routes()` (the table the router is built from) with anonymous,
//! viewer, operator, editor and admin sessions, ingest/read/operate/write tokens and a share link, and
//! checks each answer against the grid of `domain::auth`: allowed → neither 401 nor 403
//! (nor a redirect to sign-in); refused → 401 / a redirect to sign-in for callers without
//! credentials, 403 for the others. Also: no route is built outside the table, and no
//! state-changing route is open to a Viewer.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use harrier::domain::auth::{Permission, Principal, Role, Scope, ShareSubject};

use crate::helpers::*;

/// Who calls, and how the request carries it.
#[derive(Clone)]
pub struct Caller {
    pub label: &'static str,
    pub principal: Principal,
    /// `Cookie` or `Authorization` header, if any.
    pub header: Option<(header::HeaderName, String)>,
}

/// Adds a user of `role` and signs them in; the session cookie's `Cookie` header value.
pub async fn signed_in(app: &TestApp, name: &str, role: Role) -> String {
    let hash = harrier::services::auth::hash_password("correct horse battery").unwrap();
    app.state
        .store
        .insert_user(name, role.as_str(), &hash, harrier::now_ms())
        .await
        .unwrap()
        .expect("new user");
    app.state.auth.recheck();
    match app
        .state
        .auth
        .sign_in(name, "correct horse battery", None, harrier::now_ms())
        .await
        .unwrap()
    {
        harrier::services::auth::SignIn::Ok { session, .. } => {
            format!("{}={session}", app.state.auth.cookie_name())
        }
        other => panic!("sign-in of {name}: {other:?}"),
    }
}

/// A token of `scope`: its text.
pub async fn token(app: &TestApp, scope: Scope) -> String {
    harrier::http::api::access::issue_token(&app.state, &format!("t-{scope}"), scope, 1, "test")
        .await
        .unwrap()
        .1
}

fn concrete(path: &str) -> String {
    path.replace("{id}", "1")
        .replace("{name}", "x")
        .replace("{*path}", "harrier.css")
        .replace("{link}", "hrs_1_00")
}

#[tokio::test]
async fn every_route_answers_each_caller_as_the_table_says() {
    let app = spawn_app().await;
    let r = app
        .import("name=shared", fixture("jmeter/default_props_2.13.jtl"))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let cookie = |v: String| Some((header::COOKIE, v));
    let bearer = |t: String| Some((header::AUTHORIZATION, format!("Bearer {t}")));
    let user = |role| Principal::User {
        id: 0,
        name: String::new(),
        role,
    };
    let tok = |scope| Principal::Token {
        id: 0,
        name: String::new(),
        scope,
    };
    // Destructive callers last: the run and users the others reach stay in place.
    let callers = vec![
        Caller {
            label: "anonymous",
            principal: Principal::Anonymous,
            header: None,
        },
        Caller {
            label: "viewer",
            principal: user(Role::Viewer),
            header: cookie(signed_in(&app, "vera", Role::Viewer).await),
        },
        Caller {
            label: "ingest token",
            principal: tok(Scope::Ingest),
            header: bearer(token(&app, Scope::Ingest).await),
        },
        Caller {
            label: "read token",
            principal: tok(Scope::Read),
            header: bearer(token(&app, Scope::Read).await),
        },
        Caller {
            label: "share link",
            principal: Principal::Share {
                id: 0,
                subject: ShareSubject::Run { id: 1 },
            },
            header: bearer(share_link(&app).await),
        },
        Caller {
            label: "operator",
            principal: user(Role::Operator),
            header: cookie(signed_in(&app, "olga", Role::Operator).await),
        },
        Caller {
            label: "operate token",
            principal: tok(Scope::Operate),
            header: bearer(token(&app, Scope::Operate).await),
        },
        Caller {
            label: "editor",
            principal: user(Role::Editor),
            header: cookie(signed_in(&app, "ed", Role::Editor).await),
        },
        Caller {
            label: "write token",
            principal: tok(Scope::Write),
            header: bearer(token(&app, Scope::Write).await),
        },
        Caller {
            label: "admin",
            principal: user(Role::Admin),
            header: cookie(signed_in(&app, "ada", Role::Admin).await),
        },
    ];
    let table = harrier::app::routes().table().to_vec();
    assert!(
        table.len() > 60,
        "the whole surface is in the table: {}",
        table.len()
    );
    let mut checked = 0;
    for caller in &callers {
        for entry in &table {
            // Signing out ends the very session the walk uses (tested on its own).
            if entry.path == "/console/sign-out" {
                continue;
            }
            let uri = concrete(entry.path);
            let mut req = Request::builder().method(entry.method.clone()).uri(&uri);
            if let Some((name, value)) = &caller.header {
                req = req.header(name, value);
            }
            let body = if entry.method == Method::GET || entry.method == Method::DELETE {
                Body::empty()
            } else {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from("{}")
            };
            let reply = app.send(req.body(body).unwrap()).await;
            let to_sign_in = reply
                .location
                .as_deref()
                .is_some_and(|l| l.starts_with("/console/sign-in"));
            let what = format!(
                "{} {} {uri} ({:?}) → {} {}",
                caller.label,
                entry.method,
                entry.permission,
                reply.status,
                reply.text().chars().take(200).collect::<String>()
            );
            assert_ne!(
                reply.status,
                StatusCode::METHOD_NOT_ALLOWED,
                "in the table, not routed: {what}"
            );
            if caller.principal.may(entry.permission) {
                assert!(
                    reply.status != StatusCode::UNAUTHORIZED
                        && reply.status != StatusCode::FORBIDDEN
                        && !to_sign_in,
                    "allowed but refused: {what}"
                );
            } else if matches!(
                caller.principal,
                Principal::Anonymous | Principal::Share { .. }
            ) {
                assert!(
                    reply.status == StatusCode::UNAUTHORIZED
                        || (to_sign_in && reply.status == StatusCode::SEE_OTHER),
                    "should ask for sign-in: {what}"
                );
            } else {
                assert_eq!(
                    reply.status,
                    StatusCode::FORBIDDEN,
                    "should be forbidden: {what}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 400, "{checked} requests");
}

/// A share link of run 1, as its text.
async fn share_link(app: &TestApp) -> String {
    let admin = signed_in(app, "sharer", Role::Editor).await;
    let r = app
        .send(
            Request::post("/api/v1/share-links")
                .header(header::COOKIE, admin)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(r#"{"run": 1}"#))
                .unwrap(),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    r.json()["path"]
        .as_str()
        .unwrap()
        .trim_start_matches("/share/")
        .to_string()
}

#[test]
fn no_route_is_built_outside_the_table_and_no_change_is_open() {
    let table = harrier::app::routes().table().to_vec();
    // Only state-free pages may be changed without a role: signing in and out.
    for e in &table {
        if e.method != Method::GET {
            let ok = e.permission >= Permission::Ingest
                || matches!(e.path, "/console/sign-in" | "/console/sign-out");
            assert!(
                ok,
                "{} {} is open to a Viewer ({:?})",
                e.method, e.path, e.permission
            );
        }
    }
    let mut seen = std::collections::HashSet::new();
    for e in &table {
        assert!(
            seen.insert((e.method.clone(), e.path)),
            "twice: {} {}",
            e.method,
            e.path
        );
    }
    // Every router is built by the table: no `Router::new()` (or `.nest`) elsewhere.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("server");
    let mut stack = vec![root];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                if path.ends_with("http/table.rs") {
                    continue;
                }
                for needle in [
                    "Router::new()",
                    ".nest(",
                    ".nest_service(",
                    ".route_service(",
                ] {
                    assert!(
                        !text.contains(needle),
                        "{} builds routes outside the table ({needle})",
                        path.display()
                    );
                }
            }
        }
    }
    assert!(files > 50, "{files} source files read");
}

/// Issue 27: `POST /api/v1/runs?replace=ID` overwrites a stored run, so an ingest token
/// (documented as adding data only) is refused with 403 — as a query parameter and as a
/// multipart field — and the run stays as it was; a write token may replace it.
#[tokio::test]
async fn an_ingest_token_adds_runs_but_cannot_replace_one() {
    let app = spawn_app().await;
    let r = app
        .import("name=kept", fixture("jmeter/default_props_2.13.jtl"))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let id = r.json()["runs"][0]["id"].as_i64().unwrap();
    let before = app.get(&format!("/api/v1/runs/{id}")).await.json()["overall"]["count"].clone();
    assert!(before.as_u64().unwrap() > 1);
    // Sign-in on: a user exists.
    let _ = signed_in(&app, "ed", Role::Editor).await;
    let ingest = format!("Bearer {}", token(&app, Scope::Ingest).await);
    let write = format!("Bearer {}", token(&app, Scope::Write).await);
    let reader = format!("Bearer {}", token(&app, Scope::Read).await);
    let small = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,bytes,grpThreads,allThreads\n1700000000000,5,GET /,200,OK,T 1-1,text,true,10,1,1\n";
    let post = |uri: String, auth: &str, body: String, content_type: &str| {
        Request::post(uri)
            .header(header::AUTHORIZATION, auth)
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap()
    };
    let count = |auth: &str| {
        Request::get(format!("/api/v1/runs/{id}"))
            .header(header::AUTHORIZATION, auth)
            .body(Body::empty())
            .unwrap()
    };
    let r = app
        .send(post(
            format!("/api/v1/runs?replace={id}"),
            &ingest,
            small.into(),
            "text/csv",
        ))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    assert!(r.text().contains("write token"), "{}", r.text());
    let multipart = format!(
        "--b\r\nContent-Disposition: form-data; name=\"replace\"\r\n\r\n{id}\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.jtl\"\r\nContent-Type: text/csv\r\n\r\n{small}\r\n--b--\r\n"
    );
    let r = app
        .send(post(
            "/api/v1/runs".into(),
            &ingest,
            multipart,
            "multipart/form-data; boundary=b",
        ))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text());
    // An ingest token still adds runs.
    let r = app
        .send(post(
            "/api/v1/runs".into(),
            &ingest,
            small.into(),
            "text/csv",
        ))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let r = app.send(count(&reader)).await;
    assert_eq!(r.json()["overall"]["count"], before, "the run is untouched");
    let r = app
        .send(post(
            format!("/api/v1/runs?replace={id}"),
            &write,
            small.into(),
            "text/csv",
        ))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let r = app.send(count(&reader)).await;
    assert_eq!(r.json()["overall"]["count"], 1, "a write token replaces it");
}
