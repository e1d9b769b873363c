//! Load-tool result files → runs.
//!
//! Owns format sniffing and one parser per format. Parsers stream their input (bounded
//! memory whatever the file size), feed [`crate::domain::runs::RunBuilder`], and never touch SQL or
//! HTTP. A damaged row is rejected with its line number, never fatal unless nothing is
//! readable.
//!
//! - [`jmeter_csv`]: JMeter JTL, CSV (any delimiter, with or without header);
//! - [`jmeter_xml`]: JMeter JTL, XML (top-level samples only);
//! - [`ab`]: ApacheBench text reports (summary-only runs, several per file);
//! - [`gatling`]: Gatling simulation.log, text (2.x – 3.12) and binary (3.13 – 3.15);
//! - [`k6_json`], [`k6_csv`]: k6 `--out json` / `--out csv` points, regrouped into requests
//!   by [`k6_points`]; [`k6_summary`]: k6 end-of-test summaries (summary-only);
//! - [`locust`]: Locust `_stats.csv`, `_stats_history.csv`, `--json` (summary-only);
//! - [`active_users`]: active users per second from user records (Gatling, k6);
//! - [`timestamp`]: epoch-ms and formatted timestamps (no zone → UTC).
//! - [`wrk`]: wrk / wrk2 text reports (summary-only);
//! - [`hey`]: hey text report (summary-only) or `-o csv` (raw);
//! - [`oha`]: oha JSON or text report (summary-only) or CSV (raw);
//! - [`vegeta`]: vegeta results as JSON lines (raw) or `report -type=json` (summary-only);
//! - [`autocannon`]: autocannon `--json` result (summary-only);
//! - [`artillery`]: Artillery 2.x JSON report (summary-only);
//! - [`siege`]: siege `-l` log or JSON summary (summary-only);
//! - [`soapui`]: SoapUI LoadTest statistics export (summary-only);
//! - [`taurus`]: Taurus (bzt) kpi.jtl (raw);
//! - [`summary`]: helpers shared by the summary-only parsers.
//!
//! Input may be gzip-compressed (bytes `1f 8b`): it is unwrapped transparently and sniffed
//! again. The decompressed bytes count against [`RunLimits::max_input_bytes`], and a ratio
//! of decompressed to compressed bytes above [`RunLimits::max_gzip_ratio`] (a gzip bomb)
//! stops the import with [`IngestError::TooLarge`]. A UTF-8 byte-order mark is skipped.

pub mod ab;
pub mod active_users;
pub mod artillery;
pub mod autocannon;
pub mod bounded;
pub mod gatling;
pub mod hey;
pub mod influx;
pub mod jmeter_csv;
pub mod jmeter_xml;
pub mod k6_csv;
pub mod k6_json;
pub mod k6_points;
pub mod k6_summary;
pub mod locust;
pub mod oha;
pub mod siege;
pub mod soapui;
pub mod summary;
pub mod taurus;
pub mod timestamp;
pub mod vegeta;
pub mod wrk;

use std::cell::Cell;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::rc::Rc;

use self::bounded::{DocumentCap, LineCap};
use crate::domain::runs::limits::GZIP_RATIO_FLOOR_BYTES;
use crate::domain::runs::{RunData, RunLimits};

/// A load-tool result format harrier reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Sniff the format from the first bytes.
    Auto,
    /// JMeter JTL, CSV flavour (any delimiter, with or without header).
    JmeterCsv,
    /// JMeter JTL, XML flavour.
    JmeterXml,
    /// ApacheBench text report(s).
    Ab,
    /// wrk / wrk2 text report(s) with `--latency`.
    Wrk,
    /// hey text report (summary-only) or `-o csv` (raw).
    Hey,
    /// oha JSON or text report (summary-only) or CSV (raw).
    Oha,
    /// vegeta results as JSON lines (raw) or `report -type=json` (summary-only).
    Vegeta,
    /// autocannon `--json` result (summary-only).
    Autocannon,
    /// Artillery 2.x JSON report (summary-only).
    Artillery,
    /// siege `-l` log or JSON summary (summary-only).
    Siege,
    /// SoapUI LoadTest statistics export (summary-only).
    Soapui,
    /// Taurus (bzt) kpi.jtl (raw).
    Taurus,
    /// Gatling simulation.log: text (2.x – 3.12) or binary (3.13+).
    Gatling,
    /// k6 `--out json` (NDJSON points).
    K6Json,
    /// k6 `--out csv` (points).
    K6Csv,
    /// k6 `--summary-export` or handleSummary data (summary-only).
    K6Summary,
    /// Locust `_stats.csv`, `_stats_history.csv` or `--json` output (summary-only).
    Locust,
}

