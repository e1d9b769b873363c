//! The load generator's engine: sends HTTP/1.1 or HTTP/2 requests (over TCP or TLS) on an
//! arrival schedule and hands over what it measured once a second.
//!
//! Owns [`RequestSpec`] (what to send and what counts as success, parsed from the command
//! line's URL, method, headers and body, with the feeder's rows filling `{{column}}`
//! placeholders per request), the target check ([`resolve_target`]: loopback and private
//! addresses only unless allowed) and [`start`], which runs the schedule on worker
//! threads; [`tls`] opens the connections. Must not touch the store, the live hub or the
//! terminal: it is a source of [`Tick`]s; `services::load` turns them into a run.
//!
//! How it sends (open model, after wrk2's `src/wrk.c` and vegeta's `lib/attack.go`): each
//! worker thread runs a current-thread tokio runtime and takes every n-th arrival of the
//! schedule. Its dispatcher sleeps until an arrival's intended time, queues the intended
//! time, and wakes an idle connection, or opens a new one (a task that writes each request
//! and reads its response on one kept-alive HTTP/1.1 connection itself, [`h1`]) while fewer than the
//! worker's share of `--max-connections` are open; otherwise the request waits in the
//! queue with its intended time, counted as having waited. A connection takes the oldest
//! queued request; every request is timed from its intended start, so a stalled service
//! shows in the latency of every request that should have gone out meanwhile (no
//! coordinated omission).
//!
//! HTTP/2: a task is then a stream, not a connection. Up to [`H2_STREAMS_PER_CONNECTION`]
//! tasks share one connection (the first connection fills before the next opens), and at
//! most the worker's share of `--max-connections` connections are open; the server's
//! `SETTINGS_MAX_CONCURRENT_STREAMS` is kept by hyper's HTTP/2 client, which holds a request
//! beyond it until a stream ends (that wait is in the request's service time; a server
//! limit below 100 is not spread over more connections).
//!
//! A connection's set-up (TCP, TLS handshake) is in the service time of the request that
//! opened it only: later requests on the kept-alive connection do not pay it.
//!
//! Connections open in a ramp, never in a burst (HTTP/1.1): at most
//! [`MAX_CONNECTING`] per worker are being opened at once, and a new one opens only for a
//! queued request that no connection being opened will take. Without this cap, a
//! dispatcher that fell behind (a busy machine) dispatches every arrival due at once — up to
//! tokio's cooperative budget of 128 before it yields — before any new connection task has
//! run, and each of them opened a connection: hundreds at a step's start, a burst that
//! overflows the service's accept and request queues and costs the CPU the generator was
//! short of. Driven by a [`RateControl`], the workers also open connections *ahead* of a
//! step ([`RateControl::hold_connections`], sized by the search), in the same ramp, each
//! connected before it takes a request.
//!
//! Timers: the dispatcher sleeps on tokio's timer, which has 1 ms resolution (a deadline
//! fires on the first millisecond tick at or after it, so a request is picked up to about
//! 1 ms after its intended time on an idle machine; arrivals less than 1 ms apart go out
//! in small groups on a tick, each timed from its own intended start). A sleep whose
//! deadline has passed completes at once, so a late dispatcher catches up without waiting
//! for ticks. The operating system's scheduler adds its own delay when the worker thread
//! waits for a core (a time slice of a few ms on a busy machine): both show as dispatch
//! delay, which the caller judges against the service time.
//!
//! Hot path (HTTP/1.1): no channel message and no allocation per request — the request's
//! bytes are written once (with a feeder: rendered per request into the task's buffer),
//! the response is read into the connection's buffer; a worker records into its own
//! [`Recorder`] and sends one [`Tick`] per second. HTTP/2 goes through hyper's client
//! (its request and response state per request).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http2;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};
use tokio::sync::{Notify, OnceCell, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::domain::load::{
    ClosedModel, Feeder, Outcome, Recorder, Schedule, Template, Tick, Timing, Workload,
};

mod h1;
pub mod tls;

use tls::{Dialer, Opened};
pub use tls::{HttpVersion, Negotiated, Protocol, TlsClient, TlsFiles, negotiate};

/// Streams one HTTP/2 connection carries before the next connection opens (the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS` still bounds how many are under way at once).
pub const H2_STREAMS_PER_CONNECTION: u32 = 100;

/// HTTP/1.1 connections a worker opens at once, at most (see the module docs): a ramp of
/// this many at a time; on loopback each takes well under a millisecond, so hundreds still
/// open within a second.
pub const MAX_CONNECTING: u32 = 8;

/// Why a load run could not start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    NotAllowed(String),
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("cannot start the generator: {0}")]
    Start(String),
}

/// What every request sends and what counts as a success.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    pub method: Method,
    /// Scheme, host and port as given (for people and the run's label).
    pub url: String,
    /// Host and port as in the URL (the `Host` header).
    pub authority: String,
    /// Host to resolve (IPv6 without brackets).
    pub host: String,
    /// Port to connect to.
    pub port: u16,
    /// Origin-form target (`/path?query`).
    pub path: Uri,
    /// Headers sent with every request (`Host` and `User-Agent` included).
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Accepted statuses, inclusive ranges.
    pub expect_status: Vec<(u16, u16)>,
    /// The response body must contain these bytes.
    pub expect_body: Option<Vec<u8>>,
    /// Longest a request may take from its pick-up to the last byte of its response.
    pub timeout: Duration,
    /// The URL is `https://`.
    pub https: bool,
    /// `https://`: the TLS client ([`RequestSpec::with_tls_files`]; the run builds one
    /// trusting the system's CAs when it was not called).
    pub tls: Option<TlsClient>,
    /// `--http1` / `--http2`, else [`HttpVersion::Auto`].
    pub version: HttpVersion,
    /// The absolute-form target (`http://host:port/path?query`): HTTP/2 sends the scheme and
    /// authority as pseudo-headers.
    pub absolute: Uri,
    /// Per-request values from a feeder (`None`: every request is the same).
    pub feed: Option<Arc<Feed>>,
}

/// A feeder's rows and what they fill: the URL's path and query, header values, the body.
/// Targets and header values are rendered for every row before the run (they are short);
/// the body is rendered per request.
#[derive(Debug)]
pub struct Feed {
    /// The rows (request `n` takes row `n` modulo their number).
    pub feeder: Feeder,
    /// The URL's path and query as written, placeholders included (the run's label).
    path_template: Option<String>,
    /// Per row: origin-form and absolute-form targets.
    targets: Vec<(Uri, Uri)>,
    /// Per templated header: its name and its value for each row.
    headers: Vec<(HeaderName, Vec<HeaderValue>)>,
    body: Option<Template>,
}

/// The path and query of `url` exactly as written (`/users/{{id}}?x=1`), and whether its
/// scheme, host or port hold a placeholder.
fn raw_target(url: &str) -> (&str, bool) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let start = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let target = rest[start..].split('#').next().unwrap_or("");
    let before = &url[..url.len() - rest.len() + start];
    (target, before.contains("{{"))
}

