#!/usr/bin/env bash
# Alert evaluation of 10,000 route subjects per tick (target: under 100 ms on 2 cores).
#   bench/alerts_eval.sh [--routes 10000] [--ticks 30] [--no-peer | --peer-only] [--peer-evals 20]
# 1. harrier: builds bench/alerts_eval (release) and runs it on a fresh SQLite file in
#    bench/out/: 10,000 routes × 40 scrapes 15 s apart written through the store, the two
#    built-in rules plus four more, --ticks rounds of `evaluate_once` each timed; prints
#    every tick, the median and the p95 (nearest rank).
# 2. peer: Prometheus (Debian `prometheus`) scraping bench/alerts_exporter.py (the same
#    10,000 routes as two counters each) every 5 s, with one rule group holding the
#    equivalent error-rate rules (5 % warning, 10 % critical, for 2m, over 5m windows),
#    evaluated every 5 s; after a 60 s warm-up it reads
#    prometheus_rule_group_last_duration_seconds once per evaluation, --peer-evals times,
#    and prints the median and p95.
# The machine's load average is printed with each part: figures on a busy machine are
# not those of a quiet one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
routes=10000 ticks=30 peer=1 peer_evals=20 own=1
while [ $# -gt 0 ]; do
  case "$1" in
    --routes) routes="$2"; shift 2;; --ticks) ticks="$2"; shift 2;;
    --no-peer) peer=0; shift;; --peer-only) own=0; shift;; --peer-evals) peer_evals="$2"; shift 2;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/out/target}"
mkdir -p "$here/out"
if [ "$own" = 1 ]; then
  (cd "$here/alerts_eval" && cargo build --release -q)
  db="$here/out/alerts-$routes.db"
  rm -f "$db" "$db-wal" "$db-shm"
  echo "## harrier evaluate_once, $routes routes (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$CARGO_TARGET_DIR/release/alerts_eval" "$db" --routes "$routes" --ticks "$ticks"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "## the same with a p95 rule on every route"
  "$CARGO_TARGET_DIR/release/alerts_eval" "$db" --routes "$routes" --ticks 20 --p95
fi

[ "$peer" = 1 ] || exit 0
command -v prometheus >/dev/null || { echo "prometheus not installed (scripts/test.sh installs it)"; exit 1; }
work="$(mktemp -d)"
trap 'kill "${epid:-}" "${ppid_:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
eport="$(free_port)" pport="$(free_port)"
python3 "$here/alerts_exporter.py" --port "$eport" --routes "$routes" &
epid=$!
cat > "$work/rules.yml" <<YAML
groups:
  - name: route-errors
    interval: 5s
    rules:
      - alert: RouteErrorRateWarning
        expr: 100 * rate(route_failed_exchanges_total[5m]) / rate(route_exchanges_total[5m]) > 5 and increase(route_exchanges_total[5m]) >= 20
        for: 2m
        labels: {severity: warning}
      - alert: RouteErrorRateCritical
        expr: 100 * rate(route_failed_exchanges_total[5m]) / rate(route_exchanges_total[5m]) > 10 and increase(route_exchanges_total[5m]) >= 20
        for: 2m
        labels: {severity: critical}
YAML
cat > "$work/prometheus.yml" <<YAML
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: ["$work/rules.yml"]
scrape_configs:
  - job_name: routes
    static_configs: [{targets: ["127.0.0.1:$eport"]}]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$pport" --log.level=warn > "$work/prom.log" 2>&1 &
ppid_=$!
echo "## Prometheus $(prometheus --version 2>&1 | head -1 | cut -d' ' -f3) rule group, $routes series pairs (warm-up 60 s)"
sleep 60
: > "$work/d.txt"
for _ in $(seq "$peer_evals"); do
  curl -sf "http://127.0.0.1:$pport/metrics" \
    | awk '/^prometheus_rule_group_last_duration_seconds\{/ { print $2 * 1000 }' >> "$work/d.txt"
  sleep 5
done
echo "series scraped: $(curl -sf "http://127.0.0.1:$pport/api/v1/query?query=scrape_samples_scraped" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')"
echo "alerts: $(curl -sf "http://127.0.0.1:$pport/api/v1/alerts" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]["alerts"]))')"
python3 - "$work/d.txt" <<'PY'
import math, sys
v = sorted(float(x) for x in open(sys.argv[1]) if x.strip())
rank = lambda p: v[max(1, math.ceil(p * len(v))) - 1]
print("\n".join(f"GROUP_MS {x:.2f}" for x in v))
print(f"MEDIAN_MS {rank(0.5):.2f}\nP95_MS {rank(0.95):.2f}\n(samples: {len(v)}, one per evaluation read; consecutive reads may repeat an evaluation)")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
