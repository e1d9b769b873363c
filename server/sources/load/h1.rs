//! HTTP/1.1 exchanges of the load generator: one request written as ready-made bytes, one
//! response read and framed, on a kept-alive connection (TCP or TLS).
//!
//! Written here rather than through hyper's client connection because this loop is what
//! `harrier load` exists for and its cost per request is the generator's ceiling: hyper's
//! client hands each request to a separate connection task over a channel, gets the
//! response back over another, and streams the body through a third, three task wake-ups
//! per request; with one generator thread against nginx that held `harrier load` at
//! 0.74–0.83 × wrk's requests/s (bench/README "Load generator beside wrk"). Here the
//! connection's own task writes the request (one `write`, no header map: [`super::RequestSpec`]
//! renders the bytes once, or per request with a feeder) and reads the response into a
//! buffer reused for the connection's life, as wrk does. Parsing is not ours: the status
//! line and headers go through `httparse` (hyper's own parser) and chunk sizes through
//! `httparse::parse_chunk_size`; what is ours is the framing below. HTTP/2 stays on
//! hyper's client (its streams, flow control and HPACK are not worth repeating).
//!
//! Framing of the response body, RFC 9112 §6.3: none for a `HEAD` request and for 1xx,
//! 204 and 304; `Transfer-Encoding` ending in `chunked`: chunks (§7.1; trailers skipped);
//! else `Content-Length`; else to the end of the connection. Interim 1xx responses (other
//! than 101) are skipped. The connection is kept after the response unless the server says
//! `Connection: close`, answers with HTTP/1.0 without `Connection: keep-alive`, frames the
//! body by closing, or sends bytes beyond the response.

use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;
use tokio_util::either::Either;

/// A connection's byte stream: plain TCP or TLS over it.
pub(crate) type Stream = Either<TcpStream, TlsStream<TcpStream>>;

/// The read buffer's first size: enough for most responses in one read, small enough for
/// tens of thousands of connections.
const BUFFER_FIRST: usize = 8 * 1024;
/// Its largest size (a read that fills it doubles it up to this); a response head (status
/// line and headers) must fit in it.
const BUFFER: usize = 64 * 1024;
/// Headers a response may carry.
const MAX_HEADERS: usize = 128;
/// A connection idle for longer than this is checked for a close by the server (an idle
/// timeout) before a request goes out on it; busier ones are not (the check is a system
/// call, and a server that ends a connection while it is busy says `Connection: close`).
const IDLE_CHECK: Duration = Duration::from_millis(50);

/// How an exchange failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The request could not be written at all: the connection was already closed. Sending
    /// it on a new connection is safe.
    Unsent(std::io::Error),
    /// Reading or writing failed after (part of) the request went out.
    Io(std::io::Error),
    /// The connection ended before the response was complete.
    Incomplete,
    /// The response is not HTTP/1.x as RFC 9112 frames it.
    Protocol(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unsent(e) => write!(f, "the connection was closed before the request: {e}"),
            Failure::Io(e) => write!(f, "{e}"),
            Failure::Incomplete => f.write_str("the connection ended before the response did"),
            Failure::Protocol(why) => f.write_str(why),
        }
    }
}

impl Failure {
    /// The I/O error behind it, if any (to find a TLS alert in its causes).
    pub(crate) fn io(&self) -> Option<&std::io::Error> {
        match self {
            Failure::Unsent(e) | Failure::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// A failed exchange: why, and the status and bytes read before it failed (0 without).
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) failure: Failure,
    pub(crate) status: u16,
    pub(crate) bytes: u64,
}

/// A complete response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// Bytes read: status line, headers, body as framed on the wire.
    pub(crate) bytes: u64,
}

/// How the body is framed.
#[derive(Debug, Clone, Copy)]
enum Framing {
    None,
    Length(u64),
    Chunked,
    UntilClose,
}

