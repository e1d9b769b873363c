//! Real tool outputs (generated with JMeter 2.13 and ab 2.3 against a loopback server,
//! see `tests/fixtures/*/SOURCE.md`) parsed end to end.
//!
//! Expected figures were computed independently of harrier with Python's `csv` and
//! `xml.etree` modules over the same files (nearest rank, transaction rows — responseMessage
//! starting "Number of samples in transaction" — left out of run totals), and for ab read
//! off the report text.

use std::io::{BufReader, Cursor, Write};
use std::path::{Path, PathBuf};

use harrier::domain::runs::{RunData, Stats};
use harrier::sources::ingest::{self, Format, IngestError, ParsedRun};

#[path = "it/skip.rs"]
mod skip;
use skip::{Kind, skip};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

fn read(rel: &str) -> Vec<u8> {
    std::fs::read(fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn parse_bytes(bytes: &[u8], format: Format) -> Result<Vec<ParsedRun>, IngestError> {
    ingest::parse(Cursor::new(bytes), format, "test input")
}

fn parse_jmeter(rel: &str) -> RunData {
    let file = std::fs::File::open(fixture(rel)).expect("fixture");
    let mut runs =
        ingest::parse(BufReader::new(file), Format::Auto, rel).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].tool, "jmeter");
    runs.remove(0).data
}

/// count, errors, min, max, sum of elapsed, p50, p90, p95, p99 (ms).
type Figures = (u64, u64, f64, f64, f64, f64, f64, f64, f64);

fn figures(s: &Stats) -> Figures {
    let sum = s.mean_ms.expect("mean") * s.count as f64;
    (
        s.count,
        s.errors,
        s.min_ms.unwrap(),
        s.max_ms.unwrap(),
        sum.round(),
        s.p50_ms.unwrap(),
        s.p90_ms.unwrap(),
        s.p95_ms.unwrap(),
        s.p99_ms.unwrap(),
    )
}

fn label_counts(run: &RunData) -> Vec<(&str, bool, u64, u64)> {
    run.labels
        .iter()
        .map(|l| {
            (
                l.label.as_str(),
                l.is_transaction,
                l.stats.count,
                l.stats.errors,
            )
        })
        .collect()
}

#[test]
fn jmeter_2_13_default_headerless_csv() {
    let run = parse_jmeter("jmeter/default_props_2.13.jtl");
    assert_eq!(run.rejected_rows, 0);
    // 90 rows: 54 requests, 18 rows of "TX checkout, step 1" (parent mode: its requests
    // are written nowhere else, so it counts) and 18 of "TX browse" (classic mode: it
    // repeats the request rows before it, so it stays out of the totals). Figures computed
    // independently with Python's csv module over the 72 counted rows.
    assert_eq!(
        figures(&run.overall),
        (72, 46, 5.0, 1016.0, 10705.0, 57.0, 212.0, 1005.0, 1016.0)
    );
    assert_eq!(run.overall.first_start_ms, Some(1_795_999_948_116));
    assert_eq!(run.overall.last_end_ms, Some(1_795_999_952_083));
    assert_eq!(run.overall.bytes_received, 324_051);
    assert_eq!(
        label_counts(&run),
        [
            ("GET /notfound", false, 18, 18),
            ("GET /stall", false, 18, 5),
            ("GET /big (assert text)", false, 18, 18),
            ("TX browse", true, 18, 18),
            ("TX checkout, step 1", false, 18, 5),
        ]
    );
    let stall = &run.labels[1].stats;
    assert_eq!(
        (stall.min_ms, stall.max_ms, stall.p90_ms),
        (Some(24.0), Some(1016.0), Some(1009.0))
    );
    // Run-level seconds: (start, requests, highest allThreads), requests only.
    let seconds: Vec<(i64, u64, Option<u32>)> = run
        .buckets
        .iter()
        .filter(|b| b.label.is_none())
        .map(|b| (b.start_ms, b.count, b.active_users))
        .collect();
    assert_eq!(
        seconds.iter().map(|s| (s.0, s.2)).collect::<Vec<_>>(),
        [
            (1_795_999_948_000, Some(3)),
            (1_795_999_949_000, Some(3)),
            (1_795_999_950_000, Some(3)),
            (1_795_999_951_000, Some(3)),
        ]
    );
    assert_eq!(
        seconds.iter().map(|s| s.1).collect::<Vec<_>>(),
        [23, 13, 13, 23]
    );
}

