//! A comparison as text: a terminal table, Markdown for a pull request, and ONE
//! self-contained HTML file (inline CSS, inline SVG charts drawn here, no script, nothing
//! fetched) that can be mailed.

use std::fmt::Write as _;

use super::{Comparison, Figure, RunScope, Verdict};

/// One run's series for the overlay charts, x = seconds since the run's first bucket.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overlay {
    pub run_id: i64,
    pub x_s: Vec<f64>,
    pub p95_ms: Vec<Option<f64>>,
    pub throughput_rps: Vec<Option<f64>>,
    pub error_pct: Vec<Option<f64>>,
    /// Percentile curve: (p, ms).
    pub curve: Vec<(f64, f64)>,
}

impl Overlay {
    /// From `GET /api/v1/runs/{id}/timeseries` (a `Series`) and the `curve` of
    /// `GET /api/v1/runs/{id}/distribution` (either may be `null`).
    pub fn from_json(run_id: i64, series: &serde_json::Value, dist: &serde_json::Value) -> Self {
        let nums = |v: &serde_json::Value| -> Vec<Option<f64>> {
            v.as_array()
                .map(|a| a.iter().map(serde_json::Value::as_f64).collect())
                .unwrap_or_default()
        };
        let t = nums(&series["t_ms"]);
        let t0 = t.first().copied().flatten().unwrap_or(0.0);
        let bucket_s = series["bucket_ms"].as_f64().unwrap_or(1000.0) / 1000.0;
        let rps = nums(&series["count"])
            .into_iter()
            .map(|c| c.map(|c| c / bucket_s))
            .collect();
        let ps = nums(&dist["curve"]["p"]);
        let ms = nums(&dist["curve"]["ms"]);
        Overlay {
            run_id,
            x_s: t.iter().map(|x| (x.unwrap_or(t0) - t0) / 1000.0).collect(),
            p95_ms: nums(&series["p95_ms"]),
            throughput_rps: rps,
            error_pct: nums(&series["error_pct"]),
            curve: ps
                .into_iter()
                .zip(ms)
                .filter_map(|(p, m)| p.zip(m))
                .collect(),
        }
    }
}

fn change_text(f: Figure, rs: &RunScope) -> String {
    let Some(c) = rs.change(f) else {
        return String::new();
    };
    let mut out = match (c.abs, c.pct) {
        (Some(a), Some(p)) => format!("{} ({:+.1} %)", signed(f, a), p),
        (Some(a), None) => signed(f, a),
        _ => return String::new(),
    };
    if let Some(v) = c.verdict {
        out.push_str(", ");
        out.push_str(v.as_str());
    }
    out
}

/// An absolute change with its sign and unit.
fn signed(f: Figure, v: f64) -> String {
    let sign = if v > 0.0 { "+" } else { "" };
    match f {
        Figure::Count => format!("{sign}{}", crate::domain::format::int(v as i64)),
        Figure::ErrorPct => format!("{sign}{} pts", crate::domain::format::float(v, 2)),
        _ => format!("{sign}{}", f.format(Some(v))),
    }
}

fn scope_title(label: Option<&str>) -> String {
    label.map_or("All requests".to_string(), |l| format!("Label {l:?}"))
}

fn run_title(c: &Comparison, i: usize) -> String {
    let r = &c.runs[i];
    if i == 0 {
        format!("#{} {} (reference)", r.id, r.name)
    } else {
        format!("#{} {}", r.id, r.name)
    }
}

/// The capacity row of the totals, one cell per run: (value, change, verdict); `None` when
/// no run's load ramped (see [`super::CAPACITY_METHOD`]).
fn capacity_cells(c: &Comparison) -> Option<Vec<(String, String, Option<Verdict>)>> {
    if c.capacity.iter().all(|r| r.statement.is_none()) {
        return None;
    }
    let f = Figure::CapacityRps;
    Some(
        c.capacity
            .iter()
            .map(|r| {
                let value = match (r.capacity_rps, r.knee_users) {
                    (Some(v), Some(u)) => format!("{} at ~{u} users", f.format(Some(v))),
                    _ if r.peak_rps.is_some() => format!(
                        "no knee (grew to {} at {} users)",
                        f.format(r.peak_rps),
                        r.peak_users.unwrap_or_default()
                    ),
                    _ => crate::domain::format::NONE.to_string(),
                };
                let ch = r.change.as_ref();
                let delta = match ch.and_then(|c| c.abs_rps.zip(c.pct)) {
                    Some((a, p)) => {
                        let users = ch
                            .and_then(|c| c.users_abs)
                            .map(|u| format!(", {u:+} users"))
                            .unwrap_or_default();
                        format!("{} ({p:+.1} %){users}", signed(f, a))
                    }
                    None => String::new(),
                };
                (value, delta, ch.and_then(|c| c.verdict))
            })
            .collect(),
    )
}

