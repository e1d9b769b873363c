//! Camel routes and their steps read through Jolokia: one bulk request per scrape, a
//! pattern read of every `ManagedRoute` MBean and one of every `ManagedProcessor` MBean.
//!
//! Request (POST to the agent URL, <https://jolokia.org/reference/html/manual/jolokia_protocol.html>):
//! `[{"type":"read","mbean":"org.apache.camel:context=*,type=routes,name=*","attribute":[…]},
//! {"type":"read","mbean":"org.apache.camel:context=*,type=processors,name=*",…}]`.
//! Each answer's `value` is keyed by the full ObjectName
//! (`org.apache.camel:context=camel-1,name="route-id",type=routes`), then by attribute. A
//! single answer (not a list) and the error object (`{"error_type","error","status"}`) are
//! understood too; an agent without processor MBeans (an error for the second read) gives
//! routes without steps.
//!
//! Steps ([`steps`]): Camel's `ManagedProcessor` names each processor of a route (`RouteId`,
//! `ProcessorId`, `ProcessorName` — `to`, `choice`, `split`, …), where it sits (`Index`: its
//! depth-first position in the route, `Level`: its nesting depth; a `ParentId` when the
//! agent has one, else the parent is the nearest earlier step one level up) and the same
//! counters as a route (`ExchangesTotal`, `TotalProcessingTime`, …); a send step's
//! endpoint is `Destination`. A step's time includes the steps nested in it.
//!
//! Figures: exchanges = `ExchangesTotal`, failed = `ExchangesFailed`, mean = ΔTotalProcessingTime
//! / ΔExchangesCompleted (Camel times completed exchanges only), max = `MaxProcessingTime`
//! (since the statistics were reset), inflight = `ExchangesInflight`, state = `State`, last
//! exchange = the later of `LastExchangeCompletedTimestamp` and `LastExchangeFailureTimestamp`.

use serde_json::Value;

use crate::domain::routes::steps::StepObservation;
use crate::domain::routes::{Counters, Observation, Source};

/// The MBean pattern read for routes.
pub const MBEAN_PATTERN: &str = "org.apache.camel:context=*,type=routes,name=*";
/// The MBean pattern read for steps.
pub const STEP_PATTERN: &str = "org.apache.camel:context=*,type=processors,name=*";

/// The attributes read.
pub const ATTRIBUTES: &[&str] = &[
    "CamelId",
    "RouteId",
    "RouteGroup",
    "State",
    "ExchangesTotal",
    "ExchangesCompleted",
    "ExchangesFailed",
    "FailuresHandled",
    "ExchangesInflight",
    "TotalProcessingTime",
    "MaxProcessingTime",
    "LastExchangeCompletedTimestamp",
    "LastExchangeFailureTimestamp",
];

/// The step attributes read.
pub const STEP_ATTRIBUTES: &[&str] = &[
    "CamelId",
    "RouteId",
    "ProcessorId",
    "ProcessorName",
    "Index",
    "Level",
    "ParentId",
    "Destination",
    "ExchangesTotal",
    "ExchangesCompleted",
    "ExchangesFailed",
    "ExchangesInflight",
    "TotalProcessingTime",
    "MaxProcessingTime",
];

/// The JSON body of the bulk read request: routes, then steps.
pub fn request_body() -> Value {
    serde_json::json!([
        {
            "type": "read",
            "mbean": MBEAN_PATTERN,
            "attribute": ATTRIBUTES,
            "config": { "ignoreErrors": true },
        },
        {
            "type": "read",
            "mbean": STEP_PATTERN,
            "attribute": STEP_ATTRIBUTES,
            "config": { "ignoreErrors": true },
        },
    ])
}

/// Camel's counters of one MBean (a route's or a step's) as an observation named `name`.
fn camel_counters(
    attrs: &serde_json::Map<String, Value>,
    service: &str,
    name: &str,
) -> Observation {
    let num = |k: &str| attrs.get(k).and_then(Value::as_f64);
    let counter = |k: &str| {
        num(k).map(|v| {
            let mut c = Counters::default();
            c.add("", v);
            c
        })
    };
    let mut o = Observation::new(service, name, Source::Jolokia);
    o.total = counter("ExchangesTotal");
    o.failed = counter("ExchangesFailed");
    o.duration_sum_s = num("TotalProcessingTime").map(|ms| {
        let mut c = Counters::default();
        c.add("", ms / 1000.0);
        c
    });
    o.duration_count = counter("ExchangesCompleted");
    o.max_s = num("MaxProcessingTime")
        .filter(|v| *v >= 0.0)
        .map(|ms| ms / 1000.0);
    o.inflight = num("ExchangesInflight");
    o
}

