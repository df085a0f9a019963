// The ingress as a user meets it: `edgeform serve --ingress PUBLIC=127.0.0.1:PORT` as a real
// process, with its API and its local CA (`<data-dir>/ingress-ca.pem`), and manifests
// applied with `edgeform apply -f`. The clients that speak to its listeners the way curl
// does are in ingress-client.ts.
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import type { CliResult } from './cli.js';
import { runCliProcess } from './cli-process.js';
import { freePort } from './ports.js';
import { serve, type Serving } from './serve.js';
import { tempDir } from './temp.js';
import { until } from './wait.js';

export const INGRESS_TOKEN = 'ingresstoken0123456789abcdefghijklmnopqrstuvw';

export interface ApiReply { status: number; body: any }

export interface Ingress {
  serving: Serving;
  /** The API's base URL. */
  url: string;
  token: string;
  dataDir: string;
  /** The loopback port that stands for a public port. */
  port(publicPort: number): number;
  api(method: string, p: string, body?: unknown): Promise<ApiReply>;
  /** `edgeform apply -f <file> --auto-approve` (the file written into a fresh folder); throws unless it exits 0. */
  apply(manifest: string): Promise<CliResult>;
  /** `<data-dir>/ingress-ca.pem`, once the server has made it (first use: one handshake). */
  ca(): Promise<string>;
  /** The server's stdout lines, parsed. */
  lines(): Record<string, unknown>[];
}

/** `edgeform serve --ingress P=127.0.0.1:<free>` for each public port, on a fresh data folder; `args` are more serve flags. */
export async function startIngress(publicPorts: number[], env: Record<string, string> = {}, args: string[] = [], fixed: Record<number, number> = {}): Promise<Ingress> {
  const dataDir = tempDir('edgeform-ingress-');
  const ports = new Map<number, number>();
  // `fixed`: loopback ports chosen beforehand (another server, such as Pebble, was told them).
  for (const p of publicPorts) ports.set(p, fixed[p] ?? (await freePort()));
  const flags = ['--data-dir', dataDir, ...[...ports].flatMap(([pub, local]) => ['--ingress', `${pub}=127.0.0.1:${local}`]), ...args];
  const serving = await serve(flags, { EDGEFORM_BOOTSTRAP_TOKEN: INGRESS_TOKEN, EDGEFORM_API_RATE_LIMIT: '0', EDGEFORM_AGENT_HEARTBEAT_INTERVAL: '2', ...env });
  const port = (pub: number) => {
    const p = ports.get(pub);
    if (p === undefined) throw new Error(`no --ingress for public port ${pub}`);
    return p;
  };
  const api = async (method: string, p: string, body?: unknown): Promise<ApiReply> => {
    const r = await fetch(`${serving.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${INGRESS_TOKEN}`, 'service-version': '2', ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : undefined };
  };
  let applied = 0;
  const ing: Ingress = {
    serving,
    url: serving.url,
    token: INGRESS_TOKEN,
    dataDir,
    port,
    api,
    async apply(manifest) {
      const dir = tempDir('edgeform-ingress-manifest-');
      const file = path.join(dir, `web-${++applied}.yaml`);
      fs.writeFileSync(file, manifest);
      const r = await runCliProcess(['apply', '-f', file, '--auto-approve'], { EDGEFORM_API_URL: serving.url, EDGEFORM_API_KEY: INGRESS_TOKEN }, { cwd: dir, timeoutMs: 60_000 });
      if (r.code !== 0) throw new Error(`edgeform apply exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
      return r;
    },
    async ca() {
      const file = path.join(dataDir, 'ingress-ca.pem');
      if (!fs.existsSync(file)) {
        // "Created on first use": one handshake on any HTTPS listener makes it.
        const pub = [...ports.keys()][0];
        await new Promise<void>((resolve) => {
          const s = tls.connect({ host: '127.0.0.1', port: port(pub), servername: 'first-use.example.com', rejectUnauthorized: false }, () => { s.destroy(); resolve(); });
          s.on('error', () => resolve());
        });
        await until(() => fs.existsSync(file), 10_000, () => `${file} was not written after a handshake`);
      }
      return fs.readFileSync(file, 'utf8');
    },
    lines: () => serving.lines(),
  };
  return ing;
}

/** A credential's token, made through the API. */
export async function agentToken(ing: Ingress): Promise<string> {
  const r = await ing.api('POST', '/credentials', { acl: [] });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  return r.body.token;
}

/** Requests in flight at once for `total` requests; returns every reply. */
export async function many<T>(total: number, concurrency: number, one: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(total);
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < total) {
      const i = next++;
      out[i] = await one(i);
    }
  }));
  return out;
}
