//! The steps of routes and their figures ([`crate::store::steps`]), written once and
//! compiled into each backend.

use super::{Backend, Db};
use crate::domain::routes::steps::StepShape;
use crate::domain::routes::{Figures, Interval};
use crate::store::Result;
use crate::store::routes::{BATCH_ROWS, HOUR_MS, MINUTE_MS, Retention, TEN_MINUTES_MS};
use crate::store::steps::*;
use sqlx::QueryBuilder;
use std::collections::HashMap;

/// NaN and ±∞ as NULL, so both backends read back the same figures.
fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

/// `column = old + new`, a NULL on either side keeping the other (a rollup row's sums).
macro_rules! summed {
    ($c:literal) => {
        concat!(
            $c,
            " = CASE WHEN excluded.",
            $c,
            " IS NULL THEN step_rollups.",
            $c,
            " ELSE COALESCE(step_rollups.",
            $c,
            ", 0) + excluded.",
            $c,
            " END"
        )
    };
}

/// The columns of a step's shape, `s.`-prefixed, in [`ShapeDb`] order.
const SHAPE_COLUMNS: &str =
    "s.id, s.step, s.kind, s.parent, s.position, s.level, s.destination, s.last_seen_ms";

type ShapeDb = (i64, String, String, Option<String>, i64, i64, Option<String>, i64);

fn shape((id, step, kind, parent, index, level, destination, last_seen_ms): ShapeDb) -> StepShape {
    StepShape {
        id,
        step,
        kind,
        parent,
        index,
        level,
        destination,
        last_seen_ms,
    }
}

