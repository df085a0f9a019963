// The request counts of the API and the ingress (server/http/request-metrics.ts) are kept in
// plain numbers, not prom-client's Counter and Histogram: /metrics must read exactly as those
// would, with one label value (the ingress: the edge) and with two (the API: method, route).
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestMetrics, type RequestMetricNames } from '../../server/http/request-metrics.js';

const BOUNDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const INGRESS: RequestMetricNames = {
  requests: { name: 'edgeform_ingress_requests_total', help: 'HTTPS requests answered by the ingress, by edge id and status.' },
  duration: { name: 'edgeform_ingress_request_duration_seconds', help: 'HTTPS request durations at the ingress, by edge id.' },
  labelNames: ['edge'],
};
const API: RequestMetricNames = {
  requests: { name: 'edgeform_api_requests_total', help: 'API requests answered, by method, route template and status.' },
  duration: { name: 'edgeform_api_request_duration_seconds', help: 'API request durations, by method and route template.' },
  labelNames: ['method', 'route'],
};
/** Label values, status, seconds. */
const OBSERVED: [string[], number, number][] = [
  [['edghts_a'], 200, 0.0004], [['edghts_a'], 200, 0.001], [['edghts_a'], 404, 0.0011], [['edghts_b'], 502, 12],
  [['none'], 421, 0], [['edghts_a'], 200, 0.3], [['edghts_b'], 200, 10], [['edghts_a'], 503, 2.5000001], [['edg"q\\'], 200, 0.02],
];
const OBSERVED_API: [string[], number, number][] = [
  [['GET', '/ip_policies/:id'], 200, 0.0004], [['GET', '/ip_policies/:id'], 404, 0.002], [['POST', '/ip_policies'], 201, 0.003],
  [['GET', '/ip_policies'], 200, 0.3], [['GET', '/ip_policies/:id'], 200, 0.0009], [['PATCH', '/ip_policies/:id'], 400, 7], [['GET', 'unmatched'], 404, 0],
];

function promClientText(names: RequestMetricNames, observed: [string[], number, number][]) {
  const registry = new Registry();
  const counter = new Counter({ ...names.requests, labelNames: [...names.labelNames, 'status'], registers: [registry] });
  const histogram = new Histogram({ ...names.duration, labelNames: [...names.labelNames], buckets: BOUNDS, registers: [registry] });
  for (const [values, status, seconds] of observed) {
    const labels = Object.fromEntries(names.labelNames.map((n, i) => [n, values[i]]));
    counter.inc({ ...labels, status: String(status) });
    histogram.observe(labels, seconds);
  }
  return registry.metrics();
}

async function ourText(names: RequestMetricNames, observed: [string[], number, number][]) {
  const registry = new Registry();
  const m = new RequestMetrics(registry, names, BOUNDS);
  for (const [values, status, seconds] of observed) m.observe(values[0], values[1], status, seconds);
  return registry.metrics();
}

describe('RequestMetrics', () => {
  it('renders the same Prometheus text as prom-client\'s Counter and Histogram for the same requests, with one label value', async () => {
    const text = await ourText(INGRESS, OBSERVED);
    expect(text).toBe(await promClientText(INGRESS, OBSERVED));
    expect(text).toContain('edgeform_ingress_requests_total{edge="edghts_a",status="200"} 3');
    expect(text).toContain('edgeform_ingress_request_duration_seconds_bucket{le="0.001",edge="edghts_a"} 2');
  });

  it('and with two (method and route)', async () => {
    const text = await ourText(API, OBSERVED_API);
    expect(text).toBe(await promClientText(API, OBSERVED_API));
    expect(text).toContain('edgeform_api_requests_total{method="GET",route="/ip_policies/:id",status="200"} 2');
    expect(text).toContain('edgeform_api_request_duration_seconds_count{method="GET",route="/ip_policies/:id"} 3');
  });

  it('is empty after the registry resets it', async () => {
    const registry = new Registry();
    const m = new RequestMetrics(registry, INGRESS, BOUNDS);
    m.observe('edghts_a', undefined, 200, 0.1);
    registry.resetMetrics();
    expect(await registry.metrics()).not.toContain('edghts_a');
  });
});
