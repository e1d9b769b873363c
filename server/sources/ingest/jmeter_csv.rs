//! JMeter JTL, CSV flavour → samples.
//!
//! Format (docs/formats.md#jmeter-jtl-csv; writer `CSVSaveService` in apache/jmeter): one row per sample,
//! RFC 4180 quoting (a quoted field may hold the delimiter, `""` and raw line breaks), any
//! delimiter (`jmeter.save.saveservice.default_delimiter`), columns in a fixed order, each
//! present only if its switch is on, with a header line (JMeter ≥ 3.0 default) or without
//! (2.13 default). Columns are mapped by header name; headerless files are recognised by
//! field count against JMeter's default layouts ([`LAYOUTS`]) and only when a row parses.
//!
//! Definitions: `timeStamp` is the sample start (epoch ms, or a formatted date read as UTC
//! when it has no zone, see [`super::timestamp`]); `elapsed` is the response time in ms;
//! `success` is the error flag; message = `failureMessage` when non-empty, else
//! `responseMessage`; a row whose `responseMessage` starts with
//! `Number of samples in transaction` is a transaction-controller row; active users =
//! `allThreads`. A damaged row (wrong field count, cut-off last line, unparsable number,
//! negative elapsed, success not `true`/`false`) is rejected with the line it starts on.
//!
//! Must not: allocate per row (fields are borrowed from the csv record), or buffer rows.

use std::io::Read;

use csv::{ByteRecord, ReaderBuilder};

use super::timestamp::{
    MIN_PLAUSIBLE_MS, parse_datetime_ms, parse_epoch_ms, parse_sample_epoch_ms, parse_u64,
};
use crate::domain::runs::{RunBuilder, RunData, RunLimits, Sample};

/// Delimiters JMeter users set, tried in this order.
const DELIMITERS: [u8; 4] = [b',', b'\t', b'|', b';'];

/// Records tried when recognising a headerless file (the first may be damaged).
const DETECT_RECORDS: usize = 20;

/// JMeter's default column sets, for files without a header line.
pub const LAYOUTS: &[(&str, &[&str])] = &[
    (
        "JMeter 2.13 default (12 columns)",
        &[
            "timeStamp",
            "elapsed",
            "label",
            "responseCode",
            "responseMessage",
            "threadName",
            "dataType",
            "success",
            "bytes",
            "grpThreads",
            "allThreads",
            "Latency",
        ],
    ),
    (
        "JMeter 2.13 default + failureMessage (13 columns)",
        &[
            "timeStamp",
            "elapsed",
            "label",
            "responseCode",
            "responseMessage",
            "threadName",
            "dataType",
            "success",
            "failureMessage",
            "bytes",
            "grpThreads",
            "allThreads",
            "Latency",
        ],
    ),
    (
        "JMeter 2.13 with failureMessage, URL, IdleTime and Connect (16 columns)",
        &[
            "timeStamp",
            "elapsed",
            "label",
            "responseCode",
            "responseMessage",
            "threadName",
            "dataType",
            "success",
            "failureMessage",
            "bytes",
            "grpThreads",
            "allThreads",
            "URL",
            "Latency",
            "IdleTime",
            "Connect",
        ],
    ),
    (
        "JMeter 5.x default without failureMessage (16 columns)",
        &[
            "timeStamp",
            "elapsed",
            "label",
            "responseCode",
            "responseMessage",
            "threadName",
            "dataType",
            "success",
            "bytes",
            "sentBytes",
            "grpThreads",
            "allThreads",
            "URL",
            "Latency",
            "IdleTime",
            "Connect",
        ],
    ),
    (
        "JMeter 3.1–5.x default (17 columns)",
        &[
            "timeStamp",
            "elapsed",
            "label",
            "responseCode",
            "responseMessage",
            "threadName",
            "dataType",
            "success",
            "failureMessage",
            "bytes",
            "sentBytes",
            "grpThreads",
            "allThreads",
            "URL",
            "Latency",
            "IdleTime",
            "Connect",
        ],
    ),
];

