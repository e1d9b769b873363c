//! Attacks from other web pages, in real Chromium: a page served from another origin
//! (another loopback address, and another port of harrier's own address) tries every
//! kind of request a browser sends without asking — forms (`text/plain`, urlencoded),
//! background `fetch`es (multipart, `no-cors`), a websocket — and a DNS-rebinding request
//! names another host. Nothing changes and no socket opens, while the console's own
//! upload and live updates work in the same browser. Then hostile strings stored as run
//! names, labels, rule names, silence comments and channel names are shown on every page
//! that shows them: no script of theirs runs.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::{Value, json};

use crate::browser::{browser, cli_import, fixture_path, start_harrier};

/// Serves `page` as HTML to every request on `ip:0` (the attacker's site); returns its
/// address.
pub(crate) async fn attacker_site(ip: &str, page: String) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
        page.len()
    );
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut sock, _)) = listener.accept().await {
            let response = response.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 8192];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(response.as_bytes()).await;
            });
        }
    });
    addr
}

/// The attacker's page against harrier at `base` (`http://127.0.0.1:PORT`): every step
/// records what it saw in `window.results`; `window.results.done` when all have run.
pub(crate) fn attack_page(base: &str, run_id: i64, jtl: &str) -> String {
    let ws = base.replacen("http://", "ws://", 1);
    let jtl = serde_json::to_string(jtl).unwrap();
    format!(
        r#"<!doctype html><html><body>
<iframe name="f1"></iframe><iframe name="f2"></iframe><iframe name="f3"></iframe><iframe name="f4"></iframe>
<form id="plain" method="POST" enctype="text/plain" target="f1" action="{base}/write?db=k6">
<input name="http_req_duration,name=evil,status=200 value" value="1 1700000000000000000"></form>
<form id="plain2" method="POST" enctype="text/plain" target="f2" action="{base}/api/v2/write?org=o&amp;bucket=k6&amp;precision=ns">
<input name="http_req_duration,name=evil2,status=200 value" value="1 1700000000000000000"></form>
<form id="rule" method="POST" target="f3" action="{base}/api/v1/alert-rules">
<input name="name" value="EvilRule"><input name="measure" value="p95_ms"></form>
<form id="multi" method="POST" enctype="multipart/form-data" target="f4" action="{base}/api/v1/runs?name=evil-form">
<textarea name="file">{jtl_text}</textarea></form>
<script>
window.results = {{}};
const r = window.results;
document.getElementById('plain').submit();
document.getElementById('plain2').submit();
document.getElementById('rule').submit();
document.getElementById('multi').submit();
const fd = new FormData();
fd.append('file', new Blob([{jtl}], {{type: 'text/csv'}}), 'evil.jtl');
const steps = [
  fetch('{base}/api/v1/runs?name=evil-fetch', {{method: 'POST', mode: 'no-cors', body: fd}})
    .then(x => r.multipart = 'sent:' + x.type, e => r.multipart = 'error:' + e),
  fetch('{base}/write?db=k6', {{method: 'POST', mode: 'no-cors', body: 'http_req_duration,name=evil3,status=200 value=1 1700000000000000000\n'}})
    .then(x => r.plainFetch = 'sent:' + x.type, e => r.plainFetch = 'error:' + e),
  fetch('{base}/api/v1/runs/{run_id}', {{method: 'DELETE', mode: 'no-cors'}})
    .then(x => r.del = 'sent:' + x.type, e => r.del = 'error:' + e),
  fetch('{base}/api/v1/runs/{run_id}', {{method: 'POST', mode: 'no-cors', body: 'x'}})
    .then(x => r.post = 'sent:' + x.type, e => r.post = 'error:' + e),
  new Promise(done => {{
    r.ws = 'pending'; r.wsMessages = 0;
    let ws;
    try {{ ws = new WebSocket('{ws}/api/v1/live'); }} catch (e) {{ r.ws = 'throw:' + e; done(); return; }}
    ws.onopen = () => {{ r.ws = 'open'; }};
    ws.onmessage = () => {{ r.wsMessages += 1; }};
    ws.onerror = () => {{ if (r.ws === 'pending') r.ws = 'error'; }};
    ws.onclose = () => {{ if (r.ws === 'pending') r.ws = 'closed'; }};
    setTimeout(done, 3000);
  }}),
];
Promise.all(steps).then(() => setTimeout(() => {{ r.done = true; }}, 1000));
</script></body></html>"#,
        jtl_text = jtl_escape_html(&jtl)
    )
}

fn jtl_escape_html(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;")
}

