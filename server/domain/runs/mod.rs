//! Load-test runs: the domain types and their statistics.
//!
//! Owns: [`Sample`] (one request result), [`RunBuilder`] (streams samples into the
//! aggregates that harrier stores), and the aggregate shapes ([`RunData`], [`Stats`],
//! [`Bucket`], [`ErrorGroup`], [`RejectedRow`]). Must not know about HTTP, SQL or files:
//! parsers in `sources::ingest` feed it, `store` persists what it yields.
//!
//! Every figure follows the definitions in docs/numbers.md ("Runs"):
//! - response time = elapsed ms;
//! - an error is the tool's success flag, never a guess from the response code; tools
//!   without one (hey, oha, wrk, vegeta, autocannon, siege, Artillery, ab) follow one rule,
//!   transport errors plus HTTP status ≥ 400, applied by their parsers;
//! - error % = errors / count × 100, `None` when count = 0;
//! - percentile p = nearest rank on the exact values: the ⌈p/100 · n⌉-th smallest;
//! - throughput = count / ((max(start + elapsed) − min(start)) / 1000 s), JMeter's definition;
//! - buckets are by sample start second (⌊start_ms / 1000⌋ · 1000); the last one is partial;
//! - transaction-controller rows are shown per label but left out of run totals.

mod builder;
pub mod capacity;
pub mod distribution;
pub mod hdr;
pub mod intervals;
pub mod limits;
pub mod merge;
mod stats;
pub mod timeseries;

pub use builder::{
    DEFAULT_OPEN_WINDOW_S, ERROR_GROUP_OVERFLOW_MESSAGE, MAX_ERROR_GROUPS, MAX_REJECTED_DETAILS,
    RunBuilder, RunChanges,
};
pub use hdr::{HistogramSummary, merge_histograms, summarize_serialized};
pub use limits::{RunLimits, SampleLimits};
pub use stats::{ExactHistogram, StatsAcc, nearest_rank};

use serde::{Deserialize, Serialize};

/// One request result inside a run, borrowed from the parser's buffer.
///
/// Times are integer milliseconds; `start_ms` is unix epoch ms (UTC).
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// Request name (JMeter label, Gatling request name, k6 `name` tag).
    pub label: &'a str,
    /// Sample start, unix epoch ms.
    pub start_ms: i64,
    /// Response time, ms (JMeter `elapsed`).
    pub elapsed_ms: u64,
    /// The tool's success flag (JMeter `success`, Gatling OK/KO).
    pub success: bool,
    /// Response code as written by the tool (may be text, may be empty). Used only to
    /// group errors: parsers may leave it empty when `success` is true.
    pub response_code: &'a str,
    /// Failure message when present, else the response message. Used only to group
    /// errors: parsers may leave it empty when `success` is true.
    pub message: &'a str,
    /// Bytes received (headers + body).
    pub bytes_received: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Active users (JMeter `allThreads`) when the sample was taken, if the tool wrote it.
    pub active_users: Option<u32>,
    /// A JMeter transaction-controller row: shown per label, excluded from run totals.
    pub is_transaction: bool,
}

/// Statistics over one scope (the whole run, or one label).
///
/// Every `Option` is `None` when it is undefined (no samples, zero window); the JSON API
/// renders those as `null`, never NaN or 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Number of samples.
    pub count: u64,
    /// Samples whose success flag is false.
    pub errors: u64,
    /// errors / count × 100.
    pub error_pct: Option<f64>,
    pub min_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Nearest-rank percentiles on the exact values (for summary-only runs: as reported).
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// min(start), unix epoch ms.
    pub first_start_ms: Option<i64>,
    /// max(start + elapsed), unix epoch ms.
    pub last_end_ms: Option<i64>,
    /// last_end_ms − first_start_ms.
    pub window_ms: Option<i64>,
    /// count / (window_ms / 1000), requests per second.
    pub throughput_rps: Option<f64>,
    /// Total bytes received.
    pub bytes_received: u64,
    /// Total bytes sent.
    pub bytes_sent: u64,
}

impl Stats {
    /// Successful throughput: requests that completed without failing per second, over the
    /// same window as [`Stats::throughput_rps`] (`throughput × (count − errors) / count`).
    /// What saturation is judged on: failed responses never count as capacity.
    pub fn successful_rps(&self) -> Option<f64> {
        successful_rps(self.count, self.errors, self.throughput_rps)
    }
}

/// [`Stats::successful_rps`] from a scope's count, errors and throughput (req/s).
pub fn successful_rps(count: u64, errors: u64, throughput_rps: Option<f64>) -> Option<f64> {
    let ok = count.saturating_sub(errors);
    throughput_rps.map(|t| {
        if count == 0 {
            0.0
        } else {
            t * ok as f64 / count as f64
        }
    })
}

/// One label's statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelStats {
    pub label: String,
    /// True when the label's rows are JMeter transaction-controller rows.
    pub is_transaction: bool,
    #[serde(flatten)]
    pub stats: Stats,
}

