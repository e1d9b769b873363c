#!/usr/bin/env bash
# The console under connection churn: N clients (default 600, more than the server's 512
# connection slots) each hold one connection that sends part of a request head and nothing
# more, and reopen it the moment the server closes it; meanwhile REQUESTS timed GETs of
# /console and /api/v1/runs, each on a fresh connection (curl), as a person's browser would.
# The same GETs are timed first with no churn. Prints p50/p95/max of both, the server's CPU
# seconds and how many connections the churners opened during the timed part.
#
#   bench/churn.sh [--bin target/release/harrier] [--conns 600] [--requests 100]
#
# Everything on 127.0.0.1; the server and database live in a temp dir removed at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/harrier conns=600 requests=100
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --conns) conns=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT
printf 'self_scrape = false\n' >"$dir/harrier.toml"
"$bin" import examples/checkout-ramp.jtl --db "$dir/h.db" >/dev/null
prlimit --nofile=4096:4096 -- "$bin" serve --listen 127.0.0.1:0 --config "$dir/harrier.toml" \
  --db "$dir/h.db" >"$dir/out" 2>"$dir/err" &
pids+=($!)
server=$!
for _ in $(seq 100); do grep -q http "$dir/out" 2>/dev/null && break; sleep 0.1; done
base=$(grep -o 'http://[^ ]*' "$dir/out" | head -1 | sed 's#/console$##')
addr=${base#http://}

timed() { # prints one line per request: seconds
  for i in $(seq "$requests"); do
    path=/console; [ $((i % 2)) -eq 0 ] && path=/api/v1/runs
    curl -s -o /dev/null -m 60 -w '%{time_total}\n' "$base$path"
  done
}
stats() { sort -n | awk '{a[NR]=$1} END {printf "p50 %.1f ms, p95 %.1f ms, max %.1f ms (%d requests)\n", a[int(NR*0.5)]*1000, a[int(NR*0.95)]*1000, a[NR]*1000, NR}'; }
cpu() { awk '{print $14 + $15}' "/proc/$server/stat"; }

echo "server $("$bin" --version 2>/dev/null || echo "$bin") at $base; load $(cut -d' ' -f1-3 /proc/loadavg)"
timed >/dev/null # warm-up
echo "quiet:    $(timed | stats)"

python3 - "$addr" "$conns" "$dir/opened" <<'PY' &
import asyncio, sys
host, port = sys.argv[1].rsplit(":", 1)
n, out = int(sys.argv[2]), sys.argv[3]
opened = 0
async def churn():
    global opened
    while True:
        try:
            r, w = await asyncio.open_connection(host, int(port))
        except OSError:
            await asyncio.sleep(0.005)
            continue
        opened += 1
        w.write(b"GET /console HTTP/1.1\r\nHost: x\r\n")
        try:
            while await r.read(512):
                pass
        except OSError:
            pass
        w.close()
async def report():
    while True:
        await asyncio.sleep(0.5)
        open(out, "w").write(str(opened))
async def main():
    await asyncio.gather(report(), *(churn() for _ in range(n)))
asyncio.run(main())
PY
pids+=($!)
sleep 3
c0=$(cpu); o0=$(cat "$dir/opened")
t0=$(date +%s.%N)
result=$(timed | stats)
t1=$(date +%s.%N)
sleep 0.6
c1=$(cpu); o1=$(cat "$dir/opened")
hz=$(getconf CLK_TCK)
echo "churning: $result"
awk -v c0="$c0" -v c1="$c1" -v hz="$hz" -v t0="$t0" -v t1="$t1" -v o0="$o0" -v o1="$o1" -v n="$conns" \
  'BEGIN {printf "during the timed part (%.1f s): server CPU %.2f s (%.2f of a core); %d connections opened by %d churning clients\n", t1-t0, (c1-c0)/hz, (c1-c0)/hz/(t1-t0), o1-o0, n}'
