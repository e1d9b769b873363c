//! A scope's exact response-time distribution: every distinct elapsed value (ms) with its
//! count, kept per label and for the run so that figures chosen after the import (Apdex
//! with any T, the distribution chart, the percentile curve) stay exact.
//!
//! Size is proportional to the number of distinct values, not of samples. Stored as
//! LEB128 varints: value deltas and counts, alternating.

use serde::Serialize;

use super::ExactHistogram;

/// Distinct values (ms, ascending) with their counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Distribution {
    values: Vec<(u64, u64)>,
    count: u64,
}

/// Apdex score for a threshold T (Apdex Alliance, "Apdex Technical Specification" v1.1,
/// §2.3: a failed request is frustrated whatever its time; New Relic does the same):
/// (satisfied + tolerating / 2) / samples, satisfied = success and elapsed ≤ T,
/// tolerating = success and T < elapsed ≤ 4T, frustrated = the rest (every failed sample).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Apdex {
    pub t_ms: u64,
    pub score: f64,
    pub satisfied: u64,
    pub tolerating: u64,
    pub frustrated: u64,
}

impl From<&ExactHistogram> for Distribution {
    fn from(h: &ExactHistogram) -> Self {
        Distribution {
            values: h.iter().collect(),
            count: h.count(),
        }
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

impl Distribution {
    /// Builds from (value, count) pairs in ascending value order.
    pub fn from_pairs(values: Vec<(u64, u64)>) -> Self {
        let count = values.iter().map(|(_, n)| n).sum();
        Distribution { values, count }
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Distinct values with counts, ascending.
    pub fn values(&self) -> &[(u64, u64)] {
        &self.values
    }

    /// The compact stored form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.values.len() * 3);
        let mut prev = 0;
        for &(v, n) in &self.values {
            put_varint(&mut out, v - prev);
            put_varint(&mut out, n);
            prev = v;
        }
        out
    }

    /// Reads the stored form; `None` if it is damaged.
    pub fn decode(bytes: &[u8]) -> Option<Distribution> {
        let mut values = Vec::new();
        let (mut pos, mut prev) = (0, 0u64);
        while pos < bytes.len() {
            let v = prev.checked_add(get_varint(bytes, &mut pos)?)?;
            let n = get_varint(bytes, &mut pos)?;
            values.push((v, n));
            prev = v;
        }
        Some(Distribution::from_pairs(values))
    }

    /// Nearest-rank percentile (the ⌈p/100 · n⌉-th smallest), ms.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = super::stats::nearest_rank(self.count, p);
        let mut seen = 0;
        for &(v, n) in &self.values {
            seen += n;
            if seen >= rank {
                return Some(v);
            }
        }
        self.values.last().map(|(v, _)| *v)
    }

    /// Apdex for threshold `t_ms`, where `failed` holds the failed samples among `self`'s
    /// (each counts as frustrated, whatever its time); `None` without samples.
    pub fn apdex(&self, t_ms: u64, failed: &Distribution) -> Option<Apdex> {
        if self.count == 0 {
            return None;
        }
        let (mut satisfied, mut tolerating) = (0u64, 0u64);
        let zone = |v: u64| {
            if v <= t_ms {
                0
            } else if v <= t_ms.saturating_mul(4) {
                1
            } else {
                2
            }
        };
        for &(v, n) in &self.values {
            match zone(v) {
                0 => satisfied += n,
                1 => tolerating += n,
                _ => {}
            }
        }
        for &(v, n) in &failed.values {
            match zone(v) {
                0 => satisfied = satisfied.saturating_sub(n),
                1 => tolerating = tolerating.saturating_sub(n),
                _ => {}
            }
        }
        let score = (satisfied as f64 + tolerating as f64 / 2.0) / self.count as f64;
        Some(Apdex {
            t_ms,
            score,
            satisfied,
            tolerating,
            frustrated: self.count - satisfied - tolerating,
        })
    }

    /// The percentile curve: (p, value ms) for p = 0 (min), 1 … 99, 99.9, 99.99, 100 (max).
    pub fn curve(&self) -> Vec<(f64, u64)> {
        if self.count == 0 {
            return Vec::new();
        }
        let mut ps: Vec<f64> = (0..100).map(f64::from).collect();
        ps.extend([99.5, 99.9, 99.99, 100.0]);
        ps.into_iter()
            .filter_map(|p| {
                let v = if p == 0.0 {
                    self.values.first().map(|x| x.0)
                } else {
                    self.percentile(p)
                };
                v.map(|v| (p, v))
            })
            .collect()
    }

    /// Counts in `bins` equal-width bins from the minimum to the 99.9th percentile (ms);
    /// slower samples fall in a last, open-ended bin. Returns (lower bound ms, count) pairs.
    pub fn bins(&self, bins: usize) -> Vec<(u64, u64)> {
        let (Some(&(min, _)), Some(hi)) = (self.values.first(), self.percentile(99.9)) else {
            return Vec::new();
        };
        let bins = bins.max(1) as u64;
        let width = (hi - min + 1).div_ceil(bins).max(1);
        let mut out: Vec<(u64, u64)> = (0..bins).map(|i| (min + i * width, 0)).collect();
        let mut over = 0;
        for &(v, n) in &self.values {
            let i = ((v - min) / width) as usize;
            match out.get_mut(i) {
                Some(bin) => bin.1 += n,
                None => over += n,
            }
        }
        if over > 0 {
            out.push((min + bins * width, over));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(values: &[u64]) -> Distribution {
        let mut h = ExactHistogram::new();
        for v in values {
            h.record(*v);
        }
        Distribution::from(&h)
    }

    #[test]
    fn round_trips_through_its_stored_form() {
        let d = dist(&[5, 5, 70_000, 300, 1, 1_000_000]);
        assert_eq!(Distribution::decode(&d.encode()), Some(d.clone()));
        assert_eq!(d.count(), 6);
        assert_eq!(
            Distribution::decode(&[0x80]),
            None,
            "a cut-off varint is damage"
        );
    }

    #[test]
    fn apdex_counts_satisfied_tolerating_frustrated() {
        // T = 500: ≤500 satisfied (3), ≤2000 tolerating (2), above frustrated (1).
        let d = dist(&[100, 500, 200, 501, 2000, 2001]);
        let a = d.apdex(500, &dist(&[])).unwrap();
        assert_eq!((a.satisfied, a.tolerating, a.frustrated), (3, 2, 1));
        assert!((a.score - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(dist(&[]).apdex(500, &dist(&[])), None);
    }

    #[test]
    fn apdex_counts_failed_samples_as_frustrated() {
        // The fast 100 ms and the 501 ms samples failed: frustrated, not satisfied or
        // tolerating.
        let d = dist(&[100, 500, 200, 501, 2000, 2001]);
        let a = d.apdex(500, &dist(&[100, 501])).unwrap();
        assert_eq!((a.satisfied, a.tolerating, a.frustrated), (2, 1, 3));
        assert!((a.score - 2.5 / 6.0).abs() < 1e-12);
        // Every sample failed, all fast: 0, not 1.
        let all = dist(&[10, 20, 30]);
        assert_eq!(all.apdex(500, &all).unwrap().score, 0.0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        // EC13 "ten": 100..1000 step 100.
        let d = dist(&[100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
        assert_eq!(d.percentile(50.0), Some(500));
        assert_eq!(d.percentile(90.0), Some(900));
        assert_eq!(d.percentile(95.0), Some(1000));
        let curve = d.curve();
        assert_eq!(curve.first(), Some(&(0.0, 100)));
        assert_eq!(curve.last(), Some(&(100.0, 1000)));
    }

    #[test]
    fn bins_cover_every_sample() {
        let d = dist(&[10, 11, 12, 50, 99, 100, 5000]);
        let bins = d.bins(10);
        assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), 7);
        assert_eq!(bins[0].0, 10);
    }
}
