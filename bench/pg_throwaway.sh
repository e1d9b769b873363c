# Sourced by bench scripts (pg_copy.sh, retention.sh): a throwaway PostgreSQL server and the
# timing helpers, as bench/backends.sh sets them up.
#
#   pg_start DIR      initdb + pg_ctl start under DIR on a free port of 127.0.0.1, trust
#                     authentication, PostgreSQL's default settings (fsync and
#                     synchronous_commit on); sets pg_port, pg_dir. As root it runs as
#                     `postgres` (runuser). pg_stop stops it and removes its directory.
#   pg_url DB         postgres://postgres@127.0.0.1:PORT/DB
#   sql SQL [DB]      psql -qtAX -c SQL
#   fresh_pg DB / drop_pg DB / pg_bytes DB (pg_database_size)
#   timed CMD...      runs CMD under GNU time -v; sets WALL (s), RSS_KIB, CPU (user + system
#                     s of CMD), MCPU (the whole machine's busy CPU s over the same interval);
#                     CMD's stdout in $work/out.txt, stderr in $work/err.txt ($work must exist)
#   mb BYTES          bytes in 10^6, one decimal; median (of stdin); ratio A B (A / B)

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
pg_dir="" pg_port="" pg_as=()

pg_start() {
  [ -x "$pg_bin/initdb" ] || { echo "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin" >&2; exit 1; }
  pg_dir="$(mktemp -d "$1/pg.XXXXXX")"
  if [ "$(id -u)" -eq 0 ]; then chown postgres "$pg_dir"; pg_as=(runuser -u postgres --); fi
  "${pg_as[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U postgres -E UTF8 > "$pg_dir/initdb.log" 2>&1 \
    || { cat "$pg_dir/initdb.log" >&2; exit 1; }
  local p
  for _ in 1 2 3 4 5; do
    p=$((20000 + RANDOM % 40000))
    if "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 30 \
      -o "-h 127.0.0.1 -p $p -k $pg_dir" start > /dev/null 2>&1; then pg_port=$p; return 0; fi
  done
  cat "$pg_dir/server.log" >&2; exit 1
}
pg_stop() {
  if [ -n "$pg_dir" ]; then
    "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w stop > /dev/null 2>&1 || true
    rm -rf "$pg_dir"
    pg_dir=""
  fi
}
pg_url() { echo "postgres://postgres@127.0.0.1:$pg_port/$1"; }
sql() { PGOPTIONS='-c client_min_messages=warning' psql -h 127.0.0.1 -p "$pg_port" -U postgres -d "${2:-postgres}" -qtAX -c "$1"; }
fresh_pg() { sql "DROP DATABASE IF EXISTS $1" > /dev/null; sql "CREATE DATABASE $1" > /dev/null; }
drop_pg() { sql "DROP DATABASE IF EXISTS $1 WITH (FORCE)" > /dev/null; }
pg_bytes() { sql "SELECT pg_database_size(current_database())" "$1"; }

mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
  m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f\n", m }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'; }
# the busy CPU time of the whole machine so far, in clock ticks (1/100 s)
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
timed() {
  local t0 t1 b0 b1
  b0=$(busy_ticks); t0=$(date +%s%N)
  /usr/bin/time -v -o "$work/time.txt" "$@" > "$work/out.txt" 2> "$work/err.txt" || {
    echo "failed: $*" >&2; cat "$work/err.txt" "$work/out.txt" >&2; exit 1; }
  t1=$(date +%s%N); b1=$(busy_ticks)
  WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  RSS_KIB=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$work/time.txt")
  CPU=$(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.2f", s }' "$work/time.txt")
  MCPU=$(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.2f", (b - a) / 100 }')
}
