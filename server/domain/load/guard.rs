//! `--abort-on "errors>50% for 5s"`: a safety stop for `harrier load run` and `load find`.
//!
//! Owns [`AbortRule`] (parsed from the flag) and [`AbortWatch`] (fed the run's seconds,
//! says when the rule has held long enough). Must not read the clock or stop anything:
//! the service cancels the run when the watch trips.
//!
//! A rule is `MEASURE>LIMIT for DURATION`: `errors>50%` (errors, % of the requests that
//! ended in the second) or `pNN>DURATION` (latency, intended start → response, of the
//! requests that ended in the second). It trips when the limit is passed in every one of
//! DURATION's whole seconds in a row; a second in which no request ended passes nothing.

use super::summary::SecondLine;
use crate::domain::format;
use crate::domain::runs::hdr::histogram_percentile;

/// What an abort rule measures each second.
#[derive(Debug, Clone, PartialEq)]
pub enum AbortMeasure {
    /// Errors above this % of the requests that ended.
    ErrorPct(f64),
    /// This latency percentile above this many µs.
    Latency { percentile: f64, limit_us: u64 },
}

/// `errors>50% for 5s`.
#[derive(Debug, Clone, PartialEq)]
pub struct AbortRule {
    pub measure: AbortMeasure,
    /// Seconds in a row.
    pub for_s: u32,
    /// The flag as given (for messages).
    pub text: String,
}

impl AbortRule {
    /// Parses `errors>50% for 5s` or `p99>2s for 10s` (`for …` defaults to 1 s).
    ///
    /// # Errors
    /// A message saying what is expected.
    pub fn parse(s: &str) -> Result<AbortRule, String> {
        let bad = || {
            format!("--abort-on {s:?}: expected e.g. \"errors>50% for 5s\" or \"p99>2s for 10s\"")
        };
        let text = s.trim();
        let (cond, dur) = match text.split_once(" for ") {
            Some((c, d)) => (c.trim(), Some(d.trim())),
            None => (text, None),
        };
        let for_s = match dur {
            Some(d) => {
                let ms = format::parse_duration_ms(d).ok_or_else(bad)?;
                u32::try_from((ms + 999) / 1000).map_err(|_| bad())?.max(1)
            }
            None => 1,
        };
        let (what, limit) = cond.split_once('>').ok_or_else(bad)?;
        let what = what.trim().to_ascii_lowercase();
        let limit = limit.trim();
        let measure = if what == "errors" || what == "error" {
            let pct: f64 = limit
                .strip_suffix('%')
                .ok_or_else(bad)?
                .trim()
                .parse()
                .map_err(|_| bad())?;
            if !(0.0..100.0).contains(&pct) {
                return Err(bad());
            }
            AbortMeasure::ErrorPct(pct)
        } else if let Some(p) = what.strip_prefix('p') {
            let percentile: f64 = p.parse().map_err(|_| bad())?;
            if !(percentile > 0.0 && percentile < 100.0) {
                return Err(bad());
            }
            let ms = format::parse_duration_ms(limit).ok_or_else(bad)?;
            AbortMeasure::Latency {
                percentile,
                limit_us: (ms as u64).saturating_mul(1000),
            }
        } else {
            return Err(bad());
        };
        Ok(AbortRule {
            measure,
            for_s,
            text: text.to_string(),
        })
    }

    /// Whether `line` passes the limit.
    fn passed(&self, line: &SecondLine) -> bool {
        if line.completed == 0 {
            return false;
        }
        match self.measure {
            AbortMeasure::ErrorPct(limit) => {
                line.errors.total() as f64 * 100.0 / line.completed as f64 > limit
            }
            AbortMeasure::Latency {
                percentile,
                limit_us,
            } => histogram_percentile(&line.latency_us, percentile).is_some_and(|v| v > limit_us),
        }
    }
}

/// Counts the seconds in a row that pass an [`AbortRule`].
#[derive(Debug, Clone)]
pub struct AbortWatch {
    rule: AbortRule,
    in_a_row: u32,
}

impl AbortWatch {
    pub fn new(rule: AbortRule) -> AbortWatch {
        AbortWatch { rule, in_a_row: 0 }
    }

    /// Takes the next second; `Some(reason)` when the rule has now held for its duration.
    pub fn observe(&mut self, line: &SecondLine) -> Option<String> {
        self.in_a_row = if self.rule.passed(line) {
            self.in_a_row + 1
        } else {
            0
        };
        (self.in_a_row >= self.rule.for_s).then(|| {
            format!(
                "--abort-on \"{}\" held for {} s (to second {})",
                self.rule.text,
                self.in_a_row,
                line.second + 1
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::load::record::{ErrorCounts, new_us_histogram};

    fn line(second: u32, completed: u64, errors: u64, latency_us: u64) -> SecondLine {
        let mut h = new_us_histogram();
        h.record_n(latency_us, completed).unwrap();
        SecondLine {
            second,
            offered: completed,
            picked: completed,
            completed,
            errors: ErrorCounts {
                status: errors,
                ..ErrorCounts::default()
            },
            latency: None,
            service: None,
            dispatch: None,
            connections_max: 0,
            in_flight_max: 0,
            in_flight_end: 0,
            waited_for_connection: 0,
            latency_us: h.clone(),
            service_us: h.clone(),
            dispatch_us: h,
        }
    }

    #[test]
    fn trips_only_after_the_limit_held_every_second() {
        let rule = AbortRule::parse("errors>50% for 3s").unwrap();
        assert_eq!(
            (rule.measure.clone(), rule.for_s),
            (AbortMeasure::ErrorPct(50.0), 3)
        );
        let mut w = AbortWatch::new(rule);
        assert_eq!(w.observe(&line(0, 100, 60, 1000)), None);
        assert_eq!(w.observe(&line(1, 100, 60, 1000)), None);
        // A good second (and a second with nothing completed) resets the count.
        assert_eq!(w.observe(&line(2, 100, 50, 1000)), None);
        assert_eq!(w.observe(&line(3, 0, 0, 1000)), None);
        assert_eq!(w.observe(&line(4, 100, 51, 1000)), None);
        assert_eq!(w.observe(&line(5, 100, 99, 1000)), None);
        let why = w.observe(&line(6, 10, 10, 1000)).unwrap();
        assert_eq!(
            why,
            "--abort-on \"errors>50% for 3s\" held for 3 s (to second 7)"
        );

        let mut w = AbortWatch::new(AbortRule::parse("p99>2s").unwrap());
        assert_eq!(w.observe(&line(0, 10, 0, 1_900_000)), None);
        assert!(w.observe(&line(1, 10, 0, 2_100_000)).is_some());
        for bad in [
            "errors>50",
            "errors>50% for ever",
            "p99<2s",
            "cpu>50%",
            "errors>100%",
        ] {
            assert!(AbortRule::parse(bad).is_err(), "{bad}");
        }
    }
}
