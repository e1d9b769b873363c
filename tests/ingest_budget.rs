//! Every parser under a resource budget: each fixture under `tests/fixtures` (inputs under
//! 64 KiB), and mutations of it that an attacker or a damaged file would bring — cut short,
//! bytes flipped, a line repeated, digits made huge, a number made negative, lines
//! shuffled — is parsed with `--format auto` and must end (a run or a clear error, never a
//! panic) within 2 s of this thread's time, and the whole pass must stay under 256 MiB of
//! peak memory (this test binary holds nothing else).
//!
//! The mutations are deterministic (a seeded generator), so a failure names the file and the
//! mutation and repeats; the input is saved under `target/ingest-budget-failures/`.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harrier::sources::ingest::{self, Format};

/// Largest fixture taken, bytes.
const MAX_INPUT: u64 = 64 << 10;
/// Time allowed per input.
const TIME_BUDGET: Duration = Duration::from_secs(2);
/// Peak memory allowed for the whole pass, bytes.
const MEMORY_BUDGET: u64 = 256 << 20;

fn fixtures(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            fixtures(&path, out);
        } else if path.metadata().is_ok_and(|m| m.len() <= MAX_INPUT)
            && !path
                .extension()
                .is_some_and(|e| e == "md" || e == "py" || e == "sh")
        {
            out.push(path);
        }
    }
}

/// xorshift64*: deterministic mutations without a crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The mutations of `input`, each with its name.
fn mutations(input: &[u8], rng: &mut Rng) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    out.push(("cut in half", input[..input.len() / 2].to_vec()));
    let mut flipped = input.to_vec();
    for _ in 0..8 {
        if !flipped.is_empty() {
            let i = rng.below(flipped.len());
            flipped[i] ^= 1 << rng.below(8);
        }
    }
    out.push(("8 bits flipped", flipped));
    let lines: Vec<&[u8]> = input.split(|b| *b == b'\n').collect();
    if lines.len() > 2 {
        let i = 1 + rng.below(lines.len() - 1);
        let mut repeated = Vec::new();
        for (k, l) in lines.iter().enumerate() {
            let times = if k == i { 500 } else { 1 };
            for _ in 0..times {
                repeated.extend_from_slice(l);
                repeated.push(b'\n');
            }
        }
        out.push(("one line 500 times", repeated));
        let mut shuffled: Vec<&[u8]> = lines.clone();
        for k in (2..shuffled.len()).rev() {
            let j = 1 + rng.below(k);
            shuffled.swap(k, j);
        }
        out.push(("lines shuffled", shuffled.join(&b'\n')));
    }
    // Every run of digits of one line made huge, or negative.
    for (name, replace) in [
        ("digits huge", &b"9223372036854775807"[..]),
        ("digits negative", &b"-1"[..]),
        ("digits 1e300", &b"1e300"[..]),
    ] {
        let mut m = Vec::with_capacity(input.len() + 64);
        let target = rng.below(lines.len().max(1));
        for (k, l) in lines.iter().enumerate() {
            if k == target {
                let mut in_digits = false;
                for &b in l.iter() {
                    if b.is_ascii_digit() {
                        if !in_digits {
                            m.extend_from_slice(replace);
                            in_digits = true;
                        }
                    } else {
                        in_digits = false;
                        m.push(b);
                    }
                }
            } else {
                m.extend_from_slice(l);
            }
            m.push(b'\n');
        }
        out.push((name, m));
    }
    out
}

/// This thread's CPU time: other tests' threads and other processes do not count.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |n: usize| {
        f.get(n - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(14) + ticks(15)) * 10)
}

fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn regressions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions")
}

/// Each input the fuzzer found ends with a run or an error (no panic); a Locust history
/// with cumulative counts near u64::MAX added them without saturating.
#[test]
fn fuzz_regressions_parse_without_panic() {
    let mut files = Vec::new();
    fixtures(&regressions_dir(), &mut files);
    assert!(!files.is_empty());
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        let result = std::panic::catch_unwind(|| {
            ingest::parse(Cursor::new(&bytes), Format::Auto, "regression")
        });
        assert!(result.is_ok(), "{} panicked", file.display());
    }
}

#[test]
fn every_fixture_and_its_mutations_parse_within_budget() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = Vec::new();
    fixtures(&root, &mut files);
    assert!(files.len() > 50, "found {} fixtures", files.len());
    // Inputs the fuzz target (fuzz/fuzz_targets/ingest.rs) found, without its first byte.
    fixtures(&regressions_dir(), &mut files);
    files.sort();
    let failures_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ingest-budget-failures");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut failures = Vec::new();
    let mut parsed = 0;
    for file in &files {
        let input = std::fs::read(file).unwrap();
        let mut cases = vec![("as is", input.clone())];
        cases.extend(mutations(&input, &mut rng));
        for (what, bytes) in cases {
            let name = format!(
                "{} ({what})",
                file.strip_prefix(&root).unwrap_or(file).display()
            );
            let cpu0 = thread_cpu();
            let wall0 = Instant::now();
            let result = std::panic::catch_unwind(|| {
                ingest::parse(Cursor::new(&bytes), Format::Auto, "budget")
            });
            let cpu = thread_cpu().saturating_sub(cpu0);
            parsed += 1;
            let problem = match result {
                Err(_) => Some("panicked".to_string()),
                Ok(_) if cpu > TIME_BUDGET => {
                    Some(format!("took {cpu:?} of CPU ({:?} wall)", wall0.elapsed()))
                }
                Ok(_) => None,
            };
            if let Some(problem) = problem {
                std::fs::create_dir_all(&failures_dir).unwrap();
                let saved = failures_dir.join(format!("case-{}", failures.len()));
                std::fs::write(&saved, &bytes).unwrap();
                failures.push(format!(
                    "{name}: {problem}; input saved as {}",
                    saved.display()
                ));
            }
        }
    }
    let peak = peak_rss_bytes();
    assert!(
        failures.is_empty(),
        "{} of {parsed} inputs:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        peak < MEMORY_BUDGET,
        "peak memory {} MiB over {parsed} inputs",
        peak >> 20
    );
    println!("{parsed} inputs parsed, peak memory {} MiB", peak >> 20);
}
