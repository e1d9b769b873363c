//! Route monitoring: `targets`, `routes`, `route_samples` (one row per route per scrape)
//! and `route_rollups` (1 min, 10 min and 1 h sums), plus the runs that overlap a time range.
//!
//! A scrape is written in one transaction: the target's status, the routes it found
//! (multi-row upsert), their interval rows (multi-row insert) and the rollup rows those
//! intervals fall in (read, merged, replaced). Retention is [`SqliteStore::prune_routes`].

use super::recent::{RouteSubject, RouteWindows, subject_labels};
use super::route_buckets;
use crate::domain::routes::{Figures, Interval, merge_buckets};
use crate::domain::secrets::{Credentials, Secret};
use serde::Serialize;
use sqlx::FromRow;
use std::collections::{BTreeMap, HashMap};

/// Rows per multi-row statement (≤ 12 bound values each, well under SQLite's limit).
pub(crate) const BATCH_ROWS: usize = 500;

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
    url: Secret<Credentials>,
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
    /// `api`, `config` or [`BUILTIN_ORIGIN`].
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
pub(crate) struct TargetDb {
    pub(crate) id: i64,
    pub(crate) name: String,
    pub(crate) url: String,
    pub(crate) kind: String,
    pub(crate) interval_s: f64,
    pub(crate) timeout_s: f64,
    pub(crate) labels: String,
    pub(crate) origin: String,
    pub(crate) created_at_ms: i64,
    pub(crate) up: Option<bool>,
    pub(crate) last_scrape_ms: Option<i64>,
    pub(crate) last_duration_ms: Option<f64>,
    pub(crate) last_samples: Option<i64>,
    pub(crate) last_error: Option<String>,
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

/// The origin of harrier's own scrape target (its `/metrics`, the self-scrape).
pub const BUILTIN_ORIGIN: &str = "builtin";

/// The kind of a target that pushes its metrics (OTLP) instead of being scraped: created at
/// its first push, never given a scrape loop.
pub const OTLP_KIND: &str = "otlp";

impl TargetRow {
    /// Whether this is harrier's own scrape target: its routes are harrier's own, hidden
    /// by default, and it alone may reach harrier's own address.
    pub fn is_builtin(&self) -> bool {
        self.origin == BUILTIN_ORIGIN
    }
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

pub(crate) const TARGET_COLUMNS: &str = "id, name, url, kind, interval_s, timeout_s, labels, origin, \
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
    /// Labels beside the service that are part of the route's identity (`camel_context`, …;
    /// see [`crate::domain::routes::ROUTE_LABELS`]).
    pub labels: BTreeMap<String, String>,
    pub source: String,
    pub state: Option<String>,
    /// The source's own last-exchange time.
    pub last_exchange_ms: Option<i64>,
    pub interval: Option<Interval>,
    /// The instance its series name; `""`: the target's own.
    pub instance: String,
}

impl RouteWrite {
    /// `labels` as stored: a JSON object with sorted keys (`{}` when none), so equal
    /// labels are equal text.
    pub fn labels_json(&self) -> String {
        serde_json::to_string(&self.labels).unwrap_or_else(|_| "{}".into())
    }

    /// The last exchange a scrape at `at_ms` records for this route: the scrape's time when
    /// the interval saw exchanges, else (or when later) the source's own last-exchange time.
    pub fn exchange_ms(&self, at_ms: i64) -> Option<i64> {
        let rose = self
            .interval
            .as_ref()
            .and_then(|iv| iv.exchanges)
            .is_some_and(|n| n > 0.0);
        match (rose.then_some(at_ms), self.last_exchange_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
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
    /// Its labels beside the service, a JSON object (`{}`: none).
    pub route_labels: String,
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
            &self.route_labels,
        )
    }

