//! A body of one huge line or token, for every import format, streamed to a real
//! `harrier serve` over loopback: the answer is a 4xx naming the limit
//! (`limits.max_line_bytes`, `limits.max_document_bytes`), and the server's peak resident
//! memory (`VmHWM`) stays under [`PEAK_BOUND_KB`] whatever the line's length.
//!
//! The bodies are generated while they are sent, never held or written to disk. Two of
//! them are 3 GiB (a JTL with a 3 GiB field, plain; a k6 NDJSON line of 3 GiB, gzip); the
//! others are a few times the limit, which is what they meet (`HARRIER_BOUNDED_FULL=1`
//! sends 3 GiB for every one).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::server::start;

const MIB: u64 = 1 << 20;
const FULL: u64 = 3 << 30;
/// The server's peak resident memory may not pass this, kB (256 MB).
const PEAK_BOUND_KB: u64 = 256 * 1000;
/// The default limits (README `[limits]`).
const MAX_LINE: u64 = MIB;
const MAX_DOCUMENT: u64 = 64 * MIB;

/// One hostile body: `head`, then `fill` repeated `len` times, then `tail`.
struct Case {
    path: &'static str,
    head: String,
    fill: u8,
    len: u64,
    tail: &'static str,
    gzip: bool,
    status: u16,
    /// Each must be in the answer.
    says: Vec<String>,
}

/// Writes every `write` as one HTTP/1.1 chunk.
struct Chunked<W: Write>(W);

impl<W: Write> Write for Chunked<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        write!(self.0, "{:x}\r\n", buf.len())?;
        self.0.write_all(buf)?;
        self.0.write_all(b"\r\n")?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// One gzip member holding `bytes` (members in a row are one gzip stream).
fn gzip_member(bytes: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// Writes `case`'s body to `w` as it is generated, without HTTP chunk framing.
fn send_raw(w: impl Write, case: &Case) -> std::io::Result<u64> {
    send_framed(std::io::BufWriter::with_capacity(1 << 20, w), case)
}

/// Sends `case`'s body to `w` as it is generated; stops at the first write error (the
/// server may answer and close before the end). Returns the bytes put on the wire.
fn send_body(w: impl Write, case: &Case) -> std::io::Result<u64> {
    let mut out = Chunked(std::io::BufWriter::with_capacity(1 << 20, w));
    let wire = send_framed(&mut out, case)?;
    out.0.write_all(b"0\r\n\r\n")?;
    out.0.flush()?;
    Ok(wire)
}

/// Writes `case`'s body through `out`.
fn send_framed<W: Write>(mut out: W, case: &Case) -> std::io::Result<u64> {
    let block = vec![case.fill; MIB as usize];
    let mut wire = 0u64;
    let mut put = |out: &mut W, bytes: &[u8]| -> std::io::Result<()> {
        wire += bytes.len() as u64;
        out.write_all(bytes)
    };
    // gzip: one member per piece; the fill's member made once and sent again and again.
    let (head, block_bytes, tail) = if case.gzip {
        (
            gzip_member(case.head.as_bytes()),
            gzip_member(&block),
            gzip_member(case.tail.as_bytes()),
        )
    } else {
        (
            case.head.clone().into_bytes(),
            block,
            case.tail.as_bytes().to_vec(),
        )
    };
    put(&mut out, &head)?;
    let mut left = case.len;
    while left >= MIB {
        put(&mut out, &block_bytes)?;
        left -= MIB;
    }
    if left > 0 {
        let rest = vec![case.fill; left as usize];
        let rest = if case.gzip { gzip_member(&rest) } else { rest };
        put(&mut out, &rest)?;
    }
    put(&mut out, &tail)?;
    out.flush()?;
    Ok(wire)
}

/// Posts `case` to `addr`, sending and reading at once; (status, body).
fn post(addr: &str, case: &Case) -> (u16, String) {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {addr}\r\nTransfer-Encoding: chunked\r\nContent-Type: application/octet-stream\r\n",
        case.path
    );
    if case.gzip && case.path.starts_with("/write") {
        head.push_str("Content-Encoding: gzip\r\n");
    }
    head.push_str("\r\n");
    (&stream).write_all(head.as_bytes()).unwrap();
    let sender = {
        let stream = stream.try_clone().unwrap();
        // The sender may be cut off by the answer: its result is only for the log.
        std::thread::scope(|scope| {
            let sending = scope.spawn(|| send_body(&stream, case));
            let answer = read_answer(&stream);
            // Stops the sender if the server answered before the end of the body.
            let _ = stream.shutdown(Shutdown::Both);
            let sent = sending.join().unwrap();
            (answer, sent)
        })
    };
    let ((status, body), sent) = sender;
    eprintln!("  sent: {sent:?}");
    (status, body)
}

