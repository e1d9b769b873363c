#!/usr/bin/env bash
# Scrape cost with route steps on, against routes only, paired in one sitting: harrier
# scrapes a generated Jolokia agent (bench/jolokia_agent.py) of N Camel routes × S steps
# every second; `off` runs answer the processor read as an agent without step MBeans
# (routes only), `on` runs with every step. Runs alternate off/on (--pairs); each measures
# harrier's CPU time (/proc utime + stime) over --measure seconds after --warm, as % of a
# core and ms per scrape, its resident memory at the end, and the rows it stored.
#
#   HARRIER=<release binary> bench/steps_scrape.sh [--routes 200] [--steps 10] [--warm 15] [--measure 45] [--pairs 2]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
routes=200 steps=10 warm=15 measure=45 pairs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --routes) routes="$2"; shift 2;; --steps) steps="$2"; shift 2;;
    --warm) warm="$2"; shift 2;; --measure) measure="$2"; shift 2;;
    --pairs) pairs="$2"; shift 2;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
aport="${AGENT_PORT:-9131}" hport="${PORT:-7185}"
tck="$(getconf CLK_TCK)"
work="$(mktemp -d)"
cleanup() { kill "${hpid:-}" "${apid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "harrier: $harrier; $routes routes × $steps steps, 1 s scrapes, warm ${warm} s, measured ${measure} s; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %10s %14s %10s %12s %12s\n' mode "% core" "ms/scrape" "RSS MB" "route rows" "step rows"
for i in $(seq 1 "$pairs"); do
  for mode in off on; do
    rm -f "$work"/h.db*
    python3 "$here/jolokia_agent.py" --port "$aport" --routes "$routes" --steps-per-route "$steps" --steps "$mode" &
    apid=$!
    cat > "$work/h.toml" <<TOML
listen = "127.0.0.1:$hport"
self_scrape = false

[[targets]]
name = "camel-bench"
url = "http://127.0.0.1:$aport/jolokia"
kind = "jolokia"
interval_s = 1
timeout_s = 1
TOML
    "$harrier" serve --config "$work/h.toml" --db "$work/h.db" > "$work/serve.log" 2>&1 &
    hpid=$!
    sleep "$warm"
    c0=$(cpu_ticks "$hpid"); t0=$(date +%s.%N)
    sleep "$measure"
    c1=$(cpu_ticks "$hpid"); t1=$(date +%s.%N)
    rss=$(awk '/^VmRSS/{print $2/1024}' "/proc/$hpid/status")
    kill "$hpid" "$apid"; wait "$hpid" "$apid" 2>/dev/null || true
    rows=$(python3 -c "import sqlite3; c=sqlite3.connect('$work/h.db'); print(c.execute('select count(*) from route_samples').fetchone()[0], c.execute('select count(*) from step_samples').fetchone()[0])")
    awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v tck="$tck" -v m="$mode" -v rss="$rss" -v rows="$rows" 'BEGIN {
      cpu = (c1 - c0) / tck; span = t1 - t0; split(rows, r, " ");
      printf "%-5s %10.2f %14.2f %10.1f %12d %12d\n", m, cpu / span * 100, cpu / span * 1000, rss, r[1], r[2] }'
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
