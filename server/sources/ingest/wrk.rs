//! wrk and wrk2 text reports (with `--latency`) → summary-only runs.
//!
//! Format (docs/formats.md#wrk-and-wrk2; writers `src/wrk.c` and `src/units.c` in wg/wrk and
//! giltene/wrk2): `Running 3s test @ URL`, `N threads and M connections`, the "Thread
//! Stats" table (`Latency` and `Req/Sec` rows: avg, stdev, max, +/- stdev), then
//! `Latency Distribution` (wrk: 50/75/90/99 %; wrk2: `(HdrHistogram - Recorded Latency)`
//! with eight percentiles, a `Detailed Percentile spectrum` and a `#[Mean …]` footer;
//! with `-U` a second, *uncorrected* block), then `N requests in 3.05s, 84.88KB read`,
//! the optional `Socket errors: connect N, read N, write N, timeout N` and
//! `Non-2xx or 3xx responses: N` lines, `Requests/sec:` and `Transfer/sec:`.
//!
//! Every figure carries a unit chosen for readability: times `us|ms|s|m|h`, counts an SI
//! suffix (`1.04k`, ×1000), bytes `B|KB|MB|GB|TB` (×1024). Such figures are rounded to
//! two decimals by wrk: the bytes total is therefore only as exact as printed.
//!
//! Mapping to [`Stats`] (every figure "reported by wrk"; raw figures in
//! [`RunData::reported`](crate::domain::runs::RunData)):
//! - count = the `N requests` line (completed responses, non-2xx/3xx included) **plus**
//!   socket errors (connect + read + write + timeout): wrk leaves requests that never got
//!   a response out of its count, and an error rate over completed requests alone could not
//!   show them;
//! - errors = socket errors + `Non-2xx or 3xx responses` (wrk's own `errors` summary in
//!   its Lua `done()` hook counts exactly these);
//! - mean/max = the `Latency` row (completed requests only: time-outs are not in wrk's
//!   latency statistics); min is not printed by wrk (`None`), wrk2's spectrum gives it;
//! - p50/p90/p99 = the latency distribution as printed; p95 only from wrk2's detailed
//!   spectrum (its `0.950000` row). wrk's rule: `hdr_value_at_percentile` on its
//!   HdrHistogram of µs values (≈ 3 significant digits), not nearest rank;
//! - wrk2: the *corrected* ("Recorded Latency", measured from each request's intended
//!   send time) block is used; the `-U` uncorrected block is kept in `reported` only;
//! - window = the `in 3.05s` duration; throughput = `Requests/sec` as printed (completed
//!   requests / duration); bytes received = the `read` total.
//!
//! A file may hold several reports one after another: each becomes its own run.

use std::io::BufRead;

use serde_json::{Map, Value, json};

use super::summary::{
    ERROR_RULE, error_pct, invalid, one_label_run, read_text, url_path, url_without_scheme,
};
use super::{IngestError, ParsedRun};
use crate::domain::runs::{RunLimits, Stats};

/// wrk's percentile rule, stored beside its percentile table.
pub const PERCENTILE_RULE: &str =
    "wrk: hdr_value_at_percentile on an HdrHistogram of µs values (3 significant digits)";

/// True when `prefix` looks like a wrk or wrk2 text report: a line starting
/// `Running ` and holding ` test @ ` anywhere in it (console output may hold other lines
/// before the report).
pub fn looks_like(prefix: &[u8]) -> bool {
    // Anywhere in the prefix: console output may hold any lines before the report.
    prefix.split(|&b| b == b'\n').any(|line| {
        let line = line.trim_ascii_start();
        line.starts_with(b"Running ") && line.windows(8).any(|w| w == b" test @ ")
    })
}

/// Reads every wrk / wrk2 report in `input`.
pub fn parse<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    parse_with(input, source_name, &RunLimits::default())
}

/// [`parse`], a report whose figures cannot be true under `limits` (see
/// [`super::summary::implausible`]) refused at the line it starts on.
pub fn parse_with<R: BufRead>(
    input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let text = read_text(input, source_name, "wrk report")?;
    let mut reports: Vec<Report> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("Running ") && trimmed.contains(" test @ ") {
            reports.push(Report::new(i as u64 + 1));
        }
        if let Some(r) = reports.last_mut() {
            r.read_line(trimmed);
        }
    }
    if reports.is_empty() {
        return Err(invalid(
            source_name,
            1,
            "no wrk report found (expected a line \"Running 3s test @ URL\")",
        ));
    }
    let mut runs = Vec::new();
    let mut first_problem = None;
    for r in reports {
        match r.into_run(limits) {
            Ok(run) => runs.push(run),
            Err((line, why)) => {
                first_problem.get_or_insert((line, why));
            }
        }
    }
    match (runs.is_empty(), first_problem) {
        (true, Some((line, why))) => Err(invalid(source_name, line, why)),
        _ => Ok(runs),
    }
}

