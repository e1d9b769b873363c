#!/usr/bin/env python3
"""A fake Camel service for bench/route_scrape.sh: /metrics exposes N Camel routes
(camel-micrometer names, Prometheus text 0.0.4), each with exchanges counters (total,
failed, succeeded), an inflight gauge, and camel_route_policy_seconds as a 10-bucket
histogram (+Inf, _count, _sum) plus _max. Every request advances every counter, so each
scrape sees new values; with --idle F the first F of the routes (0…1) never move (idle
routes: their counters stay put, inflight 0).

    python3 bench/route_metrics_server.py --port 9109 --routes 1000 [--idle 0.5]
"""
import argparse
import random
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LE = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "+Inf"]


class State:
    def __init__(self, n, idle=0.0):
        self.n = n
        self.idle = int(n * idle)
        self.rng = random.Random(1)
        self.total = [0] * n
        self.failed = [0] * n
        self.sum = [0.0] * n
        self.buckets = [[0] * len(LE) for _ in range(n)]
        self.requests = 0

    def advance(self):
        r = self.rng
        for i in range(self.idle, self.n):
            ex = r.randint(50, 150)
            fl = 1 if r.random() < 0.3 else 0
            self.total[i] += ex
            self.failed[i] += fl
            self.sum[i] += ex * 0.04 * (0.5 + r.random())
            b = self.buckets[i]
            cum = 0
            for k in range(len(LE) - 1):
                cum = min(ex, cum + int(ex * 0.18 * r.random()))
                b[k] += cum
            b[-1] += ex

    def render(self):
        out = []
        a = out.append
        labels = ['camelContext="camel-%d",routeId="route-%04d",serviceName="MicrometerRoutePolicyService"'
                  % (i % 4 + 1, i) for i in range(self.n)]
        for fam, vals in (("camel_exchanges_total", self.total),
                          ("camel_exchanges_failed_total", self.failed)):
            a("# HELP %s exchanges\n# TYPE %s counter\n" % (fam, fam))
            for i in range(self.n):
                a('%s{%s} %d.0\n' % (fam, labels[i], vals[i]))
        a("# HELP camel_exchanges_succeeded_total exchanges\n# TYPE camel_exchanges_succeeded_total counter\n")
        for i in range(self.n):
            a('camel_exchanges_succeeded_total{%s} %d.0\n' % (labels[i], self.total[i] - self.failed[i]))
        a("# HELP camel_exchanges_inflight inflight\n# TYPE camel_exchanges_inflight gauge\n")
        for i in range(self.n):
            a('camel_exchanges_inflight{%s} %d.0\n' % (labels[i], 0 if i < self.idle else self.rng.randint(0, 8)))
        a("# HELP camel_route_policy_seconds route\n# TYPE camel_route_policy_seconds histogram\n")
        for i in range(self.n):
            b = self.buckets[i]
            for k, le in enumerate(LE):
                a('camel_route_policy_seconds_bucket{%s,le="%s"} %d.0\n' % (labels[i], le, b[k]))
            a('camel_route_policy_seconds_count{%s} %d.0\n' % (labels[i], self.total[i]))
            a('camel_route_policy_seconds_sum{%s} %.6f\n' % (labels[i], self.sum[i]))
        a("# HELP camel_route_policy_seconds_max route\n# TYPE camel_route_policy_seconds_max gauge\n")
        for i in range(self.n):
            a('camel_route_policy_seconds_max{%s} %.6f\n' % (labels[i], 0.2 + 2 * self.rng.random()))
        return "".join(out).encode()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=9109)
    p.add_argument("--routes", type=int, default=1000)
    p.add_argument("--idle", type=float, default=0.0, help="share of routes that never move (0-1)")
    args = p.parse_args()
    state = State(args.routes, args.idle)

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            state.advance()
            state.requests += 1
            body = state.render()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), H).serve_forever()


if __name__ == "__main__":
    main()
