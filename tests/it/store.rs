//! Store functions on a real database: a fresh SQLite file per test, or a fresh PostgreSQL
//! database with `HARRIER_TEST_BACKEND=postgres` (see `helpers::fresh_store`).

use crate::helpers::InsertRuns;
use crate::helpers::{fresh_store, on_postgres, scalar_raw, sqlite_only};
use harrier::domain::runs::{Bucket, ErrorGroup, LabelStats, RejectedRow, RunData, Stats};
use harrier::store::{NewRun, Store};

fn stats(count: u64, errors: u64, first: i64, last: i64) -> Stats {
    Stats {
        count,
        errors,
        error_pct: Some(errors as f64 * 100.0 / count as f64),
        min_ms: Some(10.0),
        mean_ms: Some(20.5),
        max_ms: Some(40.0),
        p50_ms: Some(20.0),
        p90_ms: Some(30.0),
        p95_ms: Some(35.0),
        p99_ms: Some(40.0),
        first_start_ms: Some(first),
        last_end_ms: Some(last),
        window_ms: Some(last - first),
        throughput_rps: Some(count as f64 * 1000.0 / (last - first) as f64),
        bytes_received: 1234,
        bytes_sent: 56,
    }
}

fn sample_run(buckets: usize) -> RunData {
    RunData {
        overall: stats(10, 1, 1_000, 5_000),
        labels: vec![
            LabelStats {
                label: "Login, step 1".into(),
                is_transaction: false,
                stats: stats(6, 1, 1_000, 4_000),
            },
            LabelStats {
                label: "Café \"menu\"".into(),
                is_transaction: true,
                stats: stats(4, 0, 2_000, 5_000),
            },
        ],
        buckets: (0..buckets)
            .flat_map(|i| {
                [None, Some("Login, step 1".to_string())]
                    .into_iter()
                    .map(move |label| Bucket {
                        label,
                        start_ms: i as i64 * 1000,
                        count: 2,
                        errors: 0,
                        sum_ms: 40,
                        min_ms: 10,
                        max_ms: 30,
                        active_users: Some(3),
                        histogram: vec![1, 2, 3],
                    })
            })
            .collect(),
        errors: vec![ErrorGroup {
            label: "Login, step 1".into(),
            response_code: "500".into(),
            message: "Internal Server Error".into(),
            count: 1,
            first_seen_ms: 1_500,
            last_seen_ms: 1_500,
        }],
        rejected_rows: 3,
        rejected: vec![RejectedRow {
            line: 7,
            reason: "expected 17 fields, found 9".into(),
        }],
        summary_only: false,
        folded_labels: 0,
        reported: serde_json::json!({}),
        distributions: Vec::new(),
        failed_distributions: Vec::new(),
    }
}

fn new_run(name: &str) -> NewRun {
    NewRun {
        name: name.into(),
        scenario: Some("checkout".into()),
        tool: "jmeter".into(),
        source: Some("results.jtl".into()),
        tags: vec![("build".into(), "142".into())],
        imported_at_ms: 1_800_000_000_000,
    }
}

#[tokio::test]
async fn a_run_round_trips_with_every_figure() {
    let (store, _, _db) = fresh_store().await;
    let data = sample_run(3);
    let id = store.insert_run(&new_run("r1"), &data).await.unwrap();
    let run = store.get_run(id).await.unwrap().expect("stored");
    assert_eq!(run.name, "r1");
    assert_eq!(run.tags.get("build").map(String::as_str), Some("142"));
    assert_eq!(run.overall, data.overall);
    assert_eq!(
        run.labels, data.labels,
        "labels keep order, text and transaction flag"
    );
    assert_eq!(run.rejected_rows, 3);
    assert_eq!(
        run.started_at_ms, None,
        "1,000 ms after 1970 is an offset, not a clock time"
    );

    let total = store.run_buckets(id, None).await.unwrap().unwrap();
    assert_eq!(total.len(), 3);
    assert_eq!(total[1].start_ms, 1_000);
    assert_eq!(total[1].histogram, vec![1, 2, 3]);
    assert_eq!(
        store
            .run_buckets(id, Some("Login, step 1"))
            .await
            .unwrap()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        store
            .run_buckets(id, Some("Café \"menu\""))
            .await
            .unwrap()
            .unwrap()
            .len(),
        0
    );
    assert!(store.run_buckets(id, Some("nope")).await.unwrap().is_none());

    let errors = store.run_errors(id).await.unwrap();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].message, "Internal Server Error");
    let rejected = store.run_rejected(id).await.unwrap();
    assert_eq!(rejected[0].line, 7);

    let list = store.list_runs().await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].count, 10);
    assert_eq!(list[0].error_pct, Some(10.0));
    assert_eq!(list[0].duration_ms, Some(4_000));
    // The store keeps no console links: the list's view adds the run's page.
    let shown = harrier::views::runs::list_runs(&store).await.unwrap();
    assert_eq!(shown[0].url, format!("/console/runs/{id}"));
    assert_eq!(
        shown[0].successful_rps.is_some(),
        list[0].throughput_rps.is_some()
    );
    assert_eq!(store.run_list_item(id).await.unwrap().unwrap().name, "r1");
}

