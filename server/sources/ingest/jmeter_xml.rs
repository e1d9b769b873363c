//! JMeter JTL, XML flavour → samples.
//!
//! Format (docs/formats.md#jmeter-jtl-xml; writer: XStream converters `SampleResultConverter` /
//! `HTTPResultConverter` in apache/jmeter): `<testResults>` holding one `<httpSample>` or
//! `<sample>` element per sample. Only **top-level** elements are samples: nested ones are
//! sub-results (redirects, embedded resources, transaction children) whose time the parent
//! already includes. Attributes read: `t` elapsed ms, `ts` start epoch ms, `s` success,
//! `lb` label, `rc` (`rs` in old files) response code, `rm` response message, `by` bytes
//! received, `sby` bytes sent, `na` active threads in all groups. The message of a failing
//! sample is the first failing `<assertionResult>`'s `<failureMessage>` when there is one,
//! else `rm`; `rm` starting `Number of samples in transaction` marks a transaction row.
//!
//! Streaming: one event at a time through quick-xml; the text of every element inside a
//! sample except the assertion fields is skipped in the raw byte stream, so saved
//! `<responseData>` bodies are never buffered. A killed run leaves no `</testResults>`:
//! every complete sample still imports; a top-level element cut off at the end of the file
//! is rejected with the line it starts on, as is a sample missing `t`, `ts` or `s`.

use std::io::{self, BufRead, Read};

use quick_xml::Reader;
use quick_xml::encoding::Decoder;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::attributes::Attribute;
use quick_xml::events::{BytesStart, Event};

use super::timestamp::{parse_sample_epoch_ms, parse_u64};
use crate::domain::runs::{RunBuilder, RunData, RunLimits, Sample};

const TRANSACTION_PREFIX: &str = "Number of samples in transaction";

/// Reads every top-level sample of `input` into a run.
///
/// `Err` only for a read error before any sample was accepted; a malformed document is
/// read up to the error, which becomes a rejected row with its line.
pub fn parse<R: BufRead>(input: R, limits: &RunLimits) -> io::Result<RunData> {
    let mut reader = Reader::from_reader(LineCounter::new(input, limits.max_line_bytes));
    reader.config_mut().trim_text(false);
    let mut state = State::default();
    let mut builder = RunBuilder::with_limits(*limits);
    let mut buf = Vec::with_capacity(4096);
    loop {
        buf.clear();
        let line = reader.get_ref().newlines + 1;
        reader.get_mut().event_start(line);
        let event = match reader.read_event_into(&mut buf) {
            // An event read in one go is checked once read. quick-xml consumes a tag's `<`
            // with the text before it: a text run counts one byte more than its length, a
            // tag one byte less.
            Ok(ref e)
                if match e {
                    Event::Text(_) => reader.get_ref().event_bytes > limits.max_line_bytes + 1,
                    _ => reader.get_ref().event_bytes + 1 > limits.max_line_bytes,
                } =>
            {
                return Err(reader.get_ref().too_long());
            }
            Ok(e) => e,
            Err(_) if reader.get_ref().tripped => {
                return Err(reader.get_ref().too_long());
            }
            Err(quick_xml::Error::Io(e)) if builder.samples() == 0 => {
                return Err(io::Error::new(e.kind(), e.to_string()));
            }
            Err(e) => {
                let s = &state.sample;
                match (state.open, s.valid) {
                    (true, true) => {
                        builder.reject(s.line, format!("sample cut off or malformed: {e}"))
                    }
                    // Its attributes were rejected already.
                    (true, false) => {}
                    (false, _) => {
                        builder.reject(line, format!("XML error, reading stopped here: {e}"))
                    }
                }
                break;
            }
        };
        let mut skip_text = false;
        match event {
            Event::Start(e) => {
                skip_text = state.start(&e, line, reader.decoder(), &mut builder);
                state.depth += 1;
            }
            Event::Empty(e) => {
                state.start(&e, line, reader.decoder(), &mut builder);
                state.end(e.local_name().as_ref(), &mut builder);
            }
            Event::End(e) => {
                state.depth = state.depth.saturating_sub(1);
                state.end(e.local_name().as_ref(), &mut builder);
            }
            // A captured field is kept up to the line limit (the run keeps fewer characters
            // still: limits.max_message_chars).
            _ if state.capture.is_some() && state.text.len() > limits.max_line_bytes => {}
            Event::Text(t) if state.capture.is_some() => {
                state.text.push_str(&String::from_utf8_lossy(&t));
            }
            Event::CData(t) if state.capture.is_some() => {
                state.text.push_str(&String::from_utf8_lossy(&t));
            }
            Event::GeneralRef(r) if state.capture.is_some() => {
                if let Ok(Some(c)) = r.resolve_char_ref() {
                    state.text.push(c);
                } else if let Some(s) = std::str::from_utf8(&r)
                    .ok()
                    .and_then(resolve_predefined_entity)
                {
                    state.text.push_str(s);
                }
            }
            Event::Eof => {
                if state.open && state.sample.valid {
                    let s = &state.sample;
                    let name = s.element;
                    builder.reject(s.line, format!("<{name}> not closed before the end of the file (run killed while writing?)"));
                }
                if state.top_level.is_none() {
                    builder.reject(1, "no XML element found: not a JMeter XML JTL");
                }
                break;
            }
            _ => {}
        }
        if skip_text {
            // Skipped text is never held: it does not count against the limit.
            reader.get_mut().skipping = true;
            skip_raw_text(&mut reader.stream())?;
            reader.get_mut().skipping = false;
        }
    }
    Ok(builder.finish())
}