/// The steps of a bulk answer's second read, and the number of attribute values read.
/// Empty when the agent has no processor MBeans or the read failed (routes are still read).
pub fn steps(answer: &Value, service: &str) -> (Vec<StepObservation>, usize) {
    let Some(read) = answer.as_array().and_then(|items| items.get(1)) else {
        return (Vec::new(), 0);
    };
    if read.get("status").and_then(Value::as_i64).unwrap_or(200) != 200 {
        return (Vec::new(), 0);
    }
    let Some(value) = read.get("value").and_then(Value::as_object) else {
        return (Vec::new(), 0);
    };
    let mut out = Vec::new();
    let mut samples = 0;
    for (object_name, attrs) in value {
        let Some(attrs) = attrs.as_object() else {
            continue;
        };
        samples += attrs.len();
        let text = |k: &str| {
            attrs
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let (Some(route), Some(step)) = (
            text("RouteId"),
            text("ProcessorId").or_else(|| key_property(object_name, "name")),
        ) else {
            continue;
        };
        let int = |k: &str| attrs.get(k).and_then(Value::as_i64);
        out.push(StepObservation {
            context: text("CamelId").or_else(|| key_property(object_name, "context")),
            route,
            kind: text("ProcessorName").unwrap_or_else(|| "processor".into()),
            parent: text("ParentId"),
            index: int("Index").unwrap_or(i64::MAX),
            level: int("Level").unwrap_or(1).max(1),
            destination: text("Destination"),
            counters: camel_counters(attrs, service, &step),
            step,
        });
    }
    (crate::domain::routes::steps::arrange(out), samples)
}

/// Route observations from a Jolokia answer, and the number of attribute values read.
/// `service` is the target's service (every route's); the Camel context (`CamelId`, else
/// the ObjectName's `context`) is the route label `camel_context` beside it.
/// An error answer (or no `value`) is an `Err` with the agent's message.
pub fn observations(answer: &Value, service: &str) -> Result<(Vec<Observation>, usize), String> {
    let answer = first_ok(answer)?;
    let Some(value) = answer.get("value").and_then(Value::as_object) else {
        return Err("Jolokia answer has no `value` object".into());
    };
    let mut out = Vec::new();
    let mut samples = 0;
    for (object_name, attrs) in value {
        let Some(attrs) = attrs.as_object() else {
            continue;
        };
        samples += attrs.len();
        let is_route = attrs.contains_key("RouteId")
            || key_property(object_name, "type").as_deref() == Some("routes");
        if !is_route {
            continue;
        }
        let context = attrs
            .get("CamelId")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| key_property(object_name, "context"))
            .filter(|c| !c.is_empty());
        let Some(route) = attrs
            .get("RouteId")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| key_property(object_name, "name"))
        else {
            continue;
        };
        let mut o = camel_counters(attrs, service, &route);
        if let Some(context) = context {
            o.labels.insert("camel_context".into(), context);
        }
        o.group = attrs
            .get("RouteGroup")
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
            .map(str::to_string);
        o.state = attrs
            .get("State")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.last_exchange_ms = [
            "LastExchangeCompletedTimestamp",
            "LastExchangeFailureTimestamp",
        ]
        .iter()
        .filter_map(|k| attrs.get(*k).and_then(timestamp_ms))
        .max();
        out.push(o);
    }
    out.sort_by(|a, b| (&a.route, &a.labels).cmp(&(&b.route, &b.labels)));
    Ok((out, samples))
}

/// A route operation: hawtio's (and Camel's `ManagedRoute`) start, stop, suspend, resume
/// and reset of the route's statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteOperation {
    Start,
    Stop,
    Suspend,
    Resume,
    /// Zeroes the route's statistics and its steps' (`reset(true)`).
    Reset,
}

