//! Arrival schedules of the open-model load generator: when each request is meant to start.
//!
//! Owns [`RateProfile`] (constant, ramp, steps), [`Schedule`] (a profile, a duration and
//! deterministic or Poisson arrivals) and [`Arrivals`], the iterator of intended start times.
//! Must not read the clock or sleep: the engine in `sources::load` turns these offsets into
//! instants.
//!
//! How arrivals are placed (one rule for every profile): the profile's cumulative expected
//! count H(t) = ∫₀ᵗ rate(u) du is inverted. Deterministic arrival k (0-based) starts at
//! t = H⁻¹(k), so a constant 500/s sends at 0, 2, 4 … ms and a run of D seconds holds
//! ⌈H(D)⌉ requests; Poisson arrival k starts at H⁻¹(E₁ + … + E_k) with Eᵢ ~ Exp(1), which
//! by the time-rescaling theorem is a Poisson process whose intensity follows the profile
//! (Brown et al. 2002, "The time-rescaling theorem and its application to neural spike
//! train data analysis"). wrk2 (`usec_to_next_send`) and vegeta (`lib/pacer.go`,
//! `ConstantPacer`, `LinearPacer`) pace the same way for their constant and linear cases.

use crate::domain::compare::bootstrap::Rng;

const NS_PER_S: f64 = 1e9;

/// How the offered rate (requests per second) changes over the run.
#[derive(Debug, Clone, PartialEq)]
pub enum RateProfile {
    /// The same rate throughout (`--rate 500`).
    Constant { rate_per_s: f64 },
    /// A linear change from `from_per_s` to `to_per_s` over `over_s` seconds, then `to_per_s`
    /// (`--rate 100..2000 --over 2m`).
    Ramp {
        from_per_s: f64,
        to_per_s: f64,
        over_s: f64,
    },
    /// Each rate for `step_s` seconds in turn, then the last one
    /// (`--steps 100,200,400 --step-duration 30s`).
    Steps { rates_per_s: Vec<f64>, step_s: f64 },
}

impl RateProfile {
    /// The profile with every rate multiplied by `share` (one generator's part of a rate
    /// split among several).
    pub fn scaled(&self, share: f64) -> RateProfile {
        match self {
            RateProfile::Constant { rate_per_s } => RateProfile::Constant {
                rate_per_s: rate_per_s * share,
            },
            RateProfile::Ramp {
                from_per_s,
                to_per_s,
                over_s,
            } => RateProfile::Ramp {
                from_per_s: from_per_s * share,
                to_per_s: to_per_s * share,
                over_s: *over_s,
            },
            RateProfile::Steps {
                rates_per_s,
                step_s,
            } => RateProfile::Steps {
                rates_per_s: rates_per_s.iter().map(|r| r * share).collect(),
                step_s: *step_s,
            },
        }
    }

    /// The highest rate the profile offers, requests per second.
    pub fn peak(&self) -> f64 {
        match self {
            RateProfile::Constant { rate_per_s } => *rate_per_s,
            RateProfile::Ramp {
                from_per_s,
                to_per_s,
                ..
            } => from_per_s.max(*to_per_s),
            RateProfile::Steps { rates_per_s, .. } => {
                rates_per_s.iter().copied().fold(0.0, f64::max)
            }
        }
    }

    /// The offered rate at `t_s` seconds from the start, requests per second.
    pub fn rate_at(&self, t_s: f64) -> f64 {
        match self {
            RateProfile::Constant { rate_per_s } => *rate_per_s,
            RateProfile::Ramp {
                from_per_s,
                to_per_s,
                over_s,
            } => {
                if t_s >= *over_s || *over_s <= 0.0 {
                    *to_per_s
                } else {
                    from_per_s + (to_per_s - from_per_s) * t_s / over_s
                }
            }
            RateProfile::Steps {
                rates_per_s,
                step_s,
            } => {
                let i = if *step_s > 0.0 {
                    (t_s / step_s).floor().max(0.0) as usize
                } else {
                    usize::MAX
                };
                rates_per_s
                    .get(i)
                    .or(rates_per_s.last())
                    .copied()
                    .unwrap_or(0.0)
            }
        }
    }

