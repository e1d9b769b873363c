//! Reading an import within its limits, whatever its lines look like.
//!
//! Owns [`LineCap`], which hands a line-oriented parser only lines of at most
//! [`RunLimits::max_line_bytes`] (a longer line is skipped without being buffered and
//! reported as a rejected row), and [`read_document`], which reads a whole-file summary
//! of at most [`RunLimits::max_document_bytes`]. Memory of either is bounded by the limit,
//! never by the input. Must not: interpret what it reads.
//!
//! [`RunLimits::max_line_bytes`]: crate::domain::runs::RunLimits::max_line_bytes
//! [`RunLimits::max_document_bytes`]: crate::domain::runs::RunLimits::max_document_bytes

use std::cell::RefCell;
use std::io::{self, BufRead, Read};
use std::rc::Rc;

use super::IngestError;
use crate::domain::runs::{MAX_REJECTED_DETAILS, RejectedRow, RunData};

/// Lines [`LineCap`] skipped for being longer than its limit.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SkippedLines {
    /// How many lines were skipped.
    pub count: u64,
    /// The 1-based numbers of the first skipped lines (at most [`MAX_REJECTED_DETAILS`]).
    pub lines: Vec<u64>,
    /// The limit, bytes.
    pub max_line_bytes: usize,
}

impl SkippedLines {
    /// Why a skipped line was rejected.
    pub fn reason(&self) -> String {
        format!(
            "line longer than the limit of {} bytes (limits.max_line_bytes in harrier.toml): skipped unread",
            self.max_line_bytes
        )
    }

    /// Adds the skipped lines to `data` as rejected rows, in line order with the rows it
    /// rejected itself (details kept for the first [`MAX_REJECTED_DETAILS`]).
    pub fn add_to(&self, data: &mut RunData) {
        if self.count == 0 {
            return;
        }
        data.rejected_rows += self.count;
        let reason = self.reason();
        data.rejected
            .extend(self.lines.iter().map(|&line| RejectedRow {
                line,
                reason: reason.clone(),
            }));
        data.rejected.sort_by_key(|r| r.line);
        data.rejected.truncate(MAX_REJECTED_DETAILS);
    }

    /// The error of an import that read nothing else: names the first skipped line and
    /// the limit, then what the parser said of the rest (`rest`).
    pub fn error(&self, source_name: &str, rest: &str) -> IngestError {
        let first = self.lines.first().copied().unwrap_or(1);
        IngestError::Invalid {
            source_name: source_name.to_owned(),
            line: first,
            message: format!(
                "{} ({} line(s) skipped); nothing else was readable: {rest}",
                self.reason(),
                self.count
            ),
        }
    }
}

/// A [`BufRead`] over `inner` that hands out whole lines of at most `max` bytes (the
/// line feed not counted). A longer line is read past (never held) and replaced by a bare
/// line feed, so the parser's line numbers stay right; its number goes to
/// [`LineCap::skipped`]. Memory: at most `max` + 64 KiB.
pub struct LineCap<R> {
    inner: R,
    buf: Vec<u8>,
    /// Next byte to hand out.
    start: usize,
    /// `buf[start..ready]` holds checked lines.
    ready: usize,
    /// `buf[ready..scan]` holds no line feed.
    scan: usize,
    /// `buf[..end]` is filled.
    end: usize,
    /// Lines checked so far.
    line: u64,
    eof: bool,
    max: usize,
    skipped: Rc<RefCell<SkippedLines>>,
}

/// Bytes read from the inner reader at a time, beyond the line being checked.
const READ_CHUNK: usize = 64 * 1024;

impl<R: Read> LineCap<R> {
    /// Caps the lines of `inner` at `max` bytes.
    pub fn new(inner: R, max: usize) -> Self {
        LineCap {
            inner,
            buf: vec![0; READ_CHUNK],
            start: 0,
            ready: 0,
            scan: 0,
            end: 0,
            line: 0,
            eof: false,
            max,
            skipped: Rc::new(RefCell::new(SkippedLines {
                max_line_bytes: max,
                ..SkippedLines::default()
            })),
        }
    }

    /// The lines skipped so far (shared: read it after the parser is done).
    pub fn skipped(&self) -> Rc<RefCell<SkippedLines>> {
        self.skipped.clone()
    }

    /// Reads more into `buf[end..]`, growing it up to `max` + 1 + [`READ_CHUNK`].
    fn read_more(&mut self) -> io::Result<()> {
        if self.end == self.buf.len() {
            let grown = (self.buf.len() * 2).min(self.max + 1 + READ_CHUNK);
            if grown > self.buf.len() {
                self.buf.resize(grown, 0);
            }
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Moves the unread bytes to the front of the buffer.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.ready -= self.start;
            self.scan -= self.start;
            self.start = 0;
        }
    }

