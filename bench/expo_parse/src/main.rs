//! Exposition parser speed: harrier's `routes::exposition::parse` vs `prometheus-parse`.
//!
//! `expo_parse [--iters N] [--samples N] [--dump FILE] [FILE…]`
//!
//! Input 1 is a generated Camel/Spring exposition (~100k sample lines, deterministic);
//! every FILE given is an extra input (read from where it is, never copied). For each input
//! and parser: the median wall time of N parses of the in-memory text, and samples/s
//! (sample lines / median seconds; both parsers are credited with the same sample-line
//! count, the one harrier's parser returns). Then a correctness check: each sample is keyed
//! by (name, labels without `le`/`quantile`, value bits); harrier's keys are the reference
//! (its parser unescapes label values per the spec) and every harrier sample with no equal
//! prometheus-parse sample is counted as dropped or mis-parsed, by cause.
//!
//! Output: tab-separated lines `RESULT\tinput\tparser\tsample_lines\tmedian_s\tsamples_per_s`
//! and `CHECK\tinput\tcategory\tharrier_samples\tpp_missing`, for bench/expo_parse.sh.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Instant;

use harrier::sources::scrape::exposition;

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Deterministic xorshift.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const LE: [&str; 11] = [
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "+Inf",
];

/// A Prometheus text 0.0.4 exposition as Micrometer writes it: Camel route metrics and
/// Spring `http_server_requests_seconds` histograms. Some label values hold `,` `=` `}` and
/// escaped quotes, as real route ids and URI templates do.
fn generate(target_samples: usize) -> String {
    let mut r = Rng(0x9e3779b97f4a7c15);
    // Camel: 18 samples per route, HTTP: 14 per handler; about half the samples each.
    let routes = target_samples / 2 / 18;
    let handlers = target_samples / 2 / 14;
    let route_ids: Vec<String> = (0..routes)
        .map(|i| match i % 25 {
            0 => format!("route-{i}, split by \"region\""), // comma + quotes
            1 => format!("direct:orders?mode=batch&n={i}"), // '='
            _ => format!("route-{i}"),
        })
        .collect();
    let ctx = |i: usize| format!("camel-{}", i % 4 + 1);
    let mut s = String::with_capacity(target_samples * 150);
    let common = |s: &mut String, i: usize, id: &str| {
        write!(
            s,
            "camelContext=\"{}\",routeId=\"{}\",serviceName=\"MicrometerRoutePolicyService\",type=\"counter\"",
            ctx(i),
            esc(id)
        )
        .unwrap();
    };
    for (fam, help) in [
        ("camel_exchanges_total", "Total number of processed exchanges"),
        ("camel_exchanges_failed_total", "Number of failed exchanges"),
        ("camel_exchanges_succeeded_total", "Number of successfully completed exchanges"),
    ] {
        let base = fam.trim_end_matches("_total");
        writeln!(s, "# HELP {fam} {help}\n# TYPE {fam} counter").unwrap();
        let _ = base;
        for (i, id) in route_ids.iter().enumerate() {
            s.push_str(fam);
            s.push('{');
            common(&mut s, i, id);
            writeln!(s, "}} {:.1}", (r.next() % 5_000_000) as f64).unwrap();
        }
    }
    s.push_str("# HELP camel_exchanges_inflight Route inflight messages\n# TYPE camel_exchanges_inflight gauge\n");
    for (i, id) in route_ids.iter().enumerate() {
        s.push_str("camel_exchanges_inflight{");
        common(&mut s, i, id);
        writeln!(s, "}} {:.1}", (r.next() % 20) as f64).unwrap();
    }
    s.push_str("# HELP camel_route_policy_seconds Route performance metrics\n# TYPE camel_route_policy_seconds histogram\n");
    for (i, id) in route_ids.iter().enumerate() {
        let mut c = 0u64;
        for le in LE {
            c += r.next() % 10_000;
            s.push_str("camel_route_policy_seconds_bucket{");
            common(&mut s, i, id);
            writeln!(s, ",le=\"{le}\"}} {c}").unwrap();
        }
        s.push_str("camel_route_policy_seconds_count{");
        common(&mut s, i, id);
        writeln!(s, "}} {c}").unwrap();
        s.push_str("camel_route_policy_seconds_sum{");
        common(&mut s, i, id);
        writeln!(s, "}} {:.6}", c as f64 * 0.05 * r.f()).unwrap();
    }
    s.push_str("# HELP camel_route_policy_seconds_max Route performance metrics\n# TYPE camel_route_policy_seconds_max gauge\n");
    for (i, id) in route_ids.iter().enumerate() {
        s.push_str("camel_route_policy_seconds_max{");
        common(&mut s, i, id);
        writeln!(s, "}} {:.6}", r.f() * 3.0).unwrap();
    }
    // HTTP handlers: method × uri × status.
    let methods = ["GET", "POST", "PUT", "DELETE"];
    let statuses = [("200", "SUCCESS"), ("201", "SUCCESS"), ("404", "CLIENT_ERROR"), ("500", "SERVER_ERROR")];
    let hl: Vec<String> = (0..handlers)
        .map(|i| {
            let uri = match i % 10 {
                0 => format!("/api/v1/orders/{{id}}/items/{i}"),     // '}' (URI template)
                1 => format!("/api/v1/search/{i}?q=a,b&sort=desc"),  // ',' and '='
                2 => format!("/api/v1/legacy/\"quoted\"/{i}"),       // escaped quotes
                _ => format!("/api/v1/resource{i}"),
            };
            let (st, oc) = statuses[i % 4];
            format!(
                "exception=\"None\",method=\"{}\",outcome=\"{oc}\",status=\"{st}\",uri=\"{}\"",
                methods[(i / 4) % 4],
                esc(&uri)
            )
        })
        .collect();
    s.push_str("# HELP http_server_requests_seconds  \n# TYPE http_server_requests_seconds histogram\n");
    for l in &hl {
        let mut c = 0u64;
        for le in LE {
            c += r.next() % 1000;
            writeln!(s, "http_server_requests_seconds_bucket{{{l},le=\"{le}\"}} {c}").unwrap();
        }
        writeln!(s, "http_server_requests_seconds_count{{{l}}} {c}").unwrap();
        writeln!(s, "http_server_requests_seconds_sum{{{l}}} {:.6}", c as f64 * 0.02 * r.f()).unwrap();
    }
    s.push_str("# HELP http_server_requests_seconds_max  \n# TYPE http_server_requests_seconds_max gauge\n");
    for l in &hl {
        writeln!(s, "http_server_requests_seconds_max{{{l}}} {:.6}", r.f()).unwrap();
    }
    s
}

