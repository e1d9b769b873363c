//! The saturation search of `harrier load find`: at how many requests per second does the
//! service fall over?
//!
//! Owns [`Slo`] (`--slo "p99<200ms,errors<1%"`), [`SearchPlan`], [`Search`] (the state
//! machine: which rate to offer next, how long, and each step's verdict from its
//! per-second lines) and [`SearchOutcome`] (the answer: the terminal's statement and the
//! run's `capacity` JSON). Must not read the clock, sleep or send: `services::load` drives
//! the engine at the rates this module asks for and feeds back the seconds it measured.
//!
//! The search:
//! 1. **Probe**: a low rate (`--start-rate`) for one step; its p95 and service time are the
//!    baseline. A failing probe is repeated at half the rate.
//! 2. **Expansion**: the rate doubles (up to `--max-rate`) until a step fails.
//! 3. **Bisection**: between the highest passing rate `lo` (below the lowest failing one)
//!    and the lowest failing rate `hi`, the midpoint (whole req/s from 10 up), until
//!    `(hi − lo) / lo ≤ tolerance`.
//! 4. **Confirmation**: `lo` once more over a longer window; if it fails, it becomes `hi`
//!    and the bisection goes on (three confirmations at most).
//!
//! A failing expansion or bisection step is run once more before its rate counts as
//! failing (one disturbance — a pause of the service, of the machine — must not halve
//! the answer); a rate's verdict is that of its latest step.
//!
//! Each step starts with [`WARMUP_S`] second(s) that are not judged (connections open, the
//! rate settles); the rest is its steady part. A step **fails** when its steady part
//! (checked in this order):
//! - **timeouts**: a request timed out;
//! - **plateau**: completed fewer requests than offered (by more than
//!   [`PLATEAU_SHORTFALL`] and 2 requests), or a queue builds — latency p50 or requests in
//!   flight grow every second of the step, ending 1.5 × higher (and 1 ms or 2 requests);
//! - **errors**: error % above the SLO's, else above the capacity rule's 1 %;
//! - **latency**: with `--slo`, a percentile above its limit; without, the capacity rule
//!   imported runs use ([`capacity::latency_breaches`]): p95 above twice the probe's p95.
//!   Without an SLO both figures are taken without the step's worst second
//!   ([`capacity::level_figures`], as for an imported run's levels); a baseline p95 below
//!   1 ms counts as 1 ms (the resolution imported runs have).
//!
//! A step whose generator could not keep the schedule is **generator-limited**: its
//! dispatch delay p99 is above the limit — `--dispatch-limit` when given, else
//! [`lateness_limit_us`] of the service time p50 (the step's, or the probe's when higher:
//! lateness is judged against the service it measures, see there) — while no request
//! waited for a connection, or while requests waited for one of `--max-connections` and
//! the service time stayed flat (then, and only then, the advice is to raise
//! `--max-connections`). Lateness decides the probe (its figures are the baseline) and
//! every step under an explicit `--dispatch-limit`; without one, a later step it makes
//! generator-limited only if that step fails (see [`Search::judge`]). It is repeated once, then the search ends saying what the
//! generator could not drive — never that the service fell over. A step is cut short after
//! `fail_after_s` failing steady seconds in a row.
//!
//! Each step names the connections to hold open before it starts ([`StepPlan::connections`],
//! [`connections_for`]): Little's law on the service time of the step it builds on, with
//! headroom, so that a step's first second is not spent opening them all at once.
//!
//! A probe whose every request failed before any response (connect or transport errors:
//! nothing listens, connections refused or reset) ends the search without an answer: the
//! service was never measured, so it did not "fall over".

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::record::new_us_histogram;
use super::summary::{SecondLine, lateness_limit_us};
use crate::domain::format;
use crate::domain::runs::capacity;
use crate::domain::runs::hdr::histogram_percentile;

/// Seconds at the start of each step that are not judged.
pub const WARMUP_S: u32 = 1;
/// A steady part that completes fewer than (1 − this) × the offered requests has plateaued.
pub const PLATEAU_SHORTFALL: f64 = 0.03;
/// Most confirmations of the last passing rate.
const MAX_CONFIRMATIONS: usize = 3;
/// A generator-limited step is run again this many times before the search gives up.
const GENERATOR_RETRIES: usize = 1;
/// A baseline p95 below this counts as this, µs.
const MIN_BASELINE_US: u64 = 1_000;
/// Connections held open ahead of a step: this many times the requests Little's law puts
/// in flight (arrivals within a second are not perfectly even, and a rate near capacity
/// serves slower than the step it was sized from).
pub const CONNECTION_HEADROOM: f64 = 2.0;
/// And this many more (a rate whose in-flight rounds to zero still has a request now and
/// then that overlaps another).
pub const SPARE_CONNECTIONS: u32 = 2;

/// Connections to hold open ahead of a step offering `rate_per_s` to a service whose
/// requests hold a connection `service_us` µs on average (the mean service time of the
/// step it builds on): Little's law, requests in flight = rate × time in the system, times
/// [`CONNECTION_HEADROOM`], plus [`SPARE_CONNECTIONS`]. 400 req/s × 50 ms: 20 in flight,
/// 42 connections.
pub fn connections_for(rate_per_s: f64, service_us: f64) -> u32 {
    let in_flight = rate_per_s.max(0.0) * service_us.max(0.0) / 1e6;
    ((in_flight * CONNECTION_HEADROOM).ceil() as u32).saturating_add(SPARE_CONNECTIONS)
}

/// One latency limit of an SLO: `p99<200ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyLimit {
    /// The percentile, 0 < p < 100.
    pub percentile: f64,
    /// The limit, µs.
    pub limit_us: u64,
}

/// A service level objective: every latency limit kept and the error % below its limit.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Slo {
    pub latency: Vec<LatencyLimit>,
    /// Error % a step must stay below (the capacity rule's 1 % when not given).
    pub max_error_pct: Option<f64>,
}

fn percentile_name(p: f64) -> String {
    let s = format!("{p}");
    format!("p{}", s.strip_suffix(".0").unwrap_or(&s))
}

fn us_text(us: u64) -> String {
    format::ms(Some(us as f64 / 1000.0))
}

impl Slo {
    /// Parses `p99<200ms,errors<1%` (terms `pNN<DURATION` and `errors<N%`, comma-separated).
    ///
    /// # Errors
    /// A message naming the term that is not understood.
    pub fn parse(s: &str) -> Result<Slo, String> {
        let mut slo = Slo::default();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let bad = || {
                format!(
                    "--slo term {term:?}: expected e.g. p99<200ms or errors<1% (comma-separated)"
                )
            };
            let (what, limit) = term.split_once('<').ok_or_else(bad)?;
            let (what, limit) = (what.trim().to_ascii_lowercase(), limit.trim());
            if what == "errors" || what == "error" {
                let pct: f64 = limit
                    .strip_suffix('%')
                    .ok_or_else(bad)?
                    .trim()
                    .parse()
                    .map_err(|_| bad())?;
                if !(0.0..=100.0).contains(&pct) {
                    return Err(bad());
                }
                slo.max_error_pct = Some(pct);
            } else if let Some(p) = what.strip_prefix('p') {
                let percentile: f64 = p.parse().map_err(|_| bad())?;
                if !(percentile > 0.0 && percentile < 100.0) {
                    return Err(bad());
                }
                let ms = format::parse_duration_ms(limit).ok_or_else(bad)?;
                slo.latency.push(LatencyLimit {
                    percentile,
                    limit_us: (ms as u64).saturating_mul(1000),
                });
            } else {
                return Err(bad());
            }
        }
        if slo.latency.is_empty() && slo.max_error_pct.is_none() {
            return Err(format!(
                "--slo {s:?}: no term; expected e.g. p99<200ms,errors<1%"
            ));
        }
        Ok(slo)
    }

    /// For people: "p99 < 200 ms, errors < 1 %".
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .latency
            .iter()
            .map(|l| {
                format!(
                    "{} < {}",
                    percentile_name(l.percentile),
                    us_text(l.limit_us)
                )
            })
            .collect();
        if let Some(e) = self.max_error_pct {
            parts.push(format!("errors < {e} %"));
        }
        parts.join(", ")
    }
}

