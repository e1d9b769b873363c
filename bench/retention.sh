#!/usr/bin/env bash
# Does deleting runs give the space back? On SQLite and PostgreSQL, with one harrier binary.
# See bench/README.md ("Space after run deletion").
#
#   bench/retention.sh --bin BIN [--runs 10] [--keep 2] [--size 256M] [--backends sqlite,postgres]
#                      [--data DIR]
#
# Per backend, on a fresh database:
#  1. `BIN import FILE --name run-i` --runs times (gen_jtl.py --size SIZE --seed 1, one run each);
#  2. `BIN serve`, and all runs but --keep deleted through the API (`DELETE /api/v1/runs/{id}`,
#     curl; each request's time recorded), serve stopped;
#  3. as many runs imported again as were deleted (the space freed should be used again).
# After each step: SQLite: bytes of the file and of its WAL (before python3 opens it), page_count, freelist_count, page_size,
# auto_vacuum (python3's sqlite3 module); PostgreSQL: pg_database_size,
# pg_total_relation_size('run_buckets') and its dead tuples (pg_stat_user_tables, after
# pg_stat_force_next_flush where the server has it).
# Runs are not subject to a retention setting: harrier's `[retention]` prunes route figures
# (every 10 min under `serve`), not runs, so runs leave only by deletion.
# PostgreSQL: a throwaway server (bench/pg_throwaway.sh), default settings (autovacuum on,
# autovacuum_naptime 1 min: it may run between the steps; its last run is printed).
# Needs python3, curl, GNU time, PostgreSQL server binaries, psql.
set -euo pipefail

bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="" runs=10 keep=2 size=256M backends=sqlite,postgres data="$bench/out"
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --backends) backends="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "--bin BIN (a harrier binary) is needed" >&2; exit 2; }
[ "$keep" -lt "$runs" ] || { echo "--keep must be less than --runs" >&2; exit 2; }
mkdir -p "$data"
data="$(cd "$data" && pwd)"
. "$bench/pg_throwaway.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/harrier-retention.XXXXXX")"
server=""
cleanup() {
  [ -z "$server" ] || { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
  pg_stop; rm -rf "$work"
}
trap cleanup EXIT
has() { [[ ",$backends," == *",$1,"* ]]; }
if has postgres; then pg_start "$data"; fi

jtl="$data/bench-$size.jtl"
if [ ! -s "$jtl" ]; then
  echo "== generating $jtl" >&2
  python3 "$bench/gen_jtl.py" "$jtl.tmp" --size "$size" --seed 1
  mv "$jtl.tmp" "$jtl"
fi
cat "$jtl" > /dev/null

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
serve() {
  local port
  port=$(free_port)
  printf 'listen = "127.0.0.1:%s"\nself_scrape = false\n' "$port" > "$work/serve.toml"
  "$bin" serve --config "$work/serve.toml" "$@" > "$work/serve.log" 2>&1 &
  server=$!
  for _ in $(seq 200); do
    if curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"; then PORT=$port; return 0; fi
    sleep 0.05
  done
  echo "serve did not start:" >&2; cat "$work/serve.log" >&2; exit 1
}
stop_server() { kill "$server"; wait "$server" 2>/dev/null || true; server=""; }

sqlite_state() {
  local db="$1" main=0 wal=0
  [ -f "$db" ] && main=$(stat -c %s "$db")
  [ -f "$db-wal" ] && wal=$(stat -c %s "$db-wal")
  python3 - "$db" "$main" "$wal" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
q = lambda p: c.execute("PRAGMA " + p).fetchone()[0]
pc, fl, ps, av = q("page_count"), q("freelist_count"), q("page_size"), q("auto_vacuum")
main, wal = int(sys.argv[2]) / 1e6, int(sys.argv[3]) / 1e6
print(f"file {main:.1f} MB + WAL {wal:.1f} MB = {main + wal:.1f} MB; page_count {pc} ({pc * ps / 1e6:.1f} MB), "
      f"freelist_count {fl} ({fl * ps / 1e6:.1f} MB), page_size {ps}, auto_vacuum {av}")
EOF
}
pg_state() {
  sql "SELECT pg_stat_force_next_flush()" "$1" > /dev/null 2>&1 || true
  sql "SELECT format('pg_database_size %s MB; run_buckets: pg_total_relation_size %s MB, live tuples %s, dead tuples %s; last autovacuum %s, last vacuum %s',
      round(pg_database_size(current_database()) / 1e6, 1), round(pg_total_relation_size('run_buckets') / 1e6, 1),
      n_live_tup, n_dead_tup, coalesce(last_autovacuum::text, '-'), coalesce(last_vacuum::text, '-'))
    FROM pg_stat_user_tables WHERE relname = 'run_buckets'" "$1"
}

echo "# space after run deletion, $(date -u '+%F %T') UTC"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "harrier: $bin (built $(date -u -r "$bin" '+%F %T') UTC)"
has postgres && echo "PostgreSQL: $("$pg_bin/postgres" --version) on 127.0.0.1:$pg_port, default settings (autovacuum $(sql 'SHOW autovacuum'), autovacuum_naptime $(sql 'SHOW autovacuum_naptime'))"
echo "input: $jtl ($(stat -c %s "$jtl") bytes); $runs runs imported, $((runs - keep)) deleted, $((runs - keep)) imported again"

for b in sqlite postgres; do
  has "$b" || continue
  echo
  echo "## $b"
  if [ "$b" = sqlite ]; then
    db="$work/ret.db"; rm -f "$db" "$db-wal" "$db-shm"
    dbargs=(--db "$db"); state() { sqlite_state "$db"; }
  else
    fresh_pg ret
    dbargs=(--database-url "$(pg_url ret)"); state() { pg_state ret; }
  fi
  ids=()
  t0=$(date +%s%N)
  for i in $(seq "$runs"); do
    "$bin" import "$jtl" "${dbargs[@]}" --name "run-$i" > "$work/out.txt" 2> "$work/err.txt" || { cat "$work/err.txt" >&2; exit 1; }
    ids+=("$(grep -oE 'run [0-9]+' "$work/out.txt" | grep -oE '[0-9]+' | head -n1)")
  done
  echo "1. $runs runs imported ($(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }') s; ids ${ids[*]}): $(state)"
  serve "${dbargs[@]}"
  : > "$work/del.txt"
  for id in "${ids[@]:$keep}"; do
    code=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' -X DELETE "http://127.0.0.1:$PORT/api/v1/runs/$id")
    [ "${code%% *}" = 204 ] || [ "${code%% *}" = 200 ] || { echo "DELETE run $id: HTTP $code" >&2; cat "$work/serve.log" >&2; exit 1; }
    echo "${code#* }" >> "$work/del.txt"
  done
  echo "2. $((runs - keep)) runs deleted through the API (ms per DELETE: $(awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 * 1000 }' "$work/del.txt")), server running: $(state)"
  stop_server
  echo "   server stopped: $(state)"
  for i in $(seq "$((runs - keep))"); do
    "$bin" import "$jtl" "${dbargs[@]}" --name "again-$i" > "$work/out.txt" 2> "$work/err.txt" || { cat "$work/err.txt" >&2; exit 1; }
  done
  echo "3. $((runs - keep)) runs imported again: $(state)"
  if [ "$b" = postgres ]; then drop_pg ret; else rm -f "$db" "$db-wal" "$db-shm"; fi
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
