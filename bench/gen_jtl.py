#!/usr/bin/env python3
"""Write a large, realistic JMeter 5.x CSV JTL, deterministically (python3 stdlib only).

    gen_jtl.py OUT.jtl [--size 1G] [--seed 1]
    gen_jtl.py - --rows 100000000 [--seed 1]     # exactly N records, to standard output

The same --size and --seed always give the same bytes (Python's random.Random is
stable across versions for random()/getrandbits()/gauss() with an int seed).

Content:
- JMeter 5.x default header:
  timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,
  failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect
- 12 HTTP labels (3 with a comma, so written quoted), lognormal latencies per label,
  growing with the number of active threads;
- two thread groups ramping 1 → 150 and 1 → 50 threads over the first 15 % of the rows;
- about 1.5 % errors: HTTP 500/503, 404, assertion failures on 200 responses with quoted
  messages holding commas and doubled quotes (a few with a line break inside the quotes,
  so that record spans two lines), and socket time-outs (`Non HTTP response code: …`);
- rows in the order JMeter writes them: by sample end, while timeStamp is the sample start,
  so timeStamps go slightly backwards now and then.
No transaction-controller rows: every record is one sample.
Rows are written until the file reaches --size (it ends within a few rows past it), or with
--rows N until N records are written (the ramp then spans the first 15 % of N; `-` as OUT
writes to standard output, e.g. piped into `harrier import -`).
"""

import argparse
import math
import random
import sys

HEADER = ("timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,"
          "failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect\n")

BASE = "https://shop.example.test"
# label (CSV-ready), url path, weight, median ms, sigma, bytes, sent bytes
LABELS = [
    ("Home", "/", 14, 45, 0.45, 5230, 118),
    ('"Search, filtered"', "/search?q=shoes&filter=in_stock", 12, 120, 0.55, 18412, 152),
    ("Product page", "/product/{id}", 14, 70, 0.5, 24120, 131),
    ("Product reviews", "/product/{id}/reviews?page=1", 8, 95, 0.6, 9802, 145),
    ("Add to cart", "/cart", 9, 60, 0.5, 412, 388),
    ("View cart", "/cart", 7, 40, 0.45, 3188, 120),
    ('"Checkout, step 1 (address)"', "/checkout/address", 6, 110, 0.5, 2210, 544),
    ('"Checkout, step 2 (payment)"', "/checkout/payment", 5, 240, 0.6, 1710, 612),
    ("Login (POST)", "/login", 4, 150, 0.5, 689, 301),
    ("Static: app.js", "/static/app.4f9c2e.js", 10, 8, 0.7, 182340, 140),
    ("Recommendations API", "/api/v2/recommendations?user={id}", 8, 180, 0.7, 6644, 170),
    ("Report", "/admin/report?range=7d", 3, 900, 0.5, 128800, 160),
]

# (weight, responseCode, responseMessage, failureMessage, kind)
ERRORS = [
    (40, "500", "Internal Server Error", "", "http"),
    (15, "503", "Service Unavailable", "", "http"),
    (10, "404", "Not Found", "", "http"),
    (20, "200", "OK",
     '"Test failed: text expected to contain /""status"": ""ok"", ""items""/"', "assert"),
    (5, "200", "OK",
     '"Assertion failed: expected <200, 201>, got ""degraded""\nat step ""verify cart"""', "assert"),
    (10, "Non HTTP response code: java.net.SocketTimeoutException",
     "Non HTTP response message: Read timed out", "", "timeout"),
]
ERROR_RATE = 0.015
TIMEOUT_MS = 10000


def parse_size(s):
    s = s.strip().upper()
    mult = 1
    for suffix, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if s.endswith(suffix):
            s, mult = s[:-1], m
            break
    return int(float(s) * mult)


def weighted_table(rng, weights, size):
    total = sum(weights)
    table = []
    for i, w in enumerate(weights):
        table += [i] * round(w * size / total)
    while len(table) < size:
        table.append(len(weights) - 1)
    rng.shuffle(table)
    return table[:size]


