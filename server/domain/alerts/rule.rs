//! The alert rule model: one shape in JSON (`/api/v1/alert-rules`) and TOML
//! (`[[alerts.rules]]` in `harrier.toml`), its validation, and the built-in default rules.
//!
//! A rule is a condition over a subject set (routes matching a glob, …); an alert is one
//! subject's instance of it (see [`super::eval`]). This module knows nothing of SQL, HTTP or
//! time; it must not evaluate anything.
//!
//! ```toml
//! [[alerts.rules]]
//! name = "RouteErrorRateHigh"
//! subject = { service = "orders", route = "/checkout*" }
//! measure = "error_pct"          # see [`Measure`]
//! comparison = ">"
//! threshold = 5.0
//! window = "5m"                  # figures over the last 5 minutes
//! for = "2m"                     # pending this long before firing
//! keep_firing_for = "5m"         # stays firing this long after the condition clears
//! recovery_threshold = 3.0       # hysteresis: firing until the value is ≤ 3 %
//! min_count = 20                 # fewer exchanges in the window: never true
//! severity = "warning"
//! summary = "Route {{ labels.route }} error rate {{ value }} %"
//! ```

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Default of [`Rule::min_count`]: an error-rate rule needs at least this many exchanges
/// in its window before it can be true.
pub const DEFAULT_MIN_COUNT: u64 = 20;

/// Longest accepted window, ms (raw route figures are kept 48 h by default).
pub const MAX_WINDOW_MS: i64 = 24 * 3_600_000;

/// An alert's labels: its identity together with the rule name (`service`, `instance`,
/// `route` for route subjects). Sorted, so the identity is stable.
pub type Labels = BTreeMap<String, String>;

/// A duration written `500ms`, `30s`, `5m`, `2h`, `1d` (or `0`); held as ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration(pub i64);

impl Duration {
    pub fn ms(self) -> i64 {
        self.0
    }