    /// Its labels beside the service (`camel_context`, …).
    pub fn labels(&self) -> BTreeMap<String, String> {
        super::recent::parse_route_labels(&self.route_labels)
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

/// How far back `figures_of` looks for the last interval of a route with none in a window
/// of `window_ms`, when the longest target interval of such routes is `interval_ms`: twice
/// the longer of the two, at least 10 minutes (as the alert evaluator reads).
pub(crate) fn rows_lookback(window_ms: i64, interval_ms: i64) -> i64 {
    (2 * window_ms.max(interval_ms)).max(super::recent::LAST_LOOKBACK_MS)
}

/// Which routes' raw intervals [`Store::intervals_in`](super::Store::intervals_in) reads.
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
    /// Its console page; set by the reader that shows it.
    #[sqlx(skip)]
    pub url: String,
    /// Whether it hit the route's service (see [`crate::domain::routes::run_hits`]); set
    /// by the reader that knows the route.
    #[sqlx(skip)]
    pub hit: Option<crate::domain::routes::run_hits::Hit>,
    /// Its `service` tag.
    #[serde(skip)]
    pub service_tag: Option<String>,
    #[serde(skip)]
    pub source: Option<String>,
    /// The figures its tool reported (JSON), for the address it loaded.
    #[serde(skip)]
    pub reported: String,
}

impl RunBand {
    /// What the run says it hit.
    pub fn aim(&self) -> crate::domain::routes::run_hits::RunAim<'_> {
        crate::domain::routes::run_hits::RunAim {
            service_tag: self.service_tag.as_deref(),
            source: self.source.as_deref(),
            reported: &self.reported,
        }
    }
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

pub(crate) fn default_raw_hours() -> f64 {
    48.0
}
pub(crate) fn default_minute_days() -> f64 {
    30.0
}
pub(crate) fn default_ten_minute_days() -> f64 {
    90.0
}
pub(crate) fn default_hour_days() -> f64 {
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

/// What the alert evaluator needs over one window (see [`Store::route_window_figures`](super::Store::route_window_figures)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowNeed {
    pub window_ms: i64,
    /// Histogram buckets (for percentiles).
    pub buckets: bool,
    /// The latest inflight reading.
    pub inflight: bool,
}

pub(crate) fn windows_of(infos: &[RouteInfo], figures: HashMap<i64, Vec<Figures>>) -> RouteWindows {
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
                &i.route_labels,
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
pub(crate) struct IntervalDb {
    pub(crate) route_id: i64,
    pub(crate) at_ms: i64,
    pub(crate) interval_ms: i64,
    pub(crate) exchanges: Option<f64>,
    pub(crate) failed: Option<f64>,
    pub(crate) duration_sum_s: Option<f64>,
    pub(crate) duration_count: Option<f64>,
    pub(crate) max_s: Option<f64>,
    pub(crate) inflight: Option<f64>,
    /// The compact form (`route_buckets`) or, in older rows, JSON text.
    pub(crate) buckets: Option<Vec<u8>>,
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
                buckets: route_buckets::decode(r.buckets.as_deref()),
                max_s: r.max_s,
                inflight: r.inflight,
                resets: 0,
            },
        }
    }
}

/// A rollup bucket as an interval: `at_ms` is the bucket's start, inflight the mean of
/// its readings.
impl From<RollupDb> for StoredInterval {
    fn from(r: RollupDb) -> Self {
        IntervalDb {
            route_id: r.route_id,
            at_ms: r.bucket_ms,
            interval_ms: r.interval_ms,
            exchanges: r.exchanges,
            failed: r.failed,
            duration_sum_s: r.duration_sum_s,
            duration_count: r.duration_count,
            max_s: r.max_s,
            inflight: r
                .inflight_sum
                .filter(|_| r.inflight_n > 0)
                .map(|s| s / r.inflight_n as f64),
            buckets: r.buckets,
        }
        .into()
    }
}

#[derive(FromRow, Debug, Clone)]
pub(crate) struct RollupDb {
    pub(crate) route_id: i64,
    pub(crate) bucket_ms: i64,
    pub(crate) interval_ms: i64,
    pub(crate) intervals: i64,
    pub(crate) exchanges: Option<f64>,
    pub(crate) failed: Option<f64>,
    pub(crate) duration_sum_s: Option<f64>,
    pub(crate) duration_count: Option<f64>,
    pub(crate) max_s: Option<f64>,
    pub(crate) inflight_sum: Option<f64>,
    pub(crate) inflight_n: i64,
    /// The compact form (`route_buckets`) or, in older rows, JSON text.
    pub(crate) buckets: Option<Vec<u8>>,
}

