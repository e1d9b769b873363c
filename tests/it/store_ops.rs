//! Store operations, each test body run on both databases: `NAME::sqlite` on a fresh SQLite
//! file, `NAME::postgres` on a fresh PostgreSQL database (`HARRIER_TEST_DATABASE_URL`, else
//! a server started for the test from Debian's binaries; skipped with a notice without
//! either).

use crate::helpers::InsertRuns;
use crate::helpers::{exec_raw, fresh_store_on, postgres_server};
use harrier::domain::alerts::channel::ChannelSpec;
use harrier::domain::alerts::eval::{Alert, Change, Phase, Transition};
use harrier::domain::alerts::rule::{Duration, Labels, Rule};
use harrier::domain::alerts::silence::{Matcher, SilenceSpec};
use harrier::domain::routes::Interval;
use harrier::domain::runs::{RunBuilder, RunData, Sample};
use harrier::store::{
    Delivery, GroupEntry, HistoryFilter, NewRun, Retention, RouteWrite, RunPatch,
    SILENCE_RETENTION_MS, ScrapeStatus, Store, StoredChannel, TargetSpec,
};

/// Instantiates each `async fn NAME(store: Store) { … }` once per backend, as the tests
/// `NAME::sqlite` and `NAME::postgres`, each on a fresh database.
macro_rules! backend_tests {
    ($( $(#[$attr:meta])* async fn $name:ident($store:ident: Store) $body:block )*) => {
        $(
            $(#[$attr])*
            mod $name {
                use super::*;

                async fn body($store: Store) $body

                #[tokio::test]
                async fn sqlite() {
                    let (store, _config, _dir) = fresh_store_on(None).await;
                    body(store).await;
                }

                #[tokio::test]
                async fn postgres() {
                    let Some((server, _pg)) = postgres_server(module_path!()) else {
                        return;
                    };
                    let (store, _config, _dir) = fresh_store_on(Some(&server)).await;
                    body(store).await;
                }
            }
        )*
    };
}

/// Binds `$2` then `$1`, `$1` twice, on whichever pool the store has: the shared SQL's
/// numbered placeholders mean the same on both databases.
async fn numbered_placeholders(store: &Store) -> (String, String) {
    let sql = "SELECT $2 || $1, $1";
    if let Some(pool) = store.sqlite_pool() {
        sqlx::query_as(sql)
            .bind("a")
            .bind("b")
            .fetch_one(pool)
            .await
            .unwrap()
    } else {
        sqlx::query_as(sql)
            .bind("a")
            .bind("b")
            .fetch_one(store.postgres_pool().unwrap())
            .await
            .unwrap()
    }
}

fn silence(start: i64, end: i64) -> SilenceSpec {
    SilenceSpec {
        matchers: vec![Matcher::parse("route=/checkout").unwrap()],
        starts_at_ms: start,
        ends_at_ms: end,
        comment: "deploy".into(),
        created_by: "ana".into(),
    }
}

fn names(v: &[StoredChannel]) -> Vec<&str> {
    v.iter().map(|s| s.channel.name.as_str()).collect()
}

backend_tests! {
    /// `$N` placeholders bind by number on SQLite as on PostgreSQL (out of order, reused).
    async fn dollar_placeholders_bind_by_number(store: Store) {
        assert_eq!(
            numbered_placeholders(&store).await,
            ("ba".to_string(), "a".to_string())
        );
    }

    /// Silences list newest first, expire (a pending one ends before it starts) and are
    /// dropped a retention period after their end.
    async fn silences_list_expire_and_age_out(store: Store) {
        let a = store.insert_silence(&silence(0, 1_000), 0).await.unwrap();
        let b = store.insert_silence(&silence(500, 2_000), 10).await.unwrap();
        assert_eq!((a.state, b.state), ("active", "pending"));
        let list = store.list_silences(600).await.unwrap();
        assert_eq!(list.iter().map(|s| s.id).collect::<Vec<_>>(), [b.id, a.id]);
        assert_eq!(list[0].matchers, silence(0, 0).matchers);
        assert_eq!((list[0].comment.as_str(), list[0].created_by.as_str()), ("deploy", "ana"));
        assert_eq!(store.active_silences(600).await.unwrap().len(), 2, "both in force at 600");

        // b was pending until 500 and in force at 600; expired at 700 it keeps its start
        assert!(store.expire_silence(b.id, 700).await.unwrap());
        assert!(!store.expire_silence(999, 700).await.unwrap());
        let list = store.list_silences(700).await.unwrap();
        assert_eq!((list[0].state, list[0].starts_at_ms, list[0].ends_at_ms), ("expired", 500, 700));
        assert_eq!(store.active_silences(700).await.unwrap()[0].id, a.id);

        // a pending silence expired before its start starts when it ends
        let c = store.insert_silence(&silence(5_000, 9_000), 800).await.unwrap();
        assert!(store.expire_silence(c.id, 900).await.unwrap());
        let c = store.list_silences(900).await.unwrap().into_iter().find(|s| s.id == c.id).unwrap();
        assert_eq!((c.starts_at_ms, c.ends_at_ms, c.state), (900, 900, "expired"));
        // expiring an expired silence changes nothing
        assert!(store.expire_silence(c.id, 950).await.unwrap());
        let again = store.list_silences(950).await.unwrap().into_iter().find(|s| s.id == c.id).unwrap();
        assert_eq!(again.ends_at_ms, 900);

        // kept for the retention period after the end, then gone
        let week = SILENCE_RETENTION_MS;
        let left = |at: i64| {
            let store = store.clone();
            async move { store.list_silences(at).await.unwrap().iter().map(|s| s.id).collect::<Vec<_>>() }
        };
        assert_eq!(left(700 + week).await.len(), 3, "b ended at 700: not yet");
        assert_eq!(left(701 + week).await, [c.id, a.id]);
        assert_eq!(left(901 + week).await, [a.id]);
        assert!(left(1_001 + week).await.is_empty());
    }

    async fn channels_round_trip_rename_and_delete(store: Store) {
        assert!(store.list_channels().await.unwrap().is_empty());
        let mut ops = ChannelSpec::new("ops", "webhook", "http://127.0.0.1:9095/hook");
        ops.group_wait = Duration(0);
        ops.matchers = vec!["severity=~\"critical|page\"".into()];
        let chat = ChannelSpec::new("chat", "slack", "https://hooks.slack.com/services/T/B/X");
        assert!(store.insert_channel(&ops, 1).await.unwrap());
        assert!(store.insert_channel(&chat, 2).await.unwrap());
        assert!(
            !store.insert_channel(&ops, 3).await.unwrap(),
            "names are unique"
        );
        let all = store.list_channels().await.unwrap();
        assert_eq!(names(&all), ["chat", "ops"]);
        assert_eq!(all[1].channel, ops, "every setting survives the JSON");
        assert_eq!((all[1].created_at_ms, all[1].updated_at_ms), (1, 1));

        // changed in place
        let mut changed = ops.clone();
        changed.send_resolved = false;
        assert!(store.update_channel("ops", &changed, 4).await.unwrap());
        let got = store.get_channel("ops").await.unwrap().unwrap();
        assert_eq!((got.channel.send_resolved, got.updated_at_ms), (false, 4));
        assert_eq!(got.created_at_ms, 1);
        assert!(
            !store.update_channel("nope", &changed, 5).await.unwrap(),
            "unknown"
        );
        changed.name = "chat".into();
        assert!(
            !store.update_channel("ops", &changed, 5).await.unwrap(),
            "cannot rename onto another channel"
        );
        assert_eq!(
            store.get_channel("chat").await.unwrap().unwrap().channel,
            chat
        );

        // renamed: its groups and delivery log go with it
        let entry = GroupEntry {
            channel: "ops".into(),
            group_key: "{}:{}".into(),
            group_labels: Default::default(),
            fingerprint: "f".into(),
            rule: "R".into(),
            labels: Default::default(),
            value: None,
            starts_at_ms: 0,
            ends_at_ms: None,
            first_flush_ms: 0,
            flush_now: false,
        };
        store.ingest_notices(&[], &[entry], 0).await.unwrap();
        let d = Delivery {
            channel: "ops".into(),
            group_key: "{}:{}".into(),
            at_ms: 6,
            firing: 1,
            resolved: 0,
            status: Some(200),
            error: None,
        };
        store.log_delivery(&d).await.unwrap();
        changed.name = "ops-eu".into();
        assert!(store.update_channel("ops", &changed, 7).await.unwrap());
        assert!(store.get_channel("ops").await.unwrap().is_none());
        assert_eq!(
            store.get_channel("ops-eu").await.unwrap().unwrap().channel,
            changed
        );
        let groups = store.due_groups(10).await.unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].channel, "ops-eu");
        let last = store
            .last_deliveries(&["ops-eu".into(), "ops".into()])
            .await
            .unwrap();
        assert_eq!(last.len(), 1);
        assert_eq!(last["ops-eu"].at_ms, 6);

        assert!(store.delete_channel("ops-eu").await.unwrap());
        assert!(!store.delete_channel("ops-eu").await.unwrap());
        assert_eq!(names(&store.list_channels().await.unwrap()), ["chat"]);

        assert_eq!(
            store
                .delete_channels_named(&["chat".into(), "other".into()])
                .await
                .unwrap(),
            ["chat"]
        );
        assert!(store.list_channels().await.unwrap().is_empty());
    }

    async fn groups_of_channels_in_neither_place_are_dropped(store: Store) {
        let entry = |channel: &str| GroupEntry {
            channel: channel.into(),
            group_key: "{}:{}".into(),
            group_labels: Default::default(),
            fingerprint: "f".into(),
            rule: "R".into(),
            labels: Default::default(),
            value: None,
            starts_at_ms: 0,
            ends_at_ms: None,
            first_flush_ms: 0,
            flush_now: false,
        };
        let entries: Vec<GroupEntry> = ["file", "api", "gone"].map(entry).into();
        store.ingest_notices(&[], &entries, 0).await.unwrap();
        let api = ChannelSpec::new("api", "webhook", "http://127.0.0.1/hook");
        store.insert_channel(&api, 0).await.unwrap();
        store
            .drop_groups_of_unknown_channels(&["file".into()])
            .await
            .unwrap();
        let left: Vec<String> = store
            .due_groups(1)
            .await
            .unwrap()
            .into_iter()
            .map(|g| g.channel)
            .collect();
        assert_eq!(left, ["api", "file"]);
        store.delete_channel("api").await.unwrap();
        store
            .drop_groups_of_unknown_channels(&["file".into()])
            .await
            .unwrap();
        assert_eq!(store.due_groups(1).await.unwrap().len(), 1);
        assert_eq!(
            store.group_alerts("api", "{}:{}").await.unwrap(),
            [],
            "its alerts went too"
        );
    }

    async fn unreadable_rows_are_skipped(store: Store) {
        exec_raw(
            &store,
            "INSERT INTO alert_channels (name, body, created_at_ms, updated_at_ms)
             VALUES ('broken', '{\"name\": 1}', 0, 0)",
        )
        .await;
        let ok = ChannelSpec::new("ok", "webhook", "http://127.0.0.1/hook");
        store.insert_channel(&ok, 1).await.unwrap();
        assert_eq!(names(&store.list_channels().await.unwrap()), ["ok"]);
        assert!(store.get_channel("broken").await.unwrap().is_none());
    }

    /// A group's next flush only moves earlier, and only for an entry that flushes now.
    async fn group_flush_moves_earlier_only_when_asked(store: Store) {
        let entry = |fingerprint: &str, first_flush_ms: i64, flush_now: bool| GroupEntry {
            channel: "ops".into(),
            group_key: "{}:{}".into(),
            group_labels: Default::default(),
            fingerprint: fingerprint.into(),
            rule: "R".into(),
            labels: Default::default(),
            value: Some(1.5),
            starts_at_ms: 0,
            ends_at_ms: None,
            first_flush_ms,
            flush_now,
        };
        let next = |store: Store| async move {
            let groups = store.due_groups(i64::MAX).await.unwrap();
            assert_eq!(groups.len(), 1);
            groups[0].next_flush_ms
        };
        store.ingest_notices(&[], &[entry("a", 500, false)], 0).await.unwrap();
        assert_eq!(next(store.clone()).await, 500);
        store.ingest_notices(&[], &[entry("b", 100, false)], 1).await.unwrap();
        assert_eq!(next(store.clone()).await, 500, "not asked to flush now");
        store.ingest_notices(&[], &[entry("c", 900, true)], 2).await.unwrap();
        assert_eq!(next(store.clone()).await, 500, "a later flush does not delay it");
        store.ingest_notices(&[], &[entry("d", 200, true)], 3).await.unwrap();
        assert_eq!(next(store.clone()).await, 200);
        assert_eq!(store.group_alerts("ops", "{}:{}").await.unwrap().len(), 4);
        assert!(store.due_groups(199).await.unwrap().is_empty());
    }
}

backend_tests! {
    /// Leases: taken, renewed in the same term, refused to another holder while they run,
    /// taken over (next term) once expired; holders and forgetting go by name prefix.
    async fn leases_terms_holders_and_forgetting(store: Store) {
        assert_eq!(store.acquire_lease("replica:a", "a", 0, 100).await.unwrap(), Some(1));
        assert_eq!(store.acquire_lease("replica:a", "a", 50, 100).await.unwrap(), Some(1));
        assert_eq!(store.acquire_lease("replica:a", "b", 60, 100).await.unwrap(), None);
        assert!(store.lease_held("replica:a", "a", 1, 149).await.unwrap());
        assert!(!store.lease_held("replica:a", "a", 1, 150).await.unwrap());
        assert_eq!(store.acquire_lease("replica:a", "b", 150, 100).await.unwrap(), Some(2));
        assert!(!store.lease_held("replica:a", "a", 1, 151).await.unwrap());
        assert_eq!(store.acquire_lease("replica:c", "c", 150, 10).await.unwrap(), Some(1));
        assert_eq!(store.acquire_lease("leader", "c", 150, 1_000).await.unwrap(), Some(1));
        assert_eq!(store.lease_holders("replica:", 155).await.unwrap(), ["b", "c"]);
        assert_eq!(store.lease_holders("replica:", 165).await.unwrap(), ["b"]);
        assert_eq!(store.forget_leases("replica:", 200).await.unwrap(), 1, "c's ended at 160");
        assert_eq!(store.forget_leases("replica:", 300).await.unwrap(), 1, "b's ended at 250");
        assert_eq!(store.lease_holders("", 165).await.unwrap(), ["c"], "the leader's stays");
        store.release_lease("leader", "other").await.unwrap();
        assert_eq!(store.lease_holders("lead", 165).await.unwrap(), ["c"]);
        store.release_lease("leader", "c").await.unwrap();
        assert!(store.lease_holders("lead", 165).await.unwrap().is_empty());
    }

    /// Sessions live until idle or too old; the audit log pages back by id.
    async fn sessions_and_audit(store: Store) {
        let id = store.insert_user("ana", "admin", "hash", 0).await.unwrap().unwrap();
        assert_eq!(store.insert_user("ana", "viewer", "h", 0).await.unwrap(), None);
        store.insert_session("s1", id, 1_000).await.unwrap();
        let user = store.session_user("s1", 2_000).await.unwrap().unwrap();
        assert_eq!((user.id, user.name.as_str(), user.role.as_str()), (id, "ana", "admin"));
        assert!(store.session_user("nope", 2_000).await.unwrap().is_none());
        store.delete_session("s1").await.unwrap();
        assert!(store.session_user("s1", 2_000).await.unwrap().is_none());

        for (at, status) in [(1, 200), (2, 403), (3, 200)] {
            store.insert_audit(at, "ana", "POST", "/api/v1/runs", status, Some("127.0.0.1")).await.unwrap();
        }
        let all = store.list_audit(None, 10).await.unwrap();
        assert_eq!(all.iter().map(|a| a.at_ms).collect::<Vec<_>>(), [3, 2, 1]);
        let older = store.list_audit(Some(all[0].id), 1).await.unwrap();
        assert_eq!((older.len(), older[0].status), (1, 403));
    }
}

async fn run(store: &Store, name: &str, scenario: &str, at: i64) -> i64 {
    let mut data = RunData::default();
    data.overall.first_start_ms = Some(at);
    store
        .insert_run(
            &NewRun {
                name: name.into(),
                scenario: Some(scenario.into()),
                tool: "jmeter".into(),
                imported_at_ms: at,
                ..NewRun::default()
            },
            &data,
        )
        .await
        .unwrap()
}

backend_tests! {
    async fn baselines_checks_and_scenarios(store: Store) {
        let a = run(&store, "a", "checkout", 1_000).await;
        let b = run(&store, "b", "checkout", 2_000).await;
        let _c = run(&store, "c", "search", 3_000).await;
        let ids: Vec<i64> = store
            .scenario_runs("checkout")
            .await
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(ids, [a, b], "oldest first, one scenario");
        assert_eq!(store.pinned_baseline("checkout").await.unwrap(), None);
        store.set_baseline("checkout", a, 5).await.unwrap();
        store.set_baseline("checkout", b, 6).await.unwrap();
        assert_eq!(store.pinned_baseline("checkout").await.unwrap(), Some(b));
        let scenarios = store.list_scenarios().await.unwrap();
        assert_eq!(scenarios[0].scenario, "search");
        assert_eq!(scenarios[1].runs, 2);
        assert_eq!(scenarios[1].baseline_run_id, Some(b));
        store.record_check(a, None, false, "[]", 7).await.unwrap();
        store.record_check(a, None, true, "[]", 8).await.unwrap();
        let checks = store.scenario_checks("checkout").await.unwrap();
        assert_eq!(checks.len(), 1);
        assert!(checks[0].passed, "the latest check counts");
        assert!(store.clear_baseline("checkout").await.unwrap());
        assert!(!store.clear_baseline("checkout").await.unwrap());
        assert_eq!(store.pinned_baseline("checkout").await.unwrap(), None);
        // Deleting the run drops its pin.
        store.set_baseline("checkout", a, 9).await.unwrap();
        store.delete_run(a).await.unwrap();
        assert_eq!(store.pinned_baseline("checkout").await.unwrap(), None);
    }

    async fn draws_are_stored_with_complete_runs_only(store: Store) {

        let mut b = RunBuilder::new();
        for i in 0..300i64 {
            b.push(
                1,
                &Sample {
                    label: if i % 2 == 0 { "A" } else { "B" },
                    start_ms: 1_700_000_000_000 + i * 100,
                    elapsed_ms: 10 + (i % 7) as u64,
                    success: true,
                    response_code: "200",
                    message: "",
                    bytes_received: 1,
                    bytes_sent: 1,
                    active_users: None,
                    is_transaction: false,
                },
            );
        }
        let data = b.finish();
        let id = store
            .create_live_run(&NewRun {
                name: "live".into(),
                tool: "k6".into(),
                ..NewRun::default()
            })
            .await
            .unwrap();
        // A live snapshot: no draws yet (the data still changes).
        store
            .replace_run_data(id, &data, &Vec::new(), "live", None)
            .await
            .unwrap();
        assert!(store.run_draws(id, false).await.unwrap().is_empty());
        // Complete: the caller's draws are kept as given, one blob per scope (total, A, B),
        // readable with the default resamples.
        let draws = harrier::domain::compare::stored::precompute(
            &data,
            harrier::domain::compare::DEFAULT_RESAMPLES,
        );
        store
            .replace_run_data(id, &data, &draws, "complete", None)
            .await
            .unwrap();
        let rows = store.run_draws(id, false).await.unwrap();
        assert_eq!(rows, draws);
        assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 2]);
        for (_, blob) in &rows {
            let r = harrier::domain::compare::stored::resampled(
                blob,
                harrier::domain::compare::DEFAULT_RESAMPLES,
            );
            assert!(
                r.is_some_and(|r| r.is_some()),
                "a scope with buckets has draws"
            );
        }
        let total = store.run_draws(id, true).await.unwrap();
        assert_eq!(total, rows[..1]);
        // Replaced by hand (as a comparison does for older runs), and dropped with the run.
        store.put_run_draws(id, &[(1, vec![9])]).await.unwrap();
        assert_eq!(store.run_draws(id, false).await.unwrap()[1].1, [9]);
        store.delete_run(id).await.unwrap();
        assert!(store.run_draws(id, false).await.unwrap().is_empty());
    }
}

