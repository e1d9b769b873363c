#!/usr/bin/env bash
# Time to a rendered /console/routes page in headless Chromium (through chromedriver's
# WebDriver HTTP API, no client library): per run a new browser session navigates to URL
# (the navigate call returns after the load event), then reads the Navigation Timing entry
# (responseEnd, domContentLoadedEventEnd, loadEventEnd, ms since navigation start), the
# HTML transfer size, the table's row count and the summary text. Prints a Markdown table.
#   bench/route_page.sh URL [--runs 5]
# Needs chromium and chromium-driver (Debian); python3.
set -euo pipefail
url="$1"; shift
runs=5
while [ $# -gt 0 ]; do case "$1" in --runs) runs="$2"; shift 2;; *) echo "unknown $1" >&2; exit 2;; esac; done
port="${DRIVER_PORT:-9515}"
chromedriver --port="$port" >/dev/null 2>&1 &
dpid=$!
trap 'kill $dpid 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/status" >/dev/null && break; sleep 0.1; done
wd() { curl -sf -X "$1" "http://127.0.0.1:$port$2" -H 'content-type: application/json' ${3:+-d "$3"}; }
caps='{"capabilities":{"alwaysMatch":{"goog:chromeOptions":{"binary":"/usr/bin/chromium","args":["--headless","--no-sandbox","--disable-gpu","--disable-dev-shm-usage","--window-size=1400,900"]}}}}'
echo "| run | navigate ms (wall, to load event) | responseEnd ms | DOMContentLoaded ms | load ms | HTML bytes (transfer) | rows | summary | load avg |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"
for run in $(seq "$runs"); do
  sid="$(wd POST /session "$caps" | python3 -c 'import json,sys; print(json.load(sys.stdin)["value"]["sessionId"])')"
  t0=$(date +%s%N)
  wd POST "/session/$sid/url" "{\"url\":\"$url\"}" >/dev/null
  t1=$(date +%s%N)
  js='const n=performance.getEntriesByType("navigation")[0]; return [n.responseEnd, n.domContentLoadedEventEnd, n.loadEventEnd, n.transferSize, n.decodedBodySize, document.querySelectorAll("#routes-table tbody tr").length, (document.querySelector("#routes-summary")||{}).textContent];'
  wd POST "/session/$sid/execute/sync" "$(python3 -c 'import json,sys; print(json.dumps({"script": sys.argv[1], "args": []}))' "$js")" \
    | python3 -c 'import json,sys; v=json.load(sys.stdin)["value"]; print("| '"$run"' | '"$(( (t1 - t0) / 1000000 ))"' | %.0f | %.0f | %.0f | %d | %d | %s | '"$(cut -d" " -f1 /proc/loadavg)"' |" % (v[0], v[1], v[2], v[4], v[5], v[6]))'
  wd DELETE "/session/$sid" >/dev/null
done
