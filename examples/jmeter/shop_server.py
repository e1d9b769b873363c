#!/usr/bin/env python3
"""Loopback "shop" test server for the checkout-ramp JMeter example.

Python 3 standard library only. Listens on 127.0.0.1 (never another address).

Every request needs one of a small pool of shared "workers" (a semaphore,
default 2) for its service time, like a backend with a fixed-size DB
connection pool. While few users are active a request finds a free worker at
once; once the offered load exceeds the pool, requests queue for a worker and
response times grow with the number of users: the run shows saturation.

    GET  /                      Home            worker 15-40 ms
    GET  /search?q=..&filter=.. Search          worker 20-50 ms; ~1.5 % of the
                                                answers are a 200 "degraded" page
                                                that fails the plan's assertion
    GET  /product/<id>          Product page    worker 15-40 ms
    POST /cart                  Add to cart     worker 15-40 ms; ~2 % HTTP 500
    POST /checkout              Checkout        worker 30-60 ms
    POST /login                 Login           worker 15-40 ms (form user/password)
    GET  /report                Report (slow)   worker 40-80 ms, then 300-700 ms
                                                of rendering outside the pool
    anything else               404

Usage: shop_server.py [--port 8098] [--workers 2] [--seed 42]
"""

import argparse
import json
import random
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class Shop:
    def __init__(self, workers, seed):
        self.pool = threading.BoundedSemaphore(workers)
        self.rng = random.Random(seed)
        self.rng_lock = threading.Lock()
        self.lock = threading.Lock()
        self.inflight = 0
        self.max_inflight = 0
        self.served = 0

    def uniform(self, lo, hi):
        with self.rng_lock:
            return self.rng.uniform(lo, hi)

    def chance(self, p):
        with self.rng_lock:
            return self.rng.random() < p

    def work(self, lo_ms, hi_ms):
        """Hold one shared worker for a service time in [lo_ms, hi_ms]."""
        service = self.uniform(lo_ms, hi_ms) / 1000.0
        with self.pool:
            time.sleep(service)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real app server
    server_version = "shop/1.0"
    sys_version = ""

    def log_message(self, fmt, *args):  # quiet: JMeter's JTL is the record
        pass

    def _send(self, code, body, ctype="application/json"):
        data = body.encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", ctype + "; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n).decode("utf-8", "replace") if n else ""

    def _dispatch(self):
        shop = self.server.shop
        with shop.lock:
            shop.inflight += 1
            shop.max_inflight = max(shop.max_inflight, shop.inflight)
        try:
            self._route(shop)
        finally:
            with shop.lock:
                shop.inflight -= 1
                shop.served += 1

    def _route(self, shop):
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        m = self.command
        if m == "GET" and path == "/":
            shop.work(15, 40)
            self._send(200, "<html><body><h1>Shop</h1>" + "<p>featured</p>" * 40
                       + "</body></html>", "text/html")
        elif m == "GET" and path == "/search":
            shop.work(20, 50)
            q = query.get("q", [""])[0]
            if shop.chance(0.015):
                body = {"status": "degraded", "query": q, "results": []}
            else:
                n = int(shop.uniform(3, 20))
                body = {"status": "ok", "results": [
                    {"id": i, "name": "%s %d" % (q, i), "price": 9.5 + i} for i in range(n)]}
            # json.dumps default separators give `"status": "ok", "results"`,
            # the exact text the plan's Response Assertion looks for.
            self._send(200, json.dumps(body))
        elif m == "GET" and path.startswith("/product/"):
            shop.work(15, 40)
            pid = path.rsplit("/", 1)[-1]
            self._send(200, "<html><body><h1>Product %s</h1>%s</body></html>"
                       % (pid, "<p>details</p>" * 120), "text/html")
        elif m == "POST" and path == "/cart":
            self._read_body()
            shop.work(15, 40)
            if shop.chance(0.02):
                self._send(500, json.dumps({"error": "cart service unavailable"}))
            else:
                self._send(200, json.dumps({"status": "ok", "items": int(shop.uniform(1, 6))}))
        elif m == "POST" and path == "/checkout":
            self._read_body()
            shop.work(30, 60)
            self._send(200, json.dumps({"status": "ok", "order": int(shop.uniform(1e5, 1e6))}))
        elif m == "POST" and path == "/login":
            form = parse_qs(self._read_body())
            shop.work(15, 40)
            user = form.get("user", ["?"])[0]
            self._send(200, json.dumps({"status": "ok", "user": user}))
        elif m == "GET" and path == "/report":
            shop.work(40, 80)
            time.sleep(shop.uniform(300, 700) / 1000.0)  # rendering, outside the pool
            self._send(200, "<html><body><table>" + "<tr><td>row</td><td>42</td></tr>" * 400
                       + "</table></body></html>", "text/html")
        else:
            if m == "POST":
                self._read_body()
            self._send(404, json.dumps({"error": "not found"}))

    do_GET = _dispatch
    do_POST = _dispatch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8098)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.shop = Shop(args.workers, args.seed)

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # generate.sh stops us with SIGTERM
    print("shop_server: http://127.0.0.1:%d/ workers=%d" % (args.port, args.workers), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        s = srv.shop
        print("shop_server: served %d requests, max in flight %d" % (s.served, s.max_inflight),
              flush=True)


if __name__ == "__main__":
    main()
