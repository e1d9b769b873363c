//! OpenTelemetry metrics pushed over OTLP/HTTP → route observations, one set per service.
//!
//! Decoding is the OpenTelemetry proto messages' own (`opentelemetry-proto`: prost for
//! `application/x-protobuf`, serde for OTLP's JSON mapping, `application/json`); this
//! module only maps what they carry.
//!
//! **Service and instance**: the resource's `service.name` (the SDKs' default
//! `unknown_service…` when unset) and `service.instance.id` (else `host.name`; else none).
//! A service that is also scraped under the same name is the same service: its pushed
//! routes sit beside its scraped ones.
//!
//! **Routes** (source `otlp`), from these instruments; every other metric is counted per
//! name as *unmapped* (never dropped silently):
//!
//! | metric | unit | route | failed when |
//! | --- | --- | --- | --- |
//! | `http.server.request.duration` (semantic conventions ≥ 1.23) | `s` | `http.request.method` + `http.route` | `http.response.status_code` 5xx, or `error.type` without a status |
//! | `http.server.duration` (older conventions) | `ms` | `http.method` + `http.route` (else `http.target`) | `http.status_code` 5xx |
//! | `http.server.requests` (Micrometer's OTLP registry) | its unit | `method` + `uri` | `status` 5xx, or `outcome` `SERVER_ERROR` |
//! | `camel.route.policy` (Camel's Micrometer names) | its unit | `routeId` (label `camel_context`) | — |
//! | `camel.exchanges.total`, `camel.exchanges.failed`, `camel.exchanges.inflight` | 1 | `routeId` | the failed counter |
//!
//! A route without a method or path gets `*` for it, as scraped HTTP routes do.
//! Histograms: explicit buckets become cumulative buckets by upper bound (converted to
//! seconds by the metric's unit: `s`, `ms`, `us`, `ns`); exponential ones (any scale) are
//! brought down to scale 3 at most (8 buckets per doubling, ~9 % wide: the resolution
//! Prometheus' native histograms default to) so that the bounds stay put when an SDK
//! rescales, then made cumulative by upper bound (the zero bucket's bound is its
//! threshold). Negative buckets (no duration is negative) are counted in the lowest
//! bucket. `count` is the exchanges, `sum` the time, 5xx points the failures; the
//! points' `max` is kept where it says something about the interval (see
//! [`PushedRoute::max_s`]).
//!
//! **k6**: a push from k6's OpenTelemetry output (service or instrumentation scope `k6`)
//! is a live run, not a service's routes ([`K6Push`]).
//!
//! **Temporality**: cumulative points carry running totals (turned into intervals by the
//! receiver against the previous push, resets and new start times handled there); delta
//! points carry the interval's own counts. Points flagged "no recorded value" are skipped.

use std::collections::{BTreeMap, HashMap};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, ExponentialHistogramDataPoint, HistogramDataPoint, NumberDataPoint,
    metric, number_data_point,
};

use crate::domain::routes::{Observation, Source};
use crate::domain::runs::limits::truncate_chars;

/// How the body of a push is encoded (its `Content-Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/x-protobuf`
    Protobuf,
    /// `application/json` (OTLP's JSON mapping of the same messages)
    Json,
}

impl Encoding {
    /// The encoding a `Content-Type` names (parameters ignored); `None`: neither.
    pub fn from_content_type(value: &str) -> Option<Encoding> {
        let mime = value.split(';').next().unwrap_or("").trim();
        if mime.eq_ignore_ascii_case("application/x-protobuf")
            || mime.eq_ignore_ascii_case("application/protobuf")
        {
            Some(Encoding::Protobuf)
        } else if mime.eq_ignore_ascii_case("application/json") {
            Some(Encoding::Json)
        } else {
            None
        }
    }

    /// The `Content-Type` of an answer in this encoding.
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// A decoded push, and the data points of it that could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoded {
    pub request: ExportMetricsServiceRequest,
    /// Data points taken out before mapping (see [`decode`]), counted among a push's
    /// rejected points.
    pub unread: u64,
    /// The first of them, said per metric.
    pub unread_reason: Option<String>,
}

/// Decodes an `ExportMetricsServiceRequest`; the error says what was wrong with the body.
///
/// In JSON, a data point the proto messages cannot read (a `"NaN"` string for a number,
/// a count of `10.5`, an enum by name where OTLP/JSON wants its number) is taken out and
/// counted in [`Decoded::unread`] with the reason, and the rest of its metric is read: the
/// proto mapping alone would drop the whole metric's data without a word.
pub fn decode(body: &[u8], encoding: Encoding) -> Result<Decoded, String> {
    match encoding {
        Encoding::Protobuf => <ExportMetricsServiceRequest as prost::Message>::decode(body)
            .map(|request| Decoded {
                request,
                ..Decoded::default()
            })
            .map_err(|e| {
                format!("body is not an OTLP ExportMetricsServiceRequest in protobuf: {e}")
            }),
        Encoding::Json => {
            use serde::Deserialize;
            let bad = |e: serde_json::Error| {
                format!("body is not an OTLP ExportMetricsServiceRequest in JSON: {e}")
            };
            let mut v: serde_json::Value = serde_json::from_slice(body).map_err(bad)?;
            fill_json_defaults(&mut v);
            let request = ExportMetricsServiceRequest::deserialize(&v).map_err(bad)?;
            let mut decoded = Decoded {
                request,
                ..Decoded::default()
            };
            if take_unreadable(&mut v, &mut decoded) {
                decoded.request = ExportMetricsServiceRequest::deserialize(&v).map_err(bad)?;
            }
            Ok(decoded)
        }
    }
}

/// The JSON keys of a metric's data, by kind.
const DATA_KINDS: [&str; 5] = [
    "gauge",
    "sum",
    "histogram",
    "exponentialHistogram",
    "summary",
];

/// Whether `v` reads as a `T` (the message's serde mapping); the error if not.
fn readable<T: serde::de::DeserializeOwned>(v: &serde_json::Value) -> Result<(), String> {
    T::deserialize(v).map(|_| ()).map_err(|e| e.to_string())
}

/// Whether data point `p` of a metric's data of `kind` reads.
fn point_readable(kind: &str, p: &serde_json::Value) -> Result<(), String> {
    use opentelemetry_proto::tonic::metrics::v1 as m;
    match kind {
        "gauge" | "sum" => readable::<m::NumberDataPoint>(p),
        "histogram" => readable::<m::HistogramDataPoint>(p),
        "exponentialHistogram" => readable::<m::ExponentialHistogramDataPoint>(p),
        "summary" => readable::<m::SummaryDataPoint>(p),
        _ => Ok(()),
    }
}

/// Whether a metric's data of `kind` reads as a whole.
fn data_readable(kind: &str, d: &serde_json::Value) -> Result<(), String> {
    use opentelemetry_proto::tonic::metrics::v1 as m;
    match kind {
        "gauge" => readable::<m::Gauge>(d),
        "sum" => readable::<m::Sum>(d),
        "histogram" => readable::<m::Histogram>(d),
        "exponentialHistogram" => readable::<m::ExponentialHistogram>(d),
        "summary" => readable::<m::Summary>(d),
        _ => Ok(()),
    }
}

/// For each metric of the JSON body `v` that `decoded` holds without data though `v`
/// gives it some: takes out the points that do not read (or, when the data still does not
/// read, all of it) and counts them in `decoded`. `true` when anything was taken out (the
/// body must be read again).
fn take_unreadable(v: &mut serde_json::Value, decoded: &mut Decoded) -> bool {
    use serde_json::Value;
    let mut changed = false;
    let Some(rms) = v.get_mut("resourceMetrics").and_then(Value::as_array_mut) else {
        return false;
    };
    for (i, rm) in rms.iter_mut().enumerate() {
        let Some(sms) = rm.get_mut("scopeMetrics").and_then(Value::as_array_mut) else {
            continue;
        };
        for (j, sm) in sms.iter_mut().enumerate() {
            let Some(ms) = sm.get_mut("metrics").and_then(Value::as_array_mut) else {
                continue;
            };
            for (k, m) in ms.iter_mut().enumerate() {
                let read = decoded
                    .request
                    .resource_metrics
                    .get(i)
                    .and_then(|rm| rm.scope_metrics.get(j))
                    .and_then(|sm| sm.metrics.get(k));
                if read.is_some_and(|m| m.data.is_some()) {
                    continue;
                }
                let Some(m) = m.as_object_mut() else { continue };
                let name = m
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                for kind in DATA_KINDS {
                    let Some(data) = m.get_mut(kind) else {
                        continue;
                    };
                    let mut first = None;
                    let mut taken = 0u64;
                    if let Some(points) = data.get_mut("dataPoints").and_then(Value::as_array_mut) {
                        points.retain(|p| match point_readable(kind, p) {
                            Ok(()) => true,
                            Err(e) => {
                                taken += 1;
                                first.get_or_insert(e);
                                false
                            }
                        });
                    }
                    let left = data
                        .get("dataPoints")
                        .and_then(Value::as_array)
                        .map_or(0, |p| p.len() as u64);
                    if let Err(e) = data_readable(kind, data) {
                        taken += left;
                        first.get_or_insert(e);
                        m.remove(kind);
                    }
                    if taken > 0 {
                        changed = true;
                        decoded.unread += taken;
                        let why = first.unwrap_or_default();
                        decoded.unread_reason.get_or_insert_with(|| {
                            format!("{name}: {taken} data points could not be read: {why}")
                        });
                    }
                    break;
                }
            }
        }
    }
    changed
}

