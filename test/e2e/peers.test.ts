// Issue 33, "any instance reaches any tunnel": three instances on one PostgreSQL database, each
// with a peer listener (--peer-listen), agents connected to two of them. A request reaching
// any instance's ingress is answered by the upstream of the tunnel its backend names, wherever
// that tunnel's agent is connected (HTTP and WebSocket upgrades alike); an agent's endpoint
// hostname is served by every instance; the channel between instances refuses a client
// without the key (no certificate, or one from another key) and closes garbage, and the
// instance keeps serving. A pool of agents' endpoints on two instances is balanced by every one.
import crypto from 'node:crypto';
import http from 'node:http';
import http2 from 'node:http2';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { peerCredentials } from '../../server/gateway/peers/credentials.js';
import { PEER_PATHS } from '../../server/gateway/peers/protocol.js';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { many } from '../helpers/ingress.js';
import { startTestServer, TEST_SECRET_KEY, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the peers suite: initdb is not on the PATH ***\n');

const HOST = 'shared.example.com';
// Agents drop a session after two and a half intervals without a ping; the three instances share
// this process, whose event loop a loaded 2-core machine can hold for seconds at a time.
const HEARTBEAT_MS = 4000;

function startUpstream(name: string, servers: http.Server[]): Promise<number> {
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', 'x-upstream': name });
    res.end(`${name} ${req.url}`);
  });
  server.on('upgrade', (req, socket) => {
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Upstream: ${name}\r\n\r\n`);
    socket.pipe(socket);
  });
  servers.push(server);
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port)));
}

describe.skipIf(!available)('one data plane across three instances (PostgreSQL)', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  const servers: TestServer[] = [];
  const upstreams: http.Server[] = [];
  const agents: AgentProcess[] = [];
  let ca: string;
  let endpointHost: string;
  let databaseUrl: string;
  let token: string;
  const get = (s: TestServer, path: string, host = HOST) => edgeRequest({ port: ingressPort(s, 443), host, path, ca });

  beforeAll(async () => {
    pg = await startPostgres();
    databaseUrl = await pg.createDatabase('peers');
    for (let i = 0; i < 3; i++) {
      servers.push(await startTestServer({
        databaseUrl, secretKey: TEST_SECRET_KEY, agentHeartbeatMs: HEARTBEAT_MS,
        ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }, { publicPort: 7000, host: '127.0.0.1', port: 0 }], peerListen: { host: '127.0.0.1', port: 0 },
      }));
    }
    const [a, , c] = servers;
    const cr = await credentialToken(a);
    token = cr.token;
    const onA = await startUpstream('upstream-a', upstreams);
    const onC = await startUpstream('upstream-c', upstreams);
    const agentA = startAgent(['--api-url', a.url, '--authtoken', cr.token, '--label', 'app=a', '--forwards-to', `127.0.0.1:${onA}`]);
    const agentC = startAgent(['--api-url', c.url, '--authtoken', cr.token, '--label', 'app=c', '--forwards-to', `127.0.0.1:${onC}`]);
    const endpoint = startAgent(['--api-url', c.url, '--authtoken', cr.token, '--no-update-check', 'http', String(onC)]);
    agents.push(agentA, agentC, endpoint);
    await Promise.all([agentA.waitFor('online: tn_'), agentC.waitFor('online: tn_'), endpoint.waitFor('online: tn_')]);
    endpointHost = /online: tn_\S+ https?:\/\/(\S+)/.exec(endpoint.output())![1];
    const edge = await a.post('/edges/https', { hostports: [`${HOST}:443`] });
    for (const app of ['a', 'c']) {
      const b = await a.post('/backends/tunnel_group', { labels: { app } });
      expect(b.status).toBe(201);
      await a.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: `/${app}`, backend: { backend_id: b.body.id } });
    }
    ca = localCa(a);
  }, 60_000);

  afterAll(async () => {
    for (const x of agents) x.kill();
    for (const u of upstreams) { u.closeAllConnections(); u.close(); }
    for (const s of servers) await s.close().catch(() => {});
    pg?.stop();
  });

  it('every instance answers for both tunnels, whichever instance holds the agent', async () => {
    for (const s of servers) {
      await until(async () => {
        const [ra, rc] = [await get(s, '/a/x').catch(() => undefined), await get(s, '/c/x').catch(() => undefined)];
        return ra?.headers['x-upstream'] === 'upstream-a' && rc?.headers['x-upstream'] === 'upstream-c';
      }, 20_000, () => `instance ${servers.indexOf(s)} never reached both tunnels`);
    }
    const replies = await many(300, 12, async (i) => {
      const app = i % 2 ? 'a' : 'c';
      const r = await get(servers[i % 3], `/${app}/n${i}`).catch((e: Error) => ({ status: 0, headers: {} as Record<string, unknown>, text: e.message }));
      return r.status === 200 && r.headers['x-upstream'] === `upstream-${app}` && r.text === `upstream-${app} /${app}/n${i}` ? 'ok' : `instance ${i % 3} /${app}: ${r.status} ${r.text.slice(0, 200)}`;
    });
    expect(replies.filter((x) => x !== 'ok')).toEqual([]);
    // The instance without agents reached them through the others (one peer stream each).
    expect(servers[1].server.gateway.sessionCount).toBe(0);
    // /metrics counts the hops: instance 1 sent each of its requests to another instance, the holders served them.
    const scrape = async (s: TestServer) => (await fetch(`${s.url}/metrics`)).text();
    const value = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1]);
    const [m0, m1] = [await scrape(servers[0]), await scrape(servers[1])];
    expect(value(m1, 'edgeform_peer_links{state="up"}')).toBe(2);
    expect(value(m1, 'edgeform_peer_tunnels')).toBeGreaterThanOrEqual(3);
    expect(value(m1, 'edgeform_peer_streams_total{direction="sent"}')).toBeGreaterThanOrEqual(100);
    expect(value(m1, 'edgeform_peer_streams_total{direction="served"}')).toBe(0);
    expect(value(m0, 'edgeform_peer_streams_total{direction="served"}')).toBeGreaterThan(0);
  });

  it('a TCP edge\'s connection through an instance that does not hold the tunnel reaches the upstream', async () => {
    const [a] = servers;
    const b = await a.post('/backends/tunnel_group', { labels: { app: 'c' } });
    expect((await a.post('/edges/tcp', { hostports: ['tcp.example.com:7000'], backend: { backend_id: b.body.id } })).status).toBe(201);
    const raw = () => new Promise<string>((resolve) => {
      const socket = net.connect(ingressPort(servers[1], 7000), '127.0.0.1');
      let got = '';
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => { got += d; });
      socket.on('error', () => resolve(got));
      socket.on('close', () => resolve(got));
      socket.on('connect', () => socket.write('GET /tcp HTTP/1.1\r\nHost: tcp.example.com\r\nConnection: close\r\n\r\n'));
      setTimeout(() => socket.destroy(), 5000).unref();
    });
    let last = '';
    await until(async () => (last = await raw()).includes('upstream-c /tcp'), 20_000, () => `the TCP edge did not reach the tunnel held by instance 2: ${JSON.stringify(last)}`);
    expect(servers[1].server.gateway.sessionCount).toBe(0);
  });

  it('an agent endpoint\'s hostname is served by every instance', async () => {
    for (const s of servers) {
      let last = '';
      await until(async () => {
        const r = await get(s, '/ep', endpointHost).catch((e: Error) => ({ status: 0, text: e.message }));
        last = `${r.status} ${r.text.slice(0, 200)}`;
        return r.text === 'upstream-c /ep';
      }, 20_000, () => `instance ${servers.indexOf(s)} did not serve ${endpointHost}: ${last}`);
    }
  });

  it('a pool of agents on two instances (issue 36): every instance shares the requests among both members', async () => {
    const cr = await credentialToken(servers[0]);
    const host = 'pool-peers.example.com';
    const members: AgentProcess[] = [];
    for (const [i, name] of [[0, 'pool-a'], [2, 'pool-c']] as const) {
      const port = await startUpstream(name, upstreams);
      const m = startAgent(['--api-url', servers[i].url, '--authtoken', cr.token, '--no-update-check', 'https', String(port), '--url', `https://${host}`, '--pooling-enabled']);
      agents.push(m);
      members.push(m);
    }
    await Promise.all(members.map((m) => m.waitFor('online: tn_')));
    for (const s of servers) {
      const seen = new Set<string>();
      await until(async () => {
        const r = await get(s, '/p', host).catch(() => undefined);
        if (r?.status === 200) seen.add(String(r.headers['x-upstream']));
        return seen.size === 2;
      }, 20_000, () => `instance ${servers.indexOf(s)} reached only ${[...seen].join(', ')}`);
      expect([...seen].sort()).toEqual(['pool-a', 'pool-c']);
    }
  });

  it('a WebSocket upgrade through an instance that does not hold the tunnel reaches the upstream and echoes', async () => {
    const socket = tls.connect({ host: '127.0.0.1', port: ingressPort(servers[1], 443), servername: HOST, ca });
    socket.on('error', () => {});
    await new Promise((r) => socket.once('secureConnect', r));
    socket.write(`GET /a/ws HTTP/1.1\r\nHost: ${HOST}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${crypto.randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    let got = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => { got += d; });
    await until(() => /\r\n\r\n/.test(got), 10_000, () => `no upgrade answer: ${got}`);
    expect(got).toMatch(/^HTTP\/1\.1 101/);
    expect(got.toLowerCase()).toContain('x-upstream: upstream-a');
    got = '';
    socket.write('ping through two instances');
    await until(() => got === 'ping through two instances', 10_000, () => `echo: ${got}`);
    socket.destroy();
  });

  it('keeps answering for the live peers\' tunnels while an advertised peer accepts connections and never answers', async () => {
    // A "peer" that accepts TCP and stays silent: its links stay down (connect bound), the others are untouched.
    const silent: net.Socket[] = [];
    const blackhole = net.createServer((socket) => { silent.push(socket); socket.on('error', () => {}); });
    await new Promise<void>((r) => blackhole.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(blackhole.address() as AddressInfo).port}`;
    const prisma = servers[0].server.db.prisma;
    const renew = () => prisma.peerInstance.upsert({ where: { instanceId: 'silent' }, create: { instanceId: 'silent', url, seenAt: new Date() }, update: { seenAt: new Date() } });
    await renew();
    const renewing = setInterval(() => void renew().catch(() => {}), 100);
    try {
      await until(() => silent.length >= 3, 10_000, () => `the instances dialed the silent peer ${silent.length} times`);
      for (let i = 0; i < 30; i++) {
        const r = await get(servers[i % 3], `/${i % 2 ? 'a' : 'c'}/while-silent`);
        expect(r.headers['x-upstream'], `${r.status} ${r.text.slice(0, 300)}`).toBe(`upstream-${i % 2 ? 'a' : 'c'}`);
      }
      for (const s of servers) expect(s.server.peers!.connected).toBe(2);
    } finally {
      clearInterval(renewing);
      await prisma.peerInstance.deleteMany({ where: { instanceId: 'silent' } });
      for (const x of silent) x.destroy();
      blackhole.close();
    }
  });

  it('refuses a peer connection without the key, or with another key\'s certificate, and closes garbage; the instance keeps serving', async () => {
    const port = servers[0].server.peerServer!.port;
    const handshake = (o: tls.ConnectionOptions) => new Promise<string>((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false, ALPNProtocols: ['h2'], ...o });
      s.on('secureConnect', () => {
        // TLS 1.3: the server's refusal of the client's certificate arrives after the client's side of the handshake.
        const h2 = http2.connect(`https://127.0.0.1:${port}`, { createConnection: () => s });
        h2.on('error', () => {});
        const req = h2.request({ ':path': PEER_PATHS.watch });
        req.on('error', () => {});
        req.on('response', () => resolve('answered'));
        req.on('close', () => resolve('closed'));
      });
      s.on('error', () => resolve('closed'));
      s.on('close', () => resolve('closed'));
    });
    expect(await handshake({})).toBe('closed');
    const other = peerCredentials({ derive: (info: string) => crypto.createHash('sha256').update(`another key ${info}`).digest() }, 'intruder');
    expect(await handshake({ cert: other.certPem, key: other.keyPem })).toBe('closed');
    const garbage = net.connect(port, '127.0.0.1');
    garbage.on('error', () => {});
    garbage.write(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\x01\x02garbage'));
    await new Promise((r) => garbage.once('close', r));
    // The same key's credentials are answered: the refusals above were about the key.
    const mine = peerCredentials({ derive: (info: string) => Buffer.from(crypto.hkdfSync('sha256', Buffer.from(TEST_SECRET_KEY, 'hex'), Buffer.alloc(0), `edgeform ${info}`, 32)) }, 'test');
    expect(await handshake({ cert: mine.certPem, key: mine.keyPem, ca: mine.caPem, rejectUnauthorized: true, checkServerIdentity: () => undefined })).toBe('answered');
    const after = await get(servers[0], '/c/after');
    expect(after.headers['x-upstream'], `${after.status} ${after.text.slice(0, 300)}`).toBe('upstream-c');
  });

  it('--peer-choice prefer-local: an instance takes its own matching tunnel first, another instance\'s only once its own is gone', async () => {
    const d = await startTestServer({
      databaseUrl, secretKey: TEST_SECRET_KEY, agentHeartbeatMs: HEARTBEAT_MS, peerChoice: 'prefer-local',
      ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }], peerListen: { host: '127.0.0.1', port: 0 },
    });
    servers.push(d);
    const onD = await startUpstream('upstream-a-on-d', upstreams);
    const local = startAgent(['--api-url', d.url, '--authtoken', token, '--label', 'app=a', '--forwards-to', `127.0.0.1:${onD}`]);
    agents.push(local);
    await local.waitFor('online: tn_');
    // The round-robin instances see both app=a tunnels.
    await until(async () => (await get(servers[1], '/a/rr').catch(() => undefined))?.headers['x-upstream'] === 'upstream-a-on-d', 20_000, () => 'instance 1 never chose the new tunnel');
    await until(async () => (await get(d, '/a/warm').catch(() => undefined))?.status === 200, 20_000, () => 'the prefer-local instance does not answer');
    const fromD = await many(40, 4, async (i) => (await get(d, `/a/d${i}`)).headers['x-upstream']);
    expect(new Set(fromD)).toEqual(new Set(['upstream-a-on-d']));
    // Its own agent gone: it takes the other instance's tunnel.
    local.kill();
    await until(async () => (await get(d, '/a/after').catch(() => undefined))?.headers['x-upstream'] === 'upstream-a', 20_000, () => 'the prefer-local instance did not fall back to the other instance\'s tunnel');
    const after = await many(20, 4, async (i) => (await get(d, `/a/e${i}`)).headers['x-upstream']);
    expect(new Set(after)).toEqual(new Set(['upstream-a']));
  });
});
