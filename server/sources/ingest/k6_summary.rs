//! k6 end-of-test summaries → summary-only runs: `--summary-export=FILE` and the object
//! k6 passes to `handleSummary(data)` (saved with `JSON.stringify(data)`).
//!
//! Formats (docs/formats.md#k6-summaries; writers `internal/js/summary-wrapper.js` and
//! `internal/lib/summary/` in grafana/k6):
//! - export: `{"root_group":{…groups/checks as maps…},"metrics":{NAME:{flattened
//!   values, "thresholds":{EXPR: true = FAILED}}}}` — note the inversion;
//! - handleSummary: `{"root_group":{…as arrays…},"options":…,"state":{"testRunDurationMs"},
//!   "metrics":{NAME:{"type","contains","values":{…},"thresholds":{EXPR:{"ok":bool}}}}}`.
//!
//! A summary holds no per-request data, so the run is **summary-only**: every figure is
//! "reported by k6", one label (`all HTTP requests`), and k6's percentiles are k6's own:
//! its trend sink interpolates linearly between the closest ranks (value at rank
//! p · (n − 1), 0-based), not harrier's nearest rank, so they may lie between two sampled
//! values. Mapping to [`Stats`]: count = `http_reqs.count`; errors = `http_req_failed`
//! passes (k6's rate counts *failures* as passes); min/mean/max = `http_req_duration`
//! min/avg/max; p50 = `med` (or `p(50)`), p90/p95/p99 = `p(90)`/`p(95)`/`p(99)` when the
//! script's `summaryTrendStats` asked for them; throughput = `http_reqs.rate`; window =
//! `state.testRunDurationMs` (handleSummary only); bytes = `data_received` / `data_sent`.
//! [`RunData::reported`] keeps every metric as k6 wrote it, the thresholds normalised to
//! `{"passed": bool}` per expression, and every check (group path, passes, fails).

use std::io::Read;

use serde_json::{Map, Value, json};

use super::{IngestError, ParsedRun};
use crate::domain::runs::{LabelStats, RunData, RunLimits, Stats};

/// k6's percentile rule, stored beside its figures.
pub const PERCENTILE_RULE: &str =
    "k6: linear interpolation between closest ranks (value at 0-based rank p·(n−1))";

/// Reads one k6 summary (export or handleSummary data).
pub fn parse<R: Read>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    parse_with(input, source_name, &RunLimits::default())
}

