-- wrk reporter: one line with p50/p95/p99 latency (ms) and throughput (req/s).
done = function(summary, latency, requests)
  io.write(string.format("p50_ms=%.3f p95_ms=%.3f p99_ms=%.3f rps=%.0f errors=%d\n",
    latency:percentile(50) / 1000, latency:percentile(95) / 1000,
    latency:percentile(99) / 1000, summary.requests / (summary.duration / 1e6),
    summary.errors.status + summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout))
end
