#!/usr/bin/env bash
# How close `harrier load find` gets to a known capacity, and how much it varies: starts
# examples/pool_service (a pool of W workers of S ms with a bounded queue answering 503
# when full: capacity C = W / S) on 127.0.0.1, runs the search N times against it, and
# prints each answer, X (the rate it falls over at) against C, and the spread of X.
#
#   bench/load_find.sh [--workers 20] [--service-ms 50] [--queue 100] [--runs 3]
#                      [-- extra flags for harrier load find]
#
# Release builds of harrier and the example (built when missing). The machine is shared:
# the generator and the service run on the same cores, so a busy machine shows as
# generator-limited steps or a lower X; the dispatch-delay limit is raised to 100 ms so that
# the search judges the service (pass --dispatch-limit after -- to change it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
workers=20 service_ms=50 queue=100 runs=3 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers="$2"; shift 2;; --service-ms) service_ms="$2"; shift 2;;
    --queue) queue="$2"; shift 2;; --runs) runs="$2"; shift 2;;
    --) shift; extra=("$@"); break;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
pool="$root/target/release/examples/pool_service"
if [ ! -x "$harrier" ] || [ ! -x "$pool" ]; then
  (cd "$root" && cargo build --release --locked --bin harrier --example pool_service)
fi
port="${PORT:-19403}"
work="$(mktemp -d)"
"$pool" --listen "127.0.0.1:$port" --workers "$workers" --service-ms "$service_ms" --queue "$queue" \
  >"$work/pool.log" 2>&1 &
pool_pid=$!
trap 'kill "$pool_pid" 2>/dev/null; rm -rf "$work"' EXIT
sleep 0.5
capacity=$(awk -v w="$workers" -v s="$service_ms" 'BEGIN { printf "%.1f", w * 1000 / s }')
echo "pool_service: $workers workers × $service_ms ms, queue $queue: C = $capacity req/s"
xs=()
for i in $(seq 1 "$runs"); do
  start=$(date +%s.%N)
  "$harrier" load find "http://127.0.0.1:$port/work" --no-store --dispatch-limit 100ms "${extra[@]}" \
    >"$work/find-$i.txt" 2>&1 || true
  end=$(date +%s.%N)
  answer=$(grep '^answer' "$work/find-$i.txt" || echo "answer       (none)")
  x=$(sed -n 's/^answer *falls over at \([0-9,.]*\) req\/s.*/\1/p' "$work/find-$i.txt" | tr -d ,)
  printf 'run %d (%.0f s): %s\n' "$i" "$(echo "$end - $start" | bc)" "${answer#answer       }"
  [ -n "$x" ] && xs+=("$x")
done
if ((${#xs[@]})); then
  printf '%s\n' "${xs[@]}" | awk -v c="$capacity" '
    { list = list (NR > 1 ? ", " : "") $1; s += $1
      if (NR == 1 || $1 < lo) lo = $1; if (NR == 1 || $1 > hi) hi = $1 }
    END {
      m = s / NR
      printf "X = %s req/s; mean %.1f (%.1f %% of C), min %.1f, max %.1f, spread (max − min) / C %.1f %%\n",
        list, m, 100 * m / c, lo, hi, 100 * (hi - lo) / c
    }'
fi
