// Issue 36 with `edgeform serve --workers 2` (issue 34): the agents' connections are held by the
// primary, and the workers learn its tunnels from a snapshot; internal endpoints and pools are
// in it too. Two agents pool an internal endpoint, a cloud endpoint forwards to it, and both
// workers serve it, each sending requests to both members.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type AgentProcess } from '../helpers/agent.js';
import { agentToken, startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

let ing: Ingress;
let ca: string;
const agents: AgentProcess[] = [];
const upstreams: http.Server[] = [];

async function upstream(name: string): Promise<number> {
  const u = http.createServer((req, res) => res.end(name));
  await new Promise<void>((r) => u.listen(0, '127.0.0.1', r));
  upstreams.push(u);
  return (u.address() as AddressInfo).port;
}

beforeAll(async () => {
  ing = await startIngress([443], {}, ['--workers', '2']);
  ca = await ing.ca();
  const token = await agentToken(ing);
  for (const name of ['a', 'b']) {
    const a = startAgent(['http', String(await upstream(name)), '--url', 'https://pooled.internal', '--pooling-enabled', '--authtoken', token, '--api-url', ing.url]);
    agents.push(a);
    await a.waitFor('online: tn_');
  }
}, 90_000);

afterAll(() => {
  for (const a of agents) a.kill();
  for (const u of upstreams) u.close();
  killServers();
  removeTempDirs();
});

describe('internal endpoints and pools with --workers 2', () => {
  it('both workers forward to the pooled internal endpoint, and it shares their requests', async () => {
    const made = await ing.api('POST', '/endpoints', {
      url: 'https://front-workers.example.com',
      traffic_policy: JSON.stringify({ on_http_request: [{ actions: [{ type: 'forward-internal', config: { url: 'https://pooled.internal' } }] }] }),
    });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const get = () => edgeRequest({ port: ing.port(443), host: 'front-workers.example.com', path: '/w', ca });
    // The snapshot reaches the workers a moment after the agents are online.
    await until(async () => (await get()).status === 200, 10_000, () => 'the pool was not reachable from the workers');
    const from = ing.lines().length;
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const r = await get();
      expect(r.status).toBe(200);
      seen.add(r.text);
    }
    expect([...seen].sort()).toEqual(['a', 'b']);
    const workers = new Set(ing.lines().slice(from).filter((l) => l.msg === 'ingress request' && l.path === '/w').map((l) => l.worker));
    await until(() => new Set(ing.lines().slice(from).filter((l) => l.msg === 'ingress request' && l.path === '/w').map((l) => l.worker)).size === 2, 10_000, () => `served by ${[...workers].join(', ')}`);
  });
});
