//! `harrier-seed`: a tiny JSON format for summary-only runs built from published figures
//! (a benchmark report, a blog post, a vendor's sizing guide), so they can be compared and
//! trended like imported runs.
//!
//! ```json
//! {"format": "harrier-seed", "version": 1, "scenario": "camel-rest-route",
//!  "source": "where the figures were published",
//!  "runs": [{"name": "before tuning", "tool": "reported", "tags": {"step": "1"},
//!            "notes": "…", "started_at_ms": null,
//!            "overall": {"throughput_rps": 550, "mean_ms": 17}}]}
//! ```
//!
//! `overall` takes any of `count`, `errors`, `mean_ms`, `min_ms`, `max_ms`, `p50_ms`,
//! `p90_ms`, `p95_ms`, `p99_ms`, `throughput_rps`; what is absent stays unknown ("–"),
//! never 0. Runs are summary-only: figures "as reported", no per-second data, so
//! comparisons give changes without verdicts. Runs keep the file's order.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::domain::runs::NewRun;
use crate::domain::runs::{RunData, Stats};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedFile {
    format: String,
    version: u32,
    scenario: Option<String>,
    source: Option<String>,
    runs: Vec<SeedRun>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedRun {
    name: String,
    #[serde(default = "reported")]
    tool: String,
    #[serde(default)]
    tags: BTreeMap<String, String>,
    notes: Option<String>,
    started_at_ms: Option<i64>,
    overall: SeedStats,
}

fn reported() -> String {
    "reported".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedStats {
    count: Option<u64>,
    errors: Option<u64>,
    mean_ms: Option<f64>,
    min_ms: Option<f64>,
    max_ms: Option<f64>,
    p50_ms: Option<f64>,
    p90_ms: Option<f64>,
    p95_ms: Option<f64>,
    p99_ms: Option<f64>,
    throughput_rps: Option<f64>,
}

/// One run read from a seed file, ready for [`crate::store::Store::insert_runs`];
/// `notes` goes to the run's notes afterwards (`RunPatch`).
#[derive(Debug)]
pub struct SeedRunData {
    pub run: NewRun,
    pub data: RunData,
    pub notes: Option<String>,
}

/// Why a seed file was refused.
#[derive(Debug, thiserror::Error)]
#[error("harrier-seed: {0}")]
pub struct SeedError(String);

/// Reads a `harrier-seed` file; `imported_at_ms` is the import time (run i gets
/// `imported_at_ms + i`, so the file's order is the runs' order).
pub fn parse(text: &str, source: &str, imported_at_ms: i64) -> Result<Vec<SeedRunData>, SeedError> {
    let file: SeedFile = serde_json::from_str(text).map_err(|e| {
        SeedError(format!(
            "{source}: line {}, column {}: {e}",
            e.line(),
            e.column()
        ))
    })?;
    if file.format != "harrier-seed" || file.version != 1 {
        return Err(SeedError(format!(
            "{source}: expected \"format\": \"harrier-seed\", \"version\": 1"
        )));
    }
    let mut out = Vec::new();
    for (i, r) in file.runs.into_iter().enumerate() {
        let s = r.overall;
        let count = s.count.unwrap_or(0);
        let errors = s.errors.unwrap_or(0);
        let stats = Stats {
            count,
            errors,
            error_pct: (s.count.is_some() && count > 0)
                .then(|| errors as f64 * 100.0 / count as f64),
            min_ms: s.min_ms,
            mean_ms: s.mean_ms,
            max_ms: s.max_ms,
            p50_ms: s.p50_ms,
            p90_ms: s.p90_ms,
            p95_ms: s.p95_ms,
            p99_ms: s.p99_ms,
            first_start_ms: r.started_at_ms,
            throughput_rps: s.throughput_rps,
            ..Stats::default()
        };
        let data = RunData {
            overall: stats,
            summary_only: true,
            reported: serde_json::json!({ "source": file.source }),
            ..RunData::default()
        };
        out.push(SeedRunData {
            run: NewRun {
                name: r.name,
                scenario: file.scenario.clone(),
                tool: r.tool,
                source: Some(source.to_string()),
                tags: r.tags.into_iter().collect(),
                imported_at_ms: imported_at_ms + i as i64,
            },
            data,
            notes: r.notes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_shipped_seeds() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/seeds/");
        let soa = std::fs::read_to_string(format!("{dir}soa-container-release.json")).unwrap();
        let runs = parse(&soa, "soa", 1_000).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[1].data.overall.throughput_rps, Some(596.99));
        assert_eq!(runs[1].data.overall.error_pct, None, "unknown, not 0");
        assert!(runs[0].data.summary_only);
        assert_eq!(runs[1].run.imported_at_ms, 1_001);
        let camel = std::fs::read_to_string(format!("{dir}camel-rest-tuning.json")).unwrap();
        let runs = parse(&camel, "camel", 0).unwrap();
        let tp: Vec<_> = runs.iter().map(|r| r.data.overall.throughput_rps).collect();
        assert_eq!(tp, [Some(550.0), Some(995.0), Some(1972.0)]);
        assert!(parse("{\"format\": \"x\", \"version\": 1, \"runs\": []}", "x", 0).is_err());
        let e = parse("{\n \"format\": 3}", "bad.json", 0).unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }
}