/// What the search is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchPlan {
    /// The user's objective; `None`: the capacity rule imported runs use.
    pub slo: Option<Slo>,
    /// Relative width of the final bracket, `(hi − lo) / lo` (0.05: 5 %).
    pub tolerance: f64,
    /// Rate of the probe, req/s.
    pub start_rate: f64,
    /// Highest rate offered, req/s.
    pub max_rate: f64,
    /// Seconds per step, the warm-up included.
    pub step_s: u32,
    /// Seconds of the confirmation, the warm-up included.
    pub confirm_s: u32,
    /// A step ends early after this many failing steady seconds in a row.
    pub fail_after_s: u32,
    /// Dispatch delay p99 above which a step is generator-limited, µs (`--dispatch-limit`);
    /// `None`: [`lateness_limit_us`] of the service time (see the module docs).
    pub dispatch_limit_us: Option<u64>,
}

/// Which part of the search a step belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Probe,
    Expand,
    Bisect,
    Confirm,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Probe => "probe",
            Phase::Expand => "expand",
            Phase::Bisect => "bisect",
            Phase::Confirm => "confirm",
        }
    }
}

/// The next step: offer `rate_per_s` for `seconds`, with `connections` open before it
/// starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepPlan {
    pub phase: Phase,
    pub rate_per_s: f64,
    pub seconds: u32,
    /// Connections to hold open before the step ([`connections_for`] on the mean service
    /// time of the highest passing step at or below this rate, else of the last step
    /// measured; [`SPARE_CONNECTIONS`] before anything was measured). The engine caps it
    /// at `--max-connections`.
    pub connections: u32,
}

/// A step's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    Fail,
    /// The generator could not keep the schedule: says nothing about the service.
    GeneratorLimited,
    /// Stopped (Ctrl-C, `--max-duration`, `--abort-on`) before it could be judged.
    Stopped,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::GeneratorLimited => "generator-limited",
            Verdict::Stopped => "stopped",
        }
    }
}

/// One step as measured and judged (`capacity.steps[]` in the run's JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    pub phase: Phase,
    /// The rate offered, req/s.
    pub offered_rps: f64,
    /// Requests completed (any response or error) per steady second, req/s.
    pub achieved_rps: Option<f64>,
    /// First second of the step, from the run's start.
    pub first_second: u32,
    /// Steady seconds judged.
    pub seconds: u32,
    /// Ended early: failing seconds, or stopped.
    pub cut_short: bool,
    /// Latency (intended start → response) of the steady part, ms (HDR, ≤ 0.1 %).
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Errors of the steady part, % of completed.
    pub error_pct: Option<f64>,
    pub timeouts: u64,
    /// Requests in flight by Little's law: achieved rate × mean latency.
    pub in_flight: Option<f64>,
    /// Dispatch delay p99 of the steady part, ms.
    pub dispatch_p99_ms: Option<f64>,
    /// Service time (send → response) mean of the steady part, ms: what sizes the
    /// connections of the steps built on this one.
    #[serde(default)]
    pub service_mean_ms: Option<f64>,
    /// Connections asked to be open before the step started (see [`StepPlan::connections`]).
    #[serde(default)]
    pub connections_ahead: Option<u32>,
    pub verdict: Verdict,
    /// The limit a failing step broke: `p99` (or the SLO's percentile), `p95` (capacity
    /// rule), `errors`, `plateau`, `timeouts`.
    pub limited_by: Option<String>,
    /// Why, for people.
    pub reason: String,
}

impl StepResult {
    /// One terminal line: "expand   800 req/s  achieved 412.0 req/s  p99 1.20 s  errors 0 %  FAIL (plateau: …)".
    pub fn render(&self) -> String {
        let verdict = match (self.verdict, &self.limited_by) {
            (Verdict::Pass, _) => "pass".to_string(),
            (Verdict::Fail, Some(l)) => format!("FAIL ({l}: {})", self.reason),
            (v, _) => format!("{} ({})", v.name().to_uppercase(), self.reason),
        };
        format!(
            "{:<8} {:>9}  achieved {:>12}  p99 {:>9}  errors {:>7}  in flight {:>6}  {}{verdict}",
            self.phase.name(),
            rate_text(self.offered_rps),
            format::rps(self.achieved_rps),
            format::ms(self.p99_ms),
            format::pct(self.error_pct),
            self.in_flight
                .map_or_else(|| format::NONE.to_string(), |n| format::float(n, 1)),
            if self.cut_short { "cut short · " } else { "" },
        )
    }
}

/// "412 req/s" (whole above 100, one decimal below).
pub fn rate_text(r: f64) -> String {
    if r >= 100.0 {
        format!("{} req/s", format::float(r, 0))
    } else {
        format!("{} req/s", format::float(r, 1))
    }
}

/// The answer (`capacity` in the run's JSON, `kind: "search"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchOutcome {
    /// Always `"search"` (an imported run's `capacity` has no `kind`).
    pub kind: String,
    /// X: the lowest rate that failed, req/s.
    pub falls_over_rps: Option<f64>,
    /// What X broke: `p99` (or the SLO's percentile), `p95`, `errors`, `plateau`,
    /// `timeouts`.
    pub limited_by: Option<String>,
    /// Y: the highest passing rate below X (confirmed when `confirmed`), req/s.
    pub sustains_rps: Option<f64>,
    /// The throughput achieved at Y, req/s (the capacity, as `throughput_rps` of an imported
    /// run's knee).
    pub throughput_rps: Option<f64>,
    /// Latency p99 at Y, ms.
    pub p99_ms: Option<f64>,
    /// Requests in flight at Y (Little's law), rounded.
    pub in_flight_at_knee: Option<u64>,
    /// Y passed its longer confirmation step.
    pub confirmed: bool,
    /// `(X − Y) / Y ≤ tolerance` and Y confirmed.
    pub complete: bool,
    pub tolerance: f64,
    /// What a step was judged by, for people.
    pub rule: String,
    /// Why the search ended before its answer (Ctrl-C, `--max-duration`, `--abort-on`,
    /// `--max-rate`, generator-limited), or `None`.
    pub ended_by: Option<String>,
    /// One sentence: "falls over at 412 req/s (limited by plateau); sustains 400 req/s with
    /// p99 11.2 ms (confirmed over 20 s); 4 requests in flight at the knee".
    pub statement: String,
    pub steps: Vec<StepResult>,
}

