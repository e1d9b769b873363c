#!/usr/bin/env bash
# Compare benchmark: server time of `GET /api/v1/compare` and `/console/compare` for 2 and
# 10 runs of ~1 M samples each, cold (a freshly started server: no in-process cache) and
# warm (the same request again). See bench/README.md.
#
#   bench/compare.sh [--restarts 5] [--warm 5] [--samples 1000000] [--seconds 600]
#                    [--bin PATH] [--no-build] [--old-style] [--import-vs OTHER_BIN]
#
# --restarts   cold measurements per request (each on a newly started server; default 5)
# --warm       repeats of each request after its cold one (default 5)
# --samples    samples per generated run (default 1,000,000), --seconds its length (600)
# --bin        the harrier binary to measure (default: the release build, copied to
#              bench/out/compare/harrier so a parallel build cannot swap it mid-run)
# --no-build   do not run `cargo build --release`
# --old-style  delete the stored bootstrap draws (run_resamples) after the import, as in a
#              database imported before they existed: the first comparison then resamples
#              the buckets and stores the draws; its time is printed as "first (old-style)"
# --import-vs  only compare import cost: import run 1 with OTHER_BIN and with the measured
#              binary, alternately, --restarts times each, each into a fresh database; prints
#              median wall ms and median CPU ms of each (perf's task-clock, all threads;
#              without perf, user + system from GNU time, which counts in 10 ms steps)
#
# Input: bench/out/compare/run-N.jtl, N = 1..10, made by gen_compare.py if missing (seed N;
# runs 6..10 are 8 % slower). Each run is imported into a fresh database with its own
# `harrier import` process, timed (wall, `date +%s%N`); the table gives the median.
# Times are curl's `%{time_total}` over loopback, in ms; medians over the restarts / repeats.
set -euo pipefail

bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$bench")"
out="$bench/out/compare"
restarts=5 warm=5 samples=1000000 seconds=600 bin="" build=1 old=0 vs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --restarts) restarts="$2"; shift 2 ;;
    --warm) warm="$2"; shift 2 ;;
    --samples) samples="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --old-style) old=1; shift ;;
    --import-vs) vs="$2"; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
command -v curl >/dev/null || { echo "curl missing" >&2; exit 1; }
command -v sqlite3 >/dev/null || [ "$old" = 0 ] || { echo "sqlite3 missing (--old-style)" >&2; exit 1; }

if [ -z "$bin" ]; then
  if [ "$build" = 1 ]; then
    echo "== building harrier (release)" >&2
    (cd "$root" && cargo build --release --locked --quiet)
  fi
  cp "${CARGO_TARGET_DIR:-$root/target}/release/harrier" "$out/harrier"
  bin="$out/harrier"
fi
[ -x "$bin" ] || { echo "no binary $bin" >&2; exit 1; }

files=()
for n in $(seq 1 10); do
  f="$out/run-$n-$samples-$seconds.jtl"
  if [ ! -s "$f" ]; then
    shift_by=1.0
    [ "$n" -ge 6 ] && shift_by=1.08
    python3 "$bench/gen_compare.py" "$f.tmp" --samples "$samples" --seconds "$seconds" \
      --seed "$n" --shift "$shift_by"
    mv "$f.tmp" "$f"
  fi
  files+=("$f")
done

work="$(mktemp -d "${TMPDIR:-/tmp}/harrier-compare.XXXXXX")"
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
db="$work/compare.db"

median() { sort -n | awk '{v[NR]=$1} END {if (NR == 0) {print "-"; exit} m = (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "%.1f\n", m}'; }

