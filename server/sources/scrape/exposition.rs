//! The Prometheus text exposition format (0.0.4) and OpenMetrics text (1.0), parsed by hand.
//!
//! Hand-written on purpose: `prometheus-parse` silently drops series whose label values hold
//! `,` `=` or `}` (it splits the label set on those characters), and `openmetrics-parser`
//! is LGPL and rejects valid input. Neither fails a scrape with a line number.
//!
//! Grammar followed (<https://prometheus.io/docs/instrumenting/exposition_formats/>,
//! <https://github.com/prometheus/OpenMetrics/blob/main/specification/OpenMetrics.md>):
//!
//! ```text
//! # HELP name text            text unescapes \\ and \n (OpenMetrics also \")
//! # TYPE name counter|gauge|histogram|summary|untyped  (OpenMetrics: unknown|info|stateset|gaugehistogram)
//! # UNIT name unit            (OpenMetrics)
//! # EOF                       (OpenMetrics: the last line)
//! # anything else             a comment
//! name{label="value",…} value [timestamp] [# {exemplar labels} value [timestamp]]
//! ```
//!
//! - label values unescape exactly `\\` → `\`, `\"` → `"`, `\n` → line feed; any other
//!   backslash pair stays as written (Prometheus does the same);
//! - values are floats incl. `NaN`, `+Inf`, `-Inf` and exponents (`1.5e-3`, `2.5E+2`);
//! - timestamps are integer milliseconds in the text format, float seconds in OpenMetrics
//!   (converted to ms here); a document is OpenMetrics when its last line is `# EOF`;
//! - CRLF line ends and blank lines are accepted; exemplars are checked and dropped.
//!
//! A line that breaks the grammar fails the whole document with its line number and
//! column ([`ParseError`]); the parser never panics (see the fuzz target in `fuzz/`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

/// The declared type of a metric family (`# TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    Summary,
    /// No `# TYPE` line, or `untyped`.
    Untyped,
    /// OpenMetrics `unknown`.
    Unknown,
    /// OpenMetrics `info` (samples end in `_info`).
    Info,
    /// OpenMetrics `stateset`.
    StateSet,
    /// OpenMetrics `gaugehistogram` (`_bucket`, `_gcount`, `_gsum`).
    GaugeHistogram,
}

impl MetricType {
    fn from_name(s: &str) -> Option<MetricType> {
        Some(match s {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            "untyped" => MetricType::Untyped,
            "unknown" => MetricType::Unknown,
            "info" => MetricType::Info,
            "stateset" => MetricType::StateSet,
            "gaugehistogram" => MetricType::GaugeHistogram,
            _ => return None,
        })
    }

    /// The name as written in `# TYPE`.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::Summary => "summary",
            MetricType::Untyped => "untyped",
            MetricType::Unknown => "unknown",
            MetricType::Info => "info",
            MetricType::StateSet => "stateset",
            MetricType::GaugeHistogram => "gaugehistogram",
        }
    }

    /// Sample-name suffixes that belong to a family of this type.
    fn suffixes(self) -> &'static [&'static str] {
        match self {
            MetricType::Counter => &["_total", "_created"],
            MetricType::Histogram => &["_bucket", "_sum", "_count", "_created"],
            MetricType::Summary => &["_sum", "_count", "_created"],
            MetricType::GaugeHistogram => &["_bucket", "_gcount", "_gsum"],
            MetricType::Info => &["_info"],
            _ => &[],
        }
    }
}

/// Which text format a document was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    /// Prometheus text 0.0.4.
    Prometheus,
    /// OpenMetrics text 1.0 (ends with `# EOF`).
    OpenMetrics,
}

/// One sample line: a series and its value. Names and label values are borrowed from the
/// document's text (a value is copied only when it holds an escape): a scrape of a thousand
/// routes has tens of thousands of samples, and owning each name and label was a large
/// share of its parsing.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    /// The sample's own name (`http_requests_total`, `rpc_duration_seconds_bucket`).
    pub name: &'a str,
    /// Labels in written order, values unescaped.
    pub labels: Vec<(&'a str, Cow<'a, str>)>,
    pub value: f64,
    /// The exposed timestamp, unix epoch ms.
    pub timestamp_ms: Option<i64>,
}

