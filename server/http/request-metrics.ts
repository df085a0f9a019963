// A request counter (by the request's labels and its status) and a duration histogram (by its
// labels), counted in plain numbers and turned into prom-client's values only when /metrics is
// read. prom-client's Counter and Histogram hash a label object on every inc/observe, bound
// children included (two hash strings and a label check per request: about 5% of a GET one's
// CPU on the API, 3% of an http_response request at the edge); the text the registry renders
// from these objects is the same as from prom-client's own (test/unit/request-metrics.test.ts).
// A request has one or two label values (the API: method and route; the ingress: the edge).
import type { Metric, Registry } from 'prom-client';

interface StatusCount { values: readonly string[]; status: number; n: number }

interface SeriesCounts {
  values: readonly string[];
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

export interface RequestMetricNames {
  requests: { name: string; help: string };
  duration: { name: string; help: string };
  /** The names of the one or two label values observe() is given; the counter adds `status`. */
  labelNames: readonly [string] | readonly [string, string];
}

export class RequestMetrics {
  /** By the first label value, then the second ('' when there is one). */
  private series = new Map<string, Map<string, SeriesCounts>>();
  /** Every series in the order first seen, the order prom-client lists label sets in. */
  private order: SeriesCounts[] = [];
  /** Every (labels, status) in the order first seen. */
  private counts: StatusCount[] = [];

  constructor(registry: Registry, private readonly names: RequestMetricNames, private readonly bounds: readonly number[]) {
    registry.registerMetric(metricObject(names.requests.name, names.requests.help, 'counter', () => this.counterValues(), () => this.reset()));
    registry.registerMetric(metricObject(names.duration.name, names.duration.help, 'histogram', () => this.histogramValues(), () => this.reset()));
  }

  observe(first: string, second: string | undefined, status: number, seconds: number) {
    let bySecond = this.series.get(first);
    if (!bySecond) this.series.set(first, (bySecond = new Map()));
    let s = bySecond.get(second ?? '');
    if (!s) {
      const values = second === undefined ? [first] : [first, second];
      bySecond.set(second ?? '', (s = { values, statuses: new Map(), buckets: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 }));
      this.order.push(s);
    }
    let c = s.statuses.get(status);
    if (!c) {
      s.statuses.set(status, (c = { values: s.values, status, n: 0 }));
      this.counts.push(c);
    }
    c.n++;
    let b = 0;
    while (b < this.bounds.length && seconds > this.bounds[b]) b++;
    s.buckets[b]++;
    s.sum += seconds;
    s.count++;
  }

  private reset() {
    this.series.clear();
    this.order = [];
    this.counts = [];
  }

  private labelsOf(values: readonly string[]): Record<string, string> {
    const labels: Record<string, string> = {};
    this.names.labelNames.forEach((name, i) => { labels[name] = values[i]; });
    return labels;
  }

  private counterValues(): Value[] {
    return this.counts.map((c) => ({ labels: { ...this.labelsOf(c.values), status: String(c.status) }, value: c.n }));
  }

  /** As prom-client's Histogram lists them: cumulative buckets with `le` first, +Inf, then sum and count. */
  private histogramValues(): Value[] {
    const name = this.names.duration.name;
    const out: Value[] = [];
    for (const s of this.order) {
      const labels = this.labelsOf(s.values);
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += s.buckets[i];
        out.push({ labels: { le, ...labels }, value: acc, metricName: `${name}_bucket` });
      });
      out.push({ labels: { le: '+Inf', ...labels }, value: s.count, metricName: `${name}_bucket` });
      out.push({ labels, value: s.sum, metricName: `${name}_sum` });
      out.push({ labels, value: s.count, metricName: `${name}_count` });
    }
    return out;
  }
}