/// Consumes raw bytes up to (not including) the next `<`: an element's text content,
/// which in XML cannot contain a raw `<`.
fn skip_raw_text(stream: &mut impl BufRead) -> io::Result<()> {
    loop {
        let buf = stream.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'<') {
            Some(i) => {
                stream.consume(i);
                return Ok(());
            }
            None => {
                let n = buf.len();
                stream.consume(n);
            }
        }
    }
}

/// Which assertion field's text is being collected.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Capture {
    Failure,
    Error,
    FailureMessage,
}

/// The top-level sample being read (its attributes, then its assertion results). One
/// value is reused for every sample, so its buffers are allocated once.
#[derive(Debug, Default)]
struct Pending {
    /// False when the attributes were rejected: the element is only tracked so that its
    /// children are not read as samples.
    valid: bool,
    element: &'static str,
    line: u64,
    elapsed_ms: u64,
    start_ms: i64,
    success: bool,
    label: String,
    response_code: String,
    response_message: String,
    bytes_received: u64,
    bytes_sent: u64,
    active_users: Option<u32>,
    /// The first failing assertion's message, when `has_assertion_message`.
    assertion_message: String,
    has_assertion_message: bool,
    in_assertion: bool,
    assertion_failed: bool,
    assertion_text: String,
    /// The element holds nested samples (sub-results): a transaction in "generate parent
    /// sample" mode, whose requests are visible only inside it.
    has_children: bool,
}

impl Pending {
    fn reset(&mut self, element: &'static str, line: u64) {
        self.valid = false;
        self.element = element;
        self.line = line;
        self.label.clear();
        self.response_code.clear();
        self.response_message.clear();
        self.bytes_received = 0;
        self.bytes_sent = 0;
        self.active_users = None;
        self.has_assertion_message = false;
        self.in_assertion = false;
        self.has_children = false;
    }
}

#[derive(Debug, Default)]
struct State {
    /// Open elements.
    depth: usize,
    /// Depth at which samples are top-level: 1 under `<testResults>`, 0 without a root.
    top_level: Option<usize>,
    /// A top-level sample is open; `sample` holds it.
    open: bool,
    sample: Pending,
    capture: Option<Capture>,
    text: String,
}