/// One kept-alive HTTP/1.1 connection of a load run.
pub(crate) struct Connection {
    io: Stream,
    buf: Vec<u8>,
    /// Unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// When the last response ended (or the connection opened).
    last_used: Instant,
    /// Bytes taken from the buffer for the current response.
    taken: u64,
    /// The server will not take another request on it.
    done: bool,
}

impl Connection {
    pub(crate) fn new(io: Stream) -> Connection {
        Connection {
            io,
            buf: vec![0u8; BUFFER_FIRST],
            start: 0,
            end: 0,
            last_used: Instant::now(),
            taken: 0,
            done: false,
        }
    }

    /// Whether a request may go out on it at `now`: not when the server said it would
    /// close it, nor, after [`IDLE_CHECK`] without use, when the server has closed it or
    /// sent something unasked meanwhile (a `408` before closing). Never waits.
    pub(crate) fn usable(&mut self, now: Instant) -> bool {
        if self.done {
            return false;
        }
        if now.saturating_duration_since(self.last_used) < IDLE_CHECK {
            return true;
        }
        let mut cx = Context::from_waker(Waker::noop());
        let mut probe = ReadBuf::new(&mut self.buf[..]);
        match Pin::new(&mut self.io).poll_read(&mut cx, &mut probe) {
            Poll::Pending => true,
            // End of stream, bytes nobody asked for, or an error: not usable.
            Poll::Ready(_) => {
                self.done = true;
                false
            }
        }
    }

    /// Whether the server will take another request on it (after the last response).
    pub(crate) fn kept(&self) -> bool {
        !self.done
    }

    /// Writes `request` (a whole HTTP/1.1 request) and reads its response; the body is
    /// appended to `body` when given (for `--expect-body-contains`), else only counted.
    /// `head` says the request's method was `HEAD` (its response has no body).
    pub(crate) async fn exchange(
        &mut self,
        request: &[u8],
        head: bool,
        body: Option<&mut Vec<u8>>,
    ) -> Result<Answer, Failed> {
        self.taken = 0;
        self.write(request).await.map_err(|failure| Failed {
            failure,
            status: 0,
            bytes: 0,
        })?;
        let mut status = 0;
        let result = self.read_response(head, body, &mut status).await;
        self.last_used = Instant::now();
        match result {
            Ok(()) => {
                if self.start != self.end {
                    // Bytes beyond the response (nothing was pipelined): do not trust the
                    // connection with another request.
                    self.done = true;
                }
                self.start = 0;
                self.end = 0;
                Ok(Answer {
                    status,
                    bytes: self.taken,
                })
            }
            Err(failure) => {
                self.done = true;
                Err(Failed {
                    failure,
                    status,
                    bytes: self.taken,
                })
            }
        }
    }