#[derive(Debug, Clone, Copy)]
struct Baseline {
    p95_us: u64,
    service_p50_us: u64,
}

#[derive(Debug)]
struct Current {
    plan: StepPlan,
    first_second: u32,
    lines: Vec<SecondLine>,
    failing_in_a_row: u32,
}

/// The search state machine (see the module docs). Drive it: [`Search::next_step`], then
/// the step's seconds to [`Search::on_second`] until it returns true, then
/// [`Search::finish_step`]; again until `next_step` returns `None`; then
/// [`Search::outcome`].
#[derive(Debug)]
pub struct Search {
    plan: SearchPlan,
    steps: Vec<StepResult>,
    current: Option<Current>,
    baseline: Option<Baseline>,
    ended_by: Option<String>,
    /// Why no request of the probe got a response (the search then has no answer).
    unreachable: Option<String>,
    done: bool,
}

impl Search {
    pub fn new(plan: SearchPlan) -> Search {
        Search {
            plan,
            steps: Vec::new(),
            current: None,
            baseline: None,
            ended_by: None,
            unreachable: None,
            done: false,
        }
    }

    /// Why the probe got no response at all (every request a connect or transport error),
    /// or `None`: the search then ends without an answer.
    pub fn unreachable(&self) -> Option<&str> {
        self.unreachable.as_deref()
    }

    /// The steps judged so far.
    pub fn steps(&self) -> &[StepResult] {
        &self.steps
    }

    /// Each rate's latest judged step (pass or fail): a rate's verdict is its last one.
    fn latest_per_rate(&self) -> Vec<&StepResult> {
        let mut out: Vec<&StepResult> = Vec::new();
        for s in self
            .steps
            .iter()
            .filter(|s| matches!(s.verdict, Verdict::Pass | Verdict::Fail))
        {
            match out.iter_mut().find(|o| o.offered_rps == s.offered_rps) {
                Some(o) => *o = s,
                None => out.push(s),
            }
        }
        out
    }

