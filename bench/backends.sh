#!/usr/bin/env bash
# SQLite beside PostgreSQL in one sitting: the same release binary, the same inputs, each
# measurement taken on both backends back to back. See bench/README.md ("Backends").
#
#   bench/backends.sh [--parts 1,2,3,4,5] [--size 1G] [--import-runs 3] [--restarts 5]
#                     [--warm 20] [--route-days 30] [--route-interval-s 10] [--route-reqs 20]
#                     [--alert-routes 10000]
#                     [--alert-ticks 20] [--big-rows 100000000] [--data DIR] [--no-build]
#
# Parts:
#  1  import of a big JTL (gen_jtl.py --size SIZE --seed 1): `harrier import FILE --db X`
#     vs `--database-url postgres://…`, --import-runs runs each, alternating; wall time,
#     samples/s, peak RSS and CPU of harrier (GNU time -v), the whole machine's busy CPU
#     (from /proc/stat: includes the PostgreSQL server's work), database size afterwards
#  2  10-run comparison: 10 runs of 1 M samples (gen_compare.py, as bench/compare.sh) imported
#     into each backend, then `GET /api/v1/compare?runs=1,…,10` on `harrier serve`:
#     per restart (alternating backends) one cold request and --warm warm ones; ms (curl)
#  3  route chart query: bench/route_fill writes --route-days days of scrapes (every
#     --route-interval-s seconds, default 10) of one
#     route into SQLite (as bench/route_query.sh), `harrier migrate` copies it into
#     PostgreSQL; both served at once; per range 1 warm-up + --route-reqs requests of
#     `GET /api/v1/routes/{id}/timeseries`, alternating backends range by range; ms (curl)
#  4  alert evaluation at --alert-routes routes: bench/alerts_eval on a fresh SQLite file and
#     on a fresh PostgreSQL database (--alert-ticks rounds each)
#  5  PostgreSQL only: `gen_jtl.py - --rows N | harrier import - --database-url …` (N =
#     --big-rows), wall time, database growth (pg_database_size before/after), then
#     `GET /api/v1/compare` of that run with the part-1 file's run (same labels), cold and warm
#
# PostgreSQL: a throwaway server (Debian's /usr/lib/postgresql/*/bin: initdb, pg_ctl) on a
# free port of 127.0.0.1, trust authentication, data under DIR, PostgreSQL's default
# settings otherwise (fsync and synchronous_commit on; harrier's SQLite runs WAL with
# synchronous = NORMAL); stopped and removed at exit. As root it runs as `postgres` (runuser).
# Generated inputs stay in DIR (default bench/out/backends; the 1 GiB JTL and ten ~105 MB
# files, the route database); every database is deleted after its part.
# Needs python3, curl, GNU time, PostgreSQL server binaries, psql.
set -euo pipefail

bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$bench")"
parts=1,2,3,4,5 size=1G import_runs=3 restarts=5 warm=20 route_days=30 route_every_s=10 route_reqs=20
alert_routes=10000 alert_ticks=20 big_rows=100000000 data="$bench/out/backends" build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --parts) parts="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --import-runs) import_runs="$2"; shift 2 ;;
    --restarts) restarts="$2"; shift 2 ;;
    --warm) warm="$2"; shift 2 ;;
    --route-days) route_days="$2"; shift 2 ;;
    --route-interval-s) route_every_s="$2"; shift 2 ;;
    --route-reqs) route_reqs="$2"; shift 2 ;;
    --alert-routes) alert_routes="$2"; shift 2 ;;
    --alert-ticks) alert_ticks="$2"; shift 2 ;;
    --big-rows) big_rows="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
has() { [[ ",$parts," == *",$1,"* ]]; }
mkdir -p "$data"
data="$(cd "$data" && pwd)"
[ -x /usr/bin/time ] || { echo "/usr/bin/time missing: apt-get install -y time" >&2; exit 1; }
command -v curl psql > /dev/null || { echo "needs curl and psql" >&2; exit 1; }
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pg_bin/initdb" ] || { echo "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin" >&2; exit 1; }

