// Several `edgeform serve` processes on one PostgreSQL database behind Debian's HAProxy, as
// docs/agents.md ("Several instances") deploys them: HAProxy in TCP mode in front of the
// ingress ports (TLS passes through) and of the API ports (agents connect there), each
// instance health-checked on its /healthz. Two upstreams (`a`, `b`), each served by two
// `edgeform agent`s that connect through HAProxy (so to different instances), and an HTTPS
// edge routing /a and /b to tunnel-group backends. Loads through HAProxy record every result.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
// @ts-expect-error: a plain .mjs script without types
import { startPostgres } from '../../scripts/pg-cluster.mjs';
import { startAgent, type AgentProcess } from './agent.js';
import { agentToken, startIngress, type Ingress } from './ingress.js';
import { edgeRequest } from './ingress-client.js';
import { freePort } from './ports.js';
import { killServers } from './serve.js';
import { TEST_SECRET_KEY } from './server.js';
import { removeTempDirs, tempDir } from './temp.js';
import { until } from './wait.js';

export const haproxyBin = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find((p) => fs.existsSync(p));
export const HOST = 'app.example.com';

export interface Slot { api: number; ingress: number }

/** The configuration of docs/agents.md, "Several instances", with loopback ports. */
export function haproxyConfig(o: { ingress: number; agents: number; instances: Slot[] }) {
  const servers = (port: (i: Slot) => string) => o.instances.map((x, n) => `  server edgeform${n + 1} ${port(x)}`).join('\n');
  return `global
  maxconn 4000

defaults
  mode tcp
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  # Agents' connections are long-lived; their heartbeats keep them busy.
  timeout tunnel 1h
  # A connection refused by an instance that just stopped goes to another.
  retries 3
  option redispatch
  # Out of the rotation after two failed checks (/healthz answers 503 once an instance drains):
  # within about a second, well inside edgeform's --drain-grace.
  timeout check 2s
  default-server inter 400ms fall 2 rise 2

frontend ingress
  bind 127.0.0.1:${o.ingress}
  default_backend edgeform_ingress

backend edgeform_ingress
  balance roundrobin
  option httpchk GET /healthz
  http-check expect status 200
${servers((x) => `127.0.0.1:${x.ingress} check port ${x.api}`)}

frontend agents
  bind 127.0.0.1:${o.agents}
  default_backend edgeform_api

backend edgeform_api
  balance roundrobin
  option httpchk GET /healthz
  http-check expect status 200
${servers((x) => `127.0.0.1:${x.api} check`)}
`;
}

export interface Cluster {
  slots: Slot[];
  /** The instance running in each slot (undefined: none). */
  instances: (Ingress | undefined)[];
  front: { ingress: number; agents: number };
  agents: AgentProcess[];
  ca: string;
  /** Starts an instance in slot `n` (its ports fixed, its own data folder). */
  start(n: number): Promise<Ingress>;
  healthy(n: number): Promise<boolean>;
  /** One request through HAProxy: 'ok' when the route's own upstream answered, else what happened; a new connection unless `agent` keeps them. */
  one(i: number, agent?: https.Agent): Promise<string>;
  load(concurrency: number): { results: { at: number; result: string }[]; stop(): Promise<{ at: number; result: string }[]> };
  close(): Promise<void>;
}

