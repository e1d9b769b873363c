//! Exact statistics accumulators (placeholder; implemented with the parsers).

/// Exact counts of integer-ms values, for nearest-rank percentiles.
#[derive(Debug, Clone, Default)]
pub struct ExactHistogram {}

/// Running count/errors/min/max/sum/window/bytes over one scope.
#[derive(Debug, Clone, Default)]
pub struct StatsAcc {}
