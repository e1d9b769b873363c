#!/usr/bin/env bash
# api_snapshot.sh — prove that a refactor did not change what harrier answers.
#
# Drives a harrier binary through a fixed script of inputs — result files imported
# (JMeter CSV/XML, ab, k6, Gatling, Locust, hey, wrk; three runs of scenario "shop"), a
# live run streamed over the line protocol, a fixed Prometheus exposition scraped, a
# target taken down, alert rules, a silence and a channel created — then saves the
# answer of every GET endpoint of the API (several query strings each), every console
# page and every static file they link, one file per request (status, content type,
# body). What differs by nature between two runs (wall-clock times, scrape durations,
# ports, series that grow with time) is replaced by placeholders: see "normalisation"
# in the Python part below. Two binaries that behave the same give identical snapshots.
#
#   scripts/api_snapshot.sh snapshot BIN OUTDIR            # one snapshot into OUTDIR (new or empty)
#   scripts/api_snapshot.sh compare  BIN_BEFORE BIN_AFTER  # snapshot both and diff them
#   scripts/api_snapshot.sh diff     OUTDIR_A OUTDIR_B     # diff two saved snapshots
#
# e.g.  scripts/api_snapshot.sh compare /tmp/harrier-before/harrier target/release/harrier
#
# compare and diff print one line per request (same / DIFFERENT), the first lines of
# each difference, then "N same, M different"; exit 0 when all are the same, 1 when one
# differs, 2 when a snapshot could not be taken.
#
# Needs bash, python3 (standard library only) and the repository's fixtures
# (tests/fixtures, examples; HARRIER_REPO=/path reads them from another checkout).
# Both servers (harrier, python3 -m http.server for the exposition) listen on 127.0.0.1
# on free ports; every wait is bounded; both are stopped on exit, whatever happens.
# API_SNAPSHOT_KEEP=1 keeps the temp dirs (server log, database; compare's snapshots,
# which are kept anyway, and named, when they differ). A snapshot takes ~10 s.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF="$SCRIPT_DIR/$(basename "${BASH_SOURCE[0]}")"
REPO=${HARRIER_REPO:-$(cd "$SCRIPT_DIR/.." && pwd)}

