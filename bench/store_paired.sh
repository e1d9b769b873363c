#!/usr/bin/env bash
# Two builds of harrier measured in the same sitting, rounds alternating (A B A B …), so that
# a change of the store can be shown to cost nothing beyond noise: a JTL import into SQLite,
# the same import into PostgreSQL, and live ingest (POST /api/v2/write, InfluxDB line
# protocol as k6 sends it, driven by wrk on loopback).
#
#   bench/store_paired.sh --before BIN --after BIN [--rounds 3] [--size 200M] [--seconds 10]
#
# Needs: python3, wrk, curl, GNU time, Debian's postgresql server binaries.
# Prints one Markdown table: the median of each figure per build and after/before.
set -euo pipefail
bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
before="" after="" rounds=3 size=200M seconds=10
while (($#)); do
  case "$1" in
    --before) before="$2"; shift 2 ;;
    --after) after="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -x "$before" ] && [ -x "$after" ] || { echo "--before and --after must name harrier binaries" >&2; exit 2; }
out="$bench/out/paired"; mkdir -p "$out"
work="$(mktemp -d "${TMPDIR:-/tmp}/harrier-paired.XXXXXX")"
chmod 755 "$work"  # the PostgreSQL server runs as `postgres` below it
# shellcheck source=bench/pg_throwaway.sh
. "$bench/pg_throwaway.sh"
cleanup() { [ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null || true; pg_stop 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

jtl="$bench/out/bench-$size.jtl"
if [ ! -s "$jtl" ]; then
  echo "== generating $jtl" >&2
  python3 "$bench/gen_jtl.py" "$jtl.tmp" --size "$size" --seed 1
  mv "$jtl.tmp" "$jtl"
fi
cat "$jtl" > /dev/null

# The live-ingest body: as bench/live_write.sh makes it (5,000 lines, 12 labels, 2 % failures).
python3 - 5000 > "$work/body.txt" <<'PY'
import sys, random
random.seed(7)
n = int(sys.argv[1]); labels = [f"GET /api/item/{i}" for i in range(12)]
t0 = 1_700_000_000_000_000_000
out = []
metrics = ["http_reqs", "http_req_blocked", "http_req_connecting", "http_req_sending",
           "http_req_waiting", "http_req_receiving", "http_req_failed", "data_received"]
while len(out) < n:
    label = random.choice(labels).replace(" ", "\\ ")
    ok = random.random() > 0.02
    tags = f"expected_response={'true' if ok else 'false'},method=GET,name={label},scenario=default,status={200 if ok else 503},testid=bench"
    t = t0 + random.randrange(0, 10**9)
    out.append(f"http_req_duration,{tags} value={random.lognormvariate(3.5, 0.5):.3f} {t}")
    for m in metrics:
        out.append(f"{m},{tags} value=1 {t}")
print("\n".join(out[:n]))
PY
cat > "$work/post.lua" <<LUA
local f = io.open("$work/body.txt", "rb")
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "text/plain; charset=utf-8"
LUA

pg_start "$work"
results="$out/results.tsv"; : > "$results"   # build, figure, value
echo "== $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds; $jtl ($(stat -c %s "$jtl") bytes)" >&2

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

one_round() { # NAME BIN ROUND
  local name="$1" bin="$2" r="$3" db="$work/import.db" port rps
  rm -f "$db"*
  timed "$bin" import "$jtl" --db "$db"
  printf '%s\tsqlite import s\t%s\n' "$name" "$WALL" >> "$results"
  fresh_pg "p$r$name"
  timed "$bin" import "$jtl" --database-url "$(pg_url "p$r$name")"
  printf '%s\tpostgres import s\t%s\n' "$name" "$WALL" >> "$results"
  drop_pg "p$r$name"
  rm -f "$db"*
  port=$(free_port)
  HARRIER_LOG=warn "$bin" serve --listen "127.0.0.1:$port" --db "$work/live.db" > "$work/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" > /dev/null && break; sleep 0.1; done
  wrk -t2 -c8 -d"${seconds}s" -s "$work/post.lua" \
    "http://127.0.0.1:$port/api/v2/write?org=bench&bucket=k6&precision=ns" > "$work/wrk.txt"
  rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt")
  printf '%s\tlive writes/s\t%s\n' "$name" "$rps" >> "$results"
  kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=""
  rm -f "$work/live.db"*
  echo "  round $r $name: sqlite import $(awk -F'\t' -v n="$name" '$1==n && $2=="sqlite import s" {v=$3} END {print v}' "$results") s, postgres import $WALL s, live $rps writes/s" >&2
}

for r in $(seq 1 "$rounds"); do
  if ((r % 2)); then one_round before "$before" "$r"; one_round after "$after" "$r"
  else one_round after "$after" "$r"; one_round before "$before" "$r"; fi
done

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds, alternating"
echo "(best: the shortest time or the most writes/s of the rounds, the figure least moved by"
echo "other work on the machine)"
echo
echo "| figure | before median | after median | after / before | before best | after best | after / before |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for fig in "sqlite import s" "postgres import s" "live writes/s"; do
  values() { awk -F'\t' -v f="$fig" -v w="$1" '$1==w && $2==f {print $3}' "$results"; }
  b=$(values before | median); a=$(values after | median)
  if [ "$fig" = "live writes/s" ]; then
    bb=$(values before | sort -g | tail -1); ab=$(values after | sort -g | tail -1)
  else
    bb=$(values before | sort -g | head -1); ab=$(values after | sort -g | head -1)
  fi
  echo "| $fig | $b | $a | $(ratio "$a" "$b") | $bb | $ab | $(ratio "$ab" "$bb") |"
done
