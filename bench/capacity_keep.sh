#!/usr/bin/env bash
# What keeping an ended run's capacity (table run_capacities) saves: the same requests
# timed with the kept capacities deleted just before (computed from every per-second
# bucket, as before) and right after (read back), in one sitting, on SQLite and on a
# throwaway PostgreSQL (bench/pg_throwaway.sh). Optionally a run of --big-rows samples
# generated on the fly into PostgreSQL, compared with a 5 M-sample run: computed, kept,
# and kept in a fresh server process (cold).
#
#   bench/capacity_keep.sh [--big-rows 100000000] [--rounds 7]
#
# Inputs (generated into bench/out/capacity, kept): ten 1 M-sample runs over 600 s
# (gen_compare.py seeds 1–10) and two 5 M-sample JTLs (gen_jtl.py seeds 1–2). Prints the
# median of --rounds rounds per request. 127.0.0.1 only.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
big_rows=0 rounds=7
while [ $# -gt 0 ]; do
  case "$1" in
    --big-rows) big_rows="$2"; shift 2;; --rounds) rounds="$2"; shift 2;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
[ -x "$harrier" ] || (cd "$root" && cargo build --release --locked)
data="$here/out/capacity"; mkdir -p "$data"
for n in 1 2 3 4 5 6 7 8 9 10; do
  [ -s "$data/c$n.jtl" ] || python3 "$here/gen_compare.py" "$data/c$n.jtl" --samples 1000000 --seconds 600 --seed "$n" >/dev/null
done
for n in 1 2; do
  [ -s "$data/big$n.jtl" ] || python3 "$here/gen_jtl.py" "$data/big$n.jtl" --rows 5000000 --seed "$n" >/dev/null
done
source "$here/pg_throwaway.sh"
work="$(mktemp -d)"; chmod 755 "$work"; mkdir -p "$work/pg"
spid=""
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null; pg_stop 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
port=18934

serve() { "$harrier" serve "$@" --listen "127.0.0.1:$port" > "$work/serve.log" 2>&1 & spid=$!; sleep 2; }
unserve() { kill "$spid"; wait "$spid" 2>/dev/null || true; spid=""; }
ms() { curl -s -o /dev/null -w "%{time_total}" "http://127.0.0.1:$port$1" | awk '{printf "%.1f", $1 * 1000}'; }
# ab FORGET QUERY: rounds of (forget the kept capacities; time; time again)
ab() {
  local forget="$1" q="$2"
  for _ in $(seq 1 "$rounds"); do eval "$forget"; echo "$(ms "$q") $(ms "$q")"; done | python3 -c '
import sys, statistics as st
r = [tuple(map(float, l.split())) for l in sys.stdin]
a, b = st.median(x[0] for x in r), st.median(x[1] for x in r)
print(f"| {sys.argv[1]} | {sys.argv[2]} | {a:.1f} | {b:.1f} | {b / a:.2f} |")' "$backend" "$q"
}
queries=("/api/v1/compare?runs=1,2,3,4,5,6,7,8,9,10" "/api/v1/compare?runs=11,12" "/api/v1/runs/12")
echo "| backend | request | computed ms | kept ms | kept / computed |"
echo "|---|---|---:|---:|---:|"

backend=sqlite; db="$work/c.db"
for f in c1 c2 c3 c4 c5 c6 c7 c8 c9 c10 big1 big2; do "$harrier" import "$data/$f.jtl" --db "$db" >/dev/null; done
serve --db "$db"
for q in "${queries[@]}"; do ab "sqlite3 '$db' 'DELETE FROM run_capacities'" "$q"; done
unserve

backend=postgres; pg_start "$work/pg"; fresh_pg cap; url="$(pg_url cap)"
for f in c1 c2 c3 c4 c5 c6 c7 c8 c9 c10 big1 big2; do "$harrier" import "$data/$f.jtl" --database-url "$url" >/dev/null; done
serve --database-url "$url"
for q in "${queries[@]}"; do ab "sql 'DELETE FROM run_capacities' cap" "$q"; done
unserve

if [ "$big_rows" -gt 0 ]; then
  t0=$(date +%s)
  python3 "$here/gen_jtl.py" - --rows "$big_rows" --seed 7 | "$harrier" import - --name big --database-url "$url" >/dev/null
  echo "generated and imported $big_rows samples in $(( $(date +%s) - t0 )) s"
  serve --database-url "$url"
  backend="postgres, $big_rows samples"
  ab "sql 'DELETE FROM run_capacities' cap" "/api/v1/compare?runs=12,13"
  unserve
  for _ in 1 2 3; do serve --database-url "$url"; echo "cold (new process, kept): $(ms "/api/v1/compare?runs=12,13") ms"; unserve; done
fi
