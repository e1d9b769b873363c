#!/usr/bin/env bash
# Exposition parser speed: harrier's routes::exposition::parse vs prometheus-parse.
# Builds bench/expo_parse (release), runs it RUNS times (each run: ITERS timed parses per
# input and parser, median kept), prints a Markdown table of the medians over the runs.
#   bench/expo_parse.sh [--runs 3] [--iters 10] [--no-build]
# Inputs: a generated ~100k-sample Camel/Spring exposition, and the public samples in
# $PROM_FIXTURES (default /work/shared/fixtures/public/prometheus), read in place.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
runs=3 iters=10 build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2;; --iters) iters="$2"; shift 2;;
    --no-build) build=0; shift;; *) echo "unknown $1" >&2; exit 2;;
  esac
done
fixtures="${PROM_FIXTURES:-/work/shared/fixtures/public/prometheus}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/out/target}"
if [ "$build" = 1 ]; then (cd "$here/expo_parse" && cargo build --release -q); fi
bin="$CARGO_TARGET_DIR/release/expo_parse"
out="$(mktemp)"; trap 'rm -f "$out"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for i in $(seq "$runs"); do
  "$bin" --iters "$iters" "$fixtures"/*.txt 2>/dev/null | sed "s/^/$i\t/" >> "$out"
  echo "run $i done, load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
python3 - "$out" "$runs" <<'PY'
import sys, statistics as st
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
res, chk, extra, order = {}, {}, {}, []
for r in rows:
    if r[1] == "RESULT":
        inp, parser = r[2], r[3]
        if inp not in order: order.append(inp)
        d = res.setdefault((inp, parser), {"n": int(r[4]), "bytes": int(r[7]), "s": [], "pp_lines": None})
        d["s"].append(float(r[5]))
        if len(r) > 8: d["pp_lines"] = int(r[8])
    elif r[1] == "CHECK" and r[0] == "1":
        chk.setdefault(r[2], []).append((r[3], int(r[4]), int(r[5])))
    elif r[1] == "EXTRA" and r[0] == "1":
        extra[r[2]] = int(r[3])
print(f"Median of {sys.argv[2]} runs (each run: the median of its timed parses).\n")
print("| input | sample lines | MB | harrier ms | harrier samples/s | prometheus-parse ms | prometheus-parse samples/s | harrier ÷ prometheus-parse |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for inp in order:
    h, p = res[(inp, "harrier")], res[(inp, "prometheus-parse")]
    hs, ps = st.median(h["s"]), st.median(p["s"])
    print(f"| {inp} | {h['n']:,} | {h['bytes']/1e6:.2f} | {hs*1e3:.3f} | {h['n']/hs:,.0f} | {ps*1e3:.3f} | {h['n']/ps:,.0f} | {ps/hs:.2f}× |")
print("\nprometheus-parse vs harrier's reading of the same samples (harrier's parse is the reference: "
      "key = name, labels without `le`/`quantile`, value):\n")
print("| input | label values | samples (harrier) | prometheus-parse wrong or missing | of which dropped (no sample at all) |")
print("| --- | --- | ---: | ---: | ---: |")
for inp in order:
    dropped = res[(inp, "harrier")]["n"] - (res[(inp, "prometheus-parse")]["pp_lines"] or 0)
    for cat, total, miss in chk.get(inp, []):
        print(f"| {inp} | {cat} | {total:,} | {miss:,} | |")
    print(f"| {inp} | **total** | {res[(inp,'harrier')]['n']:,} | {sum(c[2] for c in chk.get(inp, [])):,} | {dropped:,} |")
PY