    /// Parses `0`, `500ms`, `30s`, `5m`, `2h`, `1d` (decimals allowed: `1.5m`).
    pub fn parse(s: &str) -> Result<Duration, String> {
        let t = s.trim();
        if t == "0" || t == "0s" || t == "0ms" || t == "0m" {
            return Ok(Duration(0));
        }
        crate::domain::format::parse_duration_ms(t)
            .map(Duration)
            .ok_or_else(|| format!("expected a duration such as 30s, 5m or 1h, got {s:?}"))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        if ms == 0 {
            write!(f, "0s")
        } else if ms % 3_600_000 == 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms % 60_000 == 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms % 1000 == 0 {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Duration::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Which subjects a rule watches; every given field must match (absent = any).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    /// The service name, exactly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// The route, as a glob: `*` any run of characters, `?` one character.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// Further labels the subject must carry with exactly these values (`instance`,
    /// `target`, `source`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// A load-test scenario (a glob, like `route`). Rules with a scenario watch the live
    /// runs of that scenario (labels `scenario`, `run`, `run_name`), not routes; when
    /// such an alert fires, the run is marked failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
}

impl Subject {
    /// Whether a live run with these labels (`scenario`, `run`, `run_name`) is watched:
    /// only by rules with a `scenario`.
    pub fn matches_run(&self, labels: &Labels) -> bool {
        let Some(g) = &self.scenario else {
            return false;
        };
        match labels.get("scenario") {
            Some(s) if glob_match(g, s) => {}
            _ => return false,
        }
        self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// Whether a route subject with these labels (`service`, `route`, …) is watched.
    pub fn matches(&self, labels: &Labels) -> bool {
        if self.scenario.is_some() {
            return false;
        }
        if let Some(s) = &self.service
            && labels.get("service") != Some(s)
        {
            return false;
        }
        if let Some(g) = &self.route {
            match labels.get("route") {
                Some(r) if glob_match(g, r) => {}
                _ => return false,
            }
        }
        self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// `*` matches any run of characters (empty too), `?` exactly one; all else literally.
/// Runs on bytes when both are ASCII (no allocation: a round matches every route).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    if pattern.is_ascii() && text.is_ascii() {
        return glob(pattern.as_bytes(), text.as_bytes(), b'*', b'?');
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    glob(&p, &t, '*', '?')
}

fn glob<T: Copy + PartialEq>(p: &[T], t: &[T], any: T, one: T) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == one || p[pi] == t[ti]) && p[pi] != any {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == any {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == any)
}

/// What a rule measures on each subject over its window. The route figures are those of
/// `GET /api/v1/routes?window=` (see [`crate::domain::routes::RouteRow`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Failed / total exchanges × 100 over the window (Δfailed / Δtotal).
    ErrorPct,
    /// Failed exchanges per second over the window.
    ErrorsPerS,
    /// Exchanges per second over the window.
    ThroughputPerS,
    /// Δsum / Δcount, ms.
    MeanMs,
    /// 95th percentile from the histogram buckets (Prometheus `histogram_quantile`), ms.
    P95Ms,
    /// 99th percentile, ms.
    P99Ms,
    /// Exchanges in flight (the gauge, averaged over the window).
    Inflight,
    /// 1 when the subject's target does not answer, else 0.
    TargetDown,
    /// 1 when the window saw no exchanges, else 0.
    NoExchanges,
    /// A pool's use over the window: Σ in use / Σ max × 100 over the scrapes that had both
    /// (connections leased, threads busy; see [`crate::domain::pools`]). The subject is a
    /// pool (labels `service`, `target`, `instance`, `kind`, `pool`), not a route.
    PoolUsagePct,
    /// A pool's waiters over the window: the mean of its pending figure per scrape
    /// (connection requests waiting, tasks queued). Subject: a pool.
    PoolPending,
}

impl Measure {
    /// Whether [`Rule::min_count`] applies: error-rate measures mean nothing over a handful
    /// of exchanges.
    pub fn guarded(self) -> bool {
        matches!(self, Measure::ErrorPct | Measure::ErrorsPerS)
    }

    /// Whether the measure is taken on live runs (their per-second buckets).
    pub fn for_runs(self) -> bool {
        matches!(
            self,
            Measure::ErrorPct
                | Measure::ErrorsPerS
                | Measure::ThroughputPerS
                | Measure::MeanMs
                | Measure::P95Ms
                | Measure::P99Ms
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Measure::ErrorPct => "error_pct",
            Measure::ErrorsPerS => "errors_per_s",
            Measure::ThroughputPerS => "throughput_per_s",
            Measure::MeanMs => "mean_ms",
            Measure::P95Ms => "p95_ms",
            Measure::P99Ms => "p99_ms",
            Measure::Inflight => "inflight",
            Measure::TargetDown => "target_down",
            Measure::NoExchanges => "no_exchanges",
            Measure::PoolUsagePct => "pool_usage_pct",
            Measure::PoolPending => "pool_pending",
        }
    }

    /// Whether the measure is taken on pools (subjects labelled `service`, `target`,
    /// `instance`, `kind`, `pool`) rather than routes.
    pub fn for_pools(self) -> bool {
        matches!(self, Measure::PoolUsagePct | Measure::PoolPending)
    }
}

/// How the measured value is compared with the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Comparison {
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
}

impl Comparison {
    /// `value OP threshold`.
    pub fn holds(self, value: f64, threshold: f64) -> bool {
        match self {
            Comparison::Gt => value > threshold,
            Comparison::Ge => value >= threshold,
            Comparison::Lt => value < threshold,
            Comparison::Le => value <= threshold,
        }
    }

    /// Whether the rule fires on high values (`>`, `>=`).
    pub fn upward(self) -> bool {
        matches!(self, Comparison::Gt | Comparison::Ge)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Comparison::Gt => ">",
            Comparison::Ge => ">=",
            Comparison::Lt => "<",
            Comparison::Le => "<=",
        }
    }
}

fn default_window() -> Duration {
    Duration(5 * 60_000)
}

fn default_min_count() -> u64 {
    DEFAULT_MIN_COUNT
}

fn default_severity() -> String {
    "warning".to_string()
}

fn is_zero(d: &Duration) -> bool {
    d.0 == 0
}

