#!/usr/bin/env bash
# OTLP ingest against line protocol, paired in one sitting: data points/s through
# POST /v1/metrics (OTLP/HTTP protobuf) and through POST /api/v2/write (InfluxDB line
# protocol, as k6 --out influxdb sends it), each into a fresh server, with wrk on loopback;
# the server's CPU seconds per million points and its peak RSS.
#
#   bench/otlp_ingest.sh [--seconds 10] [--points 5000] [--connections 4] [--rounds 2] [--no-build]
#                        [--harrier PATH]   (another build to measure, e.g. a copy of an older one)
#
# The bodies carry the same number of data points:
#   - line protocol: k6's points for points/9 requests (9 metrics per request), 12 labels,
#     2 % failures — a live run's samples;
#   - OTLP: the semantic conventions' http.server.request.duration, cumulative, 15 explicit
#     buckets, `points` series (500 routes × 10 status/attribute sets) of one service — a
#     service's routes. Encoded by the OpenTelemetry Python proto package (what the SDK's
#     exporter sends). The same body posted again and again carries the same totals:
#     every push is written in full (its routes' zero-increase intervals and rollups).
#
# Needs: cargo, wrk, curl, python3 with opentelemetry-proto (installed with the SDK's
# exporter, see scripts/test.sh). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=10 points=5000 conns=4 rounds=2 build=1 harrier=
while (($#)); do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --points) points=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --harrier) harrier=$2; build=0; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
target=${CARGO_TARGET_DIR:-target}
((build)) && cargo build --release --quiet
harrier=${harrier:-$target/release/harrier}
out=bench/out/otlp; mkdir -p "$out"

python3 - "$points" "$out" <<'PY'
import random, sys, time
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m
from opentelemetry.proto.common.v1.common_pb2 import KeyValue, AnyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

n, out = int(sys.argv[1]), sys.argv[2]
random.seed(7)
# line protocol (as bench/live_write.sh)
labels = [f"GET /api/item/{i}" for i in range(12)]
t0 = 1_700_000_000_000_000_000
lines = []
metrics = ["http_reqs", "http_req_blocked", "http_req_connecting", "http_req_sending",
           "http_req_waiting", "http_req_receiving", "http_req_failed", "data_received"]
while len(lines) < n:
    label = random.choice(labels).replace(" ", "\\ ")
    ok = random.random() > 0.02
    tags = f"expected_response={'true' if ok else 'false'},method=GET,name={label},scenario=default,status={200 if ok else 503},testid=bench"
    t = t0 + random.randrange(0, 10**9)
    lines.append(f"http_req_duration,{tags} value={random.lognormvariate(3.5, 0.5):.3f} {t}")
    for x in metrics:
        lines.append(f"{x},{tags} value=1 {t}")
open(f"{out}/body.lp", "w").write("\n".join(lines[:n]) + "\n")

# OTLP
def kv(k, v):
    return KeyValue(key=k, value=AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=v))
bounds = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
now = time.time_ns()
pts = []
for i in range(n):
    route, series = divmod(i, 10)
    counts = [random.randrange(0, 50) for _ in range(len(bounds) + 1)]
    pts.append(m.HistogramDataPoint(
        attributes=[kv("http.request.method", "GET"), kv("http.route", f"/api/item/{route}"),
                    kv("http.response.status_code", 200 if series < 9 else 503),
                    kv("server.address", f"node-{series}")],
        start_time_unix_nano=now - 3_600 * 10**9, time_unix_nano=now,
        count=sum(counts), sum=sum(counts) * 0.05, bucket_counts=counts, explicit_bounds=bounds))
req = ExportMetricsServiceRequest(resource_metrics=[m.ResourceMetrics(
    resource=Resource(attributes=[kv("service.name", "bench"), kv("service.instance.id", "bench-1")]),
    scope_metrics=[m.ScopeMetrics(metrics=[m.Metric(
        name="http.server.request.duration", unit="s",
        histogram=m.Histogram(data_points=pts, aggregation_temporality=2))])])])
open(f"{out}/body.pb", "wb").write(req.SerializeToString())
PY

lua() { # $1 body file, $2 content type
  cat <<LUA
local f = io.open("$1", "rb")
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "$2"
LUA
}
lua "$out/body.lp" "text/plain; charset=utf-8" > "$out/lp.lua"
lua "$out/body.pb" "application/x-protobuf" > "$out/pb.lua"

# One side: a fresh server, wrk for `seconds`, then its CPU and peak RSS.
side() { # $1 name, $2 lua, $3 path
  rm -f "$out/$1.db"*
  local port pid
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  HARRIER_LOG=warn "$harrier" serve --listen "127.0.0.1:$port" --db "$out/$1.db" > "$out/$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  local tck cpu0 cpu1
  tck=$(getconf CLK_TCK)
  cpu0=$(awk '{print $14 + $15}' /proc/$pid/stat)
  wrk -t2 -c"$conns" -d"${seconds}s" -s "$2" "http://127.0.0.1:$port$3" > "$out/$1.wrk"
  cpu1=$(awk '{print $14 + $15}' /proc/$pid/stat)
  local rss rps non2xx
  rss=$(awk '/VmHWM/ {print int($2/1024)}' /proc/$pid/status)
  rps=$(awk '/Requests\/sec/ {print $2}' "$out/$1.wrk")
  non2xx=$(awk '/Non-2xx/ {print $4}' "$out/$1.wrk"); non2xx=${non2xx:-0}
  kill $pid; wait $pid 2>/dev/null || true
  python3 - "$1" "$rps" "$points" "$(( cpu1 - cpu0 ))" "$tck" "$seconds" "$non2xx" "$rss" <<'PY'
import sys
name, rps, pts, ticks, tck, secs, bad, rss = sys.argv[1:]
rps, pts, cpu = float(rps), int(pts), int(ticks) / int(tck)
done = rps * float(secs) * pts
print(f"| {name} | {rps:,.1f} | {rps * pts:,.0f} | {cpu:.1f} | {cpu / done * 1e6:.2f} | {bad} | {rss} MiB |")
PY
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
echo
echo "points per body: $points; lp body $(stat -c %s "$out/body.lp") bytes, OTLP body $(stat -c %s "$out/body.pb") bytes; $conns connections, ${seconds} s a side; load before: $load"
echo
echo "| side | requests/s | data points/s | server CPU s | CPU s per million points | non-2xx | peak RSS |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for r in $(seq "$rounds"); do
  side "line-protocol" "$out/lp.lua" "/api/v2/write?org=bench&bucket=k6&precision=ns"
  side "otlp" "$out/pb.lua" "/v1/metrics"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
