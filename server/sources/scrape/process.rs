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
//! Counters are turned into rates between two scrapes of the same instance, with the
//! same reset rule as routes ([`crate::domain::routes::counter_delta`]).

use std::collections::BTreeMap;

use super::exposition::Exposition;
use crate::domain::routes::counter_delta;

/// Labels that name the instance a series comes from when the exposition says so.
pub const INSTANCE_LABELS: [&str; 2] = ["instance", "pod"];

/// The instance a series names (`instance`, else `pod`), if any.
pub fn series_instance(labels: &[(String, String)]) -> Option<&str> {
    INSTANCE_LABELS.iter().find_map(|l| {
        labels
            .iter()
            .find(|(k, v)| k == l && !v.is_empty())
            .map(|(_, v)| v.as_str())
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
}

impl ProcessReading {
    pub fn is_empty(&self) -> bool {
        self.gauges.is_empty() && self.cpu_s.is_none() && self.gc_s.is_none()
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
    for (_, s) in doc.samples() {
        let name = s.name.as_str();
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
    out.retain(|_, r| !r.is_empty());
    out
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
