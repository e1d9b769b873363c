"""A small HTTP service instrumented with the OpenTelemetry Python SDK, under a bounded load.

It serves three routes on 127.0.0.1 (GET /orders/{id} quick, POST /orders slower, GET
/fail answering 500), records every request it serves in the semantic conventions'
`http.server.request.duration` histogram (seconds; `http.request.method`, `http.route`,
`http.response.status_code`, and `error.type` on 5xx), a pool of 4 connections behind
POST /orders (`db.client.connection.*`) and its own CPU time and memory (`process.*`),
and exports them over OTLP/HTTP
protobuf to the endpoint given, every 300 ms while a client thread sends the requests.
At the end it flushes the SDK and prints, as one JSON line, what the SDK recorded per
route: count, failed and sum of seconds.

    python3 otel_service.py ENDPOINT SERVICE TEMPORALITY HISTOGRAM REQUESTS [TOKEN]

TEMPORALITY: cumulative | delta. HISTOGRAM: explicit | exponential.
"""

import json
import os
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource

endpoint, service, temporality, histogram, requests = sys.argv[1:6]
token = sys.argv[6] if len(sys.argv) > 6 else None
requests = int(requests)

headers = {"Authorization": f"Bearer {token}"} if token else None
exporter = OTLPMetricExporter(
    endpoint=endpoint,
    headers=headers,
    preferred_temporality={
        Histogram: AggregationTemporality.DELTA
        if temporality == "delta"
        else AggregationTemporality.CUMULATIVE
    },
)
reader = PeriodicExportingMetricReader(exporter, export_interval_millis=300)
views = []
if histogram == "exponential":
    views.append(
        View(
            instrument_name="http.server.request.duration",
            aggregation=ExponentialBucketHistogramAggregation(),
        )
    )
provider = MeterProvider(
    metric_readers=[reader],
    resource=Resource.create(
        {"service.name": service, "service.instance.id": f"{service}-1"}
    ),
    views=views,
)
meter = provider.get_meter("otel-service-lab")
duration = meter.create_histogram(
    "http.server.request.duration",
    unit="s",
    description="Duration of HTTP server requests.",
    # The semantic conventions' advised bounds (the SDK's own defaults are for ms).
    explicit_bucket_boundaries_advisory=[
        0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10
    ],
)

# A connection pool of 4 in front of POST /orders, measured under the database-client
# conventions (db.client.connection.count by state, .max, .pending_requests); and the
# process's own CPU time and resident memory under the process conventions.
POOL = 4
pool = threading.BoundedSemaphore(POOL)
pool_used = meter.create_up_down_counter("db.client.connection.count", unit="{connection}")
pool_max = meter.create_up_down_counter("db.client.connection.max", unit="{connection}")
pool_pending = meter.create_up_down_counter(
    "db.client.connection.pending_requests", unit="{request}"
)
POOL_NAME = {"db.client.connection.pool.name": "orders-db"}
pool_max.add(POOL, POOL_NAME)
pool_used.add(POOL, {**POOL_NAME, "db.client.connection.state": "idle"})


def cpu_time(options):
    t = os.times()
    from opentelemetry.metrics import Observation

    yield Observation(t.user, {"cpu.mode": "user"})
    yield Observation(t.system, {"cpu.mode": "system"})


def memory_usage(options):
    from opentelemetry.metrics import Observation

    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    yield Observation(resident_pages * os.sysconf("SC_PAGE_SIZE"))


meter.create_observable_counter("process.cpu.time", [cpu_time], unit="s")
meter.create_observable_up_down_counter("process.memory.usage", [memory_usage], unit="By")

recorded = {}
lock = threading.Lock()


def record(method, route, status, seconds):
    attrs = {
        "http.request.method": method,
        "http.route": route,
        "http.response.status_code": status,
    }
    if status >= 500:
        attrs["error.type"] = str(status)
    duration.record(seconds, attrs)
    with lock:
        r = recorded.setdefault(f"{method} {route}", {"count": 0, "failed": 0, "sum_s": 0.0})
        r["count"] += 1
        r["failed"] += 1 if status >= 500 else 0
        r["sum_s"] += seconds


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, method):
        started = time.perf_counter()
        if method == "GET" and self.path.startswith("/orders/"):
            route, status = "/orders/{id}", 200
        elif method == "POST" and self.path == "/orders":
            pool_pending.add(1, POOL_NAME)
            with pool:
                pool_pending.add(-1, POOL_NAME)
                pool_used.add(-1, {**POOL_NAME, "db.client.connection.state": "idle"})
                pool_used.add(1, {**POOL_NAME, "db.client.connection.state": "used"})
                time.sleep(0.004)
                pool_used.add(-1, {**POOL_NAME, "db.client.connection.state": "used"})
                pool_used.add(1, {**POOL_NAME, "db.client.connection.state": "idle"})
            route, status = "/orders", 201
        elif method == "GET" and self.path == "/fail":
            route, status = "/fail", 500
        else:
            route, status = None, 404
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
        if route is not None:
            record(method, route, status, time.perf_counter() - started)

    def do_GET(self):
        self.answer("GET")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.answer("POST")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_address[1]}"


def load():
    for i in range(requests):
        kind = i % 10
        try:
            if kind < 6:
                urllib.request.urlopen(f"{base}/orders/{i}").read()
            elif kind < 9:
                urllib.request.urlopen(
                    urllib.request.Request(f"{base}/orders", data=b"{}", method="POST")
                ).read()
            else:
                urllib.request.urlopen(f"{base}/fail").read()
        except urllib.error.HTTPError:
            pass
        # Spread the load over several exports.
        time.sleep(0.002)


client = threading.Thread(target=load)
client.start()
client.join()
# Every recorded request reaches the exporter before the totals are printed.
provider.force_flush()
provider.shutdown()
server.shutdown()
print(json.dumps(recorded, sort_keys=True), flush=True)
