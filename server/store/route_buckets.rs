//! Histogram buckets of one route interval as `route_samples.buckets` and
//! `route_rollups.buckets` keep them, and as the in-memory recent intervals hold them: a
//! compact binary form of a few bytes a bucket (11 buckets counting hundreds: ~45 bytes,
//! where their JSON text took ~135 and their decoded pairs 176 on the heap).
//!
//! The form:
//! - the byte `0x01` (the form's version);
//! - `n`, the number of buckets, and the byte length of the bounds that follow, each an
//!   unsigned LEB128 varint;
//! - `n` upper bounds in the order given, each a varint: `0` = `+Inf`; `1` then the bound's
//!   8 bytes (IEEE 754, little-endian); `2 + (m << 5 | k)` = the decimal `m / 10^k` with
//!   `k ≤ 22` and `m < 2^53`. Both are exact in an `f64`, so the quotient is the `f64`
//!   nearest that decimal: the very value a parser gives for `le="0.005"` (`m = 5, k = 3`,
//!   two bytes);
//! - the width `w` of the increases (1, 2 or 4: whole numbers below 2^8, 2^16, 2^32; 8:
//!   IEEE 754 doubles), then `n` increases of `w` bytes each, little-endian.
//!
//! Counts of one width let a window's sum add a set with a loop over fixed-size numbers,
//! and its bounds, compared as bytes with the last set's, are not decoded at all
//! ([`Adder`]): summing a minute of a thousand routes reads ~74,000 sets.
//!
//! Not stored (the column is NULL): a set whose increases are all zero (an idle route's
//! interval adds nothing to a window's sums or percentiles), and a set with a non-finite
//! increase (which the JSON text before this form could not hold either: such a set read
//! back as none). A non-finite bound is stored as `+Inf`, as that text stored it.
//!
//! Rows written before this form hold that JSON text (`[[le, increase], …]`, `null` =
//! `+Inf`; it starts with `[`): they are read as before. Bytes that are neither read as no
//! buckets; nothing here panics on what the database gives back.
//!
//! The encoding is written here rather than taken from a serialisation crate because its
//! gains, bounds as short decimals and counts of one width, are particular to
//! Prometheus-style histograms; a general format (postcard, bincode) spends 16 bytes a
//! bucket and decodes each number on its own.

use crate::domain::routes::merge_buckets;

const VERSION: u8 = 1;
/// `10^k` for `k` in `0..=22`: every one exact in an `f64`.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];
/// 2^53: whole numbers below it are exact in an `f64`.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// `buckets` (upper bound, increase) in the compact form; `None` when nothing is to be stored
/// (empty, all increases zero, or a non-finite increase).
pub(crate) fn encode(buckets: &[(f64, f64)]) -> Option<Vec<u8>> {
    if buckets.is_empty()
        || buckets.iter().any(|(_, c)| !c.is_finite())
        || buckets.iter().all(|(_, c)| *c == 0.0)
    {
        return None;
    }
    let mut bounds = Vec::with_capacity(buckets.len() * 2);
    for (le, _) in buckets {
        put_bound(&mut bounds, *le);
    }
    let whole = buckets.iter().all(|(_, c)| c.fract() == 0.0 && *c >= 0.0);
    let top = buckets.iter().fold(0.0_f64, |m, (_, c)| m.max(*c));
    let width: u8 = match top {
        _ if !whole => 8,
        t if t <= f64::from(u8::MAX) => 1,
        t if t <= f64::from(u16::MAX) => 2,
        t if t <= f64::from(u32::MAX) => 4,
        _ => 8,
    };
    let mut out = Vec::with_capacity(6 + bounds.len() + buckets.len() * usize::from(width));
    out.push(VERSION);
    put_varint(&mut out, buckets.len() as u64);
    put_varint(&mut out, bounds.len() as u64);
    out.extend_from_slice(&bounds);
    out.push(width);
    for (_, c) in buckets {
        match width {
            1 => out.push(*c as u8),
            2 => out.extend_from_slice(&(*c as u16).to_le_bytes()),
            4 => out.extend_from_slice(&(*c as u32).to_le_bytes()),
            _ => out.extend_from_slice(&c.to_le_bytes()),
        }
    }
    Some(out)
}