    /// H(t): requests expected in the first `t_s` seconds (∫₀ᵗ rate).
    pub fn expected_by(&self, t_s: f64) -> f64 {
        let t = t_s.max(0.0);
        match self {
            RateProfile::Constant { rate_per_s } => rate_per_s * t,
            RateProfile::Ramp {
                from_per_s: a,
                to_per_s: b,
                over_s: span,
            } => {
                if t <= *span {
                    a * t + (b - a) * t * t / (2.0 * span)
                } else {
                    (a + b) / 2.0 * span + b * (t - span)
                }
            }
            RateProfile::Steps {
                rates_per_s,
                step_s,
            } => {
                let mut h = 0.0;
                let mut start = 0.0;
                for (i, r) in rates_per_s.iter().enumerate() {
                    let last = i + 1 == rates_per_s.len();
                    let end = if last { f64::INFINITY } else { start + step_s };
                    if t <= end {
                        return h + r * (t - start);
                    }
                    h += r * step_s;
                    start = end;
                }
                h
            }
        }
    }

    /// H⁻¹(h): the time (s) by which `h` requests are expected; `None` when the profile never
    /// gets there (the rate falls to 0 for good).
    ///
    /// The inverse is taken as inf{t : H(t) > h}, so an arrival never falls in a stretch whose
    /// rate is 0 (a 0 step, the end of a ramp down to 0).
    pub fn time_of(&self, h: f64) -> Option<f64> {
        match self {
            RateProfile::Constant { rate_per_s } => (*rate_per_s > 0.0).then(|| h / rate_per_s),
            RateProfile::Ramp {
                from_per_s: a,
                to_per_s: b,
                over_s: span,
            } => {
                let h_span = (a + b) / 2.0 * span;
                if h <= 0.0 {
                    (*a > 0.0 || *b > 0.0).then_some(0.0)
                } else if h < h_span {
                    // Root of (b − a)/(2·span)·t² + a·t − h = 0, written so that it is exact
                    // for a = b and stable for a = 0 (no cancellation).
                    let disc = a * a + 2.0 * (b - a) * h / span;
                    let den = a + disc.max(0.0).sqrt();
                    (den > 0.0).then(|| 2.0 * h / den)
                } else {
                    (*b > 0.0).then(|| span + (h - h_span) / b)
                }
            }
            RateProfile::Steps {
                rates_per_s,
                step_s,
            } => {
                let mut h_start = 0.0;
                let mut start = 0.0;
                for (i, r) in rates_per_s.iter().enumerate() {
                    let last = i + 1 == rates_per_s.len();
                    let h_end = if last {
                        f64::INFINITY
                    } else {
                        h_start + r * step_s
                    };
                    if h < h_end && *r > 0.0 {
                        return Some(start + (h - h_start) / r);
                    }
                    h_start = h_end;
                    start += step_s;
                }
                None
            }
        }
    }

    /// For people: "constant 500/s", "ramp 100 → 2000/s over 120 s", "steps 100, 200/s × 30 s".
    pub fn describe(&self) -> String {
        fn r(v: f64) -> String {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v}")
            }
        }
        match self {
            RateProfile::Constant { rate_per_s } => format!("constant {}/s", r(*rate_per_s)),
            RateProfile::Ramp {
                from_per_s,
                to_per_s,
                over_s,
            } => format!(
                "ramp {} → {}/s over {} s",
                r(*from_per_s),
                r(*to_per_s),
                r(*over_s)
            ),
            RateProfile::Steps {
                rates_per_s,
                step_s,
            } => format!(
                "steps {}/s × {} s",
                rates_per_s
                    .iter()
                    .map(|v| r(*v))
                    .collect::<Vec<_>>()
                    .join(", "),
                r(*step_s)
            ),
        }
    }
}

/// A profile over a duration, with deterministic or Poisson arrivals.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub profile: RateProfile,
    /// Arrivals are scheduled in `[0, duration_s)`.
    pub duration_s: f64,
    /// Exponential gaps (a Poisson process following the profile) instead of even ones.
    pub poisson: bool,
    /// Seed of the Poisson gaps (the same seed gives the same arrivals).
    pub seed: u64,
}

impl Schedule {
    /// The intended start times, ns from the run's start, in order.
    pub fn arrivals(&self) -> Arrivals<'_> {
        Arrivals {
            schedule: self,
            k: 0,
            h: 0.0,
            h_end: self.expected_count(),
            rng: self.poisson.then(|| Rng::new(self.seed)),
        }
    }

    /// H(duration): a deterministic schedule sends ⌈H⌉ requests; the Poisson mean.
    pub fn expected_count(&self) -> f64 {
        self.profile.expected_by(self.duration_s)
    }

    /// For people: the profile, the duration and the arrival kind.
    pub fn describe(&self) -> String {
        format!(
            "{} for {} s{}",
            self.profile.describe(),
            self.duration_s,
            if self.poisson {
                ", Poisson arrivals"
            } else {
                ""
            }
        )
    }
}

