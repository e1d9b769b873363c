#!/usr/bin/env bash
# Maximum throughput and CPU per request of `harrier load run` beside wrk (Debian `wrk`),
# against one loopback server on 127.0.0.1 only: Debian nginx with one worker answering a
# fixed 200 "ok" (access log off, keep-alive never ending), or with `--server axum` the
# minimal axum service `examples/hello_service.rs` (one thread, `GET /` → 200 "ok").
#
# wrk is closed-loop: C connections, each sending its next request when the last response
# arrives. harrier is driven at the same connection count with an arrival rate far above
# what one loopback server takes (`--rate`, default 1.5 × wrk's requests/s), so all C
# connections stay busy and its achieved rate is its maximum; the queue that builds is
# drained after the schedule ends, and achieved = completed / (last end − first start).
# Each tool's CPU (user + system, GNU time) is divided by the requests it completed.
#
#   bench/load_gen.sh [--connections 50] [--threads 1] [--seconds 10] [--rate N]
#                     [--server nginx|axum]   (HARRIER=, HELLO=: the binaries to use)
#
# Prints one table row per tool and the ratios harrier ÷ wrk. The machine is shared with
# the server under test: both tools meet the same server, so the ratio of requests/s says
# which one the server or the generator limits, and CPU per request says what each costs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
connections=50 threads=1 seconds=10 rate="" server=nginx
while [ $# -gt 0 ]; do
  case "$1" in
    --connections) connections="$2"; shift 2;; --threads) threads="$2"; shift 2;;
    --seconds) seconds="$2"; shift 2;; --rate) rate="$2"; shift 2;;
    --server) server="$2"; shift 2;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
port="${PORT:-18181}"
[ -x "$harrier" ] || (cd "$root" && cargo build --release --locked)
case "$server" in nginx|axum) ;; *) echo "--server nginx or axum, not $server" >&2; exit 2;; esac
hello="${HELLO:-$(dirname "$harrier")/examples/hello_service}"
if [ "$server" = axum ] && [ ! -x "$hello" ]; then
  (cd "$root" && cargo build --release --locked --example hello_service)
  hello="${CARGO_TARGET_DIR:-$root/target}/release/examples/hello_service"
fi
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
work="$(mktemp -d)"
cleanup() {
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  [ -n "${hello_pid:-}" ] && kill "$hello_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/logs"
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
daemon on;
pid $work/nginx.pid;
error_log $work/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  client_body_temp_path $work/body;
  proxy_temp_path $work/proxy;
  fastcgi_temp_path $work/fastcgi;
  uwsgi_temp_path $work/uwsgi;
  scgi_temp_path $work/scgi;
  server {
    listen 127.0.0.1:$port;
    location / { return 200 "ok\n"; }
  }
}
CONF
if [ "$server" = nginx ]; then
  "$nginx_bin" -p "$work" -c "$work/nginx.conf"
else
  "$hello" --listen "127.0.0.1:$port" 2>"$work/hello.err" &
  hello_pid=$!
fi
sleep 0.5
url="http://127.0.0.1:$port/"

# wrk: requests/s and total requests from its report; CPU from GNU time.
/usr/bin/time -f "%U %S" -o "$work/wrk.time" wrk -t"$threads" -c"$connections" -d"${seconds}s" "$url" > "$work/wrk.out"
wrk_rps=$(awk '/^Requests\/sec:/ {print $2}' "$work/wrk.out")
wrk_n=$(awk '/requests in/ {print $1}' "$work/wrk.out")
wrk_cpu=$(awk '{print $1 + $2}' "$work/wrk.time")
[ -n "$rate" ] || rate=$(awk -v r="$wrk_rps" 'BEGIN { printf "%d", r * 1.5 }')

/usr/bin/time -f "%U %S" -o "$work/harrier.time" "$harrier" load run "$url" --rate "$rate" \
  --duration "${seconds}s" --max-connections "$connections" --threads "$threads" \
  --no-store --quiet --dispatch-limit 10s > "$work/harrier.out"
h_n=$(awk '/^requests / {print $6}' "$work/harrier.out")
h_rps=$(awk '/^rate / {for (i = 1; i <= NF; i++) if ($i == "achieved") print $(i + 1)}' "$work/harrier.out")
h_cpu=$(awk '{print $1 + $2}' "$work/harrier.time")

printf '%-8s %12s %12s %10s %16s\n' tool "req/s" requests "CPU s" "CPU µs/request"
printf '%-8s %12s %12s %10s %16.1f\n' wrk "$wrk_rps" "$wrk_n" "$wrk_cpu" "$(awk -v c="$wrk_cpu" -v n="$wrk_n" 'BEGIN { print c * 1e6 / n }')"
printf '%-8s %12s %12s %10s %16.1f\n' harrier "$h_rps" "$h_n" "$h_cpu" "$(awk -v c="$h_cpu" -v n="$h_n" 'BEGIN { print c * 1e6 / n }')"
awk -v hr="$h_rps" -v wr="$wrk_rps" -v hc="$h_cpu" -v hn="$h_n" -v wc="$wrk_cpu" -v wn="$wrk_n" 'BEGIN {
  printf "harrier / wrk: requests/s %.2f×, CPU per request %.2f×\n", hr / wr, (hc / hn) / (wc / wn) }'
if [ "$server" = nginx ]; then served="nginx 1 worker"; else served="axum hello_service, 1 thread"; fi
echo "(connections $connections, threads $threads, ${seconds} s; harrier offered $rate req/s; $served on 127.0.0.1:$port)"
grep -E '^(latency|service|dispatch|connections|generator)' "$work/harrier.out" || true
