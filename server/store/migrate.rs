//! `harrier migrate`: copies a SQLite database into a new PostgreSQL one — every table of
//! the PostgreSQL schema (runs and their statistics, route history, targets, alert rules,
//! state, history, silences, channels, users, tokens, share links, the audit log), rows
//! as they are (ids and times kept), in one transaction.
//!
//! Generic over the schema on purpose: the tables, their columns and the order that
//! satisfies their foreign keys are read from PostgreSQL's catalog, so a table added by a
//! later migration on both backends is copied without a change here. Each value is read
//! as SQLite stored it (integer, real, text, blob, null) and converted to the target
//! column's type (`boolean` from SQLite's 0/1, `double precision` from an integer
//! SQLite stored in a REAL column). Identity sequences are set past the copied ids.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::sqlite::SqliteRow;
use sqlx::{PgPool, Postgres, QueryBuilder, Row, SqlitePool, TypeInfo, ValueRef};

use crate::store::{Result, StoreError};

/// One table copied: its name and rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub table: String,
    pub rows: u64,
}

/// A value read from SQLite, by its storage class.
#[derive(Debug, Clone)]
enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

fn read_cell(row: &SqliteRow, i: usize) -> Result<Cell> {
    let raw = row.try_get_raw(i)?;
    if raw.is_null() {
        return Ok(Cell::Null);
    }
    let class = raw.type_info().name().to_ascii_uppercase();
    Ok(match class.as_str() {
        "INTEGER" | "BOOLEAN" | "INT8" | "BIGINT" => Cell::Int(row.try_get(i)?),
        "REAL" | "FLOAT" | "DOUBLE" => Cell::Real(row.try_get(i)?),
        "BLOB" => Cell::Blob(row.try_get(i)?),
        _ => Cell::Text(row.try_get(i)?),
    })
}

fn bad(table: &str, column: &str, want: &str, got: &Cell) -> StoreError {
    StoreError::Invalid(format!(
        "migrate: {table}.{column}: a {want} column holds {got:?} in the SQLite database"
    ))
}

/// Binds `cell` as a value of PostgreSQL type `pg_type`.
fn push_cell(
    b: &mut sqlx::query_builder::Separated<'_, Postgres, &'static str>,
    table: &str,
    column: &str,
    pg_type: &str,
    cell: Cell,
) -> Result<()> {
    match (pg_type, cell) {
        ("boolean", Cell::Null) => b.push_bind(None::<bool>),
        ("boolean", Cell::Int(v)) => b.push_bind(v != 0),
        ("bigint" | "integer" | "smallint", Cell::Null) => b.push_bind(None::<i64>),
        ("bigint" | "integer" | "smallint", Cell::Int(v)) => b.push_bind(v),
        ("double precision" | "real", Cell::Null) => b.push_bind(None::<f64>),
        ("double precision" | "real", Cell::Int(v)) => b.push_bind(v as f64),
        ("double precision" | "real", Cell::Real(v)) => b.push_bind(v),
        ("bytea", Cell::Null) => b.push_bind(None::<Vec<u8>>),
        ("bytea", Cell::Blob(v)) => b.push_bind(v),
        // Route buckets written as JSON text before their compact form: kept as its bytes,
        // as PostgreSQL's own migration of that column keeps them.
        ("bytea", Cell::Text(v)) => b.push_bind(v.into_bytes()),
        ("text", Cell::Null) => b.push_bind(None::<String>),
        ("text", Cell::Text(v)) => b.push_bind(v),
        ("text", Cell::Int(v)) => b.push_bind(v.to_string()),
        ("text", Cell::Real(v)) => b.push_bind(v.to_string()),
        (want, got) => return Err(bad(table, column, want, &got)),
    };
    Ok(())
}

