//! JMeter JTL, XML flavour → samples.
//!
//! Format (FORMATS.md §2.2; writer: XStream converters `SampleResultConverter` /
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

use super::timestamp::{parse_epoch_ms, parse_u64};
use crate::runs::{RunBuilder, RunData, Sample};

const TRANSACTION_PREFIX: &str = "Number of samples in transaction";

/// Reads every top-level sample of `input` into a run.
///
/// `Err` only for a read error before any sample was accepted; a malformed document is
/// read up to the error, which becomes a rejected row with its line.
pub fn parse<R: BufRead>(input: R) -> io::Result<RunData> {
    let mut reader = Reader::from_reader(LineCounter::new(input));
    reader.config_mut().trim_text(false);
    let mut state = State::default();
    let mut builder = RunBuilder::new();
    let mut buf = Vec::with_capacity(4096);
    loop {
        buf.clear();
        let line = reader.get_ref().newlines + 1;
        let event = match reader.read_event_into(&mut buf) {
            Ok(e) => e,
            Err(quick_xml::Error::Io(e)) if builder.samples() == 0 => {
                return Err(io::Error::new(e.kind(), e.to_string()));
            }
            Err(e) => {
                let (at, what) = match &state.sample {
                    Some(s) => (s.line, format!("sample cut off or malformed: {e}")),
                    None => (line, format!("XML error, reading stopped here: {e}")),
                };
                builder.reject(at, what);
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
                // A sample whose attributes were already rejected has no elapsed value.
                if let Some(s) = state
                    .sample
                    .as_ref()
                    .filter(|s| matches!(s.elapsed, Some(Ok(_))))
                {
                    let name = s.element;
                    builder.reject(s.line, format!("<{name}> not closed before the end of the file (run killed while writing?)"));
                }
                break;
            }
            _ => {}
        }
        if skip_text {
            skip_raw_text(&mut reader.stream())?;
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

/// The top-level sample being read (its attributes, then its assertion results).
#[derive(Debug, Default)]
struct Pending {
    element: &'static str,
    line: u64,
    elapsed: Option<Result<u64, ()>>,
    start_ms: Option<i64>,
    success: Option<bool>,
    label: String,
    response_code: String,
    response_message: String,
    bytes_received: u64,
    bytes_sent: u64,
    active_users: Option<u32>,
    /// First failing assertion's message.
    assertion_message: Option<String>,
    in_assertion: bool,
    assertion_failed: bool,
    assertion_text: String,
}

#[derive(Debug, Default)]
struct State {
    /// Open elements.
    depth: usize,
    /// Depth at which samples are top-level: 1 under `<testResults>`, 0 without a root.
    top_level: Option<usize>,
    sample: Option<Pending>,
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
        let Some(sample) = &mut self.sample else {
            if self.depth == top && (name == b"httpSample" || name == b"sample") {
                let element = if name == b"sample" {
                    "sample"
                } else {
                    "httpSample"
                };
                match read_attributes(e, element, line, decoder) {
                    Ok(p) => self.sample = Some(p),
                    Err(why) => {
                        builder.reject(line, why);
                        // Still track the element so its children are not read as samples.
                        self.sample = Some(Pending {
                            element,
                            line,
                            ..Pending::default()
                        });
                    }
                }
            }
            return false;
        };
        let rel = self.depth - top;
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
        let top = self.top_level.unwrap_or(0);
        let Some(sample) = &mut self.sample else {
            return;
        };
        if self.depth == top {
            let done = self.sample.take().expect("checked above");
            emit(done, builder);
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
                && sample.assertion_message.is_none()
                && !sample.assertion_text.is_empty()
            {
                sample.assertion_message = Some(std::mem::take(&mut sample.assertion_text));
            }
        }
    }
}

fn read_attributes(
    e: &BytesStart<'_>,
    element: &'static str,
    line: u64,
    decoder: Decoder,
) -> Result<Pending, String> {
    let mut p = Pending {
        element,
        line,
        ..Pending::default()
    };
    let mut code_from_rs = None;
    for attr in e.attributes() {
        let attr = attr.map_err(|err| format!("<{element}> has a malformed attribute: {err}"))?;
        let raw: &[u8] = &attr.value;
        match attr.key.as_ref() {
            b"t" => {
                p.elapsed = Some(parse_u64(raw).ok_or(()));
            }
            b"ts" => p.start_ms = parse_epoch_ms(raw),
            b"s" => {
                p.success = match raw {
                    b"true" => Some(true),
                    b"false" => Some(false),
                    _ => {
                        return Err(format!(
                            "s={:?} is not true or false",
                            String::from_utf8_lossy(raw)
                        ));
                    }
                }
            }
            b"lb" => p.label = unescape(&attr, decoder),
            b"rc" => p.response_code = unescape(&attr, decoder),
            b"rs" => code_from_rs = Some(unescape(&attr, decoder)),
            b"rm" => p.response_message = unescape(&attr, decoder),
            b"by" => p.bytes_received = parse_u64(raw).ok_or("by is not a whole number")?,
            b"sby" => p.bytes_sent = parse_u64(raw).ok_or("sby is not a whole number")?,
            b"na" => {
                p.active_users =
                    Some(parse_u64(raw).map_or(Err("na is not a whole number"), |v| {
                        Ok(u32::try_from(v).unwrap_or(u32::MAX))
                    })?)
            }
            _ => {}
        }
    }
    if p.response_code.is_empty() {
        p.response_code = code_from_rs.unwrap_or_default();
    }
    match (&p.elapsed, p.start_ms, p.success) {
        (None, _, _) => Err(format!("<{element}> has no t (elapsed) attribute")),
        (Some(Err(())), _, _) => {
            let t = e
                .try_get_attribute("t")
                .ok()
                .flatten()
                .map(|a| String::from_utf8_lossy(&a.value).into_owned());
            Err(format!(
                "t={:?} is not a whole, non-negative number of ms",
                t.unwrap_or_default()
            ))
        }
        (_, None, _) => Err(format!("<{element}> has no valid ts (epoch ms) attribute")),
        (_, _, None) => Err(format!("<{element}> has no s (success) attribute")),
        _ => Ok(p),
    }
}

fn unescape(attr: &Attribute<'_>, decoder: Decoder) -> String {
    match attr.decode_and_unescape_value(decoder) {
        Ok(v) => v.into_owned(),
        Err(_) => String::from_utf8_lossy(&attr.value).into_owned(),
    }
}

fn emit(p: Pending, builder: &mut RunBuilder) {
    // A sample whose attributes were rejected is tracked with no elapsed value.
    let (Some(Ok(elapsed_ms)), Some(start_ms), Some(success)) = (p.elapsed, p.start_ms, p.success)
    else {
        return;
    };
    let message = match &p.assertion_message {
        Some(m) if !success => m.as_str(),
        _ => p.response_message.as_str(),
    };
    builder.push(&Sample {
        label: &p.label,
        start_ms,
        elapsed_ms,
        success,
        response_code: &p.response_code,
        message,
        bytes_received: p.bytes_received,
        bytes_sent: p.bytes_sent,
        active_users: p.active_users,
        is_transaction: p.response_message.starts_with(TRANSACTION_PREFIX),
    });
}

/// A buffered reader that counts the line feeds consumed, so events can be given the
/// line they start on (quick-xml reports byte offsets only).
struct LineCounter<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    filled: usize,
    newlines: u64,
}

impl<R: Read> LineCounter<R> {
    fn new(inner: R) -> Self {
        LineCounter {
            inner,
            buf: vec![0; 1 << 16].into_boxed_slice(),
            pos: 0,
            filled: 0,
            newlines: 0,
        }
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
        self.pos = end;
    }
}
