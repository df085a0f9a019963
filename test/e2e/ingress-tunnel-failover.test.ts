// An agent killed while the edge relays a request to it: the request goes to the next
// tunnel of the group that is online, instead of a 502 (a GET, or any request the agent
// never received); a POST the dying agent may have passed on is not sent twice.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { route, startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const servers: TestServer[] = [];
const ingresses: HttpIngress[] = [];
const upstreams: http.Server[] = [];
const agents: AgentProcess[] = [];

afterAll(async () => {
  for (const a of agents) a.kill();
  for (const i of ingresses) await i.close();
  for (const u of upstreams) { u.closeAllConnections(); await new Promise((r) => u.close(r)); }
  for (const s of servers) await s.close();
});

/** An upstream that answers at once, or (`hold`) never: it only counts what reached it. */
async function upstream(name: string, hold: boolean) {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    if (!hold) res.writeHead(200, { 'x-upstream': name }).end(name);
  });
  upstreams.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as AddressInfo).port, seen };
}

async function group() {
  const s = await startTestServer({ agentHeartbeatMs: 10_000, agentRelayPool: 0 });
  servers.push(s);
  const dying = await upstream('dying', true);
  const alive = await upstream('alive', false);
  const cr = await credentialToken(s);
  const agent = (port: number) => {
    const p = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=web', '--forwards-to', `127.0.0.1:${port}`]);
    agents.push(p);
    return p;
  };
  const doomed = agent(dying.port);
  await doomed.waitFor('online: tn_');
  await agent(alive.port).waitFor('online: tn_');
  const ing = await startHttpIngress(tableOf({
    edges: [{ id: 'edghts_app', hostports: ['app.example.com:443'], routes: [route('edghtsrt_web', '/', { backend: { enabled: true, backend_id: 'bkdtg_web' } })] }],
    backends: [{ id: 'bkdtg_web', kind: 'TunnelGroupBackend', labels: { app: 'web' } }],
  }), { gateway: s.server.gateway, upstreamTimeoutMs: 30_000 });
  ingresses.push(ing);
  return { s, ing, doomed, dying, alive };
}

describe('a tunnel group whose agent dies under a request', () => {
  it('a GET in flight to the killed agent is answered by the other tunnel, not 502', async () => {
    const { ing, doomed, dying } = await group();
    // Round robin: of two GETs, one is held by the upstream behind the agent about to die.
    const first = ing.get('/page');
    const second = ing.get('/page');
    await until(() => dying.seen.length === 1, 15_000, () => 'no request reached the dying agent\'s upstream');
    doomed.kill('SIGKILL');
    for (const r of await Promise.all([first, second])) {
      expect(r.status, r.text).toBe(200);
      expect(r.headers['x-upstream']).toBe('alive');
    }
  }, 60_000);

  it('a POST in flight to the killed agent is not sent again: 502', async () => {
    const { ing, doomed, dying, alive } = await group();
    const first = ing.get('/form', { method: 'POST', body: 'a=1' });
    const second = ing.get('/form', { method: 'POST', body: 'a=1' });
    await until(() => dying.seen.length === 1, 15_000, () => 'no request reached the dying agent\'s upstream');
    doomed.kill('SIGKILL');
    const statuses = (await Promise.all([first, second])).map((r) => r.status).sort();
    expect(statuses).toEqual([200, 502]);
    expect(alive.seen).toEqual(['POST /form']);
  }, 60_000);
});
