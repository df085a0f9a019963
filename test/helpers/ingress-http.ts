// The ingress's HTTP side driven from a plain node:http listener, before (and beside) the real
// `--ingress` listeners: a hand-made routing table, the real handler, and a client that sets
// Host. Public port 443 stands for the listener.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { handleHttpsRequest, handleHttpsUpgrade } from '../../server/ingress/http/handler.js';
import type { FullDoc, IngressDeps, IngressTable } from '../../server/ingress/types.js';
import { PolicyState } from '../../server/policy/index.js';

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
    ipPolicies: new Map(Object.entries(spec.ipPolicies ?? {})),
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

export async function startHttpIngress(table: IngressTable, deps: Partial<IngressDeps> = {}): Promise<HttpIngress> {
  let current = table;
  const logs: Record<string, any>[] = [];
  const fullDeps: IngressDeps = {
    gateway: { labeledTunnels: () => new Map() } as never,
    policyState: new PolicyState(),
    log: (f) => logs.push(f),
    now: Date.now,
    ...deps,
  };
  const ctxOf = (req: http.IncomingMessage) => {
    const host = String(req.headers.host ?? '').replace(/:\d+$/, '').toLowerCase();
    const edge = current.ports.get(443)?.hosts.get(host);
    return { table: current, edge: edge?.kind === 'https' ? edge : undefined, clientIp: (req.socket.remoteAddress ?? '').replace(/^::ffff:/, ''), publicPort: 443, host, deps: fullDeps };
  };
  const server = http.createServer((req, res) => void handleHttpsRequest(req, res, ctxOf(req)));
  server.on('upgrade', (req, socket, head) => void handleHttpsUpgrade(req, socket, head, ctxOf(req)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  return {
    url, port, logs, deps: fullDeps,
    setTable: (t) => { current = t; },
    async get(path, opts = {}) {
      const r = await request(`${url}${path}`, { method: (opts.method ?? 'GET') as never, headers: { host: opts.host ?? 'app.example.com', ...opts.headers }, body: opts.body });
      const body = Buffer.from(await r.body.arrayBuffer());
      return { status: r.statusCode, headers: r.headers, body, text: body.toString('utf8') };
    },
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}