fn transition(route: &str, change: Change, at_ms: i64) -> Transition {
    let labels: Labels = [("route".to_string(), route.to_string())].into();
    Transition {
        rule: "HighErrors".into(),
        labels: labels.clone(),
        change,
        value: Some(7.5),
        at_ms,
        alert: Alert {
            rule: "HighErrors".into(),
            labels,
            state: Phase::Firing,
            value: Some(7.5),
            active_since_ms: 0,
            fired_at_ms: Some(0),
            keep_firing_since_ms: None,
            last_eval_ms: at_ms,
        },
    }
}

backend_tests! {
    /// The alert history filters by label values read from the stored JSON labels.
    async fn alert_history_by_labels(store: Store) {
        let mut rule = Rule::defaults().remove(0);
        rule.name = "HighErrors".into();
        assert!(store.insert_alert_rule(&rule, "api", 0).await.unwrap());
        let rounds = [
            transition("/checkout", Change::Firing, 10),
            transition("/search", Change::Firing, 20),
            transition("/checkout", Change::Resolved, 30),
        ];
        store
            .save_evaluation(&["HighErrors".into()], &[], &rounds, 30)
            .await
            .unwrap();
        let filter = |route: &str| HistoryFilter {
            rule: Some("HighErrors".into()),
            labels: [("route".to_string(), route.to_string())].into(),
            from_ms: None,
            to_ms: None,
        };
        let at = |rows: Vec<harrier::store::HistoryRow>| rows.iter().map(|r| r.at_ms).collect::<Vec<_>>();
        assert_eq!(at(store.alert_history_filtered(&filter("/checkout"), 10).await.unwrap()), [30, 10]);
        assert_eq!(at(store.alert_history_filtered(&filter("/search"), 10).await.unwrap()), [20]);
        assert!(store.alert_history_filtered(&filter("/nope"), 10).await.unwrap().is_empty());
        assert_eq!(at(store.alert_history(None, 10).await.unwrap()), [30, 20, 10]);
    }
}