/// Thousands of buckets go in multi-row statements (more rows than one statement may bind).
#[tokio::test]
async fn large_runs_insert_in_batches() {
    let (store, _, _db) = fresh_store().await;
    let id = store
        .insert_run(&new_run("big"), &sample_run(20_000))
        .await
        .unwrap();
    assert_eq!(
        store.run_buckets(id, None).await.unwrap().unwrap().len(),
        20_000
    );
}

/// Text holding COPY's special characters, and blobs holding every byte value, come back
/// unchanged; NULL stays NULL and an empty blob stays empty (on PostgreSQL these rows are
/// written with COPY, whose text format escapes them).
#[tokio::test]
async fn awkward_text_numbers_and_bytes_round_trip() {
    use harrier::domain::runs::distribution::Distribution;
    let (store, _, _db) = fresh_store().await;
    let odd = "tab\there, line\nbreak, cr\r, back\\slash, \\N, \\x00, \"q\", é ✓";
    let every_byte: Vec<u8> = (0..=255).collect();
    let mut data = sample_run(2);
    data.labels[0].label = odd.into();
    data.overall.mean_ms = Some(1.0 / 3.0);
    data.overall.min_ms = None;
    data.overall.throughput_rps = Some(6.02e23);
    data.overall.bytes_received = i64::MAX as u64;
    for b in &mut data.buckets {
        if b.label.is_some() {
            b.label = Some(odd.into());
        }
        b.histogram = every_byte.clone();
        b.active_users = None;
        b.start_ms -= 5_000;
    }
    data.errors[0].label = odd.into();
    data.errors[0].message = odd.into();
    data.rejected[0].reason = odd.into();
    let dist = Distribution::from_pairs(vec![(3, 2), (92, 1), (1_000_000, 5)]);
    data.distributions = vec![dist.clone(), dist.clone(), Distribution::default()];
    data.failed_distributions = vec![Distribution::default(), dist.clone()];

    let id = store.insert_run(&new_run("odd"), &data).await.unwrap();
    let run = store.get_run(id).await.unwrap().expect("stored");
    assert_eq!(run.overall, data.overall, "floats, NULL and large integers");
    assert_eq!(run.labels, data.labels, "escaped label text");
    let buckets = store.run_buckets(id, Some(odd)).await.unwrap().unwrap();
    assert_eq!(buckets.len(), 2, "buckets found by the escaped label");
    assert_eq!(buckets[0].start_ms, -5_000);
    assert_eq!(buckets[0].histogram, every_byte);
    assert_eq!(buckets[0].active_users, None);
    let errors = store.run_errors(id).await.unwrap();
    assert_eq!(
        (errors[0].label.as_str(), errors[0].message.as_str()),
        (odd, odd)
    );
    assert_eq!(store.run_rejected(id).await.unwrap()[0].reason, odd);
    let dists = store.run_distributions(id).await.unwrap();
    assert_eq!(dists.len(), 3);
    assert_eq!(dists[0].0.values(), dist.values());
    assert_eq!(
        dists[0].1.as_ref().map(Distribution::count),
        Some(0),
        "an empty failed distribution is stored empty, not NULL"
    );
    assert_eq!(dists[1].1.as_ref().map(Distribution::count), Some(8));
    assert!(dists[2].0.is_empty(), "no distribution stored: NULL");
    assert!(dists[2].1.is_none(), "no failed distribution given: NULL");
}

/// A failed import's transaction is rolled back whole and the connection it used is left
/// fit for the next one.
#[tokio::test]
async fn an_import_after_a_failed_one_stores_normally() {
    let (store, _, _db) = fresh_store().await;
    let mut bad = sample_run(3_000);
    bad.buckets.push(bad.buckets[5].clone());
    assert!(store.insert_run(&new_run("bad"), &bad).await.is_err());
    for n in 0..3 {
        let id = store
            .insert_run(&new_run(&format!("good {n}")), &sample_run(3_000))
            .await
            .unwrap();
        assert_eq!(
            store.run_buckets(id, None).await.unwrap().unwrap().len(),
            3_000
        );
    }
    assert_eq!(store.count_runs().await.unwrap(), 3);
    assert_eq!(
        scalar_raw(&store, "SELECT COUNT(*) FROM run_buckets").await,
        18_000
    );
}

/// Runs of one file land together or not at all.
#[tokio::test]
async fn a_failed_import_leaves_nothing_behind() {
    let (store, _, _db) = fresh_store().await;
    let good = sample_run(2);
    let mut bad = sample_run(2);
    // Two buckets with the same (label, start) violate the primary key mid-transaction.
    bad.buckets.push(bad.buckets[0].clone());
    let result = store
        .import_runs(&[(new_run("a"), &good), (new_run("b"), &bad)])
        .await;
    assert!(result.is_err());
    assert_eq!(
        store.count_runs().await.unwrap(),
        0,
        "the first run was rolled back too"
    );
}