#[test]
fn jmeter_csv_with_header_and_all_columns() {
    let run = parse_jmeter("jmeter/csv_header_allcols.jtl");
    assert_eq!(run.rejected_rows, 0);
    assert_eq!(
        figures(&run.overall),
        (72, 45, 1.0, 1007.0, 11082.0, 56.0, 236.0, 1002.0, 1007.0)
    );
    let checkout = run
        .labels
        .iter()
        .find(|l| l.label == "TX checkout, step 1")
        .unwrap();
    assert!(
        !checkout.is_transaction,
        "parent mode: counted in the totals"
    );
    let browse = run.labels.iter().find(|l| l.label == "TX browse").unwrap();
    assert!(
        browse.is_transaction,
        "classic mode: left out of the totals"
    );
    assert_eq!((checkout.stats.count, checkout.stats.errors), (18, 4));
    let big = run
        .errors
        .iter()
        .find(|e| e.label == "GET /big (assert text)")
        .unwrap();
    assert_eq!(
        big.message,
        "Test failed: text expected to contain /ok, \"really\"/"
    );
    assert_eq!(big.count, 18);
}

#[test]
fn jmeter_csv_tab_delimited_with_formatted_timestamps_read_as_utc() {
    let run = parse_jmeter("jmeter/csv_datefmt_tab.jtl");
    assert_eq!(run.rejected_rows, 0);
    assert_eq!(
        figures(&run.overall),
        (72, 44, 3.0, 1006.0, 9393.0, 58.0, 223.0, 259.0, 1006.0)
    );
    // "2026/11/30 00:52:44.396" read as UTC.
    assert_eq!(run.overall.first_start_ms, Some(1_795_999_964_396));
    assert_eq!(run.overall.last_end_ms, Some(1_795_999_968_687));
    assert_eq!(run.overall.window_ms, Some(4291));
}

#[test]
fn jmeter_xml_top_level_samples_only() {
    let run = parse_jmeter("jmeter/results_xml.jtl");
    assert_eq!(run.rejected_rows, 0);
    // 90 top-level elements: 54 requests, 18 "TX checkout, step 1" parents with their 36
    // requests nested inside (sub-results, not samples; the parent counts) and 18 classic
    // "TX browse" rows (left out of totals). Checked with Python's xml.etree.
    let total: u64 = run.labels.iter().map(|l| l.stats.count).sum();
    assert_eq!(total, 90);
    assert_eq!(run.overall.count, 72);
    assert_eq!(run.overall.errors, 50);
    assert_eq!(
        (run.overall.min_ms, run.overall.max_ms),
        (Some(6.0), Some(1018.0))
    );
    assert_eq!(
        run.overall.mean_ms.map(|m| (m * 72.0).round()),
        Some(12927.0)
    );
    assert_eq!(
        (run.overall.p50_ms, run.overall.p99_ms),
        (Some(55.0), Some(1018.0))
    );
    assert_eq!(run.overall.first_start_ms, Some(1_795_999_971_356));
    assert_eq!(run.overall.last_end_ms, Some(1_795_999_976_391));
    assert_eq!(run.overall.bytes_received, 329_313);
    assert!(
        run.labels
            .iter()
            .all(|l| !l.label.starts_with("GET /slow") && !l.label.starts_with("GET /flaky"))
    );
    let big = run
        .errors
        .iter()
        .find(|e| e.label == "GET /big (assert text)")
        .unwrap();
    assert_eq!(
        big.message,
        "Test failed: text expected to contain /ok, \"really\"/"
    );
    assert_eq!(big.count, 18);
}

