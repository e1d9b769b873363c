//! Reading-only ceiling: how fast can the `csv` crate alone walk a JTL?
//!
//! `csv_ceiling FILE` reads FILE with `csv::ReaderBuilder` (has_headers = true,
//! flexible = true) into one reused `ByteRecord`, counts records, fields and field
//! bytes, and prints one line:
//!
//! `FILE: R records, F fields, B field bytes, N bytes read, S s`
//!
//! No UTF-8 validation, no number parsing, no allocation per record: anything
//! harrier does on top of this (parsing values, statistics, SQLite) costs time.

use std::fs::File;
use std::io::BufReader;
use std::time::Instant;

fn main() {
    let path = match std::env::args_os().nth(1) {
        Some(p) => p,
        None => {
            eprintln!("usage: csv_ceiling FILE");
            std::process::exit(2);
        }
    };
    let started = Instant::now();
    let file = File::open(&path).unwrap_or_else(|e| {
        eprintln!("{}: {e}", path.to_string_lossy());
        std::process::exit(1);
    });
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .buffer_capacity(1 << 16)
        .from_reader(BufReader::with_capacity(1 << 16, file));
    let mut rec = csv::ByteRecord::new();
    let (mut records, mut fields, mut field_bytes) = (0u64, 0u64, 0u64);
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(true) => {
                records += 1;
                fields += rec.len() as u64;
                field_bytes += rec.as_slice().len() as u64;
            }
            Ok(false) => break,
            Err(e) => {
                eprintln!("{}: {e}", path.to_string_lossy());
                std::process::exit(1);
            }
        }
    }
    let read = rdr.position().byte();
    println!(
        "{}: {records} records, {fields} fields, {field_bytes} field bytes, {read} bytes read, {:.3} s",
        path.to_string_lossy(),
        started.elapsed().as_secs_f64()
    );
}
