//! Artillery 2.x `--output` JSON report → summary-only runs.
//!
//! Format (docs/formats.md#artillery; writers `@artilleryio/int-core/lib/ssms.js` and
//! `packages/artillery/lib/cmds/run.js` in artilleryio/artillery): `{"aggregate": {…},
//! "intermediate": [{…}, …]}`, each with `counters` (dotted free-form names:
//! `http.requests`, `http.codes.200`, `errors.ETIMEDOUT`,
//! `plugins.metrics-by-endpoint./path.codes.200`), `rates`, `summaries` (`min, max, count,
//! mean, p50, median, p75, p90, p95, p99, p999`) and epoch-ms `firstCounterAt` /
//! `lastCounterAt`. Artillery 1.x reports (`aggregate.latency`, no `counters`) are refused.
//!
//! Mapping to [`Stats`], every figure "reported by Artillery": count = `http.requests`;
//! errors = Σ `errors.*` (Artillery's errors: requests that got no response) + Σ
//! `http.codes.*` with a code ≥ 400 — Artillery has no per-request success flag, so
//! harrier's one rule for such tools applies ([`ERROR_RULE`]); min/mean/max
//! and p50/p90/p95/p99 = the `http.response_time` summary (ms; Artillery's rule: a DDSketch
//! estimate with 1 % relative accuracy, rounded to one decimal); first start =
//! `firstCounterAt`; window = `lastCounterAt − firstCounterAt`; throughput =
//! `rates.http.request_rate` as reported; bytes received = `http.downloaded_bytes`.
//! One label per endpoint (sorted by path) when the `metrics-by-endpoint` plugin wrote them: count = Σ its
//! `codes.*` + Σ its `errors.*`, errors = Σ its `errors.*` + its `codes.*` ≥ 400, times from
//! `plugins.metrics-by-endpoint.response_time.<path>`. Endpoint paths may hold dots, so a
//! counter name is split at its last `.codes.` / `.errors.`.

use std::io::BufRead;

use serde_json::{Map, Value, json};

use super::summary::{
    ERROR_RULE, error_pct, error_responses, invalid, is_error_status_text, num, parse_json,
    read_text, uint,
};
use super::{IngestError, ParsedRun};
use crate::domain::runs::{LabelStats, RunData, Stats};

/// Artillery's percentile rule, stored beside its summaries.
pub const PERCENTILE_RULE: &str =
    "Artillery: DDSketch estimate (1 % relative accuracy), rounded to 1 decimal";

const ENDPOINT: &str = "plugins.metrics-by-endpoint.";
const ENDPOINT_TIME: &str = "plugins.metrics-by-endpoint.response_time.";

