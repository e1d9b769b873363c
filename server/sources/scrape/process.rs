//! Process figures found beside the routes in one scrape (a service page's CPU, memory,
//! threads, GC, open files and uptime), per instance.
//!
//! Read from the common exporters' names (Prometheus client libraries' `process_*`,
//! Micrometer's `process_*`/`system_*`/`jvm_*`, Quarkus' `process_cpu_time_ns_total`):
//!
//! | stored metric | unit | from |
//! | --- | --- | --- |
//! | `cpu_pct` | % of one core | Δ`process_cpu_seconds_total` (or Δ`process_cpu_time_ns_total` / 10⁹) / Δt × 100 |
//! | `process_cpu_usage_pct` | % of the host's CPUs | Micrometer `process_cpu_usage` × 100 |
//! | `system_cpu_usage_pct` | % of the host's CPUs | Micrometer `system_cpu_usage` × 100 |
//! | `rss_bytes` | bytes | `process_resident_memory_bytes` |
//! | `heap_used_bytes`, `nonheap_used_bytes` | bytes | Σ `jvm_memory_used_bytes` by `area` |
//! | `heap_max_bytes` | bytes | Σ `jvm_memory_max_bytes{area="heap"}` (pools without a max, −1, left out) |
//! | `pool:<id>` | bytes | `jvm_memory_used_bytes` of one pool (`id` label) |
//! | `threads` | threads | `jvm_threads_live_threads` (Micrometer ≥ 1.1), `jvm_threads_live`, else `process_threads` |
//! | `gc_ms_per_s` | ms of GC pause per s | Δ`jvm_gc_pause_seconds_sum` / Δt × 1000 |
//! | `gc_pauses_per_s` | pauses per s | Δ`jvm_gc_pause_seconds_count` / Δt |
//! | `open_fds`, `max_fds` | files | `process_open_fds`/`process_max_fds`, Micrometer `process_files_{open,max}_files` |
//! | `uptime_s` | s | `process_uptime_seconds`, else scrape time − `process_start_time_seconds` |
//!
//! Pools (connection, HTTP client and thread pools), stored as `pool_<field>:<kind>:<name>`
//! (naming and the "full" rule: [`crate::domain::pools`]); `name` is the label in brackets,
//! `default` when it is missing or empty:
//!
//! | kind | field | unit | from |
//! | --- | --- | --- | --- |
//! | `hikaricp` (`pool`) | `active`, `idle`, `pending`, `max` | connections, requests waiting | `hikaricp_connections_{active,idle,pending,max}` |
//! | `hikaricp` | `timeouts_per_s` | /s | Δ`hikaricp_connections_timeout_total` / Δt |
//! | `jdbc` (`name`) | `active`, `idle`, `max` (`pending` when pushed over OTLP) | connections | `jdbc_connections_{active,idle,max}` (Micrometer `DataSourcePoolMetrics`: Tomcat JDBC, DBCP…; OpenTelemetry's `db.client.connection.*` pushed over OTLP); left out when the instance exposes `hikaricp_*`, since Spring Boot exports a Hikari pool under both |
//! | `httpclient` (`httpclient`) | `active`, `idle` | connections | `httpcomponents_httpclient_pool_total_connections{state="leased"}`, `{state="available"}` |
//! | `httpclient` | `max`, `pending` | connections, requests waiting | `httpcomponents_httpclient_pool_total_max`, `…_total_pending` |
//! | `jetty` (`name`) | `active`, `idle`, `max`, `pending` | threads, tasks queued | `jetty_threads_busy`, `jetty_threads_idle`, `jetty_threads_config_max`, `jetty_threads_jobs` |
//! | `tomcat` (`name`) | `active`, `max` | threads | `tomcat_threads_busy_threads`, `tomcat_threads_config_max_threads` |
//! | `tomcat` | `idle` | threads | `tomcat_threads_current_threads` − `tomcat_threads_busy_threads` |
//! | `executor` (`name`) | `active`, `max`, `pending` | threads, tasks queued | `executor_active_threads`, `executor_pool_max_threads` (left out when ≥ 2³¹ − 1: unbounded), `executor_queued_tasks` |
//! | `executor` | `idle` | threads | `executor_pool_size_threads` − `executor_active_threads` |
//! | `vertx` (`pool_name`) | `active`, `idle`, `max`, `pending` | threads, tasks queued | `worker_pool_active`, `worker_pool_idle`, `worker_pool_active + worker_pool_idle`, `worker_pool_queue_size` (`pool_type="worker"` only) |
//!
//! Counters are turned into rates between two scrapes of the same instance, with the
//! same reset rule as routes ([`crate::domain::routes::counter_delta`]).

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::exposition::{Exposition, Sample};
use crate::domain::pools::{self, PoolKind};
use crate::domain::routes::counter_delta;