fn route_write(route: &str, exchanges: Option<f64>, last_exchange_ms: Option<i64>) -> RouteWrite {
    RouteWrite {
        service: "orders".into(),
        route: route.into(),
        labels: Default::default(),
        source: "camel".into(),
        state: Some("Started".into()),
        last_exchange_ms,
        interval: exchanges.map(|n| Interval {
            interval_ms: 15_000,
            exchanges: Some(n),
            failed: Some(0.0),
            duration_sum_s: Some(n * 0.01),
            duration_count: Some(n),
            buckets: Vec::new(),
            max_s: None,
            inflight: None,
            resets: 0,
        }),
        instance: String::new(),
    }
}

backend_tests! {
    async fn runs_list_edit_and_delete(store: Store) {
        let older = run(&store, "older", "checkout", 1_000).await;
        let newer = run(&store, "newer", "checkout", 2_000).await;
        let names: Vec<String> = store.list_runs().await.unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["newer", "older"], "newest first");
        assert_eq!(store.run_list_item(older).await.unwrap().unwrap().name, "older");
        assert!(store.run_list_item(999).await.unwrap().is_none());

        // Tags replace the set; scenario and notes only when given.
        let patch = RunPatch {
            name: Some("renamed".into()),
            notes: Some(Some("after the pool change".into())),
            tags: Some(
                [("env".into(), "staging".into()), ("pool".into(), "50".into())]
                    .into_iter()
                    .collect(),
            ),
            ..RunPatch::default()
        };
        assert!(store.update_run(newer, &patch).await.unwrap());
        let detail = store.get_run(newer).await.unwrap().unwrap();
        assert_eq!(detail.name, "renamed");
        assert_eq!(detail.scenario.as_deref(), Some("checkout"));
        assert_eq!(detail.notes.as_deref(), Some("after the pool change"));
        assert_eq!(detail.tags.len(), 2);
        assert!(!store.update_run(999, &patch).await.unwrap());

        assert_eq!(store.count_runs().await.unwrap(), 2);
        assert!(store.delete_run(older).await.unwrap());
        assert!(!store.delete_run(older).await.unwrap());
        assert_eq!(store.count_runs().await.unwrap(), 1);
        assert!(store.get_run(older).await.unwrap().is_none());
    }

    async fn a_route_written_twice_in_one_scrape_keeps_the_last_figures(store: Store) {
        let target = store
            .insert_target(
                &TargetSpec {
                    name: "orders".into(),
                    url: "http://127.0.0.1:9/metrics".into(),
                    kind: "prometheus".into(),
                    interval_s: 15.0,
                    timeout_s: 5.0,
                    labels: Default::default(),
                },
                "api",
                0,
            )
            .await
            .unwrap()
            .unwrap();
        let status = ScrapeStatus { at_ms: 60_000, up: true, duration_ms: 3.0, samples: 9, error: None };
        // The same route twice (a duplicated series): the last one's figures are kept, and
        // the latest exchange either of them saw.
        let ids = store
            .record_scrape(
                target.id,
                &status,
                &[
                    route_write("checkout", Some(5.0), Some(50_000)),
                    route_write("checkout", Some(0.0), None),
                    route_write("refund", None, None),
                ],
            )
            .await
            .unwrap();
        assert_eq!(ids[0], ids[1]);
        assert_ne!(ids[0], ids[2]);
        let infos = store.route_infos(Some(target.id), None).await.unwrap();
        let checkout = infos.iter().find(|r| r.route == "checkout").unwrap();
        assert_eq!(checkout.last_exchange_ms, Some(60_000));
        let raw = store.route_intervals(Some(ids[0]), 0, 120_000).await.unwrap();
        assert_eq!(raw.len(), 1);
        assert_eq!(raw[0].interval.exchanges, Some(0.0));

        // Past retention, raw rows go; deleting the target takes its routes.
        let pruned = store.prune_routes(10_000_000_000, &Retention::default()).await.unwrap();
        assert!(pruned >= 1, "{pruned}");
        assert!(store.route_intervals(Some(ids[0]), 0, 120_000).await.unwrap().is_empty());
        assert!(store.delete_target(target.id).await.unwrap());
        assert!(store.route_infos(None, None).await.unwrap().is_empty());
    }
}
