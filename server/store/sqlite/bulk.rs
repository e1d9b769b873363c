//! The SQLite backend's bulk writers of runs (`ops/runs.rs` calls them): a run's rows in
//! multi-row statements (a few hundred rows each, under SQLite's bound-parameter limit),
//! and the space upkeep after a run's deletion.

use super::SqliteStore;
use crate::domain::runs::{Bucket, ErrorGroup, RejectedRow, RunData};
use crate::store::Result;
use crate::store::runs::*;
use sqlx::{QueryBuilder, Sqlite, Transaction};

/// Inserts a run's statistics, error groups, rejected rows and — with `with_buckets` —
/// its per-second buckets, in multi-row statements on `tx`.
pub(super) async fn insert_aggregates(
    tx: &mut Transaction<'_, Sqlite>,
    id: i64,
    data: &RunData,
    with_buckets: bool,
) -> Result<()> {
    let scopes = scope_rows(data);
    for chunk in scopes.chunks(chunk_rows(20)) {
        let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(
            "INSERT INTO run_stats (run_id, label_ord, label, is_transaction, count, errors, min_ms,
             mean_ms, max_ms, p50_ms, p90_ms, p95_ms, p99_ms, first_start_ms, last_end_ms,
             window_ms, throughput_rps, bytes_received, bytes_sent, distribution,
             failed_distribution) ",
        );
        qb.push_values(chunk, |mut b, sc| {
            let s = sc.stats;
            b.push_bind(id)
                .push_bind(sc.ord)
                .push_bind(sc.label)
                .push_bind(sc.is_transaction)
                .push_bind(to_i64(s.count))
                .push_bind(to_i64(s.errors))
                .push_bind(s.min_ms)
                .push_bind(s.mean_ms)
                .push_bind(s.max_ms)
                .push_bind(s.p50_ms)
                .push_bind(s.p90_ms)
                .push_bind(s.p95_ms)
                .push_bind(s.p99_ms)
                .push_bind(s.first_start_ms)
                .push_bind(s.last_end_ms)
                .push_bind(s.window_ms)
                .push_bind(s.throughput_rps)
                .push_bind(to_i64(s.bytes_received))
                .push_bind(to_i64(s.bytes_sent))
                .push_bind(&sc.distribution)
                .push_bind(&sc.failed_distribution);
        });
        qb.build().execute(&mut **tx).await?;
    }

    if with_buckets {
        write_buckets(tx, id, data).await?;
    }

    for chunk in data.errors.chunks(chunk_rows(7)) {
        let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(
            "INSERT INTO run_errors (run_id, label, response_code, message, count, first_seen_ms,
             last_seen_ms) ",
        );
        qb.push_values(chunk, |mut b, e: &ErrorGroup| {
            b.push_bind(id)
                .push_bind(&e.label)
                .push_bind(&e.response_code)
                .push_bind(&e.message)
                .push_bind(to_i64(e.count))
                .push_bind(e.first_seen_ms)
                .push_bind(e.last_seen_ms);
        });
        qb.build().execute(&mut **tx).await?;
    }

    for chunk in data.rejected.chunks(chunk_rows(3)) {
        let mut qb: QueryBuilder<Sqlite> =
            QueryBuilder::new("INSERT INTO run_rejected (run_id, line, reason) ");
        qb.push_values(chunk, |mut b, r: &RejectedRow| {
            b.push_bind(id)
                .push_bind(to_i64(r.line))
                .push_bind(&r.reason);
        });
        qb.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// Inserts `data.buckets` (label order from `data.labels`).
async fn write_buckets(tx: &mut Transaction<'_, Sqlite>, id: i64, data: &RunData) -> Result<()> {
    let buckets = scoped_buckets(data, &data.buckets);
    write_bucket_rows(tx, id, &buckets, "INSERT").await
}

/// Writes buckets, each with its scope's ord, with `verb` (`INSERT` or `INSERT OR
/// REPLACE`), a few hundred rows per statement.
async fn write_bucket_rows(
    tx: &mut Transaction<'_, Sqlite>,
    id: i64,
    buckets: &[(i64, &Bucket)],
    bucket_verb: &str,
) -> Result<()> {
    for chunk in buckets.chunks(chunk_rows(10)) {
        let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(format!(
            "{bucket_verb} INTO run_buckets (run_id, label_ord, start_ms, count, errors, sum_ms,
             min_ms, max_ms, active_users, histogram) "
        ));
        qb.push_values(chunk, |mut b, (ord, bucket)| {
            b.push_bind(id)
                .push_bind(*ord)
                .push_bind(bucket.start_ms)
                .push_bind(to_i64(bucket.count))
                .push_bind(to_i64(bucket.errors))
                .push_bind(to_i64(bucket.sum_ms))
                .push_bind(to_i64(bucket.min_ms))
                .push_bind(to_i64(bucket.max_ms))
                .push_bind(bucket.active_users.map(i64::from))
                .push_bind(&bucket.histogram);
        });
        qb.build().execute(&mut **tx).await?;
    }

    Ok(())
}

