// `edgeform agent` as a user runs it: sessions and tunnels become live rows with every SPEC
// field, tunnel-group backends see the tunnels whose labels match, the acl is enforced per
// tunnel, and a session goes away with its agent (stop, kill -9, a deleted credential, a
// deactivated bot), while a server restart is ridden out.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentTestHooks } from '../helpers/agent-hooks.js';
import { credentialToken, sessions, tunnels } from '../helpers/agent.js';
import { tempDir } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
const agent = agentTestHooks(async () => (s = await startTestServer({ agentHeartbeatMs: 1000, region: 'eu-test' })));


const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

describe('a labeled tunnel', () => {
  it('lists the session and the tunnel with every SPEC field, and backends see it', async () => {
    const cr = await credentialToken(s, ['bind:app=web', 'bind:env=prod']);
    const backend = (await s.post('/backends/tunnel_group', { labels: { app: 'web' } })).body;
    const other = (await s.post('/backends/tunnel_group', { labels: { app: 'api' } })).body;
    const a = agent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=web', '--label', 'env=prod', '--forwards-to', '127.0.0.1:3000', '--metadata', '{"team":"web"}']);
    await a.waitFor('online: tn_');
    const [session] = await sessions(s);
    expect(session).toEqual({
      id: expect.stringMatching(/^ts_/),
      uri: `${s.url}/tunnel_sessions/${session.id}`,
      created_at: expect.stringMatching(RFC3339),
      agent_version: JSON.parse(fs.readFileSync('package.json', 'utf8')).version,
      credential: { id: cr.id, uri: `${s.url}/credentials/${cr.id}` },
      ip: '127.0.0.1',
      metadata: '{"team":"web"}',
      os: process.platform,
      region: 'eu-test',
      started_at: expect.stringMatching(RFC3339),
      transport: 'service/v2',
    });
    expect((await s.get(`/tunnel_sessions/${session.id}`)).body).toEqual(session);
    const [t] = await tunnels(s);
    expect(t).toEqual({
      id: expect.stringMatching(/^tn_/),
      uri: `${s.url}/tunnels/${t.id}`,
      created_at: expect.stringMatching(RFC3339),
      started_at: session.started_at,
      metadata: '{"team":"web"}',
      region: 'eu-test',
      tunnel_session: { id: session.id, uri: session.uri },
      labels: { app: 'web', env: 'prod' },
      backends: [{ id: backend.id, uri: backend.uri }],
      forwards_to: '127.0.0.1:3000',
    });
    expect((await s.get(`/backends/tunnel_group/${backend.id}`)).body.tunnels).toEqual([{ id: t.id, uri: t.uri }]);
    expect((await s.get(`/backends/tunnel_group/${other.id}`)).body.tunnels).toEqual([]);
    expect((await s.get('/endpoints')).body.endpoints).toEqual([]);
    expect(a.output()).not.toContain(cr.token);
  });
});

describe('events', () => {
  it('session and tunnel creation and deletion are events like any resource\'s', async () => {
    const dest = (await s.post('/event_destinations', { target: { log: {} } })).body;
    const types = ['tunnel_session_created.v0', 'tunnel_created.v0', 'tunnel_deleted.v0', 'tunnel_session_deleted.v0'];
    expect((await s.post('/event_subscriptions', { sources: types.map((type) => ({ type })), destination_ids: [dest.id] })).status).toBe(201);
    const cr = await credentialToken(s);
    const a = agent(['--api-url', s.url, '--authtoken', cr.token, 'http', '3000']);
    await a.waitFor('online: tn_');
    const [session] = await sessions(s);
    a.kill();
    const events = async () => (await s.get(`/event_destinations/${dest.id}/events`)).body.events as { type: string; object: { id: string } }[];
    await until(async () => (await events()).length === 4);
    const got = (await events()).reverse();
    expect(got.map((e) => e.type)).toEqual(types);
    expect(got[0].object.id).toBe(session.id);
    expect(got[0].object).not.toHaveProperty('token');
  });
});

