//! Import speed of a large JTL against a bare `csv` ByteRecord pass over the same file.
//!
//! Not a timed test in CI: it is `#[ignore]`d and needs a file. Run by hand:
//!
//! ```text
//! HARRIER_PERF_JTL=/path/big.jtl cargo test --release --test ingest_perf -- --ignored --nocapture
//! ```
//!
//! Prints samples/s for both passes, the ratio (target ≥ 0.5) and the process's peak RSS
//! (target < 200 MB).

use std::fs::File;
use std::io::BufReader;
use std::time::Instant;

use harrier::sources::ingest::{self, Format};

#[path = "it/skip.rs"]
mod skip;
use skip::{Kind, skip};

/// This thread's CPU time (user + system), s: less sensitive than wall time to other
/// processes on a shared machine. Linux only (clock ticks of 10 ms).
fn thread_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // After the parenthesised command name come fields 3.. of proc(5): utime is field 14,
    // stime field 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| {
        f.get(n - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field(14) + field(15)) as f64 / 100.0
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
#[ignore = "needs HARRIER_PERF_JTL and a release build"]
fn import_speed_vs_bare_csv_pass() {
    let Ok(path) = std::env::var("HARRIER_PERF_JTL") else {
        skip(Kind::Env, "set HARRIER_PERF_JTL to a large JTL (CSV)");
        return;
    };

    // HARRIER_PERF_PASS=bare|harrier runs one pass only (to profile it, e.g. `perf stat`).
    let pass = std::env::var("HARRIER_PERF_PASS").unwrap_or_default();
    if pass == "harrier" {
        let runs = ingest::parse(
            BufReader::new(File::open(&path).unwrap()),
            Format::Auto,
            &path,
        )
        .unwrap();
        println!("{} labels", runs[0].data.labels.len());
        return;
    }

    let (t, cpu) = (Instant::now(), thread_cpu_s());
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_path(&path)
        .unwrap();
    let mut record = csv::ByteRecord::new();
    let mut rows = 0u64;
    let mut field_bytes = 0usize;
    while rdr.read_byte_record(&mut record).unwrap() {
        rows += 1;
        field_bytes += record.get(1).map_or(0, <[u8]>::len);
    }
    let (bare_s, bare_cpu) = (t.elapsed().as_secs_f64(), thread_cpu_s() - cpu);
    assert!(field_bytes > 0);
    if pass == "bare" {
        println!("{rows} rows");
        return;
    }

    let (t, cpu) = (Instant::now(), thread_cpu_s());
    let runs = ingest::parse(
        BufReader::new(File::open(&path).unwrap()),
        Format::Auto,
        &path,
    )
    .unwrap();
    let (harrier_s, harrier_cpu) = (t.elapsed().as_secs_f64(), thread_cpu_s() - cpu);
    let data = &runs[0].data;
    let samples: u64 = data.labels.iter().map(|l| l.stats.count).sum();

    let ratio = bare_s / harrier_s;
    println!(
        "{rows} rows: bare csv {:.0} rows/s ({bare_s:.2} s wall, {bare_cpu:.2} s CPU), \
         harrier {:.0} samples/s ({harrier_s:.2} s wall, {harrier_cpu:.2} s CPU), \
         ratio {ratio:.2} wall, {:.2} CPU; {} buckets; peak RSS {} MiB",
        rows as f64 / bare_s,
        samples as f64 / harrier_s,
        bare_cpu / harrier_cpu,
        data.buckets.len(),
        peak_rss_kib().unwrap_or(0) / 1024,
    );
    assert_eq!(samples + data.rejected_rows, rows);
}
