//! Gatling `simulation.log` → samples: the text logs of Gatling 2.x – 3.12 and the binary
//! log of Gatling ≥ 3.13.
//!
//! Sources: docs/formats.md#gatling; writer `LogFileDataWriter.scala` (and `RecordHeader.scala`,
//! `LogFileReader.scala` for the binary layout) in gatling/gatling at each tag.
//!
//! Definitions (docs/numbers.md, `tests/fixtures/edge-cases/README.md`):
//! - one sample = one `REQUEST` record; `RUN`, `USER`, `GROUP`, `ERROR` and `ASSERTION`
//!   records are not requests (they are counted in [`RunData::reported`]);
//! - start = the request's start timestamp (epoch ms), response time = end − start;
//! - success = `OK` (text) / ok byte 1 (binary); message = the KO message (`" "` = none);
//! - label = the request name, prefixed by its group path: groups outermost first, each
//!   followed by `" / "` — `"Checkout / Pay / POST card"` for request `POST card` inside
//!   group `Pay` inside group `Checkout` (Gatling's own report path joins groups and the
//!   request name with `" / "` too); no groups → the bare name;
//! - active users per second from `USER` start/end records (see [`super::active_users`]);
//! - the run's name (and scenario) = the RUN record's simulation class name.
//!
//! Text layouts, told apart per record (not by the version string, which hand-edited files
//! get wrong) by where the `OK`/`KO` field sits after two integer timestamps:
//!
//! | Gatling | REQUEST fields after the record type | response time |
//! |---|---|---|
//! | 3.4 – 3.12 | groups, name, start, end, status, message | end − start |
//! | 3.0 – 3.3 | userId, groups, name, start, end, status, message | end − start |
//! | 2.2 – 2.3 | scenario, userId, groups, name, start, end, status, message, extraInfo… | end − start |
//! | 2.0 – 2.1 | (type is the 3rd field) scenario, userId, `REQUEST`, groups, name, requestStart, requestEnd, responseStart, responseEnd, status, message | responseEnd − requestStart |
//!
//! In 3.x everything after the status field is the message (a TAB inside a message splits
//! it; the parts are joined again with TAB). Lines that start with no record type follow a
//! message that held raw line feeds (older writers did not sanitise them): they are
//! appended to the previous REQUEST's message with `\n` (or dropped after an ERROR record,
//! whose message is not a request), never rejected. Records are not sorted by time; the
//! builder does not need them to be. Several RUN records (logs of several injector nodes
//! concatenated) make one run; the first RUN names it.
//!
//! Binary layout (Gatling 3.13 – 3.15, also written by 3.12.1 snapshots), big-endian:
//! strings defined once and then named by index, times relative to the RUN record's start
//! (the `binary` module below reads it field by field; docs/formats.md#gatling). A file
//! from any other Gatling version is refused with [`IngestError::Invalid`] naming the version, as Gatling's own reader does, because the
//! layout has no record lengths (a changed record cannot be skipped). A record cut off at
//! the end (a killed run) is rejected; an unknown record type stops reading there.
//!
//! Must not: buffer requests (one pending request is kept to collect continuation lines).

use std::collections::BTreeMap;
use std::io::{self, BufRead};

use serde_json::json;

use super::active_users::ActiveUsers;
use super::timestamp::parse_epoch_ms;
use super::{IngestError, ParsedRun};
use crate::domain::runs::{RunBuilder, RunData, RunLimits, Sample};

/// Binary logs written by these Gatling versions are read: (major, minor, lowest patch).
const BINARY_VERSIONS: &[(u32, u32, u32)] = &[(3, 12, 1), (3, 13, 0), (3, 14, 0), (3, 15, 0)];

/// Reads one Gatling simulation.log (text or binary, sniffed from the first byte).
pub fn parse<R: BufRead>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let io_err = |source: io::Error| IngestError::Io {
        source_name: source_name.to_owned(),
        source,
    };
    let binary = input.fill_buf().map_err(io_err)?.first() == Some(&0);
    let parsed = if binary {
        binary::parse(&mut input, source_name, limits)?
    } else {
        parse_text(&mut input, limits).map_err(io_err)?
    };
    parsed.into_run(source_name)
}

