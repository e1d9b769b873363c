//! The alert operations on SQLite, where a restart is reopening the same pool.

use super::SqliteStore;
use crate::domain::alerts::eval::{Phase, Transition};
use crate::domain::alerts::rule::Rule;
use crate::store::alerts::*;

use sqlx::SqlitePool;

use crate::domain::alerts::eval::{Change, Measured, evaluate};
use crate::domain::alerts::rule::Duration;

const MIN: i64 = 60_000;

fn rule() -> Rule {
    let mut r = Rule::defaults().remove(0);
    r.name = "HighErrors".into();
    r.for_ = Duration(2 * MIN);
    r
}

fn measured(v: f64) -> Vec<Measured> {
    vec![Measured {
        labels: std::sync::Arc::new(
            [
                ("route".to_string(), "/checkout".to_string()),
                ("service".to_string(), "orders".to_string()),
            ]
            .into(),
        ),
        value: Some(v),
        count: Some(100.0),
    }]
}

/// One evaluation round through the store, as the evaluator loop does it.
async fn round(store: &SqliteStore, r: &Rule, v: f64, t: i64) -> Vec<Transition> {
    let prev = store.list_alerts().await.unwrap();
    let o = evaluate(r, &measured(v), &prev, t);
    store
        .save_evaluation(std::slice::from_ref(&r.name), &o.alerts, &o.transitions, t)
        .await
        .unwrap();
    o.transitions
}

#[sqlx::test(migrations = false)]
async fn rules_round_trip_and_builtins_stay_deleted(pool: SqlitePool) {
    let store = SqliteStore::from_pool(pool).await.unwrap();
    let builtin = Rule::defaults();
    store.seed_alert_rules(&builtin, &[], 1).await.unwrap();
    let names: Vec<String> = store
        .list_alert_rules()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.rule.name)
        .collect();
    assert_eq!(names, ["RouteErrorRateCritical", "RouteErrorRateWarning"]);

    let r = rule();
    assert!(store.insert_alert_rule(&r, "api", 2).await.unwrap());
    assert!(
        !store.insert_alert_rule(&r, "api", 3).await.unwrap(),
        "names are unique"
    );
    let got = store.get_alert_rule("HighErrors").await.unwrap().unwrap();
    assert_eq!((got.rule.clone(), got.origin.as_str()), (r.clone(), "api"));

    let mut changed = r.clone();
    changed.threshold = 7.5;
    assert!(
        store
            .update_alert_rule("HighErrors", &changed, 4)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .get_alert_rule("HighErrors")
            .await
            .unwrap()
            .unwrap()
            .rule
            .threshold,
        7.5
    );
    assert!(!store.update_alert_rule("Nope", &changed, 4).await.unwrap());

    assert!(
        store
            .delete_alert_rule("RouteErrorRateWarning", 5)
            .await
            .unwrap()
    );
    assert!(store.delete_alert_rule("HighErrors", 5).await.unwrap());
    assert!(!store.delete_alert_rule("HighErrors", 5).await.unwrap());
    store.seed_alert_rules(&builtin, &[], 6).await.unwrap();
    let names: Vec<String> = store
        .list_alert_rules()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.rule.name)
        .collect();
    assert_eq!(
        names,
        ["RouteErrorRateCritical"],
        "a deleted built-in is not seeded again"
    );

    // a config rule overrides a stored rule of the same name
    let mut cfg = builtin[1].clone();
    cfg.threshold = 20.0;
    store.seed_alert_rules(&builtin, &[cfg], 7).await.unwrap();
    let c = store
        .get_alert_rule("RouteErrorRateCritical")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((c.rule.threshold, c.origin.as_str()), (20.0, "config"));
}

fn names(rules: Vec<StoredRule>) -> Vec<String> {
    rules.into_iter().map(|r| r.rule.name).collect()
}

