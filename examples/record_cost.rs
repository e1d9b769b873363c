//! What recording one request costs the load generator, beside its peer: wrk2 records one
//! HdrHistogram value per request (`hdr_record_value`), harrier's [`Recorder::record`] three
//! (latency, service time, dispatch delay) plus the request's sample group. Both run here
//! over the same 10 M request timings (a repeating pattern of realistic latencies), one
//! after the other, three times; prints ns per request and the ratio.
//!
//!   cargo run --release --example record_cost
//!
//! Not a test: a figure for bench/README.md (issue 13's goal: ≤ 100 ns per request).

use std::hint::black_box;
use std::time::Instant;

use harrier::domain::load::record::new_us_histogram;
use harrier::domain::load::{Outcome, Recorder, Timing};

const N: u64 = 10_000_000;

fn timing(i: u64) -> Timing {
    // One request every 100 µs; service 0.8–5 ms, dispatch 20–900 µs, now and then slow.
    let intended_ns = i * 100_000;
    let dispatch = 20_000 + (i * 7_919 % 880_000);
    let service = 800_000
        + (i * 104_729 % 4_200_000)
        + if i.is_multiple_of(997) {
            250_000_000
        } else {
            0
        };
    Timing {
        intended_ns,
        picked_ns: intended_ns + dispatch,
        done_ns: intended_ns + dispatch + service,
    }
}

fn harrier_ns() -> f64 {
    let mut r = Recorder::new(0, 1_700_000_000_000, 120);
    let t0 = Instant::now();
    for i in 0..N {
        let t = timing(i);
        r.record(black_box(&t), Outcome::Ok, 200, 512);
        // Once a second of the run, the tick is handed over (as the engine does).
        if i % 10_000 == 9_999 {
            black_box(r.take((i / 10_000) as u32, false));
        }
    }
    t0.elapsed().as_nanos() as f64 / N as f64
}

fn hdr_ns() -> f64 {
    let mut h = new_us_histogram();
    let t0 = Instant::now();
    for i in 0..N {
        let t = timing(i);
        let _ = h.record(black_box(t.latency_ns() / 1_000));
        if i % 10_000 == 9_999 {
            black_box(h.len());
            h.reset();
        }
    }
    t0.elapsed().as_nanos() as f64 / N as f64
}

fn main() {
    println!("{N} requests per pass");
    for pass in 1..=3 {
        let peer = hdr_ns();
        let ours = harrier_ns();
        println!(
            "pass {pass}: harrier Recorder::record {ours:.1} ns/request · one HdrHistogram record (wrk2's per-request cost) {peer:.1} ns/request · ratio {:.2}×",
            ours / peer
        );
    }
}
