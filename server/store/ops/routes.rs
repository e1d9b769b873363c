//! Scrape targets, routes and their figures ([`crate::store::routes`]), written once and
//! compiled into each backend, whose module names its store `Backend`, its SQL dialect
//! (`greatest!`, `for_update!`) and its upkeep around route writes (`targets_changed`,
//! `scraped`, `pruned`, `reclaim_route_space`).

use super::{Backend, Db};
use crate::domain::routes::{Figures, Interval};
use crate::store::Result;
use crate::store::recent::RouteWindows;
use crate::store::route_buckets;
use crate::store::routes::*;
use sqlx::QueryBuilder;
use std::collections::HashMap;

/// NaN as NULL, as SQLite stores it (PostgreSQL would keep the NaN), so both backends read
/// back the same figures.
fn no_nan(v: Option<f64>) -> Option<f64> {
    v.filter(|x| !x.is_nan())
}

impl Backend {
    /// Adds a target; `None` when a target of that name exists.
    pub async fn insert_target(
        &self,
        spec: &TargetSpec,
        origin: &str,
        now_ms: i64,
    ) -> Result<Option<TargetRow>> {
        let labels = serde_json::to_string(&spec.labels).unwrap_or_else(|_| "{}".into());
        let id: Option<i64> = sqlx::query_scalar(
            "INSERT INTO targets (name, url, kind, interval_s, timeout_s, labels, origin, created_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (name) DO NOTHING RETURNING id",
        )
        .bind(&spec.name)
        .bind(spec.url.expose())
        .bind(&spec.kind)
        .bind(spec.interval_s)
        .bind(spec.timeout_s)
        .bind(labels)
        .bind(origin)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        match id {
            Some(id) => self.get_target(id).await,
            None => Ok(None),
        }
    }

    /// Adds or replaces (by name) a target from the configuration or the built-in one; its
    /// id, status and routes stay when it exists.
    pub async fn upsert_target(
        &self,
        spec: &TargetSpec,
        origin: &str,
        now_ms: i64,
    ) -> Result<TargetRow> {
        let labels = serde_json::to_string(&spec.labels).unwrap_or_else(|_| "{}".into());
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO targets (name, url, kind, interval_s, timeout_s, labels, origin, created_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (name) DO UPDATE SET url = excluded.url, kind = excluded.kind,
               interval_s = excluded.interval_s, timeout_s = excluded.timeout_s,
               labels = excluded.labels, origin = excluded.origin
             RETURNING id",
        )
        .bind(&spec.name)
        .bind(spec.url.expose())
        .bind(&spec.kind)
        .bind(spec.interval_s)
        .bind(spec.timeout_s)
        .bind(labels)
        .bind(origin)
        .bind(now_ms)
        .fetch_one(&self.pool)
        .await?;
        self.targets_changed();
        Ok(self
            .get_target(id)
            .await?
            .expect("the row was just written"))
    }