describe('ephemeral tunnels', () => {
  it('http 3000 with the token and URL from the environment: an ep_ endpoint and a public_url, no labels', async () => {
    const cr = await credentialToken(s);
    const a = agent(['http', '3000'], { EDGEFORM_AUTHTOKEN: cr.token, EDGEFORM_API_URL: s.url });
    await a.waitFor('online: tn_');
    const [t] = await tunnels(s);
    expect(t.proto).toBe('http');
    expect(t.public_url).toMatch(/^http:\/\/[0-9a-f]+\.edgeform\.localhost$/);
    expect(t.forwards_to).toBe('http://localhost:3000');
    expect(t.endpoint.id).toMatch(/^ep_/);
    expect(t).not.toHaveProperty('labels');
    expect(t).not.toHaveProperty('backends');
    const ep = (await s.get(`/endpoints/${t.endpoint.id}`)).body;
    expect(ep).toMatchObject({ id: t.endpoint.id, uri: t.endpoint.uri, public_url: t.public_url, proto: 'http' });
    // In the one endpoint collection with cloud endpoints (issue 36): type agent, read-only.
    expect(ep).toMatchObject({
      type: 'agent', url: t.public_url, upstream_url: 'http://localhost:3000', bindings: ['public'], pooling_enabled: false, traffic_policy: null,
      tunnel: { id: t.id, uri: t.uri }, tunnel_session: t.tunnel_session,
    });
    const agents = (await s.get(`/endpoints?filter=${encodeURIComponent('obj.type == "agent"')}`)).body.endpoints;
    expect(agents).toEqual([ep]);
    expect((await s.get(`/endpoints?filter=${encodeURIComponent('obj.type == "cloud"')}`)).body.endpoints).toEqual([]);
    for (const r of [await s.request('PATCH', `/endpoints/${ep.id}`, { description: 'x' }), await s.request('DELETE', `/endpoints/${ep.id}`)]) {
      expect(r.status, r.text).toBe(409);
      expect(r.body.error_code).toBe('ERR_SERVICE_362');
    }
    expect((await s.get(`/endpoints/${ep.id}`)).body).toEqual(ep);
  });

  it('a config file with several tunnels, each with its own metadata', async () => {
    const cr = await credentialToken(s);
    const dir = tempDir('edgeform-agent-');
    const file = path.join(dir, 'agent.yml');
    fs.writeFileSync(file, `api_url: ${s.url}
authtoken: ${cr.token}
metadata: session-meta
tunnels:
  web:
    labels: { app: cfg-web }
    forwards_to: 127.0.0.1:3001
    metadata: web-meta
  raw:
    proto: tcp
    addr: 5432
    metadata: tcp-meta
  site:
    proto: https
    addr: 8443
    hostname: site.example.com
`);
    const a = agent(['--config', file]);
    await until(() => (a.output().match(/online: tn_/g) ?? []).length === 3, 20_000, a.output);
    const list = await tunnels(s);
    const by = (pred: (t: any) => boolean) => list.find(pred);
    expect(by((t) => t.labels)?.metadata).toBe('web-meta');
    expect(by((t) => t.proto === 'tcp')).toMatchObject({ metadata: 'tcp-meta', forwards_to: 'localhost:5432', public_url: expect.stringMatching(/^tcp:\/\/edgeform\.localhost:\d+$/) });
    expect(by((t) => t.proto === 'https')).toMatchObject({ metadata: '', public_url: 'https://site.example.com', forwards_to: 'http://localhost:8443' });
    expect((await sessions(s))[0].metadata).toBe('session-meta');
  });
});

describe('the acl', () => {
  it('a refused bind is an error on the agent; the session stays up for its other tunnels', async () => {
    const cr = await credentialToken(s, ['bind:app=ok', 'bind:env=dev', 'bind:*.good.example']);
    const dir = tempDir('edgeform-agent-');
    const file = path.join(dir, 'agent.yml');
    fs.writeFileSync(file, `tunnels:
  allowed: { labels: { app: ok }, forwards_to: 127.0.0.1:1 }
  denied: { labels: { app: nope }, forwards_to: 127.0.0.1:1 }
  one-label-more: { labels: { env: dev, app: payments }, forwards_to: 127.0.0.1:1 }
  every-label: { labels: { env: dev, app: ok }, forwards_to: 127.0.0.1:1 }
  host-ok: { proto: http, addr: 1, hostname: a.good.example }
  host-bad: { proto: http, addr: 1, hostname: a.bad.example }
  again: { labels: { app: ok }, forwards_to: 127.0.0.1:2 }
`);
    const a = agent(['--config', file, '--api-url', s.url, '--authtoken', cr.token]);
    await a.waitFor('tunnel "again" refused');
    expect(a.output()).toMatch(/tunnel "denied" refused: .*acl.*app=nope.*ERR_SERVICE_212/);
    expect(a.output()).toMatch(/tunnel "one-label-more" refused: .*acl.*app=payments.*ERR_SERVICE_212/);
    expect(a.output()).not.toMatch(/tunnel "every-label" refused/);
    expect(a.output()).toMatch(/tunnel "host-bad" refused: .*a\.bad\.example.*ERR_SERVICE_212/);
    expect(a.output()).toMatch(/tunnel "again" refused: .*same|already.*ERR_SERVICE_326/);
    const list = await tunnels(s);
    expect(list.map((t) => t.labels ? Object.entries(t.labels).map(([k, v]) => `${k}=${v}`).sort().join(',') : t.public_url).sort())
      .toEqual(['app=ok', 'app=ok,env=dev', 'http://a.good.example']);
    expect(await sessions(s)).toHaveLength(1);
  });
});

