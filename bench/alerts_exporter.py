#!/usr/bin/env python3
"""A local exporter for bench/alerts_eval.sh's Prometheus peer: /metrics exposes N routes
as two counters each (Prometheus text 0.0.4), exchanges and failed exchanges, advanced on
every scrape (1 route in 50 fails 20 % of its exchanges, the rest 0-1 %), so a Prometheus
error-rate rule has the same subjects as harrier's.

    python3 bench/alerts_exporter.py --port 9119 --routes 10000
"""
import argparse
import random
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    def __init__(self, n):
        self.n = n
        self.rng = random.Random(1)
        self.total = [0] * n
        self.failed = [0] * n

    def advance(self):
        r = self.rng
        for i in range(self.n):
            ex = r.randint(20, 120)
            rate = 0.2 if i % 50 == 0 else 0.01 * r.random()
            self.total[i] += ex
            self.failed[i] += round(ex * rate)

    def render(self):
        out = ["# TYPE route_exchanges_total counter"]
        out += [f'route_exchanges_total{{service="orders",route="route-{i}"}} {v}' for i, v in enumerate(self.total)]
        out.append("# TYPE route_failed_exchanges_total counter")
        out += [f'route_failed_exchanges_total{{service="orders",route="route-{i}"}} {v}' for i, v in enumerate(self.failed)]
        return ("\n".join(out) + "\n").encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=9119)
    ap.add_argument("--routes", type=int, default=10000)
    a = ap.parse_args()
    state = State(a.routes)

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            state.advance()
            body = state.render()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    ThreadingHTTPServer(("127.0.0.1", a.port), H).serve_forever()


if __name__ == "__main__":
    main()
