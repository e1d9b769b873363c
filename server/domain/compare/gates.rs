//! Gates of `harrier check`: pass/fail rules over a run, absolute or relative to a
//! baseline, and their JUnit XML report.
//!
//! Grammar (one command-line argument per gate; spaces allowed):
//! - absolute: `[label=NAME ]FIGURE OP VALUE[UNIT]`, e.g. `p95<500ms`, `error_rate<1%`,
//!   `throughput>200/s`, `label=Login p95<300ms`, `mean <= 1.5s`;
//! - relative to the baseline: `[label=NAME ]FIGURE ±N%`, e.g. `p95 +10%` (p95 may rise by
//!   at most 10 %), `throughput -5%` (may fall by at most 5 %). The sign names the bad
//!   direction and must match the figure (`p95 -10%` is refused). For `error_rate` the
//!   number is in percentage points. A relative gate fails only when the change is beyond
//!   the tolerance AND the bootstrap verdict says `worse` (beyond the noise); when either
//!   run has no per-second data (summary-only) there is no verdict and the tolerance alone
//!   decides, which the message says.
//!
//! FIGURE: `p50` `p90` `p95` `p99` `mean` (`avg`) `max` (ms; units `ms`, `s`),
//! `error_rate` (`error_pct`, `errors`; unit `%`), `throughput` (`rps`, `tps`: every
//! completed request, failed ones included; units `/s`, `req/s`, `rps`, `tps`),
//! `successful_rps` (`goodput`, `successful`: requests that did not fail, per second; same
//! units), `capacity_rps` (`capacity`; req/s, the run total only): the run's stated
//! capacity — for a ramp, the successful throughput sustained up to the first sustained
//! breach; for a `harrier load find` run, the throughput at the rate it sustained (see
//! [`super::CAPACITY_METHOD`]), `capacity_users` (the active users there; a ramp only).
//! OP: `<` `<=` `>` `>=`. NAME may be quoted (`label="Get item"`).
//!
//! Capacity: `capacity_rps>200` passes on a capacity above 200 req/s, and on a ramp that
//! never saturated whose peak successful throughput is already above it (its capacity is
//! at least that); otherwise a run without a capacity fails, saying why (no ramp, no
//! answer). `capacity_rps -10%` fails when the capacity fell more than 10 % below the
//! baseline's AND beyond the noise (the change's 95 % interval, from both standard errors,
//! excludes 0; a search has no noise figure, so the tolerance alone decides); with no
//! capacity in either run it fails, saying which. A gate on a figure the run does not have
//! fails and says so.

use serde::{Deserialize, Serialize};

use super::{Better, Comparison, Figure, RunScope, Verdict};
use crate::domain::format;

/// A comparison operator of an absolute gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "≤",
            Op::Gt => ">",
            Op::Ge => "≥",
        }
    }
}

/// What a gate asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Rule {
    /// The run's figure must satisfy `figure OP limit` (limit in the figure's unit).
    Absolute { op: Op, limit: f64 },
    /// The change vs the baseline may not pass `tolerance` in the bad direction (% of the
    /// baseline; percentage points for error %).
    Relative { tolerance: f64 },
}

/// One parsed gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    /// As written.
    pub text: String,
    /// `None`: the run total.
    pub label: Option<String>,
    pub figure: Figure,
    pub rule: Rule,
}

/// A gate that does not parse: says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("gate {text:?}: {reason}")]
pub struct GateError {
    pub text: String,
    pub reason: String,
}

fn figure_of(name: &str) -> Option<Figure> {
    Some(match name.to_ascii_lowercase().as_str() {
        "p50" | "median" => Figure::P50Ms,
        "p90" => Figure::P90Ms,
        "p95" => Figure::P95Ms,
        "p99" => Figure::P99Ms,
        "mean" | "avg" | "average" => Figure::MeanMs,
        "max" => Figure::MaxMs,
        "error_rate" | "error_pct" | "errors" | "error" => Figure::ErrorPct,
        "throughput" | "rps" | "tps" => Figure::ThroughputRps,
        "successful_rps" | "successful" | "goodput" | "successful_throughput" => {
            Figure::SuccessfulRps
        }
        "capacity_rps" | "capacity" => Figure::CapacityRps,
        "capacity_users" => Figure::CapacityUsers,
        _ => return None,
    })
}

const FIGURES_HELP: &str = "p50, p90, p95, p99, mean, max, error_rate, throughput, successful_rps, capacity_rps or capacity_users";

