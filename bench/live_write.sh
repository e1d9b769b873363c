#!/usr/bin/env bash
# Live ingest benchmark: points/s through POST /api/v2/write (InfluxDB line protocol, the
# way k6 --out influxdb sends it), measured with wrk on loopback, plus the console's
# response time while the load runs.
#
#   bench/live_write.sh [--seconds 10] [--lines 5000] [--connections 8] [--no-build]
#
# Needs: cargo, wrk (apt-get install -y wrk), curl. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=10 lines=5000 conns=8 build=1
while (($#)); do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --lines) lines=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
target=${CARGO_TARGET_DIR:-target}
((build)) && cargo build --release --quiet
out=bench/out/live; mkdir -p "$out"
rm -f "$out"/live.db*

# One write body: k6's points for lines/9 requests (9 metrics per request, as k6 emits),
# 12 labels, 2 % failures, timestamps spread over one second.
python3 - "$lines" > "$out/body.txt" <<'PY'
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
    status = 200 if ok else 503
    tags = f"expected_response={'true' if ok else 'false'},method=GET,name={label},scenario=default,status={status},testid=bench"
    t = t0 + random.randrange(0, 10**9)
    dur = random.lognormvariate(3.5, 0.5)
    out.append(f"http_req_duration,{tags} value={dur:.3f} {t}")
    for m in metrics:
        out.append(f"{m},{tags} value=1 {t}")
print("\n".join(out[:n]))
PY
actual=$(wc -l < "$out/body.txt")
cat > "$out/post.lua" <<LUA
local f = io.open("$out/body.txt", "rb")
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "text/plain; charset=utf-8"
LUA

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
HARRIER_LOG=warn "$target/release/harrier" serve --listen "127.0.0.1:$port" --db "$out/live.db" > "$out/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

# The console while writes run: one page load every 0.5 s.
( sleep 1; for _ in $(seq $(( (seconds - 2) * 2 ))); do
    curl -s -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$port/console/runs"; sleep 0.5; done ) > "$out/console.txt" &
probe=$!
wrk -t2 -c"$conns" -d"${seconds}s" -s "$out/post.lua" "http://127.0.0.1:$port/api/v2/write?org=bench&bucket=k6&precision=ns" > "$out/wrk.txt"
wait $probe || true
rps=$(awk '/Requests\/sec/ {print $2}' "$out/wrk.txt")
non2xx=$(awk '/Non-2xx/ {print $4}' "$out/wrk.txt"); non2xx=${non2xx:-0}
sleep 2  # let the last snapshot land
samples=$(curl -s "http://127.0.0.1:$port/api/v1/runs" | python3 -c 'import json,sys; r=json.load(sys.stdin)["runs"]; print(r[0]["count"] if r else 0)')
rss=$(awk '/VmHWM/ {print int($2/1024)}' /proc/$pid/status)
read -r p50 p95 max < <(sort -n "$out/console.txt" | awk '{a[NR]=$1} END {if (NR==0) {print "- - -"} else {printf "%.0f %.0f %.0f\n", a[int((NR+1)/2)]*1000, a[int(NR*0.95+0.999)]*1000, a[NR]*1000}}')
pps=$(python3 -c "print(f'{float(\"$rps\") * $actual:,.0f}')")
echo
echo "| body | connections | seconds | write requests/s | points/s | non-2xx | samples stored | harrier peak RSS | console /console/runs p50 / p95 / max |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
echo "| $actual lines | $conns | $seconds | $rps | $pps | $non2xx | $samples | ${rss} MiB | ${p50} / ${p95} / ${max} ms |"