/// Where the columns harrier reads sit in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    fields: usize,
    timestamp: usize,
    elapsed: usize,
    label: usize,
    success: usize,
    response_code: Option<usize>,
    response_message: Option<usize>,
    failure_message: Option<usize>,
    bytes: Option<usize>,
    sent_bytes: Option<usize>,
    all_threads: Option<usize>,
    thread_name: Option<usize>,
}

impl Columns {
    /// Maps JMeter column names (case-insensitive, surrounding quotes and spaces ignored);
    /// `None` unless `timeStamp`, `elapsed`, `label` and `success` are all present.
    fn from_names<'a>(names: impl IntoIterator<Item = &'a [u8]>) -> Option<Columns> {
        let (mut ts, mut elapsed, mut label, mut success) = (None, None, None, None);
        let mut c = Columns {
            fields: 0,
            timestamp: 0,
            elapsed: 0,
            label: 0,
            success: 0,
            response_code: None,
            response_message: None,
            failure_message: None,
            bytes: None,
            sent_bytes: None,
            all_threads: None,
            thread_name: None,
        };
        for (i, raw) in names.into_iter().enumerate() {
            c.fields = i + 1;
            let name = raw.trim_ascii();
            let name = name
                .strip_prefix(b"\"")
                .and_then(|n| n.strip_suffix(b"\""))
                .unwrap_or(name);
            let slot = match name.to_ascii_lowercase().as_slice() {
                b"timestamp" => &mut ts,
                b"elapsed" => &mut elapsed,
                b"label" => &mut label,
                b"success" => &mut success,
                b"responsecode" => &mut c.response_code,
                b"responsemessage" => &mut c.response_message,
                b"failuremessage" => &mut c.failure_message,
                b"bytes" => &mut c.bytes,
                b"sentbytes" => &mut c.sent_bytes,
                b"allthreads" => &mut c.all_threads,
                b"threadname" => &mut c.thread_name,
                _ => continue,
            };
            // First occurrence wins: a sample variable may repeat a built-in name.
            slot.get_or_insert(i);
        }
        c.timestamp = ts?;
        c.elapsed = elapsed?;
        c.label = label?;
        c.success = success?;
        Some(c)
    }

    fn from_layout(names: &[&str]) -> Columns {
        Columns::from_names(names.iter().map(|n| n.as_bytes()))
            .expect("layouts name the required columns")
    }
}

/// How a CSV JTL is laid out: found by [`detect`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub delimiter: u8,
    pub has_header: bool,
    pub columns: Columns,
}

/// Recognises a JMeter CSV from the first bytes of a file: a header line naming
/// `timeStamp`, `elapsed`, `label` and `success`, or (no header) one of the first rows
/// parsing completely in one of JMeter's default [`LAYOUTS`]. Each delimiter is tried
/// in turn, by whether it makes the header or a row valid — never by counting
/// characters (messages may contain commas).
pub fn detect(prefix: &[u8]) -> Option<Layout> {
    let mut record = ByteRecord::new();
    for delimiter in DELIMITERS {
        let mut rdr = reader_builder(delimiter).from_reader(prefix);
        if !matches!(rdr.read_byte_record(&mut record), Ok(true)) {
            continue;
        }
        if let Some(columns) = Columns::from_names(record.iter()) {
            return Some(Layout {
                delimiter,
                has_header: true,
                columns,
            });
        }
        // Headerless: read a few rows, and take the default layout under which the most of
        // them are fully plausible (every typed column holds its type).
        let mut rows: Vec<ByteRecord> = vec![record.clone()];
        while rows.len() < DETECT_RECORDS && matches!(rdr.read_byte_record(&mut record), Ok(true)) {
            rows.push(record.clone());
        }
        let best = LAYOUTS
            .iter()
            .filter_map(|(_, names)| {
                let score = rows
                    .iter()
                    .filter(|r| r.len() == names.len() && plausible(names, r))
                    .count();
                (score > 0).then(|| {
                    (
                        score - usize::from(numeric_failure_messages(names, &rows)),
                        *names,
                    )
                })
            })
            .max_by_key(|(score, _)| *score);
        if let Some((_, names)) = best {
            return Some(Layout {
                delimiter,
                has_header: false,
                columns: Columns::from_layout(names),
            });
        }
    }
    None
}

