//! Single sign-on with OpenID Connect, end to end: a real `harrier serve` with an `[oidc]`
//! section, a local OpenID Connect provider (PyPI's `oidc-provider-mock`, which
//! `scripts/test.sh` installs) and a plain HTTP client that keeps cookies and follows
//! redirects by hand, as a browser would. Everything on 127.0.0.1.
//!
//! Asserted: the sign-in page offers the provider; a person in the editors' group is
//! signed in as an editor (whoami), may import a run and may not read the audit log; one in
//! the admins' group is an admin; one in no mapped group is refused with a message; a
//! replayed, forged or other browser's `state` and a provider's refusal land on the
//! sign-in page and sign nobody in; the user is marked as a single sign-on user without a
//! password; every callback is in the audit log.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::helpers::*;
use crate::skip::{Kind, skip};

const HARRIER: &str = env!("CARGO_BIN_EXE_harrier");

/// A free port on 127.0.0.1 (bound and let go: the process started next takes it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The provider on `127.0.0.1:{port}`, once its discovery document answers; `Err` says
/// why it could not be started.
async fn start_provider(http: &reqwest::Client) -> Result<(Running, String), String> {
    let port = free_port();
    let child = Command::new("python3")
        .args([
            "-m",
            "oidc_provider_mock",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--require-registration",
            "--require-nonce",
        ])
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("python3 could not be run: {e}"))?;
    let mut running = Running(child);
    let issuer = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = running.0.try_wait() {
            return Err(format!(
                "python3 -m oidc_provider_mock exited with {status} (pip install oidc-provider-mock)"
            ));
        }
        if let Ok(r) = http
            .get(format!("{issuer}/.well-known/openid-configuration"))
            .send()
            .await
            && r.status().is_success()
        {
            return Ok((running, issuer));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("the provider did not answer within 20 s".into())
}

/// One answer, read whole.
struct Answer {
    status: u16,
    location: Option<String>,
    body: String,
}

/// A browser without a window: one cookie jar per `host:port`, redirects not followed.
struct Browser {
    http: reqwest::Client,
    jar: HashMap<String, HashMap<String, String>>,
}

impl Browser {
    fn new() -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            jar: HashMap::new(),
        }
    }

    fn authority(url: &str) -> String {
        let u = url::Url::parse(url).unwrap();
        format!(
            "{}:{}",
            u.host_str().unwrap(),
            u.port_or_known_default().unwrap()
        )
    }

    fn cookie(&self, url: &str, name: &str) -> Option<String> {
        self.jar.get(&Self::authority(url))?.get(name).cloned()
    }

    fn set_cookie(&mut self, url: &str, name: &str, value: &str) {
        self.jar
            .entry(Self::authority(url))
            .or_default()
            .insert(name.into(), value.into());
    }

    async fn send(&mut self, req: reqwest::RequestBuilder, url: &str) -> Answer {
        let cookies: Vec<String> = self
            .jar
            .get(&Self::authority(url))
            .map(|c| c.iter().map(|(k, v)| format!("{k}={v}")).collect())
            .unwrap_or_default();
        let req = if cookies.is_empty() {
            req
        } else {
            req.header(reqwest::header::COOKIE, cookies.join("; "))
        };
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let location = r
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|l| l.to_str().unwrap().to_string());
        let jar = self.jar.entry(Self::authority(url)).or_default();
        for c in r.headers().get_all(reqwest::header::SET_COOKIE) {
            let c = c.to_str().unwrap();
            let (pair, attrs) = c.split_once(';').unwrap_or((c, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if attrs.contains("Max-Age=0") || value.is_empty() {
                jar.remove(name.trim());
            } else {
                jar.insert(name.trim().to_string(), value.trim().to_string());
            }
        }
        Answer {
            status,
            location,
            body: r.text().await.unwrap(),
        }
    }

    async fn get(&mut self, url: &str) -> Answer {
        let req = self.http.get(url);
        self.send(req, url).await
    }

    async fn post_form(&mut self, url: &str, form: &[(&str, &str)]) -> Answer {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let req = self
            .http
            .post(url)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body);
        self.send(req, url).await
    }
}