/// Parses `VALUE[UNIT]` for `figure` into the figure's unit (ms, %, req/s).
fn value_of(figure: Figure, text: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let v: f64 = num
        .parse()
        .map_err(|_| format!("expected a number, got {t:?}"))?;
    let scale = match (figure, unit.to_ascii_lowercase().as_str()) {
        (Figure::ErrorPct, "%" | "") => 1.0,
        (
            Figure::ThroughputRps | Figure::SuccessfulRps | Figure::CapacityRps,
            "" | "/s" | "req/s" | "rps" | "tps" | "hits/s",
        ) => 1.0,
        (Figure::CapacityUsers, "" | "users" | "user" | "vus") => 1.0,
        (Figure::CapacityUsers, u) => {
            return Err(format!(
                "unit {u:?} does not fit users: give a number of users"
            ));
        }
        (
            Figure::ErrorPct | Figure::ThroughputRps | Figure::SuccessfulRps | Figure::CapacityRps,
            u,
        ) => {
            return Err(format!(
                "unit {u:?} does not fit {}: use {}",
                figure.name(),
                if figure == Figure::ErrorPct {
                    "%"
                } else {
                    "/s"
                }
            ));
        }
        (_, "" | "ms") => 1.0,
        (_, "s") => 1000.0,
        (_, u) => return Err(format!("unit {u:?} is not a time unit: use ms or s")),
    };
    Ok(v * scale)
}

/// Parses the expression after an optional label.
fn parse_expr(text: &str) -> Result<(Figure, Rule), String> {
    let t = text.trim();
    if let Some(pos) = t.find(['<', '>']) {
        let name = t[..pos].trim();
        let figure = figure_of(name)
            .ok_or_else(|| format!("unknown figure {name:?}: use {FIGURES_HELP}"))?;
        let rest = &t[pos..];
        let (op, rest) = if let Some(r) = rest.strip_prefix("<=") {
            (Op::Le, r)
        } else if let Some(r) = rest.strip_prefix(">=") {
            (Op::Ge, r)
        } else if let Some(r) = rest.strip_prefix('<') {
            (Op::Lt, r)
        } else {
            (Op::Gt, &rest[1..])
        };
        return Ok((
            figure,
            Rule::Absolute {
                op,
                limit: value_of(figure, rest)?,
            },
        ));
    }
    let Some(pos) = t.find(['+', '-']) else {
        return Err(format!(
            "expected FIGURE<VALUE (e.g. p95<500ms) or FIGURE +N% (e.g. p95 +10%), got {t:?}"
        ));
    };
    let name = t[..pos].trim();
    let figure =
        figure_of(name).ok_or_else(|| format!("unknown figure {name:?}: use {FIGURES_HELP}"))?;
    let rising = t[pos..].starts_with('+');
    let num = t[pos + 1..].trim();
    let num = num
        .strip_suffix('%')
        .ok_or_else(|| format!("a relative gate is a percentage, e.g. {name} +10%"))?;
    let tolerance: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("expected a number before %, got {num:?}"))?;
    let bad_is_rising = figure.better() == Better::Lower;
    if rising != bad_is_rising {
        return Err(format!(
            "{} gets worse when it {}: write {name} {}{tolerance}%",
            figure.name(),
            if bad_is_rising { "rises" } else { "falls" },
            if bad_is_rising { "+" } else { "-" },
        ));
    }
    Ok((figure, Rule::Relative { tolerance }))
}

/// Parses one gate argument.
pub fn parse(text: &str) -> Result<Gate, GateError> {
    let err = |reason: String| GateError {
        text: text.to_string(),
        reason,
    };
    let t = text.trim();
    let (label, expr) = match t.strip_prefix("label=") {
        None => (None, t.to_string()),
        Some(rest) if rest.starts_with('"') => {
            let end = rest[1..]
                .find('"')
                .ok_or_else(|| err("the label's closing quote is missing".into()))?;
            (Some(rest[1..=end].to_string()), rest[end + 2..].to_string())
        }
        Some(rest) => {
            // The label may hold spaces: it ends at the first space after which the rest
            // parses as a gate.
            let mut found = None;
            for (i, _) in rest.match_indices(' ') {
                if parse_expr(&rest[i + 1..]).is_ok() {
                    found = Some((rest[..i].to_string(), rest[i + 1..].to_string()));
                    break;
                }
            }
            match found {
                Some((l, e)) => (Some(l), e),
                None => {
                    return Err(err(
                        "expected label=NAME followed by a space and a gate, e.g. label=Login p95<300ms"
                            .into(),
                    ));
                }
            }
        }
    };
    if label.as_deref().is_some_and(str::is_empty) {
        return Err(err("the label is empty".into()));
    }
    let (figure, rule) = parse_expr(&expr).map_err(err)?;
    Ok(Gate {
        text: text.to_string(),
        label,
        figure,
        rule,
    })
}