/** `running` instances started (in slots 0..running-1) of `slots` slots in HAProxy's configuration. */
export async function startCluster(o: { slots: number; running: number; graceSeconds: number }): Promise<Cluster> {
  const pg = await startPostgres();
  const db = await pg.createDatabase('haproxy');
  const slots: Slot[] = [];
  for (let n = 0; n < o.slots; n++) slots.push({ api: await freePort(), ingress: await freePort() });
  const upstreams: http.Server[] = [];
  const agents: AgentProcess[] = [];
  let haproxy: ChildProcess | undefined;
  const start = (n: number) => startIngress([443], { EDGEFORM_SECRET_KEY: TEST_SECRET_KEY, EDGEFORM_AGENT_HEARTBEAT_INTERVAL: '5' },
    ['--database', db, '--port', String(slots[n].api), '--peer-listen', '127.0.0.1:0', '--drain-grace', String(o.graceSeconds)], { 443: slots[n].ingress });
  const c: Cluster = {
    slots,
    instances: [],
    front: { ingress: await freePort(), agents: await freePort() },
    agents,
    ca: '',
    start,
    healthy: async (n) => (await fetch(`http://127.0.0.1:${slots[n].api}/healthz`).catch(() => undefined))?.status === 200,
    async one(i, agent) {
      const app = i % 2 ? 'a' : 'b';
      try {
        const r = await edgeRequest({ port: c.front.ingress, host: HOST, path: `/${app}/${i}`, ca: c.ca, agent });
        return r.status === 200 && r.text === `upstream-${app} /${app}/${i}` ? 'ok' : `${r.status} ${r.text.slice(0, 200)}`;
      } catch (e) {
        return (e as Error).message;
      }
    },
    load(concurrency) {
      let stopped = false;
      const results: { at: number; result: string }[] = [];
      let n = 0;
      const runners = Array.from({ length: concurrency }, async () => {
        while (!stopped) results.push({ at: Date.now(), result: await c.one(n++) });
      });
      return { results, stop: async () => { stopped = true; await Promise.all(runners); return results; } };
    },
    async close() {
      for (const x of agents) x.kill();
      haproxy?.kill('SIGKILL');
      killServers();
      for (const u of upstreams) { u.closeAllConnections(); u.close(); }
      pg.stop();
      removeTempDirs();
    },
  };
  try {
    c.instances = await Promise.all(slots.map((_, n) => (n < o.running ? start(n) : undefined)));
    const dir = tempDir('edgeform-haproxy-');
    fs.writeFileSync(path.join(dir, 'haproxy.cfg'), haproxyConfig({ ...c.front, instances: slots }));
    haproxy = spawn(haproxyBin!, ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    haproxy.stdout!.on('data', (d) => { out += d; });
    haproxy.stderr!.on('data', (d) => { out += d; });
    await until(async () => (await fetch(`http://127.0.0.1:${c.front.agents}/healthz`).catch(() => undefined))?.status === 200, 15_000, () => `HAProxy did not answer: ${out}`);
    const a = c.instances[0]!;
    const token = await agentToken(a);
    const backends: Record<string, string> = {};
    for (const app of ['a', 'b']) {
      const server = http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end(`upstream-${app} ${req.url}`); });
      // Longer than the test: an idle upstream connection closing just as the agent reuses it is another story (a 502 here).
      server.keepAliveTimeout = 300_000;
      upstreams.push(server);
      const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port)));
      // Two agents per upstream, one after the other through HAProxy's round robin: on different instances.
      for (let k = 0; k < 2; k++) {
        const agent = startAgent(['--api-url', `http://127.0.0.1:${c.front.agents}`, '--authtoken', token, '--label', `app=${app}`, '--forwards-to', `127.0.0.1:${port}`]);
        agents.push(agent);
        await agent.waitFor('online: tn_', 30_000);
      }
      backends[app] = (await a.api('POST', '/backends/tunnel_group', { labels: { app } })).body.id;
    }
    const edge = (await a.api('POST', '/edges/https', { hostports: [`${HOST}:443`] })).body.id;
    for (const app of ['a', 'b']) await a.api('POST', `/edges/https/${edge}/routes`, { match_type: 'path_prefix', match: `/${app}`, backend: { backend_id: backends[app] } });
    c.ca = await a.ca();
    // Every instance reaches every tunnel (its peers connected, the route applied).
    for (const [n, x] of slots.entries()) {
      if (!c.instances[n]) continue;
      await until(async () => {
        const r = await Promise.all(['a', 'b'].map((app) => edgeRequest({ port: x.ingress, host: HOST, path: `/${app}/warm`, ca: c.ca }).catch(() => undefined)));
        return r.every((y, k) => y?.text === `upstream-${['a', 'b'][k]} /${['a', 'b'][k]}/warm`);
      }, 30_000, () => `the instance on ${x.ingress} did not reach both upstreams`);
    }
  } catch (e) {
    await c.close();
    throw e;
  }
  return c;
}
