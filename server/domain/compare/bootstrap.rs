//! Block bootstrap of one scope of one run (the run total or a label) over its per-second
//! buckets.
//!
//! Samples inside a run are not independent (a slow second is followed by a slow second),
//! so seconds are resampled in blocks: the scope's seconds, from its first to its last
//! (empty seconds included, so a pause still lowers throughput), are cut into consecutive
//! non-overlapping blocks of L ≈ √n seconds (Carlstein's block bootstrap), and each
//! resample draws ⌈n / L⌉ blocks with replacement from a seeded PRNG.
//!
//! The draws are shared: resample i of every run draws the same sequence of *relative*
//! positions (block ⌊u · B⌋ of the run's B blocks for the same u), seeded by the label and
//! i, not by the run. Runs of one scenario share their load profile, so a difference of two
//! resamples compares a ramp with a ramp and a plateau with a plateau; independent draws
//! would count the ramp-versus-plateau spread as noise and blur every interval of a ramped
//! run. For stationary runs the shared draws change nothing (their data are independent).
//! A resample's figures
//! are those of the merged drawn seconds: count, error %, mean (Σ sum / Σ count), max,
//! throughput (Σ count / Σ seconds) and p50/p90/p95/p99 (nearest rank on the merged HDR
//! histograms, ≤ 0.1 % relative error, see [`super::sparse`]).
//!
//! Size: at most [`MAX_BLOCKS`] blocks whatever the span: a scope spanning more than
//! `MAX_BLOCKS`² seconds (194 days) gets blocks of ⌈n / MAX_BLOCKS⌉ seconds instead of √n,
//! so memory and time depend on the seconds that hold samples and this constant, never on
//! how far apart two timestamps are.
//!
//! Speed: a merged block histogram is kept only around each percentile: the percentile of
//! any mix of blocks lies between the smallest and the largest of the blocks' own
//! percentiles, so per percentile a block keeps its count below that window and its
//! cumulative counts inside it; a resample's percentile is then a binary search over the
//! window summing the drawn blocks.

use super::Figure;
use super::sparse::{self, Layout};
use crate::domain::runs::nearest_rank;

/// One stored second of a scope, as the bootstrap reads it.
#[derive(Debug, Clone)]
pub struct SecondIn {
    /// ⌊start / 1000⌋ · 1000, unix epoch ms.
    pub start_ms: i64,
    pub count: u64,
    pub errors: u64,
    pub sum_ms: u64,
    pub max_ms: u64,
    /// HdrHistogram V2 serialization of the second's response times, ms.
    pub histogram: Vec<u8>,
}