/// The value at or above which a configured maximum means "unbounded" (Java's
/// `Integer.MAX_VALUE`, what an executor with an unbounded pool reports).
const UNBOUNDED: f64 = 2_147_483_647.0;

/// Labels that name the instance a series comes from when the exposition says so.
pub const INSTANCE_LABELS: [&str; 2] = ["instance", "pod"];

/// The instance a series names (`instance`, else `pod`), if any.
pub fn series_instance<'s>(labels: &'s [(&str, Cow<'_, str>)]) -> Option<&'s str> {
    INSTANCE_LABELS.iter().find_map(|l| {
        labels
            .iter()
            .find(|(k, v)| k == l && !v.is_empty())
            .map(|(_, v)| v.as_ref())
    })
}

/// One instance's process readings in one scrape: gauges as read, counters cumulative.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessReading {
    /// Gauges: stored metric name → value.
    pub gauges: BTreeMap<String, f64>,
    /// CPU seconds used, cumulative.
    pub cpu_s: Option<f64>,
    /// GC pause seconds and pauses, cumulative (summed over collectors and causes).
    pub gc_s: Option<f64>,
    pub gc_count: Option<f64>,
    /// Other counters, cumulative: the stored name of their rate per second → value.
    pub counters: BTreeMap<String, f64>,
}

impl ProcessReading {
    pub fn is_empty(&self) -> bool {
        self.gauges.is_empty()
            && self.cpu_s.is_none()
            && self.gc_s.is_none()
            && self.counters.is_empty()
    }

    /// The stored figures of this reading: its gauges, plus rates since `prev` (`dt_ms`
    /// apart) when there is one.
    pub fn figures(&self, prev: Option<(&ProcessReading, i64)>) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> =
            self.gauges.iter().map(|(k, v)| (k.clone(), *v)).collect();
        if let Some((p, dt_ms)) = prev.filter(|(_, dt)| *dt > 0) {
            let dt_s = dt_ms as f64 / 1000.0;
            if let (Some(a), Some(b)) = (p.cpu_s, self.cpu_s) {
                out.push(("cpu_pct".into(), counter_delta(a, b) / dt_s * 100.0));
            }
            if let (Some(a), Some(b)) = (p.gc_s, self.gc_s) {
                out.push(("gc_ms_per_s".into(), counter_delta(a, b) / dt_s * 1000.0));
            }
            if let (Some(a), Some(b)) = (p.gc_count, self.gc_count) {
                out.push(("gc_pauses_per_s".into(), counter_delta(a, b) / dt_s));
            }
            for (name, b) in &self.counters {
                if let Some(a) = p.counters.get(name) {
                    out.push((name.clone(), counter_delta(*a, *b) / dt_s));
                }
            }
        }
        out.retain(|(_, v)| v.is_finite());
        out
    }
}

