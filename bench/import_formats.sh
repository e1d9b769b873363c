#!/usr/bin/env bash
# Import speed per load-test format: `harrier import FILE --db NEW.db` on a generated file of
# REQUESTS requests per format (bench/gen_loadtest.py; kept in bench/out/), RUNS runs each
# (fresh database every run), page cache warmed first. Wall time from date +%s%N, peak RSS
# and CPU from GNU time -v. Prints a Markdown table of medians (RSS: the largest run).
#   bench/import_formats.sh [--runs 3] [--requests 1000000] [--formats "gatling k6 hey taurus jmeter-xml"]
# HARRIER=path/to/harrier (default target/release/harrier). Needs GNU time (apt-get install time).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
runs=3 requests=1000000 formats="gatling k6 hey taurus jmeter-xml"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2;; --requests) requests="$2"; shift 2;;
    --formats) formats="$2"; shift 2;; *) echo "unknown $1" >&2; exit 2;;
  esac
done
harrier="${HARRIER:-$root/target/release/harrier}"
out="$here/out"; mkdir -p "$out"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
: > "$work/results.tsv"
for fmt in $formats; do
  file="$out/imp-$requests.$fmt"
  if [ ! -f "$file" ]; then
    echo "generating $file…" >&2
    python3 "$here/gen_loadtest.py" "$fmt" "$file" --requests "$requests"
  fi
  cat "$file" > /dev/null
  for run in $(seq "$runs"); do
    rm -f "$work"/i.db*
    t0="$(date +%s%N)"
    /usr/bin/time -v -o "$work/time.txt" "$harrier" import "$file" --db "$work/i.db" > "$work/out.txt" 2>&1 || { echo "import of $file failed:" >&2; cat "$work/out.txt" >&2; continue; }
    t1="$(date +%s%N)"
    samples="$(grep -oE '— [0-9,]+ samples' "$work/out.txt" | grep -oE '[0-9,]+' | tr -d , | head -1 || true)"
    rejected="$(grep -oiE '[0-9,]+ rejected' "$work/out.txt" | grep -oE '[0-9,]+' | tr -d , | head -1 || true)"
    rss="$(awk -F': ' '/Maximum resident/ {print $2}' "$work/time.txt")"
    cpu="$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {print u+s}' "$work/time.txt")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$fmt" "$run" "$(( (t1 - t0) / 1000 ))" "${samples:-0}" "$rss" "$cpu" \
      "$(stat -c %s "$file")" "${rejected:-0}" "$(cut -d' ' -f1 /proc/loadavg)" >> "$work/results.tsv"
    echo "$(tail -1 "$work/results.tsv")" >&2
  done
done
python3 - "$work/results.tsv" "$runs" "$requests" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
order = []
for r in rows:
    if r[0] not in order: order.append(r[0])
print(f"{int(sys.argv[3]):,} generated requests per format; median of {sys.argv[2]} runs (peak RSS: largest run).\n")
print("| format | file MB | samples imported | seconds | samples/s | MB/s | CPU s | peak RSS MiB | load avg during |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for f in order:
    rs = [r for r in rows if r[0] == f]
    secs = st.median(int(r[2]) / 1e6 for r in rs)
    n = int(rs[0][3]); size = int(rs[0][6]) / 1e6
    loads = sorted(float(r[8]) for r in rs)
    print(f"| {f} | {size:,.0f} | {n:,} | {secs:.2f} | {n/secs:,.0f} | {size/secs:.1f} | {st.median(float(r[5]) for r in rs):.2f} | {max(int(r[4]) for r in rs)/1024:.1f} | {loads[0]:.1f}–{loads[-1]:.1f} |")
PY