/// One label's (or the run's, when `label` is `None`) samples that started in one second.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    /// `None` for the run-level bucket (all non-transaction samples).
    pub label: Option<String>,
    /// ⌊start_ms / 1000⌋ · 1000.
    pub start_ms: i64,
    pub count: u64,
    pub errors: u64,
    /// Sum of elapsed, ms (mean = sum / count).
    pub sum_ms: u64,
    pub min_ms: u64,
    pub max_ms: u64,
    /// Highest active-user count seen in the second, if the tool wrote it.
    pub active_users: Option<u32>,
    /// Latency histogram (HdrHistogram V2 serialization, 3 significant digits, ms).
    pub histogram: Vec<u8>,
}

impl Bucket {
    /// Mean elapsed in the bucket, ms (exact: `sum_ms / count`); `None` when empty.
    pub fn mean_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ms as f64 / self.count as f64)
    }

    /// Adds `other`'s samples (a bucket of the same label and second) to this one.
    /// Fails only when a histogram is not a valid serialization.
    pub fn add(&mut self, other: &Bucket) -> Result<(), hdr::HistogramError> {
        let merged = merge_histograms(&[&self.histogram, &other.histogram])?;
        if let Some(h) = merged {
            self.histogram = hdr::serialize_histogram(&h);
        }
        // A side without samples (errors alone) has no min or max to take.
        if self.count == 0 {
            (self.min_ms, self.max_ms) = (other.min_ms, other.max_ms);
        } else if other.count > 0 {
            self.min_ms = self.min_ms.min(other.min_ms);
            self.max_ms = self.max_ms.max(other.max_ms);
        }
        self.count += other.count;
        self.errors += other.errors;
        self.sum_ms = self.sum_ms.saturating_add(other.sum_ms);
        self.active_users = self.active_users.max(other.active_users);
        Ok(())
    }

    /// How much of the bucket's second the run's data covers, ms (0..=1000), given the
    /// run's `last_end_ms` (max start + elapsed). Below 1000 the bucket is *partial*: the
    /// last second of a run is not a throughput dip (docs/numbers.md) and must be marked.
    pub fn covered_ms(&self, run_last_end_ms: i64) -> i64 {
        (run_last_end_ms - self.start_ms).clamp(0, 1000)
    }
}

/// Errors of one kind: same label, response code and message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorGroup {
    pub label: String,
    pub response_code: String,
    pub message: String,
    pub count: u64,
    pub first_seen_ms: i64,
    pub last_seen_ms: i64,
}

/// A row or line that was left out of every statistic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectedRow {
    /// 1-based line number in the input where the row starts.
    pub line: u64,
    /// What was wrong and what was expected.
    pub reason: String,
}

/// Everything harrier keeps of one run's samples: aggregates, never the raw samples.
#[derive(Debug, Clone, Default)]
pub struct RunData {
    /// Run totals: every sample except transaction-controller rows.
    pub overall: Stats,
    /// Per label, in order of first appearance.
    pub labels: Vec<LabelStats>,
    /// Per-second buckets, per label and for the run (`label: None`), sorted by (label, start).
    pub buckets: Vec<Bucket>,
    /// Error samples grouped by label, response code and message.
    pub errors: Vec<ErrorGroup>,
    /// Total rows rejected (may exceed `rejected.len()`: details are kept for the first ones).
    pub rejected_rows: u64,
    /// Details of the first rejected rows.
    pub rejected: Vec<RejectedRow>,
    /// True when the tool reported only aggregates (ab, wrk…): figures are "reported by TOOL".
    pub summary_only: bool,
    /// Distinct labels beyond the run's label limit, whose samples are counted under
    /// [`limits::OTHER_LABELS`] (0: none folded).
    pub folded_labels: u64,
    /// Free-form figures the tool reported that have no slot in [`Stats`]
    /// (e.g. ab's failure breakdown), as a JSON object.
    pub reported: serde_json::Value,
    /// Exact response-time distributions: index 0 the run total, then one per label in
    /// the order of `labels`. Empty for summary-only runs.
    pub distributions: Vec<distribution::Distribution>,
    /// The failed samples' distributions, scope for scope as `distributions` (Apdex counts
    /// failed samples as frustrated). Empty for summary-only runs.
    pub failed_distributions: Vec<distribution::Distribution>,
}

/// What the importer knows about a run besides its samples.
#[derive(Debug, Clone, Default)]
pub struct NewRun {
    pub name: String,
    pub scenario: Option<String>,
    /// The tool that produced the results (`jmeter`, `ab`, …).
    pub tool: String,
    /// File name the run came from.
    pub source: Option<String>,
    /// Tags such as build, commit, branch, environment.
    pub tags: Vec<(String, String)>,
    /// When the import happened, unix epoch ms.
    pub imported_at_ms: i64,
}
