#!/usr/bin/env bash
# The lab's capacity as the peer measures it: starts examples/pool_service at about 400
# req/s (20 workers of 40–60 ms) and about 3,000 req/s (30 workers of 10 ms), each with a
# bounded queue answering 503, and measures each with wrk (closed loop, connections below
# the queue's bound so that no request is refused, one thread). Prints, per setting, the
# nominal C = workers / mean service time, wrk's Requests/sec and the lab's own measured
# capacity (served per second over the seconds it was saturated), so that a benchmark of
# `harrier load find` in the same sitting can be set against them.
#
#   bench/capacity_lab.sh [--seconds 10] [--overload 503|queue|refuse]
#
# The example's release build when there is one, else its debug build (built when
# missing; either serves well past 3,000 req/s). The machine is shared: the lab keeps
# its time exactly, so a busy machine shows in wrk's figure (a client that cannot send in
# time) rather than in the lab's.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
seconds=10 overload=503
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2;; --overload) overload="$2"; shift 2;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
command -v wrk >/dev/null || { echo "wrk not found (apt-get install wrk)" >&2; exit 1; }
target="${CARGO_TARGET_DIR:-$root/target}"
pool="$target/release/examples/pool_service"
if [ ! -x "$pool" ]; then
  pool="$target/debug/examples/pool_service"
  (cd "$root" && cargo build --locked --example pool_service)
fi
port="${PORT:-19404}"
work="$(mktemp -d)"
pool_pid=""
cleanup() {
  [ -n "$pool_pid" ] && kill -INT "$pool_pid" 2>/dev/null && wait "$pool_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# name workers service-ms queue connections
for setting in "400 20 40-60 20 30" "3000 30 10 30 45"; do
  read -r name workers service queue conns <<<"$setting"
  "$pool" --listen "127.0.0.1:$port" --workers "$workers" --service-ms "$service" \
    --queue "$queue" --overload "$overload" --backlog 8 >"$work/lab-$name.log" 2>&1 &
  pool_pid=$!
  sleep 0.5
  wrk -t1 -c"$conns" -d"${seconds}s" --timeout 2s "http://127.0.0.1:$port/work" >"$work/wrk-$name.txt"
  sleep 1.2
  kill -INT "$pool_pid"; wait "$pool_pid" || true; pool_pid=""
  nominal=$(sed -n 's/.*: capacity \([0-9.]*\) req\/s$/\1/p' "$work/lab-$name.log")
  wrk_rps=$(awk '/^Requests\/sec:/ { print $2 }' "$work/wrk-$name.txt")
  non2xx=$(awk '/Non-2xx/ { print $5 }' "$work/wrk-$name.txt")
  measured=$(sed -n 's/^pool_service: measured capacity \(.*\)$/\1/p' "$work/lab-$name.log")
  printf '%-5s %s workers × %s ms, %s, wrk -c%s %ss: C = %s req/s; wrk %s req/s%s; lab measured %s\n' \
    "~$name" "$workers" "$service" "$overload" "$conns" "$seconds" "$nominal" "$wrk_rps" \
    "${non2xx:+ ($non2xx non-2xx)}" "$measured"
done