    async fn write(&mut self, mut request: &[u8]) -> Result<(), Failure> {
        let mut written = 0usize;
        while !request.is_empty() {
            match self.io.write(request).await {
                Ok(0) => {
                    let e = std::io::Error::from(std::io::ErrorKind::WriteZero);
                    return Err(if written == 0 {
                        Failure::Unsent(e)
                    } else {
                        Failure::Io(e)
                    });
                }
                Ok(n) => {
                    written += n;
                    request = &request[n..];
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if written == 0 => return Err(Failure::Unsent(e)),
                Err(e) => return Err(Failure::Io(e)),
            }
        }
        // TLS holds records until flushed; TCP's flush does nothing.
        self.io.flush().await.map_err(Failure::Io)
    }

    /// Reads more bytes into the buffer (making room first); `false` at the end of the
    /// stream.
    async fn fill(&mut self) -> Result<bool, Failure> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.buf.len() < BUFFER {
                self.buf.resize((self.buf.len() * 2).min(BUFFER), 0);
            } else {
                return Err(Failure::Protocol(format!(
                    "a response head or chunk-size line longer than {} KiB",
                    BUFFER / 1024
                )));
            }
        }
        let room = self.buf.len() - self.end;
        let n = self
            .io
            .read(&mut self.buf[self.end..])
            .await
            .map_err(Failure::Io)?;
        self.end += n;
        // A read that filled all the room: big responses come in bigger reads.
        if n == room && self.buf.len() < BUFFER {
            let len = (self.buf.len() * 2).min(BUFFER);
            self.buf.resize(len, 0);
        }
        Ok(n > 0)
    }

    /// Takes `n` buffered bytes (counted as read).
    fn take(&mut self, n: usize) -> &[u8] {
        let from = self.start;
        self.start += n;
        self.taken += n as u64;
        &self.buf[from..from + n]
    }

    async fn read_response(
        &mut self,
        head: bool,
        mut body: Option<&mut Vec<u8>>,
        status: &mut u16,
    ) -> Result<(), Failure> {
        let framing = loop {
            let parsed = {
                // Uninitialised: a response is parsed per request, and zeroing the
                // headers array would cost more than parsing a short head.
                let mut headers = [const { MaybeUninit::uninit() }; MAX_HEADERS];
                let mut response = httparse::Response::new(&mut []);
                match httparse::ParserConfig::default().parse_response_with_uninit_headers(
                    &mut response,
                    &self.buf[self.start..self.end],
                    &mut headers,
                ) {
                    Ok(httparse::Status::Complete(len)) => Some((len, read_head(&response)?)),
                    Ok(httparse::Status::Partial) => None,
                    Err(e) => {
                        return Err(Failure::Protocol(format!(
                            "the response is not HTTP/1.1: {e}"
                        )));
                    }
                }
            };
            let Some((len, head_info)) = parsed else {
                if !self.fill().await? {
                    return Err(if self.taken == 0 && self.start == self.end {
                        Failure::Incomplete
                    } else {
                        Failure::Protocol("the connection ended inside the response head".into())
                    });
                }
                continue;
            };
            self.take(len);
            *status = head_info.status;
            match head_info.status {
                101 => {
                    return Err(Failure::Protocol(
                        "the server switched protocols (101)".into(),
                    ));
                }
                100..=199 => continue,
                _ => {}
            }
            if !head_info.keep_alive {
                self.done = true;
            }
            break if head || matches!(head_info.status, 204 | 304) {
                Framing::None
            } else {
                head_info.framing
            };
        };
        match framing {
            Framing::None => Ok(()),
            Framing::Length(n) => self.read_body(n, body.as_deref_mut(), false).await,
            Framing::UntilClose => {
                self.done = true;
                self.read_body(u64::MAX, body.as_deref_mut(), true).await
            }
            Framing::Chunked => loop {
                let size = loop {
                    match httparse::parse_chunk_size(&self.buf[self.start..self.end]) {
                        Ok(httparse::Status::Complete((len, size))) => {
                            self.take(len);
                            break size;
                        }
                        Ok(httparse::Status::Partial) => {
                            if !self.fill().await? {
                                return Err(Failure::Incomplete);
                            }
                        }
                        Err(_) => {
                            return Err(Failure::Protocol("a chunk size is not hex".into()));
                        }
                    }
                };
                if size == 0 {
                    return self.skip_trailers().await;
                }
                self.read_body(size, body.as_deref_mut(), false).await?;
                self.expect_crlf().await?;
            },
        }
    }

    /// Reads `n` body bytes (to the end of the stream when `until_close`).
    async fn read_body(
        &mut self,
        mut n: u64,
        mut body: Option<&mut Vec<u8>>,
        until_close: bool,
    ) -> Result<(), Failure> {
        while n > 0 {
            if self.start == self.end && !self.fill().await? {
                return if until_close {
                    Ok(())
                } else {
                    Err(Failure::Incomplete)
                };
            }
            let k = (self.end - self.start).min(usize::try_from(n).unwrap_or(usize::MAX));
            let data = self.take(k);
            if let Some(b) = body.as_deref_mut() {
                b.extend_from_slice(data);
            }
            n -= k as u64;
        }
        Ok(())
    }

    async fn expect_crlf(&mut self) -> Result<(), Failure> {
        while self.end - self.start < 2 {
            if !self.fill().await? {
                return Err(Failure::Incomplete);
            }
        }
        if self.take(2) != b"\r\n" {
            return Err(Failure::Protocol("a chunk does not end in CRLF".into()));
        }
        Ok(())
    }

    /// The trailer section after the last chunk, up to its empty line.
    async fn skip_trailers(&mut self) -> Result<(), Failure> {
        loop {
            match self.buf[self.start..self.end]
                .windows(2)
                .position(|w| w == b"\r\n")
            {
                Some(0) => {
                    self.take(2);
                    return Ok(());
                }
                Some(i) => {
                    self.take(i + 2);
                }
                None => {
                    if !self.fill().await? {
                        return Err(Failure::Incomplete);
                    }
                }
            }
        }
    }
}

