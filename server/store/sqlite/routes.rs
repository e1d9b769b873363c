//! Route monitoring: `targets`, `routes`, `route_samples` (one row per route per scrape)
//! and `route_rollups` (1 min, 10 min and 1 h sums), plus the runs that overlap a time range.
//!
//! A scrape is written in one transaction: the target's status, the routes it found
//! (multi-row upsert), their interval rows (multi-row insert) and the rollup rows those
//! intervals fall in (read, merged, replaced). Retention is [`SqliteStore::prune_routes`].

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use sqlx::{FromRow, QueryBuilder, Sqlite};

use super::SqliteStore;
use super::recent::{RouteSubject, RouteWindows, subject_labels};
use crate::domain::routes::{Figures, Interval, merge_buckets};
use crate::domain::secrets::{Credentials, Secret};
use crate::store::Result;

/// Rows per multi-row statement (≤ 12 bound values each, well under SQLite's limit).
const BATCH_ROWS: usize = 500;

/// The rollup resolutions, ms.
pub const MINUTE_MS: i64 = 60_000;
pub const TEN_MINUTES_MS: i64 = 600_000;
pub const HOUR_MS: i64 = 3_600_000;
/// The rollup resolutions written with every scrape.
pub const ROLLUPS_MS: [i64; 3] = [MINUTE_MS, TEN_MINUTES_MS, HOUR_MS];

/// A target as configured (`harrier.toml` `[[targets]]` or `POST /api/v1/targets`).
/// Defaults: `kind` prometheus, `interval_s` 15, `timeout_s` 10 or the interval when that
/// is shorter (Prometheus's rule for an unset scrape timeout).
#[derive(Debug, Clone, PartialEq, serde::Deserialize, Serialize)]
#[serde(from = "TargetSpecIn")]
pub struct TargetSpec {
    pub name: String,
    /// Used in full; formatted and serialized masked (see [`crate::domain::secrets::mask_url`]).
    pub url: Secret<Credentials>,
    /// `prometheus` or `jolokia`.
    pub kind: String,
    pub interval_s: f64,
    pub timeout_s: f64,
    /// Extra labels; `service` names the service, `instance` the instance.
    pub labels: BTreeMap<String, String>,
}

/// A [`TargetSpec`] as written, before its defaults are filled in.
#[derive(serde::Deserialize)]
struct TargetSpecIn {
    name: String,
    url: String,
    #[serde(default = "default_kind")]
    kind: String,
    #[serde(default = "default_interval_s")]
    interval_s: f64,
    timeout_s: Option<f64>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

impl From<TargetSpecIn> for TargetSpec {
    fn from(t: TargetSpecIn) -> TargetSpec {
        TargetSpec {
            timeout_s: t.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S.min(t.interval_s)),
            name: t.name,
            url: t.url,
            kind: t.kind,
            interval_s: t.interval_s,
            labels: t.labels,
        }
    }
}

/// Scrape time-out when none is given and the interval is longer, s.
const DEFAULT_TIMEOUT_S: f64 = 10.0;

fn default_kind() -> String {
    "prometheus".into()
}
fn default_interval_s() -> f64 {
    15.0
}

/// A stored target with its last scrape (`GET /api/v1/targets`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetRow {
    pub id: i64,
    pub name: String,
    /// Used in full for scraping; formatted and serialized masked (answers and live
    /// events never carry credentials, see [`crate::domain::secrets::mask_url`]).
    pub url: Secret<Credentials>,
    /// Whether the URL shown hides a part of the stored one (credentials, a token).
    pub secret_set: bool,
    pub kind: String,
    pub interval_s: f64,
    pub timeout_s: f64,
    pub labels: BTreeMap<String, String>,
    /// `api`, `config` or `builtin`.
    pub origin: String,
    pub created_at_ms: i64,
    /// Last scrape answered; `null` before the first scrape.
    pub up: Option<bool>,
    pub last_scrape_ms: Option<i64>,
    pub last_duration_ms: Option<f64>,
    /// Samples (Jolokia: attribute values) in the last scrape.
    pub samples: Option<i64>,
    pub last_error: Option<String>,
    /// The instance routes of this target are shown under.
    pub instance: String,
    /// The service name used when the series name none.
    pub service: String,
}

