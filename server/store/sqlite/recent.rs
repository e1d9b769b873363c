//! The last minutes of every route's raw intervals, held in memory, as Prometheus holds its
//! head block: the alert evaluator's rounds and the route rows (the live feed, the routes
//! table and its API, Overview) sum each route's window from memory instead of reading
//! `route_samples` back (at 10,000 routes that scan was most of an evaluator round,
//! `bench/alerts_eval.sh`; at 1,000 routes scraped every second, re-reading the last
//! minute for the route rows cost more than the scrapes themselves).
//!
//! [`SqliteStore::record_scrape`] feeds it after each commit: the store is written, not
//! re-read, on the hot path. It is loaded from SQLite on first use (after a restart: once)
//! and again whenever it cannot answer exactly: a window longer than it holds, buckets asked
//! while it keeps none, a target added, changed or deleted. It answers only when its answer
//! equals the SQL one ([`SqliteStore::route_window_figures_sql`] and the SQL path of
//! `figures_of`, tested against each other); otherwise SQLite answers. What it keeps
//! follows what was asked in the last [`KEEP_ASKED_MS`]: the longest window asked plus
//! [`SLACK_MS`], histogram buckets only when a percentile was asked; nothing once nobody
//! asked for that long. Windows longer than [`MAX_WINDOW_MS`] are always read from
//! SQLite, to bound memory. An interval takes ~80 bytes, ~136 with 11 histogram buckets in
//! their compact form (`route_buckets`; an idle route's interval holds none): 1,000 routes
//! scraped every second under the 1-minute window of the route rows hold ~74 intervals
//! each, ~10 MB (`harrier_alert_recent_bytes`, `bench/route_pages.sh`); 10,000 routes
//! scraped every 15 s under 5-minute windows, ~22 intervals each, ~18 MB, ~30 MB with
//! buckets.
//!
//! Route data must be written through this process's [`SqliteStore`] (as `harrier serve` does):
//! another process writing the same file is not seen until the next reload.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use sqlx::{FromRow, QueryBuilder, Sqlite};

use super::SqliteStore;
use crate::domain::routes::{Figures, Interval};
use crate::store::recent::*;
use crate::store::route_buckets;
use crate::store::routes::{RouteInfo, RouteWrite, WindowNeed, rows_lookback, url_instance};
use crate::store::{MINUTE_MS, Result};

/// Intervals are held this long past the longest window. A later round's windows start
/// later, so none is needed for them; this covers a round whose time steps back a little.
const SLACK_MS: i64 = 30_000;

/// What was asked in this long decides what is held; when nothing was, nothing is.
pub const KEEP_ASKED_MS: i64 = 15 * MINUTE_MS;

/// One held interval, as SQLite would give it back (NaN = NULL).
#[derive(Debug, Clone)]
struct Held {
    at_ms: i64,
    interval_ms: i64,
    /// exchanges, failed, duration_sum_s, duration_count, max_s, inflight.
    v: [f64; 6],
    /// As stored: the compact form (`route_buckets`).
    buckets: Option<Box<[u8]>>,
}

fn opt(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

impl Held {
    /// `iv` as written: SQLite stores NaN as NULL; `max_s` and `inflight` are written only
    /// when finite; buckets in their stored form (`route_buckets::encode`).
    fn written(at_ms: i64, iv: &Interval, keep_buckets: bool) -> Held {
        let nan = |v: Option<f64>| v.unwrap_or(f64::NAN);
        let finite = |v: Option<f64>| v.filter(|x| x.is_finite()).unwrap_or(f64::NAN);
        let buckets = keep_buckets
            .then(|| route_buckets::encode(&iv.buckets))
            .flatten()
            .map(Vec::into_boxed_slice);
        Held {
            at_ms,
            interval_ms: iv.interval_ms,
            v: [
                nan(iv.exchanges),
                nan(iv.failed),
                nan(iv.duration_sum_s),
                nan(iv.duration_count),
                finite(iv.max_s),
                finite(iv.inflight),
            ],
            buckets,
        }
    }

    fn sums(&self) -> Interval {
        Interval {
            interval_ms: self.interval_ms,
            exchanges: opt(self.v[0]),
            failed: opt(self.v[1]),
            duration_sum_s: opt(self.v[2]),
            duration_count: opt(self.v[3]),
            buckets: Vec::new(),
            max_s: opt(self.v[4]),
            inflight: opt(self.v[5]),
            resets: 0,
        }
    }

    /// Adds this interval to `f`; its buckets through `adder`, which adds a window's
    /// intervals in a row.
    fn add_to<'h>(&'h self, f: &mut Figures, buckets: bool, adder: &mut route_buckets::Adder<'h>) {
        f.add_sums(&self.sums());
        if buckets && let Some(b) = &self.buckets {
            adder.add(&mut f.buckets, b);
        }
    }
}