/// Writes buckets of run `id`, each with its scope's ord, replacing the stored ones of their
/// label and second.
pub(super) async fn upsert_buckets(
    tx: &mut Transaction<'_, Sqlite>,
    id: i64,
    buckets: &[(i64, &Bucket)],
) -> Result<()> {
    write_bucket_rows(tx, id, buckets, "INSERT OR REPLACE").await
}

/// The stored buckets of run `id` for scopes `ords` and seconds `seconds` (read to sum a
/// live delta's added buckets into them), a few hundred seconds per statement.
pub(super) async fn stored_buckets(
    tx: &mut Transaction<'_, Sqlite>,
    id: i64,
    ords: &[i64],
    seconds: &[i64],
) -> Result<Vec<ScopedBucketRow>> {
    // Written as literals: they are numbers of the caller's own.
    let ords = ords
        .iter()
        .map(|o| o.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let mut stored = Vec::new();
    for chunk in seconds.chunks(chunk_rows(1)) {
        let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(
            "SELECT label_ord, start_ms, count, errors, sum_ms, min_ms, max_ms, active_users,
                    histogram
             FROM run_buckets WHERE run_id = ",
        );
        qb.push_bind(id)
            .push(format!(" AND label_ord IN ({ords})"))
            .push(" AND start_ms IN (");
        let mut list = qb.separated(", ");
        for s in chunk {
            list.push_bind(*s);
        }
        list.push_unseparated(")");
        stored.extend(
            qb.build_query_as::<ScopedBucketRow>()
                .fetch_all(&mut **tx)
                .await?,
        );
    }
    Ok(stored)
}

impl SqliteStore {
    /// Inside a run's deletion, its pages go back to the file system: `PRAGMA
    /// incremental_vacuum` in the same transaction (the database is in incremental
    /// auto-vacuum mode, see migration 0016) moves the file's last pages into the freed
    /// ones instead of keeping those on the free list.
    pub(super) async fn free_deleted_pages(&self, tx: &mut super::WriteTx) -> Result<()> {
        // Each result row of the pragma is one page given back: all are read.
        sqlx::query("PRAGMA incremental_vacuum")
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// After a run's deletion, a checkpoint writes the change into the database file, which
    /// SQLite truncates, and empties the WAL (`wal_checkpoint(TRUNCATE)`: it waits for
    /// readers still on older pages, at most the busy time-out; if they outlast it the files
    /// shrink at a later checkpoint). Returns (busy, WAL frames, frames checkpointed); busy
    /// = 1 is not an error. A checkpoint that fails is logged: the deletion stands.
    pub(super) async fn reclaim_run_space(&self, id: i64) {
        if let Err(e) = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&self.pool)
            .await
        {
            tracing::warn!(run = id, error = %e, "checkpoint after a run's deletion failed");
        }
    }
}