#[derive(FromRow)]
struct TargetDb {
    id: i64,
    name: String,
    url: String,
    kind: String,
    interval_s: f64,
    timeout_s: f64,
    labels: String,
    origin: String,
    created_at_ms: i64,
    up: Option<bool>,
    last_scrape_ms: Option<i64>,
    last_duration_ms: Option<f64>,
    last_samples: Option<i64>,
    last_error: Option<String>,
}

/// `host:port` of a URL (the instance when no `instance` label is set).
pub fn url_instance(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    // Never the credentials: `user:pass@host:port` → `host:port`.
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
        .to_string()
}

impl From<TargetDb> for TargetRow {
    fn from(t: TargetDb) -> Self {
        let labels: BTreeMap<String, String> = serde_json::from_str(&t.labels).unwrap_or_default();
        TargetRow {
            instance: labels
                .get("instance")
                .cloned()
                .unwrap_or_else(|| url_instance(&t.url)),
            service: labels
                .get("service")
                .cloned()
                .unwrap_or_else(|| t.name.clone()),
            id: t.id,
            name: t.name,
            secret_set: Secret::<Credentials>::new(t.url.as_str()).hides_something(),
            url: Secret::new(t.url),
            kind: t.kind,
            interval_s: t.interval_s,
            timeout_s: t.timeout_s,
            labels,
            origin: t.origin,
            created_at_ms: t.created_at_ms,
            up: t.up,
            last_scrape_ms: t.last_scrape_ms,
            last_duration_ms: t.last_duration_ms,
            samples: t.last_samples,
            last_error: t.last_error,
        }
    }
}

const TARGET_COLUMNS: &str = "id, name, url, kind, interval_s, timeout_s, labels, origin, \
     created_at_ms, up, last_scrape_ms, last_duration_ms, last_samples, last_error";

/// The outcome of one scrape of a target.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeStatus {
    pub at_ms: i64,
    pub up: bool,
    pub duration_ms: f64,
    pub samples: i64,
    pub error: Option<String>,
}

/// One route found by a scrape, with its interval since the previous scrape (`None` on the
/// first scrape that saw it).
#[derive(Debug, Clone, PartialEq)]
pub struct RouteWrite {
    pub service: String,
    pub route: String,
    pub source: String,
    pub state: Option<String>,
    /// The source's own last-exchange time.
    pub last_exchange_ms: Option<i64>,
    pub interval: Option<Interval>,
    /// The instance its series name; `""`: the target's own.
    pub instance: String,
}

/// A stored route with what its target says (`routes` ⋈ `targets`).
#[derive(Debug, Clone, PartialEq, FromRow)]
pub struct RouteInfo {
    pub id: i64,
    pub target_id: i64,
    pub service: String,
    pub route: String,
    pub source: String,
    pub first_seen_ms: i64,
    pub last_seen_ms: i64,
    pub last_exchange_ms: Option<i64>,
    pub state: Option<String>,
    pub target_name: String,
    pub target_url: String,
    pub target_labels: String,
    pub target_up: Option<bool>,
    pub target_last_scrape_ms: Option<i64>,
    pub target_interval_s: f64,
    /// The instance its series name (`""`: the target's own).
    pub route_instance: String,
}

impl RouteInfo {
    /// The instance the route runs on: the one its series name, else the target's
    /// `instance` label, else the target's host:port.
    pub fn instance(&self) -> String {
        if !self.route_instance.is_empty() {
            return self.route_instance.clone();
        }
        serde_json::from_str::<BTreeMap<String, String>>(&self.target_labels)
            .ok()
            .and_then(|l| l.get("instance").cloned())
            .unwrap_or_else(|| url_instance(&self.target_url))
    }

    /// The labels alerts of this route carry (`service`, `instance`, `route`, `target`,
    /// `source`; see [`subject_labels`]).
    pub fn subject_labels(&self) -> BTreeMap<String, String> {
        subject_labels(
            &self.service,
            &self.instance(),
            &self.route,
            &self.target_name,
            &self.source,
        )
    }
}

/// One stored process figure: the scrape's value (`mean` = `max` = the reading) or a
/// bucket's mean and max.
#[derive(Debug, Clone, PartialEq, Serialize, FromRow)]
pub struct ProcessPoint {
    pub target_id: i64,
    pub instance: String,
    pub metric: String,
    pub at_ms: i64,
    pub mean: f64,
    pub max: f64,
}

