// The ingress's request counts (server/http/ingress-request-metrics.ts) are kept in plain
// numbers, not prom-client's Counter and Histogram: /metrics must read exactly as those would.
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { IngressRequestMetrics } from '../../server/http/ingress-request-metrics.js';

const BOUNDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const OBSERVED: [string, number, number][] = [
  ['edghts_a', 200, 0.0004], ['edghts_a', 200, 0.001], ['edghts_a', 404, 0.0011], ['edghts_b', 502, 12],
  ['none', 421, 0], ['edghts_a', 200, 0.3], ['edghts_b', 200, 10], ['edghts_a', 503, 2.5000001], ['edg"q\\', 200, 0.02],
];

function promClientText() {
  const registry = new Registry();
  const counter = new Counter({ name: 'edgeform_ingress_requests_total', help: 'HTTPS requests answered by the ingress, by edge id and status.', labelNames: ['edge', 'status'], registers: [registry] });
  const histogram = new Histogram({ name: 'edgeform_ingress_request_duration_seconds', help: 'HTTPS request durations at the ingress, by edge id.', labelNames: ['edge'], buckets: BOUNDS, registers: [registry] });
  for (const [edge, status, seconds] of OBSERVED) {
    counter.inc({ edge, status: String(status) });
    histogram.observe({ edge }, seconds);
  }
  return registry.metrics();
}

describe('IngressRequestMetrics', () => {
  it('renders the same Prometheus text as prom-client\'s Counter and Histogram for the same requests', async () => {
    const registry = new Registry();
    const m = new IngressRequestMetrics(registry, BOUNDS);
    for (const [edge, status, seconds] of OBSERVED) m.observe(edge, status, seconds);
    const text = await registry.metrics();
    expect(text).toBe(await promClientText());
    expect(text).toContain('edgeform_ingress_requests_total{edge="edghts_a",status="200"} 3');
    expect(text).toContain('edgeform_ingress_request_duration_seconds_bucket{le="0.001",edge="edghts_a"} 2');
  });

  it('is empty after the registry resets it', async () => {
    const registry = new Registry();
    const m = new IngressRequestMetrics(registry, BOUNDS);
    m.observe('edghts_a', 200, 0.1);
    registry.resetMetrics();
    expect(await registry.metrics()).not.toContain('edghts_a');
  });
});
