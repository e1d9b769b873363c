//! Numbers for people: thousands separators, units, "–" for undefined values.
//!
//! The same rules as `static/harrier.js` (so live-inserted rows look like server rows).

/// "–": shown where a value is undefined (no samples), never 0 or NaN.
pub const NONE: &str = "–";

/// A request count: [`int`], except that 0 is "–" — a stored run always has requests,
/// so 0 means the count is unknown (figures published without it, see `harrier seed`).
pub fn count(v: i64) -> String {
    if v <= 0 { NONE.to_string() } else { int(v) }
}

/// 1234567 → "1,234,567".
pub fn int(v: i64) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if v < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A float with `decimals` places and thousands separators, halves rounded away from zero
/// (as the browser's `Intl.NumberFormat` does, so server and live rows agree).
pub fn float(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return NONE.to_string();
    }
    let factor = 10u128.pow(decimals as u32);
    let scaled = (v.abs() * factor as f64).round() as u128;
    let (whole, frac) = (scaled / factor, scaled % factor);
    let mut out = String::new();
    if v < 0.0 && scaled > 0 {
        out.push('-');
    }
    out.push_str(&int(i64::try_from(whole).unwrap_or(i64::MAX)));
    if decimals > 0 {
        out.push_str(&format!(".{frac:0decimals$}"));
    }
    out
}

/// Milliseconds: "3.5 ms" (< 10 ms: up to 1 decimal), "123 ms", "1.23 s" (≥ 1,000 ms).
pub fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let a = v.abs();
            if a < 10.0 {
                let s = float(v, 1);
                format!("{} ms", s.strip_suffix(".0").unwrap_or(&s))
            } else if a.round() < 1000.0 {
                format!("{} ms", float(v, 0))
            } else {
                format!("{} s", float(v / 1000.0, 2))
            }
        }
        _ => NONE.to_string(),
    }
}

/// A percentage: "12.34 %".
pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| NONE.to_string(), |v| format!("{} %", float(v, 2)))
}

/// Requests per second: "1,234.5 req/s".
pub fn rps(v: Option<f64>) -> String {
    v.map_or_else(|| NONE.to_string(), |v| format!("{} req/s", float(v, 1)))
}

/// Bytes, 1024-based like JMeter's KB/s: "512 B", "12.3 KB", "4.6 MB".
pub fn bytes(v: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = v as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{} B", int(v as i64))
    } else {
        format!("{} {}", float(value, 1), UNITS[unit])
    }
}

/// A duration: "850 ms", "12.35 s" (under a minute, as [`ms`]), "3 min 20 s", "1 h 02 min".
pub fn duration(v: Option<i64>) -> String {
    let Some(ms_total) = v else {
        return NONE.to_string();
    };
    if ms_total.abs() < 60_000 {
        return ms(Some(ms_total as f64));
    }
    let total_s = (ms_total as f64 / 1000.0).round() as i64;
    if total_s < 3600 {
        return format!("{} min {:02} s", total_s / 60, total_s % 60);
    }
    let total_min = (ms_total as f64 / 60_000.0).round() as i64;
    format!("{} h {:02} min", int(total_min / 60), total_min % 60)
}

/// Unix epoch ms → "2026-11-30 14:02:33 UTC".
pub fn time(v: Option<i64>) -> String {
    let Some(ms) = v else { return NONE.to_string() };
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000) else {
        return NONE.to_string();
    };
    let f = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    t.format(f).unwrap_or_else(|_| NONE.to_string())
}

/// A duration: `500ms`, `30s`, `5m`, `2h`, `7d`, or a plain number of ms.
pub fn parse_duration_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(p) => (&s[..p], &s[p..]),
        None => (s, "ms"),
    };
    let n: f64 = num.parse().ok()?;
    let factor = match unit {
        "ms" => 1.0,
        "s" => 1000.0,
        "m" | "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return None,
    };
    let ms = (n * factor).round();
    (ms.is_finite() && ms > 0.0 && ms < 1e15).then_some(ms as i64)
}

/// Percent-encodes a path segment (RFC 3986 unreserved characters stay).
pub fn path_segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_for_people() {
        assert_eq!(int(1_234_567), "1,234,567");
        assert_eq!(int(-1000), "-1,000");
        assert_eq!(int(999), "999");
        assert_eq!(float(191.25, 1), "191.3");
        assert_eq!(float(-0.04, 1), "0.0");
        assert_eq!(float(1234.5, 2), "1,234.50");
        assert_eq!(ms(Some(123.4)), "123 ms");
        assert_eq!(ms(Some(2.5)), "2.5 ms");
        assert_eq!(ms(Some(1234.0)), "1.23 s");
        assert_eq!(ms(None), "–");
        assert_eq!(ms(Some(f64::NAN)), "–");
        assert_eq!(pct(Some(28.571_428)), "28.57 %");
        assert_eq!(pct(None), "–");
        assert_eq!(rps(Some(1234.56)), "1,234.6 req/s");
        assert_eq!(rps(Some(4.938_272)), "4.9 req/s");
        assert_eq!(bytes(1536), "1.5 KB");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(ms(Some(3.0)), "3 ms");
        assert_eq!(ms(Some(75_000.0)), "75.00 s");
        assert_eq!(duration(Some(12_345)), "12.35 s");
        assert_eq!(duration(Some(200_000)), "3 min 20 s");
        assert_eq!(duration(Some(3_720_000)), "1 h 02 min");
        assert_eq!(time(Some(1_700_000_000_000)), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("1m"), Some(60_000));
        assert_eq!(parse_duration_ms("30s"), Some(30_000));
        assert_eq!(parse_duration_ms("1.5h"), Some(5_400_000));
        assert_eq!(parse_duration_ms("250"), Some(250));
        assert_eq!(parse_duration_ms("7d"), Some(604_800_000));
        assert_eq!(parse_duration_ms("1w"), None);
        assert_eq!(parse_duration_ms("-1s"), None);
        assert_eq!(parse_duration_ms(""), None);
    }
}