usage() {
    sed -n '2,29p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# A TCP port on 127.0.0.1 that is free right now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# ---------------------------------------------------------------------------------------
# The fixed Prometheus exposition the server scrapes: two HTTP handlers (counter with
# 5xx, histogram) and a few process gauges. It never changes, so every rate is 0 and
# every figure is the same in both runs; uptime is a gauge (not a start time, which
# harrier would turn into an uptime that grows with the wall clock).
write_exposition() {
    cat >"$1" <<'EOF'
# HELP shop_http_requests_total Requests handled, by handler and status.
# TYPE shop_http_requests_total counter
shop_http_requests_total{method="GET",handler="/orders",code="200"} 1200
shop_http_requests_total{method="GET",handler="/orders",code="500"} 12
shop_http_requests_total{method="POST",handler="/checkout",code="200"} 300
shop_http_requests_total{method="POST",handler="/checkout",code="503"} 3
# HELP shop_request_duration_seconds Request duration.
# TYPE shop_request_duration_seconds histogram
shop_request_duration_seconds_bucket{method="GET",handler="/orders",le="0.05"} 900
shop_request_duration_seconds_bucket{method="GET",handler="/orders",le="0.25"} 1190
shop_request_duration_seconds_bucket{method="GET",handler="/orders",le="+Inf"} 1212
shop_request_duration_seconds_sum{method="GET",handler="/orders"} 61.5
shop_request_duration_seconds_count{method="GET",handler="/orders"} 1212
shop_request_duration_seconds_bucket{method="POST",handler="/checkout",le="0.05"} 100
shop_request_duration_seconds_bucket{method="POST",handler="/checkout",le="0.25"} 290
shop_request_duration_seconds_bucket{method="POST",handler="/checkout",le="+Inf"} 303
shop_request_duration_seconds_sum{method="POST",handler="/checkout"} 40.25
shop_request_duration_seconds_count{method="POST",handler="/checkout"} 303
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 52428800
# TYPE process_open_fds gauge
process_open_fds 17
# TYPE process_uptime_seconds gauge
process_uptime_seconds 3600
EOF
}

# A second service, "legacy": served at first, then removed (404) by the driver once it
# has been scraped, so its route goes down and the rule LegacyDown fires.
write_legacy_exposition() {
    mkdir -p "$(dirname "$1")"
    cat >"$1" <<'EOF'
# TYPE legacy_http_requests_total counter
legacy_http_requests_total{method="POST",path="/soap/OrderService",code="200"} 50
legacy_http_requests_total{method="POST",path="/soap/OrderService",code="500"} 2
EOF
}

# harrier.toml: no self-scrape (harrier's own /metrics change with every request), one
# scrape target (the exposition, every second), fast alert evaluation, one rule from the
# file (fires when the target "legacy", added through the API, goes down).
write_config() {
    local file=$1 expo_port=$2
    cat >"$file" <<EOF
self_scrape = false

[[targets]]
name = "shop"
url = "http://127.0.0.1:$expo_port/metrics"
kind = "prometheus"
interval_s = 1
timeout_s = 1
labels = { service = "shop", instance = "shop-1" }

[alerts]
evaluation_interval = "1s"

[[alerts.rules]]
name = "LegacyDown"
subject = { labels = { target = "legacy" } }
measure = "target_down"
comparison = ">"
threshold = 0
window = "1m"
for = "2s"
severity = "critical"
summary = "{{ labels.target }} is down"
EOF
}

# ---------------------------------------------------------------------------------------
# The Python side: drives the server and writes the snapshot (mode "drive"), or compares
# two snapshots (mode "diff"). Standard library only.
write_driver() {
    cat >"$1" <<'PYTHON'
import datetime, difflib, hashlib, json, os, re, shlex, subprocess, sys, time
import urllib.error, urllib.parse, urllib.request

# ----- normalisation ------------------------------------------------------------------
# What differs by nature between two runs of the same binary, and is replaced:
#
# 1. Wall-clock instants. Any integer (JSON number, or 13 digits in HTML/CSV/text) that is
#    a unix-ms time inside this snapshot's own span (start - 2 h .. end + 3 h) becomes
#    "<now-ms>", and a "YYYY-MM-DD HH:MM:SS UTC" date in that span "<now-time>":
#    imported_at_ms, created_at_ms/updated_at_ms (targets, rules, channels, silences),
#    last_scrape_ms/last_seen_ms, at_ms of process readings, from_ms/to_ms of ranges
#    that default to "the last hour", t_ms of route/service series, active_since_ms /
#    fired_at_ms of alerts, silence starts/ends, ... The fixtures' own times (2023 and
#    2026-11-29/30) are outside the span, so run times stay compared (and a binary that
#    answered "now" where the other answers a fixture time still differs).
# 2. Numbers derived from the wall clock that are not instants (by key):
WALLCLOCK_KEYS = {
    "last_duration_ms": "how long the last scrape took (network and scheduling)",
}
# 3. Ports: the free ports picked for this run (harrier's, the exposition server's).
# 4. Series that grow with time: route and service series and sparklines hold one point
#    per scrape (or step) since the target was added, so their length depends on how long
#    setup took. In these answers consecutive equal elements of every array are collapsed
#    to one (after 1., all t_ms are equal). The values themselves stay compared.
GROWING_SERIES = [
    r"^/api/v1/routes/\d+/timeseries(\?(?!.*from=).*)?$",   # default range: the last hour
    r"^/api/v1/routes/sparklines",
    r"^/api/v1/services/[^/?]+/timeseries",
    r"^/console/routes/\d+$",          # the page embeds the route's series as JSON
    r"^/console/services/",             # the page embeds the process series as JSON
]
# 5. HTML pages get 1. and 3., their embedded JSON (<script type="application/json">)
#    gets 1.-4., and these (pattern, replacement, why):
HTML_RULES = [
    (r"\b\d+(?:\.\d+)?\s?(?:ms|s|min|m|h|d)\s+ago\b", "<age> ago",
     "ages: time since the last scrape / last seen"),
    (r"(→ (?:now|<now-time> UTC)) \([^)]*\)", r"\1 (<elapsed>)",
     "alert timeline: how long an alert has been pending/firing (pending lasts `for` plus"
     " up to one evaluation interval, so 2 or 3 s here)"),
    (r'(<td class="spark">.*?points=")[^"]*', r"\1<spark>",
     "routes table: 15 min sparkline in 30 s steps; how many steps hold a scrape depends"
     " on when setup crossed a 30 s boundary (the figures are 0 anyway)"),
    (r'(class="tl-tick-label">)[^<]*', r"\1<tick>",
     "alert timeline: axis labels are clock times of the last 1 h / 24 h / 7 d"),
    (r'(<(?:line|rect|text)\b[^>]*class="tl-[^>]*)', None,
     "alert timeline: x, x1, x2, width (%) are positions relative to now"),
    (r'(class="num took" data-value=")[^"]*(">)[^<]*', r"\1<wall-clock>\2<wall-clock>",
     "targets table: how long the last scrape took"),
]
# 6. /metrics (harrier's own): values change with every request and with timing, the
#    exporter prints families and series in hash order, and some label sets depend on
#    timing (harrier_alert_window_reads_total{from="sqlite"} appears or not, depending
#    on how the first alert rounds fell). Kept, sorted: the families (# TYPE lines) and
#    the label sets of harrier_http_requests_total (route template, method, status of
#    every request made here), values dropped.
# -------------------------------------------------------------------------------------

MS_RE = re.compile(r"(?<![0-9])(1[0-9]{12})(?![0-9])")
DATE_RE = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})( UTC)?")


