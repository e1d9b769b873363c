// A small HTTP service instrumented with the OpenTelemetry JavaScript SDK, under a bounded
// load: the JavaScript twin of ../otel_service.py.
//
// It serves GET /orders/{id} (quick), POST /orders (waits 4 ms) and GET /fail (500) on
// 127.0.0.1, records each request it serves in `http.server.request.duration` (seconds;
// `http.request.method`, `http.route`, `http.response.status_code`, `error.type` on 5xx),
// exports every 300 ms over OTLP/HTTP while a client loop sends the requests, then flushes
// and prints what the SDK recorded per route (count, failed, sum of seconds) as one JSON
// line.
//
//   node service.mjs ENDPOINT SERVICE TEMPORALITY HISTOGRAM ENCODING REQUESTS [TOKEN]
//
// TEMPORALITY: cumulative | delta. HISTOGRAM: explicit | exponential. ENCODING: json (the
// exporter-metrics-otlp-http package) | protobuf (exporter-metrics-otlp-proto).

import http from 'node:http';
import { performance } from 'node:perf_hooks';
import {
  AggregationTemporality,
  AggregationType,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPMetricExporter as JsonExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as ProtoExporter } from '@opentelemetry/exporter-metrics-otlp-proto';

const [endpoint, service, temporality, histogram, encoding, requestsArg, token] =
  process.argv.slice(2);
const requests = Number(requestsArg);

const Exporter = encoding === 'protobuf' ? ProtoExporter : JsonExporter;
const exporter = new Exporter({
  url: endpoint,
  headers: token ? { Authorization: `Bearer ${token}` } : {},
  temporalityPreference:
    temporality === 'delta' ? AggregationTemporality.DELTA : AggregationTemporality.CUMULATIVE,
});
const views =
  histogram === 'exponential'
    ? [
        {
          instrumentName: 'http.server.request.duration',
          aggregation: { type: AggregationType.EXPONENTIAL_HISTOGRAM },
        },
      ]
    : [];
const provider = new MeterProvider({
  resource: resourceFromAttributes({
    'service.name': service,
    'service.instance.id': `${service}-1`,
  }),
  readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 300 })],
  views,
});
const meter = provider.getMeter('otel-js-lab');
const duration = meter.createHistogram('http.server.request.duration', {
  unit: 's',
  description: 'Duration of HTTP server requests.',
  // The semantic conventions' advised bounds (the SDK's own defaults are for ms).
  advice: {
    explicitBucketBoundaries: [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  },
});

const recorded = {};
function record(method, route, status, seconds) {
  const attrs = {
    'http.request.method': method,
    'http.route': route,
    'http.response.status_code': status,
  };
  if (status >= 500) attrs['error.type'] = String(status);
  duration.record(seconds, attrs);
  const key = `${method} ${route}`;
  const r = (recorded[key] ??= { count: 0, failed: 0, sum_s: 0 });
  r.count += 1;
  r.failed += status >= 500 ? 1 : 0;
  r.sum_s += seconds;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const server = http.createServer(async (req, res) => {
  const started = performance.now();
  let route = null;
  let status = 404;
  if (req.method === 'GET' && req.url.startsWith('/orders/')) {
    route = '/orders/{id}';
    status = 200;
  } else if (req.method === 'POST' && req.url === '/orders') {
    for await (const _ of req);
    await sleep(4);
    route = '/orders';
    status = 201;
  } else if (req.method === 'GET' && req.url === '/fail') {
    route = '/fail';
    status = 500;
  }
  res.writeHead(status, { 'Content-Length': '2' });
  res.end('ok');
  if (route !== null) record(req.method, route, status, (performance.now() - started) / 1000);
});

await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${server.address().port}`;

for (let i = 0; i < requests; i++) {
  const kind = i % 10;
  if (kind < 6) await (await fetch(`${base}/orders/${i}`)).text();
  else if (kind < 9) await (await fetch(`${base}/orders`, { method: 'POST', body: '{}' })).text();
  else await (await fetch(`${base}/fail`)).text();
  // Spread the load over several exports.
  await sleep(2);
}
// Every recorded request reaches the exporter before the totals are printed.
await provider.forceFlush();
await provider.shutdown();
server.close();
console.log(JSON.stringify(recorded));