#[tokio::test]
async fn deleting_a_run_removes_its_aggregates() {
    let (store, _, _db) = fresh_store().await;
    let id = store
        .insert_run(&new_run("gone"), &sample_run(5))
        .await
        .unwrap();
    assert!(store.delete_run(id).await.unwrap());
    assert!(!store.delete_run(id).await.unwrap());
    assert!(store.get_run(id).await.unwrap().is_none());
    for table in [
        "run_stats",
        "run_buckets",
        "run_errors",
        "run_rejected",
        "run_tags",
    ] {
        let n = scalar_raw(&store, &format!("SELECT COUNT(*) FROM {table}")).await;
        assert_eq!(n, 0, "{table} emptied by the cascade");
    }
}

/// The space of a deleted run is used again: importing a run of the same size after the
/// deletion does not grow the storage (SQLite: pages in the file; PostgreSQL: the
/// run_buckets table, which would double if the dead rows' space were not made reusable.
/// Its primary-key index is left out: the index pages a VACUUM empties become reusable only
/// at a later VACUUM, so the index does grow here).
#[tokio::test]
async fn the_space_of_a_deleted_run_is_used_again() {
    let (store, _, _db) = fresh_store().await;
    let size_sql = if on_postgres() {
        "SELECT pg_relation_size('run_buckets')"
    } else {
        "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()"
    };
    store
        .insert_run(&new_run("kept"), &sample_run(100))
        .await
        .unwrap();
    let gone = store
        .insert_run(&new_run("gone"), &sample_run(20_000))
        .await
        .unwrap();
    let full = scalar_raw(&store, size_sql).await;
    assert!(store.delete_run(gone).await.unwrap());
    store
        .insert_run(&new_run("again"), &sample_run(20_000))
        .await
        .unwrap();
    let again = scalar_raw(&store, size_sql).await;
    assert!(
        again <= full + full / 10,
        "{again} bytes after deleting and importing again, {full} before"
    );
}

/// On SQLite a deletion shrinks the file at once: no page is left on the free list, the
/// file on disk is cut to its pages and the WAL emptied (before, it held every moved page).
#[tokio::test]
async fn deleting_a_run_shrinks_the_sqlite_file() {
    if sqlite_only("SQLite pages and free list") {
        return;
    }
    let (store, config, _db) = fresh_store().await;
    let on_disk = |suffix: &str| {
        let mut path = config.db.clone().into_os_string();
        path.push(suffix);
        std::fs::metadata(path).map_or(0, |m| m.len())
    };
    let pages = |sql| scalar_raw(&store, sql);
    assert_eq!(pages("PRAGMA auto_vacuum").await, 2, "incremental");
    let id = store
        .insert_run(&new_run("gone"), &sample_run(20_000))
        .await
        .unwrap();
    let before = pages("PRAGMA page_count").await;
    assert!(store.delete_run(id).await.unwrap());
    let after = pages("PRAGMA page_count").await;
    assert_eq!(pages("PRAGMA freelist_count").await, 0);
    assert!(
        after * 4 < before,
        "{after} pages after the deletion, {before} before"
    );
    let page_size = pages("PRAGMA page_size").await as u64;
    assert_eq!(
        on_disk(""),
        after as u64 * page_size,
        "the file holds only its pages"
    );
    let wal = on_disk("-wal");
    assert!(
        wal < 4 * (page_size + 24),
        "the WAL is emptied (a page or two may be written after): {wal} bytes"
    );
}

/// A database file made before incremental auto-vacuum is converted when it is opened
/// (migration 0016 runs VACUUM), keeping what it holds.
#[tokio::test]
async fn an_older_sqlite_file_is_converted_to_incremental_vacuum() {
    if sqlite_only("SQLite auto_vacuum") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        use sqlx::ConnectOptions;
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .connect()
            .await
            .unwrap();
        sqlx::raw_sql("CREATE TABLE older (x INTEGER); INSERT INTO older VALUES (42);")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let store = Store::open(&path).await.unwrap();
    assert_eq!(scalar_raw(&store, "PRAGMA auto_vacuum").await, 2);
    assert_eq!(scalar_raw(&store, "SELECT x FROM older").await, 42);
    let id = store
        .insert_run(&new_run("r"), &sample_run(3))
        .await
        .unwrap();
    assert!(store.delete_run(id).await.unwrap());
    assert_eq!(scalar_raw(&store, "PRAGMA freelist_count").await, 0);
}

#[tokio::test]
async fn a_database_file_is_created_in_wal_mode() {
    if sqlite_only("a SQLite file's journal mode") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub.db");
    let store = Store::open(&path).await.unwrap();
    assert!(path.exists());
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.sqlite_pool().unwrap())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
}