type Key = (String, Vec<(String, String)>, u64);

fn vbits(v: f64) -> u64 {
    if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() }
}

fn key(name: &str, labels: impl Iterator<Item = (String, String)>, v: f64) -> Key {
    let mut l: Vec<(String, String)> = labels.filter(|(k, _)| k != "le" && k != "quantile").collect();
    l.sort();
    (name.to_string(), l, vbits(v))
}

fn pp_parse(text: &str) -> prometheus_parse::Scrape {
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("in-memory read")
}

fn pp_sample_lines(s: &prometheus_parse::Scrape) -> usize {
    use prometheus_parse::Value;
    s.samples
        .iter()
        .map(|x| match &x.value {
            Value::Histogram(h) => h.len(),
            Value::Summary(q) => q.len(),
            _ => 1,
        })
        .sum()
}

fn pp_keys(s: &prometheus_parse::Scrape) -> Vec<Key> {
    use prometheus_parse::Value;
    let mut out = Vec::new();
    for x in &s.samples {
        let labels = || x.labels.iter().map(|(k, v)| (k.clone(), v.clone()));
        match &x.value {
            Value::Histogram(h) => {
                for b in h {
                    out.push(key(&format!("{}_bucket", x.metric), labels(), b.count));
                }
            }
            Value::Summary(q) => {
                for b in q {
                    out.push(key(&x.metric, labels(), b.count));
                }
            }
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => {
                out.push(key(&x.metric, labels(), *v))
            }
        }
    }
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn category(labels: &[(String, String)]) -> &'static str {
    let vals = || labels.iter().filter(|(k, _)| k != "le" && k != "quantile").map(|(_, v)| v);
    if vals().any(|v| v.contains('}')) {
        "value has }"
    } else if vals().any(|v| v.contains('=')) {
        "value has ="
    } else if vals().any(|v| v.contains(',')) {
        "value has ,"
    } else if vals().any(|v| v.contains('"') || v.contains('\\') || v.contains('\n')) {
        "value has escaped \" \\ or \\n"
    } else {
        "plain labels"
    }
}