/// SplitMix64 (Steele, Lea & Flood 2014): small, fast, and good enough to draw block
/// indices; seeded, so every comparison of the same runs gives the same intervals.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2⁻³² for our n).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// FNV-1a: a stable seed from a label (the same for every run, so their draws pair up).
pub fn seed_for(label: Option<&str>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.unwrap_or("\u{0}total").bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The seed of resample `i` (SplitMix64's finalizer over the mix, so neighbouring
/// resamples do not share draws).
fn resample_seed(seed: u64, i: usize) -> u64 {
    let mut z = seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Block {
    count: u64,
    errors: u64,
    sum_ms: u64,
    max_ms: u64,
    seconds: u64,
}

/// Cumulative counts of every block inside one percentile's window.
struct Window {
    p: f64,
    /// Bin indices inside the window, ascending.
    bins: Vec<u32>,
    /// Per block: samples below the window.
    below: Vec<u64>,
    /// Per block, `bins.len()` cumulative counts (row-major).
    cum: Vec<u64>,
}

/// The percentiles resampled, with their figures.
pub const PERCENTILES: [(f64, Figure); 4] = [
    (50.0, Figure::P50Ms),
    (90.0, Figure::P90Ms),
    (95.0, Figure::P95Ms),
    (99.0, Figure::P99Ms),
];

/// Resampled values of each figure (index = [`Figure::index`]); a resample without samples
/// is left out, so vectors may be shorter than the number of resamples.
#[derive(Debug, Clone, Default)]
pub struct Resampled {
    pub values: Vec<Vec<f64>>,
    /// Block length, seconds.
    pub block_s: u64,
    /// Seconds in the scope (first to last bucket).
    pub seconds: u64,
}

impl Resampled {
    pub fn get(&self, f: Figure) -> Option<&[f64]> {
        self.values
            .get(f.index())
            .map(Vec::as_slice)
            .filter(|v| !v.is_empty())
    }
}

/// One resample's merged blocks, in integers: the figures of a resample follow from these
/// alone ([`Draws::resampled`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Draw {
    pub count: u64,
    pub errors: u64,
    pub sum_ms: u64,
    /// Largest `max_ms` of the drawn blocks that have samples.
    pub max_ms: u64,
    /// Seconds drawn (empty seconds included).
    pub seconds: u64,
    /// p50, p90, p95, p99 of the merged drawn histograms (ms, the bin's highest value, as
    /// in [`PERCENTILES`]); `None` only when no block has samples.
    pub percentiles_ms: [Option<u64>; 4],
}

/// Every resample of one scope, as integers; resamples without samples are left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Draws {
    /// Resamples asked for (`draws` may be shorter).
    pub resamples: usize,
    /// Block length, seconds.
    pub block_s: u64,
    /// Seconds in the scope (first to last bucket).
    pub seconds: u64,
    pub draws: Vec<Draw>,
}

impl Draws {
    /// The figures of every resample: count, error % (errors × 100 / count), mean
    /// (Σ sum / Σ count), max, throughput (count / seconds), successful throughput ((count −
    /// errors) / seconds) and the percentiles.
    pub fn resampled(&self) -> Resampled {
        let mut values: Vec<Vec<f64>> =
            vec![Vec::with_capacity(self.draws.len()); Figure::ALL.len()];
        for d in &self.draws {
            let c = d.count as f64;
            values[Figure::Count.index()].push(c);
            values[Figure::ErrorPct.index()].push(d.errors as f64 * 100.0 / c);
            values[Figure::MeanMs.index()].push(d.sum_ms as f64 / c);
            values[Figure::MaxMs.index()].push(d.max_ms as f64);
            values[Figure::ThroughputRps.index()].push(c / d.seconds.max(1) as f64);
            values[Figure::SuccessfulRps.index()]
                .push((d.count - d.errors.min(d.count)) as f64 / d.seconds.max(1) as f64);
            for (k, &(_, fig)) in PERCENTILES.iter().enumerate() {
                if let Some(v) = d.percentiles_ms[k] {
                    values[fig.index()].push(v as f64);
                }
            }
        }
        Resampled {
            values,
            block_s: self.block_s,
            seconds: self.seconds,
        }
    }
}

/// Most blocks a scope is cut into (see the module docs): 4,096 blocks × 1,000 resamples
/// is a few million additions per scope.
pub const MAX_BLOCKS: u64 = 4_096;

/// Block length for a scope of `n` seconds: √n rounded, at least 1, and long enough that
/// there are at most [`MAX_BLOCKS`] blocks.
pub fn block_seconds(n: u64) -> u64 {
    ((n as f64).sqrt().round() as u64)
        .max(n.div_ceil(MAX_BLOCKS))
        .max(1)
}

/// Block-bootstraps one scope: `None` when it has no seconds or a histogram is unreadable.
pub fn resample(seconds: &[SecondIn], resamples: usize, seed: u64) -> Option<Resampled> {
    draw(seconds, resamples, seed).map(|d| d.resampled())
}

/// The draws of [`resample`], before they become figures: what a run stores at import
/// (see [`super::stored`]) so that a comparison need not read its buckets again.
pub fn draw(seconds: &[SecondIn], resamples: usize, seed: u64) -> Option<Draws> {
    let (first, last) = (seconds.first()?, seconds.last()?);
    let n = u64::try_from(last.start_ms.checked_sub(first.start_ms)? / 1000 + 1).ok()?;
    let block_s = block_seconds(n);
    let n_blocks = n.div_ceil(block_s) as usize;
    let mut blocks: Vec<Block> = (0..n_blocks)
        .map(|b| Block {
            count: 0,
            errors: 0,
            sum_ms: 0,
            max_ms: 0,
            seconds: block_s.min(n - b as u64 * block_s),
        })
        .collect();
    // Non-zero bins of each block, ascending, merged through a dense scratch array.
    let mut bins: Vec<Vec<(u32, u64)>> = vec![Vec::new(); n_blocks];
    let mut scratch: Vec<u64> = Vec::new();
    let mut pairs: Vec<(u32, u64)> = Vec::new();
    let mut layout: Option<Layout> = None;
    let mut i = 0;
    while i < seconds.len() {
        let b = ((seconds[i].start_ms - first.start_ms) / 1000) as u64 / block_s;
        let (mut lo, mut hi) = (u32::MAX, 0u32);
        while i < seconds.len()
            && ((seconds[i].start_ms - first.start_ms) / 1000) as u64 / block_s == b
        {
            let s = &seconds[i];
            let blk = &mut blocks[b as usize];
            blk.count += s.count;
            blk.errors += s.errors;
            blk.sum_ms += s.sum_ms;
            blk.max_ms = blk.max_ms.max(s.max_ms);
            pairs.clear();
            let l = sparse::decode_into(&s.histogram, &mut pairs).ok()?;
            if layout.is_some_and(|x| x != l) {
                return None;
            }
            layout = Some(l);
            for &(idx, c) in &pairs {
                let k = idx as usize;
                if k >= scratch.len() {
                    scratch.resize((k + 1).next_power_of_two(), 0);
                }
                scratch[k] += c;
                lo = lo.min(idx);
                hi = hi.max(idx);
            }
            i += 1;
        }
        if lo <= hi {
            let out = &mut bins[b as usize];
            for k in lo..=hi {
                let c = std::mem::take(&mut scratch[k as usize]);
                if c > 0 {
                    out.push((k, c));
                }
            }
        }
    }
    let layout = layout?;
    let windows: Vec<(Figure, Window)> = PERCENTILES
        .iter()
        .filter_map(|&(p, f)| window(p, &bins).map(|w| (f, w)))
        .collect();

    let mut draws: Vec<Draw> = Vec::with_capacity(resamples);
    let mut picks = vec![0usize; n_blocks];
    for i in 0..resamples {
        let mut rng = Rng::new(resample_seed(seed, i));
        let mut d = Draw::default();
        for p in picks.iter_mut() {
            *p = ((rng.unit() * n_blocks as f64) as usize).min(n_blocks - 1);
            let b = &blocks[*p];
            d.count += b.count;
            d.errors += b.errors;
            d.sum_ms += b.sum_ms;
            d.seconds += b.seconds;
            if b.count > 0 {
                d.max_ms = d.max_ms.max(b.max_ms);
            }
        }
        if d.count == 0 {
            continue;
        }
        for (fig, w) in &windows {
            if let Some(k) = PERCENTILES.iter().position(|x| x.1 == *fig) {
                d.percentiles_ms[k] = Some(layout.highest_value(w.quantile(&picks, d.count)));
            }
        }
        draws.push(d);
    }
    Some(Draws {
        resamples,
        block_s,
        seconds: n,
        draws,
    })
}

/// The window of percentile `p`: from the lowest to the highest of the blocks' own
/// percentile bins.
fn window(p: f64, blocks: &[Vec<(u32, u64)>]) -> Option<Window> {
    let mut lo = u32::MAX;
    let mut hi = 0u32;
    for b in blocks {
        let n: u64 = b.iter().map(|x| x.1).sum();
        if n == 0 {
            continue;
        }
        let rank = nearest_rank(n, p);
        let mut seen = 0;
        for &(idx, c) in b {
            seen += c;
            if seen >= rank {
                lo = lo.min(idx);
                hi = hi.max(idx);
                break;
            }
        }
    }
    if lo > hi {
        return None;
    }
    // Bins present in any block inside the window, ascending (marked, not sorted).
    let mut present = vec![false; (hi - lo) as usize + 1];
    for b in blocks {
        let start = b.partition_point(|x| x.0 < lo);
        for &(idx, _) in b[start..].iter().take_while(|x| x.0 <= hi) {
            present[(idx - lo) as usize] = true;
        }
    }
    let win: Vec<u32> = present
        .iter()
        .enumerate()
        .filter(|(_, p)| **p)
        .map(|(i, _)| lo + i as u32)
        .collect();
    let w = win.len();
    let mut below = Vec::with_capacity(blocks.len());
    let mut cum = vec![0u64; w * blocks.len()];
    for (bi, b) in blocks.iter().enumerate() {
        let under: u64 = b.iter().take_while(|x| x.0 < lo).map(|x| x.1).sum();
        let row = &mut cum[bi * w..(bi + 1) * w];
        let mut acc = 0;
        let mut it = b.iter().filter(|x| (lo..=hi).contains(&x.0)).peekable();
        for (j, &bin) in win.iter().enumerate() {
            while let Some(&&(idx, c)) = it.peek() {
                if idx > bin {
                    break;
                }
                acc += c;
                it.next();
            }
            row[j] = acc;
        }
        below.push(under);
    }
    Some(Window {
        p,
        bins: win,
        below,
        cum,
    })
}

impl Window {
    /// The bin of the percentile of the drawn blocks (`count` samples in all).
    fn quantile(&self, picks: &[usize], count: u64) -> u32 {
        let rank = nearest_rank(count, self.p);
        let w = self.bins.len();
        let below: u64 = picks.iter().map(|&b| self.below[b]).sum();
        let (mut lo, mut hi) = (0usize, w - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let at: u64 = below + picks.iter().map(|&b| self.cum[b * w + mid]).sum::<u64>();
            if at >= rank {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        self.bins[lo]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::runs::hdr::{new_histogram, serialize_histogram};

    fn second(start_ms: i64, values: &[u64]) -> SecondIn {
        let mut h = new_histogram::<u64>();
        for v in values {
            h.record(*v).unwrap();
        }
        SecondIn {
            start_ms,
            count: values.len() as u64,
            errors: 0,
            sum_ms: values.iter().sum(),
            max_ms: values.iter().copied().max().unwrap_or(0),
            histogram: serialize_histogram(&h),
        }
    }

    #[test]
    fn a_huge_span_gets_coarser_blocks_not_more_of_them() {
        // Two seconds 9,999 years apart: the blocks are capped, the draw is quick.
        let seconds = [
            second(1_700_000_000_000, &[10, 20]),
            second(253_402_300_799_000, &[30]),
        ];
        let t = std::time::Instant::now();
        let d = draw(&seconds, 1_000, 7).unwrap();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            t.elapsed()
        );
        assert!(d.seconds.div_ceil(d.block_s) <= MAX_BLOCKS);
        assert_eq!(
            d.seconds,
            (253_402_300_799_000 - 1_700_000_000_000) / 1000 + 1
        );
        // Short scopes keep √n blocks as before.
        assert_eq!(block_seconds(3_600), 60);
        assert_eq!(block_seconds(MAX_BLOCKS * MAX_BLOCKS), MAX_BLOCKS);
        assert_eq!(block_seconds(MAX_BLOCKS * MAX_BLOCKS * 4), MAX_BLOCKS * 4);
        // Timestamps at both ends of i64 are refused, not overflowed.
        assert!(draw(&[second(i64::MIN, &[1]), second(i64::MAX, &[1])], 10, 1).is_none());
    }

    #[test]
    fn a_constant_run_resamples_to_itself() {
        let seconds: Vec<SecondIn> = (0..100)
            .map(|i| second(i * 1000, &[10, 20, 30, 40]))
            .collect();
        let r = resample(&seconds, 200, 1).unwrap();
        assert_eq!(r.block_s, 10);
        assert_eq!(r.seconds, 100);
        for f in [Figure::P50Ms, Figure::P95Ms] {
            let v = r.get(f).unwrap();
            assert_eq!(v.len(), 200);
        }
        assert!(r.get(Figure::P50Ms).unwrap().iter().all(|v| *v == 20.0));
        assert!(r.get(Figure::P95Ms).unwrap().iter().all(|v| *v == 40.0));
        assert!(r.get(Figure::MeanMs).unwrap().iter().all(|v| *v == 25.0));
        assert!(
            r.get(Figure::ThroughputRps)
                .unwrap()
                .iter()
                .all(|v| *v == 4.0)
        );
    }

    #[test]
    fn resampled_percentiles_match_a_full_merge_of_the_drawn_blocks() {
        // Every second different, so windows are wide; compare one resample's p90 against
        // a direct merge of all seconds when every block is drawn once (weights all 1).
        let seconds: Vec<SecondIn> = (0..49)
            .map(|i| {
                second(
                    i * 1000,
                    &[
                        (i as u64 * 37) % 500 + 1,
                        (i as u64 * 11) % 90 + 5,
                        3000 + i as u64,
                    ],
                )
            })
            .collect();
        let mut bins: Vec<Vec<(u32, u64)>> = Vec::new();
        let mut layout = None;
        for chunk in seconds.chunks(7) {
            let mut all = Vec::new();
            for s in chunk {
                layout = Some(sparse::decode_into(&s.histogram, &mut all).unwrap());
            }
            all.sort_unstable();
            let mut merged: Vec<(u32, u64)> = Vec::new();
            for (i, c) in all {
                match merged.last_mut() {
                    Some(l) if l.0 == i => l.1 += c,
                    _ => merged.push((i, c)),
                }
            }
            bins.push(merged);
        }
        let layout = layout.unwrap();
        let picks: Vec<usize> = (0..7).collect();
        let all: Vec<u64> = {
            let mut v: Vec<u64> = seconds
                .iter()
                .flat_map(|s| {
                    let mut p = Vec::new();
                    sparse::decode_into(&s.histogram, &mut p).unwrap();
                    p.into_iter()
                        .flat_map(|(i, c)| std::iter::repeat_n(layout.highest_value(i), c as usize))
                })
                .collect();
            v.sort_unstable();
            v
        };
        for p in [50.0, 90.0, 95.0, 99.0] {
            let w = window(p, &bins).unwrap();
            let got = layout.highest_value(w.quantile(&picks, all.len() as u64));
            let want = all[nearest_rank(all.len() as u64, p) as usize - 1];
            assert_eq!(got, want, "p{p}");
        }
    }

    #[test]
    fn same_seed_same_resamples() {
        let seconds: Vec<SecondIn> = (0..30)
            .map(|i| second(i * 1000, &[i as u64 + 1, 2 * i as u64 + 1]))
            .collect();
        let a = resample(&seconds, 50, 9).unwrap();
        let b = resample(&seconds, 50, 9).unwrap();
        assert_eq!(a.values, b.values);
        let c = resample(&seconds, 50, 10).unwrap();
        assert_ne!(a.values, c.values);
    }
}