/// Fills in what OTLP's JSON may leave out (a field at its default value) where the
/// proto messages' serde mapping requires it: in exponential-histogram points and their
/// buckets, and in summary quantiles; empties exemplars (harrier reads none). Without this,
/// a JSON exponential histogram from a real SDK (which omits `flags`, `zeroThreshold`…)
/// would be read as no data at all.
fn fill_json_defaults(v: &mut serde_json::Value) {
    use serde_json::{Value, json};
    let fill = |o: &mut serde_json::Map<String, Value>, defaults: &[(&str, Value)]| {
        for (k, d) in defaults {
            o.entry(k.to_string()).or_insert_with(|| d.clone());
        }
    };
    let metrics = v
        .get_mut("resourceMetrics")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|rm| rm.get_mut("scopeMetrics")?.as_array_mut())
        .flatten()
        .filter_map(|sm| sm.get_mut("metrics")?.as_array_mut())
        .flatten();
    for m in metrics {
        let Some(m) = m.as_object_mut() else { continue };
        for (kind, data) in m.iter_mut() {
            let Some(points) = data.get_mut("dataPoints").and_then(Value::as_array_mut) else {
                continue;
            };
            for p in points.iter_mut().filter_map(Value::as_object_mut) {
                // Exemplars are not read: an empty list parses whatever they held.
                p.insert("exemplars".to_string(), json!([]));
                match kind.as_str() {
                    "exponentialHistogram" => {
                        fill(
                            p,
                            &[
                                ("attributes", json!([])),
                                ("startTimeUnixNano", json!(0)),
                                ("timeUnixNano", json!(0)),
                                ("count", json!(0)),
                                ("scale", json!(0)),
                                ("zeroCount", json!(0)),
                                ("flags", json!(0)),
                                ("zeroThreshold", json!(0.0)),
                            ],
                        );
                        for side in ["positive", "negative"] {
                            if let Some(b) = p.get_mut(side).and_then(Value::as_object_mut) {
                                fill(b, &[("offset", json!(0)), ("bucketCounts", json!([]))]);
                            }
                        }
                    }
                    "summary" => {
                        let quantiles = p.get_mut("quantileValues").and_then(Value::as_array_mut);
                        for q in quantiles
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_object_mut)
                        {
                            fill(q, &[("quantile", json!(0.0)), ("value", json!(0.0))]);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

/// What bounds one push (`[limits]`): routes kept per service, series kept per route, and
/// the length of names.
#[derive(Debug, Clone, Copy)]
pub struct PushLimits {
    pub max_routes: usize,
    pub max_series_per_route: usize,
    /// Longest service, instance or route name kept, characters (`[limits]
    /// max_label_chars`); longer ones are cut and marked "…".
    pub max_name_chars: usize,
}

/// One route's readings in one push.
#[derive(Debug, Clone, PartialEq)]
pub struct PushedRoute {
    /// Cumulative readings (totals since `start_ms`) or, when `delta`, the interval's own
    /// counts, in the same fields.
    pub obs: Observation,
    pub delta: bool,
    /// Start of the points' aggregation, unix ms (`None`: the SDK gave none).
    pub start_ms: Option<i64>,
    /// The points' time, unix ms (the latest of them).
    pub at_ms: i64,
    /// The largest `max` the duration points carry, seconds: the interval's own for delta
    /// points, the max since `start_ms` for cumulative ones (the receiver keeps it only
    /// when it rose, i.e. when it fell in the interval).
    pub max_s: Option<f64>,
}

/// One service instance's push: its routes and what was not mapped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServicePush {
    pub service: String,
    /// `service.instance.id`, else `host.name`.
    pub instance: Option<String>,
    pub routes: Vec<PushedRoute>,
    /// Metrics harrier does not map, by name: data points seen.
    pub unmapped: BTreeMap<String, u64>,
    /// Data points read (mapped or not).
    pub points: u64,
    /// Runtime, process and pool metrics under the names the scrape path reads (see
    /// [`process_samples`]), for [`crate::sources::scrape::process::readings`].
    pub process: Vec<PromSample>,
    /// k6's own metrics, when the service is k6's OpenTelemetry output (see [`K6Push`]).
    pub k6: Option<K6Push>,
}

/// What k6's OpenTelemetry output (`k6 run --out experimental-opentelemetry`: service
/// `k6`, instrumentation scope `k6`) pushes of a load test, per request name (its `name` tag, the URL by default):
/// `http_req_duration` (a histogram in ms) and `http_req_failed` (the failed requests:
/// `http_req_failed.occurred` before k6 1.4, the `condition="nonzero"` series of one counter
/// since); and `vus`. Its other metrics (`data_sent`, `iterations`, …) are listed as
/// not mapped. A metric prefix (`K6_OTEL_METRIC_PREFIX`, e.g. `k6_`) is taken off.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct K6Push {
    pub labels: BTreeMap<String, K6Label>,
    /// Virtual users at the points' time (unix ms).
    pub vus: Option<(i64, f64)>,
}

/// One request name's figures in one k6 push: totals since `start_ms` (cumulative, k6's
/// default) or the interval's own (`delta`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct K6Label {
    pub count: f64,
    pub sum_ms: f64,
    /// Smallest and largest durations the points carry (since `start_ms`), ms.
    pub min_ms: Option<f64>,
    pub max_ms: Option<f64>,
    pub failed: f64,
    pub delta: bool,
    pub start_ms: Option<i64>,
    pub at_ms: i64,
}

/// Adds a k6 metric's points to `k6`; `false` when the metric is not one read for runs.
fn k6_metric(
    m: &opentelemetry_proto::tonic::metrics::v1::Metric,
    k6: &mut K6Push,
    bad: &mut Refused,
) -> bool {
    let name = m.name.strip_prefix("k6_").unwrap_or(&m.name);
    let label = |attrs: &[KeyValue]| attr_text(attrs, "name").unwrap_or_else(|| "*".to_string());
    let live = |flags: u32| flags & NO_RECORDED_VALUE == 0;
    match (name, &m.data) {
        ("http_req_duration", Some(metric::Data::Histogram(h))) => {
            let to_ms = unit_seconds(if m.unit.is_empty() { "ms" } else { &m.unit }) * 1000.0;
            let delta = h.aggregation_temporality == AggregationTemporality::Delta as i32;
            for p in h
                .data_points
                .iter()
                .filter(|p| live(p.flags))
                .filter(|p| bad.take(bad_histogram(p)))
            {
                let l = k6.labels.entry(label(&p.attributes)).or_default();
                l.delta = delta;
                l.count += p.count as f64;
                l.sum_ms += p.sum.unwrap_or(0.0) * to_ms;
                if let Some(v) = p.min {
                    l.min_ms = Some(l.min_ms.map_or(v * to_ms, |x: f64| x.min(v * to_ms)));
                }
                if let Some(v) = p.max {
                    l.max_ms = Some(l.max_ms.map_or(v * to_ms, |x: f64| x.max(v * to_ms)));
                }
                if let Some(t) = ns_to_ms(p.start_time_unix_nano) {
                    l.start_ms = Some(l.start_ms.map_or(t, |x: i64| x.min(t)));
                }
                l.at_ms = l.at_ms.max(ns_to_ms(p.time_unix_nano).unwrap_or(0));
            }
            true
        }
        // k6 before 1.4: a Rate as two counters, `.occurred` (the failed) and `.total`.
        ("http_req_failed.occurred", Some(metric::Data::Sum(sum))) => {
            for p in sum
                .data_points
                .iter()
                .filter(|p| live(p.flags))
                .filter(|p| bad.take(bad_number(p, true)))
            {
                k6.labels.entry(label(&p.attributes)).or_default().failed += number(p);
            }
            true
        }
        // k6 1.4 and later: one counter, `condition` `nonzero` for the failed.
        ("http_req_failed", Some(metric::Data::Sum(sum))) => {
            for p in sum
                .data_points
                .iter()
                .filter(|p| live(p.flags))
                .filter(|p| bad.take(bad_number(p, true)))
            {
                if attr_text(&p.attributes, "condition").as_deref() == Some("nonzero") {
                    k6.labels.entry(label(&p.attributes)).or_default().failed += number(p);
                }
            }
            true
        }
        ("vus", Some(metric::Data::Gauge(g))) => {
            for p in g
                .data_points
                .iter()
                .filter(|p| live(p.flags))
                .filter(|p| bad.take(bad_number(p, false)))
            {
                let t = ns_to_ms(p.time_unix_nano).unwrap_or(0);
                let v = k6.vus.map_or(0.0, |(_, v)| v) + number(p);
                k6.vus = Some((t, v));
            }
            true
        }
        _ => false,
    }
}

/// One sample under its Prometheus name, owned (what [`PromSample::exposition`] lends).
#[derive(Debug, Clone, PartialEq)]
pub struct PromSample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl PromSample {
    /// `samples` as a parsed exposition (one untyped family per sample), so the scrape
    /// path's process and pool readings apply to pushed metrics as they are.
    pub fn exposition(
        samples: &[PromSample],
    ) -> crate::sources::scrape::exposition::Exposition<'_> {
        use crate::sources::scrape::exposition::{
            Exposition, Family, MetricType, Sample, TextFormat,
        };
        Exposition {
            format: TextFormat::Prometheus,
            families: samples
                .iter()
                .map(|p| Family {
                    name: &p.name,
                    kind: MetricType::Untyped,
                    help: None,
                    unit: None,
                    samples: vec![Sample {
                        name: &p.name,
                        labels: p
                            .labels
                            .iter()
                            .map(|(k, v)| (k.as_str(), std::borrow::Cow::Borrowed(v.as_str())))
                            .collect(),
                        value: p.value,
                        timestamp_ms: None,
                    }],
                })
                .collect(),
        }
    }
}

/// A whole request mapped: per service instance, in the order first seen, and the data
/// points refused (past a limit, unreadable, or impossible values), with the first three
/// reasons.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mapped {
    pub services: Vec<ServicePush>,
    pub rejected: u64,
    pub reason: Option<String>,
    /// Of `rejected`, the points taken out before mapping ([`Decoded::unread`]): in no
    /// service's `points`.
    pub unread: u64,
    /// Reasons met (one per metric and kind of refusal).
    pub reasons: u64,
}