impl Format {
    /// The names accepted by `--format` and `?format=`.
    pub const NAMES: &'static [&'static str] = &[
        "auto",
        "jmeter-csv",
        "jmeter-xml",
        "ab",
        "wrk",
        "hey",
        "oha",
        "vegeta",
        "autocannon",
        "artillery",
        "siege",
        "soapui",
        "taurus",
        "gatling",
        "k6",
        "k6-json",
        "k6-csv",
        "k6-summary",
        "locust",
    ];

    /// Parses a `--format` name (also `jmeter`, which sniffs CSV vs XML).
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "auto" | "" | "jmeter" => Some(Format::Auto),
            "jmeter-csv" | "jtl-csv" => Some(Format::JmeterCsv),
            "jmeter-xml" | "jtl-xml" => Some(Format::JmeterXml),
            "ab" => Some(Format::Ab),
            "wrk" | "wrk2" => Some(Format::Wrk),
            "hey" => Some(Format::Hey),
            "oha" => Some(Format::Oha),
            "vegeta" => Some(Format::Vegeta),
            "autocannon" => Some(Format::Autocannon),
            "artillery" => Some(Format::Artillery),
            "siege" => Some(Format::Siege),
            "soapui" => Some(Format::Soapui),
            "taurus" => Some(Format::Taurus),
            "gatling" => Some(Format::Gatling),
            // `k6` sniffs which of its outputs a file is.
            "k6" => Some(Format::Auto),
            "k6-json" => Some(Format::K6Json),
            "k6-csv" => Some(Format::K6Csv),
            "k6-summary" => Some(Format::K6Summary),
            "locust" => Some(Format::Locust),
            _ => None,
        }
    }
}

/// One run read from a file (an ab file may hold several).
#[derive(Debug, Clone)]
pub struct ParsedRun {
    /// The tool that wrote the file: `jmeter`, `ab`.
    pub tool: String,
    /// A name taken from the file's content (ab: `host/path`), if any.
    pub name_hint: Option<String>,
    pub data: RunData,
}

/// Why a file could not be imported at all.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(
        "{source_name}: not a supported format (supported: {supported}); name the format with --format (CLI) or ?format= (API)"
    )]
    UnknownFormat {
        source_name: String,
        supported: String,
    },
    #[error("{source_name}, line {line}: {message}")]
    Invalid {
        source_name: String,
        line: u64,
        message: String,
    },
    /// The input is larger than the limits once decompressed (or decompresses
    /// implausibly well: a gzip bomb). Nothing of it may be stored.
    #[error("{source_name}: {message}")]
    TooLarge {
        source_name: String,
        message: String,
    },
    #[error("{source_name}: {source}")]
    Io {
        source_name: String,
        #[source]
        source: std::io::Error,
    },
}

/// How many bytes are read ahead to sniff the format and the CSV layout.
const SNIFF_BYTES: usize = 64 * 1024;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
const GZIP_MAGIC: &[u8] = b"\x1F\x8B";

/// Reads every run in `input`. `source_name` names the input in errors (a file name).
///
/// `Format::Auto` sniffs the first bytes: `<?xml` / `<testResults` → JMeter XML; then each
/// format's own `looks_like` (docs/formats.md#sniffing-and-compression: Taurus' Locust-executor header, SoapUI's
/// statistics header, siege's log header or summary, Artillery's `{"aggregate":{"counters"`,
/// autocannon's `{"url":…,"latency":{"average"`, vegeta results or report, oha JSON/CSV,
/// hey CSV/text, wrk's `Running … test @`); Gatling, k6 and Locust files by the rules of
/// docs/formats.md#sniffing-and-compression (see `sniff_formats_a`); a JMeter CSV header or a headerless row in a
/// default JMeter layout → JMeter CSV; a line starting `This is ApacheBench` or
/// `Benchmarking ` → ab; anything else is [`IngestError::UnknownFormat`]. gzip input is
/// unwrapped first, a UTF-8 BOM skipped.
///
/// Errors: `UnknownFormat` (sniffing failed), `Invalid` (the file is of the format but
/// nothing in it is readable: the line of the first problem), `Io` (reading failed before
/// anything was read). Damaged rows in an otherwise readable file are not errors: they
/// are listed in [`RunData::rejected`].
pub fn parse<R: BufRead>(
    input: R,
    format: Format,
    source_name: &str,
) -> Result<Vec<ParsedRun>, IngestError> {
    parse_with(input, format, source_name, &RunLimits::default())
}

/// [`parse`] holding every sample to `limits`: a sample outside them is a rejected row
/// with its line (see [`RunLimits`]).
pub fn parse_with<R: BufRead>(
    mut input: R,
    format: Format,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    parse_dyn(&mut input, format, source_name, true, limits)
}