if [ -n "$vs" ]; then
  command -v perf > /dev/null || [ -x /usr/bin/time ] || { echo "needs perf or GNU time" >&2; exit 1; }
  cat "${files[0]}" > /dev/null
  declare -A wall cpu
  for _ in $(seq "$restarts"); do
    for b in "$vs" "$bin"; do
      rm -f "$work"/imp.db*
      t0=$(date +%s%N)
      if command -v perf > /dev/null; then
        perf stat -x, -e task-clock -o "$work/time" "$b" import "${files[0]}" --db "$work/imp.db" > /dev/null
        t1=$(date +%s%N)
        cpu[$b]+="$(awk -F, '/task-clock/ {printf "%d", $1}' "$work/time") "
      else
        /usr/bin/time -f '%U %S' -o "$work/time" "$b" import "${files[0]}" --db "$work/imp.db" > /dev/null
        t1=$(date +%s%N)
        cpu[$b]+="$(awk '{printf "%d", ($1 + $2) * 1000}' "$work/time") "
      fi
      wall[$b]+="$(( (t1 - t0) / 1000000 )) "
    done
  done
  printf '| binary | import wall ms (median of %s) | CPU ms (median) | runs |\n| --- | ---: | ---: | --- |\n' "$restarts"
  for b in "$vs" "$bin"; do
    printf '| `%s` | %s | %s | %s |\n' "$b" "$(tr ' ' '\n' <<< "${wall[$b]}" | grep . | median)" \
      "$(tr ' ' '\n' <<< "${cpu[$b]}" | grep . | median)" "${wall[$b]}"
  done
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi

echo "== importing 10 runs into a fresh database ($bin)" >&2
imports=()
for f in "${files[@]}"; do
  cat "$f" > /dev/null
  t0=$(date +%s%N)
  "$bin" import "$f" --db "$db" --scenario shop > /dev/null
  t1=$(date +%s%N)
  imports+=("$(( (t1 - t0) / 1000000 ))")
done
import_ms=$(printf '%s\n' "${imports[@]}" | median)
echo "   import ms per run: ${imports[*]}" >&2
if [ "$old" = 1 ]; then
  sqlite3 "$db" "DELETE FROM run_resamples" 2>/dev/null || echo "   (no run_resamples table: nothing to delete)" >&2
fi
command -v sqlite3 > /dev/null && sqlite3 "$db" "PRAGMA wal_checkpoint(TRUNCATE)" > /dev/null
db_mb=$(awk "BEGIN {printf \"%.1f\", $(stat -c %s "$db") / 1e6}")

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
start() {
  "$bin" serve --listen "127.0.0.1:$port" --db "$db" > "$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "$base/healthz" && return 0
    sleep 0.05
  done
  echo "server did not start:" >&2; cat "$work/serve.log" >&2; exit 1
}
stop() { kill "$server"; wait "$server" 2>/dev/null || true; server=""; }
ms() {
  curl -s -o "$work/body" -w '%{http_code} %{time_total}\n' "$1" | awk '{
    if ($1 != 200) { print "HTTP " $1 > "/dev/stderr"; exit 1 }
    printf "%.1f\n", $2 * 1000 }'
}

ten="1,2,3,4,5,6,7,8,9,10"
two="1,6"
if [ "$old" = 1 ]; then
  start
  first=$(ms "$base/api/v1/compare?runs=$ten")
  stop
  echo "   first (old-style) compare of 10 runs, API: $first ms (resamples the buckets, stores the draws)" >&2
fi

printf '| request | runs | cold ms (median of %s restarts) | cold range | warm ms (median of %s) |\n' "$restarts" "$((restarts * warm))"
printf '| --- | ---: | ---: | ---: | ---: |\n'
for what in api page; do
  for ids in "$two" "$ten"; do
    case "$what" in
      api) url="$base/api/v1/compare?runs=$ids"; name='`GET /api/v1/compare`' ;;
      page) url="$base/console/compare?runs=$ids"; name='`/console/compare`' ;;
    esac
    cold=() hot=()
    for _ in $(seq "$restarts"); do
      start
      cold+=("$(ms "$url")")
      for _ in $(seq "$warm"); do hot+=("$(ms "$url")"); done
      stop
    done
    runs=$(echo "$ids" | tr ',' '\n' | wc -l)
    lo=$(printf '%s\n' "${cold[@]}" | sort -n | head -1)
    hi=$(printf '%s\n' "${cold[@]}" | sort -n | tail -1)
    printf '| %s | %s | %s | %s–%s | %s |\n' "$name" "$runs" \
      "$(printf '%s\n' "${cold[@]}" | median)" "$lo" "$hi" "$(printf '%s\n' "${hot[@]}" | median)"
    echo "   $what $runs runs: cold ${cold[*]}; warm ${hot[*]}" >&2
  done
done
echo
echo "import of one ${samples}-sample run: median ${import_ms} ms (10 imports); database ${db_mb} MB"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