/// Which routes' raw intervals [`SqliteStore::intervals_in`] reads.
#[derive(Debug, Clone, Copy)]
pub enum IntervalScope<'a> {
    All,
    /// The routes of one target.
    Target(i64),
    /// These routes.
    Routes(&'a [i64]),
}

/// A load-test run drawn as a band on route charts.
#[derive(Debug, Clone, PartialEq, Serialize, FromRow)]
pub struct RunBand {
    pub id: i64,
    pub name: String,
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
    #[sqlx(skip)]
    pub url: String,
}

/// How long each resolution is kept.
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    #[serde(default = "default_raw_hours")]
    pub raw_hours: f64,
    #[serde(default = "default_minute_days")]
    pub minute_days: f64,
    #[serde(default = "default_ten_minute_days")]
    pub ten_minute_days: f64,
    #[serde(default = "default_hour_days")]
    pub hour_days: f64,
}

fn default_raw_hours() -> f64 {
    48.0
}
fn default_minute_days() -> f64 {
    30.0
}
fn default_ten_minute_days() -> f64 {
    90.0
}
fn default_hour_days() -> f64 {
    365.0
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            raw_hours: default_raw_hours(),
            minute_days: default_minute_days(),
            ten_minute_days: default_ten_minute_days(),
            hour_days: default_hour_days(),
        }
    }
}

impl Retention {
    pub fn raw_ms(&self) -> i64 {
        (self.raw_hours * 3_600_000.0) as i64
    }
    pub fn minute_ms(&self) -> i64 {
        (self.minute_days * 86_400_000.0) as i64
    }
    pub fn ten_minute_ms(&self) -> i64 {
        (self.ten_minute_days * 86_400_000.0) as i64
    }
    pub fn hour_ms(&self) -> i64 {
        (self.hour_days * 86_400_000.0) as i64
    }
}

/// Buckets as stored: `[[le, increase], …]` with `null` for `+Inf`.
fn buckets_json(b: &[(f64, f64)]) -> Option<String> {
    if b.is_empty() {
        return None;
    }
    let v: Vec<(Option<f64>, f64)> = b
        .iter()
        .map(|(le, c)| (le.is_finite().then_some(*le), *c))
        .collect();
    serde_json::to_string(&v).ok()
}

pub(super) fn parse_buckets(s: Option<&str>) -> Vec<(f64, f64)> {
    let Some(s) = s else { return Vec::new() };
    serde_json::from_str::<Vec<(Option<f64>, f64)>>(s)
        .unwrap_or_default()
        .into_iter()
        .map(|(le, c)| (le.unwrap_or(f64::INFINITY), c))
        .collect()
}

/// What the alert evaluator needs over one window (see [`SqliteStore::route_window_figures`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowNeed {
    pub window_ms: i64,
    /// Histogram buckets (for percentiles).
    pub buckets: bool,
    /// The latest inflight reading.
    pub inflight: bool,
}

fn windows_of(infos: &[RouteInfo], figures: HashMap<i64, Vec<Figures>>) -> RouteWindows {
    RouteWindows {
        routes: std::sync::Arc::new(infos.iter().map(RouteSubject::from).collect()),
        target_up: infos.iter().map(|i| i.target_up).collect(),
        figures,
        from_memory: false,
    }
}

impl From<&RouteInfo> for RouteSubject {
    fn from(i: &RouteInfo) -> Self {
        // The instance once: it parses the target's labels, and the subject keeps it too.
        let instance = i.instance();
        RouteSubject {
            id: i.id,
            target_id: i.target_id,
            labels: std::sync::Arc::new(subject_labels(
                &i.service,
                &instance,
                &i.route,
                &i.target_name,
                &i.source,
            )),
            service: i.service.clone(),
            route: i.route.clone(),
            source: i.source.clone(),
            instance,
            target_name: i.target_name.clone(),
        }
    }
}

/// One stored interval (raw or rollup) of one route.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredInterval {
    pub route_id: i64,
    /// Raw: the scrape time; rollup: the bucket start.
    pub at_ms: i64,
    pub interval: Interval,
}