impl Mapped {
    /// Counts the points of `decoded` that could not be read among the rejected ones.
    pub fn with_unread(mut self, decoded: &Decoded) -> Mapped {
        let why = decoded.unread_reason.clone().unwrap_or_default();
        self.reject(decoded.unread, || why);
        self.unread += decoded.unread;
        self
    }

    fn reject(&mut self, n: u64, why: impl FnOnce() -> String) {
        if n == 0 {
            return;
        }
        self.rejected += n;
        self.reasons += 1;
        // The first three reasons, in the order met; then how many more.
        match (&mut self.reason, self.reasons) {
            (None, _) => self.reason = Some(why()),
            (Some(r), 2..=3) => {
                r.push_str("; ");
                r.push_str(&why());
            }
            (Some(r), 4) => r.push_str("; and more"),
            _ => {}
        }
    }
}

/// Series (attribute sets beside the route's own) kept per route and push; points of
/// further series are refused.
pub const MAX_SERIES_PER_ROUTE: usize = 1_000;

/// The highest exponential-histogram scale kept (see the module docs).
pub const MAX_SCALE: i32 = 3;

/// Flag of a data point that carries no value (OTLP `DataPointFlags`).
const NO_RECORDED_VALUE: u32 = 1;

/// Which figure of a route a metric gives.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    /// A duration histogram: exchanges, failures, time, buckets.
    Durations,
    /// A counter of exchanges.
    Total,
    /// A counter of failed exchanges.
    Failed,
    /// Exchanges in flight (a gauge or up-down counter).
    Inflight,
}

/// How a mapped metric names its route.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Naming {
    /// `http.request.method` + `http.route` (current semantic conventions).
    Http,
    /// `http.method` + `http.route` / `http.target` (older conventions).
    HttpOld,
    /// Micrometer's `method` + `uri`.
    Micrometer,
    /// Camel's `routeId` (+ `camelContext`).
    Camel,
}

/// The role and naming of metric `name`, when harrier maps it.
fn mapping(name: &str) -> Option<(Role, Naming)> {
    Some(match name {
        "http.server.request.duration" => (Role::Durations, Naming::Http),
        "http.server.duration" => (Role::Durations, Naming::HttpOld),
        "http.server.requests" => (Role::Durations, Naming::Micrometer),
        "camel.route.policy" => (Role::Durations, Naming::Camel),
        "camel.exchanges.total" => (Role::Total, Naming::Camel),
        "camel.exchanges.failed" => (Role::Failed, Naming::Camel),
        "camel.exchanges.inflight" => (Role::Inflight, Naming::Camel),
        _ => return None,
    })
}

/// Seconds per unit of a duration metric (`s` when the unit is unknown or empty).
fn unit_seconds(unit: &str) -> f64 {
    match unit {
        "ms" | "milliseconds" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "min" => 60.0,
        _ => 1.0,
    }
}

/// An attribute's value as text (what a route or series key holds).
fn text(v: &AnyValue) -> Option<String> {
    Some(match v.value.as_ref()? {
        any_value::Value::StringValue(s) => s.clone(),
        any_value::Value::IntValue(i) => i.to_string(),
        any_value::Value::DoubleValue(d) => d.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        _ => return None,
    })
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs.iter().find(|kv| kv.key == key)?.value.as_ref()
}

fn attr_text(attrs: &[KeyValue], key: &str) -> Option<String> {
    attr(attrs, key).and_then(text).filter(|s| !s.is_empty())
}

fn ns_to_ms(ns: u64) -> Option<i64> {
    (ns > 0).then_some((ns / 1_000_000) as i64)
}

/// A route's identity within a service: name and labels. A route has one temporality,
/// its first point's.
type RouteKey = (String, BTreeMap<String, String>);

/// The route a point of a metric named by `naming` belongs to, its series key (the
/// attributes that do not make the route, sorted), and whether the point counts failures.
fn route_of(
    naming: Naming,
    attrs: &[KeyValue],
) -> (String, BTreeMap<String, String>, String, bool) {
    let (method_key, path_keys, route_attrs): (&str, &[&str], &[&str]) = match naming {
        Naming::Http => (
            "http.request.method",
            &["http.route"],
            &["http.request.method", "http.route"],
        ),
        Naming::HttpOld => (
            "http.method",
            &["http.route", "http.target"],
            &["http.method", "http.route", "http.target"],
        ),
        Naming::Micrometer => ("method", &["uri"], &["method", "uri"]),
        Naming::Camel => ("", &["routeId"], &["routeId", "camelContext"]),
    };
    let mut labels = BTreeMap::new();
    let route = if naming == Naming::Camel {
        if let Some(ctx) = attr_text(attrs, "camelContext") {
            labels.insert("camel_context".to_string(), ctx);
        }
        attr_text(attrs, "routeId").unwrap_or_else(|| "*".to_string())
    } else {
        let method = attr_text(attrs, method_key);
        let path = path_keys.iter().find_map(|k| attr_text(attrs, k));
        match (method, path) {
            (Some(m), Some(p)) => format!("{m} {p}"),
            (None, Some(p)) => p,
            (Some(m), None) => format!("{m} *"),
            (None, None) => "*".to_string(),
        }
    };
    let mut rest: Vec<(&str, String)> = attrs
        .iter()
        .filter(|kv| !route_attrs.contains(&kv.key.as_str()))
        .filter_map(|kv| Some((kv.key.as_str(), text(kv.value.as_ref()?)?)))
        .collect();
    rest.sort();
    let mut key = String::with_capacity(rest.iter().map(|(k, v)| k.len() + v.len() + 2).sum());
    for (i, (k, v)) in rest.iter().enumerate() {
        if i > 0 {
            key.push(',');
        }
        key.push_str(k);
        key.push('=');
        key.push_str(v);
    }
    let status = match naming {
        Naming::Http => attr_text(attrs, "http.response.status_code"),
        Naming::HttpOld => attr_text(attrs, "http.status_code"),
        Naming::Micrometer => attr_text(attrs, "status"),
        Naming::Camel => None,
    };
    let failed = match status {
        Some(code) => code.starts_with('5'),
        None => match naming {
            Naming::Http => attr_text(attrs, "error.type").is_some(),
            Naming::Micrometer => attr_text(attrs, "outcome").as_deref() == Some("SERVER_ERROR"),
            _ => false,
        },
    };
    (route, labels, key, failed)
}

/// Cumulative buckets `(upper bound s, count)` of an explicit-bucket point; `None` when
/// the point carries no distribution or an inconsistent one.
fn explicit_buckets(p: &HistogramDataPoint, to_s: f64) -> Option<Vec<(f64, f64)>> {
    if p.bucket_counts.is_empty() || p.bucket_counts.len() != p.explicit_bounds.len() + 1 {
        return None;
    }
    let mut out = Vec::with_capacity(p.bucket_counts.len());
    let mut cum = 0.0;
    for (i, c) in p.bucket_counts.iter().enumerate() {
        cum += *c as f64;
        let le = p.explicit_bounds.get(i).map_or(f64::INFINITY, |b| b * to_s);
        out.push((le, cum));
    }
    Some(out)
}

/// Upper bound of bucket `index` at `scale`: base^(index+1), base = 2^(2^−scale).
fn exp_bound(scale: i32, index: i64) -> f64 {
    ((index + 1) as f64 * (-scale as f64).exp2()).exp2()
}

/// Cumulative buckets `(upper bound s, count)` of an exponential point, at scale
/// ≤ [`MAX_SCALE`] (see the module docs).
fn exponential_buckets(p: &ExponentialHistogramDataPoint, to_s: f64) -> Vec<(f64, f64)> {
    let scale = p.scale.min(MAX_SCALE);
    let shift = (p.scale - scale) as u32;
    let mut by_index: BTreeMap<i64, u64> = BTreeMap::new();
    if let Some(pos) = &p.positive {
        for (i, c) in pos.bucket_counts.iter().enumerate() {
            if *c > 0 {
                let index = (pos.offset as i64 + i as i64) >> shift;
                *by_index.entry(index).or_default() += c;
            }
        }
    }
    let negative: u64 = p
        .negative
        .as_ref()
        .map_or(0, |n| n.bucket_counts.iter().sum());
    let mut out = Vec::with_capacity(by_index.len() + 3);
    let mut cum = (p.zero_count + negative) as f64;
    let zero_bound = p.zero_threshold.max(0.0);
    if cum > 0.0 || by_index.is_empty() {
        out.push((zero_bound * to_s, cum));
    }
    // The lower edge of the first bucket, so that a quantile in it interpolates from
    // there and not from 0.
    if let Some((&first, _)) = by_index.first_key_value() {
        let edge = exp_bound(scale, first - 1);
        if edge > zero_bound {
            out.push((edge * to_s, cum));
        }
    }
    for (index, c) in by_index {
        cum += c as f64;
        out.push((exp_bound(scale, index) * to_s, cum));
    }
    out.push((f64::INFINITY, p.count as f64));
    out
}

