// The setting of every sign-in test: a real server with one --ingress listener on public port
// 443, an upstream that answers with the request line and headers it received (JSON), edgeform
// agent carrying it, and an HTTPS edge for `host` whose routes go to that agent.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { credentialToken, startAgent, type AgentProcess } from './agent.js';
import { ingressPort, localCa } from './ingress-client.js';
import { startTestServer, type TestServer } from './server.js';

export interface SignInEdge {
  s: TestServer;
  ingress: { port: number; ca: string };
  /** Headers of every request the upstream got. */
  seen: http.IncomingHttpHeaders[];
  /** Adds a path_prefix route to the tunnel with these modules; its id. */
  route(match: string, modules: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

export async function startSignInEdge(host: string, label: string): Promise<SignInEdge> {
  const s = await startTestServer({ agentHeartbeatMs: 1000, ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] });
  const seen: http.IncomingHttpHeaders[] = [];
  const upstream = http.createServer((req, res) => {
    seen.push(req.headers);
    res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': 'app=1; Path=/' }).end(JSON.stringify({ path: req.url, headers: req.headers }));
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const created = async (path: string, body: unknown): Promise<string> => {
    const r = await s.post(path, body);
    if (r.status !== 201) throw new Error(`${path}: ${r.status} ${r.text}`);
    return r.body.id;
  };
  const cr = await credentialToken(s);
  const agent: AgentProcess = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', `app=${label}`, '--forwards-to', `127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const tunnel = await created('/backends/tunnel_group', { labels: { app: label } });
  const edge = await created('/edges/https', { hostports: [`${host}:443`] });
  return {
    s, seen,
    ingress: { port: ingressPort(s, 443), ca: localCa(s) },
    route: (match, modules) => created(`/edges/https/${edge}/routes`, { match_type: 'path_prefix', match, backend: { backend_id: tunnel }, ...modules }),
    async close() {
      agent.kill();
      upstream.closeAllConnections();
      await new Promise((r) => upstream.close(r));
      await s.close();
    },
  };
}

/** Runs `fn` with the ingress's clock (deps.now) moved `ms` ahead, then puts it back: session limits without waiting. */
export async function clockAhead<T>(s: TestServer, ms: number, fn: () => Promise<T>): Promise<T> {
  const deps = s.server.ingress!.deps;
  const realNow = deps.now;
  deps.now = () => realNow() + ms;
  try {
    return await fn();
  } finally {
    deps.now = realNow;
  }
}
