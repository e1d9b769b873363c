//! Presets: which exposed series make a route, and which figure each series is.
//!
//! Service identity: every route's service is the target's (its `service` label, else its
//! configured name). Series labels naming the application are kept beside it as route
//! labels ([`ROUTE_LABELS`]: `camelContext` → `camel_context`, `application`, and a series'
//! own `service` / `job` as `exported_service` / `exported_job`), part of the route's
//! identity, so two Camel contexts on one target keep their routes apart.
//!
//! - **Camel Micrometer** (camel-micrometer, Camel ≥ 3.21 / 4.x names): route = `routeId`,
//!   label `camel_context` = `camelContext`. `camel_exchanges_total` (exchanges),
//!   `camel_exchanges_failed_total` (failed), `camel_exchanges_inflight`,
//!   `camel_route_policy_seconds_{count,sum,max,bucket}` (durations). Rows with
//!   `eventType="context"` or an empty `routeId` are context totals, not routes.
//!   (`_succeeded_total` and `_failures_handled_total` are read only as a fallback total:
//!   succeeded + failed when `_total` is absent.)
//! - **Spring Boot** (Micrometer `http.server.requests`): `http_server_requests_seconds_
//!   {count,sum,max,bucket}`; route = `method uri`; failed = `status` 5xx (or
//!   `outcome="SERVER_ERROR"` without a status); label `application` when present.
//! - **HTTP** (`*_http_requests_total`, `*_request_duration_seconds_{bucket,sum,count}`):
//!   route = `method` + the first of `handler`, `route`, `path`, `uri`, `endpoint` (`*` when
//!   none); failed = `code`/`status` 5xx. Covers harrier's own
//!   `harrier_http_requests_total{method,path,status}` and
//!   `harrier_http_request_duration_seconds`. Exchanges come from the requests counter when
//!   present, else from the duration count.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::exposition::{Exposition, MetricType, Sample, parse_value};
use crate::domain::routes::{Counters, Observation, ROUTE_LABELS, Source};

/// Labels that never make a route or a series key.
const IGNORED_LABELS: &[&str] = &["le", "quantile"];

/// Labels of an HTTP series that make its route or its route labels (not its series key).
const HTTP_ROUTE_LABELS: &[&str] = &[
    "method",
    "handler",
    "route",
    "path",
    "uri",
    "endpoint",
    "service",
    "application",
    "job",
];

/// Route observations from one scrape; `service` is the target's service name (every
/// route's service; see the module docs for the labels kept beside it).
pub fn observations(doc: &Exposition, service: &str) -> Vec<Observation> {
    let mut routes = Routes::default();
    // Routes (by index) whose HTTP requests counter was seen.
    let mut http_totals: HashSet<usize> = HashSet::new();
    let mut camel_parts: HashMap<usize, Counters> = HashMap::new();
    for (family, s) in doc.samples() {
        if family.kind == MetricType::Summary && s.label("quantile").is_some() {
            continue;
        }
        if let Some(m) = s.name.strip_prefix("camel_") {
            camel(&mut routes, &mut camel_parts, service, m, s);
        } else if let Some(part) = s.name.strip_prefix("http_server_requests_seconds_") {
            spring(&mut routes, service, part, s);
        } else if s.name.ends_with("http_requests_total") {
            let (i, o) = http_route(&mut routes, s, service);
            let key = series_key(s, HTTP_ROUTE_LABELS);
            o.total.get_or_insert_default().add(&key, s.value);
            let failed = o.failed.get_or_insert_default();
            if is_5xx(s) {
                failed.add(&key, s.value);
            }
            http_totals.insert(i);
        } else if let Some(part) = duration_part(s.name) {
            let (_, o) = http_route(&mut routes, s, service);
            let key = series_key(s, HTTP_ROUTE_LABELS);
            match part {
                "bucket" => {
                    if let Some(le) = s.label("le").and_then(parse_value) {
                        o.add_bucket(le, &key, s.value);
                    }
                }
                "sum" => o.duration_sum_s.get_or_insert_default().add(&key, s.value),
                "count" => {
                    o.duration_count.get_or_insert_default().add(&key, s.value);
                    // fallback exchanges/failures, replaced below when a counter exists
                    o.total
                        .get_or_insert_default()
                        .add(&format!("d:{key}"), s.value);
                    let failed = o.failed.get_or_insert_default();
                    if is_5xx(s) {
                        failed.add(&format!("d:{key}"), s.value);
                    }
                }
                _ => {}
            }
        }
    }
    // HTTP routes with a requests counter: its series are the exchanges, not the duration
    // count's fallback entries.
    for i in http_totals {
        let o = &mut routes.list[i];
        if o.source == Source::Http {
            for c in [o.total.as_mut(), o.failed.as_mut()].into_iter().flatten() {
                c.0.retain(|(k, _)| !k.starts_with("d:"));
            }
        }
    }
    // Camel without camel_exchanges_total: succeeded + failed.
    for (i, succeeded) in camel_parts {
        let o = &mut routes.list[i];
        if o.total.is_none() {
            let mut t = succeeded;
            if let Some(f) = &o.failed {
                for (k, v) in &f.0 {
                    t.add(&format!("f:{k}"), *v);
                }
            }
            o.total = Some(t);
        }
    }
    routes.into_list()
}