    /// Every target, by name.
    pub async fn list_targets(&self) -> Result<Vec<TargetRow>> {
        let mut q = QueryBuilder::<Db>::new("SELECT ");
        q.push(TARGET_COLUMNS).push(" FROM targets ORDER BY name");
        let rows: Vec<TargetDb> = q.build_query_as().fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(TargetRow::from).collect())
    }

    pub async fn get_target(&self, id: i64) -> Result<Option<TargetRow>> {
        let mut q = QueryBuilder::<Db>::new("SELECT ");
        q.push(TARGET_COLUMNS)
            .push(" FROM targets WHERE id = ")
            .push_bind(id);
        let row: Option<TargetDb> = q.build_query_as().fetch_optional(&self.pool).await?;
        Ok(row.map(TargetRow::from))
    }

    /// Deletes a target with its routes and their figures; false when there was none.
    pub async fn delete_target(&self, id: i64) -> Result<bool> {
        let done = sqlx::query("DELETE FROM targets WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await?;
        self.targets_changed();
        Ok(done.rows_affected() > 0)
    }

    /// Deletes targets of `origin` whose names are not in `keep` (a config file's targets
    /// that were removed from it). Returns the ids deleted.
    pub async fn delete_targets_not_in(&self, origin: &str, keep: &[String]) -> Result<Vec<i64>> {
        let mut q = QueryBuilder::<Db>::new("DELETE FROM targets WHERE origin = ");
        q.push_bind(origin);
        if !keep.is_empty() {
            q.push(" AND name NOT IN (");
            let mut sep = q.separated(", ");
            for name in keep {
                sep.push_bind(name);
            }
            q.push(")");
        }
        q.push(" RETURNING id");
        let ids: Vec<i64> = q.build_query_scalar().fetch_all(&self.pool).await?;
        if !ids.is_empty() {
            self.targets_changed();
        }
        Ok(ids)
    }

    /// Marks down, with `error`, the targets of `kind` that are up but last reported more
    /// than `missed` of their intervals before `now_ms` (pushing instances that stopped
    /// pushing); their last report time stays. One conditional statement, so a report
    /// that lands meanwhile is never overwritten. Returns their ids.
    pub async fn mark_quiet_targets_down(
        &self,
        kind: &str,
        now_ms: i64,
        missed: f64,
        error: &str,
    ) -> Result<Vec<i64>> {
        let ids: Vec<i64> = sqlx::query_scalar(
            "UPDATE targets SET up = $1, last_error = $2 \
             WHERE kind = $3 AND up = $4 AND last_scrape_ms < $5 - interval_s * $6 \
             RETURNING id",
        )
        .bind(false)
        .bind(error)
        .bind(kind)
        .bind(true)
        .bind(now_ms as f64)
        .bind(missed * 1000.0)
        .fetch_all(&self.pool)
        .await?;
        if !ids.is_empty() {
            self.targets_changed();
        }
        Ok(ids)
    }

    /// Writes one scrape: the target's status, the routes found and their intervals, and
    /// the 1 min / 1 h rollups, in one transaction. Returns the route ids, in `routes` order.
    pub async fn record_scrape(
        &self,
        target_id: i64,
        status: &ScrapeStatus,
        routes: &[RouteWrite],
    ) -> Result<Vec<i64>> {
        let mut tx = self.begin_write().await?;
        sqlx::query(
            "UPDATE targets SET up = $1, last_scrape_ms = $2, last_duration_ms = $3,
               last_samples = $4, last_error = $5 WHERE id = $6",
        )
        .bind(status.up)
        .bind(status.at_ms)
        .bind(status.duration_ms)
        .bind(status.samples)
        .bind(&status.error)
        .bind(target_id)
        .execute(&mut *tx)
        .await?;
        let at = status.at_ms;
        let labels: Vec<String> = routes.iter().map(RouteWrite::labels_json).collect();
        // One row per route identity, the last one's figures (PostgreSQL refuses a statement
        // that upserts the same row twice), and the latest exchange any of them saw. Each
        // route's row is found again by its index in `unique` (no copy of its key strings).
        let exchange_ms = |r: &RouteWrite| r.exchange_ms(at);
        let mut seen: HashMap<(&str, &str, &str, &str, &str), usize> = HashMap::new();
        let mut unique: Vec<(&RouteWrite, &str, Option<i64>)> = Vec::with_capacity(routes.len());
        let mut unique_of: Vec<usize> = Vec::with_capacity(routes.len());
        for (r, l) in routes.iter().zip(&labels) {
            let key = (
                r.service.as_str(),
                r.route.as_str(),
                r.source.as_str(),
                r.instance.as_str(),
                l.as_str(),
            );
            match seen.get(&key) {
                Some(&i) => {
                    unique[i] = (r, l, exchange_ms(r).or(unique[i].2));
                    unique_of.push(i);
                }
                None => {
                    seen.insert(key, unique.len());
                    unique_of.push(unique.len());
                    unique.push((r, l, exchange_ms(r)));
                }
            }
        }
        let mut unique_ids: Vec<i64> = vec![0; unique.len()];
        for chunk in unique.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Db>::new(
                "INSERT INTO routes (target_id, service, route, source, first_seen_ms, \
                 last_seen_ms, last_exchange_ms, state, instance, labels) ",
            );
            q.push_values(chunk, |mut b, (r, labels, exchange_ms)| {
                b.push_bind(target_id)
                    .push_bind(&r.service)
                    .push_bind(&r.route)
                    .push_bind(&r.source)
                    .push_bind(at)
                    .push_bind(at)
                    .push_bind(*exchange_ms)
                    .push_bind(&r.state)
                    .push_bind(&r.instance)
                    .push_bind(*labels);
            });
            q.push(
                " ON CONFLICT (target_id, service, route, source, instance, labels) DO UPDATE SET \
                 last_seen_ms = excluded.last_seen_ms, state = excluded.state, \
                 last_exchange_ms = COALESCE(excluded.last_exchange_ms, routes.last_exchange_ms) \
                 RETURNING id, service, route, source, instance, labels",
            );
            let rows: Vec<(i64, String, String, String, String, String)> =
                q.build_query_as().fetch_all(&mut *tx).await?;
            for (id, service, route, source, instance, labels) in rows {
                let key = (
                    service.as_str(),
                    route.as_str(),
                    source.as_str(),
                    instance.as_str(),
                    labels.as_str(),
                );
                if let Some(&i) = seen.get(&key) {
                    unique_ids[i] = id;
                }
            }
        }
        let route_ids: Vec<i64> = unique_of.iter().map(|&i| unique_ids[i]).collect();
        let intervals: Vec<(i64, &Interval)> = routes
            .iter()
            .zip(&route_ids)
            .filter_map(|(r, id)| r.interval.as_ref().map(|iv| (*id, iv)))
            .collect();
        // The raw row of a route written twice in one scrape: the last.
        let mut last_of: HashMap<i64, usize> = HashMap::new();
        for (i, (id, _)) in intervals.iter().enumerate() {
            last_of.insert(*id, i);
        }
        let samples: Vec<(i64, &Interval)> = intervals
            .iter()
            .enumerate()
            .filter(|(i, (id, _))| last_of.get(id) == Some(i))
            .map(|(_, row)| *row)
            .collect();
        for chunk in samples.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Db>::new(
                "INSERT INTO route_samples (route_id, at_ms, interval_ms, exchanges, \
                 failed, duration_sum_s, duration_count, max_s, inflight, buckets) ",
            );
            q.push_values(chunk, |mut b, (id, iv)| {
                b.push_bind(*id)
                    .push_bind(at)
                    .push_bind(iv.interval_ms)
                    .push_bind(no_nan(iv.exchanges))
                    .push_bind(no_nan(iv.failed))
                    .push_bind(no_nan(iv.duration_sum_s))
                    .push_bind(no_nan(iv.duration_count))
                    .push_bind(iv.max_s.filter(|m| m.is_finite()))
                    .push_bind(iv.inflight.filter(|m| m.is_finite()))
                    .push_bind(route_buckets::encode(&iv.buckets));
            });
            q.push(
                " ON CONFLICT (route_id, at_ms) DO UPDATE SET interval_ms = excluded.interval_ms, \
                 exchanges = excluded.exchanges, failed = excluded.failed, \
                 duration_sum_s = excluded.duration_sum_s, \
                 duration_count = excluded.duration_count, max_s = excluded.max_s, \
                 inflight = excluded.inflight, buckets = excluded.buckets",
            );
            q.build().execute(&mut *tx).await?;
        }
        // Each rollup row this scrape writes, by (resolution, route): the rows a later chunk
        // adds to (a route written twice in one scrape), and what the backend holds after.
        let mut written: HashMap<(i64, i64), RollupDb> = HashMap::new();
        for resolution in ROLLUPS_MS {
            let bucket = at - at.rem_euclid(resolution);
            for chunk in intervals.chunks(BATCH_ROWS) {
                let ids: Vec<i64> = chunk.iter().map(|(id, _)| *id).collect();
                // The rows to add to: as the backend holds them (SQLite, the only writer of
                // its file), else read back, locked until the commit where rows can be (a
                // concurrent writer of the same buckets waits).
                let existing = match self.held_rollups(resolution, bucket, &ids) {
                    Some(rows) => rows,
                    None => {
                        let mut q = QueryBuilder::<Db>::new(
                            "SELECT route_id, bucket_ms, interval_ms, intervals, exchanges, \
                             failed, duration_sum_s, duration_count, max_s, inflight_sum, \
                             inflight_n, buckets FROM route_rollups WHERE resolution_ms = ",
                        );
                        q.push_bind(resolution)
                            .push(" AND bucket_ms = ")
                            .push_bind(bucket)
                            .push(" AND route_id IN (");
                        let mut sep = q.separated(", ");
                        for id in &ids {
                            sep.push_bind(*id);
                        }
                        q.push(concat!(")", for_update!()));
                        q.build_query_as().fetch_all(&mut *tx).await?
                    }
                };
                let mut by_id: HashMap<i64, RollupDb> =
                    existing.into_iter().map(|r| (r.route_id, r)).collect();
                for id in &ids {
                    if let Some(r) = written.get(&(resolution, *id)) {
                        by_id.insert(*id, r.clone());
                    }
                }
                for (id, iv) in chunk {
                    by_id
                        .entry(*id)
                        .or_insert_with(|| RollupDb {
                            route_id: *id,
                            bucket_ms: bucket,
                            interval_ms: 0,
                            intervals: 0,
                            exchanges: None,
                            failed: None,
                            duration_sum_s: None,
                            duration_count: None,
                            max_s: None,
                            inflight_sum: None,
                            inflight_n: 0,
                            buckets: None,
                        })
                        .add(iv);
                }
                let rows: Vec<RollupDb> = by_id.into_values().collect();
                let mut q = QueryBuilder::<Db>::new(
                    "INSERT INTO route_rollups (route_id, resolution_ms, bucket_ms, \
                     interval_ms, intervals, exchanges, failed, duration_sum_s, duration_count, \
                     max_s, inflight_sum, inflight_n, buckets) ",
                );
                q.push_values(&rows, |mut b, r| {
                    b.push_bind(r.route_id)
                        .push_bind(resolution)
                        .push_bind(r.bucket_ms)
                        .push_bind(r.interval_ms)
                        .push_bind(r.intervals)
                        .push_bind(no_nan(r.exchanges))
                        .push_bind(no_nan(r.failed))
                        .push_bind(no_nan(r.duration_sum_s))
                        .push_bind(no_nan(r.duration_count))
                        .push_bind(no_nan(r.max_s))
                        .push_bind(no_nan(r.inflight_sum))
                        .push_bind(r.inflight_n)
                        .push_bind(&r.buckets);
                });
                q.push(
                    " ON CONFLICT (route_id, resolution_ms, bucket_ms) DO UPDATE SET \
                     interval_ms = excluded.interval_ms, intervals = excluded.intervals, \
                     exchanges = excluded.exchanges, failed = excluded.failed, \
                     duration_sum_s = excluded.duration_sum_s, \
                     duration_count = excluded.duration_count, max_s = excluded.max_s, \
                     inflight_sum = excluded.inflight_sum, inflight_n = excluded.inflight_n, \
                     buckets = excluded.buckets",
                );
                q.build().execute(&mut *tx).await?;
                for r in rows {
                    written.insert((resolution, r.route_id), r);
                }
            }
        }
        let token = self.rollups_staged(written.into_iter().map(|((res, _), r)| (res, r)));
        tx.commit().await?;
        self.rollups_committed(token);
        self.scraped(target_id, status.up, at, routes, &route_ids);
        Ok(route_ids)
    }

    /// Deletes figures past their retention and gives their space back (see the backend's
    /// `reclaim_route_space`). Returns the rows deleted.
    pub async fn prune_routes(&self, now_ms: i64, retention: &Retention) -> Result<u64> {
        let mut n = sqlx::query("DELETE FROM route_samples WHERE at_ms < $1")
            .bind(now_ms - retention.raw_ms())
            .execute(&self.pool)
            .await?
            .rows_affected();
        self.pruned(now_ms - retention.raw_ms());
        for (res, keep) in [
            (MINUTE_MS, retention.minute_ms()),
            (TEN_MINUTES_MS, retention.ten_minute_ms()),
            (HOUR_MS, retention.hour_ms()),
        ] {
            n += sqlx::query(
                "DELETE FROM route_rollups WHERE resolution_ms = $1 AND bucket_ms < $2",
            )
            .bind(res)
            .bind(now_ms - keep)
            .execute(&self.pool)
            .await?
            .rows_affected();
        }
        for (res, keep) in [
            (0, retention.raw_ms()),
            (MINUTE_MS, retention.minute_ms()),
            (TEN_MINUTES_MS, retention.ten_minute_ms()),
            (HOUR_MS, retention.hour_ms()),
        ] {
            n += sqlx::query(
                "DELETE FROM process_series WHERE resolution_ms = $1 AND bucket_ms < $2",
            )
            .bind(res)
            .bind(now_ms - keep)
            .execute(&self.pool)
            .await?
            .rows_affected();
        }
        if n > 0 {
            self.reclaim_route_space().await;
        }
        Ok(n)
    }

    /// Routes with their targets; all of them, or those of `target_id`, or the one `route_id`.
    pub async fn route_infos(
        &self,
        target_id: Option<i64>,
        route_id: Option<i64>,
    ) -> Result<Vec<RouteInfo>> {
        if let Some(infos) = self.held_infos(target_id, route_id) {
            return Ok(infos);
        }
        self.route_infos_sql(target_id, route_id).await
    }

    /// [`Backend::route_infos`] read from the database whatever memory holds.
    pub async fn route_infos_sql(
        &self,
        target_id: Option<i64>,
        route_id: Option<i64>,
    ) -> Result<Vec<RouteInfo>> {
        let mut q = QueryBuilder::<Db>::new(
            "SELECT r.id, r.target_id, r.service, r.route, r.source, r.first_seen_ms, \
             r.last_seen_ms, r.last_exchange_ms, r.state, t.name AS target_name, \
             t.url AS target_url, t.labels AS target_labels, t.up AS target_up, \
             t.last_scrape_ms AS target_last_scrape_ms, t.interval_s AS target_interval_s, \
             r.instance AS route_instance, r.labels AS route_labels \
             FROM routes r JOIN targets t ON t.id = r.target_id WHERE 1 = 1",
        );
        if let Some(t) = target_id {
            q.push(" AND r.target_id = ").push_bind(t);
        }
        if let Some(r) = route_id {
            q.push(" AND r.id = ").push_bind(r);
        }
        q.push(" ORDER BY r.service, r.route, t.name, r.instance, r.source, r.id");
        Ok(q.build_query_as().fetch_all(&self.pool).await?)
    }

    /// Raw intervals with `from_ms < at_ms ≤ to_ms`, by route then time; one route or all.
    pub async fn route_intervals(
        &self,
        route_id: Option<i64>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredInterval>> {
        let mut q = QueryBuilder::<Db>::new(
            "SELECT route_id, at_ms, interval_ms, exchanges, failed, duration_sum_s, \
             duration_count, max_s, inflight, buckets FROM route_samples WHERE at_ms > ",
        );
        q.push_bind(from_ms).push(" AND at_ms <= ").push_bind(to_ms);
        if let Some(r) = route_id {
            q.push(" AND route_id = ").push_bind(r);
        }
        q.push(" ORDER BY route_id, at_ms");
        let rows: Vec<IntervalDb> = q.build_query_as().fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(StoredInterval::from).collect())
    }

    /// The start of route `route_id`'s first rollup bucket at `resolution_ms`, if any.
    pub async fn first_rollup_ms(&self, route_id: i64, resolution_ms: i64) -> Result<Option<i64>> {
        Ok(sqlx::query_scalar(
            "SELECT MIN(bucket_ms) FROM route_rollups WHERE route_id = $1 AND resolution_ms = $2",
        )
        .bind(route_id)
        .bind(resolution_ms)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Exchanges and summed interval length (ms) of the rollups of `ids` at `resolution_ms`
    /// with `from_ms < bucket_ms ≤ to_ms`: `(route_id, bucket_ms, interval_ms, exchanges)`,
    /// by route then time; no buckets read.
    pub async fn rollup_counts(
        &self,
        ids: &[i64],
        resolution_ms: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(i64, i64, i64, Option<f64>)>> {
        let mut out = Vec::new();
        for chunk in ids.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Db>::new(
                "SELECT route_id, bucket_ms, interval_ms, exchanges FROM route_rollups \
                 WHERE resolution_ms = ",
            );
            q.push_bind(resolution_ms)
                .push(" AND bucket_ms > ")
                .push_bind(from_ms)
                .push(" AND bucket_ms <= ")
                .push_bind(to_ms)
                .push(" AND route_id IN (");
            let mut sep = q.separated(", ");
            for id in chunk {
                sep.push_bind(*id);
            }
            q.push(") ORDER BY route_id, bucket_ms");
            out.extend(q.build_query_as::<(i64, i64, i64, Option<f64>)>().fetch_all(&self.pool).await?);
        }
        Ok(out)
    }

    /// Rollup rows of one route at `resolution_ms` whose buckets overlap `from_ms…to_ms`;
    /// `at_ms` is the bucket start, inflight the mean of the readings.
    pub async fn route_rollups(
        &self,
        route_id: i64,
        resolution_ms: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredInterval>> {
        let rows: Vec<RollupDb> = sqlx::query_as(
            "SELECT route_id, bucket_ms, interval_ms, intervals, exchanges, failed, duration_sum_s,
               duration_count, max_s, inflight_sum, inflight_n, buckets
             FROM route_rollups WHERE route_id = $1 AND resolution_ms = $2
               AND bucket_ms > $3 AND bucket_ms <= $4 ORDER BY bucket_ms",
        )
        .bind(route_id)
        .bind(resolution_ms)
        .bind(from_ms - resolution_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().map(StoredInterval::from).collect())
    }

    /// Figures per route over the window ending at `now_ms`: all routes, or those of
    /// `target_id`. See [`Backend::figures_of`].
    pub async fn route_figures(
        &self,
        target_id: Option<i64>,
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<(RouteInfo, Figures)>> {
        let infos = self.route_infos(target_id, None).await?;
        let scope = match target_id {
            Some(t) => IntervalScope::Target(t),
            None => IntervalScope::All,
        };
        self.figures_of(infos, scope, window_ms, now_ms).await
    }

    /// Figures of `infos` over the window ending at `now_ms`: the raw intervals whose
    /// scrape falls in the window. A route with none there (its scrapes are further apart
    /// than the window) is given its last interval when that ended less than twice the
    /// longer of the window and the interval ago, so a 1 min window over 2 min scrapes is
    /// not empty. `scope` must cover `infos` (it bounds the window read).
    ///
    /// Answered from the intervals the backend holds in memory when it can
    /// (`held_figures`: SQLite's recent intervals; never on PostgreSQL), else by
    /// [`Backend::figures_of_sql`].
    pub async fn figures_of(
        &self,
        infos: Vec<RouteInfo>,
        scope: IntervalScope<'_>,
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<(RouteInfo, Figures)>> {
        if let Some(figures) = self.held_figures(&infos, window_ms, now_ms).await? {
            return Ok(infos.into_iter().zip(figures).collect());
        }
        self.figures_of_sql(infos, scope, window_ms, now_ms).await
    }

    /// [`Backend::figures_of`] read from the database whatever memory holds: only the
    /// window (one indexed range of `route_samples`), then the last interval of the routes
    /// the window lacked; the cost follows the routes and the window, never the stored
    /// history.
    pub async fn figures_of_sql(
        &self,
        infos: Vec<RouteInfo>,
        scope: IntervalScope<'_>,
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<(RouteInfo, Figures)>> {
        let rows = self.intervals_in(scope, now_ms - window_ms, now_ms).await?;
        let mut by_route: HashMap<i64, Figures> = HashMap::new();
        for r in &rows {
            by_route.entry(r.route_id).or_default().add(&r.interval);
        }
        let missing: Vec<i64> = infos
            .iter()
            .filter(|i| !by_route.contains_key(&i.id))
            .map(|i| i.id)
            .collect();
        if !missing.is_empty() {
            let longest = infos
                .iter()
                .filter(|i| !by_route.contains_key(&i.id))
                .map(|i| (i.target_interval_s * 1000.0) as i64)
                .max()
                .unwrap_or(0);
            // At least 10 minutes back, as the alert evaluator reads: a route whose own
            // interval is longer than its target's (pushed, or absent from some scrapes)
            // still finds its last interval.
            let lookback = crate::store::routes::rows_lookback(window_ms, longest);
            let older = self
                .intervals_in(
                    IntervalScope::Routes(&missing),
                    now_ms - lookback,
                    now_ms - window_ms,
                )
                .await?;
            // Ordered by route then time: the last row of each route wins.
            let mut last: HashMap<i64, &StoredInterval> = HashMap::new();
            for r in &older {
                last.insert(r.route_id, r);
            }
            for (id, r) in last {
                if r.at_ms > now_ms - r.interval.interval_ms.max(window_ms) * 2 {
                    by_route.entry(id).or_default().add(&r.interval);
                }
            }
        }
        Ok(infos
            .into_iter()
            .map(|info| {
                let f = by_route.remove(&info.id).unwrap_or_default();
                (info, f)
            })
            .collect())
    }

    /// Raw intervals with `from_ms < at_ms ≤ to_ms` of the routes in `scope`, by route then
    /// time.
    pub async fn intervals_in(
        &self,
        scope: IntervalScope<'_>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredInterval>> {
        let chunks: Vec<Option<&[i64]>> = match scope {
            IntervalScope::Routes(ids) => ids.chunks(BATCH_ROWS).map(Some).collect(),
            _ => vec![None],
        };
        let mut out = Vec::new();
        for chunk in chunks {
            let mut q = QueryBuilder::<Db>::new(
                "SELECT s.route_id, s.at_ms, s.interval_ms, s.exchanges, s.failed, \
                 s.duration_sum_s, s.duration_count, s.max_s, s.inflight, s.buckets \
                 FROM route_samples s WHERE s.at_ms > ",
            );
            q.push_bind(from_ms)
                .push(" AND s.at_ms <= ")
                .push_bind(to_ms);
            if let IntervalScope::Target(t) = scope {
                q.push(" AND s.route_id IN (SELECT id FROM routes WHERE target_id = ")
                    .push_bind(t)
                    .push(")");
            }
            if let Some(ids) = chunk {
                q.push(" AND s.route_id IN (");
                let mut sep = q.separated(", ");
                for id in ids {
                    sep.push_bind(*id);
                }
                q.push(")");
            }
            q.push(" ORDER BY s.route_id, s.at_ms");
            let rows: Vec<IntervalDb> = q.build_query_as().fetch_all(&self.pool).await?;
            out.extend(rows.into_iter().map(StoredInterval::from));
        }
        Ok(out)
    }

    /// Writes one scrape's process figures `(instance, metric, value)` of target
    /// `target_id` at `at_ms`: the scrape row and the 1 min / 10 min / 1 h buckets (sum,
    /// count, max), in one transaction with multi-row upserts.
    pub async fn record_process(
        &self,
        target_id: i64,
        at_ms: i64,
        figures: &[(String, String, f64)],
    ) -> Result<()> {
        if figures.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        let levels = [0, MINUTE_MS, TEN_MINUTES_MS, HOUR_MS];
        // One row per key and level, figures named twice merged first (sum, count, max):
        // PostgreSQL refuses a statement that upserts the same row twice.
        // (resolution, bucket, instance, metric) → (sum, n, max).
        type Key<'a> = (i64, i64, &'a str, &'a str);
        let mut merged: Vec<(Key<'_>, (f64, i64, f64))> = Vec::new();
        let mut index: HashMap<Key<'_>, usize> = HashMap::new();
        for (instance, metric, v) in figures {
            for res in levels {
                let bucket = if res == 0 {
                    at_ms
                } else {
                    at_ms - at_ms.rem_euclid(res)
                };
                let key = (res, bucket, instance.as_str(), metric.as_str());
                match index.get(&key) {
                    Some(&i) => {
                        let m = &mut merged[i].1;
                        m.0 += v;
                        m.1 += 1;
                        m.2 = m.2.max(*v);
                    }
                    None => {
                        index.insert(key, merged.len());
                        merged.push((key, (*v, 1, *v)));
                    }
                }
            }
        }
        for chunk in merged.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Db>::new(
                "INSERT INTO process_series (target_id, instance, metric, resolution_ms, \
                 bucket_ms, sum, n, max) ",
            );
            q.push_values(
                chunk,
                |mut b, ((res, bucket, instance, metric), (sum, n, max))| {
                    b.push_bind(target_id)
                        .push_bind(*instance)
                        .push_bind(*metric)
                        .push_bind(*res)
                        .push_bind(*bucket)
                        .push_bind(*sum)
                        .push_bind(*n)
                        .push_bind(*max);
                },
            );
            q.push(concat!(
                " ON CONFLICT (target_id, instance, metric, resolution_ms, bucket_ms) DO UPDATE \
                 SET sum = process_series.sum + excluded.sum, n = process_series.n + excluded.n, \
                 max = ",
                greatest!("process_series.max", "excluded.max")
            ));
            q.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The latest process figures of targets `target_ids`: `(target_id, instance, metric,
    /// value, at_ms)`, one per instance and metric (the last scrape that had it).
    pub async fn process_latest(&self, target_ids: &[i64]) -> Result<Vec<ProcessPoint>> {
        if target_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = QueryBuilder::<Db>::new(
            "SELECT p.target_id, p.instance, p.metric, p.bucket_ms AS at_ms, p.sum AS mean, \
             p.max FROM process_series p JOIN (SELECT target_id, instance, metric, \
             MAX(bucket_ms) AS last FROM process_series WHERE resolution_ms = 0 AND target_id IN (",
        );
        let mut sep = q.separated(", ");
        for id in target_ids {
            sep.push_bind(*id);
        }
        q.push(
            ") GROUP BY target_id, instance, metric) l ON l.target_id = p.target_id \
             AND l.instance = p.instance AND l.metric = p.metric AND l.last = p.bucket_ms \
             WHERE p.resolution_ms = 0 ORDER BY p.instance, p.metric",
        );
        Ok(q.build_query_as().fetch_all(&self.pool).await?)
    }

    /// Process figures of targets `target_ids` at `resolution_ms` (0: per scrape) with
    /// `from_ms ≤ bucket_ms ≤ to_ms`, by instance, metric and time; `mean` = sum / n. With
    /// `metric_prefix`, only the metrics whose name starts with it.
    pub async fn process_series(
        &self,
        target_ids: &[i64],
        resolution_ms: i64,
        from_ms: i64,
        to_ms: i64,
        metric_prefix: Option<&str>,
    ) -> Result<Vec<ProcessPoint>> {
        if target_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = QueryBuilder::<Db>::new(
            "SELECT target_id, instance, metric, bucket_ms AS at_ms, sum / n AS mean, max \
             FROM process_series WHERE resolution_ms = ",
        );
        q.push_bind(resolution_ms)
            .push(" AND bucket_ms >= ")
            .push_bind(from_ms - resolution_ms)
            .push(" AND bucket_ms <= ")
            .push_bind(to_ms)
            .push(" AND target_id IN (");
        let mut sep = q.separated(", ");
        for id in target_ids {
            sep.push_bind(*id);
        }
        q.push(")");
        if let Some(prefix) = metric_prefix {
            q.push(" AND substr(metric, 1, ")
                .push_bind(prefix.chars().count() as i32)
                .push(") = ")
                .push_bind(prefix.to_string());
        }
        q.push(" ORDER BY instance, metric, bucket_ms");
        Ok(q.build_query_as().fetch_all(&self.pool).await?)
    }

    /// The figures of [`crate::store::Store::route_window_figures`] read from the database: the sums come from one aggregate query
    /// over the longest window (no per-route query, no bucket parsing unless
    /// `need.buckets`), the latest inflight reading and the histogram buckets only for the
    /// windows that ask for them.
    pub async fn route_window_figures_sql(
        &self,
        needs: &[WindowNeed],
        now_ms: i64,
    ) -> Result<RouteWindows> {
        let infos = self.route_infos(None, None).await?;
        let mut out: HashMap<i64, Vec<Figures>> = HashMap::new();
        if needs.is_empty() {
            return Ok(windows_of(&infos, out));
        }
        let index: HashMap<i64, usize> = infos.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
        let longest = needs.iter().map(|n| n.window_ms).max().unwrap_or(0);
        // The windows, shortest first, cut the longest one into segments: segment j holds
        // the intervals in (now − windows[j], now − windows[j − 1]]. One aggregate row per
        // route and segment (one sum per figure, not one per figure and window); a
        // window's figures are the sums of its segments.
        let mut windows: Vec<i64> = needs.iter().map(|n| n.window_ms).collect();
        windows.sort_unstable();
        windows.dedup();
        let mut q = QueryBuilder::<Db>::new("SELECT route_id, CASE");
        for (j, w) in windows.iter().enumerate() {
            q.push(" WHEN at_ms > ")
                .push_bind(now_ms - w)
                .push(" THEN ")
                .push(format!("CAST({j} AS BIGINT)"));
        }
        q.push(
            " END AS seg, CAST(SUM(interval_ms) AS BIGINT), SUM(exchanges), SUM(failed), \
             SUM(duration_sum_s), SUM(duration_count), MAX(max_s), COUNT(*)",
        );
        q.push(" FROM route_samples WHERE at_ms > ")
            .push_bind(now_ms - longest)
            .push(" AND at_ms <= ")
            .push_bind(now_ms)
            .push(" GROUP BY route_id, seg");
        for n in needs {
            out.insert(n.window_ms, vec![Figures::default(); infos.len()]);
        }
        let rows = q.build().fetch_all(&self.pool).await?;
        for row in &rows {
            use sqlx::Row;
            let Some(&i) = index.get(&row.try_get::<i64, _>(0)?) else {
                continue;
            };
            let seg = row.try_get::<i64, _>(1)?;
            let span = row.try_get::<Option<i64>, _>(2)?.unwrap_or(0);
            let exchanges: Option<f64> = row.try_get(3)?;
            let failed: Option<f64> = row.try_get(4)?;
            let duration_sum_s: Option<f64> = row.try_get(5)?;
            let duration_count: Option<f64> = row.try_get(6)?;
            let max_s: Option<f64> = row.try_get(7)?;
            let intervals = row.try_get::<i64, _>(8)? as u32;
            for n in needs {
                // The window takes the segments up to its own length.
                if windows.binary_search(&n.window_ms).unwrap_or(usize::MAX) < seg as usize {
                    continue;
                }
                let f = &mut out.get_mut(&n.window_ms).expect("inserted above")[i];
                f.span_ms += span;
                f.exchanges = add_opt(f.exchanges, exchanges);
                f.failed = add_opt(f.failed, failed);
                f.duration_sum_s = add_opt(f.duration_sum_s, duration_sum_s);
                f.duration_count = add_opt(f.duration_count, duration_count);
                f.max_s = match (f.max_s, max_s) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                f.intervals += intervals;
            }
        }
        // Routes without an interval in a window get their last one when it is recent
        // enough (as route_figures does), so a window shorter than the scrape interval is
        // not empty.
        let lookback = longest.max(crate::store::recent::LAST_LOOKBACK_MS);
        if out
            .values()
            .any(|figs| figs.iter().any(|f| f.intervals == 0))
        {
            let last: Vec<IntervalDb> = sqlx::query_as(
                "SELECT s.route_id, s.at_ms, s.interval_ms, s.exchanges, s.failed,
                        s.duration_sum_s, s.duration_count, s.max_s, s.inflight, s.buckets
                 FROM route_samples s
                 JOIN (SELECT route_id, MAX(at_ms) AS at_ms FROM route_samples
                       WHERE at_ms > $1 AND at_ms <= $2 GROUP BY route_id) latest
                   ON s.route_id = latest.route_id AND s.at_ms = latest.at_ms",
            )
            .bind(now_ms - lookback)
            .bind(now_ms)
            .fetch_all(&self.pool)
            .await?;
            for r in last.into_iter().map(StoredInterval::from) {
                let Some(&i) = index.get(&r.route_id) else {
                    continue;
                };
                for n in needs {
                    let f = &mut out.get_mut(&n.window_ms).expect("inserted above")[i];
                    if f.intervals == 0
                        && r.at_ms > now_ms - r.interval.interval_ms.max(n.window_ms) * 2
                    {
                        f.add(&r.interval);
                        if !n.buckets {
                            f.buckets.clear();
                        }
                    }
                }
            }
        }
        for n in needs.iter().filter(|n| n.buckets || n.inflight) {
            // (route id, scrape time, inflight, buckets as stored)
            type Row = (i64, i64, Option<f64>, Option<Vec<u8>>);
            let rows: Vec<Row> = sqlx::query_as(
                "SELECT route_id, at_ms, inflight, CASE WHEN CAST($1 AS BOOLEAN) THEN buckets END
                 FROM route_samples WHERE at_ms > $2 AND at_ms <= $3 ORDER BY route_id, at_ms",
            )
            .bind(n.buckets)
            .bind(now_ms - n.window_ms)
            .bind(now_ms)
            .fetch_all(&self.pool)
            .await?;
            let figs = out.get_mut(&n.window_ms).expect("inserted above");
            for (route_id, _, inflight, buckets) in rows {
                let Some(&i) = index.get(&route_id) else {
                    continue;
                };
                if n.inflight && inflight.is_some() {
                    figs[i].inflight = inflight;
                }
                if n.buckets
                    && let Some(b) = buckets.as_deref()
                {
                    route_buckets::merge_into(&mut figs[i].buckets, b);
                }
            }
        }
        Ok(windows_of(&infos, out))
    }

    /// Runs whose [start, end] overlaps `from_ms…to_ms`, oldest first.
    pub async fn route_groups(&self) -> Result<Vec<(i64, String)>> {
        Ok(sqlx::query_as(
            "SELECT id, route_group FROM routes WHERE route_group IS NOT NULL ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn set_route_groups(&self, groups: &[(i64, Option<String>)]) -> Result<()> {
        if groups.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        for (id, group) in groups {
            sqlx::query(
                "UPDATE routes SET route_group = $1 WHERE id = $2 AND route_group IS DISTINCT FROM $1",
            )
            .bind(group)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn runs_overlapping(&self, from_ms: i64, to_ms: i64) -> Result<Vec<RunBand>> {
        Ok(sqlx::query_as(
            "SELECT r.id, r.name, r.started_at_ms, r.ended_at_ms, r.source, r.reported,
                    (SELECT t.value FROM run_tags t WHERE t.run_id = r.id AND t.key = 'service')
                      AS service_tag
             FROM runs r
             WHERE r.started_at_ms IS NOT NULL AND r.ended_at_ms IS NOT NULL
               AND r.started_at_ms <= $1 AND r.ended_at_ms >= $2
             ORDER BY r.started_at_ms LIMIT 200",
        )
        .bind(to_ms)
        .bind(from_ms)
        .fetch_all(&self.pool)
        .await?)
    }
}
