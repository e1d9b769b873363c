#!/usr/bin/env bash
# A saturation search shared by N load agents against a known capacity: how close X gets to
# C and how long the search takes. Starts examples/pool_service (W workers of S ms, a queue
# of Q answering 503 when full: C = W / S) and a `harrier serve` with `[load] enabled`, on
# 127.0.0.1; N `harrier load agent --once` processes wait for work; each run posts a
# search (`"mode": "find", "agents": N`) to `POST /api/v1/load-tests`, waits for the agents
# to end their parts, and reads the run's answer (`reported.search`) and rate changes
# (`reported.control`).
#
#   bench/load_find_agents.sh [--agents 3] [--workers 20] [--service-ms 50] [--queue 100]
#                             [--runs 3]
#
# Release builds of harrier and the example (built when missing; HARRIER=path to use
# another binary). The generator's dispatch-delay limit is 100 ms, as in load_find.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
agents=3 workers=20 service_ms=50 queue=100 runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --agents) agents="$2"; shift 2;; --workers) workers="$2"; shift 2;;
    --service-ms) service_ms="$2"; shift 2;; --queue) queue="$2"; shift 2;;
    --runs) runs="$2"; shift 2;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
target="${CARGO_TARGET_DIR:-$root/target}"
harrier="${HARRIER:-$target/release/harrier}"
pool="$target/release/examples/pool_service"
if [ ! -x "$harrier" ] || [ ! -x "$pool" ]; then
  (cd "$root" && cargo build --release --locked --bin harrier --example pool_service)
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

pool_port=$(free_port)
"$pool" --listen "127.0.0.1:$pool_port" --workers "$workers" --service-ms "$service_ms" \
  --queue "$queue" >"$work/pool.log" 2>&1 &
pids+=($!)
capacity=$(awk -v w="$workers" -v s="$service_ms" 'BEGIN { printf "%.1f", w * 1000 / s }')
max_rate=$(awk -v c="$capacity" 'BEGIN { printf "%d", c * 5 }')
cat >"$work/harrier.toml" <<TOML
[load]
enabled = true
max_rate = $max_rate
max_duration = "5m"
TOML
port=$(free_port)
base="http://127.0.0.1:$port"
HARRIER_LOG=warn "$harrier" serve --listen "127.0.0.1:$port" --db "$work/harrier.db" \
  --config "$work/harrier.toml" >"$work/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "$base/healthz" >/dev/null && break; sleep 0.1; done
echo "pool_service: $workers workers × $service_ms ms, queue $queue: C = $capacity req/s; $agents agents"

xs=()
for i in $(seq 1 "$runs"); do
  agent_pids=()
  for a in $(seq 1 "$agents"); do
    "$harrier" load agent --server "$base" --once --wait 60s --name "bench-$a" \
      >"$work/agent-$i-$a.txt" 2>&1 &
    agent_pids+=($!)
  done
  for _ in $(seq 200); do
    waiting=$(curl -s "$base/api/v1/load-agents" | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("waiting") or []))')
    [ "$waiting" -ge "$agents" ] && break
    sleep 0.1
  done
  start=$(date +%s.%N)
  id=$(curl -sf -H 'content-type: application/json' "$base/api/v1/load-tests" -d "{
    \"url\": \"http://127.0.0.1:$pool_port/work\", \"mode\": \"find\", \"agents\": $agents,
    \"step_duration\": \"4s\", \"confirm_duration\": \"10s\", \"tolerance\": \"5%\",
    \"max_rate\": \"$max_rate\", \"max_duration\": \"4m\", \"dispatch_limit\": \"100ms\"}" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  for p in "${agent_pids[@]}"; do wait "$p" || true; done
  # The run completes once the server has merged the agents' last seconds.
  for _ in $(seq 100); do
    status=$(curl -s "$base/api/v1/runs/$id" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
    [ "$status" != "live" ] && break
    sleep 0.1
  done
  end=$(date +%s.%N)
  curl -s "$base/api/v1/runs/$id" >"$work/run-$i.json"
  IFS=$'\t' read -r x statement control < <(python3 - "$work/run-$i.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
rep = run.get("reported") or {}
s, c = rep.get("search") or {}, rep.get("control") or {}
x = s.get("falls_over_rps")
print(x if x is not None else "-", s.get("statement", "(no answer)"),
      f"{c.get('changes')} rate changes, max delay {c.get('max_delay_ms')} ms", sep="\t")
PY
)
  printf 'run %d (%.0f s): X = %s req/s; %s; %s\n' "$i" "$(echo "$end - $start" | bc)" "$x" \
    "$statement" "$control"
  [ "$x" != "-" ] && xs+=("$x")
done
if ((${#xs[@]})); then
  printf '%s\n' "${xs[@]}" | awk -v c="$capacity" '
    { list = list (NR > 1 ? ", " : "") $1; s += $1
      if (NR == 1 || $1 < lo) lo = $1; if (NR == 1 || $1 > hi) hi = $1 }
    END {
      m = s / NR
      printf "X = %s req/s; mean %.1f (%.1f %% of C), spread (max − min) / C %.1f %%\n",
        list, m, 100 * m / c, 100 * (hi - lo) / c
    }'
fi