/// Whether `r` fits the column `names` in every typed column: numbers where JMeter writes
/// numbers (never empty), `true`/`false` for success, a URL or `null` for URL.
fn plausible(names: &[&str], r: &ByteRecord) -> bool {
    names.iter().zip(r.iter()).all(|(name, v)| match *name {
        "timeStamp" => parse_epoch_ms(v).is_some() || parse_datetime_ms(v).is_some(),
        "elapsed" | "bytes" | "sentBytes" | "grpThreads" | "allThreads" | "Latency"
        | "IdleTime" | "Connect" | "SampleCount" | "ErrorCount" => parse_u64(v).is_some(),
        "success" => v.eq_ignore_ascii_case(b"true") || v.eq_ignore_ascii_case(b"false"),
        "dataType" => matches!(v, b"text" | b"bin" | b""),
        "URL" => v == b"null" || v.is_empty() || v.windows(3).any(|w| w == b"://"),
        _ => true,
    })
}

/// True when a layout's `failureMessage` column holds only numbers in every row: then the
/// column is really `bytes`, and a layout without `failureMessage` fits better.
fn numeric_failure_messages(names: &[&str], rows: &[ByteRecord]) -> bool {
    let Some(i) = names.iter().position(|n| *n == "failureMessage") else {
        return false;
    };
    rows.iter()
        .all(|r| r.get(i).is_some_and(|v| parse_u64(v).is_some()))
}

/// Why no layout was found, for [`super::IngestError::Invalid`].
pub fn not_detected_message() -> String {
    let counts: Vec<String> = LAYOUTS.iter().map(|(_, n)| n.len().to_string()).collect();
    format!(
        "not a JMeter CSV JTL: expected a header line naming timeStamp, elapsed, label and success, \
         or rows in a default JMeter column layout ({} fields), delimited by , tab | or ;",
        counts.join(", ")
    )
}

fn reader_builder(delimiter: u8) -> ReaderBuilder {
    let mut b = ReaderBuilder::new();
    b.delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .buffer_capacity(1 << 16);
    b
}

/// What was wrong with a row; turned into text only for the rejected rows kept.
#[derive(Debug)]
enum RowError {
    FieldCount { found: usize, expected: usize },
    Timestamp,
    Elapsed,
    NegativeElapsed,
    Success,
    Number(&'static str),
}

impl RowError {
    fn describe(&self, record: &ByteRecord, columns: &Columns) -> String {
        let field =
            |i: usize| String::from_utf8_lossy(record.get(i).unwrap_or_default()).into_owned();
        match *self {
            RowError::FieldCount { found, expected } => {
                format!("expected {expected} fields, found {found} (row cut off or damaged)")
            }
            RowError::Timestamp => format!(
                "timeStamp {:?} is neither epoch ms nor a yyyy-MM-dd HH:mm:ss[.SSS] date on or after 2000-01-01",
                field(columns.timestamp)
            ),
            RowError::Elapsed => format!(
                "elapsed {:?} is not a whole number of ms",
                field(columns.elapsed)
            ),
            RowError::NegativeElapsed => format!("elapsed {} is negative", field(columns.elapsed)),
            RowError::Success => {
                format!("success {:?} is not true or false", field(columns.success))
            }
            RowError::Number(name) => format!("{name} is not a whole number"),
        }
    }
}

/// Owned fallbacks for fields that are not valid UTF-8 (JMeter run with a non-UTF-8
/// `file.encoding`): such fields are read lossily (U+FFFD), the rest are borrowed.
#[derive(Default)]
struct Scratch {
    label: String,
    code: String,
    message: String,
}

fn text<'a>(bytes: &'a [u8], scratch: &'a mut String) -> &'a str {
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(_) => {
            scratch.clear();
            scratch.push_str(&String::from_utf8_lossy(bytes));
            scratch
        }
    }
}