target="${CARGO_TARGET_DIR:-$root/target}"
harrier="$target/release/harrier"
if [ "$build" = 1 ]; then
  echo "== building harrier (release)" >&2
  (cd "$root" && cargo build --release --locked --quiet)
  if has 3; then (cd "$bench/route_fill" && CARGO_TARGET_DIR="$target" cargo build --release --quiet); fi
  if has 4; then (cd "$bench/alerts_eval" && CARGO_TARGET_DIR="$target" cargo build --release --quiet); fi
fi
[ -x "$harrier" ] || { echo "no $harrier" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/harrier-backends.XXXXXX")"
pg_dir="" servers=()
as=()
cleanup() {
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ -n "$pg_dir" ]; then
    "${as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m fast -w stop > /dev/null 2>&1 || true
    rm -rf "$pg_dir"
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# --- PostgreSQL (throwaway) ---------------------------------------------------------------
pg_dir="$(mktemp -d "$data/pg.XXXXXX")"
if [ "$(id -u)" -eq 0 ]; then chown postgres "$pg_dir"; as=(runuser -u postgres --); fi
"${as[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -A trust -U postgres -E UTF8 > "$pg_dir/initdb.log" 2>&1 \
  || { cat "$pg_dir/initdb.log" >&2; exit 1; }
pg_port=""
for _ in 1 2 3 4 5; do
  p=$((20000 + RANDOM % 40000))
  if "${as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 30 \
    -o "-h 127.0.0.1 -p $p -k $pg_dir" start > /dev/null 2>&1; then pg_port=$p; break; fi
done
[ -n "$pg_port" ] || { cat "$pg_dir/server.log" >&2; exit 1; }
pg_url() { echo "postgres://postgres@127.0.0.1:$pg_port/$1"; }
sql() { PGOPTIONS='-c client_min_messages=warning' psql -h 127.0.0.1 -p "$pg_port" -U postgres -d "${2:-postgres}" -qtAX -c "$1"; }
fresh_pg() { sql "DROP DATABASE IF EXISTS $1" > /dev/null; sql "CREATE DATABASE $1" > /dev/null; }
drop_pg() { sql "DROP DATABASE IF EXISTS $1 WITH (FORCE)" > /dev/null; }
pg_bytes() { sql "SELECT pg_database_size(current_database())" "$1"; }
sqlite_bytes() { local s=0 f; for f in "$1" "$1-wal"; do [ -f "$f" ] && s=$((s + $(stat -c %s "$f"))); done; echo "$s"; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# the busy CPU time of the whole machine so far, in clock ticks (1/100 s): user, nice,
# system, irq, softirq, steal of /proc/stat's first line
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
# nearest-rank percentile P (0–100) of the numbers on stdin, and their median
pct() { sort -g | awk -v p="$1" '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
  r = int(p / 100 * NR); if (r < p / 100 * NR) r++; if (r < 1) r = 1; printf "%.1f\n", v[r] }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
  m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f\n", m }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'; }

# timed CMD...: runs CMD under GNU time -v; sets WALL (s), RSS_KIB, CPU (user + system s),
# MCPU (machine busy s over the same interval); stdout in $work/out.txt
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
samples_of() { grep -oE '— [0-9]+ samples' "$1" | grep -oE '[0-9]+' | head -n1; }
run_id_of() { grep -oE 'run [0-9]+' "$1" | grep -oE '[0-9]+' | head -n1; }

# serve NAME DBARGS...: starts `harrier serve` on a free port; sets PORT_<NAME>
serve() {
  local name="$1" port; shift
  port=$(free_port)
  printf 'listen = "127.0.0.1:%s"\nself_scrape = false\n' "$port" > "$work/$name.toml"
  "$harrier" serve --config "$work/$name.toml" "$@" > "$work/serve-$name.log" 2>&1 &
  servers+=("$!")
  for _ in $(seq 200); do
    if curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"; then
      printf -v "PORT_$name" '%s' "$port"; return 0
    fi
    sleep 0.05
  done
  echo "serve $name did not start:" >&2; cat "$work/serve-$name.log" >&2; exit 1
}
stop_servers() {
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  servers=()
}
# ms URL: curl's time_total of one GET in ms (fails unless 200)
ms() {
  curl -s -o "$work/body" -w '%{http_code} %{time_total}\n' "$1" | awk '{
    if ($1 != 200) { print "HTTP " $1 > "/dev/stderr"; exit 1 }
    printf "%.2f\n", $2 * 1000 }'
}

git_rev="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
[ -z "$(git -C "$root" status --porcelain -- server web static migrations Cargo.toml Cargo.lock 2>/dev/null)" ] ||
  git_rev="$git_rev + uncommitted changes"
echo "# harrier backends benchmark, $(date -u '+%F %T') UTC"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "harrier: $harrier (built $(date -u -r "$harrier" '+%F %T') UTC; tree at $git_rev; $("$harrier" --version 2>/dev/null || echo '?'))"
echo "PostgreSQL: $("$pg_bin/postgres" --version) on 127.0.0.1:$pg_port, default settings (shared_buffers $(sql 'SHOW shared_buffers'), synchronous_commit $(sql 'SHOW synchronous_commit'), fsync $(sql 'SHOW fsync'))"
echo "SQLite: harrier's bundled SQLite (WAL, synchronous = NORMAL), files under $work"

# --- 1. import of a big JTL -----------------------------------------------------------------
jtl="$data/bench-$size.jtl"
need_jtl() {
  if [ ! -s "$jtl" ]; then
    echo "== generating $jtl" >&2
    python3 "$bench/gen_jtl.py" "$jtl.tmp" --size "$size" --seed 1
    mv "$jtl.tmp" "$jtl"
  fi
}
if has 1; then
  need_jtl
  bytes=$(stat -c %s "$jtl")
  echo
  echo "## 1. import of $jtl ($bytes bytes), $import_runs runs per backend, alternating"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  cat "$jtl" > /dev/null
  : > "$work/import.tsv"
  for run in $(seq "$import_runs"); do
    for b in sqlite postgres; do
      if [ "$b" = sqlite ]; then
        db="$work/imp.db"; rm -f "$db" "$db-wal" "$db-shm"
        timed "$harrier" import "$jtl" --db "$db"
        size_b=$(sqlite_bytes "$db"); rm -f "$db" "$db-wal" "$db-shm"
      else
        fresh_pg imp
        timed "$harrier" import "$jtl" --database-url "$(pg_url imp)"
        size_b=$(pg_bytes imp); drop_pg imp
      fi
      n=$(samples_of "$work/out.txt")
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$b" "$run" "$WALL" "$RSS_KIB" "$n" "$CPU" "$MCPU" "$size_b" >> "$work/import.tsv"
      printf 'run %s %-8s %8.3f s wall, harrier CPU %6.2f s, machine CPU %6.2f s, peak RSS %6.1f MiB, %s samples, database %s MB\n' \
        "$run" "$b" "$WALL" "$CPU" "$MCPU" "$(awk -v k="$RSS_KIB" 'BEGIN { print k / 1024 }')" "$n" "$(mb "$size_b")"
    done
  done
  echo
  echo "| backend | samples | seconds (median) | samples/s | peak RSS MiB (harrier) | harrier CPU s (mean) | machine CPU s (mean) | database MB |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for b in sqlite postgres; do
    awk -F'\t' -v b="$b" '$1 == b' "$work/import.tsv" > "$work/imp-$b.tsv"
    med=$(cut -f3 "$work/imp-$b.tsv" | median)
    eval "med_$b=$med"
    awk -F'\t' -v b="$b" -v m="$med" '{ n = $5; if ($4 > rss) rss = $4; cpu += $6; mcpu += $7; sz = $8; k++ }
      END { printf "| %s | %d | %.2f | %.0f | %.1f | %.2f | %.2f | %.1f |\n", b, n, m, n / m, rss / 1024, cpu / k, mcpu / k, sz / 1e6 }' "$work/imp-$b.tsv"
  done
  echo
  echo "PostgreSQL / SQLite import wall time: $(ratio "$med_postgres" "$med_sqlite")"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
fi

# --- 2. 10-run comparison ---------------------------------------------------------------------
cmpdir="$data/compare"
if has 2; then
  mkdir -p "$cmpdir"
  files=()
  for n in $(seq 1 10); do
    f="$cmpdir/run-$n.jtl"
    if [ ! -s "$f" ]; then
      shift_by=1.0; [ "$n" -ge 6 ] && shift_by=1.08
      python3 "$bench/gen_compare.py" "$f.tmp" --samples 1000000 --seconds 600 --seed "$n" --shift "$shift_by"
      mv "$f.tmp" "$f"
    fi
    files+=("$f")
  done
  echo
  echo "## 2. comparison of 10 runs of 1,000,000 samples (gen_compare.py seeds 1–10)"
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  cdb="$work/compare.db"; rm -f "$cdb"*
  fresh_pg cmp
  declare -A imp_ms ids
  for b in sqlite postgres; do
    imp_ms[$b]="" ids[$b]=""
    for f in "${files[@]}"; do
      cat "$f" > /dev/null
      if [ "$b" = sqlite ]; then timed "$harrier" import "$f" --db "$cdb" --scenario shop
      else timed "$harrier" import "$f" --database-url "$(pg_url cmp)" --scenario shop; fi
      imp_ms[$b]+="$(awk -v w="$WALL" 'BEGIN { printf "%.0f", w * 1000 }') "
      ids[$b]+="$(run_id_of "$work/out.txt"),"
    done
    echo "$b: import ms per run: ${imp_ms[$b]}; run ids ${ids[$b]%,}"
  done
  [ "${ids[sqlite]}" = "${ids[postgres]}" ] || echo "NOTE: run ids differ between the backends"
  echo "database: sqlite $(mb "$(sqlite_bytes "$cdb")") MB, postgres $(mb "$(pg_bytes cmp)") MB"
  declare -A cold hot
  for r in $(seq "$restarts"); do
    for b in sqlite postgres; do
      if [ "$b" = sqlite ]; then serve s --db "$cdb"; port=$PORT_s; else serve p --database-url "$(pg_url cmp)"; port=$PORT_p; fi
      url="http://127.0.0.1:$port/api/v1/compare?runs=${ids[$b]%,}"
      c=$(ms "$url"); cold[$b]+="$c "
      w=""; for _ in $(seq "$warm"); do w+="$(ms "$url") "; done
      hot[$b]+="$w"
      stop_servers
      echo "restart $r $b: cold $c ms; warm $w"
    done
  done
  echo
  echo "| backend | import ms per 1 M-sample run (median of 10) | cold ms (median of $restarts restarts) | cold range | warm ms median | warm ms p95 (of $((restarts * warm))) |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: |"
  for b in sqlite postgres; do
    printf '| %s | %s | %s | %s–%s | %s | %s |\n' "$b" \
      "$(tr ' ' '\n' <<< "${imp_ms[$b]}" | grep . | median)" \
      "$(tr ' ' '\n' <<< "${cold[$b]}" | grep . | median)" \
      "$(tr ' ' '\n' <<< "${cold[$b]}" | grep . | sort -g | head -1)" \
      "$(tr ' ' '\n' <<< "${cold[$b]}" | grep . | sort -g | tail -1)" \
      "$(tr ' ' '\n' <<< "${hot[$b]}" | grep . | median)" \
      "$(tr ' ' '\n' <<< "${hot[$b]}" | grep . | pct 95)"
  done
  echo
  for what in cold hot; do
    declare -n arr=$what
    s=$(tr ' ' '\n' <<< "${arr[sqlite]}" | grep . | median); p=$(tr ' ' '\n' <<< "${arr[postgres]}" | grep . | median)
    echo "PostgreSQL / SQLite, $what median: $(ratio "$p" "$s")"
    unset -n arr
  done
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  rm -f "$cdb" "$cdb-wal" "$cdb-shm"
  drop_pg cmp
fi

# --- 3. route chart query ---------------------------------------------------------------------
if has 3; then
  echo
  echo "## 3. route chart query, $route_days days of $route_every_s s scrapes of one route"
  rdb="$data/route-${route_days}d.db"
  rm -f "$rdb" "$rdb-wal" "$rdb-shm"
  timed "$target/release/route_fill" "$rdb" --days "$route_days" --interval-s "$route_every_s"
  echo "route_fill (SQLite, Store::record_scrape, then prune): $(tr '\n' ' ' < "$work/out.txt")(wall $WALL s)"
  fresh_pg routes
  timed "$harrier" migrate --from "sqlite:$rdb" --to "$(pg_url routes)"
  echo "harrier migrate into PostgreSQL: $WALL s; $(tail -n 3 "$work/out.txt" "$work/err.txt" | grep -v '^==' | grep . | tr '\n' ' ')"
  echo "database: sqlite $(mb "$(sqlite_bytes "$rdb")") MB, postgres $(mb "$(pg_bytes routes)") MB"
  serve s --db "$rdb"; serve p --database-url "$(pg_url routes)"
  declare -A rid
  for b in s p; do
    port_var="PORT_$b"
    rid[$b]="$(curl -sf "http://127.0.0.1:${!port_var}/api/v1/routes?window=1m" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')"
  done
  echo "route ids: sqlite ${rid[s]}, postgres ${rid[p]}; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  : > "$work/routes.tsv"
  for range in 30d:2592000000 12d:1036800000 7d:604800000 2d:172800000 24h:86400000 1h:3600000; do
    name="${range%%:*}" span="${range##*:}"
    for b in s p; do
      port_var="PORT_$b"
      now=$(date +%s%3N)
      url="http://127.0.0.1:${!port_var}/api/v1/routes/${rid[$b]}/timeseries?from=$((now - span))&to=$now"
      curl -sf "$url" > "$work/body.json"
      meta="$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n=sum(v is not None for v in d["throughput_per_s"]); print(d["resolution"], len(d["t_ms"]), n)' "$work/body.json")"
      for _ in $(seq "$route_reqs"); do
        printf '%s\t%s\t%s\t%s\n' "$name" "$b" "$(ms "$url")" "$meta" >> "$work/routes.tsv"
      done
    done
  done
  stop_servers
  echo
  echo "| range | resolution (points, non-null) | sqlite median ms | sqlite p95 ms | postgres median ms | postgres p95 ms | PostgreSQL / SQLite (median) |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
  for name in 30d 12d 7d 2d 24h 1h; do
    sm=$(awk -F'\t' -v n="$name" '$1 == n && $2 == "s" { print $3 }' "$work/routes.tsv" | median)
    sp=$(awk -F'\t' -v n="$name" '$1 == n && $2 == "s" { print $3 }' "$work/routes.tsv" | pct 95)
    pm=$(awk -F'\t' -v n="$name" '$1 == n && $2 == "p" { print $3 }' "$work/routes.tsv" | median)
    pp=$(awk -F'\t' -v n="$name" '$1 == n && $2 == "p" { print $3 }' "$work/routes.tsv" | pct 95)
    ms_=$(awk -F'\t' -v n="$name" '$1 == n && $2 == "s" { print $4; exit }' "$work/routes.tsv")
    mp_=$(awk -F'\t' -v n="$name" '$1 == n && $2 == "p" { print $4; exit }' "$work/routes.tsv")
    shown="$ms_"; [ "$ms_" = "$mp_" ] || shown="sqlite $ms_ / postgres $mp_"
    echo "| $name | $shown | $sm | $sp | $pm | $pp | $(ratio "$pm" "$sm") |"
  done
  echo "($route_reqs requests per range and backend after one warm-up, backends alternating range by range; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
  drop_pg routes
fi

# --- 4. alert evaluation --------------------------------------------------------------------
if has 4; then
  echo
  echo "## 4. alert evaluation, $alert_routes routes, $alert_ticks rounds (bench/alerts_eval)"
  adb="$work/alerts.db"; rm -f "$adb"*
  fresh_pg alerts
  for b in sqlite postgres; do
    echo "### $b (load average before: $(cut -d' ' -f1-3 /proc/loadavg))"
    if [ "$b" = sqlite ]; then dbarg="$adb"; else dbarg="$(pg_url alerts)"; fi
    timed "$target/release/alerts_eval" "$dbarg" --routes "$alert_routes" --ticks "$alert_ticks"
    grep -v '^TICK_MS' "$work/out.txt" || true
    echo "TICK_MS: $(grep '^TICK_MS' "$work/out.txt" | awk '{ printf "%s ", $2 }')"
    grep -h 'filled' "$work/err.txt" || true
    echo "(process: wall $WALL s, CPU $CPU s, peak RSS $(awk -v k="$RSS_KIB" 'BEGIN { printf "%.1f", k / 1024 }') MiB; machine CPU $MCPU s)"
    grep '^MEDIAN_MS\|^P95_MS\|^FIRST_TICK_MS\|^SCRAPE_WRITE_MEDIAN_MS' "$work/out.txt" | awk '{ print $1 "\t" $2 }' > "$work/alerts-$b.tsv"
  done
  echo
  echo "| what | sqlite | postgres | PostgreSQL / SQLite |"
  echo "| --- | ---: | ---: | ---: |"
  for k in MEDIAN_MS P95_MS FIRST_TICK_MS SCRAPE_WRITE_MEDIAN_MS; do
    s=$(awk -v k="$k" '$1 == k { print $2 }' "$work/alerts-sqlite.tsv"); p=$(awk -v k="$k" '$1 == k { print $2 }' "$work/alerts-postgres.tsv")
    echo "| $k | $s | $p | $(ratio "$p" "$s") |"
  done
  rm -f "$adb" "$adb-wal" "$adb-shm"
  drop_pg alerts
fi

# --- 5. 10^8 samples into PostgreSQL, on the fly ------------------------------------------
if has 5; then
  need_jtl
  echo
  echo "## 5. $big_rows samples generated on the fly into PostgreSQL"
  fresh_pg big
  timed "$harrier" import "$jtl" --database-url "$(pg_url big)" --scenario big --name partner
  partner=$(run_id_of "$work/out.txt")
  echo "partner run $partner ($jtl, $(samples_of "$work/out.txt") samples) imported in $WALL s"
  before=$(pg_bytes big)
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); database before: $before bytes"
  b0=$(busy_ticks); t0=$(date +%s%N)
  /usr/bin/time -v -o "$work/gen-time.txt" python3 "$bench/gen_jtl.py" - --rows "$big_rows" --seed 2 2> "$work/gen-err.txt" \
    | /usr/bin/time -v -o "$work/imp-time.txt" "$harrier" import - --database-url "$(pg_url big)" --scenario big --name "big-$big_rows" \
      > "$work/out.txt" 2> "$work/err.txt" || { echo "big import failed:" >&2; cat "$work/gen-err.txt" "$work/err.txt" "$work/out.txt" >&2; exit 1; }
  t1=$(date +%s%N); b1=$(busy_ticks)
  after=$(pg_bytes big)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
  n=$(samples_of "$work/out.txt"); big_id=$(run_id_of "$work/out.txt")
  cpu_of() { awk -F': ' '/User time|System time/ { s += $2 } END { printf "%.1f", s }' "$1"; }
  rss_of() { awk -F': ' '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$1"; }
  echo "$(cat "$work/out.txt" | head -c 400)"
  echo "generator: $(cat "$work/gen-err.txt")"
  echo
  echo "| what | value |"
  echo "| --- | ---: |"
  echo "| samples imported | $n |"
  echo "| wall time (generator piped into harrier import), s | $wall |"
  echo "| samples/s | $(awk -v n="$n" -v w="$wall" 'BEGIN { printf "%.0f", n / w }') |"
  echo "| CPU s: generator (python3) / harrier import / whole machine | $(cpu_of "$work/gen-time.txt") / $(cpu_of "$work/imp-time.txt") / $(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.1f", (b - a) / 100 }') |"
  echo "| harrier import peak RSS, MiB | $(rss_of "$work/imp-time.txt") |"
  echo "| database before / after, MB | $(mb "$before") / $(mb "$after") |"
  echo "| database growth, MB | $(mb $((after - before))) |"
  cold_b="" warm_b=""
  for _ in $(seq "$restarts"); do
    serve p --database-url "$(pg_url big)"
    url="http://127.0.0.1:$PORT_p/api/v1/compare?runs=$partner,$big_id"
    cold_b+="$(ms "$url") "
    for _ in $(seq "$warm"); do warm_b+="$(ms "$url") "; done
    stop_servers
  done
  echo "| compare run $partner with run $big_id: cold ms, median of $restarts restarts (all) | $(tr ' ' '\n' <<< "$cold_b" | grep . | median) ($cold_b) |"
  echo "| the same, warm ms: median / p95 of $((restarts * warm)) | $(tr ' ' '\n' <<< "$warm_b" | grep . | median) / $(tr ' ' '\n' <<< "$warm_b" | grep . | pct 95) |"
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  drop_pg big
fi