/// [`observations`] per instance: series that name one (`instance` or `pod` label, see
/// [`super::process::series_instance`]) make routes of that instance, kept apart from
/// other instances' series of the same route (a restarted service under new labels starts
/// new routes instead of mixing two processes' counters); the rest are the target's own
/// (`instance: None`).
pub fn observations_by_instance(doc: &Exposition, service: &str) -> Vec<Observation> {
    use super::process::series_instance;
    if !doc
        .samples()
        .any(|(_, s)| series_instance(&s.labels).is_some())
    {
        return observations(doc, service);
    }
    let mut groups: BTreeMap<Option<String>, Exposition> = BTreeMap::new();
    for f in &doc.families {
        for s in &f.samples {
            let key = series_instance(&s.labels).map(str::to_string);
            let g = groups.entry(key).or_insert_with(|| Exposition {
                format: doc.format,
                families: Vec::new(),
            });
            match g.families.last_mut().filter(|last| last.name == f.name) {
                Some(last) => last.samples.push(s.clone()),
                None => g.families.push(super::exposition::Family {
                    name: f.name,
                    kind: f.kind,
                    help: None,
                    unit: f.unit.clone(),
                    samples: vec![s.clone()],
                }),
            }
        }
    }
    groups
        .into_iter()
        .flat_map(|(instance, d)| {
            observations(&d, service).into_iter().map(move |mut o| {
                o.instance = instance.clone();
                o
            })
        })
        .collect()
}