#[derive(FromRow)]
struct IntervalDb {
    route_id: i64,
    at_ms: i64,
    interval_ms: i64,
    exchanges: Option<f64>,
    failed: Option<f64>,
    duration_sum_s: Option<f64>,
    duration_count: Option<f64>,
    max_s: Option<f64>,
    inflight: Option<f64>,
    buckets: Option<String>,
}

impl From<IntervalDb> for StoredInterval {
    fn from(r: IntervalDb) -> Self {
        StoredInterval {
            route_id: r.route_id,
            at_ms: r.at_ms,
            interval: Interval {
                interval_ms: r.interval_ms,
                exchanges: r.exchanges,
                failed: r.failed,
                duration_sum_s: r.duration_sum_s,
                duration_count: r.duration_count,
                buckets: parse_buckets(r.buckets.as_deref()),
                max_s: r.max_s,
                inflight: r.inflight,
                resets: 0,
            },
        }
    }
}

#[derive(FromRow)]
struct RollupDb {
    route_id: i64,
    bucket_ms: i64,
    interval_ms: i64,
    intervals: i64,
    exchanges: Option<f64>,
    failed: Option<f64>,
    duration_sum_s: Option<f64>,
    duration_count: Option<f64>,
    max_s: Option<f64>,
    inflight_sum: Option<f64>,
    inflight_n: i64,
    buckets: Option<String>,
}

fn add_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, None) => x,
        (None, y) => y,
    }
}

impl RollupDb {
    fn add(&mut self, iv: &Interval) {
        self.interval_ms += iv.interval_ms;
        self.intervals += 1;
        self.exchanges = add_opt(self.exchanges, iv.exchanges);
        self.failed = add_opt(self.failed, iv.failed);
        self.duration_sum_s = add_opt(self.duration_sum_s, iv.duration_sum_s);
        self.duration_count = add_opt(self.duration_count, iv.duration_count);
        if let Some(m) = iv.max_s.filter(|m| m.is_finite()) {
            self.max_s = Some(self.max_s.map_or(m, |x| x.max(m)));
        }
        if let Some(i) = iv.inflight.filter(|i| i.is_finite()) {
            self.inflight_sum = Some(self.inflight_sum.unwrap_or(0.0) + i);
            self.inflight_n += 1;
        }
        if !iv.buckets.is_empty() {
            let mut b = parse_buckets(self.buckets.as_deref());
            merge_buckets(&mut b, &iv.buckets);
            self.buckets = buckets_json(&b);
        }
    }
}

