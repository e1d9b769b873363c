#!/usr/bin/env bash
# Scrape cost of harrier beside a named peer, in one run: harrier and Prometheus (Debian
# `prometheus`) scrape the same generated exporter of N Camel routes every 10 s (--interval), side by
# side; after a warm-up, the CPU time each process used over the measured span is read from
# /proc (utime + stime) and given as % of one core, with the ratio harrier ÷ Prometheus, and
# each process's resident memory at the end (VmRSS, peak VmHWM), and the bytes each handed to
# write(2) per second over the span (/proc/PID/io wchar: its database, WAL or TSDB).
# Prometheus stores the samples in its TSDB; harrier parses, maps to routes, stores
# intervals and rollups, and publishes live updates (what a user of each gets).
#
#   bench/route_scrape_peer.sh [--routes 1000] [--warm 60] [--measure 300] [--interval 10] [--idle 0]
# --idle F: that share of the routes never moves (bench/route_metrics_server.py).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
routes=1000 warm=60 measure=300 interval=10 idle=0
while [ $# -gt 0 ]; do
  case "$1" in
    --routes) routes="$2"; shift 2;; --warm) warm="$2"; shift 2;;
    --measure) measure="$2"; shift 2;; --interval) interval="$2"; shift 2;;
    --idle) idle="$2"; shift 2;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
timeout=$(( interval < 5 ? interval : 5 ))  # Prometheus wants it within the interval
prom="${PROMETHEUS:-/usr/bin/prometheus}"
mport="${METRICS_PORT:-9129}" hport="${PORT:-7183}" pport="${PROM_PORT:-9139}"
tck="$(getconf CLK_TCK)"
work="$(mktemp -d)"
cleanup() { kill "${hpid:-}" "${ppid_:-}" "${mpid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Bytes the process handed to write(2) and friends: its database or TSDB, WAL included.
wchar() { awk '/^wchar/{print $2}' "/proc/$1/io"; }
python3 "$here/route_metrics_server.py" --port "$mport" --routes "$routes" --idle "$idle" &
mpid=$!
cat > "$work/h.toml" <<TOML
listen = "127.0.0.1:$hport"
self_scrape = false

[[targets]]
name = "camel-bench"
url = "http://127.0.0.1:$mport/metrics"
kind = "prometheus"
interval_s = $interval
timeout_s = $timeout
TOML
cat > "$work/p.yml" <<YML
global:
  scrape_interval: ${interval}s
  scrape_timeout: ${timeout}s
scrape_configs:
  - job_name: camel-bench
    static_configs:
      - targets: ["127.0.0.1:$mport"]
YML
"$harrier" serve --config "$work/h.toml" --db "$work/h.db" > "$work/serve.log" 2>&1 &
hpid=$!
"$prom" --config.file="$work/p.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$pport" > "$work/prom.log" 2>&1 &
ppid_=$!
sleep "$warm"
load0="$(cut -d' ' -f1 /proc/loadavg)"
h0="$(cpu_ticks $hpid)"; p0="$(cpu_ticks $ppid_)"; t0="$(date +%s%N)"
hw0="$(wchar $hpid)"; pw0="$(wchar $ppid_)"
sleep "$measure"
h1="$(cpu_ticks $hpid)"; p1="$(cpu_ticks $ppid_)"; t1="$(date +%s%N)"
hw1="$(wchar $hpid)"; pw1="$(wchar $ppid_)"
load1="$(cut -d' ' -f1 /proc/loadavg)"
rss() { awk '/^VmRSS/{r=$2} /^VmHWM/{h=$2} END{printf "%.0f MB (peak %.0f MB)", r/1024, h/1024}' "/proc/$1/status"; }
hrss="$(rss $hpid)"; prss="$(rss $ppid_)"
up="$(curl -sf "http://127.0.0.1:$pport/api/v1/query?query=up" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])' || echo '?')"
hup="$(curl -sf "http://127.0.0.1:$hport/api/v1/targets" | python3 -c 'import json,sys; t=json.load(sys.stdin)[0]; print(t["up"], t["samples"])' || echo '?')"
python3 - "$h0" "$h1" "$p0" "$p1" "$t0" "$t1" "$tck" "$routes" "$warm" "$measure" "$load0" "$load1" "$up" "$hup" "$interval" "$hrss" "$prss" "$idle" "$hw0" "$hw1" "$pw0" "$pw1" <<'PY'
import sys
h0, h1, p0, p1, t0, t1, tck = map(int, sys.argv[1:8])
routes, warm, measure, l0, l1, up, hup, interval, hrss, prss, idle = sys.argv[8:19]
hw0, hw1, pw0, pw1 = map(int, sys.argv[19:23])
wall = (t1 - t0) / 1e9
h = 100 * (h1 - h0) / tck / wall
p = 100 * (p1 - p0) / tck / wall
print(f"{routes} Camel routes ({idle} of them idle) scraped every {interval} s by both; CPU over {measure} s after {warm} s; load {l0} → {l1}")
hw = (hw1 - hw0) / wall / 1e6
pw = (pw1 - pw0) / wall / 1e6
print(f"| process | CPU % of one core | RSS at the end | written MB/s |\n| --- | ---: | ---: | ---: |\n| harrier | {h:.2f} | {hrss} | {hw:.2f} |\n| Prometheus | {p:.2f} | {prss} | {pw:.2f} |")
print(f"harrier ÷ Prometheus: {h / p:.2f}×  (Prometheus up={up}; harrier up, samples = {hup})")
PY