/// The closed model: `users` each send a request, wait for its response, think, and send
/// the next (JMeter threads, Locust users, wrk connections). The rate follows the responses,
/// so a slow service is offered less load: each request is timed from its actual send, and
/// there is no coordinated-omission correction to make (nor one that could be made).
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedModel {
    pub users: u32,
    /// Pause between a response and the user's next request, s.
    pub think_s: f64,
    /// Users start requests in `[0, duration_s)`.
    pub duration_s: f64,
}

/// What drives the requests: an arrival schedule (open model) or users (closed model).
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    Open(Schedule),
    Closed(ClosedModel),
}

impl Workload {
    /// How long requests are started, s.
    pub fn duration_s(&self) -> f64 {
        match self {
            Workload::Open(s) => s.duration_s,
            Workload::Closed(c) => c.duration_s,
        }
    }

    /// The highest rate offered, requests per second; `None` for the closed model (its
    /// rate follows the responses).
    pub fn peak_rate(&self) -> Option<f64> {
        match self {
            Workload::Open(s) => Some(s.profile.peak()),
            Workload::Closed(_) => None,
        }
    }

    /// Part `index` of `parts` equal parts of an open workload (each generator offers
    /// 1/`parts` of every rate, with its own Poisson seed); `None` for the closed model.
    pub fn part(&self, index: u32, parts: u32) -> Option<Workload> {
        match self {
            Workload::Open(s) => Some(Workload::Open(Schedule {
                profile: s.profile.scaled(1.0 / f64::from(parts.max(1))),
                duration_s: s.duration_s,
                poisson: s.poisson,
                seed: s.seed.wrapping_add(u64::from(index)),
            })),
            Workload::Closed(_) => None,
        }
    }

    /// True for the open model.
    pub fn is_open(&self) -> bool {
        matches!(self, Workload::Open(_))
    }

    /// For people: the schedule, or "closed model: 10 users, think 100 ms, for 30 s".
    pub fn describe(&self) -> String {
        match self {
            Workload::Open(s) => s.describe(),
            Workload::Closed(c) => format!(
                "closed model: {} users, think {} ms, for {} s",
                c.users,
                (c.think_s * 1000.0).round(),
                c.duration_s
            ),
        }
    }
}

/// Intended start times (ns from the run's start), ascending, ending at the duration.
#[derive(Debug, Clone)]
pub struct Arrivals<'a> {
    schedule: &'a Schedule,
    k: u64,
    h: f64,
    /// H(duration): arrival k happens while its cumulative count is below it.
    h_end: f64,
    rng: Option<Rng>,
}