/// A rule removed from harrier.toml, or the built-ins turned off, are not in force
/// after the next start (with their alerts); a renamed built-in stays the user's.
#[sqlx::test(migrations = false)]
async fn rules_removed_from_the_configuration_go_at_the_next_start(pool: SqlitePool) {
    let store = SqliteStore::from_pool(pool).await.unwrap();
    let builtin = Rule::defaults();
    let mut a = rule();
    a.name = "FromFileA".into();
    let mut b = rule();
    b.name = "FromFileB".into();
    store
        .seed_alert_rules(&builtin, &[a.clone(), b.clone()], 1)
        .await
        .unwrap();
    round(&store, &b, 9.0, MIN).await;
    assert_eq!(store.list_alerts().await.unwrap().len(), 1);
    // B removed from the file, built-ins turned off
    store.seed_alert_rules(&[], &[a.clone()], 2).await.unwrap();
    assert_eq!(
        names(store.list_alert_rules().await.unwrap()),
        ["FromFileA"]
    );
    assert!(
        store.list_alerts().await.unwrap().is_empty(),
        "B's alert went with it"
    );
    // built-ins back on
    store
        .seed_alert_rules(&builtin, &[a.clone()], 3)
        .await
        .unwrap();
    assert_eq!(
        names(store.list_alert_rules().await.unwrap()),
        [
            "FromFileA",
            "RouteErrorRateCritical",
            "RouteErrorRateWarning"
        ]
    );
    // a built-in renamed through the API is the user's rule from then on
    let mut renamed = builtin[1].clone();
    renamed.name = "MyErrors".into();
    assert!(
        store
            .update_alert_rule("RouteErrorRateWarning", &renamed, 4)
            .await
            .unwrap()
    );
    store.seed_alert_rules(&builtin, &[a], 5).await.unwrap();
    let rules = store.list_alert_rules().await.unwrap();
    assert_eq!(
        names(rules.clone()),
        ["FromFileA", "MyErrors", "RouteErrorRateCritical"]
    );
    assert_eq!(rules[1].origin, "api");
}

#[sqlx::test(migrations = false)]
async fn restart_in_the_middle_of_pending_resumes_the_for_timer(pool: SqlitePool) {
    let r = rule();
    let store = SqliteStore::from_pool(pool.clone()).await.unwrap();
    store.insert_alert_rule(&r, "api", 0).await.unwrap();
    let t = round(&store, &r, 9.0, 0).await;
    assert_eq!(t[0].change, Change::Pending);
    round(&store, &r, 9.0, MIN).await;
    drop(store);

    // "restart": a new store over the same database
    let store = SqliteStore::from_pool(pool).await.unwrap();
    let alerts = store.list_alerts().await.unwrap();
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].state, Phase::Pending);
    assert_eq!(
        alerts[0].active_since_ms, 0,
        "the for timer is not restarted"
    );
    assert_eq!(alerts[0].labels["route"], "/checkout");
    let t = round(&store, &r, 9.0, 2 * MIN).await;
    assert_eq!(
        t.iter().map(|t| t.change).collect::<Vec<_>>(),
        [Change::Firing]
    );
    assert_eq!(store.undelivered_notifications(10).await.unwrap().len(), 1);
}

#[sqlx::test(migrations = false)]
async fn restart_while_firing_neither_resends_nor_loses(pool: SqlitePool) {
    let r = rule();
    let store = SqliteStore::from_pool(pool.clone()).await.unwrap();
    store.insert_alert_rule(&r, "api", 0).await.unwrap();
    for i in 0..=2 {
        round(&store, &r, 9.0, i * MIN).await;
    }
    let notes = store.undelivered_notifications(10).await.unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(
        (notes[0].change.as_str(), notes[0].started_at_ms),
        ("firing", 2 * MIN)
    );
    // the dispatcher takes the notice into its groups
    store
        .ingest_notices(&[notes[0].id], &[], 2 * MIN)
        .await
        .unwrap();
    drop(store);

    let store = SqliteStore::from_pool(pool).await.unwrap();
    let a = store.list_alerts().await.unwrap();
    assert_eq!(
        (a[0].state, a[0].fired_at_ms),
        (Phase::Firing, Some(2 * MIN))
    );
    // still bad after the restart: no second "firing"
    assert!(round(&store, &r, 9.0, 3 * MIN).await.is_empty());
    assert!(
        store
            .undelivered_notifications(10)
            .await
            .unwrap()
            .is_empty()
    );
    // recovers: one "resolved" notice for the same episode
    let t = round(&store, &r, 1.0, 4 * MIN).await;
    assert_eq!(t[0].change, Change::Resolved);
    let notes = store.undelivered_notifications(10).await.unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(
        (
            notes[0].change.as_str(),
            notes[0].started_at_ms,
            notes[0].ended_at_ms
        ),
        ("resolved", 2 * MIN, Some(4 * MIN))
    );
    assert!(store.list_alerts().await.unwrap().is_empty());

    let h = store.alert_history(Some("HighErrors"), 10).await.unwrap();
    let changes: Vec<&str> = h.iter().map(|h| h.change.as_str()).collect();
    assert_eq!(changes, ["resolved", "firing", "pending"]);
}