/// What a reader collected: the builder plus the run's own records.
struct Parsed {
    builder: RunBuilder,
    users: ActiveUsers,
    layout: &'static str,
    runs: Vec<RunInfo>,
    counts: BTreeMap<&'static str, u64>,
    /// First ERROR record messages (crashes, "Failed to build request"), at most 20.
    error_messages: Vec<String>,
}

#[derive(Debug, Clone, Default)]
struct RunInfo {
    simulation: String,
    simulation_id: String,
    start_ms: Option<i64>,
    description: String,
    gatling_version: String,
    scenarios: Vec<String>,
}

const MAX_ERROR_MESSAGES: usize = 20;

/// Bytes of a REQUEST message (with its continuation lines) held while reading.
const MAX_MESSAGE_BYTES: usize = 64 << 10;

impl Parsed {
    fn new(layout: &'static str, limits: &RunLimits) -> Self {
        Parsed {
            builder: RunBuilder::with_limits(*limits),
            users: ActiveUsers::from_events(),
            layout,
            runs: Vec::new(),
            counts: BTreeMap::new(),
            error_messages: Vec::new(),
        }
    }

    fn count(&mut self, record: &'static str) {
        *self.counts.entry(record).or_insert(0) += 1;
    }

    fn error_record(&mut self, message: &str) {
        self.count("ERROR");
        if self.error_messages.len() < MAX_ERROR_MESSAGES {
            self.error_messages.push(message.to_owned());
        }
    }

