// Agents across several server instances on one PostgreSQL database: every instance lists
// every session, a command sent to an instance that does not hold the agent's connection
// reaches it (LISTEN/NOTIFY), and the sessions of an instance that crashed (kill -9) are
// swept within the heartbeat interval by the instances still running.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { credentialToken, hostnameConfig, sessions, startAgent, tunnels, type AgentProcess } from '../helpers/agent.js';
import { until } from '../helpers/wait.js';
import { killServers, serve } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';
import { startTestServer, TEST_SECRET_KEY, TEST_TOKEN, type TestServer } from '../helpers/server.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the agent PostgreSQL suite: initdb is not on the PATH ***\n');

describe.skipIf(!available)('agents on several instances (PostgreSQL)', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  let url: string;
  let a: TestServer;
  let b: TestServer;
  const agents: AgentProcess[] = [];

  beforeAll(async () => {
    pg = await startPostgres();
    url = await pg.createDatabase('agents');
    a = await startTestServer({ databaseUrl: url, agentHeartbeatMs: 1000, secretKey: TEST_SECRET_KEY });
    b = await startTestServer({ databaseUrl: url, agentHeartbeatMs: 1000, secretKey: TEST_SECRET_KEY });
  });
  afterAll(async () => {
    for (const x of agents) x.kill();
    killServers();
    removeTempDirs();
    await a?.close().catch(() => {});
    await b?.close().catch(() => {});
    pg?.stop();
  });

  it('both instances list the session; a stop sent to the other instance reaches the agent', async () => {
    const cr = await credentialToken(a);
    const agent = startAgent(['--api-url', a.url, '--authtoken', cr.token, '--label', 'app=pg', '--forwards-to', '127.0.0.1:1']);
    agents.push(agent);
    await agent.waitFor('online: tn_');
    const [onA] = await sessions(a);
    expect((await sessions(b)).map((x) => x.id)).toEqual([onA.id]);
    expect((await b.get('/tunnels')).body.tunnels).toHaveLength(1);
    expect((await b.post(`/tunnel_sessions/${onA.id}/stop`, {})).status).toBe(204);
    expect(await agent.exited).toBe(0);
    await until(async () => (await sessions(b)).length === 0);
  });

  it('update refusals travel back with their code', async () => {
    const cr = await credentialToken(a);
    const agent = startAgent(['--api-url', a.url, '--authtoken', cr.token, '--no-update-check', 'http', '3000']);
    agents.push(agent);
    await agent.waitFor('online: tn_');
    const [sess] = await sessions(a);
    const r = await b.post(`/tunnel_sessions/${sess.id}/update`, {});
    expect(r.status).toBe(409);
    expect(r.body.error_code).toBe('ERR_SERVICE_323');
    agent.kill();
    await until(async () => (await sessions(b)).length === 0);
  });

  it('an explicit hostname is held once across instances: agents racing for it on two instances, one gets it', async () => {
    const cr = await credentialToken(a);
    const racers = [a, b, a, b].map((srv) => startAgent(['--config', hostnameConfig('pg.example.com'), '--api-url', srv.url, '--authtoken', cr.token]));
    agents.push(...racers);
    await until(() => racers.every((r) => /online: tn_|refused/.test(r.output())), 20_000, () => racers.map((r) => r.output()).join('\n'));
    const winners = racers.filter((r) => /online: tn_/.test(r.output()));
    expect(winners).toHaveLength(1);
    expect(racers.filter((r) => /refused: .*pg\.example\.com is already served.*ERR_SERVICE_320/.test(r.output()))).toHaveLength(3);
    await until(async () => (await tunnels(b)).map((t) => t.public_url).join() === 'http://pg.example.com', 10_000);
    // The holder goes; an agent on either instance gets the hostname.
    winners[0].kill();
    await until(async () => (await tunnels(a)).length === 0, 10_000);
    const next = startAgent(['--config', hostnameConfig('pg.example.com'), '--api-url', b.url, '--authtoken', cr.token]);
    agents.push(next);
    await next.waitFor('online: tn_');
    await until(async () => (await tunnels(a)).map((t) => t.public_url).join() === 'http://pg.example.com', 10_000);
    for (const r of [...racers, next]) r.kill();
    await until(async () => (await sessions(a)).length === 0, 10_000);
  });

  it('a crashed instance\'s sessions are swept by the others', async () => {
    // The key every instance of this database shares (another would be refused at start).
    const server = await serve(['--database', url, '--data-dir', tempDir('edgeform-crash-'), '--agent-heartbeat-interval', '1'], { EDGEFORM_BOOTSTRAP_TOKEN: TEST_TOKEN, EDGEFORM_SECRET_KEY: TEST_SECRET_KEY });
    const cUrl = server.url;
    const cr = await credentialToken(b);
    const agent = startAgent(['--api-url', cUrl, '--authtoken', cr.token, 'http', '3000']);
    agents.push(agent);
    await agent.waitFor('online: tn_');
    expect(await sessions(b)).toHaveLength(1);
    server.child.kill('SIGKILL');
    await until(async () => (await sessions(b)).length === 0 && (await b.get('/tunnels')).body.tunnels.length === 0, 10_000);
    expect(agent.child.exitCode).toBeNull();
  });
});