impl State {
    /// Handles a start (or empty) tag at `self.depth`; returns whether its text content
    /// should be skipped unread.
    fn start(
        &mut self,
        e: &BytesStart<'_>,
        line: u64,
        decoder: Decoder,
        builder: &mut RunBuilder,
    ) -> bool {
        let name = e.local_name();
        let name = name.as_ref();
        let top = *self
            .top_level
            .get_or_insert(usize::from(name == b"testResults"));
        if !self.open {
            if self.depth == top && (name == b"httpSample" || name == b"sample") {
                let element = if name == b"sample" {
                    "sample"
                } else {
                    "httpSample"
                };
                self.open = true;
                self.sample.reset(element, line);
                if let Err(why) = read_attributes(e, &mut self.sample, decoder) {
                    builder.reject(line, why);
                }
            }
            return false;
        }
        let sample = &mut self.sample;
        let rel = self.depth - top;
        if rel == 1 && (name == b"httpSample" || name == b"sample") {
            sample.has_children = true;
        }
        if rel == 1 && name == b"assertionResult" {
            sample.in_assertion = true;
            sample.assertion_failed = false;
            sample.assertion_text.clear();
            return false;
        }
        if rel == 2 && sample.in_assertion {
            self.capture = match name {
                b"failure" => Some(Capture::Failure),
                b"error" => Some(Capture::Error),
                b"failureMessage" => Some(Capture::FailureMessage),
                _ => None,
            };
            if self.capture.is_some() {
                self.text.clear();
                return false;
            }
        }
        true
    }

    /// Handles an end tag (or the end of an empty tag) leaving depth `self.depth`.
    fn end(&mut self, name: &[u8], builder: &mut RunBuilder) {
        if !self.open {
            return;
        }
        let top = self.top_level.unwrap_or(0);
        let sample = &mut self.sample;
        if self.depth == top {
            self.open = false;
            emit(sample, builder);
            return;
        }
        let rel = self.depth - top;
        if rel == 2 && sample.in_assertion {
            match self.capture.take() {
                Some(Capture::Failure | Capture::Error) if self.text.trim() == "true" => {
                    sample.assertion_failed = true
                }
                Some(Capture::FailureMessage) => {
                    std::mem::swap(&mut sample.assertion_text, &mut self.text)
                }
                _ => {}
            }
        } else if rel == 1 && name == b"assertionResult" {
            sample.in_assertion = false;
            if sample.assertion_failed
                && !sample.has_assertion_message
                && !sample.assertion_text.is_empty()
            {
                std::mem::swap(&mut sample.assertion_message, &mut sample.assertion_text);
                sample.has_assertion_message = true;
            }
        }
    }
}

/// Reads a top-level sample's attributes into `p` (its buffers are reused: no allocation
/// per sample unless a value holds an entity).
fn read_attributes(e: &BytesStart<'_>, p: &mut Pending, decoder: Decoder) -> Result<(), String> {
    let element = p.element;
    let (mut elapsed, mut start_ms, mut success) = (None, None, None);
    for attr in e.attributes() {
        let attr = attr.map_err(|err| format!("<{element}> has a malformed attribute: {err}"))?;
        let raw: &[u8] = &attr.value;
        match attr.key.as_ref() {
            b"t" => {
                let t = parse_u64(raw).ok_or_else(|| {
                    format!(
                        "t={:?} is not a whole, non-negative number of ms",
                        String::from_utf8_lossy(raw)
                    )
                })?;
                elapsed = Some(t);
            }
            b"ts" => start_ms = parse_sample_epoch_ms(raw),
            b"s" => {
                success = Some(match raw {
                    b"true" => true,
                    b"false" => false,
                    _ => {
                        return Err(format!(
                            "s={:?} is not true or false",
                            String::from_utf8_lossy(raw)
                        ));
                    }
                })
            }
            b"lb" => unescape_into(&attr, decoder, &mut p.label),
            b"rc" => unescape_into(&attr, decoder, &mut p.response_code),
            // Very old files write `rs`; `rc` wins when both are present.
            b"rs" if p.response_code.is_empty() => {
                unescape_into(&attr, decoder, &mut p.response_code)
            }
            b"rm" => unescape_into(&attr, decoder, &mut p.response_message),
            b"by" => p.bytes_received = parse_u64(raw).ok_or("by is not a whole number")?,
            b"sby" => p.bytes_sent = parse_u64(raw).ok_or("sby is not a whole number")?,
            b"na" => {
                let na = parse_u64(raw).ok_or("na is not a whole number")?;
                p.active_users = Some(u32::try_from(na).unwrap_or(u32::MAX));
            }
            _ => {}
        }
    }
    p.elapsed_ms = elapsed.ok_or_else(|| format!("<{element}> has no t (elapsed) attribute"))?;
    p.start_ms = start_ms.ok_or_else(|| {
        format!("<{element}> has no valid ts attribute (epoch ms on or after 2000-01-01)")
    })?;
    p.success = success.ok_or_else(|| format!("<{element}> has no s (success) attribute"))?;
    p.valid = true;
    Ok(())
}