#[derive(Debug)]
struct TargetMeta {
    name: String,
    url: String,
    /// Its labels, a JSON object as stored.
    labels: String,
    /// Its `instance` label, else its URL's host:port.
    instance: String,
    up: Option<bool>,
    last_scrape_ms: Option<i64>,
    interval_s: f64,
}

#[derive(Debug)]
struct RouteHeld {
    subject: RouteSubject,
    /// The `instance` column (`""`: the target's), for the order.
    own_instance: String,
    /// The `routes` columns a scrape writes, as stored.
    first_seen_ms: i64,
    last_seen_ms: i64,
    last_exchange_ms: Option<i64>,
    state: Option<String>,
    /// The `labels` column.
    labels_json: String,
    /// By time; no two at the same time (a rewrite replaces, as `INSERT OR REPLACE`).
    intervals: VecDeque<Held>,
}

impl RouteHeld {
    fn insert(&mut self, h: Held) {
        match self.intervals.back() {
            Some(b) if b.at_ms < h.at_ms => self.intervals.push_back(h),
            None => self.intervals.push_back(h),
            Some(_) => {
                let i = self.intervals.partition_point(|x| x.at_ms < h.at_ms);
                if self.intervals.get(i).is_some_and(|x| x.at_ms == h.at_ms) {
                    self.intervals[i] = h;
                } else {
                    self.intervals.insert(i, h);
                }
            }
        }
    }
}

#[derive(Debug)]
struct Data {
    /// Every interval later than this is held.
    complete_after_ms: i64,
    /// Each route's newest interval is held when it is later than this.
    newest_after_ms: i64,
    /// The latest interval time seen.
    newest_seen_ms: i64,
    /// Whether histogram buckets are held.
    buckets: bool,
    targets: HashMap<i64, TargetMeta>,
    routes: HashMap<i64, RouteHeld>,
    /// `routes`' subjects in order; `None` after a route was added.
    order: Option<Arc<Vec<RouteSubject>>>,
}

/// One route of a scrape, borrowed or owned.
struct PushRoute<'a> {
    id: i64,
    write: std::borrow::Cow<'a, RouteWrite>,
}

/// A scrape that committed while the memory was being loaded.
struct Push {
    target_id: i64,
    up: bool,
    at_ms: i64,
    routes: Vec<PushRoute<'static>>,
}

