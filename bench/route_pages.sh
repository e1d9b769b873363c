#!/usr/bin/env bash
# Answer time of the pages people keep open while watching routes: /console/routes,
# /console (Overview) and /api/v1/routes, with N Camel routes scraped every --interval s
# (bench/route_metrics_server.py). After --warm s (the minute window full), each URL is
# fetched --requests times, one after the other, with curl (time to the last byte, gzip
# asked as browsers do); prints p50, p95 and max per URL, the load average, and the
# recent intervals harrier holds (from its own /metrics, when it says).
#
#   bench/route_pages.sh [--routes 1000] [--interval 1] [--warm 75] [--requests 100] [--idle 0]
# --idle F: that share of the routes never moves (bench/route_metrics_server.py).
# HARRIER=path/to/harrier picks the binary (default target/release/harrier).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
routes=1000 interval=1 warm=75 requests=100 idle=0
while [ $# -gt 0 ]; do
  case "$1" in
    --routes) routes="$2"; shift 2;; --interval) interval="$2"; shift 2;;
    --warm) warm="$2"; shift 2;; --requests) requests="$2"; shift 2;;
    --idle) idle="$2"; shift 2;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
mport="${METRICS_PORT:-9131}" hport="${PORT:-7185}"
work="$(mktemp -d)"
cleanup() { kill "${hpid:-}" "${mpid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
python3 "$here/route_metrics_server.py" --port "$mport" --routes "$routes" --idle "$idle" &
mpid=$!
cat > "$work/h.toml" <<TOML
listen = "127.0.0.1:$hport"
self_scrape = false

[limits]
max_routes_per_target = $(( routes > 1000 ? routes : 1000 ))

[[targets]]
name = "camel-bench"
url = "http://127.0.0.1:$mport/metrics"
kind = "prometheus"
interval_s = $interval
timeout_s = $(( interval < 5 ? interval : 5 ))
TOML
"$harrier" serve --config "$work/h.toml" --db "$work/h.db" > "$work/serve.log" 2>&1 &
hpid=$!
sleep "$warm"
base="http://127.0.0.1:$hport"
shown="$(curl -sf "$base/api/v1/routes?limit=1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("total", len(d)) if isinstance(d, dict) else len(d))' 2>/dev/null || echo '?')"
echo "$routes routes ($idle of them idle) scraped every $interval s, measured after $warm s; routes harrier lists: $shown; load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| URL | p50 ms | p95 ms | max ms | bytes (gzip) |"
echo "| --- | ---: | ---: | ---: | ---: |"
for path in /console/routes /console /api/v1/routes; do
  for _ in $(seq "$requests"); do
    curl -s -o /dev/null -H 'accept-encoding: gzip' -w '%{time_total} %{size_download} %{http_code}\n' "$base$path"
  done > "$work/times"
  python3 - "$path" "$work/times" <<'PY'
import sys
path, f = sys.argv[1], sys.argv[2]
rows = [l.split() for l in open(f)]
bad = [r for r in rows if r[2] != "200"]
t = sorted(float(r[0]) * 1000 for r in rows)
q = lambda p: t[min(len(t) - 1, int(round(p * (len(t) - 1))))]
note = f" ({len(bad)} not 200: {bad[0][2]})" if bad else ""
print(f"| `{path}` | {q(0.5):.1f} | {q(0.95):.1f} | {t[-1]:.1f} | {rows[-1][1]}{note} |")
PY
done
echo
echo "load after: $(cut -d' ' -f1 /proc/loadavg); harrier RSS: $(awk '/VmRSS/{print $2" kB"}' /proc/$hpid/status)"
grep -h '^harrier_alert_recent' <(curl -sf "$base/metrics") 2>/dev/null || true