fn parse_dyn(
    input: &mut dyn BufRead,
    format: Format,
    source_name: &str,
    may_be_gzip: bool,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let io_err = |source: io::Error| IngestError::Io {
        source_name: source_name.to_owned(),
        source,
    };
    let mut prefix = read_prefix(input, SNIFF_BYTES).map_err(io_err)?;
    if may_be_gzip && prefix.starts_with(GZIP_MAGIC) {
        let compressed_read = Rc::new(Cell::new(0u64));
        let tripped = Rc::new(Cell::new(None));
        let compressed = CountingBufRead {
            inner: Cursor::new(prefix).chain(input),
            read: compressed_read.clone(),
        };
        let guard = DecompressionGuard {
            inner: flate2::bufread::MultiGzDecoder::new(compressed),
            compressed_read,
            out: 0,
            max_bytes: limits.max_input_bytes,
            max_ratio: limits.max_gzip_ratio,
            tripped: tripped.clone(),
        };
        let mut gz = BufReader::with_capacity(1 << 16, guard);
        let parsed = parse_dyn(&mut gz, format, source_name, false, limits);
        // Parsers keep what they read before a read error; a bomb must store nothing.
        if let Some(message) = tripped.take() {
            return Err(IngestError::TooLarge {
                source_name: source_name.to_owned(),
                message,
            });
        }
        return parsed;
    }
    if prefix.starts_with(UTF8_BOM) {
        prefix.drain(..UTF8_BOM.len());
    }
    if prefix.iter().all(u8::is_ascii_whitespace) {
        return Err(IngestError::Invalid {
            source_name: source_name.to_owned(),
            line: 1,
            message: "the file is empty".to_owned(),
        });
    }
    let format = match format {
        Format::Auto => sniff(&prefix).ok_or_else(|| IngestError::UnknownFormat {
            source_name: source_name.to_owned(),
            supported: SUPPORTED.to_owned(),
        })?,
        f => f,
    };
    if format == Format::JmeterXml
        && prefix.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'<')
    {
        return Err(IngestError::Invalid {
            source_name: source_name.to_owned(),
            line: 1,
            message: "not a JMeter XML JTL: expected `<?xml` or `<testResults` at the start"
                .to_owned(),
        });
    }
    let chained = Cursor::new(prefix.clone()).chain(input);
    // Whole-file summaries are read whole, up to max_document_bytes; everything else line
    // by line, each line up to max_line_bytes (an XML JTL and a binary simulation.log
    // cap their own elements and records).
    let document = match format {
        Format::K6Summary => Some("a k6 summary"),
        Format::Autocannon => Some("an autocannon result"),
        Format::Artillery => Some("an Artillery report"),
        Format::Siege => Some("a siege log or summary"),
        Format::Soapui => Some("a SoapUI statistics export"),
        Format::Wrk => Some("a wrk report"),
        Format::Locust if prefix.trim_ascii_start().starts_with(b"[") => {
            Some("a Locust --json output")
        }
        _ => None,
    };
    if let Some(what) = document {
        let capped = DocumentCap::new(chained, limits.max_document_bytes);
        let tripped = capped.tripped();
        let mut input = BufReader::with_capacity(1 << 16, capped);
        let parsed = dispatch(&mut input, format, &prefix, source_name, limits)
            .and_then(|runs| plausible(runs, &prefix, source_name, limits));
        if tripped.borrow().is_some() {
            return Err(bounded::document_error(
                source_name,
                limits.max_document_bytes,
                what,
            ));
        }
        return parsed;
    }
    let binary_gatling = format == Format::Gatling && prefix.first() == Some(&0);
    if format == Format::JmeterXml || binary_gatling {
        let mut input = BufReader::with_capacity(1 << 16, chained);
        return dispatch(&mut input, format, &prefix, source_name, limits);
    }
    let mut capped = LineCap::new(chained, limits.max_line_bytes);
    let skipped = capped.skipped();
    let parsed = dispatch(&mut capped, format, &prefix, source_name, limits)
        .and_then(|runs| plausible(runs, &prefix, source_name, limits));
    let skipped = skipped.borrow();
    if skipped.count == 0 {
        return parsed;
    }
    match parsed {
        Ok(runs) if runs.iter().all(|r| r.data.labels.is_empty()) => {
            Err(skipped.error(source_name, "no other row"))
        }
        Ok(mut runs) => {
            if let Some(first) = runs.first_mut() {
                skipped.add_to(&mut first.data);
            }
            Ok(runs)
        }
        // The source failed, or was too large: that is what the error says.
        Err(e @ (IngestError::Io { .. } | IngestError::TooLarge { .. })) => Err(e),
        Err(e) => Err(skipped.error(source_name, &e.to_string())),
    }
}

/// `runs` unless a summary-only one reports figures that cannot be true under `limits`
/// ([`summary::implausible`]; most readers check their own rows with their exact lines
/// first): then an error at the first line of `prefix` naming the label, else line 1.
fn plausible(
    runs: Vec<ParsedRun>,
    prefix: &[u8],
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    for run in runs.iter().filter(|r| r.data.summary_only) {
        let scopes = std::iter::once(("the run", &run.data.overall))
            .chain(run.data.labels.iter().map(|l| (l.label.as_str(), &l.stats)));
        for (what, stats) in scopes {
            if let Some(why) = summary::implausible(stats, &limits.samples, what) {
                let text = String::from_utf8_lossy(prefix);
                let line = text
                    .lines()
                    .position(|l| l.contains(what))
                    .map_or(1, |i| i as u64 + 1);
                return Err(IngestError::Invalid {
                    source_name: source_name.to_owned(),
                    line,
                    message: format!("impossible figure: {why}"),
                });
            }
        }
    }
    Ok(runs)
}

/// Hands `input` (`prefix` its first bytes, as sniffed) to the parser of `format`.
fn dispatch(
    input: &mut dyn BufRead,
    format: Format,
    prefix: &[u8],
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let io_err = |source: io::Error| IngestError::Io {
        source_name: source_name.to_owned(),
        source,
    };
    let invalid = |line: u64, message: String| IngestError::Invalid {
        source_name: source_name.to_owned(),
        line,
        message,
    };
    let data = match format {
        Format::Ab => return ab::parse_with(input, source_name, limits),
        Format::Wrk => return wrk::parse_with(input, source_name, limits),
        Format::Hey => return hey::parse(input, source_name, limits),
        Format::Oha => return oha::parse(input, source_name, limits),
        Format::Vegeta => return vegeta::parse(input, source_name, limits),
        Format::Autocannon => return autocannon::parse(input, source_name),
        Format::Artillery => return artillery::parse(input, source_name),
        Format::Siege => return siege::parse(input, source_name),
        Format::Soapui => return soapui::parse(input, source_name),
        Format::Taurus => return taurus::parse(input, source_name, limits),
        Format::Gatling => return gatling::parse(input, source_name, limits),
        Format::K6Json => return k6_json::parse(input, source_name, limits),
        Format::K6Csv => return k6_csv::parse(input, source_name, limits),
        Format::K6Summary => return k6_summary::parse_with(input, source_name, limits),
        Format::Locust => return locust::parse_with(input, source_name, limits),
        Format::JmeterCsv => {
            let Some(layout) = jmeter_csv::detect(prefix) else {
                return Err(invalid(1, jmeter_csv::not_detected_message()));
            };
            jmeter_csv::parse(input, &layout, limits).map_err(io_err)?
        }
        Format::JmeterXml | Format::Auto => jmeter_xml::parse(input, limits).map_err(io_err)?,
    };
    if data.labels.is_empty()
        && let Some(first) = data.rejected.first()
    {
        return Err(invalid(
            first.line,
            format!(
                "nothing readable: {} rows rejected; the first: {}",
                data.rejected_rows, first.reason
            ),
        ));
    }
    Ok(vec![ParsedRun {
        tool: "jmeter".to_owned(),
        name_hint: None,
        data,
    }])
}