impl RequestSpec {
    /// A spec from the command line's values. `headers` are `Name: value` strings; the
    /// default status range is 200–399 (k6's default expected range).
    pub fn new(
        url: &str,
        method: &str,
        headers: &[String],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<RequestSpec, LoadError> {
        // Errors show the URL with its secrets masked: they reach logs and answers.
        let shown = crate::domain::secrets::mask_url(url);
        if raw_target(url).1 {
            return Err(LoadError::BadInput(format!(
                "{shown}: --feeder placeholders are filled in the path and query only, not the scheme, host or port"
            )));
        }
        let parsed = url::Url::parse(url)
            .map_err(|e| LoadError::BadInput(format!("{shown} is not a URL: {e}")))?;
        let scheme = parsed.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(LoadError::BadInput(format!(
                "{shown}: scheme {scheme} is not http or https"
            )));
        }
        let host = parsed
            .host_str()
            .ok_or_else(|| LoadError::BadInput(format!("{shown} has no host")))?;
        let bare_host = host.trim_start_matches('[').trim_end_matches(']');
        let port = parsed.port_or_known_default().unwrap_or(80);
        let authority = match parsed.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_string(),
        };
        let path_and_query = match parsed.query() {
            Some(q) => format!("{}?{q}", parsed.path()),
            None => parsed.path().to_string(),
        };
        let path: Uri = path_and_query
            .parse()
            .map_err(|e| LoadError::BadInput(format!("{shown}: bad path: {e}")))?;
        let absolute: Uri = format!("{scheme}://{authority}{path_and_query}")
            .parse()
            .map_err(|e| LoadError::BadInput(format!("{shown}: bad URL: {e}")))?;
        let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes())
            .map_err(|_| LoadError::BadInput(format!("{method} is not an HTTP method")))?;
        let mut map = HeaderMap::new();
        map.insert(
            hyper::header::HOST,
            HeaderValue::from_str(&authority)
                .map_err(|_| LoadError::BadInput(format!("{authority} is not a valid host")))?,
        );
        map.insert(
            hyper::header::USER_AGENT,
            HeaderValue::from_static(concat!("harrier/", env!("CARGO_PKG_VERSION"))),
        );
        for h in headers {
            let (name, value) = h
                .split_once(':')
                .ok_or_else(|| LoadError::BadInput(format!("header {h:?} is not `Name: value`")))?;
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| LoadError::BadInput(format!("{name:?} is not a header name")))?;
            // The body's length is written from the body itself.
            if name == hyper::header::CONTENT_LENGTH {
                continue;
            }
            if name == hyper::header::TRANSFER_ENCODING {
                return Err(LoadError::BadInput(format!(
                    "header {h:?}: harrier sends a body with its Content-Length; leave Transfer-Encoding out"
                )));
            }
            let value = HeaderValue::from_str(value.trim()).map_err(|_| {
                let shown = crate::domain::secrets::mask_header_line(h);
                LoadError::BadInput(format!("{shown:?}: the value is not a valid header value"))
            })?;
            map.insert(name, value);
        }
        Ok(RequestSpec {
            method,
            url: url.to_string(),
            host: bare_host.to_string(),
            authority,
            port,
            path,
            headers: map,
            body: Bytes::from(body),
            expect_status: vec![(200, 399)],
            expect_body: None,
            timeout,
            https: scheme == "https",
            tls: None,
            version: HttpVersion::Auto,
            absolute,
            feed: None,
        })
    }

    /// The TLS client of an `https://` URL: trusting the system's CAs and `files.ca_file`,
    /// presenting `files.client_cert`. On `http://` nothing, or an error when a file is
    /// given.
    pub fn with_tls_files(mut self, files: TlsFiles<'_>) -> Result<RequestSpec, LoadError> {
        if !self.https {
            if files.ca_file.is_some() || files.client_cert.is_some() {
                return Err(LoadError::BadInput(format!(
                    "--ca-file and --client-cert are for https:// URLs; {} is not one",
                    self.url
                )));
            }
            return Ok(self);
        }
        self.tls = Some(TlsClient::new(&self.host, files)?);
        Ok(self)
    }

    /// The spec ready to connect: an `https://` one without a TLS client gets the default
    /// (the system's CAs, no client certificate).
    pub fn with_default_tls(self) -> Result<RequestSpec, LoadError> {
        if self.https && self.tls.is_none() {
            return self.with_tls_files(TlsFiles::default());
        }
        Ok(self)
    }

    /// Fills `{{column}}` placeholders of the URL's path and query, of header values and of
    /// `body_template` (`(file name, text)`, replacing the body) from `feeder`'s rows, one
    /// row per request in order, wrapping around.
    ///
    /// Errors (before anything is sent): a placeholder without a feeder, or naming no
    /// column of it (the message lists the columns); a placeholder in the scheme, host or
    /// port; a row whose values make an invalid URL or header value (with the feeder's
    /// line).
    pub fn with_feed(
        mut self,
        feeder: Option<Feeder>,
        body_template: Option<(&str, &str)>,
    ) -> Result<RequestSpec, LoadError> {
        let bad = |e: crate::domain::load::TemplateError| LoadError::BadInput(e.0);
        let (raw, _) = raw_target(&self.url);
        let target = Template::parse("the URL", raw, feeder.as_ref()).map_err(bad)?;
        let mut headers = Vec::new();
        for (name, value) in &self.headers {
            let Ok(text) = value.to_str() else { continue };
            if !text.contains("{{") {
                continue;
            }
            let t =
                Template::parse(&format!("header {name}"), text, feeder.as_ref()).map_err(bad)?;
            headers.push((name.clone(), t));
        }
        let body = match body_template {
            Some((name, text)) => {
                let t = Template::parse(name, text, feeder.as_ref()).map_err(bad)?;
                if t.is_literal() {
                    self.body = Bytes::from(t.text().as_bytes().to_vec());
                    None
                } else {
                    Some(t)
                }
            }
            None => None,
        };
        let Some(feeder) = feeder else {
            return Ok(self);
        };
        let row_error = |i: usize, what: &str| {
            LoadError::BadInput(format!(
                "{} line {}: its values make {what}",
                feeder.name,
                feeder.line_of(i)
            ))
        };
        let mut targets = Vec::new();
        let path_template = (!target.is_literal()).then(|| raw.to_string());
        if path_template.is_some() {
            let (scheme, authority) = (
                self.absolute.scheme_str().unwrap_or("http"),
                self.authority.as_str(),
            );
            for i in 0..feeder.rows() {
                let mut path = target.render_url(feeder.row(i));
                if !path.starts_with('/') {
                    path.insert(0, '/');
                }
                let origin: Uri = path
                    .parse()
                    .map_err(|e| row_error(i, &format!("an invalid URL path {path:?}: {e}")))?;
                let absolute: Uri = format!("{scheme}://{authority}{path}")
                    .parse()
                    .map_err(|e| row_error(i, &format!("an invalid URL {path:?}: {e}")))?;
                targets.push((origin, absolute));
            }
        }
        let headers = headers
            .into_iter()
            .map(|(name, t)| {
                let values = (0..feeder.rows())
                    .map(|i| {
                        HeaderValue::from_bytes(&t.render(feeder.row(i))).map_err(|_| {
                            row_error(i, &format!("an invalid value of header {name}"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((name, values))
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        self.feed = Some(Arc::new(Feed {
            feeder,
            path_template,
            targets,
            headers,
            body,
        }));
        Ok(self)
    }

    /// `GET /orders`: the run's label (with placeholders as written: `GET /users/{{id}}`).
    /// Secret-looking query values are shown masked (`?token=…`): the label is shown
    /// everywhere the run is.
    pub fn label(&self) -> String {
        use crate::domain::secrets::mask_target;
        match self.feed.as_ref().and_then(|f| f.path_template.as_ref()) {
            Some(t) => format!("{} {}", self.method, mask_target(t)),
            None => format!("{} {}", self.method, mask_target(&self.path.to_string())),
        }
    }

    /// The URL as it may be shown (logs, run names, the run's source): its credentials
    /// and secret-looking query values masked ([`crate::domain::secrets::mask_url`]).
    pub fn shown_url(&self) -> String {
        crate::domain::secrets::mask_url(&self.url)
    }

    /// Bytes of one HTTP/1.1 request as written (the first feeder row's, with a feeder):
    /// request line, headers, blank line, body.
    pub fn bytes_per_request(&self) -> u64 {
        let mut bytes = Vec::new();
        self.write_http1(0, &mut bytes);
        bytes.len() as u64
    }

    /// Writes the HTTP/1.1 request for feeder row `row` (ignored without a feeder) into
    /// `out` (cleared first), as RFC 9112 §3 frames it: request line with the origin-form
    /// target, the headers (names in lower case, as HTTP/2 requires and hyper writes
    /// them), `content-length` when there is a body or the method is `POST`, `PUT` or
    /// `PATCH` (RFC 9110 §8.6), a blank line, the body.
    pub fn write_http1(&self, row: usize, out: &mut Vec<u8>) {
        let feed = self.feed.as_deref();
        let target = match feed.filter(|f| !f.targets.is_empty()) {
            Some(f) => &f.targets[row % f.targets.len()].0,
            None => &self.path,
        };
        let templated = feed.and_then(|f| f.body.as_ref().map(|b| (b, &f.feeder)));
        out.clear();
        out.extend_from_slice(self.method.as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(
            target
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .as_bytes(),
        );
        out.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in &self.headers {
            let value = feed
                .and_then(|f| f.headers.iter().find(|(n, _)| n == name))
                .map_or(value, |(_, values)| &values[row % values.len()]);
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        // The body goes after the head, then its length in front of it (a template's
        // length is known once rendered; moving a short body beats another buffer).
        let head_end = out.len();
        match templated {
            Some((template, feeder)) => template.render_into(feeder.row(row), out),
            None => out.extend_from_slice(&self.body),
        }
        let body_len = out.len() - head_end;
        let mut between = [0u8; 48];
        let mut cursor = std::io::Cursor::new(&mut between[..]);
        let needs_length = matches!(self.method, Method::POST | Method::PUT | Method::PATCH);
        let _ = if body_len > 0 || needs_length {
            write!(cursor, "content-length: {body_len}\r\n\r\n")
        } else {
            write!(cursor, "\r\n")
        };
        let n = cursor.position() as usize;
        out.splice(head_end..head_end, between[..n].iter().copied());
    }

    fn status_ok(&self, status: u16) -> bool {
        self.expect_status
            .iter()
            .any(|&(lo, hi)| (lo..=hi).contains(&status))
    }

    /// The request for feeder row `row` (ignored without a feeder), for HTTP/2 (absolute
    /// target, no `Host`: the authority is a pseudo-header) or HTTP/1.1, and its size as
    /// written in HTTP/1.1 (an estimate for HTTP/2, whose headers are compressed).
    fn request(&self, row: usize, http2: bool) -> (Request<Full<Bytes>>, u64) {
        let feed = self.feed.as_deref();
        let body = match feed.and_then(|f| f.body.as_ref().map(|b| (b, &f.feeder))) {
            Some((template, feeder)) => Bytes::from(template.render(feeder.row(row))),
            None => self.body.clone(),
        };
        let body_len = body.len();
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = self.method.clone();
        let (origin, absolute) = match feed.filter(|f| !f.targets.is_empty()) {
            Some(f) => {
                let t = &f.targets[row % f.targets.len()];
                (&t.0, &t.1)
            }
            None => (&self.path, &self.absolute),
        };
        *req.uri_mut() = if http2 {
            absolute.clone()
        } else {
            origin.clone()
        };
        let headers = req.headers_mut();
        *headers = self.headers.clone();
        if let Some(f) = feed {
            for (name, values) in &f.headers {
                headers.insert(name.clone(), values[row % values.len()].clone());
            }
        }
        if http2 {
            headers.remove(hyper::header::HOST);
        }
        let target_len = origin.path_and_query().map_or(1, |p| p.as_str().len());
        let header_len: usize = headers
            .iter()
            .map(|(n, v)| n.as_str().len() + 2 + v.len() + 2)
            .sum();
        let length = if body_len == 0 {
            0
        } else {
            "content-length: \r\n".len() + body_len.checked_ilog10().unwrap_or(0) as usize + 1
        };
        let bytes = self.method.as_str().len() + 1 + target_len + 11 + header_len + length + 2;
        (req, (bytes + body_len) as u64)
    }
}

/// Parses `--expect-status`: `200-399`, `200,201,404`, `200-299,404`.
pub fn parse_status_ranges(s: &str) -> Result<Vec<(u16, u16)>, LoadError> {
    let bad = || LoadError::BadInput(format!("--expect-status {s:?}: expected e.g. 200-299,404"));
    s.split(',')
        .map(|part| {
            let part = part.trim();
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
            let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
            if lo > hi || !(100..=999).contains(&lo) || hi > 999 {
                return Err(bad());
            }
            Ok((lo, hi))
        })
        .collect()
}

/// Whether an address is loopback or private (RFC 1918, RFC 4193, link-local).
fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_local(IpAddr::V4(v4)))
        }
    }
}

/// Resolves the spec's host to the address to connect to. Refuses an address that is not
/// loopback or private unless `allow_public` (a load generator pointed at someone else's
/// service by mistake is an attack).
pub fn resolve_target(spec: &RequestSpec, allow_public: bool) -> Result<SocketAddr, LoadError> {
    let host = spec.host.as_str();
    let addrs: Vec<SocketAddr> = (host, spec.port)
        .to_socket_addrs()
        .map_err(|e| LoadError::Resolve(format!("{host}: {e}")))?
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| LoadError::Resolve(host.to_string()))?;
    if !allow_public && !addrs.iter().all(|a| is_local(a.ip())) {
        return Err(LoadError::NotAllowed(format!(
            "{host} resolves to {}, which is neither loopback nor private; pass --allow-public-target if you mean to load it",
            addr.ip()
        )));
    }
    Ok(addr)
}

/// A constant rate from `from_ns` to `until_ns` (ns from the run's start), set while the
/// run goes: the saturation search drives the engine with these.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Requests per second; 0 sends nothing.
    pub rate_per_s: f64,
    pub from_ns: u64,
    /// No arrival at or after this (`u64::MAX`: none).
    pub until_ns: u64,
    /// The run is over: workers finish what they have and stop.
    pub stop: bool,
}

impl Segment {
    /// Arrival `k` of worker `worker` of `workers` (each takes every n-th arrival of the
    /// segment's even spacing), ns from the run's start; `None` past the segment.
    fn arrival(&self, k: u64, worker: usize, workers: usize) -> Option<u64> {
        if self.stop || self.rate_per_s <= 0.0 {
            return None;
        }
        let i = k as f64 * workers as f64 + worker as f64;
        let t = self.from_ns as f64 + (i * 1e9 / self.rate_per_s).round();
        (t < self.until_ns as f64).then_some(t as u64)
    }
}

/// The rate of a running engine, changed by whoever drives it (instead of a fixed
/// schedule), the connections to hold open, and what the workers still hold.
#[derive(Debug)]
pub struct RateControl {
    segment: watch::Sender<Segment>,
    /// Per worker: requests queued or in flight.
    outstanding: Vec<AtomicU32>,
    /// Connections to hold open over all workers.
    hold: watch::Sender<u32>,
    /// Per worker: connections of `hold` not yet open.
    to_open: Vec<AtomicU32>,
}

/// Worker `worker`'s share of `n` (the first workers take the remainder).
fn share(n: u32, worker: usize, workers: usize) -> u32 {
    let workers = workers.max(1) as u32;
    n / workers + u32::from((worker as u32) < n % workers)
}

impl RateControl {
    /// A control for `threads` workers, starting with `first`.
    pub fn new(threads: usize, first: Segment) -> Arc<RateControl> {
        Arc::new(RateControl {
            segment: watch::Sender::new(first),
            outstanding: (0..threads.max(1)).map(|_| AtomicU32::new(0)).collect(),
            hold: watch::Sender::new(0),
            to_open: (0..threads.max(1)).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    /// Asks the workers to hold `n` connections open (each its share, at most its share of
    /// `--max-connections`), opening the missing ones now in the ramp of the module docs;
    /// open ones are kept. HTTP/1.1 only (HTTP/2 connections carry many streams and open
    /// with their first).
    pub fn hold_connections(&self, n: u32) {
        let workers = self.to_open.len();
        for (w, a) in self.to_open.iter().enumerate() {
            // An upper bound until the worker has looked: it only lowers it.
            a.store(share(n, w, workers), Ordering::Relaxed);
        }
        self.hold.send_replace(n);
    }

    /// Connections asked for by [`RateControl::hold_connections`] that are not open yet,
    /// over all workers (0 once all are open, or when opening them failed).
    pub fn connections_to_open(&self) -> u64 {
        self.to_open
            .iter()
            .map(|a| u64::from(a.load(Ordering::Relaxed)))
            .sum()
    }

    /// Replaces the current segment (workers switch at once; arrivals of the new segment
    /// that are already due go out immediately).
    pub fn set(&self, segment: Segment) {
        self.segment.send_replace(segment);
    }

    /// Requests queued or in flight over all workers.
    pub fn outstanding(&self) -> u64 {
        self.outstanding
            .iter()
            .map(|a| u64::from(a.load(Ordering::Relaxed)))
            .sum()
    }
}

/// How the engine runs.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// The schedule (ignored for its rates when `control` is set: the control drives).
    pub workload: Workload,
    /// Connections open at most, over all workers (open model; the closed model opens one
    /// per user).
    pub max_connections: u32,
    /// Worker threads (each a current-thread runtime taking every n-th arrival).
    pub threads: usize,
    /// Rates set while the run goes (open model only), instead of the schedule's.
    pub control: Option<Arc<RateControl>>,
}

/// A running load: its ticks (the channel closes when every worker has finished).
pub struct Running {
    pub ticks: mpsc::UnboundedReceiver<Tick>,
    /// The run's start, unix epoch ms (the zero of every tick's times).
    pub run_start_unix_ms: i64,
    /// The run's start on the monotonic clock (the zero of segments' ns).
    pub t0: Instant,
}

/// Starts the workers, their connections speaking `protocol` (what [`negotiate`] found).
/// `cancel` stops the schedule early: requests in flight finish (or time out), queued ones
/// are counted as never sent.
pub fn start(
    spec: RequestSpec,
    addr: SocketAddr,
    protocol: Protocol,
    settings: &EngineSettings,
    cancel: CancellationToken,
) -> Result<Running, LoadError> {
    let threads = match &settings.control {
        Some(c) => c.outstanding.len(),
        None => settings.threads.max(1),
    };
    let max_connections = settings.max_connections.max(threads as u32);
    let (tx, rx) = mpsc::unbounded_channel();
    let dialer = Dialer::new(addr, protocol, spec.tls.as_ref());
    let spec = Arc::new(spec);
    // Feeder rows are taken in order over all workers.
    let rows = Arc::new(AtomicUsize::new(0));
    let run_start_unix_ms = crate::now_ms();
    let t0 = Instant::now();
    for worker in 0..threads {
        // The connections are shared out; the first workers take the remainder.
        let share = max_connections / threads as u32
            + u32::from((worker as u32) < max_connections % threads as u32);
        let ctx = WorkerCtx {
            worker,
            workers: threads,
            spec: spec.clone(),
            dialer: dialer.clone(),
            rows: rows.clone(),
            workload: settings.workload.clone(),
            max_open: share,
            t0,
            run_start_unix_ms,
            cancel: cancel.clone(),
            tx: tx.clone(),
            control: settings.control.clone(),
        };
        std::thread::Builder::new()
            .name(format!("harrier-load-{worker}"))
            .spawn(move || worker_main(ctx))
            .map_err(|e| LoadError::Start(e.to_string()))?;
    }
    Ok(Running {
        ticks: rx,
        run_start_unix_ms,
        t0,
    })
}

struct WorkerCtx {
    worker: usize,
    workers: usize,
    spec: Arc<RequestSpec>,
    dialer: Dialer,
    rows: Arc<AtomicUsize>,
    workload: Workload,
    /// Connections this worker may open.
    max_open: u32,
    t0: Instant,
    run_start_unix_ms: i64,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<Tick>,
    control: Option<Arc<RateControl>>,
}

fn worker_main(ctx: WorkerCtx) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("load worker {}: cannot start its runtime: {e}", ctx.worker);
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, run_worker(ctx));
}

/// One worker's state, shared by its dispatcher, its connections and its ticker (one
/// thread: `Cell`/`RefCell`, never a lock).
struct Shared {
    spec: Arc<RequestSpec>,
    dialer: Dialer,
    /// The next feeder row (shared by all workers).
    rows: Arc<AtomicUsize>,
    /// HTTP/2: the worker's connections, shared by its stream tasks (task `k` uses
    /// connection `k / H2_STREAMS_PER_CONNECTION`); empty for HTTP/1.1.
    h2: Vec<RefCell<Rc<H2Slot>>>,
    t0: Instant,
    /// HTTP/1.1 without a feeder: every request's bytes, written once.
    request_h1: Option<Bytes>,
    /// Intended start times (ns) of requests waiting for a connection.
    queue: RefCell<VecDeque<u64>>,
    wake: Notify,
    /// Connection tasks (HTTP/2: stream tasks) waiting for work and not yet claimed by the
    /// dispatcher.
    idle: Cell<u32>,
    /// Connection tasks (HTTP/2: stream tasks) running.
    open: Cell<u32>,
    /// HTTP/1.1 connection tasks whose first connection is being opened.
    connecting: Cell<u32>,
    /// Woken when a connection task's first connect ends (the ramp may go on).
    connect_ended: Notify,
    /// This worker's share of the connections to hold open ([`RateControl::hold_connections`]).
    hold: Cell<u32>,
    /// Opening a held connection failed: no more are opened until the next hold.
    hold_failed: Cell<bool>,
    done: Cell<bool>,
    rec: RefCell<Recorder>,
    /// Requests queued or in flight, published to the rate control (when there is one).
    outstanding: Cell<u32>,
    gauge: Option<(Arc<RateControl>, usize)>,
}

/// One HTTP/2 connection of a worker, opened by the first stream task that needs it.
type H2Slot = OnceCell<Opened>;

impl Shared {
    fn http2(&self) -> bool {
        self.dialer.protocol().is_http2()
    }

    /// Tasks this worker may run: one per connection (HTTP/1.1), or
    /// [`H2_STREAMS_PER_CONNECTION`] per connection (HTTP/2).
    fn max_tasks(&self, max_open: u32) -> u32 {
        if self.http2() {
            max_open.saturating_mul(H2_STREAMS_PER_CONNECTION)
        } else {
            max_open
        }
    }

    /// A stream for task `slot` on the worker's shared HTTP/2 connection of that slot,
    /// opened if it is not open (or was closed).
    async fn connect_h2(&self, slot: u32) -> Result<Conn, String> {
        if self.h2.is_empty() {
            return Err("no HTTP/2 connection slots".into());
        }
        let cell = &self.h2[(slot / H2_STREAMS_PER_CONNECTION) as usize % self.h2.len()];
        for _ in 0..2 {
            let current = cell.borrow().clone();
            let opened = current
                .get_or_try_init(|| async {
                    let opened = tls::open(&self.dialer).await?;
                    self.rec.borrow_mut().connection_opened();
                    Ok::<Opened, String>(opened)
                })
                .await?;
            if !opened.sender.is_closed() {
                return Ok(Conn::Stream(opened.sender.clone()));
            }
            // Closed by the server (GOAWAY, idle timeout) or broken: the next user opens
            // a new one.
            let mut slot_ref = cell.borrow_mut();
            if Rc::ptr_eq(&slot_ref, &current) {
                *slot_ref = Rc::new(OnceCell::new());
                self.rec.borrow_mut().connection_closed();
            }
        }
        Err("the HTTP/2 connection closed as it was opened".into())
    }

    fn ns_since_start(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.t0).as_nanos() as u64
    }

    /// The task counted in `connecting` (`*opening`) has finished its first connect (or
    /// gave up): no longer counted; the ramp may open the next one.
    fn connect_done(&self, opening: &mut bool) {
        if std::mem::take(opening) {
            self.connecting.set(self.connecting.get().saturating_sub(1));
            self.connect_ended.notify_one();
            self.publish_to_open();
        }
    }

    /// Publishes how many held connections are not open yet.
    fn publish_to_open(&self) {
        if let Some((control, w)) = &self.gauge {
            let connected = self.open.get().saturating_sub(self.connecting.get());
            let missing = if self.hold_failed.get() || self.http2() {
                0
            } else {
                self.hold.get().saturating_sub(connected)
            };
            control.to_open[*w].store(missing, Ordering::Relaxed);
        }
    }

    /// `delta` more (or fewer) requests queued or in flight.
    fn outstanding_add(&self, delta: i64) {
        let v = (i64::from(self.outstanding.get()) + delta).max(0) as u32;
        self.outstanding.set(v);
        if let Some((control, w)) = &self.gauge {
            control.outstanding[*w].store(v, Ordering::Relaxed);
        }
    }
}

async fn run_worker(ctx: WorkerCtx) {
    let h2_connections = match (&ctx.workload, ctx.dialer.protocol().is_http2()) {
        (_, false) => 0,
        // Closed model: users are streams, as many connections as they fill.
        (Workload::Closed(m), true) => {
            (m.users.div_ceil(ctx.workers as u32)).div_ceil(H2_STREAMS_PER_CONNECTION)
        }
        (Workload::Open(_), true) => ctx.max_open,
    };
    let shared = Rc::new(Shared {
        spec: ctx.spec.clone(),
        dialer: ctx.dialer.clone(),
        rows: ctx.rows.clone(),
        h2: (0..h2_connections)
            .map(|_| RefCell::new(Rc::new(OnceCell::new())))
            .collect(),
        t0: ctx.t0,
        request_h1: ctx.spec.feed.is_none().then(|| {
            let mut bytes = Vec::new();
            ctx.spec.write_http1(0, &mut bytes);
            Bytes::from(bytes)
        }),
        queue: RefCell::new(VecDeque::with_capacity(1024)),
        wake: Notify::new(),
        idle: Cell::new(0),
        open: Cell::new(0),
        connecting: Cell::new(0),
        connect_ended: Notify::new(),
        hold: Cell::new(0),
        hold_failed: Cell::new(false),
        done: Cell::new(false),
        rec: RefCell::new(Recorder::new(
            ctx.worker,
            ctx.run_start_unix_ms,
            ctx.spec.bytes_per_request(),
        )),
        outstanding: Cell::new(0),
        gauge: ctx.control.clone().map(|c| (c, ctx.worker)),
    });
    let last_sent = Rc::new(Cell::new(None::<u32>));
    let ticker =
        tokio::task::spawn_local(ticker(shared.clone(), ctx.tx.clone(), last_sent.clone()));
    match (&ctx.workload, &ctx.control) {
        (Workload::Open(_), Some(control)) => controlled(&ctx, &shared, control).await,
        (Workload::Open(schedule), None) => open_model(&ctx, &shared, schedule).await,
        (Workload::Closed(model), _) => closed_model(&ctx, &shared, model).await,
    }
    ticker.abort();
    let elapsed_s = Instant::now().saturating_duration_since(ctx.t0).as_secs() as u32;
    let second = match last_sent.get() {
        Some(s) => elapsed_s.max(s + 1),
        None => elapsed_s,
    };
    let tick = shared.rec.borrow_mut().take(second, true);
    let _ = ctx.tx.send(tick);
}

/// The closed model: this worker's users (every n-th of them), each on its own connection,
/// send, wait for the response, think, and send again until the duration is over.
async fn closed_model(ctx: &WorkerCtx, shared: &Rc<Shared>, model: &ClosedModel) {
    let end = ctx.t0 + Duration::from_secs_f64(model.duration_s);
    let think = Duration::from_secs_f64(model.think_s);
    let users: Vec<JoinHandle<()>> = (0..model.users as usize)
        .skip(ctx.worker)
        .step_by(ctx.workers)
        .enumerate()
        .map(|(slot, _)| {
            let (sh, cancel) = (shared.clone(), ctx.cancel.clone());
            let slot = slot as u32;
            tokio::task::spawn_local(async move {
                let mut conn: Option<Conn> = None;
                let mut bufs = Buffers::default();
                while Instant::now() < end && !cancel.is_cancelled() {
                    // Closed model: a request is meant to start when it is sent.
                    let intended_ns = sh.ns_since_start(Instant::now());
                    sh.rec.borrow_mut().scheduled(intended_ns, false);
                    one_request(&sh, slot, &mut conn, &mut bufs, intended_ns).await;
                    sh.connect_done(&mut bufs.opening);
                    if !think.is_zero() {
                        tokio::select! {
                            _ = tokio::time::sleep(think) => {}
                            _ = cancel.cancelled() => {}
                        }
                    }
                }
                close(&sh, &mut conn);
            })
        })
        .collect();
    for u in users {
        let _ = u.await;
    }
}

/// An arrival is due: queue it and wake an idle connection, or open one.
fn dispatch(
    ctx: &WorkerCtx,
    shared: &Rc<Shared>,
    connections: &mut Vec<JoinHandle<()>>,
    intended_ns: u64,
) {
    let (idle, open) = (shared.idle.get(), shared.open.get());
    let max_tasks = shared.max_tasks(ctx.max_open);
    shared
        .rec
        .borrow_mut()
        .scheduled(intended_ns, idle == 0 && open >= max_tasks);
    shared.queue.borrow_mut().push_back(intended_ns);
    shared.outstanding_add(1);
    if idle > 0 {
        shared.idle.set(idle - 1);
        shared.wake.notify_one();
    } else if open < max_tasks {
        if shared.http2() {
            shared.open.set(open + 1);
            connections.push(tokio::task::spawn_local(connection(
                shared.clone(),
                open,
                false,
            )));
        } else {
            open_for_queue(ctx, shared, connections);
        }
    }
}

/// HTTP/1.1: opens connection tasks (each opening its connection with the request it
/// takes) for queued requests that no task being opened will take, at most
/// [`MAX_CONNECTING`] being opened at once (see the module docs).
fn open_for_queue(ctx: &WorkerCtx, shared: &Rc<Shared>, connections: &mut Vec<JoinHandle<()>>) {
    let max_tasks = shared.max_tasks(ctx.max_open);
    while shared.open.get() < max_tasks
        && shared.connecting.get() < MAX_CONNECTING
        && shared.queue.borrow().len() > (shared.idle.get() + shared.connecting.get()) as usize
    {
        let slot = shared.open.get();
        shared.open.set(slot + 1);
        shared.connecting.set(shared.connecting.get() + 1);
        connections.push(tokio::task::spawn_local(connection(
            shared.clone(),
            slot,
            false,
        )));
    }
}

/// HTTP/1.1: opens connections (each connected before it takes a request) until this
/// worker holds its share of the connections asked for, at most [`MAX_CONNECTING`] being
/// opened at once; then for the queue.
fn ramp(ctx: &WorkerCtx, shared: &Rc<Shared>, connections: &mut Vec<JoinHandle<()>>) {
    if shared.http2() {
        return;
    }
    let max_tasks = shared.max_tasks(ctx.max_open);
    while shared.open.get() < shared.hold.get().min(max_tasks)
        && shared.connecting.get() < MAX_CONNECTING
        && !shared.hold_failed.get()
    {
        let slot = shared.open.get();
        shared.open.set(slot + 1);
        shared.connecting.set(shared.connecting.get() + 1);
        connections.push(tokio::task::spawn_local(connection(
            shared.clone(),
            slot,
            true,
        )));
    }
    open_for_queue(ctx, shared, connections);
    shared.publish_to_open();
}

/// The open model: arrivals on the schedule, handed to connections (see the module docs).
async fn open_model(ctx: &WorkerCtx, shared: &Rc<Shared>, schedule: &Schedule) {
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    let mut cancelled = false;
    for intended_ns in schedule.arrivals().skip(ctx.worker).step_by(ctx.workers) {
        let deadline = ctx.t0 + Duration::from_nanos(intended_ns);
        if Instant::now() < deadline {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = ctx.cancel.cancelled() => { cancelled = true; break; }
            }
        } else if ctx.cancel.is_cancelled() {
            cancelled = true;
            break;
        }
        dispatch(ctx, shared, &mut connections, intended_ns);
    }
    wind_down(shared, connections, cancelled).await;
}

/// The open model at rates set while the run goes ([`RateControl`]): each segment's even
/// arrivals, this worker taking every n-th, until the control says stop.
async fn controlled(ctx: &WorkerCtx, shared: &Rc<Shared>, control: &RateControl) {
    let mut rx = control.segment.subscribe();
    let mut segment = *rx.borrow_and_update();
    let mut hold = control.hold.subscribe();
    let mut k = 0u64;
    let mut connections: Vec<JoinHandle<()>> = Vec::new();
    let mut cancelled = false;
    let held = |n: u32| share(n, ctx.worker, ctx.workers).min(ctx.max_open);
    shared.hold.set(held(*hold.borrow_and_update()));
    ramp(ctx, shared, &mut connections);
    while !segment.stop {
        // Still opening: a connect that ends lets the ramp go on.
        let ramping = shared.connecting.get() > 0;
        let next = segment.arrival(k, ctx.worker, ctx.workers);
        let sleep = async {
            match next {
                Some(ns) => tokio::time::sleep_until(ctx.t0 + Duration::from_nanos(ns)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = ctx.cancel.cancelled() => { cancelled = true; break; }
            changed = rx.changed() => {
                if changed.is_err() {
                    break;
                }
                segment = *rx.borrow_and_update();
                k = 0;
            }
            Ok(()) = hold.changed() => {
                shared.hold.set(held(*hold.borrow_and_update()));
                shared.hold_failed.set(false);
                ramp(ctx, shared, &mut connections);
            }
            _ = shared.connect_ended.notified(), if ramping => {
                ramp(ctx, shared, &mut connections);
            }
            _ = sleep => {
                if let Some(ns) = next {
                    dispatch(ctx, shared, &mut connections, ns);
                    k += 1;
                }
            }
        }
    }
    wind_down(shared, connections, cancelled).await;
}

/// The schedule is over (or stopped): connections finish the queue (or it is dropped,
/// counted as never sent, when `cancelled`), then end.
async fn wind_down(shared: &Rc<Shared>, connections: Vec<JoinHandle<()>>, cancelled: bool) {
    shared.done.set(true);
    if cancelled {
        let unsent = {
            let mut q = shared.queue.borrow_mut();
            let n = q.len() as u64;
            q.clear();
            n
        };
        shared.rec.borrow_mut().unsent(unsent);
        shared.outstanding_add(-(unsent as i64));
    }
    shared.wake.notify_waiters();
    for c in connections {
        let _ = c.await;
    }
}

/// Hands the worker's recorder over at every whole second from the start.
async fn ticker(
    shared: Rc<Shared>,
    tx: mpsc::UnboundedSender<Tick>,
    last_sent: Rc<Cell<Option<u32>>>,
) {
    let mut second = 0u32;
    loop {
        let boundary = shared.t0 + Duration::from_secs(u64::from(second) + 1);
        tokio::time::sleep_until(boundary).await;
        let tick = shared.rec.borrow_mut().take(second, false);
        last_sent.set(Some(second));
        if tx.send(tick).is_err() {
            return;
        }
        second += 1;
    }
}

/// What a task sends on: its own kept-alive HTTP/1.1 connection (dropping it closes the
/// socket at once, even with a response still under way after a timeout), or a handle on
/// the worker's shared HTTP/2 connection (dropping it, or a request future, resets only
/// that stream).
enum Conn {
    /// Boxed: a TLS stream's state is over a kilobyte, an HTTP/2 handle a pointer.
    Http1(Box<h1::Connection>),
    Stream(http2::SendRequest<Full<Bytes>>),
}

impl Drop for Opened {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// A connection task (HTTP/2: a stream task), number `slot` of its worker: takes queued
/// requests until the schedule is done and the queue empty. HTTP/1.1: counted in
/// `connecting` until its first connect ends; `ahead`: it connects before taking a request
/// (a held connection), else with its first request (whose service time then has it).
async fn connection(sh: Rc<Shared>, slot: u32, ahead: bool) {
    let mut conn: Option<Conn> = None;
    let mut bufs = Buffers {
        opening: !sh.http2(),
        ..Buffers::default()
    };
    if ahead {
        match tls::connect(&sh.dialer).await {
            Ok(stream) => {
                sh.rec.borrow_mut().connection_opened();
                conn = Some(Conn::Http1(Box::new(h1::Connection::new(stream))));
            }
            Err(e) => {
                tracing::debug!("opening a connection ahead to {}: {e}", sh.dialer.addr());
                sh.hold_failed.set(true);
            }
        }
        sh.connect_done(&mut bufs.opening);
        if conn.is_none() {
            sh.open.set(sh.open.get().saturating_sub(1));
            sh.publish_to_open();
            return;
        }
    }
    loop {
        let next = sh.queue.borrow_mut().pop_front();
        let Some(intended_ns) = next else {
            // Opened for a request another task took: idle now, not opening anything.
            sh.connect_done(&mut bufs.opening);
            if sh.done.get() {
                break;
            }
            sh.idle.set(sh.idle.get() + 1);
            sh.wake.notified().await;
            continue;
        };
        one_request(&sh, slot, &mut conn, &mut bufs, intended_ns).await;
        // Its first connect ended with the request (or the request timed out first).
        sh.connect_done(&mut bufs.opening);
    }
    sh.open.set(sh.open.get().saturating_sub(1));
    close(&sh, &mut conn);
    sh.publish_to_open();
}

/// Drops the task's connection. An HTTP/1.1 connection is counted closed (its socket
/// closes now); HTTP/2 counts its shared connections where they open and close.
fn close(sh: &Shared, conn: &mut Option<Conn>) {
    if let Some(Conn::Http1(_)) = conn.take() {
        sh.rec.borrow_mut().connection_closed();
    }
}

/// A task's buffers, kept for its life: the response body (when checked) and the request
/// (when rendered per request from a feeder); and whether it is counted as opening its
/// first connection (`Shared::connecting`).
#[derive(Default)]
struct Buffers {
    body: Vec<u8>,
    request: Vec<u8>,
    opening: bool,
}

/// Sends one request meant to start at `intended_ns`, on `conn` (task `slot`'s), and
/// records it.
async fn one_request(
    sh: &Shared,
    slot: u32,
    conn: &mut Option<Conn>,
    bufs: &mut Buffers,
    intended_ns: u64,
) {
    let picked = Instant::now();
    sh.rec.borrow_mut().picked();
    let row = if sh.spec.feed.is_some() {
        sh.rows.fetch_add(1, Ordering::Relaxed)
    } else {
        0
    };
    let (result, bytes_sent) = if sh.http2() {
        let (request, bytes_sent) = sh.spec.request(row, true);
        let exchange = exchange_h2(sh, slot, conn, &mut bufs.body, request);
        (
            tokio::time::timeout(sh.spec.timeout, exchange).await,
            bytes_sent,
        )
    } else {
        // Every request is the same: its bytes were written once; else this row's.
        let request: &[u8] = match &sh.request_h1 {
            Some(bytes) => bytes,
            None => {
                sh.spec.write_http1(row, &mut bufs.request);
                &bufs.request
            }
        };
        let exchange = exchange_h1(sh, conn, &mut bufs.body, &mut bufs.opening, request, picked);
        let result = tokio::time::timeout(sh.spec.timeout, exchange).await;
        (result, request.len() as u64)
    };
    let (outcome, status, bytes) = match result {
        Ok(r) => r,
        Err(_) => {
            close(sh, conn);
            (Outcome::Timeout, 0, 0)
        }
    };
    let done = Instant::now();
    let timing = Timing {
        intended_ns,
        picked_ns: sh.ns_since_start(picked),
        done_ns: sh.ns_since_start(done),
    };
    sh.rec
        .borrow_mut()
        .record_sized(&timing, outcome, status, bytes, bytes_sent);
    sh.outstanding_add(-1);
}

/// The outcome of a complete response with `status` and (when checked) `body`.
fn judge(sh: &Shared, status: u16, body: &[u8]) -> Outcome {
    if !sh.spec.status_ok(status) {
        Outcome::Status
    } else if let Some(needle) = sh.spec.expect_body.as_deref()
        && !contains(body, needle)
    {
        Outcome::Body
    } else {
        Outcome::Ok
    }
}

/// One HTTP/1.1 request (`request`: its bytes) on `conn`, opened first when there is none
/// or it cannot take a request at `now`: its outcome, status (0 without a response) and
/// bytes received.
///
/// A kept-alive connection the server has closed is noticed before sending (it said
/// `Connection: close`, or, idle for a while, it is found closed) or, when not even the
/// first byte could be written, by the write: the request then goes out once more on a
/// new connection. A request that was sent is never sent again.
async fn exchange_h1(
    sh: &Shared,
    conn: &mut Option<Conn>,
    body_buf: &mut Vec<u8>,
    opening: &mut bool,
    request: &[u8],
    now: Instant,
) -> (Outcome, u16, u64) {
    let mut fresh = false;
    loop {
        let usable = match conn.as_mut() {
            Some(Conn::Http1(c)) => c.usable(now),
            _ => false,
        };
        if !usable {
            close(sh, conn);
            let connected = tls::connect(&sh.dialer).await;
            sh.connect_done(opening);
            match connected {
                Ok(stream) => {
                    sh.rec.borrow_mut().connection_opened();
                    *conn = Some(Conn::Http1(Box::new(h1::Connection::new(stream))));
                }
                Err(_) => return (Outcome::Connect, 0, 0),
            }
            fresh = true;
        }
        let Some(Conn::Http1(c)) = conn.as_mut() else {
            return (Outcome::Connect, 0, 0);
        };
        let check = sh.spec.expect_body.is_some();
        body_buf.clear();
        let head = sh.spec.method == Method::HEAD;
        match c
            .exchange(request, head, check.then_some(&mut *body_buf))
            .await
        {
            Ok(answer) => {
                // The server will close it (`Connection: close`, HTTP/1.0): closed now.
                if !c.kept() {
                    close(sh, conn);
                }
                return (
                    judge(sh, answer.status, body_buf),
                    answer.status,
                    answer.bytes,
                );
            }
            Err(failed) => {
                close(sh, conn);
                tracing::debug!("load request on {}: {}", sh.dialer.addr(), failed.failure);
                if matches!(failed.failure, h1::Failure::Unsent(_)) && !fresh {
                    continue;
                }
                let tls = failed.failure.io().is_some_and(|e| tls_failed(e));
                let outcome = if tls || (fresh && sh.spec.tls.is_some()) {
                    Outcome::Connect
                } else {
                    Outcome::Transport
                };
                return (outcome, failed.status, failed.bytes);
            }
        }
    }
}

/// One HTTP/2 request on a stream of the worker's connection of task `slot` (opened first
/// when there is none or it was closed): its outcome, status (0 without a response) and
/// bytes received (headers as parsed: HPACK hides their size on the wire).
///
/// A stream hyper hands back unsent (the connection closed under it) goes out once more on
/// a new connection. A request that was sent is never sent again.
async fn exchange_h2(
    sh: &Shared,
    slot: u32,
    conn: &mut Option<Conn>,
    body_buf: &mut Vec<u8>,
    mut request: Request<Full<Bytes>>,
) -> (Outcome, u16, u64) {
    let mut fresh = false;
    let response = loop {
        if conn.as_ref().is_none_or(|c| match c {
            Conn::Stream(s) => s.is_closed(),
            Conn::Http1(_) => true,
        }) {
            *conn = None;
            match sh.connect_h2(slot).await {
                Ok(c) => *conn = Some(c),
                Err(_) => return (Outcome::Connect, 0, 0),
            }
            fresh = true;
        }
        let Some(Conn::Stream(c)) = conn.as_mut() else {
            return (Outcome::Connect, 0, 0);
        };
        if let Err(e) = c.ready().await {
            *conn = None;
            if fresh {
                return (broken(sh, fresh, &e), 0, 0);
            }
            continue;
        }
        match c.try_send_request(request).await {
            Ok(r) => break r,
            Err(mut e) => {
                *conn = None;
                let outcome = broken(sh, fresh, e.error());
                match e.take_message() {
                    Some(unsent) if !fresh => request = unsent,
                    _ => return (outcome, 0, 0),
                }
            }
        }
    };
    let status = response.status().as_u16();
    // Status line ("HTTP/1.1 200 OK\r\n" ≈ 17) and headers as parsed.
    let mut bytes: u64 = 17
        + response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().len() + v.len() + 4) as u64)
            .sum::<u64>()
        + 2;
    let check = sh.spec.expect_body.is_some();
    body_buf.clear();
    let mut incoming = response.into_body();
    while let Some(frame) = incoming.frame().await {
        match frame {
            Ok(frame) => {
                if let Some(data) = frame.data_ref() {
                    bytes += data.len() as u64;
                    if check {
                        body_buf.extend_from_slice(data);
                    }
                }
            }
            Err(e) => {
                *conn = None;
                return (broken(sh, false, &e), status, bytes);
            }
        }
    }
    (judge(sh, status, body_buf), status, bytes)
}

/// The class of a connection that broke: `connect` when TLS failed (a TLS alert or error
/// anywhere in the cause chain), or when a TLS connection opened for this request broke
/// before its response (a TLS 1.3 server refuses a missing or untrusted client
/// certificate only after the client's side of the handshake is done); else `transport`.
fn broken(sh: &Shared, fresh: bool, e: &hyper::Error) -> Outcome {
    if (fresh && sh.spec.tls.is_some()) || tls_failed(e) {
        Outcome::Connect
    } else {
        Outcome::Transport
    }
}

fn tls_failed(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if e.is::<tokio_rustls::rustls::Error>() {
            return true;
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            && inner.is::<tokio_rustls::rustls::Error>()
        {
            return true;
        }
        cause = e.source();
    }
    false
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_refuse_what_they_cannot_send() {
        let s = RequestSpec::new(
            "http://127.0.0.1:8080/orders?id=1",
            "post",
            &["Content-Type: text/xml".into()],
            b"<a/>".to_vec(),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(s.label(), "POST /orders?id=1");
        assert_eq!(s.authority, "127.0.0.1:8080");
        assert_eq!(s.headers["content-type"], "text/xml");
        assert_eq!(s.headers["host"], "127.0.0.1:8080");
        assert!(s.bytes_per_request() > 4 + 30);
        assert!(RequestSpec::new("ftp://x/", "GET", &[], vec![], Duration::from_secs(1)).is_err());
        let https =
            RequestSpec::new("https://x/a", "GET", &[], vec![], Duration::from_secs(1)).unwrap();
        assert_eq!((https.https, https.port), (true, 443));
        assert_eq!(https.absolute, "https://x/a");
        let e = s
            .clone()
            .with_tls_files(TlsFiles {
                ca_file: Some(std::path::Path::new("ca.pem")),
                client_cert: None,
            })
            .unwrap_err();
        assert!(e.to_string().contains("for https:// URLs"), "{e}");
        assert!(
            RequestSpec::new(
                "http://x/",
                "GET",
                &["nocolon".into()],
                vec![],
                Duration::from_secs(1)
            )
            .is_err()
        );
        assert_eq!(
            parse_status_ranges("200-299, 404").unwrap(),
            [(200, 299), (404, 404)]
        );
        assert!(parse_status_ranges("299-200").is_err());
    }

    #[tokio::test]
    async fn feeder_rows_fill_the_target_headers_and_body_of_each_request() {
        let feeder = || Feeder::from_csv("users.csv", b"id,name\n7,Ann Lee\n8,Bo\n").unwrap();
        let spec = |url: &str, header: &str| {
            RequestSpec::new(
                url,
                "POST",
                &[header.to_string()],
                vec![],
                Duration::from_secs(1),
            )
            .unwrap()
        };
        let s = spec(
            "http://127.0.0.1:1/users/{{id}}?n={{name}}",
            "X-User: {{name}}",
        )
        .with_feed(Some(feeder()), Some(("b.txt", "id={{id}}&name={{name}}")))
        .unwrap();
        assert_eq!(s.label(), "POST /users/{{id}}?n={{name}}");
        let (r, bytes) = s.request(1, false);
        assert_eq!(r.uri(), "/users/8?n=Bo");
        assert_eq!(r.headers()["x-user"], "Bo");
        assert_eq!(r.headers()["host"], "127.0.0.1:1");
        let body = r.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"id=8&name=Bo");
        assert!(bytes > body.len() as u64 + 40, "{bytes}");
        // HTTP/1.1 as written on the wire: the row's target, header and body, and the
        // body's length.
        let mut wire = Vec::new();
        s.write_http1(1, &mut wire);
        let ua = concat!("harrier/", env!("CARGO_PKG_VERSION"));
        assert_eq!(
            String::from_utf8(wire.clone()).unwrap(),
            format!(
                "POST /users/8?n=Bo HTTP/1.1\r\nhost: 127.0.0.1:1\r\nuser-agent: {ua}\r\n\
                 x-user: Bo\r\ncontent-length: 12\r\n\r\nid=8&name=Bo"
            )
        );
        s.write_http1(0, &mut wire);
        assert!(wire.ends_with(b"x-user: Ann Lee\r\ncontent-length: 17\r\n\r\nid=7&name=Ann Lee"));
        assert_eq!(s.bytes_per_request(), wire.len() as u64);
        // A Content-Length given by hand is replaced by the body's; a GET without a body
        // has none; Transfer-Encoding is refused.
        let get = RequestSpec::new(
            "http://127.0.0.1:1/x",
            "get",
            &["Content-Length: 99".to_string()],
            vec![],
            Duration::from_secs(1),
        )
        .unwrap();
        get.write_http1(0, &mut wire);
        assert_eq!(
            String::from_utf8(wire.clone()).unwrap(),
            format!("GET /x HTTP/1.1\r\nhost: 127.0.0.1:1\r\nuser-agent: {ua}\r\n\r\n")
        );
        let e = RequestSpec::new(
            "http://127.0.0.1:1/x",
            "POST",
            &["Transfer-Encoding: chunked".to_string()],
            vec![],
            Duration::from_secs(1),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("leave Transfer-Encoding out"), "{e}");
        // Past the last row: the first again; HTTP/2 takes the absolute form, no Host.
        let (r, _) = s.request(2, true);
        assert_eq!(r.uri(), "http://127.0.0.1:1/users/7?n=Ann%20Lee");
        assert!(r.headers().get("host").is_none());
        assert_eq!(r.headers()["x-user"], "Ann Lee");

        // Refused before anything is sent, naming what is wrong.
        let e = spec("http://127.0.0.1:1/{{nope}}", "X-A: b")
            .with_feed(Some(feeder()), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the URL line 1: placeholder {{nope}} is not a column of the feeder (users.csv has columns id, name)"),
            "{e}"
        );
        let e = RequestSpec::new(
            "http://{{id}}:1/",
            "GET",
            &[],
            vec![],
            Duration::from_secs(1),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not the scheme, host or port"), "{e}");
        let e = spec("http://127.0.0.1:1/", "X-A: {{id}}")
            .with_feed(None, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("header x-a line 1: placeholder {{id}} needs a --feeder"),
            "{e}"
        );
        let multiline = Feeder::from_csv("m.csv", b"v\nok\n\"two\nlines\"\n").unwrap();
        let e = spec("http://127.0.0.1:1/", "X-A: {{v}}")
            .with_feed(Some(multiline), None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "m.csv line 3: its values make an invalid value of header x-a"
        );
        // A template without placeholders is a plain body.
        let plain = spec("http://127.0.0.1:1/", "X-A: b")
            .with_feed(None, Some(("b.txt", "<ping/>")))
            .unwrap();
        assert!(plain.feed.is_none());
        assert_eq!(&plain.body[..], b"<ping/>");
    }

    #[test]
    fn only_local_targets_unless_allowed() {
        let local = RequestSpec::new(
            "http://127.0.0.1:1/",
            "GET",
            &[],
            vec![],
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(resolve_target(&local, false).unwrap().port(), 1);
        let v6 = RequestSpec::new(
            "http://[::1]:2/",
            "GET",
            &[],
            vec![],
            Duration::from_secs(1),
        )
        .unwrap();
        assert!(resolve_target(&v6, false).unwrap().ip().is_loopback());
        let public = RequestSpec::new(
            "http://192.0.2.1:80/",
            "GET",
            &[],
            vec![],
            Duration::from_secs(1),
        )
        .unwrap();
        let err = resolve_target(&public, false).unwrap_err().to_string();
        assert!(err.contains("--allow-public-target"), "{err}");
        assert!(resolve_target(&public, true).is_ok());
        assert!(is_local("10.1.2.3".parse().unwrap()));
        assert!(is_local("fd00::1".parse().unwrap()));
        assert!(!is_local("8.8.8.8".parse().unwrap()));
    }
}
