//! The PostgreSQL backend's bulk writers of runs (`ops/runs.rs` calls them): a run's rows
//! by `COPY … FROM STDIN` (see `copy.rs`), buckets upserted in multi-row statements, and
//! the space upkeep after a run's deletion.

use super::PostgresStore;
use super::copy::copy_in;
use crate::domain::runs::{Bucket, ErrorGroup, RejectedRow, RunData};
use crate::store::Result;
use crate::store::runs::*;
use sqlx::{Postgres, QueryBuilder, Transaction};

/// Inserts a run's statistics, error groups, rejected rows and — with `with_buckets` —
/// its per-second buckets, each table's rows in one `COPY … FROM STDIN` on `tx`.
pub(super) async fn insert_aggregates(
    tx: &mut Transaction<'_, Postgres>,
    id: i64,
    data: &RunData,
    with_buckets: bool,
) -> Result<()> {
    let scopes = scope_rows(data);
    // The bulk rows go by COPY (see `super::copy`): one statement per table, whatever the
    // row count, instead of a multi-row INSERT per few thousand rows.
    copy_in(
        tx,
        "COPY run_stats (run_id, label_ord, label, is_transaction, count, errors, min_ms,
         mean_ms, max_ms, p50_ms, p90_ms, p95_ms, p99_ms, first_start_ms, last_end_ms,
         window_ms, throughput_rps, bytes_received, bytes_sent, distribution,
         failed_distribution) FROM STDIN WITH (FORMAT text)",
        &scopes,
        |r, sc| {
            let s = sc.stats;
            r.int(id)
                .int(sc.ord)
                .text(sc.label)
                .bool(sc.is_transaction)
                .int(to_i64(s.count))
                .int(to_i64(s.errors))
                .float(s.min_ms)
                .float(s.mean_ms)
                .float(s.max_ms)
                .float(s.p50_ms)
                .float(s.p90_ms)
                .float(s.p95_ms)
                .float(s.p99_ms)
                .opt_int(s.first_start_ms)
                .opt_int(s.last_end_ms)
                .opt_int(s.window_ms)
                .float(s.throughput_rps)
                .int(to_i64(s.bytes_received))
                .int(to_i64(s.bytes_sent))
                .bytea(sc.distribution.as_deref())
                .bytea(sc.failed_distribution.as_deref());
        },
    )
    .await?;

    if with_buckets {
        let buckets = scoped_buckets(data, &data.buckets);
        copy_in(
            tx,
            "COPY run_buckets (run_id, label_ord, start_ms, count, errors, sum_ms, min_ms,
             max_ms, active_users, histogram) FROM STDIN WITH (FORMAT text)",
            &buckets,
            |r, (ord, bucket)| {
                r.int(id)
                    .int(*ord)
                    .int(bucket.start_ms)
                    .int(to_i64(bucket.count))
                    .int(to_i64(bucket.errors))
                    .int(to_i64(bucket.sum_ms))
                    .int(to_i64(bucket.min_ms))
                    .int(to_i64(bucket.max_ms))
                    .opt_int(bucket.active_users.map(i64::from))
                    .bytea(Some(&bucket.histogram));
            },
        )
        .await?;
    }

    copy_in(
        tx,
        "COPY run_errors (run_id, label, response_code, message, count, first_seen_ms,
         last_seen_ms) FROM STDIN WITH (FORMAT text)",
        &data.errors,
        |r, e: &ErrorGroup| {
            r.int(id)
                .text(Some(&e.label))
                .text(Some(&e.response_code))
                .text(Some(&e.message))
                .int(to_i64(e.count))
                .int(e.first_seen_ms)
                .int(e.last_seen_ms);
        },
    )
    .await?;

    copy_in(
        tx,
        "COPY run_rejected (run_id, line, reason) FROM STDIN WITH (FORMAT text)",
        &data.rejected,
        |r, row: &RejectedRow| {
            r.int(id).int(to_i64(row.line)).text(Some(&row.reason));
        },
    )
    .await?;
    Ok(())
}

/// Writes buckets of run `id`, each with its scope's ord, replacing the stored ones of their
/// label and second; a few thousand rows per statement (no two rows of one chunk may share
/// a label and second).
pub(super) async fn upsert_buckets(
    tx: &mut Transaction<'_, Postgres>,
    id: i64,
    buckets: &[(i64, &Bucket)],
) -> Result<()> {
    for chunk in buckets.chunks(chunk_rows(10)) {
        let mut qb: QueryBuilder<Postgres> = QueryBuilder::new(
            "INSERT INTO run_buckets (run_id, label_ord, start_ms, count, errors, sum_ms, min_ms,
                                      max_ms, active_users, histogram) ",
        );
        qb.push_values(chunk, |mut r, (ord, b)| {
            r.push_bind(id)
                .push_bind(*ord)
                .push_bind(b.start_ms)
                .push_bind(to_i64(b.count))
                .push_bind(to_i64(b.errors))
                .push_bind(to_i64(b.sum_ms))
                .push_bind(to_i64(b.min_ms))
                .push_bind(to_i64(b.max_ms))
                .push_bind(b.active_users.map(i64::from))
                .push_bind(&b.histogram);
        });
        qb.push(
            " ON CONFLICT (run_id, label_ord, start_ms) DO UPDATE SET
                count = EXCLUDED.count, errors = EXCLUDED.errors, sum_ms = EXCLUDED.sum_ms,
                min_ms = EXCLUDED.min_ms, max_ms = EXCLUDED.max_ms,
                active_users = EXCLUDED.active_users, histogram = EXCLUDED.histogram",
        );
        qb.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// The stored buckets of run `id` for scopes `ords` and seconds `seconds` (read to sum a
/// live delta's added buckets into them).
pub(super) async fn stored_buckets(
    tx: &mut Transaction<'_, Postgres>,
    id: i64,
    ords: &[i64],
    seconds: &[i64],
) -> Result<Vec<ScopedBucketRow>> {
    Ok(sqlx::query_as(
        "SELECT label_ord, start_ms, count, errors, sum_ms, min_ms, max_ms, active_users,
                histogram
         FROM run_buckets WHERE run_id = $1 AND label_ord = ANY($2) AND start_ms = ANY($3)",
    )
    .bind(id)
    .bind(ords)
    .bind(seconds)
    .fetch_all(&mut **tx)
    .await?)
}

impl PostgresStore {
    /// Inside a run's deletion: nothing to do here (see [`PostgresStore::reclaim_run_space`]).
    pub(super) async fn free_deleted_pages(&self, _: &mut super::WriteTx) -> Result<()> {
        Ok(())
    }

    /// After a run's deletion, a plain `VACUUM` of the run tables makes the deleted rows'
    /// space reusable at once (autovacuum would get to it only once a fifth of a table is
    /// dead, by default), so the next import fills it instead of growing the files. Never
    /// `VACUUM FULL`, which locks the tables while it rewrites them. A VACUUM that fails is
    /// logged; the deletion stands.
    pub(super) async fn reclaim_run_space(&self, id: i64) {
        // VACUUM cannot run in a transaction block: the simple protocol, one statement.
        if let Err(e) = sqlx::raw_sql(
            "VACUUM runs, run_tags, run_stats, run_buckets, run_errors, run_rejected,
                    run_resamples, run_checks, baselines",
        )
        .execute(&self.pool)
        .await
        {
            tracing::warn!(run = id, error = %e, "VACUUM after a run's deletion failed");
        }
    }
}
