#!/usr/bin/env bash
# The whole test suite: installs what the tests need (openssl, which makes the HTTPS test's
# certificates; Debian's chromium and chromium-driver for the browser tests; prometheus,
# whose own /metrics the route scraper is tested against; prometheus-alertmanager, which
# the alerts test sends to), then runs `cargo test`. `--install-only` stops after the
# install.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
[ -x /usr/bin/prometheus-alertmanager ] || missing+=(prometheus-alertmanager)
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing ${missing[*]} (Debian packages, for the browser, HTTPS, scrape and alerts tests)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

[ "${1:-}" = "--install-only" ] && exit 0

log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --locked "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line over every test binary.
awk '/^test result:/ { p += $4; f += $6; s += $8 } END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
exit "$status"