    fn into_run(self, source_name: &str) -> Result<Vec<ParsedRun>, IngestError> {
        if self.builder.samples() == 0
            && let Some(first) = self.builder.first_rejected()
        {
            return Err(IngestError::Invalid {
                source_name: source_name.to_owned(),
                line: first.line,
                message: format!(
                    "nothing readable: {} records rejected; the first: {}",
                    self.builder.rejected_rows(),
                    first.reason
                ),
            });
        }
        let first = self.runs.first().cloned().unwrap_or_default();
        let mut data: RunData = self.builder.finish();
        self.users.apply(&mut data);
        data.reported = json!({
            "tool": "gatling",
            "layout": self.layout,
            "gatling_version": non_empty(&first.gatling_version),
            "simulation": non_empty(&first.simulation),
            "simulation_id": non_empty(&first.simulation_id),
            "run_start_ms": first.start_ms,
            "description": non_empty(first.description.trim()),
            "scenarios": first.scenarios,
            "run_records": self.runs.len(),
            "records": self.counts,
            "peak_active_users": self.users.max(),
            "active_users_rule": "peak of USER start/end records in each second",
            "error_records": self.error_messages,
        });
        Ok(vec![ParsedRun {
            tool: "gatling".to_owned(),
            name_hint: non_empty(&first.simulation).map(str::to_owned),
            data,
        }])
    }
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// The label of a request: its groups (outermost first) and its name joined with " / ".
fn label<'a, I: IntoIterator<Item = &'a str>>(groups: I, name: &str) -> String {
    let mut label = String::new();
    for g in groups {
        label.push_str(g);
        label.push_str(" / ");
    }
    label.push_str(name);
    label
}

/// A REQUEST read from the text log, held until the next record line in case
/// continuation lines of its message follow.
struct Pending {
    /// Line of the REQUEST record.
    line: u64,
    label: String,
    start_ms: i64,
    elapsed_ms: u64,
    success: bool,
    message: String,
}

impl Pending {
    fn push_to(self, b: &mut RunBuilder) {
        b.push(
            self.line,
            &Sample {
                label: &self.label,
                start_ms: self.start_ms,
                elapsed_ms: self.elapsed_ms,
                success: self.success,
                response_code: "",
                message: if self.success { "" } else { &self.message },
                bytes_received: 0,
                bytes_sent: 0,
                active_users: None,
                is_transaction: false,
            },
        );
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Last {
    Request,
    Error,
    Other,
}

const RECORD_TYPES: [&str; 6] = ["RUN", "USER", "REQUEST", "GROUP", "ERROR", "ASSERTION"];

fn parse_text(input: &mut dyn BufRead, limits: &RunLimits) -> io::Result<Parsed> {
    let mut p = Parsed::new("text", limits);
    let mut layouts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut pending: Option<Pending> = None;
    let mut last = Last::Other;
    let mut raw = Vec::with_capacity(256);
    let mut line_no = 0u64;
    loop {
        raw.clear();
        if input.read_until(b'\n', &mut raw)? == 0 {
            break;
        }
        line_no += 1;
        let line = String::from_utf8_lossy(&raw);
        let line = line.trim_end_matches(['\n', '\r']);
        let fields: Vec<&str> = line.split('\t').collect();
        let (kind, old_layout) = if RECORD_TYPES.contains(&fields[0]) {
            (fields[0], false)
        } else if fields.len() > 3 && ["RUN", "USER", "REQUEST", "GROUP"].contains(&fields[2]) {
            (fields[2], true)
        } else {
            // A continuation of the previous record's message, or not a record at all.
            match (&mut pending, last) {
                // Continuation lines are kept up to 64 KiB (the run keeps fewer characters
                // still: limits.max_message_chars).
                (Some(req), Last::Request) if req.message.len() < MAX_MESSAGE_BYTES => {
                    req.message.push('\n');
                    req.message.push_str(line);
                }
                (Some(_), Last::Request) => {}
                (_, Last::Error) => {}
                _ if line.trim().is_empty() => {}
                _ => p.builder.reject_with(line_no, || {
                    format!(
                        "not a Gatling record: the first tab-separated field {:?} is none of RUN, USER, REQUEST, GROUP, ERROR, ASSERTION",
                        truncate(fields[0], 60)
                    )
                }),
            }
            continue;
        };
        if let Some(req) = pending.take() {
            req.push_to(&mut p.builder);
        }
        last = Last::Other;
        match kind {
            "REQUEST" => {
                last = Last::Request;
                match request_fields(&fields, old_layout) {
                    Ok((layout, mut req)) => {
                        *layouts.entry(layout).or_insert(0) += 1;
                        req.line = line_no;
                        pending = Some(req);
                    }
                    Err(why) => p.builder.reject(line_no, why),
                }
            }
            "USER" => {
                p.count("USER");
                if !user_fields(&fields, &mut p.users) {
                    p.builder.reject_with(line_no, || {
                        format!(
                            "USER record without START/END and a timestamp ({} fields)",
                            fields.len()
                        )
                    });
                }
            }
            "RUN" => {
                p.count("RUN");
                p.runs.push(run_fields(&fields, old_layout));
            }
            "GROUP" => p.count("GROUP"),
            "ASSERTION" => p.count("ASSERTION"),
            _ => {
                last = Last::Error;
                p.error_record(fields.get(1).copied().unwrap_or_default());
            }
        }
    }
    if let Some(req) = pending.take() {
        req.push_to(&mut p.builder);
    }
    p.layout = match layouts.len() {
        0 => "text",
        1 => layouts.keys().next().copied().unwrap_or("text"),
        _ => "text (mixed layouts)",
    };
    Ok(p)
}

fn truncate(s: &str, max_chars: usize) -> String {
    s.chars().take(max_chars).collect()
}

fn is_status(s: &str) -> bool {
    s == "OK" || s == "KO"
}

fn is_int(s: &str) -> bool {
    parse_epoch_ms(s.as_bytes()).is_some()
}

/// Reads a REQUEST line (see the layout table in the module docs).
fn request_fields(f: &[&str], old_layout: bool) -> Result<(&'static str, Pending), String> {
    let (layout, groups, name, start, end, status, message) = if old_layout {
        // scenario, userId, REQUEST, groups, name, reqStart, reqEnd, respStart, respEnd, status, message
        if f.len() < 10 || !is_status(f[9]) {
            return Err(format!(
                "REQUEST record (Gatling 2.0–2.1 layout) needs 10 fields with OK/KO in the 10th, found {}",
                f.len()
            ));
        }
        (
            "text 2.0–2.1",
            f[3],
            f[4],
            f[5],
            f[8],
            f[9],
            f.get(10).copied().unwrap_or_default().to_owned(),
        )
    } else {
        let Some(p) = (5..=7)
            .find(|&p| f.len() > p && is_status(f[p]) && is_int(f[p - 1]) && is_int(f[p - 2]))
        else {
            return Err(format!(
                "REQUEST record needs OK or KO after two integer timestamps (Gatling 3.4+: field 6, 3.0–3.3: field 7, 2.2–2.3: field 8); found {} fields",
                f.len()
            ));
        };
        let (layout, groups, name) = match p {
            5 => ("text 3.4–3.12", f[1], f[2]),
            6 => ("text 3.0–3.3", f[2], f[3]),
            _ => ("text 2.2–2.3", f[3], f[4]),
        };
        let message = if p == 7 {
            // Extra-info fields follow the message in 2.x: not part of it.
            f.get(8).copied().unwrap_or_default().to_owned()
        } else {
            f[p + 1..].join("\t")
        };
        (layout, groups, name, f[p - 2], f[p - 1], f[p], message)
    };
    let parse = |what: &str, v: &str| {
        parse_epoch_ms(v.as_bytes()).ok_or_else(|| format!("{what} {v:?} is not epoch ms"))
    };
    let start_ms = parse("start", start)?;
    let end_ms = parse("end", end)?;
    let elapsed_ms = u64::try_from(end_ms - start_ms)
        .map_err(|_| format!("end {end_ms} is before start {start_ms}"))?;
    let message = if message == " " {
        String::new()
    } else {
        message
    };
    Ok((
        layout,
        Pending {
            line: 0,
            label: label(groups.split(',').filter(|g| !g.is_empty()), name),
            start_ms,
            elapsed_ms,
            success: status == "OK",
            message,
        },
    ))
}

/// Reads a USER line into the timeline; false when it has no START/END and timestamp.
///
/// 3.4+: `USER scenario START|END ts`; 3.0–3.3 and 2.2–2.3: `USER scenario userId
/// START|END start end` (END carries the user's start and end: the end is the last field);
/// 2.0–2.1: `scenario userId USER START|END start end`.
fn user_fields(f: &[&str], users: &mut ActiveUsers) -> bool {
    let Some(i) = (2..f.len().min(5)).find(|&i| f[i] == "START" || f[i] == "END") else {
        return false;
    };
    let ts = if f[i] == "START" {
        f.get(i + 1)
    } else {
        f[i + 1..].last()
    };
    let Some(t) = ts.and_then(|t| parse_epoch_ms(t.as_bytes())) else {
        return false;
    };
    if f[i] == "START" {
        users.start(t);
    } else {
        users.end(t);
    }
    true
}

/// Reads a RUN line: `RUN class id start description version` (3.x), `RUN class
/// userDefinedId defaultId start description version` (2.2–2.3 and some hand-edited 3.x
/// files), `class id RUN start description version` (2.0–2.1).
fn run_fields(f: &[&str], old_layout: bool) -> RunInfo {
    let get = |i: usize| f.get(i).copied().unwrap_or_default().to_owned();
    let (class, id, start, desc, version) = match (old_layout, f.len()) {
        (true, _) => (get(0), get(1), get(3), get(4), get(5)),
        (false, n) if n >= 7 => {
            let id = if f[2].is_empty() { get(3) } else { get(2) };
            (get(1), id, get(4), get(5), get(6))
        }
        _ => (get(1), get(2), get(3), get(4), get(5)),
    };
    RunInfo {
        simulation: class,
        simulation_id: id,
        start_ms: parse_epoch_ms(start.as_bytes()),
        description: desc,
        gatling_version: version,
        scenarios: Vec::new(),
    }
}

/// The binary log of Gatling ≥ 3.13 (docs/formats.md#gatling).
mod binary {
    use super::*;

    const RUN: u8 = 0;
    const REQUEST: u8 = 1;
    const USER: u8 = 2;
    const GROUP: u8 = 3;
    const ERROR: u8 = 4;

    /// Cache indexes a string may skip ahead of the ones defined so far (Gatling numbers
    /// them in turn; a corrupt index must not allocate gigabytes of empty slots).
    const MAX_INDEX_GAP: usize = 1 << 16;

    struct Reader<'a> {
        input: &'a mut dyn BufRead,
        offset: u64,
        /// Longest string, list or assertion accepted: `limits.max_line_bytes` (a corrupt
        /// or hostile length must not allocate gigabytes).
        max_len: usize,
        /// The file-wide string cache: index i (≥ 1) at position i − 1.
        strings: Vec<Option<Box<str>>>,
    }

    enum Stop {
        /// End of input exactly at a record boundary.
        Eof,
        /// Cut off inside a record, or a value that cannot be right.
        Broken(String),
        Io(io::Error),
    }

    impl From<io::Error> for Stop {
        fn from(e: io::Error) -> Self {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                Stop::Broken("cut off: the file ends inside this record".to_owned())
            } else {
                Stop::Io(e)
            }
        }
    }