/// Why [`gunzip_limited`] gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GunzipError {
    /// Past the byte limit or the ratio guard (the message says which): a 413.
    TooLarge(String),
    /// Not readable gzip.
    Invalid(String),
}

/// Decompresses a gzip body held in memory (line-protocol writes) under the same guard as
/// imports: at most `max_bytes` out, and no more than `max_ratio` times the compressed
/// size once past [`GZIP_RATIO_FLOOR_BYTES`] (0: no ratio check).
pub fn gunzip_limited(
    compressed: &[u8],
    max_bytes: u64,
    max_ratio: u64,
) -> Result<Vec<u8>, GunzipError> {
    let compressed_read = Rc::new(Cell::new(0u64));
    let tripped = Rc::new(Cell::new(None));
    let mut guard = DecompressionGuard {
        inner: flate2::bufread::MultiGzDecoder::new(CountingBufRead {
            inner: compressed,
            read: compressed_read.clone(),
        }),
        compressed_read,
        out: 0,
        max_bytes,
        max_ratio,
        tripped: tripped.clone(),
    };
    let mut out = Vec::new();
    match guard.read_to_end(&mut out) {
        Ok(_) => Ok(out),
        Err(e) => Err(match tripped.take() {
            Some(message) => GunzipError::TooLarge(message),
            None => GunzipError::Invalid(e.to_string()),
        }),
    }
}

/// Counts the bytes consumed from a buffered reader.
struct CountingBufRead<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for CountingBufRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for CountingBufRead<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.read.set(self.read.get() + amount as u64);
        self.inner.consume(amount);
    }
}

/// Stops a decompressed stream past `max_bytes`, or once it is past
/// [`GZIP_RATIO_FLOOR_BYTES`] and more than `max_ratio` times the compressed bytes read;
/// says why in `tripped` (the error a parser sees may be turned into a rejected row).
struct DecompressionGuard<R> {
    inner: R,
    compressed_read: Rc<Cell<u64>>,
    out: u64,
    max_bytes: u64,
    max_ratio: u64,
    tripped: Rc<Cell<Option<String>>>,
}

impl<R: Read> Read for DecompressionGuard<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out += n as u64;
        let compressed = self.compressed_read.get().max(1);
        let why = if self.out > self.max_bytes {
            Some(format!(
                "larger than the import limit of {} bytes once decompressed; nothing was stored (raise max_import_bytes in harrier.toml)",
                self.max_bytes
            ))
        } else if self.max_ratio > 0
            && self.out > GZIP_RATIO_FLOOR_BYTES
            && self.out / compressed > self.max_ratio
        {
            Some(format!(
                "gzip input expands more than {} times ({} bytes from {compressed}): refused as a decompression bomb; nothing was stored (limits.max_gzip_ratio in harrier.toml)",
                self.max_ratio, self.out
            ))
        } else {
            None
        };
        match why {
            Some(message) => {
                let err = io::Error::new(io::ErrorKind::InvalidData, message.clone());
                self.tripped.set(Some(message));
                Err(err)
            }
            None => Ok(n),
        }
    }
}

/// The formats `Format::Auto` recognises, for [`IngestError::UnknownFormat`].
const SUPPORTED: &str = "JMeter JTL CSV with or without header (jmeter-csv), JMeter JTL XML (jmeter-xml), ApacheBench text output (ab), Gatling simulation.log text or binary (gatling), k6 --out json / --out csv / summary export (k6-json, k6-csv, k6-summary), Locust stats CSV, stats history CSV or --json (locust), wrk / wrk2 text (wrk), hey text or CSV (hey), oha JSON, text or CSV (oha), vegeta results JSON lines or JSON report (vegeta), autocannon JSON (autocannon), Artillery 2.x JSON report (artillery), siege log or summary (siege), SoapUI LoadTest statistics (soapui), Taurus kpi.jtl (taurus); each may be gzip-compressed";

/// Reads up to `limit` bytes (fewer only at end of input).
fn read_prefix(input: &mut dyn BufRead, limit: usize) -> io::Result<Vec<u8>> {
    let mut prefix = Vec::with_capacity(limit.min(1 << 16));
    while prefix.len() < limit {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            break;
        }
        let n = buf.len().min(limit - prefix.len());
        prefix.extend_from_slice(&buf[..n]);
        input.consume(n);
    }
    Ok(prefix)
}

