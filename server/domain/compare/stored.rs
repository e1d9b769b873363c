//! A run's bootstrap draws, computed once when the run is stored (import, seed, a live run
//! that completes) and kept in one blob per scope (`run_resamples`), so that comparing
//! runs reads a few kilobytes per run and label instead of every per-second bucket and
//! histogram, and does not resample again.
//!
//! Nothing is approximated: a blob holds, per resample, the integer sums of the drawn
//! blocks ([`Draw`]: count, errors, Σ elapsed, max, seconds, and the p50/p90/p95/p99 of
//! the merged drawn histograms), from which [`Draws::resampled`] derives the same figures,
//! bit for bit, as resampling the buckets at comparison time. The draws depend only on the
//! run's own buckets, its label (the seed) and the number of resamples, because resample i
//! of every run draws the same relative blocks (see [`super::bootstrap`]).
//!
//! Format ([`FORMAT`] 1), all integers unsigned LEB128 varints unless said otherwise:
//! `FORMAT` (one byte), resamples asked for, then one byte `0` (the scope has no
//! per-second data: summary-only runs) or `1` followed by block length (s), seconds, the
//! number of draws, and per draw: count, errors, sum_ms, max_ms, seconds, then the four
//! percentiles as value + 1 (0: none). About 20 bytes per resample: ~20 KB per scope for
//! the default 1,000 resamples. A blob of another format or resample count is ignored
//! (the comparison then resamples the buckets, and stores the result again).

use super::bootstrap::{self, Draw, Draws, Resampled, SecondIn};
use crate::domain::runs::RunData;

/// A run's blobs: `(label_ord, blob)` per scope (0: the run total, then the labels).
pub type RunBlobs = Vec<(i64, Vec<u8>)>;

/// Version of the blob format and of the draws it holds: bump it whenever the bootstrap
/// draws differently (block length, seeds, percentiles), so older blobs are recomputed.
pub const FORMAT: u8 = 1;

fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        v |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The blob of one scope's draws (`None`: the scope has no per-second data).
pub fn encode(resamples: usize, draws: Option<&Draws>) -> Vec<u8> {
    let mut out = vec![FORMAT];
    put(&mut out, resamples as u64);
    let Some(d) = draws else {
        out.push(0);
        return out;
    };
    out.reserve(8 + d.draws.len() * 20);
    out.push(1);
    put(&mut out, d.block_s);
    put(&mut out, d.seconds);
    put(&mut out, d.draws.len() as u64);
    for x in &d.draws {
        for v in [x.count, x.errors, x.sum_ms, x.max_ms, x.seconds] {
            put(&mut out, v);
        }
        for p in x.percentiles_ms {
            put(&mut out, p.map_or(0, |v| v.saturating_add(1)));
        }
    }
    out
}

/// Reads a blob written by [`encode`]: `Some((resamples, draws))`, where `draws` is `None`
/// for a scope without per-second data; `None` when the blob is of another format or
/// damaged.
pub fn decode(bytes: &[u8]) -> Option<(usize, Option<Draws>)> {
    if bytes.first() != Some(&FORMAT) {
        return None;
    }
    let mut pos = 1;
    let resamples = usize::try_from(get(bytes, &mut pos)?).ok()?;
    let has = *bytes.get(pos)?;
    pos += 1;
    match has {
        0 => return (pos == bytes.len()).then_some((resamples, None)),
        1 => {}
        _ => return None,
    }
    let block_s = get(bytes, &mut pos)?;
    let seconds = get(bytes, &mut pos)?;
    let n = usize::try_from(get(bytes, &mut pos)?).ok()?;
    if n > resamples || n > bytes.len() {
        return None;
    }
    let mut draws = Vec::with_capacity(n);
    for _ in 0..n {
        let mut d = Draw {
            count: get(bytes, &mut pos)?,
            errors: get(bytes, &mut pos)?,
            sum_ms: get(bytes, &mut pos)?,
            max_ms: get(bytes, &mut pos)?,
            seconds: get(bytes, &mut pos)?,
            percentiles_ms: [None; 4],
        };
        for p in &mut d.percentiles_ms {
            *p = get(bytes, &mut pos)?.checked_sub(1);
        }
        draws.push(d);
    }
    (pos == bytes.len()).then_some((
        resamples,
        Some(Draws {
            resamples,
            block_s,
            seconds,
            draws,
        }),
    ))
}

