//! The steps of a route (Camel's processors: `to`, `choice`, `split`, …): how they nest,
//! their figures over a window, and the step that gives way as the load rises.
//!
//! Definitions (docs/routes.md, "Steps"):
//! - a step's throughput, error %, mean and max are a route's ([`super::Figures`]) over the
//!   step's own counters; a step's time includes the steps nested in it (Camel times a
//!   `choice` around the `when` it runs);
//! - **self time** = the step's Δtotal processing time − its children's, per exchange of
//!   the step (never below 0): the time spent in the step itself;
//! - the **slowest step** has the largest share of the route's self time over the window
//!   (Σ self time of the step / Σ self time of all steps);
//! - the **step that gives way** (for a run that loaded the route's service: its levels
//!   are its virtual-user counts, or a rate search's offered rates; each scrape's step
//!   figures count at the level of the scrape interval's midpoint): over the levels in
//!   rising order, the first level where
//!   a step's self time passes twice its self time at the lowest level and grew by at
//!   least [`MIN_GROWTH_MS`]; of the steps that do so there, the one that grew most. The
//!   other steps are "flat" when none of them grew by as much as half its own.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Figures, Observation};

/// Growth of a step's self time below which it is not giving way, ms (the resolution of
/// Camel's times).
pub const MIN_GROWTH_MS: f64 = 1.0;
/// A step gives way when its self time passes this multiple of its lowest-load value.
pub const GROWTH_FACTOR: f64 = 2.0;

/// One step as a scrape read it.
#[derive(Debug, Clone)]
pub struct StepObservation {
    /// The Camel context (`CamelId`).
    pub context: Option<String>,
    /// The route it belongs to (`RouteId`).
    pub route: String,
    /// Its id in the route (`ProcessorId`: `to1`, `choice2`).
    pub step: String,
    /// What it is (`ProcessorName`: `to`, `choice`, `when`, `split`, `log`, …).
    pub kind: String,
    /// The step it is nested in; `None` at the route's top level.
    pub parent: Option<String>,
    /// Depth-first position in the route (Camel's `Index`).
    pub index: i64,
    /// Nesting depth, 1 at the top (Camel's `Level`).
    pub level: i64,
    /// A send step's endpoint URI (`Destination`).
    pub destination: Option<String>,
    /// Its counters (named by the step id).
    pub counters: Observation,
}

/// Sorts steps by context, route and position, and gives each step without a parent
/// whose level is below the top the nearest earlier step of that route one level up.
pub fn arrange(mut steps: Vec<StepObservation>) -> Vec<StepObservation> {
    steps.sort_by(|a, b| {
        (&a.context, &a.route, a.index, &a.step).cmp(&(&b.context, &b.route, b.index, &b.step))
    });
    for i in 0..steps.len() {
        if steps[i].parent.is_some() || steps[i].level <= 1 {
            continue;
        }
        let (context, route, level) = (
            steps[i].context.clone(),
            steps[i].route.clone(),
            steps[i].level,
        );
        let parent = steps[..i]
            .iter()
            .rev()
            .take_while(|p| p.context == context && p.route == route)
            .find(|p| p.level == level - 1)
            .map(|p| p.step.clone());
        steps[i].parent = parent;
    }
    steps
}

/// A step's shape as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepShape {
    /// Its store id.
    pub id: i64,
    pub step: String,
    pub kind: String,
    pub parent: Option<String>,
    pub index: i64,
    pub level: i64,
    pub destination: Option<String>,
    /// The last scrape that had it, unix ms.
    pub last_seen_ms: i64,
}

impl StepShape {
    /// How the console names it: `to(http://legacy/stock)`, `choice`, `split`.
    pub fn label(&self) -> String {
        match &self.destination {
            Some(d) => format!("{}({d})", self.kind),
            None => self.kind.clone(),
        }
    }
}

