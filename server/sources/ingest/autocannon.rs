//! autocannon `--json` output → summary-only runs.
//!
//! Format (docs/formats.md#autocannon; writer `lib/run.js` / `lib/histUtil.js` in mcollina/autocannon):
//! one JSON object with `url`, `connections`, `duration` (s), `start`/`finish` (ISO),
//! `errors` (includes `timeouts`), `non2xx`, `1xx`…`5xx`, `statusCodeStats`, and three
//! distributions: `latency` (per request, ms, from an HdrHistogram), `requests` and
//! `throughput` (per-*second* samples of requests and bytes, so `requests.p50` is a median
//! rate, not a latency). Percentile keys write the decimal point as `_` (`p97_5`).
//!
//! Mapping to [`Stats`], every figure "reported by autocannon": count = `requests.total`
//! (completed responses, non-2xx included) + `errors` (autocannon's own: socket errors
//! and time-outs, never in `requests.total`); errors = `errors` + `4xx` + `5xx` —
//! harrier's one rule for tools without a per-request success flag ([`ERROR_RULE`]: a
//! transport error or a status ≥ 400; autocannon's own `non2xx` also counts 1xx and 3xx,
//! kept in `reported`); min/mean/max =
//! `latency.min/mean/max`; p50/p90/p99 = `latency.p50/p90/p99` (autocannon's rule:
//! HdrHistogram `getValueAtPercentile`, whole ms); p95 is not reported (`p97_5` is; kept in
//! `reported`); first start = `start`; window = `duration`; throughput =
//! `requests.average` (mean of the per-second samples, autocannon's "Req/Sec Avg");
//! bytes received = `throughput.total`. Label: the URL's path.

use std::io::BufRead;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::summary::{
    ERROR_RULE, error_pct, error_responses, invalid, num, one_label_run, parse_json, read_text,
    uint, url_path, url_without_scheme,
};
use super::{IngestError, ParsedRun};
use crate::domain::runs::Stats;

/// autocannon's percentile rule, stored beside its latency percentiles.
pub const PERCENTILE_RULE: &str =
    "autocannon: HdrHistogram getValueAtPercentile over completed responses (whole ms)";

/// True when `prefix` is an autocannon JSON result: an object whose first keys are
/// `"url"` and `"connections"` and which has a `"latency":{"average"` distribution.
pub fn looks_like(prefix: &[u8]) -> bool {
    let compact: Vec<u8> = prefix
        .trim_ascii_start()
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    let has = |k: &[u8]| compact.windows(k.len()).any(|w| w == k);
    compact.starts_with(br#"{"url":"#)
        && has(br#""connections":"#)
        && has(br#""latency":{"average""#)
}

/// Reads one autocannon `--json` result.
pub fn parse<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    let text = read_text(input, source_name, "autocannon JSON result")?;
    let v = parse_json(&text, source_name, "autocannon")?;
    let lat = &v["latency"];
    let Some(responses) = uint(v["requests"].get("total")).filter(|_| lat.is_object()) else {
        return Err(invalid(
            source_name,
            1,
            "not an autocannon JSON result: expected \"latency\" and \"requests.total\"",
        ));
    };
    let transport_errors = uint(v.get("errors")).unwrap_or(0);
    let count = responses + transport_errors;
    // `4xx` + `5xx` when written; else the per-code table (`statusCodeStats`).
    let status_codes: Map<String, Value> = v["statusCodeStats"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(code, s)| (code.clone(), s.get("count").cloned().unwrap_or(Value::Null)))
                .collect()
        })
        .unwrap_or_default();
    let error_responses = match (uint(v.get("4xx")), uint(v.get("5xx"))) {
        (None, None) => error_responses(&status_codes),
        (c4, c5) => c4.unwrap_or(0) + c5.unwrap_or(0),
    };
    let errors = (transport_errors + error_responses).min(count);
    let l = |k: &str| num(lat.get(k));
    let start_ms = v["start"]
        .as_str()
        .and_then(|s| OffsetDateTime::parse(s, &Rfc3339).ok())
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64);
    let stats = Stats {
        count,
        errors,
        error_pct: error_pct(errors, count),
        min_ms: l("min"),
        mean_ms: l("mean").or_else(|| l("average")),
        max_ms: l("max"),
        p50_ms: l("p50"),
        p90_ms: l("p90"),
        p95_ms: l("p95"),
        p99_ms: l("p99"),
        first_start_ms: start_ms,
        last_end_ms: None,
        window_ms: num(v.get("duration")).map(|s| (s * 1000.0).round() as i64),
        throughput_rps: num(v["requests"].get("average")),
        bytes_received: uint(v["throughput"].get("total")).unwrap_or(0),
        bytes_sent: 0,
    };
    let url = v["url"].as_str().map(str::to_owned);
    let mut reported = Map::new();
    reported.insert("tool".into(), json!("autocannon"));
    reported.insert("percentile_rule".into(), json!(PERCENTILE_RULE));
    reported.insert(
        "count_rule".into(),
        json!("requests.total (responses) + errors (socket errors and time-outs)"),
    );
    reported.insert(
        "errors_rule".into(),
        json!(format!(
            "{ERROR_RULE}: autocannon's errors (time-outs included) + 4xx + 5xx"
        )),
    );
    reported.insert("transport_errors".into(), json!(transport_errors));
    reported.insert("error_responses".into(), json!(error_responses));
    reported.insert("status_codes".into(), Value::Object(status_codes));
    if let Value::Object(m) = v {
        reported.extend(m);
    }
    Ok(vec![one_label_run(
        "autocannon",
        url.as_deref().map(url_without_scheme),
        url.as_deref().map_or_else(|| "/".to_owned(), url_path),
        stats,
        Value::Object(reported),
    )])
}
