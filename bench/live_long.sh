#!/usr/bin/env bash
# Long live run benchmark: a k6 stream covering HOURS of synthetic time × LABELS labels
# (one request per label per second, 1 in 50 failing) written as fast as one client can
# through POST /write to a loopback server, one write per BATCH seconds of run time.
# The first and last 300 seconds of the run are written at k6's cadence (one write per
# second of run time, 50 points with 50 labels); the rest in writes of BATCH seconds. Measures
# each write's latency and the server's RSS, start against end (a run that re-snapshots
# itself whole slows down as it grows; an incremental one stays flat).
#
#   bench/live_long.sh [--bin target/debug/harrier] [--hours 12] [--labels 50]
#                      [--batch 60] [--max-seconds 600] [--name after] [--sender jmeter]
#
# --sender jmeter writes JMeter Backend Listener aggregates instead (per label one
# `statut=all` line per 5 s send interval, plus a `statut=ko` line when some failed).
#
# --max-seconds bounds the wall time: a binary that slows down stops there and the row
# says how many hours of the run it reached. Needs python3. Prints a Markdown row.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/debug/harrier hours=12 labels=50 batch=60 max=600 name= sender=k6
while (($#)); do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --hours) hours=$2; shift 2 ;;
    --labels) labels=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --max-seconds) max=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --sender) sender=$2; shift 2 ;;
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

python3 - "$port" "$pid" "$hours" "$labels" "$batch" "$max" "$name" "$out" "$sender" <<'PY'
import http.client, os, random, sys, time
port, pid, hours, labels, batch, max_s, name, out, sender = sys.argv[1:]
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

def write(s0, n):
    lines = []
    for s in range(s0, min(s0 + n, seconds)):
        if sender == "jmeter":
            if (s + 1) % 5:
                continue  # one send per 5 s interval, at its end
            t_ns = (t0 + (s + 1) * 1000) * 1_000_000
            for nm in names:
                durs = [random.randint(5, 400) for _ in range(5)]
                ko = sum(random.random() < 0.02 for _ in durs)
                lines.append(f"jmeter,application=long,transaction={nm},statut=all count={len(durs)},"
                             f"avg={sum(durs) / len(durs)},min={min(durs)},max={max(durs)},hit={len(durs)} {t_ns}")
                if ko:
                    lines.append(f"jmeter,application=long,transaction={nm},statut=ko count={ko} {t_ns}")
            continue
        for i, nm in enumerate(names):
            dur = random.randint(5, 400)
            ok = random.random() > 0.02
            end_ns = (t0 + s * 1000 + i * 7 + dur) * 1_000_000
            lines.append(f"http_req_duration,expected_response={'true' if ok else 'false'},"
                         f"name={nm},status={200 if ok else 503},testid=long value={dur} {end_ns}")
    if not lines:
        return None, 0  # JMeter: no send ends in these seconds
    body = ("\n".join(lines) + "\n").encode()
    t = time.monotonic()
    conn.request("POST", f"/write?db={'jmeter' if sender == 'jmeter' else 'k6'}&precision=ns", body=body)
    r = conn.getresponse(); r.read()
    ms = (time.monotonic() - t) * 1000
    if r.status != 204:
        sys.exit(f"write answered {r.status}")
    return ms, len(lines)

# k6's cadence (one write per second of run time) for `probe` writes at the start and at
# the end; in between, one write per `batch` seconds, as fast as the server answers.
probe = 300
start_probe, end_probe, lat, rss = [], [], [], []
start = time.monotonic()
sent = 0
s0 = 0
while s0 < probe:
    ms, n = write(s0, 1); sent += n; s0 += 1
    if ms is not None: start_probe.append(ms)
rss_start = rss_mib("VmRSS")
stopped = ""
while s0 < seconds - probe:
    ms, n = write(s0, min(batch, seconds - probe - s0)); sent += n
    if ms is not None: lat.append(ms)
    s0 += batch
    rss.append(rss_mib("VmRSS"))
    if time.monotonic() - start > max_s:
        stopped = " (time limit)"
        break
    st = os.statvfs(".")
    if st.f_bavail * st.f_frsize < 2 << 30:
        stopped = " (disk limit)"
        break
end_start = time.monotonic()
for k in range(probe):  # at most 120 s of it
    ms, n = write(s0, 1); sent += n; s0 += 1
    if ms is not None: end_probe.append(ms)
    if time.monotonic() - end_start > 120:
        break
wall = time.monotonic() - start
reached_h = min(s0, seconds) / 3600
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(len(xs) * p / 100 + 0.999) - 1)]
tenth = max(1, len(lat) // 10)
first, last = lat[:tenth], lat[-tenth:]
db_mib = sum(os.path.getsize(f"{out}/{f}") for f in os.listdir(out) if f.startswith("live.db")) / 2**20
print()
print(f"| binary | run time reached | labels | writes (points) | wall s | 1-s writes at the start p50 / p99 / max ms | {batch}-s writes, first tenth p50 / p99 ms | {batch}-s writes, last tenth p50 / p99 ms | 1-s writes at the end p50 / p99 / max ms | RSS after start → end MiB | peak RSS MiB | database + WAL MiB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
print(f"| {name} | {reached_h:.1f} h of {hours:g} h{stopped} | {labels} | {len(lat) + len(start_probe) + len(end_probe)} ({sent:,}) | {wall:.0f} | "
      f"{pct(start_probe,50):.0f} / {pct(start_probe,99):.0f} / {max(start_probe):.0f} | "
      f"{pct(first,50):.0f} / {pct(first,99):.0f} | {pct(last,50):.0f} / {pct(last,99):.0f} | "
      f"{pct(end_probe,50):.0f} / {pct(end_probe,99):.0f} / {max(end_probe):.0f} | "
      f"{rss_start:.0f} → {rss_mib('VmRSS'):.0f} | {rss_mib('VmHWM'):.0f} | {db_mib:.0f} |")
PY