impl RouteOperation {
    pub const NAMES: [&'static str; 5] = ["start", "stop", "suspend", "resume", "reset"];

    /// `start`, `stop`, `suspend`, `resume` or `reset`.
    pub fn parse(text: &str) -> Option<RouteOperation> {
        Some(match text {
            "start" => RouteOperation::Start,
            "stop" => RouteOperation::Stop,
            "suspend" => RouteOperation::Suspend,
            "resume" => RouteOperation::Resume,
            "reset" => RouteOperation::Reset,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The JMX operation with its signature and arguments. `ManagedRoute` overloads
    /// `stop` (with a timeout) and `reset` (with `includeProcessors`), and Jolokia needs the
    /// signature to pick one: the no-argument forms, and `reset(boolean)` with `true` so
    /// the steps' statistics go too.
    fn jmx(self) -> (&'static str, Vec<Value>) {
        match self {
            RouteOperation::Start => ("start()", vec![]),
            RouteOperation::Stop => ("stop()", vec![]),
            RouteOperation::Suspend => ("suspend()", vec![]),
            RouteOperation::Resume => ("resume()", vec![]),
            RouteOperation::Reset => ("reset(boolean)", vec![Value::Bool(true)]),
        }
    }
}

/// The search that lists the agent's route MBeans (their exact ObjectNames, which an
/// operation needs: Camel quotes names only when they need it).
pub fn route_search_body() -> Value {
    serde_json::json!({ "type": "search", "mbean": "org.apache.camel:type=routes,*" })
}

/// The ObjectName of route `route` of Camel context `context` (any context when `None`)
/// among a search answer's names. `Err` with the agent's error, or saying the route is
/// not there.
pub fn find_route_mbean(
    answer: &Value,
    context: Option<&str>,
    route: &str,
) -> Result<String, String> {
    let answer = first_ok(answer)?;
    let names = answer
        .get("value")
        .and_then(Value::as_array)
        .ok_or("Jolokia search answer has no list of names")?;
    let found: Vec<&str> = names
        .iter()
        .filter_map(Value::as_str)
        .filter(|n| {
            key_property(n, "name").as_deref() == Some(route)
                && context.is_none_or(|c| key_property(n, "context").as_deref() == Some(c))
        })
        .collect();
    match found.as_slice() {
        [one] => Ok(one.to_string()),
        [] => Err(format!(
            "the agent has no route {route:?}{} (was it removed or renamed?)",
            context
                .map(|c| format!(" in Camel context {c:?}"))
                .unwrap_or_default()
        )),
        _ => Err(format!(
            "the agent has {} routes {route:?} in different Camel contexts",
            found.len()
        )),
    }
}

/// A bulk request: `operation` on `mbean`, then a read of its `State`.
pub fn operation_body(mbean: &str, operation: RouteOperation) -> Value {
    let (op, args) = operation.jmx();
    serde_json::json!([
        { "type": "exec", "mbean": mbean, "operation": op, "arguments": args },
        { "type": "read", "mbean": mbean, "attribute": "State" },
    ])
}

/// The route's state after an [`operation_body`] request (`None` when the read failed or
/// gave none); `Err` with the agent's own message when the operation failed.
pub fn operation_answer(answer: &Value) -> Result<Option<String>, String> {
    let items = answer
        .as_array()
        .ok_or("Jolokia answered a bulk request with something else than a list")?;
    let exec = items.first().ok_or("empty bulk answer")?;
    first_ok(exec)?;
    Ok(items
        .get(1)
        .filter(|r| r.get("status").and_then(Value::as_i64) == Some(200))
        .and_then(|r| r.get("value"))
        .and_then(Value::as_str)
        .map(str::to_string))
}

/// One answer of Jolokia (the first of a bulk one) when its status is 200, else `Err`
/// with the agent's status and message, as it gave them.
fn first_ok(answer: &Value) -> Result<&Value, String> {
    let answer = match answer {
        Value::Array(items) => items
            .first()
            .ok_or_else(|| "empty bulk answer".to_string())?,
        other => other,
    };
    let status = answer.get("status").and_then(Value::as_i64).unwrap_or(200);
    if status != 200 {
        let message = answer
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("no error text");
        return Err(format!("Jolokia status {status}: {message}"));
    }
    Ok(answer)
}

/// A key property of an ObjectName (`name="x"` → `x`, quotes and escapes removed).
fn key_property(object_name: &str, key: &str) -> Option<String> {
    let (_, props) = object_name.split_once(':')?;
    // Values may be quoted and hold ',' inside quotes.
    let mut rest = props;
    while !rest.is_empty() {
        let (k, after) = rest.split_once('=')?;
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            let mut out = String::new();
            let mut chars = q.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            out.push(n);
                        }
                    }
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    c => out.push(c),
                }
            }
            let end = end?;
            let tail = &q[end + 1..];
            (out, tail.strip_prefix(',').unwrap_or(tail))
        } else {
            match after.split_once(',') {
                Some((v, n)) => (v.to_string(), n),
                None => (after.to_string(), ""),
            }
        };
        if k == key {
            return Some(value);
        }
        rest = next;
    }
    None
}