impl Data {
    /// Applies one committed scrape; false when it names a target not held (reload).
    fn apply(&mut self, target_id: i64, up: bool, at_ms: i64, routes: &[PushRoute<'_>]) -> bool {
        let Some(target) = self.targets.get_mut(&target_id) else {
            return false;
        };
        target.up = Some(up);
        target.last_scrape_ms = Some(at_ms);
        for r in routes.iter().filter(|r| r.id != 0) {
            let w = &*r.write;
            let held = self.routes.entry(r.id).or_insert_with(|| {
                self.order = None;
                let instance = if w.instance.is_empty() {
                    target.instance.clone()
                } else {
                    w.instance.clone()
                };
                RouteHeld {
                    subject: RouteSubject {
                        id: r.id,
                        target_id,
                        labels: Arc::new(subject_labels(
                            &w.service,
                            &instance,
                            &w.route,
                            &target.name,
                            &w.source,
                            &w.labels_json(),
                        )),
                        service: w.service.clone(),
                        route: w.route.clone(),
                        source: w.source.clone(),
                        instance,
                        target_name: target.name.clone(),
                    },
                    own_instance: w.instance.clone(),
                    first_seen_ms: at_ms,
                    last_seen_ms: at_ms,
                    last_exchange_ms: None,
                    state: None,
                    labels_json: w.labels_json(),
                    intervals: VecDeque::new(),
                }
            });
            // As `record_scrape`'s upsert leaves the row (a route twice in one scrape: the
            // last one's state, the latest exchange either saw).
            held.last_seen_ms = at_ms;
            held.state = w.state.clone();
            held.last_exchange_ms = w.exchange_ms(at_ms).or(held.last_exchange_ms);
            if let Some(iv) = &w.interval {
                held.insert(Held::written(at_ms, iv, self.buckets));
                self.newest_seen_ms = self.newest_seen_ms.max(at_ms);
            }
        }
        true
    }

    /// The routes with their targets as `route_infos` reads them from SQLite: all, those of
    /// `target_id`, or the one `route_id` (`None` when this memory does not know it).
    fn infos(&mut self, target_id: Option<i64>, route_id: Option<i64>) -> Option<Vec<RouteInfo>> {
        fn info(
            routes: &HashMap<i64, RouteHeld>,
            targets: &HashMap<i64, TargetMeta>,
            id: i64,
        ) -> Option<RouteInfo> {
            let h = routes.get(&id)?;
            let t = targets.get(&h.subject.target_id)?;
            Some(RouteInfo {
                id,
                target_id: h.subject.target_id,
                service: h.subject.service.clone(),
                route: h.subject.route.clone(),
                source: h.subject.source.clone(),
                first_seen_ms: h.first_seen_ms,
                last_seen_ms: h.last_seen_ms,
                last_exchange_ms: h.last_exchange_ms,
                state: h.state.clone(),
                target_name: t.name.clone(),
                target_url: t.url.clone(),
                target_labels: t.labels.clone(),
                target_up: t.up,
                target_last_scrape_ms: t.last_scrape_ms,
                target_interval_s: t.interval_s,
                route_instance: h.own_instance.clone(),
                route_labels: h.labels_json.clone(),
            })
        }
        if let Some(id) = route_id {
            return match info(&self.routes, &self.targets, id) {
                Some(i) if target_id.is_none_or(|t| t == i.target_id) => Some(vec![i]),
                Some(_) => Some(Vec::new()),
                None => None,
            };
        }
        let order = self.order();
        Some(
            order
                .iter()
                .filter(|s| target_id.is_none_or(|t| t == s.target_id))
                .filter_map(|s| info(&self.routes, &self.targets, s.id))
                .collect(),
        )
    }

    fn order(&mut self) -> Arc<Vec<RouteSubject>> {
        if let Some(o) = &self.order {
            return o.clone();
        }
        let mut held: Vec<&RouteHeld> = self.routes.values().collect();
        // As `SqliteStore::route_infos` orders them.
        held.sort_by_key(|h| {
            (
                &h.subject.service,
                &h.subject.route,
                &h.subject.target_name,
                &h.own_instance,
                &h.subject.source,
                h.subject.id,
            )
        });
        let o = Arc::new(held.into_iter().map(|h| h.subject.clone()).collect());
        self.order = Some(Arc::clone(&o));
        o
    }

    /// Drops what no window needs any more (keeping each route's newest interval).
    fn trim(&mut self, before_ms: i64, buckets: bool) {
        if before_ms > self.complete_after_ms {
            for r in self.routes.values_mut() {
                while r.intervals.len() > 1 && r.intervals[0].at_ms <= before_ms {
                    r.intervals.pop_front();
                }
            }
            self.complete_after_ms = before_ms;
        }
        if self.buckets && !buckets {
            for h in self
                .routes
                .values_mut()
                .flat_map(|r| r.intervals.iter_mut())
            {
                h.buckets = None;
            }
            self.buckets = false;
        }
    }

    /// The alert evaluator's answer, when this memory gives exactly what SQLite would.
    /// `keep`: what to go on holding.
    fn answer(&mut self, needs: &[WindowNeed], now_ms: i64, keep: Keep) -> Plan<RouteWindows> {
        let longest = needs.iter().map(|n| n.window_ms).max().unwrap_or(0);
        let lookback = longest.max(LAST_LOOKBACK_MS);
        let buckets = needs.iter().any(|n| n.buckets);
        if now_ms < self.newest_seen_ms {
            // An evaluation time before the newest data (a clock step back): the memory
            // cannot tell what SQLite would (later intervals are not in its windows), but
            // it is still trimmed.
            self.trim(
                now_ms - keep.longest_ms - SLACK_MS,
                keep.buckets || self.buckets,
            );
            return Plan::Sql;
        }
        if (buckets && !self.buckets)
            || self.complete_after_ms > now_ms - longest
            || self.newest_after_ms > now_ms - lookback
        {
            return Plan::Load;
        }
        self.trim(now_ms - keep.longest_ms - SLACK_MS, keep.buckets);
        let routes = self.order();
        let target_up = routes
            .iter()
            .map(|s| self.targets.get(&s.target_id).and_then(|t| t.up))
            .collect();
        // Route by route (each route's intervals are read once for all windows).
        let mut figures: Vec<Vec<Figures>> = needs
            .iter()
            .map(|_| Vec::with_capacity(routes.len()))
            .collect();
        for s in routes.iter() {
            let ivs = &self.routes[&s.id].intervals;
            for (n, figs) in needs.iter().zip(&mut figures) {
                let mut f = Figures::default();
                let start = ivs.partition_point(|h| h.at_ms <= now_ms - n.window_ms);
                let mut adder = route_buckets::Adder::default();
                for h in ivs.range(start..) {
                    h.add_to(&mut f, n.buckets, &mut adder);
                }
                if !n.inflight {
                    f.inflight = None;
                }
                // As the SQL path: a route without an interval in the window takes its
                // last one when that is recent enough.
                if f.intervals == 0
                    && let Some(h) = ivs.back()
                    && h.at_ms > now_ms - lookback
                    && h.at_ms > now_ms - h.interval_ms.max(n.window_ms) * 2
                {
                    h.add_to(&mut f, n.buckets, &mut adder);
                }
                figs.push(f);
            }
        }
        let figures = needs.iter().map(|n| n.window_ms).zip(figures).collect();
        Plan::Answer(RouteWindows {
            routes,
            target_up,
            figures,
            from_memory: true,
        })
    }

    /// The figures of `routes` (`(route id, its target's interval in ms)`) over the window
    /// ending at `now_ms`, with buckets and the latest inflight reading, when this memory
    /// gives exactly what the SQL path of `figures_of` would (the same rule for a route
    /// with no interval in the window: its last one, looked back as far as that path
    /// does). `keep`: what to go on holding.
    fn rows(
        &mut self,
        routes: &[(i64, i64)],
        window_ms: i64,
        now_ms: i64,
        keep: Keep,
    ) -> Plan<Vec<Figures>> {
        if now_ms < self.newest_seen_ms {
            self.trim(
                now_ms - keep.longest_ms - SLACK_MS,
                keep.buckets || self.buckets,
            );
            return Plan::Sql;
        }
        if !self.buckets || self.complete_after_ms > now_ms - window_ms {
            return Plan::Load;
        }
        self.trim(now_ms - keep.longest_ms - SLACK_MS, keep.buckets);
        let mut figures = Vec::with_capacity(routes.len());
        let mut missing = Vec::new();
        for (i, (id, _)) in routes.iter().enumerate() {
            let Some(held) = self.routes.get(id) else {
                // A route this memory has not seen (written elsewhere): read again.
                return Plan::Load;
            };
            let ivs = &held.intervals;
            let mut f = Figures::default();
            let start = ivs.partition_point(|h| h.at_ms <= now_ms - window_ms);
            let mut adder = route_buckets::Adder::default();
            for h in ivs.range(start..) {
                h.add_to(&mut f, true, &mut adder);
            }
            if f.intervals == 0 {
                missing.push(i);
            }
            figures.push(f);
        }
        if !missing.is_empty() {
            let longest = missing.iter().map(|&i| routes[i].1).max().unwrap_or(0);
            let lookback = rows_lookback(window_ms, longest);
            if self.newest_after_ms > now_ms - lookback {
                return Plan::Load;
            }
            for i in missing {
                if let Some(h) = self.routes[&routes[i].0].intervals.back()
                    && h.at_ms > now_ms - lookback
                    && h.at_ms > now_ms - h.interval_ms.max(window_ms) * 2
                {
                    h.add_to(&mut figures[i], true, &mut route_buckets::Adder::default());
                }
            }
        }
        Plan::Answer(figures)
    }
}

#[derive(Default)]
enum State {
    #[default]
    Cold,
    /// Loading; the scrapes committed meanwhile, and whether the load is already stale.
    Loading {
        pushes: Vec<Push>,
        stale: bool,
    },
    Ready(Box<Data>),
}

enum Plan<T> {
    Answer(T),
    Load,
    Sql,
}

/// Who asked for figures: what each asks is kept apart, so the evaluator saying it has no
/// route rule does not drop what the route rows still read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Asker {
    Evaluator,
    Rows,
}

