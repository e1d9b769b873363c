//! A test that cannot run here says so and is counted as skipped, not passed.
//!
//! [`skip`] prints `SKIPPED test-name (kind): reason` to stderr (past the test harness's
//! output capture) and, when the environment variable `HARRIER_SKIP_LOG` names a file,
//! appends `test-name<TAB>kind<TAB>reason` to it.
//! `scripts/test.sh` sets that variable, takes the recorded skips out of its passed count
//! and lists their reasons; with `HARRIER_REQUIRE_TOOLS=1` (as `.ci/run` sets) a skip of
//! kind [`Kind::Tool`] fails the run. The caller returns right after calling it.
//!
//! Shared by every test crate: `tests/it` has it as `mod skip`, the crates in `tests/*.rs`
//! include this file with `#[path = "it/skip.rs"] mod skip;`.

#![allow(dead_code)] // each crate uses the kinds it needs

use std::io::Write;

/// Why a test could not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The public corpus `../shared/fixtures/public` is absent (allowed anywhere: it is never
    /// committed to this repository).
    Shared,
    /// A program that `scripts/test.sh --install-only` installs is missing (chromium,
    /// postgres, k6, locust, jmeter, oidc-provider-mock, haproxy, wrk, prometheus,
    /// alertmanager, javac, openssl, the OpenTelemetry Python and JavaScript SDKs). Fails the run under `HARRIER_REQUIRE_TOOLS=1`.
    Tool,
    /// The test belongs to the other backend's pass (SQLite-only, or it runs both itself).
    Backend,
    /// The machine lacks a capability the test cannot install (a writable cgroup).
    Host,
    /// A variable naming input that only a person running the test by hand gives.
    Env,
}

impl Kind {
    /// The word written to the skip log: `shared`, `tool`, `backend`, `host` or `env`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Shared => "shared",
            Kind::Tool => "tool",
            Kind::Backend => "backend",
            Kind::Host => "host",
            Kind::Env => "env",
        }
    }
}

/// The running test's name as libtest gave it to its thread (`oidc::sign_in_…`), prefixed
/// with the test crate (`it::oidc::…`); `CRATE::?` when the test runs on the main thread
/// (`--test-threads=1`), which libtest does not name after the test.
fn test_name() -> String {
    let thread = std::thread::current();
    let name = match thread.name() {
        Some(n) if n != "main" => n.to_string(),
        _ => "?".to_string(),
    };
    format!("{}::{name}", env!("CARGO_CRATE_NAME"))
}

/// Records that the running test does not run here, and why (one line, tabs and newlines
/// in `reason` replaced by spaces). The caller returns right after. A skip log that cannot
/// be written panics: a skip that is not counted would be counted as a pass.
pub fn skip(kind: Kind, reason: &str) {
    let reason = reason.replace(['\t', '\n', '\r'], " ");
    let test = test_name();
    // Straight to the process's stderr, past libtest's capture (which holds `eprintln!`
    // of a passing test back): a skip is seen in a plain `cargo test` too.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test} ({}): {reason}",
        kind.name()
    );
    let Some(path) = std::env::var_os("HARRIER_SKIP_LOG") else {
        return;
    };
    let line = format!("{test}\t{}\t{reason}\n", kind.name());
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("HARRIER_SKIP_LOG {}: {e}", path.to_string_lossy()));
    // One write per line: appends from parallel tests do not interleave.
    file.write_all(line.as_bytes())
        .unwrap_or_else(|e| panic!("HARRIER_SKIP_LOG {}: {e}", path.to_string_lossy()));
}