impl Sample<'_> {
    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_ref())
    }
}

/// A metric family: `# HELP`/`# TYPE` and the samples that belong to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Family<'a> {
    pub name: &'a str,
    pub kind: MetricType,
    /// HELP text, unescaped.
    pub help: Option<String>,
    /// OpenMetrics `# UNIT`.
    pub unit: Option<String>,
    pub samples: Vec<Sample<'a>>,
}

/// A parsed document: families in order of first appearance.
#[derive(Debug, Clone, PartialEq)]
pub struct Exposition<'a> {
    pub format: TextFormat,
    pub families: Vec<Family<'a>>,
}

impl<'a> Exposition<'a> {
    /// Number of sample lines.
    pub fn sample_count(&self) -> usize {
        self.families.iter().map(|f| f.samples.len()).sum()
    }

    /// The family called `name`.
    pub fn family(&self, name: &str) -> Option<&Family<'a>> {
        self.families.iter().find(|f| f.name == name)
    }

    /// Every sample with its family's type.
    pub fn samples(&self) -> impl Iterator<Item = (&Family<'a>, &Sample<'a>)> {
        self.families
            .iter()
            .flat_map(|f| f.samples.iter().map(move |s| (f, s)))
    }
}

/// Why a document was rejected: 1-based line and column, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ParseError {}

/// Parses raw bytes (must be UTF-8).
pub fn parse_bytes(bytes: &[u8]) -> Result<Exposition<'_>, ParseError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse(text),
        Err(e) => {
            let ok = &bytes[..e.valid_up_to()];
            let line = ok.iter().filter(|b| **b == b'\n').count() + 1;
            let column = ok.len() - ok.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1) + 1;
            Err(ParseError {
                line,
                column,
                message: "invalid UTF-8".into(),
            })
        }
    }
}

/// Parses a Prometheus text or OpenMetrics document.
pub fn parse(text: &str) -> Result<Exposition<'_>, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let format = if last_line(text).trim_end() == "# EOF" {
        TextFormat::OpenMetrics
    } else {
        TextFormat::Prometheus
    };
    let mut p = Parser {
        format,
        families: Vec::new(),
        by_name: HashMap::new(),
        current: None,
        typed: HashMap::new(),
        series_at: HashMap::new(),
        series_clashes: Vec::new(),
    };
    let mut seen_eof = false;
    for (i, raw) in text.split('\n').enumerate() {
        let line_no = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if seen_eof {
            if line.trim().is_empty() {
                continue;
            }
            return Err(err(line_no, 1, "content after `# EOF`"));
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            if rest.trim_end() == " EOF" && format == TextFormat::OpenMetrics {
                seen_eof = true;
                continue;
            }
            p.comment(line, line_no)?;
        } else {
            p.sample(line, line_no)?;
        }
    }
    Ok(Exposition {
        format,
        families: p.families,
    })
}

fn last_line(text: &str) -> &str {
    let trimmed = text.trim_end_matches(['\n', '\r', ' ', '\t']);
    match trimmed.rfind('\n') {
        Some(p) => &trimmed[p + 1..],
        None => trimmed,
    }
}

fn err(line: usize, column: usize, message: impl Into<String>) -> ParseError {
    ParseError {
        line,
        column,
        message: message.into(),
    }
}

struct Parser<'a> {
    format: TextFormat,
    families: Vec<Family<'a>>,
    by_name: HashMap<&'a str, usize>,
    /// Index of the family the last HELP/TYPE/sample line belonged to.
    current: Option<usize>,
    /// Families that had a `# TYPE` line.
    typed: HashMap<&'a str, ()>,
    /// Each series written so far, by the hash of its name and labels (in any order) →
    /// where it is `(family, sample, line)`: a series written twice makes the document
    /// ambiguous, as Prometheus itself rejects it. Only the hash is kept, not a copy of the
    /// series (copying every name and label was a fifth of a scrape's parsing); a hash met
    /// again is checked against the series itself, and a different series under the same
    /// hash goes to `series_clashes`.
    series_at: HashMap<u64, (usize, usize, usize)>,
    series_clashes: Vec<(u64, (usize, usize, usize))>,
}