const TRANSACTION_PREFIX: &[u8] = b"Number of samples in transaction";

#[inline]
fn parse_row<'a>(
    c: &Columns,
    r: &'a ByteRecord,
    scratch: &'a mut Scratch,
) -> Result<Sample<'a>, RowError> {
    if r.len() != c.fields {
        return Err(RowError::FieldCount {
            found: r.len(),
            expected: c.fields,
        });
    }
    let ts = &r[c.timestamp];
    let start_ms = match parse_sample_epoch_ms(ts) {
        Some(v) => v,
        None => parse_datetime_ms(ts)
            .filter(|ms| *ms >= MIN_PLAUSIBLE_MS)
            .ok_or(RowError::Timestamp)?,
    };
    let elapsed = &r[c.elapsed];
    let elapsed_ms = match parse_u64(elapsed) {
        Some(v) => v,
        None if elapsed.first() == Some(&b'-') && parse_u64(&elapsed[1..]).is_some() => {
            return Err(RowError::NegativeElapsed);
        }
        None => return Err(RowError::Elapsed),
    };
    let success = match &r[c.success] {
        s if s.eq_ignore_ascii_case(b"true") => true,
        s if s.eq_ignore_ascii_case(b"false") => false,
        _ => return Err(RowError::Success),
    };
    let number = |col: Option<usize>, name: &'static str| -> Result<Option<u64>, RowError> {
        match col.map(|i| &r[i]) {
            None | Some(b"") => Ok(None),
            Some(v) => parse_u64(v).map(Some).ok_or(RowError::Number(name)),
        }
    };
    let bytes_received = number(c.bytes, "bytes")?.unwrap_or(0);
    let bytes_sent = number(c.sent_bytes, "sentBytes")?.unwrap_or(0);
    let active_users =
        number(c.all_threads, "allThreads")?.map(|v| u32::try_from(v).unwrap_or(u32::MAX));
    let response_message = c.response_message.map_or(&b""[..], |i| &r[i]);
    let failure_message = c.failure_message.map_or(&b""[..], |i| &r[i]);
    let message = if failure_message.is_empty() {
        response_message
    } else {
        failure_message
    };
    let Scratch {
        label,
        code,
        message: message_scratch,
    } = scratch;
    Ok(Sample {
        label: text(&r[c.label], label),
        start_ms,
        elapsed_ms,
        success,
        // Only errors are grouped by code and message: skip their UTF-8 check otherwise.
        response_code: if success {
            ""
        } else {
            text(c.response_code.map_or(&b""[..], |i| &r[i]), code)
        },
        message: if success {
            ""
        } else {
            text(message, message_scratch)
        },
        bytes_received,
        bytes_sent,
        active_users,
        is_transaction: response_message.starts_with(TRANSACTION_PREFIX),
    })
}

/// Tells the two kinds of JMeter transaction-controller rows apart.
///
/// Both carry a `responseMessage` starting `Number of samples in transaction`. In classic
/// mode the requests were written first, as rows of their own on the same thread, each
/// starting at or after the transaction's start: the transaction row repeats them and stays
/// out of run totals. In "generate parent sample" mode the CSV holds only the parent row
/// (its requests are sub-results, never written to CSV), so it is the one record of those
/// requests and counts, as in JMeter's own reports.
#[derive(Default)]
struct TransactionModes {
    /// Start of the latest non-transaction row, per thread name.
    last_request_start: std::collections::HashMap<Box<[u8]>, i64, rustc_hash::FxBuildHasher>,
}

