//! SoapUI LoadTest statistics export → summary-only runs.
//!
//! Format (docs/formats.md#soapui; writers `ExportStatisticsAction.java` and
//! `LoadTestStatistics.java` in SmartBear/soapui): header
//! `Test Step,min,max,avg,last,cnt,tps,bytes,bps,err,rat`, one row per test step in step
//! order, then the total row named `TestCase:`. No quoting at all: a step name holding a
//! comma spreads over several fields, so the name is everything before the last ten
//! (numeric) fields. `min/max/last` are whole ms, `avg` and `tps` have two decimals,
//! `err` counts assertion errors, `rat` is the integer error percentage. The file holds no
//! run metadata (no time, no thread count, no duration).
//!
//! Mapping to [`Stats`], every figure "reported by SoapUI": per step (label) and for the
//! run (the `TestCase:` row — one *test-case iteration* per count, its times the
//! iteration's): count = `cnt`, errors = `err`, min/mean/max = `min/avg/max`, throughput =
//! `tps` (SoapUI's TPS, whose definition is a LoadTest option: `cnt / elapsed` or
//! `threads · 1000 / avg`), bytes received = `bytes`. SoapUI prints no percentiles and no
//! window: those stay empty. `last`, `bps` and `rat` are kept in `reported`.

use std::io::BufRead;

use serde_json::{Map, Value, json};

use super::summary::{error_pct, invalid, read_text};
use super::{IngestError, ParsedRun};
use crate::domain::runs::{LabelStats, RejectedRow, RunData, Stats};

const HEADER: &str = "Test Step,min,max,avg,last,cnt,tps,bytes,bps,err";

/// True when `prefix` starts with SoapUI's statistics header.
pub fn looks_like(prefix: &[u8]) -> bool {
    prefix.trim_ascii_start().starts_with(HEADER.as_bytes())
}

/// Reads a SoapUI LoadTest statistics export.
pub fn parse<R: BufRead>(input: R, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
    let text = read_text(input, source_name, "SoapUI statistics export")?;
    let mut lines = text.lines().enumerate();
    let header_ok = lines
        .next()
        .is_some_and(|(_, h)| h.trim_start_matches('\u{feff}').starts_with(HEADER));
    if !header_ok {
        return Err(invalid(
            source_name,
            1,
            format!("not a SoapUI statistics export: expected the header \"{HEADER},rat\""),
        ));
    }
    let mut labels = Vec::new();
    let mut total: Option<Stats> = None;
    let mut rows = Map::new();
    let mut rejected = Vec::new();
    for (i, line) in lines {
        let line_no = i as u64 + 1;
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() < 11 {
            rejected.push(RejectedRow {
                line: line_no,
                reason: format!("expected 11 fields, found {}", fields.len()),
            });
            continue;
        }
        let (name, nums) = fields.split_at(fields.len() - 10);
        let name = name.join(",");
        let parsed: Option<Vec<f64>> = nums.iter().map(|f| f.trim().parse().ok()).collect();
        let Some(n) = parsed else {
            rejected.push(RejectedRow {
                line: line_no,
                reason: format!("{name}: min…rat are not all numbers"),
            });
            continue;
        };
        let [min, max, avg, last, cnt, tps, bytes, bps, err, rat] = n[..] else {
            unreachable!("ten fields")
        };
        let counts = super::summary::whole_count(cnt, "cnt").and_then(|c| {
            Ok((
                c,
                super::summary::whole_count(err, "err")?,
                super::summary::whole_count(bytes, "bytes")?,
            ))
        });
        let (count, errors, bytes) = match counts {
            Ok(v) => v,
            Err(why) => {
                rejected.push(RejectedRow {
                    line: line_no,
                    reason: format!("{name}: {why}"),
                });
                continue;
            }
        };
        let stats = Stats {
            count,
            errors,
            error_pct: error_pct(errors, count),
            min_ms: Some(min),
            mean_ms: Some(avg),
            max_ms: Some(max),
            throughput_rps: Some(tps),
            bytes_received: bytes,
            ..Stats::default()
        };
        rows.insert(
            name.clone(),
            json!({"last_ms": last, "bps": bps, "rat_pct": rat, "tps": tps, "cnt": cnt, "err": err}),
        );
        if name == "TestCase:" {
            total = Some(stats);
        } else {
            labels.push(LabelStats {
                label: name,
                is_transaction: false,
                stats,
            });
        }
    }
    let Some(overall) = total else {
        return Err(invalid(
            source_name,
            1,
            "SoapUI statistics export without its \"TestCase:\" total row",
        ));
    };
    let reported = json!({
        "tool": "soapui",
        "file": "LoadTest statistics export",
        "overall_rule": "the TestCase: row (one count per test-case iteration)",
        "tps_rule": "SoapUI's TPS: cnt / elapsed, or threads * 1000 / avg (LoadTest option)",
        "rows": Value::Object(rows),
    });
    Ok(vec![ParsedRun {
        tool: "soapui".to_owned(),
        name_hint: None,
        data: RunData {
            overall,
            labels,
            rejected_rows: rejected.len() as u64,
            rejected,
            summary_only: true,
            reported,
            ..RunData::default()
        },
    }])
}