/// What a response head says about the rest.
struct Head {
    status: u16,
    framing: Framing,
    keep_alive: bool,
}

fn read_head(response: &httparse::Response<'_, '_>) -> Result<Head, Failure> {
    let status = response.code.unwrap_or(0);
    let http10 = response.version == Some(0);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut encoded = false;
    let (mut close, mut keep) = (false, false);
    for h in response.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    Failure::Protocol(format!(
                        "Content-Length {:?} is not a number",
                        String::from_utf8_lossy(h.value)
                    ))
                })?;
            if length.is_some_and(|l| l != v) {
                return Err(Failure::Protocol(
                    "two different Content-Length values".into(),
                ));
            }
            length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            encoded = true;
            // Chunked must be the last coding (RFC 9112 §6.3, item 4).
            chunked = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                close |= token.eq_ignore_ascii_case(b"close");
                keep |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    let framing = match (encoded, chunked, length) {
        (true, true, _) => Framing::Chunked,
        (true, false, _) => Framing::UntilClose,
        (false, _, Some(n)) => Framing::Length(n),
        (false, _, None) => Framing::UntilClose,
    };
    Ok(Head {
        status,
        framing,
        keep_alive: !close && (!http10 || keep),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    /// A server on 127.0.0.1 that answers each request it reads (up to the blank line;
    /// requests carry no body here) with the next of `answers`, then closes.
    async fn serve(
        answers: Vec<&'static [u8]>,
    ) -> (std::net::SocketAddr, tokio::task::JoinHandle<usize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut served = 0;
            let mut pending = Vec::new();
            for answer in answers {
                loop {
                    if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..i + 4);
                        break;
                    }
                    let mut b = [0u8; 1024];
                    let n = s.read(&mut b).await.unwrap();
                    if n == 0 {
                        return served;
                    }
                    pending.extend_from_slice(&b[..n]);
                }
                // Byte by byte for the first answer: framing must not depend on read sizes.
                if served == 0 {
                    for byte in answer {
                        s.write_all(std::slice::from_ref(byte)).await.unwrap();
                        s.flush().await.unwrap();
                    }
                } else {
                    s.write_all(answer).await.unwrap();
                }
                served += 1;
            }
            served
        });
        (addr, task)
    }

    async fn connect(addr: std::net::SocketAddr) -> Connection {
        Connection::new(Either::Left(TcpStream::connect(addr).await.unwrap()))
    }

    const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";

    #[tokio::test]
    async fn frames_length_chunked_interim_and_bodiless_responses_on_one_connection() {
        let chunked: &[u8] =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=1\r\nWiki\r\n5\r\npedia\r\n0\r\nT: 1\r\n\r\n";
        let interim: &[u8] =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\ncontent-length: 3\r\n\r\nno!";
        let (addr, server) = serve(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            chunked,
            interim,
            b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n",
        ])
        .await;
        let mut c = connect(addr).await;
        let mut body = Vec::new();
        let a = c.exchange(GET, false, Some(&mut body)).await.unwrap();
        assert_eq!(
            (a.status, a.bytes, body.as_slice()),
            (200, 43, &b"hello"[..])
        );
        body.clear();
        let a = c.exchange(GET, false, Some(&mut body)).await.unwrap();
        assert_eq!(
            (a.status, a.bytes, body.as_slice()),
            (200, chunked.len() as u64, &b"Wikipedia"[..])
        );
        let a = c.exchange(GET, false, None).await.unwrap();
        assert_eq!((a.status, a.bytes), (404, interim.len() as u64));
        // 204 has no body whatever its Content-Length says, nor has a HEAD's response.
        let a = c.exchange(GET, false, None).await.unwrap();
        assert_eq!(a.status, 204);
        let a = c.exchange(GET, true, None).await.unwrap();
        assert_eq!((a.status, a.bytes), (200, 38));
        assert!(c.usable(Instant::now()));
        assert_eq!(server.await.unwrap(), 5);
    }

    #[tokio::test]
    async fn big_heads_and_bodies_are_read_and_a_head_beyond_the_buffer_is_refused() {
        let header = "x".repeat(20_000);
        let body = "b".repeat(300_000);
        let big: &'static [u8] = format!(
            "HTTP/1.1 200 OK\r\nX-Big: {header}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
        .leak();
        let huge: &'static [u8] = format!(
            "HTTP/1.1 200 OK\r\nX-Huge: {}\r\nContent-Length: 0\r\n\r\n",
            "h".repeat(BUFFER)
        )
        .into_bytes()
        .leak();
        let (addr, _server) = serve(vec![b"HTTP/1.1 204 No Content\r\n\r\n", big, huge]).await;
        let mut c = connect(addr).await;
        assert_eq!(c.exchange(GET, false, None).await.unwrap().status, 204);
        let mut got = Vec::new();
        let a = c.exchange(GET, false, Some(&mut got)).await.unwrap();
        assert_eq!((a.status, a.bytes), (200, big.len() as u64));
        assert_eq!(got.len(), body.len());
        assert!(c.buf.len() <= BUFFER);
        let e = c.exchange(GET, false, None).await.unwrap_err();
        assert!(
            e.failure.to_string().contains("longer than 64 KiB"),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn a_closed_or_truncated_connection_is_reported_and_not_reused() {
        // Connection: close, then the server is gone.
        let (addr, _server) = serve(vec![
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        ])
        .await;
        let mut c = connect(addr).await;
        assert_eq!(c.exchange(GET, false, None).await.unwrap().status, 200);
        assert!(!c.usable(Instant::now()), "the server said close");

        // A body shorter than its Content-Length.
        let (addr, _server) =
            serve(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"]).await;
        let mut c = connect(addr).await;
        let e = c.exchange(GET, false, None).await.unwrap_err();
        assert!(matches!(e.failure, Failure::Incomplete), "{e:?}");
        assert_eq!((e.status, e.bytes), (200, 43));

        // No framing: the body runs to the end of the connection.
        let (addr, _server) = serve(vec![b"HTTP/1.0 200 OK\r\n\r\nto the end"]).await;
        let mut c = connect(addr).await;
        let mut body = Vec::new();
        let a = c.exchange(GET, false, Some(&mut body)).await.unwrap();
        assert_eq!((a.status, body.as_slice()), (200, &b"to the end"[..]));
        assert!(!c.usable(Instant::now()));

        // Not HTTP at all.
        let (addr, _server) = serve(vec![b"SSH-2.0-OpenSSH\r\n\r\n"]).await;
        let mut c = connect(addr).await;
        let e = c.exchange(GET, false, None).await.unwrap_err();
        assert!(matches!(e.failure, Failure::Protocol(_)), "{e:?}");

        // The server closed an idle connection: found before the next request.
        let (addr, server) = serve(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]).await;
        let mut c = connect(addr).await;
        assert_eq!(c.exchange(GET, false, None).await.unwrap().status, 200);
        assert_eq!(server.await.unwrap(), 1);
        tokio::time::sleep(IDLE_CHECK * 2).await;
        assert!(!c.usable(Instant::now()), "closed while idle");
    }
}