impl TransactionModes {
    /// Whether `sample` (read on `thread`) is a classic-mode transaction row.
    fn is_classic(&mut self, thread: &[u8], sample: &Sample<'_>) -> bool {
        if !sample.is_transaction {
            match self.last_request_start.get_mut(thread) {
                Some(start) => *start = sample.start_ms,
                None => {
                    self.last_request_start
                        .insert(thread.into(), sample.start_ms);
                }
            }
            return false;
        }
        self.last_request_start
            .get(thread)
            .is_some_and(|start| *start >= sample.start_ms)
    }
}

/// Reads every row of `input` (the whole file, header included) into a run.
///
/// Rejected rows go to the run's `rejected` list. `Err` only for a read error before any
/// sample was accepted; a read error later (a truncated `.gz`) ends the import with a
/// rejection at the line where reading stopped.
pub fn parse<R: Read>(
    input: R,
    layout: &Layout,
    limits: &RunLimits,
) -> Result<RunData, std::io::Error> {
    // Two stages on two threads: this one splits records (the csv crate), a worker parses
    // rows and feeds the run builder. Each stage is about half the work, so a large file
    // imports in about half the time on two cores. Batches of records travel in vectors
    // that come back empty for reuse, so nothing is allocated per row.
    let (to_worker, batches) = std::sync::mpsc::sync_channel::<Batch>(4);
    let (to_reader, recycled) = std::sync::mpsc::channel::<Vec<ByteRecord>>();
    let columns = layout.columns.clone();
    let limits = *limits;
    let worker = std::thread::spawn(move || {
        let mut builder = RunBuilder::with_limits(limits);
        let mut scratch = Scratch::default();
        let mut transactions = TransactionModes::default();
        for batch in batches {
            match batch {
                Batch::Records(records) => {
                    for record in &records {
                        match parse_row(&columns, record, &mut scratch) {
                            Ok(mut sample) => {
                                if let Some(col) = columns.thread_name {
                                    sample.is_transaction =
                                        transactions.is_classic(&record[col], &sample);
                                }
                                let line = record.position().map_or(0, csv::Position::line);
                                builder.push(line, &sample);
                            }
                            Err(why) => {
                                let line = record.position().map_or(0, csv::Position::line);
                                builder.reject_with(line, || why.describe(record, &columns));
                            }
                        }
                    }
                    let _ = to_reader.send(records);
                }
                Batch::Stopped { line, message } => {
                    builder.reject(line, format!("reading stopped here: {message}"))
                }
            }
        }
        builder.finish()
    });

    let (input, record_end) = super::bounded::RecordCap::new(input, limits.max_line_bytes);
    let mut rdr = reader_builder(layout.delimiter).from_reader(input);
    let mut skip_header = layout.has_header;
    let mut sent_rows = 0u64;
    let mut failure = None;
    'read: loop {
        let mut records = recycled
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH_ROWS));
        records.resize_with(BATCH_ROWS, ByteRecord::new);
        let mut filled = 0;
        while filled < BATCH_ROWS {
            let read = rdr.read_byte_record(&mut records[filled]);
            if matches!(read, Ok(true)) {
                record_end.mark();
            }
            match read {
                Ok(true) if skip_header => skip_header = false,
                Ok(true) => filled += 1,
                Ok(false) => {
                    records.truncate(filled);
                    let _ = to_worker.send(Batch::Records(records));
                    break 'read;
                }
                Err(e) => {
                    // Byte records with `flexible` only fail on I/O (e.g. a truncated .gz).
                    records.truncate(filled);
                    sent_rows += filled as u64;
                    let line = rdr.position().line();
                    let message = e.to_string();
                    if let (0, csv::ErrorKind::Io(io)) = (sent_rows, e.into_kind()) {
                        failure = Some(io);
                    } else {
                        let _ = to_worker.send(Batch::Records(records));
                        let _ = to_worker.send(Batch::Stopped { line, message });
                    }
                    break 'read;
                }
            }
        }
        sent_rows += filled as u64;
        if to_worker.send(Batch::Records(records)).is_err() {
            break;
        }
    }
    drop(to_worker);
    let data = worker
        .join()
        .map_err(|_| std::io::Error::other("the row parser stopped unexpectedly"))?;
    match failure {
        Some(io) => Err(io),
        None => Ok(data),
    }
}