fn main() {
    let mut iters = 10usize;
    let mut target = 100_000usize;
    let mut dump: Option<String> = None;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--iters" => iters = args.next().unwrap().parse().unwrap(),
            "--samples" => target = args.next().unwrap().parse().unwrap(),
            "--dump" => dump = args.next(),
            _ => files.push(a),
        }
    }
    let mut inputs: Vec<(String, String)> = vec![(format!("generated (~{}k samples)", target / 1000), generate(target))];
    if let Some(d) = dump {
        std::fs::write(&d, &inputs[0].1).unwrap();
    }
    for f in files {
        let name = std::path::Path::new(&f).file_name().unwrap().to_string_lossy().into_owned();
        inputs.push((name, std::fs::read_to_string(&f).unwrap()));
    }
    for (name, text) in &inputs {
        let h = exposition::parse(text).unwrap_or_else(|e| panic!("harrier rejects {name}: {e}"));
        let n = h.sample_count();
        let pp = pp_parse(text);
        // Small inputs: repeat each timed parse so one measurement is ≥ ~20 ms.
        let reps = (2_000_000 / text.len().max(1)).max(1);
        let iters_here = iters;
        let mut th = Vec::new();
        let mut tp = Vec::new();
        for _ in 0..iters_here {
            let t = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(exposition::parse(std::hint::black_box(text)).unwrap());
            }
            th.push(t.elapsed().as_secs_f64() / reps as f64);
            let t = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(pp_parse(std::hint::black_box(text)));
            }
            tp.push(t.elapsed().as_secs_f64() / reps as f64);
        }
        let (mh, mp) = (median(&mut th), median(&mut tp));
        println!("RESULT\t{name}\tharrier\t{n}\t{mh:.6}\t{:.0}\t{}", n as f64 / mh, text.len());
        println!(
            "RESULT\t{name}\tprometheus-parse\t{n}\t{mp:.6}\t{:.0}\t{}\t{}",
            n as f64 / mp,
            text.len(),
            pp_sample_lines(&pp)
        );
        // Correctness: harrier samples with no equal prometheus-parse sample.
        let mut have: HashMap<Key, usize> = HashMap::new();
        for k in pp_keys(&pp) {
            *have.entry(k).or_default() += 1;
        }
        let mut cats: Vec<(&'static str, usize, usize)> = Vec::new();
        let mut examples: Vec<String> = Vec::new();
        for (_, smp) in h.samples() {
            let c = category(&smp.labels);
            let k = key(&smp.name, smp.labels.iter().cloned(), smp.value);
            let miss = match have.get_mut(&k) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    0
                }
                _ => 1,
            };
            if miss == 1 && examples.len() < 3 && !examples.iter().any(|e| e.starts_with(c)) {
                examples.push(format!("{c}: {} {:?}", smp.name, smp.labels));
            }
            match cats.iter_mut().find(|x| x.0 == c) {
                Some(x) => {
                    x.1 += 1;
                    x.2 += miss
                }
                None => cats.push((c, 1, miss)),
            }
        }
        cats.sort();
        for (c, total, miss) in cats {
            println!("CHECK\t{name}\t{c}\t{total}\t{miss}");
        }
        let extra: usize = have.values().sum();
        println!("EXTRA\t{name}\t{extra}");
        for e in examples {
            eprintln!("example miss in {name}: {e}");
        }
    }
}
