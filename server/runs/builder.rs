//! Streams samples into a run's aggregates (placeholder; implemented with the parsers).

use super::{RunData, Sample};

/// Builds [`RunData`] from a stream of samples in bounded memory.
#[derive(Debug, Default)]
pub struct RunBuilder {}

impl RunBuilder {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn push(&mut self, _sample: &Sample<'_>) {}
    pub fn reject(&mut self, _line: u64, _reason: impl Into<String>) {}
    pub fn finish(self) -> RunData {
        RunData::default()
    }
}
