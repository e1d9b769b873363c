//! The alerts console: the history filters and rule validation of the API, the
//! `/console/alerts` page and the nav badge rendered by the server, and in headless
//! Chromium the toast and badge on another page when an alert fires, the rule editor, the
//! alert marks on route charts and the silences form.

use std::time::Duration;

use axum::http::StatusCode;
use fantoccini::{Client, Locator};
use harrier::services::alerts::evaluator::evaluate_once;
use serde_json::{Value, json};

use crate::alerts::{add_target, interval, receiver, scrape, send_json, write};
use crate::browser::browser;
use crate::helpers::{TestApp, select_texts, spawn_app, spawn_app_with};

fn rule(name: &str, for_: &str) -> Value {
    json!({
        "name": name,
        "subject": {"route": "/check*"},
        "measure": "error_pct",
        "comparison": ">",
        "threshold": 10,
        "window": "1m",
        "for": for_,
        "severity": "page",
        "summary": "Route {{ labels.route }} {{ value }} % errors"
    })
}

/// The id of `route` from `GET /api/v1/routes`.
async fn route_id(app: &TestApp, route: &str) -> i64 {
    let rows = app.get("/api/v1/routes?window=1h").await.json();
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["route"] == route)
        .unwrap_or_else(|| panic!("no route {route} in {rows}"))["id"]
        .as_i64()
        .unwrap()
}

/// An app with no built-in rules, one target with `/checkout` (30 % errors), `/checkin`
/// (no errors) and the rule `CheckoutErrors` (for 30 s) pending at t0 + 1 s and firing
/// at t0 + 31 s.
async fn firing_app(t0: i64) -> TestApp {
    let app = spawn_app().await;
    let r = send_json(
        &app,
        "POST",
        "/api/v1/alert-rules",
        &rule("CheckoutErrors", "30s"),
    )
    .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let target = add_target(&app).await;
    scrape(
        &app,
        target,
        t0,
        &[
            write("/checkout", interval(100.0, 30.0)),
            write("/checkin", interval(100.0, 0.0)),
        ],
    )
    .await;
    let (store, hub) = (&app.state.store, &app.state.hub);
    evaluate_once(store, hub, t0 + 1_000).await.unwrap();
    evaluate_once(store, hub, t0 + 31_000).await.unwrap();
    app
}

#[tokio::test]
async fn history_is_filtered_by_route_and_time() {
    let t0 = harrier::now_ms() - 120_000;
    let app = firing_app(t0).await;
    let checkout = route_id(&app, "/checkout").await;
    let checkin = route_id(&app, "/checkin").await;

    let rows = app
        .get(&format!("/api/v1/alerts/history?route_id={checkout}"))
        .await
        .json();
    let changes: Vec<(&str, i64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["change"].as_str().unwrap(), r["at_ms"].as_i64().unwrap()))
        .collect();
    assert_eq!(changes, [("firing", t0 + 31_000), ("pending", t0 + 1_000)]);
    assert_eq!(rows[0]["labels"]["route"], "/checkout");
    let none = app
        .get(&format!("/api/v1/alerts/history?route_id={checkin}"))
        .await
        .json();
    assert_eq!(none, json!([]), "no alert on /checkin");

    // From after the firing: the firing row says the period was open then.
    let open = app
        .get(&format!(
            "/api/v1/alerts/history?route_id={checkout}&from={}",
            t0 + 40_000
        ))
        .await
        .json();
    assert_eq!(open.as_array().unwrap().len(), 1, "{open}");
    assert_eq!(open[0]["change"], "firing");
    // Up to before the firing: only the pending row.
    let early = app
        .get(&format!(
            "/api/v1/alerts/history?route_id={checkout}&to={}",
            t0 + 10_000
        ))
        .await
        .json();
    assert_eq!(early.as_array().unwrap().len(), 1);
    assert_eq!(early[0]["change"], "pending");

    let r = app.get("/api/v1/alerts/history?route_id=424242").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = app.get("/api/v1/alerts/history?from=yesterday").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json()["error"].as_str().unwrap().contains("from"));
    let r = app.get("/api/v1/alerts/history?from=20&to=10").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = app.get("/api/v1/alerts/history?run_id=7").await;
    assert_eq!(r.json(), json!([]), "no live-run alerts");
}

#[tokio::test]
async fn rule_validation_names_the_field_and_stores_nothing() {
    let app = spawn_app().await;
    let mut bad = rule("Checkout", "30s");
    bad["threshold"] = json!(150);
    let r = send_json(&app, "POST", "/api/v1/alert-rules/validate", &bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["field"], "threshold", "{}", r.text());
    assert!(r.json()["error"].as_str().unwrap().contains("0 to 100"));

    let mut bad = rule("Checkout", "30s");
    bad["for"] = json!("2 weeks");
    let r = send_json(&app, "POST", "/api/v1/alert-rules/validate", &bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["field"], "for", "{}", r.text());
    assert!(r.json()["error"].as_str().unwrap().contains("2 weeks"));

    let mut bad = rule("Checkout", "30s");
    bad.as_object_mut().unwrap().remove("measure");
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &bad).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json()["field"], "measure", "{}", r.text());

    let mut bad = rule("has space", "30s");
    bad["summary"] = json!("{{ valeu }}");
    let r = send_json(&app, "POST", "/api/v1/alert-rules/validate", &bad).await;
    assert_eq!(r.json()["field"], "name", "{}", r.text());

    let good = rule("Checkout", "30s");
    let r = send_json(&app, "POST", "/api/v1/alert-rules/validate", &good).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["ok"], true);
    assert_eq!(r.json()["rule"]["min_count"], 20, "defaults filled in");
    let r = app.get("/api/v1/alert-rules/Checkout").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "validate stores nothing");

    let r = send_json(&app, "POST", "/api/v1/alert-rules", &good).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &good).await;
    assert_eq!(
        r.json()["field"],
        "name",
        "a taken name is the name's fault"
    );
}