/// Process readings per instance (`None`: series without an instance label) in `doc`;
/// `at_ms` is the scrape time (for uptime from a start time).
pub fn readings(doc: &Exposition, at_ms: i64) -> BTreeMap<Option<String>, ProcessReading> {
    let mut out: BTreeMap<Option<String>, ProcessReading> = BTreeMap::new();
    let mut live_threads: BTreeMap<Option<String>, bool> = BTreeMap::new();
    // jdbc_connections_* per instance, kept apart until we know whether HikariCP is there
    let mut jdbc: BTreeMap<Option<String>, Vec<(String, f64)>> = BTreeMap::new();
    for (_, s) in doc.samples() {
        let name = s.name;
        if let Some((kind, field, v)) = pool_figure(s) {
            let inst = series_instance(&s.labels).map(str::to_string);
            let pool = pool_name(s, kind);
            if kind == PoolKind::Jdbc {
                let e = jdbc.entry(inst).or_default();
                e.push((pools::metric(field, kind, pool), v));
                continue;
            }
            let r = out.entry(inst).or_default();
            if field == "timeouts_per_s" {
                r.counters.insert(pools::metric(field, kind, pool), v);
                continue;
            }
            r.gauges.insert(pools::metric(field, kind, pool), v);
            if kind == PoolKind::Vertx && field != "pending" {
                // Vert.x reports the in use and idle parts of a fixed-size pool: max = sum
                *r.gauges
                    .entry(pools::metric("max", kind, pool))
                    .or_insert(0.0) += v;
            }
            continue;
        }
        if !(name.starts_with("process_")
            || name.starts_with("jvm_")
            || name.starts_with("system_cpu_usage"))
        {
            continue;
        }
        if !s.value.is_finite() {
            continue;
        }
        let inst = series_instance(&s.labels).map(str::to_string);
        let r = out.entry(inst.clone()).or_default();
        let v = s.value;
        let set = |r: &mut ProcessReading, k: &str, v: f64| {
            r.gauges.insert(k.to_string(), v);
        };
        match name {
            "process_cpu_seconds_total" => r.cpu_s = Some(v),
            "process_cpu_time_ns_total" if r.cpu_s.is_none() => r.cpu_s = Some(v / 1e9),
            "process_cpu_usage" => set(r, "process_cpu_usage_pct", v * 100.0),
            "system_cpu_usage" => set(r, "system_cpu_usage_pct", v * 100.0),
            "process_resident_memory_bytes" => set(r, "rss_bytes", v),
            "process_open_fds" | "process_files_open_files" => set(r, "open_fds", v),
            "process_max_fds" | "process_files_max_files" => set(r, "max_fds", v),
            "process_uptime_seconds" => set(r, "uptime_s", v),
            "process_start_time_seconds"
                if !r.gauges.contains_key("uptime_s") && at_ms as f64 / 1000.0 >= v =>
            {
                set(r, "uptime_s", at_ms as f64 / 1000.0 - v);
            }
            "jvm_threads_live_threads" | "jvm_threads_live" => {
                set(r, "threads", v);
                live_threads.insert(inst, true);
            }
            "process_threads" if !live_threads.get(&inst).copied().unwrap_or(false) => {
                set(r, "threads", v);
            }
            "jvm_memory_used_bytes" => {
                let area = s.label("area").unwrap_or("heap");
                let key = if area == "nonheap" {
                    "nonheap_used_bytes"
                } else {
                    "heap_used_bytes"
                };
                *r.gauges.entry(key.to_string()).or_insert(0.0) += v;
                if let Some(id) = s.label("id") {
                    *r.gauges.entry(format!("pool:{id}")).or_insert(0.0) += v;
                }
            }
            "jvm_memory_max_bytes" if s.label("area") == Some("heap") && v >= 0.0 => {
                *r.gauges.entry("heap_max_bytes".to_string()).or_insert(0.0) += v;
            }
            "jvm_gc_pause_seconds_sum" => *r.gc_s.get_or_insert(0.0) += v,
            "jvm_gc_pause_seconds_count" => *r.gc_count.get_or_insert(0.0) += v,
            _ => {}
        }
    }
    // idle = current − active where a pool reports its size, not its idle threads
    for r in out.values_mut() {
        let current: Vec<String> = r
            .gauges
            .keys()
            .filter(|k| k.starts_with("pool_current:"))
            .cloned()
            .collect();
        for key in current {
            let Some(total) = r.gauges.remove(&key) else {
                continue;
            };
            let rest = &key["pool_current:".len()..];
            if let Some(active) = r.gauges.get(&format!("pool_active:{rest}")) {
                let idle = (total - active).max(0.0);
                r.gauges.entry(format!("pool_idle:{rest}")).or_insert(idle);
            }
        }
    }
    for (inst, figures) in jdbc {
        let r = out.entry(inst).or_default();
        let hikari = r
            .gauges
            .keys()
            .any(|k| pools::parse_metric(k).is_some_and(|(_, kind, _)| kind == PoolKind::Hikari));
        if !hikari {
            r.gauges.extend(figures);
        }
    }
    out.retain(|_, r| !r.is_empty());
    out
}

