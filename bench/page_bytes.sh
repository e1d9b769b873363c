#!/usr/bin/env bash
# Bytes each console page costs on the wire: the page and the CSS and JS it links, as
# they go out uncompressed and with `Accept-Encoding: br, gzip` (what browsers send).
#
#   bench/page_bytes.sh [--bin target/release/harrier]
#
# Imports examples/ into a fresh database, serves it on loopback and fetches each page
# with curl. Prints one Markdown table.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/target/release/harrier"
while (($#)); do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "no harrier binary at $bin (build it, or pass --bin)" >&2; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/harrier-bytes.XXXXXX")"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$bin" import "$root/examples/checkout-ramp.jtl" "$root/examples/ab-loop.out" --scenario demo --db "$work/h.db" > /dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
HARRIER_LOG=warn "$bin" serve --listen "127.0.0.1:$port" --db "$work/h.db" > "$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" > /dev/null && break; sleep 0.1; done
base="http://127.0.0.1:$port"

# size URL [ENCODING]: bytes received for URL (compressed when ENCODING is given)
size() {
  if [ -n "${2:-}" ]; then curl -s -o /dev/null -H "Accept-Encoding: $2" -w '%{size_download}' "$base$1"
  else curl -s -o /dev/null -w '%{size_download}' "$base$1"; fi
}

echo "| page | HTML bytes (raw → wire) | CSS+JS files | CSS+JS bytes (raw → wire) | total on the wire |"
echo "| --- | ---: | ---: | ---: | ---: |"
for page in /console /console/runs /console/runs/1 /console/compare?runs=1,2 /console/routes /console/alerts /console/scenarios/demo; do
  html_raw=$(size "$page"); html_wire=$(size "$page" "br, gzip")
  mapfile -t assets < <(curl -s "$base$page" | grep -oE '(href|src)="/static/[^"]+\.(css|js)"' | sed -E 's/^(href|src)="//; s/"$//' | sort -u)
  raw=0 wire=0
  for a in "${assets[@]}"; do
    raw=$((raw + $(size "$a"))); wire=$((wire + $(size "$a" "br, gzip")))
  done
  printf '| `%s` | %s → %s | %d | %s → %s | %s |\n' "$page" "$html_raw" "$html_wire" "${#assets[@]}" "$raw" "$wire" "$((html_wire + wire))"
done
