//! Verdicts on synthetic runs with a known shift, with pure noise, and the min-effect rule.

use super::bootstrap::Rng;
use super::*;
use crate::domain::runs::hdr::{new_histogram, serialize_histogram};
use crate::domain::runs::nearest_rank;

/// A synthetic run: `seconds` seconds of `per_s` samples whose latency is lognormal around
/// `median_ms` × `factor`, with a slow per-second drift (AR(1)) so seconds are correlated,
/// as in real runs. `errors_per_mille` of the samples fail.
pub fn synthetic(
    id: i64,
    seed: u64,
    seconds: i64,
    per_s: usize,
    median_ms: f64,
    factor: f64,
    errors_per_mille: u64,
) -> RunInput {
    synthetic_drift(
        id,
        seed,
        seconds,
        per_s,
        median_ms,
        factor,
        errors_per_mille,
        0.04,
        0,
    )
}

/// [`synthetic`] with the per-second drift's innovation (0: independent seconds) and a
/// load ramp over the first `ramp_s` seconds (requests per second and response times grow
/// with the load, as when users are added).
#[expect(clippy::too_many_arguments)]
pub fn synthetic_drift(
    id: i64,
    seed: u64,
    seconds: i64,
    per_s: usize,
    median_ms: f64,
    factor: f64,
    errors_per_mille: u64,
    drift: f64,
    ramp_s: i64,
) -> RunInput {
    let mut rng = Rng::new(seed);
    let mut gauss = move || {
        // Box–Muller.
        let (u, v) = (rng.unit().max(1e-12), rng.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    };
    let mut all: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    let (mut errors_total, mut ar) = (0u64, 0.0f64);
    let t0 = 1_700_000_000_000i64;
    for s in 0..seconds {
        ar = 0.8 * ar + drift * gauss();
        let mut h = new_histogram::<u64>();
        let (mut sum, mut max, mut errors) = (0u64, 0u64, 0u64);
        let load = if s < ramp_s {
            (s + 1) as f64 / ramp_s as f64
        } else {
            1.0
        };
        let n = (per_s as f64 * load).ceil() as usize;
        for i in 0..n {
            let v = (median_ms * factor * (0.3 + 0.7 * load) * (0.35 * gauss() + ar).exp())
                .round()
                .max(1.0) as u64;
            h.record(v).unwrap();
            sum += v;
            max = max.max(v);
            if (s as u64 * per_s as u64 + i as u64) % 1000 < errors_per_mille {
                errors += 1;
            }
            all.push(v);
        }
        errors_total += errors;
        out.push(SecondIn {
            start_ms: t0 + s * 1000,
            count: n as u64,
            errors,
            sum_ms: sum,
            max_ms: max,
            histogram: serialize_histogram(&h),
        });
    }
    all.sort_unstable();
    let n = all.len() as u64;
    let pct = |p: f64| Some(all[nearest_rank(n, p) as usize - 1] as f64);
    let window_ms = seconds * 1000;
    let stats = Stats {
        count: n,
        errors: errors_total,
        error_pct: Some(errors_total as f64 * 100.0 / n as f64),
        min_ms: Some(all[0] as f64),
        mean_ms: Some(all.iter().sum::<u64>() as f64 / n as f64),
        max_ms: Some(*all.last().unwrap() as f64),
        p50_ms: pct(50.0),
        p90_ms: pct(90.0),
        p95_ms: pct(95.0),
        p99_ms: pct(99.0),
        first_start_ms: Some(t0),
        last_end_ms: Some(t0 + window_ms),
        window_ms: Some(window_ms),
        throughput_rps: Some(n as f64 / seconds as f64),
        ..Stats::default()
    };
    RunInput {
        run: RunRef {
            id,
            name: format!("run {id}"),
            scenario: Some("synthetic".into()),
            tool: "jmeter".into(),
            summary_only: false,
            started_at_ms: Some(t0),
            imported_at_ms: t0,
            url: format!("/console/runs/{id}"),
        },
        scopes: vec![
            ScopeInput {
                label: None,
                stats: stats.clone(),
                seconds: out.clone(),
            },
            ScopeInput {
                label: Some("Login".into()),
                stats,
                seconds: out,
            },
        ],
    }
}

fn verdict_of(c: &Comparison, run: usize, f: Figure) -> Option<Verdict> {
    c.scopes[0].runs[run].change(f).and_then(|c| c.verdict)
}

#[test]
fn a_shifted_run_is_worse_and_the_reverse_is_better() {
    let base = synthetic(1, 11, 300, 40, 200.0, 1.0, 0);
    let slow = synthetic(2, 12, 300, 40, 200.0, 1.25, 0);
    let c = compare(&[base.clone(), slow.clone()], &Options::default());
    for f in [Figure::MeanMs, Figure::P50Ms, Figure::P90Ms, Figure::P95Ms] {
        assert_eq!(verdict_of(&c, 1, f), Some(Verdict::Worse), "{f:?}");
        let ch = c.scopes[0].runs[1].change(f).unwrap();
        assert!(ch.ci_low.unwrap() > 0.0 && ch.pct.unwrap() > 15.0, "{ch:?}");
    }
    assert_eq!(
        c.scopes[0].runs[0].changes, None,
        "the reference has no change"
    );
    // Labels are matched by their text.
    assert_eq!(c.scopes[1].label.as_deref(), Some("Login"));
    assert_eq!(
        c.scopes[1].runs[1]
            .change(Figure::P95Ms)
            .and_then(|c| c.verdict),
        Some(Verdict::Worse)
    );
    let back = compare(&[slow, base], &Options::default());
    assert_eq!(verdict_of(&back, 1, Figure::P95Ms), Some(Verdict::Better));
    // Same load, so throughput did not change; count and max never get a verdict.
    assert_eq!(
        verdict_of(&back, 1, Figure::ThroughputRps),
        Some(Verdict::NoChange)
    );
    assert_eq!(verdict_of(&back, 1, Figure::Count), None);
    assert_eq!(verdict_of(&back, 1, Figure::MaxMs), None);
}

#[test]
fn pure_noise_is_never_called_a_regression() {
    // Ten independent pairs from one distribution (5-minute runs of 60 requests/s with
    // correlated seconds): no figure of any
    // pair may be called worse, and calls either way stay within the 5 % an interval of
    // 95 % allows (here: at most 3 of 80 verdicts).
    let (mut calls, mut verdicts) = (0, 0);
    for k in 0..10u64 {
        let a = synthetic(1, 100 + k, 300, 60, 150.0, 1.0, 10);
        let b = synthetic(2, 200 + k, 300, 60, 150.0, 1.0, 10);
        let c = compare(&[a, b], &Options::default());
        for f in Figure::ALL.into_iter().filter(|f| f.has_verdict()) {
            let v = verdict_of(&c, 1, f);
            verdicts += 1;
            assert_ne!(
                v,
                Some(Verdict::Worse),
                "pair {k}: {f:?}: {:?}",
                c.scopes[0].runs[1].change(f)
            );
            assert!(v.is_some(), "both runs have buckets");
            if v != Some(Verdict::NoChange) {
                calls += 1;
            }
        }
    }
    assert_eq!(verdicts, 80);
    assert!(calls <= 3, "{calls} false calls");
}

#[test]
fn a_significant_but_tiny_move_is_below_the_minimum_effect() {
    // A huge run (600 s × 400/s, steady): a 2 % shift is far outside the noise…
    let a = synthetic_drift(1, 5, 600, 400, 100.0, 1.0, 0, 0.0, 0);
    let b = synthetic_drift(2, 6, 600, 400, 100.0, 1.02, 0, 0.0, 0);
    let c = compare(&[a.clone(), b.clone()], &Options::default());
    let ch = c.scopes[0].runs[1].change(Figure::MeanMs).unwrap();
    assert!(ch.ci_low.unwrap() > 0.0, "significant: {ch:?}");
    // …but below the 5 % minimum effect: no change.
    assert_eq!(ch.verdict, Some(Verdict::NoChange));
    // With a 1 % minimum effect it is a regression.
    let strict = Options {
        min_effect_pct: 1.0,
        ..Options::default()
    };
    let c = compare(&[a, b], &strict);
    assert_eq!(verdict_of(&c, 1, Figure::MeanMs), Some(Verdict::Worse));
}

#[test]
fn summary_only_runs_compare_on_their_figures_without_verdicts() {
    let mut a = synthetic(1, 1, 60, 10, 100.0, 1.0, 0);
    let mut b = synthetic(2, 2, 60, 10, 100.0, 2.0, 0);
    for r in [&mut a, &mut b] {
        r.run.summary_only = true;
        for s in &mut r.scopes {
            s.seconds.clear();
        }
    }
    let c = compare(&[a, b], &Options::default());
    let ch = c.scopes[0].runs[1].change(Figure::P95Ms).unwrap();
    assert!(ch.pct.unwrap() > 50.0);
    assert_eq!((ch.verdict, ch.ci_low), (None, None));
}

#[test]
fn a_label_missing_from_a_run_is_not_present() {
    let a = synthetic(1, 1, 30, 10, 100.0, 1.0, 0);
    let mut b = synthetic(2, 2, 30, 10, 100.0, 1.0, 0);
    b.scopes[1].label = Some("Logout".into());
    let c = compare(&[a, b], &Options::default());
    let labels: Vec<_> = c.scopes.iter().map(|s| s.label.clone()).collect();
    assert_eq!(labels, [None, Some("Login".into()), Some("Logout".into())]);
    assert!(!c.scopes[1].runs[1].present);
    assert!(!c.scopes[2].runs[0].present);
    assert_eq!(c.scopes[1].runs[1].change(Figure::P95Ms).unwrap().abs, None);
}

#[test]
fn ramped_runs_are_compared_ramp_with_ramp() {
    // Two runs with the same ramp (a third of the run), the second 12 % slower: blocks
    // drawn at the same places keep the ramp out of the noise, so the shift is called…
    let a = synthetic_drift(1, 31, 300, 60, 200.0, 1.0, 0, 0.04, 100);
    let b = synthetic_drift(2, 32, 300, 60, 200.0, 1.12, 0, 0.04, 100);
    let c = compare(&[a.clone(), b], &Options::default());
    for f in [Figure::MeanMs, Figure::P50Ms, Figure::P90Ms] {
        assert_eq!(
            verdict_of(&c, 1, f),
            Some(Verdict::Worse),
            "{f:?}: {:?}",
            c.scopes[0].runs[1].change(f)
        );
    }
    // …while a re-run with the same ramp is not.
    let again = synthetic_drift(3, 33, 300, 60, 200.0, 1.0, 0, 0.04, 100);
    let c = compare(&[a, again], &Options::default());
    for f in Figure::ALL.into_iter().filter(|f| f.has_verdict()) {
        assert_ne!(verdict_of(&c, 1, f), Some(Verdict::Worse), "{f:?}");
    }
    let ch = c.scopes[0].runs[1].change(Figure::ThroughputRps).unwrap();
    assert!(
        ch.ci_high.unwrap() - ch.ci_low.unwrap() < 10.0,
        "the ramp is not noise: {ch:?}"
    );
}

#[test]
fn verdict_rules() {
    // Interval excludes 0 and the change passes the minimum effect.
    assert_eq!(
        verdict(Figure::P95Ms, 8.0, (3.0, 12.0), 100.0, 5.0),
        Verdict::Worse
    );
    assert_eq!(
        verdict(Figure::ThroughputRps, 8.0, (3.0, 12.0), 100.0, 5.0),
        Verdict::Better
    );
    // Interval holds 0: noise.
    assert_eq!(
        verdict(Figure::P95Ms, 8.0, (-1.0, 12.0), 100.0, 5.0),
        Verdict::NoChange
    );
    // Below the minimum effect.
    assert_eq!(
        verdict(Figure::P95Ms, 0.3, (0.1, 0.5), 100.0, 5.0),
        Verdict::NoChange
    );
    // Error %: points, at least 0.1 point.
    assert_eq!(
        verdict(Figure::ErrorPct, 0.05, (0.01, 0.09), 0.0, 5.0),
        Verdict::NoChange
    );
    assert_eq!(
        verdict(Figure::ErrorPct, 2.0, (1.0, 3.0), 0.0, 5.0),
        Verdict::Worse
    );
}

#[test]
fn json_round_trip() {
    let a = synthetic(1, 1, 30, 10, 100.0, 1.0, 0);
    let b = synthetic(2, 2, 30, 10, 100.0, 1.1, 0);
    let c = compare(&[a, b], &Options::default());
    let json = serde_json::to_value(&c).unwrap();
    assert!(json["scopes"][0]["runs"][1]["changes"]["p95_ms"]["pct"].is_number());
    assert!(json["scopes"][0]["runs"][0]["changes"].is_null());
    let back: Comparison = serde_json::from_value(json).unwrap();
    assert_eq!(back, c);
}

/// The comparison of `runs` from their draws as stored (encoded, then read back), the way
/// a comparison of stored runs gets them.
fn compare_from_stored(runs: &[RunInput], opts: &Options) -> Comparison {
    let stored: Vec<ScopeResamples> = runs
        .iter()
        .map(|r| {
            draw_run(r, opts)
                .iter()
                .map(|d| {
                    let blob = stored::encode(opts.resamples, d.as_ref());
                    stored::resampled(&blob, opts.resamples).expect("readable blob")
                })
                .collect()
        })
        .collect();
    let refs: Vec<&ScopeResamples> = stored.iter().collect();
    compare_resampled(runs, &refs, opts)
}

#[test]
fn stored_draws_give_the_verdicts_and_intervals_of_resampling_the_buckets() {
    let opts = Options::default();
    // The shifted pair: worse, both ways of computing it, to the last bit.
    let base = synthetic(1, 11, 300, 40, 200.0, 1.0, 0);
    let slow = synthetic(2, 12, 300, 40, 200.0, 1.25, 0);
    let pair = [base, slow];
    let fresh = compare(&pair, &opts);
    let stored = compare_from_stored(&pair, &opts);
    assert_eq!(stored, fresh);
    assert_eq!(verdict_of(&stored, 1, Figure::P95Ms), Some(Verdict::Worse));
    // Noise pairs (with errors, so error % has intervals too) and a ramped pair.
    for k in 0..4u64 {
        let a = synthetic(1, 100 + k, 300, 60, 150.0, 1.0, 10);
        let b = synthetic(2, 200 + k, 300, 60, 150.0, 1.0, 10);
        let pair = [a, b];
        let stored = compare_from_stored(&pair, &opts);
        assert_eq!(stored, compare(&pair, &opts), "noise pair {k}");
        for f in Figure::ALL.into_iter().filter(|f| f.has_verdict()) {
            assert_ne!(verdict_of(&stored, 1, f), Some(Verdict::Worse), "{f:?}");
        }
    }
    let a = synthetic_drift(1, 31, 300, 60, 200.0, 1.0, 0, 0.04, 100);
    let b = synthetic_drift(2, 32, 300, 60, 200.0, 1.12, 0, 0.04, 100);
    let pair = [a, b];
    assert_eq!(compare_from_stored(&pair, &opts), compare(&pair, &opts));
    // A summary-only run stores "no per-second data": no interval, no verdict.
    let mut s = synthetic(3, 3, 60, 10, 100.0, 2.0, 0);
    s.run.summary_only = true;
    for sc in &mut s.scopes {
        sc.seconds.clear();
    }
    let pair = [pair[0].clone(), s];
    let stored = compare_from_stored(&pair, &opts);
    assert_eq!(stored, compare(&pair, &opts));
    let ch = stored.scopes[0].runs[1].change(Figure::P95Ms).unwrap();
    assert_eq!((ch.verdict, ch.ci_low), (None, None));
}
