//! Every result-format parser and the line protocol must end on any bytes with a run or a
//! clear error — no panic, no allocation beyond libFuzzer's `-rss_limit_mb`, no input
//! beyond its `-timeout`. The first byte picks the parser: `Format::NAMES[b % (n + 1)]`
//! (`auto` sniffs), or the line protocol when it is `n` (the `/write` path: points fed to
//! a live run's accumulators, its changes taken, then the whole run built).
//!
//! Seed corpus: `fuzz/seed.sh` (every fixture under 64 KiB, behind the byte of its
//! format).
#![no_main]

use harrier::domain::runs::intervals::IntervalRun;
use harrier::domain::runs::{RunBuilder, RunLimits, Sample};
use harrier::sources::ingest::influx::{self, LivePoint, Precision};
use harrier::sources::ingest::{self, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, input)) = data.split_first() else {
        return;
    };
    let names = Format::NAMES;
    let i = pick as usize % (names.len() + 1);
    if i < names.len() {
        let format = Format::from_name(names[i]).expect("a listed name");
        if let Ok(runs) = ingest::parse(std::io::Cursor::new(input), format, "fuzz") {
            for r in runs {
                // Built runs must hold together: labels and their distributions agree.
                let d = r.data;
                assert!(d.distributions.is_empty() || d.distributions.len() == d.labels.len() + 1);
            }
        }
        return;
    }
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let limits = RunLimits::default();
    let mut samples = RunBuilder::with_limits(limits);
    samples.track_changes();
    let mut intervals = IntervalRun::with_limits(limits);
    let precision = [Precision::Ns, Precision::Us, Precision::Ms, Precision::S][(pick % 4) as usize];
    let _ = influx::parse_write(
        text,
        precision,
        "fuzz",
        1_700_000_000_000,
        &limits.samples,
        |c| match c.point {
            LivePoint::Request {
                label,
                start_ms,
                elapsed_ms,
                success,
                status,
            } => {
                samples.push(
                    c.line,
                    &Sample {
                        label,
                        start_ms,
                        elapsed_ms,
                        success,
                        response_code: status,
                        message: status,
                        bytes_received: 0,
                        bytes_sent: 0,
                        active_users: None,
                        is_transaction: false,
                    },
                );
            }
            LivePoint::Interval {
                label,
                t_ms,
                count,
                mean_ms,
                min_ms,
                max_ms,
                bytes_received,
                bytes_sent,
            } => intervals.interval(
                label,
                t_ms,
                count,
                mean_ms,
                min_ms,
                max_ms,
                bytes_received,
                bytes_sent,
            ),
            LivePoint::IntervalErrors { label, t_ms, count } => {
                intervals.interval_errors(label, t_ms, count)
            }
            LivePoint::ErrorKind {
                label,
                t_ms,
                code,
                message,
                count,
            } => intervals.error_kind(label, t_ms, code, message, count),
            LivePoint::Users { t_ms, users } => intervals.users(t_ms, users),
            _ => {}
        },
    );
    let _ = samples.take_changes();
    let _ = samples.finish();
    let _ = intervals.take_changes();
    let _ = intervals.snapshot();
});
