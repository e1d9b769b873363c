#!/usr/bin/env bash
# Alerts console cost with many alerts: the time to serve /console/alerts (server render:
# alerts now, 24 h timeline, transitions, rules), a console page carrying the nav badge
# (/console/runs), the alerts JSON and the history filtered by route and time, on a store
# holding ALERTS active alerts and HISTORY history rows over 24 h.
#
#   bench/alerts_console.sh                      # 10,000 alerts, 50,000 history rows
#   ALERTS=1000 HISTORY=5000 bench/alerts_console.sh
#
# Figures: median / max wall time of REPS requests each (curl's time_total, keep-alive off),
# and the response size. Uses target/release/harrier (build it first) or $HARRIER.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${HARRIER:-${CARGO_TARGET_DIR:-target}/release/harrier}
ALERTS=${ALERTS:-10000}
HISTORY=${HISTORY:-50000}
REPS=${REPS:-20}
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release first" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "sqlite3 is needed to seed the store" >&2; exit 2; }

dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$dir/harrier.toml" <<TOML
self_scrape = false
[alerts]
evaluation_interval = "1h"   # one round at start, none while measuring
TOML
"$BIN" serve --listen "127.0.0.1:$port" --db "$dir/h.db" --config "$dir/harrier.toml" >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
sleep 1 # the first evaluation round has run

now=$(($(date +%s%N) / 1000000))
sqlite3 "$dir/h.db" <<SQL
.timeout 5000
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $ALERTS)
INSERT INTO alerts (rule, labels, state, value, active_since_ms, fired_at_ms, keep_firing_since_ms, last_eval_ms)
SELECT CASE WHEN i % 10 = 0 THEN 'RouteErrorRateCritical' ELSE 'RouteErrorRateWarning' END,
       json_object('instance', '10.0.' || (i % 250) || '.1:9100', 'route', '/r' || i,
                   'service', 'svc' || (i % 20), 'source', 'http', 'target', 't' || (i % 250)),
       CASE WHEN i % 4 = 0 THEN 'pending' ELSE 'firing' END, 5 + (i % 50) / 10.0,
       $now - 600000 - i, CASE WHEN i % 4 = 0 THEN NULL ELSE $now - 480000 - i END, NULL, $now
FROM n;
-- HISTORY rows over 24 h: 1,000 alert identities cycling pending → firing → resolved
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $HISTORY)
INSERT INTO alert_history (rule, labels, change, value, at_ms)
SELECT 'RouteErrorRateWarning',
       json_object('instance', '10.0.' || (i % 1000 % 250) || '.1:9100', 'route', '/r' || (i % 1000),
                   'service', 'svc' || (i % 1000 % 20), 'source', 'http', 'target', 't' || (i % 1000 % 250)),
       CASE (i / 1000) % 3 WHEN 0 THEN 'pending' WHEN 1 THEN 'firing' ELSE 'resolved' END,
       6.5, $now - 86400000 + i * (86400000 / $HISTORY)
FROM n;
SQL

measure() { # name url
  local times size
  size=$(curl -fs -o /dev/null -w '%{size_download}' "$2")
  times=$(for _ in $(seq "$REPS"); do curl -fs -o /dev/null -H 'Connection: close' -w '%{time_total}\n' "$2"; done | sort -n)
  printf '| %s | %s | %s | %s |\n' "$1" \
    "$(echo "$times" | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]*1000}')" \
    "$(echo "$times" | tail -1 | awk '{printf "%.1f", $1*1000}')" \
    "$(awk -v b="$size" 'BEGIN {printf "%.0f", b/1024}')"
}
echo "store: $ALERTS active alerts, $HISTORY history rows over 24 h; $REPS requests each; $(nproc) cores"
echo
echo "| request | median ms | max ms | KiB |"
echo "| --- | ---: | ---: | ---: |"
base="http://127.0.0.1:$port"
measure "GET /console/alerts (24 h)" "$base/console/alerts"
measure "GET /console/alerts?range=7d" "$base/console/alerts?range=7d"
measure "GET /console/runs (nav badge)" "$base/console/runs"
measure "GET /api/v1/alerts" "$base/api/v1/alerts"
measure "GET /api/v1/alerts/history?from=-1h" "$base/api/v1/alerts/history?from=$((now - 3600000))&limit=5000"