/// Recognises a format from the first bytes of a file (BOM already skipped).
pub fn sniff(prefix: &[u8]) -> Option<Format> {
    if let Some(f) = sniff_formats_a(prefix) {
        return Some(f);
    }
    let trimmed = prefix.trim_ascii_start();
    if trimmed.starts_with(b"<?xml") || trimmed.starts_with(b"<testResults") {
        return Some(Format::JmeterXml);
    }
    // oha before hey: oha's text report has hey's layout plus "Success rate:".
    if oha::looks_like(prefix) {
        return Some(Format::Oha);
    }
    if hey::looks_like(prefix) {
        return Some(Format::Hey);
    }
    if vegeta::looks_like(prefix) {
        return Some(Format::Vegeta);
    }
    if autocannon::looks_like(prefix) {
        return Some(Format::Autocannon);
    }
    if artillery::looks_like(prefix) {
        return Some(Format::Artillery);
    }
    if siege::looks_like(prefix) {
        return Some(Format::Siege);
    }
    if soapui::looks_like(prefix) {
        return Some(Format::Soapui);
    }
    if taurus::looks_like(prefix) {
        return Some(Format::Taurus);
    }
    if wrk::looks_like(prefix) {
        return Some(Format::Wrk);
    }
    if jmeter_csv::detect(prefix).is_some() {
        return Some(Format::JmeterCsv);
    }
    // ab writes its banner first, but console output (a nohup.out) may hold any number of
    // other lines before it: look through the whole prefix.
    let ab = prefix
        .split(|&b| b == b'\n')
        .any(|line| line.starts_with(b"This is ApacheBench") || line.starts_with(b"Benchmarking "));
    ab.then_some(Format::Ab)
}