/// An alert rule. `window` defaults to `5m`, `for` and `keep_firing_for` to `0s`,
/// `min_count` to 20, `severity` to `warning`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Unique name; letters, digits, `_`, `-`, `.`, `:` (it becomes `alertname`).
    pub name: String,
    #[serde(default)]
    pub subject: Subject,
    pub measure: Measure,
    pub comparison: Comparison,
    pub threshold: f64,
    /// The figures' window, ending at the evaluation time.
    #[serde(default = "default_window")]
    pub window: Duration,
    /// How long the condition must hold (pending) before the alert fires.
    #[serde(default, rename = "for", skip_serializing_if = "is_zero")]
    pub for_: Duration,
    /// How long a firing alert stays firing after its condition cleared.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub keep_firing_for: Duration,
    /// Hysteresis: once firing, the alert stays firing until the value crosses this
    /// (e.g. fires above 5 %, resolves at or below 3 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_threshold: Option<f64>,
    /// For error-rate measures: fewer exchanges than this in the window and the
    /// condition is false, whatever the value.
    #[serde(default = "default_min_count")]
    pub min_count: u64,
    #[serde(default = "default_severity")]
    pub severity: String,
    /// One-line template; `{{ value }}`, `{{ threshold }}`, `{{ rule }}`, `{{ labels.X }}`,
    /// and Prometheus' spelling (`{{ $value }}`, `{{ $labels.X }}`, `{{ $value | humanize }}`,
    /// `{{ printf "%.1f" $value }}`): see [`render`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A rule that does not make sense; the message names the field and what is expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("alert rule {rule:?}: {field}: {message}")]
pub struct RuleError {
    pub rule: String,
    pub field: &'static str,
    pub message: String,
}