    impl Reader<'_> {
        fn bytes<const N: usize>(&mut self) -> io::Result<[u8; N]> {
            let mut b = [0u8; N];
            self.input.read_exact(&mut b)?;
            self.offset += N as u64;
            Ok(b)
        }

        fn u8(&mut self) -> io::Result<u8> {
            Ok(self.bytes::<1>()?[0])
        }

        fn i32(&mut self) -> io::Result<i32> {
            Ok(i32::from_be_bytes(self.bytes()?))
        }

        fn i64(&mut self) -> io::Result<i64> {
            Ok(i64::from_be_bytes(self.bytes()?))
        }

        fn len(&mut self, what: &str) -> Result<usize, Stop> {
            let n = self.i32()?;
            if n < 0 {
                return Err(Stop::Broken(format!(
                    "{what} length {n} at byte {} is impossible",
                    self.offset - 4
                )));
            }
            if n as usize > self.max_len {
                return Err(Stop::Broken(format!(
                    "{what} length {n} at byte {} is longer than the limit of {} bytes (limits.max_line_bytes in harrier.toml)",
                    self.offset - 4,
                    self.max_len
                )));
            }
            Ok(n as usize)
        }

        fn vec(&mut self, n: usize) -> io::Result<Vec<u8>> {
            let mut v = vec![0u8; n];
            self.input.read_exact(&mut v)?;
            self.offset += n as u64;
            Ok(v)
        }

