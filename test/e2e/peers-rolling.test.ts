// Issue 33's drain behind HAProxy (its configuration: test/helpers/haproxy.ts, as in
// docs/agents.md): three instances on one PostgreSQL database are restarted in place, one at
// a time, under steady load through HAProxy, each stopped the way SIGTERM stops it
// (RunningServer.drainAndClose, what bin/serve.ts calls on SIGTERM: /healthz answers 503, its
// agents are told to reconnect, the grace passes, what is in flight finishes), and started
// again on the same ports; not one request fails. The instances run in this process: a process
// start takes tens of seconds on a loaded 2-core machine, which would not fit the file's time
// (peers-haproxy.test.ts runs processes, and kills one with -9).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { haproxyBin, haproxyConfig, HOST, type Slot } from '../helpers/haproxy.js';
import { edgeRequest, localCa } from '../helpers/ingress-client.js';
import { freePort } from '../helpers/ports.js';
import { startTestServer, TEST_SECRET_KEY, type TestServer } from '../helpers/server.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the rolling-restart suite: initdb is not on the PATH ***\n');
if (!haproxyBin) console.warn('\n*** SKIPPING the rolling-restart suite: haproxy is not installed (.ci/run installs Debian\'s) ***\n');
// The balancer must see /healthz fail (2 checks 400 ms apart) well within the grace, also on a
// loaded CI machine, where a stop and a start each take seconds.
const GRACE_MS = 5000;

describe.skipIf(!available || !haproxyBin)('a rolling SIGTERM restart behind HAProxy', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  let db: string;
  const slots: Slot[] = [];
  const instances: TestServer[] = [];
  const upstreams: http.Server[] = [];
  const agents: AgentProcess[] = [];
  let haproxy: ChildProcess;
  const front = { ingress: 0, agents: 0 };
  let ca: string;
  const start = (n: number) => startTestServer({
    databaseUrl: db, secretKey: TEST_SECRET_KEY, agentHeartbeatMs: 5000, port: slots[n].api,
    ingress: [{ publicPort: 443, host: '127.0.0.1', port: slots[n].ingress }], peerListen: { host: '127.0.0.1', port: 0 },
  });
  const one = async (i: number) => {
    const app = i % 2 ? 'a' : 'b';
    try {
      const r = await edgeRequest({ port: front.ingress, host: HOST, path: `/${app}/${i}`, ca });
      return r.status === 200 && r.text === `upstream-${app} /${app}/${i}` ? 'ok' : `${r.status} ${r.text.slice(0, 200)}`;
    } catch (e) {
      return (e as Error).message;
    }
  };

  beforeAll(async () => {
    pg = await startPostgres();
    db = await pg.createDatabase('rolling');
    for (let n = 0; n < 3; n++) slots.push({ api: await freePort(), ingress: await freePort() });
    for (let n = 0; n < 3; n++) instances.push(await start(n));
    Object.assign(front, { ingress: await freePort(), agents: await freePort() });
    const dir = tempDir('edgeform-haproxy-');
    fs.writeFileSync(path.join(dir, 'haproxy.cfg'), haproxyConfig({ ...front, instances: slots }));
    haproxy = spawn(haproxyBin!, ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: 'ignore' });
    await until(async () => (await fetch(`http://127.0.0.1:${front.agents}/healthz`).catch(() => undefined))?.status === 200, 15_000, () => 'HAProxy did not answer');
    const a = instances[0];
    const cr = await credentialToken(a);
    const backends: Record<string, string> = {};
    for (const app of ['a', 'b']) {
      const server = http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'text/plain' }); res.end(`upstream-${app} ${req.url}`); });
      server.keepAliveTimeout = 300_000;
      upstreams.push(server);
      const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port)));
      for (let k = 0; k < 2; k++) {
        const agent = startAgent(['--api-url', `http://127.0.0.1:${front.agents}`, '--authtoken', cr.token, '--label', `app=${app}`, '--forwards-to', `127.0.0.1:${port}`]);
        agents.push(agent);
        await agent.waitFor('online: tn_', 30_000);
      }
      backends[app] = (await a.post('/backends/tunnel_group', { labels: { app } })).body.id;
    }
    const edge = (await a.post('/edges/https', { hostports: [`${HOST}:443`] })).body.id;
    for (const app of ['a', 'b']) await a.post(`/edges/https/${edge}/routes`, { match_type: 'path_prefix', match: `/${app}`, backend: { backend_id: backends[app] } });
    ca = localCa(a);
    for (const x of slots) {
      await until(async () => {
        const r = await Promise.all(['a', 'b'].map((app) => edgeRequest({ port: x.ingress, host: HOST, path: `/${app}/warm`, ca }).catch(() => undefined)));
        return r.every((y, k) => y?.text === `upstream-${['a', 'b'][k]} /${['a', 'b'][k]}/warm`);
      }, 30_000, () => `the instance on ${x.ingress} did not reach both upstreams`);
    }
  }, 85_000);

  afterAll(async () => {
    for (const x of agents) x.kill();
    haproxy?.kill('SIGKILL');
    for (const u of upstreams) { u.closeAllConnections(); u.close(); }
    for (const s of instances) await s.server.close().catch(() => {});
    pg?.stop();
    removeTempDirs();
  });

  it('restarts all three in place, one SIGTERM drain at a time, under load, without one failed request', async () => {
    let stopped = false;
    const results: string[] = [];
    let i = 0;
    const runners = Array.from({ length: 4 }, async () => {
      while (!stopped) results.push(await one(i++));
    });
    const steps: string[] = [];
    for (let n = 0; n < 3; n++) {
      const t0 = Date.now();
      // What bin/serve.ts does on SIGTERM.
      await instances[n].server.drainAndClose(GRACE_MS);
      const t1 = Date.now();
      instances[n] = await start(n);
      await until(async () => (await fetch(`http://127.0.0.1:${slots[n].api}/healthz`).catch(() => undefined))?.status === 200, 20_000);
      // HAProxy's rise (2 checks 400 ms apart), and the new instance's peers and agents.
      await new Promise((r) => setTimeout(r, 2000));
      steps.push(`drained in ${t1 - t0} ms (${GRACE_MS} ms grace), up again in ${Date.now() - t1} ms`);
    }
    stopped = true;
    await Promise.all(runners);
    const failed = results.filter((r) => r !== 'ok');
    console.log(`rolling restart: ${results.length} requests, ${failed.length} failed; ${steps.join('; ')}`);
    expect(failed).toEqual([]);
    expect(results.length).toBeGreaterThan(50);
  }, 150_000);
});
