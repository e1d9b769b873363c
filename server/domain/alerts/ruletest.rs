//! `harrier rules test FILE`: unit tests for alert rules, after `promtool test rules`.
//!
//! A test file (TOML) holds rules, input series and the alerts expected at given times.
//! Series are cumulative counters per route written in promtool's expanding notation
//! (`0+60x3` = 0 60 120 180, `5x2` = 5 5 5, `_` = no sample), one value per `interval`.
//! At every `evaluation_interval` from 0 the rules are evaluated over the window ending
//! there: exchanges = Σ increases of `total`, errors = Σ increases of `failed` (resets
//! handled), over the samples in (t − window, t] — the figures the server computes from
//! scrapes. Only firing alerts are listed, as in promtool.
//!
//! Pool rules (`pool_usage_pct`, `pool_pending`) read gauge series instead: `active`, `max`
//! and `pending` (labels `service`, `instance`, `kind`, `pool`, …), one value per scrape,
//! summed over the samples in (t − window, t] as the server does
//! ([`crate::domain::pools::PoolWindow`]).
//!
//! ```toml
//! evaluation_interval = "1m"
//! interval = "1m"
//! [[rules]]                     # as in harrier.toml's [[alerts.rules]]
//! name = "RouteErrorRateHigh"
//! ...
//! [[series]]
//! labels = { service = "api", route = "/checkout" }
//! total = "0+72x41"
//! failed = "0x9 0+12x15 180x15"
//! [[tests]]
//! eval_time = "15m"
//! rule = "RouteErrorRateHigh"
//! exp_alerts = [{ labels = { route = "/checkout" }, summary = "…" }]
//! ```

use serde::Deserialize;