/// A route's identity within one scrape: service, route, source, labels.
type RouteKey = (String, String, &'static str, BTreeMap<String, String>);

/// A route's identity as one sample names it, borrowed from the document: its source, the
/// label values its route name is made of, and its [`ROUTE_LABELS`] values (empty = none).
/// Finding a sample's route by it allocates nothing; with a thousand routes a scrape holds
/// tens of thousands of samples, and building each one's owned key was most of mapping them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct RouteRef<'s> {
    source: &'static str,
    parts: [Option<&'s str>; 2],
    labels: [Option<&'s str>; ROUTE_LABELS.len()],
}

/// The routes of one scrape: each made once, found by the identity a sample names.
#[derive(Default)]
struct Routes<'s> {
    by_ref: HashMap<RouteRef<'s>, usize>,
    /// Identities that differ as samples name them but make the same route (`method`
    /// `GET` + `path` `/x`, or a `path` of `GET /x`) meet here; its order is the output's.
    by_key: BTreeMap<RouteKey, usize>,
    list: Vec<Observation>,
}

impl<'s> Routes<'s> {
    /// The route `s` names (index and entry), made on first use: `parts` are the label
    /// values its route name is made of, `route` makes that name.
    fn of(
        &mut self,
        s: &'s Sample<'_>,
        source: Source,
        parts: [Option<&'s str>; 2],
        service: &str,
        route: impl FnOnce() -> String,
    ) -> (usize, &mut Observation) {
        let id = RouteRef {
            source: source.as_str(),
            parts,
            labels: std::array::from_fn(|i| s.label(ROUTE_LABELS[i].0).filter(|v| !v.is_empty())),
        };
        let i =
            match self.by_ref.get(&id) {
                Some(&i) => i,
                None => {
                    let labels: BTreeMap<String, String> = ROUTE_LABELS
                        .iter()
                        .zip(id.labels)
                        .filter_map(|((_, name), v)| Some((name.to_string(), v?.to_string())))
                        .collect();
                    let key = (service.to_string(), route(), source.as_str(), labels);
                    let next = self.list.len();
                    let i = *self.by_key.entry(key).or_insert_with_key(
                        |(service, route, _, labels)| {
                            let mut o = Observation::new(service, route, source);
                            o.labels = labels.clone();
                            self.list.push(o);
                            next
                        },
                    );
                    self.by_ref.insert(id, i);
                    i
                }
            };
        (i, &mut self.list[i])
    }

    /// The routes in the order of their keys.
    fn into_list(self) -> Vec<Observation> {
        let mut slots: Vec<Option<Observation>> = self.list.into_iter().map(Some).collect();
        self.by_key
            .into_values()
            .filter_map(|i| slots[i].take())
            .collect()
    }
}

/// The series' labels other than the route's own, as `k=v,…` (its key within the route).
fn series_key(s: &Sample, route_labels: &[&str]) -> String {
    let mut parts: Vec<String> = s
        .labels
        .iter()
        .filter(|(k, _)| !route_labels.contains(k) && !IGNORED_LABELS.contains(k))
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    parts.sort();
    parts.join(",")
}

fn is_5xx(s: &Sample) -> bool {
    match s
        .label("status")
        .or(s.label("code"))
        .or(s.label("status_code"))
    {
        Some(code) => code.starts_with('5'),
        None => s.label("outcome") == Some("SERVER_ERROR"),
    }
}

/// `bucket`/`sum`/`count` of a `*_request_duration_seconds` family.
fn duration_part(name: &str) -> Option<&str> {
    let (base, part) = name.rsplit_once('_')?;
    (base.ends_with("request_duration_seconds") && matches!(part, "bucket" | "sum" | "count"))
        .then_some(part)
}

/// The HTTP route `s` names: `method` + the first of `handler`, `route`, `path`, `uri`,
/// `endpoint`.
fn http_route<'r, 's>(
    routes: &'r mut Routes<'s>,
    s: &'s Sample<'_>,
    service: &str,
) -> (usize, &'r mut Observation) {
    let path = ["handler", "route", "path", "uri", "endpoint"]
        .iter()
        .find_map(|l| s.label(l));
    let method = s.label("method");
    routes.of(s, Source::Http, [method, path], service, || {
        match (method, path) {
            (Some(m), Some(p)) => format!("{m} {p}"),
            (None, Some(p)) => p.to_string(),
            (Some(m), None) => format!("{m} *"),
            (None, None) => "*".to_string(),
        }
    })
}

fn spring<'s>(routes: &mut Routes<'s>, service: &str, part: &str, s: &'s Sample<'_>) {
    let Some(uri) = s.label("uri") else { return };
    let method = s.label("method");
    let (_, o) = routes.of(
        s,
        Source::Spring,
        [method, Some(uri)],
        service,
        || match method {
            Some(m) => format!("{m} {uri}"),
            None => uri.to_string(),
        },
    );
    let key = series_key(s, &["method", "uri", "application"]);
    match part {
        "count" => {
            o.duration_count.get_or_insert_default().add(&key, s.value);
            o.total.get_or_insert_default().add(&key, s.value);
            let failed = o.failed.get_or_insert_default();
            if is_5xx(s) {
                failed.add(&key, s.value);
            }
        }
        "sum" => o.duration_sum_s.get_or_insert_default().add(&key, s.value),
        "max" if s.value.is_finite() => {
            o.max_s = Some(o.max_s.map_or(s.value, |m| m.max(s.value)));
        }
        "bucket" => {
            if let Some(le) = s.label("le").and_then(parse_value) {
                o.add_bucket(le, &key, s.value);
            }
        }
        _ => {}
    }
}

fn camel<'s>(
    routes: &mut Routes<'s>,
    parts: &mut HashMap<usize, Counters>,
    service: &str,
    metric: &str,
    s: &'s Sample<'_>,
) {
    let Some(route) = s.label("routeId").filter(|r| !r.is_empty()) else {
        return;
    };
    if s.label("eventType") == Some("context") {
        return;
    }
    let key = series_key(
        s,
        &[
            "camelContext",
            "routeId",
            "serviceName",
            "kind",
            "eventType",
        ],
    );
    let (i, o) = routes.of(s, Source::Camel, [Some(route), None], service, || {
        route.to_string()
    });
    match metric {
        "exchanges_total" => o.total.get_or_insert_default().add(&key, s.value),
        "exchanges_failed_total" => o.failed.get_or_insert_default().add(&key, s.value),
        "exchanges_succeeded_total" => {
            parts.entry(i).or_default().add(&key, s.value);
        }
        "exchanges_inflight" if !s.value.is_nan() => {
            o.inflight = Some(o.inflight.unwrap_or(0.0) + s.value);
        }
        "route_policy_seconds_count" => o.duration_count.get_or_insert_default().add(&key, s.value),
        "route_policy_seconds_sum" => o.duration_sum_s.get_or_insert_default().add(&key, s.value),
        "route_policy_seconds_max" if s.value.is_finite() => {
            o.max_s = Some(o.max_s.map_or(s.value, |m| m.max(s.value)));
        }
        "route_policy_seconds_bucket" => {
            if let Some(le) = s.label("le").and_then(parse_value) {
                o.add_bucket(le, &key, s.value);
            }
        }
        // camel_exchanges_failures_handled_total, _external_redeliveries_total, … are not
        // RED figures.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::routes::{Figures, Interval};
    use crate::sources::scrape::exposition::parse;

    fn public(rel: &str) -> Option<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures/public")
            .join(rel);
        if !path.exists() {
            println!("skipping: ../shared not present");
            return None;
        }
        Some(std::fs::read_to_string(&path).expect("readable"))
    }

    fn edge(rel: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/edge-cases")
            .join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn camel_quarkus_routes() {
        let Some(text) = public("prometheus/camel-quarkus-books-api-v2.openmetrics.txt") else {
            return;
        };
        let obs = observations(&parse(&text).unwrap(), "books");
        let camel: Vec<&Observation> = obs.iter().filter(|o| o.source == Source::Camel).collect();
        let names: Vec<&str> = camel.iter().map(|o| o.route.as_str()).collect();
        assert_eq!(
            names,
            [
                "get-books-v2-route",
                "get-oas-route",
                "getBooks-v2",
                "route1"
            ]
        );
        // the target's name is the service; the Camel context is a label beside it
        for o in &camel {
            assert_eq!(o.service, "books");
            assert_eq!(o.labels["camel_context"], "books-api-v2");
        }
        let books = camel
            .iter()
            .find(|o| o.route == "get-books-v2-route")
            .unwrap();
        assert_eq!(books.total.as_ref().unwrap().sum(), 1.0);
        assert_eq!(books.failed.as_ref().unwrap().sum(), 0.0);
        assert_eq!(books.inflight, Some(0.0));
        assert_eq!(books.duration_count.as_ref().unwrap().sum(), 1.0);
        assert_eq!(books.duration_sum_s.as_ref().unwrap().sum(), 0.141573378);
        assert_eq!(books.max_s, Some(0.141573378));
        // Quarkus' HTTP server metrics use Spring's names
        let http: Vec<&str> = obs
            .iter()
            .filter(|o| o.source == Source::Spring)
            .map(|o| o.route.as_str())
            .collect();
        assert_eq!(
            http,
            [
                "GET /api/v2/books",
                "GET /api/v2/openapi.json",
                "GET NOT_FOUND"
            ]
        );
    }

    #[test]
    fn spring_boot_routes() {
        let Some(text) = public("prometheus/spring-boot-3-actuator-prometheus.txt") else {
            return;
        };
        let obs = observations(&parse(&text).unwrap(), "learn");
        assert_eq!(obs.len(), 1, "{obs:#?}");
        let o = &obs[0];
        assert_eq!(
            (o.service.as_str(), o.route.as_str()),
            ("learn", "GET /actuator")
        );
        assert_eq!(o.source, Source::Spring);
        assert_eq!(o.total.as_ref().unwrap().sum(), 1.0);
        assert_eq!(o.failed.as_ref().unwrap().sum(), 0.0);
        assert_eq!(o.duration_sum_s.as_ref().unwrap().sum(), 0.047479458);
        assert_eq!(o.max_s, Some(0.047479458));
    }

    /// Series that name one route in different ways are one route; routes come out in
    /// the order of (service, route, source, labels), whatever the order of their series.
    #[test]
    fn one_route_named_two_ways_is_one_route_and_routes_come_out_sorted() {
        let text = "\
http_requests_total{method=\"GET\",path=\"/x\",code=\"200\"} 3
http_requests_total{path=\"GET /x\",code=\"500\"} 2
http_requests_total{method=\"GET\",path=\"/a\",code=\"200\"} 1
camel_exchanges_total{camelContext=\"b\",routeId=\"r\"} 4
camel_exchanges_total{camelContext=\"a\",routeId=\"r\"} 5
camel_exchanges_total{camelContext=\"\",routeId=\"r\"} 6
";
        let obs = observations(&parse(text).unwrap(), "shop");
        let got: Vec<(&str, Option<&str>, f64, f64)> = obs
            .iter()
            .map(|o| {
                (
                    o.route.as_str(),
                    o.labels.get("camel_context").map(String::as_str),
                    o.total.as_ref().map_or(0.0, |c| c.sum()),
                    o.failed.as_ref().map_or(0.0, |c| c.sum()),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("GET /a", None, 1.0, 0.0),
                ("GET /x", None, 5.0, 2.0),
                ("r", None, 6.0, 0.0),
                ("r", Some("a"), 5.0, 0.0),
                ("r", Some("b"), 4.0, 0.0),
            ]
        );
    }

    #[test]
    fn harrier_own_metrics() {
        let text = "\
# TYPE harrier_http_requests_total counter
harrier_http_requests_total{method=\"GET\",path=\"/api/v1/runs\",status=\"200\"} 8
harrier_http_requests_total{method=\"GET\",path=\"/api/v1/runs\",status=\"500\"} 2
# TYPE harrier_http_request_duration_seconds histogram
harrier_http_request_duration_seconds_bucket{method=\"GET\",path=\"/api/v1/runs\",status=\"200\",le=\"0.01\"} 6
harrier_http_request_duration_seconds_bucket{method=\"GET\",path=\"/api/v1/runs\",status=\"200\",le=\"+Inf\"} 8
harrier_http_request_duration_seconds_sum{method=\"GET\",path=\"/api/v1/runs\",status=\"200\"} 0.08
harrier_http_request_duration_seconds_count{method=\"GET\",path=\"/api/v1/runs\",status=\"200\"} 8
harrier_http_request_duration_seconds_bucket{method=\"GET\",path=\"/api/v1/runs\",status=\"500\",le=\"0.01\"} 0
harrier_http_request_duration_seconds_bucket{method=\"GET\",path=\"/api/v1/runs\",status=\"500\",le=\"+Inf\"} 2
harrier_http_request_duration_seconds_sum{method=\"GET\",path=\"/api/v1/runs\",status=\"500\"} 0.2
harrier_http_request_duration_seconds_count{method=\"GET\",path=\"/api/v1/runs\",status=\"500\"} 2
";
        let obs = observations(&parse(text).unwrap(), "harrier");
        assert_eq!(obs.len(), 1);
        let o = &obs[0];
        assert_eq!(o.route, "GET /api/v1/runs");
        assert_eq!(o.total.as_ref().unwrap().sum(), 10.0);
        assert_eq!(o.failed.as_ref().unwrap().sum(), 2.0);
        assert_eq!(o.duration_count.as_ref().unwrap().sum(), 10.0);
        assert_eq!(o.buckets.len(), 2);
        assert_eq!(o.buckets[0].1.sum(), 6.0);
        assert_eq!(o.buckets[1].1.sum(), 10.0);
    }

    #[test]
    fn camel_context_rows_are_not_routes() {
        let text = "\
camel_exchanges_total{camelContext=\"c\",eventType=\"context\",kind=\"CamelRoute\",routeId=\"\"} 10
camel_exchanges_total{camelContext=\"c\",eventType=\"route\",kind=\"CamelRoute\",routeId=\"r1\"} 7
camel_exchanges_failed_total{camelContext=\"c\",eventType=\"route\",kind=\"CamelRoute\",routeId=\"r1\"} 1
camel_exchanges_total{camelContext=\"c\",eventType=\"context\",kind=\"CamelRoute\"} 10
";
        let obs = observations(&parse(text).unwrap(), "t");
        assert_eq!(obs.len(), 1);
        assert_eq!(obs[0].route, "r1");
        assert_eq!(obs[0].total.as_ref().unwrap().sum(), 7.0);
    }

    /// EC33: six scrapes of `http_requests_total{code}`, the service restarted between the
    /// 30 s and 45 s scrapes.
    #[test]
    fn ec33_counter_reset_across_scrapes() {
        let expected: serde_json::Value =
            serde_json::from_str(&edge("EC33/expected.json")).unwrap();
        let scrapes: serde_json::Value = serde_json::from_str(&edge("EC33/scrapes.json")).unwrap();
        let mut series: Vec<(i64, Observation)> = Vec::new();
        let mut per_code: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for s in scrapes.as_array().unwrap() {
            let text = edge(&format!("EC33/{}", s["file"].as_str().unwrap()));
            let doc = parse(&text).unwrap();
            for (_, sample) in doc.samples() {
                per_code
                    .entry(format!("code={}", sample.label("code").unwrap()))
                    .or_default()
                    .push(sample.value);
            }
            let obs = observations(&doc, "svc");
            assert_eq!(obs.len(), 1);
            assert_eq!(obs[0].route, "*");
            series.push((s["scrape_time_ms"].as_i64().unwrap(), obs[0].clone()));
        }
        let span_s = (series[5].0 - series[0].0) as f64 / 1000.0;
        let e = &expected["expected"];
        for (code, values) in &per_code {
            let (inc, resets) = crate::domain::routes::increase(values);
            assert_eq!(inc, e["increase_total"][code].as_f64().unwrap(), "{code}");
            assert_eq!(resets as i64, e["resets_detected"][code].as_i64().unwrap());
            let rate = inc / span_s;
            assert!((rate - e["rate_per_s"][code].as_f64().unwrap()).abs() < 1e-6);
        }
        let mut whole = Figures::default();
        let mut fired = Vec::new();
        for (i, w) in series.windows(2).enumerate() {
            let iv = Interval::between(&w[0].1, &w[1].1, w[1].0 - w[0].0);
            let want = &e["intervals"][i];
            assert_eq!(w[0].0, want["from_ms"].as_i64().unwrap());
            assert_eq!(w[1].0, want["to_ms"].as_i64().unwrap());
            let inc_total =
                want["increase_200"].as_f64().unwrap() + want["increase_500"].as_f64().unwrap();
            assert_eq!(iv.exchanges, Some(inc_total));
            assert_eq!(iv.failed, want["increase_500"].as_f64());
            let mut f = Figures::default();
            f.add(&iv);
            let pct = f.error_pct().unwrap();
            assert!(
                (pct - want["error_pct"].as_f64().unwrap()).abs() < 1e-6,
                "{pct}"
            );
            assert_eq!(pct > 10.0, want["alert_error_pct_gt_10"].as_bool().unwrap());
            if pct > 10.0 {
                fired.push(w[1].0);
            }
            whole.add(&iv);
        }
        let pct = whole.error_pct().unwrap();
        assert!((pct - e["error_pct_whole_range"].as_f64().unwrap()).abs() < 1e-6);
        assert!((whole.throughput_per_s().unwrap() - 254.0 / 75.0).abs() < 1e-12);
        let want_fired: Vec<i64> = e["alert_fires_for_intervals_ending_at_ms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(fired, want_fired);
        // the wrong answers: last − first
        assert_ne!(whole.exchanges, Some(39.0));
    }
}