/// The tables of the PostgreSQL schema (the migrations' own table aside), parents before
/// the tables whose foreign keys point at them.
async fn tables_in_order(to: &PgPool) -> Result<Vec<String>> {
    let names: Vec<(String,)> = sqlx::query_as(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
           AND table_name <> '_sqlx_migrations' ORDER BY table_name",
    )
    .fetch_all(to)
    .await?;
    let edges: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c
         JOIN pg_namespace n ON n.oid = c.connamespace
         WHERE c.contype = 'f' AND n.nspname = current_schema()",
    )
    .fetch_all(to)
    .await?;
    let mut needs: BTreeMap<String, BTreeSet<String>> = names
        .iter()
        .map(|(n,)| (n.clone(), BTreeSet::new()))
        .collect();
    for (child, parent) in edges {
        if child != parent
            && let Some(set) = needs.get_mut(&child)
        {
            set.insert(parent);
        }
    }
    let mut order = Vec::new();
    while !needs.is_empty() {
        let ready: Vec<String> = needs
            .iter()
            .filter(|(_, parents)| parents.iter().all(|p| order.contains(p)))
            .map(|(n, _)| n.clone())
            .collect();
        let ready = if ready.is_empty() {
            // A cycle of foreign keys (none in harrier's schema): take the rest as listed.
            needs.keys().cloned().collect()
        } else {
            ready
        };
        for t in ready {
            needs.remove(&t);
            order.push(t);
        }
    }
    Ok(order)
}

/// Copies every table of the PostgreSQL schema from `from` into `to`, which must hold no
/// data yet (`Err` naming a table that has rows). One transaction: on any error nothing
/// is left in `to`. `progress` is called after each table.
pub async fn sqlite_to_postgres(
    from: &SqlitePool,
    to: &PgPool,
    mut progress: impl FnMut(&Copied),
) -> Result<Vec<Copied>> {
    let tables = tables_in_order(to).await?;
    let sqlite_tables: BTreeSet<String> =
        sqlx::query_as::<_, (String,)>("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(from)
            .await?
            .into_iter()
            .map(|(n,)| n)
            .collect();
    let mut tx = to.begin().await?;
    let mut copied = Vec::new();
    for table in &tables {
        let (present,): (bool,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT EXISTS (SELECT 1 FROM \"{table}\")"
        )))
        .fetch_one(&mut *tx)
        .await?;
        if present {
            return Err(StoreError::Invalid(format!(
                "migrate: the PostgreSQL database already holds data (table {table}); \
                 migrate into a new, empty database"
            )));
        }
        if !sqlite_tables.contains(table) {
            return Err(StoreError::Invalid(format!(
                "migrate: the SQLite database has no table {table}: open it once with this \
                 harrier version (harrier runs --db FILE) so its migrations run, then retry"
            )));
        }
        let columns: Vec<(String, String)> = sqlx::query_as(
            "SELECT column_name::text, data_type::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
        )
        .bind(table)
        .fetch_all(&mut *tx)
        .await?;
        let list = columns
            .iter()
            .map(|(c, _)| format!("\"{c}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let select = format!("SELECT {list} FROM \"{table}\"");
        let rows: Vec<SqliteRow> = sqlx::query(sqlx::AssertSqlSafe(select))
            .fetch_all(from)
            .await?;
        // PostgreSQL takes at most 65,535 parameters per statement.
        let per_batch = (60_000 / columns.len().max(1)).max(1);
        for chunk in rows.chunks(per_batch) {
            let mut converted = Vec::with_capacity(chunk.len());
            for row in chunk {
                let mut cells = Vec::with_capacity(columns.len());
                for i in 0..columns.len() {
                    cells.push(read_cell(row, i)?);
                }
                converted.push(cells);
            }
            let mut q: QueryBuilder<Postgres> =
                QueryBuilder::new(format!("INSERT INTO \"{table}\" ({list}) "));
            let mut failure = None;
            q.push_values(converted, |mut b, cells| {
                for ((name, ty), cell) in columns.iter().zip(cells) {
                    if failure.is_none()
                        && let Err(e) = push_cell(&mut b, table, name, ty, cell)
                    {
                        failure = Some(e);
                    }
                }
            });
            if let Some(e) = failure {
                return Err(e);
            }
            q.build().execute(&mut *tx).await?;
        }
        // Identity columns continue after the copied ids.
        if columns.iter().any(|(c, _)| c == "id") {
            let seq: Option<(Option<String>,)> =
                sqlx::query_as("SELECT pg_get_serial_sequence($1, 'id')")
                    .bind(format!("\"{table}\""))
                    .fetch_optional(&mut *tx)
                    .await?;
            if let Some((Some(seq),)) = seq {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT setval('{seq}', COALESCE((SELECT MAX(id) FROM \"{table}\"), 1), \
                     (SELECT MAX(id) FROM \"{table}\") IS NOT NULL)"
                )))
                .execute(&mut *tx)
                .await?;
            }
        }
        let c = Copied {
            table: table.clone(),
            rows: rows.len() as u64,
        };
        progress(&c);
        copied.push(c);
    }
    tx.commit().await?;
    Ok(copied)
}
