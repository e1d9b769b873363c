#!/usr/bin/env bash
# An import into PostgreSQL with two harrier binaries in one sitting: the bulk rows written
# by multi-row INSERTs (--old) and by COPY … FROM STDIN (--new). See bench/README.md
# ("COPY on PostgreSQL").
#
#   bench/pg_copy.sh --old BIN --new BIN [--size 1G | --rows N] [--runs 3] [--data DIR]
#
# Input: gen_jtl.py --size SIZE --seed 1 (or --rows N --seed 1), written once to
# DIR/bench-SIZE.jtl (DIR/bench-rows-N.jtl), read into the page cache before the runs.
# Each run, binaries alternating: a fresh database, `BIN import FILE --database-url …` under
# GNU time -v with HARRIER_LOG=harrier::store::postgres::runs=debug, whose "runs stored"
# event gives the store step apart from parsing: draws_ms (bootstrap draws, computed before
# the transaction) and write_ms (the transaction: BEGIN … COMMIT). Recorded: wall time,
# harrier's CPU (user + system), the machine's busy CPU (includes the PostgreSQL server's
# work), database size, and an md5 over every stored bucket, statistics, error and
# rejected row (without run ids), which must be the same for both binaries.
# PostgreSQL: a throwaway server (bench/pg_throwaway.sh), default settings.
# Needs python3, GNU time, PostgreSQL server binaries, psql.
set -euo pipefail

bench="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
old="" new="" size=1G rows="" runs=3 data="$bench/out"
while [ $# -gt 0 ]; do
  case "$1" in
    --old) old="$2"; shift 2 ;;
    --new) new="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --rows) rows="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -x "$old" ] && [ -x "$new" ] || { echo "--old BIN and --new BIN are needed (harrier binaries)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time missing: apt-get install -y time" >&2; exit 1; }
mkdir -p "$data"
data="$(cd "$data" && pwd)"
. "$bench/pg_throwaway.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/harrier-pg-copy.XXXXXX")"
cleanup() { pg_stop; rm -rf "$work"; }
trap cleanup EXIT
pg_start "$data"

if [ -n "$rows" ]; then jtl="$data/bench-rows-$rows.jtl"; gen=(--rows "$rows"); else jtl="$data/bench-$size.jtl"; gen=(--size "$size"); fi
if [ ! -s "$jtl" ]; then
  echo "== generating $jtl" >&2
  python3 "$bench/gen_jtl.py" "$jtl.tmp" "${gen[@]}" --seed 1
  mv "$jtl.tmp" "$jtl"
fi
cat "$jtl" > /dev/null

# md5 of everything an import stores in the bulk tables, in a fixed order, without run ids
content_md5() {
  sql "SELECT md5(
     (SELECT string_agg(concat_ws(',', label_ord, start_ms, count, errors, sum_ms, min_ms, max_ms,
        active_users, encode(histogram, 'hex')), ';' ORDER BY label_ord, start_ms) FROM run_buckets)
  || (SELECT string_agg(concat_ws(',', label_ord, label, is_transaction, count, errors, min_ms, mean_ms,
        max_ms, p50_ms, p90_ms, p95_ms, p99_ms, first_start_ms, last_end_ms, window_ms, throughput_rps,
        bytes_received, bytes_sent, md5(distribution), md5(failed_distribution)), ';' ORDER BY label_ord)
        FROM run_stats)
  || coalesce((SELECT string_agg(concat_ws(',', label, response_code, message, count, first_seen_ms,
        last_seen_ms), ';' ORDER BY label, response_code, message) FROM run_errors), '')
  || coalesce((SELECT string_agg(line || ',' || reason, ';' ORDER BY line) FROM run_rejected), ''))" "$1"
}
# a field of the "runs stored" debug event in $work/err.txt (ANSI colours removed)
event() { sed 's/\x1b\[[0-9;]*m//g' "$work/err.txt" | grep 'runs stored' | grep -oE "$1=[0-9.]+" | head -n1 | cut -d= -f2; }

echo "# COPY vs multi-row INSERT on PostgreSQL, $(date -u '+%F %T') UTC"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for b in old new; do
  bin=${!b}
  echo "$b: $bin (built $(date -u -r "$bin" '+%F %T') UTC)"
done
echo "PostgreSQL: $("$pg_bin/postgres" --version) on 127.0.0.1:$pg_port, default settings (shared_buffers $(sql 'SHOW shared_buffers'), synchronous_commit $(sql 'SHOW synchronous_commit'), fsync $(sql 'SHOW fsync'))"
echo "input: $jtl ($(stat -c %s "$jtl") bytes)"
echo
: > "$work/runs.tsv"
for run in $(seq "$runs"); do
  for b in old new; do
    bin=${!b}
    fresh_pg imp
    HARRIER_LOG="warn,harrier::store::postgres::runs=debug" timed "$bin" import "$jtl" --database-url "$(pg_url imp)"
    samples=$(grep -oE '— [0-9]+ samples' "$work/out.txt" | grep -oE '[0-9]+' | head -n1)
    write_ms=$(event write_ms) draws_ms=$(event draws_ms) buckets=$(event buckets)
    size_b=$(pg_bytes imp) md5=$(content_md5 imp)
    drop_pg imp
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$b" "$run" "$WALL" "$CPU" "$MCPU" "$write_ms" "$draws_ms" "$size_b" "$samples" "$buckets" "$md5" >> "$work/runs.tsv"
    printf 'run %s %-3s %8.3f s wall, harrier CPU %6.2f s, machine CPU %6.2f s, store: write %8.1f ms, draws %7.1f ms; %s samples, %s buckets, database %s MB, md5 %s\n' \
      "$run" "$b" "$WALL" "$CPU" "$MCPU" "$write_ms" "$draws_ms" "$samples" "$buckets" "$(mb "$size_b")" "$md5"
  done
done
echo
echo "| binary | runs | wall s (median) | harrier CPU s (mean) | machine CPU s (mean) | store write ms (median) | draws ms (median) | database MB |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for b in old new; do
  awk -F'\t' -v b="$b" '$1 == b' "$work/runs.tsv" > "$work/$b.tsv"
  eval "wall_$b=$(cut -f3 "$work/$b.tsv" | median)"
  eval "write_$b=$(cut -f6 "$work/$b.tsv" | median)"
  eval "draws_$b=$(cut -f7 "$work/$b.tsv" | median)"
  eval "cpu_$b=$(awk -F'\t' '{ s += $4 } END { printf "%.3f", s / NR }' "$work/$b.tsv")"
  eval "mcpu_$b=$(awk -F'\t' '{ s += $5 } END { printf "%.3f", s / NR }' "$work/$b.tsv")"
  w=wall_$b wr=write_$b d=draws_$b c=cpu_$b m=mcpu_$b
  echo "| $b | $runs | ${!w} | ${!c} | ${!m} | ${!wr} | ${!d} | $(mb "$(cut -f8 "$work/$b.tsv" | tail -1)") |"
done
echo
echo "new / old: wall $(ratio "$wall_new" "$wall_old"), harrier CPU $(ratio "$cpu_new" "$cpu_old"), machine CPU $(ratio "$mcpu_new" "$mcpu_old"), store write $(ratio "$write_new" "$write_old")"
if [ "$(cut -f11 "$work/runs.tsv" | sort -u | wc -l)" -eq 1 ]; then
  echo "stored content: the same md5 in every run of both binaries"
else
  echo "STORED CONTENT DIFFERS between runs or binaries (md5 column above)"
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