impl Rule {
    /// Checks the rule; the first problem found is returned.
    pub fn validate(&self) -> Result<(), RuleError> {
        let err = |field: &'static str, message: String| RuleError {
            rule: self.name.clone(),
            field,
            message,
        };
        if self.name.is_empty() || self.name.len() > 200 {
            return Err(err("name", "must be 1 to 200 characters".into()));
        }
        if let Some(c) = self
            .name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "_-.:".contains(*c)))
        {
            return Err(err(
                "name",
                format!("{c:?} is not allowed; use letters, digits, _ - . :"),
            ));
        }
        if !self.threshold.is_finite() {
            return Err(err("threshold", "must be a finite number".into()));
        }
        if self.window.ms() < 1000 || self.window.ms() > MAX_WINDOW_MS {
            return Err(err(
                "window",
                format!("must be from 1s to 24h, got {}", self.window),
            ));
        }
        if self.for_.ms() > 7 * MAX_WINDOW_MS || self.keep_firing_for.ms() > 7 * MAX_WINDOW_MS {
            return Err(err(
                "for",
                "for and keep_firing_for must be at most 7d".into(),
            ));
        }
        if let Some(r) = self.recovery_threshold {
            if !r.is_finite() {
                return Err(err("recovery_threshold", "must be a finite number".into()));
            }
            let up = self.comparison.upward();
            if (up && r > self.threshold) || (!up && r < self.threshold) {
                return Err(err(
                    "recovery_threshold",
                    format!(
                        "must be on the recovered side of the threshold ({} {}): {} {}",
                        self.comparison.as_str(),
                        self.threshold,
                        if up { "≤" } else { "≥" },
                        self.threshold
                    ),
                ));
            }
        }
        if self.measure == Measure::ErrorPct && !(0.0..=100.0).contains(&self.threshold) {
            return Err(err(
                "threshold",
                format!(
                    "error_pct is a percentage (0 to 100), got {}",
                    self.threshold
                ),
            ));
        }
        if self.severity.trim().is_empty() {
            return Err(err("severity", "must not be empty".into()));
        }
        if self.measure.for_pools() && self.subject.route.is_some() {
            return Err(err(
                "subject.route",
                format!(
                    "{} watches pools (labels service, target, instance, kind, pool), not routes",
                    self.measure.as_str()
                ),
            ));
        }
        if self.measure == Measure::PoolUsagePct && !(0.0..=1000.0).contains(&self.threshold) {
            return Err(err(
                "threshold",
                format!(
                    "pool_usage_pct is a percentage of the pool's max, got {}",
                    self.threshold
                ),
            ));
        }
        if let Some(route) = &self.subject.route
            && route.is_empty()
        {
            return Err(err("subject.route", "must not be empty (use \"*\")".into()));
        }
        if let Some(sc) = &self.subject.scenario {
            if sc.is_empty() {
                return Err(err(
                    "subject.scenario",
                    "must not be empty (use \"*\")".into(),
                ));
            }
            if self.subject.service.is_some() || self.subject.route.is_some() {
                return Err(err(
                    "subject",
                    "scenario watches live runs; it does not combine with service or route".into(),
                ));
            }
            if !self.measure.for_runs() {
                return Err(err(
                    "measure",
                    format!(
                        "{} is not measured on live runs; use error_pct, errors_per_s, throughput_per_s, mean_ms, p95_ms or p99_ms",
                        self.measure.as_str()
                    ),
                ));
            }
        }
        for (field, t) in [
            ("summary", &self.summary),
            ("description", &self.description),
        ] {
            if let Some(t) = t {
                check_template(t).map_err(|m| err(field, m))?;
            }
        }
        Ok(())
    }

    /// Whether `value` (over `count` exchanges) meets the firing condition.
    pub fn condition(&self, value: Option<f64>, count: Option<f64>) -> bool {
        let Some(v) = value.filter(|v| v.is_finite()) else {
            return false;
        };
        if self.measure.guarded() && count.unwrap_or(0.0) < self.min_count as f64 {
            return false;
        }
        self.comparison.holds(v, self.threshold)
    }

    /// Whether a firing alert with `value` is still unrecovered. Without a recovery
    /// threshold this is [`Rule::condition`]; with one, the value must still be on the
    /// firing side of the recovery threshold (the min-count guard still applies).
    pub fn still_firing(&self, value: Option<f64>, count: Option<f64>) -> bool {
        match self.recovery_threshold {
            None => self.condition(value, count),
            Some(r) => {
                let Some(v) = value.filter(|v| v.is_finite()) else {
                    return false;
                };
                if self.measure.guarded() && count.unwrap_or(0.0) < self.min_count as f64 {
                    return false;
                }
                self.comparison.holds(v, r)
            }
        }
    }

    /// The built-in rules: a route's error % above 5 % over 5 m for 2 m with at least 20
    /// exchanges (warning), and above 10 % (critical).
    pub fn defaults() -> Vec<Rule> {
        let base = |name: &str, threshold: f64, severity: &str| Rule {
            name: name.to_string(),
            subject: Subject {
                route: Some("*".into()),
                ..Subject::default()
            },
            measure: Measure::ErrorPct,
            comparison: Comparison::Gt,
            threshold,
            window: Duration(5 * 60_000),
            for_: Duration(2 * 60_000),
            keep_firing_for: Duration(0),
            recovery_threshold: None,
            min_count: DEFAULT_MIN_COUNT,
            severity: severity.to_string(),
            summary: Some(format!(
                "Route {{{{ labels.route }}}} of {{{{ labels.service }}}}: {{{{ value }}}} % errors (> {threshold} %)"
            )),
            description: None,
        };
        vec![
            base("RouteErrorRateWarning", 5.0, "warning"),
            base("RouteErrorRateCritical", 10.0, "critical"),
        ]
    }
}

/// What a placeholder stands for.
#[derive(Debug, Clone, PartialEq)]
enum Placeholder {
    /// The alert's value, formatted as [`ValueFormat`] says.
    Value(ValueFormat),
    Threshold,
    Rule,
    Label(String),
}

/// How `{{ value }}` is written.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ValueFormat {
    /// At most two decimals ([`fmt_num`]).
    Plain,
    /// Prometheus' `humanize`: SI prefix, 4 significant digits (`1.234k`, `500m`).
    Humanize,
    /// Go's `printf "%.Nf"` (`%f`: 6 decimals).
    Fixed(usize),
}

