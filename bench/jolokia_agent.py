#!/usr/bin/env python3
"""A generated Jolokia agent for scrape benchmarks: answers harrier's bulk read (routes,
then processors) for N Camel routes of S steps each, under Camel 4's object names, with
counters that grow with time. `--steps off` answers the processor read with Jolokia's
error for a pattern that matches nothing (an agent whose routes have no step MBeans).
Loopback only.

    bench/jolokia_agent.py --port 9130 --routes 200 --steps-per-route 10 [--steps off]
"""
import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, default=9130)
p.add_argument("--routes", type=int, default=200)
p.add_argument("--steps-per-route", type=int, default=10)
p.add_argument("--steps", choices=["on", "off"], default="on")
a = p.parse_args()
START = time.time()


def counters(rate, mean_ms, phase):
    t = time.time() - START
    total = int(t * rate)
    failed = int(total * 0.01)
    return {
        "ExchangesTotal": total,
        "ExchangesCompleted": total - failed,
        "ExchangesFailed": failed,
        "ExchangesInflight": (total + phase) % 5,
        "TotalProcessingTime": int((total - failed) * mean_ms),
        "MaxProcessingTime": int(mean_ms * 4),
    }


def routes():
    out = {}
    for r in range(a.routes):
        name = f"route-{r:04d}"
        v = {"CamelId": "bench", "RouteId": name, "RouteGroup": f"group-{r % 10}",
             "State": "Started", "FailuresHandled": 0,
             "LastExchangeCompletedTimestamp": int(time.time() * 1000),
             "LastExchangeFailureTimestamp": 0}
        v.update(counters(5 + r % 20, 12, r))
        out[f'org.apache.camel:context=bench,name="{name}",type=routes'] = v
    return {"status": 200, "timestamp": int(time.time()), "value": out,
            "request": {"type": "read", "mbean": "org.apache.camel:context=*,type=routes,name=*"}}


def steps():
    if a.steps == "off":
        return {"status": 404, "error_type": "javax.management.InstanceNotFoundException",
                "error": "javax.management.InstanceNotFoundException : org.apache.camel:context=*,type=processors,name=*"}
    out = {}
    for r in range(a.routes):
        route = f"route-{r:04d}"
        for s in range(a.steps_per_route):
            sid = f"{route}-step{s}"
            level = 1 if s % 3 == 0 else 2
            v = {"CamelId": "bench", "RouteId": route, "ProcessorId": sid,
                 "ProcessorName": "to" if s % 3 else "choice", "Index": s, "Level": level,
                 "ParentId": None, "Destination": f"http://backend/{s}" if s % 3 else None}
            v.update(counters(5 + r % 20, 1 + s, r + s))
            out[f'org.apache.camel:context=bench,name="{sid}",type=processors'] = v
    return {"status": 200, "timestamp": int(time.time()), "value": out,
            "request": {"type": "read", "mbean": "org.apache.camel:context=*,type=processors,name=*"}}


class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps([routes(), steps()]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", a.port), H).serve_forever()