/// One window asked for, and when (the asker's "now").
#[derive(Debug, Clone, Copy)]
struct Ask {
    by: Asker,
    window_ms: i64,
    buckets: bool,
    at_ms: i64,
}

/// What the memory holds: the longest window asked lately, and whether with buckets.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Keep {
    longest_ms: i64,
    buckets: bool,
}

#[derive(Default)]
struct Inner {
    state: State,
    asks: Vec<Ask>,
}

impl Inner {
    /// Notes what `by` asks at `now_ms` and forgets asks older than [`KEEP_ASKED_MS`];
    /// what is to be held now (`None`: nothing was asked lately).
    fn ask(&mut self, by: Asker, windows: &[(i64, bool)], now_ms: i64) -> Option<Keep> {
        for &(window_ms, buckets) in windows {
            match self
                .asks
                .iter_mut()
                .find(|a| a.by == by && a.window_ms == window_ms && a.buckets == buckets)
            {
                Some(a) => a.at_ms = a.at_ms.max(now_ms),
                None => self.asks.push(Ask {
                    by,
                    window_ms,
                    buckets,
                    at_ms: now_ms,
                }),
            }
        }
        self.keep(now_ms)
    }

    fn keep(&mut self, now_ms: i64) -> Option<Keep> {
        self.asks.retain(|a| a.at_ms > now_ms - KEEP_ASKED_MS);
        let first = self.asks.first()?;
        Some(self.asks.iter().fold(
            Keep {
                longest_ms: first.window_ms,
                buckets: first.buckets,
            },
            |k, a| Keep {
                longest_ms: k.longest_ms.max(a.window_ms),
                buckets: k.buckets || a.buckets,
            },
        ))
    }
}