/// Gatling, k6 and Locust files (docs/formats.md#sniffing-and-compression), recognised by their first bytes.
fn sniff_formats_a(prefix: &[u8]) -> Option<Format> {
    let first_line = prefix.split(|&b| b == b'\n').next().unwrap_or_default();
    let fields: Vec<&[u8]> = first_line.split(|&b| b == b'\t').collect();
    // Text simulation.log: ASSERTION or RUN first (2.0–2.1: RUN is the third field).
    if matches!(fields[0], b"RUN" | b"ASSERTION" | b"USER" | b"REQUEST")
        || (fields.len() > 3 && fields[2] == b"RUN")
    {
        return Some(Format::Gatling);
    }
    let trimmed = prefix.trim_ascii_start();
    if first_line.starts_with(b"metric_name,timestamp,metric_value") {
        return Some(Format::K6Csv);
    }
    // Locust CSVs (2.x and 0.x headers) and --json output.
    let header = String::from_utf8_lossy(first_line);
    if (header.contains("Name")
        && (header.contains("Request Count") || header.contains("# requests")))
        || header.starts_with("Timestamp,User Count,")
    {
        return Some(Format::Locust);
    }
    if trimmed.starts_with(b"[") {
        let has = |needle: &[u8]| prefix.windows(needle.len()).any(|w| w == needle);
        if has(b"\"num_requests\"") && has(b"\"response_times\"") {
            return Some(Format::Locust);
        }
    }
    // k6 NDJSON: every line an object with "type" Metric or Point (any key order).
    if trimmed.starts_with(b"{") {
        let line = trimmed.split(|&b| b == b'\n').next().unwrap_or_default();
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line)
            && matches!(v["type"].as_str(), Some("Metric" | "Point"))
            && v.get("metric").is_some()
        {
            return Some(Format::K6Json);
        }
        let has = |needle: &[u8]| prefix.windows(needle.len()).any(|w| w == needle);
        if has(b"\"root_group\"") && has(b"\"metrics\"") {
            return Some(Format::K6Summary);
        }
    }
    // Binary simulation.log: RUN header 0x00, then the version string "3.x.y".
    if let [0, a, b, c, d, rest @ ..] = prefix {
        let len = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
        if (3..=32).contains(&len) && rest.len() > len && rest[0].is_ascii_digit() {
            return Some(Format::Gatling);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line limit of these tests, bytes.
    const MAX: usize = 1024;

    fn limits(max_document_bytes: u64) -> RunLimits {
        RunLimits {
            max_line_bytes: MAX,
            max_document_bytes,
            ..RunLimits::default()
        }
    }

    /// `template` with its `{}` replaced by as many `fill` as make it `len` bytes.
    fn padded(template: &str, fill: char, len: usize) -> String {
        let pad = len + 2 - template.len();
        template.replacen("{}", &fill.to_string().repeat(pad), 1)
    }

    #[test]
    fn every_line_format_reads_a_line_at_the_limit_and_rejects_one_past_it_with_its_number() {
        let jtl_head = "timeStamp,elapsed,label,responseCode,success\n";
        let jtl_row = "1700000000000,100,{},200,true";
        let cases: [(Format, &str, &str, char); 7] = [
            (Format::JmeterCsv, jtl_head, jtl_row, 'a'),
            (Format::Taurus, jtl_head, jtl_row, 'a'),
            (
                Format::Gatling,
                "RUN\tS\ts\t1700000000000\t \t3.9.5\n",
                "REQUEST\t\t{}\t1700000000000\t1700000000010\tOK\t ",
                'a',
            ),
            (
                Format::K6Json,
                "",
                r#"{"metric":"http_req_duration","type":"Point","data":{"time":"2024-01-01T00:00:00Z","value":1,"tags":{"method":"GET","status":"200","name":"{}"}}}"#,
                'a',
            ),
            (
                Format::K6Csv,
                "metric_name,timestamp,metric_value,check,error,error_code,expected_response,group,method,name,proto,scenario,status,subproto,tls_version,url,extra_tags\n",
                "http_req_duration,1700000000,12,,,,true,,GET,{},HTTP/1.1,default,200,,,http://x/,",
                'a',
            ),
            (
                Format::Vegeta,
                "",
                r#"{"attack":"","seq":0,"code":200,"timestamp":"2024-01-01T00:00:00Z","latency":1000000,"bytes_out":0,"bytes_in":10,"error":"","body":null,"method":"GET","url":"http://x/{}"}"#,
                'a',
            ),
            (
                Format::Hey,
                "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n",
                "0.1,0,0,0,0,0,200,{}",
                '0',
            ),
        ];
        for (format, head, row, fill) in cases {
            let header_lines = head.matches('\n').count() as u64;
            let body = format!(
                "{head}{}\n{}\n{}\n",
                padded(row, fill, MAX),
                padded(row, fill, MAX + 1),
                padded(row, fill, row.len() + 8)
            );
            assert_eq!(body.lines().nth(header_lines as usize).unwrap().len(), MAX);
            let runs = parse_with(body.as_bytes(), format, "t", &limits(1 << 20))
                .unwrap_or_else(|e| panic!("{format:?}: {e}"));
            let data = &runs[0].data;
            let over = header_lines + 2;
            assert_eq!(
                data.rejected_rows, 1,
                "{format:?}: only the line past the limit: {:?}",
                data.rejected
            );
            assert_eq!(data.rejected[0].line, over, "{format:?}");
            assert!(
                data.rejected[0].reason.contains("limits.max_line_bytes"),
                "{format:?}: {}",
                data.rejected[0].reason
            );
            assert_eq!(
                data.overall.count, 2,
                "{format:?}: the line at the limit reads"
            );
        }
    }

    #[test]
    fn a_jtl_row_whose_quoted_field_spans_many_short_lines_is_stopped_at_the_limit() {
        let head = "timeStamp,elapsed,label,responseCode,success,failureMessage\n";
        let ok = "1700000000000,100,a,200,true,\n";
        let body = format!(
            "{head}{ok}1700000000000,100,b,500,false,\"{}\"\n{ok}",
            "x\n".repeat(200 * 1024)
        );
        let runs = parse_with(
            body.as_bytes(),
            Format::JmeterCsv,
            "t.jtl",
            &limits(1 << 20),
        )
        .expect("the row before it imports");
        let data = &runs[0].data;
        assert_eq!(data.overall.count, 1, "only the row before it");
        assert!(
            data.rejected
                .iter()
                .any(|r| r.reason.contains("limits.max_line_bytes")),
            "{:?}",
            data.rejected
        );
        // The same row within the limit reads.
        let body = format!(
            "{head}{ok}1700000000000,100,b,500,false,\"{}\"\n{ok}",
            "x\n".repeat(100)
        );
        let runs = parse_with(
            body.as_bytes(),
            Format::JmeterCsv,
            "t.jtl",
            &limits(1 << 20),
        )
        .unwrap();
        assert_eq!(runs[0].data.overall.count, 3);
    }

    #[test]
    fn other_csv_rows_whose_quoted_field_spans_many_short_lines_stop_at_the_limit() {
        let many = "x\n".repeat(200 * 1024);
        let cases = [
            (
                Format::K6Csv,
                "metric_name,timestamp,metric_value,name\n",
                "http_req_duration,1700000000,12,\"{}\"\n",
            ),
            (
                Format::Locust,
                "Type,Name,Request Count,Failure Count\n",
                "GET,\"{}\",1,0\n",
            ),
            (
                Format::Hey,
                "response-time,offset,status-code\n",
                "0.1,0,\"{}\"\n",
            ),
        ];
        for (format, head, row) in cases {
            let body = format!("{head}{}", row.replacen("{}", &many, 1));
            // Refused, or read with the row rejected: never a 400 KiB row with a 1 KiB limit.
            match parse_with(body.as_bytes(), format, "t", &limits(1 << 20)) {
                Ok(runs) => assert!(
                    runs[0]
                        .data
                        .rejected
                        .iter()
                        .any(|r| r.reason.contains("limits.max_line_bytes")),
                    "{format:?}: {:?}",
                    runs[0].data.rejected
                ),
                Err(e) => assert!(
                    e.to_string().contains("limits.max_line_bytes"),
                    "{format:?}: {e}"
                ),
            }
            let body = format!("{head}{}", row.replacen("{}", "x\ny", 1));
            parse_with(body.as_bytes(), format, "t", &limits(1 << 20))
                .unwrap_or_else(|e| panic!("{format:?} within the limit: {e}"));
        }
    }

    #[test]
    fn an_xml_element_at_the_limit_reads_and_one_past_it_stops_the_import() {
        let head = "<?xml version=\"1.0\"?>\n<testResults version=\"1.2\">\n";
        let element = r#"<httpSample t="5" ts="1700000000000" s="true" rc="200" lb="{}"/>"#;
        // quick-xml counts an element from its `<` to its `>`; its line feed is the next text.
        let ok = format!("{head}{}\n</testResults>\n", padded(element, 'a', MAX));
        let text = format!("{head}<a>{}</a>\n</testResults>\n", "x".repeat(MAX));
        parse_with(
            text.as_bytes(),
            Format::JmeterXml,
            "t.jtl",
            &limits(1 << 20),
        )
        .expect("a text run at the limit");
        let text = format!("{head}<a>{}</a>\n</testResults>\n", "x".repeat(MAX + 1));
        parse_with(
            text.as_bytes(),
            Format::JmeterXml,
            "t.jtl",
            &limits(1 << 20),
        )
        .expect_err("a text run past the limit");
        let runs = parse_with(ok.as_bytes(), Format::JmeterXml, "t.jtl", &limits(1 << 20))
            .expect("at the limit");
        assert_eq!(runs[0].data.overall.count, 1);
        let over = format!("{head}{}\n</testResults>\n", padded(element, 'a', MAX + 1));
        let err = parse_with(
            over.as_bytes(),
            Format::JmeterXml,
            "t.jtl",
            &limits(1 << 20),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("t.jtl")
                && err.contains("line 3")
                && err.contains("limits.max_line_bytes"),
            "{err}"
        );
    }

    #[test]
    fn a_whole_file_summary_at_the_limit_reads_and_one_byte_more_is_refused() {
        let fixtures = [
            (Format::K6Summary, "k6/summary-export.json"),
            (Format::Locust, "locust/run_final_stats.json"),
            (Format::Autocannon, "autocannon/flaky.json"),
            (Format::Wrk, "wrk/root_latency.txt"),
        ];
        for (format, path) in fixtures {
            let path = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).unwrap();
            let max = 8192u64;
            let at = format!("{text}{}", " ".repeat(max as usize - text.len()));
            parse_with(at.as_bytes(), format, "s", &limits(max))
                .unwrap_or_else(|e| panic!("{format:?} at the limit: {e}"));
            let past = format!("{at} ");
            let err = parse_with(past.as_bytes(), format, "s", &limits(max)).unwrap_err();
            assert!(
                matches!(err, IngestError::TooLarge { .. })
                    && err.to_string().contains("limits.max_document_bytes")
                    && err.to_string().contains("8192 bytes"),
                "{format:?}: {err}"
            );
        }
    }

    #[test]
    fn a_binary_simulation_log_string_past_the_limit_is_refused() {
        // RUN record: the version string, then a simulation name claiming 1 MiB + 1.
        let mut b = vec![0u8];
        b.extend_from_slice(&6i32.to_be_bytes());
        b.extend_from_slice(b"3.13.5");
        b.push(0);
        b.extend_from_slice(&((MAX as i32) + 1).to_be_bytes());
        b.extend(std::iter::repeat_n(b'a', MAX + 1));
        let err = parse_with(&b[..], Format::Gatling, "sim.log", &limits(1 << 20))
            .unwrap_err()
            .to_string();
        assert!(err.contains("limits.max_line_bytes"), "{err}");
    }

    fn fixture(path: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/fixtures/{path}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    /// `text` with `from` replaced by `to` (which must be there), read as `format`: the
    /// error, which must name `line` and contain `says`.
    fn impossible(format: Format, text: &str, from: &str, to: &str, line: u64, says: &str) {
        assert!(text.contains(from), "{from:?} not in the fixture");
        let text = text.replacen(from, to, 1);
        parse_with(text.as_bytes(), format, "s", &RunLimits::default())
            .map(|runs| panic!("{format:?} {to:?} accepted: {:?}", runs[0].data.overall))
            .unwrap_or_else(|e| {
                let e = e.to_string();
                assert!(
                    e.contains(&format!("line {line}:")) && e.contains(says),
                    "{format:?} {to:?}: {e}"
                );
            });
    }

    #[test]
    fn summaries_with_impossible_figures_are_refused_with_their_line() {
        let k6 = fixture("k6/summary-export.json");
        parse_with(k6.as_bytes(), Format::K6Summary, "s", &RunLimits::default()).unwrap();
        // http_reqs starts on line 3, http_req_duration on 95, http_req_failed further.
        impossible(
            Format::K6Summary,
            &k6,
            "\"count\": 60,",
            "\"count\": -60,",
            3,
            "not a count",
        );
        impossible(
            Format::K6Summary,
            &k6,
            "\"count\": 60,",
            "\"count\": 6.5,",
            3,
            "not a count",
        );
        impossible(
            Format::K6Summary,
            &k6,
            "\"p(95)\": 145.84714444999744",
            "\"p(95)\": 45.8",
            95,
            "percentiles decrease",
        );
        impossible(
            Format::K6Summary,
            &k6,
            "\"max\": 1003.908951",
            "\"max\": 1e300",
            95,
            "limits.max_elapsed_ms",
        );
        impossible(
            Format::K6Summary,
            &k6,
            "\"min\": 0.389495,\n            \"med\": 50.07048",
            "\"min\": -1,\n            \"med\": 50.07048",
            95,
            "negative",
        );

        let wrk = fixture("wrk/root_latency.txt");
        parse_with(wrk.as_bytes(), Format::Wrk, "s", &RunLimits::default()).unwrap();
        impossible(
            Format::Wrk,
            &wrk,
            "90%   47.96ms",
            "90%   40.00ms",
            1,
            "percentiles decrease",
        );
        // 540 requests in 1 µs: 5.4 × 10⁸ per second.
        impossible(
            Format::Wrk,
            &wrk,
            "540 requests in 3.02s",
            "540000 requests in 0.001s",
            1,
            "at any sane rate",
        );
        impossible(
            Format::Wrk,
            &wrk,
            "540 requests in 3.02s",
            "540 requests in 9223372036854775.807s",
            1,
            "longer than the accepted timestamp window",
        );

        let ab = fixture("ab/post_stdout.txt");
        parse_with(ab.as_bytes(), Format::Ab, "s", &RunLimits::default()).unwrap();
        let ab_line = ab
            .lines()
            .position(|l| l.starts_with("This is ApacheBench"))
            .unwrap() as u64
            + 1;
        impossible(
            Format::Ab,
            &ab,
            "Time taken for tests:   0.181 seconds",
            "Time taken for tests:   9223372036854775.807 seconds",
            ab_line,
            "duration",
        );
        impossible(
            Format::Ab,
            &ab,
            "Failed requests:        0",
            "Failed requests:        500",
            ab_line,
            "more than the 200 requests",
        );

        let locust = fixture("locust/run_stats.csv");
        let locust = locust.replacen("GET,/flaky,113,24", "GET,/flaky,113,240", 1);
        let runs = parse_with(
            locust.as_bytes(),
            Format::Locust,
            "s",
            &RunLimits::default(),
        )
        .unwrap();
        let rejected = &runs[0].data.rejected;
        assert!(
            rejected
                .iter()
                .any(|r| r.line == 2 && r.reason.contains("more than the 113 requests")),
            "{rejected:?}"
        );
        let locust =
            fixture("locust/run_stats.csv").replacen("GET,/flaky,113,", "GET,/flaky,-113,", 1);
        let runs = parse_with(
            locust.as_bytes(),
            Format::Locust,
            "s",
            &RunLimits::default(),
        )
        .unwrap();
        assert!(
            runs[0]
                .data
                .rejected
                .iter()
                .any(|r| r.line == 2 && r.reason.contains("not a count")),
            "{:?}",
            runs[0].data.rejected
        );

        let soapui = fixture("soapui/SYNTHETIC_LoadTest_1-statistics.txt");
        let soapui_row = soapui.lines().nth(1).unwrap().to_string();
        let fields: Vec<&str> = soapui_row.split(',').collect();
        let cnt_at = fields.len() - 6;
        let mut bad: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
        bad[cnt_at] = "-7".into();
        let text = soapui.replacen(&soapui_row, &bad.join(","), 1);
        match parse_with(text.as_bytes(), Format::Soapui, "s", &RunLimits::default()) {
            Ok(runs) => assert!(
                runs[0]
                    .data
                    .rejected
                    .iter()
                    .any(|r| r.line == 2 && r.reason.contains("cnt -7 is not a count")),
                "{:?}",
                runs[0].data.rejected
            ),
            Err(e) => assert!(
                e.to_string().contains("line 2") && e.to_string().contains("not a count"),
                "{e}"
            ),
        }

        // Checked after reading (autocannon): the line of the document it names.
        let ac = fixture("autocannon/flaky.json");
        parse_with(
            ac.as_bytes(),
            Format::Autocannon,
            "s",
            &RunLimits::default(),
        )
        .unwrap();
        impossible(
            Format::Autocannon,
            &ac,
            "\"duration\":3.03",
            "\"duration\":-3.03",
            1,
            "negative",
        );
    }

    #[test]
    fn each_plausibility_rule_names_the_figure() {
        use crate::domain::runs::{SampleLimits, Stats};
        let good = Stats {
            count: 100,
            errors: 5,
            error_pct: Some(5.0),
            min_ms: Some(1.0),
            mean_ms: Some(10.0),
            max_ms: Some(50.0),
            p50_ms: Some(9.0),
            p90_ms: Some(20.0),
            p95_ms: Some(30.0),
            p99_ms: Some(45.0),
            first_start_ms: Some(1_700_000_000_000),
            window_ms: Some(10_000),
            throughput_rps: Some(10.0),
            ..Stats::default()
        };
        let limits = SampleLimits::default();
        assert_eq!(summary::implausible(&good, &limits, "x"), None);
        let cases: [(Stats, &str); 11] = [
            (
                Stats {
                    errors: 101,
                    ..good.clone()
                },
                "101 failures is more than the 100 requests",
            ),
            (
                Stats {
                    error_pct: Some(-1.0),
                    ..good.clone()
                },
                "error percentage",
            ),
            (
                Stats {
                    min_ms: Some(f64::NAN),
                    ..good.clone()
                },
                "not a number",
            ),
            (
                Stats {
                    mean_ms: Some(-3.0),
                    ..good.clone()
                },
                "negative",
            ),
            (
                Stats {
                    max_ms: Some(9.3e18),
                    ..good.clone()
                },
                "limits.max_elapsed_ms",
            ),
            (
                Stats {
                    p95_ms: Some(19.0),
                    ..good.clone()
                },
                "p95 19 ms is below p90 20 ms",
            ),
            (
                Stats {
                    mean_ms: Some(60.0),
                    ..good.clone()
                },
                "outside min",
            ),
            (
                Stats {
                    first_start_ms: Some(1),
                    ..good.clone()
                },
                "outside the accepted window",
            ),
            (
                Stats {
                    window_ms: Some(-5),
                    ..good.clone()
                },
                "duration -5 ms is negative",
            ),
            (
                Stats {
                    count: 10_000_000_000,
                    errors: 0,
                    ..good.clone()
                },
                "cannot fit in 10000 ms",
            ),
            (
                Stats {
                    throughput_rps: Some(f64::INFINITY),
                    ..good.clone()
                },
                "throughput",
            ),
        ];
        for (stats, says) in cases {
            let why = summary::implausible(&stats, &limits, "x").unwrap_or_default();
            assert!(why.contains(says), "{says:?} not in {why:?}");
        }
    }
}