/// A pool's threads in all (busy and idle), read only to give `idle` = current − active.
const CURRENT: &str = "current";

/// The pool figure a sample is, if any: `(kind, field, value)` (see the module table).
fn pool_figure(s: &Sample) -> Option<(PoolKind, &'static str, f64)> {
    let v = s.value;
    if !v.is_finite() {
        return None;
    }
    let (kind, field) = match s.name {
        "hikaricp_connections_active" => (PoolKind::Hikari, "active"),
        "hikaricp_connections_idle" => (PoolKind::Hikari, "idle"),
        "hikaricp_connections_pending" => (PoolKind::Hikari, "pending"),
        "hikaricp_connections_max" => (PoolKind::Hikari, "max"),
        "hikaricp_connections_timeout_total" => (PoolKind::Hikari, "timeouts_per_s"),
        "jdbc_connections_active" => (PoolKind::Jdbc, "active"),
        "jdbc_connections_idle" => (PoolKind::Jdbc, "idle"),
        "jdbc_connections_max" => (PoolKind::Jdbc, "max"),
        // Only pushed: OpenTelemetry's db.client.connection.pending_requests (see
        // crate::sources::otlp::process_samples); Micrometer's JDBC binder has no such figure.
        "jdbc_connections_pending" => (PoolKind::Jdbc, "pending"),
        "httpcomponents_httpclient_pool_total_connections" => match s.label("state") {
            Some("leased") => (PoolKind::HttpClient, "active"),
            Some("available") => (PoolKind::HttpClient, "idle"),
            _ => return None,
        },
        "httpcomponents_httpclient_pool_total_max" => (PoolKind::HttpClient, "max"),
        "httpcomponents_httpclient_pool_total_pending" => (PoolKind::HttpClient, "pending"),
        "jetty_threads_busy" => (PoolKind::Jetty, "active"),
        "jetty_threads_idle" => (PoolKind::Jetty, "idle"),
        "jetty_threads_config_max" => (PoolKind::Jetty, "max"),
        "jetty_threads_jobs" => (PoolKind::Jetty, "pending"),
        "tomcat_threads_busy_threads" => (PoolKind::Tomcat, "active"),
        "tomcat_threads_config_max_threads" => (PoolKind::Tomcat, "max"),
        "tomcat_threads_current_threads" => (PoolKind::Tomcat, CURRENT),
        "executor_active_threads" => (PoolKind::Executor, "active"),
        "executor_pool_max_threads" if v < UNBOUNDED => (PoolKind::Executor, "max"),
        "executor_queued_tasks" => (PoolKind::Executor, "pending"),
        "executor_pool_size_threads" => (PoolKind::Executor, CURRENT),
        "worker_pool_active" | "worker_pool_idle" | "worker_pool_queue_size"
            if s.label("pool_type").is_none_or(|t| t == "worker") =>
        {
            match s.name {
                "worker_pool_active" => (PoolKind::Vertx, "active"),
                "worker_pool_idle" => (PoolKind::Vertx, "idle"),
                _ => (PoolKind::Vertx, "pending"),
            }
        }
        _ => return None,
    };
    Some((kind, field, v))
}