    /// The lowest failing rate.
    fn hi(&self) -> Option<&StepResult> {
        self.latest_per_rate()
            .into_iter()
            .filter(|s| s.verdict == Verdict::Fail)
            .min_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps))
    }

    /// The highest passing rate below the lowest failing one.
    fn lo(&self) -> Option<&StepResult> {
        let hi = self.hi().map_or(f64::INFINITY, |h| h.offered_rps);
        self.latest_per_rate()
            .into_iter()
            .filter(|s| s.verdict == Verdict::Pass && s.offered_rps < hi)
            .max_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps))
    }

    /// The next step, starting at `first_second` (seconds from the run's start), or `None`
    /// when the search is over.
    pub fn next_step(&mut self, first_second: u32) -> Option<StepPlan> {
        if self.done || self.ended_by.is_some() {
            return None;
        }
        if let Some(why) = &self.unreachable {
            self.ended_by = Some(why.clone());
            return None;
        }
        let plan = self.decide();
        match plan {
            Some(p) => {
                self.current = Some(Current {
                    plan: p,
                    first_second,
                    lines: Vec::new(),
                    failing_in_a_row: 0,
                });
            }
            None => self.done = true,
        }
        plan
    }

    fn step(&self, phase: Phase, rate_per_s: f64) -> StepPlan {
        StepPlan {
            phase,
            rate_per_s,
            seconds: if phase == Phase::Confirm {
                self.plan.confirm_s
            } else {
                self.plan.step_s
            }
            .max(WARMUP_S + 1),
            connections: self.connections_ahead(rate_per_s),
        }
    }

    /// Connections to hold open before a step at `rate_per_s`: sized on the mean service
    /// time of the highest passing step at or below it (the service as it runs near that
    /// rate, not slowed by a failing step's queue), else of the last step measured.
    fn connections_ahead(&self, rate_per_s: f64) -> u32 {
        let measured = |s: &&StepResult| s.service_mean_ms.is_some();
        let from = self
            .steps
            .iter()
            .filter(measured)
            .filter(|s| s.verdict == Verdict::Pass && s.offered_rps <= rate_per_s)
            .max_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps))
            .or_else(|| self.steps.iter().rev().find(measured));
        match from.and_then(|s| s.service_mean_ms) {
            Some(ms) => connections_for(rate_per_s, ms * 1000.0),
            None => SPARE_CONNECTIONS,
        }
    }

    fn decide(&mut self) -> Option<StepPlan> {
        let Some(last) = self.steps.last() else {
            return Some(self.step(Phase::Probe, self.plan.start_rate));
        };
        if last.verdict == Verdict::GeneratorLimited {
            let tries = self
                .steps
                .iter()
                .rev()
                .take_while(|s| {
                    s.verdict == Verdict::GeneratorLimited && s.offered_rps == last.offered_rps
                })
                .count();
            if tries <= GENERATOR_RETRIES {
                return Some(self.step(last.phase, last.offered_rps));
            }
            self.ended_by = Some(format!(
                "the generator could not drive {}: {}",
                rate_text(last.offered_rps),
                last.reason
            ));
            return None;
        }
        // A failure is believed when it happens twice: one disturbance (a pause of the
        // service or the machine) must not halve the answer.
        if last.verdict == Verdict::Fail && matches!(last.phase, Phase::Expand | Phase::Bisect) {
            let before = self.steps.len().checked_sub(2).map(|i| &self.steps[i]);
            let retried = before
                .is_some_and(|b| b.verdict == Verdict::Fail && b.offered_rps == last.offered_rps);
            if !retried {
                return Some(self.step(last.phase, last.offered_rps));
            }
        }
        let (lo, hi) = (
            self.lo().map(|s| s.offered_rps),
            self.hi().map(|s| s.offered_rps),
        );
        match (lo, hi) {
            (None, None) => Some(self.step(Phase::Probe, self.plan.start_rate)),
            (None, Some(h)) => {
                if let Some(failed) = self.hi().filter(|s| s.error_pct == Some(100.0)) {
                    self.ended_by = Some(format!(
                        "every request of the probe at {} failed: {}",
                        rate_text(h),
                        failed.reason
                    ));
                    return None;
                }
                let next = h / 2.0;
                if next < 1.0 {
                    self.ended_by = Some(format!("it fails even at {}", rate_text(h)));
                    return None;
                }
                Some(self.step(Phase::Probe, next))
            }
            (Some(l), None) => {
                if l >= self.plan.max_rate {
                    self.ended_by = Some(format!(
                        "it did not fall over up to --max-rate {}",
                        rate_text(self.plan.max_rate)
                    ));
                    return None;
                }
                Some(self.step(Phase::Expand, (l * 2.0).min(self.plan.max_rate)))
            }
            (Some(l), Some(h)) => {
                if (h - l) / l > self.plan.tolerance {
                    // Whole requests per second from 10 up (as people state rates).
                    let mid = (l + h) / 2.0;
                    let mid = if mid >= 10.0 && mid.round() > l && mid.round() < h {
                        mid.round()
                    } else {
                        mid
                    };
                    return Some(self.step(Phase::Bisect, mid));
                }
                let confirmed = self
                    .lo()
                    .is_some_and(|s| s.phase == Phase::Confirm && s.verdict == Verdict::Pass);
                if confirmed {
                    return None;
                }
                let tried = self
                    .steps
                    .iter()
                    .filter(|s| s.phase == Phase::Confirm)
                    .count();
                if tried >= MAX_CONFIRMATIONS {
                    self.ended_by = Some(format!(
                        "{MAX_CONFIRMATIONS} confirmations failed: the service does not hold a rate for long"
                    ));
                    return None;
                }
                Some(self.step(Phase::Confirm, l))
            }
        }
    }

    /// The dispatch delay p99 a step with service time p50 `service_p50_us` may have, µs,
    /// and what it was derived from (for the reason): `--dispatch-limit`, else
    /// [`lateness_limit_us`] of that p50 or of the probe's, whichever is higher (a step
    /// that queues serves slower; the probe is the service unloaded).
    fn dispatch_limit(&self, service_p50_us: u64) -> (u64, String) {
        if let Some(limit) = self.plan.dispatch_limit_us {
            return (limit, String::new());
        }
        let reference = service_p50_us.max(self.baseline.map_or(0, |b| b.service_p50_us));
        let limit = lateness_limit_us(reference);
        let against = if limit > lateness_limit_us(0) {
            format!(" (half the service time p50 {})", us_text(reference))
        } else {
            String::new()
        };
        (limit, against)
    }

    fn limits(&self) -> (f64, Option<u64>) {
        let error_limit = self
            .plan
            .slo
            .as_ref()
            .and_then(|s| s.max_error_pct)
            .unwrap_or(capacity::ERROR_PCT_LIMIT);
        let p95_limit = self
            .baseline
            .map(|b| (capacity::P95_FACTOR * b.p95_us.max(MIN_BASELINE_US) as f64) as u64);
        (error_limit, p95_limit)
    }

    /// Whether one steady second breaks a limit (for cutting a step short).
    fn second_fails(&self, line: &SecondLine) -> bool {
        let (error_limit, p95_limit) = self.limits();
        if line.errors.timeout > 0 {
            return true;
        }
        if (line.completed as f64) < line.offered as f64 * (1.0 - PLATEAU_SHORTFALL) - 2.0 {
            return true;
        }
        if line.completed > 0
            && line.errors.total() as f64 * 100.0 / line.completed as f64 > error_limit
        {
            return true;
        }
        let pct = |p: f64| histogram_percentile(&line.latency_us, p);
        match &self.plan.slo {
            Some(slo) if !slo.latency.is_empty() => slo
                .latency
                .iter()
                .any(|l| pct(l.percentile).is_some_and(|v| v > l.limit_us)),
            _ => p95_limit.is_some_and(|limit| pct(95.0).is_some_and(|v| v > limit)),
        }
    }

    /// A second of the run. Seconds before the current step are ignored. Returns true when
    /// the step is over: all its seconds seen, or cut short.
    pub fn on_second(&mut self, line: &SecondLine) -> bool {
        let fails = self.second_fails(line);
        let fail_after = self.plan.fail_after_s.max(1);
        let Some(cur) = self.current.as_mut() else {
            return false;
        };
        if line.second < cur.first_second {
            return false;
        }
        cur.lines.push(line.clone());
        if cur.lines.len() as u32 > WARMUP_S {
            cur.failing_in_a_row = if fails { cur.failing_in_a_row + 1 } else { 0 };
        }
        cur.failing_in_a_row >= fail_after || cur.lines.len() as u32 >= cur.plan.seconds
    }

    /// Judges the current step on the seconds it was given; `None` without one.
    pub fn finish_step(&mut self) -> Option<&StepResult> {
        let cur = self.current.take()?;
        let result = self.judge(&cur, false);
        // Nothing ever answered: every request of the probe failed before a response.
        let (completed, unanswered) = cur.lines.iter().fold((0, 0), |(c, u), l| {
            (c + l.completed, u + l.errors.connect + l.errors.transport)
        });
        if cur.plan.phase == Phase::Probe
            && self.lo().is_none()
            && completed > 0
            && unanswered >= completed
        {
            self.unreachable = Some(format!(
                "no request of the probe at {} got a response ({} connect and {} transport errors): the service was not measured",
                rate_text(cur.plan.rate_per_s),
                cur.lines.iter().map(|l| l.errors.connect).sum::<u64>(),
                cur.lines.iter().map(|l| l.errors.transport).sum::<u64>(),
            ));
        }
        if cur.plan.phase == Phase::Probe
            && result.verdict == Verdict::Pass
            && self.baseline.is_none()
        {
            let steady = &cur.lines[(WARMUP_S as usize).min(cur.lines.len())..];
            let mut service = new_us_histogram();
            for l in steady {
                let _ = service.add(&l.service_us);
            }
            let level = level_of(steady);
            self.baseline = Some(Baseline {
                p95_us: level.p95.unwrap_or(0),
                service_p50_us: histogram_percentile(&service, 50.0).unwrap_or(0),
            });
        }
        self.steps.push(result);
        self.steps.last()
    }

    /// Ends the search early (`reason`: "stopped (Ctrl-C)", "--max-duration 5m reached");
    /// the current step, if any, is kept with the verdict `stopped`.
    pub fn stop(&mut self, reason: &str) {
        if self.ended_by.is_none() && !self.done {
            self.ended_by = Some(reason.to_string());
        }
        if let Some(cur) = self.current.take() {
            let result = self.judge(&cur, true);
            self.steps.push(result);
        }
    }

    /// Moves the start of the step under way to `first_second` (its connections took a
    /// while to open); seconds before it are not the step's.
    pub fn start_step_at(&mut self, first_second: u32) {
        if let Some(cur) = self.current.as_mut()
            && cur.lines.is_empty()
        {
            cur.first_second = first_second;
        }
    }

    /// True while a step is under way.
    pub fn in_step(&self) -> bool {
        self.current.is_some()
    }

    /// A step's verdict. Lateness above the limit without waiting for connections decides
    /// the probe (its figures are the baseline every later step is judged against) and any
    /// step under an explicit `--dispatch-limit`; a later step it makes generator-limited
    /// only if the step fails: a step that passes despite a late generator passed a harder
    /// test (the same requests each second, sent in bursts, their latency counting the
    /// lateness), but a failure may be the generator's bursts, not the service.
    fn judge(&self, cur: &Current, stopped: bool) -> StepResult {
        let (mut result, late) = self.judge_step(cur, stopped);
        if let Some(why) = late {
            if result.verdict == Verdict::Fail {
                result.verdict = Verdict::GeneratorLimited;
                result.reason = format!(
                    "{why}; the step failed ({}: {}), which a late generator's bursts can cause",
                    result.limited_by.take().unwrap_or_default(),
                    result.reason
                );
            } else if result.verdict == Verdict::Pass {
                result.reason = format!("passed although {why}");
            }
        }
        result
    }

    /// [`Search::judge`] without its last rule: the verdict, and the generator's lateness
    /// when it did not decide it.
    fn judge_step(&self, cur: &Current, stopped: bool) -> (StepResult, Option<String>) {
        let mut late: Option<String> = None;
        let steady = &cur.lines[(WARMUP_S as usize).min(cur.lines.len())..];
        let n = steady.len() as u32;
        let mut latency = new_us_histogram();
        let mut service = new_us_histogram();
        let mut dispatch = new_us_histogram();
        let (mut offered, mut completed, mut errors, mut timeouts, mut waited) = (0, 0, 0, 0, 0);
        for l in steady {
            let _ = latency.add(&l.latency_us);
            let _ = service.add(&l.service_us);
            let _ = dispatch.add(&l.dispatch_us);
            offered += l.offered;
            completed += l.completed;
            errors += l.errors.total();
            timeouts += l.errors.timeout;
            waited += l.waited_for_connection;
        }
        let pct = |h: &Histogram<u64>, p: f64| histogram_percentile(h, p);
        let ms = |v: Option<u64>| v.map(|v| v as f64 / 1000.0);
        let service_mean_ms = (!service.is_empty()).then(|| service.mean() / 1000.0);
        let achieved = (n > 0).then(|| completed as f64 / f64::from(n));
        let mean_latency_s = (!latency.is_empty()).then(|| latency.mean() / 1e6);
        let mut result = StepResult {
            phase: cur.plan.phase,
            offered_rps: cur.plan.rate_per_s,
            achieved_rps: achieved,
            first_second: cur.first_second,
            seconds: n,
            cut_short: (cur.lines.len() as u32) < cur.plan.seconds,
            p50_ms: ms(pct(&latency, 50.0)),
            p95_ms: ms(pct(&latency, 95.0)),
            p99_ms: ms(pct(&latency, 99.0)),
            error_pct: (completed > 0).then(|| errors as f64 * 100.0 / completed as f64),
            timeouts,
            in_flight: achieved.zip(mean_latency_s).map(|(x, r)| x * r),
            dispatch_p99_ms: ms(pct(&dispatch, 99.0)),
            service_mean_ms,
            connections_ahead: Some(cur.plan.connections),
            verdict: Verdict::Pass,
            limited_by: None,
            reason: String::new(),
        };
        let fail = |r: &mut StepResult, what: &str, why: String| {
            r.verdict = Verdict::Fail;
            r.limited_by = Some(what.to_string());
            r.reason = why;
        };
        if stopped || n == 0 {
            result.verdict = Verdict::Stopped;
            result.reason = if n == 0 {
                "no steady second measured".into()
            } else {
                "the search was stopped during this step".into()
            };
            return (result, late);
        }
        // The generator first: a step it could not drive says nothing about the service.
        let dispatch_p99 = pct(&dispatch, 99.0).unwrap_or(0);
        let service_p50 = pct(&service, 50.0).unwrap_or(0);
        let (limit_us, against) = self.dispatch_limit(service_p50);
        if dispatch_p99 > limit_us {
            if waited == 0 {
                let why = format!(
                    "dispatch delay p99 {} above {}{against}: the generator started requests late (short of CPU)",
                    us_text(dispatch_p99),
                    us_text(limit_us)
                );
                if cur.plan.phase == Phase::Probe || self.plan.dispatch_limit_us.is_some() {
                    result.verdict = Verdict::GeneratorLimited;
                    result.reason = why;
                    return (result, None);
                }
                late = Some(why);
            } else if let Some(b) = self.baseline
                && service_p50 as f64 <= 1.5 * b.service_p50_us as f64 + 1000.0
            {
                // Late because requests waited for one of --max-connections, while the
                // service answered as fast as ever: the connections are the cause.
                result.verdict = Verdict::GeneratorLimited;
                result.reason = format!(
                    "{waited} requests waited for a connection (dispatch delay p99 {}) while the service time stayed flat (p50 {}): raise --max-connections",
                    us_text(dispatch_p99),
                    us_text(service_p50)
                );
                return (result, late);
            }
        }
        let (error_limit, p95_limit) = self.limits();
        if timeouts > 0 {
            fail(
                &mut result,
                "timeouts",
                format!("{timeouts} requests timed out"),
            );
            return (result, late);
        }
        if (completed as f64) < offered as f64 * (1.0 - PLATEAU_SHORTFALL) - 2.0 {
            fail(
                &mut result,
                "plateau",
                format!(
                    "achieved {} of {} offered",
                    format::rps(achieved),
                    format::rps(Some(offered as f64 / f64::from(n)))
                ),
            );
            return (result, late);
        }
        let p50s: Vec<f64> = steady
            .iter()
            .map(|l| pct(&l.latency_us, 50.0).unwrap_or(0) as f64)
            .collect();
        let in_flight: Vec<f64> = steady.iter().map(|l| f64::from(l.in_flight_end)).collect();
        if grows(&p50s, 1000.0) {
            fail(
                &mut result,
                "plateau",
                format!(
                    "a queue builds: latency p50 {} → {} through the step",
                    us_text(p50s[0] as u64),
                    us_text(p50s[p50s.len() - 1] as u64)
                ),
            );
            return (result, late);
        }
        if grows(&in_flight, 2.0) {
            fail(
                &mut result,
                "plateau",
                format!(
                    "a queue builds: {} → {} requests in flight through the step",
                    in_flight[0],
                    in_flight[in_flight.len() - 1]
                ),
            );
            return (result, late);
        }
        let level = level_of(steady);
        let error_pct = match &self.plan.slo {
            Some(_) => result.error_pct,
            None => level.error_pct,
        };
        if let Some(e) = error_pct
            && e > error_limit
        {
            fail(
                &mut result,
                "errors",
                format!(
                    "{} errors, limit {}",
                    format::pct(Some(e)),
                    format::pct(Some(error_limit))
                ),
            );
            return (result, late);
        }
        match &self.plan.slo {
            Some(slo) if !slo.latency.is_empty() => {
                for l in &slo.latency {
                    if let Some(v) = pct(&latency, l.percentile)
                        && v > l.limit_us
                    {
                        let name = percentile_name(l.percentile);
                        fail(
                            &mut result,
                            &name,
                            format!("{name} {} above {}", us_text(v), us_text(l.limit_us)),
                        );
                        return (result, late);
                    }
                }
            }
            _ => {
                if let (Some(limit), Some(p95), Some(b)) = (p95_limit, level.p95, self.baseline)
                    && capacity::latency_breaches(b.p95_us.max(MIN_BASELINE_US) as f64, p95 as f64)
                {
                    fail(
                        &mut result,
                        "p95",
                        format!(
                            "p95 {} above twice the probe's ({})",
                            us_text(p95),
                            us_text(limit)
                        ),
                    );
                    return (result, late);
                }
            }
        }
        (result, late)
    }

    /// What the rule judges by, for people.
    pub fn rule(&self) -> String {
        match &self.plan.slo {
            Some(slo) => format!(
                "SLO {}; no timeouts; achieved ≥ {:.0} % of offered; no queue building",
                slo.describe(),
                (1.0 - PLATEAU_SHORTFALL) * 100.0
            ),
            None => format!(
                "capacity rule of imported runs: p95 ≤ {} × the probe's, errors ≤ {} % (each without the step's worst second); no timeouts; achieved ≥ {:.0} % of offered; no queue building",
                capacity::P95_FACTOR,
                capacity::ERROR_PCT_LIMIT,
                (1.0 - PLATEAU_SHORTFALL) * 100.0
            ),
        }
    }

    /// The answer from the steps judged so far.
    pub fn outcome(&self) -> SearchOutcome {
        // A target that never answered was not measured: no rate failed or passed.
        let measured = self.unreachable.is_none();
        let hi = self.hi().filter(|_| measured);
        let lo = self.lo().filter(|_| measured);
        let confirmed = lo.is_some_and(|s| s.phase == Phase::Confirm);
        let complete = confirmed
            && match (lo, hi) {
                (Some(l), Some(h)) => {
                    (h.offered_rps - l.offered_rps) / l.offered_rps <= self.plan.tolerance + 1e-9
                }
                _ => false,
            };
        let in_flight = lo.and_then(|s| s.in_flight).map(|n| n.round() as u64);
        let mut parts = Vec::new();
        match hi {
            Some(h) => parts.push(format!(
                "falls over at {} (limited by {})",
                rate_text(h.offered_rps),
                h.limited_by.as_deref().unwrap_or("?")
            )),
            None => parts.push(match lo {
                Some(l) => format!("did not fall over up to {}", rate_text(l.offered_rps)),
                None => "no answer".to_string(),
            }),
        }
        if let Some(l) = lo {
            parts.push(format!(
                "sustains {} with p99 {}{}",
                rate_text(l.offered_rps),
                format::ms(l.p99_ms),
                if confirmed {
                    format!(" (confirmed over {} s)", l.seconds + WARMUP_S)
                } else {
                    " (not confirmed)".to_string()
                }
            ));
        }
        if let Some(n) = in_flight {
            parts.push(format!(
                "{n} {} in flight at the knee",
                if n == 1 { "request" } else { "requests" }
            ));
        }
        let mut statement = parts.join("; ");
        if let Some(why) = &self.ended_by {
            statement.push_str(&format!(" — search ended early: {why}"));
        }
        SearchOutcome {
            kind: "search".into(),
            falls_over_rps: hi.map(|h| h.offered_rps),
            limited_by: hi.and_then(|h| h.limited_by.clone()),
            sustains_rps: lo.map(|l| l.offered_rps),
            throughput_rps: lo.and_then(|l| l.achieved_rps),
            p99_ms: lo.and_then(|l| l.p99_ms),
            in_flight_at_knee: in_flight,
            confirmed,
            complete,
            tolerance: self.plan.tolerance,
            rule: self.rule(),
            ended_by: self.ended_by.clone(),
            statement,
            steps: self.steps.clone(),
        }
    }
}