/// Runs the page at `url` in the browser until its steps are done; returns its results.
pub(crate) async fn run_attack(client: &Client, url: &str) -> Value {
    client.goto(url).await.unwrap();
    for _ in 0..100 {
        let r = client
            .execute("return window.results || null;", vec![])
            .await
            .unwrap();
        if r["done"] == true {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the attack page at {url} did not finish");
}

async fn get_json(url: &str) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_other_origins_change_nothing_and_the_console_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let (_harrier, base) = start_harrier(&dir.path().join("harrier.db"));
    let run_id = cli_import(
        &base,
        &fixture_path("edge-cases/EC35/input.jtl"),
        "kept run",
    );
    let jtl = std::fs::read_to_string(fixture_path("edge-cases/EC35/input.jtl")).unwrap();
    let page = attack_page(&base, run_id, &jtl);
    let harrier_port: u16 = base.rsplit(':').next().unwrap().parse().unwrap();
    let other_address = attacker_site("127.0.0.2", page.clone()).await;
    let other_port = attacker_site("127.0.0.1", page).await;
    assert_ne!(other_port.port(), harrier_port);

    let (_driver, client) = browser().await;
    for site in [other_address, other_port] {
        let results = run_attack(&client, &format!("http://{site}/")).await;
        assert_ne!(results["ws"], "open", "{site}: websocket opened: {results}");
        assert_eq!(results["wsMessages"], 0, "{site}: {results}");
        assert!(
            results["del"].as_str().unwrap().starts_with("error"),
            "{site}: a no-cors DELETE is not even sent: {results}"
        );
    }

    // Nothing changed: one run, the same; no rule; no live run.
    let runs = get_json(&format!("{base}/api/v1/runs")).await;
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["id"], run_id);
    assert_eq!(runs[0]["name"], "kept run");
    let rules = get_json(&format!("{base}/api/v1/alert-rules")).await;
    assert!(
        !rules.to_string().contains("EvilRule"),
        "no rule was created: {rules}"
    );

    // A DNS-rebinding request: the right address, another name.
    let http = reqwest::Client::new();
    for req in [
        http.get(format!("{base}/api/v1/runs")),
        http.post(format!("{base}/write?db=k6"))
            .body("http_req_duration,name=rebind,status=200 value=1 1700000000000000000\n"),
        http.delete(format!("{base}/api/v1/runs/{run_id}")),
    ] {
        let res = req
            .header("host", format!("rebind.example:{harrier_port}"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 421);
    }
    let runs = get_json(&format!("{base}/api/v1/runs")).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);

    // The console's own flows in the same browser: live updates and an upload.
    client.goto(&format!("{base}/console/runs")).await.unwrap();
    let wait = || client.wait().at_most(Duration::from_secs(20));
    wait()
        .for_element(Locator::Css("#live-status[data-state=\"live\"]"))
        .await
        .expect("the console's own websocket connects");
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
    let link = wait()
        .for_element(Locator::Css("#upload-result a[href^=\"/console/runs/\"]"))
        .await
        .expect("the console's upload works");
    let href = link.attr("href").await.unwrap().unwrap();
    let id: i64 = href.rsplit('/').next().unwrap().parse().unwrap();
    wait()
        .for_element(Locator::Css(&format!(
            "#runs-table tbody tr[data-run-id=\"{id}\"]"
        )))
        .await
        .expect("the upload arrived over the console's websocket");
    // The console deletes a run of its own (a same-origin DELETE).
    let status = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch('/api/v1/runs/' + arguments[0], {method: 'DELETE'}).then(r => done(r.status), e => done(String(e)));",
            vec![json!(id)],
        )
        .await
        .unwrap();
    assert!(
        status.as_u64().is_some_and(|s| (200..300).contains(&s)),
        "{status}"
    );
    let runs = get_json(&format!("{base}/api/v1/runs")).await;
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1);
    let _ = client.close().await;
}

/// Strings that run script when a page pastes them into HTML or a URL unescaped.
fn hostile(n: u32) -> String {
    format!(
        "</script><script>window.__pwned={n}</script>\"><img src=x onerror=\"window.__pwned={n}\">'><svg onload=window.__pwned={n}>javascript:window.__pwned={n}"
    )
}