#[test]
fn jmeter_xml_cut_off_keeps_complete_samples_and_rejects_the_open_one() {
    let text = String::from_utf8(read("jmeter/results_xml.jtl")).unwrap();
    // Lines 3–5, 6–8 and 9–11 are the first three samples; stop after line 10.
    let cut: String = text.split_inclusive('\n').take(10).collect();
    let runs = parse_bytes(cut.as_bytes(), Format::Auto).unwrap();
    let run = &runs[0].data;
    assert_eq!(run.overall.count, 2);
    assert_eq!(run.rejected_rows, 1);
    assert_eq!(run.rejected[0].line, 9);
    assert!(
        run.rejected[0].reason.contains("<httpSample> not closed"),
        "{}",
        run.rejected[0].reason
    );

    // Cut in the middle of a start tag.
    let mut cut: String = text.split_inclusive('\n').take(11).collect();
    cut.push_str("<httpSample t=\"7\" it=\"0\" lt=");
    let runs = parse_bytes(cut.as_bytes(), Format::JmeterXml).unwrap();
    assert_eq!(runs[0].data.overall.count, 3);
    assert_eq!(runs[0].data.rejected_rows, 1);
    assert_eq!(runs[0].data.rejected[0].line, 12);
}

#[test]
fn jmeter_xml_skips_response_bodies_and_reads_assertion_messages() {
    let body = "x&lt;y ".repeat(200_000);
    let xml = format!(
        "<?xml version=\"1.0\"?>\n<testResults version=\"1.2\">\n\
         <httpSample t=\"12\" ts=\"1700000000000\" s=\"false\" lb=\"A &amp; B\" rs=\"500\" rm=\"Oops\" by=\"10\" sby=\"2\" na=\"4\">\n\
         <responseData class=\"java.lang.String\">{body}</responseData>\n\
         <assertionResult><name>ok</name><failure>false</failure><error>false</error></assertionResult>\n\
         <assertionResult><name>n</name><failure>true</failure><error>false</error>\
         <failureMessage>expected &quot;x&quot; &#x2192; got y</failureMessage></assertionResult>\n\
         <httpSample t=\"5\" ts=\"1700000000001\" s=\"true\" lb=\"child\" rc=\"200\"/>\n\
         </httpSample>\n<sample t=\"-1\" ts=\"1700000000000\" s=\"true\" lb=\"bad\"/>\n</testResults>\n"
    );
    let runs = parse_bytes(xml.as_bytes(), Format::Auto).unwrap();
    let run = &runs[0].data;
    assert_eq!(run.labels.len(), 1);
    assert_eq!(run.labels[0].label, "A & B");
    assert_eq!(run.errors[0].response_code, "500");
    assert_eq!(run.errors[0].message, "expected \"x\" → got y");
    assert_eq!(
        (run.overall.bytes_received, run.overall.bytes_sent),
        (10, 2)
    );
    assert_eq!(run.buckets[0].active_users, Some(4));
    assert_eq!(run.rejected_rows, 1);
    assert_eq!(run.rejected[0].line, 9);
    assert_eq!(
        run.rejected[0].reason,
        "t=\"-1\" is not a whole, non-negative number of ms"
    );
}

fn parse_ab(rel: &str) -> ParsedRun {
    let mut runs = parse_bytes(&read(rel), Format::Auto).unwrap();
    assert_eq!(runs.len(), 1);
    runs.remove(0)
}

