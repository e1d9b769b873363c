#!/usr/bin/env bash
# Hostile inputs through `harrier import` (issue: every input costs bounded memory and
# time): a 2 GiB gzip bomb (2 MB on disk), a JTL of 100,000 distinct labels (7.5 MB), and
# optionally a big realistic JTL. Each row: exit status, wall seconds, peak RSS (GNU time
# -v) and the database's size afterwards (+ WAL).
#
#   bench/hostile.sh --bin BIN [--name NAME] [--big-size 1G | --big-file FILE.jtl]
#
# --big-file imports an existing JTL as the big one (e.g. bench/gen_jtl.py's, made once
# for several binaries); it is not deleted.
#
# Needs python3, GNU time. Prints Markdown rows; inputs and databases are deleted after.
set -euo pipefail
cd "$(dirname "$0")/.."
bin= name= big= big_file=
while (($#)); do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --big-size) big=$2; shift 2 ;;
    --big-file) big_file=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
name=${name:-$bin}
out=bench/out/hostile; mkdir -p "$out"
trap 'rm -rf "$out"' EXIT

# A JTL header, then one field of 2 GiB of zeros, gzip level 9.
python3 - "$out/bomb.jtl.gz" <<'PY'
import gzip, sys
with gzip.open(sys.argv[1], "wb", compresslevel=9) as f:
    f.write(b"timeStamp,elapsed,label,responseCode,responseMessage,success\n1700000000000,12,")
    chunk = b"0" * (1 << 24)
    for _ in range(128):
        f.write(chunk)
    f.write(b",200,OK,true\n")
PY
# 100,000 labels, one sample each.
python3 - "$out/labels.jtl" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("timeStamp,elapsed,label,responseCode,responseMessage,success\n")
    for i in range(100_000):
        f.write(f"{1_700_000_000_000 + i * 10},{10 + i % 300},GET /api/items/{i:08d}/detail,200,OK,true\n")
PY
if [[ -n $big ]]; then python3 bench/gen_jtl.py "$out/big.jtl" --size "$big" >/dev/null; fi
if [[ -n $big_file ]]; then ln -s "$(realpath "$big_file")" "$out/big.jtl"; big=file; fi

echo
echo "| binary | input | input bytes | exit | wall s | CPU s (user + sys) | peak RSS MiB | database + WAL MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for f in bomb.jtl.gz labels.jtl ${big:+big.jtl}; do
  rm -f "$out"/db*
  start=$(date +%s%N)
  set +e
  /usr/bin/time -v "$bin" import "$out/$f" --db "$out/db" > "$out/import.log" 2> "$out/time.txt"
  code=$?
  set -e
  wall=$(( ($(date +%s%N) - start) / 1000000 ))
  rss=$(awk -F: '/Maximum resident/ {print int($2/1024)}' "$out/time.txt")
  cpu=$(awk -F: '/User time|System time/ {s += $2} END {printf "%.1f", s}' "$out/time.txt")
  dbm=$(du -cm "$out"/db* 2>/dev/null | awk 'END {print $1}')
  printf '| %s | %s | %s | %s | %.1f | %s | %s | %s |\n' "$name" "$f" "$(stat -L -c %s "$out/$f")" "$code" \
    "$(echo "$wall / 1000" | bc -l)" "$cpu" "$rss" "${dbm:-0}"
  grep -m1 -iE "refused|error|samples" "$out/time.txt" "$out/import.log" | sed 's/^/    /' | cut -c1-200 >&2 || true
done