/// A gate's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    /// Not judged: a relative gate without a baseline.
    Skipped,
}

/// One gate's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateResult {
    pub gate: String,
    pub label: Option<String>,
    pub figure: Figure,
    pub status: Status,
    /// The run's value of the figure.
    pub value: Option<f64>,
    /// The baseline's value (relative gates).
    pub baseline_value: Option<f64>,
    /// Why it passed or failed, for people.
    pub message: String,
}

fn scope<'a>(c: &'a Comparison, label: Option<&str>, run: usize) -> Option<&'a RunScope> {
    c.scope(label)
        .and_then(|s| s.runs.get(run))
        .filter(|r| r.present)
}

fn label_text(label: Option<&str>) -> String {
    label.map_or(String::new(), |l| format!(" of {l:?}"))
}

/// Evaluates `gates` on the last run of `comparison` (`[baseline, run]`, or `[run]` alone
/// when there is no baseline).
pub fn evaluate(gates: &[Gate], comparison: &Comparison) -> Vec<GateResult> {
    let run_idx = comparison.runs.len().saturating_sub(1);
    let has_baseline = comparison.runs.len() >= 2;
    gates
        .iter()
        .map(|g| {
            let label = g.label.as_deref();
            let f = g.figure;
            let run = scope(comparison, label, run_idx);
            let value = run.and_then(|r| r.get(f));
            let mut res = GateResult {
                gate: g.text.clone(),
                label: g.label.clone(),
                figure: f,
                status: Status::Fail,
                value,
                baseline_value: None,
                message: String::new(),
            };
            let what = format!("{}{}", f.name(), label_text(label));
            if run.is_none() {
                res.message = format!("the run has no label {:?}", label.unwrap_or(""));
                return res;
            }
            if matches!(f, Figure::CapacityRps | Figure::CapacityUsers) {
                capacity_gate(g, comparison, run_idx, has_baseline, &mut res);
                return res;
            }
            match &g.rule {
                Rule::Absolute { op, limit } => match value {
                    None => res.message = format!("{what} is not known for this run"),
                    Some(v) => {
                        let ok = op.holds(v, *limit);
                        res.status = if ok { Status::Pass } else { Status::Fail };
                        res.message = format!(
                            "{what} = {}, {} {} {}",
                            f.format(Some(v)),
                            if ok { "within" } else { "breaks" },
                            op.as_str(),
                            f.format(Some(*limit))
                        );
                    }
                },
                Rule::Relative { tolerance } => {
                    if !has_baseline {
                        res.status = Status::Skipped;
                        res.message = "no baseline to compare with".into();
                        return res;
                    }
                    let base = scope(comparison, label, 0);
                    res.baseline_value = base.and_then(|b| b.get(f));
                    let change = run.and_then(|r| r.change(f));
                    let effect = change.and_then(|c| {
                        if f == Figure::ErrorPct {
                            c.abs
                        } else {
                            c.pct
                        }
                    });
                    let Some(effect) = effect else {
                        res.message = format!("{what}: no change can be computed (baseline {}, run {})",
                            f.format(res.baseline_value), f.format(value));
                        return res;
                    };
                    let unit = if f == Figure::ErrorPct { " points" } else { " %" };
                    let bad_effect = if f.better() == Better::Higher { -effect } else { effect };
                    let beyond = bad_effect > *tolerance;
                    let verdict = change.and_then(|c| c.verdict);
                    let ci = change
                        .and_then(|c| c.ci_low.zip(c.ci_high))
                        .map(|(lo, hi)| {
                            format!(" (95 % interval {:+.1} … {:+.1}{unit})", lo, hi)
                        })
                        .unwrap_or_default();
                    let head = format!(
                        "{what} {} vs baseline {}: {:+.1}{unit}{ci}",
                        f.format(value),
                        f.format(res.baseline_value),
                        effect
                    );
                    let sign = if f.better() == Better::Higher { "-" } else { "+" };
                    let (status, why) = match (beyond, verdict) {
                        (false, _) => (Status::Pass, format!("within {sign}{tolerance}{unit}")),
                        (true, Some(Verdict::Worse)) => (
                            Status::Fail,
                            format!("beyond {sign}{tolerance}{unit} and beyond the noise"),
                        ),
                        (true, Some(_)) => (
                            Status::Pass,
                            format!(
                                "beyond {sign}{tolerance}{unit} but within the noise (or below the minimum effect)"
                            ),
                        ),
                        (true, None) => (
                            Status::Fail,
                            format!(
                                "beyond {sign}{tolerance}{unit}; no per-second data to judge the noise, so the tolerance alone decides"
                            ),
                        ),
                    };
                    res.status = status;
                    res.message = format!("{head} — {why}");
                }
            }
            res
        })
        .collect()
}

