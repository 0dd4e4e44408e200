-- wrk's end-of-run report for the sync benchmarks: one BENCH line the scripts parse (errors split
-- by kind: a timeout is a request wrk gave up on after 2 s, a read error a connection closed
-- without an answer).
function done(summary, latency, requests)
  io.write(string.format("BENCH requests=%d duration_s=%.2f rps=%.1f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f non2xx=%d errors=%d error_kinds=connect:%d,read:%d,write:%d,timeout:%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout))
end
