//! k6 `--out csv=FILE` → samples.
//!
//! Format (docs/formats.md#k6-points-json-and-csv; writer `internal/output/csv/output.go` in grafana/k6): a header
//! `metric_name,timestamp,metric_value,<system tags, sorted>,extra_tags[,metadata]`, then
//! one row per point. Columns are mapped by header name (the tag columns change with
//! `--system-tags`); `extra_tags` holds `k=v` pairs joined with `&`. `timestamp` follows
//! `K6_CSV_TIME_FORMAT`: integers are read by magnitude (≤ 11 digits seconds — the
//! default, **1 s resolution** — 12–14 ms, 15–17 µs, more ns), text as RFC 3339.
//! Requests are rebuilt from their points as [`super::k6_points`] describes; with
//! second-resolution stamps a request's start (stamp − duration) is only known to the
//! second, so per-second buckets and the run window may shift by up to 1 s against the
//! NDJSON output of the same run (statistics of response times do not).

use std::io::BufRead;

use csv::{ReaderBuilder, StringRecord};
use serde_json::json;

use super::k6_points::{Regrouper, Tags, is_request_metric, parse_rfc3339_ns};
use super::{IngestError, ParsedRun};
use crate::domain::runs::RunLimits;

/// Reads one k6 CSV file.
pub fn parse<R: BufRead>(
    input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let (input, record_end) = super::bounded::RecordCap::new(input, limits.max_line_bytes);
    let mut rdr = ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(1 << 16)
        .from_reader(input);
    let invalid = |line: u64, message: String| IngestError::Invalid {
        source_name: source_name.to_owned(),
        line,
        message,
    };
    let mut header = StringRecord::new();
    let read = rdr
        .read_record(&mut header)
        .map_err(|e| invalid(1, e.to_string()))?;
    let col = |name: &str| header.iter().position(|h| h.trim() == name);
    let (Some(c_metric), Some(c_time), Some(c_value)) =
        (col("metric_name"), col("timestamp"), col("metric_value"))
    else {
        return Err(invalid(
            1,
            "not a k6 CSV: the header must name metric_name, timestamp and metric_value".into(),
        ));
    };
    if !read {
        return Err(invalid(1, "empty file".into()));
    }
    let c_extra = col("extra_tags");
    let tag_cols: Vec<(usize, String)> = header
        .iter()
        .enumerate()
        .filter(|&(i, h)| {
            ![c_metric, c_time, c_value].contains(&i) && Some(i) != c_extra && h != "metadata"
        })
        .map(|(i, h)| (i, h.to_owned()))
        .collect();
    let fields = header.len();
    let mut g = Regrouper::with_limits(limits);
    let mut record = StringRecord::new();
    loop {
        let line = rdr.position().line();
        match rdr.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => record_end.mark(),
            Err(e) => {
                g.reject(line, format!("unreadable row: {e}"));
                if record_end.over(limits.max_line_bytes) {
                    break;
                }
                continue;
            }
        }
        if record.len() != fields {
            g.reject(
                line,
                format!(
                    "expected {fields} fields as in the header, found {} (row cut off or damaged)",
                    record.len()
                ),
            );
            continue;
        }
        let metric = &record[c_metric];
        g.count_point(metric);
        if !is_request_metric(metric) && metric != "vus" {
            continue;
        }
        let Some(time_ns) = timestamp_ns(&record[c_time]) else {
            g.reject(
                line,
                format!(
                    "timestamp {:?} is neither a unix time nor RFC 3339",
                    &record[c_time]
                ),
            );
            continue;
        };
        let Ok(value) = record[c_value].trim().parse::<f64>() else {
            g.reject(
                line,
                format!("metric_value {:?} is not a number", &record[c_value]),
            );
            continue;
        };
        if metric == "vus" {
            g.vus(time_ns, value);
            continue;
        }
        let mut tags: Tags = tag_cols
            .iter()
            .filter(|(i, _)| !record[*i].is_empty())
            .map(|(i, name)| (name.clone(), record[*i].to_owned()))
            .collect();
        if let Some(c) = c_extra {
            for pair in record[c].split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                if !v.is_empty() {
                    tags.push((k.to_owned(), v.to_owned()));
                }
            }
        }
        tags.sort_unstable();
        let metric = metric.to_owned();
        g.point(line, &metric, time_ns, value, tags);
    }
    let lines = rdr.position().line();
    let (data, samples) = g.finish("k6 --out csv", json!({ "lines": lines }));
    if samples == 0
        && let Some(first) = data.rejected.first()
    {
        return Err(invalid(
            first.line,
            format!(
                "no request could be read: {} rows rejected; the first: {}",
                data.rejected_rows, first.reason
            ),
        ));
    }
    Ok(vec![ParsedRun {
        tool: "k6".to_owned(),
        name_hint: None,
        data,
    }])
}

/// A `timestamp` field → unix ns (see the module docs for the units).
fn timestamp_ns(s: &str) -> Option<i64> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        let v: i64 = s.parse().ok()?;
        let scale = match s.len() {
            0..=11 => 1_000_000_000,
            12..=14 => 1_000_000,
            15..=17 => 1_000,
            _ => 1,
        };
        return v.checked_mul(scale);
    }
    parse_rfc3339_ns(s)
}