/// The buckets stored as `bytes` (the compact form or the older JSON text); none when
/// `bytes` is `None` or not readable.
pub(crate) fn decode(bytes: Option<&[u8]>) -> Vec<(f64, f64)> {
    match bytes {
        Some(b) if b.first() == Some(&b'[') => serde_json::from_slice::<Vec<(Option<f64>, f64)>>(b)
            .unwrap_or_default()
            .into_iter()
            .map(|(le, c)| (le.unwrap_or(f64::INFINITY), c))
            .collect(),
        Some(b) => read(b).unwrap_or_default(),
        None => Vec::new(),
    }
}

/// `bytes` as the compact form: kept when it is that form, converted when it is the older
/// JSON text; `None` when it holds nothing to keep.
pub(crate) fn compact(bytes: Vec<u8>) -> Option<Box<[u8]>> {
    if bytes.first() == Some(&VERSION) && read(&bytes).is_some() {
        return Some(bytes.into_boxed_slice());
    }
    encode(&decode(Some(&bytes))).map(Vec::into_boxed_slice)
}

/// Adds the buckets stored as `bytes` to `acc` as [`merge_buckets`] does. The common case,
/// a set with the bounds `acc` already has, adds in place without decoding into a new list.
pub(crate) fn merge_into(acc: &mut Vec<(f64, f64)>, bytes: &[u8]) {
    if bytes.first() == Some(&b'[') {
        merge_buckets(acc, &decode(Some(bytes)));
        return;
    }
    let Some(set) = Set::split(bytes) else {
        return;
    };
    if acc.len() == set.n && set.bounds_are(acc) {
        set.add_counts(acc);
        return;
    }
    merge_buckets(acc, &read(bytes).unwrap_or_default());
}

/// Adds stored sets one after another into one list, as [`merge_into`] does; a set whose
/// bounds are written byte for byte as those of the set added before it, which the list
/// then has in the same order, only adds its counts (no bound is decoded). The common
/// case: summing a route's intervals over a window, sixty and more sets with one layout.
/// One adder serves one list.
#[derive(Debug, Default)]
pub(crate) struct Adder<'b> {
    /// The bounds part of the last set added, when the list's bounds are those, in order.
    bounds: &'b [u8],
}

impl<'b> Adder<'b> {
    pub(crate) fn add(&mut self, acc: &mut Vec<(f64, f64)>, bytes: &'b [u8]) {
        let Some(set) = Set::split(bytes) else {
            // The older JSON text, or unreadable.
            merge_into(acc, bytes);
            self.bounds = &[];
            return;
        };
        if !self.bounds.is_empty() && set.bounds == self.bounds && acc.len() == set.n {
            set.add_counts(acc);
            return;
        }
        merge_into(acc, bytes);
        let same = acc.len() == set.n && set.bounds_are(acc);
        self.bounds = if same { set.bounds } else { &[] };
    }
}

/// A stored set split into its parts: found in constant time, the bounds not yet read.
struct Set<'a> {
    n: usize,
    bounds: &'a [u8],
    width: usize,
    counts: &'a [u8],
}