/// One row of figures: `interval_ms, exchanges, failed, duration_sum_s, duration_count,
/// max_s, inflight` (a rollup's mean inflight in the last place).
type FiguresDb = (
    Option<i64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

/// A sample row: step id, then [`FiguresDb`]'s columns.
type SampleDb = (
    i64,
    Option<i64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

/// A series row: step id, its time (scrape or bucket), then [`FiguresDb`]'s columns.
type PointDb = (
    i64,
    i64,
    Option<i64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

fn interval_of(row: &FiguresDb) -> Option<Interval> {
    let (interval_ms, exchanges, failed, duration_sum_s, duration_count, max_s, inflight) = *row;
    Some(Interval {
        interval_ms: interval_ms?,
        exchanges,
        failed,
        duration_sum_s,
        duration_count,
        max_s,
        inflight,
        ..Default::default()
    })
}

impl Backend {
    pub async fn record_steps(&self, at_ms: i64, steps: &[StepWrite]) -> Result<Vec<i64>> {
        if steps.is_empty() {
            return Ok(Vec::new());
        }
        // The shapes to write: one row per (route, step), the last (a statement may not
        // upsert a row twice).
        let mut last: HashMap<(i64, &str), usize> = HashMap::new();
        for (i, s) in steps.iter().enumerate() {
            if s.known_id.is_none() {
                last.insert((s.route_id, s.step.as_str()), i);
            }
        }
        let unknown: Vec<&StepWrite> = steps
            .iter()
            .enumerate()
            .filter(|(i, s)| last.get(&(s.route_id, s.step.as_str())) == Some(i))
            .map(|(_, s)| s)
            .collect();
        let mut tx = self.begin_write().await?;
        let mut ids: HashMap<(i64, String), i64> = HashMap::new();
        for chunk in unknown.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Db>::new(
                "INSERT INTO route_steps (route_id, step, kind, parent, position, level, \
                 destination, first_seen_ms, last_seen_ms) ",
            );
            q.push_values(chunk, |mut b, s| {
                b.push_bind(s.route_id)
                    .push_bind(&s.step)
                    .push_bind(&s.kind)
                    .push_bind(&s.parent)
                    .push_bind(s.index)
                    .push_bind(s.level)
                    .push_bind(&s.destination)
                    .push_bind(at_ms)
                    .push_bind(at_ms);
            });
            q.push(
                " ON CONFLICT (route_id, step) DO UPDATE SET kind = excluded.kind, \
                 parent = excluded.parent, position = excluded.position, \
                 level = excluded.level, destination = excluded.destination, \
                 last_seen_ms = excluded.last_seen_ms RETURNING id, route_id, step",
            );
            let rows: Vec<(i64, i64, String)> = q.build_query_as().fetch_all(&mut *tx).await?;
            for (id, route_id, step) in rows {
                ids.insert((route_id, step), id);
            }
        }
        let out: Vec<i64> = steps
            .iter()
            .map(|s| {
                s.known_id
                    .or_else(|| ids.get(&(s.route_id, s.step.clone())).copied())
                    .unwrap_or(0)
            })
            .collect();
        // One sample row per step id, the last.
        let mut last_of: HashMap<i64, usize> = HashMap::new();
        for (i, (s, id)) in steps.iter().zip(&out).enumerate() {
            if s.interval.is_some() && *id != 0 {
                last_of.insert(*id, i);
            }
        }
        let intervals: Vec<(i64, &Interval)> = steps
            .iter()
            .zip(&out)
            .enumerate()
            .filter(|(i, (_, id))| last_of.get(id) == Some(i))
            .filter_map(|(_, (s, id))| Some((*id, s.interval.as_ref()?)))
            .collect();
        for chunk in intervals.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Db>::new(
                "INSERT INTO step_samples (step_id, at_ms, interval_ms, exchanges, failed, \
                 duration_sum_s, duration_count, max_s, inflight) ",
            );
            q.push_values(chunk, |mut b, (id, iv)| {
                b.push_bind(*id)
                    .push_bind(at_ms)
                    .push_bind(iv.interval_ms)
                    .push_bind(finite(iv.exchanges))
                    .push_bind(finite(iv.failed))
                    .push_bind(finite(iv.duration_sum_s))
                    .push_bind(finite(iv.duration_count))
                    .push_bind(finite(iv.max_s))
                    .push_bind(finite(iv.inflight));
            });
            q.push(
                " ON CONFLICT (step_id, at_ms) DO UPDATE SET interval_ms = excluded.interval_ms, \
                 exchanges = excluded.exchanges, failed = excluded.failed, \
                 duration_sum_s = excluded.duration_sum_s, \
                 duration_count = excluded.duration_count, max_s = excluded.max_s, \
                 inflight = excluded.inflight",
            );
            q.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(out)
    }

    pub async fn add_step_rollups(&self, rows: &[StepRollupAdd]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        for chunk in rows.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Db>::new(
                "INSERT INTO step_rollups (step_id, resolution_ms, bucket_ms, interval_ms, \
                 intervals, exchanges, failed, duration_sum_s, duration_count, max_s, \
                 inflight_sum, inflight_n) ",
            );
            q.push_values(chunk, |mut b, r| {
                b.push_bind(r.step_id)
                    .push_bind(r.resolution_ms)
                    .push_bind(r.bucket_ms)
                    .push_bind(r.sums.interval_ms)
                    .push_bind(r.intervals)
                    .push_bind(finite(r.sums.exchanges))
                    .push_bind(finite(r.sums.failed))
                    .push_bind(finite(r.sums.duration_sum_s))
                    .push_bind(finite(r.sums.duration_count))
                    .push_bind(finite(r.sums.max_s))
                    .push_bind(finite(r.inflight_sum))
                    .push_bind(r.inflight_n);
            });
            q.push(concat!(
                " ON CONFLICT (step_id, resolution_ms, bucket_ms) DO UPDATE SET ",
                "interval_ms = step_rollups.interval_ms + excluded.interval_ms, ",
                "intervals = step_rollups.intervals + excluded.intervals, ",
                summed!("exchanges"),
                ", ",
                summed!("failed"),
                ", ",
                summed!("duration_sum_s"),
                ", ",
                summed!("duration_count"),
                ", ",
                summed!("inflight_sum"),
                ", inflight_n = step_rollups.inflight_n + excluded.inflight_n, ",
                "max_s = COALESCE(",
                greatest!("step_rollups.max_s", "excluded.max_s"),
                ", step_rollups.max_s, excluded.max_s)"
            ));
            q.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn route_steps(&self, route_id: i64) -> Result<Vec<StepShape>> {
        let mut q = QueryBuilder::<Db>::new("SELECT ");
        q.push(SHAPE_COLUMNS)
            .push(" FROM route_steps s WHERE s.route_id = ")
            .push_bind(route_id)
            .push(" ORDER BY s.position, s.id");
        let rows: Vec<ShapeDb> = q.build_query_as().fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(shape).collect())
    }

    pub async fn step_figures(
        &self,
        route_id: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(StepShape, Figures)>> {
        let steps = self.route_steps(route_id).await?;
        let rows: Vec<SampleDb> =
            sqlx::query_as(
                "SELECT x.step_id, x.interval_ms, x.exchanges, x.failed, x.duration_sum_s, \
                 x.duration_count, x.max_s, x.inflight FROM step_samples x \
                 JOIN route_steps s ON s.id = x.step_id \
                 WHERE s.route_id = $1 AND x.at_ms > $2 AND x.at_ms <= $3 ORDER BY x.at_ms",
            )
            .bind(route_id)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(&self.pool)
            .await?;
        let mut figures: HashMap<i64, Figures> = HashMap::new();
        for (id, a, b, c, d, e, f, g) in rows {
            if let Some(iv) = interval_of(&(a, b, c, d, e, f, g)) {
                figures.entry(id).or_default().add_sums(&iv);
            }
        }
        Ok(steps
            .into_iter()
            .map(|s| {
                let f = figures.remove(&s.id).unwrap_or_default();
                (s, f)
            })
            .collect())
    }

    pub async fn step_series(
        &self,
        route_id: i64,
        from_ms: i64,
        to_ms: i64,
        step_ms: i64,
        resolution_ms: i64,
    ) -> Result<Vec<StepPoint>> {
        let step_ms = step_ms.max(1);
        let rows: Vec<PointDb> =
            if resolution_ms == 0 {
                sqlx::query_as(
                    "SELECT x.step_id, x.at_ms, x.interval_ms, x.exchanges, x.failed, \
                     x.duration_sum_s, x.duration_count, x.max_s, x.inflight \
                     FROM step_samples x JOIN route_steps s ON s.id = x.step_id \
                     WHERE s.route_id = $1 AND x.at_ms >= $2 AND x.at_ms < $3 \
                     ORDER BY x.at_ms",
                )
                .bind(route_id)
                .bind(from_ms)
                .bind(to_ms)
                .fetch_all(&self.pool)
                .await?
            } else {
                sqlx::query_as(
                    "SELECT x.step_id, x.bucket_ms, x.interval_ms, x.exchanges, x.failed, \
                     x.duration_sum_s, x.duration_count, x.max_s, \
                     CASE WHEN x.inflight_n > 0 THEN x.inflight_sum / x.inflight_n END \
                     FROM step_rollups x JOIN route_steps s ON s.id = x.step_id \
                     WHERE s.route_id = $1 AND x.resolution_ms = $2 AND x.bucket_ms >= $3 \
                       AND x.bucket_ms < $4 ORDER BY x.bucket_ms",
                )
                .bind(route_id)
                .bind(resolution_ms)
                .bind(from_ms)
                .bind(to_ms)
                .fetch_all(&self.pool)
                .await?
            };
        let mut points: Vec<StepPoint> = Vec::new();
        let mut at: HashMap<(i64, i64), usize> = HashMap::new();
        for (id, t, a, b, c, d, e, f, g) in rows {
            let Some(iv) = interval_of(&(a, b, c, d, e, f, g)) else {
                continue;
            };
            let t_ms = t - (t - from_ms).rem_euclid(step_ms);
            let i = *at.entry((id, t_ms)).or_insert_with(|| {
                points.push(StepPoint {
                    step_id: id,
                    t_ms,
                    figures: Figures::default(),
                });
                points.len() - 1
            });
            points[i].figures.add_sums(&iv);
        }
        Ok(points)
    }

    pub async fn prune_steps(&self, now_ms: i64, retention: &Retention) -> Result<u64> {
        let mut n = sqlx::query("DELETE FROM step_samples WHERE at_ms < $1")
            .bind(now_ms - retention.raw_ms())
            .execute(&self.pool)
            .await?
            .rows_affected();
        for (res, keep) in [
            (MINUTE_MS, retention.minute_ms()),
            (TEN_MINUTES_MS, retention.ten_minute_ms()),
            (HOUR_MS, retention.hour_ms()),
        ] {
            n += sqlx::query("DELETE FROM step_rollups WHERE resolution_ms = $1 AND bucket_ms < $2")
                .bind(res)
                .bind(now_ms - keep)
                .execute(&self.pool)
                .await?
                .rows_affected();
        }
        Ok(n)
    }
}
