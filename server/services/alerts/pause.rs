//! A testing hook, off unless the environment variable `HARRIER_PAUSE_AT` is set: the
//! process stops itself (SIGSTOP, raised on the calling thread) the first time it reaches
//! the named point of the alerts pipeline, so that a test can kill it exactly there
//! (SIGKILL) or resume it later (SIGCONT). The points ([`Point`]):
//!
//! | `HARRIER_PAUSE_AT` | where |
//! | --- | --- |
//! | `before-outbox` | the evaluator has transitions that raise notices, not yet stored |
//! | `after-outbox` | the round and its notices are stored (the outbox), nothing sent |
//! | `before-send` | the notifier is about to send a message, before its last lease check |
//! | `after-send` | a channel accepted the message, not yet marked sent |
//!
//! The variable is read once; unset (or naming no point) every call is a load and a
//! comparison. Only the first arrival at the point stops the process: resumed, it goes on
//! as if nothing had happened. Not meant for production use.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The environment variable naming the point to stop at.
pub const PAUSE_AT_ENV: &str = "HARRIER_PAUSE_AT";

/// A named point of the alerts pipeline (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    BeforeOutbox,
    AfterOutbox,
    BeforeSend,
    AfterSend,
}

impl Point {
    /// The point's name in `HARRIER_PAUSE_AT`.
    pub fn name(self) -> &'static str {
        match self {
            Point::BeforeOutbox => "before-outbox",
            Point::AfterOutbox => "after-outbox",
            Point::BeforeSend => "before-send",
            Point::AfterSend => "after-send",
        }
    }

    fn parse(s: &str) -> Option<Point> {
        [
            Point::BeforeOutbox,
            Point::AfterOutbox,
            Point::BeforeSend,
            Point::AfterSend,
        ]
        .into_iter()
        .find(|p| p.name() == s.trim())
    }
}

static ARMED: OnceLock<Option<Point>> = OnceLock::new();
static REACHED: AtomicBool = AtomicBool::new(false);

/// Stops the process here if `HARRIER_PAUSE_AT` names `point` and it was not reached
/// before; returns once the process is continued.
pub fn at(point: Point) {
    let armed = ARMED.get_or_init(|| {
        std::env::var(PAUSE_AT_ENV)
            .ok()
            .and_then(|v| Point::parse(&v))
    });
    if *armed != Some(point) || REACHED.swap(true, Ordering::SeqCst) {
        return;
    }
    let pid = std::process::id().to_string();
    tracing::warn!(point = point.name(), pid = %pid, "stopping at {PAUSE_AT_ENV}");
    eprintln!("harrier {pid}: stopped at {PAUSE_AT_ENV}={}", point.name());
    // Raised on this thread, the signal stops it before the call returns (and the other
    // threads with it); sent to the process (`kill -STOP`) it may be taken by another
    // thread while this one goes on for a moment, past the point.
    // SAFETY: raise(3) has no memory-safety preconditions.
    if unsafe { libc::raise(libc::SIGSTOP) } != 0 {
        tracing::error!("{PAUSE_AT_ENV}: raising SIGSTOP failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_named_as_the_variable_says() {
        for p in [
            Point::BeforeOutbox,
            Point::AfterOutbox,
            Point::BeforeSend,
            Point::AfterSend,
        ] {
            assert_eq!(Point::parse(p.name()), Some(p));
        }
        assert_eq!(Point::parse(" after-send\n"), Some(Point::AfterSend));
        assert_eq!(Point::parse("after_send"), None);
    }
}
