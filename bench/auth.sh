#!/usr/bin/env bash
# What sign-in costs, on a release build, all on loopback (docs/security.md):
#   1. GET /api/v1/runs p50/p95/p99 with wrk: sign-in off (no users) vs on with a token and
#      with a session cookie, two rounds alternating;
#   2. sign-in latency at 5 sign-ins/s (Argon2id on the blocking threads, 2 at a time);
#   3. the same read p95 while 200 wrong-password attempts run (40 names, 8 threads, one
#      client: the throttle answers 429 after 5 failures of a name or the client);
#   4. wrong tokens whose secret has the right vs a wrong first byte: median answer times.
# Usage: bench/auth.sh [path/to/release/harrier]   (cargo build --release first)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-target/release/harrier}
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)"; exit 2; }
dir=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
db="$dir/h.db"
for i in $(seq 1 20); do
  "$BIN" import tests/fixtures/jmeter/default_props_2.13.jtl --db "$db" --name "run $i" >/dev/null
done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
printf 'self_scrape = false\n' > "$dir/harrier.toml"
"$BIN" serve --listen "127.0.0.1:$port" --db "$db" --config "$dir/harrier.toml" >"$dir/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do curl -fs "$base/healthz" >/dev/null && break; sleep 0.1; done
read_p95() { wrk -t2 -c8 -d"${DUR:-10}s" -s bench/wrk_p95.lua "$@" "$base/api/v1/runs" | tail -1; }
token=""
for round in 1 2; do
  "$BIN" user remove ana --db "$db" >/dev/null 2>&1 || true
  sleep 2.5
  echo "round $round  off (no users):     $(read_p95)"
  echo "a long passphrase" | "$BIN" user add ana --role editor --db "$db" >/dev/null
  [ -n "$token" ] || token=$("$BIN" token create bench --scope read --db "$db" 2>/dev/null)
  sleep 2.5
  echo "round $round  on, Bearer token:   $(read_p95 -H "Authorization: Bearer $token")"
  cookie=$(curl -s -o /dev/null -D - -d 'name=ana&password=a+long+passphrase' "$base/console/sign-in" | sed -n 's/^set-cookie: \([^;]*\).*/\1/ip')
  echo "round $round  on, session cookie: $(read_p95 -H "Cookie: $cookie")"
done
echo "sign-in at 5/s, 100 sign-ins:     $(python3 bench/auth_clients.py signin "$base" ana 'a long passphrase' 5 100)"
echo "read p95 idle (token):            $(read_p95 -H "Authorization: Bearer $token")"
python3 bench/auth_clients.py wrong "$base" 200 8 > "$dir/wrong.txt" &
wrongpid=$!
echo "read p95 during wrong passwords:  $(DUR=5 read_p95 -H "Authorization: Bearer $token")"
wait "$wrongpid"
echo "the 200 wrong-password attempts:  $(cat "$dir/wrong.txt")"
echo "token timing:                     $(python3 bench/auth_clients.py tokens "$base" "$token" 2000)"
