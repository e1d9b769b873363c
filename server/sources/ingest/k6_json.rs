//! k6 `--out json=FILE` (newline-delimited JSON) → samples.
//!
//! Format (docs/formats.md#k6-points-json-and-csv; writer `internal/output/json/wrapper.go` in grafana/k6): one
//! JSON object per line, `{"type":"Metric",…}` once per metric before its first point,
//! then `{"type":"Point","metric":NAME,"data":{"time":RFC3339,"value":N,"tags":{…}|null}}`.
//! Key order and tag order vary between k6 versions and lines; time offsets vary (`Z`,
//! `+08:00`, 0–9 fraction digits) and are converted to UTC. Requests are rebuilt from
//! their points as [`super::k6_points`] describes (definitions of every figure there).
//!
//! A line that is not a JSON object with a `type`, or a point without a readable time or
//! value, is rejected with its line number; `tags: null` is an empty tag set.

use std::io::BufRead;

use serde::Deserialize;
use serde_json::{Value, json};

use super::k6_points::{Regrouper, Tags, is_request_metric, parse_rfc3339_ns};
use super::{IngestError, ParsedRun};
use crate::domain::runs::RunLimits;

/// Only what is needed to decide whether a line matters (no allocation).
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    metric: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct PointLine {
    data: PointData,
}

#[derive(Deserialize)]
struct PointData {
    time: String,
    value: Value,
    #[serde(default)]
    tags: Option<serde_json::Map<String, Value>>,
}

/// Reads one k6 NDJSON file.
pub fn parse<R: BufRead>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let mut g = Regrouper::with_limits(limits);
    let mut raw = Vec::with_capacity(1024);
    let mut line_no = 0u64;
    let mut metric_definitions = 0u64;
    loop {
        raw.clear();
        let n = input
            .read_until(b'\n', &mut raw)
            .map_err(|source| IngestError::Io {
                source_name: source_name.to_owned(),
                source,
            })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let line = raw.trim_ascii();
        if line.is_empty() {
            continue;
        }
        let head: Head = match serde_json::from_slice(line) {
            Ok(h) => h,
            Err(e) => {
                g.reject(line_no, format!("not a JSON object: {e}"));
                continue;
            }
        };
        match head.kind.as_deref() {
            Some("Metric") => {
                metric_definitions += 1;
                continue;
            }
            Some("Point") => {}
            other => {
                g.reject(
                    line_no,
                    format!("\"type\" is {other:?}, expected \"Metric\" or \"Point\""),
                );
                continue;
            }
        }
        let Some(metric) = head.metric else {
            g.reject(line_no, "Point without \"metric\"");
            continue;
        };
        g.count_point(&metric);
        if !is_request_metric(&metric) && metric != "vus" {
            continue;
        }
        let point: PointLine = match serde_json::from_slice(line) {
            Ok(p) => p,
            Err(e) => {
                g.reject(line_no, format!("{metric} point unreadable: {e}"));
                continue;
            }
        };
        let Some(time_ns) = parse_rfc3339_ns(&point.data.time) else {
            g.reject(
                line_no,
                format!("{metric} point: time {:?} is not RFC 3339", point.data.time),
            );
            continue;
        };
        let Some(value) = point.data.value.as_f64() else {
            g.reject(
                line_no,
                format!("{metric} point: value {} is not a number", point.data.value),
            );
            continue;
        };
        if metric == "vus" {
            g.vus(time_ns, value);
            continue;
        }
        let mut tags: Tags = point
            .data
            .tags
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(k, v)| match v {
                Value::String(s) if !s.is_empty() => Some((k, s)),
                Value::Null => None,
                Value::String(_) => None,
                other => Some((k, other.to_string())),
            })
            .collect();
        tags.sort_unstable();
        g.point(line_no, &metric, time_ns, value, tags);
    }
    let (data, samples) = g.finish(
        "k6 --out json",
        json!({ "lines": line_no, "metric_definitions": metric_definitions }),
    );
    if samples == 0
        && let Some(first) = data.rejected.first()
    {
        return Err(IngestError::Invalid {
            source_name: source_name.to_owned(),
            line: first.line,
            message: format!(
                "no request could be read: {} lines rejected; the first: {}",
                data.rejected_rows, first.reason
            ),
        });
    }
    Ok(vec![ParsedRun {
        tool: "k6".to_owned(),
        name_hint: None,
        data,
    }])
}
