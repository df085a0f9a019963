// Prometheus metrics (prom-client) for the API and the ingress, served at GET /metrics on the
// API port without a token: counts and durations by route template, edge id and status,
// never a path a client chose, a host name, an address or a secret. One registry per server,
// so servers started side by side in one process (tests) do not mix their figures.
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Registry, type Metric } from 'prom-client';
import { RequestMetrics } from './request-metrics.js';

/** The metrics the ingress counts: with ingress workers (server/cluster/), each counts its own and GET /metrics adds them up. */
export const isIngressMetric = (m: { name: string }) => m.name.startsWith('edgeform_ingress_');

/** A metric as prom-client's getMetricsAsJSON gives it (what a worker sends the primary). */
export type MetricJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>[number];

const SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class Metrics {
  readonly registry = new Registry();
  /** edgeform_api_requests_total and edgeform_api_request_duration_seconds (a request each, so counted without prom-client's per-call label hashing). */
  private readonly api = new RequestMetrics(this.registry, {
    requests: { name: 'edgeform_api_requests_total', help: 'API requests answered, by method, route template and status.' },
    duration: { name: 'edgeform_api_request_duration_seconds', help: 'API request durations, by method and route template.' },
    labelNames: ['method', 'route'],
  }, SECONDS);
  /** edgeform_ingress_requests_total and edgeform_ingress_request_duration_seconds, likewise. */
  private readonly ingress = new RequestMetrics(this.registry, {
    requests: { name: 'edgeform_ingress_requests_total', help: 'HTTPS requests answered by the ingress, by edge id and status.' },
    duration: { name: 'edgeform_ingress_request_duration_seconds', help: 'HTTPS request durations at the ingress, by edge id.' },
    labelNames: ['edge'],
  }, SECONDS);
  readonly ingressConnections = new Counter({ name: 'edgeform_ingress_connections_total', help: 'Connections accepted by the ingress listeners, by public port and what became of them (served, refused and why).', labelNames: ['port', 'outcome'], registers: [this.registry] });
  readonly ingressOpen = new Gauge({ name: 'edgeform_ingress_open_connections', help: 'Connections open at the ingress listeners, by public port.', labelNames: ['port'], registers: [this.registry] });
  readonly ingressBytes = new Counter({ name: 'edgeform_ingress_stream_bytes_total', help: 'Bytes relayed by TCP and TLS edges, by edge id and direction (in: from clients).', labelNames: ['edge', 'direction'], registers: [this.registry] });
  /** The ingress's table version, read when metrics are scraped (unset without an ingress). */
  tableVersionOf?: () => number;
  readonly tableVersion = new Gauge({
    name: 'edgeform_ingress_table_version',
    help: 'Version of the routing table in use (it grows with every reload).',
    registers: [this.registry],
    // With ingress workers, each has its own table: the newest is reported.
    aggregator: 'max',
    collect: () => {
      if (this.tableVersionOf) this.tableVersion.set(this.tableVersionOf());
    },
  });

  /** Relayed HTTP requests so far by transport, read when metrics are scraped (the gateway counts them in plain numbers). */
  relayedOf?: () => { pooled: number; stream: number };
  readonly relayed = new Counter({
    name: 'edgeform_ingress_relayed_requests_total',
    help: 'HTTP requests relayed through agents, by transport: pooled (HTTP/1.1 over a pooled connection to the upstream) or stream (an HTTP/2 stream of its own).',
    labelNames: ['transport'],
    registers: [this.registry],
    collect: () => {
      const counts = this.relayedOf?.();
      if (!counts) return;
      this.relayed.reset();
      this.relayed.inc({ transport: 'pooled' }, counts.pooled);
      this.relayed.inc({ transport: 'stream' }, counts.stream);
    },
  });

  /** The instances' bus (gateway/bus.ts), read when metrics are scraped. */
  busOf?: () => { state: string; reconnects: number };
  readonly busConnected = new Gauge({
    name: 'edgeform_gateway_bus_connected',
    help: 'Whether the LISTEN/NOTIFY connection that carries agent commands between instances is listening (1) or being re-established (0); always 1 on SQLite (one instance).',
    registers: [this.registry],
    collect: () => {
      const bus = this.busOf?.();
      if (bus) this.busConnected.set(bus.state === 'listening' || bus.state === 'local' ? 1 : 0);
    },
  });
  readonly busReconnects = new Counter({
    name: 'edgeform_gateway_bus_reconnects_total',
    help: 'Times the LISTEN/NOTIFY connection between instances was lost and re-established.',
    registers: [this.registry],
    collect: () => {
      const bus = this.busOf?.();
      if (!bus) return;
      this.busReconnects.reset();
      this.busReconnects.inc(bus.reconnects);
    },
  });
  /** The links to the other instances on the database (gateway/peers), read when metrics are scraped. */
  peersOf?: () => { up: number; down: number; tunnels: number; sent: number; served: number; active: number };
  readonly peerLinks = new Gauge({
    name: 'edgeform_peer_links',
    help: 'Connections to the other instances on the database, by state: up, or down (being dialed again).',
    labelNames: ['state'],
    registers: [this.registry],
    collect: () => {
      const p = this.peersOf?.();
      if (!p) return;
      this.peerLinks.set({ state: 'up' }, p.up);
      this.peerLinks.set({ state: 'down' }, p.down);
    },
  });
  readonly peerTunnels = new Gauge({
    name: 'edgeform_peer_tunnels',
    help: 'Tunnels held by the other instances that this instance reaches now.',
    registers: [this.registry],
    collect: () => {
      const p = this.peersOf?.();
      if (p) this.peerTunnels.set(p.tunnels);
    },
  });
  readonly peerStreams = new Counter({
    name: 'edgeform_peer_streams_total',
    help: 'Requests and connections relayed between instances: sent (to another instance\'s tunnel) or served (for another instance, to a tunnel of this one).',
    labelNames: ['direction'],
    registers: [this.registry],
    collect: () => {
      const p = this.peersOf?.();
      if (!p) return;
      this.peerStreams.reset();
      this.peerStreams.inc({ direction: 'sent' }, p.sent);
      this.peerStreams.inc({ direction: 'served' }, p.served);
    },
  });
  readonly peerActive = new Gauge({
    name: 'edgeform_peer_active_streams',
    help: 'Requests and connections this instance is relaying for other instances now.',
    registers: [this.registry],
    collect: () => {
      const p = this.peersOf?.();
      if (p) this.peerActive.set(p.active);
    },
  });
  /** The database health check (Database.check), run when metrics are scraped. */
  databaseCheck?: () => Promise<boolean>;
  readonly databaseUp = new Gauge({
    name: 'edgeform_database_up',
    help: 'Whether the database answered the health check when metrics were scraped (1) or not (0).',
    registers: [this.registry],
    collect: async () => {
      if (this.databaseCheck) this.databaseUp.set((await this.databaseCheck()) ? 1 : 0);
    },
  });
  /** ACME orders by result: issued, renewed or failed (ingress/acme). */
  readonly acmeOrders = new Counter({ name: 'edgeform_acme_orders_total', help: 'Certificate orders placed with the ACME directory, by result: issued, renewed or failed.', labelNames: ['result'], registers: [this.registry] });
  /** The expiry of each name's server-issued certificate, read when metrics are scraped (ingress/acme). */
  certificateExpiryOf?: () => Map<string, number>;
  readonly certificateExpiry = new Gauge({
    name: 'edgeform_certificate_expiry_timestamp_seconds',
    help: 'When the certificate the server obtained through ACME for a name expires, in seconds since 1970, by name.',
    labelNames: ['name'],
    registers: [this.registry],
    collect: () => {
      const all = this.certificateExpiryOf?.();
      if (!all) return;
      this.certificateExpiry.reset();
      for (const [name, at] of all) this.certificateExpiry.set({ name }, at);
    },
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'edgeform_' });
  }

  observeApi(method: string, route: string, status: number, seconds: number) {
    this.api.observe(method, route, status, seconds);
  }

  observeIngress(edge: string, status: number, seconds: number) {
    this.ingress.observe(edge, undefined, status, seconds);
  }

  /**
   * The ingress metrics of the other processes serving this server's listeners (the ingress
   * workers of `--workers N`, server/cluster/), each process's as getMetricsAsJSON gives them:
   * GET /metrics adds them to this process's, under the same names, as one server's.
   */
  othersOf?: () => Promise<MetricJson[][]>;

  async render(): Promise<{ contentType: string; text: string }> {
    if (!this.othersOf) return { contentType: this.registry.contentType, text: await this.registry.metrics() };
    const [own, others] = await Promise.all([this.registry.getMetricsAsJSON(), this.othersOf()]);
    // Counters and histograms summed by label set, gauges by their aggregator (prom-client's
    // cluster aggregation); every other metric (the process's, the database's, the agents')
    // is this process's own, as it is with one process.
    const summed = AggregatorRegistry.aggregate([own.filter(isIngressMetric), ...others.map((o) => o.filter(isIngressMetric))]);
    const out = new Registry();
    for (const m of own) out.registerMetric((isIngressMetric(m) && summed.getSingleMetric(m.name)) || ({ ...m, get: () => m } as unknown as Metric));
    return { contentType: out.contentType, text: await out.metrics() };
  }
}