class Normaliser:
    def __init__(self, start_ms, ports):
        self.lo = start_ms - 2 * 3600_000
        self.hi = None  # set when the snapshot ends (end + 3 h)
        self.ports = ports  # {port: placeholder}

    def now_ms(self, v):
        return self.lo <= v <= (self.hi or 10**15)

    def text(self, s):
        for port, name in self.ports.items():
            s = re.sub(r"(?<=:)%d(?![0-9])" % port, name, s)
        s = MS_RE.sub(lambda m: "<now-ms>" if self.now_ms(int(m.group(1))) else m.group(0), s)

        def date(m):
            try:
                t = datetime.datetime.strptime(m.group(1).replace("T", " "), "%Y-%m-%d %H:%M:%S")
            except ValueError:
                return m.group(0)
            ms = int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
            return "<now-time>" + (m.group(2) or "") if self.now_ms(ms) else m.group(0)

        return DATE_RE.sub(date, s)

    def html(self, s, collapse):
        def embedded(m):
            try:
                v = json.loads(m.group(2))
            except ValueError:
                return m.group(0)
            return m.group(1) + json.dumps(self.json(v, collapse=collapse), ensure_ascii=False) + m.group(3)

        s = re.sub(r'(<script type="application/json"[^>]*>)(.*?)(</script>)', embedded, s, flags=re.S)
        s = self.text(s)
        for pattern, repl, _why in HTML_RULES:
            if repl is None:  # positions: every NN.NNN% attribute of the element
                s = re.sub(pattern, lambda m: re.sub(r'="-?[0-9.]+%"', '="<pos>"', m.group(1)), s)
            else:
                s = re.sub(pattern, repl, s)
        return s

    def json(self, v, key=None, collapse=False):
        if isinstance(v, dict):
            return {k: self.json(x, k, collapse) for k, x in v.items()}
        if isinstance(v, list):
            out = [self.json(x, key, collapse) for x in v]
            if collapse:
                out = [x for i, x in enumerate(out) if i == 0 or x != out[i - 1]]
            return out
        if v is None or isinstance(v, bool):
            return v
        if key in WALLCLOCK_KEYS:
            return "<wall-clock>"
        if isinstance(v, int) and self.now_ms(v):
            return "<now-ms>"
        if isinstance(v, float) and v.is_integer() and self.now_ms(int(v)):
            return "<now-ms>"
        if isinstance(v, str):
            return self.text(v)
        return v

    def metrics(self, s):
        out = set()
        for line in s.splitlines():
            if line.startswith("# TYPE "):
                out.add(line)
            elif line.startswith("harrier_http_requests_total{"):
                out.add(re.sub(r"\s+\S+(\s+\d+)?$", "", line))
        return "\n".join(sorted(out)) + "\n"