/// Reads a placeholder's inner text, in harrier's spelling (`value`, `threshold`, `rule`,
/// `labels.NAME`) or Prometheus' (`$value`, `$labels.NAME`, `$value | humanize`,
/// `printf "%.1f" $value`, `$value | printf "%.1f"`); `None` when it is neither.
fn placeholder(inner: &str) -> Option<Placeholder> {
    let words: Vec<&str> = inner.split_whitespace().collect();
    let is_value = |w: &str| w == "value" || w == "$value";
    let printf = |fmt: &str| -> Option<ValueFormat> {
        let f = fmt.strip_prefix('"')?.strip_suffix('"')?;
        match f {
            "%f" => Some(ValueFormat::Fixed(6)),
            _ => Some(ValueFormat::Fixed(
                f.strip_prefix("%.")?.strip_suffix('f')?.parse().ok()?,
            )),
        }
    };
    match words[..] {
        [w] if is_value(w) => Some(Placeholder::Value(ValueFormat::Plain)),
        ["threshold"] => Some(Placeholder::Threshold),
        ["rule"] => Some(Placeholder::Rule),
        [w] => {
            let name = w.strip_prefix('$').unwrap_or(w).strip_prefix("labels.")?;
            (!name.is_empty()).then(|| Placeholder::Label(name.to_string()))
        }
        [w, "|", "humanize"] if is_value(w) => Some(Placeholder::Value(ValueFormat::Humanize)),
        ["printf", fmt, w] if is_value(w) => printf(fmt).map(Placeholder::Value),
        [w, "|", "printf", fmt] if is_value(w) => printf(fmt).map(Placeholder::Value),
        _ => None,
    }
}

/// Prometheus' `humanize` (`template/template.go`): values ≥ 1 divided by 1000 per SI
/// prefix (k, M, G, T, P, E, Z, Y), values below 1 multiplied by 1000 per prefix (m, u, n,
/// p, f, a, z, y), then Go's `%.4g` (4 significant digits, trailing zeros dropped).
pub fn humanize(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return g4(v);
    }
    let mut v = v;
    let mut prefix = "";
    if v.abs() >= 1.0 {
        for p in ["k", "M", "G", "T", "P", "E", "Z", "Y"] {
            if v.abs() < 1000.0 {
                break;
            }
            prefix = p;
            v /= 1000.0;
        }
    } else {
        for p in ["m", "u", "n", "p", "f", "a", "z", "y"] {
            if v.abs() >= 1.0 {
                break;
            }
            prefix = p;
            v *= 1000.0;
        }
    }
    format!("{}{prefix}", g4(v))
}