/// The largest count a point may carry: beyond 2^53 a count is not exact as a double, and
/// no service serves that many requests.
const MAX_COUNT: u64 = 1 << 53;

/// Refused points of one metric: how many, and why the first was.
#[derive(Debug, Default)]
struct Refused {
    n: u64,
    why: Option<String>,
}

impl Refused {
    /// `Some(why)` counts a refused point; `true` when the point may be taken.
    fn take(&mut self, why: Option<String>) -> bool {
        match why {
            None => true,
            Some(w) => {
                self.n += 1;
                self.why.get_or_insert(w);
                false
            }
        }
    }
}

/// Why a point's times cannot be taken: no time, or a start after it.
fn bad_times(start_ns: u64, time_ns: u64) -> Option<String> {
    if time_ns == 0 {
        return Some("a data point without a time (timeUnixNano 0)".into());
    }
    (start_ns > time_ns).then(|| {
        format!("a data point whose start time ({start_ns} ns) is after its time ({time_ns} ns)")
    })
}

/// Why a duration point's count, sum, min or max cannot be taken (durations are finite
/// and not negative).
fn bad_figures(count: u64, sum: Option<f64>, min: Option<f64>, max: Option<f64>) -> Option<String> {
    if count > MAX_COUNT {
        return Some(format!(
            "a count of {count} (more than 2^53 is not a count of requests)"
        ));
    }
    // An SDK may send an empty point's min and max as ±∞: they say nothing then.
    let (min, max) = if count == 0 { (None, None) } else { (min, max) };
    for (what, v) in [("sum", sum), ("min", min), ("max", max)] {
        if let Some(v) = v
            && !(v.is_finite() && v >= 0.0)
        {
            return Some(format!(
                "a duration {what} of {v} (expected a finite number ≥ 0)"
            ));
        }
    }
    if let (Some(lo), Some(hi)) = (min, max)
        && lo > hi
    {
        return Some(format!("a min ({lo}) above the max ({hi})"));
    }
    None
}

/// Why an explicit-bucket duration point cannot be taken.
fn bad_histogram(p: &HistogramDataPoint) -> Option<String> {
    bad_times(p.start_time_unix_nano, p.time_unix_nano)
        .or_else(|| bad_figures(p.count, p.sum, p.min, p.max))
        .or_else(|| {
            if p.bucket_counts.is_empty() {
                return None;
            }
            if p.bucket_counts.len() != p.explicit_bounds.len() + 1 {
                return Some(format!(
                    "{} bucket counts for {} explicit bounds (expected one more count than bounds)",
                    p.bucket_counts.len(),
                    p.explicit_bounds.len()
                ));
            }
            if p.explicit_bounds.iter().any(|b| !b.is_finite())
                || p.explicit_bounds.windows(2).any(|w| w[0] >= w[1])
            {
                return Some("explicit bounds that are not finite and increasing".into());
            }
            let in_buckets = p
                .bucket_counts
                .iter()
                .try_fold(0u64, |a, c| a.checked_add(*c));
            (in_buckets != Some(p.count)).then(|| {
                format!(
                    "bucket counts that add up to {} for a count of {}",
                    in_buckets.map_or("more than 2^64".to_string(), |n| n.to_string()),
                    p.count
                )
            })
        })
}

/// Why an exponential duration point cannot be taken.
fn bad_exponential(p: &ExponentialHistogramDataPoint) -> Option<String> {
    bad_times(p.start_time_unix_nano, p.time_unix_nano)
        .or_else(|| bad_figures(p.count, p.sum, p.min, p.max))
        .or_else(|| {
            // OTLP's range of scales.
            if !(-10..=20).contains(&p.scale) {
                return Some(format!("a scale of {} (OTLP's are −10 to 20)", p.scale));
            }
            if !(p.zero_threshold.is_finite() && p.zero_threshold >= 0.0) {
                return Some(format!("a zero threshold of {}", p.zero_threshold));
            }
            let mut total = Some(p.zero_count);
            for side in [&p.positive, &p.negative].into_iter().flatten() {
                let last = side.offset as i64 + side.bucket_counts.len() as i64;
                let scale = p.scale.min(MAX_SCALE);
                let shift = p.scale - scale;
                let reach = |i: i64| exp_bound(scale, i >> shift);
                let in_range = reach(last).is_finite() && reach(side.offset as i64 - 1) > 0.0;
                if !side.bucket_counts.is_empty() && !in_range {
                    return Some(format!(
                        "buckets at offset {} beyond the range of a double",
                        side.offset
                    ));
                }
                for c in &side.bucket_counts {
                    total = total.and_then(|t| t.checked_add(*c));
                }
            }
            (total != Some(p.count)).then(|| {
                format!(
                    "zero and bucket counts that add up to {} for a count of {}",
                    total.map_or("more than 2^64".to_string(), |n| n.to_string()),
                    p.count
                )
            })
        })
}

/// Why a counter's or gauge's value cannot be taken: not finite, or (`counter`) below 0.
fn bad_number(p: &NumberDataPoint, counter: bool) -> Option<String> {
    let v = number(p);
    if !v.is_finite() || (counter && v < 0.0) {
        return Some(format!(
            "a value of {v} (expected a finite number{})",
            if counter { " ≥ 0" } else { "" }
        ));
    }
    if counter {
        bad_times(p.start_time_unix_nano, p.time_unix_nano)
    } else {
        None
    }
}