/// A step's figures over a window (`GET /api/v1/routes/{id}/steps`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepRow {
    #[serde(flatten)]
    pub shape: StepShape,
    /// [`StepShape::label`].
    pub label: String,
    /// Exchanges through the step in the window.
    pub exchanges: Option<f64>,
    pub throughput_per_s: Option<f64>,
    pub error_pct: Option<f64>,
    /// Mean time per completed exchange, nested steps included, ms.
    pub mean_ms: Option<f64>,
    /// Mean self time per completed exchange (without the nested steps), ms.
    pub self_ms: Option<f64>,
    /// Share of the route's self time spent in this step over the window, %.
    pub self_share_pct: Option<f64>,
    /// Camel's `MaxProcessingTime` at the last scrape (since the statistics were reset), ms.
    pub max_ms: Option<f64>,
    pub inflight: Option<f64>,
    /// The step with the largest share of self time.
    pub slowest: bool,
    /// Failed exchanges in the window.
    pub failing: bool,
    /// Gone from the agent's latest scrape (a redeploy removed it).
    pub gone: bool,
}

/// The rows of a route's steps from their shapes and figures over a window, in route
/// order. `latest_ms`: the route's latest scrape; a step not seen there is `gone`.
pub fn rows(steps: Vec<(StepShape, Figures)>, latest_ms: i64) -> Vec<StepRow> {
    let total_s: BTreeMap<&str, f64> = steps
        .iter()
        .map(|(s, f)| (s.step.as_str(), f.duration_sum_s.unwrap_or(0.0)))
        .collect();
    let mut children_s: BTreeMap<&str, f64> = BTreeMap::new();
    for (s, f) in &steps {
        if let Some(p) = &s.parent {
            *children_s.entry(p.as_str()).or_default() += f.duration_sum_s.unwrap_or(0.0);
        }
    }
    let self_s: Vec<f64> = steps
        .iter()
        .map(|(s, _)| {
            (total_s[s.step.as_str()] - children_s.get(s.step.as_str()).copied().unwrap_or(0.0))
                .max(0.0)
        })
        .collect();
    let all_self: f64 = self_s.iter().sum();
    let slowest = self_s
        .iter()
        .enumerate()
        .filter(|(_, v)| **v > 0.0)
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i);
    steps
        .iter()
        .enumerate()
        .map(|(i, (s, f))| {
            let count = f.duration_count.filter(|c| *c > 0.0);
            StepRow {
                label: s.label(),
                exchanges: f.exchanges,
                throughput_per_s: f.throughput_per_s(),
                error_pct: f.error_pct(),
                mean_ms: f.mean_ms(),
                self_ms: count.map(|c| self_s[i] / c * 1000.0),
                self_share_pct: (all_self > 0.0).then(|| self_s[i] / all_self * 100.0),
                max_ms: f.max_ms(),
                inflight: f.inflight,
                slowest: slowest == Some(i),
                failing: f.failed.is_some_and(|n| n > 0.0),
                gone: s.last_seen_ms < latest_ms,
                shape: s.clone(),
            }
        })
        .collect()
}

/// Self time per exchange of each step from figures over one span (a load level): step →
/// ms. Steps without completed exchanges there are left out.
pub fn self_times(steps: &[(StepShape, Figures)]) -> BTreeMap<String, f64> {
    rows(steps.to_vec(), i64::MIN)
        .into_iter()
        .filter_map(|r| r.self_ms.map(|v| (r.shape.step, v)))
        .collect()
}

/// The step that gave way: where, and by how much.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GivesWay {
    pub step: String,
    /// [`StepShape::label`].
    pub label: String,
    /// The load of the level where it gave way, in `unit`.
    pub load: f64,
    /// `users` (a ramp of virtual users) or `req/s offered` (a rate search).
    pub unit: String,
    /// Its self time at the lowest level, ms.
    pub from_ms: f64,
    /// Its self time at that level, ms.
    pub to_ms: f64,
    /// Whether every other step stayed within half its own growth.
    pub others_flat: bool,
    /// "at ~20 users to(http://legacy/stock) self time 12 → 480 ms; other steps flat".
    pub sentence: String,
}

