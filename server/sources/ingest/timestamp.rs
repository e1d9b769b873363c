//! Timestamps written by load tools → unix epoch ms.
//!
//! JMeter writes epoch ms by default, or a `SimpleDateFormat` pattern
//! (`jmeter.save.saveservice.timestamp_format`) rendered in the JVM's time zone *without*
//! the zone (docs/formats.md#time-stamps-without-a-zone). harrier reads such naive stamps as **UTC**: durations,
//! windows, throughput and percentiles do not depend on the zone, absolute times shift by
//! the writer's offset. Stamps that carry a zone (`Z`, `+02:00`, `+0200`) are converted.

/// Parses an integer epoch-ms field (ASCII digits only, optional leading `-`).
#[inline]
pub fn parse_epoch_ms(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    let v = parse_u64(digits)?;
    let v = i64::try_from(v).ok()?;
    Some(if neg { -v } else { v })
}

/// Earliest sample time taken as real: 2000-01-01T00:00:00Z. Load-test results from
/// before that (a `0`, a seconds value mistaken for ms) are damaged rows.
pub const MIN_PLAUSIBLE_MS: i64 = 946_684_800_000;

/// Parses an epoch-ms sample time, `None` unless it is on or after [`MIN_PLAUSIBLE_MS`].
#[inline]
pub fn parse_sample_epoch_ms(b: &[u8]) -> Option<i64> {
    parse_epoch_ms(b).filter(|ms| *ms >= MIN_PLAUSIBLE_MS)
}

/// Parses a non-empty run of ASCII digits; `None` on anything else or overflow.
#[inline]
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    // Up to 19 digits cannot overflow u64: no checked arithmetic on the hot path.
    let (head, last) = if b.len() == 20 {
        (&b[..19], Some(b[19]))
    } else {
        (b, None)
    };
    let mut v: u64 = 0;
    for &c in head {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + u64::from(d);
    }
    match last {
        None => Some(v),
        Some(c) => {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v.checked_mul(10)?.checked_add(u64::from(d))
        }
    }
}

/// Parses a formatted date-time → epoch ms.
///
/// Accepted: `yyyy-MM-dd HH:mm:ss[.SSS]` with `-` or `/` between date parts and a space
/// or `T` before the time (so JMeter's `yyyy/MM/dd HH:mm:ss.SSS`, ISO 8601 and RFC 3339
/// all read), 1–9 fraction digits (kept to ms, truncated), then optionally `Z` or an
/// offset `±HH:MM` / `±HHMM` / `±HH`. Without a zone the value is taken as UTC.
pub fn parse_datetime_ms(b: &[u8]) -> Option<i64> {
    let mut c = Cursor { b, i: 0 };
    let year = c.digits(4)? as i64;
    let sep = c.byte()?;
    if sep != b'-' && sep != b'/' {
        return None;
    }
    let month = c.digits(2)?;
    c.expect(sep)?;
    let day = c.digits(2)?;
    match c.byte()? {
        b' ' | b'T' => {}
        _ => return None,
    }
    let hour = c.digits(2)?;
    c.expect(b':')?;
    let minute = c.digits(2)?;
    c.expect(b':')?;
    let second = c.digits(2)?;
    let mut millis = 0u32;
    if matches!(c.peek(), Some(b'.' | b',')) {
        c.i += 1;
        let start = c.i;
        while c.peek().is_some_and(|d| d.is_ascii_digit()) {
            c.i += 1;
        }
        let frac = &b[start..c.i];
        if frac.is_empty() || frac.len() > 9 {
            return None;
        }
        for k in 0..3 {
            millis = millis * 10 + frac.get(k).map_or(0, |d| u32::from(d - b'0'));
        }
    }
    let offset_s: i64 = match c.peek() {
        None => 0,
        Some(b'Z' | b'z') if c.i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) => {
            c.i += 1;
            let h = c.digits(2)? as i64;
            if c.peek() == Some(b':') {
                c.i += 1;
            }
            let m = if c.i < b.len() {
                c.digits(2)? as i64
            } else {
                0
            };
            if c.i != b.len() || h > 23 || m > 59 {
                return None;
            }
            let s = h * 3600 + m * 60;
            if sign == b'+' { s } else { -s }
        }
        Some(_) => return None,
    };
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second) - offset_s;
    Some(secs * 1000 + i64::from(millis))
}