        /// `int32 len; byte[len]; byte coder` (no coder when len is 0). Coder 0 = Latin-1,
        /// 1 = UTF-16 little-endian (the JVM's byte order on x86 and ARM).
        fn string(&mut self) -> Result<String, Stop> {
            let n = self.len("string")?;
            if n == 0 {
                return Ok(String::new());
            }
            let bytes = self.vec(n)?;
            match self.u8()? {
                0 => Ok(bytes.iter().map(|&b| char::from(b)).collect()),
                1 => {
                    let units: Vec<u16> = bytes
                        .chunks_exact(2)
                        .map(|c| u16::from_le_bytes([c[0], c[1]]))
                        .collect();
                    Ok(String::from_utf16_lossy(&units))
                }
                c => Err(Stop::Broken(format!(
                    "string coder {c} at byte {} is neither 0 (Latin-1) nor 1 (UTF-16)",
                    self.offset - 1
                ))),
            }
        }

        /// `int32 idx; idx ≥ 0 → string (defines idx); idx < 0 → the string defined as −idx`.
        fn cached(&mut self) -> Result<&str, Stop> {
            let idx = self.i32()?;
            if idx >= 0 {
                let i = idx as usize;
                if i > self.strings.len() + MAX_INDEX_GAP {
                    return Err(Stop::Broken(format!(
                        "string index {idx} at byte {} is far past the {} strings defined before",
                        self.offset - 4,
                        self.strings.len()
                    )));
                }
                let s = self.string()?;
                if self.strings.len() < i + 1 {
                    self.strings.resize(i + 1, None);
                }
                self.strings[i] = Some(s.into());
                Ok(self.strings[i].as_deref().unwrap_or_default())
            } else {
                let i = idx.unsigned_abs() as usize;
                self.strings
                    .get(i)
                    .and_then(|s| s.as_deref())
                    .ok_or_else(|| {
                        Stop::Broken(format!(
                            "string reference {idx} at byte {} names no string defined before",
                            self.offset - 4
                        ))
                    })
            }
        }