pub(crate) fn add_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, None) => x,
        (None, y) => y,
    }
}

impl RollupDb {
    pub(crate) fn add(&mut self, iv: &Interval) {
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
            let mut b = route_buckets::decode(self.buckets.as_deref());
            merge_buckets(&mut b, &iv.buckets);
            self.buckets = route_buckets::encode(&b);
        }
    }
}

// This group's operations on [`Store`], each answered by the backend the store was
// opened on (`forward!`).
forward! {
    /// Adds a target; `None` when a target of that name exists.
    pub async fn insert_target(
        &self,
        spec: &TargetSpec,
        origin: &str,
        now_ms: i64,
    ) -> Result<Option<TargetRow>>;

    /// Adds or replaces (by name) a target from the configuration or the built-in one; its
    /// id, status and routes stay when it exists.
    pub async fn upsert_target(
        &self,
        spec: &TargetSpec,
        origin: &str,
        now_ms: i64,
    ) -> Result<TargetRow>;

    /// Every target, by name.
    pub async fn list_targets(&self) -> Result<Vec<TargetRow>>;

    pub async fn get_target(&self, id: i64) -> Result<Option<TargetRow>>;

    /// Deletes a target with its routes and their figures; false when there was none.
    pub async fn delete_target(&self, id: i64) -> Result<bool>;

    /// Deletes targets of `origin` whose names are not in `keep` (a config file's targets
    /// that were removed from it). Returns the ids deleted.
    pub async fn delete_targets_not_in(&self, origin: &str, keep: &[String]) -> Result<Vec<i64>>;

    /// Marks down, with `error`, the targets of `kind` that are up but last reported more
    /// than `missed` of their intervals before `now_ms` (pushing instances that stopped
    /// pushing); their last report time stays. Returns their ids.
    pub async fn mark_quiet_targets_down(
        &self,
        kind: &str,
        now_ms: i64,
        missed: f64,
        error: &str,
    ) -> Result<Vec<i64>>;

    /// Writes one scrape: the target's status, the routes found and their intervals, and
    /// the 1 min / 1 h rollups, in one transaction. Returns the route ids, in `routes` order.
    pub async fn record_scrape(
        &self,
        target_id: i64,
        status: &ScrapeStatus,
        routes: &[RouteWrite],
    ) -> Result<Vec<i64>>;

    /// Deletes figures past their retention. Returns the rows deleted.
    pub async fn prune_routes(&self, now_ms: i64, retention: &Retention) -> Result<u64>;

    /// Routes with their targets, by service, route, target, instance,
    /// source and id; all of them, or those of `target_id`, or the one `route_id`.
    /// On SQLite answered from memory while the recent intervals are held (see
    /// [`Store::figures_of`]), else read.
    pub async fn route_infos(
        &self,
        target_id: Option<i64>,
        route_id: Option<i64>,
    ) -> Result<Vec<RouteInfo>>;

    /// [`Store::route_infos`] read from the database, whatever memory holds (the two are
    /// tested against each other).
    pub async fn route_infos_sql(
        &self,
        target_id: Option<i64>,
        route_id: Option<i64>,
    ) -> Result<Vec<RouteInfo>>;

    /// Raw intervals with `from_ms < at_ms ≤ to_ms`, by route then time; one route or all.
    pub async fn route_intervals(
        &self,
        route_id: Option<i64>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredInterval>>;

    /// The start of route `route_id`'s first rollup bucket at `resolution_ms`, if any.
    pub async fn first_rollup_ms(&self, route_id: i64, resolution_ms: i64) -> Result<Option<i64>>;

    /// Exchanges and summed interval length (ms) of the rollups of `ids` at `resolution_ms`
    /// with `from_ms < bucket_ms ≤ to_ms`: `(route_id, bucket_ms, interval_ms, exchanges)`,
    /// by route then time; no histogram buckets read (the routes page's sparklines).
    pub async fn rollup_counts(
        &self,
        ids: &[i64],
        resolution_ms: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<(i64, i64, i64, Option<f64>)>>;

    /// Rollup rows of one route at `resolution_ms` whose buckets overlap `from_ms…to_ms`;
    /// `at_ms` is the bucket start, inflight the mean of the readings.
    pub async fn route_rollups(
        &self,
        route_id: i64,
        resolution_ms: i64,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredInterval>>;

    /// Figures per route over the window ending at `now_ms`: all routes, or those of
    /// `target_id`. See [`Store::figures_of`].
    pub async fn route_figures(
        &self,
        target_id: Option<i64>,
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<(RouteInfo, Figures)>>;

    /// Figures of `infos` over the window ending at `now_ms`: the raw intervals whose
    /// scrape falls in the window. A route with none there (its scrapes are further apart
    /// than the window) is given its last interval when that ended less than twice the
    /// longer of the window and the interval ago, so a 1 min window over 2 min scrapes is
    /// not empty. `scope` must cover `infos` (it bounds the window read).
    ///
    /// On SQLite, answered from the recent intervals held in memory when they cover the
    /// window (the store is written, not re-read, after each scrape). Otherwise — and always
    /// on PostgreSQL, which other replicas write — it reads only the window (one indexed
    /// range of `route_samples`), then the last interval of the routes the window lacked:
    /// the cost follows the routes and the window, never the stored history.
    pub async fn figures_of(
        &self,
        infos: Vec<RouteInfo>,
        scope: IntervalScope<'_>,
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<(RouteInfo, Figures)>>;

    /// [`Store::figures_of`] read from the database, whatever the memory of a SQLite store
    /// holds (the two are tested against each other).
    pub async fn figures_of_sql(
        &self,
        infos: Vec<RouteInfo>,
        scope: IntervalScope<'_>,
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Vec<(RouteInfo, Figures)>>;

    /// Raw intervals with `from_ms < at_ms ≤ to_ms` of the routes in `scope`, by route then
    /// time.
    pub async fn intervals_in(
        &self,
        scope: IntervalScope<'_>,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<StoredInterval>>;

    /// Writes one scrape's process figures `(instance, metric, value)` of target
    /// `target_id` at `at_ms`: the scrape row and the 1 min / 10 min / 1 h buckets (sum,
    /// count, max), in one transaction with multi-row upserts.
    pub async fn record_process(
        &self,
        target_id: i64,
        at_ms: i64,
        figures: &[(String, String, f64)],
    ) -> Result<()>;

    /// The latest process figures of targets `target_ids`: `(target_id, instance, metric,
    /// value, at_ms)`, one per instance and metric (the last scrape that had it).
    pub async fn process_latest(&self, target_ids: &[i64]) -> Result<Vec<ProcessPoint>>;

    /// Process figures of targets `target_ids` at `resolution_ms` (0: per scrape) with
    /// `from_ms ≤ bucket_ms ≤ to_ms`, by instance, metric and time; `mean` = sum / n. With
    /// `metric_prefix`, only the metrics whose name starts with it (`pool_`: the pools).
    pub async fn process_series(
        &self,
        target_ids: &[i64],
        resolution_ms: i64,
        from_ms: i64,
        to_ms: i64,
        metric_prefix: Option<&str>,
    ) -> Result<Vec<ProcessPoint>>;

    /// [`Store::route_window_figures`] from the database: the sums come from one aggregate query
    /// over the longest window (no per-route query, no bucket parsing unless
    /// `need.buckets`), the latest inflight reading and the histogram buckets only for the
    /// windows that ask for them.
    pub async fn route_window_figures_sql(
        &self,
        needs: &[WindowNeed],
        now_ms: i64,
    ) -> Result<RouteWindows>;

    /// Runs whose [start, end] overlaps `from_ms…to_ms`, oldest first.
    pub async fn runs_overlapping(&self, from_ms: i64, to_ms: i64) -> Result<Vec<RunBand>>;

    /// The group each route is in (Camel's `routeGroup`), for the routes that have one.
    pub async fn route_groups(&self) -> Result<Vec<(i64, String)>>;

    /// Sets routes' groups (`None`: none); a route whose group is unchanged is not written.
    pub async fn set_route_groups(&self, groups: &[(i64, Option<String>)]) -> Result<()>;
}
