// A server in a process of its own, for tests that measure the server's memory: run with
// `node --import tsx test/helpers/gateway-process.ts`. Besides the API it opens a plain HTTP
// front on loopback that relays `METHOD /<tunnel id>/<path>` into that tunnel through
// gateway.openStream, bodies piped both ways, as the ingress will; and the ingress's HTTP
// handler itself, whose route to big.example.com relays to the tunnels labeled app=big (over
// pooled upstream connections once they are open; GET /_relayed on the front tells the
// gateway's counts by transport). It prints one JSON line: { url, front, ingress, token }
// (token: a fresh tunnel credential's), and runs until killed.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { credentialToken } from './agent.js';
import { route, startHttpIngress, tableOf } from './ingress-http.js';
import { startTestServer } from './server.js';

const s = await startTestServer({ agentHeartbeatMs: 1000 });
const front = http.createServer((req, res) => {
  if (req.url === '/_relayed') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(s.server.gateway.relayed));
  const m = /^\/(tn_\w+)(\/.*)?$/.exec(req.url ?? '');
  let stream;
  try {
    if (!m) throw new Error('no tunnel id in the path');
    stream = s.server.gateway.openStream(m[1], { method: req.method ?? 'GET', path: m[2] ?? '/', headers: req.headers });
  } catch (e) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`${(e as Error).message}\n`);
    return;
  }
  stream.on('response', (h) => {
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(h)) if (!k.startsWith(':') && v !== undefined) headers[k] = v as string | string[];
    res.writeHead(Number(h[':status']), headers);
    stream.pipe(res);
  });
  stream.on('error', () => res.destroy());
  res.on('close', () => { if (!res.writableFinished) stream.destroy(); });
  req.pipe(stream);
});
await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
const ingress = await startHttpIngress(tableOf({
  edges: [{ hostports: ['big.example.com:443'], routes: [route('edghtsrt_big', '/', { backend: { enabled: true, backend_id: 'bkdtg_big' } })] }],
  backends: [{ id: 'bkdtg_big', kind: 'TunnelGroupBackend', labels: { app: 'big' } }],
}), { gateway: s.server.gateway });
const cr = await credentialToken(s);
process.stdout.write(`${JSON.stringify({ url: s.url, front: `http://127.0.0.1:${(front.address() as AddressInfo).port}`, ingress: ingress.url, token: cr.token })}\n`);