/// The routes and unmapped metrics of `req`, per service instance, within `limits`.
pub fn map(req: &ExportMetricsServiceRequest, limits: PushLimits) -> Mapped {
    let mut mapped = Mapped::default();
    let mut service_at: HashMap<(String, Option<String>), usize> = HashMap::new();
    for rm in &req.resource_metrics {
        let res = rm.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        let service =
            attr_text(res, "service.name").unwrap_or_else(|| "unknown_service".to_string());
        let instance =
            attr_text(res, "service.instance.id").or_else(|| attr_text(res, "host.name"));
        let cut = |s: String| truncate_chars(&s, limits.max_name_chars.max(1)).into_owned();
        let service = cut(service);
        let instance = instance.map(cut);
        let at = *service_at
            .entry((service.clone(), instance.clone()))
            .or_insert_with(|| {
                mapped.services.push(ServicePush {
                    service: service.clone(),
                    instance: instance.clone(),
                    ..Default::default()
                });
                mapped.services.len() - 1
            });
        let mut routes: HashMap<RouteKey, usize> = mapped.services[at]
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| ((r.obs.route.clone(), r.obs.labels.clone()), i))
            .collect();
        for sm in &rm.scope_metrics {
            for m in &sm.metrics {
                // A metric without data (its points all unreadable, counted at decoding)
                // says nothing.
                if m.data.is_none() {
                    continue;
                }
                let n = points_of(m);
                let push = &mut mapped.services[at];
                push.points += n;
                // k6's output names its instrumentation scope `k6`, whatever service
                // name it is given (`K6_OTEL_SERVICE_NAME`).
                let from_k6 = service == "k6" || sm.scope.as_ref().is_some_and(|s| s.name == "k6");
                let mut bad = Refused::default();
                if from_k6 && k6_metric(m, push.k6.get_or_insert_default(), &mut bad) {
                    let (n_bad, why) = (bad.n, bad.why.unwrap_or_default());
                    let name = &m.name;
                    mapped.reject(n_bad, || {
                        format!("{name}: {n_bad} data points refused: {why}")
                    });
                    continue;
                }
                let (Some((role, naming)), Some(data)) = (mapping(&m.name), m.data.as_ref()) else {
                    let before = push.process.len();
                    process_samples(m, &mut push.process);
                    if push.process.len() == before {
                        *push.unmapped.entry(m.name.clone()).or_default() += n;
                    }
                    continue;
                };
                let to_s = unit_seconds(&m.unit);
                let mut refused = 0u64;
                let mut add = |attrs: &[KeyValue],
                               delta: Option<bool>,
                               start_ns: u64,
                               time_ns: u64,
                               f: &mut dyn FnMut(&mut Observation, &str, bool) -> Option<f64>| {
                    let push = &mut mapped.services[at];
                    let (route, labels, key, failed) = route_of(naming, attrs);
                    let route = truncate_chars(&route, limits.max_name_chars.max(1)).into_owned();
                    let rkey = (route, labels);
                    let i = match routes.get(&rkey) {
                        Some(&i) => i,
                        None => {
                            if push.routes.len() >= limits.max_routes {
                                refused += 1;
                                return;
                            }
                            let mut obs = Observation::new(&service, &rkey.0, Source::Otlp);
                            obs.labels = rkey.1.clone();
                            obs.instance = None;
                            push.routes.push(PushedRoute {
                                obs,
                                delta: delta.unwrap_or(false),
                                start_ms: None,
                                at_ms: 0,
                                max_s: None,
                            });
                            routes.insert(rkey, push.routes.len() - 1);
                            push.routes.len() - 1
                        }
                    };
                    let r = &mut push.routes[i];
                    if let Some(d) = delta
                        && r.obs.duration_count.is_none()
                        && r.obs.total.is_none()
                    {
                        r.delta = d;
                    }
                    let series = r
                        .obs
                        .duration_count
                        .as_ref()
                        .or(r.obs.total.as_ref())
                        .map_or(0, |c| c.0.len());
                    let known = [&r.obs.duration_count, &r.obs.total]
                        .iter()
                        .any(|c| c.as_ref().is_some_and(|c| c.0.iter().any(|(k, _)| *k == key)));
                    if !known && series >= limits.max_series_per_route {
                        refused += 1;
                        return;
                    }
                    if let Some(s) = ns_to_ms(start_ns) {
                        r.start_ms = Some(r.start_ms.map_or(s, |x: i64| x.min(s)));
                    }
                    if let Some(t) = ns_to_ms(time_ns) {
                        r.at_ms = r.at_ms.max(t);
                    }
                    if let Some(max) = f(&mut r.obs, &key, failed) {
                        r.max_s = Some(r.max_s.map_or(max, |x: f64| x.max(max)));
                    }
                };
                match data {
                    metric::Data::Histogram(h) if role == Role::Durations => {
                        let delta =
                            Some(h.aggregation_temporality == AggregationTemporality::Delta as i32);
                        for p in h
                            .data_points
                            .iter()
                            .filter(|p| p.flags & NO_RECORDED_VALUE == 0)
                            .filter(|p| bad.take(bad_histogram(p)))
                        {
                            add(
                                &p.attributes,
                                delta,
                                p.start_time_unix_nano,
                                p.time_unix_nano,
                                &mut |o, key, failed| {
                                    durations(
                                        o,
                                        key,
                                        (naming != Naming::Camel).then_some(failed),
                                        p.count as f64,
                                        p.sum.map(|s| s * to_s),
                                        explicit_buckets(p, to_s),
                                    );
                                    p.max.filter(|_| p.count > 0).map(|m| m * to_s)
                                },
                            );
                        }
                    }
                    metric::Data::ExponentialHistogram(h) if role == Role::Durations => {
                        let delta =
                            Some(h.aggregation_temporality == AggregationTemporality::Delta as i32);
                        for p in h
                            .data_points
                            .iter()
                            .filter(|p| p.flags & NO_RECORDED_VALUE == 0)
                            .filter(|p| bad.take(bad_exponential(p)))
                        {
                            add(
                                &p.attributes,
                                delta,
                                p.start_time_unix_nano,
                                p.time_unix_nano,
                                &mut |o, key, failed| {
                                    durations(
                                        o,
                                        key,
                                        (naming != Naming::Camel).then_some(failed),
                                        p.count as f64,
                                        p.sum.map(|s| s * to_s),
                                        Some(exponential_buckets(p, to_s)),
                                    );
                                    p.max.filter(|_| p.count > 0).map(|m| m * to_s)
                                },
                            );
                        }
                    }
                    metric::Data::Sum(s)
                        if matches!(role, Role::Total | Role::Failed) && s.is_monotonic =>
                    {
                        let delta =
                            Some(s.aggregation_temporality == AggregationTemporality::Delta as i32);
                        for p in s
                            .data_points
                            .iter()
                            .filter(|p| p.flags & NO_RECORDED_VALUE == 0)
                            .filter(|p| bad.take(bad_number(p, true)))
                        {
                            let v = number(p);
                            add(
                                &p.attributes,
                                delta,
                                p.start_time_unix_nano,
                                p.time_unix_nano,
                                &mut |o, key, _| {
                                    let c = if role == Role::Total {
                                        &mut o.total
                                    } else {
                                        &mut o.failed
                                    };
                                    c.get_or_insert_default().add(key, v);
                                    None
                                },
                            );
                        }
                    }
                    metric::Data::Sum(s) if role == Role::Inflight && !s.is_monotonic => {
                        for p in s
                            .data_points
                            .iter()
                            .filter(|p| p.flags & NO_RECORDED_VALUE == 0)
                            .filter(|p| bad.take(bad_number(p, false)))
                        {
                            let v = number(p);
                            add(&p.attributes, None, 0, p.time_unix_nano, &mut |o, _, _| {
                                o.inflight = Some(o.inflight.unwrap_or(0.0) + v);
                                None
                            });
                        }
                    }
                    metric::Data::Gauge(g) if role == Role::Inflight => {
                        for p in g
                            .data_points
                            .iter()
                            .filter(|p| p.flags & NO_RECORDED_VALUE == 0)
                            .filter(|p| bad.take(bad_number(p, false)))
                        {
                            let v = number(p);
                            add(&p.attributes, None, 0, p.time_unix_nano, &mut |o, _, _| {
                                o.inflight = Some(o.inflight.unwrap_or(0.0) + v);
                                None
                            });
                        }
                    }
                    _ => {
                        // A known name with another shape than harrier reads.
                        *mapped.services[at]
                            .unmapped
                            .entry(m.name.clone())
                            .or_default() += n;
                    }
                }
                let name = &m.name;
                let (n_bad, why) = (bad.n, bad.why.unwrap_or_default());
                mapped.reject(n_bad, || {
                    format!("{name}: {n_bad} data points refused: {why}")
                });
                mapped.reject(refused, || {
                    format!(
                        "{name}: past the limit of {} routes per service or {} series per route; further points were refused",
                        limits.max_routes, limits.max_series_per_route
                    )
                });
            }
        }
    }
    // A route with a counter of exchanges (or of failures) takes them from it, not from its
    // duration points' counts (the `d:` series).
    for push in &mut mapped.services {
        for r in &mut push.routes {
            for c in [r.obs.total.as_mut(), r.obs.failed.as_mut()]
                .into_iter()
                .flatten()
            {
                if c.0.iter().any(|(k, _)| !k.starts_with("d:")) {
                    c.0.retain(|(k, _)| !k.starts_with("d:"));
                }
            }
        }
    }
    mapped
}

/// The prefixes of the Prometheus names the scrape path reads as process and pool figures
/// ([`crate::sources::scrape::process`]).
const PROCESS_FAMILIES: &[&str] = &[
    "process_",
    "jvm_",
    "system_cpu_usage",
    "hikaricp_connections_",
    "jdbc_connections_",
    "httpcomponents_httpclient_pool_",
    "jetty_threads_",
    "tomcat_threads_",
    "executor_",
    "worker_pool_",
];

/// OpenTelemetry's runtime and database-client conventions under the names the scrape
/// path reads (`(translated name, name read)`), after the translation of
/// [`process_samples`].
const CONVENTION_NAMES: &[(&str, &str)] = &[
    (
        "process_cpu_time_seconds_total",
        "process_cpu_seconds_total",
    ),
    ("jvm_cpu_time_seconds_total", "process_cpu_seconds_total"),
    ("jvm_cpu_recent_utilization", "process_cpu_usage"),
    (
        "process_memory_usage_bytes",
        "process_resident_memory_bytes",
    ),
    ("process_thread_count", "process_threads"),
    ("process_open_file_descriptor_count", "process_open_fds"),
    ("jvm_thread_count", "jvm_threads_live_threads"),
    ("jvm_memory_limit_bytes", "jvm_memory_max_bytes"),
    ("jvm_gc_duration_seconds_sum", "jvm_gc_pause_seconds_sum"),
    (
        "jvm_gc_duration_seconds_count",
        "jvm_gc_pause_seconds_count",
    ),
    ("db_client_connection_max", "jdbc_connections_max"),
    ("db_client_connections_max", "jdbc_connections_max"),
    (
        "db_client_connection_pending_requests",
        "jdbc_connections_pending",
    ),
    (
        "db_client_connections_pending_requests",
        "jdbc_connections_pending",
    ),
];

/// Attribute keys of those conventions under the labels the scrape path reads.
const CONVENTION_LABELS: &[(&str, &str)] = &[
    ("jvm.memory.type", "area"),
    ("jvm.memory.pool.name", "id"),
    ("db.client.connection.pool.name", "name"),
    ("pool.name", "name"),
];

/// The Prometheus unit suffix of an OTLP unit, as Prometheus' own OTLP translation names
/// it (UCUM `By` → `bytes`, `s` → `seconds`; annotations in braces and `1` give none).
fn unit_suffix(unit: &str) -> Option<&str> {
    match unit {
        "" | "1" => None,
        u if u.starts_with('{') => None,
        "By" => Some("bytes"),
        "s" => Some("seconds"),
        "ms" => Some("milliseconds"),
        u => Some(u),
    }
}

