//! Change points in a scenario's history (one figure over its runs, in run order):
//! E-divisive with a permutation test, as MongoDB's signal-processing-algorithms and
//! Hunter do it.
//!
//! Method (Matteson & James, "A Nonparametric Approach for Multiple Change Point Analysis
//! of Multivariate Data", JASA 2014, with α = 1): for a segment Z and a split τ into X =
//! Z[..τ], Y = Z[τ..] (sizes m, k), the energy divergence is
//! `Ê = 2/(m·k) Σ|x−y| − 1/C(m,2) Σ|x−x'| − 1/C(k,2) Σ|y−y'|` and the statistic
//! `Q̂ = m·k/(m+k) · Ê`. The best split of every segment is the τ maximising Q̂; the best
//! of those across segments is kept when a permutation test says it is significant (the
//! share of [`PERMUTATIONS`] shuffles of that segment whose best Q̂ reaches it, p below
//! [`SIGNIFICANCE`]), and the search repeats on the new segments (recursive bisection)
//! until no split is significant. Each segment keeps at least [`MIN_SIZE`] runs.
//! The permutations use a seeded PRNG, so the same history gives the same change points.

use super::bootstrap::Rng;

/// Fewest runs on either side of a change point.
pub const MIN_SIZE: usize = 3;
/// Shuffles of the permutation test.
pub const PERMUTATIONS: usize = 199;
/// A split is kept when its permutation p-value is below this.
pub const SIGNIFICANCE: f64 = 0.05;

/// A change point: the series changes between `index − 1` and `index`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ChangePoint {
    /// Index of the first value after the change.
    pub index: usize,
    /// Q̂ of the split.
    pub q: f64,
    /// Permutation p-value.
    pub p_value: f64,
    /// Mean after / mean before − 1, in % (the segments either side of the change).
    pub change_pct: Option<f64>,
}

/// The best split of `z` (index of the first value of the second part, Q̂).
fn best_split(z: &[f64], min_size: usize) -> Option<(usize, f64)> {
    let n = z.len();
    if n < 2 * min_size {
        return None;
    }
    // within_left[t] = Σ_{i<j<t} |z_i − z_j|; within_right[t] = Σ_{t≤i<j<n} |z_i − z_j|.
    let mut within_left = vec![0.0; n + 1];
    for t in 1..=n {
        let add: f64 = (0..t - 1).map(|i| (z[i] - z[t - 1]).abs()).sum();
        within_left[t] = within_left[t - 1] + add;
    }
    let mut within_right = vec![0.0; n + 1];
    for t in (0..n).rev() {
        let add: f64 = (t + 1..n).map(|j| (z[t] - z[j]).abs()).sum();
        within_right[t] = within_right[t + 1] + add;
    }
    let total = within_left[n];
    let mut best: Option<(usize, f64)> = None;
    for tau in min_size..=n - min_size {
        let (m, k) = (tau as f64, (n - tau) as f64);
        let (wl, wr) = (within_left[tau], within_right[tau]);
        let between = total - wl - wr;
        let e = 2.0 * between / (m * k) - wl / (m * (m - 1.0) / 2.0) - wr / (k * (k - 1.0) / 2.0);
        let q = m * k / (m + k) * e;
        if best.is_none_or(|b| q > b.1) {
            best = Some((tau, q));
        }
    }
    best
}