/// The in-memory recent intervals (see the module docs). Shared by every clone of a
/// [`SqliteStore`].
#[derive(Default)]
pub(crate) struct Recent(Mutex<Inner>);

impl std::fmt::Debug for Recent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recent")
    }
}

impl Recent {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A scrape was committed. When nothing was asked for [`KEEP_ASKED_MS`], what was held
    /// is dropped instead.
    pub(crate) fn record(
        &self,
        target_id: i64,
        up: bool,
        at_ms: i64,
        writes: &[RouteWrite],
        ids: &[i64],
    ) {
        let mut inner = self.inner();
        if matches!(inner.state, State::Ready(_)) && inner.keep(at_ms).is_none() {
            inner.state = State::Cold;
        }
        match &mut inner.state {
            State::Cold => {}
            State::Loading { pushes, .. } => pushes.push(Push {
                target_id,
                up,
                at_ms,
                routes: ids
                    .iter()
                    .zip(writes)
                    .map(|(id, w)| PushRoute {
                        id: *id,
                        write: std::borrow::Cow::Owned(w.clone()),
                    })
                    .collect(),
            }),
            State::Ready(data) => {
                let routes: Vec<PushRoute<'_>> = ids
                    .iter()
                    .zip(writes)
                    .map(|(id, w)| PushRoute {
                        id: *id,
                        write: std::borrow::Cow::Borrowed(w),
                    })
                    .collect();
                if !data.apply(target_id, up, at_ms, &routes) {
                    inner.state = State::Cold;
                }
            }
        }
    }

    /// Targets or routes changed other than by a scrape: reload before the next answer.
    pub(crate) fn invalidate(&self) {
        let mut inner = self.inner();
        match &mut inner.state {
            State::Loading { stale, .. } => *stale = true,
            s => *s = State::Cold,
        }
    }

    /// The evaluator has no route rule: its asks are forgotten, and what was held is
    /// dropped unless the route rows asked lately.
    fn evaluator_done(&self, now_ms: i64) {
        let mut inner = self.inner();
        inner.asks.retain(|a| a.by != Asker::Evaluator);
        if inner.keep(now_ms).is_none() {
            match &mut inner.state {
                State::Loading { stale, .. } => *stale = true,
                s => *s = State::Cold,
            }
        }
    }

    /// Intervals before `before_ms` were deleted.
    pub(crate) fn forget_before(&self, before_ms: i64) {
        let mut inner = self.inner();
        match &mut inner.state {
            State::Cold => {}
            State::Loading { stale, .. } => *stale = true,
            State::Ready(data) => {
                for r in data.routes.values_mut() {
                    while r.intervals.front().is_some_and(|h| h.at_ms < before_ms) {
                        r.intervals.pop_front();
                    }
                }
            }
        }
    }

