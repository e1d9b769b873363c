#!/usr/bin/env bash
# How close `harrier load find` gets to a known capacity with its defaults, how long it
# takes, and how much it varies: starts examples/pool_service (a pool of W workers of S ms
# with a bounded queue answering 503 when full: capacity C = W / S) on 127.0.0.1, measures
# the most it serves with wrk (closed loop, 2 × W connections so that its queue never
# fills: successful responses per second), runs the search N times against it, and prints
# for each run the time to the answer, the answer, X (the rate it falls over at) against C
# and against wrk's rate, and the load average while it ran.
#
#   bench/load_find.sh [--workers 20] [--service-ms 50] [--queue 100] [--runs 3] [--busy]
#                      [-- extra flags for harrier load find]
#
# KEEP=DIR copies each search's whole output (find-N.txt) into DIR.
#
# --busy keeps one core busy with another process (`stress-ng --cpu 1` when installed,
# else a shell spinning) for the whole sitting, wrk's measurement included.
# Release builds of harrier and the example (built when missing). The machine is shared:
# the generator and the service run on the same cores, as they would on a developer's
# machine; the search runs with its defaults (pass flags after -- to change them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
workers=20 service_ms=50 queue=100 runs=3 busy=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers="$2"; shift 2;; --service-ms) service_ms="$2"; shift 2;;
    --queue) queue="$2"; shift 2;; --runs) runs="$2"; shift 2;;
    --busy) busy=1; shift;;
    --) shift; extra=("$@"); break;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
target="${CARGO_TARGET_DIR:-$root/target}"
harrier="${HARRIER:-$target/release/harrier}"
pool="$target/release/examples/pool_service"
if [ ! -x "$harrier" ] || [ ! -x "$pool" ]; then
  (cd "$root" && cargo build --release --locked --bin harrier --example pool_service)
fi
port="${PORT:-19403}"
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
"$pool" --listen "127.0.0.1:$port" --workers "$workers" --service-ms "$service_ms" --queue "$queue" \
  >"$work/pool.log" 2>&1 &
pids+=($!)
if [ "$busy" = 1 ]; then
  if command -v stress-ng >/dev/null; then
    stress-ng --cpu 1 --timeout 0 >/dev/null 2>&1 &
  else
    sh -c 'while :; do :; done' &
  fi
  pids+=($!)
  sleep 2
fi
sleep 0.5
capacity=$(awk -v w="$workers" -v s="$service_ms" 'BEGIN { printf "%.1f", w * 1000 / s }')
echo "pool_service: $workers workers × $service_ms ms, queue $queue: C = $capacity req/s; $( [ "$busy" = 1 ] && echo "one core kept busy" || echo quiet)"

# Load average (1 min) every 2 s while a command runs: "mean max".
loadavg_while() {
  local log="$work/load.$RANDOM"
  ( while :; do cut -d' ' -f1 /proc/loadavg >>"$log"; sleep 2; done ) &
  local sampler=$!
  "$@" || true
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  awk '{ s += $1; if ($1 > m) m = $1 } END { printf "%.2f %.2f", s / NR, m }' "$log"
}

wrk_rps=""
if command -v wrk >/dev/null; then
  conns=$((workers * 2))
  load=$(loadavg_while sh -c "wrk -t2 -c$conns -d10s http://127.0.0.1:$port/work >$work/wrk.txt 2>&1")
  total=$(sed -n 's/^ *\([0-9]*\) requests in \([0-9.]*\)s.*/\1 \2/p' "$work/wrk.txt")
  non2xx=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' "$work/wrk.txt")
  wrk_rps=$(echo "$total ${non2xx:-0}" | awk '{ printf "%.1f", ($1 - $3) / $2 }')
  echo "wrk -t2 -c$conns -d10s: $wrk_rps successful req/s (load average mean/max ${load/ //})"
else
  echo "wrk: not installed (apt-get install wrk); no closed-loop reference"
fi

printf '%-4s %8s  %-10s %-10s %-9s %-9s %-9s %-9s %-11s %s\n' run time X Y "X vs C" "X vs wrk" "Y vs C" "Y vs wrk" "load avg" answer
xs=()
for i in $(seq 1 "$runs"); do
  start=$(date +%s.%N)
  load=$(loadavg_while sh -c "'$harrier' load find http://127.0.0.1:$port/work --no-store ${extra[*]:-} >'$work/find-$i.txt' 2>&1")
  end=$(date +%s.%N)
  answer=$(grep '^answer' "$work/find-$i.txt" | sed 's/^answer *//' || true)
  x=$(echo "$answer" | sed -n 's/.*falls over at \([0-9,.]*\) req\/s.*/\1/p' | tr -d ,)
  y=$(echo "$answer" | sed -n 's/.*sustains \([0-9,.]*\) req\/s.*/\1/p' | tr -d ,)
  # "+5.0 %": how far $1 is from $2, relative to $2 ("-" when either is missing).
  rel() { [ -n "$1" ] && [ -n "$2" ] && awk -v x="$1" -v c="$2" 'BEGIN { printf "%+.1f %%", 100 * (x - c) / c }' || echo -; }
  printf '%-4s %7.0fs  %-10s %-10s %-9s %-9s %-9s %-9s %-11s %s\n' "$i" "$(echo "$end - $start" | bc)" \
    "${x:--}" "${y:--}" "$(rel "$x" "$capacity")" "$(rel "$x" "$wrk_rps")" \
    "$(rel "$y" "$capacity")" "$(rel "$y" "$wrk_rps")" "${load/ //}" "${answer:-(none)}"
  # KEEP=DIR keeps each search's whole output.
  [ -n "${KEEP:-}" ] && cp "$work/find-$i.txt" "$KEEP/"
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
