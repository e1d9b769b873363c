//! Numbers for people: thousands separators, units, "–" for undefined values.
//!
//! The same rules as `static/harrier.js` (so live-inserted rows look like server rows).

/// "–": shown where a value is undefined (no samples), never 0 or NaN.
pub const NONE: &str = "–";

/// 1234567 → "1,234,567".
pub fn int(v: i64) -> String {
    let digits = v.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if v < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A float with `decimals` places and thousands separators.
pub fn float(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return NONE.to_string();
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (whole, frac) = s
        .split_once('.')
        .map_or((s.as_str(), None), |(w, f)| (w, Some(f)));
    let mut out = if v < 0.0 && s.chars().any(|c| c != '0' && c != '.') {
        "-".to_string()
    } else {
        String::new()
    };
    out.push_str(&int(whole.parse::<i64>().unwrap_or(0)));
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// Milliseconds: "0.8 ms", "123 ms", "1.23 s", "75.0 s".
pub fn ms(v: Option<f64>) -> String {
    match v {
        None => NONE.to_string(),
        Some(v) if !v.is_finite() => NONE.to_string(),
        Some(v) if v.abs() < 10.0 && v.fract() != 0.0 => format!("{} ms", float(v, 1)),
        Some(v) if v.abs() < 1000.0 => format!("{} ms", float(v, 0)),
        Some(v) if v.abs() < 60_000.0 => format!("{} s", float(v / 1000.0, 2)),
        Some(v) => format!("{} s", float(v / 1000.0, 1)),
    }
}

/// A percentage: "12.34 %".
pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| NONE.to_string(), |v| format!("{} %", float(v, 2)))
}

/// Requests per second: "1,234.5 req/s".
pub fn rps(v: Option<f64>) -> String {
    v.map_or_else(
        || NONE.to_string(),
        |v| format!("{} req/s", float(v, if v < 100.0 { 2 } else { 1 })),
    )
}

/// Bytes in binary units: "512 B", "12.3 KiB", "4.56 MiB".
pub fn bytes(v: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = v as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v} B")
    } else {
        format!(
            "{} {}",
            float(value, if value < 10.0 { 2 } else { 1 }),
            UNITS[unit]
        )
    }
}

/// A duration: "850 ms", "42.0 s", "3 min 20 s", "1 h 02 min".
pub fn duration(v: Option<i64>) -> String {
    let Some(ms) = v else { return NONE.to_string() };
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let s = ms / 1000;
    if s < 60 {
        return format!("{} s", float(ms as f64 / 1000.0, 1));
    }
    if s < 3600 {
        return format!("{} min {:02} s", s / 60, s % 60);
    }
    format!("{} h {:02} min", s / 3600, (s % 3600) / 60)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_for_people() {
        assert_eq!(int(1_234_567), "1,234,567");
        assert_eq!(int(-1000), "-1,000");
        assert_eq!(int(999), "999");
        assert_eq!(ms(Some(123.4)), "123 ms");
        assert_eq!(ms(Some(2.5)), "2.5 ms");
        assert_eq!(ms(Some(1234.0)), "1.23 s");
        assert_eq!(ms(None), "–");
        assert_eq!(ms(Some(f64::NAN)), "–");
        assert_eq!(pct(Some(28.571_428)), "28.57 %");
        assert_eq!(pct(None), "–");
        assert_eq!(rps(Some(1234.56)), "1,234.6 req/s");
        assert_eq!(rps(Some(4.938_272)), "4.94 req/s");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(duration(Some(200_000)), "3 min 20 s");
        assert_eq!(duration(Some(3_720_000)), "1 h 02 min");
        assert_eq!(time(Some(1_700_000_000_000)), "2023-11-14 22:13:20 UTC");
    }
}