/// The hash of a series: its name and its labels, whatever their order.
fn series_hash(name: &str, labels: &[(&str, Cow<'_, str>)]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    let hasher = BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
    let labels = labels
        .iter()
        .fold(0u64, |acc, l| acc.wrapping_add(hasher.hash_one(l)));
    hasher.hash_one((name, labels))
}

/// Whether two samples are the same series (labels in any order; a sample's label names
/// are distinct).
fn same_series(a: &Sample<'_>, name: &str, labels: &[(&str, Cow<'_, str>)]) -> bool {
    a.name == name && a.labels.len() == labels.len() && labels.iter().all(|l| a.labels.contains(l))
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b':'
}

fn is_label_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_label_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn is_blank(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// A cursor over one line (byte offsets; columns are offsets + 1).
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
    line: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    fn skip_blank(&mut self) {
        while self.peek().is_some_and(is_blank) {
            self.pos += 1;
        }
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        err(self.line, self.pos + 1, message)
    }

    fn name(&mut self, what: &str) -> Result<&'a str, ParseError> {
        let start = self.pos;
        match self.peek() {
            Some(c) if is_name_start(c) => self.pos += 1,
            _ => return Err(self.error(format!("expected {what}"))),
        }
        while self.peek().is_some_and(is_name_char) {
            self.pos += 1;
        }
        Ok(&self.s[start..self.pos])
    }

    fn label_name(&mut self) -> Result<&'a str, ParseError> {
        let start = self.pos;
        match self.peek() {
            Some(c) if is_label_start(c) => self.pos += 1,
            _ => return Err(self.error("expected a label name")),
        }
        while self.peek().is_some_and(is_label_char) {
            self.pos += 1;
        }
        Ok(&self.s[start..self.pos])
    }

    /// A quoted label value; the opening quote is next. Borrowed unless it holds an escape.
    fn label_value(&mut self) -> Result<Cow<'a, str>, ParseError> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected '\"' opening a label value"));
        }
        let open = self.pos;
        self.pos += 1;
        let bytes = self.s.as_bytes();
        // The common case: no backslash before the closing quote.
        if let Some(end) = memchr::memchr2(b'"', b'\\', &bytes[self.pos..])
            && bytes[self.pos + end] == b'"'
        {
            let value = &self.s[self.pos..self.pos + end];
            self.pos += end + 1;
            return Ok(Cow::Borrowed(value));
        }
        let mut out = String::new();
        let mut run_start = self.pos;
        while let Some(&c) = bytes.get(self.pos) {
            match c {
                b'"' => {
                    out.push_str(&self.s[run_start..self.pos]);
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                b'\\' => {
                    out.push_str(&self.s[run_start..self.pos]);
                    match bytes.get(self.pos + 1) {
                        Some(b'\\') => out.push('\\'),
                        Some(b'"') => out.push('"'),
                        Some(b'n') => out.push('\n'),
                        Some(_) => {
                            // Not an escape: the backslash stays; the next char is read as usual.
                            out.push('\\');
                            self.pos += 1;
                            run_start = self.pos;
                            continue;
                        }
                        None => break,
                    }
                    self.pos += 2;
                    run_start = self.pos;
                }
                _ => self.pos += 1,
            }
        }
        Err(err(self.line, open + 1, "label value has no closing '\"'"))
    }

    /// `{name="value",…}`; the `{` is next.
    fn labels(&mut self) -> Result<Vec<(&'a str, Cow<'a, str>)>, ParseError> {
        self.pos += 1; // '{'
        let mut labels: Vec<(&'a str, Cow<'a, str>)> = Vec::new();
        loop {
            self.skip_blank();
            if self.peek() == Some(b'}') {
                self.pos += 1;
                return Ok(labels);
            }
            let name_at = self.pos;
            let name = self.label_name()?;
            self.skip_blank();
            if self.peek() != Some(b'=') {
                return Err(self.error(format!("expected '=' after label name {name:?}")));
            }
            self.pos += 1;
            self.skip_blank();
            let value = self.label_value()?;
            if labels.iter().any(|(k, _)| *k == name) {
                return Err(err(
                    self.line,
                    name_at + 1,
                    format!("label {name:?} appears twice"),
                ));
            }
            labels.push((name, value));
            self.skip_blank();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(labels);
                }
                _ => return Err(self.error("expected ',' or '}' after a label value")),
            }
        }
    }

    /// A whitespace-delimited token.
    fn token(&mut self) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(|c| !is_blank(c)) {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }
}