describe('refused tokens', () => {
  it('an unknown token: exit 1 at once, naming the problem and the next step', async () => {
    const a = agent(['--api-url', s.url, '--authtoken', 'not-a-real-token-0000000000000000000000000', 'http', '3000']);
    expect(await a.exited).toBe(1);
    expect(a.output()).toMatch(/ERR_SERVICE_202/);
    expect(a.output()).toMatch(/POST \/credentials/);
    expect(a.output()).not.toContain('not-a-real-token');
  });

  it('an API key token is not a credential: exit 1', async () => {
    const a = agent(['--api-url', s.url, '--authtoken', s.token, 'http', '3000']);
    expect(await a.exited).toBe(1);
    expect(a.output()).toMatch(/not the token of a tunnel credential/);
  });

  it('no token: a usage error (exit 2)', async () => {
    const a = agent(['--api-url', s.url, 'http', '3000']);
    expect(await a.exited).toBe(2);
    expect(a.output()).toMatch(/EDGEFORM_AUTHTOKEN/);
  });
});

describe('liveness', () => {
  it('kill -9 of the agent: the session and its tunnels are gone', async () => {
    const cr = await credentialToken(s);
    const a = agent(['--api-url', s.url, '--authtoken', cr.token, 'tcp', '22']);
    await a.waitFor('online: tn_');
    expect(await sessions(s)).toHaveLength(1);
    a.kill('SIGKILL');
    await until(async () => (await sessions(s)).length === 0 && (await tunnels(s)).length === 0 && (await s.get('/endpoints')).body.endpoints.length === 0);
  });

  it('an agent that goes silent without closing its socket (a partition) is dropped by the heartbeat, and reconnects', async () => {
    // A TCP proxy between agent and server that can freeze its connections without closing them.
    const frozen = new Set<net.Socket>();
    const conns: [net.Socket, net.Socket][] = [];
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(new URL(s.url).port), '127.0.0.1');
      conns.push([client, upstream]);
      for (const [from, to] of [[client, upstream], [upstream, client]]) {
        from.on('data', (c) => { if (!frozen.has(from)) to.write(c); });
        from.on('error', () => to.destroy());
        from.on('close', () => to.destroy());
      }
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const cr = await credentialToken(s);
    const a = agent(['--api-url', `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`, '--authtoken', cr.token, 'http', '3000']);
    await a.waitFor('online: tn_');
    const [first] = await sessions(s);
    for (const [c, u] of conns) { frozen.add(c); frozen.add(u); }
    await until(async () => !(await sessions(s)).some((x) => x.id === first.id));
    await until(() => (a.output().match(/established/g) ?? []).length === 2, 20_000, a.output);
    await until(async () => (await sessions(s)).length === 1);
    for (const [c, u] of conns) { c.destroy(); u.destroy(); }
    await new Promise((r) => proxy.close(r));
  });

  it('a deleted credential closes its sessions; the agent exits 1 and says why', async () => {
    const cr = await credentialToken(s);
    const a = agent(['--api-url', s.url, '--authtoken', cr.token, 'http', '3000']);
    await a.waitFor('online: tn_');
    expect((await s.del(`/credentials/${cr.id}`)).status).toBe(204);
    expect(await a.exited).toBe(1);
    expect(a.output()).toMatch(/credential .* was deleted/);
    expect(await sessions(s)).toHaveLength(0);
  });

  it('a deactivated bot owner closes its sessions', async () => {
    const bot = (await s.post('/bot_users', { name: 'agent-bot' })).body;
    const cr = await credentialToken(s, [], bot.id);
    const a = agent(['--api-url', s.url, '--authtoken', cr.token, 'http', '3000']);
    await a.waitFor('online: tn_');
    expect((await s.patch(`/bot_users/${bot.id}`, { active: false })).status).toBe(200);
    expect(await a.exited).toBe(1);
    expect(a.output()).toMatch(/inactive bot/);
    expect(await sessions(s)).toHaveLength(0);
    // And an inactive bot's credential cannot connect at all.
    const again = agent(['--api-url', s.url, '--authtoken', cr.token, 'http', '3000']);
    expect(await again.exited).toBe(1);
    expect(again.output()).toMatch(/ERR_SERVICE_203/);
  });

  it('a server restart is ridden out: the agent reconnects under a new session', async () => {
    const cr = await credentialToken(s);
    const a = agent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=restart', '--forwards-to', '127.0.0.1:1']);
    await a.waitFor('online: tn_');
    const [before] = await sessions(s);
    await s.restart();
    await until(async () => (await sessions(s)).some((x) => x.id !== before.id));
    expect(a.output()).toMatch(/connection lost|cannot connect/);
    expect((await sessions(s)).map((x) => x.id)).not.toContain(before.id);
    expect(a.child.exitCode).toBeNull();
  });
});
