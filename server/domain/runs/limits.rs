//! The resource budget of one run's input: which sample values are plausible, and how many
//! distinct labels (and how long a label or message) a run keeps.
//!
//! Owns [`RunLimits`] and [`SampleLimits`], checked by [`super::RunBuilder`] on every sample
//! and by the line-protocol reader on every point. Memory and time of an import depend on
//! the input's size and these limits, never on values inside the input: a timestamp of
//! year 9999 or an elapsed time of 10¹⁹ ms is a rejected row (with its line), not a reason
//! to allocate or loop over its span. Must not read configuration or the clock: the
//! server resolves the limits from `harrier.toml` (`[limits]`) and hands them down.

/// 1990-01-01T00:00:00Z, unix epoch ms: the earliest plausible sample start by default.
pub const DEFAULT_MIN_START_MS: i64 = 631_152_000_000;
/// 2100-01-01T00:00:00Z, unix epoch ms: the latest plausible sample start by default.
pub const DEFAULT_MAX_START_MS: i64 = 4_102_444_800_000;
/// 24 h: the longest plausible elapsed time of one sample by default, ms.
pub const DEFAULT_MAX_ELAPSED_MS: u64 = 86_400_000;
/// Distinct labels a run keeps by default; further labels are folded into
/// [`OTHER_LABELS`].
pub const DEFAULT_MAX_LABELS: usize = 10_000;
/// Longest label kept by default, in characters; longer ones are truncated with [`TRUNCATION_MARK`].
pub const DEFAULT_MAX_LABEL_CHARS: usize = 512;
/// Longest error message kept by default, in characters; longer ones are truncated with
/// [`TRUNCATION_MARK`].
pub const DEFAULT_MAX_MESSAGE_CHARS: usize = 2_048;

/// Largest input by default once decompressed, bytes (16 GiB, as `max_import_bytes`).
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 16 << 30;
/// Largest accepted decompressed : compressed ratio of a gzip input by default (text
/// results compress 5–30 : 1; zeros 1,000 : 1).
pub const DEFAULT_MAX_GZIP_RATIO: u64 = 200;
/// Longest line (or CSV row, XML element, text run) an import reads by default, bytes:
/// 1 MiB. Real tool output stays far below it (a JTL or simulation.log row is a few hundred
/// bytes, a k6 point line under 2 KiB even with many tags); a longer line is a rejected row
/// with its line number, so an import never holds more than this of one line.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;
/// Largest whole-file summary document (k6 summary export, Locust `--json`, autocannon,
/// Artillery, wrk and other text reports) by default, bytes: 64 MiB. Such a file is read
/// whole; real ones are a few KB to a few MB (an Artillery report with every intermediate
/// period of a day-long test stays under 20 MB).
pub const DEFAULT_MAX_DOCUMENT_BYTES: u64 = 64 << 20;
/// Decompressed bytes below which the ratio is not checked (a small file may compress
/// far better than a large one).
pub const GZIP_RATIO_FLOOR_BYTES: u64 = 8 << 20;

/// The label that holds every sample of labels beyond a run's label limit.
pub const OTHER_LABELS: &str = "(other labels)";
/// Appended to a truncated label or message.
pub const TRUNCATION_MARK: &str = "…";

/// Which sample values are plausible: start inside `[min_start_ms, max_start_ms)` and
/// elapsed at most `max_elapsed_ms`. Anything else is a rejected row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleLimits {
    /// Earliest accepted sample start, unix epoch ms (inclusive).
    pub min_start_ms: i64,
    /// Latest accepted sample start, unix epoch ms (exclusive).
    pub max_start_ms: i64,
    /// Longest accepted elapsed time, ms (inclusive).
    pub max_elapsed_ms: u64,
}

impl Default for SampleLimits {
    fn default() -> Self {
        SampleLimits {
            min_start_ms: DEFAULT_MIN_START_MS,
            max_start_ms: DEFAULT_MAX_START_MS,
            max_elapsed_ms: DEFAULT_MAX_ELAPSED_MS,
        }
    }
}

impl SampleLimits {
    /// The same limits for a file whose times are offsets from the run's start (hey and
    /// oha CSV): an offset must lie in `[0, max_start_ms − min_start_ms)`.
    pub fn relative(&self) -> SampleLimits {
        SampleLimits {
            min_start_ms: 0,
            max_start_ms: self.max_start_ms.saturating_sub(self.min_start_ms),
            max_elapsed_ms: self.max_elapsed_ms,
        }
    }

    /// Whether a point in time (unix epoch ms) is inside the window.
    pub fn start_ok(&self, start_ms: i64) -> bool {
        (self.min_start_ms..self.max_start_ms).contains(&start_ms)
    }

    /// `Err(reason)` when a sample's elapsed time or start is outside the limits (elapsed
    /// checked first: an absurd duration also moves the start); the reason names the value
    /// and the accepted range.
    pub fn check(&self, start_ms: i64, elapsed_ms: u64) -> Result<(), String> {
        if elapsed_ms > self.max_elapsed_ms {
            return Err(format!(
                "elapsed {elapsed_ms} ms is longer than the limit of {} ms (limits.max_elapsed_ms in harrier.toml)",
                self.max_elapsed_ms
            ));
        }
        if !self.start_ok(start_ms) {
            return Err(format!(
                "timestamp {start_ms} ms is outside the accepted window [{}, {}) ms (limits.min_timestamp / limits.max_timestamp in harrier.toml)",
                self.min_start_ms, self.max_start_ms
            ));
        }
        Ok(())
    }
}