/// A sample value: Go's `ParseFloat` syntax as Prometheus uses it (`NaN`, `+Inf`, `-Inf`,
/// exponents).
pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => return Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => return Some(f64::INFINITY),
        "-Inf" | "-inf" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    let b = s.as_bytes();
    // Rust's float parser also takes "infinity" etc.; require a digit or '.' somewhere so
    // only numbers pass, and no trailing junk.
    if b.is_empty() || !b.iter().any(u8::is_ascii_digit) {
        return None;
    }
    if !b
        .iter()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    s.parse::<f64>().ok()
}

impl<'a> Parser<'a> {
    /// A line starting with `#`.
    fn comment(&mut self, full: &'a str, line: usize) -> Result<(), ParseError> {
        // "# HELP name text", "# TYPE name type", "# UNIT name unit"; others are comments.
        let rest = &full[1..];
        let body = rest.trim_start_matches(is_blank_char);
        let offset = 1 + (rest.len() - body.len());
        let (keyword, after) = match body.find(is_blank_char) {
            Some(p) => (&body[..p], &body[p..]),
            None => (body, ""),
        };
        if !matches!(keyword, "HELP" | "TYPE" | "UNIT") {
            return Ok(());
        }
        let mut c = Cursor {
            s: full,
            pos: offset + keyword.len(),
            line,
        };
        if after.is_empty() {
            return Err(c.error(format!("expected a metric name after {keyword}")));
        }
        c.skip_blank();
        let name = c.name("a metric name")?;
        if c.peek().is_some_and(|b| !is_blank(b)) {
            return Err(c.error("expected a space after the metric name"));
        }
        c.skip_blank();
        let text = &full[c.pos..];
        match keyword {
            "HELP" => {
                let help = unescape_help(text, self.format == TextFormat::OpenMetrics);
                let idx = self.family_for_meta(name);
                if self.families[idx].help.is_some() {
                    return Err(err(line, 1, format!("second HELP line for {name}")));
                }
                self.families[idx].help = Some(help);
            }
            "TYPE" => {
                let type_name = text.trim_end();
                let kind = MetricType::from_name(type_name).ok_or_else(|| {
                    c.error(format!(
                        "unknown metric type {type_name:?} (expected counter, gauge, histogram, summary or untyped)"
                    ))
                })?;
                if self.typed.insert(name, ()).is_some() {
                    return Err(err(line, 1, format!("second TYPE line for {name}")));
                }
                let idx = self.family_for_meta(name);
                if !self.families[idx].samples.is_empty() {
                    return Err(err(
                        line,
                        1,
                        format!("TYPE line for {name} after its samples"),
                    ));
                }
                self.families[idx].kind = kind;
            }
            _ => {
                let idx = self.family_for_meta(name);
                self.families[idx].unit = Some(text.trim_end().to_string());
            }
        }
        Ok(())
    }

    /// The family a HELP/TYPE/UNIT line names, created on first mention.
    fn family_for_meta(&mut self, name: &'a str) -> usize {
        let idx = match self.by_name.get(name) {
            Some(&i) => i,
            None => self.new_family(name, MetricType::Untyped),
        };
        self.current = Some(idx);
        idx
    }

    fn new_family(&mut self, name: &'a str, kind: MetricType) -> usize {
        self.families.push(Family {
            name,
            kind,
            help: None,
            unit: None,
            samples: Vec::new(),
        });
        let idx = self.families.len() - 1;
        self.by_name.insert(name, idx);
        idx
    }

    /// Does sample `name` belong to family `idx`?
    fn belongs(&self, idx: usize, name: &str) -> bool {
        let f = &self.families[idx];
        if f.name == name {
            return true;
        }
        name.strip_prefix(f.name)
            .is_some_and(|suffix| f.kind.suffixes().contains(&suffix))
    }