/// True when `prefix` is an Artillery 2.x report (`{"aggregate":{"counters"`).
pub fn looks_like(prefix: &[u8]) -> bool {
    let compact: Vec<u8> = prefix
        .trim_ascii_start()
        .iter()
        .take(256)
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    compact.starts_with(br#"{"aggregate":{"counters""#)
}

/// Reads an Artillery 2.x JSON report.
pub fn parse<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    let text = read_text(input, source_name, "Artillery JSON report")?;
    let v = parse_json(&text, source_name, "Artillery report")?;
    let agg = &v["aggregate"];
    let Some(counters) = agg["counters"].as_object() else {
        let why = if agg.get("latency").is_some() {
            "an Artillery 1.x report (aggregate.latency): only Artillery 2.x reports (aggregate.counters) are read"
        } else {
            "not an Artillery report: expected \"aggregate\" with \"counters\""
        };
        return Err(invalid(source_name, 1, why));
    };
    let counter = |k: &str| uint(counters.get(k)).unwrap_or(0);
    let sum_prefix = |p: &str| -> u64 {
        counters
            .iter()
            .filter(|(k, _)| k.starts_with(p))
            .filter_map(|(_, n)| uint(Some(n)))
            .sum()
    };
    let summaries = agg["summaries"].as_object();
    let times = |s: Option<&Value>, st: &mut Stats| {
        let Some(s) = s else { return };
        let f = |k: &str| num(s.get(k));
        st.min_ms = f("min");
        st.mean_ms = f("mean");
        st.max_ms = f("max");
        st.p50_ms = f("p50").or_else(|| f("median"));
        st.p90_ms = f("p90");
        st.p95_ms = f("p95");
        st.p99_ms = f("p99");
    };
    let first = num(agg.get("firstCounterAt")).map(|v| v as i64);
    let last = num(agg.get("lastCounterAt")).map(|v| v as i64);
    let count = counter("http.requests");
    let transport_errors = sum_prefix("errors.");
    let status_codes: Map<String, Value> = counters
        .iter()
        .filter_map(|(k, n)| Some((k.strip_prefix("http.codes.")?.to_owned(), n.clone())))
        .collect();
    let error_responses = error_responses(&status_codes);
    let errors = (transport_errors + error_responses).min(count);
    let mut overall = Stats {
        count,
        errors,
        error_pct: error_pct(errors, count),
        first_start_ms: first,
        window_ms: first.zip(last).map(|(a, b)| b - a),
        throughput_rps: num(agg["rates"].get("http.request_rate")),
        bytes_received: counter("http.downloaded_bytes"),
        ..Stats::default()
    };
    times(
        summaries.and_then(|s| s.get("http.response_time")),
        &mut overall,
    );

    // Endpoints, sorted by path (the JSON object's key order is not kept).
    let mut endpoints: Vec<(String, u64, u64)> = Vec::new();
    for (k, n) in counters {
        let Some(rest) = k.strip_prefix(ENDPOINT) else {
            continue;
        };
        let (path, is_error) = match (rest.rfind(".codes."), rest.rfind(".errors.")) {
            (Some(c), Some(e)) if e > c => (&rest[..e], true),
            (Some(c), _) => (
                &rest[..c],
                is_error_status_text(&rest[c + ".codes.".len()..]),
            ),
            (None, Some(e)) => (&rest[..e], true),
            (None, None) => continue,
        };
        let n = uint(Some(n)).unwrap_or(0);
        let entry = match endpoints.iter_mut().position(|(p, _, _)| p == path) {
            Some(i) => &mut endpoints[i],
            None => {
                endpoints.push((path.to_owned(), 0, 0));
                endpoints.last_mut().expect("just pushed")
            }
        };
        entry.1 += n;
        if is_error {
            entry.2 += n;
        }
    }
    endpoints.sort_by(|a, b| a.0.cmp(&b.0));
    let mut labels: Vec<LabelStats> = endpoints
        .into_iter()
        .map(|(path, count, errors)| {
            let mut st = Stats {
                count,
                errors,
                error_pct: error_pct(errors, count),
                ..Stats::default()
            };
            times(
                summaries.and_then(|s| s.get(&format!("{ENDPOINT_TIME}{path}"))),
                &mut st,
            );
            LabelStats {
                label: path,
                is_transaction: false,
                stats: st,
            }
        })
        .collect();
    if labels.is_empty() {
        labels.push(LabelStats {
            label: "http".to_owned(),
            is_transaction: false,
            stats: overall.clone(),
        });
    }
    let mut reported = Map::new();
    reported.insert("tool".into(), json!("artillery"));
    reported.insert("percentile_rule".into(), json!(PERCENTILE_RULE));
    reported.insert(
        "errors_rule".into(),
        json!(format!(
            "{ERROR_RULE}: Σ errors.* counters (requests without a response) + Σ http.codes.* with code >= 400"
        )),
    );
    reported.insert("transport_errors".into(), json!(transport_errors));
    reported.insert("error_responses".into(), json!(error_responses));
    reported.insert("status_codes".into(), Value::Object(status_codes));
    reported.insert("counters".into(), json!(counters));
    reported.insert("rates".into(), agg["rates"].clone());
    reported.insert("summaries".into(), agg["summaries"].clone());
    reported.insert(
        "intermediate_periods".into(),
        json!(v["intermediate"].as_array().map_or(0, Vec::len)),
    );
    Ok(vec![ParsedRun {
        tool: "artillery".to_owned(),
        name_hint: None,
        data: RunData {
            overall,
            labels,
            summary_only: true,
            reported: Value::Object(reported),
            ..RunData::default()
        },
    }])
}