/// Go's `%.4g` for the values `humanize` gives it (0, NaN, ±Inf, or |v| in [1, 1000) but
/// for the extremes): 4 significant digits, trailing zeros dropped.
fn g4(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if v == 0.0 {
        return "0".into();
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-4..4).contains(&exp) {
        return format!("{v:.3e}");
    }
    let decimals = (3 - exp).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Placeholders of a template: `{{ … }}` spans with their inner text. Returns (start,
/// end, inner text) per placeholder, or what is wrong.
fn placeholders(t: &str) -> Result<Vec<(usize, usize, String)>, String> {
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(open) = t[rest..].find("{{").map(|p| p + rest) {
        let close = t[open..]
            .find("}}")
            .map(|p| p + open)
            .ok_or_else(|| format!("unclosed {{{{ at byte {open}"))?;
        let name = t[open + 2..close].trim().to_string();
        out.push((open, close + 2, name));
        rest = close + 2;
    }
    Ok(out)
}

fn check_template(t: &str) -> Result<(), String> {
    for (at, _, name) in placeholders(t)? {
        if placeholder(&name).is_none() {
            return Err(format!(
                "unknown placeholder {{{{ {name} }}}} at byte {at}; expected value, threshold, rule or labels.NAME, or Prometheus' $value, $labels.NAME, $value | humanize, printf \"%.1f\" $value"
            ));
        }
    }
    Ok(())
}

/// Renders a template: numbers with at most 2 decimals (`16.67`), a missing value as
/// `–`, a missing label as the empty string. Prometheus' spelling is read too, so rules
/// copied from a Prometheus rule file work: `{{ $value }}`, `{{ $labels.route }}`,
/// `{{ $value | humanize }}` ([`humanize`]), `{{ printf "%.1f" $value }}` and
/// `{{ $value | printf "%.1f" }}` (Go's fixed decimals).
pub fn render(t: &str, rule: &Rule, labels: &Labels, value: Option<f64>) -> String {
    let Ok(places) = placeholders(t) else {
        return t.to_string();
    };
    let mut out = String::with_capacity(t.len());
    let mut last = 0;
    for (start, end, name) in places {
        out.push_str(&t[last..start]);
        match placeholder(&name) {
            Some(Placeholder::Value(f)) => out.push_str(&match (value, f) {
                (None, _) => "–".into(),
                (Some(v), ValueFormat::Plain) => fmt_num(v),
                (Some(v), ValueFormat::Humanize) => humanize(v),
                (Some(v), ValueFormat::Fixed(places)) => format!("{v:.places$}"),
            }),
            Some(Placeholder::Threshold) => out.push_str(&fmt_num(rule.threshold)),
            Some(Placeholder::Rule) => out.push_str(&rule.name),
            Some(Placeholder::Label(l)) => {
                out.push_str(labels.get(&l).map(String::as_str).unwrap_or(""))
            }
            None => out.push_str(&t[start..end]),
        }
        last = end;
    }
    out.push_str(&t[last..]);
    out
}

/// A number with at most two decimals, trailing zeros dropped: 16.666… → `16.67`, 5 → `5`.
pub fn fmt_num(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_rule() -> Rule {
        serde_json::from_value(serde_json::json!({
            "name": "RouteErrorRateHigh",
            "subject": {"service": "orders", "route": "/checkout*"},
            "measure": "error_pct",
            "comparison": ">",
            "threshold": 5.0,
            "window": "5m",
            "for": "3m",
            "keep_firing_for": "5m",
            "recovery_threshold": 3.0,
            "severity": "page",
            "summary": "Route {{ labels.route }} 5xx ratio {{ value }}%"
        }))
        .unwrap()
    }

    #[test]
    fn json_and_toml_are_one_shape() {
        let r = json_rule();
        assert_eq!(r.window.ms(), 300_000);
        assert_eq!(r.for_.ms(), 180_000);
        assert_eq!(r.min_count, 20);
        r.validate().unwrap();
        let toml_text = r#"
            name = "RouteErrorRateHigh"
            subject = { service = "orders", route = "/checkout*" }
            measure = "error_pct"
            comparison = ">"
            threshold = 5.0
            window = "5m"
            for = "3m"
            keep_firing_for = "5m"
            recovery_threshold = 3.0
            severity = "page"
            summary = "Route {{ labels.route }} 5xx ratio {{ value }}%"
        "#;
        let t: Rule = toml::from_str(toml_text).unwrap();
        assert_eq!(t, r);
        // JSON round trip keeps the durations as written.
        let back = serde_json::to_value(&r).unwrap();
        assert_eq!(back["for"], "3m");
        assert_eq!(back["window"], "5m");
        assert_eq!(serde_json::from_value::<Rule>(back).unwrap(), r);
    }

    #[test]
    fn validation_names_the_field() {
        let mut r = json_rule();
        r.recovery_threshold = Some(8.0);
        let e = r.validate().unwrap_err();
        assert_eq!(e.field, "recovery_threshold");
        assert!(e.to_string().contains("recovered side"), "{e}");

        let mut r = json_rule();
        r.summary = Some("{{ valeu }}".into());
        let e = r.validate().unwrap_err();
        assert_eq!(e.field, "summary");
        assert!(e.message.contains("valeu"), "{e}");

        let mut r = json_rule();
        r.name = "has space".into();
        assert_eq!(r.validate().unwrap_err().field, "name");

        let mut r = json_rule();
        r.threshold = 150.0;
        assert_eq!(r.validate().unwrap_err().field, "threshold");

        let bad = serde_json::from_value::<Rule>(serde_json::json!({
            "name": "x", "measure": "error_pct", "comparison": "=>", "threshold": 1
        }));
        assert!(bad.unwrap_err().to_string().contains("=>"));
        let bad = serde_json::from_value::<Rule>(serde_json::json!({
            "name": "x", "measure": "error_pct", "comparison": ">", "threshold": 1, "for": "2 weeks"
        }));
        assert!(bad.unwrap_err().to_string().contains("2 weeks"));
        let bad = serde_json::from_value::<Rule>(serde_json::json!({
            "name": "x", "measure": "error_rate", "comparison": ">", "threshold": 1
        }));
        assert!(bad.unwrap_err().to_string().contains("error_rate"));
    }

    #[test]
    fn subjects_match_by_glob_and_labels() {
        let r = json_rule();
        let labels = |svc: &str, route: &str| -> Labels {
            [("service", svc), ("route", route), ("instance", "a:1")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(r.subject.matches(&labels("orders", "/checkout")));
        assert!(r.subject.matches(&labels("orders", "/checkout/pay")));
        assert!(!r.subject.matches(&labels("orders", "/search")));
        assert!(!r.subject.matches(&labels("billing", "/checkout")));
        assert!(glob_match("GET /api/?", "GET /api/x"));
        assert!(!glob_match("GET /api/?", "GET /api/xy"));
        assert!(glob_match("*a*b", "xxaxxb"));
        assert!(!glob_match("*a*b", "xxaxxbc"));
        // non-ASCII: `?` is one character, not one byte
        assert!(glob_match("/café/?", "/café/é"));
        assert!(!glob_match("/caf?", "/cafés"));
        assert!(glob_match("*é*", "/é/"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("?", ""));
    }

    #[test]
    fn templates_render_values_and_labels() {
        let r = json_rule();
        let mut l = Labels::new();
        l.insert("route".into(), "/checkout".into());
        let s = render(r.summary.as_deref().unwrap(), &r, &l, Some(100.0 / 6.0));
        assert_eq!(s, "Route /checkout 5xx ratio 16.67%");
        assert_eq!(render("{{ value }}", &r, &l, None), "–");
        assert_eq!(fmt_num(5.0), "5");
        assert_eq!(fmt_num(7.4074), "7.41");
    }

    /// Issue 12: a summary copied from a Prometheus rule file renders as Prometheus would.
    #[test]
    fn templates_accept_prometheus_spelling() {
        let mut r = json_rule();
        let mut l = Labels::new();
        l.insert("route".into(), "/checkout".into());
        l.insert("service".into(), "orders".into());
        let t = "{{ $labels.service }} {{$labels.route}}: {{ $value }} % ({{ printf \"%.1f\" $value }}, {{ $value | humanize }}, {{ $value | printf \"%.3f\" }}) > {{ threshold }}";
        r.summary = Some(t.into());
        r.validate().expect("Prometheus spelling is valid");
        assert_eq!(
            render(t, &r, &l, Some(100.0 / 6.0)),
            "orders /checkout: 16.67 % (16.7, 16.67, 16.667) > 5"
        );
        assert_eq!(
            render("{{ printf \"%f\" $value }}", &r, &l, Some(0.5)),
            "0.500000"
        );
        assert_eq!(render("{{ $value | humanize }}", &r, &l, None), "–");
        // A placeholder Prometheus would reject is still refused, naming both spellings.
        r.summary = Some("{{ $value | humanise }}".into());
        let e = r.validate().unwrap_err();
        assert!(e.message.contains("$labels.NAME"), "{}", e.message);
        r.summary = Some("{{ $labels. }}".into());
        assert!(r.validate().is_err());
    }

    /// Prometheus' `humanize` (template_test.go cases): SI prefixes, 4 significant digits.
    #[test]
    fn humanize_as_prometheus() {
        assert_eq!(humanize(0.0), "0");
        assert_eq!(humanize(1.0), "1");
        assert_eq!(humanize(1234.5678), "1.235k");
        assert_eq!(humanize(12345.0), "12.35k");
        assert_eq!(humanize(1_000_000.0), "1M");
        assert_eq!(humanize(0.5), "500m");
        assert_eq!(humanize(0.0001234), "123.4u");
        assert_eq!(humanize(-1500.0), "-1.5k");
        assert_eq!(humanize(16.666666), "16.67");
        assert_eq!(humanize(f64::INFINITY), "+Inf");
    }

    #[test]
    fn defaults_are_valid_error_rate_rules() {
        let d = Rule::defaults();
        assert_eq!(d.len(), 2);
        for r in &d {
            r.validate().unwrap();
            assert_eq!(r.measure, Measure::ErrorPct);
            assert_eq!(r.for_.ms(), 120_000);
            assert_eq!(r.min_count, 20);
        }
        assert_eq!((d[0].threshold, d[0].severity.as_str()), (5.0, "warning"));
        assert_eq!((d[1].threshold, d[1].severity.as_str()), (10.0, "critical"));
        // the guard: 50 % errors over 10 exchanges is not enough
        assert!(!d[0].condition(Some(50.0), Some(10.0)));
        assert!(d[0].condition(Some(6.0), Some(20.0)));
    }
}