/// The step that gives way over `levels` (load in `unit`, step → self time ms), taken in
/// rising order of load; `labels` names the steps. `None` when no step's self time
/// passes [`GROWTH_FACTOR`]× its lowest-level value by [`MIN_GROWTH_MS`].
pub fn gives_way(
    levels: &[(f64, BTreeMap<String, f64>)],
    labels: &BTreeMap<String, String>,
    unit: &str,
) -> Option<GivesWay> {
    let mut levels: Vec<&(f64, BTreeMap<String, f64>)> = levels.iter().collect();
    levels.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (first, rest) = levels.split_first()?;
    let base = &first.1;
    for (load, times) in rest {
        let growth = |step: &str, at: f64| base.get(step).map(|b| (at - b, *b));
        let grown: Vec<(&String, f64, f64, f64)> = times
            .iter()
            .filter_map(|(step, at)| {
                let (g, b) = growth(step, *at)?;
                (*at > GROWTH_FACTOR * b && g >= MIN_GROWTH_MS).then_some((step, g, b, *at))
            })
            .collect();
        let Some(&(step, g, from_ms, to_ms)) = grown.iter().max_by(|a, b| a.1.total_cmp(&b.1))
        else {
            continue;
        };
        let others_flat = times
            .iter()
            .filter(|(s, _)| *s != step)
            .all(|(s, at)| growth(s, *at).is_none_or(|(og, _)| og < g / 2.0));
        let label = labels.get(step).cloned().unwrap_or_else(|| step.clone());
        let sentence = format!(
            "at ~{} {unit} {label} self time {} → {} ms; {}",
            load.round(),
            crate::domain::format::float(from_ms, 1),
            crate::domain::format::float(to_ms, 1),
            if others_flat {
                "other steps flat".to_string()
            } else {
                "other steps grew too".to_string()
            }
        );
        return Some(GivesWay {
            step: step.clone(),
            label,
            load: *load,
            unit: unit.to_string(),
            from_ms,
            to_ms,
            others_flat,
            sentence,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::routes::Source;

    fn obs(route: &str, step: &str, index: i64, level: i64) -> StepObservation {
        StepObservation {
            context: Some("shop".into()),
            route: route.into(),
            step: step.into(),
            kind: "to".into(),
            parent: None,
            index,
            level,
            destination: None,
            counters: Observation::new("s", step, Source::Jolokia),
        }
    }

    #[test]
    fn steps_nest_by_level_when_the_agent_names_no_parent() {
        let out = arrange(vec![
            obs("orders", "split1", 6, 1),
            obs("orders", "to1", 3, 3),
            obs("orders", "when1", 2, 2),
            obs("orders", "choice1", 1, 1),
            obs("orders", "otherwise1", 4, 2),
            obs("orders", "to2", 5, 3),
            obs("orders", "marshal1", 7, 2),
            obs("audit", "log2", 0, 1),
        ]);
        let parent_of: Vec<(String, Option<String>)> = out
            .iter()
            .map(|s| (s.step.clone(), s.parent.clone()))
            .collect();
        let p = |s: &str| Some(s.to_string());
        assert_eq!(
            parent_of,
            vec![
                ("log2".into(), None),
                ("choice1".into(), None),
                ("when1".into(), p("choice1")),
                ("to1".into(), p("when1")),
                ("otherwise1".into(), p("choice1")),
                ("to2".into(), p("otherwise1")),
                ("split1".into(), None),
                ("marshal1".into(), p("split1")),
            ]
        );
    }

    fn shape(step: &str, parent: Option<&str>) -> StepShape {
        StepShape {
            id: 0,
            step: step.into(),
            kind: "to".into(),
            parent: parent.map(str::to_string),
            index: 0,
            level: 1,
            destination: None,
            last_seen_ms: 10,
        }
    }

    fn fig(count: f64, total_s: f64, failed: f64) -> Figures {
        Figures {
            span_ms: 10_000,
            exchanges: Some(count),
            failed: Some(failed),
            duration_sum_s: Some(total_s),
            duration_count: Some(count - failed),
            ..Default::default()
        }
    }

    #[test]
    fn self_time_leaves_out_the_nested_steps_and_names_the_slowest() {
        let rows = rows(
            vec![
                (shape("choice1", None), fig(10.0, 2.2, 0.0)),
                (shape("to1", Some("choice1")), fig(10.0, 2.0, 0.0)),
                (shape("marshal1", None), fig(30.0, 0.3, 3.0)),
            ],
            10,
        );
        let by = |s: &str| rows.iter().find(|r| r.shape.step == s).unwrap();
        assert!((by("choice1").self_ms.unwrap() - 20.0).abs() < 1e-9);
        assert!((by("choice1").mean_ms.unwrap() - 220.0).abs() < 1e-9);
        assert!((by("to1").self_ms.unwrap() - 200.0).abs() < 1e-9);
        assert!((by("marshal1").self_ms.unwrap() - 300.0 / 27.0).abs() < 1e-9);
        assert!(by("to1").slowest && !by("choice1").slowest);
        let share: f64 = rows.iter().map(|r| r.self_share_pct.unwrap()).sum();
        assert!((share - 100.0).abs() < 1e-9);
        assert!((by("to1").self_share_pct.unwrap() - 2.0 / 2.5 * 100.0).abs() < 1e-9);
        assert!(by("marshal1").failing && !by("to1").failing);
        assert_eq!(by("to1").throughput_per_s, Some(1.0));
        // A redeploy took a step away: not seen at the route's latest scrape, it is gone;
        // the rest are not.
        let mut old = shape("log9", None);
        old.last_seen_ms = 4;
        let after = super::rows(
            vec![
                (old, Figures::default()),
                (shape("to1", None), fig(1.0, 0.01, 0.0)),
            ],
            10,
        );
        assert!(after[0].gone && !after[1].gone);
        assert_eq!(after[0].exchanges, None);
    }

    #[test]
    fn the_step_that_gives_way_is_the_first_to_double_and_the_one_that_grew_most() {
        let level = |users: f64, times: &[(&str, f64)]| {
            (
                users,
                times
                    .iter()
                    .map(|(s, v)| (s.to_string(), *v))
                    .collect::<BTreeMap<_, _>>(),
            )
        };
        let labels = BTreeMap::from([("to1".to_string(), "to(http://legacy/stock)".to_string())]);
        let levels = vec![
            level(20.0, &[("to1", 480.0), ("marshal1", 2.1), ("log1", 0.1)]),
            level(5.0, &[("to1", 12.0), ("marshal1", 2.0), ("log1", 0.1)]),
            level(10.0, &[("to1", 13.0), ("marshal1", 2.0), ("log1", 0.3)]),
        ];
        let g = gives_way(&levels, &labels, "users").unwrap();
        assert_eq!(g.step, "to1");
        assert_eq!(g.load, 20.0);
        assert!(g.others_flat);
        assert_eq!(
            g.sentence,
            "at ~20 users to(http://legacy/stock) self time 12.0 → 480.0 ms; other steps flat"
        );
        // log1 tripled at 10 users but by 0.2 ms: under the 1 ms floor, not giving way.
        // Nothing grows: no answer.
        let flat = vec![level(5.0, &[("to1", 12.0)]), level(10.0, &[("to1", 13.0)])];
        assert_eq!(gives_way(&flat, &labels, "users"), None);
        // Two steps grow at once: the larger growth, and the others are not flat.
        let both = vec![
            level(5.0, &[("to1", 10.0), ("marshal1", 2.0)]),
            level(10.0, &[("to1", 40.0), ("marshal1", 30.0)]),
        ];
        let g = gives_way(&both, &labels, "req/s offered").unwrap();
        assert!(
            g.sentence
                .starts_with("at ~10 req/s offered to(http://legacy/stock)"),
            "{}",
            g.sentence
        );
        assert_eq!(g.step, "to1");
        assert!(!g.others_flat);
        assert_eq!(gives_way(&[], &labels, "users"), None);
    }
}