/// Everything a run's input is bounded by (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Plausible sample values.
    pub samples: SampleLimits,
    /// Distinct labels kept per run; the samples of further labels are counted under
    /// [`OTHER_LABELS`] and the run says how many labels were folded.
    pub max_labels: usize,
    /// Longest label kept, characters; longer labels are cut and marked with
    /// [`TRUNCATION_MARK`] (labels equal after the cut are one label).
    pub max_label_chars: usize,
    /// Longest error message kept, characters; longer ones are cut and marked.
    pub max_message_chars: usize,
    /// Largest input, bytes, counted after decompression (`max_import_bytes`).
    pub max_input_bytes: u64,
    /// Largest decompressed : compressed ratio of a gzip input, checked once more than
    /// [`GZIP_RATIO_FLOOR_BYTES`] are decompressed (0: not checked).
    pub max_gzip_ratio: u64,
    /// Longest line an import reads, bytes (see [`DEFAULT_MAX_LINE_BYTES`]): a longer line
    /// is a rejected row; in an XML JTL a longer element or text run stops the import.
    pub max_line_bytes: usize,
    /// Largest whole-file summary document, bytes (see [`DEFAULT_MAX_DOCUMENT_BYTES`]): a
    /// larger one stops the import.
    pub max_document_bytes: u64,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            samples: SampleLimits::default(),
            max_labels: DEFAULT_MAX_LABELS,
            max_label_chars: DEFAULT_MAX_LABEL_CHARS,
            max_message_chars: DEFAULT_MAX_MESSAGE_CHARS,
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
            max_gzip_ratio: DEFAULT_MAX_GZIP_RATIO,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
        }
    }
}

impl RunLimits {
    /// The same limits for a file whose times are offsets (see [`SampleLimits::relative`]).
    pub fn relative(&self) -> RunLimits {
        RunLimits {
            samples: self.samples.relative(),
            ..*self
        }
    }
}

/// Longest run name, scenario name, tag key or tag value a caller may give, in
/// characters (a name made from a file's content is cut to it instead).
pub const MAX_NAME_CHARS: usize = 256;
/// Longest run notes a caller may give, in characters.
pub const MAX_NOTES_CHARS: usize = 20_000;

/// `Err` with a message naming `what` and the limit when `value` is longer than `max`
/// characters.
pub fn check_length(what: &str, value: &str, max: usize) -> Result<(), String> {
    if value.len() > max && value.chars().nth(max).is_some() {
        return Err(format!(
            "{what} is {} characters long; at most {max} are kept",
            value.chars().count()
        ));
    }
    Ok(())
}

/// `s` cut to at most `max_chars` characters, the last one replaced by
/// [`TRUNCATION_MARK`] when it was longer; borrowed when it fits.
pub fn truncate_chars(s: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    // Fast path: a string of at most `max_chars` bytes has at most as many characters.
    if s.len() <= max_chars {
        return std::borrow::Cow::Borrowed(s);
    }
    match s.char_indices().nth(max_chars) {
        None => std::borrow::Cow::Borrowed(s),
        Some(_) => {
            let keep = max_chars.saturating_sub(1);
            let end = s.char_indices().nth(keep).map_or(s.len(), |(i, _)| i);
            let mut out = String::with_capacity(end + TRUNCATION_MARK.len());
            out.push_str(&s[..end]);
            out.push_str(TRUNCATION_MARK);
            std::borrow::Cow::Owned(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_and_elapsed_bounds() {
        let l = SampleLimits::default();
        assert!(l.check(1_700_000_000_000, 120).is_ok());
        let far = l.check(253_402_300_799_000, 1).unwrap_err();
        assert!(far.contains("253402300799000"), "{far}");
        assert!(l.check(i64::MAX, 1).is_err());
        assert!(l.check(157_766_400_000, 1).is_err(), "1975 is before 1990");
        assert!(l.check(DEFAULT_MIN_START_MS, 0).is_ok());
        assert!(l.check(DEFAULT_MAX_START_MS, 0).is_err());
        let long = l
            .check(1_700_000_000_000, DEFAULT_MAX_ELAPSED_MS + 1)
            .unwrap_err();
        assert!(long.contains("elapsed"), "{long}");
        let rel = l.relative();
        assert!(rel.check(0, 5).is_ok());
        assert!(rel.check(-1, 5).is_err());
        assert!(rel.check(i64::MAX / 2, 5).is_err());
    }

    #[test]
    fn truncation_keeps_the_limit_in_characters_and_marks_it() {
        assert_eq!(truncate_chars("short", 10), "short");
        assert_eq!(truncate_chars("abcdef", 4), "abc…");
        assert_eq!(truncate_chars("ééééé", 5), "ééééé");
        assert_eq!(truncate_chars("éééééé", 5), "éééé…");
        assert_eq!(truncate_chars("abc", 0), "…");
    }
}