/// The whole flow by hand up to the provider's answer: harrier's start link, the
/// provider's authorization form submitted for `subject` (or denied), and the callback
/// URL the provider sends the browser to (not yet followed).
async fn to_callback(b: &mut Browser, harrier: &str, subject: Option<&str>) -> String {
    let start = b
        .get(&format!("{harrier}/auth/oidc/start?next=%2Fconsole%2Fruns"))
        .await;
    assert_eq!(start.status, 303, "{}", start.body);
    let authorize = start.location.unwrap();
    assert!(
        authorize.contains("code_challenge_method=S256") && authorize.contains("nonce="),
        "PKCE and a nonce are sent: {authorize}"
    );
    let form = b.get(&authorize).await;
    assert_eq!(form.status, 200, "the provider's form: {}", form.body);
    let answer = match subject {
        Some(sub) => b.post_form(&authorize, &[("sub", sub)]).await,
        None => b.post_form(&authorize, &[("action", "deny")]).await,
    };
    assert!(
        (300..400).contains(&answer.status),
        "the provider sends the browser back: {} {}",
        answer.status,
        answer.body
    );
    let callback = answer.location.unwrap();
    assert!(
        callback.starts_with(&format!("{harrier}/auth/oidc/callback?")),
        "{callback}"
    );
    callback
}

/// A user of the provider with these claims (its `PUT /users/{sub}`).
async fn provider_user(http: &reqwest::Client, issuer: &str, sub: &str, claims: serde_json::Value) {
    let r = http
        .put(format!("{issuer}/users/{sub}"))
        .json(&claims)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}