/// The figures of a stored blob made with `resamples` resamples: `Some(None)` for a scope
/// without per-second data, `None` when the blob cannot serve (other format or resample
/// count, damaged).
pub fn resampled(bytes: &[u8], resamples: usize) -> Option<Option<Resampled>> {
    let (n, draws) = decode(bytes)?;
    (n == resamples).then(|| draws.map(|d| d.resampled()))
}

/// Draws every scope of a run (index 0: the run total, then its labels in order) and
/// encodes them: one `(label_ord, blob)` per scope. Scopes are drawn on up to as many
/// threads as the machine has cores.
pub fn precompute(data: &RunData, resamples: usize) -> RunBlobs {
    let scopes = data.labels.len() + 1;
    let mut seconds: Vec<Vec<SecondIn>> = vec![Vec::new(); scopes];
    let ord_of: std::collections::HashMap<&str, usize> = data
        .labels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.label.as_str(), i + 1))
        .collect();
    for b in &data.buckets {
        let ord = match &b.label {
            None => Some(0),
            Some(l) => ord_of.get(l.as_str()).copied(),
        };
        if let Some(ord) = ord {
            seconds[ord].push(SecondIn {
                start_ms: b.start_ms,
                count: b.count,
                errors: b.errors,
                sum_ms: b.sum_ms,
                max_ms: b.max_ms,
                histogram: b.histogram.clone(),
            });
        }
    }
    for s in &mut seconds {
        s.sort_by_key(|x| x.start_ms);
    }
    let labels: Vec<Option<&str>> = std::iter::once(None)
        .chain(data.labels.iter().map(|l| Some(l.label.as_str())))
        .collect();
    let blobs = parallel(scopes, |i| {
        let d = bootstrap::draw(&seconds[i], resamples, bootstrap::seed_for(labels[i]));
        encode(resamples, d.as_ref())
    });
    blobs
        .into_iter()
        .enumerate()
        .map(|(i, b)| (i as i64, b))
        .collect()
}

/// `f(0..n)` on up to as many threads as the machine has cores, threads taking the next
/// index as they finish one; results in index order.
pub(super) fn parallel<T: Send, F: Fn(usize) -> T + Sync>(n: usize, f: F) -> Vec<T> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(n)
        .max(1);
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= n {
                        break;
                    }
                    let r = f(k);
                    if let Ok(mut o) = out.lock() {
                        o[k] = Some(r);
                    }
                }
            });
        }
    });
    out.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::compare::Figure;

    fn draws() -> Draws {
        Draws {
            resamples: 3,
            block_s: 24,
            seconds: 600,
            draws: vec![
                Draw {
                    count: 1_000_123,
                    errors: 10_002,
                    sum_ms: 123_456_789,
                    max_ms: 10_063,
                    seconds: 600,
                    percentiles_ms: [Some(70), Some(310), Some(450), Some(1_023)],
                },
                Draw {
                    count: 5,
                    errors: 0,
                    sum_ms: 50,
                    max_ms: 0,
                    seconds: 0,
                    percentiles_ms: [Some(0), None, Some(u64::MAX - 1), Some(1)],
                },
            ],
        }
    }

    #[test]
    fn blobs_read_back() {
        let d = draws();
        let blob = encode(3, Some(&d));
        assert_eq!(decode(&blob), Some((3, Some(d.clone()))));
        assert_eq!(decode(&encode(1000, None)), Some((1000, None)));
        let r = resampled(&blob, 3).unwrap().unwrap();
        assert_eq!(r.values, d.resampled().values);
        assert_eq!(r.get(Figure::MeanMs).unwrap()[1], 10.0);
        assert_eq!(r.block_s, 24);
        // Another resample count, format or damage: not usable.
        assert!(resampled(&blob, 1000).is_none());
        let mut other = blob.clone();
        other[0] = FORMAT + 1;
        assert!(decode(&other).is_none());
        for cut in 1..blob.len() {
            assert!(decode(&blob[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = blob.clone();
        longer.push(0);
        assert!(decode(&longer).is_none());
        assert!(decode(&[]).is_none());
        assert!(decode(&[FORMAT, 0x80, 0x80]).is_none());
    }
}