    /// The routes with their targets, from memory when it is loaded (see [`Data::infos`]).
    fn infos(&self, target_id: Option<i64>, route_id: Option<i64>) -> Option<Vec<RouteInfo>> {
        match &mut self.inner().state {
            State::Ready(data) => data.infos(target_id, route_id),
            _ => None,
        }
    }

    /// What is held: routes, intervals, and their approximate size in bytes (`None`: not
    /// loaded).
    pub(crate) fn held(&self) -> Option<(usize, usize, usize)> {
        let inner = self.inner();
        let State::Ready(data) = &inner.state else {
            return None;
        };
        let intervals: usize = data.routes.values().map(|r| r.intervals.len()).sum();
        // Each held bucket set: its compact bytes and the allocator's ~16-byte header.
        let buckets: usize = data
            .routes
            .values()
            .flat_map(|r| r.intervals.iter())
            .map(|h| h.buckets.as_ref().map_or(0, |b| b.len() + 16))
            .sum();
        let bytes = intervals * std::mem::size_of::<Held>()
            + buckets
            + data.routes.len() * (std::mem::size_of::<RouteHeld>() + 128);
        Some((data.routes.len(), intervals, bytes))
    }

    /// Notes the ask, then answers from memory with `answer` when it can; `Load` puts the
    /// memory into loading (the caller loads with the returned [`Keep`]).
    fn plan<T>(
        &self,
        by: Asker,
        windows: &[(i64, bool)],
        now_ms: i64,
        answer: impl FnOnce(&mut Data, Keep) -> Plan<T>,
    ) -> (Plan<T>, Keep) {
        let mut inner = self.inner();
        let keep = inner.ask(by, windows, now_ms).expect("just asked");
        let plan = match &mut inner.state {
            State::Cold => Plan::Load,
            State::Loading { .. } => Plan::Sql,
            State::Ready(data) => answer(data, keep),
        };
        if let Plan::Load = plan {
            inner.state = State::Loading {
                pushes: Vec::new(),
                stale: false,
            }
        }
        (plan, keep)
    }

    /// Installs a load and answers from it with `answer` (`None`: the load went stale
    /// meanwhile or cannot answer; read SQLite).
    fn install<T>(
        &self,
        mut data: Data,
        keep: Keep,
        answer: impl FnOnce(&mut Data, Keep) -> Plan<T>,
    ) -> Option<T> {
        let mut inner = self.inner();
        let State::Loading { pushes, stale } = std::mem::take(&mut inner.state) else {
            return None;
        };
        if stale
            || !pushes
                .iter()
                .all(|p| data.apply(p.target_id, p.up, p.at_ms, &p.routes))
        {
            return None;
        }
        match answer(&mut data, keep) {
            Plan::Answer(w) => {
                inner.state = State::Ready(Box::new(data));
                Some(w)
            }
            Plan::Sql => {
                inner.state = State::Ready(Box::new(data));
                None
            }
            Plan::Load => None,
        }
    }

    fn abandon(&self) {
        let mut inner = self.inner();
        if let State::Loading { .. } = inner.state {
            inner.state = State::Cold;
        }
    }
}

/// Puts the memory back to cold when a load does not finish (error, cancelled round).
struct LoadGuard<'a>(&'a Recent, bool);

impl Drop for LoadGuard<'_> {
    fn drop(&mut self) {
        if !self.1 {
            self.0.abandon();
        }
    }
}

#[derive(FromRow)]
struct SubjectDb {
    id: i64,
    target_id: i64,
    service: String,
    route: String,
    source: String,
    instance: String,
    labels: String,
    first_seen_ms: i64,
    last_seen_ms: i64,
    last_exchange_ms: Option<i64>,
    state: Option<String>,
}

#[derive(FromRow)]
struct TargetDb {
    id: i64,
    name: String,
    url: String,
    labels: String,
    up: Option<bool>,
    last_scrape_ms: Option<i64>,
    interval_s: f64,
}

#[derive(FromRow)]
struct HeldDb {
    route_id: i64,
    at_ms: i64,
    interval_ms: i64,
    exchanges: Option<f64>,
    failed: Option<f64>,
    duration_sum_s: Option<f64>,
    duration_count: Option<f64>,
    max_s: Option<f64>,
    inflight: Option<f64>,
    buckets: Option<Vec<u8>>,
}