async fn whoami(b: &mut Browser, harrier: &str) -> serde_json::Value {
    let r = b.get(&format!("{harrier}/api/v1/whoami")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_sign_on_maps_groups_to_roles_and_refuses_bad_state() {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let (_provider, issuer) = match start_provider(&http).await {
        Ok(p) => p,
        Err(why) => {
            skip(
                Kind::Tool,
                &format!("no OpenID Connect provider to test against: {why}"),
            );
            return;
        }
    };
    let port = free_port();
    let harrier = format!("http://127.0.0.1:{port}");
    let callback_url = format!("{harrier}/auth/oidc/callback");
    // Registered like any client of a real provider: its redirect URI and a secret.
    let reg: serde_json::Value = http
        .post(format!("{issuer}/oauth2/clients"))
        .json(&serde_json::json!({ "redirect_uris": [callback_url] }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let client_id = reg["client_id"].as_str().unwrap();
    let client_secret = reg["client_secret"].as_str().unwrap();
    provider_user(
        &http,
        &issuer,
        "ana-sub",
        serde_json::json!({"preferred_username": "ana", "email": "ana@example.org", "groups": ["staff", "perf-team"]}),
    )
    .await;
    provider_user(
        &http,
        &issuer,
        "olga-sub",
        serde_json::json!({"preferred_username": "olga", "groups": ["ops"]}),
    )
    .await;
    provider_user(
        &http,
        &issuer,
        "nora-sub",
        serde_json::json!({"preferred_username": "nora", "groups": ["marketing"]}),
    )
    .await;

    let (store, config, _dir) = fresh_store().await;
    let toml = format!(
        r#"
[oidc]
name = "Mock SSO"
issuer = "{issuer}"
client_id = "{client_id}"
client_secret = "{client_secret}"
scopes = ["email", "profile"]

[oidc.groups]
"perf-team" = "editor"
"ops" = "admin"
"#
    );
    let files = tempfile::tempdir().unwrap();
    let config_path = files.path().join("harrier.toml");
    std::fs::write(&config_path, toml).unwrap();
    // On 0.0.0.0 with no user at all: [oidc] counts as sign-in for the start-up rule.
    let mut args = vec![
        "serve".to_string(),
        "--listen".into(),
        format!("0.0.0.0:{port}"),
        "--config".into(),
        config_path.to_str().unwrap().into(),
    ];
    match &config.database_url {
        Some(harrier::store::DatabaseUrl::Postgres(url)) => {
            args.extend(["--database-url".into(), url.clone()])
        }
        _ => args.extend(["--db".into(), config.db.to_str().unwrap().into()]),
    }
    let serve = Running(
        Command::new(HARRIER)
            .args(&args)
            .env_remove("HARRIER_DB")
            .env_remove("HARRIER_DATABASE_URL")
            .env_remove("HARRIER_OIDC_CLIENT_SECRET")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if http
            .get(format!("{harrier}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "harrier serve on 0.0.0.0 with [oidc] did not start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The sign-in page offers the provider, keeping `next`.
    let mut ana = Browser::new();
    let page = ana
        .get(&format!("{harrier}/console/sign-in?next=%2Fconsole%2Fruns"))
        .await;
    let html = scraper::Html::parse_document(&page.body);
    let sel = scraper::Selector::parse("a#sign-in-sso").unwrap();
    let link = html.select(&sel).next().expect("a single sign-on button");
    assert_eq!(
        link.text().collect::<String>().trim(),
        "Sign in with Mock SSO"
    );
    assert_eq!(
        link.value().attr("href"),
        Some("/auth/oidc/start?next=%2Fconsole%2Fruns")
    );
    // Nobody is signed in yet: pages go to the sign-in page.
    let r = ana.get(&format!("{harrier}/console/runs")).await;
    assert_eq!(r.status, 303);

    // An editor by group.
    let callback = to_callback(&mut ana, &harrier, Some("ana-sub")).await;
    let state_cookie = ana.cookie(&harrier, "harrier_oidc").expect("state cookie");
    let done = ana.get(&callback).await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.location.as_deref(), Some("/console/runs"));
    assert!(ana.cookie(&harrier, "harrier_session").is_some());
    assert!(
        ana.cookie(&harrier, "harrier_oidc").is_none(),
        "the state cookie is spent"
    );
    let me = whoami(&mut ana, &harrier).await;
    assert_eq!(me["name"], "ana", "{me}");
    assert_eq!(me["role"], "editor", "{me}");
    let page = ana.get(&format!("{harrier}/console/runs")).await;
    assert_eq!(page.status, 200);
    let import = ana
        .http
        .post(format!("{harrier}/api/v1/runs?name=by-sso"))
        .header(
            reqwest::header::COOKIE,
            format!(
                "harrier_session={}",
                ana.cookie(&harrier, "harrier_session").unwrap()
            ),
        )
        .body(fixture("jmeter/default_props_2.13.jtl"))
        .send()
        .await
        .unwrap();
    assert_eq!(import.status().as_u16(), 201, "an editor imports a run");
    let audit = ana.get(&format!("{harrier}/api/v1/audit")).await;
    assert_eq!(audit.status, 403, "an editor is no admin: {}", audit.body);

    // The same answer again (code and state replayed, even with the old state cookie):
    // refused, and the browser's session stays ana's.
    ana.set_cookie(&harrier, "harrier_oidc", &state_cookie);
    let replay = ana.get(&callback).await;
    assert_eq!(replay.status, 401, "{}", replay.body);
    assert!(
        replay.body.contains("unknown, used already or expired"),
        "{}",
        replay.body
    );
    assert_eq!(whoami(&mut ana, &harrier).await["name"], "ana");

    // A forged state, and another browser bringing a real answer (login CSRF): refused.
    let mut mallory = Browser::new();
    let callback = to_callback(&mut mallory, &harrier, Some("olga-sub")).await;
    let forged = callback.replace("state=", "state=x");
    let r = mallory.get(&forged).await;
    assert_eq!(r.status, 401, "forged state: {}", r.body);
    let mut victim = Browser::new();
    let r = victim.get(&callback).await;
    assert_eq!(r.status, 401, "another browser's sign-on: {}", r.body);
    assert!(victim.cookie(&harrier, "harrier_session").is_none());
    assert_eq!(whoami(&mut victim, &harrier).await["kind"], "anonymous");

    // An admin by group.
    let mut olga = Browser::new();
    let callback = to_callback(&mut olga, &harrier, Some("olga-sub")).await;
    assert_eq!(olga.get(&callback).await.status, 303);
    assert_eq!(whoami(&mut olga, &harrier).await["role"], "admin");

    // In none of the mapped groups: refused (no default_role), with the reason shown.
    let mut nora = Browser::new();
    let callback = to_callback(&mut nora, &harrier, Some("nora-sub")).await;
    let r = nora.get(&callback).await;
    assert_eq!(r.status, 403, "{}", r.body);
    let html = scraper::Html::parse_document(&r.body);
    let alert = select_texts(&html, ".callout.err");
    assert!(
        alert
            .iter()
            .any(|t| t.contains("nora") && t.contains("none of the groups")),
        "{alert:?}"
    );
    assert!(nora.cookie(&harrier, "harrier_session").is_none());
    assert_eq!(whoami(&mut nora, &harrier).await["kind"], "anonymous");

    // The person refuses at the provider.
    let mut deny = Browser::new();
    let callback = to_callback(&mut deny, &harrier, None).await;
    assert!(callback.contains("error=access_denied"), "{callback}");
    let r = deny.get(&callback).await;
    assert_eq!(r.status, 401, "{}", r.body);
    assert!(r.body.contains("did not sign you in"), "{}", r.body);

    // Groups are read at every sign-on: ana, moved to ops, signs on as an admin.
    provider_user(
        &http,
        &issuer,
        "ana-sub",
        serde_json::json!({"preferred_username": "ana", "groups": ["ops"]}),
    )
    .await;
    let callback = to_callback(&mut ana, &harrier, Some("ana-sub")).await;
    assert_eq!(ana.get(&callback).await.status, 303);
    assert_eq!(whoami(&mut ana, &harrier).await["role"], "admin");

    // A single sign-on user has no password.
    let user = store.user_by_name("ana").await.unwrap().unwrap();
    assert_eq!(user.oidc_subject.as_deref(), Some("ana-sub"));
    assert_eq!(user.role, "admin");
    let r = ana
        .post_form(
            &format!("{harrier}/console/sign-in"),
            &[("name", "ana"), ("password", "")],
        )
        .await;
    assert_eq!(r.status, 401, "no password signs an SSO user in");
    assert!(store.user_by_name("nora").await.unwrap().is_none());
    // The admin page marks them.
    let admin = olga.get(&format!("{harrier}/console/admin")).await;
    assert_eq!(admin.status, 200);
    let rows = select_texts(&scraper::Html::parse_document(&admin.body), "tr");
    assert!(
        rows.iter()
            .any(|r| r.contains("olga") && r.contains("admin") && r.contains("single sign-on")),
        "{rows:?}"
    );

    // Every callback is in the audit log (written beside the answer: poll briefly).
    let expected = [
        ("sign-in:ana", 303),
        ("sign-in:olga", 303),
        ("sign-in:nora", 403),
        ("sign-in:oidc", 401),
    ];
    let deadline = Instant::now() + Duration::from_secs(5);
    let rows = loop {
        let rows = store.list_audit(None, 100).await.unwrap();
        let all = expected.iter().all(|(who, status)| {
            rows.iter().any(|a| {
                a.who == *who
                    && a.status == *status
                    && a.method == "GET"
                    && a.path == "/auth/oidc/callback"
                    && a.client.as_deref() == Some("127.0.0.1")
            })
        });
        if all || Instant::now() > deadline {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for (who, status) in expected {
        assert!(
            rows.iter()
                .any(|a| a.who == who && a.status == status && a.path == "/auth/oidc/callback"),
            "{who} {status} in {rows:#?}"
        );
    }
    let refused_state = rows
        .iter()
        .filter(|a| a.who == "sign-in:oidc" && a.status == 401)
        .count();
    assert!(
        refused_state >= 4,
        "replay, forged, other browser, provider's refusal: {rows:#?}"
    );
    drop(serve);
}

/// Store side: a started sign-on can be taken once, and not after its 10 minutes.
#[tokio::test]
async fn oidc_sign_on_state_is_single_use_and_expires() {
    use harrier::domain::oidc::LOGIN_TTL_MS;
    use harrier::store::auth::OidcLoginRow;
    let (store, _config, _dir) = fresh_store().await;
    let row = |hash: &str, at: i64| OidcLoginRow {
        state_hash: hash.into(),
        nonce: "n".into(),
        pkce_verifier: "v".into(),
        redirect_url: "http://127.0.0.1:7070/auth/oidc/callback".into(),
        next: "/console".into(),
        created_at_ms: at,
    };
    let t = 1_700_000_000_000;
    store.insert_oidc_login(&row("a", t)).await.unwrap();
    store.insert_oidc_login(&row("b", t)).await.unwrap();
    assert_eq!(
        store.take_oidc_login("a", t + 1_000).await.unwrap(),
        Some(row("a", t))
    );
    assert_eq!(
        store.take_oidc_login("a", t + 1_000).await.unwrap(),
        None,
        "once"
    );
    assert_eq!(
        store
            .take_oidc_login("b", t + LOGIN_TTL_MS + 1)
            .await
            .unwrap(),
        None,
        "expired"
    );
    // The subject finds its user again; a local user's name is not taken over.
    store
        .insert_user("ana", "admin", "$argon2id$x", t)
        .await
        .unwrap();
    assert!(
        store
            .oidc_user("s-1", "ana", "viewer", t)
            .await
            .unwrap()
            .is_none(),
        "a local user's name"
    );
    let u = store
        .oidc_user("s-2", "bo", "viewer", t)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((u.name.as_str(), u.password_hash.as_str()), ("bo", ""));
    let again = store
        .oidc_user("s-2", "bo-renamed", "editor", t)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.id, again.name.as_str(), again.role.as_str()),
        (u.id, "bo", "editor")
    );
    let local = store.user_by_name("ana").await.unwrap().unwrap();
    assert_eq!(local.oidc_subject, None);
}

/// Discovery goes through the egress policy: an issuer the policy refuses is never asked,
/// and the sign-in page says the provider could not be reached.
#[tokio::test]
async fn oidc_discovery_is_held_to_the_egress_policy() {
    use harrier::domain::egress::{EgressConfig, EgressPolicy};
    use harrier::domain::oidc::{Oidc, OidcConfig};
    // A listener that would answer if it were asked: it must not be.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let asked = tokio::spawn(async move { listener.accept().await.is_ok() });
    let app = spawn_app_with(|c| {
        c.egress = EgressPolicy::from_config(&EgressConfig {
            deny: vec!["127.0.0.0/8".into()],
            ..Default::default()
        })
        .unwrap();
        c.oidc = Some(
            Oidc::from_config(
                &OidcConfig {
                    name: Some("Corp SSO".into()),
                    issuer: issuer.clone(),
                    client_id: "harrier".into(),
                    default_role: Some("viewer".into()),
                    ..Default::default()
                },
                None,
            )
            .unwrap(),
        );
    })
    .await;
    // Sign-in is on with single sign-on alone (no user exists).
    let r = app.get("/api/v1/runs").await;
    assert_eq!(r.status, axum::http::StatusCode::UNAUTHORIZED);
    let r = app.get("/auth/oidc/start?next=/console").await;
    assert_eq!(
        r.status,
        axum::http::StatusCode::BAD_GATEWAY,
        "{}",
        r.text()
    );
    let alert = select_texts(&r.html(), ".callout.err");
    assert!(
        alert
            .iter()
            .any(|t| t.contains("Corp SSO") && t.contains("could not be reached")),
        "{alert:?}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!asked.is_finished(), "the refused issuer was connected to");
    asked.abort();
}

/// The `[oidc]` example of docs/security.md is a configuration harrier accepts, as written.
#[test]
fn the_documented_oidc_example_is_accepted() {
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/security.md")).unwrap();
    let section = page
        .split("## Single sign-on with OIDC")
        .nth(1)
        .expect("the single sign-on section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("its toml example");
    let file: harrier::config::FileConfig = toml::from_str(block).unwrap();
    let oidc = harrier::domain::oidc::Oidc::from_config(file.oidc.as_ref().unwrap(), None).unwrap();
    assert_eq!(oidc.name, "Example SSO");
    assert_eq!(
        oidc.role_for(["staff", "perf-team"]),
        Some(harrier::domain::auth::Role::Editor)
    );
    assert_eq!(oidc.role_for(["visitors"]), None, "refused as documented");
    assert!(
        !format!("{oidc:?}").contains("change-me"),
        "the secret is masked"
    );
}