fn level_of(steady: &[SecondLine]) -> capacity::LevelFigures {
    let seconds: Vec<(u64, u64, &Histogram<u64>)> = steady
        .iter()
        .map(|l| (l.completed, l.errors.total(), &l.latency_us))
        .collect();
    capacity::level_figures(&seconds)
}

/// Whether `v` rises every second of at least three and ends 1.5 × higher and `min_rise`
/// above where it began: a queue building, not noise.
fn grows(v: &[f64], min_rise: f64) -> bool {
    v.len() >= 3
        && v.windows(2).all(|w| w[1] > w[0])
        && v[v.len() - 1] >= 1.5 * v[0]
        && v[v.len() - 1] - v[0] >= min_rise
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::load::record::ErrorCounts;

    /// A simulated service: below `capacity` every request takes `latency_us`; above it the
    /// excess queues (completions stay at the capacity, latency grows each second).
    struct Simulated {
        capacity: f64,
        latency_us: u64,
        /// Latency added per req/s offered (an SLO breaks before capacity), µs.
        slope_us: f64,
        /// Dispatch delay of every request, µs.
        dispatch_us: u64,
    }

    impl Simulated {
        fn second(&self, second: u32, rate: f64, into_step: u32) -> SecondLine {
            let offered = rate.round() as u64;
            let completed = (rate.min(self.capacity)).round() as u64;
            let base = self.latency_us + (self.slope_us * rate) as u64;
            let queue_us = if rate > self.capacity {
                // The backlog after `into_step` seconds, drained at the capacity.
                ((rate - self.capacity) * f64::from(into_step + 1) / self.capacity * 1e6) as u64
            } else {
                0
            };
            let mut latency = new_us_histogram();
            let mut service = new_us_histogram();
            let mut dispatch = new_us_histogram();
            latency
                .record_n(base + queue_us + self.dispatch_us, completed)
                .unwrap();
            service.record_n(base + queue_us, completed).unwrap();
            dispatch.record_n(self.dispatch_us, completed).unwrap();
            let in_flight = (rate.min(self.capacity) * (base + queue_us) as f64 / 1e6) as u32;
            SecondLine {
                second,
                offered,
                picked: completed,
                completed,
                errors: ErrorCounts::default(),
                latency: None,
                service: None,
                dispatch: None,
                connections_max: in_flight,
                in_flight_max: in_flight,
                in_flight_end: in_flight,
                waited_for_connection: 0,
                latency_us: latency,
                service_us: service,
                dispatch_us: dispatch,
            }
        }
    }

    fn plan() -> SearchPlan {
        SearchPlan {
            slo: None,
            tolerance: 0.05,
            start_rate: 20.0,
            max_rate: 100_000.0,
            step_s: 5,
            confirm_s: 15,
            fail_after_s: 2,
            dispatch_limit_us: None,
        }
    }

    /// Drives a search against `svc`; returns the steps' (phase, rate) and the outcome.
    fn drive(plan: SearchPlan, svc: &Simulated) -> (Vec<(Phase, f64)>, SearchOutcome) {
        let (steps, out) = drive_plans(plan, svc);
        (steps.iter().map(|s| (s.phase, s.rate_per_s)).collect(), out)
    }

    /// [`drive`], returning each step as planned.
    fn drive_plans(plan: SearchPlan, svc: &Simulated) -> (Vec<StepPlan>, SearchOutcome) {
        drive_lines(plan, |second, rate, into| svc.second(second, rate, into))
    }

    /// [`drive_plans`] on the lines `line(second, rate, second into the step)` makes.
    fn drive_lines(
        plan: SearchPlan,
        line: impl Fn(u32, f64, u32) -> SecondLine,
    ) -> (Vec<StepPlan>, SearchOutcome) {
        let mut search = Search::new(plan);
        let mut second = 0;
        let mut seen = Vec::new();
        while let Some(step) = search.next_step(second) {
            seen.push(step);
            for i in 0..step.seconds {
                let over = search.on_second(&line(second, step.rate_per_s, i));
                second += 1;
                if over {
                    break;
                }
            }
            search.finish_step();
            second += 1; // the cool-down
            assert!(seen.len() < 60, "the search ends: {seen:?}");
        }
        (seen, search.outcome())
    }

    /// A search whose probe (20 req/s, every request ended) had these errors each second;
    /// after its probe.
    fn probe_with_errors(svc: &Simulated, errors: ErrorCounts) -> Search {
        let mut search = Search::new(plan());
        let step = search.next_step(0).unwrap();
        let mut line = svc.second(0, 20.0, 0);
        line.completed = 20;
        line.errors = errors;
        for i in 0..step.seconds {
            line.second = i;
            if search.on_second(&line) {
                break;
            }
        }
        assert_eq!(
            search.finish_step().unwrap().limited_by.as_deref(),
            Some("errors")
        );
        assert_eq!(search.next_step(5), None);
        search
    }

    #[test]
    fn expands_by_doubling_bisects_to_the_tolerance_and_confirms() {
        let svc = Simulated {
            capacity: 1000.0,
            latency_us: 4_000,
            slope_us: 0.0,
            dispatch_us: 100,
        };
        let (all, out) = drive(plan(), &svc);
        // Every failing expansion or bisection step is run twice, back to back.
        let failing: Vec<f64> = out
            .steps
            .iter()
            .filter(|s| s.verdict == Verdict::Fail)
            .map(|s| s.offered_rps)
            .collect();
        assert_eq!(failing, [1280.0, 1280.0, 1120.0, 1120.0, 1040.0, 1040.0]);
        let mut steps = all.clone();
        steps.dedup();
        let rates: Vec<f64> = steps.iter().map(|s| s.1).collect();
        // Probe 20, then doubling until 1280 fails.
        assert_eq!(steps[0], (Phase::Probe, 20.0));
        assert_eq!(&rates[1..7], &[40.0, 80.0, 160.0, 320.0, 640.0, 1280.0]);
        assert!(steps[1..7].iter().all(|s| s.0 == Phase::Expand));
        // Bisection between 640 and 1280: each midpoint of the bracket left.
        assert_eq!(steps[7], (Phase::Bisect, 960.0));
        assert_eq!(steps[8], (Phase::Bisect, 1120.0));
        assert_eq!(steps[9], (Phase::Bisect, 1040.0));
        assert_eq!(steps[10], (Phase::Bisect, 1000.0));
        // 960 passes, 1000 sits on capacity (passes), 1040 fails: 4 % ≤ 5 %, confirm 1000.
        assert_eq!(*steps.last().unwrap(), (Phase::Confirm, 1000.0));
        let (x, y) = (out.falls_over_rps.unwrap(), out.sustains_rps.unwrap());
        assert!(y <= svc.capacity && svc.capacity < x, "{y} {x}");
        assert!((x - y) / y <= 0.05);
        assert!(out.confirmed && out.complete, "{out:?}");
        assert_eq!(out.limited_by.as_deref(), Some("plateau"));
        // 1000 req/s × 4.1 ms = 4.1 requests in flight.
        assert_eq!(out.in_flight_at_knee, Some(4));
        assert!(
            out.statement.starts_with(
                "falls over at 1,040 req/s (limited by plateau); sustains 1,000 req/s with p99 4.1 ms (confirmed over 15 s); 4 requests in flight at the knee"
            ),
            "{}",
            out.statement
        );
        // The failing steps above capacity were cut short after 2 failing seconds.
        let failed: Vec<&StepResult> = out
            .steps
            .iter()
            .filter(|s| s.verdict == Verdict::Fail)
            .collect();
        assert!(
            failed.iter().all(|s| s.cut_short && s.seconds == 2),
            "{failed:?}"
        );
        // A wider tolerance stops sooner, with a wider bracket.
        let (wide, out) = drive(
            SearchPlan {
                tolerance: 0.2,
                ..plan()
            },
            &svc,
        );
        assert!(wide.len() < all.len());
        let (x, y) = (out.falls_over_rps.unwrap(), out.sustains_rps.unwrap());
        assert!((x - y) / y <= 0.2 && (x - y) / y > 0.05, "{y} {x}");
    }

    #[test]
    fn an_slo_breaks_before_capacity_and_names_its_percentile() {
        // Latency 5 ms + 0.1 ms per req/s: p99 < 50 ms holds up to 450 req/s.
        let svc = Simulated {
            capacity: 5000.0,
            latency_us: 5_000,
            slope_us: 100.0,
            dispatch_us: 100,
        };
        let mut p = plan();
        p.slo = Some(Slo::parse("p99<50ms, errors<1%").unwrap());
        let (_, out) = drive(p, &svc);
        let (x, y) = (out.falls_over_rps.unwrap(), out.sustains_rps.unwrap());
        assert!(y <= 450.0 && x > 450.0 && (x - y) / y <= 0.05, "{y} {x}");
        assert_eq!(out.limited_by.as_deref(), Some("p99"));
        assert!(
            out.rule.starts_with("SLO p99 < 50 ms, errors < 1 %"),
            "{}",
            out.rule
        );
        // Without the SLO, the capacity rule: p95 above twice the probe's (5 + 2 ms → 14 ms
        // is passed at 90 req/s).
        let (_, out) = drive(plan(), &svc);
        assert_eq!(out.limited_by.as_deref(), Some("p95"));
        let x = out.falls_over_rps.unwrap();
        assert!((90.0..=100.0).contains(&x), "{x}");
    }

    #[test]
    fn a_late_generator_is_retried_then_named_never_the_service() {
        let svc = Simulated {
            capacity: 1000.0,
            latency_us: 4_000,
            slope_us: 0.0,
            dispatch_us: 5_000,
        };
        let (steps, out) = drive(plan(), &svc);
        assert_eq!(steps, [(Phase::Probe, 20.0), (Phase::Probe, 20.0)]);
        assert_eq!(out.falls_over_rps, None);
        assert!(
            out.statement.contains(
                "the generator could not drive 20.0 req/s: dispatch delay p99 5 ms above 2 ms"
            ),
            "{}",
            out.statement
        );
    }

    #[test]
    fn a_probe_that_fails_is_halved_and_a_dead_target_ends_the_search() {
        // Capacity 12 req/s: the probe at 20 plateaus, 10 passes, then the search goes on.
        let svc = Simulated {
            capacity: 12.0,
            latency_us: 4_000,
            slope_us: 0.0,
            dispatch_us: 100,
        };
        let (steps, _) = drive(plan(), &svc);
        assert_eq!(
            &steps[..3],
            &[
                (Phase::Probe, 20.0),
                (Phase::Probe, 10.0),
                (Phase::Bisect, 15.0)
            ]
        );
        // Every request an error response (a 500 for everything): one probe, then the
        // search says so.
        let search = probe_with_errors(
            &svc,
            ErrorCounts {
                status: 20,
                ..ErrorCounts::default()
            },
        );
        assert_eq!(search.unreachable(), None);
        let out = search.outcome();
        assert!(
            out.statement
                .contains("search ended early: every request of the probe at 20.0 req/s failed"),
            "{}",
            out.statement
        );
    }

    #[test]
    fn a_probe_that_got_no_response_at_all_has_no_answer() {
        let svc = Simulated {
            capacity: 12.0,
            latency_us: 4_000,
            slope_us: 0.0,
            dispatch_us: 100,
        };
        // Nothing listens (connect errors), or connections are reset (transport errors):
        // the service was never measured, so it did not "fall over at 20 req/s".
        for (connect, transport) in [(20, 0), (0, 20), (12, 8)] {
            let search = probe_with_errors(
                &svc,
                ErrorCounts {
                    connect,
                    transport,
                    ..ErrorCounts::default()
                },
            );
            assert!(
                search.unreachable().is_some_and(
                    |u| u.starts_with("no request of the probe at 20.0 req/s got a response")
                ),
                "{:?}",
                search.unreachable()
            );
            let out = search.outcome();
            assert_eq!((out.falls_over_rps, out.sustains_rps), (None, None));
            assert!(!out.statement.contains("falls over"), "{}", out.statement);
            assert!(
                out.statement
                    .starts_with("no answer — search ended early: no request of the probe"),
                "{}",
                out.statement
            );
        }
    }

    #[test]
    fn lateness_is_judged_against_the_service_time() {
        // 3 ms of dispatch delay p99 (a busy machine's scheduling) next to a 50 ms service:
        // the search goes on and finds the capacity.
        let slow = Simulated {
            capacity: 400.0,
            latency_us: 50_000,
            slope_us: 0.0,
            dispatch_us: 3_000,
        };
        let (_, out) = drive(plan(), &slow);
        assert!(
            out.steps
                .iter()
                .all(|s| s.verdict != Verdict::GeneratorLimited),
            "{:?}",
            out.steps
        );
        let (x, y) = (out.falls_over_rps.unwrap(), out.sustains_rps.unwrap());
        assert!(y <= 400.0 && 400.0 < x && (x - y) / y <= 0.05, "{y} {x}");
        // The same 3 ms next to a 0.3 ms service is ten times the service: the generator
        // cannot drive it, and the search says so after one retry.
        let fast = Simulated {
            latency_us: 300,
            capacity: 20_000.0,
            ..slow
        };
        let (steps, out) = drive(plan(), &fast);
        assert_eq!(steps, [(Phase::Probe, 20.0), (Phase::Probe, 20.0)]);
        assert_eq!(out.falls_over_rps, None);
        assert!(
            out.statement.contains(
                "the generator could not drive 20.0 req/s: dispatch delay p99 3 ms above 2 ms"
            ),
            "{}",
            out.statement
        );
        // Between the two, the limit is half the service time p50: 3 ms is too late for a
        // 5 ms service, not for an 8 ms one.
        let (_, out) = drive(
            plan(),
            &Simulated {
                latency_us: 5_000,
                ..fast
            },
        );
        assert!(
            out.statement
                .contains("dispatch delay p99 3 ms above 2.5 ms (half the service time p50 5 ms)"),
            "{}",
            out.statement
        );
        let (_, out) = drive(
            plan(),
            &Simulated {
                latency_us: 8_000,
                capacity: 1_000.0,
                ..fast
            },
        );
        assert!(out.falls_over_rps.is_some(), "{}", out.statement);
        // --dispatch-limit, when given, is the limit whatever the service time.
        let (steps, _) = drive(
            SearchPlan {
                dispatch_limit_us: Some(2_000),
                ..plan()
            },
            &slow,
        );
        assert_eq!(steps, [(Phase::Probe, 20.0), (Phase::Probe, 20.0)]);
    }

    #[test]
    fn after_the_probe_lateness_only_turns_a_failing_step_generator_limited() {
        // 4 ms of service (limit 2 ms); from 600 req/s on the generator is 3 ms late, from
        // 1100 on a second (a failing step's queue slows the service, and half its service
        // time is the limit: hundreds of ms).
        let svc = Simulated {
            capacity: 1000.0,
            latency_us: 4_000,
            slope_us: 0.0,
            dispatch_us: 100,
        };
        let (_, out) = drive_lines(plan(), |second, rate, into| {
            let mut line = svc.second(second, rate, into);
            if rate >= 600.0 {
                let late_us = if rate >= 1100.0 { 1_000_000 } else { 3_000 };
                line.dispatch_us = new_us_histogram();
                line.dispatch_us.record_n(late_us, line.completed).unwrap();
            }
            line
        });
        // 640 passes all the same: a harder test, passed.
        let at_640 = out.steps.iter().find(|s| s.offered_rps == 640.0).unwrap();
        assert_eq!(at_640.verdict, Verdict::Pass, "{at_640:?}");
        assert!(
            at_640
                .reason
                .starts_with("passed although dispatch delay p99 3 ms above 2 ms"),
            "{}",
            at_640.reason
        );
        // 1280 fails while the generator is late: not the service's failure for sure; run
        // once more, then the search says what the generator could not drive, and why.
        let last: Vec<&StepResult> = out.steps.iter().rev().take(2).collect();
        assert!(
            last.iter().all(|s| s.offered_rps == 1280.0
                && s.verdict == Verdict::GeneratorLimited
                && s.limited_by.is_none()),
            "{last:?}"
        );
        assert_eq!(out.falls_over_rps, None);
        assert!(
            out.statement.contains(
                "the generator could not drive 1,280 req/s: dispatch delay p99 1.00 s above "
            ) && out.statement.contains("(half the service time p50")
                && out.statement.contains("the step failed (plateau: "),
            "{}",
            out.statement
        );
        // No request waited for a connection: no advice about them.
        assert!(
            !out.statement.contains("--max-connections"),
            "{}",
            out.statement
        );
    }

    #[test]
    fn connections_are_sized_by_littles_law_on_the_step_built_on() {
        // 400 req/s × 50 ms = 20 in flight: twice that and two spare.
        assert_eq!(connections_for(400.0, 50_000.0), 42);
        assert_eq!(connections_for(3_000.0, 10_000.0), 62);
        assert_eq!(connections_for(20.0, 0.0), SPARE_CONNECTIONS);
        let svc = Simulated {
            capacity: 1000.0,
            latency_us: 4_000,
            slope_us: 0.0,
            dispatch_us: 100,
        };
        let (planned, out) = drive_plans(plan(), &svc);
        // Nothing measured before the probe: the spare ones only.
        assert_eq!(planned[0].connections, SPARE_CONNECTIONS);
        // Each expansion on the step before it: 4 ms of service time.
        let expand: Vec<(f64, u32)> = planned
            .iter()
            .filter(|p| p.phase == Phase::Expand)
            .map(|p| (p.rate_per_s, p.connections))
            .collect();
        assert_eq!(expand[0], (40.0, connections_for(40.0, 4_000.0)));
        assert_eq!(expand[5], (1280.0, connections_for(1280.0, 4_000.0)));
        // After 1280 failed (its queue slowed every response by up to seconds), the
        // bisection is sized on the service of the highest passing step below it, not on
        // the failing step's queue.
        let bisect = planned.iter().find(|p| p.phase == Phase::Bisect).unwrap();
        assert_eq!(bisect.rate_per_s, 960.0);
        assert_eq!(bisect.connections, connections_for(960.0, 4_000.0));
        assert_eq!(bisect.connections, 10);
        // Each step's record says what it held and measured (HDR: within 0.1 %).
        assert_eq!(out.steps[0].connections_ahead, Some(SPARE_CONNECTIONS));
        let mean = out.steps[0].service_mean_ms.unwrap();
        assert!((mean - 4.0).abs() < 0.01, "{mean}");
    }

    #[test]
    fn max_rate_bounds_the_search() {
        let svc = Simulated {
            capacity: 1e9,
            latency_us: 1_000,
            slope_us: 0.0,
            dispatch_us: 100,
        };
        let (steps, out) = drive(
            SearchPlan {
                max_rate: 100.0,
                ..plan()
            },
            &svc,
        );
        assert_eq!(steps.last().unwrap().1, 100.0);
        assert_eq!(out.falls_over_rps, None);
        assert!(
            out.statement
                .starts_with("did not fall over up to 100 req/s"),
            "{}",
            out.statement
        );
    }

    #[test]
    fn slos_parse_and_refuse_what_they_cannot_judge() {
        let s = Slo::parse("p99<200ms,errors<1%").unwrap();
        assert_eq!(
            s.latency,
            [LatencyLimit {
                percentile: 99.0,
                limit_us: 200_000
            }]
        );
        assert_eq!(s.max_error_pct, Some(1.0));
        assert_eq!(Slo::parse("p99.9<1s").unwrap().describe(), "p99.9 < 1.00 s");
        for bad in [
            "",
            "p99>200ms",
            "p100<1s",
            "errors<1",
            "latency<5ms",
            "p99<fast",
        ] {
            assert!(Slo::parse(bad).is_err(), "{bad}");
        }
    }
}