impl<'a> Set<'a> {
    /// The parts of `bytes` when their lengths agree (the bounds are checked when read).
    fn split(bytes: &'a [u8]) -> Option<Set<'a>> {
        if *bytes.first()? != VERSION {
            return None;
        }
        let mut r = Reader { bytes, pos: 1 };
        let n = usize::try_from(r.varint()?).ok()?;
        let len = usize::try_from(r.varint()?).ok()?;
        let rest = &bytes[r.pos..];
        // Every bound takes at least a byte; the width byte follows them.
        if n > len || len >= rest.len() {
            return None;
        }
        let (bounds, rest) = rest.split_at(len);
        let width = usize::from(rest[0]);
        let counts = &rest[1..];
        (matches!(width, 1 | 2 | 4 | 8) && Some(counts.len()) == n.checked_mul(width)).then_some(
            Set {
                n,
                bounds,
                width,
                counts,
            },
        )
    }

    /// The bounds, in order; `None` when they do not read as exactly `n` bounds.
    fn bounds(&self) -> Option<Vec<f64>> {
        let mut r = Reader {
            bytes: self.bounds,
            pos: 0,
        };
        let out: Option<Vec<f64>> = (0..self.n).map(|_| r.bound()).collect();
        out.filter(|_| r.pos == self.bounds.len())
    }

    /// Whether `acc`'s bounds are this set's, in order.
    fn bounds_are(&self, acc: &[(f64, f64)]) -> bool {
        let mut r = Reader {
            bytes: self.bounds,
            pos: 0,
        };
        acc.iter().all(|(le, _)| r.bound() == Some(*le)) && r.pos == self.bounds.len()
    }

    /// Adds the counts to `acc` by position (`acc` has `n` buckets).
    fn add_counts(&self, acc: &mut [(f64, f64)]) {
        let c = self.counts;
        match self.width {
            1 => acc
                .iter_mut()
                .zip(c)
                .for_each(|(a, b)| a.1 += f64::from(*b)),
            2 => acc
                .iter_mut()
                .zip(c.chunks_exact(2))
                .for_each(|(a, b)| a.1 += f64::from(u16::from_le_bytes([b[0], b[1]]))),
            4 => acc
                .iter_mut()
                .zip(c.chunks_exact(4))
                .for_each(|(a, b)| a.1 += f64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
            _ => acc
                .iter_mut()
                .zip(c.chunks_exact(8))
                .for_each(|(a, b)| a.1 += f64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
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

fn put_bound(out: &mut Vec<u8>, le: f64) {
    if !le.is_finite() {
        out.push(0);
        return;
    }
    if le >= 0.0 {
        for (k, p) in POW10.iter().enumerate() {
            let m = (le * p).round();
            if m >= EXACT {
                break;
            }
            if m / p == le {
                put_varint(out, 2 + (((m as u64) << 5) | k as u64));
                return;
            }
        }
    }
    out.push(1);
    out.extend_from_slice(&le.to_le_bytes());
}

fn read(bytes: &[u8]) -> Option<Vec<(f64, f64)>> {
    let set = Set::split(bytes)?;
    let mut out: Vec<(f64, f64)> = set.bounds()?.into_iter().map(|le| (le, 0.0)).collect();
    set.add_counts(&mut out);
    Some(out)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.bytes.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn bound(&mut self) -> Option<f64> {
        match self.varint()? {
            0 => Some(f64::INFINITY),
            1 => {
                let b = self.bytes.get(self.pos..self.pos + 8)?;
                self.pos += 8;
                Some(f64::from_le_bytes(b.try_into().ok()?))
            }
            v => {
                let v = v - 2;
                let k = (v & 31) as usize;
                Some((v >> 5) as f64 / POW10.get(k)?)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROM: [f64; 11] = [
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ];

    fn set(counts: &[f64]) -> Vec<(f64, f64)> {
        PROM.iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(counts.iter().copied())
            .collect()
    }

    #[test]
    fn buckets_round_trip_in_a_few_bytes_each() {
        let b = set(&[
            0.0, 3.0, 7.0, 7.0, 9.0, 12.0, 12.0, 300.0, 1e12, 2.5, 0.125, 1e300,
        ]);
        let bytes = encode(&b).expect("stored");
        assert_eq!(decode(Some(&bytes)), b);
        // Bounds parsed from their decimal text come back bit for bit.
        for le in PROM
            .iter()
            .chain(&[1e-9, 123.456, 0.3, 7e15, 1e20, -0.5, 1.0 / 3.0])
        {
            let text: f64 = le.to_string().parse().unwrap();
            let back = decode(Some(&encode(&[(text, 1.0)]).unwrap()));
            assert_eq!(back[0].0.to_bits(), text.to_bits(), "{le}");
        }
        // Twelve Prometheus default buckets with small counts: 3 bytes header, ≤ 2 bytes a
        // bound, the width, 1 byte a count; counts past 255 take 2 bytes each.
        let small = encode(&set(&[1.0; 12])).unwrap();
        assert!(small.len() <= 3 + 12 * 2 + 1 + 12, "{} bytes", small.len());
        let wider = encode(&set(&[300.0; 12])).unwrap();
        assert_eq!(wider.len(), small.len() + 12);
        for (c, width) in [
            (255.0, 1),
            (256.0, 2),
            (65_536.0, 4),
            (4_294_967_296.0, 8),
            (0.5, 8),
        ] {
            let b = set(&[c; 12]);
            let bytes = encode(&b).unwrap();
            assert_eq!(bytes.len(), small.len() + 12 * (width - 1), "{c}");
            assert_eq!(decode(Some(&bytes)), b, "{c}");
        }
        let json = serde_json::to_string(&set(&[1.0; 12])).unwrap();
        assert!(
            small.len() * 3 < json.len(),
            "{} vs JSON {}",
            small.len(),
            json.len()
        );
    }

    #[test]
    fn idle_and_unstorable_sets_are_not_stored() {
        assert_eq!(encode(&[]), None);
        assert_eq!(encode(&set(&[0.0; 12])), None);
        assert_eq!(encode(&set(&[1.0, f64::NAN, 2.0])), None);
        // A non-finite bound is +Inf, as the JSON text kept it.
        let b = decode(Some(
            &encode(&[(f64::NAN, 1.0), (f64::NEG_INFINITY, 2.0)]).unwrap(),
        ));
        assert_eq!(b, vec![(f64::INFINITY, 1.0), (f64::INFINITY, 2.0)]);
    }

    #[test]
    fn rows_in_the_older_json_text_read_as_before() {
        let json = br#"[[0.1,2.0],[0.5,3.0],[null,4.0]]"#;
        let want = vec![(0.1, 2.0), (0.5, 3.0), (f64::INFINITY, 4.0)];
        assert_eq!(decode(Some(json)), want);
        let mut acc = Vec::new();
        merge_into(&mut acc, json);
        merge_into(&mut acc, &encode(&want).unwrap());
        assert_eq!(acc, vec![(0.1, 4.0), (0.5, 6.0), (f64::INFINITY, 8.0)]);
        let kept = compact(json.to_vec()).expect("kept");
        assert_eq!(kept[0], VERSION);
        assert_eq!(decode(Some(&kept)), want);
        assert_eq!(compact(br#"[[0.1,0.0]]"#.to_vec()), None);
    }

    #[test]
    fn damaged_bytes_read_as_no_buckets() {
        let good = encode(&set(&[1.0, 2.0, 3.0, 4.0])).unwrap();
        for cut in 0..good.len() {
            assert!(decode(Some(&good[..cut])).is_empty(), "cut at {cut}");
            let mut acc = vec![(1.0, 5.0)];
            merge_into(&mut acc, &good[..cut]);
            assert_eq!(acc, vec![(1.0, 5.0)], "cut at {cut}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(decode(Some(&longer)).is_empty());
        assert!(decode(Some(&[VERSION, 0xff, 0xff, 0xff, 0xff, 0x0f])).is_empty());
        assert!(decode(Some(b"[not json")).is_empty());
        assert!(decode(Some(&[9, 1, 0, 2])).is_empty());
        // A width that is not 1, 2, 4 or 8; bounds that do not fill their length.
        let mut bad_width = good.clone();
        // four counts of one byte, after the width byte
        let at = good.len() - 4 - 1;
        assert_eq!(bad_width[at], 1, "the width byte");
        bad_width[at] = 3;
        assert!(decode(Some(&bad_width)).is_empty());
        assert!(decode(Some(&[VERSION, 1, 2, 0, 0, 1, 7])).is_empty());
    }

    #[test]
    fn adding_sets_in_a_row_equals_merging_the_lists() {
        let a = set(&[
            1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0,
        ]);
        let other: Vec<(f64, f64)> = vec![(0.2, 1.0), (0.01, 4.0), (f64::INFINITY, 5.5)];
        // The same bounds unsorted: positions differ from the sorted list's.
        let reversed: Vec<(f64, f64)> = a.iter().rev().copied().collect();
        let sets: Vec<Vec<u8>> = [&a, &a, &reversed, &reversed, &other, &a, &a]
            .iter()
            .map(|b| encode(b).unwrap())
            .chain([br#"[[0.5,1.0],[null,2.0]]"#.to_vec()])
            .collect();
        let mut want = Vec::new();
        for b in &sets {
            merge_buckets(&mut want, &decode(Some(b)));
        }
        let mut got = Vec::new();
        let mut adder = Adder::default();
        for b in &sets {
            adder.add(&mut got, b);
        }
        assert_eq!(got, want);
        // From the first set on, bounds match: counts only.
        let mut got = Vec::new();
        let mut adder = Adder::default();
        for _ in 0..3 {
            adder.add(&mut got, &sets[0]);
        }
        assert_eq!(
            got,
            a.iter().map(|(le, c)| (*le, c * 3.0)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn merging_stored_sets_equals_merging_the_lists() {
        let a = set(&[
            1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0,
        ]);
        let other: Vec<(f64, f64)> = vec![(0.2, 1.0), (0.01, 4.0), (f64::INFINITY, 5.5)];
        let mut want = Vec::new();
        let mut got = Vec::new();
        for b in [&a, &a, &other, &a] {
            merge_buckets(&mut want, b);
            merge_into(&mut got, &encode(b).unwrap());
        }
        assert_eq!(got, want);
        assert!(got.iter().any(|(le, _)| *le == 0.2));
        assert_eq!(got.last(), Some(&(f64::INFINITY, 12.0 * 3.0 + 5.5)));
    }
}