/// A time printed by wrk (`44.68ms`, `1.42s`, `2.00m`, `850.00us`) in ms.
pub fn time_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let factor = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return None,
    };
    Some(n * factor)
}

/// A count printed by wrk (`88.98`, `1.04k`, `2.50M`): SI suffixes, ×1000.
pub fn count(s: &str) -> Option<f64> {
    let s = s.trim();
    let (n, factor) = match s.as_bytes().last()? {
        b'k' => (&s[..s.len() - 1], 1e3),
        b'M' => (&s[..s.len() - 1], 1e6),
        b'G' => (&s[..s.len() - 1], 1e9),
        b'T' => (&s[..s.len() - 1], 1e12),
        _ => (s, 1.0),
    };
    Some(n.parse::<f64>().ok()? * factor)
}

/// A byte amount printed by wrk (`84.88KB`, `19.81MB`, `512.00B`): binary, ×1024.
pub fn bytes(s: &str) -> Option<f64> {
    let s = s.trim().strip_suffix('B')?;
    let (n, factor) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1024f64),
        b'M' => (&s[..s.len() - 1], 1024f64.powi(2)),
        b'G' => (&s[..s.len() - 1], 1024f64.powi(3)),
        b'T' => (&s[..s.len() - 1], 1024f64.powi(4)),
        b'P' => (&s[..s.len() - 1], 1024f64.powi(5)),
        _ => (s, 1.0),
    };
    Some(n.parse::<f64>().ok()? * factor)
}

#[derive(Debug, Default)]
struct LatencyBlock {
    /// `recorded` (wrk2's corrected latency; plain wrk's only block) or `uncorrected`.
    kind: &'static str,
    /// (percent as printed, ms).
    percentiles: Vec<(String, f64)>,
    /// Detailed spectrum rows: (value ms, percentile 0..1, total count).
    spectrum: Vec<(f64, f64, u64)>,
    footer: Map<String, Value>,
}

impl LatencyBlock {
    fn percentile(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(q, _)| q.parse::<f64>().ok() == Some(p))
            .map(|&(_, ms)| ms)
    }

    fn spectrum_at(&self, fraction: f64) -> Option<f64> {
        self.spectrum
            .iter()
            .find(|(_, q, _)| (q - fraction).abs() < 1e-9)
            .map(|&(v, _, _)| v)
    }

    fn to_json(&self) -> Value {
        json!({
            "rule": PERCENTILE_RULE,
            "values_ms": self.percentiles.iter().map(|(p, ms)| (p.clone(), json!(ms))).collect::<Map<_, _>>(),
            "spectrum": if self.spectrum.is_empty() { Value::Null } else {
                json!({
                    "columns": ["value_ms", "percentile", "total_count"],
                    "rows": self.spectrum.iter().map(|(v, q, n)| json!([v, q, n])).collect::<Vec<_>>(),
                })
            },
            "hdr_footer": if self.footer.is_empty() { Value::Null } else { Value::Object(self.footer.clone()) },
        })
    }
}

#[derive(Debug, Default)]
struct Report {
    line: u64,
    url: Option<String>,
    test_duration: Option<String>,
    threads: Option<u64>,
    connections: Option<u64>,
    calibration: Vec<String>,
    in_thread_stats: bool,
    /// `Latency` row: avg, stdev, max (ms), +/- stdev (%).
    latency_row: Option<[f64; 4]>,
    /// `Req/Sec` row, per thread.
    req_per_sec_row: Option<[f64; 4]>,
    blocks: Vec<LatencyBlock>,
    in_spectrum: bool,
    requests: Option<u64>,
    duration_ms: Option<f64>,
    read_printed: Option<String>,
    read_bytes: Option<f64>,
    socket_errors: Option<[u64; 4]>,
    non_2xx_3xx: Option<u64>,
    requests_per_sec: Option<f64>,
    transfer_per_sec: Option<String>,
    script_output: Vec<Value>,
}

