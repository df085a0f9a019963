// Prometheus metrics (prom-client) for the API and the ingress, served at GET /metrics on the
// API port without a token: counts and durations by route template, edge id and status,
// never a path a client chose, a host name, an address or a secret. One registry per server,
// so servers started side by side in one process (tests) do not mix their figures.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { IngressRequestMetrics } from './ingress-request-metrics.js';

const SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class Metrics {
  readonly registry = new Registry();
  readonly apiRequests = new Counter({ name: 'edgeform_api_requests_total', help: 'API requests answered, by method, route template and status.', labelNames: ['method', 'route', 'status'], registers: [this.registry] });
  readonly apiDuration = new Histogram({ name: 'edgeform_api_request_duration_seconds', help: 'API request durations, by method and route template.', labelNames: ['method', 'route'], buckets: SECONDS, registers: [this.registry] });
  /** edgeform_ingress_requests_total and edgeform_ingress_request_duration_seconds (a request each, so counted without prom-client's per-call label hashing). */
  readonly ingressRequests = new IngressRequestMetrics(this.registry, SECONDS);
  readonly ingressConnections = new Counter({ name: 'edgeform_ingress_connections_total', help: 'Connections accepted by the ingress listeners, by public port and what became of them (served, refused and why).', labelNames: ['port', 'outcome'], registers: [this.registry] });
  readonly ingressOpen = new Gauge({ name: 'edgeform_ingress_open_connections', help: 'Connections open at the ingress listeners, by public port.', labelNames: ['port'], registers: [this.registry] });
  readonly ingressBytes = new Counter({ name: 'edgeform_ingress_stream_bytes_total', help: 'Bytes relayed by TCP and TLS edges, by edge id and direction (in: from clients).', labelNames: ['edge', 'direction'], registers: [this.registry] });
  /** The ingress's table version, read when metrics are scraped (unset without an ingress). */
  tableVersionOf?: () => number;
  readonly tableVersion = new Gauge({
    name: 'edgeform_ingress_table_version',
    help: 'Version of the routing table in use (it grows with every reload).',
    registers: [this.registry],
    collect: () => {
      if (this.tableVersionOf) this.tableVersion.set(this.tableVersionOf());
    },
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'edgeform_' });
  }

  /** The counter and histogram of one (method, route, status), bound once: labels given per observation were hashed each time. */
  private readonly apiSeries = new Map<string, { count: { inc(): void }; duration: { observe(v: number): void } }>();

  observeApi(method: string, route: string, status: number, seconds: number) {
    const key = `${status} ${method} ${route}`;
    let series = this.apiSeries.get(key);
    if (!series) {
      series = { count: this.apiRequests.labels({ method, route, status: String(status) }), duration: this.apiDuration.labels({ method, route }) };
      this.apiSeries.set(key, series);
    }
    series.count.inc();
    series.duration.observe(seconds);
  }

  observeIngress(edge: string, status: number, seconds: number) {
    this.ingressRequests.observe(edge, status, seconds);
  }

  async render(): Promise<{ contentType: string; text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}