impl Iterator for Arrivals<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let h = match &mut self.rng {
            // 1 − U is in (0, 1]: the logarithm is finite.
            Some(rng) => self.h - (1.0 - rng.unit()).ln(),
            None => self.k as f64,
        };
        self.h = h;
        self.k += 1;
        if h >= self.h_end {
            return None;
        }
        let t_s = self.schedule.profile.time_of(h)?;
        (t_s < self.schedule.duration_s).then(|| (t_s * NS_PER_S).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_between(s: &Schedule, from_s: f64, to_s: f64) -> usize {
        s.arrivals()
            .filter(|&ns| ns as f64 >= from_s * NS_PER_S && (ns as f64) < to_s * NS_PER_S)
            .count()
    }

    fn schedule(profile: RateProfile, duration_s: f64) -> Schedule {
        Schedule {
            profile,
            duration_s,
            poisson: false,
            seed: 1,
        }
    }

    #[test]
    fn constant_rate_is_evenly_spaced() {
        let s = schedule(RateProfile::Constant { rate_per_s: 500.0 }, 2.0);
        let a: Vec<u64> = s.arrivals().collect();
        assert_eq!(a.len(), 1000);
        assert_eq!(&a[..3], &[0, 2_000_000, 4_000_000]);
        assert_eq!(*a.last().unwrap(), 1_998_000_000);
    }

    #[test]
    fn ramp_counts_follow_the_area_under_the_rate() {
        // 100 → 2000/s over 120 s: (100 + 2000) / 2 × 120 = 126,000 requests.
        let s = schedule(
            RateProfile::Ramp {
                from_per_s: 100.0,
                to_per_s: 2000.0,
                over_s: 120.0,
            },
            120.0,
        );
        assert_eq!(s.arrivals().count(), 126_000);
        // The first second offers ~100 requests, the last ~2000 (rate 1984.2 … 2000).
        assert_eq!(count_between(&s, 0.0, 1.0), 108);
        assert!((count_between(&s, 119.0, 120.0) as i64 - 1992).abs() <= 1);
        // Times never go backwards.
        let a: Vec<u64> = s.arrivals().collect();
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        // A ramp down, and a ramp from 0, hold the same rule.
        let down = schedule(
            RateProfile::Ramp {
                from_per_s: 200.0,
                to_per_s: 0.0,
                over_s: 10.0,
            },
            20.0,
        );
        assert_eq!(down.arrivals().count(), 1000);
        let up = schedule(
            RateProfile::Ramp {
                from_per_s: 0.0,
                to_per_s: 100.0,
                over_s: 10.0,
            },
            15.0,
        );
        assert_eq!(up.arrivals().count(), 500 + 500);
        assert_eq!(count_between(&up, 0.0, 1.0), 5);
    }

    #[test]
    fn steps_hold_each_rate_for_its_step() {
        let s = schedule(
            RateProfile::Steps {
                rates_per_s: vec![100.0, 200.0, 400.0],
                step_s: 30.0,
            },
            90.0,
        );
        assert_eq!(s.arrivals().count(), 3000 + 6000 + 12_000);
        assert_eq!(count_between(&s, 0.0, 30.0), 3000);
        assert_eq!(count_between(&s, 30.0, 60.0), 6000);
        assert_eq!(count_between(&s, 60.0, 90.0), 12_000);
        assert_eq!(count_between(&s, 45.0, 46.0), 200);
        // After the last step its rate holds; a 0 step sends nothing.
        let longer = schedule(
            RateProfile::Steps {
                rates_per_s: vec![10.0, 0.0, 20.0],
                step_s: 1.0,
            },
            5.0,
        );
        assert_eq!(count_between(&longer, 1.0, 2.0), 0);
        assert_eq!(longer.arrivals().count(), 10 + 20 * 3);
    }

    #[test]
    fn poisson_arrivals_have_the_offered_mean_and_exponential_gaps() {
        let s = Schedule {
            profile: RateProfile::Constant { rate_per_s: 1000.0 },
            duration_s: 100.0,
            poisson: true,
            seed: 42,
        };
        let a: Vec<u64> = s.arrivals().collect();
        // Mean 100,000, standard deviation √100,000 ≈ 316: within 4 σ.
        assert!((a.len() as i64 - 100_000).abs() < 1300, "{}", a.len());
        let gaps: Vec<f64> = a.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e6).collect();
        let mean_ms = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean_ms - 1.0).abs() < 0.02, "mean gap {mean_ms} ms");
        // Exponential: the coefficient of variation is 1 (even spacing would give 0), and
        // P(gap > mean) = e⁻¹ ≈ 0.368.
        let var = gaps.iter().map(|g| (g - mean_ms).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((var.sqrt() / mean_ms - 1.0).abs() < 0.03);
        let above = gaps.iter().filter(|&&g| g > mean_ms).count() as f64 / gaps.len() as f64;
        assert!((above - (-1f64).exp()).abs() < 0.01, "{above}");
        // Seeded: the same arrivals again; another seed, others.
        assert_eq!(s.arrivals().take(100).collect::<Vec<_>>(), a[..100]);
        let other = Schedule {
            seed: 7,
            ..s.clone()
        };
        assert_ne!(other.arrivals().take(100).collect::<Vec<_>>(), a[..100]);
        // A Poisson ramp follows the ramp: the second half holds 3× the first's requests.
        let ramp = Schedule {
            profile: RateProfile::Ramp {
                from_per_s: 0.0,
                to_per_s: 2000.0,
                over_s: 20.0,
            },
            duration_s: 20.0,
            poisson: true,
            seed: 3,
        };
        let first = count_between(&ramp, 0.0, 10.0) as f64;
        let second = count_between(&ramp, 10.0, 20.0) as f64;
        assert!((second / first - 3.0).abs() < 0.15, "{first} {second}");
    }

    #[test]
    fn describes_itself() {
        let s = schedule(
            RateProfile::Ramp {
                from_per_s: 100.0,
                to_per_s: 2000.0,
                over_s: 120.0,
            },
            120.0,
        );
        assert_eq!(s.describe(), "ramp 100 → 2000/s over 120 s for 120 s");
        assert_eq!(s.profile.rate_at(60.0), 1050.0);
    }
}
