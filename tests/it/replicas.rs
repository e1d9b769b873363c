//! Several `harrier serve` replicas on one database: the alerts lease gives the evaluator
//! and notifier to one of them at a time, hands it over when the holder stops, and fences
//! a holder that lost it (`services::alerts::lease`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use harrier::domain::alerts::rule::Duration as RuleDuration;
use harrier::services::alerts::lease::{ALERTS_LEASE, Leader};
use harrier::store::{DatabaseUrl, Store};
use tokio_util::sync::CancellationToken;

use crate::helpers::*;

#[tokio::test]
async fn a_lease_has_one_holder_at_a_time_and_its_term_grows_with_each_new_holder() {
    let (store, _config, _dir) = fresh_store().await;
    let t = 1_000_000;
    let ttl = 3_000;
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "a", t, ttl)
            .await
            .unwrap(),
        Some(1)
    );
    // B while A's lease runs: refused; A renews in the same term.
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "b", t + 1_000, ttl)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "a", t + 2_000, ttl)
            .await
            .unwrap(),
        Some(1)
    );
    assert!(
        store
            .lease_held(ALERTS_LEASE, "a", 1, t + 4_999)
            .await
            .unwrap()
    );
    // A stops renewing: once its lease has run out B takes it, in a new term…
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "b", t + 4_999, ttl)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "b", t + 5_000, ttl)
            .await
            .unwrap(),
        Some(2)
    );
    // …and A, resuming with its old term, holds nothing and cannot take it back.
    assert!(
        !store
            .lease_held(ALERTS_LEASE, "a", 1, t + 5_001)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "a", t + 5_001, ttl)
            .await
            .unwrap(),
        None
    );
    // Released at shutdown: the next candidate takes it at once, term 3.
    store.release_lease(ALERTS_LEASE, "b").await.unwrap();
    assert!(
        !store
            .lease_held(ALERTS_LEASE, "b", 2, t + 5_002)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .acquire_lease(ALERTS_LEASE, "a", t + 5_002, ttl)
            .await
            .unwrap(),
        Some(3)
    );
}

/// Two evaluator loops on one PostgreSQL database (two replicas): one leads; when it stops
/// without releasing (killed), the other leads within the lease time-out plus a round, and
/// the stopped one, were it to resume, is fenced off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_evaluate_one_at_a_time_and_hand_over_when_the_leader_dies() {
    if on_postgres() {
        eprintln!(
            "SKIPPED in the PostgreSQL pass: this test starts its replicas on PostgreSQL itself"
        );
        return;
    }
    let Some((server, _pg)) = postgres_server("replicas sharing one database") else {
        return;
    };
    let (first, config, _dir) = fresh_store_on(Some(&server)).await;
    let url = config.database_url.clone().unwrap();
    assert!(matches!(url, DatabaseUrl::Postgres(_)));
    let second = Store::connect(&url).await.unwrap();
    let mut alerts = config.alerts.clone();
    alerts.evaluation_interval = RuleDuration(1_000);
    alerts.builtin_rules = false;
    let alerts = Arc::new(alerts);
    let start = |store: Store| {
        let leader = Arc::new(Leader::new(store.clone(), 1_000));
        let task = tokio::spawn(harrier::services::alerts::evaluator::run(
            store,
            harrier::services::live::Hub::new(),
            alerts.clone(),
            Arc::new(tokio::sync::Notify::new()),
            leader.clone(),
            CancellationToken::new(),
        ));
        (leader, task)
    };
    let (a, task_a) = start(first.clone());
    let (b, task_b) = start(second);
    assert_eq!(a.ttl_ms, 3_000);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let terms = (a.term(), b.term());
    assert!(
        (terms.0 == 1) ^ (terms.1 == 1) && terms.0 + terms.1 == 1,
        "exactly one leads, in term 1: {terms:?}"
    );
    let (leader, leader_task, other, other_task) = if terms.0 == 1 {
        (a, task_a, b, task_b)
    } else {
        (b, task_b, a, task_a)
    };
    // The leader dies: no release.
    leader_task.abort();
    let died = Instant::now();
    while other.term() != 2 {
        assert!(
            died.elapsed() < Duration::from_millis(3_000 + 1_000 + 1_500),
            "no takeover within the lease time-out plus a round"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = died.elapsed();
    // The old leader, resuming, holds nothing: its notifier would send nothing.
    assert!(!leader.still_held(harrier::now_ms()).await);
    assert!(other.still_held(harrier::now_ms()).await);
    eprintln!(
        "takeover {} ms after the leader died (lease 3000 ms, rounds 1000 ms)",
        took.as_millis()
    );
    other_task.abort();
}