    fn family_for_sample(&mut self, name: &'a str) -> usize {
        if let Some(idx) = self.current.filter(|&i| self.belongs(i, name)) {
            return idx;
        }
        if let Some(&idx) = self.by_name.get(name) {
            self.current = Some(idx);
            return idx;
        }
        for suffix in [
            "_total", "_bucket", "_count", "_sum", "_created", "_info", "_gcount", "_gsum",
        ] {
            if let Some(base) = name.strip_suffix(suffix)
                && let Some(&idx) = self.by_name.get(base)
                && self.belongs(idx, name)
            {
                self.current = Some(idx);
                return idx;
            }
        }
        let idx = self.new_family(name, MetricType::Untyped);
        self.current = Some(idx);
        idx
    }

    fn sample(&mut self, line: &'a str, line_no: usize) -> Result<(), ParseError> {
        let mut c = Cursor {
            s: line,
            pos: 0,
            line: line_no,
        };
        c.skip_blank();
        let name = c.name("a metric name or '#'")?;
        let after_name = c.pos;
        c.skip_blank();
        let labels = if c.peek() == Some(b'{') {
            let labels = c.labels()?;
            if !c.peek().is_some_and(is_blank) {
                return Err(c.error("expected a space before the value"));
            }
            c.skip_blank();
            labels
        } else if c.pos == after_name {
            return Err(c.error("expected a space before the value"));
        } else {
            Vec::new()
        };
        let value_at = c.pos;
        let value_text = c.token();
        let value = parse_value(value_text).ok_or_else(|| {
            err(
                line_no,
                value_at + 1,
                format!("expected a number, NaN, +Inf or -Inf, got {value_text:?}"),
            )
        })?;
        c.skip_blank();
        let mut timestamp_ms = None;
        if c.peek().is_some_and(|b| b != b'#') {
            let ts_at = c.pos;
            let ts = c.token();
            timestamp_ms = Some(self.timestamp(ts).ok_or_else(|| {
                err(
                    line_no,
                    ts_at + 1,
                    match self.format {
                        TextFormat::Prometheus => {
                            format!("expected an integer timestamp in ms, got {ts:?}")
                        }
                        TextFormat::OpenMetrics => {
                            format!("expected a timestamp in seconds, got {ts:?}")
                        }
                    },
                )
            })?);
            c.skip_blank();
        }
        if c.peek() == Some(b'#') {
            exemplar(&mut c)?;
        }
        if c.pos < line.len() {
            return Err(c.error("unexpected text after the sample"));
        }
        let hash = series_hash(name, &labels);
        let idx = self.family_for_sample(name);
        let here = (idx, self.families[idx].samples.len(), line_no);
        let earlier = match self.series_at.entry(hash) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(here);
                None
            }
            std::collections::hash_map::Entry::Occupied(o) => Some(*o.get()),
        };
        if let Some(first) = earlier {
            let same = std::iter::once(first)
                .chain(
                    self.series_clashes
                        .iter()
                        .filter(|(h, _)| *h == hash)
                        .map(|(_, at)| *at),
                )
                .find(|&(f, i, _)| same_series(&self.families[f].samples[i], name, &labels));
            if let Some((_, _, first_line)) = same {
                return Err(err(
                    line_no,
                    1,
                    format!("duplicate series {name} (first written on line {first_line})"),
                ));
            }
            self.series_clashes.push((hash, here));
        }
        self.families[idx].samples.push(Sample {
            name,
            labels,
            value,
            timestamp_ms,
        });
        Ok(())
    }

    fn timestamp(&self, s: &str) -> Option<i64> {
        match self.format {
            TextFormat::Prometheus => {
                let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                s.parse().ok()
            }
            TextFormat::OpenMetrics => {
                let v = parse_value(s)?;
                let ms = (v * 1000.0).round();
                (ms.is_finite() && ms.abs() < 9.0e18).then_some(ms as i64)
            }
        }
    }
}

