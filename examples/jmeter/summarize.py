#!/usr/bin/env python3
"""Check a JMeter CSV JTL and print its figures as Markdown (python3 stdlib only).

Definitions follow harrier's (see docs/numbers.md, "Runs"):
- a sample is one row that is not a Transaction Controller row; TX rows (responseMessage
  "Number of samples in transaction : …", empty dataType) are reported per label but
  left out of the totals;
- an error is success=false; error % = errors / count × 100;
- percentile p = nearest rank: the ceil(p/100 · n)-th smallest elapsed;
- span = max(timeStamp + elapsed) − min(timeStamp); throughput = count / span.

Usage: summarize.py FILE.jtl
"""

import csv
import math
import os
import sys
from collections import defaultdict
from datetime import datetime, timezone


def pct(sorted_vals, p):
    return sorted_vals[max(1, math.ceil(p / 100 * len(sorted_vals))) - 1]


def main(path):
    rows = samples = errors = tx_rows = tx_failed = 0
    first = None
    last_end = None
    out_of_order = 0
    prev_ts = None
    by_label = defaultdict(list)      # label -> [elapsed]
    err_by_label = defaultdict(int)
    is_tx_label = {}
    codes = defaultdict(int)
    fail_msgs = defaultdict(int)
    by_users = defaultdict(list)      # allThreads -> [elapsed] (samples only)
    max_threads = 0
    with open(path, newline="", encoding="utf-8") as f:
        rd = csv.DictReader(f)
        for r in rd:
            rows += 1
            ts, el = int(r["timeStamp"]), int(r["elapsed"])
            if prev_ts is not None and ts < prev_ts:
                out_of_order += 1
            prev_ts = ts
            first = ts if first is None else min(first, ts)
            last_end = ts + el if last_end is None else max(last_end, ts + el)
            label, ok = r["label"], r["success"] == "true"
            tx = r["responseMessage"].startswith("Number of samples in transaction") and r["dataType"] == ""
            is_tx_label[label] = tx
            by_label[label].append(el)
            if not ok:
                err_by_label[label] += 1
            if tx:
                tx_rows += 1
                tx_failed += not ok
                continue
            samples += 1
            errors += not ok
            codes[r["responseCode"]] += 1
            if r["failureMessage"]:
                fail_msgs[r["failureMessage"]] += 1
            users = int(r["allThreads"])
            max_threads = max(max_threads, users)
            by_users[users].append(el)

    span_s = (last_end - first) / 1000
    utc = lambda ms: datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    print(f"file: {path} ({os.path.getsize(path):,} bytes, {rows + 1:,} lines incl. header)")
    print(f"rows: {rows:,} = {samples:,} samples + {tx_rows:,} transaction-controller rows")
    print(f"samples: {samples:,}; errors: {errors:,} ({errors * 100 / samples:.2f} %)")
    print(f"TX rows: {tx_rows:,}; failed: {tx_failed:,}")
    print(f"span: {utc(first)} → {utc(last_end)} UTC = {span_s:.3f} s; "
          f"throughput {samples / span_s:.2f} samples/s")
    print(f"rows whose timeStamp is earlier than the previous row's: {out_of_order:,}")
    print(f"max allThreads: {max_threads}")
    print("response codes (samples): " + ", ".join(f"{c or '(empty)'}: {n:,}" for c, n in sorted(codes.items())))
    for m, n in sorted(fail_msgs.items(), key=lambda x: -x[1]):
        print(f"failureMessage ×{n:,}: {m}")
    print()
    print("| label | kind | count | errors | error % | mean ms | p50 | p95 | p99 | max |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label in sorted(by_label, key=lambda l: (is_tx_label[l], l)):
        v = sorted(by_label[label])
        e = err_by_label[label]
        print(f"| {label} | {'TX' if is_tx_label[label] else 'sample'} | {len(v):,} | {e:,} | "
              f"{e * 100 / len(v):.2f} | {sum(v) / len(v):.1f} | {pct(v, 50)} | {pct(v, 95)} | "
              f"{pct(v, 99)} | {v[-1]} |")
    print()
    print("| active users (allThreads) | samples | mean ms | p95 ms |")
    print("| ---: | ---: | ---: | ---: |")
    for users in sorted(by_users):
        v = sorted(by_users[users])
        print(f"| {users} | {len(v):,} | {sum(v) / len(v):.1f} | {pct(v, 95)} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