/// Issue 12: ab's headline errors are Connect + Receive + Exceptions + Non-2xx; its Length
/// failures (body length unlike the first response's) are shown apart, not counted. Real
/// ab 2.3 runs from `error-rule/SOURCE.md`, and ab 2.0's layout (no `Receive`) written by
/// hand from the same report.
#[test]
fn ab_length_failures_are_not_errors_and_non_2xx_are() {
    let mostly500 = parse_ab("error-rule/ab_mostly500_stdout.txt");
    let o = &mostly500.data.overall;
    // "Failed requests: 0", "Non-2xx responses: 875".
    assert_eq!((o.count, o.errors, o.error_pct), (1000, 875, Some(87.5)));

    for (file, receive) in [
        ("error-rule/ab_dynamic_stdout.txt", Some(0)),
        ("error-rule/HANDWRITTEN_ab20_dynamic_stdout.txt", None),
    ] {
        let run = parse_ab(file);
        let o = &run.data.overall;
        // Every status 200; "Failed requests: 800", all Length.
        assert_eq!(
            (o.count, o.errors, o.error_pct),
            (1000, 0, Some(0.0)),
            "{file}"
        );
        let r = &run.data.reported;
        assert_eq!(r["failed_requests"], 800, "{file}");
        assert_eq!(r["failed_breakdown"]["length"], 800, "{file}");
        assert_eq!(r["failed_breakdown"]["receive"].as_u64(), receive, "{file}");
        assert_eq!(r["length_failures"]["count"], 800, "{file}");
        assert_eq!(
            r["length_failures"]["note"],
            "body length differed from the first response's — normal for dynamic pages; not counted as errors"
        );
    }
}

#[test]
fn ab_reports_as_printed() {
    let slow = parse_ab("ab/slow_stdout.txt");
    assert_eq!(slow.tool, "ab");
    assert_eq!(slow.name_hint.as_deref(), Some("127.0.0.1:8099/slow"));
    let o = &slow.data.overall;
    assert!(slow.data.summary_only);
    assert_eq!((o.count, o.errors, o.error_pct), (300, 0, Some(0.0)));
    assert_eq!(
        (o.min_ms, o.mean_ms, o.max_ms),
        (Some(22.0), Some(81.0), Some(160.0))
    );
    assert_eq!(
        (o.p50_ms, o.p90_ms, o.p95_ms, o.p99_ms),
        (Some(81.0), Some(123.0), Some(130.0), Some(147.0))
    );
    assert_eq!((o.window_ms, o.throughput_rps), (Some(4172), Some(71.91)));
    assert_eq!(o.bytes_received, 45_600);
    assert_eq!(slow.data.reported["percentiles"]["values_ms"]["66"], 96);
    assert_eq!(
        slow.data.reported["connection_times_ms"]["connect"]["sd"],
        0.5
    );
    assert_eq!(slow.data.labels[0].label, "/slow");

    // The 103 Length failures are the 103 HTTP 500s' short bodies: errors are the 103
    // Non-2xx responses; Length is shown apart, not counted again.
    let flaky = parse_ab("ab/flaky_keepalive_stdout.txt");
    let o = &flaky.data.overall;
    assert_eq!((o.count, o.errors), (400, 103));
    let r = &flaky.data.reported;
    assert_eq!(r["failed_breakdown"]["length"], 103);
    assert_eq!(r["length_failures"]["count"], 103);
    assert!(
        r["length_failures"]["note"]
            .as_str()
            .is_some_and(|n| n.contains("not counted as errors")),
        "{r}"
    );
    assert_eq!(
        (r["errors_min"].as_u64(), r["errors_max"].as_u64()),
        (Some(103), Some(103))
    );
    assert_eq!(r["keep_alive_requests"], 400);

    let error = parse_ab("ab/error_stdout.txt");
    assert_eq!(
        (error.data.overall.count, error.data.overall.errors),
        (200, 200)
    );
    assert_eq!(error.data.overall.error_pct, Some(100.0));

    let post = parse_ab("ab/post_stdout.txt");
    assert_eq!(post.data.overall.bytes_sent, 28_200);
    assert_eq!(
        post.data.reported["transfer_rate_kbytes_per_s"]["sent"],
        152.16
    );
    assert_eq!(post.data.reported["document_length_bytes"], 15);
}

