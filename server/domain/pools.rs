//! Pools: the connection pools, HTTP client pools and thread pools a service exposes
//! beside its routes, and when one is full.
//!
//! A pool is read per instance as a few gauges (see [`crate::sources::scrape::process`]
//! for the exporters' names) and stored as process figures named
//! `pool_<field>:<kind>:<name>` — `field` one of [`FIELDS`], `kind` one of [`PoolKind`]'s
//! names, `name` the pool's own label (`pool`, `name`, `httpclient`, …), which may hold
//! any character. This module owns that naming and the "full" rule; it does no I/O.
//!
//! The full rule: a pool is **full** when its maximum is known, the figure in use is at or
//! above it (active ≥ max) and something waits for it (pending > 0: connection requests
//! blocked waiting, or tasks queued for a thread). At its maximum with nothing waiting it is
//! **at max**; otherwise **ok**. A pool without a known maximum (an unbounded executor) is
//! never full.

use std::fmt;

/// The stored fields of a pool, in the order shown.
///
/// - `active`: connections leased / threads busy;
/// - `max`: the configured maximum (absent when unbounded);
/// - `idle`: connections or threads open and free;
/// - `pending`: connection requests waiting, or tasks queued;
/// - `timeouts_per_s`: connection requests that gave up waiting, per second (HikariCP).
pub const FIELDS: [&str; 5] = ["active", "max", "idle", "pending", "timeouts_per_s"];

/// Where a pool's figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PoolKind {
    /// HikariCP (`hikaricp_connections_*`, label `pool`).
    Hikari,
    /// Any JDBC pool through Micrometer's `DataSourcePoolMetrics` (`jdbc_connections_*`,
    /// label `name`), e.g. Tomcat JDBC.
    Jdbc,
    /// Apache HttpClient (Camel HTTP, RestTemplate) through Micrometer's
    /// `PoolingHttpClientConnectionManagerMetricsBinder` (label `httpclient`).
    HttpClient,
    /// Jetty's server `QueuedThreadPool` (`jetty_threads_*`).
    Jetty,
    /// Tomcat's connector threads (`tomcat_threads_*`, label `name`).
    Tomcat,
    /// A `java.util.concurrent` executor (`executor_*`, label `name`).
    Executor,
    /// A Vert.x worker pool (Quarkus: `worker_pool_*{pool_type="worker"}`, label `pool_name`).
    Vertx,
}

impl PoolKind {
    pub const ALL: [PoolKind; 7] = [
        PoolKind::Hikari,
        PoolKind::Jdbc,
        PoolKind::HttpClient,
        PoolKind::Jetty,
        PoolKind::Tomcat,
        PoolKind::Executor,
        PoolKind::Vertx,
    ];

    /// The name used in stored metric names, the API and alert rule subjects.
    pub fn as_str(self) -> &'static str {
        match self {
            PoolKind::Hikari => "hikaricp",
            PoolKind::Jdbc => "jdbc",
            PoolKind::HttpClient => "httpclient",
            PoolKind::Jetty => "jetty",
            PoolKind::Tomcat => "tomcat",
            PoolKind::Executor => "executor",
            PoolKind::Vertx => "vertx",
        }
    }

    pub fn parse(s: &str) -> Option<PoolKind> {
        PoolKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// How the pool is called in a sentence ("HTTP client pool full: …").
    pub fn label(self) -> &'static str {
        match self {
            PoolKind::Hikari => "HikariCP connection pool",
            PoolKind::Jdbc => "JDBC connection pool",
            PoolKind::HttpClient => "HTTP client pool",
            PoolKind::Jetty => "Jetty thread pool",
            PoolKind::Tomcat => "Tomcat thread pool",
            PoolKind::Executor => "Executor",
            PoolKind::Vertx => "Vert.x worker pool",
        }
    }

    /// Whether the pool holds threads (else connections).
    pub fn is_threads(self) -> bool {
        matches!(
            self,
            PoolKind::Jetty | PoolKind::Tomcat | PoolKind::Executor | PoolKind::Vertx
        )
    }

    /// The unit of `active`, `max` and `idle`: `connections` or `threads`.
    pub fn unit(self) -> &'static str {
        if self.is_threads() {
            "threads"
        } else {
            "connections"
        }
    }

    /// The unit of `pending`: `requests` (waiting for a connection) or `tasks` (queued).
    pub fn pending_unit(self) -> &'static str {
        if self.is_threads() {
            "tasks"
        } else {
            "requests"
        }
    }

    /// The word for `pending` in a sentence.
    pub fn pending_word(self) -> &'static str {
        if self.is_threads() {
            "queued"
        } else {
            "waiting"
        }
    }
}