/// `name` with every character outside `[a-zA-Z0-9_:]` as `_`.
fn prom_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Adds the samples of metric `m` under Prometheus names when they fall in one of the
/// families the scrape path reads as process and pool figures; adds nothing for any other
/// metric. The translation is Prometheus' own for OTLP: dots to `_`, the unit as a suffix,
/// `_total` on monotonic sums, histograms as `_sum` and `_count` (times in ms read as
/// seconds). Micrometer's OTLP names (`jvm.memory.used`, `hikaricp.connections.active`,
/// `executor.active`…) so become the very names its Prometheus registry writes;
/// OpenTelemetry's conventions (`process.cpu.time`, `jvm.memory.used` by
/// `jvm.memory.type`, `jvm.gc.duration`, `db.client.connection.count` by state…) are
/// renamed to them ([`CONVENTION_NAMES`], [`CONVENTION_LABELS`]; a database client pool
/// is a `jdbc` pool: used, idle and max connections, requests waiting).
pub fn process_samples(
    m: &opentelemetry_proto::tonic::metrics::v1::Metric,
    out: &mut Vec<PromSample>,
) {
    let base = prom_name(&m.name);
    let suffixed = |base: &str, unit: Option<&str>| match unit {
        Some(u) if !base.ends_with(&format!("_{u}")) => format!("{base}_{u}"),
        _ => base.to_string(),
    };
    let labels = |attrs: &[KeyValue]| -> Vec<(String, String)> {
        attrs
            .iter()
            .filter_map(|kv| {
                let v = text(kv.value.as_ref()?)?;
                let key = CONVENTION_LABELS
                    .iter()
                    .find(|(from, _)| *from == kv.key)
                    .map_or_else(|| prom_name(&kv.key), |(_, to)| to.to_string());
                let v = if key == "area" && v == "non_heap" {
                    "nonheap".to_string()
                } else {
                    v
                };
                Some((key, v))
            })
            .collect()
    };
    let mut push = |name: String, labels: Vec<(String, String)>, value: f64| {
        let name = CONVENTION_NAMES
            .iter()
            .find(|(from, _)| *from == name)
            .map_or(name, |(_, to)| to.to_string());
        if value.is_finite() && PROCESS_FAMILIES.iter().any(|f| name.starts_with(f)) {
            out.push(PromSample {
                name,
                labels,
                value,
            });
        }
    };
    let live = |flags: u32| flags & NO_RECORDED_VALUE == 0;
    match &m.data {
        Some(metric::Data::Gauge(g)) => {
            let name = suffixed(&base, unit_suffix(&m.unit));
            for p in g.data_points.iter().filter(|p| live(p.flags)) {
                push(name.clone(), labels(&p.attributes), number(p));
            }
        }
        Some(metric::Data::Sum(s)) => {
            let mut name = suffixed(&base, unit_suffix(&m.unit));
            if s.is_monotonic && !name.ends_with("_total") {
                name.push_str("_total");
            }
            let pool_usage = matches!(
                base.as_str(),
                "db_client_connection_count" | "db_client_connections_usage"
            );
            for p in s.data_points.iter().filter(|p| live(p.flags)) {
                if !pool_usage {
                    push(name.clone(), labels(&p.attributes), number(p));
                    continue;
                }
                // The connections of a database client pool, by state.
                let state = ["db.client.connection.state", "state"]
                    .iter()
                    .find_map(|k| attr_text(&p.attributes, k));
                let field = match state.as_deref() {
                    Some("used") => "jdbc_connections_active",
                    Some("idle") => "jdbc_connections_idle",
                    _ => continue,
                };
                let l = labels(&p.attributes)
                    .into_iter()
                    .filter(|(k, _)| !k.ends_with("state"))
                    .collect();
                push(field.to_string(), l, number(p));
            }
        }
        Some(metric::Data::Histogram(h)) => {
            let to_s = unit_seconds(&m.unit);
            let timed = to_s != 1.0 || m.unit == "s" || m.unit == "seconds";
            let name = if timed {
                suffixed(&base, Some("seconds"))
            } else {
                suffixed(&base, unit_suffix(&m.unit))
            };
            for p in h.data_points.iter().filter(|p| live(p.flags)) {
                if let Some(sum) = p.sum {
                    let sum = if timed { sum * to_s } else { sum };
                    push(format!("{name}_sum"), labels(&p.attributes), sum);
                }
                push(
                    format!("{name}_count"),
                    labels(&p.attributes),
                    p.count as f64,
                );
            }
        }
        _ => {}
    }
}

/// Adds a duration point of series `key`: its count to the exchanges (and to the
/// failures when `failed` says so; `None`: the metric tells no failures), its sum, and
/// its cumulative buckets.
fn durations(
    o: &mut Observation,
    key: &str,
    failed: Option<bool>,
    count: f64,
    sum_s: Option<f64>,
    buckets: Option<Vec<(f64, f64)>>,
) {
    o.duration_count.get_or_insert_default().add(key, count);
    let d_key = format!("d:{key}");
    o.total.get_or_insert_default().add(&d_key, count);
    if let Some(failed) = failed {
        let f = o.failed.get_or_insert_default();
        f.add(&d_key, if failed { count } else { 0.0 });
    }
    if let Some(s) = sum_s {
        o.duration_sum_s.get_or_insert_default().add(key, s);
    }
    for (le, c) in buckets.into_iter().flatten() {
        o.add_bucket(le, key, c);
    }
}

/// A number point's value (NaN without one).
fn number(p: &NumberDataPoint) -> f64 {
    match p.value {
        Some(number_data_point::Value::AsDouble(d)) => d,
        Some(number_data_point::Value::AsInt(i)) => i as f64,
        None => f64::NAN,
    }
}

/// Data points a metric carries.
fn points_of(m: &opentelemetry_proto::tonic::metrics::v1::Metric) -> u64 {
    (match &m.data {
        Some(metric::Data::Gauge(g)) => g.data_points.len(),
        Some(metric::Data::Sum(s)) => s.data_points.len(),
        Some(metric::Data::Histogram(h)) => h.data_points.len(),
        Some(metric::Data::ExponentialHistogram(h)) => h.data_points.len(),
        Some(metric::Data::Summary(s)) => s.data_points.len(),
        None => 0,
    }) as u64
}