/// Whether anything of [`hostile`] ran or became markup on the open page.
async fn assert_inert(client: &Client, page: &str, must_show: bool) {
    let seen = client
        .execute(
            "return {
               pwned: window.__pwned === undefined ? null : window.__pwned,
               imgs: document.querySelectorAll('img[src=\"x\"]').length,
               svgs: document.querySelectorAll('svg[onload]').length,
               scripts: [...document.scripts].filter(s => s.type !== 'application/json' && s.textContent.includes('__pwned')).length,
               islands_whole: [...document.querySelectorAll('script[type=\"application/json\"]')].every(s => { try { JSON.parse(s.textContent); return true; } catch (e) { return false; } }),
               js_links: document.querySelectorAll('a[href^=\"javascript:\" i]').length,
               shown: document.body.innerText.includes('window.__pwned')
             };",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(seen["pwned"], Value::Null, "{page}: script ran: {seen}");
    assert_eq!(seen["imgs"], 0, "{page}: {seen}");
    assert_eq!(seen["svgs"], 0, "{page}: {seen}");
    assert_eq!(seen["scripts"], 0, "{page}: {seen}");
    assert_eq!(seen["js_links"], 0, "{page}: {seen}");
    assert_eq!(
        seen["islands_whole"], true,
        "{page}: a JSON data island was cut: {seen}"
    );
    if must_show {
        assert_eq!(
            seen["shown"], true,
            "{page}: the string is shown as text: {seen}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_are_shown_as_text_and_never_run() {
    let dir = tempfile::tempdir().unwrap();
    let (_harrier, base) = start_harrier(&dir.path().join("harrier.db"));
    // A run named by the string, with a label that is the string too.
    let jtl = dir.path().join("hostile.jtl");
    let label = hostile(2).replace('"', "\"\"");
    let mut text = String::from("timeStamp,elapsed,label,responseCode,success\n");
    for i in 0..20 {
        text.push_str(&format!(
            "{},{},\"{label}\",200,true\n",
            1_700_000_000_000i64 + i * 100,
            100 + i
        ));
        text.push_str(&format!(
            "{},{},plain,200,true\n",
            1_700_000_000_050i64 + i * 100,
            90 + i
        ));
    }
    std::fs::write(&jtl, text).unwrap();
    let first = cli_import(&base, &jtl, &hostile(1));
    let second = cli_import(&base, &jtl, &hostile(3));
    let http = reqwest::Client::new();
    let send = |method: reqwest::Method, path: &str, body: Value| {
        let req = http.request(method, format!("{base}{path}")).json(&body);
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            (status, res.text().await.unwrap())
        }
    };
    let (status, body) = send(
        reqwest::Method::POST,
        "/api/v1/alert-rules",
        json!({
            "name": hostile(4), "subject": {"route": hostile(5)}, "measure": "error_pct",
            "comparison": ">", "threshold": 10, "window": "1m", "for": "30s",
            "severity": "page", "summary": hostile(6)
        }),
    )
    .await;
    let rule_stored = status.is_success();
    if !rule_stored {
        // A name the API refuses is shown nowhere; its summary still goes in another rule.
        let (status, body2) = send(
            reqwest::Method::POST,
            "/api/v1/alert-rules",
            json!({
                "name": "HostileSummary", "subject": {"route": hostile(5)}, "measure": "error_pct",
                "comparison": ">", "threshold": 10, "window": "1m", "for": "30s",
                "severity": "page", "summary": hostile(6)
            }),
        )
        .await;
        assert!(status.is_success(), "{body} / {body2}");
    }
    let (status, body) = send(
        reqwest::Method::POST,
        "/api/v1/silences",
        json!({"matchers": [{"name": "alertname", "value": hostile(7), "op": "="}],
               "duration": "2h", "comment": hostile(8), "created_by": hostile(9)}),
    )
    .await;
    assert!(status.is_success(), "silence: {body}");
    let (status, body) = send(
        reqwest::Method::POST,
        "/api/v1/alert-channels",
        json!({"name": hostile(10), "kind": "webhook", "url": "http://127.0.0.1:9/hook"}),
    )
    .await;
    let channel_stored = status.is_success();
    if !channel_stored {
        assert!(status.is_client_error(), "channel: {body}");
    }

    let (_driver, client) = browser().await;
    let mut pages: BTreeMap<&str, String> = BTreeMap::new();
    pages.insert("overview", format!("{base}/console"));
    pages.insert("runs", format!("{base}/console/runs"));
    pages.insert("run", format!("{base}/console/runs/{first}"));
    pages.insert("alerts", format!("{base}/console/alerts"));
    pages.insert(
        "compare",
        format!("{base}/console/compare?runs={first},{second}"),
    );
    for (name, url) in &pages {
        client.goto(url).await.unwrap();
        // Charts and live tables are drawn by scripts after load.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_inert(&client, name, *name != "overview").await;
    }
    let _ = client.close().await;
    // The exported HTML comparison (a download, opened from disk) escapes them too.
    let export = http
        .get(format!("{base}/console/compare.html?runs={first},{second}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        export.contains("window.__pwned=1"),
        "the run name is in the export"
    );
    for raw in ["<script>window.__pwned", "<img src=x", "<svg onload"] {
        assert!(!export.contains(raw), "the export holds {raw:?} unescaped");
    }
    eprintln!("rule name stored: {rule_stored}; channel name stored: {channel_stored}");
}