/// Judges a `capacity_rps` or `capacity_users` gate on run `run_idx` of `c` (see the
/// module docs).
fn capacity_gate(
    g: &Gate,
    c: &Comparison,
    run_idx: usize,
    has_baseline: bool,
    res: &mut GateResult,
) {
    let f = g.figure;
    res.status = Status::Fail;
    if g.label.is_some() {
        res.message = "capacity is a figure of the whole run, not of a label".into();
        return;
    }
    let Some(run) = c.capacity.get(run_idx) else {
        res.message = "capacity was not computed".into();
        return;
    };
    let value_of = |r: &super::RunCapacity| match f {
        Figure::CapacityUsers => r.knee_users.map(f64::from),
        _ => r.capacity_rps,
    };
    let peak_of = |r: &super::RunCapacity| match f {
        Figure::CapacityUsers => r.peak_users.map(f64::from),
        _ => r.peak_rps,
    };
    res.value = value_of(run);
    let said = |r: &super::RunCapacity| {
        r.statement.clone().unwrap_or_else(|| {
            "the load did not ramp and no search ran, so there is no capacity figure".into()
        })
    };
    let what = if f == Figure::CapacityUsers {
        "users at capacity"
    } else {
        "capacity"
    };
    if f == Figure::CapacityUsers && run.kind.as_deref() == Some("search") {
        res.message = format!(
            "{what} is not known for this run: a search offers rates, not users ({})",
            said(run)
        );
        return;
    }
    match &g.rule {
        Rule::Absolute { op, limit } => match (value_of(run), peak_of(run)) {
            (Some(v), _) => {
                let ok = op.holds(v, *limit);
                res.status = if ok { Status::Pass } else { Status::Fail };
                let at = match (f, run.kind.as_deref(), run.knee_users) {
                    (Figure::CapacityUsers, ..) => format!(" ({})", format::rps(run.capacity_rps)),
                    (_, Some("search"), _) => " (harrier load find)".to_string(),
                    (_, _, Some(u)) => format!(" at ~{} users", format::int(i64::from(u))),
                    _ => String::new(),
                };
                res.message = format!(
                    "{what} = {}{at}{}, {} {} {}",
                    f.format(Some(v)),
                    run.limited_by
                        .as_deref()
                        .map(|l| format!(", limited by {l}"))
                        .unwrap_or_default(),
                    if ok { "within" } else { "breaks" },
                    op.as_str(),
                    f.format(Some(*limit))
                );
            }
            (None, Some(peak)) if matches!(op, Op::Gt | Op::Ge) && op.holds(peak, *limit) => {
                res.status = Status::Pass;
                res.message = format!(
                    "{what} is at least the peak, {} {} {} ({})",
                    f.format(Some(peak)),
                    op.as_str(),
                    f.format(Some(*limit)),
                    said(run)
                );
            }
            _ => res.message = format!("{what} is not known for this run: {}", said(run)),
        },
        Rule::Relative { tolerance } => {
            if !has_baseline {
                res.status = Status::Skipped;
                res.message = "no baseline to compare with".into();
                return;
            }
            let base = &c.capacity[0];
            res.baseline_value = value_of(base);
            if f == Figure::CapacityUsers {
                let (Some(b), Some(v)) = (res.baseline_value, res.value) else {
                    res.message = format!(
                        "{what}: no change can be computed — baseline: {}; run: {}",
                        said(base),
                        said(run)
                    );
                    return;
                };
                let pct = if b > 0.0 { (v - b) / b * 100.0 } else { 0.0 };
                let ok = -pct <= *tolerance;
                res.status = if ok { Status::Pass } else { Status::Fail };
                res.message = format!(
                    "{what} {} vs baseline {}: {pct:+.1} % — {} -{tolerance} % (users are whole numbers: the tolerance alone decides)",
                    f.format(Some(v)),
                    f.format(Some(b)),
                    if ok { "within" } else { "beyond" }
                );
                return;
            }
            let change = run.change.as_ref();
            let Some(pct) = change.and_then(|c| c.pct) else {
                res.message = format!(
                    "capacity: no change can be computed — baseline: {}; run: {}",
                    said(base),
                    said(run)
                );
                return;
            };
            let ci = change
                .and_then(|c| c.ci_low.zip(c.ci_high))
                .map(|(lo, hi)| format!(" (95 % interval {lo:+.1} … {hi:+.1} %)"))
                .unwrap_or_default();
            let head = format!(
                "capacity {} vs baseline {}: {pct:+.1} %{ci}",
                f.format(run.capacity_rps),
                f.format(base.capacity_rps)
            );
            let beyond = -pct > *tolerance;
            let (status, why) = match (beyond, change.and_then(|c| c.verdict)) {
                (false, _) => (Status::Pass, format!("within -{tolerance} %")),
                (true, Some(Verdict::Worse)) => (
                    Status::Fail,
                    format!("capacity fell by more than {tolerance} % and by more than the noise"),
                ),
                (true, Some(_)) => (
                    Status::Pass,
                    format!(
                        "beyond -{tolerance} % but within the noise (or below the minimum effect)"
                    ),
                ),
                (true, None) => (
                    Status::Fail,
                    format!(
                        "beyond -{tolerance} %; the noise cannot be judged, so the tolerance alone decides"
                    ),
                ),
            };
            res.status = status;
            res.message = format!("{head} — {why}");
        }
    }
}