impl HeldDb {
    fn held(self) -> Held {
        let n = |v: Option<f64>| v.unwrap_or(f64::NAN);
        Held {
            at_ms: self.at_ms,
            interval_ms: self.interval_ms,
            v: [
                n(self.exchanges),
                n(self.failed),
                n(self.duration_sum_s),
                n(self.duration_count),
                n(self.max_s),
                n(self.inflight),
            ],
            buckets: self.buckets.and_then(route_buckets::compact),
        }
    }
}

impl SqliteStore {
    /// The figures of every route over several windows ending at `now_ms`, as
    /// [`SqliteStore::route_figures`] computes them, for the alert evaluator: from the recent
    /// intervals held in memory when they cover the windows (loading them first if
    /// needed), else from SQLite ([`SqliteStore::route_window_figures_sql`]). No windows: no
    /// routes (the evaluator has no route rule), and what it asked is no longer held for it.
    pub async fn route_window_figures(
        &self,
        needs: &[WindowNeed],
        now_ms: i64,
    ) -> Result<RouteWindows> {
        if needs.is_empty() {
            self.recent.evaluator_done(now_ms);
            return Ok(RouteWindows::default());
        }
        if needs.iter().any(|n| n.window_ms > MAX_WINDOW_MS) {
            return self.route_window_figures_sql(needs, now_ms).await;
        }
        let windows: Vec<(i64, bool)> = needs.iter().map(|n| (n.window_ms, n.buckets)).collect();
        let answer = |d: &mut Data, keep: Keep| d.answer(needs, now_ms, keep);
        let (plan, keep) = self.recent.plan(Asker::Evaluator, &windows, now_ms, answer);
        match plan {
            Plan::Answer(w) => return Ok(w),
            Plan::Sql => {}
            Plan::Load => {
                let mut guard = LoadGuard(&self.recent, false);
                let data = self.load_recent(keep, now_ms).await?;
                guard.1 = true;
                if let Some(w) = self.recent.install(data, keep, answer) {
                    return Ok(w);
                }
            }
        }
        self.route_window_figures_sql(needs, now_ms).await
    }

    /// The figures of `infos` over the window ending at `now_ms` from the intervals held in
    /// memory (loading them first if needed), exactly as the SQL path of `figures_of`
    /// gives them; `None` when memory cannot answer (a window over [`MAX_WINDOW_MS`], a
    /// time before the newest data, a load that went stale): read SQLite.
    pub(super) async fn held_figures(
        &self,
        infos: &[crate::store::RouteInfo],
        window_ms: i64,
        now_ms: i64,
    ) -> Result<Option<Vec<Figures>>> {
        if window_ms > MAX_WINDOW_MS || infos.is_empty() {
            return Ok(None);
        }
        let routes: Vec<(i64, i64)> = infos
            .iter()
            .map(|i| (i.id, (i.target_interval_s * 1000.0) as i64))
            .collect();
        let answer = |d: &mut Data, keep: Keep| d.rows(&routes, window_ms, now_ms, keep);
        let (plan, keep) = self
            .recent
            .plan(Asker::Rows, &[(window_ms, true)], now_ms, answer);
        Ok(match plan {
            Plan::Answer(f) => Some(f),
            Plan::Sql => None,
            Plan::Load => {
                let mut guard = LoadGuard(&self.recent, false);
                let data = self.load_recent(keep, now_ms).await?;
                guard.1 = true;
                self.recent.install(data, keep, answer)
            }
        })
    }

    /// The routes with their targets from memory, exactly as `route_infos_sql` reads them;
    /// `None` when the recent intervals are not held (nobody asked for route figures
    /// lately) or memory does not know `route_id`: read SQLite.
    pub(super) fn held_infos(
        &self,
        target_id: Option<i64>,
        route_id: Option<i64>,
    ) -> Option<Vec<crate::store::RouteInfo>> {
        self.recent.infos(target_id, route_id)
    }

    /// The route intervals held in memory: routes, intervals and their approximate size in
    /// bytes; `None` until the first ask loads them, and after nothing asked for
    /// [`KEEP_ASKED_MS`].
    pub fn recent_intervals_held(&self) -> Option<(usize, usize, usize)> {
        self.recent.held()
    }

