// edgeform_ingress_requests_total and edgeform_ingress_request_duration_seconds, counted in
// plain numbers per edge and status and turned into prom-client's values only when /metrics
// is read. prom-client's Counter and Histogram hash a label object on every inc/observe (two
// objects and two hash strings per request, about 3% of an http_response request's CPU); the
// text they render is the same as these objects render through the same registry.
import type { Metric, Registry } from 'prom-client';

interface StatusCount { edge: string; status: number; n: number }

interface EdgeCounts {
  /** Requests by status. */
  statuses: Map<number, StatusCount>;
  /** Observations per bucket (not cumulative), the last one past every bound. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

type Value = { labels: Record<string, string | number>; value: number; metricName?: string };

/** A metric object the registry renders as it renders prom-client's own (name, help, type, values). */
function metricObject(name: string, help: string, type: 'counter' | 'histogram', values: () => Value[], reset: () => void) {
  const get = async () => ({ name, help, type, values: values(), aggregator: 'sum' as const });
  return { name, help, type, get, reset } as unknown as Metric;
}

export class IngressRequestMetrics {
  private edges = new Map<string, EdgeCounts>();
  /** Every (edge, status) in the order first seen, the order prom-client lists label sets in. */
  private counts: StatusCount[] = [];

  constructor(registry: Registry, private readonly bounds: readonly number[]) {
    registry.registerMetric(metricObject('edgeform_ingress_requests_total', 'HTTPS requests answered by the ingress, by edge id and status.', 'counter', () => this.counterValues(), () => this.reset()));
    registry.registerMetric(metricObject('edgeform_ingress_request_duration_seconds', 'HTTPS request durations at the ingress, by edge id.', 'histogram', () => this.histogramValues(), () => this.reset()));
  }

  observe(edge: string, status: number, seconds: number) {
    let e = this.edges.get(edge);
    if (!e) this.edges.set(edge, (e = { statuses: new Map(), buckets: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 }));
    let c = e.statuses.get(status);
    if (!c) {
      e.statuses.set(status, (c = { edge, status, n: 0 }));
      this.counts.push(c);
    }
    c.n++;
    let b = 0;
    while (b < this.bounds.length && seconds > this.bounds[b]) b++;
    e.buckets[b]++;
    e.sum += seconds;
    e.count++;
  }

  private reset() {
    this.edges.clear();
    this.counts = [];
  }

  private counterValues(): Value[] {
    return this.counts.map((c) => ({ labels: { edge: c.edge, status: String(c.status) }, value: c.n }));
  }

  /** As prom-client's Histogram lists them: cumulative buckets with `le` first, +Inf, then sum and count. */
  private histogramValues(): Value[] {
    const name = 'edgeform_ingress_request_duration_seconds';
    const out: Value[] = [];
    for (const [edge, e] of this.edges) {
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += e.buckets[i];
        out.push({ labels: { le, edge }, value: acc, metricName: `${name}_bucket` });
      });
      out.push({ labels: { le: '+Inf', edge }, value: e.count, metricName: `${name}_bucket` });
      out.push({ labels: { edge }, value: e.sum, metricName: `${name}_sum` });
      out.push({ labels: { edge }, value: e.count, metricName: `${name}_count` });
    }
    return out;
  }
}
