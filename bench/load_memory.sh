#!/usr/bin/env bash
# Does `harrier load run` keep its memory flat however many requests it sends? Its peak
# RSS (GNU time) after about 100 k requests and after about 10 M, at the same offered rate
# against one loopback server (Debian nginx, one worker, fixed `200 ok`, 127.0.0.1 only),
# beside wrk's peak RSS over the same two lengths (wrk keeps fixed-size statistics).
#
#   bench/load_memory.sh [--rate 50000] [--connections 50] [--requests 10000000]
#
# The rate should stay below what the server and generator take on this machine, so no
# queue builds (a queue is memory the schedule asks for, not memory per request sent).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
rate=50000 connections=50 requests=10000000
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate="$2"; shift 2;; --connections) connections="$2"; shift 2;;
    --requests) requests="$2"; shift 2;;
    *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
port="${PORT:-18182}"
[ -x "$harrier" ] || (cd "$root" && cargo build --release --locked)
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
cleanup() { [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; rm -rf "$work"; }
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
"$nginx_bin" -p "$work" -c "$work/nginx.conf"
sleep 0.5
url="http://127.0.0.1:$port/"

printf '%-8s %12s %12s %14s\n' tool requests seconds "peak RSS KiB"
for n in 100000 "$requests"; do
  secs=$(awk -v n="$n" -v r="$rate" 'BEGIN { printf "%d", (n + r - 1) / r }')
  /usr/bin/time -f "%M" -o "$work/h.rss" "$harrier" load run "$url" --rate "$rate" \
    --duration "${secs}s" --max-connections "$connections" --no-store --quiet \
    --dispatch-limit 10s > "$work/h.out"
  h_n=$(awk '/^requests / {print $6}' "$work/h.out")
  printf '%-8s %12s %12s %14s\n' harrier "$h_n" "$secs" "$(cat "$work/h.rss")"
  grep -E '^generator' "$work/h.out" || true
  /usr/bin/time -f "%M" -o "$work/w.rss" wrk -t1 -c"$connections" -d"${secs}s" "$url" > "$work/w.out"
  printf '%-8s %12s %12s %14s\n' wrk "$(awk '/requests in/ {print $1}' "$work/w.out")" "$secs" "$(cat "$work/w.rss")"
done
