#!/usr/bin/env bash
# Cost of scraping 1,000 Camel routes every 10 s: bench/route_metrics_server.py exposes
# ROUTES routes (counters, inflight gauge, 10-bucket histogram + _max; every request advances
# every counter); `harrier serve` scrapes it (one [[targets]] entry, interval_s = 10,
# self_scrape = false, a fresh database). After WARM s it reads harrier's utime+stime from
# /proc/PID/stat, again MEASURE s later → CPU % of one core; peak RSS = VmHWM at the end;
# scrape duration = last_duration_ms from GET /api/v1/targets, polled every 5 s during the
# window (each distinct scrape once); routes = GET /api/v1/routes?window=1m.
#   bench/route_scrape.sh [--runs 3] [--routes 1000] [--warm 30] [--measure 120]
# HARRIER=path/to/harrier (default target/release/harrier); ports 9119 (metrics), 7173.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
runs=3 routes=1000 warm=30 measure=120
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2;; --routes) routes="$2"; shift 2;; --warm) warm="$2"; shift 2;;
    --measure) measure="$2"; shift 2;; *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
mport="${METRICS_PORT:-9119}" hport="${PORT:-7173}"
tck="$(getconf CLK_TCK)"
work="$(mktemp -d)"
cleanup() { kill "${hpid:-}" "${mpid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
: > "$work/results.tsv"
for run in $(seq "$runs"); do
  python3 "$here/route_metrics_server.py" --port "$mport" --routes "$routes" &
  mpid=$!
  cat > "$work/h.toml" <<TOML
listen = "127.0.0.1:$hport"
self_scrape = false

[[targets]]
name = "camel-bench"
url = "http://127.0.0.1:$mport/metrics"
kind = "prometheus"
interval_s = 10
timeout_s = 5
labels = { service = "camel-bench" }
TOML
  rm -f "$work"/h.db*
  "$harrier" serve --config "$work/h.toml" --db "$work/h.db" > "$work/serve.log" 2>&1 &
  hpid=$!
  sleep "$warm"
  load0="$(cut -d' ' -f1 /proc/loadavg)"
  c0="$(cpu_ticks $hpid)"; t0="$(date +%s%N)"
  : > "$work/durs"
  end=$(( $(date +%s) + measure ))
  while [ "$(date +%s)" -lt "$end" ]; do
    curl -sf "http://127.0.0.1:$hport/api/v1/targets" \
      | python3 -c 'import json,sys; t=json.load(sys.stdin)[0]; print(t["last_scrape_ms"], t["last_duration_ms"], t["samples"], t["up"])' >> "$work/durs" || true
    sleep 5
  done
  c1="$(cpu_ticks $hpid)"; t1="$(date +%s%N)"
  load1="$(cut -d' ' -f1 /proc/loadavg)"
  hwm="$(awk '/VmHWM/ {print $2}' /proc/$hpid/status)"
  rt0="$(date +%s%N)"
  curl -sf "http://127.0.0.1:$hport/api/v1/routes?window=1m" > "$work/routes.json"
  rt1="$(date +%s%N)"
  nroutes="$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(len(r), sum(x["throughput_per_s"] is not None and x["p95_ms"] is not None for x in r))' "$work/routes.json")"
  durs="$(sort -u "$work/durs" | awk '$4=="True"{printf "%s,", $2}')"
  samples="$(sort -u "$work/durs" | awk '{s=$3} END {print s}')"
  python3 - "$run" "$c0" "$c1" "$t0" "$t1" "$tck" "$hwm" "$durs" "$samples" "$nroutes" "$load0" "$load1" "$(( (rt1 - rt0) / 1000000 ))" >> "$work/results.tsv" <<'PY'
import sys, statistics as st
run, c0, c1, t0, t1, tck, hwm, durs, samples, nroutes, l0, l1, rms = sys.argv[1:]
cpu_s = (int(c1) - int(c0)) / int(tck); wall = (int(t1) - int(t0)) / 1e9
d = [float(x) for x in durs.split(",") if x]
n, active = nroutes.split()
print("\t".join(map(str, [run, f"{100*cpu_s/wall:.2f}", f"{cpu_s:.2f}", f"{wall:.1f}", f"{int(hwm)/1024:.1f}",
      f"{st.median(d):.1f}" if d else "-", f"{max(d):.1f}" if d else "-", len(d), samples, n, active, l0, l1, rms])))
PY
  echo "run $run: $(tail -1 "$work/results.tsv")" >&2
  kill "$hpid" "$mpid"; wait "$hpid" "$mpid" 2>/dev/null || true
  grep -iE "warn|error" "$work/serve.log" | head -3 >&2 || true
done
python3 - "$work/results.tsv" "$routes" "$measure" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print(f"{sys.argv[2]} Camel routes, scraped every 10 s; CPU over {sys.argv[3]} s after the warm-up.\n")
print("| run | CPU % of one core | CPU s | peak RSS MiB (VmHWM) | scrape ms median | scrape ms max | scrapes seen | samples/scrape | routes listed | routes with figures | GET /routes ms | load avg start → end |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[4]} | {r[5]} | {r[6]} | {r[7]} | {r[8]} | {r[9]} | {r[10]} | {r[13]} | {r[11]} → {r[12]} |")
med = lambda i: st.median(float(r[i]) for r in rows)
print(f"| **median** | **{med(1):.2f}** | {med(2):.2f} | {med(4):.1f} | {med(5):.1f} | {med(6):.1f} | | | | | {med(13):.0f} | |")
PY