#[test]
fn several_ab_reports_in_one_file_are_several_runs_in_order() {
    let mut nohup = b"nohup: ignoring input\n".to_vec();
    nohup.extend(read("ab/slow_stdout.txt"));
    nohup.extend(read("ab/flaky_keepalive_stdout.txt"));
    let runs = parse_bytes(&nohup, Format::Auto).unwrap();
    let hints: Vec<_> = runs.iter().map(|r| r.name_hint.as_deref()).collect();
    assert_eq!(
        hints,
        [Some("127.0.0.1:8099/slow"), Some("127.0.0.1:8099/flaky")]
    );
    assert_eq!(runs[0].data.overall.count, 300);
    assert_eq!(runs[1].data.overall.count, 400);
}

#[test]
fn gzip_input_is_unwrapped() {
    let plain = read("jmeter/default_props_2.13.jtl");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).unwrap();
    let gz = gz.finish().unwrap();
    assert_eq!(&gz[..2], b"\x1f\x8b");
    let runs = parse_bytes(&gz, Format::Auto).unwrap();
    assert_eq!(
        figures(&runs[0].data.overall),
        (72, 46, 5.0, 1016.0, 10705.0, 57.0, 212.0, 1005.0, 1016.0)
    );
    assert_eq!(runs[0].data.labels.len(), 5);
}

#[test]
fn bom_and_crlf_do_not_change_anything() {
    let plain = read("edge-cases/EC13/input.jtl");
    let mut dos = b"\xEF\xBB\xBF".to_vec();
    dos.extend(
        String::from_utf8(plain.clone())
            .unwrap()
            .replace('\n', "\r\n")
            .into_bytes(),
    );
    let a = parse_bytes(&plain, Format::Auto).unwrap();
    let b = parse_bytes(&dos, Format::JmeterCsv).unwrap();
    assert_eq!(a[0].data.overall, b[0].data.overall);
    assert_eq!(b[0].data.labels[0].label, "ten");
    assert_eq!(b[0].data.overall.count, 17);
}

#[test]
fn unreadable_inputs_are_errors_that_say_why() {
    let err = parse_bytes(b"hello\nworld\n", Format::Auto).unwrap_err();
    assert!(matches!(err, IngestError::UnknownFormat { .. }), "{err}");
    assert!(err.to_string().contains("ApacheBench"), "{err}");

    // A JTL header, then only damaged rows: nothing readable.
    let err = parse_bytes(
        b"timeStamp,elapsed,label,success\n1,x,a,true\n2,3,a,yes\n",
        Format::Auto,
    )
    .unwrap_err();
    match err {
        IngestError::Invalid { line, message, .. } => {
            assert_eq!(line, 2);
            assert!(message.contains("2 rows rejected"), "{message}");
        }
        other => panic!("{other}"),
    }

    let err = parse_bytes(b"not xml at all\n", Format::JmeterXml).unwrap_err();
    assert!(matches!(err, IngestError::Invalid { line: 1, .. }), "{err}");
    let err = parse_bytes(b"not, a, jtl\n", Format::JmeterCsv).unwrap_err();
    assert!(matches!(err, IngestError::Invalid { line: 1, .. }), "{err}");
    let err = parse_bytes(
        b"Benchmarking 127.0.0.1 (be patient)\napr_socket_recv: Connection reset by peer (104)\n",
        Format::Auto,
    )
    .unwrap_err();
    assert!(err.to_string().contains("no results"), "{err}");
}