/// A line that is only a time stamp, as a shell loop prints between tool runs
/// (`date; ab …`) → epoch ms. Accepted:
/// - ISO 8601 / RFC 3339 (`date -Is`, `date --rfc-3339=seconds`), see [`parse_datetime_ms`];
/// - epoch seconds (`date +%s`), 10 digits, optionally with a fraction;
/// - `date`'s default output in the C locale, `Tue Dec  1 15:01:40 UTC 2026`, when its zone
///   is `UTC`/`GMT`, a numeric offset (`+0100`), or one of the common abbreviations with a
///   single meaning (CET, CEST, EET, EEST, WET, WEST, BST, EST, EDT, CST, CDT, MST, MDT,
///   PST, PDT, JST, AEST, AEDT); an abbreviation outside that list gives `None` rather
///   than a time off by hours.
pub fn parse_date_line_ms(line: &str) -> Option<i64> {
    let t = line.trim();
    if t.is_empty() || t.len() > 64 {
        return None;
    }
    if let Some(ms) = parse_datetime_ms(t.as_bytes()) {
        return Some(ms);
    }
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.len() == 10
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
    {
        let s: i64 = int.parse().ok()?;
        let ms = frac
            .bytes()
            .chain(std::iter::repeat(b'0'))
            .take(3)
            .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
        return Some(s * 1000 + ms);
    }
    // Tue Dec  1 15:01:40 UTC 2026
    let f: Vec<&str> = t.split_whitespace().collect();
    let [_, month, day, time, zone, year] = f.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? as u32 + 1;
    let day: u32 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let offset_s: i64 = match *zone {
        "UTC" | "GMT" | "Z" | "WET" => 0,
        "CET" | "WEST" | "BST" => 3600,
        "CEST" | "EET" => 7200,
        "EEST" => 3 * 3600,
        "EST" => -5 * 3600,
        "EDT" | "CDT" => -5 * 3600 + if *zone == "EDT" { 3600 } else { 0 },
        "CST" => -6 * 3600,
        "MST" => -7 * 3600,
        "MDT" => -6 * 3600,
        "PST" => -8 * 3600,
        "PDT" => -7 * 3600,
        "JST" => 9 * 3600,
        "AEST" => 10 * 3600,
        "AEDT" => 11 * 3600,
        z if (z.starts_with('+') || z.starts_with('-')) && z.len() == 5 => {
            let h: i64 = z[1..3].parse().ok()?;
            let m: i64 = z[3..5].parse().ok()?;
            let s = h * 3600 + m * 60;
            if z.starts_with('-') { -s } else { s }
        }
        _ => return None,
    };
    let iso = format!("{year:04}-{month:02}-{day:02} {time}");
    Some(parse_datetime_ms(iso.as_bytes())? - offset_s * 1000)
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn byte(&mut self) -> Option<u8> {
        let v = self.peek()?;
        self.i += 1;
        Some(v)
    }
    fn expect(&mut self, want: u8) -> Option<()> {
        (self.byte()? == want).then_some(())
    }
    fn digits(&mut self, n: usize) -> Option<u32> {
        let s = self.b.get(self.i..self.i + n)?;
        self.i += n;
        s.iter().try_fold(0u32, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
        })
    }
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    #[test]
    fn date_lines_of_a_shell_loop() {
        use super::parse_date_line_ms as d;
        let t = 1_764_601_300_000; // 2025-12-01 15:01:40 UTC
        assert_eq!(d("Mon Dec  1 15:01:40 UTC 2025"), Some(t));
        assert_eq!(d("Mon Dec  1 16:01:40 CET 2025"), Some(t));
        assert_eq!(d("Mon Dec  1 10:01:40 EST 2025"), Some(t));
        assert_eq!(d("Mon Dec  1 09:01:40 CST 2025"), Some(t));
        assert_eq!(d("Mon Dec  1 17:01:40 +0200 2025"), Some(t));
        assert_eq!(d("2025-12-01T16:01:40+01:00"), Some(t));
        assert_eq!(d("1764601300"), Some(t));
        assert_eq!(d("1764601300.25"), Some(t + 250));
        assert_eq!(d("Mon Dec  1 15:01:40 IST 2025"), None, "ambiguous zone");
        assert_eq!(d("Benchmarking 127.0.0.1 (be patient)"), None);
        assert_eq!(d("Complete requests:      300"), None);
        assert_eq!(d("300"), None);
    }

    use super::*;

    #[test]
    fn formats() {
        // 2026-11-30T00:52:06.357Z = 1795999926357 (checked with `date -u -d ... +%s%3N`).
        assert_eq!(
            parse_datetime_ms(b"2026/11/30 00:52:06.357"),
            Some(1_795_999_926_357)
        );
        assert_eq!(
            parse_datetime_ms(b"2026-11-30 00:52:06.357"),
            Some(1_795_999_926_357)
        );
        assert_eq!(
            parse_datetime_ms(b"2026-11-30T00:52:06.357Z"),
            Some(1_795_999_926_357)
        );
        assert_eq!(
            parse_datetime_ms(b"2026-11-30T02:52:06.357+02:00"),
            Some(1_795_999_926_357)
        );
        assert_eq!(
            parse_datetime_ms(b"2026-11-30T00:52:06"),
            Some(1_795_999_926_000)
        );
        assert_eq!(parse_datetime_ms(b"1970-01-01 00:00:00.5"), Some(500));
        assert_eq!(
            parse_datetime_ms(b"2024-02-29 12:00:00"),
            Some(1_709_208_000_000)
        );
        assert_eq!(parse_datetime_ms(b"2023-02-29 12:00:00"), None);
        assert_eq!(parse_datetime_ms(b"30/11/2026 00:52:06"), None);
        assert_eq!(parse_datetime_ms(b"2026-11-30 00:52:06 junk"), None);
        assert_eq!(parse_epoch_ms(b"1700000000000"), Some(1_700_000_000_000));
        assert_eq!(parse_epoch_ms(b"17e11"), None);
        assert_eq!(parse_epoch_ms(b""), None);
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"99999999999999999999"), None);
        assert_eq!(
            parse_u64(b"1234567890123456789"),
            Some(1_234_567_890_123_456_789)
        );
    }
}