/// A plain-text table per scope, for the terminal.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    for s in &c.scopes {
        let _ = writeln!(out, "{}", scope_title(s.label.as_deref()));
        let mut rows: Vec<Vec<String>> = vec![
            std::iter::once("".to_string())
                .chain((0..c.runs.len()).map(|i| run_title(c, i)))
                .collect(),
        ];
        for f in Figure::ALL {
            let mut row = vec![f.name().to_string()];
            for rs in &s.runs {
                if !rs.present {
                    row.push("(no such label)".into());
                    continue;
                }
                let mut cell = f.format(rs.get(f));
                let ch = change_text(f, rs);
                if !ch.is_empty() {
                    cell.push_str(&format!("  {ch}"));
                }
                row.push(cell);
            }
            rows.push(row);
        }
        if s.label.is_none()
            && let Some(cells) = capacity_cells(c)
        {
            let mut row = vec![Figure::CapacityRps.name().to_string()];
            for (value, delta, verdict) in cells {
                let mut cell = value;
                if !delta.is_empty() {
                    cell.push_str(&format!("  {delta}"));
                }
                if let Some(v) = verdict {
                    cell.push_str(&format!(", {}", v.as_str()));
                }
                row.push(cell);
            }
            rows.push(row);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        for r in rows {
            let line: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i == 0 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(out, "  {}", line.join("   ").trim_end());
        }
        out.push('\n');
    }
    let _ = writeln!(out, "Minimum effect {} %. {}", c.min_effect_pct, c.method);
    if capacity_cells(c).is_some() {
        let _ = writeln!(out, "{}", super::CAPACITY_METHOD);
    }
    out
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// Markdown (GitHub/GitLab flavoured) that pastes into a pull request.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::from("## Run comparison\n\n");
    for (i, r) in c.runs.iter().enumerate() {
        let _ = writeln!(
            out,
            "- **#{}** {}{}{}",
            r.id,
            md_escape(&r.name),
            r.scenario
                .as_deref()
                .map(|s| format!(" · scenario `{s}`"))
                .unwrap_or_default(),
            if i == 0 { " — reference" } else { "" }
        );
    }
    out.push('\n');
    for s in &c.scopes {
        let _ = writeln!(out, "### {}\n", md_escape(&scope_title(s.label.as_deref())));
        out.push_str("| Figure |");
        for i in 0..c.runs.len() {
            let _ = write!(out, " {} |", md_escape(&run_title(c, i)));
        }
        out.push_str("\n|---|");
        for _ in &c.runs {
            out.push_str("---:|");
        }
        out.push('\n');
        for f in Figure::ALL {
            let _ = write!(out, "| {} |", f.name());
            for rs in &s.runs {
                if !rs.present {
                    out.push_str(" – |");
                    continue;
                }
                let mark = match rs.change(f).and_then(|c| c.verdict) {
                    Some(Verdict::Worse) => " 🔴",
                    Some(Verdict::Better) => " 🟢",
                    _ => "",
                };
                let ch = change_text(f, rs);
                if ch.is_empty() {
                    let _ = write!(out, " {} |", f.format(rs.get(f)));
                } else {
                    let _ = write!(out, " {}<br>{ch}{mark} |", f.format(rs.get(f)));
                }
            }
            out.push('\n');
        }
        if s.label.is_none()
            && let Some(cells) = capacity_cells(c)
        {
            let _ = write!(out, "| {} |", Figure::CapacityRps.name());
            for (value, delta, verdict) in cells {
                let mark = match verdict {
                    Some(Verdict::Worse) => " 🔴",
                    Some(Verdict::Better) => " 🟢",
                    _ => "",
                };
                if delta.is_empty() {
                    let _ = write!(out, " {} |", md_escape(&value));
                } else {
                    let _ = write!(out, " {}<br>{delta}{mark} |", md_escape(&value));
                }
            }
            out.push('\n');
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "<sub>harrier · minimum effect {} % · {}</sub>",
        c.min_effect_pct, c.method
    );
    out
}