/// JMeter's own dashboard test data: `HTMLReportTestFile.csv` and the `statistics.json`
/// JMeter's test expects from it (apache/jmeter, see shared/fixtures/public). Read from
/// `../shared` when present; never copied into this repository.
///
/// Percentiles are not compared: JMeter's dashboard computes them with a different rule
/// (Apache Commons Math's estimator, interpolating between values — e.g. `pct2ResTime`
/// 339.35 is not a sample value), while harrier uses nearest rank on the exact values.
#[test]
fn jmeter_dashboard_statistics_round_trip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/public/jmeter/apache_jmeter_fixtures");
    if !dir.is_dir() {
        skip(
            Kind::Shared,
            "../shared/fixtures/public is not beside the checkout",
        );
        return;
    }
    let csv = std::fs::read(dir.join("HTMLReportTestFile.csv")).unwrap();
    let expected: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("HTMLReportExpect.statistics.json")).unwrap(),
    )
    .unwrap();
    let runs = parse_bytes(&csv, Format::Auto).unwrap();
    let run = &runs[0].data;
    assert_eq!(run.rejected_rows, 0);
    let mut scopes: Vec<(&str, &Stats)> = run
        .labels
        .iter()
        .map(|l| (l.label.as_str(), &l.stats))
        .collect();
    scopes.push(("Total", &run.overall));
    assert_eq!(scopes.len(), expected.as_object().unwrap().len());
    for (name, s) in scopes {
        let e = &expected[name];
        assert_eq!(Some(s.count), e["sampleCount"].as_u64(), "{name} count");
        assert_eq!(Some(s.errors), e["errorCount"].as_u64(), "{name} errors");
        assert_eq!(s.min_ms, e["minResTime"].as_f64(), "{name} min");
        assert_eq!(s.max_ms, e["maxResTime"].as_f64(), "{name} max");
        let close = |a: Option<f64>, b: Option<f64>| {
            (a.unwrap() - b.unwrap()).abs() <= 1e-9 * b.unwrap().abs()
        };
        assert!(
            close(s.mean_ms, e["meanResTime"].as_f64()),
            "{name} mean {:?}",
            s.mean_ms
        );
        assert!(
            close(s.throughput_rps, e["throughput"].as_f64()),
            "{name} throughput {:?}",
            s.throughput_rps
        );
    }
}

/// The README's real JMeter 2.13 run without its header line: 16 columns, which JMeter 5.x
/// also writes (without failureMessage, with sentBytes). Every typed column must fit, so
/// failureMessage is not read as bytes (which once rejected every failed row).
#[test]
fn headerless_16_column_files_pick_the_layout_that_fits() {
    let with_header = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/checkout-ramp.jtl"
    ))
    .unwrap();
    let body_start = with_header.iter().position(|b| *b == b'\n').unwrap() + 1;
    let exact = parse_bytes(&with_header, Format::Auto)
        .unwrap()
        .remove(0)
        .data;
    let headerless = parse_bytes(&with_header[body_start..], Format::Auto)
        .unwrap()
        .remove(0)
        .data;
    assert_eq!(headerless.rejected_rows, 0);
    assert_eq!(headerless.overall, exact.overall);
    assert!(
        exact.overall.errors > 0,
        "the file has failed rows with failure messages"
    );

    // A 5.x file without failureMessage: EC01's 17 columns minus column 9, no header.
    let ec01 = String::from_utf8(read("edge-cases/EC01/input.jtl")).unwrap();
    let mut rdr = csv::ReaderBuilder::new().from_reader(ec01.as_bytes());
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in rdr.records() {
        let r = r.unwrap();
        let row: Vec<&str> = r
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 8)
            .map(|(_, v)| v)
            .collect();
        w.write_record(row).unwrap();
    }
    let trimmed = w.into_inner().unwrap();
    let run = parse_bytes(&trimmed, Format::Auto).unwrap().remove(0).data;
    assert_eq!(run.rejected_rows, 0);
    assert_eq!((run.overall.count, run.overall.errors), (4, 2));
    assert_eq!(
        run.overall.bytes_sent, 600,
        "sentBytes read as sentBytes (4 × 150)"
    );
}
