#!/usr/bin/env python3
"""Write one JMeter 5.x CSV JTL for the compare benchmark, deterministically (stdlib only).

    gen_compare.py OUT.jtl [--samples 1000000] [--seconds 600] [--seed 1] [--shift 1.0]

Content: 5 labels with lognormal response times (median 20 to 400 ms), a 60 s linear ramp
of the request rate then a plateau, ~1 % errors, `--samples` rows spread over `--seconds`
seconds (so ~1,700 samples/s for the defaults). `--shift` multiplies every response time
(1.10 = a run 10 % slower). Rows are written by start time; the same arguments always give
the same bytes.
"""

import argparse
import math
import random
import sys

HEADER = ("timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,"
          "failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect\n")
# label, median ms, sigma, weight
LABELS = [
    ("Home", 20, 0.4, 30),
    ("Search", 120, 0.55, 25),
    ("Product page", 70, 0.5, 25),
    ("Checkout", 400, 0.6, 10),
    ("Login", 150, 0.5, 10),
]
START_MS = 1796000000000  # 2026-11-30 00:53:20 UTC


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shift", type=float, default=1.0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    table = []
    for i, l in enumerate(LABELS):
        table += [i] * l[3]
    mult = [math.exp(rng.gauss(0.0, 1.0)) for _ in range(1 << 14)]
    ramp_s = min(60, a.seconds // 4)
    # Rate r(t) ∝ min(1, (t + 1) / ramp): invert the cumulative share to place sample k.
    plateau = a.seconds - ramp_s / 2.0
    rnd, bits = rng.random, rng.getrandbits
    with open(a.out, "w", encoding="utf-8", newline="\n") as out:
        out.write(HEADER)
        buf = []
        for k in range(a.samples):
            u = (k + rnd()) / a.samples * plateau
            t = math.sqrt(2.0 * u * ramp_s) if u < ramp_s / 2.0 else u + ramp_s / 2.0
            ts = START_MS + int(t * 1000.0)
            name, median, sigma, _ = LABELS[table[bits(7) % len(table)]]
            z = math.log(mult[bits(14)])
            elapsed = int(median * a.shift * math.exp(sigma * z)) + 1
            ok = "true"
            code, msg = "200", "OK"
            if rnd() < 0.01:
                ok, code, msg = "false", "500", "Internal Server Error"
            buf.append(f"{ts},{elapsed},{name},{code},{msg},Users 1-{1 + bits(6)},text,{ok},,"
                       f"{1000 + bits(8)},120,64,64,https://shop.example.test/{k % 97},"
                       f"{elapsed // 2},0,0\n")
            if len(buf) >= 20000:
                out.write("".join(buf))
                buf = []
        out.write("".join(buf))
    print(f"{a.out}: {a.samples} samples over {a.seconds} s (seed {a.seed}, shift {a.shift})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