    /// Skips the line starting at `start` (longer than `max`): reads past its line feed
    /// and leaves that line feed alone to be handed out.
    fn skip_line(&mut self) -> io::Result<()> {
        let number = self.line + 1;
        {
            let mut s = self.skipped.borrow_mut();
            s.count += 1;
            if s.lines.len() < MAX_REJECTED_DETAILS {
                s.lines.push(number);
            }
        }
        let mut from = self.scan;
        loop {
            if let Some(i) = memchr::memchr(b'\n', &self.buf[from..self.end]) {
                let nl = from + i;
                self.start = nl;
                self.ready = nl + 1;
                self.scan = nl + 1;
                self.line += 1;
                return Ok(());
            }
            // Nothing of the line is kept.
            self.start = 0;
            self.ready = 0;
            self.scan = 0;
            self.end = 0;
            from = 0;
            self.read_more()?;
            if self.eof {
                self.line += 1;
                return Ok(());
            }
        }
    }
}

impl<R: Read> Read for LineCap<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(out.len());
        out[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for LineCap<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.start == self.ready {
            self.compact();
            // Check the lines read so far.
            let too_long;
            loop {
                match memchr::memchr(b'\n', &self.buf[self.scan..self.end]) {
                    Some(i) => {
                        let nl = self.scan + i;
                        if nl - self.ready > self.max {
                            too_long = true;
                            break;
                        }
                        self.line += 1;
                        self.ready = nl + 1;
                        self.scan = nl + 1;
                    }
                    None => {
                        self.scan = self.end;
                        too_long = self.end - self.ready > self.max;
                        break;
                    }
                }
            }
            if self.ready > self.start {
                if too_long {
                    // Checked again once the lines before it are handed out.
                    self.scan = self.ready;
                }
                break;
            }
            if too_long {
                self.skip_line()?;
                continue;
            }
            if self.eof {
                if self.end > self.ready {
                    // The last line, without a line feed.
                    self.line += 1;
                    self.ready = self.end;
                    self.scan = self.end;
                }
                break;
            }
            self.read_more()?;
        }
        Ok(&self.buf[self.start..self.ready])
    }

    fn consume(&mut self, amount: usize) {
        self.start = (self.start + amount).min(self.ready);
    }
}

/// A [`Read`] that fails once more than `max` bytes (plus one read-ahead of slack) were
/// read since the reader last called [`RecordCap::mark`]: bounds a CSV record whose quoted
/// field spans many lines, each of them short (the csv reader holds a whole record).
pub struct RecordCap<R> {
    inner: R,
    since: Rc<std::cell::Cell<u64>>,
    max: u64,
}

/// Tells a [`RecordCap`] that a record ended.
#[derive(Clone)]
pub struct RecordMark(Rc<std::cell::Cell<u64>>);

impl RecordMark {
    /// A record ended: the next one starts counting.
    pub fn mark(&self) {
        self.0.set(0);
    }

    /// Whether the record being read went past the limit (the reader fails from then on:
    /// stop reading).
    pub fn over(&self, max: usize) -> bool {
        self.0.get() > max as u64 + RECORD_SLACK
    }
}

/// Read-ahead a csv reader may do past a record's end, bytes.
const RECORD_SLACK: u64 = 64 * 1024;

impl<R: Read> RecordCap<R> {
    /// Caps each record of `inner` at about `max` bytes.
    pub fn new(inner: R, max: usize) -> (Self, RecordMark) {
        let since = Rc::new(std::cell::Cell::new(0));
        (
            RecordCap {
                inner,
                since: since.clone(),
                max: max as u64 + RECORD_SLACK,
            },
            RecordMark(since),
        )
    }
}

impl<R: Read> Read for RecordCap<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.since.get() > self.max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a row longer than the limit of {} bytes (limits.max_line_bytes in harrier.toml): a quoted field spans more lines than any real one",
                    self.max - RECORD_SLACK
                ),
            ));
        }
        let n = self.inner.read(out)?;
        self.since.set(self.since.get() + n as u64);
        Ok(n)
    }
}

/// Whether a [`DocumentCap`] stopped its input, and at which limit.
pub type Tripped = Rc<RefCell<Option<u64>>>;

/// A [`Read`] that fails once more than `max` bytes were read, and says so in the shared
/// `tripped` slot (the parser may turn the read error into something else).
pub struct DocumentCap<R> {
    inner: R,
    read: u64,
    max: u64,
    tripped: Tripped,
}

impl<R: Read> DocumentCap<R> {
    /// Caps `inner` at `max` bytes.
    pub fn new(inner: R, max: u64) -> Self {
        DocumentCap {
            inner,
            read: 0,
            max,
            tripped: Rc::default(),
        }
    }

    /// Set (to the limit) once the input went past it.
    pub fn tripped(&self) -> Tripped {
        self.tripped.clone()
    }
}

impl<R: Read> Read for DocumentCap<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        // One byte past the limit is read to tell "exactly at it" from "past it".
        let room = (self.max + 1 - self.read.min(self.max + 1)).min(out.len() as u64) as usize;
        if room == 0 {
            *self.tripped.borrow_mut() = Some(self.max);
            return Err(document_too_large(self.max));
        }
        let n = self.inner.read(&mut out[..room])?;
        self.read += n as u64;
        if self.read > self.max {
            *self.tripped.borrow_mut() = Some(self.max);
            return Err(document_too_large(self.max));
        }
        Ok(n)
    }
}