def generate(path, size, seed, rows_limit=None):
    rng = random.Random(seed)
    TBITS = 14
    TSIZE = 1 << TBITS
    # Per-label tables of lognormal multipliers (median 1) and a label mix table.
    z = [rng.gauss(0.0, 1.0) for _ in range(TSIZE)]
    lab_tab = weighted_table(rng, [l[2] for l in LABELS], TSIZE)
    err_tab = weighted_table(rng, [e[0] for e in ERRORS], 1024)
    labels = []
    for name, path_t, _w, median, sigma, nbytes, sent in LABELS:
        mult = [math.exp(sigma * zi) for zi in z]
        labels.append((name, BASE + path_t, median, mult, nbytes, sent))

    groups = [("Browse", 1, 150), ("Buy", 2, 50)]
    max_total = sum(g[2] for g in groups)
    est_rows = max(1, size // 130) if rows_limit is None else max(1, rows_limit)  # ~130 bytes per row
    ramp_rows = max(1, int(est_rows * 0.15))

    start_ms = 1796000000000                 # 2026-11-29 (UTC), a fixed origin
    end_clock = float(start_ms)
    written = 0
    rows = 0
    rnd = rng.random
    bits = rng.getrandbits
    if rows_limit is not None:
        size = float("inf")                 # stop by rows, not bytes
    if path == "-":
        out_file = open(sys.stdout.fileno(), "w", encoding="utf-8", newline="\n", closefd=False,
                        buffering=1 << 20)
    else:
        out_file = open(path, "w", encoding="utf-8", newline="\n")
    with out_file as out:
        out.write(HEADER)
        written += len(HEADER)
        buf = []
        flush_at = int(max(1, min(20000, (size - written) // 160)))
        while written < size if rows_limit is None else rows < rows_limit:
            # Active threads: linear ramp, then hold.
            frac = min(1.0, rows / ramp_rows)
            active = [max(1, int(g[2] * frac)) for g in groups]
            all_threads = sum(active)
            load = all_threads / max_total   # 0..1, drives latency growth
            # Throughput grows with threads: mean gap between sample ends.
            end_clock += (rnd() * 2.0) * (40.0 / all_threads + 0.1)
            g = 0 if rnd() < 0.75 else 1
            gname, gnum, _ = groups[g]
            thread = f"{gname} {gnum}-{1 + bits(16) % active[g]}"
            li = lab_tab[bits(TBITS)]
            name, url, median, mult, nbytes, sent = labels[li]
            elapsed = int(median * (1.0 + 1.5 * load * load) * mult[bits(TBITS)]) + 1
            if "{id}" in url:
                url = url.replace("{id}", str(1 + bits(12)))
            connect = 0 if rnd() < 0.97 else 1 + bits(5)
            latency = min(elapsed, int(elapsed * (0.55 + 0.4 * rnd()))) + connect
            if latency > elapsed:
                latency = elapsed
            nb = nbytes + bits(7)
            code, msg, fmsg, ok, dtype = "200", "OK", "", "true", "text"
            if rnd() < ERROR_RATE:
                _w, code, msg, fmsg, kind = ERRORS[err_tab[bits(10)]]
                ok = "false"
                if kind == "timeout":
                    elapsed = TIMEOUT_MS + bits(6)
                    latency = 0
                    nb = 0
                    dtype = ""
                elif kind == "http":
                    nb = 180 + bits(6)
            end_ms = int(end_clock)
            ts = end_ms - elapsed
            buf.append(f"{ts},{elapsed},{name},{code},{msg},{thread},{dtype},{ok},{fmsg},"
                       f"{nb},{sent},{active[g]},{all_threads},{url},{latency},0,{connect}\n")
            rows += 1
            if len(buf) >= flush_at or rows == rows_limit:
                chunk = "".join(buf)
                out.write(chunk)
                written += len(chunk)
                buf = []
                # Big chunks, smaller near the end so the file stops close to --size.
                flush_at = int(max(1, min(20000, (size - written) // 160)))
        if buf:
            chunk = "".join(buf)
            out.write(chunk)
            written += len(chunk)
    return rows, written


def main():
    ap = argparse.ArgumentParser(description="Write a realistic JMeter 5.x CSV JTL.")
    ap.add_argument("out")
    ap.add_argument("--size", default="1G", help="target size: bytes or with K/M/G suffix (default 1G)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rows", type=int, default=None,
                    help="write exactly this many records instead of stopping at --size")
    args = ap.parse_args()
    rows, written = generate(args.out, parse_size(args.size), args.seed, args.rows)
    print(f"{args.out}: {rows} records, {written} bytes (seed {args.seed})", file=sys.stderr)


if __name__ == "__main__":
    main()