impl SqliteStore {
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
             VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING id",
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
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)
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
        self.recent.invalidate();
        Ok(self
            .get_target(id)
            .await?
            .expect("the row was just written"))
    }

    /// Every target, by name.
    pub async fn list_targets(&self) -> Result<Vec<TargetRow>> {
        let mut q = QueryBuilder::<Sqlite>::new("SELECT ");
        q.push(TARGET_COLUMNS).push(" FROM targets ORDER BY name");
        let rows: Vec<TargetDb> = q.build_query_as().fetch_all(&self.pool).await?;
        Ok(rows.into_iter().map(TargetRow::from).collect())
    }

    pub async fn get_target(&self, id: i64) -> Result<Option<TargetRow>> {
        let mut q = QueryBuilder::<Sqlite>::new("SELECT ");
        q.push(TARGET_COLUMNS)
            .push(" FROM targets WHERE id = ")
            .push_bind(id);
        let row: Option<TargetDb> = q.build_query_as().fetch_optional(&self.pool).await?;
        Ok(row.map(TargetRow::from))
    }

    /// Deletes a target with its routes and their figures; false when there was none.
    pub async fn delete_target(&self, id: i64) -> Result<bool> {
        let done = sqlx::query("DELETE FROM targets WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        self.recent.invalidate();
        Ok(done.rows_affected() > 0)
    }

    /// Deletes targets of `origin` whose names are not in `keep` (a config file's targets
    /// that were removed from it). Returns the ids deleted.
    pub async fn delete_targets_not_in(&self, origin: &str, keep: &[String]) -> Result<Vec<i64>> {
        let mut q = QueryBuilder::<Sqlite>::new("DELETE FROM targets WHERE origin = ");
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
            self.recent.invalidate();
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
            "UPDATE targets SET up = ?, last_scrape_ms = ?, last_duration_ms = ?,
               last_samples = ?, last_error = ? WHERE id = ?",
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
        let mut ids: HashMap<(String, String, String, String), i64> = HashMap::new();
        for chunk in routes.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO routes (target_id, service, route, source, first_seen_ms, \
                 last_seen_ms, last_exchange_ms, state, instance) ",
            );
            q.push_values(chunk, |mut b, r| {
                let rose = r
                    .interval
                    .as_ref()
                    .and_then(|iv| iv.exchanges)
                    .is_some_and(|n| n > 0.0);
                let exchange_ms = match (rose.then_some(at), r.last_exchange_ms) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                b.push_bind(target_id)
                    .push_bind(&r.service)
                    .push_bind(&r.route)
                    .push_bind(&r.source)
                    .push_bind(at)
                    .push_bind(at)
                    .push_bind(exchange_ms)
                    .push_bind(&r.state)
                    .push_bind(&r.instance);
            });
            q.push(
                " ON CONFLICT (target_id, service, route, source, instance) DO UPDATE SET \
                 last_seen_ms = excluded.last_seen_ms, state = excluded.state, \
                 last_exchange_ms = COALESCE(excluded.last_exchange_ms, routes.last_exchange_ms) \
                 RETURNING id, service, route, source, instance",
            );
            let rows: Vec<(i64, String, String, String, String)> =
                q.build_query_as().fetch_all(&mut *tx).await?;
            for (id, service, route, source, instance) in rows {
                ids.insert((service, route, source, instance), id);
            }
        }
        let route_ids: Vec<i64> = routes
            .iter()
            .map(|r| {
                ids.get(&(
                    r.service.clone(),
                    r.route.clone(),
                    r.source.clone(),
                    r.instance.clone(),
                ))
                .copied()
                .unwrap_or_default()
            })
            .collect();
        let intervals: Vec<(i64, &Interval)> = routes
            .iter()
            .zip(&route_ids)
            .filter_map(|(r, id)| r.interval.as_ref().map(|iv| (*id, iv)))
            .collect();
        for chunk in intervals.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT OR REPLACE INTO route_samples (route_id, at_ms, interval_ms, exchanges, \
                 failed, duration_sum_s, duration_count, max_s, inflight, buckets) ",
            );
            q.push_values(chunk, |mut b, (id, iv)| {
                b.push_bind(*id)
                    .push_bind(at)
                    .push_bind(iv.interval_ms)
                    .push_bind(iv.exchanges)
                    .push_bind(iv.failed)
                    .push_bind(iv.duration_sum_s)
                    .push_bind(iv.duration_count)
                    .push_bind(iv.max_s.filter(|m| m.is_finite()))
                    .push_bind(iv.inflight.filter(|m| m.is_finite()))
                    .push_bind(buckets_json(&iv.buckets));
            });
            q.build().execute(&mut *tx).await?;
        }
        for resolution in ROLLUPS_MS {
            let bucket = at - at.rem_euclid(resolution);
            for chunk in intervals.chunks(BATCH_ROWS) {
                let mut q = QueryBuilder::<Sqlite>::new(
                    "SELECT route_id, bucket_ms, interval_ms, intervals, exchanges, failed, \
                     duration_sum_s, duration_count, max_s, inflight_sum, inflight_n, buckets \
                     FROM route_rollups WHERE resolution_ms = ",
                );
                q.push_bind(resolution)
                    .push(" AND bucket_ms = ")
                    .push_bind(bucket)
                    .push(" AND route_id IN (");
                let mut sep = q.separated(", ");
                for (id, _) in chunk {
                    sep.push_bind(*id);
                }
                q.push(")");
                let existing: Vec<RollupDb> = q.build_query_as().fetch_all(&mut *tx).await?;
                let mut by_id: HashMap<i64, RollupDb> =
                    existing.into_iter().map(|r| (r.route_id, r)).collect();
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
                let mut q = QueryBuilder::<Sqlite>::new(
                    "INSERT OR REPLACE INTO route_rollups (route_id, resolution_ms, bucket_ms, \
                     interval_ms, intervals, exchanges, failed, duration_sum_s, duration_count, \
                     max_s, inflight_sum, inflight_n, buckets) ",
                );
                q.push_values(&rows, |mut b, r| {
                    b.push_bind(r.route_id)
                        .push_bind(resolution)
                        .push_bind(r.bucket_ms)
                        .push_bind(r.interval_ms)
                        .push_bind(r.intervals)
                        .push_bind(r.exchanges)
                        .push_bind(r.failed)
                        .push_bind(r.duration_sum_s)
                        .push_bind(r.duration_count)
                        .push_bind(r.max_s)
                        .push_bind(r.inflight_sum)
                        .push_bind(r.inflight_n)
                        .push_bind(&r.buckets);
                });
                q.build().execute(&mut *tx).await?;
            }
        }
        tx.commit().await?;
        self.recent
            .record(target_id, status.up, at, routes, &route_ids);
        Ok(route_ids)
    }

    /// Deletes figures past their retention. Returns the rows deleted.
    pub async fn prune_routes(&self, now_ms: i64, retention: &Retention) -> Result<u64> {
        let mut n = sqlx::query("DELETE FROM route_samples WHERE at_ms < ?")
            .bind(now_ms - retention.raw_ms())
            .execute(&self.pool)
            .await?
            .rows_affected();
        self.recent.forget_before(now_ms - retention.raw_ms());
        for (res, keep) in [
            (MINUTE_MS, retention.minute_ms()),
            (TEN_MINUTES_MS, retention.ten_minute_ms()),
            (HOUR_MS, retention.hour_ms()),
        ] {
            n += sqlx::query("DELETE FROM route_rollups WHERE resolution_ms = ? AND bucket_ms < ?")
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
            n +=
                sqlx::query("DELETE FROM process_series WHERE resolution_ms = ? AND bucket_ms < ?")
                    .bind(res)
                    .bind(now_ms - keep)
                    .execute(&self.pool)
                    .await?
                    .rows_affected();
        }
        Ok(n)
    }

    /// Routes with their targets; all of them, or those of `target_id`, or the one `route_id`.
    pub async fn route_infos(
        &self,
        target_id: Option<i64>,
        route_id: Option<i64>,
    ) -> Result<Vec<RouteInfo>> {
        let mut q = QueryBuilder::<Sqlite>::new(
            "SELECT r.id, r.target_id, r.service, r.route, r.source, r.first_seen_ms, \
             r.last_seen_ms, r.last_exchange_ms, r.state, t.name AS target_name, \
             t.url AS target_url, t.labels AS target_labels, t.up AS target_up, \
             t.last_scrape_ms AS target_last_scrape_ms, t.interval_s AS target_interval_s, \
             r.instance AS route_instance \
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
        let mut q = QueryBuilder::<Sqlite>::new(
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
            "SELECT MIN(bucket_ms) FROM route_rollups WHERE route_id = ? AND resolution_ms = ?",
        )
        .bind(route_id)
        .bind(resolution_ms)
        .fetch_one(&self.pool)
        .await?)
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
             FROM route_rollups WHERE route_id = ? AND resolution_ms = ?
               AND bucket_ms > ? AND bucket_ms <= ? ORDER BY bucket_ms",
        )
        .bind(route_id)
        .bind(resolution_ms)
        .bind(from_ms - resolution_ms)
        .bind(to_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| StoredInterval {
                route_id: r.route_id,
                at_ms: r.bucket_ms,
                interval: Interval {
                    interval_ms: r.interval_ms,
                    exchanges: r.exchanges,
                    failed: r.failed,
                    duration_sum_s: r.duration_sum_s,
                    duration_count: r.duration_count,
                    buckets: parse_buckets(r.buckets.as_deref()),
                    max_s: r.max_s,
                    inflight: r
                        .inflight_sum
                        .filter(|_| r.inflight_n > 0)
                        .map(|s| s / r.inflight_n as f64),
                    resets: 0,
                },
            })
            .collect())
    }

    /// Figures per route over the window ending at `now_ms`: all routes, or those of
    /// `target_id`. See [`SqliteStore::figures_of`].
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
    /// Reads only the window (one indexed range of `route_samples`), then the last
    /// interval of the routes the window lacked: the cost follows the routes and the
    /// window, never the stored history.
    pub async fn figures_of(
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
            let lookback = (2 * window_ms.max(longest)).max(10 * MINUTE_MS);
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
            let mut q = QueryBuilder::<Sqlite>::new(
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
        let rows: Vec<(i64, i64, &(String, String, f64))> = figures
            .iter()
            .flat_map(|f| {
                levels.iter().map(move |res| {
                    let bucket = if *res == 0 {
                        at_ms
                    } else {
                        at_ms - at_ms.rem_euclid(*res)
                    };
                    (*res, bucket, f)
                })
            })
            .collect();
        for chunk in rows.chunks(BATCH_ROWS) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT INTO process_series (target_id, instance, metric, resolution_ms, \
                 bucket_ms, sum, n, max) ",
            );
            q.push_values(chunk, |mut b, (res, bucket, (instance, metric, v))| {
                b.push_bind(target_id)
                    .push_bind(instance)
                    .push_bind(metric)
                    .push_bind(*res)
                    .push_bind(*bucket)
                    .push_bind(*v)
                    .push_bind(1_i64)
                    .push_bind(*v);
            });
            q.push(
                " ON CONFLICT (target_id, instance, metric, resolution_ms, bucket_ms) DO UPDATE \
                 SET sum = process_series.sum + excluded.sum, n = process_series.n + excluded.n, \
                 max = MAX(process_series.max, excluded.max)",
            );
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
        let mut q = QueryBuilder::<Sqlite>::new(
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
    /// `from_ms ≤ bucket_ms ≤ to_ms`, by instance, metric and time; `mean` = sum / n.
    pub async fn process_series(
        &self,
        target_ids: &[i64],
        resolution_ms: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<ProcessPoint>> {
        if target_ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = QueryBuilder::<Sqlite>::new(
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
        q.push(") ORDER BY instance, metric, bucket_ms");
        Ok(q.build_query_as().fetch_all(&self.pool).await?)
    }

    /// [`SqliteStore::route_window_figures`] from SQLite: the sums come from one aggregate query
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
        let mut q = QueryBuilder::<Sqlite>::new("SELECT route_id, CASE");
        for (j, w) in windows.iter().enumerate() {
            q.push(" WHEN at_ms > ")
                .push_bind(now_ms - w)
                .push(" THEN ")
                .push(j.to_string());
        }
        q.push(
            " END AS seg, SUM(interval_ms), SUM(exchanges), SUM(failed), SUM(duration_sum_s), \
             SUM(duration_count), MAX(max_s), COUNT(*)",
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
        let lookback = longest.max(super::recent::LAST_LOOKBACK_MS);
        if out
            .values()
            .any(|figs| figs.iter().any(|f| f.intervals == 0))
        {
            let last: Vec<IntervalDb> = sqlx::query_as(
                "SELECT route_id, MAX(at_ms) AS at_ms, interval_ms, exchanges, failed,
                        duration_sum_s, duration_count, max_s, inflight, buckets
                 FROM route_samples WHERE at_ms > ? AND at_ms <= ? GROUP BY route_id",
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
            let rows: Vec<(i64, i64, Option<f64>, Option<String>)> = sqlx::query_as(
                "SELECT route_id, at_ms, inflight, CASE WHEN ? THEN buckets END
                 FROM route_samples WHERE at_ms > ? AND at_ms <= ? ORDER BY route_id, at_ms",
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
                if n.buckets {
                    merge_buckets(&mut figs[i].buckets, &parse_buckets(buckets.as_deref()));
                }
            }
        }
        Ok(windows_of(&infos, out))
    }

    /// Runs whose [start, end] overlaps `from_ms…to_ms`, oldest first.
    pub async fn runs_overlapping(&self, from_ms: i64, to_ms: i64) -> Result<Vec<RunBand>> {
        let mut rows: Vec<RunBand> = sqlx::query_as(
            "SELECT id, name, started_at_ms, ended_at_ms FROM runs
             WHERE started_at_ms IS NOT NULL AND ended_at_ms IS NOT NULL
               AND started_at_ms <= ? AND ended_at_ms >= ?
             ORDER BY started_at_ms LIMIT 200",
        )
        .bind(to_ms)
        .bind(from_ms)
        .fetch_all(&self.pool)
        .await?;
        for r in &mut rows {
            r.url = format!("/console/runs/{}", r.id);
        }
        Ok(rows)
    }
}