fn is_blank_char(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// ` # {labels} value [timestamp]` after a sample: checked, then dropped.
fn exemplar(c: &mut Cursor<'_>) -> Result<(), ParseError> {
    c.pos += 1; // '#'
    c.skip_blank();
    if c.peek() != Some(b'{') {
        return Err(c.error("expected '{' opening an exemplar's labels"));
    }
    c.labels()?;
    c.skip_blank();
    let at = c.pos;
    let v = c.token();
    if parse_value(v).is_none() {
        return Err(err(c.line, at + 1, format!("exemplar value {v:?}")));
    }
    c.skip_blank();
    if c.peek().is_some() {
        let at = c.pos;
        let ts = c.token();
        if parse_value(ts).is_none() {
            return Err(err(c.line, at + 1, format!("exemplar timestamp {ts:?}")));
        }
        c.skip_blank();
    }
    Ok(())
}

/// HELP text: `\\` → `\`, `\n` → line feed (OpenMetrics: also `\"` → `"`); nothing else.
fn unescape_help(s: &str, openmetrics: bool) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match chars.peek() {
            Some('\\') => {
                out.push('\\');
                chars.next();
            }
            Some('n') => {
                out.push('\n');
                chars.next();
            }
            Some('"') if openmetrics => {
                out.push('"');
                chars.next();
            }
            _ => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/edge-cases")
            .join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// A public sample from `../shared/fixtures/public/`, or `None` (with a notice) when the
    /// shared folder is not beside the checkout.
    fn public(rel: &str) -> Option<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures/public")
            .join(rel);
        if !path.exists() {
            println!("skipping: ../shared not present");
            return None;
        }
        Some(std::fs::read_to_string(&path).expect("readable"))
    }

    fn labels<'s>(s: &'s Sample<'_>) -> Vec<(&'s str, &'s str)> {
        s.labels.iter().map(|(k, v)| (*k, v.as_ref())).collect()
    }

    #[test]
    fn ec29_label_and_help_escapes() {
        let text = fixture("EC29/metrics.prom");
        let doc = parse(&text).unwrap();
        assert_eq!(doc.format, TextFormat::Prometheus);
        assert_eq!(doc.families.len(), 1);
        let f = &doc.families[0];
        assert_eq!(f.name, "app_requests_total");
        assert_eq!(f.kind, MetricType::Counter);
        assert_eq!(
            f.help.as_deref(),
            Some("Requests served, by path.\nSecond line with a backslash \\ here.")
        );
        let expected: [(&str, &str, f64); 5] = [
            ("C:\\temp\\new", "GET", 12.0),
            ("/say \"hi\"", "GET", 3.0),
            ("line1\nline2", "POST", 1.0),
            ("/ends-with-backslash\\", "GET", 7.0),
            ("/x,y=z}", "GET", 2.0),
        ];
        assert_eq!(f.samples.len(), expected.len());
        for (s, (path, method, value)) in f.samples.iter().zip(expected) {
            assert_eq!(labels(s), vec![("path", path), ("method", method)]);
            assert_eq!(s.value, value);
            assert_eq!(s.timestamp_ms, None);
        }
        let sum: f64 = f.samples.iter().map(|s| s.value).sum();
        assert_eq!(sum, 25.0);
    }

    #[test]
    fn ec30_special_floats_and_exponents() {
        let text = fixture("EC30/metrics.prom");
        let doc = parse(&text).unwrap();
        let q = doc.family("queue_latency_seconds").unwrap();
        assert_eq!(q.kind, MetricType::Gauge);
        let by_queue: HashMap<&str, f64> = q
            .samples
            .iter()
            .map(|s| (s.label("queue").unwrap(), s.value))
            .collect();
        assert!(by_queue["a"].is_nan());
        assert_eq!(by_queue["b"], f64::INFINITY);
        assert_eq!(by_queue["c"], f64::NEG_INFINITY);
        assert_eq!(by_queue["d"], 0.0015);
        assert_eq!(by_queue["e"], 0.0);
        assert_eq!(by_queue["f"], 250.0);
        let finite: Vec<f64> = q
            .samples
            .iter()
            .map(|s| s.value)
            .filter(|v| v.is_finite())
            .collect();
        assert_eq!(finite.iter().cloned().fold(f64::MIN, f64::max), 250.0);
        assert_eq!(finite.iter().cloned().fold(f64::MAX, f64::min), 0.0);
        assert_eq!(q.samples.len() - finite.len(), 3);

        let h = doc.family("rpc_duration_seconds").unwrap();
        assert_eq!(h.kind, MetricType::Histogram);
        let les: Vec<&str> = h.samples.iter().filter_map(|s| s.label("le")).collect();
        assert_eq!(les, ["0.5", "+Inf"]);
        let numeric: Vec<f64> = les.iter().map(|l| parse_value(l).unwrap()).collect();
        assert_eq!(numeric, [0.5, f64::INFINITY]);
        let count = h
            .samples
            .iter()
            .find(|s| s.name == "rpc_duration_seconds_count")
            .unwrap();
        assert_eq!(count.value, 4.0);
        assert_eq!(doc.sample_count(), 10);
    }

    #[test]
    fn crlf_timestamps_and_untyped() {
        let doc =
            parse("# TYPE a counter\r\na_total 3 1700000000000\r\nb{x=\"1\"} -2.5e1\r\n").unwrap();
        assert_eq!(doc.families.len(), 2);
        let a = &doc.families[0].samples[0];
        assert_eq!((a.value, a.timestamp_ms), (3.0, Some(1_700_000_000_000)));
        assert_eq!(doc.families[1].kind, MetricType::Untyped);
        assert_eq!(doc.families[1].samples[0].value, -25.0);
    }

    #[test]
    fn openmetrics_timestamps_are_seconds_and_exemplars_are_dropped() {
        let text = "# TYPE c counter\n# UNIT c seconds\nc_total 1.0 1698520474.971 # {trace_id=\"x\"} 1.0 1698520474.5\n# EOF\n";
        let doc = parse(text).unwrap();
        assert_eq!(doc.format, TextFormat::OpenMetrics);
        let f = &doc.families[0];
        assert_eq!(f.unit.as_deref(), Some("seconds"));
        assert_eq!(f.samples[0].timestamp_ms, Some(1_698_520_474_971));
    }

    #[test]
    fn unknown_escapes_stay_and_blank_runs_are_allowed() {
        let doc = parse("m{ a = \"x\\ty\" , b=\"\" ,}\t7\n").unwrap();
        let s = &doc.families[0].samples[0];
        assert_eq!(labels(s), vec![("a", "x\\ty"), ("b", "")]);
        assert_eq!(s.value, 7.0);
    }

    #[test]
    fn bad_lines_fail_with_their_line_number() {
        let cases = [
            ("ok 1\nbad{a=\"x} 1\n", 2, "closing"),
            ("ok 1\n\nm{a=\"x\"} one\n", 3, "expected a number"),
            ("m{a=\"1\",a=\"2\"} 1\n", 1, "twice"),
            ("m 1 1.5\n", 1, "integer timestamp"),
            ("# TYPE m countr\n", 1, "unknown metric type"),
            ("# TYPE m gauge\n# TYPE m gauge\n", 2, "second TYPE"),
            ("m{a=x} 1\n", 1, "opening a label value"),
            ("m 1 2 3\n", 1, "unexpected text"),
            ("m\n", 1, "space before the value"),
            ("1m 2\n", 1, "metric name"),
            ("m 1\n# EOF\nx 2\n# EOF\n", 3, "after `# EOF`"),
        ];
        for (text, line, needle) in cases {
            let e = parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.message.contains(needle), "{text:?}: {e}");
        }
        let e = parse_bytes(b"a 1\nb\xff 2\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 2));
    }

    #[test]
    fn a_series_written_twice_is_rejected_whatever_its_label_order() {
        let e = parse("a_total 1\nm{x=\"1\",y=\"2\"} 1\nb 3\nm{y=\"2\",x=\"1\"} 2\n").unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(
            e.message
                .contains("duplicate series m (first written on line 2)"),
            "{e}"
        );
        // Near misses are other series: values swapped between labels, a label less,
        // another name with the same labels.
        let ok = "m{x=\"1\",y=\"2\"} 1\nm{x=\"2\",y=\"1\"} 1\nm{x=\"1\"} 1\nm 1\n\
                  n{x=\"1\",y=\"2\"} 1\nm{y=\"1\"} 1\nm{x=\"12\"} 1\n";
        let doc = parse(ok).unwrap();
        let samples: usize = doc.families.iter().map(|f| f.samples.len()).sum();
        assert_eq!(samples, 7);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // xorshift64*: deterministic pseudo-random inputs, biased toward the grammar's bytes.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            state.wrapping_mul(0x2545_F491_4F6C_DD1D)
        };
        let alphabet = b"ab_:{}=\",\\n# \t\r\n01.eE+-InfNa#TYPEHELPEOF\xc3\xa9\xff";
        let seeds = [
            "# HELP m x\\n\n# TYPE m histogram\nm_bucket{le=\"0.5\"} 1\nm_count 1 17\n",
            "c_total{a=\"\\\\\",b=\"\\\"\"} NaN # {t=\"1\"} 1 2\n# EOF\n",
        ];
        for i in 0..4000 {
            let mut input: Vec<u8> = if i % 2 == 0 {
                seeds[i % seeds.len()].as_bytes().to_vec()
            } else {
                Vec::new()
            };
            let n = (next() % 64) as usize;
            for _ in 0..n {
                let r = next();
                let b = alphabet[(r % alphabet.len() as u64) as usize];
                if input.is_empty() || r % 3 == 0 {
                    input.push(b);
                } else {
                    let at = (r >> 8) as usize % input.len();
                    input[at] = b;
                }
            }
            let _ = parse_bytes(&input);
        }
    }

    #[test]
    fn camel_quarkus_openmetrics_sample() {
        let Some(text) = public("prometheus/camel-quarkus-books-api-v2.openmetrics.txt") else {
            return;
        };
        let doc = parse(&text).unwrap();
        assert_eq!(doc.format, TextFormat::OpenMetrics);
        // 152 sample lines (`grep -v '^#' | grep -cv '^$'`); 60 declared families
        // (`grep -c '^# TYPE'`) plus 2 sample names of no declared family
        // (http_server_connections_seconds_{active_count,duration_sum}).
        assert_eq!(doc.sample_count(), EXPECTED_CAMEL_SAMPLES);
        assert_eq!(doc.families.len(), EXPECTED_CAMEL_FAMILIES);
        let total = doc.family("camel_exchanges").unwrap();
        assert_eq!(total.kind, MetricType::Counter);
        assert_eq!(total.samples.len(), 4);
        let with_exemplar = doc.family("worker_pool_completed").unwrap();
        assert_eq!(with_exemplar.samples[1].value, 35.0);
        let endpoint = doc
            .family("camel_exchange_event_notifier_seconds_max")
            .unwrap();
        assert_eq!(
            endpoint.samples[2].label("endpointName"),
            Some("platform-http:///api/v2/openapi.json?httpMethodRestrict=GET%2COPTIONS")
        );
    }

    #[test]
    fn spring_boot_prometheus_sample() {
        let Some(text) = public("prometheus/spring-boot-3-actuator-prometheus.txt") else {
            return;
        };
        let doc = parse(&text).unwrap();
        assert_eq!(doc.format, TextFormat::Prometheus);
        assert_eq!(doc.sample_count(), EXPECTED_SPRING_SAMPLES);
        assert_eq!(doc.families.len(), EXPECTED_SPRING_FAMILIES);
        let f = doc.family("http_server_requests_seconds").unwrap();
        assert_eq!(f.kind, MetricType::Summary);
        assert_eq!(f.samples.len(), 2);
        assert_eq!(f.samples[0].label("uri"), Some("/actuator"));
        assert_eq!(f.help.as_deref(), Some(""));
    }

    const EXPECTED_CAMEL_SAMPLES: usize = 152;
    const EXPECTED_CAMEL_FAMILIES: usize = 62;
    // 87 sample lines, 54 `# TYPE` lines, every sample in a declared family.
    const EXPECTED_SPRING_SAMPLES: usize = 87;
    const EXPECTED_SPRING_FAMILIES: usize = 54;
}