# ----- HTTP ---------------------------------------------------------------------------
def http(base, method, path, body=None, ctype="application/json", timeout=30):
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("content-type", ctype)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def wait_for(what, fn, timeout_s, every=0.25):
    """Calls fn until it returns something truthy; fails after timeout_s."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except (OSError, ValueError, KeyError) as e:
            last = e
        time.sleep(every)
    sys.exit(f"api_snapshot: timed out after {timeout_s} s waiting for {what} (last: {last!r})")


# ----- the snapshot --------------------------------------------------------------------
class Snapshot:
    def __init__(self, base, out, norm):
        self.base, self.out, self.norm = base, out, norm
        self.index = []  # (file, request) in request order
        self.pending = []  # (file, request, status, headers, body, kind) written at the end

    def slug(self, label):
        s = re.sub(r"[^A-Za-z0-9._=-]+", "_", label.strip("/")).strip("_") or "root"
        s = s[:150]
        name, n = s, 2
        taken = {f for f, _ in self.index}
        while name + ".txt" in taken:
            name, n = f"{s}~{n}", n + 1
        return name + ".txt"

    def call(self, method, path, body=None, ctype="application/json", kind=None):
        """Sends one request and keeps its answer; kind: None (by content type), "hash"
        (static files: size and SHA-256), "metrics" (see normalisation 6.)."""
        status, headers, raw = http(self.base, method, path, body, ctype)
        self.keep(f"{method} {path}", status, headers, raw, kind)
        self.location = {k.lower(): v for k, v in headers.items()}.get("location")
        return status, raw

    def get(self, path, kind=None):
        return self.call("GET", path, kind=kind)

    def get_json(self, path):
        status, raw = self.get(path)
        return json.loads(raw) if status == 200 else None

    def keep(self, request, status, headers, raw, kind=None):
        f = self.slug(request.split(" ", 1)[1] if request.startswith("GET ") else request)
        self.index.append((f, request))
        self.pending.append((f, request, status, headers, raw, kind))

    def render(self, request, status, headers, raw, kind):
        ctype = {k.lower(): v for k, v in headers.items()}.get("content-type", "")
        loc = {k.lower(): v for k, v in headers.items()}.get("location")
        path = request.split(" ", 1)[1]
        if request.startswith("CLI "):
            return f"{request}\n\n{self.norm.text(raw.decode('utf-8', 'replace'))}"
        head = f"{request}\nstatus: {status}\ncontent-type: {ctype}\n"
        if loc:
            head += f"location: {self.norm.text(loc)}\n"
        if kind == "hash":
            return head + f"bytes: {len(raw)}\nsha256: {hashlib.sha256(raw).hexdigest()}\n"
        text = raw.decode("utf-8", "replace")
        if kind == "metrics":
            return head + "\n" + self.norm.metrics(text)
        collapse = any(re.search(p, path) for p in GROWING_SERIES)
        if "text/html" in ctype:
            return head + "\n" + self.norm.html(text, collapse)
        if "json" in ctype and text.strip():
            try:
                v = json.loads(text)
            except ValueError:
                return head + "\n" + self.norm.text(text)
            v = self.norm.json(v, collapse=collapse)
            return head + "\n" + json.dumps(v, indent=1, ensure_ascii=False) + "\n"
        return head + "\n" + self.norm.text(text)

    def write(self):
        self.norm.hi = int(time.time() * 1000) + 3 * 3600_000
        for f, request, status, headers, raw, kind in self.pending:
            with open(os.path.join(self.out, f), "w") as fh:
                fh.write(self.render(request, status, headers, raw, kind))
        with open(os.path.join(self.out, "_index.tsv"), "w") as fh:
            for f, request in self.index:
                fh.write(f"{f}\t{request}\n")


def drive(binary, out, harrier_port, expo_port, repo, expo_dir):
    base = f"http://127.0.0.1:{harrier_port}"
    norm = Normaliser(int(time.time() * 1000), {harrier_port: "<harrier-port>", expo_port: "<expo-port>"})
    snap = Snapshot(base, out, norm)
    fx = os.path.join(repo, "tests", "fixtures")
    ex = os.path.join(repo, "examples")

    wait_for("harrier /healthz", lambda: http(base, "GET", "/healthz", timeout=2)[0] == 200, 60)

    # --- inputs ---------------------------------------------------------------------
    # Result files, imported one at a time in a fixed order (run ids follow that order)
    # through the CLI; three runs of scenario "shop" (the same JMeter plan saved three
    # ways) give compare, trend, baseline and check something to work on.
    imports = [
        (f"{fx}/jmeter/default_props_2.13.jtl", ["--scenario", "shop", "--name", "shop build 1", "--tag", "build=1"]),
        (f"{fx}/jmeter/csv_header_allcols.jtl", ["--scenario", "shop", "--name", "shop build 2", "--tag", "build=2", "--tag", "env=staging"]),
        (f"{fx}/jmeter/results_xml.jtl", ["--scenario", "shop", "--name", "shop build 3", "--tag", "build=3"]),
        (f"{ex}/checkout-ramp.jtl", ["--scenario", "checkout"]),
        (f"{ex}/ab-loop.out", ["--scenario", "ab-loop"]),          # two reports: two runs
        (f"{fx}/k6/points.ndjson.gz", ["--scenario", "k6"]),
        (f"{fx}/edge-cases/EC19/simulation.log", []),                # Gatling
        (f"{fx}/locust/run_stats.csv", []),
        (f"{fx}/hey/flaky.csv", ["--scenario", "hey"]),              # per request, no start time
        (f"{fx}/hey/slow_text.txt", ["--scenario", "hey"]),
        (f"{fx}/wrk/flaky_latency.txt", []),
        (f"{fx}/ab/error_stdout.txt", []),
        (f"{fx}/edge-cases/EC07/input.jtl", ["--name", "cut-off row"]),  # 1 rejected row
        (f"{fx}/edge-cases/EC01/input.jtl", ["--name", "to delete"]),
    ]
    cli_out = []
    for path, args in imports:
        cmd = [binary, "import", path, "--server", base] + args
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            sys.exit(f"api_snapshot: {' '.join(cmd)} took more than 180 s")
        if p.returncode != 0:
            sys.exit(f"api_snapshot: {' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
        shown = shlex.join(["harrier", "import", os.path.relpath(path, repo)] + args)
        cli_out.append(f"$ {shown}\n{p.stdout}")
    snap.keep("CLI harrier import (stdout)", 0, {}, "".join(cli_out).encode(), None)

    # One file through the HTTP import API (raw body).
    with open(f"{fx}/k6/summary-export.json", "rb") as fh:
        snap.call("POST", "/api/v1/runs?scenario=k6&name=k6%20summary&tag=tool=k6&filename=summary-export.json",
                  fh.read(), ctype="application/octet-stream")

    runs = json.loads(http(base, "GET", "/api/v1/runs")[2])["runs"]
    by_name = {r["name"]: r["id"] for r in runs}
    snap.call("DELETE", f"/api/v1/runs/{by_name['to delete']}")
    snap.call("PATCH", f"/api/v1/runs/{by_name['shop build 2']}",
              {"notes": "pool size 20", "tags": {"build": "2", "env": "staging"}})
    snap.call("PUT", "/api/v1/scenarios/shop/baseline", {"run_id": by_name["shop build 1"]})
    snap.call("POST", f"/api/v1/runs/{by_name['shop build 3']}/check",
              {"gates": ["p95<2000ms", "error_rate<70%", "p95 +10%", "throughput -5%"], "baseline": "auto"})

    # A live run: k6 line protocol at fixed past times (so it overlaps no "last hour"),
    # 40 requests over 10 s, every 7th failing, then ended through the API.
    t0 = 1795990000000
    lines = []
    for i in range(40):
        t = t0 + i * 250
        ok = i % 7 != 3
        method, path = [("GET", "/items"), ("POST", "/cart")][i % 2]
        lines.append(f"vus,testid=live-checkout value={1 + i // 10} {t}")
        lines.append(
            f"http_req_duration,expected_response={'true' if ok else 'false'},method={method},"
            f"name={method}\\ {path},status={200 if ok else 500},testid=live-checkout "
            f"value={20 + (i * 37) % 90}.5 {t}")
    snap.call("POST", "/write?db=k6&precision=ms", "\n".join(lines).encode() + b"\n", ctype="text/plain")

    def live_run():
        rs = json.loads(http(base, "GET", "/api/v1/runs")[2])["runs"]
        return next((r for r in rs if r["scenario"] == "live-checkout"), None)

    live = wait_for("the live run to be stored", live_run, 30)
    snap.call("POST", f"/api/v1/runs/{live['id']}/end")
    wait_for("the live run to complete", lambda: (live_run() or {}).get("status") == "complete", 30)

    # A second target through the API, "legacy" (taken down below).
    snap.call("POST", "/api/v1/targets", {
        "name": "legacy", "url": f"http://127.0.0.1:{expo_port}/legacy/metrics", "kind": "prometheus",
        "interval_s": 1, "timeout_s": 1, "labels": {"service": "legacy", "instance": "legacy-1"}})
    # Alerting through the API: a rule, a silence of the LegacyDown alert, a channel
    # (matching nothing, so no notification is ever sent), and a test send (the
    # exposition server answers POST with 501, a fixed delivery error).
    snap.call("POST", "/api/v1/alert-rules", {
        "name": "OrdersSlow", "subject": {"service": "shop", "route": "GET /orders*"},
        "measure": "p95_ms", "comparison": ">", "threshold": 800, "window": "5m", "for": "1m",
        "severity": "warning", "summary": "{{ labels.route }} p95 {{ value }} ms"})
    snap.call("POST", "/api/v1/alert-rules", {
        "name": "CheckoutIdle", "subject": {"service": "shop", "route": "POST /checkout"},
        "measure": "no_exchanges", "comparison": ">", "threshold": 0, "window": "1m",
        "severity": "info", "summary": "no exchanges on {{ labels.route }}"})
    snap.call("POST", "/api/v1/alert-rules/validate", {
        "name": "Bad", "measure": "error_pct", "comparison": ">", "threshold": 250})
    snap.call("POST", "/api/v1/silences", {
        "matchers": [{"name": "alertname", "value": "LegacyDown", "op": "="}],
        "duration": "2h", "comment": "legacy is being retired", "created_by": "api_snapshot"})
    snap.call("POST", "/api/v1/alert-channels", {
        "name": "ops", "kind": "webhook", "url": f"http://127.0.0.1:{expo_port}/hook",
        "matchers": ["severity=never"], "group_wait": "10s"})
    snap.call("POST", "/api/v1/alert-channels/ops/test")

    # Wait for at least two scrapes of each target (a route has figures once it has an
    # interval, i.e. two scrapes), then take "legacy" down (404) and wait for the alerts:
    # CheckoutIdle fires first, LegacyDown (pending for 2 s) second.
    def scraped():
        rs = json.loads(http(base, "GET", "/api/v1/routes")[2])
        return len(rs) == 3 and all(r["throughput_per_s"] is not None for r in rs)

    def firing(rule):
        return lambda: any(a["rule"] == rule and a["state"] == "firing"
                           for a in json.loads(http(base, "GET", "/api/v1/alerts")[2]))

    wait_for("two scrapes of both targets", scraped, 60)
    wait_for("the CheckoutIdle alert to fire", firing("CheckoutIdle"), 60)
    os.remove(os.path.join(expo_dir, "legacy", "metrics"))
    wait_for("the legacy target to be down", lambda: any(
        t["name"] == "legacy" and t["up"] is False
        for t in json.loads(http(base, "GET", "/api/v1/targets")[2])), 60)
    wait_for("the LegacyDown alert to fire", firing("LegacyDown"), 60)

    # --- every GET endpoint -----------------------------------------------------------
    get = snap.get
    get("/healthz")
    get("/")                                  # redirect to /console
    get("/metrics", kind="metrics")
    get("/api/v1/live")                       # websocket only: a plain GET is refused
    get("/api/v1/nope")                       # fallback
    get("/api/v1/alert-rules/validate")       # 405 (POST only)

    runs = snap.get_json("/api/v1/runs")["runs"]
    for r in sorted(runs, key=lambda r: r["id"]):
        rid = r["id"]
        detail = snap.get_json(f"/api/v1/runs/{rid}")
        get(f"/api/v1/runs/{rid}/timeseries")
        get(f"/api/v1/runs/{rid}/distribution")
        get(f"/api/v1/runs/{rid}/errors")
        get(f"/api/v1/runs/{rid}/rejected")
        get(f"/api/v1/runs/{rid}/stats.csv")
        labels = [l["label"] for l in (detail or {}).get("labels", [])]
        if labels:
            q = urllib.parse.quote(labels[0])
            get(f"/api/v1/runs/{rid}/timeseries?label={q}")
            get(f"/api/v1/runs/{rid}/distribution?label={q}")
    shop = sorted(r["id"] for r in runs if r["scenario"] == "shop")
    get(f"/api/v1/runs/{shop[0]}?apdex_t_ms=100")
    get(f"/api/v1/runs/{shop[0]}/stats.csv?apdex_t_ms=100")
    get("/api/v1/runs/999999")
    get("/api/v1/runs/abc")
    get(f"/api/v1/runs/{shop[0]}/timeseries?label=no-such-label")

    ids = ",".join(map(str, shop))
    get(f"/api/v1/compare?runs={ids}")
    get(f"/api/v1/compare?runs={shop[2]},{shop[0]}&min_effect_pct=2")
    ab = sorted(r["id"] for r in runs if r["scenario"] == "ab-loop")
    get(f"/api/v1/compare?runs={ab[0]},{ab[1]}")              # summary-only: no verdicts
    k6 = sorted(r["id"] for r in runs if r["scenario"] == "k6")
    get(f"/api/v1/compare?runs={k6[0]},{k6[1]}")
    get(f"/api/v1/compare?runs={shop[0]}")                    # one run: refused
    get(f"/api/v1/compare?ids={ids}")                          # `ids` is not the parameter
    scenarios = snap.get_json("/api/v1/scenarios")["scenarios"]
    for name in sorted({s["scenario"] for s in scenarios}):
        q = urllib.parse.quote(name, safe="")
        get(f"/api/v1/scenarios/{q}")
        get(f"/api/v1/scenarios/{q}/baseline")
    get("/api/v1/scenarios/shop?min_effect_pct=2")
    get("/api/v1/scenarios/no-such-scenario")
    get("/api/v1/scenarios/no-such-scenario/baseline")

    routes = snap.get_json("/api/v1/routes")
    for qs in ["window=15m", "window=5s", "sort=route&dir=desc", "sort=throughput_per_s&dir=desc",
               "sort=last_exchange_ms", "offset=0&limit=1", "offset=1&limit=1", "offset=0&limit=100",
               "q=orders", "service=shop", "state=idle", "state=down", "sort=nope", "window=2d",
               "limit=abc"]:
        get(f"/api/v1/routes?{qs}")
    route_ids = sorted(r["id"] for r in routes)
    get("/api/v1/routes/sparklines?ids=" + ",".join(map(str, route_ids)))
    get("/api/v1/routes/sparklines?ids=x")
    for rid in route_ids:
        get(f"/api/v1/routes/{rid}")
        get(f"/api/v1/routes/{rid}?window=15m")
        get(f"/api/v1/routes/{rid}/timeseries")
        get(f"/api/v1/routes/{rid}/timeseries?step=30s")
    # A fixed range over the fixture runs: no route data, but the runs that overlap it.
    get(f"/api/v1/routes/{route_ids[0]}/timeseries?from=1795999000000&to=1796010000000")
    get(f"/api/v1/routes/{route_ids[0]}/timeseries?from=10&to=5")
    get("/api/v1/routes/999999")
    get("/api/v1/targets")

    services = snap.get_json("/api/v1/services")
    for s in sorted(x["name"] for x in services):
        q = urllib.parse.quote(s, safe="")
        get(f"/api/v1/services/{q}")
        get(f"/api/v1/services/{q}/timeseries")
    get("/api/v1/services/shop/timeseries?instance=shop-1")
    get("/api/v1/services/no-such-service")

    get("/api/v1/alerts")
    get("/api/v1/alerts/history")
    get("/api/v1/alerts/history?rule=LegacyDown&limit=1")
    get(f"/api/v1/alerts/history?route_id={route_ids[0]}")
    get(f"/api/v1/alerts/history?run_id={shop[0]}")
    get("/api/v1/alerts/history?limit=0")
    rules = snap.get_json("/api/v1/alert-rules")
    for name in sorted(r["rule"]["name"] if "rule" in r else r["name"] for r in rules):
        get(f"/api/v1/alert-rules/{urllib.parse.quote(name, safe='')}")
    get("/api/v1/alert-rules/NoSuchRule")
    get("/api/v1/silences")
    channels = snap.get_json("/api/v1/alert-channels")
    for name in sorted(c["channel"]["name"] for c in channels):
        get(f"/api/v1/alert-channels/{urllib.parse.quote(name, safe='')}")
    get("/api/v1/alert-channels/no-such-channel")

    # --- console pages ------------------------------------------------------------------
    pages = ["/console", "/console/", "/console/runs", "/console/alerts", "/console/alerts?range=1h",
             "/console/alerts?range=7d", "/console/alerts?range=2y", "/console/routes",
             "/console/routes?q=orders", "/console/routes?sort=route&dir=desc",
             "/console/routes?offset=1&limit=1", "/console/routes?state=down",
             f"/console/compare?runs={ids}", f"/console/compare?runs={shop[2]},{shop[0]}&min_effect_pct=2",
             f"/console/compare?run={shop[2]}&against=baseline",
             f"/console/compare?run={shop[2]}&against=previous",
             f"/console/compare.html?runs={ids}", "/console/compare?runs=1",
             "/console/no-such-page", "/console/runs/999999", "/console/routes/999999",
             "/console/services/no-such-service"]
    pages += [f"/console/runs/{r['id']}" for r in sorted(runs, key=lambda r: r["id"])]
    pages += [f"/console/routes/{rid}" for rid in route_ids]
    pages += [f"/console/services/{urllib.parse.quote(s['name'], safe='')}" for s in services]
    pages += [f"/console/scenarios/{urllib.parse.quote(s['scenario'], safe='')}"
              for s in scenarios]
    statics = set()
    while pages:
        p = pages.pop(0)
        status, raw = get(p)
        statics.update(re.findall(r'(?:href|src)="(/static/[^"?#]+)', raw.decode("utf-8", "replace")))
        if 300 <= status < 400 and snap.location and snap.location.startswith("/console"):
            pages.append(snap.location)  # "compare with baseline / previous" redirect
    for p in sorted(statics) + ["/static/no-such-file.js"]:
        get(p, kind="hash")

    snap.write()
    json_n = sum(1 for f, r in snap.index if r.startswith("GET /api") or r.startswith("GET /healthz"))
    html_n = sum(1 for f, r in snap.index if r.startswith("GET /console") or r == "GET /")
    print(f"api_snapshot: {len(snap.index)} answers saved in {out} "
          f"({json_n} API, {html_n} console pages, {len(statics) + 1} static files, the rest setup)")


# ----- diff -----------------------------------------------------------------------------
def read_index(d):
    with open(os.path.join(d, "_index.tsv")) as fh:
        return [tuple(l.rstrip("\n").split("\t", 1)) for l in fh if l.strip()]


def diff(a, b, show=12):
    ia, ib = read_index(a), read_index(b)
    order = ia + [x for x in ib if x not in ia]
    same = different = 0
    shown = []
    for f, request in order:
        pa, pb = os.path.join(a, f), os.path.join(b, f)
        ta = open(pa).read().splitlines() if os.path.exists(pa) else None
        tb = open(pb).read().splitlines() if os.path.exists(pb) else None
        if ta is not None and ta == tb:
            same += 1
            print(f"same       {request}")
            continue
        different += 1
        print(f"DIFFERENT  {request}")
        if ta is None or tb is None:
            shown.append(f"--- {request}: only in {'B' if ta is None else 'A'}")
        else:
            d = list(difflib.unified_diff(ta, tb, f"A/{f}", f"B/{f}", n=1, lineterm=""))
            shown.append("\n".join(d[:show] + (["  ..."] if len(d) > show else [])))
    for s in shown:
        print(s)
    print(f"{same} same, {different} different")
    return 1 if different else 0


if __name__ == "__main__":
    if sys.argv[1] == "drive":
        binary, out, hp, ep, repo, expo_dir = sys.argv[2:8]
        drive(binary, out, int(hp), int(ep), repo, expo_dir)
    elif sys.argv[1] == "diff":
        sys.exit(diff(sys.argv[2], sys.argv[3]))
PYTHON
}

# ---------------------------------------------------------------------------------------
# snapshot BIN OUTDIR
SERVER_PID=""
EXPO_PID=""
DRIVER_PID=""
WORK=""

# wait_up URL PID TIMEOUT_S: 0 once URL answers 200, 1 if PID exits first, 2 on timeout.
wait_up() {
    python3 - "$@" <<'EOF'
import os, sys, time, urllib.request
url, pid, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    try:
        # an exited child not yet reaped by bash is a zombie: it still passes kill -0
        with open(f"/proc/{pid}/stat") as fh:
            if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                sys.exit(1)
    except FileNotFoundError:
        sys.exit(1)
    time.sleep(0.25)
sys.exit(2)
EOF
}

stop_pid() { # pid: TERM, up to 10 s, then KILL
    local pid=$1 i
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for i in $(seq 1 40); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
        sleep 0.25
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    stop_pid "$DRIVER_PID"
    DRIVER_PID=""
    stop_pid "$SERVER_PID"
    SERVER_PID=""
    stop_pid "$EXPO_PID"
    EXPO_PID=""
    if [ -n "$WORK" ] && [ -z "${API_SNAPSHOT_KEEP:-}" ]; then rm -rf "$WORK"; fi
    WORK=""
}

snapshot() {
    local bin=$1 out=$2
    [ -x "$bin" ] || { echo "api_snapshot: $bin is not an executable" >&2; return 2; }
    bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    if [ -n "$(ls -A "$out")" ]; then
        echo "api_snapshot: $out is not empty" >&2
        return 2
    fi
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/api_snapshot.XXXXXX")
    trap cleanup EXIT
    trap 'echo "api_snapshot: interrupted" >&2; cleanup; exit 130' INT TERM
    mkdir -p "$WORK/expo"
    write_exposition "$WORK/expo/metrics"
    write_legacy_exposition "$WORK/expo/legacy/metrics"
    write_driver "$WORK/driver.py"

    # Free ports are picked, then bound by the servers: if another process took one in
    # between, the server exits at once and the next attempt picks another.
    local expo_port harrier_port attempt rc
    for attempt in 1 2 3; do
        expo_port=$(free_port)
        python3 -m http.server "$expo_port" --bind 127.0.0.1 --directory "$WORK/expo" \
            >"$WORK/expo.log" 2>&1 &
        EXPO_PID=$!
        rc=0; wait_up "http://127.0.0.1:$expo_port/metrics" "$EXPO_PID" 20 || rc=$?
        [ "$rc" -eq 0 ] && break
        stop_pid "$EXPO_PID"; EXPO_PID=""
        [ "$rc" -eq 1 ] || break  # timed out: not a port clash
    done
    [ -n "$EXPO_PID" ] || { echo "api_snapshot: the exposition server did not start" >&2; return 1; }

    write_config "$WORK/harrier.toml" "$expo_port"
    for attempt in 1 2 3; do
        harrier_port=$(free_port)
        rm -f "$WORK"/harrier.db*
        (cd "$WORK" && exec "$bin" serve --listen "127.0.0.1:$harrier_port" --db "$WORK/harrier.db" \
            --config "$WORK/harrier.toml") >"$WORK/serve.log" 2>&1 &
        SERVER_PID=$!
        rc=0; wait_up "http://127.0.0.1:$harrier_port/healthz" "$SERVER_PID" 60 || rc=$?
        [ "$rc" -eq 0 ] && break
        stop_pid "$SERVER_PID"; SERVER_PID=""
        [ "$rc" -eq 1 ] || break
    done
    if [ -z "$SERVER_PID" ]; then
        echo "api_snapshot: harrier did not start:" >&2
        tail -n 20 "$WORK/serve.log" >&2
        return 1
    fi

    # In the background, so that a signal runs the trap at once (bash runs traps only
    # between foreground commands, but during `wait`).
    timeout 900 python3 "$WORK/driver.py" drive "$bin" "$out" "$harrier_port" "$expo_port" \
        "$REPO" "$WORK/expo" &
    DRIVER_PID=$!
    rc=0; wait "$DRIVER_PID" || rc=$?
    DRIVER_PID=""
    if [ "$rc" -ne 0 ]; then
        echo "api_snapshot: the snapshot failed; last lines of the server log:" >&2
        tail -n 20 "$WORK/serve.log" >&2
        return 1
    fi
    cleanup
    trap - EXIT INT TERM
}

diff_dirs() {
    local d tmp
    for d in "$1" "$2"; do
        [ -f "$d/_index.tsv" ] || { echo "api_snapshot: $d is not a snapshot (no _index.tsv)" >&2; return 2; }
    done
    tmp=$(mktemp "${TMPDIR:-/tmp}/api_snapshot_driver.XXXXXX.py")
    write_driver "$tmp"
    local rc=0
    python3 "$tmp" diff "$1" "$2" || rc=$?
    rm -f "$tmp"
    return $rc
}

compare() {
    local before=$1 after=$2 dir rc=0
    dir=$(mktemp -d "${TMPDIR:-/tmp}/api_snapshot_compare.XXXXXX")
    # The snapshots stop their own servers; here only the temp dir is left to remove.
    trap 'echo "api_snapshot: interrupted" >&2; rm -rf "$dir"; exit 130' INT TERM
    echo "api_snapshot: snapshot of $before" >&2
    # Each snapshot in its own process (its own traps; errexit stays on inside).
    "$SELF" snapshot "$before" "$dir/before" >&2 || { echo "api_snapshot: snapshot of $before failed" >&2; rm -rf "$dir"; return 2; }
    echo "api_snapshot: snapshot of $after" >&2
    "$SELF" snapshot "$after" "$dir/after" >&2 || { echo "api_snapshot: snapshot of $after failed" >&2; rm -rf "$dir"; return 2; }
    diff_dirs "$dir/before" "$dir/after" || rc=$?
    if [ "$rc" -ne 0 ] || [ -n "${API_SNAPSHOT_KEEP:-}" ]; then
        echo "api_snapshot: snapshots kept in $dir/before and $dir/after" >&2
    else
        rm -rf "$dir"
    fi
    return $rc
}

case "${1:-}" in
    snapshot) [ $# -eq 3 ] || usage; snapshot "$2" "$3" ;;
    compare) [ $# -eq 3 ] || usage; compare "$2" "$3" ;;
    diff) [ $# -eq 3 ] || usage; diff_dirs "$2" "$3" ;;
    *) usage ;;
esac