    /// Reads what the memory holds from SQLite, in one read transaction: every route and
    /// target, the intervals after `now − longest window − slack`, and each route's newest
    /// interval before that within the lookback (the longer of the evaluator's and the one
    /// `figures_of` uses for the longest target interval).
    async fn load_recent(&self, keep: Keep, now_ms: i64) -> Result<Data> {
        let longest = keep.longest_ms;
        let keep_from = now_ms - longest - SLACK_MS;
        let buckets = keep.buckets;
        let mut tx = self.begin_write().await?;
        let targets: Vec<TargetDb> = sqlx::query_as(
            "SELECT id, name, url, labels, up, last_scrape_ms, interval_s FROM targets",
        )
        .fetch_all(&mut *tx)
        .await?;
        let longest_interval: Option<f64> =
            sqlx::query_scalar("SELECT MAX(interval_s) FROM targets")
                .fetch_one(&mut *tx)
                .await?;
        let lookback = longest.max(LAST_LOOKBACK_MS).max(rows_lookback(
            longest,
            (longest_interval.unwrap_or(0.0) * 1000.0) as i64,
        ));
        let targets: HashMap<i64, TargetMeta> = targets
            .into_iter()
            .map(|t| {
                let instance = serde_json::from_str::<BTreeMap<String, String>>(&t.labels)
                    .ok()
                    .and_then(|l| l.get("instance").cloned())
                    .unwrap_or_else(|| url_instance(&t.url));
                let meta = TargetMeta {
                    name: t.name,
                    url: t.url,
                    labels: t.labels,
                    instance,
                    up: t.up,
                    last_scrape_ms: t.last_scrape_ms,
                    interval_s: t.interval_s,
                };
                (t.id, meta)
            })
            .collect();
        let subjects: Vec<SubjectDb> = sqlx::query_as(
            "SELECT id, target_id, service, route, source, instance, labels, first_seen_ms, \
             last_seen_ms, last_exchange_ms, state FROM routes",
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut routes: HashMap<i64, RouteHeld> = HashMap::with_capacity(subjects.len());
        for s in subjects {
            let Some(t) = targets.get(&s.target_id) else {
                continue;
            };
            let instance = if s.instance.is_empty() {
                t.instance.clone()
            } else {
                s.instance.clone()
            };
            routes.insert(
                s.id,
                RouteHeld {
                    subject: RouteSubject {
                        id: s.id,
                        target_id: s.target_id,
                        labels: Arc::new(subject_labels(
                            &s.service, &instance, &s.route, &t.name, &s.source, &s.labels,
                        )),
                        service: s.service,
                        route: s.route,
                        source: s.source,
                        instance,
                        target_name: t.name.clone(),
                    },
                    own_instance: s.instance,
                    first_seen_ms: s.first_seen_ms,
                    last_seen_ms: s.last_seen_ms,
                    last_exchange_ms: s.last_exchange_ms,
                    state: s.state,
                    labels_json: s.labels,
                    intervals: VecDeque::new(),
                },
            );
        }
        let columns = "route_id, at_ms, interval_ms, exchanges, failed, duration_sum_s, \
                       duration_count, max_s, inflight";
        let bucket_column = if buckets {
            "buckets"
        } else {
            "NULL AS buckets"
        };
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {columns}, {bucket_column} FROM route_samples WHERE at_ms > "
        ));
        q.push_bind(keep_from).push(" ORDER BY route_id, at_ms");
        let recent: Vec<HeldDb> = q.build_query_as().fetch_all(&mut *tx).await?;
        let mut newest_seen_ms = i64::MIN;
        for r in recent {
            newest_seen_ms = newest_seen_ms.max(r.at_ms);
            if let Some(h) = routes.get_mut(&r.route_id) {
                h.intervals.push_back(r.held());
            }
        }
        // The bare columns come from the row of MAX(at_ms) (SQLite's rule for min/max).
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {}, {bucket_column} FROM route_samples WHERE at_ms > ",
            columns.replace("at_ms,", "MAX(at_ms) AS at_ms,")
        ));
        q.push_bind(now_ms - lookback)
            .push(" AND at_ms <= ")
            .push_bind(keep_from)
            .push(" GROUP BY route_id");
        let older: Vec<HeldDb> = q.build_query_as().fetch_all(&mut *tx).await?;
        for r in older {
            if let Some(h) = routes.get_mut(&r.route_id)
                && h.intervals.is_empty()
            {
                newest_seen_ms = newest_seen_ms.max(r.at_ms);
                h.intervals.push_back(r.held());
            }
        }
        tx.commit().await?;
        Ok(Data {
            complete_after_ms: keep_from,
            newest_after_ms: now_ms - lookback,
            newest_seen_ms,
            buckets,
            targets,
            routes,
            order: None,
        })
    }
}