/// A counter figure's value in `c` for series `key`, for tests.
#[cfg(test)]
fn series(c: &Option<crate::domain::routes::Counters>, key: &str) -> Option<f64> {
    c.as_ref()?
        .0
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::AnyValue;
    use opentelemetry_proto::tonic::metrics::v1::{
        ExponentialHistogram, Histogram, Metric, ResourceMetrics, ScopeMetrics, Sum,
        exponential_histogram_data_point::Buckets,
    };
    use opentelemetry_proto::tonic::resource::v1::Resource;

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::StringValue(v.into())),
            }),
            ..Default::default()
        }
    }

    fn kv_int(k: &str, v: i64) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(any_value::Value::IntValue(v)),
            }),
            ..Default::default()
        }
    }

    fn request(service: &str, metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![
                        kv("service.name", service),
                        kv("service.instance.id", "i-1"),
                    ],
                    ..Default::default()
                }),
                scope_metrics: vec![ScopeMetrics {
                    metrics,
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    fn histogram(
        name: &str,
        unit: &str,
        temporality: AggregationTemporality,
        points: Vec<HistogramDataPoint>,
    ) -> Metric {
        Metric {
            name: name.into(),
            unit: unit.into(),
            data: Some(metric::Data::Histogram(Histogram {
                data_points: points,
                aggregation_temporality: temporality as i32,
            })),
            ..Default::default()
        }
    }

    fn point(
        attrs: Vec<KeyValue>,
        counts: Vec<u64>,
        bounds: Vec<f64>,
        sum: f64,
    ) -> HistogramDataPoint {
        HistogramDataPoint {
            attributes: attrs,
            start_time_unix_nano: 1_000_000_000_000,
            time_unix_nano: 1_000_010_000_000,
            count: counts.iter().sum(),
            sum: Some(sum),
            bucket_counts: counts,
            explicit_bounds: bounds,
            max: Some(0.9),
            ..Default::default()
        }
    }

    const LIMITS: PushLimits = PushLimits {
        max_routes: 100,
        max_series_per_route: 100,
        max_name_chars: 512,
    };

    #[test]
    fn current_http_conventions_make_routes_with_failures_and_buckets() {
        let attrs = |method: &str, route: &str, status: i64| {
            vec![
                kv("http.request.method", method),
                kv("http.route", route),
                kv_int("http.response.status_code", status),
            ]
        };
        let mut broken = vec![kv("http.request.method", "GET"), kv("http.route", "/a")];
        broken.push(kv("error.type", "java.net.SocketTimeoutException"));
        let req = request(
            "shop",
            vec![
                histogram(
                    "http.server.request.duration",
                    "s",
                    AggregationTemporality::Cumulative,
                    vec![
                        point(attrs("GET", "/a", 200), vec![2, 3, 1], vec![0.1, 0.5], 1.5),
                        point(attrs("GET", "/a", 503), vec![0, 0, 4], vec![0.1, 0.5], 4.0),
                        point(broken, vec![1, 0, 0], vec![0.1, 0.5], 0.05),
                        point(
                            attrs("POST", "/b", 201),
                            vec![1, 0, 0],
                            vec![0.1, 0.5],
                            0.02,
                        ),
                    ],
                ),
                Metric {
                    name: "jvm.thread.count".into(),
                    data: Some(metric::Data::Sum(Sum {
                        data_points: vec![NumberDataPoint::default(); 3],
                        ..Default::default()
                    })),
                    ..Default::default()
                },
            ],
        );
        let m = map(&req, LIMITS);
        assert_eq!(m.rejected, 0);
        assert_eq!(m.services.len(), 1);
        let s = &m.services[0];
        assert_eq!(
            (s.service.as_str(), s.instance.as_deref()),
            ("shop", Some("i-1"))
        );
        assert_eq!(s.points, 7);
        assert_eq!(
            s.unmapped,
            BTreeMap::from([("jvm.thread.count".to_string(), 3)])
        );
        let names: Vec<&str> = s.routes.iter().map(|r| r.obs.route.as_str()).collect();
        assert_eq!(names, ["GET /a", "POST /b"]);
        let a = &s.routes[0];
        assert!(!a.delta);
        assert_eq!(a.obs.source, Source::Otlp);
        assert_eq!(a.start_ms, Some(1_000_000));
        assert_eq!(a.at_ms, 1_000_010);
        assert_eq!(a.obs.total.as_ref().unwrap().sum(), 11.0);
        // the 503s and the request that ended in an exception failed; the 200s did not
        assert_eq!(a.obs.failed.as_ref().unwrap().sum(), 5.0);
        assert!((a.obs.duration_sum_s.as_ref().unwrap().sum() - 5.55).abs() < 1e-12);
        let cum: Vec<(f64, f64)> = a.obs.buckets.iter().map(|(le, c)| (*le, c.sum())).collect();
        assert_eq!(cum, [(0.1, 3.0), (0.5, 6.0), (f64::INFINITY, 11.0)]);
        assert_eq!(a.max_s, Some(0.9));
        assert_eq!(
            series(&a.obs.duration_count, "http.response.status_code=503"),
            Some(4.0)
        );
    }

    #[test]
    fn older_conventions_in_ms_and_micrometer_names_are_read_in_seconds() {
        let old = histogram(
            "http.server.duration",
            "ms",
            AggregationTemporality::Delta,
            vec![point(
                vec![
                    kv("http.method", "GET"),
                    kv("http.target", "/x"),
                    kv_int("http.status_code", 500),
                ],
                vec![1, 1],
                vec![250.0],
                300.0,
            )],
        );
        let micrometer = histogram(
            "http.server.requests",
            "ms",
            AggregationTemporality::Cumulative,
            vec![point(
                vec![
                    kv("method", "PUT"),
                    kv("uri", "/y"),
                    kv("outcome", "SERVER_ERROR"),
                ],
                vec![2],
                vec![],
                10.0,
            )],
        );
        let m = map(&request("svc", vec![old, micrometer]), LIMITS);
        let r = &m.services[0].routes;
        assert_eq!(r[0].obs.route, "GET /x");
        assert!(r[0].delta);
        assert!((r[0].obs.duration_sum_s.as_ref().unwrap().sum() - 0.3).abs() < 1e-12);
        let cum: Vec<(f64, f64)> = r[0]
            .obs
            .buckets
            .iter()
            .map(|(le, c)| (*le, c.sum()))
            .collect();
        assert_eq!(cum, [(0.25, 1.0), (f64::INFINITY, 2.0)]);
        assert_eq!(r[0].obs.failed.as_ref().unwrap().sum(), 2.0);
        assert!((r[0].max_s.unwrap() - 0.0009).abs() < 1e-15);
        assert_eq!(r[1].obs.route, "PUT /y");
        assert_eq!(r[1].obs.failed.as_ref().unwrap().sum(), 2.0);
        assert!((r[1].obs.duration_sum_s.as_ref().unwrap().sum() - 0.01).abs() < 1e-12);
    }

    #[test]
    fn camel_counters_give_exchanges_and_failures_beside_the_policy_timer() {
        let route = || vec![kv("routeId", "orders"), kv("camelContext", "shop-ctx")];
        let counter = |name: &str, v: i64| Metric {
            name: name.into(),
            data: Some(metric::Data::Sum(Sum {
                data_points: vec![NumberDataPoint {
                    attributes: route(),
                    value: Some(number_data_point::Value::AsInt(v)),
                    time_unix_nano: 5_000_000,
                    ..Default::default()
                }],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            })),
            ..Default::default()
        };
        let timer = histogram(
            "camel.route.policy",
            "s",
            AggregationTemporality::Cumulative,
            vec![point(route(), vec![7], vec![], 1.4)],
        );
        let m = map(
            &request(
                "camel",
                vec![
                    timer,
                    counter("camel.exchanges.total", 9),
                    counter("camel.exchanges.failed", 2),
                ],
            ),
            LIMITS,
        );
        let r = &m.services[0].routes;
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].obs.route, "orders");
        assert_eq!(r[0].obs.labels["camel_context"], "shop-ctx");
        // the counters, not the timer's count, are the exchanges and failures
        assert_eq!(r[0].obs.total.as_ref().unwrap().sum(), 9.0);
        assert_eq!(r[0].obs.failed.as_ref().unwrap().sum(), 2.0);
        assert_eq!(r[0].obs.duration_count.as_ref().unwrap().sum(), 7.0);
    }

    #[test]
    fn exponential_buckets_keep_their_bounds_across_scales() {
        let exp = |scale: i32, offset: i32, counts: Vec<u64>| ExponentialHistogramDataPoint {
            time_unix_nano: 1_000_010_000_000,
            count: counts.iter().sum::<u64>() + 1,
            zero_count: 1,
            scale,
            positive: Some(Buckets {
                offset,
                bucket_counts: counts,
            }),
            ..Default::default()
        };
        let metric = |p: ExponentialHistogramDataPoint| Metric {
            name: "http.server.request.duration".into(),
            unit: "s".into(),
            data: Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
                data_points: vec![p],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
            })),
            ..Default::default()
        };
        // scale 5, indices 32..35 (values in (2, ~2.17]) → scale 3 index 8 (bound 2^(9/8))
        let fine = map(
            &request("s", vec![metric(exp(5, 32, vec![1, 2, 3, 4]))]),
            LIMITS,
        );
        let b: Vec<(f64, f64)> = fine.services[0].routes[0]
            .obs
            .buckets
            .iter()
            .map(|(le, c)| (*le, c.sum()))
            .collect();
        assert_eq!(b[0], (0.0, 1.0), "the zero bucket");
        assert_eq!(b[1], (2.0, 1.0), "the first bucket's lower edge");
        assert_eq!(b[2], ((9.0f64 / 8.0).exp2(), 11.0));
        assert_eq!(b[3], (f64::INFINITY, 11.0));
        // the same values sent at scale 3 land on the same bounds
        let coarse = map(&request("s", vec![metric(exp(3, 8, vec![10]))]), LIMITS);
        let c: Vec<(f64, f64)> = coarse.services[0].routes[0]
            .obs
            .buckets
            .iter()
            .map(|(le, c)| (*le, c.sum()))
            .collect();
        assert_eq!(b, c);
    }

    #[test]
    fn routes_and_series_past_the_limits_are_refused_and_counted() {
        let points = (0..50)
            .map(|i| {
                point(
                    vec![kv("http.route", &format!("/r{i}")), kv_int("n", i)],
                    vec![1],
                    vec![],
                    0.1,
                )
            })
            .chain((0..30).map(|i| {
                point(
                    vec![kv("http.route", "/r0"), kv_int("n", 100 + i)],
                    vec![1],
                    vec![],
                    0.1,
                )
            }))
            .collect();
        let m = map(
            &request(
                "s",
                vec![histogram(
                    "http.server.request.duration",
                    "s",
                    AggregationTemporality::Delta,
                    points,
                )],
            ),
            PushLimits {
                max_routes: 10,
                max_series_per_route: 5,
                max_name_chars: 512,
            },
        );
        assert_eq!(m.services[0].routes.len(), 10);
        assert_eq!(
            m.services[0].routes[0]
                .obs
                .duration_count
                .as_ref()
                .unwrap()
                .0
                .len(),
            5
        );
        // 40 routes past the limit, 26 series of /r0 past its 5
        assert_eq!(m.rejected, 40 + 26);
        assert!(m.reason.unwrap().contains("10 routes per service"));
    }

    #[test]
    fn k6_failures_are_read_in_both_of_its_rate_shapes() {
        use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
        let counter = |name: &str, attrs: Vec<KeyValue>, v: i64| Metric {
            name: name.into(),
            data: Some(metric::Data::Sum(Sum {
                data_points: vec![NumberDataPoint {
                    attributes: attrs,
                    time_unix_nano: 1_000_010_000_000,
                    value: Some(number_data_point::Value::AsInt(v)),
                    ..Default::default()
                }],
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            })),
            ..Default::default()
        };
        let failed_of = |metrics: Vec<Metric>| {
            let mut req = request("k6", metrics);
            req.resource_metrics[0].scope_metrics[0].scope = Some(InstrumentationScope {
                name: "k6".into(),
                ..Default::default()
            });
            let m = map(&req, LIMITS);
            m.services[0].k6.as_ref().unwrap().labels["/a"].failed
        };
        // before k6 1.4
        let old = failed_of(vec![counter(
            "http_req_failed.occurred",
            vec![kv("name", "/a")],
            7,
        )]);
        assert_eq!(old, 7.0);
        // since: one counter, the nonzero condition is the failed
        let new = failed_of(vec![
            counter(
                "http_req_failed",
                vec![kv("name", "/a"), kv("condition", "nonzero")],
                5,
            ),
            counter(
                "http_req_failed",
                vec![kv("name", "/a"), kv("condition", "zero")],
                95,
            ),
        ]);
        assert_eq!(new, 5.0);
    }

    #[test]
    fn long_service_and_route_names_are_cut() {
        let long = "x".repeat(2_000);
        let req = request(
            &long,
            vec![histogram(
                "http.server.request.duration",
                "s",
                AggregationTemporality::Delta,
                vec![point(vec![kv("http.route", &long)], vec![1], vec![], 0.1)],
            )],
        );
        let m = map(&req, LIMITS);
        let s = &m.services[0];
        assert_eq!(s.service.chars().count(), 512);
        assert!(s.service.ends_with('…'));
        assert_eq!(s.routes[0].obs.route.chars().count(), 512);
        assert_eq!(s.routes[0].obs.service, s.service);
    }

    #[test]
    fn content_types_and_bodies() {
        assert_eq!(
            Encoding::from_content_type("application/x-protobuf"),
            Some(Encoding::Protobuf)
        );
        assert_eq!(
            Encoding::from_content_type("application/json; charset=utf-8"),
            Some(Encoding::Json)
        );
        assert_eq!(Encoding::from_content_type("text/plain"), None);
        let req = request("s", vec![]);
        let bytes = prost::Message::encode_to_vec(&req);
        assert_eq!(decode(&bytes, Encoding::Protobuf).unwrap().request, req);
        let err = decode(&bytes[..bytes.len() - 3], Encoding::Protobuf).unwrap_err();
        assert!(err.contains("protobuf"), "{err}");
        let json = r#"{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"j"}}]},"scopeMetrics":[{"metrics":[{"name":"http.server.request.duration","unit":"s","histogram":{"aggregationTemporality":1,"dataPoints":[{"attributes":[{"key":"http.route","value":{"stringValue":"/j"}}],"startTimeUnixNano":"1000000000","timeUnixNano":"2000000000","count":"3","sum":0.3,"bucketCounts":["1","2"],"explicitBounds":[0.1]}]}}]}]}]}"#;
        let m = map(
            &decode(json.as_bytes(), Encoding::Json).unwrap().request,
            LIMITS,
        );
        let r = &m.services[0].routes[0];
        assert_eq!((r.obs.route.as_str(), r.delta), ("/j", true));
        assert_eq!(r.obs.total.as_ref().unwrap().sum(), 3.0);
        assert!(decode(b"{\"resourceMetrics\": 5}", Encoding::Json).is_err());
        // An exponential point as the JavaScript SDK writes it: no flags, no zero threshold.
        let exp = r#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"http.server.request.duration","unit":"s","exponentialHistogram":{"aggregationTemporality":1,"dataPoints":[{"attributes":[],"count":3,"sum":0.3,"scale":5,"zeroCount":0,"positive":{"offset":-100,"bucketCounts":[1,2]},"negative":{"offset":0,"bucketCounts":[]},"startTimeUnixNano":"1000000000","timeUnixNano":"2000000000","exemplars":[{"asDouble":0.1}]}]}}]}]}]}"#;
        let m = map(
            &decode(exp.as_bytes(), Encoding::Json).unwrap().request,
            LIMITS,
        );
        assert_eq!(
            m.services[0].routes[0]
                .obs
                .duration_count
                .as_ref()
                .unwrap()
                .sum(),
            3.0
        );
    }

    #[test]
    fn points_with_impossible_values_are_refused_with_the_reason_and_the_rest_taken() {
        let route = |r: &str| vec![kv("http.request.method", "GET"), kv("http.route", r)];
        let good = point(route("/good"), vec![1, 2], vec![0.1], 0.2);
        let with = |f: &dyn Fn(&mut HistogramDataPoint)| {
            let mut p = point(route("/bad"), vec![1, 2], vec![0.1], 0.2);
            f(&mut p);
            p
        };
        let bad = vec![
            with(&|p| p.sum = Some(f64::NAN)),
            with(&|p| p.sum = Some(-1.0)),
            with(&|p| p.min = Some(-0.5)),
            with(&|p| (p.min, p.max) = (Some(0.5), Some(0.1))),
            with(&|p| p.explicit_bounds = vec![0.1, 0.2]),
            with(&|p| p.explicit_bounds = vec![f64::INFINITY]),
            with(&|p| (p.explicit_bounds, p.bucket_counts) = (vec![0.2, 0.1], vec![1, 1, 1])),
            with(&|p| p.count = 10),
            with(&|p| (p.count, p.bucket_counts) = (u64::MAX, vec![u64::MAX, 0])),
            with(&|p| p.time_unix_nano = 0),
            with(&|p| p.start_time_unix_nano = p.time_unix_nano + 1),
        ];
        let n_bad = bad.len() as u64;
        let mut points = vec![good];
        points.extend(bad);
        let exp = |scale: i32, count: u64| ExponentialHistogramDataPoint {
            attributes: route("/exp"),
            start_time_unix_nano: 1_000_000_000_000,
            time_unix_nano: 1_000_010_000_000,
            count,
            sum: Some(0.3),
            scale,
            positive: Some(Buckets {
                offset: -30,
                bucket_counts: vec![1, 2],
            }),
            ..Default::default()
        };
        let counter = |v: f64| NumberDataPoint {
            attributes: vec![kv("routeId", "r")],
            start_time_unix_nano: 1_000_000_000_000,
            time_unix_nano: 1_000_010_000_000,
            value: Some(number_data_point::Value::AsDouble(v)),
            ..Default::default()
        };
        let req = request(
            "shop",
            vec![
                histogram(
                    "http.server.request.duration",
                    "s",
                    AggregationTemporality::Cumulative,
                    points,
                ),
                Metric {
                    name: "http.server.request.duration".into(),
                    unit: "s".into(),
                    data: Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
                        data_points: vec![exp(3, 3), exp(30, 3), exp(3, 4)],
                        aggregation_temporality: AggregationTemporality::Cumulative as i32,
                    })),
                    ..Default::default()
                },
                Metric {
                    name: "camel.exchanges.total".into(),
                    data: Some(metric::Data::Sum(Sum {
                        data_points: vec![counter(5.0), counter(f64::NAN), counter(-2.0)],
                        aggregation_temporality: AggregationTemporality::Cumulative as i32,
                        is_monotonic: true,
                    })),
                    ..Default::default()
                },
            ],
        );
        let m = map(&req, LIMITS);
        assert_eq!(m.rejected, n_bad + 2 + 2);
        let why = m.reason.unwrap();
        assert!(
            why.starts_with(
                "http.server.request.duration: 11 data points refused: a duration sum of NaN"
            ),
            "{why}"
        );
        let routes: Vec<(&str, f64)> = m.services[0]
            .routes
            .iter()
            .map(|r| {
                let c = r.obs.total.as_ref().map_or(0.0, |c| c.sum());
                (r.obs.route.as_str(), c)
            })
            .collect();
        assert_eq!(routes, [("GET /good", 3.0), ("GET /exp", 3.0), ("r", 5.0)]);
        // Each refusal says what was wrong.
        for (p, says) in [
            (
                with(&|p| p.explicit_bounds = vec![0.1, 0.2]),
                "2 bucket counts for 2 explicit bounds",
            ),
            (with(&|p| p.count = 10), "add up to 3 for a count of 10"),
            (with(&|p| p.start_time_unix_nano = u64::MAX), "start time"),
            (
                with(&|p| (p.count, p.bucket_counts) = (u64::MAX, vec![u64::MAX, 0])),
                "2^53",
            ),
        ] {
            let why = bad_histogram(&p).unwrap();
            assert!(why.contains(says), "{why}");
        }
        assert!(
            bad_exponential(&exp(30, 3))
                .unwrap()
                .contains("scale of 30")
        );
    }

    #[test]
    fn json_points_that_do_not_read_are_counted_and_the_rest_of_their_metric_read() {
        let body = |points: &str, temporality: &str| {
            format!(
                r#"{{"resourceMetrics":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"j"}}}}]}},"scopeMetrics":[{{"metrics":[{{"name":"http.server.request.duration","unit":"s","histogram":{{"aggregationTemporality":{temporality},"dataPoints":[{points}]}}}}]}}]}}]}}"#
            )
        };
        let point = |route: &str, sum: &str, count: &str| {
            format!(
                r#"{{"attributes":[{{"key":"http.route","value":{{"stringValue":"{route}"}}}}],"startTimeUnixNano":"1000000000","timeUnixNano":"2000000000","count":{count},"sum":{sum},"bucketCounts":["1","2"],"explicitBounds":[0.1]}}"#
            )
        };
        let points = [
            point("/a", "0.3", "\"3\""),
            point("/nan", "\"NaN\"", "3"),
            point("/half", "0.3", "10.5"),
            point("/b", "0.2", "3"),
        ]
        .join(",");
        let d = decode(body(&points, "2").as_bytes(), Encoding::Json).unwrap();
        assert_eq!(d.unread, 2);
        let why = d.unread_reason.clone().unwrap();
        assert!(
            why.starts_with("http.server.request.duration: 2 data points could not be read"),
            "{why}"
        );
        let m = map(&d.request, LIMITS).with_unread(&d);
        let routes: Vec<&str> = m.services[0]
            .routes
            .iter()
            .map(|r| r.obs.route.as_str())
            .collect();
        assert_eq!(routes, ["/a", "/b"]);
        assert_eq!((m.rejected, m.unread), (2, 2));
        assert!(m.services[0].unmapped.is_empty());
        // Data that does not read as a whole (a temporality by name): all its points.
        let d = decode(body(&points, "\"CUMULATIVE\"").as_bytes(), Encoding::Json).unwrap();
        assert_eq!(d.unread, 4, "{:?}", d.unread_reason);
        let m = map(&d.request, LIMITS).with_unread(&d);
        assert!(m.services[0].routes.is_empty() && m.services[0].unmapped.is_empty());
    }
}