impl fmt::Display for PoolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The stored metric name of a pool's field: `pool_<field>:<kind>:<name>`.
pub fn metric(field: &str, kind: PoolKind, name: &str) -> String {
    format!("pool_{field}:{}:{name}", kind.as_str())
}

/// Splits a stored metric name into `(field, kind, pool name)`; `None` for any other
/// metric (including the JVM memory pools, `pool:<id>`).
pub fn parse_metric(metric: &str) -> Option<(&str, PoolKind, &str)> {
    let rest = metric.strip_prefix("pool_")?;
    let (field, rest) = rest.split_once(':')?;
    let (kind, name) = rest.split_once(':')?;
    let kind = PoolKind::parse(kind)?;
    FIELDS.contains(&field).then_some((field, kind, name))
}

/// The unit of a stored pool metric (`None` for other metrics).
pub fn metric_unit(metric: &str) -> Option<&'static str> {
    let (field, kind, _) = parse_metric(metric)?;
    Some(match field {
        "pending" => kind.pending_unit(),
        "timeouts_per_s" => "/s",
        _ => kind.unit(),
    })
}

/// Whether a pool is full (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PoolState {
    Ok,
    AtMax,
    Full,
}

impl PoolState {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolState::Ok => "ok",
            PoolState::AtMax => "at_max",
            PoolState::Full => "full",
        }
    }
}

/// One pool's latest figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolFigures {
    pub active: Option<f64>,
    pub max: Option<f64>,
    pub idle: Option<f64>,
    pub pending: Option<f64>,
    pub timeouts_per_s: Option<f64>,
}

impl PoolFigures {
    /// Sets a field by its stored name; unknown fields are ignored.
    pub fn set(&mut self, field: &str, v: f64) {
        match field {
            "active" => self.active = Some(v),
            "max" => self.max = Some(v),
            "idle" => self.idle = Some(v),
            "pending" => self.pending = Some(v),
            "timeouts_per_s" => self.timeouts_per_s = Some(v),
            _ => {}
        }
    }

    /// active / max × 100; `None` without both or with a max of 0.
    pub fn usage_pct(&self) -> Option<f64> {
        match (self.active, self.max) {
            (Some(a), Some(m)) if m > 0.0 => Some(a / m * 100.0),
            _ => None,
        }
    }

    /// The full rule of the module docs.
    pub fn state(&self) -> PoolState {
        match (self.active, self.max) {
            (Some(a), Some(m)) if m > 0.0 && a >= m => {
                if self.pending.unwrap_or(0.0) > 0.0 {
                    PoolState::Full
                } else {
                    PoolState::AtMax
                }
            }
            _ => PoolState::Ok,
        }
    }
}

/// A pool's figures over an alert rule's window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PoolWindow {
    /// Σ active / Σ max × 100 over the scrapes that had both and a max above 0.
    pub usage_pct: Option<f64>,
    /// The mean pending figure over the scrapes that had one.
    pub pending: Option<f64>,
    /// Scrapes in the window with any figure of the pool.
    pub scrapes: usize,
}

impl PoolWindow {
    /// Sums `(at_ms, field, value)` readings of one pool (any order) into the window's
    /// figures.
    pub fn of<'a>(readings: impl IntoIterator<Item = (i64, &'a str, f64)>) -> PoolWindow {
        let mut by: std::collections::BTreeMap<i64, PoolFigures> = Default::default();
        for (at_ms, field, v) in readings {
            by.entry(at_ms).or_default().set(field, v);
        }
        let (mut active, mut max, mut pending, mut n_pending) = (0.0, 0.0, 0.0, 0usize);
        for f in by.values() {
            if let (Some(a), Some(m)) = (f.active, f.max)
                && m > 0.0
            {
                active += a;
                max += m;
            }
            if let Some(p) = f.pending {
                pending += p;
                n_pending += 1;
            }
        }
        PoolWindow {
            usage_pct: (max > 0.0).then(|| active / max * 100.0),
            pending: (n_pending > 0).then(|| pending / n_pending as f64),
            scrapes: by.len(),
        }
    }
}

fn count(v: f64) -> String {
    crate::domain::format::float(v, 0)
}