/// Reads one HTTP/1.1 answer: (status, body).
fn read_answer(stream: &TcpStream) -> (u16, String) {
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).expect("an answer");
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {line:?}"));
    let mut length = None;
    let mut chunked = false;
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let lower = l.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse::<usize>().ok();
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if let Some(n) = length {
        body.resize(n, 0);
        r.read_exact(&mut body).unwrap();
    } else if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            body.extend_from_slice(&chunk[..n]);
        }
    }
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// `VmHWM` of process `pid`, kB (`None` once it has exited).
fn try_peak_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `VmHWM` of the running process `pid`, kB.
fn peak_kb(pid: u32) -> u64 {
    try_peak_kb(pid).expect("VmHWM in /proc/PID/status")
}

fn import(format: &str) -> &'static str {
    Box::leak(format!("/api/v1/runs?format={format}&filename=huge.{format}").into_boxed_str())
}

/// Every case: each line format plain and gzip, each whole-file format plain (k6 summary
/// also gzip), the XML JTL, and line protocol on `/write`.
fn cases() -> Vec<Case> {
    let full = std::env::var("HARRIER_BOUNDED_FULL").is_ok_and(|v| v == "1");
    let line_len = if full { FULL } else { 4 * MAX_LINE };
    let doc_len = if full { FULL } else { MAX_DOCUMENT + 16 * MIB };
    let line_limit = || {
        vec![
            "limits.max_line_bytes".to_string(),
            format!("{MAX_LINE} bytes"),
        ]
    };
    let document_limit = || {
        vec![
            "limits.max_document_bytes".to_string(),
            format!("{MAX_DOCUMENT} bytes"),
        ]
    };
    let mut cases = Vec::new();
    // (format, head, tail, line number of the huge line)
    let lines: [(&str, &str, &str, u32); 10] = [
        (
            "jmeter-csv",
            "timeStamp,elapsed,label,responseCode,success\n1700000000000,100,",
            ",200,true\n",
            2,
        ),
        (
            "taurus",
            "timeStamp,elapsed,label,responseCode,success\n1700000000000,100,",
            ",200,true\n",
            2,
        ),
        (
            "gatling",
            "RUN\tsim\tsim\t1700000000000\t \t3.9.5\nREQUEST\t\t",
            "\n",
            2,
        ),
        (
            "k6-json",
            r#"{"type":"Point","metric":"http_req_duration","data":{"time":"2024-01-01T00:00:00Z","value":1,"tags":{"name":""#,
            "\"}}}\n",
            1,
        ),
        (
            "k6-csv",
            "metric_name,timestamp,metric_value,name\nhttp_req_duration,1700000000,12,",
            "\n",
            2,
        ),
        (
            "locust",
            "Type,Name,Request Count,Failure Count\nGET,",
            ",1,0\n",
            2,
        ),
        ("hey", "response-time,offset,status-code\n0.1,", ",200\n", 2),
        ("oha", "", "\n", 1),
        ("vegeta", r#"{"url":""#, "\"}\n", 1),
        (
            "ab",
            "This is ApacheBench, Version 2.3\nServer Software:",
            "\n",
            2,
        ),
    ];
    for (i, (format, head, tail, line)) in lines.into_iter().enumerate() {
        for gzip in [false, true] {
            let mut says = line_limit();
            says.push(format!("line {line}"));
            cases.push(Case {
                path: import(format),
                head: head.to_string(),
                fill: b'x',
                // The JTL plain and the k6 NDJSON gzip are 3 GiB whatever the mode.
                len: if (i == 0 && !gzip) || (i == 3 && gzip) {
                    FULL
                } else {
                    line_len
                },
                tail,
                gzip,
                status: 422,
                says,
            });
        }
    }
    let documents: [(&str, &str); 7] = [
        ("k6-summary", r#"{"root_group":{"name":""#),
        ("locust", r#"[{"name":""#),
        ("autocannon", r#"{"url":""#),
        ("artillery", r#"{"aggregate":{"counters":""#),
        ("siege", r#"{"transactions":""#),
        ("soapui", "Test Step,min,max,avg,last,cnt\n"),
        ("wrk", "Running 10s test @ http://127.0.0.1/\n"),
    ];
    for (i, (format, head)) in documents.into_iter().enumerate() {
        for gzip in [false, true] {
            if gzip && i > 0 {
                continue;
            }
            cases.push(Case {
                path: import(format),
                head: head.to_string(),
                fill: b'x',
                len: doc_len,
                tail: "\"}",
                gzip,
                status: 413,
                says: document_limit(),
            });
        }
    }
    let mut says = line_limit();
    says.push("line 3".into());
    cases.push(Case {
        path: import("jmeter-xml"),
        head: "<?xml version=\"1.0\"?>\n<testResults version=\"1.2\">\n<httpSample t=\"1\" lb=\""
            .into(),
        fill: b'x',
        len: line_len,
        tail: "\"/>\n</testResults>\n",
        gzip: false,
        status: 400,
        says,
    });
    // Line protocol: a body is at most 64 MiB; a line past max_line_bytes is a rejected line.
    let mut says = line_limit();
    says.push("line 1".into());
    for gzip in [false, true] {
        cases.push(Case {
            path: "/write?db=k6",
            head: "http_req_duration,testid=t,name=".into(),
            fill: b'x',
            len: 4 * MAX_LINE,
            tail: " value=12 1700000000000000000\nhttp_req_duration,testid=t,name=a value=12 1700000000000000000\n",
            gzip,
            status: 400,
            says: says.clone(),
        });
    }
    cases.push(Case {
        path: "/write?db=k6",
        head: "http_req_duration,testid=t,name=".into(),
        fill: b'x',
        len: if full { FULL } else { 80 * MIB },
        tail: "\n",
        gzip: false,
        status: 413,
        says: vec![format!("limit of {} bytes for one write", 64 * MIB)],
    });
    cases
}

#[test]
fn a_body_of_one_huge_line_or_token_is_refused_in_bounded_memory_for_every_format() {
    let dir = tempfile::tempdir().unwrap();
    // The ratio guard off: a gzip body must meet the line and document limits themselves.
    let (proc, base) = start(
        dir.path(),
        "self_scrape = false\n[limits]\nmax_gzip_ratio = 0\n",
        None,
    );
    let pid = proc.0.id();
    let addr = base.trim_start_matches("http://").to_string();
    eprintln!("server started: VmHWM {} kB", peak_kb(pid));
    let started = Instant::now();
    for case in cases() {
        let t = Instant::now();
        let (status, body) = post(&addr, &case);
        let peak = peak_kb(pid);
        eprintln!(
            "{} {} bytes{}: {status} in {:.1} s, VmHWM {peak} kB: {}",
            case.path,
            case.len,
            if case.gzip { " gzip" } else { "" },
            t.elapsed().as_secs_f64(),
            body.chars().take(300).collect::<String>()
        );
        assert_eq!(
            status, case.status,
            "{} gzip={}: {body}",
            case.path, case.gzip
        );
        for needle in &case.says {
            assert!(
                body.contains(needle.as_str()),
                "{} gzip={}: {needle:?} not in {body}",
                case.path,
                case.gzip
            );
        }
        assert!(
            peak < PEAK_BOUND_KB,
            "{} gzip={}: server peak RSS {peak} kB",
            case.path,
            case.gzip
        );
    }
    eprintln!("all cases in {:.1} s", started.elapsed().as_secs_f64());
    // The server is still up and stored nothing.
    let (status, body) = post(
        &addr,
        &Case {
            path: "/api/v1/runs?format=jmeter-csv&filename=ok.jtl",
            head: "timeStamp,elapsed,label,responseCode,success\n1700000000000,100,a,200,true\n"
                .into(),
            fill: b'x',
            len: 0,
            tail: "",
            gzip: false,
            status: 201,
            says: vec![],
        },
    );
    assert_eq!(status, 201, "{body}");
    let runs: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(runs["runs"][0]["samples"], 1, "{body}");
    let stream = TcpStream::connect(&addr).unwrap();
    write!(
        &stream,
        "GET /api/v1/runs HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let (status, body) = read_answer(&stream);
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = list["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    // The line-protocol writes' good lines made live run "t"; no import stored anything.
    assert!(names.contains(&"ok"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("huge")),
        "a refused import stored a run: {names:?}"
    );
}

/// `harrier import -` of a 3 GiB single-line JTL on standard input (and a gzip one of a
/// few times the limit): a clear error naming the line and the limit, in bounded memory.
#[test]
fn harrier_import_of_a_huge_line_fails_clearly_in_bounded_memory() {
    let full = std::env::var("HARRIER_BOUNDED_FULL").is_ok_and(|v| v == "1");
    let dir = tempfile::tempdir().unwrap();
    for (gzip, len) in [
        (false, FULL),
        (true, if full { FULL } else { 4 * MAX_LINE }),
    ] {
        let case = Case {
            path: "",
            head: "timeStamp,elapsed,label,responseCode,success\n1700000000000,100,".into(),
            fill: b'x',
            len,
            tail: ",200,true\n",
            gzip,
            status: 0,
            says: vec![],
        };
        let t = Instant::now();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_harrier"))
            .args(["import", "-", "--format", "jmeter-csv", "--db"])
            .arg(dir.path().join("h.db"))
            .current_dir(dir.path())
            .env_remove("HARRIER_CONFIG")
            .env_remove("HARRIER_SERVER")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let stdin = child.stdin.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (status, peak, err) = std::thread::scope(|scope| {
            // Raw bytes, not chunks: the chunk framing is HTTP's.
            scope.spawn(move || {
                let _ = send_raw(stdin, &case);
            });
            let reading = scope.spawn(move || {
                let mut err = String::new();
                let _ = stderr.read_to_string(&mut err);
                err
            });
            let mut peak = 0;
            let status = loop {
                if let Some(kb) = try_peak_kb(pid) {
                    peak = peak.max(kb);
                }
                if let Some(status) = child.try_wait().unwrap() {
                    break status;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(600),
                    "harrier import still running"
                );
                std::thread::sleep(Duration::from_millis(20));
            };
            (status, peak, reading.join().unwrap())
        });
        eprintln!(
            "harrier import - {len} bytes{}: {status} in {:.1} s, VmHWM {peak} kB: {err}",
            if gzip { " gzip" } else { "" },
            t.elapsed().as_secs_f64()
        );
        assert!(!status.success(), "{err}");
        assert!(
            err.contains("line 2") && err.contains("limits.max_line_bytes"),
            "{err}"
        );
        assert!(peak > 0 && peak < PEAK_BOUND_KB, "peak RSS {peak} kB");
    }
}
