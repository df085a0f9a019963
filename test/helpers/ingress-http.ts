// The ingress's HTTP side driven from a plain node:http listener, before (and beside) the real
// `--ingress` listeners: a hand-made routing table, the real handler, and a client that sets
// Host. Public port 443 stands for the listener.
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { handleHttpsRequest, handleHttpsUpgrade } from '../../server/ingress/http/handler.js';
import type { FullDoc, IngressDeps, IngressTable } from '../../server/ingress/types.js';
import { PolicyState } from '../../server/policy/index.js';
import { ruleSets } from './fake-exchange.js';
import { Pki } from './pki.js';

export interface TableSpec {
  edges: { id?: string; hostports: string[]; routes: FullDoc[] }[];
  backends?: (FullDoc & { kind: string })[];
  ipPolicies?: Record<string, { cidr: string; action: 'allow' | 'deny' }[]>;
}

let versions = 0;

/** An IngressTable as i-core's compileTable makes it (https edges only). */
export function tableOf(spec: TableSpec): IngressTable {
  const ports: IngressTable['ports'] = new Map();
  spec.edges.forEach((e, i) => {
    const doc = { id: e.id ?? `edghts_test${i}`, hostports: e.hostports, routes: e.routes };
    for (const hp of e.hostports) {
      const at = hp.lastIndexOf(':');
      const port = Number(hp.slice(at + 1));
      if (!ports.has(port)) ports.set(port, { kind: 'https', hosts: new Map() });
      ports.get(port)!.hosts.set(hp.slice(0, at).toLowerCase(), { kind: 'https', doc });
    }
  });
  return {
    version: ++versions,
    ports,
    certificates: [],
    backends: new Map((spec.backends ?? []).map((b) => [b.id, b])),
    ipPolicies: ruleSets(new Map(Object.entries(spec.ipPolicies ?? {}))),
    certificateAuthorities: new Map(),
  };
}

/** A route doc in full input form (what the store gives the table). */
export const route = (id: string, match: string, modules: Record<string, unknown> = {}, matchType = 'path_prefix'): FullDoc => ({ id, match, match_type: matchType, ...modules });

export interface HttpIngress {
  url: string;
  port: number;
  logs: Record<string, any>[];
  deps: IngressDeps;
  setTable(t: IngressTable): void;
  /** A request with the given Host (default app.example.com). */
  get(path: string, opts?: { host?: string; method?: string; headers?: Record<string, string>; body?: string | Buffer }): Promise<{ status: number; headers: Record<string, any>; body: Buffer; text: string }>;
  close(): Promise<void>;
}

/** With `tls`, the listener is node:http2's secure server with HTTP/1.1 allowed (as the real one), on a self-signed certificate. */
export async function startHttpIngress(table: IngressTable, deps: Partial<IngressDeps> = {}, opts: { tls?: boolean } = {}): Promise<HttpIngress> {
  let current = table;
  const logs: Record<string, any>[] = [];
  const fullDeps: IngressDeps = {
    // No agents here: no labeled tunnels and no agents' endpoints.
    gateway: { labeledTunnels: () => new Map(), endpointTunnel: () => undefined, endpointRoute: () => undefined, hasEndpoints: false } as never,
    policyState: new PolicyState(),
    log: (f) => logs.push(f),
    now: Date.now,
    ...deps,
  };
  const ctxOf = (req: http.IncomingMessage | http2.Http2ServerRequest) => {
    const host = String(req.headers.host ?? req.headers[':authority'] ?? '').replace(/:\d+$/, '').toLowerCase();
    const edge = current.ports.get(443)?.hosts.get(host);
    return { table: current, edge: edge?.kind === 'https' ? edge : undefined, clientIp: (req.socket.remoteAddress ?? '').replace(/^::ffff:/, ''), publicPort: 443, host, deps: fullDeps };
  };
  const handler = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse) => void handleHttpsRequest(req, res, ctxOf(req));
  let server: http.Server | http2.Http2SecureServer;
  if (opts.tls) {
    const cert = new Pki().issue('p256', { subject: [['CN', 'app.example.com']], sans: ['DNS:app.example.com'] });
    server = http2.createSecureServer({ cert: cert.cert, key: cert.key, allowHTTP1: true }, handler);
  } else server = http.createServer(handler);
  server.on('upgrade', (req: http.IncomingMessage, socket: import('node:stream').Duplex, head: Buffer) => void handleHttpsUpgrade(req, socket, head, ctxOf(req)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const url = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  return {
    url, port, logs, deps: fullDeps,
    setTable: (t) => { current = t; },
    async get(path, opts = {}) {
      const r = await request(`${url}${path}`, { method: (opts.method ?? 'GET') as never, headers: { host: opts.host ?? 'app.example.com', ...opts.headers }, body: opts.body });
      const body = Buffer.from(await r.body.arrayBuffer());
      return { status: r.statusCode, headers: r.headers, body, text: body.toString('utf8') };
    },
    close: () => new Promise<void>((r) => { (server as http.Server).closeAllConnections?.(); server.close(() => r()); }),
  };
}