/// A Jolokia date: ISO 8601 text (`2021-11-13T12:16:12-06:00`) or epoch ms.
fn timestamp_ms(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) if !s.is_empty() => {
            let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
                .ok()?;
            Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(rel: &str) -> Option<Value> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/fixtures/public")
            .join(rel);
        if !path.exists() {
            println!("skipping: ../shared not present");
            return None;
        }
        Some(serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap())
    }

    #[test]
    fn camel_routes_pattern_read() {
        let Some(answer) = public("jolokia/camel-routes-read-pattern.response.json") else {
            return;
        };
        let (obs, samples) = observations(&answer, "customers").unwrap();
        assert_eq!(samples, 45);
        assert_eq!(obs.len(), 1);
        let o = &obs[0];
        assert_eq!(o.service, "customers");
        assert_eq!(o.labels["camel_context"], "camel-1");
        assert_eq!(o.route, "address-updates-to-customer-service-route");
        assert_eq!(o.total.as_ref().unwrap().sum(), 1.0);
        assert_eq!(o.failed.as_ref().unwrap().sum(), 0.0);
        assert_eq!(o.duration_sum_s.as_ref().unwrap().sum(), 10.595);
        assert_eq!(o.duration_count.as_ref().unwrap().sum(), 1.0);
        assert_eq!(o.max_s, Some(10.595));
        assert_eq!(o.inflight, Some(1.0));
        assert_eq!(o.state.as_deref(), Some("Started"));
        // 2021-11-13T12:16:12-06:00
        assert_eq!(o.last_exchange_ms, Some(1_636_827_372_000));
    }

    #[test]
    fn bulk_wildcard_answer_and_errors() {
        if let Some(answer) = public("jolokia/bulk-read-wildcard.response.json") {
            let (obs, samples) = observations(&answer, "t").unwrap();
            assert_eq!(samples, 4);
            // Catalina thread pools are not Camel routes
            assert!(obs.is_empty());
        }
        let e = observations(
            &serde_json::json!({
                "error_type": "javax.management.InstanceNotFoundException",
                "error": "no such MBean", "status": 404
            }),
            "t",
        )
        .unwrap_err();
        assert!(e.contains("404") && e.contains("no such MBean"), "{e}");
    }

    #[test]
    fn route_operations_find_their_mbean_and_read_the_agents_answer() {
        let names = serde_json::json!({"status": 200, "value": [
            "org.apache.camel:context=shop,name=\"orders\",type=routes",
            "org.apache.camel:context=shop,name=\"audit\",type=routes",
            "org.apache.camel:context=billing,name=\"audit\",type=routes",
        ]});
        assert_eq!(
            find_route_mbean(&names, Some("shop"), "orders").unwrap(),
            "org.apache.camel:context=shop,name=\"orders\",type=routes"
        );
        assert!(
            find_route_mbean(&names, None, "audit")
                .unwrap_err()
                .contains("2 routes")
        );
        assert!(
            find_route_mbean(&names, Some("shop"), "nope")
                .unwrap_err()
                .contains("no route \"nope\" in Camel context \"shop\"")
        );
        let body = operation_body("m", RouteOperation::Reset);
        assert_eq!(body[0]["operation"], "reset(boolean)");
        assert_eq!(body[0]["arguments"], serde_json::json!([true]));
        assert_eq!(body[1]["attribute"], "State");
        assert_eq!(
            operation_body("m", RouteOperation::Stop)[0]["operation"],
            "stop()"
        );
        let ok = serde_json::json!([{"status": 200, "value": null}, {"status": 200, "value": "Stopped"}]);
        assert_eq!(operation_answer(&ok).unwrap().as_deref(), Some("Stopped"));
        let refused = serde_json::json!([{"status": 500, "error": "java.lang.IllegalStateException : cannot suspend"}, {"status": 200, "value": "Started"}]);
        assert_eq!(
            operation_answer(&refused).unwrap_err(),
            "Jolokia status 500: java.lang.IllegalStateException : cannot suspend"
        );
        for n in RouteOperation::NAMES {
            assert_eq!(RouteOperation::parse(n).unwrap().as_str(), n);
        }
        assert_eq!(RouteOperation::parse("kill"), None);
    }

    #[test]
    fn object_name_properties() {
        let n = r#"org.apache.camel:context=camel-1,name="a,b=\"c\"",type=routes"#;
        assert_eq!(key_property(n, "name").as_deref(), Some("a,b=\"c\""));
        assert_eq!(key_property(n, "context").as_deref(), Some("camel-1"));
        assert_eq!(key_property(n, "type").as_deref(), Some("routes"));
    }
}