/// The pool's name: its kind's label, `default` when missing or empty.
fn pool_name<'s>(s: &'s Sample<'_>, kind: PoolKind) -> &'s str {
    let label = match kind {
        PoolKind::Hikari => "pool",
        PoolKind::HttpClient => "httpclient",
        PoolKind::Vertx => "pool_name",
        _ => "name",
    };
    s.label(label)
        .filter(|v| !v.is_empty())
        .unwrap_or("default")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::scrape::exposition::parse;

    #[test]
    fn spring_boot_process_and_jvm_figures() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures/public/prometheus/spring-boot-3-actuator-prometheus.txt");
        let Ok(text) = std::fs::read_to_string(&path) else {
            println!("skipping: ../shared not present");
            return;
        };
        let doc = parse(&text).unwrap();
        let r = readings(&doc, 0);
        let one = &r[&None];
        assert_eq!(one.gauges["threads"], 22.0);
        assert_eq!(one.gauges["open_fds"], 65.0);
        assert!(one.gauges["heap_used_bytes"] > 2.5e7);
        assert!(one.gauges.contains_key("pool:G1 Old Gen"));
        assert!(one.gc_count.is_some());
    }

    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/pools")
            .join(name);
        std::fs::read_to_string(&path).unwrap()
    }

    /// The pool figures of one reading: stored name → value.
    fn pool_gauges(r: &ProcessReading) -> BTreeMap<&str, f64> {
        r.gauges
            .iter()
            .filter(|(k, _)| k.starts_with("pool_"))
            .map(|(k, v)| (k.as_str(), *v))
            .collect()
    }

    #[test]
    fn process_pools_of_a_spring_boot_service() {
        let text = fixture("spring-boot-pools.prom");
        let doc = parse(&text).unwrap();
        let r = &readings(&doc, 0)[&None];
        let want: BTreeMap<&str, f64> = [
            ("pool_active:hikaricp:HikariPool-1", 10.0),
            ("pool_idle:hikaricp:HikariPool-1", 0.0),
            ("pool_pending:hikaricp:HikariPool-1", 7.0),
            ("pool_max:hikaricp:HikariPool-1", 10.0),
            ("pool_active:tomcat:http-nio-8080", 37.0),
            ("pool_max:tomcat:http-nio-8080", 200.0),
            ("pool_idle:tomcat:http-nio-8080", 13.0),
            ("pool_active:executor:applicationTaskExecutor", 2.0),
            ("pool_idle:executor:applicationTaskExecutor", 6.0),
            ("pool_pending:executor:applicationTaskExecutor", 4.0),
        ]
        .into_iter()
        .collect();
        // jdbc_connections_* of the same Hikari pool are left out; the unbounded executor
        // has no max
        assert_eq!(pool_gauges(r), want);
        assert_eq!(r.gauges["threads"], 61.0);
        assert_eq!(r.counters["pool_timeouts_per_s:hikaricp:HikariPool-1"], 3.0);
        // the timeouts counter becomes a rate between two scrapes
        let later_text = fixture("spring-boot-pools.prom").replace(
            "hikaricp_connections_timeout_total{pool=\"HikariPool-1\"} 3.0",
            "hikaricp_connections_timeout_total{pool=\"HikariPool-1\"} 8.0",
        );
        let later = parse(&later_text).unwrap();
        let f: BTreeMap<String, f64> = readings(&later, 10_000)[&None]
            .figures(Some((r, 10_000)))
            .into_iter()
            .collect();
        assert_eq!(f["pool_timeouts_per_s:hikaricp:HikariPool-1"], 0.5);
        // the full rule on what was read
        let hikari = figures_of(r, PoolKind::Hikari, "HikariPool-1");
        assert_eq!(hikari.state(), pools::PoolState::Full);
        assert_eq!(
            pools::sentence(PoolKind::Hikari, &hikari),
            "HikariCP connection pool full: 10 of 10 connections in use, 7 waiting"
        );
        let tomcat = figures_of(r, PoolKind::Tomcat, "http-nio-8080");
        assert_eq!(tomcat.state(), pools::PoolState::Ok);
        assert_eq!(tomcat.usage_pct(), Some(18.5));
        // a Tomcat JDBC pool (no HikariCP beside it) is read from jdbc_connections_*
        let tomcat_jdbc = parse(
            "jdbc_connections_active{name=\"dataSource\"} 4\njdbc_connections_max{name=\"dataSource\"} 100\njdbc_connections_idle{name=\"dataSource\"} 6\n",
        )
        .unwrap();
        let g = readings(&tomcat_jdbc, 0);
        assert_eq!(
            pool_gauges(&g[&None]),
            [
                ("pool_active:jdbc:dataSource", 4.0),
                ("pool_idle:jdbc:dataSource", 6.0),
                ("pool_max:jdbc:dataSource", 100.0)
            ]
            .into_iter()
            .collect()
        );
    }

    #[test]
    fn process_pools_of_a_camel_service() {
        let text = fixture("camel-http-pools.prom");
        let doc = parse(&text).unwrap();
        let r = &readings(&doc, 0)[&None];
        let want: BTreeMap<&str, f64> = [
            ("pool_active:httpclient:inventory", 20.0),
            ("pool_idle:httpclient:inventory", 0.0),
            ("pool_max:httpclient:inventory", 20.0),
            ("pool_pending:httpclient:inventory", 5.0),
            ("pool_active:jetty:default", 180.0),
            ("pool_idle:jetty:default", 20.0),
            ("pool_max:jetty:default", 200.0),
            ("pool_pending:jetty:default", 0.0),
        ]
        .into_iter()
        .collect();
        assert_eq!(pool_gauges(r), want);
        let http = figures_of(r, PoolKind::HttpClient, "inventory");
        assert_eq!(http.state(), pools::PoolState::Full);
        assert_eq!(
            pools::sentence(PoolKind::HttpClient, &http),
            "HTTP client pool full: 20 of 20 connections in use, 5 waiting"
        );
        let jetty = figures_of(r, PoolKind::Jetty, "default");
        assert_eq!(jetty.state(), pools::PoolState::Ok);
        assert_eq!(
            pools::sentence(PoolKind::Jetty, &jetty),
            "180 of 200 threads busy"
        );
        // Jetty at 200 of 200 with jobs queued is full
        let saturated_text = fixture("camel-http-pools.prom")
            .replace("jetty_threads_busy 180.0", "jetty_threads_busy 200.0")
            .replace("jetty_threads_jobs 0.0", "jetty_threads_jobs 12.0");
        let saturated = parse(&saturated_text).unwrap();
        let r = &readings(&saturated, 0)[&None];
        assert_eq!(
            pools::sentence(PoolKind::Jetty, &figures_of(r, PoolKind::Jetty, "default")),
            "Jetty thread pool full: 200 of 200 threads busy, 12 queued"
        );
        // Quarkus' Vert.x worker pools: max = in use + idle
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../shared/fixtures/public/prometheus/camel-quarkus-books-api-v2.openmetrics.txt",
        );
        if let Ok(text) = std::fs::read_to_string(&path) {
            let r = &readings(&parse(&text).unwrap(), 0)[&None];
            let w = figures_of(r, PoolKind::Vertx, "vert.x-worker-thread");
            assert_eq!(
                (w.active, w.max, w.pending),
                (Some(1.0), Some(20.0), Some(0.0))
            );
        }
    }

    fn figures_of(r: &ProcessReading, kind: PoolKind, name: &str) -> pools::PoolFigures {
        let mut f = pools::PoolFigures::default();
        for (k, v) in &r.gauges {
            if let Some((field, k2, n)) = pools::parse_metric(k)
                && k2 == kind
                && n == name
            {
                f.set(field, *v);
            }
        }
        f
    }

    #[test]
    fn rates_between_scrapes_and_resets() {
        let a = parse("process_cpu_seconds_total 10\nprocess_resident_memory_bytes 100\njvm_gc_pause_seconds_sum{gc=\"x\"} 1\njvm_gc_pause_seconds_count{gc=\"x\"} 4\n").unwrap();
        let b = parse("process_cpu_seconds_total 15\nprocess_resident_memory_bytes 120\njvm_gc_pause_seconds_sum{gc=\"x\"} 1.5\njvm_gc_pause_seconds_count{gc=\"x\"} 6\n").unwrap();
        let (ra, rb) = (readings(&a, 0), readings(&b, 10_000));
        let f: BTreeMap<String, f64> = rb[&None]
            .figures(Some((&ra[&None], 10_000)))
            .into_iter()
            .collect();
        assert_eq!(f["cpu_pct"], 50.0);
        assert_eq!(f["rss_bytes"], 120.0);
        assert_eq!(f["gc_ms_per_s"], 50.0);
        assert_eq!(f["gc_pauses_per_s"], 0.2);
        // a restart: the counter starts again from 0
        let c = parse("process_cpu_seconds_total 2\n").unwrap();
        let f: BTreeMap<String, f64> = readings(&c, 20_000)[&None]
            .figures(Some((&rb[&None], 10_000)))
            .into_iter()
            .collect();
        assert_eq!(f["cpu_pct"], 20.0);
        // instance labels keep processes apart
        let d = parse("process_threads{pod=\"a\"} 3\nprocess_threads{pod=\"b\"} 5\n").unwrap();
        let r = readings(&d, 0);
        assert_eq!(r[&Some("a".to_string())].gauges["threads"], 3.0);
        assert_eq!(r[&Some("b".to_string())].gauges["threads"], 5.0);
    }
}
