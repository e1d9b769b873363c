//! Histogram buckets of one route interval as `route_samples.buckets` and
//! `route_rollups.buckets` keep them, and as the in-memory recent intervals hold them: a
//! compact binary form of a few bytes a bucket (11 buckets counting hundreds: ~40 bytes,
//! where their JSON text took ~135 and their decoded pairs 176 on the heap).
//!
//! The form, every integer an unsigned LEB128 varint:
//! - the byte `0x01` (the form's version);
//! - `n`, the number of buckets;
//! - `n` upper bounds in the order given, each one of: `0` = `+Inf`; `1` then the bound's
//!   8 bytes (IEEE 754, little-endian); `2 + (m << 5 | k)` = the decimal `m / 10^k` with
//!   `k ≤ 22` and `m < 2^53`. Both are exact in an `f64`, so the quotient is the `f64`
//!   nearest that decimal: the very value a parser gives for `le="0.005"` (`m = 5, k = 3`,
//!   two bytes);
//! - `n` increases, each one of: `2c` = the whole number `c < 2^53`; `1` then its 8 bytes.
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
//! one gain, bounds as short decimals, is particular to Prometheus-style `le` labels; a
//! general format (postcard, bincode) spends 16 bytes a bucket.

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
    let mut out = Vec::with_capacity(2 + buckets.len() * 3);
    out.push(VERSION);
    put_varint(&mut out, buckets.len() as u64);
    for (le, _) in buckets {
        put_bound(&mut out, *le);
    }
    for (_, c) in buckets {
        if c.fract() == 0.0 && *c >= 0.0 && *c < EXACT {
            put_varint(&mut out, (*c as u64) << 1);
        } else {
            out.push(1);
            out.extend_from_slice(&c.to_le_bytes());
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
/// a window's intervals with the bounds `acc` already has, adds in place without decoding
/// into a new list.
pub(crate) fn merge_into(acc: &mut Vec<(f64, f64)>, bytes: &[u8]) {
    if bytes.first() == Some(&b'[') {
        merge_buckets(acc, &decode(Some(bytes)));
        return;
    }
    let Some(n) = check(bytes) else {
        return;
    };
    if acc.len() == n {
        let mut r = Reader::new(bytes);
        let _ = r.header();
        if acc.iter().all(|(le, _)| r.bound() == Some(*le)) {
            for (_, c) in acc.iter_mut() {
                *c += r.count().unwrap_or(0.0);
            }
            return;
        }
    }
    merge_buckets(acc, &read(bytes).unwrap_or_default());
}

/// Adds stored sets one after another into one list, as [`merge_into`] does; a set whose
/// bounds are written byte for byte as those of the set added before it, which the list
/// then has in the same order, only adds its counts (no bound is decoded). The common
/// case: summing a route's intervals over a window, sixty and more sets with one layout.
#[derive(Debug, Default)]
pub(crate) struct Adder<'b> {
    /// The bounds part of the last set added, when the list's bounds are those, in order.
    bounds: &'b [u8],
}

impl<'b> Adder<'b> {
    pub(crate) fn add(&mut self, acc: &mut Vec<(f64, f64)>, bytes: &'b [u8]) {
        let Some((n, bounds, counts)) = split(bytes) else {
            // The older JSON text, or unreadable.
            merge_into(acc, bytes);
            self.bounds = &[];
            return;
        };
        if !self.bounds.is_empty() && bounds == self.bounds && acc.len() == n {
            let mut r = Reader::new(counts);
            for (_, c) in acc.iter_mut() {
                *c += r.count().unwrap_or(0.0);
            }
            return;
        }
        merge_into(acc, bytes);
        let mut r = Reader::new(bounds);
        let same = acc.len() == n && acc.iter().all(|(le, _)| r.bound() == Some(*le));
        self.bounds = if same { bounds } else { &[] };
    }
}

/// A whole, readable compact set as (number of buckets, its bounds part, its counts part).
fn split(bytes: &[u8]) -> Option<(usize, &[u8], &[u8])> {
    let mut r = Reader::new(bytes);
    let n = r.header()?;
    let start = r.pos;
    let mut mid = start;
    for i in 0..2 * n {
        if i == n {
            mid = r.pos;
        }
        if r.varint()? == 1 {
            r.raw()?;
        }
    }
    if n == 0 {
        mid = r.pos;
    }
    r.at_end().then(|| (n, &bytes[start..mid], &bytes[mid..]))
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

/// The number of buckets when `bytes` is a whole, readable compact set.
fn check(bytes: &[u8]) -> Option<usize> {
    let mut r = Reader::new(bytes);
    let n = r.header()?;
    for _ in 0..2 * n {
        // Bounds then counts: each item is a varint head, 1 = 8 raw bytes follow.
        if r.varint()? == 1 {
            r.raw()?;
        }
    }
    r.at_end().then_some(n)
}

fn read(bytes: &[u8]) -> Option<Vec<(f64, f64)>> {
    let n = check(bytes)?;
    let mut r = Reader::new(bytes);
    r.header()?;
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(n);
    for _ in 0..n {
        out.push((r.bound()?, 0.0));
    }
    for b in &mut out {
        b.1 = r.count()?;
    }
    Some(out)
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// The version byte and the number of buckets (at most one a byte that follows, so a
    /// damaged length cannot ask for a large allocation).
    fn header(&mut self) -> Option<usize> {
        if *self.bytes.first()? != VERSION {
            return None;
        }
        self.pos = 1;
        let n = usize::try_from(self.varint()?).ok()?;
        (n <= self.bytes.len()).then_some(n)
    }

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

    fn raw(&mut self) -> Option<f64> {
        let b = self.bytes.get(self.pos..self.pos + 8)?;
        self.pos += 8;
        Some(f64::from_le_bytes(b.try_into().ok()?))
    }

    fn bound(&mut self) -> Option<f64> {
        match self.varint()? {
            0 => Some(f64::INFINITY),
            1 => self.raw(),
            v => {
                let v = v - 2;
                let k = (v & 31) as usize;
                Some((v >> 5) as f64 / POW10.get(k)?)
            }
        }
    }

    fn count(&mut self) -> Option<f64> {
        match self.varint()? {
            1 => self.raw(),
            v => Some((v >> 1) as f64),
        }
    }

    fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
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
        // Twelve Prometheus default buckets with small counts: 2 bytes header, ≤ 2 bytes a
        // bound, 1 byte a count.
        let small = encode(&set(&[1.0; 12])).unwrap();
        assert!(small.len() <= 2 + 12 * 2 + 12, "{} bytes", small.len());
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