fn unescape_into(attr: &Attribute<'_>, decoder: Decoder, out: &mut String) {
    out.clear();
    match attr.decode_and_unescape_value(decoder) {
        Ok(v) => out.push_str(&v),
        Err(_) => out.push_str(&String::from_utf8_lossy(&attr.value)),
    }
}

fn emit(p: &Pending, builder: &mut RunBuilder) {
    if !p.valid {
        return;
    }
    let message = if !p.success && p.has_assertion_message {
        &p.assertion_message
    } else {
        &p.response_message
    };
    builder.push(
        p.line,
        &Sample {
            label: &p.label,
            start_ms: p.start_ms,
            elapsed_ms: p.elapsed_ms,
            success: p.success,
            response_code: &p.response_code,
            message,
            bytes_received: p.bytes_received,
            bytes_sent: p.bytes_sent,
            active_users: p.active_users,
            // A classic-mode transaction row repeats requests written as samples of their own,
            // so it stays out of run totals; a parent-mode one (children nested inside it) is
            // the only record of its requests and counts, as in JMeter's own reports.
            is_transaction: p.response_message.starts_with(TRANSACTION_PREFIX) && !p.has_children,
        },
    );
}

/// A buffered reader that counts the line feeds consumed, so events can be given the
/// line they start on (quick-xml reports byte offsets only), and that fails once one event
/// (an element's tag, a text run, a comment…) takes more than `max_event` bytes: quick-xml
/// holds a whole event in memory.
struct LineCounter<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    filled: usize,
    newlines: u64,
    /// Bytes consumed since the current event started.
    event_bytes: usize,
    /// The line the current event starts on.
    event_line: u64,
    max_event: usize,
    /// Set once an event went past `max_event`.
    tripped: bool,
    /// Set while text is skipped unread (not counted).
    skipping: bool,
}

impl<R: Read> LineCounter<R> {
    fn new(inner: R, max_event: usize) -> Self {
        LineCounter {
            inner,
            buf: vec![0; 1 << 16].into_boxed_slice(),
            pos: 0,
            filled: 0,
            newlines: 0,
            event_bytes: 0,
            event_line: 1,
            max_event,
            tripped: false,
            skipping: false,
        }
    }

    /// A new event starts at `line`.
    fn event_start(&mut self, line: u64) {
        self.event_bytes = 0;
        self.event_line = line;
    }

    /// The error of an event past the limit.
    fn too_long(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "line {}: an XML element, text or comment longer than the limit of {} bytes (limits.max_line_bytes in harrier.toml); nothing was stored",
                self.event_line, self.max_event
            ),
        )
    }
}

impl<R: Read> Read for LineCounter<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = {
            let available = self.fill_buf()?;
            let n = available.len().min(out.len());
            out[..n].copy_from_slice(&available[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl<R: Read> BufRead for LineCounter<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.event_bytes > self.max_event {
            self.tripped = true;
            return Err(self.too_long());
        }
        if self.pos == self.filled {
            self.filled = self.inner.read(&mut self.buf)?;
            self.pos = 0;
        }
        Ok(&self.buf[self.pos..self.filled])
    }

    fn consume(&mut self, amt: usize) {
        let end = (self.pos + amt).min(self.filled);
        self.newlines += self.buf[self.pos..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        if !self.skipping {
            self.event_bytes = self.event_bytes.saturating_add(end - self.pos);
        }
        self.pos = end;
    }
}