use super::eval::{self, Alert, Measured, Phase};
use super::rule::{Duration, Labels, Measure, Rule, render};
use crate::domain::pools::PoolWindow;
use crate::domain::routes::counter_delta;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    pub evaluation_interval: Duration,
    /// Time between two values of a series.
    pub interval: Duration,
    pub rules: Vec<Rule>,
    pub series: Vec<SeriesSpec>,
    pub tests: Vec<Expect>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesSpec {
    pub labels: Labels,
    /// Exchanges, cumulative (route rules).
    #[serde(default)]
    pub total: String,
    #[serde(default)]
    pub failed: Option<String>,
    /// A pool's gauges (pool rules): in use, max, waiting.
    #[serde(default)]
    pub active: Option<String>,
    #[serde(default)]
    pub max: Option<String>,
    #[serde(default)]
    pub pending: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub eval_time: Duration,
    pub rule: String,
    #[serde(default)]
    pub exp_alerts: Vec<ExpAlert>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpAlert {
    /// Labels the alert must carry (a subset of its labels).
    pub labels: Labels,
    #[serde(default)]
    pub summary: Option<String>,
}

/// Expands promtool's notation: `a+bxn` (n+1 values from a, step b), `a-bxn`, `axn`
/// (a, n+1 times), `_` (missing), `_xn`, or a plain number.
pub fn expand(spec: &str) -> Result<Vec<Option<f64>>, String> {
    let mut out = Vec::new();
    for tok in spec.split_whitespace() {
        let bad = || format!("{tok:?} is not a value, a+bxn, a-bxn, axn or _");
        let (head, times) = match tok.split_once('x') {
            Some((h, n)) => (h, Some(n.parse::<usize>().map_err(|_| bad())?)),
            None => (tok, None),
        };
        if head == "_" {
            out.extend(std::iter::repeat_n(None, times.map_or(1, |n| n + 1)));
            continue;
        }
        let (start, step) = match head[1..].find(['+', '-']).map(|p| p + 1) {
            Some(p) => {
                let step: f64 = head[p + 1..].parse().map_err(|_| bad())?;
                let sign = if &head[p..p + 1] == "-" { -1.0 } else { 1.0 };
                (head[..p].parse::<f64>().map_err(|_| bad())?, sign * step)
            }
            None => (head.parse::<f64>().map_err(|_| bad())?, 0.0),
        };
        match times {
            None => out.push(Some(start)),
            Some(n) => out.extend((0..=n).map(|i| Some(start + step * i as f64))),
        }
    }
    Ok(out)
}

struct Series {
    labels: Labels,
    total: Vec<Option<f64>>,
    failed: Vec<Option<f64>>,
    /// `(field, values)` of a pool's gauges.
    gauges: Vec<(&'static str, Vec<Option<f64>>)>,
}

/// Σ increases of `values` over the samples at indices whose time is in (from, to].
fn increase(values: &[Option<f64>], step_ms: i64, from_ms: i64, to_ms: i64) -> Option<f64> {
    let mut sum = None;
    let mut prev: Option<f64> = None;
    for (i, v) in values.iter().enumerate() {
        let t = i as i64 * step_ms;
        if t > to_ms {
            break;
        }
        if let Some(v) = v {
            if let Some(p) = prev
                && t > from_ms
            {
                *sum.get_or_insert(0.0) += counter_delta(p, *v);
            }
            prev = Some(*v);
        }
    }
    sum
}

fn measure(rule: &Rule, s: &Series, step_ms: i64, t: i64) -> Measured {
    let from = t - rule.window.ms();
    if rule.measure.for_pools() {
        let w = PoolWindow::of(s.gauges.iter().flat_map(|(field, values)| {
            values.iter().enumerate().filter_map(move |(i, v)| {
                let at = i as i64 * step_ms;
                (at > from && at <= t)
                    .then_some(())
                    .and(v.map(|v| (at, *field, v)))
            })
        }));
        return Measured {
            labels: s.labels.clone().into(),
            value: match rule.measure {
                Measure::PoolUsagePct => w.usage_pct,
                _ => w.pending,
            },
            count: Some(w.scrapes as f64),
        };
    }
    let total = increase(&s.total, step_ms, from, t);
    let failed = increase(&s.failed, step_ms, from, t);
    let secs = rule.window.ms() as f64 / 1000.0;
    let value = match rule.measure {
        Measure::ErrorPct => match (total, failed) {
            (Some(n), Some(f)) if n > 0.0 => Some(f / n * 100.0),
            _ => None,
        },
        Measure::ErrorsPerS => failed.map(|f| f / secs),
        Measure::ThroughputPerS => total.map(|n| n / secs),
        Measure::NoExchanges => Some(if total.unwrap_or(0.0) > 0.0 { 0.0 } else { 1.0 }),
        _ => None,
    };
    Measured {
        labels: s.labels.clone().into(),
        value,
        count: total,
    }
}

/// Runs the tests of one file; returns the failures (empty: all passed) or why the file
/// cannot be run.
pub fn run(text: &str) -> Result<Vec<String>, String> {
    let file: TestFile = toml::from_str(text).map_err(|e| e.to_string())?;
    for r in &file.rules {
        r.validate().map_err(|e| e.to_string())?;
        if !matches!(
            r.measure,
            Measure::ErrorPct
                | Measure::ErrorsPerS
                | Measure::ThroughputPerS
                | Measure::NoExchanges
                | Measure::PoolUsagePct
                | Measure::PoolPending
        ) {
            return Err(format!(
                "rule {:?}: rule tests cover error_pct, errors_per_s, throughput_per_s, no_exchanges, pool_usage_pct and pool_pending",
                r.name
            ));
        }
    }
    let series = file
        .series
        .iter()
        .map(|s| {
            Ok(Series {
                labels: s.labels.clone(),
                total: expand(&s.total)?,
                failed: expand(s.failed.as_deref().unwrap_or("0"))?
                    .into_iter()
                    .chain(std::iter::repeat(Some(0.0)))
                    .take(expand(&s.total)?.len().max(1))
                    .collect(),
                gauges: [
                    ("active", &s.active),
                    ("max", &s.max),
                    ("pending", &s.pending),
                ]
                .into_iter()
                .filter_map(|(f, spec)| spec.as_deref().map(|v| expand(v).map(|v| (f, v))))
                .collect::<Result<_, _>>()?,
            })
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(|e| format!("series: {e}"))?;
    let step = file.evaluation_interval.ms().max(1);
    let end = file
        .tests
        .iter()
        .map(|t| t.eval_time.ms())
        .max()
        .unwrap_or(0);
    let mut alerts: Vec<Alert> = Vec::new();
    let mut failures = Vec::new();
    let mut t = 0;
    while t <= end {
        let mut next = Vec::new();
        for rule in &file.rules {
            let measured: Vec<Measured> = series
                .iter()
                .filter(|s| rule.subject.matches(&s.labels))
                .map(|s| measure(rule, s, file.interval.ms().max(1), t))
                .collect();
            next.extend(eval::evaluate(rule, &measured, &alerts, t).alerts);
        }
        alerts = next;
        for exp in file.tests.iter().filter(|e| e.eval_time.ms() == t) {
            let Some(rule) = file.rules.iter().find(|r| r.name == exp.rule) else {
                failures.push(format!("{}: no rule named {:?}", exp.eval_time, exp.rule));
                continue;
            };
            let firing: Vec<&Alert> = alerts
                .iter()
                .filter(|a| a.rule == exp.rule && a.state == Phase::Firing)
                .collect();
            let shown = |a: &Alert| {
                let summary = rule
                    .summary
                    .as_deref()
                    .map(|s| render(s, rule, &a.labels, a.value));
                format!("{:?} summary {:?}", a.labels, summary.unwrap_or_default())
            };
            let matched = firing.len() == exp.exp_alerts.len()
                && exp.exp_alerts.iter().all(|e| {
                    firing.iter().any(|a| {
                        e.labels.iter().all(|(k, v)| a.labels.get(k) == Some(v))
                            && e.summary.as_ref().is_none_or(|s| {
                                rule.summary
                                    .as_deref()
                                    .map(|t| render(t, rule, &a.labels, a.value))
                                    == Some(s.clone())
                            })
                    })
                });
            if !matched {
                failures.push(format!(
                    "{} {}: expected {} firing alert(s) {:?}, got [{}]",
                    exp.eval_time,
                    exp.rule,
                    exp.exp_alerts.len(),
                    exp.exp_alerts.iter().map(|e| &e.labels).collect::<Vec<_>>(),
                    firing
                        .iter()
                        .map(|a| shown(a))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        t += step;
    }
    Ok(failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expanding_notation() {
        let v = |s: &str| expand(s).unwrap();
        assert_eq!(
            v("0+60x3"),
            [Some(0.0), Some(60.0), Some(120.0), Some(180.0)]
        );
        assert_eq!(
            v("5x2 _ 1-1x1"),
            [Some(5.0), Some(5.0), Some(5.0), None, Some(1.0), Some(0.0)]
        );
        assert_eq!(v("-2"), [Some(-2.0)]);
        assert!(expand("0+ax3").unwrap_err().contains("0+ax3"));
    }

    /// The promtool fixture (`promtool-route-error-rate.test.yml`) as a harrier rule test:
    /// same series (total = the 200 and 500 series added), same expected outcomes.
    const PROMTOOL_CASE: &str =
        include_str!("../../../tests/fixtures/alerts/route-error-rate.test.toml");

    #[test]
    fn the_promtool_fixture_passes() {
        assert_eq!(run(PROMTOOL_CASE).unwrap(), Vec::<String>::new());
    }

    /// An HTTP client pool of 20 that fills up under load: the usage rule fires after its
    /// `for`, the waiting rule only while requests wait, and both resolve when it drains.
    const POOL_CASE: &str = include_str!("../../../tests/fixtures/alerts/pool-full.test.toml");

    #[test]
    fn the_pool_rules_fixture_passes() {
        assert_eq!(run(POOL_CASE).unwrap(), Vec::<String>::new());
        // a wrong expectation fails: nothing is firing at 2m
        let wrong = POOL_CASE.replacen(
            "eval_time = \"2m\"",
            "eval_time = \"2m\"\nexp_alerts = [{ labels = { pool = \"inventory\" } }]",
            1,
        );
        assert_eq!(run(&wrong).unwrap().len(), 1);
    }

    #[test]
    fn a_wrong_expectation_is_reported() {
        let wrong = PROMTOOL_CASE.replacen(
            "eval_time = \"14m\"",
            "eval_time = \"14m\"\n        exp_alerts = [{ labels = { route = \"/checkout\" } }]",
            1,
        );
        let failures = run(&wrong).unwrap();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0].starts_with("14m RouteErrorRateHigh: expected 1"),
            "{}",
            failures[0]
        );
        assert!(
            run("evaluation_interval = 3")
                .unwrap_err()
                .contains("evaluation_interval")
        );
    }
}
