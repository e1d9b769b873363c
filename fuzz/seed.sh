#!/usr/bin/env bash
# Seeds fuzz/corpus/ingest from the project's fixtures: each file under 64 KiB, behind the
# byte that picks `auto` (0) and, for line-protocol-looking files, the byte that picks the
# line protocol. Run from anywhere; then `cargo +nightly fuzz run ingest`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=fuzz/corpus/ingest; mkdir -p "$out"
n=$(python3 - <<'PY'
import re
src = open("server/sources/ingest/mod.rs").read()
block = src[src.index("pub const NAMES"):]
block = block[:block.index("];")]
print(len(re.findall(r'"[^"]+"', block)))
PY
)
i=0
while IFS= read -r -d '' f; do
  i=$((i + 1))
  { printf '\x00'; cat "$f"; } > "$out/fixture-$i"
  if grep -qE '^(http_req|jmeter|vus|events)[, ]' "$f" 2>/dev/null; then
    { printf "\\x$(printf %02x "$n")"; cat "$f"; } > "$out/lp-$i"
  fi
done < <(find tests/fixtures examples -type f -size -64k ! -name '*.md' ! -name '*.py' ! -name '*.sh' -print0)
# Line protocol as k6 and JMeter's Backend Listener send it.
{ printf "\\x$(printf %02x "$n")"; cat <<'LP'
vus,testid=checkout value=5 1700000000000000000
http_reqs,expected_response=true,method=GET,name=GET\ /items,status=200,testid=checkout value=1 1700000000100000000
http_req_duration,expected_response=true,method=GET,name=GET\ /items,status=200,testid=checkout value=41.4 1700000000100000000
http_req_duration,expected_response=false,method=GET,name=GET\ /items,status=503,testid=checkout value=12 1700000000900000000
LP
} > "$out/lp-k6"
{ printf "\\x$(printf %02x "$n")"; cat <<'LP'
jmeter,application=shop,transaction=GET\ /slow,statut=all count=12,avg=81.5,min=22.0,max=160.0,hit=12,sb=1200,rb=4560,pct95.0=150.0 1700000005000000000
jmeter,application=shop,transaction=GET\ /slow,statut=ko count=2,avg=2.0 1700000005000000000
jmeter,application=shop,transaction=GET\ /slow,responseCode=500,responseMessage=Internal\ Server\ Error count=2 1700000005000000000
jmeter,application=shop,transaction=internal minAT=3,maxAT=3,meanAT=3,startedT=3,endedT=0 1700000005000000000
events,application=shop,title=ApacheJMeter text="shop ended" 1700000010000000000
LP
} > "$out/lp-jmeter"
echo "$(ls "$out" | wc -l) seeds in $out (line protocol byte: $n)"