        fn groups(&mut self) -> Result<Vec<String>, Stop> {
            let n = self.len("group list")?;
            let mut g = Vec::with_capacity(n.min(16));
            for _ in 0..n {
                g.push(self.cached()?.to_owned());
            }
            Ok(g)
        }

        /// The first byte of the next record, `Stop::Eof` at a clean end.
        fn header(&mut self) -> Result<u8, Stop> {
            let mut b = [0u8; 1];
            loop {
                match self.input.read(&mut b) {
                    Ok(0) => return Err(Stop::Eof),
                    Ok(_) => {
                        self.offset += 1;
                        return Ok(b[0]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Stop::Io(e)),
                }
            }
        }
    }

    fn supported(version: &str) -> bool {
        let core = version.split(['-', '+']).next().unwrap_or_default();
        let nums: Vec<u32> = core.split('.').map_while(|p| p.parse().ok()).collect();
        let [major, minor, patch] = match nums[..] {
            [a, b, c, ..] => [a, b, c],
            [a, b] => [a, b, 0],
            _ => return false,
        };
        BINARY_VERSIONS
            .iter()
            .any(|&(ma, mi, lo)| ma == major && mi == minor && patch >= lo)
    }

    pub(super) fn parse(
        input: &mut dyn BufRead,
        source_name: &str,
        limits: &RunLimits,
    ) -> Result<Parsed, IngestError> {
        let mut p = Parsed::new("binary (Gatling 3.13+)", limits);
        let mut r = Reader {
            input,
            offset: 0,
            max_len: limits.max_line_bytes,
            strings: Vec::new(),
        };
        let mut run_start_ms: Option<i64> = None;
        let mut record = 0u64;
        let invalid = |message: String| IngestError::Invalid {
            source_name: source_name.to_owned(),
            line: 1,
            message,
        };
        loop {
            let at = r.offset;
            let header = match r.header() {
                Ok(h) => h,
                Err(Stop::Eof) => break,
                Err(Stop::Io(e)) => {
                    return Err(IngestError::Io {
                        source_name: source_name.to_owned(),
                        source: e,
                    });
                }
                Err(Stop::Broken(_)) => break,
            };
            record += 1;
            let result: Result<(), Stop> = (|| match header {
                RUN => {
                    let version = r.string()?;
                    if !supported(&version) {
                        return Err(Stop::Broken(format!("unsupported version {version}")));
                    }
                    let simulation = r.string()?;
                    let start = r.i64()?;
                    let description = r.string()?;
                    let n = r.len("scenario list")?;
                    let mut scenarios = Vec::with_capacity(n.min(64));
                    for _ in 0..n {
                        scenarios.push(r.string()?);
                    }
                    let n = r.len("assertion list")?;
                    for _ in 0..n {
                        let len = r.len("assertion")?;
                        r.vec(len)?;
                    }
                    *p.counts.entry("ASSERTION").or_insert(0) += n as u64;
                    p.count("RUN");
                    run_start_ms = Some(start);
                    r.strings.clear();
                    p.runs.push(RunInfo {
                        simulation,
                        simulation_id: String::new(),
                        start_ms: Some(start),
                        description,
                        gatling_version: version,
                        scenarios,
                    });
                    Ok(())
                }
                REQUEST => {
                    let groups = r.groups()?;
                    let name = r.cached()?.to_owned();
                    let start_rel = r.i32()?;
                    let end_rel = r.i32()?;
                    let ok = r.u8()?;
                    let message = r.cached()?.to_owned();
                    let base = run_start_ms.ok_or_else(|| {
                        Stop::Broken("REQUEST record before the RUN record".to_owned())
                    })?;
                    if end_rel < start_rel {
                        p.builder.reject(
                                record,
                                format!(
                                    "record {record} (byte {at}): end {end_rel} ms is before start {start_rel} ms"
                                ),
                            );
                        return Ok(());
                    }
                    let label = label(groups.iter().map(String::as_str), &name);
                    p.builder.push(
                        record,
                        &Sample {
                            label: &label,
                            start_ms: base + i64::from(start_rel),
                            elapsed_ms: (i64::from(end_rel) - i64::from(start_rel)) as u64,
                            success: ok == 1,
                            response_code: "",
                            message: if ok == 1 { "" } else { &message },
                            bytes_received: 0,
                            bytes_sent: 0,
                            active_users: None,
                            is_transaction: false,
                        },
                    );
                    Ok(())
                }
                USER => {
                    let _scenario = r.i32()?;
                    let start = r.u8()?;
                    let ts = r.i32()?;
                    let base = run_start_ms.ok_or_else(|| {
                        Stop::Broken("USER record before the RUN record".to_owned())
                    })?;
                    p.count("USER");
                    if start == 1 {
                        p.users.start(base + i64::from(ts));
                    } else {
                        p.users.end(base + i64::from(ts));
                    }
                    Ok(())
                }
                GROUP => {
                    r.groups()?;
                    r.i32()?;
                    r.i32()?;
                    r.i32()?;
                    r.u8()?;
                    p.count("GROUP");
                    Ok(())
                }
                ERROR => {
                    let message = r.cached()?.to_owned();
                    r.i32()?;
                    p.error_record(&message);
                    Ok(())
                }
                other => Err(Stop::Broken(format!(
                    "unknown record type 0x{other:02x}: the layout has no record lengths, so nothing after it can be read"
                ))),
            })();
            match result {
                Ok(()) => {}
                Err(Stop::Io(e)) => {
                    return Err(IngestError::Io {
                        source_name: source_name.to_owned(),
                        source: e,
                    });
                }
                Err(Stop::Eof) => break,
                Err(Stop::Broken(why)) => {
                    if record == 1 {
                        return Err(invalid(
                            if header == RUN && why.starts_with("unsupported") {
                                let v = why.trim_start_matches("unsupported version ");
                                format!(
                                    "binary simulation.log written by Gatling {v}: harrier reads the binary layout of Gatling 3.13–3.15 only (its records carry no lengths, so another version's layout cannot be read safely); export the results with a supported Gatling version"
                                )
                            } else if header != RUN {
                                format!(
                                    "not a Gatling binary simulation.log: it must start with a RUN record (byte 0x00), found 0x{header:02x}"
                                )
                            } else {
                                format!(
                                    "Gatling binary simulation.log: the RUN record is unreadable: {why}"
                                )
                            },
                        ));
                    }
                    p.builder
                        .reject(record, format!("record {record} (byte {at}): {why}"));
                    break;
                }
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// Parses `text`; its small made-up times (ms after 1970) are let through.
    fn run(text: &str) -> RunData {
        let mut limits = RunLimits::default();
        limits.samples.min_start_ms = 0;
        let mut runs = parse(Cursor::new(text.as_bytes()), "t", &limits).expect("parses");
        runs.remove(0).data
    }

    #[test]
    fn layouts_are_told_apart_per_record() {
        let data = run(concat!(
            "RUN\tS\ts\t1000\t \t3.9.5\n",
            "REQUEST\t\ta\t1000\t1010\tOK\t \n",
            "REQUEST\t7\tg1,g2\tb\t1000\t1020\tKO\tboom\n",
            "REQUEST\tScn\t7\t\tc\t1000\t1030\tOK\t \textra\n",
            "Scn\t7\tREQUEST\t\td\t1000\t1001\t1030\t1040\tOK\t \n",
            "REQUEST\t\tcut\t1000\n",
        ));
        let got: Vec<(&str, u64)> = data
            .labels
            .iter()
            .map(|l| (l.label.as_str(), l.stats.max_ms.unwrap() as u64))
            .collect();
        assert_eq!(got, [("a", 10), ("g1 / g2 / b", 20), ("c", 30), ("d", 40)]);
        assert_eq!(data.rejected_rows, 1);
        assert_eq!(data.rejected[0].line, 6);
        assert_eq!(data.errors[0].message, "boom");
    }

    #[test]
    fn binary_version_outside_the_known_layouts_is_refused() {
        let mut b = vec![0u8];
        b.extend_from_slice(&5i32.to_be_bytes());
        b.extend_from_slice(b"3.9.0");
        b.push(0);
        let err = parse(Cursor::new(b), "old.log", &RunLimits::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("Gatling 3.9.0"), "{err}");
    }
}