fn stats_row(rest: &str, parse: fn(&str) -> Option<f64>) -> Option<[f64; 4]> {
    let parts: Vec<&str> = rest.split_whitespace().collect();
    let [avg, stdev, max, within] = parts[..] else {
        return None;
    };
    Some([
        parse(avg)?,
        parse(stdev)?,
        parse(max)?,
        within.strip_suffix('%')?.parse().ok()?,
    ])
}

impl Report {
    fn new(line: u64) -> Self {
        Report {
            line,
            ..Report::default()
        }
    }

    fn read_line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("Running ") {
            if let Some((d, url)) = rest.split_once(" test @ ") {
                self.test_duration = Some(d.trim().to_owned());
                self.url = Some(url.trim().to_owned());
            }
            return;
        }
        if let Some((t, c)) = line.split_once(" threads and ")
            && let (Ok(t), Some(c)) = (t.trim().parse(), c.strip_suffix(" connections"))
        {
            self.threads = Some(t);
            self.connections = c.trim().parse().ok();
            return;
        }
        if let Some(rest) = line.strip_prefix("Thread calibration:") {
            self.calibration.push(rest.trim().to_owned());
            return;
        }
        if line.starts_with("Thread Stats") {
            self.in_thread_stats = true;
            return;
        }
        if self.in_thread_stats {
            if let Some(rest) = line.strip_prefix("Latency ") {
                self.latency_row = stats_row(rest, time_ms);
                return;
            }
            if let Some(rest) = line.strip_prefix("Req/Sec ") {
                self.req_per_sec_row = stats_row(rest, count);
                self.in_thread_stats = false;
                return;
            }
        }
        if line.starts_with("Latency Distribution") {
            self.in_spectrum = false;
            self.blocks.push(LatencyBlock {
                kind: if line.contains("Uncorrected") {
                    "uncorrected"
                } else {
                    "recorded"
                },
                ..LatencyBlock::default()
            });
            return;
        }
        if line.starts_with("Detailed Percentile spectrum") {
            self.in_spectrum = true;
            return;
        }
        if let Some(block) = self.blocks.last_mut() {
            if self.in_spectrum {
                if let Some(inner) = line.strip_prefix("#[").and_then(|l| l.strip_suffix(']')) {
                    for part in inner.split(',') {
                        if let Some((k, v)) = part.split_once('=') {
                            let key = k.trim().to_ascii_lowercase().replace(' ', "_");
                            if let Ok(v) = v.trim().parse::<f64>() {
                                block.footer.insert(key, json!(v));
                            }
                        }
                    }
                    return;
                }
                if line.starts_with("---") {
                    self.in_spectrum = false;
                    return;
                }
                let cols: Vec<&str> = line.split_whitespace().collect();
                if let [v, q, n, _] = cols[..]
                    && let (Ok(v), Ok(q), Ok(n)) = (v.parse(), q.parse(), n.parse())
                {
                    block.spectrum.push((v, q, n));
                }
                return;
            }
            if let Some((p, v)) = line.split_once('%')
                && p.trim().parse::<f64>().is_ok()
                && let Some(ms) = time_ms(v)
            {
                block.percentiles.push((p.trim().to_owned(), ms));
                return;
            }
        }
        if let Some((n, rest)) = line.split_once(" requests in ") {
            self.requests = count(n).map(|v| v as u64);
            if let Some((d, read)) = rest.split_once(", ") {
                self.duration_ms = time_ms(d);
                let read = read.trim().strip_suffix(" read").unwrap_or(read).trim();
                self.read_printed = Some(read.to_owned());
                self.read_bytes = bytes(read);
            }
            return;
        }
        if let Some(rest) = line.strip_prefix("Socket errors:") {
            let mut n = [0u64; 4];
            for part in rest.split(',') {
                let mut it = part.split_whitespace();
                let (Some(k), Some(v)) = (it.next(), it.next().and_then(|v| v.parse().ok())) else {
                    continue;
                };
                match k {
                    "connect" => n[0] = v,
                    "read" => n[1] = v,
                    "write" => n[2] = v,
                    "timeout" => n[3] = v,
                    _ => {}
                }
            }
            self.socket_errors = Some(n);
            return;
        }
        if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            self.non_2xx_3xx = rest.trim().parse().ok();
            return;
        }
        if let Some(rest) = line.strip_prefix("Requests/sec:") {
            self.requests_per_sec = rest.trim().parse().ok();
            return;
        }
        if let Some(rest) = line.strip_prefix("Transfer/sec:") {
            self.transfer_per_sec = Some(rest.trim().to_owned());
            return;
        }
        // A `done()` hook of the user's script may print JSON; kept as printed.
        if line.starts_with('{')
            && let Ok(v) = serde_json::from_str::<Value>(line)
        {
            self.script_output.push(v);
        }
    }

    fn into_run(self, limits: &RunLimits) -> Result<ParsedRun, (u64, String)> {
        let Some(requests) = self.requests else {
            return Err((
                self.line,
                format!(
                    "wrk report{} has no results (no \"N requests in …\" line: wrk stopped early?)",
                    self.url
                        .as_deref()
                        .map(|u| format!(" for {u}"))
                        .unwrap_or_default()
                ),
            ));
        };
        let is_wrk2 =
            !self.calibration.is_empty() || self.blocks.iter().any(|b| !b.spectrum.is_empty());
        let [connect, read, write, timeout] = self.socket_errors.unwrap_or([0; 4]);
        let socket_errors = connect
            .saturating_add(read)
            .saturating_add(write)
            .saturating_add(timeout);
        let non_2xx = self.non_2xx_3xx.unwrap_or(0);
        let count = requests.saturating_add(socket_errors);
        let errors = socket_errors.saturating_add(non_2xx);
        let used = self.blocks.iter().find(|b| b.kind == "recorded");
        let uncorrected = self.blocks.iter().find(|b| b.kind == "uncorrected");
        let pct = |p: f64| used.and_then(|b| b.percentile(p));
        let stats = Stats {
            count,
            errors,
            error_pct: error_pct(errors, count),
            min_ms: used.and_then(|b| b.spectrum_at(0.0)),
            mean_ms: self.latency_row.map(|r| r[0]),
            max_ms: self.latency_row.map(|r| r[2]),
            p50_ms: pct(50.0),
            p90_ms: pct(90.0),
            p95_ms: pct(95.0).or_else(|| used.and_then(|b| b.spectrum_at(0.95))),
            p99_ms: pct(99.0),
            first_start_ms: None,
            last_end_ms: None,
            window_ms: self.duration_ms.map(|d| d.round() as i64),
            throughput_rps: self.requests_per_sec,
            bytes_received: self.read_bytes.map_or(0, |b| b.round() as u64),
            bytes_sent: 0,
        };
        if let Some(why) = super::summary::implausible(&stats, &limits.samples, "wrk report") {
            return Err((self.line, format!("impossible figure: {why}")));
        }
        let row = |r: Option<[f64; 4]>, unit: &str| {
            r.map(|[avg, stdev, max, within]| {
                json!({ format!("avg_{unit}"): avg, format!("stdev_{unit}"): stdev,
                        format!("max_{unit}"): max, "within_1_stdev_pct": within })
            })
        };
        let tool = if is_wrk2 { "wrk2" } else { "wrk" };
        let reported = json!({
            "tool": tool,
            "url": self.url,
            "test_duration": self.test_duration,
            "threads": self.threads,
            "connections": self.connections,
            "thread_calibration": if self.calibration.is_empty() { Value::Null } else { json!(self.calibration) },
            "thread_stats": {
                "latency": row(self.latency_row, "ms"),
                "requests_per_sec_per_thread": row(self.req_per_sec_row, "rps"),
            },
            "requests_completed": requests,
            "duration_ms": self.duration_ms,
            "bytes_read_printed": self.read_printed,
            "socket_errors": self.socket_errors.map(|[c, r, w, t]| json!({
                "connect": c, "read": r, "write": w, "timeout": t
            })),
            "non_2xx_or_3xx_responses": self.non_2xx_3xx,
            "count_rule": "completed requests + socket errors (connect + read + write + timeout)",
            "errors_rule": format!("{ERROR_RULE}: socket errors + \"Non-2xx or 3xx responses\" (wrk counts status > 399)"),
            "requests_per_sec": self.requests_per_sec,
            "transfer_per_sec": self.transfer_per_sec,
            "latency_used": if is_wrk2 {
                "recorded (corrected for coordinated omission: measured from the intended send time)"
            } else {
                "recorded (wrk: from the actual send time; time-outs excluded)"
            },
            "latency_distribution": used.map(LatencyBlock::to_json),
            "latency_distribution_uncorrected": uncorrected.map(LatencyBlock::to_json),
            "script_output": if self.script_output.is_empty() { Value::Null } else { json!(self.script_output) },
        });
        let label = self.url.as_deref().map_or_else(|| "/".to_owned(), url_path);
        Ok(one_label_run(
            tool,
            self.url.as_deref().map(url_without_scheme),
            label,
            stats,
            reported,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_as_wrk_prints_them() {
        assert_eq!(time_ms("44.68ms"), Some(44.68));
        assert_eq!(time_ms("850.00us"), Some(0.85));
        assert_eq!(time_ms("1.42s"), Some(1420.0));
        assert_eq!(time_ms("2.00m"), Some(120_000.0));
        assert_eq!(time_ms("12"), None);
        assert_eq!(count("1.04k"), Some(1040.0));
        assert_eq!(count("88.98"), Some(88.98));
        assert_eq!(bytes("84.88KB"), Some(84.88 * 1024.0));
        assert_eq!(bytes("512.00B"), Some(512.0));
        assert_eq!(bytes("19.81MB"), Some(19.81 * 1024.0 * 1024.0));
    }

    /// A wrk2 `-U` report (layout of giltene/wrk2's README "Example 1"; numbers invented,
    /// spectrum cut down): the corrected block is used, the uncorrected one kept.
    #[test]
    fn wrk2_uncorrected_block_is_kept_but_not_used() {
        let text = "\
Running 10s test @ http://127.0.0.1:80/index.html
  2 threads and 10 connections
  Thread calibration: mean lat.: 2000 usec, rate sampling interval: 10 msec
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.00ms    1.00ms  9.00ms   70.00%
    Req/Sec   510.00    100.00     1.00k    60.00%
  Latency Distribution (HdrHistogram - Recorded Latency)
 50.000%    4.00ms
 75.000%    5.00ms
 90.000%    6.00ms
 99.000%    8.00ms
 99.900%    9.00ms
 99.990%    9.00ms
 99.999%    9.00ms
100.000%    9.00ms

  Detailed Percentile spectrum:
       Value   Percentile   TotalCount 1/(1-Percentile)

       1.001     0.000000            1         1.00
       4.003     0.500000         5000         2.00
       7.007     0.950000         9500        20.00
       9.007     1.000000        10000          inf
#[Mean    =        4.000, StdDeviation   =        1.000]
#[Max     =        9.000, Total count    =        10000]
#[Buckets =           27, SubBuckets     =         2048]
----------------------------------------------------------

  Latency Distribution (HdrHistogram - Uncorrected Latency (measured without taking delayed starts into account))
 50.000%    2.00ms
 75.000%    2.50ms
 90.000%    3.00ms
 99.000%    4.00ms
 99.900%    4.50ms
 99.990%    4.50ms
 99.999%    4.50ms
100.000%    4.50ms

  Detailed Percentile spectrum:
       Value   Percentile   TotalCount 1/(1-Percentile)

       0.501     0.000000            1         1.00
       2.003     0.500000         5000         2.00
       3.503     0.950000         9500        20.00
       4.503     1.000000        10000          inf
#[Mean    =        2.000, StdDeviation   =        0.500]
#[Max     =        4.500, Total count    =        10000]
#[Buckets =           27, SubBuckets     =         2048]
----------------------------------------------------------
  10000 requests in 10.00s, 3.30MB read
Requests/sec:   1000.00
Transfer/sec:    338.00KB
";
        let runs = parse(text.as_bytes(), "t").expect("parses");
        assert_eq!(runs.len(), 1);
        let run = &runs[0];
        assert_eq!(run.tool, "wrk2");
        let o = &run.data.overall;
        assert_eq!(
            (o.count, o.errors, o.min_ms, o.mean_ms, o.max_ms),
            (10000, 0, Some(1.001), Some(4.0), Some(9.0))
        );
        assert_eq!(
            (o.p50_ms, o.p90_ms, o.p95_ms, o.p99_ms),
            (Some(4.0), Some(6.0), Some(7.007), Some(8.0))
        );
        let r = &run.data.reported;
        assert_eq!(
            r["latency_distribution_uncorrected"]["values_ms"]["99.000"],
            json!(4.0)
        );
        assert_eq!(
            r["latency_distribution_uncorrected"]["hdr_footer"]["mean"],
            json!(2.0)
        );
        assert_eq!(
            r["latency_distribution"]["hdr_footer"]["total_count"],
            json!(10000.0)
        );
        assert!(
            r["latency_used"]
                .as_str()
                .unwrap()
                .starts_with("recorded (corrected")
        );
    }
}