/// Run colours of the charts (same order as the console's).
pub const COLORS: [&str; 10] = [
    "#2563eb", "#d97706", "#0f9488", "#dc2626", "#7c3aed", "#db2777", "#65a30d", "#0891b2",
    "#92400e", "#475569",
];

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// "Nice" tick step for a span.
fn tick_step(span: f64, ticks: f64) -> f64 {
    let raw = (span / ticks).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    mag * if n < 1.5 {
        1.0
    } else if n < 3.0 {
        2.0
    } else if n < 7.0 {
        5.0
    } else {
        10.0
    }
}

/// One run's line: (run index for the colour, points with gaps as `None`).
pub type Line = (usize, Vec<(f64, Option<f64>)>);

/// An SVG line chart: one line per run (gaps where a value is missing).
pub fn svg_chart(title: &str, x_label: &str, lines: &[Line], y_fmt: fn(f64) -> String) -> String {
    let (w, h) = (760.0, 240.0);
    let (l, r, t, b) = (64.0, 12.0, 26.0, 34.0);
    let pts = lines.iter().flat_map(|(_, p)| p.iter());
    let (mut x_max, mut y_max) = (0f64, 0f64);
    for (x, y) in pts {
        x_max = x_max.max(*x);
        if let Some(y) = y {
            y_max = y_max.max(*y);
        }
    }
    let mut s = format!(
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\">",
        esc(title)
    );
    let _ = write!(
        s,
        "<text x=\"{l}\" y=\"16\" class=\"t\">{}</text>",
        esc(title)
    );
    if x_max <= 0.0 && y_max <= 0.0 {
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{}\" class=\"e\" text-anchor=\"middle\">No over-time data (summary-only runs)</text></svg>",
            w / 2.0,
            h / 2.0
        );
        return s;
    }
    let x_max = if x_max > 0.0 { x_max } else { 1.0 };
    let y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    let px = |x: f64| l + x / x_max * (w - l - r);
    let py = |y: f64| h - b - y / y_max * (h - t - b);
    let ys = tick_step(y_max, 4.0);
    let mut y = 0.0;
    while y <= y_max + 1e-9 {
        let _ = write!(
            s,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" class=\"g\"/><text x=\"{}\" y=\"{:.1}\" class=\"a\" text-anchor=\"end\">{}</text>",
            w - r,
            py(y),
            py(y),
            l - 6.0,
            py(y) + 4.0,
            esc(&y_fmt(y))
        );
        y += ys;
    }
    let xs = tick_step(x_max, 6.0);
    let mut x = 0.0;
    while x <= x_max + 1e-9 {
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" class=\"a\" text-anchor=\"middle\">{}</text>",
            px(x),
            h - b + 16.0,
            crate::domain::format::float(x, if xs < 1.0 { 1 } else { 0 })
        );
        x += xs;
    }
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" class=\"a\" text-anchor=\"end\">{}</text>",
        w - r,
        h - 4.0,
        esc(x_label)
    );
    for (i, points) in lines {
        let mut d = String::new();
        let mut pen_down = false;
        for (x, y) in points {
            match y {
                Some(y) => {
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1}",
                        if pen_down { "L" } else { "M" },
                        px(*x),
                        py(*y)
                    );
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        let _ = write!(
            s,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" data-run=\"{i}\"/>",
            COLORS[i % COLORS.len()]
        );
    }
    s.push_str("</svg>");
    s
}

/// Thins a series to at most `max` points (every k-th), keeping the last.
fn thin<T: Clone>(v: &[T], max: usize) -> Vec<T> {
    if v.len() <= max {
        return v.to_vec();
    }
    let step = v.len().div_ceil(max);
    let mut out: Vec<T> = v.iter().step_by(step).cloned().collect();
    if let Some(last) = v.last() {
        out.push(last.clone());
    }
    out
}

