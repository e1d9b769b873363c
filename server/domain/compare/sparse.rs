//! Reads a stored bucket histogram (HdrHistogram V2, see [`crate::domain::runs::hdr`]) straight
//! into its non-zero bins, without building a [`hdrhistogram::Histogram`].
//!
//! The bootstrap merges thousands of per-second histograms per run; allocating and zeroing a
//! full counts array for each (what the `hdrhistogram` deserializer does) costs more than
//! the whole resampling. Here a histogram becomes a short list of `(bin index, count)`, and
//! [`Layout::highest_value`] turns a bin index back into the value the rest of harrier reads
//! for it (the bin's highest equivalent value, as [`crate::domain::runs::hdr::histogram_percentile`]).
//!
//! Format (HdrHistogram's `EncodableHistogram`, V2, uncompressed): a 40-byte big-endian
//! header — cookie `0x1c849313`, payload length, normalizing index offset (must be 0),
//! significant digits, lowest discernible value, highest trackable value, integer-to-double
//! ratio — then the counts array as ZigZag LEB128 varints, where a negative number `-z`
//! stands for `z` zero counts.

/// How bin indices map to values (derived from the header, as `hdrhistogram` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    unit_magnitude: u32,
    sub_bucket_half_count_magnitude: u32,
}

/// Why a stored histogram could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored histogram is not HdrHistogram V2 data harrier can read: {0}")]
pub struct SparseError(&'static str);

// The cookie base 0x1c849303 with the word-size bits (0x10) the Rust and Java writers set.
const V2_COOKIE: u32 = 0x1c84_9313;
const HEADER_LEN: usize = 40;

impl Layout {
    fn new(significant_digits: u32, lowest_discernible: u64) -> Result<Layout, SparseError> {
        if !(1..=5).contains(&significant_digits) || lowest_discernible == 0 {
            return Err(SparseError("bad header parameters"));
        }
        let largest_single_unit = 2 * 10u64.pow(significant_digits);
        let sub_bucket_count_magnitude = (largest_single_unit as f64).log2().ceil() as u32;
        Ok(Layout {
            unit_magnitude: (lowest_discernible as f64).log2().floor() as u32,
            sub_bucket_half_count_magnitude: sub_bucket_count_magnitude.saturating_sub(1).max(1),
        })
    }

    /// The highest value counted in bin `index` (what percentile reads report).
    pub fn highest_value(&self, index: u32) -> u64 {
        let half = self.sub_bucket_half_count_magnitude;
        let mut bucket = (i64::from(index) >> half) - 1;
        let mut sub = u64::from(index & ((1 << half) - 1)) + (1u64 << half);
        if bucket < 0 {
            sub -= 1 << half;
            bucket = 0;
        }
        let shift = bucket as u32 + self.unit_magnitude;
        let lowest = sub << shift;
        lowest + (1u64 << shift) - 1
    }
}

fn read_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..9 {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        if i == 8 {
            // The ninth byte carries a full 8 bits (HdrHistogram's LEB128 variant).
            return Some(value | (u64::from(b) << 56));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

/// Appends the non-zero bins of one serialized histogram to `out` as `(index, count)`, in
/// ascending index order; returns its layout.
pub fn decode_into(bytes: &[u8], out: &mut Vec<(u32, u64)>) -> Result<Layout, SparseError> {
    if bytes.len() < HEADER_LEN {
        return Err(SparseError("shorter than the header"));
    }
    if be_u32(bytes, 0) != V2_COOKIE {
        return Err(SparseError("not the uncompressed V2 cookie"));
    }
    let payload_len = be_u32(bytes, 4) as usize;
    if be_u32(bytes, 8) != 0 {
        return Err(SparseError("normalizing index offset is not 0"));
    }
    let layout = Layout::new(be_u32(bytes, 12), be_u64(bytes, 16))?;
    let payload = bytes
        .get(HEADER_LEN..HEADER_LEN + payload_len)
        .ok_or(SparseError("payload cut short"))?;
    let (mut pos, mut index) = (0usize, 0u64);
    while pos < payload.len() {
        let zz = read_varint(payload, &mut pos).ok_or(SparseError("truncated varint"))?;
        let v = ((zz >> 1) as i64) ^ -((zz & 1) as i64);
        if v < 0 {
            index += v.unsigned_abs();
        } else {
            if v > 0 {
                let i = u32::try_from(index).map_err(|_| SparseError("index out of range"))?;
                out.push((i, v as u64));
            }
            index += 1;
        }
    }
    Ok(layout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::runs::hdr::{
        deserialize_histogram, histogram_percentile, new_histogram, serialize_histogram,
    };

    #[test]
    fn bins_read_back_as_the_hdr_crate_reads_them() {
        let mut h = new_histogram::<u64>();
        let mut x = 7u64;
        for i in 0..5_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = 1 + (x >> 40) % 90_000 + i % 3;
            h.record(v).unwrap();
        }
        h.record_n(0, 3).unwrap();
        let bytes = serialize_histogram(&h);
        let mut bins = Vec::new();
        let layout = decode_into(&bytes, &mut bins).unwrap();
        assert_eq!(bins.iter().map(|b| b.1).sum::<u64>(), h.len());
        assert!(bins.windows(2).all(|w| w[0].0 < w[1].0));
        let back = deserialize_histogram(&bytes).unwrap();
        for p in [0.1, 1.0, 25.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0] {
            let rank = crate::domain::runs::nearest_rank(h.len(), p);
            let mut seen = 0;
            let ours = bins
                .iter()
                .find(|(_, n)| {
                    seen += n;
                    seen >= rank
                })
                .map(|(i, _)| layout.highest_value(*i));
            assert_eq!(ours, histogram_percentile(&back, p), "p{p}");
        }
    }

    #[test]
    fn rejects_damage() {
        let mut out = Vec::new();
        assert!(decode_into(b"nope", &mut out).is_err());
        let mut h = new_histogram::<u64>();
        h.record(5).unwrap();
        let mut bytes = serialize_histogram(&h);
        bytes[0] ^= 0xff;
        assert!(decode_into(&bytes, &mut out).is_err());
    }
}
