#!/usr/bin/env bash
# Regenerates examples/checkout-ramp.jtl: a real JMeter 2.13 run (about 4 min 40 s)
# against the loopback shop server. See README.md in this folder.
#
#   examples/jmeter/generate.sh [OUT.jtl]        (default: examples/checkout-ramp.jtl)
#
# Environment: JMETER_HOME (default /usr/share/jmeter, Debian's jmeter 2.13 package),
#              SHOP_PORT (default 8098), SHOP_WORKERS (default 2),
#              STEP_SECONDS (default 40; e.g. 3 for a 21 s smoke test).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(realpath -m "${1:-$here/../checkout-ramp.jtl}")"
export JMETER_HOME="${JMETER_HOME:-/usr/share/jmeter}"
export SHOP_PORT="${SHOP_PORT:-8098}"
workers="${SHOP_WORKERS:-2}"

[ -f "$JMETER_HOME/bin/ApacheJMeter.jar" ] || {
  echo "no JMeter at $JMETER_HOME (apt-get install -y jmeter jmeter-http)" >&2; exit 1; }
command -v javac >/dev/null || { echo "javac not found (a JDK 17 is expected)" >&2; exit 1; }

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

CP="$work:$JMETER_HOME/bin/ApacheJMeter.jar:$JMETER_HOME/lib/ext/*:$JMETER_HOME/lib/*"
javac -nowarn -d "$work" -cp "$CP" "$here/CheckoutRamp.java"

python3 "$here/shop_server.py" --port "$SHOP_PORT" --workers "$workers" &
server_pid=$!
python3 - "$SHOP_PORT" <<'EOF'
import socket, sys, time
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit("shop server did not start")
EOF

java -cp "$CP" CheckoutRamp "$out" "log_file=$work/jmeter.log"

kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""

expected='timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect'
[ "$(head -n 1 "$out")" = "$expected" ] || { echo "unexpected header in $out" >&2; exit 1; }
python3 "$here/summarize.py" "$out"