fn document_too_large(max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("larger than the limit of {max} bytes for a whole-file summary"),
    )
}

/// The error of a whole-file summary past `max` bytes (`what`: "a k6 summary").
pub fn document_error(source_name: &str, max: u64, what: &str) -> IngestError {
    IngestError::TooLarge {
        source_name: source_name.to_owned(),
        message: format!(
            "byte {}: larger than the limit of {max} bytes for a whole-file summary (limits.max_document_bytes in harrier.toml); not {what}, which is a few KB; nothing was stored",
            max + 1
        ),
    }
}

/// Reads all of `input`, at most `max` bytes; past it, [`document_error`].
pub fn read_document<R: Read>(
    input: R,
    max: u64,
    source_name: &str,
    what: &str,
) -> Result<Vec<u8>, IngestError> {
    let mut bytes = Vec::new();
    let mut capped = DocumentCap::new(input, max);
    let tripped = capped.tripped();
    match capped.read_to_end(&mut bytes) {
        Ok(_) => Ok(bytes),
        Err(_) if tripped.borrow().is_some() => Err(document_error(source_name, max, what)),
        Err(source) => Err(IngestError::Io {
            source_name: source_name.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line `LineCap` hands out (line feeds kept) and the lines it skipped.
    fn run(input: &[u8], max: usize) -> (Vec<u8>, SkippedLines) {
        // A one-byte reader: every line crosses reads.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(out.len()).min(3);
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut whole = Vec::new();
        let mut cap = LineCap::new(input, max);
        cap.read_to_end(&mut whole).unwrap();
        let whole_skipped = cap.skipped().borrow().clone();
        let mut out = Vec::new();
        let mut cap = LineCap::new(Trickle(input), max);
        cap.read_to_end(&mut out).unwrap();
        let skipped = cap.skipped().borrow().clone();
        assert_eq!(
            (&whole, &whole_skipped),
            (&out, &skipped),
            "read at once and trickled"
        );
        (out, skipped)
    }

    #[test]
    fn lines_up_to_the_limit_pass_and_longer_ones_become_a_bare_line_feed() {
        let max = 1024;
        let ok = "a".repeat(max);
        let long = "b".repeat(max + 1);
        let input = format!("h\n{ok}\n{long}\nlast\n{long}");
        let (out, skipped) = run(input.as_bytes(), max);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!("h\n{ok}\n\nlast\n")
        );
        assert_eq!((skipped.count, skipped.lines.clone()), (2, vec![3, 5]));
        assert!(
            skipped.reason().contains("1024 bytes"),
            "{}",
            skipped.reason()
        );
        let (out, skipped) = run(ok.as_bytes(), max);
        assert_eq!(
            out,
            ok.as_bytes(),
            "a last line without a line feed, at the limit"
        );
        assert_eq!(skipped.count, 0);
    }

    #[test]
    fn a_huge_line_is_skipped_in_little_memory() {
        // 64 MiB of one line, generated as read: the cap holds at most max + 64 KiB.
        struct Endless(u64);
        impl Read for Endless {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let n = (out.len() as u64).min(self.0) as usize;
                out[..n].fill(b'x');
                self.0 -= n as u64;
                Ok(n)
            }
        }
        let mut cap = LineCap::new(Read::chain(&b"first\n"[..], Endless(64 << 20)), 4096);
        let skipped = cap.skipped();
        let mut out = Vec::new();
        cap.read_to_end(&mut out).unwrap();
        assert_eq!(out, b"first\n");
        assert_eq!(skipped.borrow().lines, [2]);
        assert!(cap.buf.len() <= 4096 + 1 + READ_CHUNK, "{}", cap.buf.len());
    }

    #[test]
    fn skipped_lines_join_the_rejected_rows_in_line_order() {
        let mut data = RunData {
            rejected_rows: 1,
            rejected: vec![RejectedRow {
                line: 4,
                reason: "bad".into(),
            }],
            ..RunData::default()
        };
        let skipped = SkippedLines {
            count: 2,
            lines: vec![2, 9],
            max_line_bytes: 1024,
        };
        skipped.add_to(&mut data);
        let lines: Vec<u64> = data.rejected.iter().map(|r| r.line).collect();
        assert_eq!((data.rejected_rows, lines), (3, vec![2, 4, 9]));
    }

    #[test]
    fn a_document_at_the_limit_reads_and_one_byte_more_is_refused() {
        let doc = vec![b' '; 2048];
        assert_eq!(
            read_document(&doc[..], 2048, "s.json", "a k6 summary")
                .unwrap()
                .len(),
            2048
        );
        let err = read_document(&doc[..], 2047, "s.json", "a k6 summary")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("s.json")
                && err.contains("byte 2048")
                && err.contains("2047 bytes")
                && err.contains("limits.max_document_bytes"),
            "{err}"
        );
    }
}
