// A loopback HTTP proxy in front of a test server that answers some paths itself: an
// older or other server, seen through the same URL.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fetch } from 'undici';

export interface Proxy {
  url: string;
  close(): Promise<void>;
}

/** Forwards every request to `upstream`, except those `answer` returns a status and JSON body for. */
export async function interceptingProxy(upstream: string, answer: (method: string, path: string) => { status: number; body: unknown } | undefined): Promise<Proxy> {
  const hop = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive']);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const own = answer(req.method ?? 'GET', (req.url ?? '/').split('?')[0]);
      if (own) {
        res.writeHead(own.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(own.body));
        return;
      }
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !hop.has(k))) as Record<string, string>;
      const up = await fetch(`${upstream}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
      const body = Buffer.from(await up.arrayBuffer());
      res.writeHead(up.status, Object.fromEntries([...up.headers].filter(([k]) => !hop.has(k))));
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}