#[sqlx::test(migrations = false)]
async fn alerts_of_a_rule_deleted_mid_round_are_dropped(pool: SqlitePool) {
    let store = SqliteStore::from_pool(pool).await.unwrap();
    let r = rule();
    store.insert_alert_rule(&r, "api", 0).await.unwrap();
    // the round read the rule, then the rule was deleted before the round saved
    let o = evaluate(&r, &measured(9.0), &[], 0);
    assert!(store.delete_alert_rule(&r.name, 1).await.unwrap());
    store
        .save_evaluation(std::slice::from_ref(&r.name), &o.alerts, &o.transitions, 2)
        .await
        .unwrap();
    assert!(store.list_alerts().await.unwrap().is_empty());

    // renaming a rule onto the name of a deleted built-in works
    store
        .seed_alert_rules(&Rule::defaults(), &[], 3)
        .await
        .unwrap();
    assert!(
        store
            .delete_alert_rule("RouteErrorRateWarning", 4)
            .await
            .unwrap()
    );
    let mut renamed = Rule::defaults().remove(1);
    renamed.name = "RouteErrorRateWarning".into();
    assert!(
        store
            .update_alert_rule("RouteErrorRateCritical", &renamed, 5)
            .await
            .unwrap()
    );
    let names: Vec<String> = store
        .list_alert_rules()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.rule.name)
        .collect();
    assert_eq!(names, ["RouteErrorRateWarning"]);
}

#[sqlx::test(migrations = false)]
async fn history_by_labels_and_time_keeps_periods_open_at_the_start(pool: SqlitePool) {
    let store = SqliteStore::from_pool(pool).await.unwrap();
    let r = rule();
    store.insert_alert_rule(&r, "api", 0).await.unwrap();
    // pending at 1 min, firing at 3 min, resolved at 10 min
    round(&store, &r, 9.0, MIN).await;
    round(&store, &r, 9.0, 3 * MIN).await;
    round(&store, &r, 1.0, 10 * MIN).await;
    let read = |from: Option<i64>, to: Option<i64>, route: &str| {
        let filter = HistoryFilter {
            labels: [("route".to_string(), route.to_string())].into(),
            from_ms: from,
            to_ms: to,
            ..HistoryFilter::default()
        };
        let store = store.clone();
        async move {
            store
                .alert_history_filtered(&filter, 100)
                .await
                .unwrap()
                .into_iter()
                .map(|h| (h.change, h.at_ms))
                .collect::<Vec<_>>()
        }
    };
    assert!(store.firing_counts().await.unwrap().is_empty(), "resolved");
    let all = read(None, None, "/checkout").await;
    assert_eq!(
        all,
        [
            ("resolved".to_string(), 10 * MIN),
            ("firing".to_string(), 3 * MIN),
            ("pending".to_string(), MIN),
        ]
    );
    assert!(read(None, None, "/search").await.is_empty());
    // From 5 min: the firing row of 3 min says it was open at 5 min.
    let late = read(Some(5 * MIN), None, "/checkout").await;
    assert_eq!(
        late,
        [
            ("resolved".to_string(), 10 * MIN),
            ("firing".to_string(), 3 * MIN),
        ]
    );
    // From 11 min: closed before the range, nothing.
    assert!(read(Some(11 * MIN), None, "/checkout").await.is_empty());
    // Up to 2 min: only the pending row.
    assert_eq!(
        read(None, Some(2 * MIN), "/checkout").await,
        [("pending".to_string(), MIN)]
    );
}