/// The sentence that says how a pool stands, e.g. "HTTP client pool full: 20 of 20
/// connections in use, 5 waiting" or "Jetty thread pool at its maximum: 200 of 200 threads
/// busy, none queued"; for a pool below its maximum, its use ("8 of 20 connections in use").
pub fn sentence(kind: PoolKind, f: &PoolFigures) -> String {
    let verb = if kind.is_threads() { "busy" } else { "in use" };
    let used = match (f.active, f.max) {
        (Some(a), Some(m)) => format!("{} of {} {} {verb}", count(a), count(m), kind.unit()),
        (Some(a), None) => format!("{} {} {verb}, no maximum", count(a), kind.unit()),
        (None, Some(m)) => format!("at most {} {}", count(m), kind.unit()),
        (None, None) => "no figures".to_string(),
    };
    match f.state() {
        PoolState::Full => format!(
            "{} full: {used}, {} {}",
            kind.label(),
            count(f.pending.unwrap_or(0.0)),
            kind.pending_word()
        ),
        PoolState::AtMax => format!(
            "{} at its maximum: {used}, none {}",
            kind.label(),
            kind.pending_word()
        ),
        PoolState::Ok => match f.pending {
            Some(p) if p > 0.0 => format!("{used}, {} {}", count(p), kind.pending_word()),
            _ => used,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_metric_names_round_trip() {
        let m = metric("pending", PoolKind::HttpClient, "camel-http:a:b");
        assert_eq!(m, "pool_pending:httpclient:camel-http:a:b");
        assert_eq!(
            parse_metric(&m),
            Some(("pending", PoolKind::HttpClient, "camel-http:a:b"))
        );
        assert_eq!(metric_unit(&m), Some("requests"));
        assert_eq!(metric_unit("pool_pending:jetty:server"), Some("tasks"));
        assert_eq!(
            metric_unit("pool_max:hikaricp:HikariPool-1"),
            Some("connections")
        );
        assert_eq!(parse_metric("pool:G1 Old Gen"), None);
        assert_eq!(parse_metric("pool_bogus:jetty:x"), None);
        assert_eq!(parse_metric("pool_active:nope:x"), None);
    }

    #[test]
    fn pool_window_figures() {
        let w = PoolWindow::of([
            (1000, "active", 10.0),
            (1000, "max", 20.0),
            (1000, "pending", 0.0),
            (2000, "active", 20.0),
            (2000, "max", 20.0),
            (2000, "pending", 6.0),
            (3000, "pending", 3.0), // no active/max in this scrape: left out of usage
        ]);
        assert_eq!(w.usage_pct, Some(75.0));
        assert_eq!(w.pending, Some(3.0));
        assert_eq!(w.scrapes, 3);
        assert_eq!(PoolWindow::of([]), PoolWindow::default());
    }

    #[test]
    fn pool_full_rule_and_sentences() {
        let full = PoolFigures {
            active: Some(20.0),
            max: Some(20.0),
            idle: Some(0.0),
            pending: Some(5.0),
            timeouts_per_s: None,
        };
        assert_eq!(full.state(), PoolState::Full);
        assert_eq!(
            sentence(PoolKind::HttpClient, &full),
            "HTTP client pool full: 20 of 20 connections in use, 5 waiting"
        );
        assert_eq!(full.usage_pct(), Some(100.0));
        let at_max = PoolFigures {
            pending: Some(0.0),
            ..full.clone()
        };
        assert_eq!(at_max.state(), PoolState::AtMax);
        assert_eq!(
            sentence(PoolKind::Jetty, &at_max),
            "Jetty thread pool at its maximum: 20 of 20 threads busy, none queued"
        );
        let below = PoolFigures {
            active: Some(19.0),
            ..full.clone()
        };
        assert_eq!(
            below.state(),
            PoolState::Ok,
            "waiters below the max: not full"
        );
        assert_eq!(
            sentence(PoolKind::Hikari, &below),
            "19 of 20 connections in use, 5 waiting"
        );
        let unbounded = PoolFigures {
            active: Some(3.0),
            max: None,
            pending: Some(9.0),
            ..PoolFigures::default()
        };
        assert_eq!(unbounded.state(), PoolState::Ok);
        assert_eq!(unbounded.usage_pct(), None);
        assert_eq!(
            sentence(PoolKind::Executor, &unbounded),
            "3 threads busy, no maximum, 9 queued"
        );
    }
}