/// [`parse`], figures that cannot be true under `limits` (see
/// [`super::summary::implausible`]; negative or fractional counts too) refused at the line
/// of the metric that holds them.
pub fn parse_with<R: Read>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let invalid = |message: String| IngestError::Invalid {
        source_name: source_name.to_owned(),
        line: 1,
        message,
    };
    let mut text = Vec::new();
    input
        .read_to_end(&mut text)
        .map_err(|source| IngestError::Io {
            source_name: source_name.to_owned(),
            source,
        })?;
    let doc: Value = serde_json::from_slice(&text).map_err(|e| IngestError::Invalid {
        source_name: source_name.to_owned(),
        line: e.line() as u64,
        message: format!("not JSON: {e}"),
    })?;
    let Some(metrics) = doc.get("metrics").and_then(Value::as_object) else {
        return Err(invalid(
            "not a k6 summary: no \"metrics\" object (expected --summary-export output or handleSummary data)".into(),
        ));
    };
    let handle_summary = doc.get("state").is_some() || doc.get("options").is_some();
    // Flattened values of each metric, as the export writes them.
    let values = |name: &str| -> Option<Map<String, Value>> {
        let m = metrics.get(name)?.as_object()?;
        let mut v = match m.get("values").and_then(Value::as_object) {
            Some(values) => values.clone(),
            None => m.clone(),
        };
        v.remove("thresholds");
        Some(v)
    };
    let num = |m: &Option<Map<String, Value>>, key: &str| m.as_ref()?.get(key)?.as_f64();
    let reqs = values("http_reqs");
    let Some(count) = num(&reqs, "count") else {
        return Err(invalid(
            "k6 summary without http_reqs.count: the test made no HTTP requests".into(),
        ));
    };
    let text_str = String::from_utf8_lossy(&text);
    let at = |key: &str| super::summary::json_line(&text_str, key);
    let whole = |v: f64, what: &str, key: &str| {
        if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 2f64.powi(63) {
            Ok(v as u64)
        } else {
            Err(IngestError::Invalid {
                source_name: source_name.to_owned(),
                line: at(key),
                message: format!("impossible figure: {what} {v} is not a count"),
            })
        }
    };
    let count = whole(count, "http_reqs count", "http_reqs")?;
    let failed = values("http_req_failed");
    let errors = match num(&failed, "passes") {
        Some(v) => Some(whole(v, "http_req_failed passes", "http_req_failed")?),
        None => None,
    };
    let dur = values("http_req_duration");
    let window_ms = doc
        .pointer("/state/testRunDurationMs")
        .and_then(Value::as_f64)
        .map(|ms| ms.round() as i64);
    let stats = Stats {
        count,
        errors: errors.unwrap_or(0),
        error_pct: errors
            .filter(|_| count > 0)
            .map(|e| e as f64 / count as f64 * 100.0),
        min_ms: num(&dur, "min"),
        mean_ms: num(&dur, "avg"),
        max_ms: num(&dur, "max"),
        p50_ms: num(&dur, "med").or(num(&dur, "p(50)")),
        p90_ms: num(&dur, "p(90)"),
        p95_ms: num(&dur, "p(95)"),
        p99_ms: num(&dur, "p(99)"),
        first_start_ms: None,
        last_end_ms: None,
        window_ms,
        throughput_rps: num(&reqs, "rate"),
        bytes_received: num(&values("data_received"), "count").unwrap_or(0.0) as u64,
        bytes_sent: num(&values("data_sent"), "count").unwrap_or(0.0) as u64,
    };
    if let Some(why) = super::summary::implausible(&stats, &limits.samples, "all HTTP requests") {
        let key = if why.contains("failures") || why.contains("error percentage") {
            "http_req_failed"
        } else if why.contains("duration") {
            "testRunDurationMs"
        } else if why.contains("response time")
            || why.contains("percentile")
            || why.contains("mean")
            || why.contains("min ")
        {
            "http_req_duration"
        } else {
            "http_reqs"
        };
        return Err(IngestError::Invalid {
            source_name: source_name.to_owned(),
            line: at(key),
            message: format!("impossible figure: {why}"),
        });
    }

    let mut thresholds = Map::new();
    let mut flat = Map::new();
    for (name, m) in metrics {
        if let Some(v) = values(name) {
            flat.insert(name.clone(), Value::Object(v));
        }
        if let Some(t) = m.get("thresholds").and_then(Value::as_object) {
            let normalised: Map<String, Value> = t
                .iter()
                .map(|(expr, v)| {
                    // Export: true = the threshold FAILED; handleSummary: {"ok": bool}.
                    let passed = match v {
                        Value::Bool(failed) => Some(!failed),
                        other => other.get("ok").and_then(Value::as_bool),
                    };
                    (expr.clone(), json!({ "passed": passed }))
                })
                .collect();
            thresholds.insert(name.clone(), Value::Object(normalised));
        }
    }
    let mut checks = Vec::new();
    if let Some(root) = doc.get("root_group") {
        collect_checks(root, &mut checks);
    }
    let thresholds_failed = thresholds
        .values()
        .flat_map(|t| t.as_object().into_iter().flat_map(|m| m.values()))
        .filter(|v| v["passed"] == Value::Bool(false))
        .count();
    let reported = json!({
        "tool": "k6",
        "input": if handle_summary { "handleSummary data" } else { "--summary-export" },
        "percentile_rule": PERCENTILE_RULE,
        "errors_rule": "http_req_failed passes (k6 counts failed requests as passes of this rate)",
        "http_req_failed_rate": num(&failed, "value").or(num(&failed, "rate")),
        "test_run_duration_ms": doc.pointer("/state/testRunDurationMs"),
        "summary_trend_stats": doc.pointer("/options/summaryTrendStats"),
        "thresholds": thresholds,
        "thresholds_failed": thresholds_failed,
        "checks": checks,
        "metrics": flat,
    });
    Ok(vec![ParsedRun {
        tool: "k6".to_owned(),
        name_hint: None,
        data: RunData {
            overall: stats.clone(),
            labels: vec![LabelStats {
                label: "all HTTP requests".to_owned(),
                is_transaction: false,
                stats,
            }],
            summary_only: true,
            reported,
            ..RunData::default()
        },
    }])
}

/// Every check of a group tree (maps in the export, arrays in handleSummary data).
fn collect_checks(group: &Value, out: &mut Vec<Value>) {
    let items = |v: Option<&Value>| -> Vec<Value> {
        match v {
            Some(Value::Object(m)) => m.values().cloned().collect(),
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        }
    };
    for c in items(group.get("checks")) {
        out.push(json!({
            "path": c.get("path"),
            "name": c.get("name"),
            "passes": c.get("passes"),
            "fails": c.get("fails"),
        }));
    }
    for g in items(group.get("groups")) {
        collect_checks(&g, out);
    }
}
