// `edgeform serve` on PostgreSQL rides out its database going away, as a real process on a
// real cluster: a connection terminated while a write transaction holds it
// (pg_terminate_backend), a restart of the cluster, the connection limit (53300), a row held
// FOR UPDATE by another client, a start while the cluster is still down. The API answers 503
// with Retry-After meanwhile (never 500), the process never exits, and everything resumes
// by itself when the database is back.
import { afterAll, afterEach, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { startCli } from '../helpers/cli-process.js';
import { api, killServers, serve, serveToExit, type Serving } from '../helpers/serve.js';
import { credentialToken, sessions, startAgent, type AgentProcess } from '../helpers/agent.js';
import { startTestServer, TEST_SECRET_KEY, TEST_TOKEN, type TestServer } from '../helpers/server.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';
import { edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { eventually, until } from '../helpers/wait.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the PostgreSQL outage suite: initdb is not on the PATH ***\n');

interface Cluster { port: number; url(db: string): string; createDatabase(name: string): Promise<string>; halt(): void; resume(): void; stop(): void }

const clusters: Cluster[] = [];
async function cluster(settings: Record<string, string | number> = {}): Promise<Cluster> {
  const pg: Cluster = await startPostgres({ settings });
  clusters.push(pg);
  return pg;
}

const ENV = { EDGEFORM_BOOTSTRAP_TOKEN: TEST_TOKEN, EDGEFORM_SECRET_KEY: TEST_SECRET_KEY };
const startOn = (url: string, args: string[] = [], env: Record<string, string> = {}) => serve(['--database', url, '--data-dir', tempDir('edgeform-pg-outage-'), ...args], { ...ENV, ...env });

/** A client of its own, as an operator's psql would be. */
async function psql(url: string) {
  const { default: Pg } = await import('pg');
  const c = new Pg.Client({ connectionString: url });
  c.on('error', () => {});
  await c.connect();
  return c;
}

const alive = (s: Serving) => s.child.exitCode === null && s.child.signalCode === null;

async function expect503(r: Response) {
  const text = await r.text();
  expect(r.status, text).toBe(503);
  expect(JSON.parse(text).error_code).toBe('ERR_SERVICE_503');
  expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(text).not.toMatch(/ECONNREFUSED|postgres|SELECT|prisma|127\.0\.0\.1|at \w+ \(/i);
}

describe.skipIf(!available)('PostgreSQL outages', () => {
  afterEach(() => killServers());
  afterAll(() => {
    for (const c of clusters.splice(0)) c.stop();
    removeTempDirs();
  });

  it('a connection terminated while a write transaction holds it is a 503, not an exit', async () => {
    const pg = await cluster();
    const url = await pg.createDatabase('held');
    const s = await startOn(url);
    const policy = await (await api(`${s.url}/ip_policies`, TEST_TOKEN, 'POST', { description: 'before' })).json();
    const holder = await psql(url);
    await holder.query('BEGIN');
    await holder.query('SELECT * FROM "Resource" WHERE "id" = $1 FOR UPDATE', [policy.id]);
    // The PATCH's transaction waits for the row: a pooled client held by a write transaction.
    const patch = api(`${s.url}/ip_policies/${policy.id}`, TEST_TOKEN, 'PATCH', { description: 'during' });
    await until(async () => (await holder.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = 'held'`)).rows[0].n > 0, 10_000, () => 'the PATCH never waited for the lock');
    // Every connection of the server, as a failover or an administrator would end them.
    await holder.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'held' AND pid <> pg_backend_pid()`);
    await expect503(await patch);
    await holder.query('ROLLBACK');
    await holder.end();
    expect(alive(s)).toBe(true);
    // Resumed by itself: new connections for the pool, the bus and the health check.
    const after = await api(`${s.url}/ip_policies/${policy.id}`, TEST_TOKEN, 'PATCH', { description: 'after' });
    expect(after.status).toBe(200);
    await until(async () => (await (await fetch(`${s.url}/healthz`)).json()).notifications === 'listening', 10_000, () => 'the bus never listened again');
    expect(s.stderr()).not.toMatch(/uncaught|unhandled/i);
  });

  it('a restart of the cluster: 503 with Retry-After while it is down (healthz too), everything back by itself after', async () => {
    const pg = await cluster();
    const url = await pg.createDatabase('restart');
    const s = await startOn(url);
    expect((await api(`${s.url}/ip_policies`, TEST_TOKEN, 'POST', { description: 'one' })).status).toBe(201);
    pg.halt();
    for (const [method, body] of [['GET', undefined], ['POST', { description: 'two' }]] as const) {
      await expect503(await api(`${s.url}/ip_policies`, TEST_TOKEN, method, body));
    }
    const health = await fetch(`${s.url}/healthz`);
    expect(health.status).toBe(503);
    expect(health.headers.get('retry-after')).toBeTruthy();
    expect((await health.json()).database).toBe('unreachable');
    pg.resume();
    await until(async () => (await api(`${s.url}/ip_policies`, TEST_TOKEN, 'POST', { description: 'three' })).status === 201, 20_000, () => 'the API never came back');
    const list = await (await api(`${s.url}/ip_policies`, TEST_TOKEN)).json();
    expect(list.ip_policies.map((p: { description: string }) => p.description).sort()).toEqual(['one', 'three']);
    await until(async () => (await fetch(`${s.url}/healthz`)).status === 200, 10_000, () => 'healthz never came back');
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/^edgeform_database_up 1$/m);
    expect(metrics).toMatch(/^edgeform_gateway_bus_reconnects_total [1-9]/m);
    expect(alive(s)).toBe(true);
  });

  it('the connection limit (53300) is a 503, not a 500', async () => {
    const pg = await cluster({ max_connections: 8, superuser_reserved_connections: 1 });
    const url = await pg.createDatabase('limit');
    const s = await startOn(url, ['--database-pool-size', '2']);
    // Idle clients take every other slot (the server holds its pool, bus and health connections).
    const hogs = [];
    for (;;) {
      try {
        hogs.push(await psql(url));
      } catch (e) {
        expect((e as { code?: string }).code).toBe('53300');
        break;
      }
    }
    // The pool's own connections end, so the next request needs a new one, which is refused.
    const killer = hogs.pop()!;
    await killer.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'limit' AND application_name = '' AND pid <> pg_backend_pid() AND pid NOT IN (SELECT unnest($1::int[]))`, [hogs.map((h) => (h as unknown as { processID: number }).processID)]);
    hogs.push(await psql(url)); // the freed slots, taken again
    hogs.push(await psql(url));
    await expect503(await api(`${s.url}/ip_policies`, TEST_TOKEN, 'POST', { description: 'no slot' }));
    for (const h of hogs) await h.end();
    await until(async () => (await api(`${s.url}/ip_policies`, TEST_TOKEN, 'POST', { description: 'slot' })).status === 201, 20_000, () => 'the API never came back');
    expect(alive(s)).toBe(true);
  });

  it('a row held FOR UPDATE by another client: twenty PATCHes answer 503 after the lock timeout; /healthz stays prompt', async () => {
    const pg = await cluster();
    const url = await pg.createDatabase('locked');
    const s = await startOn(url, ['--database-lock-timeout', '1', '--database-acquire-timeout', '2', '--database-pool-size', '4']);
    const policy = await (await api(`${s.url}/ip_policies`, TEST_TOKEN, 'POST', { description: 'before' })).json();
    const holder = await psql(url);
    await holder.query('BEGIN');
    await holder.query('SELECT * FROM "Resource" WHERE "id" = $1 FOR UPDATE', [policy.id]);
    const patches = Array.from({ length: 20 }, (_, i) => api(`${s.url}/ip_policies/${policy.id}`, TEST_TOKEN, 'PATCH', { description: `p${i}` }));
    await until(async () => (await holder.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = 'locked'`)).rows[0].n > 0, 10_000, () => 'no PATCH waited for the lock');
    // The pool is full of waiting PATCHes; the health check has a connection of its own.
    const health = await fetch(`${s.url}/healthz`, { signal: AbortSignal.timeout(1500) });
    expect(health.status).toBe(200);
    for (const r of await Promise.all(patches)) await expect503(r);
    await holder.query('ROLLBACK');
    await holder.end();
    expect((await api(`${s.url}/ip_policies/${policy.id}`, TEST_TOKEN, 'PATCH', { description: 'after' })).status).toBe(200);
  });

  it('a start while PostgreSQL is down waits for it (naming the setting), and gives up after --database-start-timeout', async () => {
    const pg = await cluster();
    const url = await pg.createDatabase('late');
    pg.halt();
    const gaveUp = await serveToExit(['--database', url, '--data-dir', tempDir('edgeform-pg-outage-'), '--database-start-timeout', '1'], ENV);
    expect(gaveUp.code).toBe(1);
    expect(gaveUp.stderr).toMatch(/did not answer within 1 s.*--database-start-timeout \/ EDGEFORM_DATABASE_START_TIMEOUT/);
    const starting = startCli(['serve', '--port', '0', '--database', url, '--data-dir', tempDir('edgeform-pg-outage-')], { ...ENV, EDGEFORM_DATABASE_START_TIMEOUT: '60' });
    try {
      // It says it is waiting, and for how long, while the database is still down.
      await starting.waitFor(/waiting for PostgreSQL.*giving up after 60 s \(--database-start-timeout \/ EDGEFORM_DATABASE_START_TIMEOUT\)/, 30_000, 'stdout');
      pg.resume();
      await starting.waitFor(/edgeform listening on/, 30_000, 'stdout');
      const s = { url: JSON.parse(starting.stdout.split('\n').find((l) => /listening on/.test(l))!).url as string };
      expect((await api(`${s.url}/ip_policies`, TEST_TOKEN)).status).toBe(200);
    } finally {
      starting.kill();
    }
  });

  it('agent commands between instances survive a lost LISTEN connection: the bus reconnects, re-listens, and says so in /healthz and /metrics', async () => {
    const pg = await cluster();
    const url = await pg.createDatabase('bus');
    const servers: TestServer[] = [];
    let agent: AgentProcess | undefined;
    try {
      const a = await startTestServer({ databaseUrl: url, secretKey: TEST_SECRET_KEY });
      servers.push(a);
      const b = await startTestServer({ databaseUrl: url, secretKey: TEST_SECRET_KEY });
      servers.push(b);
      const cr = await credentialToken(a);
      agent = startAgent(['--api-url', a.url, '--authtoken', cr.token, 'http', '3000']);
      await agent.waitFor('online: tn_');
      const [session] = await sessions(a);
      expect((await b.get('/healthz', { token: null, version: null })).body.notifications).toBe('listening');
      // Every LISTEN connection of the database ends (both instances' buses, the ingress's listener if any).
      const admin = await psql(url);
      const { rows } = await admin.query(`SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE datname = 'bus' AND query LIKE 'LISTEN%'`);
      await admin.end();
      expect(rows.length).toBeGreaterThanOrEqual(2);
      for (const s of [a, b]) {
        await until(async () => /^edgeform_gateway_bus_reconnects_total [1-9]/m.test((await s.get('/metrics', { token: null, version: null })).text), 10_000, () => 'the bus never noticed its lost connection');
        await until(async () => (await s.get('/healthz', { token: null, version: null })).body.notifications === 'listening', 10_000, () => 'the bus never listened again');
      }
      expect((await b.get('/metrics', { token: null, version: null })).text).toMatch(/^edgeform_gateway_bus_connected 1$/m);
      // A command sent to the instance that does not hold the agent still reaches it.
      expect((await b.post(`/tunnel_sessions/${session.id}/stop`, {})).status).toBe(204);
      expect(await agent.exited).toBe(0);
    } finally {
      agent?.kill();
      for (const s of servers) await s.close().catch(() => {});
    }
  });

  it('the ingress keeps serving from its table while the database is down, and takes changes again once it is back', async () => {
    const pg = await cluster();
    const url = await pg.createDatabase('edge');
    const s = await startTestServer({ databaseUrl: url, secretKey: TEST_SECRET_KEY, ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] });
    try {
      const backend = (await s.post('/backends/http_response', { body: 'v1' })).body.id;
      const edge = (await s.post('/edges/https', { hostports: ['outage.example.com:443'] })).body.id;
      await s.post(`/edges/https/${edge}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: backend } });
      const get = () => edgeRequest({ port: ingressPort(s, 443), host: 'outage.example.com', ca: localCa(s) });
      expect((await get()).text).toBe('v1');
      pg.halt();
      expect((await s.patch(`/backends/http_response/${backend}`, { body: 'v2' })).status).toBe(503);
      for (let i = 0; i < 5; i++) {
        const r = await get();
        expect(r.status).toBe(200);
        expect(r.text).toBe('v1');
      }
      pg.resume();
      await until(async () => (await s.patch(`/backends/http_response/${backend}`, { body: 'v2' })).status === 200, 20_000, () => 'the API never came back');
      await eventually(async () => expect((await get()).text).toBe('v2'), 5000);
    } finally {
      await s.close().catch(() => {});
    }
  });
});