#[tokio::test]
async fn alerts_page_and_badge_show_what_fires() {
    let empty = spawn_app().await;
    let page = empty.get("/console/alerts").await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.html();
    let note = select_texts(&html, "#alerts-empty").join(" ");
    assert!(
        note.contains("No alerts firing") && note.contains("0 rules are evaluated every 15 s"),
        "{note}"
    );
    assert!(select_texts(&html, "#timeline-empty")[0].contains("Nothing pending or firing"));
    let sel = scraper::Selector::parse("#alerts-badge").unwrap();
    let badge = html.select(&sel).next().expect("the nav has the badge");
    assert!(badge.value().attr("hidden").is_some(), "hidden at 0");
    assert_eq!(
        empty.get("/console/alerts?range=2w").await.status,
        StatusCode::BAD_REQUEST
    );

    let t0 = harrier::now_ms() - 120_000;
    let app = firing_app(t0).await;
    let checkout = route_id(&app, "/checkout").await;
    let html = app.get("/console/alerts").await.html();
    let rows = select_texts(&html, "#alerts-table tbody tr");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let cells = select_texts(&html, "#alerts-table tbody tr td");
    assert_eq!(cells[0], "page", "severity");
    assert_eq!(cells[1], "firing");
    assert_eq!(cells[2], "CheckoutErrors");
    assert!(cells[3].starts_with("/checkout"), "{}", cells[3]);
    assert_eq!(cells[4], "30.00 %", "value with the rule's unit");
    assert_eq!(cells[5], "> 10 %", "threshold with its unit");
    assert!(cells[6].ends_with("ago"), "{}", cells[6]);
    assert_eq!(cells[7], "Route /checkout 30 % errors");
    let sel = scraper::Selector::parse("#alerts-table tbody td.subject a").unwrap();
    let link = html
        .select(&sel)
        .next()
        .expect("subject links to the route");
    assert_eq!(
        link.value().attr("href"),
        Some(format!("/console/routes/{checkout}").as_str())
    );
    let sel = scraper::Selector::parse("#alerts-table tbody button[data-silence-labels]").unwrap();
    let labels: Value = serde_json::from_str(
        html.select(&sel)
            .next()
            .expect("a Silence… action")
            .value()
            .attr("data-silence-labels")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(labels["alertname"], "CheckoutErrors");
    assert_eq!(labels["route"], "/checkout");

    // The timeline: one lane, a pending bar then a firing bar in the severity's colour.
    let sel = scraper::Selector::parse("#timeline .tl-row:not(.tl-axis) rect.tl-bar").unwrap();
    let bars: Vec<String> = html
        .select(&sel)
        .map(|e| e.value().attr("class").unwrap().to_string())
        .collect();
    assert_eq!(bars, ["tl-bar pending", "tl-bar firing sev-critical"]);
    let tip = select_texts(&html, "#timeline rect.tl-bar.firing title").join("");
    assert!(
        tip.contains("CheckoutErrors · firing") && tip.contains("→ now") && tip.contains("30.00 %"),
        "{tip}"
    );
    let changes = select_texts(&html, "#transitions-table tbody tr td:nth-child(2)");
    assert_eq!(changes, ["firing", "pending"]);

    // The rules table counts what fires now; API rules are editable.
    let rule_cells = select_texts(
        &html,
        "#rules-table tbody tr[data-rule-name=\"CheckoutErrors\"] td",
    );
    assert_eq!(rule_cells[0], "CheckoutErrors");
    assert_eq!(rule_cells[1], "routes /check*");
    assert_eq!(rule_cells[3], "> 10 %");
    assert_eq!(rule_cells[7], "API");
    assert_eq!(rule_cells[8], "1");

    // The badge, on this page and on any other console page.
    for page in ["/console/alerts", "/console/runs", "/console/routes"] {
        let html = app.get(page).await.html();
        let sel = scraper::Selector::parse("#alerts-badge").unwrap();
        let badge = html.select(&sel).next().expect("badge");
        assert_eq!(badge.text().collect::<String>(), "1", "{page}");
        assert!(badge.value().attr("hidden").is_none(), "{page}");
        assert!(
            badge
                .value()
                .attr("class")
                .unwrap()
                .contains("sev-critical"),
            "{page}: severity page counts as critical"
        );
    }

    // A silenced alert still fires (and is listed) but no longer counts on the badge.
    let s = send_json(
        &app,
        "POST",
        "/api/v1/silences",
        &json!({"matchers": [{"name": "alertname", "value": "CheckoutErrors", "op": "="}],
                "duration": "1h", "comment": "known", "created_by": "ana"}),
    )
    .await;
    assert_eq!(s.status, StatusCode::CREATED, "{}", s.text());
    let html = app.get("/console/runs").await.html();
    let sel = scraper::Selector::parse("#alerts-badge").unwrap();
    let badge = html.select(&sel).next().expect("badge");
    assert!(
        badge.value().attr("hidden").is_some(),
        "silenced: {:?}",
        badge.text().collect::<String>()
    );
}

/// A server on 127.0.0.1 over `app`'s state, evaluating every second.
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

/// An app whose evaluator runs every second, with no built-in rules and the rule
/// `CheckoutErrors` (fires at once, severity `page`) from the configuration.
async fn live_app() -> TestApp {
    let (store, base, dir) = crate::helpers::fresh_store().await;
    let config = harrier::config::Config {
        db: base.db,
        database_url: base.database_url,
        self_scrape: false,
        alerts: harrier::domain::alerts::AlertsConfig {
            evaluation_interval: harrier::domain::alerts::rule::Duration(1_000),
            builtin_rules: false,
            rules: vec![serde_json::from_value(rule("CheckoutErrors", "0s")).unwrap()],
            ..harrier::domain::alerts::AlertsConfig::default()
        },
        ..harrier::config::Config::default()
    };
    TestApp {
        state: harrier::app::AppState::new(store, config),
        _dir: dir,
    }
}

async fn js(client: &Client, script: &str) -> Value {
    client
        .execute(script, vec![])
        .await
        .unwrap_or_else(|e| panic!("{script}: {e}"))
}

/// Polls `script` until it returns something other than null, false or [] (20 s at most).
async fn until(client: &Client, what: &str, script: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let v = js(client, script).await;
        let empty = v.is_null() || v == json!(false) || v.as_array().is_some_and(|a| a.is_empty());
        if !empty {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn screenshot_path(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name)
}

async fn screenshot(client: &Client, name: &str) {
    if let Ok(png) = client.screenshot().await {
        let _ = std::fs::write(screenshot_path(name), png);
    }
}

/// Clicks the element `css` after scrolling it to the middle of the window: the page is
/// long enough for the editors to scroll the tables' buttons under the sticky top bar,
/// which would take a click there.
async fn click(client: &Client, css: &str) {
    js(
        client,
        &format!(
            "document.querySelector({css:?}).scrollIntoView({{block: 'center'}}); return true;"
        ),
    )
    .await;
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_firing_shows_a_toast_and_the_badge_on_another_page() {
    let app = live_app().await;
    let target = add_target(&app).await;
    let base = serve(&app).await;
    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));

    // A page that is not /console/alerts, connected, with nothing firing.
    client.goto(&format!("{base}/console/runs")).await.unwrap();
    wait()
        .for_element(Locator::Css("#live-status[data-state=\"live\"]"))
        .await
        .expect("websocket connected on a page without live data of its own");
    let sockets = js(
        &client,
        "return performance.getEntriesByType('resource').filter(e => e.name.includes('/api/v1/live')).length",
    )
    .await;
    assert!(
        sockets.as_i64().unwrap_or(0) <= 1,
        "one socket per page: {sockets}"
    );
    let badge = client.find(Locator::Css("#alerts-badge")).await.unwrap();
    assert!(!badge.is_displayed().await.unwrap(), "no badge at 0");

    // /checkout gets 30 % errors: the evaluator (every second) fires the rule.
    scrape(
        &app,
        target,
        harrier::now_ms(),
        &[write("/checkout", interval(100.0, 30.0))],
    )
    .await;
    let toast = wait()
        .for_element(Locator::Css(
            ".toast[data-rule=\"CheckoutErrors\"][data-change=\"firing\"]",
        ))
        .await
        .expect("a toast when the alert fires");
    // Its text once it has faded in: WebDriver gives no text for an element still at
    // opacity 0, the first frame of the toast's entrance.
    let text = until(
        &client,
        "the toast shown whole",
        "const t = document.querySelector('.toast[data-rule=\"CheckoutErrors\"][data-change=\"firing\"]');
         return t && getComputedStyle(t).opacity === '1' ? t.innerText : null;",
    )
    .await;
    let text = text.as_str().unwrap_or_default();
    assert!(
        text.contains("CheckoutErrors") && text.contains("Route /checkout 30 % errors"),
        "{text}"
    );
    let href = toast
        .find(Locator::Css("a.toast-link"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap();
    assert_eq!(href.as_deref(), Some("/console/alerts"));
    wait()
        .for_element(Locator::Css("#alerts-badge.sev-critical[data-count=\"1\"]"))
        .await
        .expect("the badge counts the firing alert");
    assert_eq!(
        client
            .find(Locator::Css("#alerts-badge"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "1"
    );
    let fixed = js(
        &client,
        "return getComputedStyle(document.getElementById('toasts')).position",
    )
    .await;
    assert_eq!(fixed, json!("fixed"), "toasts never move the page");
    screenshot(&client, "alerts-toast.png").await;
    // dismissable
    toast
        .find(Locator::Css("button.toast-close"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    until(
        &client,
        "the toast to go when dismissed",
        "return !document.querySelector('.toast[data-rule=\"CheckoutErrors\"]');",
    )
    .await;

    // The alerts page lists it.
    client
        .goto(&format!("{base}/console/alerts"))
        .await
        .unwrap();
    let row = client
        .find(Locator::Css(
            "#alerts-table tbody tr[data-rule=\"CheckoutErrors\"]",
        ))
        .await
        .expect("the firing alert is listed");
    let row_text = row.text().await.unwrap();
    assert!(
        row_text.contains("firing")
            && row_text.contains("30.00 %")
            && row_text.contains("/checkout"),
        "{row_text}"
    );
    screenshot(&client, "alerts-page.png").await;

    // The route page marks the firing period on its charts.
    let checkout = route_id(&app, "/checkout").await;
    client
        .goto(&format!("{base}/console/routes/{checkout}"))
        .await
        .unwrap();
    wait()
        .for_element(Locator::Css(".chart[data-chart=\"errors\"] canvas"))
        .await
        .unwrap();
    let periods = until(
        &client,
        "alert periods read for the route",
        "const m = (window.harrierAlertMarks || {instances: []}).instances[0];
         return m ? m.periods().map(p => [p.rule, p.state, p.open]) : [];",
    )
    .await;
    assert_eq!(periods, json!([["CheckoutErrors", "firing", true]]));
    // Hovering the firing period tells what fired.
    let tip = until(
        &client,
        "the alert tip on hover",
        "const u = harrier.routes.page.state.charts[1];
         const p = harrierAlertMarks.instances[0].periods()[0];
         u.setCursor({left: u.valToPos((p.start + u.scales.x.max) / 2, 'x'), top: 20});
         const tip = u.over.querySelector('.alert-tip');
         return tip && !tip.hidden ? tip.textContent : null;",
    )
    .await;
    let tip = tip.as_str().unwrap();
    assert!(
        tip.contains("CheckoutErrors firing") && tip.contains("now") && tip.contains("30.00 %"),
        "{tip}"
    );
    screenshot(&client, "alerts-route-marks.png").await;

    let _ = client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_editor_shows_the_servers_error_and_saves_a_valid_rule() {
    let app = live_app().await;
    let base = serve(&app).await;
    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));
    client
        .goto(&format!("{base}/console/alerts"))
        .await
        .unwrap();

    // The rule from harrier.toml opens read-only.
    wait()
        .for_element(Locator::Css(
            "#rules-table tr[data-rule-name=\"CheckoutErrors\"] button[data-edit-rule]",
        ))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(
        client
            .find(Locator::Css("#rule-readonly"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap()
    );
    assert!(
        client
            .find(Locator::Css("#rule-save"))
            .await
            .unwrap()
            .attr("disabled")
            .await
            .unwrap()
            .is_some(),
        "config rules cannot be saved here"
    );

    click(&client, "#rule-new").await;
    let fill = |name: &'static str, value: &'static str| {
        let client = client.clone();
        async move {
            let el = client
                .find(Locator::Css(&format!("#rule-form [name=\"{name}\"]")))
                .await
                .unwrap();
            el.clear().await.unwrap();
            el.send_keys(value).await.unwrap();
        }
    };
    fill("name", "SearchSlow").await;
    fill("subject.route", "/search").await;
    client
        .execute(
            "document.querySelector('#rf-measure').value = 'error_pct';",
            vec![],
        )
        .await
        .unwrap();
    fill("threshold", "150").await;
    click(&client, "#rule-save").await;
    let err = wait()
        .for_element(Locator::Css(
            ".field-error[data-error-for=\"threshold\"]:not([hidden])",
        ))
        .await
        .expect("the server's error is shown next to the threshold");
    let msg = err.text().await.unwrap();
    assert!(msg.contains("0 to 100"), "{msg}");
    assert_eq!(
        client
            .find(Locator::Css("#rf-threshold"))
            .await
            .unwrap()
            .attr("aria-invalid")
            .await
            .unwrap()
            .as_deref(),
        Some("true")
    );
    screenshot(&client, "alerts-rule-error.png").await;
    assert_eq!(
        app.get("/api/v1/alert-rules/SearchSlow").await.status,
        StatusCode::NOT_FOUND,
        "nothing saved while invalid"
    );

    // A duration the server cannot read is named too.
    fill("threshold", "50").await;
    fill("for", "2 weeks").await;
    click(&client, "#rule-save").await;
    wait()
        .for_element(Locator::Css(
            ".field-error[data-error-for=\"for\"]:not([hidden])",
        ))
        .await
        .expect("the for field's error");

    fill("for", "1m").await;
    click(&client, "#rule-save").await;
    wait()
        .for_element(Locator::Css(
            "#rules-table tr[data-rule-name=\"SearchSlow\"]",
        ))
        .await
        .expect("the saved rule is listed");
    let stored = app.get("/api/v1/alert-rules/SearchSlow").await;
    assert_eq!(stored.status, StatusCode::OK);
    let stored = stored.json();
    assert_eq!(stored["threshold"], 50.0);
    assert_eq!(stored["for"], "1m");
    assert_eq!(stored["subject"]["route"], "/search");
    assert_eq!(stored["origin"], "api");
    assert!(
        client
            .find_all(Locator::Css(".field-error:not([hidden])"))
            .await
            .unwrap()
            .is_empty()
    );

    // Delete, after confirming.
    client
        .execute("window.confirm = () => true;", vec![])
        .await
        .unwrap();
    click(&client, "button[data-delete-rule=\"SearchSlow\"]").await;
    until(
        &client,
        "the deleted rule to leave the table",
        "return !document.querySelector('#rules-table tr[data-rule-name=\"SearchSlow\"]');",
    )
    .await;
    assert_eq!(
        app.get("/api/v1/alert-rules/SearchSlow").await.status,
        StatusCode::NOT_FOUND
    );
    let _ = client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silences_are_created_from_an_alert_and_expired_through_the_form() {
    let app = live_app().await;
    let target = add_target(&app).await;
    scrape(
        &app,
        target,
        harrier::now_ms(),
        &[write("/checkout", interval(100.0, 30.0))],
    )
    .await;
    let base = serve(&app).await;
    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));

    // Wait for the evaluator to fire, then open the page with the alert on it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while app.get("/api/v1/alerts").await.json()[0]["state"] != "firing" {
        assert!(std::time::Instant::now() < deadline, "the rule never fired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client
        .goto(&format!("{base}/console/alerts"))
        .await
        .unwrap();
    wait()
        .for_element(Locator::Css("#silences-empty"))
        .await
        .expect("the empty silences list");

    // "Silence…" prefills the matchers with the alert's labels.
    client
        .find(Locator::Css("#alerts-table button[data-silence-labels]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let matchers = js(
        &client,
        "return [...document.querySelectorAll('#matcher-rows .matcher-row')].map(r =>
           [r.querySelector('[name=m-name]').value, r.querySelector('[name=m-op]').value,
            r.querySelector('[name=m-value]').value]);",
    )
    .await;
    assert_eq!(matchers[0], json!(["alertname", "=", "CheckoutErrors"]));
    assert!(
        matchers
            .as_array()
            .unwrap()
            .contains(&json!(["route", "=", "/checkout"])),
        "{matchers}"
    );

    // A bad regex: the server's error is shown at the matchers.
    js(
        &client,
        "const r = document.querySelector('#matcher-rows .matcher-row:last-child');
         r.querySelector('[name=m-op]').value = '=~';
         r.querySelector('[name=m-value]').value = '(unclosed';
         document.querySelector('#sf-comment').value = 'deploy of orders 2.4';
         return true;",
    )
    .await;
    client
        .find(Locator::Css("#silence-save"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let err = wait()
        .for_element(Locator::Css(
            "#silence-form .field-error[data-error-for=\"matchers\"]:not([hidden])",
        ))
        .await
        .expect("the matchers' error");
    assert!(err.text().await.unwrap().contains("regex"));
    assert_eq!(app.get("/api/v1/silences").await.json(), json!([]));

    // Fixed: the silence is created, listed active, and the alert is marked silenced.
    js(
        &client,
        "document.querySelector('#matcher-rows .matcher-row:last-child [name=m-op]').value = '=';
         const rows = [...document.querySelectorAll('#matcher-rows .matcher-row')];
         rows.slice(1).forEach(r => r.remove());
         return true;",
    )
    .await;
    client
        .find(Locator::Css("#silence-save"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let row = wait()
        .for_element(Locator::Css(
            "#silences-table tbody tr[data-state=\"active\"]",
        ))
        .await
        .expect("the new silence is listed as active");
    let text = row.text().await.unwrap();
    assert!(
        text.contains("alertname=\"CheckoutErrors\"") && text.contains("deploy of orders 2.4"),
        "{text}"
    );
    let stored = app.get("/api/v1/silences").await.json();
    assert_eq!(stored.as_array().unwrap().len(), 1, "{stored}");
    assert_eq!(stored[0]["state"], "active");
    assert_eq!(
        stored[0]["matchers"],
        json!([{"name": "alertname", "value": "CheckoutErrors", "op": "="}])
    );
    let id = stored[0]["id"].as_i64().unwrap();
    wait()
        .for_element(Locator::Css(
            "#alerts-table tr.is-silenced .silenced-mark:not([hidden])",
        ))
        .await
        .expect("the alert is marked silenced");
    assert_eq!(
        app.get("/api/v1/alerts").await.json()[0]["silenced_by"],
        json!([id])
    );
    screenshot(&client, "alerts-silenced.png").await;

    // Expire it through its button.
    js(&client, "window.confirm = () => true; return true;").await;
    client
        .find(Locator::Css(&format!(
            "button[data-expire-silence=\"{id}\"]"
        )))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait()
        .for_element(Locator::Css(&format!(
            "#silences-table tr[data-silence-id=\"{id}\"][data-state=\"expired\"]"
        )))
        .await
        .expect("the silence is listed as expired");
    assert_eq!(
        app.get("/api/v1/silences").await.json()[0]["state"],
        "expired"
    );
    assert_eq!(
        app.get("/api/v1/alerts").await.json()[0]["silenced_by"],
        json!([])
    );
    let _ = client.close().await;
}

/// A rule on live runs fires for one run: the history filters by that run, the alerts
/// page links the subject to the run, and the run report's charts read the periods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_run_alerts_are_marked_on_the_run_report() {
    use harrier::sources::ingest::influx::Precision;
    let app = spawn_app().await;
    let rule = json!({
        "name": "LiveRunErrors",
        "subject": {"scenario": "*-k6"},
        "measure": "error_pct",
        "comparison": ">",
        "threshold": 5,
        "window": "10s",
        "for": "5s",
        "severity": "critical"
    });
    let r = send_json(&app, "POST", "/api/v1/alert-rules", &rule).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let t0 = harrier::now_ms() - 30_000;
    let live = app.state.live_runs.clone();
    let mut ids = (0, 0);
    for s in 0..21 {
        let bad = if s >= 10 { 5 } else { 0 };
        let mut body = crate::alerts::k6_second("checkout-k6", t0, s, bad);
        body.push_str(&crate::alerts::k6_second("browse-k6", t0, s, 0));
        let out = live.write(&body, Precision::Ns, "k6").await.unwrap();
        ids = (out.run_ids[0], out.run_ids[1]);
        live.tick().await;
        if s == 15 || s == 20 {
            evaluate_once(&app.state.store, &app.state.hub, t0 + (s + 1) * 1000)
                .await
                .unwrap();
        }
    }
    let (checkout, browse) = ids;
    let rows = app
        .get(&format!("/api/v1/alerts/history?run_id={checkout}"))
        .await
        .json();
    let changes: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["change"].as_str().unwrap())
        .collect();
    assert_eq!(changes, ["firing", "pending"], "{rows}");
    assert_eq!(
        app.get(&format!("/api/v1/alerts/history?run_id={browse}"))
            .await
            .json(),
        json!([])
    );
    let html = app.get("/console/alerts").await.html();
    let sel = scraper::Selector::parse("#alerts-table td.subject a").unwrap();
    let link = html
        .select(&sel)
        .next()
        .expect("the subject links to the run");
    assert_eq!(
        link.value().attr("href"),
        Some(format!("/console/runs/{checkout}").as_str())
    );

    let base = serve(&app).await;
    let (_driver, client) = browser().await;
    client
        .goto(&format!("{base}/console/runs/{checkout}"))
        .await
        .unwrap();
    let periods = until(
        &client,
        "alert periods read for the run",
        "const m = (window.harrierAlertMarks || {instances: []}).instances.find(m => m.kind === 'run_id');
         return m ? m.periods().map(p => [p.rule, p.state]) : [];",
    )
    .await;
    // (the server's own evaluator may have resolved it since: the run is failed, not live)
    assert_eq!(
        periods,
        json!([["LiveRunErrors", "pending"], ["LiveRunErrors", "firing"]])
    );
    screenshot(&client, "alerts-run-marks.png").await;
    let _ = client.close().await;
}

/// With more active alerts than the page lists, the most severe firing ones are listed
/// and the rest are counted, never silently dropped.
#[tokio::test]
async fn a_crowd_of_alerts_lists_the_worst_and_counts_the_rest() {
    use harrier::domain::alerts::eval::{Alert, Phase};
    let app = spawn_app().await;
    for (name, severity) in [("Many", "warning"), ("Worst", "critical")] {
        let mut r = rule(name, "0s");
        r["severity"] = json!(severity);
        let created = send_json(&app, "POST", "/api/v1/alert-rules", &r).await;
        assert_eq!(created.status, StatusCode::CREATED);
    }
    let now = harrier::now_ms();
    let alert = |rule: &str, i: usize, state: Phase| Alert {
        rule: rule.into(),
        labels: [("route".to_string(), format!("/check/{i}"))].into(),
        state,
        value: Some(12.0),
        active_since_ms: now - 60_000,
        fired_at_ms: (state == Phase::Firing).then_some(now - 30_000),
        keep_firing_since_ms: None,
        last_eval_ms: now,
    };
    let mut alerts: Vec<Alert> = (0..540)
        .map(|i| {
            alert(
                "Many",
                i,
                if i % 2 == 0 {
                    Phase::Firing
                } else {
                    Phase::Pending
                },
            )
        })
        .collect();
    alerts.push(alert("Worst", 0, Phase::Firing));
    app.state
        .store
        .save_evaluation(&["Many".into(), "Worst".into()], &alerts, &[], now)
        .await
        .unwrap();
    let page = app.get("/console/alerts").await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text());
    let html = page.html();
    let rows = select_texts(&html, "#alerts-table tbody tr td.name");
    assert_eq!(
        rows.len(),
        500,
        "{}",
        &page.text()[..3000.min(page.text().len())]
    );
    assert_eq!(rows[0], "Worst", "the critical one comes first");
    let states = select_texts(&html, "#alerts-table tbody tr td:nth-child(2)");
    assert!(
        states[..271].iter().all(|s| s == "firing"),
        "firing before pending"
    );
    let note = select_texts(&html, "#alerts-left-out").join("");
    assert!(note.starts_with("41 more active alerts"), "{note}");
    let counts = select_texts(&html, "#now-counts").join("");
    assert_eq!(counts, "271 firing · 270 pending");
}

/// The channels table as the server renders it: every channel with its target host,
/// matchers, grouping, timings with units, origin and last delivery; harrier.toml's
/// read-only; a Slack URL never on the page; an empty state that says how to add one.
#[tokio::test]
async fn channels_table_shows_timings_with_units_and_hides_slack_urls() {
    let html = spawn_app().await.get("/console/alerts").await.html();
    let empty = select_texts(&html, "#channels-empty").join(" ");
    assert!(
        empty.contains("form below") && empty.contains("[[alerts.channels]]"),
        "{empty}"
    );

    let mut file = harrier::domain::alerts::channel::ChannelSpec::new(
        "file-ops",
        "webhook",
        "http://127.0.0.1:9/hook",
    );
    file.repeat_interval = harrier::domain::alerts::rule::Duration(90_000);
    let app = spawn_app_with(|c| c.alerts.channels = vec![file]).await;
    let slack = json!({"name": "chat", "kind": "slack",
        "url": "https://hooks.slack.com/services/T0/B0/SECRETSECRET",
        "matchers": ["severity=~\"critical|page\"", "service=orders"], "group_by": ["..."],
        "group_wait": "10s"});
    let am = json!({"name": "am", "kind": "alertmanager", "url": "http://127.0.0.1:9093"});
    for body in [slack, am] {
        let r = send_json(&app, "POST", "/api/v1/alert-channels", &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    }
    let at = harrier::now_ms() - 42_000;
    app.state
        .store
        .log_delivery(&harrier::store::Delivery {
            channel: "file-ops".into(),
            group_key: "{}:{alertname=\"CheckoutErrors\"}".into(),
            at_ms: at,
            firing: 2,
            resolved: 1,
            status: Some(503),
            error: Some("file-ops answered 503 Service Unavailable: busy".into()),
        })
        .await
        .unwrap();

    let page = app.get("/console/alerts").await;
    assert!(!page.text().contains("SECRET"), "the Slack URL is a secret");
    let html = page.html();
    assert_eq!(
        select_texts(&html, "#channels-table tbody td.name"),
        ["am", "chat", "file-ops"]
    );
    let row = |name: &str| {
        select_texts(
            &html,
            &format!("#channels-table tr[data-channel-name=\"{name}\"] > td"),
        )
    };
    let chat = row("chat");
    assert_eq!(chat[1], "slack");
    assert_eq!(chat[2], "hooks.slack.com");
    assert!(
        chat[3].contains("severity=~\"critical|page\"") && chat[3].contains("service=orders"),
        "{}",
        chat[3]
    );
    assert_eq!(chat[4], "every label");
    assert_eq!(&chat[5..8], ["10 s", "5 min", "4 h"]);
    assert_eq!(chat[8], "sent");
    assert_eq!(chat[9], "API");
    assert_eq!(chat[10], "nothing sent yet");
    let file = row("file-ops");
    assert_eq!(file[2], "127.0.0.1:9");
    assert_eq!(file[3], "every alert");
    assert_eq!(&file[4..8], ["alertname", "30 s", "5 min", "1 min 30 s"]);
    assert_eq!(file[9], "harrier.toml");
    assert!(
        file[10].starts_with("HTTP 503 42 s ago")
            && file[10].contains("2 firing, 1 resolved")
            && file[10].contains("answered 503 Service Unavailable: busy"),
        "{}",
        file[10]
    );
    let am = row("am");
    assert_eq!(am[4], "–");
    assert!(am[5].contains("pushed at once"), "{}", am[5]);
    // harrier.toml's channel can be tested and viewed, not changed
    let buttons = |name: &str| {
        let sel = scraper::Selector::parse(&format!(
            "#channels-table tr[data-channel-name=\"{name}\"] button"
        ))
        .unwrap();
        html.select(&sel)
            .map(|b| b.text().collect::<String>())
            .collect::<Vec<_>>()
    };
    assert_eq!(buttons("file-ops"), ["Send test", "View"]);
    assert_eq!(buttons("chat"), ["Send test", "Edit", "Delete"]);
    let sel = scraper::Selector::parse("#channels-table tr[data-channel-name=\"chat\"]").unwrap();
    let json: Value = serde_json::from_str(
        html.select(&sel)
            .next()
            .unwrap()
            .value()
            .attr("data-channel")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["url"], "https://hooks.slack.com/…");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_form_shows_the_servers_error_saves_and_sends_a_test() {
    let app = live_app().await;
    let base = serve(&app).await;
    let (hook_url, hook) = receiver(0).await;
    let (_driver, client) = browser().await;
    let wait = || client.wait().at_most(Duration::from_secs(20));
    client
        .goto(&format!("{base}/console/alerts"))
        .await
        .unwrap();
    wait()
        .for_element(Locator::Css("#channels-empty"))
        .await
        .expect("the empty state of the channels");

    let fill = |name: &'static str, value: String| {
        let client = client.clone();
        async move {
            let el = client
                .find(Locator::Css(&format!("#channel-form [name=\"{name}\"]")))
                .await
                .unwrap();
            el.clear().await.unwrap();
            el.send_keys(&value).await.unwrap();
        }
    };
    let save = || async {
        click(&client, "#channel-save").await;
    };
    click(&client, "#channel-new").await;
    fill("name", "ops".into()).await;
    fill("url", "ftp://127.0.0.1/hook".into()).await;
    fill("matchers", "severity=page".into()).await;
    fill("group_wait", "10s".into()).await;
    save().await;
    let err = wait()
        .for_element(Locator::Css(
            "#channel-form .field-error[data-error-for=\"url\"]:not([hidden])",
        ))
        .await
        .expect("the server's error is shown at the URL");
    let msg = err.text().await.unwrap();
    assert!(msg.starts_with("must be an http://"), "{msg}");
    assert_eq!(
        client
            .find(Locator::Css("#cf-url"))
            .await
            .unwrap()
            .attr("aria-invalid")
            .await
            .unwrap()
            .as_deref(),
        Some("true")
    );
    screenshot(&client, "alerts-channel-error.png").await;
    assert_eq!(
        app.get("/api/v1/alert-channels").await.json(),
        json!([]),
        "nothing saved while invalid"
    );

    fill("url", hook_url.clone()).await;
    save().await;
    let text = until(
        &client,
        "the saved channel in the table",
        "const tr = document.querySelector('#channels-table tr[data-channel-name=\"ops\"]');
         return tr ? tr.innerText : null;",
    )
    .await;
    let text = text.as_str().unwrap();
    let host = hook_url
        .trim_start_matches("http://")
        .trim_end_matches("/hook");
    assert!(
        text.contains(host) && text.contains("severity=page") && text.contains("10 s"),
        "{text}"
    );
    let stored = app.get("/api/v1/alert-channels/ops").await.json();
    assert_eq!(stored["origin"], "api");
    // Shown write-only (scheme, host and port); stored and used whole.
    assert_eq!(
        stored["channel"]["url"],
        format!("{}/…", hook_url.trim_end_matches("/hook"))
    );
    assert_eq!(stored["secret_set"], true);
    let kept = app.state.store.get_channel("ops").await.unwrap().unwrap();
    assert_eq!(kept.channel.url.expose(), hook_url);
    assert_eq!(stored["channel"]["matchers"], json!(["severity=page"]));
    assert_eq!(stored["channel"]["group_wait"], "10s");
    assert!(
        client
            .find_all(Locator::Css("#channel-form .field-error:not([hidden])"))
            .await
            .unwrap()
            .is_empty()
    );

    // The same name again: the name is at fault.
    click(&client, "#channel-reset").await;
    fill("name", "ops".into()).await;
    fill("url", hook_url.clone()).await;
    save().await;
    let err = wait()
        .for_element(Locator::Css(
            "#channel-form .field-error[data-error-for=\"name\"]:not([hidden])",
        ))
        .await
        .expect("a taken name is shown at the name");
    assert!(err.text().await.unwrap().contains("exists"));

    // Send test: the receiver's answer is shown in the row, and logged.
    click(&client, "button[data-test-channel=\"ops\"]").await;
    // (read in the page: the table is swapped when it refreshes, the result kept)
    let text = until(
        &client,
        "the test's result",
        "const o = document.querySelector('output.test-result[data-test-result-for=\"ops\"][data-state=\"ok\"]');
         return o && !o.hidden ? o.textContent : null;",
    )
    .await;
    assert!(text.as_str().unwrap().contains("HTTP 200"), "{text}");
    assert_eq!(hook.lock().unwrap().len(), 1);
    assert_eq!(
        hook.lock().unwrap()[0]["alerts"][0]["labels"]["alertname"],
        "HarrierTest"
    );
    let last = until(
        &client,
        "the last delivery in the row",
        "const td = document.querySelector('#channels-table tr[data-channel-name=\"ops\"] td.last-delivery');
         return td && td.textContent.includes('HTTP 200') ? td.textContent : null;",
    )
    .await;
    assert!(last.as_str().unwrap().contains("1 firing"), "{last}");

    // More kinds for the picture: a Slack channel whose last send was refused, and an
    // Alertmanager (no groups of its own).
    let slack = json!({"name": "chat", "kind": "slack",
        "url": "https://hooks.slack.com/services/T0/B0/SECRETSECRET",
        "matchers": ["severity=~\"critical|page\"", "service=orders"], "group_by": ["..."]});
    let am = json!({"name": "am", "kind": "alertmanager", "url": "http://127.0.0.1:9093",
        "send_resolved": false});
    for body in [slack, am] {
        let r = send_json(&app, "POST", "/api/v1/alert-channels", &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    }
    app.state
        .store
        .log_delivery(&harrier::store::Delivery {
            channel: "chat".into(),
            group_key: "{}:{alertname=\"CheckoutErrors\"}".into(),
            at_ms: harrier::now_ms() - 185_000,
            firing: 2,
            resolved: 0,
            status: Some(404),
            error: Some("chat answered 404 Not Found: no_service".into()),
        })
        .await
        .unwrap();
    until(
        &client,
        "the channels added through the API in the table",
        "harrier.alertsPage.refreshChannels();
         return document.querySelectorAll('#channels-table tbody tr').length === 3;",
    )
    .await;
    let page = js(&client, "return document.documentElement.outerHTML;").await;
    assert!(!page.as_str().unwrap().contains("SECRET"));
    let section = client.find(Locator::Css("#channels")).await.unwrap();
    if let Ok(png) = section.screenshot().await {
        let _ = std::fs::write(screenshot_path("alerts-channels-section.png"), png);
    }
    js(
        &client,
        "document.getElementById('channels').scrollIntoView({block: 'start'}); return true;",
    )
    .await;
    screenshot(&client, "alerts-channels.png").await;
    let fits = js(
        &client,
        "const w = document.querySelector('#channels .table-wrap');
         return w.scrollWidth <= w.clientWidth ? true
           : [w.scrollWidth, w.clientWidth, [...document.querySelectorAll('#channels-table thead th')].map(t => Math.round(t.getBoundingClientRect().width))];",
    )
    .await;
    assert_eq!(
        fits,
        json!(true),
        "the table fits 1400 px without scrolling"
    );

    // Delete, after confirming.
    js(&client, "window.confirm = () => true; return true;").await;
    click(&client, "button[data-delete-channel=\"ops\"]").await;
    until(
        &client,
        "the deleted channel to leave the table",
        "return !document.querySelector('#channels-table tr[data-channel-name=\"ops\"]');",
    )
    .await;
    assert_eq!(
        app.get("/api/v1/alert-channels/ops").await.status,
        StatusCode::NOT_FOUND
    );
    let _ = client.close().await;
}

/// The overview shows the real state: the alerts firing and pending (silenced ones
/// marked), routes with failed exchanges in the last minute (the worst first), scrape
/// targets down with their error — and an empty state naming what to do when there is
/// none of it.
#[tokio::test]
async fn overview_shows_alerts_failing_routes_and_targets_down() {
    let empty = spawn_app().await;
    let html = empty.get("/console").await.html();
    let alerts = select_texts(&html, "#overview-alerts-empty").join(" ");
    assert!(alerts.contains("No alert rules"), "{alerts}");
    let trouble = select_texts(&html, "#trouble-empty").join(" ");
    assert!(trouble.contains("No scrape targets"), "{trouble}");
    assert!(!html.html().contains("coming"), "no placeholder panel");

    let t0 = harrier::now_ms() - 120_000;
    let app = firing_app(t0).await;
    let target = app.state.store.list_targets().await.unwrap()[0].id;
    let now = harrier::now_ms();
    scrape(
        &app,
        target,
        now - 1_000,
        &[
            write("/checkout", interval(100.0, 30.0)),
            write("/checkin", interval(100.0, 0.0)),
            write("/refund", interval(100.0, 5.0)),
            write("/rebate", interval(1000.0, 2.0)),
        ],
    )
    .await;
    let down = app
        .state
        .store
        .upsert_target(
            &harrier::store::TargetSpec {
                name: "billing".into(),
                url: "http://127.0.0.1:9/metrics".into(),
                kind: "prometheus".into(),
                interval_s: 15.0,
                timeout_s: 5.0,
                labels: Default::default(),
            },
            "api",
            now,
        )
        .await
        .unwrap();
    app.state
        .store
        .record_scrape(
            down.id,
            &harrier::store::ScrapeStatus {
                at_ms: now,
                up: false,
                duration_ms: 1.0,
                samples: 0,
                error: Some("connection refused".into()),
            },
            &[],
        )
        .await
        .unwrap();

    let html = app.get("/console").await.html();
    let cells = select_texts(&html, "#overview-alerts-table tbody tr td");
    assert_eq!(
        cells[..3],
        ["page", "firing", "CheckoutErrors"],
        "{cells:?}"
    );
    assert!(cells[3].starts_with("/checkout"), "{}", cells[3]);
    assert_eq!(cells[4], "30.00 %");
    let failing = select_texts(&html, "#failing-routes tbody tr td");
    assert_eq!(
        failing.len(),
        12,
        "three failing routes, /checkin has none: {failing:?}"
    );
    assert!(failing[0].starts_with("/checkout"), "{failing:?}");
    assert_eq!(failing[2], "30.00", "the unit is in the column head");
    assert!(failing[4].starts_with("/refund"), "{failing:?}");
    assert_eq!(failing[6], "5.00");
    assert!(failing[8].starts_with("/rebate"), "{failing:?}");
    assert_eq!(failing[10], "0.20");
    // Red from 5 % errors, amber below (as the error-% cards); the same in the routes table.
    let red = select_texts(&html, "#failing-routes tbody td.bad");
    assert_eq!(red, ["30.00", "5.00"]);
    assert_eq!(
        select_texts(&html, "#failing-routes tbody td.warn"),
        ["0.20"]
    );
    let table = app.get("/console/routes").await.html();
    assert_eq!(
        select_texts(&table, "td.err.bad"),
        ["30.00", "5.00"],
        "by route"
    );
    assert_eq!(select_texts(&table, "td.err.warn"), ["0.20"]);
    let down = select_texts(&html, "#targets-down li").join(" ");
    assert!(
        down.contains("billing") && down.contains("connection refused"),
        "{down}"
    );
}

/// The routes page's window selector: the figures are over the chosen window (10 s
/// follows a ramp: the latest scrape interval; 1 min averages the minute), the choice
/// stays in the sort and pager links, and a window outside the offered ones is refused.
#[tokio::test]
async fn routes_page_figures_follow_the_chosen_window() {
    let app = spawn_app().await;
    let target = add_target(&app).await;
    let now = harrier::now_ms();
    // 15 s intervals: 150 exchanges (10/s) ending 40 s ago, 450 (30/s) ending 2 s ago
    scrape(
        &app,
        target,
        now - 40_000,
        &[write("/ramp", interval(150.0, 0.0))],
    )
    .await;
    scrape(
        &app,
        target,
        now - 2_000,
        &[write("/ramp", interval(450.0, 0.0))],
    )
    .await;

    let tput =
        |html: &scraper::Html| select_texts(html, "#routes-table tbody tr td.tput")[0].clone();
    let minute = app.get("/console/routes").await.html();
    assert_eq!(
        tput(&minute),
        "20.0",
        "600 exchanges over 30 s of intervals"
    );
    let sel = scraper::Selector::parse("#route-window option[selected]").unwrap();
    let picked: Vec<_> = minute
        .select(&sel)
        .map(|o| o.value().attr("value"))
        .collect();
    assert_eq!(picked, [Some("1m")]);

    let short = app.get("/console/routes?window=10s").await.html();
    assert_eq!(tput(&short), "30.0", "the latest interval only");
    let picked: Vec<_> = short
        .select(&sel)
        .map(|o| o.value().attr("value"))
        .collect();
    assert_eq!(picked, [Some("10s")]);
    let subtitle = select_texts(&short, "#window-words").join("");
    assert_eq!(subtitle, "the last 10 s");
    let sort = scraper::Selector::parse("#routes-table thead th a.sort-link").unwrap();
    let href = short
        .select(&sort)
        .next()
        .unwrap()
        .value()
        .attr("href")
        .unwrap();
    assert!(href.contains("window=10s"), "{href}");

    // harrier's own routes (its self-scrape target) are hidden unless asked for
    let own = app
        .state
        .store
        .upsert_target(
            &harrier::store::TargetSpec {
                name: "harrier".into(),
                url: "http://127.0.0.1:7070/metrics".into(),
                kind: "prometheus".into(),
                interval_s: 10.0,
                timeout_s: 5.0,
                labels: [("service".to_string(), "harrier".to_string())].into(),
            },
            "builtin",
            now,
        )
        .await
        .unwrap();
    let mut own_write = write("GET /metrics", interval(10.0, 0.0));
    own_write.service = "harrier".into();
    scrape(&app, own.id, now - 1_000, &[own_write]).await;
    let routes = |html: &scraper::Html| select_texts(html, "#routes-table tbody tr td.route");
    let hidden = app.get("/console/routes").await.html();
    assert_eq!(routes(&hidden), ["/ramp"]);
    let note = select_texts(&hidden, "#routes-own").join(" ");
    assert!(
        note.contains("harrier's own 1 route") && note.contains("Show them"),
        "{note}"
    );
    let shown = app.get("/console/routes?own=show").await.html();
    assert_eq!(routes(&shown), ["GET /metrics", "/ramp"]);
    // the header counts the routes listed; showing and hiding keep the other settings
    assert_eq!(select_texts(&hidden, "#routes-count"), ["1"]);
    assert_eq!(select_texts(&shown, "#routes-count"), ["2"]);
    let link = |html: &scraper::Html| {
        html.select(&scraper::Selector::parse("#routes-own a").unwrap())
            .next()
            .and_then(|a| a.value().attr("href"))
            .map(str::to_owned)
    };
    let windowed = app
        .get("/console/routes?window=5m&sort=error_pct&dir=desc")
        .await
        .html();
    assert_eq!(
        link(&windowed).as_deref(),
        Some("/console/routes?window=5m&own=show&sort=error_pct&dir=desc")
    );
    let windowed = app
        .get("/console/routes?window=5m&own=show&sort=error_pct&dir=desc")
        .await
        .html();
    assert_eq!(
        link(&windowed).as_deref(),
        Some("/console/routes?window=5m&sort=error_pct&dir=desc")
    );
    let api = app.get("/api/v1/routes?own=hide&limit=10").await.json();
    assert_eq!(
        (api["total"].as_i64(), api["own_hidden"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        app.get("/api/v1/routes")
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        2,
        "the API shows them by default"
    );

    let bad = app.get("/console/routes?window=2h").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.text().contains("10s, 1m, 5m, 15m"), "{}", bad.text());
}
