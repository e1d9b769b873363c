#!/usr/bin/env python3
"""Generates N-request load-test result files for bench/import_formats.sh (deterministic).

    python3 bench/gen_loadtest.py FORMAT OUT --requests 1500000 [--seed 1]

FORMAT: gatling (simulation.log, 3.4+ layout: RUN, USER START/END, REQUEST with empty
groups, OK/KO + message), k6 (--out json NDJSON: Metric declarations, then per request
http_reqs, http_req_duration, http_req_failed Points and one iteration_duration Point per
request, like k6 writes; a harrier sample is one http_req_duration Point), hey (CSV,
offsets in seconds; no rows for time-outs, as hey writes), taurus (kpi.jtl CSV as bzt writes it), jmeter-xml (JTL XML with
httpSample elements and a java.net.URL child).
Labels: 8 endpoints; ~2 % errors (500/503, some time-outs); lognormal latencies.
"""
import argparse
import math
import random

LABELS = ["GET /api/orders", "GET /api/orders/{id}", "POST /api/orders", "GET /api/catalog",
          "GET /api/catalog/search", "PUT /api/cart", "POST /api/checkout", "GET /health"]
URLS = ["http://127.0.0.1:8080" + l.split(" ", 1)[1] for l in LABELS]


def requests(n, seed):
    """Yields (start_ms, elapsed_ms, label index, status, ok, bytes, thread) in start order."""
    r = random.Random(seed)
    t = 1796000000000.0
    for i in range(n):
        t += r.expovariate(1 / 0.8)             # ~1,250 requests/s
        k = r.randrange(len(LABELS))
        el = max(1, int(r.lognormvariate(math.log(20 + 10 * k), 0.6)))
        x = r.random()
        if x < 0.012:
            status, ok = 500, False
        elif x < 0.018:
            status, ok = 503, False
        elif x < 0.02:
            status, ok, el = 0, False, 30000     # time-out
        else:
            status, ok = 200, True
        yield int(t), el, k, status, ok, 200 + r.randrange(4000), i % 200 + 1


def gatling(f, n, seed):
    f.write("RUN\tsimulations.CheckoutSimulation\tcheckoutsimulation\t1796000000000\t \t3.9.5\n")
    users = 0
    for start, el, k, status, ok, by, th in requests(n, seed):
        if start // 1000 != users:            # a user starts and ends every second
            users = start // 1000
            f.write(f"USER\tCheckout\tSTART\t{start}\n")
        msg = " " if ok else ("i.g.h.c.i.RequestTimeoutException: Request timeout" if status == 0
                              else f"status.find.in(200,201,202,203,204,205,206,207,208,209,304), but actually found {status}")
        name = LABELS[k].replace(" ", "_")
        f.write(f"REQUEST\t\t{name}\t{start}\t{start + el}\t{'OK' if ok else 'KO'}\t{msg}\n")
        if start % 1000 < 1:
            f.write(f"USER\tCheckout\tEND\t{start + el}\n")


def k6(f, n, seed):
    for m, ty, c in [("http_reqs", "counter", "default"), ("http_req_duration", "trend", "time"),
                     ("http_req_failed", "rate", "default"), ("iteration_duration", "trend", "time")]:
        f.write('{"type":"Metric","data":{"name":"%s","type":"%s","contains":"%s","thresholds":[],"submetrics":null},"metric":"%s"}\n' % (m, ty, c, m))
    import datetime
    for start, el, k, status, ok, by, th in requests(n, seed):
        end = start + el
        ts = datetime.datetime.fromtimestamp(end / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"
        method, path = LABELS[k].split(" ", 1)
        tags = ('{"expected_response":"%s","group":"","method":"%s","name":"%s","proto":"HTTP/1.1","scenario":"default","status":"%d","url":"%s"}'
                % ("true" if ok else "false", method, URLS[k], status, URLS[k]))
        f.write('{"metric":"http_reqs","type":"Point","data":{"time":"%s","value":1,"tags":%s}}\n' % (ts, tags))
        f.write('{"metric":"http_req_duration","type":"Point","data":{"time":"%s","value":%.6f,"tags":%s}}\n' % (ts, el + 0.123456, tags))
        f.write('{"metric":"http_req_failed","type":"Point","data":{"time":"%s","value":%d,"tags":%s}}\n' % (ts, 0 if ok else 1, tags))
        f.write('{"metric":"iteration_duration","type":"Point","data":{"time":"%s","value":%.6f,"tags":{"group":"","scenario":"default"}}}\n' % (ts, el + 1.5))


def hey(f, n, seed):
    f.write("response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n")
    t0 = None
    for start, el, k, status, ok, by, th in requests(n, seed):
        t0 = t0 or start
        if status == 0:
            continue                             # hey's CSV leaves out failed (non-HTTP) requests
        f.write("%.4f,0.0001,0.0000,0.0001,%.4f,0.0000,%d,%.4f\n" % (el / 1000, el / 1000 * 0.9, status or 0, (start - t0) / 1000))


def taurus(f, n, seed):
    f.write("allThreads,timeStamp,label,method,elapsed,bytes,responseCode,responseMessage,success,Latency\n")
    for start, el, k, status, ok, by, th in requests(n, seed):
        method, path = LABELS[k].split(" ", 1)
        rc = status if status else "Non HTTP response code: java.net.SocketTimeoutException"
        rm = "OK" if ok else ("Internal Server Error" if status == 500 else "Service Unavailable" if status == 503 else "Read timed out")
        f.write(f"{th},{start},{path},{method},{el},{by},{rc},{rm},{'true' if ok else 'false'},{max(0, el - 2)}\n")


def jmeter_xml(f, n, seed):
    f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testResults version="1.2">\n')
    for start, el, k, status, ok, by, th in requests(n, seed):
        rc = status if status else "Non HTTP response code: java.net.SocketTimeoutException"
        rm = "OK" if ok else "Internal Server Error" if status == 500 else "Service Unavailable" if status == 503 else "Read timed out"
        f.write(f'<httpSample t="{el}" it="0" lt="{max(0, el - 2)}" ct="1" ts="{start}" s="{"true" if ok else "false"}" lb="{LABELS[k]}" rc="{rc}" rm="{rm}" tn="Users 1-{th}" dt="text" by="{by}" ng="200" na="200">\n'
                f'  <java.net.URL>{URLS[k]}</java.net.URL>\n</httpSample>\n')
    f.write("</testResults>\n")


GEN = {"gatling": gatling, "k6": k6, "hey": hey, "taurus": taurus, "jmeter-xml": jmeter_xml}

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("format", choices=GEN)
    p.add_argument("out")
    p.add_argument("--requests", type=int, default=1_500_000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    with open(a.out, "w", buffering=1 << 20) as f:
        GEN[a.format](f, a.requests, a.seed)
