#!/usr/bin/env bash
# Route chart query over long ranges: GET /api/v1/routes/{id}/timeseries for 30 d, 29 d, 7 d,
# 3 d, 24 h, 6 h and 1 h ending now, REQS timed requests each (curl time_total, after 1 warm-up
# request), RUNS runs; prints a Markdown table (per range: median over runs of each run's
# median and p95, nearest rank).
#   bench/route_query.sh [--runs 3] [--reqs 20] [--db FILE] [--days 30] [--no-build]
# Without --db it builds bench/route_fill and writes bench/out/route-30d.db: one Camel route,
# 10 s scrapes for --days days through Store::record_scrape (raw + 1 min + 1 h rollups),
# pruned with the default retention (raw 48 h) as `harrier serve` would.
# HARRIER=path/to/harrier (default target/release/harrier), PORT (default 7172).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
runs=3 reqs=20 db="" days=30 build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2;; --reqs) reqs="$2"; shift 2;; --db) db="$2"; shift 2;;
    --days) days="$2"; shift 2;; --no-build) build=0; shift;; *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
port="${PORT:-7172}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/out/target}"
mkdir -p "$here/out"
if [ -z "$db" ]; then
  db="$here/out/route-${days}d.db"
  if [ ! -f "$db" ]; then
    [ "$build" = 1 ] && (cd "$here/route_fill" && cargo build --release -q)
    echo "filling $db ($days days of 10 s scrapes, one route)…" >&2
    "$CARGO_TARGET_DIR/release/route_fill" "$db" --days "$days" >&2
  fi
fi
work="$(mktemp -d)"; trap 'kill "${hpid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
cat > "$work/q.toml" <<TOML
listen = "127.0.0.1:$port"
self_scrape = false
TOML
"$harrier" serve --config "$work/q.toml" --db "$db" > "$work/serve.log" 2>&1 &
hpid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
id="$(curl -sf "http://127.0.0.1:$port/api/v1/routes?window=1m" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')"
echo "route id $id; load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
: > "$work/times.tsv"
for run in $(seq "$runs"); do
  for range in 30d:2592000000 29d:2505600000 12d:1036800000 7d:604800000 3d:259200000 2d:172800000 24h:86400000 6h:21600000 1h:3600000; do
    name="${range%%:*}" ms="${range##*:}"
    now=$(( $(date +%s%3N) ))
    url="http://127.0.0.1:$port/api/v1/routes/$id/timeseries?from=$((now - ms))&to=$now"
    curl -sf "$url" > "$work/body.json"
    meta="$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=sum(v is not None for v in d["throughput_per_s"]); print(d["resolution"], d["step_ms"], len(d["t_ms"]), n)' "$work/body.json") $(stat -c %s "$work/body.json")"
    for _ in $(seq "$reqs"); do
      t="$(curl -sf -o /dev/null -w '%{time_total}' "$url")"
      printf '%s\t%s\t%s\t%s\n' "$run" "$name" "$t" "$meta" >> "$work/times.tsv"
    done
  done
  echo "run $run done, load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
python3 - "$work/times.tsv" "$runs" "$reqs" <<'PY'
import sys, math, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
by, meta, order = {}, {}, []
for run, name, t, m in rows:
    if name not in order: order.append(name)
    by.setdefault((name, run), []).append(float(t) * 1000)
    meta[name] = m.split()
def nr(v, p):
    v = sorted(v); return v[max(0, math.ceil(p / 100 * len(v)) - 1)]
print(f"{sys.argv[3]} requests per range per run, {sys.argv[2]} runs; median over runs of each run's median / p95 (nearest rank).\n")
print("| range | resolution read | step | points (non-null) | body KB | median ms | p95 ms | per-run medians ms |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
for name in order:
    runs = sorted({r for (n, r) in by if n == name})
    meds = [st.median(by[(name, r)]) for r in runs]
    p95s = [nr(by[(name, r)], 95) for r in runs]
    res, step, pts, nn, size = meta[name]
    print(f"| {name} | {res} | {int(step)/1000:g} s | {pts} ({nn}) | {int(size)/1024:.0f} | {st.median(meds):.1f} | {st.median(p95s):.1f} | {', '.join(f'{m:.1f}' for m in meds)} |")
PY