/// Records handed from the reading thread to the row parser.
const BATCH_ROWS: usize = 1024;

enum Batch {
    Records(Vec<ByteRecord>),
    /// Reading stopped on an I/O error after `line` (the rows before it were sent).
    Stopped {
        line: u64,
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_headerless_pipe_despite_commas() {
        let data = b"1700000000000|5003|Search|Non HTTP response code: x|m, with, commas|T 1-1|text|false|Timeout, no response|0|150|2|2|http://x/|4993|0|5\n";
        let layout = detect(data).unwrap();
        assert_eq!(layout.delimiter, b'|');
        assert!(!layout.has_header);
        assert_eq!(layout.columns.fields, 17);
    }

    #[test]
    fn maps_header_by_name_in_any_order() {
        let data = b"\"Session\";success;label;elapsed;timeStamp;allThreads\nabc;true;Home;12;1700000000000;4\n";
        let layout = detect(data).unwrap();
        assert_eq!(layout.delimiter, b';');
        assert!(layout.has_header);
        let run = parse(&data[..], &layout, &RunLimits::default()).unwrap();
        assert_eq!(run.labels[0].label, "Home");
        assert_eq!(run.overall.count, 1);
        assert_eq!(run.overall.min_ms, Some(12.0));
        assert_eq!(run.buckets[0].active_users, Some(4));
    }

    #[test]
    fn rejects_bad_rows_with_their_line() {
        let data = b"timeStamp,elapsed,label,success\n1700000000001,-5,a,true\n1700000000002,x,a,true\n1700000000003,4,a,maybe\n1700000000004,\"4\n\",a\n1700000000005,6,a,false\n0,7,a,true\n";
        let layout = detect(data).unwrap();
        let run = parse(&data[..], &layout, &RunLimits::default()).unwrap();
        assert_eq!(run.overall.count, 1);
        let lines: Vec<u64> = run.rejected.iter().map(|r| r.line).collect();
        assert_eq!(
            lines,
            [2, 3, 4, 5, 8],
            "a timeStamp of 0 is not a real sample time"
        );
        assert!(
            run.rejected[4].reason.contains("2000-01-01"),
            "{}",
            run.rejected[4].reason
        );
        assert_eq!(run.rejected[0].reason, "elapsed -5 is negative");
        assert_eq!(
            run.rejected[3].reason,
            "expected 4 fields, found 3 (row cut off or damaged)"
        );
    }

    #[test]
    fn detects_each_default_layout_by_field_count() {
        // 2.13 (12), 2.13 + failureMessage (13), 5.x without failureMessage (16).
        let rows: [&[u8]; 3] = [
            b"1700000000000,75,GET /a,404,Not Found,Users 1-1,text,false,186,3,3,72\n",
            b"1700000000000,75,GET /a,404,Not Found,Users 1-1,text,false,boom,186,3,3,72\n",
            b"1700000000000,75,GET /a,404,Not Found,Users 1-1,text,false,186,150,3,3,http://x/a,72,0,5\n",
        ];
        for (row, fields) in rows.into_iter().zip([12, 13, 16]) {
            let layout = detect(row).unwrap_or_else(|| panic!("{fields} fields"));
            assert_eq!((layout.columns.fields, layout.has_header), (fields, false));
            let run = parse(row, &layout, &RunLimits::default()).unwrap();
            assert_eq!(
                (
                    run.overall.count,
                    run.overall.errors,
                    run.overall.bytes_received
                ),
                (1, 1, 186)
            );
            assert_eq!(run.buckets[0].active_users, Some(3));
        }
    }

    #[test]
    fn garbage_is_not_detected() {
        assert_eq!(detect(b"hello, world\nthis is, not a jtl\n"), None);
        assert_eq!(detect(b"1700000000000,12,label,200\n"), None);
    }
}