/// Permutation p-value of a split with statistic `q` in `z`.
fn p_value(z: &[f64], q: f64, rng: &mut Rng, min_size: usize) -> f64 {
    let mut shuffled = z.to_vec();
    let mut reached = 0usize;
    for _ in 0..PERMUTATIONS {
        for i in (1..shuffled.len()).rev() {
            let j = rng.below(i + 1);
            shuffled.swap(i, j);
        }
        if best_split(&shuffled, min_size).is_some_and(|(_, qp)| qp >= q) {
            reached += 1;
        }
    }
    (reached + 1) as f64 / (PERMUTATIONS + 1) as f64
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Change points of `series` (values in run order; missing values must be left out by the
/// caller), sorted by index.
pub fn detect(series: &[f64]) -> Vec<ChangePoint> {
    detect_with(series, MIN_SIZE, SIGNIFICANCE, 0x5eed)
}

/// [`detect`] with explicit settings.
pub fn detect_with(series: &[f64], min_size: usize, alpha: f64, seed: u64) -> Vec<ChangePoint> {
    let mut rng = Rng::new(seed);
    let mut cuts: Vec<usize> = vec![0, series.len()];
    let mut found: Vec<ChangePoint> = Vec::new();
    // Segments already tested and found without a significant split.
    let mut settled: Vec<(usize, usize)> = Vec::new();
    loop {
        let mut best: Option<(usize, usize, usize, f64)> = None; // (start, end, tau, q)
        for w in cuts.windows(2) {
            let (a, b) = (w[0], w[1]);
            if settled.contains(&(a, b)) {
                continue;
            }
            if let Some((tau, q)) = best_split(&series[a..b], min_size)
                && best.is_none_or(|x| q > x.3)
            {
                best = Some((a, b, a + tau, q));
            }
        }
        let Some((a, b, at, q)) = best else {
            break;
        };
        let p = p_value(&series[a..b], q, &mut rng, min_size);
        if p >= alpha {
            settled.push((a, b));
            continue;
        }
        found.push(ChangePoint {
            index: at,
            q,
            p_value: p,
            change_pct: None,
        });
        cuts.push(at);
        cuts.sort_unstable();
    }
    found.sort_by_key(|c| c.index);
    cuts.sort_unstable();
    for c in &mut found {
        let i = cuts.iter().position(|x| *x == c.index).unwrap_or(1);
        let before = mean(&series[cuts[i - 1]..c.index]);
        let after = mean(&series[c.index..cuts[i + 1]]);
        c.change_pct = (before != 0.0).then(|| (after / before - 1.0) * 100.0);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(n: usize, seed: u64, sd: f64) -> Vec<f64> {
        let mut rng = Rng::new(seed);
        (0..n)
            .map(|_| {
                let (u, v) = (rng.unit().max(1e-12), rng.unit());
                sd * (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
            })
            .collect()
    }

    #[test]
    fn finds_one_step() {
        let mut s: Vec<f64> = noise(40, 1, 5.0).iter().map(|e| 200.0 + e).collect();
        for v in &mut s[25..] {
            *v += 40.0;
        }
        let cps = detect(&s);
        assert_eq!(cps.len(), 1, "{cps:?}");
        assert_eq!(cps[0].index, 25);
        assert!(cps[0].p_value < SIGNIFICANCE);
        let pct = cps[0].change_pct.unwrap();
        assert!((15.0..25.0).contains(&pct), "{pct}");
    }

    #[test]
    fn finds_two_steps_up_and_down() {
        let mut s: Vec<f64> = noise(45, 2, 3.0).iter().map(|e| 100.0 + e).collect();
        for v in &mut s[15..30] {
            *v += 30.0;
        }
        let idx: Vec<usize> = detect(&s).iter().map(|c| c.index).collect();
        assert_eq!(idx, [15, 30]);
    }

    #[test]
    fn pure_noise_has_no_change_point() {
        for seed in 0..5 {
            let s: Vec<f64> = noise(40, 100 + seed, 10.0)
                .iter()
                .map(|e| 300.0 + e)
                .collect();
            assert_eq!(detect(&s), Vec::new(), "seed {seed}");
        }
    }

    #[test]
    fn a_slow_drift_is_split_where_it_has_moved_and_only_upwards() {
        // 1 % per run for 40 runs, small noise: the level moves by 40 % in all; E-divisive
        // cuts the drift into steps, every one upwards, none closer than MIN_SIZE to an
        // edge or to another.
        let s: Vec<f64> = noise(40, 3, 2.0)
            .iter()
            .enumerate()
            .map(|(i, e)| 100.0 * (1.0 + 0.01 * i as f64) + e)
            .collect();
        let cps = detect(&s);
        assert!(
            !cps.is_empty() && cps.len() <= s.len() / MIN_SIZE,
            "{cps:?}"
        );
        assert!(cps.windows(2).all(|w| w[1].index - w[0].index >= MIN_SIZE));
        for c in &cps {
            assert!(c.index >= MIN_SIZE && c.index <= s.len() - MIN_SIZE);
            assert!(c.change_pct.unwrap() > 0.0, "{c:?}");
        }
    }

    #[test]
    fn short_series_have_none() {
        assert!(detect(&[1.0, 100.0, 1.0, 100.0, 5.0]).is_empty());
        assert!(detect(&[]).is_empty());
    }
}
