//! Store operations, each test body run on both databases: `NAME::sqlite` on a fresh SQLite
//! file, `NAME::postgres` on a fresh PostgreSQL database (`HARRIER_TEST_DATABASE_URL`, else
//! a server started for the test from Debian's binaries; skipped with a notice without
//! either).

use crate::helpers::{fresh_store_on, postgres_server};
use harrier::domain::alerts::silence::{Matcher, SilenceSpec};
use harrier::store::{SILENCE_RETENTION_MS, Store};

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
}
