#!/usr/bin/env bash
# Long live run benchmark: a k6 stream covering HOURS of synthetic time × LABELS labels
# (one request per label per second, 1 in 50 failing) written as fast as one client can
# through POST /write to a loopback server, one write per BATCH seconds of run time.
# Measures each write's latency and the server's RSS, and compares the first tenth of
# the writes with the last tenth (a run that re-snapshots itself whole slows down as it
# grows; an incremental one stays flat).
#
#   bench/live_long.sh [--bin target/debug/harrier] [--hours 12] [--labels 50]
#                      [--batch 60] [--max-seconds 600] [--name after]
#
# --max-seconds bounds the wall time: a binary that slows down stops there and the row
# says how many hours of the run it reached. Needs python3. Prints a Markdown row.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/debug/harrier hours=12 labels=50 batch=60 max=600 name=
while (($#)); do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --hours) hours=$2; shift 2 ;;
    --labels) labels=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --max-seconds) max=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
name=${name:-$bin}
out=bench/out/live_long; mkdir -p "$out"
rm -f "$out"/live.db* "$out"/live.db.lock

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
HARRIER_LOG=warn "$bin" serve --listen "127.0.0.1:$port" --db "$out/live.db" > "$out/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

python3 - "$port" "$pid" "$hours" "$labels" "$batch" "$max" "$name" "$out" <<'PY'
import http.client, os, random, sys, time
port, pid, hours, labels, batch, max_s, name, out = sys.argv[1:]
pid, hours, labels, batch, max_s = int(pid), float(hours), int(labels), int(batch), float(max_s)
random.seed(3)
names = [f"GET\\ /api/endpoint/{i}" for i in range(labels)]
t0 = 1_700_000_000_000  # ms
seconds = int(hours * 3600)
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=600)

def rss_mib(field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0.0

lat, rss = [], []
start = time.monotonic()
sent = 0
for s0 in range(0, seconds, batch):
    lines = []
    for s in range(s0, min(s0 + batch, seconds)):
        for i, n in enumerate(names):
            dur = random.randint(5, 400)
            ok = random.random() > 0.02
            end_ns = (t0 + s * 1000 + i * 7 + dur) * 1_000_000
            lines.append(f"http_req_duration,expected_response={'true' if ok else 'false'},"
                         f"name={n},status={200 if ok else 503},testid=long value={dur} {end_ns}")
    body = ("\n".join(lines) + "\n").encode()
    t = time.monotonic()
    conn.request("POST", "/write?db=k6&precision=ns", body=body)
    r = conn.getresponse(); r.read()
    lat.append((time.monotonic() - t) * 1000)
    if r.status != 204:
        sys.exit(f"write answered {r.status}")
    sent += len(lines)
    rss.append(rss_mib("VmRSS"))
    if time.monotonic() - start > max_s:
        break
    st = os.statvfs(".")
    if st.f_bavail * st.f_frsize < 2 << 30:
        print("stopped: less than 2 GiB of disk left", file=sys.stderr)
        break
wall = time.monotonic() - start
reached_h = (s0 + batch) / 3600
tenth = max(1, len(lat) // 10)
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(len(xs) * p / 100 + 0.999) - 1)]
first, last = lat[:tenth], lat[-tenth:]
print()
print("| binary | run time reached | labels | writes (points) | wall s | first tenth p50 / p99 / max ms | last tenth p50 / p99 / max ms | RSS after first tenth → end MiB | peak RSS MiB | database + WAL MiB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
db_mib = sum(os.path.getsize(f"{out}/{f}") for f in os.listdir(out) if f.startswith("live.db")) / 2**20
print(f"| {name} | {min(reached_h, hours):.1f} h of {hours:g} h | {labels} | {len(lat)} ({sent:,}) | {wall:.0f} | "
      f"{pct(first,50):.0f} / {pct(first,99):.0f} / {max(first):.0f} | {pct(last,50):.0f} / {pct(last,99):.0f} / {max(last):.0f} | "
      f"{rss[tenth-1]:.0f} → {rss[-1]:.0f} | {rss_mib('VmHWM'):.0f} | {db_mib:.0f} |")
PY