const HTML_CSS: &str = "
:root{color-scheme:light;font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1f2733;background:#f6f7f9}
body{margin:0;padding:24px;max-width:1200px;margin:auto}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:0 0 8px}
.sub{color:#5b6574;font-size:13px;margin:0 0 16px}
.panel{background:#fff;border:1px solid #dfe3e8;border-radius:8px;padding:16px;margin:0 0 16px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:6px 8px;border-bottom:1px solid #eceef2;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}
th{font-weight:600;color:#3b4452;background:#f8f9fb}
td{font-variant-numeric:tabular-nums}
.d{display:block;font-size:12px}.worse{color:#b42318}.better{color:#067647}.same{color:#5b6574}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:11px;border:1px solid;margin-left:4px}
.badge.worse{background:#fef3f2;border-color:#fecdca}.badge.better{background:#ecfdf3;border-color:#abefc6}
.badge.same{background:#f2f4f7;border-color:#d0d5dd}
.legend span{display:inline-block;margin-right:14px;font-size:13px}
.legend i{display:inline-block;width:12px;height:3px;margin-right:5px;vertical-align:middle}
svg.chart{width:100%;height:auto;display:block;margin:8px 0}
svg .t{font-size:13px;font-weight:600;fill:#1f2733}svg .a{font-size:11px;fill:#5b6574}svg .e{font-size:13px;fill:#5b6574}
svg .g{stroke:#eceef2;stroke-width:1}
.note{font-size:12px;color:#5b6574}
";

/// The comparison as one self-contained HTML document.
pub fn html(c: &Comparison, overlays: &[Overlay], generated_at: &str) -> String {
    let mut s = String::from("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(
        s,
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Run comparison · harrier</title><style>{HTML_CSS}</style></head><body>"
    );
    let names: Vec<String> = c
        .runs
        .iter()
        .map(|r| format!("#{} {}", r.id, r.name))
        .collect();
    let _ = write!(
        s,
        "<h1>Run comparison</h1><p class=\"sub\">{} runs · reference {} · generated {} by harrier</p>",
        c.runs.len(),
        esc(&names[0]),
        esc(generated_at)
    );
    s.push_str("<div class=\"panel legend\" id=\"runs\">");
    for (i, n) in names.iter().enumerate() {
        let _ = write!(
            s,
            "<span><i style=\"background:{}\"></i>{}{}</span>",
            COLORS[i % COLORS.len()],
            esc(n),
            if c.runs[i].summary_only {
                " (summary)"
            } else {
                ""
            }
        );
    }
    s.push_str("</div>");
    for sc in &c.scopes {
        let _ = write!(
            s,
            "<div class=\"panel\"><h2>{}</h2><table><thead><tr><th>Figure</th>",
            esc(&scope_title(sc.label.as_deref()))
        );
        for n in &names {
            let _ = write!(s, "<th>{}</th>", esc(n));
        }
        s.push_str("</tr></thead><tbody>");
        for f in Figure::ALL {
            let _ = write!(s, "<tr><td>{}</td>", f.name());
            for rs in &sc.runs {
                if !rs.present {
                    s.push_str("<td>–</td>");
                    continue;
                }
                let _ = write!(s, "<td>{}", esc(&f.format(rs.get(f))));
                if let Some(ch) = rs.change(f) {
                    let class = match ch.verdict {
                        Some(Verdict::Worse) => "worse",
                        Some(Verdict::Better) => "better",
                        _ => "same",
                    };
                    let delta = match (ch.abs, ch.pct) {
                        (Some(a), Some(p)) => format!("{} ({:+.1} %)", signed(f, a), p),
                        (Some(a), None) => signed(f, a),
                        _ => String::new(),
                    };
                    let _ = write!(s, "<span class=\"d {class}\">{}", esc(&delta));
                    if let Some(v) = ch.verdict {
                        let _ = write!(s, "<span class=\"badge {class}\">{}</span>", v.as_str());
                    }
                    s.push_str("</span>");
                }
                s.push_str("</td>");
            }
            s.push_str("</tr>");
        }
        if sc.label.is_none()
            && let Some(cells) = capacity_cells(c)
        {
            let _ = write!(s, "<tr><td>{}</td>", Figure::CapacityRps.name());
            for (value, delta, verdict) in cells {
                let _ = write!(s, "<td>{}", esc(&value));
                if !delta.is_empty() {
                    let class = match verdict {
                        Some(Verdict::Worse) => "worse",
                        Some(Verdict::Better) => "better",
                        _ => "same",
                    };
                    let _ = write!(s, "<span class=\"d {class}\">{}", esc(&delta));
                    if let Some(v) = verdict {
                        let _ = write!(s, "<span class=\"badge {class}\">{}</span>", v.as_str());
                    }
                    s.push_str("</span>");
                }
                s.push_str("</td>");
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody></table></div>");
    }
    // Charts: runs aligned at their start.
    let idx = |id: i64| c.runs.iter().position(|r| r.id == id).unwrap_or(0);
    let lines = |get: fn(&Overlay) -> &Vec<Option<f64>>| -> Vec<Line> {
        overlays
            .iter()
            .map(|o| {
                let pts: Vec<(f64, Option<f64>)> =
                    o.x_s.iter().copied().zip(get(o).iter().copied()).collect();
                (idx(o.run_id), thin(&pts, 600))
            })
            .collect()
    };
    s.push_str("<div class=\"panel\" id=\"charts\"><h2>Over time <span class=\"note\">x = seconds since each run's first sample</span></h2>");
    s.push_str(&svg_chart(
        "p95 response time (ms)",
        "seconds since start",
        &lines(|o| &o.p95_ms),
        |v| crate::domain::format::float(v, if v < 10.0 { 1 } else { 0 }),
    ));
    s.push_str(&svg_chart(
        "Throughput (requests/s)",
        "seconds since start",
        &lines(|o| &o.throughput_rps),
        |v| crate::domain::format::float(v, 0),
    ));
    s.push_str(&svg_chart(
        "Error %",
        "seconds since start",
        &lines(|o| &o.error_pct),
        |v| format!("{} %", crate::domain::format::float(v, 1)),
    ));
    let curves: Vec<Line> = overlays
        .iter()
        .map(|o| {
            (
                idx(o.run_id),
                o.curve.iter().map(|(p, m)| (*p, Some(*m))).collect(),
            )
        })
        .collect();
    s.push_str(&svg_chart(
        "Percentile curve (ms)",
        "percentile",
        &curves,
        |v| crate::domain::format::float(v, if v < 10.0 { 1 } else { 0 }),
    ));
    s.push_str("</div>");
    let _ = write!(
        s,
        "<p class=\"note\">Minimum effect {} %. {} Over-time percentiles per bucket come from HDR histograms; table figures are exact.</p></body></html>",
        c.min_effect_pct,
        esc(&c.method)
    );
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::super::tests::synthetic;
    use super::super::{Options, compare};
    use super::*;

    #[test]
    fn renderings_carry_figures_and_verdicts() {
        let a = synthetic(1, 1, 120, 20, 100.0, 1.0, 0);
        let b = synthetic(2, 2, 120, 20, 100.0, 1.5, 0);
        let c = compare(&[a, b], &Options::default());
        let t = table(&c);
        assert!(
            t.contains("All requests") && t.contains("(reference)"),
            "{t}"
        );
        assert!(t.contains("worse"), "{t}");
        let md = markdown(&c);
        assert!(md.contains("| Figure |") && md.contains("🔴"), "{md}");
        let o = Overlay {
            run_id: 2,
            x_s: vec![0.0, 1.0, 2.0],
            p95_ms: vec![Some(10.0), None, Some(30.0)],
            throughput_rps: vec![Some(5.0); 3],
            error_pct: vec![Some(0.0); 3],
            curve: vec![(50.0, 10.0), (99.0, 40.0)],
        };
        let h = html(&c, &[o], "now");
        assert!(h.starts_with("<!doctype html>"));
        assert!(!h.contains("<script"), "no scripts in the export");
        assert!(h.contains("M64.0,") && h.contains("<svg"), "a drawn line");
        assert_eq!(h.matches("<svg").count(), 4);
        assert!(h.contains("badge worse"));
    }
}