/// JUnit XML (the format Jenkins' JUnit plugin and GitLab's test reports read): one
/// `<testsuite>` for the check, one `<testcase>` per gate, `<failure>` or `<skipped>`.
pub fn junit_xml(suite: &str, results: &[GateResult]) -> String {
    use quick_xml::Writer;
    use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
    let failures = results.iter().filter(|r| r.status == Status::Fail).count();
    let skipped = results
        .iter()
        .filter(|r| r.status == Status::Skipped)
        .count();
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    // Writing into a Vec cannot fail.
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    let (tests, fails, skips) = (
        results.len().to_string(),
        failures.to_string(),
        skipped.to_string(),
    );
    let mut suites = BytesStart::new("testsuites");
    suites.push_attribute(("name", "harrier check"));
    suites.push_attribute(("tests", tests.as_str()));
    suites.push_attribute(("failures", fails.as_str()));
    let _ = w.write_event(Event::Start(suites));
    let mut ts = BytesStart::new("testsuite");
    ts.push_attribute(("name", suite));
    ts.push_attribute(("tests", tests.as_str()));
    ts.push_attribute(("failures", fails.as_str()));
    ts.push_attribute(("errors", "0"));
    ts.push_attribute(("skipped", skips.as_str()));
    let _ = w.write_event(Event::Start(ts));
    for r in results {
        let mut tc = BytesStart::new("testcase");
        tc.push_attribute(("name", r.gate.as_str()));
        tc.push_attribute(("classname", suite));
        tc.push_attribute(("time", "0"));
        let _ = w.write_event(Event::Start(tc));
        match r.status {
            Status::Pass => {
                let _ = w.write_event(Event::Start(BytesStart::new("system-out")));
                let _ = w.write_event(Event::Text(BytesText::new(&r.message)));
                let _ = w.write_event(Event::End(BytesEnd::new("system-out")));
            }
            Status::Fail => {
                let mut f = BytesStart::new("failure");
                f.push_attribute(("message", r.message.as_str()));
                f.push_attribute(("type", "gate"));
                let _ = w.write_event(Event::Start(f));
                let _ = w.write_event(Event::Text(BytesText::new(&r.message)));
                let _ = w.write_event(Event::End(BytesEnd::new("failure")));
            }
            Status::Skipped => {
                let mut s = BytesStart::new("skipped");
                s.push_attribute(("message", r.message.as_str()));
                let _ = w.write_event(Event::Empty(s));
            }
        }
        let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
    }
    let _ = w.write_event(Event::End(BytesEnd::new("testsuite")));
    let _ = w.write_event(Event::End(BytesEnd::new("testsuites")));
    let mut out = String::from_utf8(w.into_inner()).unwrap_or_default();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abs(figure: Figure, op: Op, limit: f64) -> (Figure, Rule) {
        (figure, Rule::Absolute { op, limit })
    }

    #[test]
    fn parses_every_documented_form() {
        let cases: &[(&str, Option<&str>, (Figure, Rule))] = &[
            ("p95<500ms", None, abs(Figure::P95Ms, Op::Lt, 500.0)),
            ("p99 <= 1.5s", None, abs(Figure::P99Ms, Op::Le, 1500.0)),
            ("error_rate<1%", None, abs(Figure::ErrorPct, Op::Lt, 1.0)),
            (
                "throughput>200/s",
                None,
                abs(Figure::ThroughputRps, Op::Gt, 200.0),
            ),
            ("mean>=10", None, abs(Figure::MeanMs, Op::Ge, 10.0)),
            (
                "label=Login p95<300ms",
                Some("Login"),
                abs(Figure::P95Ms, Op::Lt, 300.0),
            ),
            (
                "label=Get item p90<2s",
                Some("Get item"),
                abs(Figure::P90Ms, Op::Lt, 2000.0),
            ),
            (
                "label=\"Search, filtered\" max<9s",
                Some("Search, filtered"),
                abs(Figure::MaxMs, Op::Lt, 9000.0),
            ),
            (
                "p95 +10%",
                None,
                (Figure::P95Ms, Rule::Relative { tolerance: 10.0 }),
            ),
            (
                "throughput -5%",
                None,
                (Figure::ThroughputRps, Rule::Relative { tolerance: 5.0 }),
            ),
            (
                "label=Login error_rate +0.5%",
                Some("Login"),
                (Figure::ErrorPct, Rule::Relative { tolerance: 0.5 }),
            ),
            (
                "capacity_rps>150",
                None,
                abs(Figure::CapacityRps, Op::Gt, 150.0),
            ),
            (
                "capacity >= 80 req/s",
                None,
                abs(Figure::CapacityRps, Op::Ge, 80.0),
            ),
            (
                "capacity_rps -10%",
                None,
                (Figure::CapacityRps, Rule::Relative { tolerance: 10.0 }),
            ),
        ];
        for (text, label, (figure, rule)) in cases {
            let g = parse(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(g.label.as_deref(), *label, "{text}");
            assert_eq!(&g.figure, figure, "{text}");
            assert_eq!(&g.rule, rule, "{text}");
        }
    }

    #[test]
    fn malformed_gates_say_what_was_expected() {
        for (text, needle) in [
            ("p95", "expected FIGURE<VALUE"),
            ("p42<5ms", "unknown figure"),
            ("p95<fast", "expected a number"),
            ("p95<5%", "not a time unit"),
            ("error_rate<1ms", "does not fit"),
            ("p95 -10%", "gets worse when it rises"),
            ("throughput +5%", "gets worse when it falls"),
            ("capacity_rps +5%", "gets worse when it falls"),
            ("capacity_rps>5ms", "does not fit"),
            ("p95 +10", "percentage"),
            ("label=Login", "expected label=NAME"),
            ("label=\"Login p95<3", "closing quote"),
        ] {
            let e = parse(text).expect_err(text);
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn junit_parses_back() {
        let r = |gate: &str, status, message: &str| GateResult {
            gate: gate.into(),
            label: None,
            figure: Figure::P95Ms,
            status,
            value: Some(1.0),
            baseline_value: None,
            message: message.into(),
        };
        let xml = junit_xml(
            "checkout <run 7>",
            &[
                r("p95<500ms", Status::Pass, "p95 = 412 ms"),
                r(
                    "p99<1s",
                    Status::Fail,
                    "p99 = 1.20 s, breaks < \"1.00 s\" & more",
                ),
                r("p95 +10%", Status::Skipped, "no baseline"),
            ],
        );
        let mut reader = quick_xml::Reader::from_str(&xml);
        let (mut cases, mut failures, mut skipped) = (Vec::new(), Vec::new(), 0);
        let mut in_failure = false;
        loop {
            match reader.read_event().unwrap() {
                quick_xml::events::Event::Start(e) | quick_xml::events::Event::Empty(e) => {
                    let name = e.name().as_ref().to_vec();
                    let attr = |k: &str| {
                        e.attributes()
                            .flatten()
                            .find(|a| a.key.as_ref() == k.as_bytes())
                            .map(|a| a.unescape_value().unwrap().into_owned())
                    };
                    match name.as_slice() {
                        b"testsuite" => {
                            assert_eq!(attr("name").as_deref(), Some("checkout <run 7>"));
                            assert_eq!(attr("tests").as_deref(), Some("3"));
                            assert_eq!(attr("failures").as_deref(), Some("1"));
                            assert_eq!(attr("skipped").as_deref(), Some("1"));
                        }
                        b"testcase" => cases.push(attr("name").unwrap()),
                        b"failure" => {
                            in_failure = true;
                            failures.push(attr("message").unwrap());
                        }
                        b"skipped" => skipped += 1,
                        _ => {}
                    }
                }
                quick_xml::events::Event::Text(t) if in_failure => {
                    assert!(t.decode().unwrap().contains("breaks"));
                    in_failure = false;
                }
                quick_xml::events::Event::Eof => break,
                _ => {}
            }
        }
        assert_eq!(cases, ["p95<500ms", "p99<1s", "p95 +10%"]);
        assert_eq!(failures, ["p99 = 1.20 s, breaks < \"1.00 s\" & more"]);
        assert_eq!(skipped, 1);
    }

    /// A run without a knee: an absolute `>` gate passes on a peak already above the
    /// limit (capacity is at least the peak) and fails otherwise, saying why; a relative
    /// gate fails naming the run without a knee.
    #[test]
    fn capacity_gates_on_a_run_that_never_saturated() {
        use crate::domain::compare::{RunCapacity, capacity_changes};
        let run = |id, knee: Option<(f64, u32)>, peak: f64| RunCapacity {
            run_id: id,
            capacity_rps: knee.map(|k| k.0),
            knee_users: knee.map(|k| k.1),
            limited_by: knee.map(|_| "throughput".into()),
            kind: Some("ramp".into()),
            noise_rps: knee.map(|_| 1.0),
            peak_rps: Some(peak),
            peak_users: Some(24),
            statement: Some(match knee {
                Some(_) => "throughput stops growing".into(),
                None => format!("no saturation in this run: throughput grew to {peak} req/s"),
            }),
            change: None,
        };
        let mut capacity = vec![run(1, Some((100.0, 10)), 101.0), run(2, None, 60.0)];
        capacity_changes(&mut capacity, 5.0);
        let c = Comparison {
            runs: Vec::new(),
            min_effect_pct: 5.0,
            resamples: 0,
            confidence_pct: 95.0,
            method: String::new(),
            scopes: vec![super::super::ScopeComparison {
                label: None,
                runs: [1, 2]
                    .map(|id| super::super::RunScope {
                        run_id: id,
                        present: true,
                        count: Some(1),
                        error_pct: None,
                        mean_ms: None,
                        p50_ms: None,
                        p90_ms: None,
                        p95_ms: None,
                        p99_ms: None,
                        max_ms: None,
                        throughput_rps: None,
                        successful_rps: None,
                        changes: None,
                    })
                    .to_vec(),
            }],
            capacity,
        };
        let mut c = c;
        c.runs = [1, 2]
            .map(|id| super::super::RunRef {
                id,
                name: format!("r{id}"),
                scenario: None,
                tool: "k6".into(),
                summary_only: false,
                started_at_ms: None,
                imported_at_ms: 0,
                url: String::new(),
            })
            .to_vec();
        let gates: Vec<Gate> = ["capacity_rps>50", "capacity_rps>80", "capacity_rps -10%"]
            .iter()
            .map(|g| parse(g).unwrap())
            .collect();
        let r = evaluate(&gates, &c);
        assert_eq!(r[0].status, Status::Pass, "{}", r[0].message);
        assert!(
            r[0].message.contains("at least the peak"),
            "{}",
            r[0].message
        );
        assert_eq!(r[1].status, Status::Fail);
        assert!(
            r[1].message.contains("no saturation in this run"),
            "{}",
            r[1].message
        );
        assert_eq!(r[2].status, Status::Fail);
        assert!(
            r[2].message.contains("no change can be computed"),
            "{}",
            r[2].message
        );
    }

    /// A comparison of one run (no baseline) whose total has `throughput` and `successful`
    /// req/s and whose capacity is `capacity`.
    fn one_run(throughput: f64, successful: f64, capacity: RunCapacityFor) -> Comparison {
        let mut scope = super::super::RunScope {
            run_id: 1,
            present: true,
            count: Some(1000),
            error_pct: Some(100.0 * (1.0 - successful / throughput)),
            mean_ms: None,
            p50_ms: None,
            p90_ms: None,
            p95_ms: None,
            p99_ms: None,
            max_ms: None,
            throughput_rps: Some(throughput),
            successful_rps: Some(successful),
            changes: None,
        };
        scope.changes = None;
        Comparison {
            runs: Vec::new(),
            min_effect_pct: 5.0,
            resamples: 0,
            confidence_pct: 95.0,
            method: String::new(),
            scopes: vec![super::super::ScopeComparison {
                label: None,
                runs: vec![scope],
            }],
            capacity: vec![capacity.0],
        }
    }

    struct RunCapacityFor(crate::domain::compare::RunCapacity);

    /// A run with 87 % errors: its throughput counts the failures, its successful
    /// throughput does not; a ramp's stated capacity is gated on successful requests, a
    /// search's on its sustained rate, and a figure the run lacks fails saying so.
    #[test]
    fn successful_throughput_and_capacity_gates_read_what_the_run_states() {
        use crate::domain::compare::RunCapacity;
        let ramp = RunCapacity {
            run_id: 1,
            capacity_rps: Some(398.0),
            knee_users: Some(20),
            limited_by: Some("throughput".into()),
            kind: Some("ramp".into()),
            noise_rps: Some(2.0),
            peak_rps: Some(401.0),
            peak_users: Some(80),
            statement: Some("saturates at ~20 users, 398.0 req/s successful".into()),
            change: None,
        };
        let c = one_run(3000.0, 390.0, RunCapacityFor(ramp));
        let gates: Vec<Gate> = [
            "throughput>1000",
            "successful_rps>1000",
            "goodput>=390",
            "capacity_rps>1000",
            "capacity_rps>300",
            "capacity_users>=20",
            "capacity_users>25",
        ]
        .iter()
        .map(|g| parse(g).unwrap())
        .collect();
        let r = evaluate(&gates, &c);
        let status: Vec<Status> = r.iter().map(|r| r.status).collect();
        use Status::{Fail, Pass};
        assert_eq!(
            status,
            [Pass, Fail, Pass, Fail, Pass, Pass, Fail],
            "{:#?}",
            r.iter().map(|r| &r.message).collect::<Vec<_>>()
        );
        assert!(r[3].message.contains("at ~20 users"), "{}", r[3].message);
        assert!(
            r[3].message.contains("limited by throughput"),
            "{}",
            r[3].message
        );

        // A search: its answer is the capacity; it has no users.
        let search = RunCapacity {
            run_id: 1,
            capacity_rps: Some(401.5),
            knee_users: None,
            limited_by: Some("plateau".into()),
            kind: Some("search".into()),
            noise_rps: None,
            peak_rps: None,
            peak_users: None,
            statement: Some("falls over at 412 req/s (limited by plateau)".into()),
            change: None,
        };
        let c = one_run(400.0, 400.0, RunCapacityFor(search));
        let gates: Vec<Gate> = ["capacity_rps>380", "capacity_rps>420", "capacity_users>1"]
            .iter()
            .map(|g| parse(g).unwrap())
            .collect();
        let r = evaluate(&gates, &c);
        assert_eq!(r[0].status, Pass, "{}", r[0].message);
        assert!(
            r[0].message.contains("harrier load find"),
            "{}",
            r[0].message
        );
        assert_eq!(r[1].status, Fail, "{}", r[1].message);
        assert_eq!(r[2].status, Fail);
        assert!(r[2].message.contains("not known"), "{}", r[2].message);

        // No capacity at all (the load did not ramp, no search): fails, saying so.
        let none = RunCapacity {
            run_id: 1,
            capacity_rps: None,
            knee_users: None,
            limited_by: None,
            kind: None,
            noise_rps: None,
            peak_rps: None,
            peak_users: None,
            statement: None,
            change: None,
        };
        let c = one_run(400.0, 400.0, RunCapacityFor(none));
        let r = evaluate(&[parse("capacity_rps>1").unwrap()], &c);
        assert_eq!(r[0].status, Fail);
        assert!(
            r[0].message.contains("no capacity figure"),
            "{}",
            r[0].message
        );
    }
}
