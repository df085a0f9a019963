// One client address cannot hold every upstream connection of an agent: past
// `--ingress-relays-per-client` requests in flight through agents (3 here), the edge answers
// 429 with Retry-After and ERR_SERVICE_846 without asking the agent; a slot comes back when its
// response ends or its client goes; answers at the edge (http_response) are not counted.
// Over real sockets, with a real `edgeform agent` relaying to a local upstream that holds
// /hold requests until the test lets them go.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../server/config.js';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { edgeRequest, exchange, ingressPort, localCa, tlsConnect, type EdgeReply } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

let s: TestServer;
let port: number;
let ca: string;
let upstream: http.Server;
let agent: AgentProcess;
const held: http.ServerResponse[] = [];
const reached: string[] = [];

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    reached.push(String(req.url));
    req.resume();
    if (req.url?.startsWith('/hold')) held.push(res);
    else res.end(`upstream ${req.url}`);
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }, { publicPort: 20000, host: '127.0.0.1', port: 0 }], ingressRelaysPerClient: 3 });
  port = ingressPort(s, 443);
  ca = localCa(s);
  const cr = await credentialToken(s);
  agent = startAgent(['--api-url', s.url, '--authtoken', cr.token, '--label', 'app=relays', '--forwards-to', `127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const group = await s.post('/backends/tunnel_group', { labels: { app: 'relays' } });
  const fixed = await s.post('/backends/http_response', { body: 'at the edge' });
  const edge = await s.post('/edges/https', { hostports: ['r.example.com:443'] });
  await s.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: group.body.id } });
  await s.post(`/edges/https/${edge.body.id}/routes`, { match_type: 'path_prefix', match: '/fixed', backend: { backend_id: fixed.body.id } });
  await s.post('/edges/tcp', { hostports: ['1.tcp.example.com:20000'], backend: { backend_id: group.body.id } });
}, 60_000);

afterAll(async () => {
  for (const res of held) res.end();
  agent?.kill();
  await s?.close().catch(() => {});
  await new Promise((r) => upstream?.close(r));
});

const get = (path: string) => edgeRequest({ port, host: 'r.example.com', ca, path });

/** Lets the held upstream requests answer. */
function releaseHeld() {
  for (const res of held.splice(0)) res.end('released');
}

describe('relays per client address', () => {
  it('answers the request past the limit 429 with Retry-After and ERR_SERVICE_846, without reaching the upstream', async () => {
    const inFlight = [get('/hold/1'), get('/hold/2'), get('/hold/3')];
    await until(() => held.length === 3);
    const refused = await get('/hold/4');
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers['edgeform-error-code']).toBe('ERR_SERVICE_846');
    expect(refused.text).toContain('ERR_SERVICE_846');
    expect(reached).not.toContain('/hold/4');
    // An answer at the edge holds no relay: still served.
    expect((await get('/fixed')).text).toBe('at the edge');
    releaseHeld();
    expect((await Promise.all(inFlight)).map((r: EdgeReply) => r.text)).toEqual(['released', 'released', 'released']);
    // The slots came back with the answers.
    expect((await get('/after')).text).toBe('upstream /after');
  });

  it('gives a slot back when its client goes away before the answer (a client that never reads)', async () => {
    const gone = await Promise.all([tlsConnect(port, { servername: 'r.example.com', ca }), tlsConnect(port, { servername: 'r.example.com', ca }), tlsConnect(port, { servername: 'r.example.com', ca })]);
    gone.forEach((c, i) => c.write(`GET /hold/gone${i} HTTP/1.1\r\nHost: r.example.com\r\n\r\n`));
    await until(() => held.length === 3);
    expect((await get('/full')).status).toBe(429);
    gone[0].destroy();
    await until(async () => (await get('/one-free')).status === 200, 5000, () => 'the slot of the client that went never came back');
    // Only that one: a held request takes it, and the next is refused again.
    const refill = get('/hold/refill');
    await until(() => reached.includes('/hold/refill'));
    expect((await get('/full-again')).status).toBe(429);
    gone.slice(1).forEach((c) => c.destroy());
    releaseHeld();
    expect((await refill).text).toBe('released');
    await until(async () => (await get('/free')).status === 200, 5000);
  });

  it('counts WebSocket upgrades through agents too', async () => {
    const inFlight = [get('/hold/a'), get('/hold/b'), get('/hold/c')];
    await until(() => held.length === 3);
    const upgrade = await exchange(await tlsConnect(port, { servername: 'r.example.com', ca }), 'GET /ws HTTP/1.1\r\nHost: r.example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n', { quietMs: 3000 });
    expect(upgrade.text).toMatch(/^HTTP\/1\.1 429 /);
    expect(upgrade.text).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(reached).not.toContain('/ws');
    releaseHeld();
    await Promise.all(inFlight);
  });
});

describe('TCP edges', () => {
  it('count a connection as a relay: past the limit the connection is closed unserved, and served again once a slot is free', async () => {
    const tcpPort = ingressPort(s, 20000);
    const ask = (path: string) => exchange(net.connect(tcpPort, '127.0.0.1'), `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, { quietMs: 3000 });
    expect((await ask('/tcp-free')).text).toContain('upstream /tcp-free');
    const inFlight = [get('/hold/t1'), get('/hold/t2'), get('/hold/t3')];
    await until(() => held.length === 3);
    const refused = await ask('/tcp-full');
    expect(refused).toMatchObject({ text: '', closed: true });
    expect(reached).not.toContain('/tcp-full');
    releaseHeld();
    await Promise.all(inFlight);
    expect((await ask('/tcp-again')).text).toContain('upstream /tcp-again');
  });
});

describe('the setting', () => {
  it('is --ingress-relays-per-client or EDGEFORM_INGRESS_RELAYS_PER_CLIENT, 128 by default, 0 for no limit', () => {
    expect(resolveConfig({}, {}).ingressRelaysPerClient).toBe(128);
    expect(resolveConfig({ ingressRelaysPerClient: '7' }, {}).ingressRelaysPerClient).toBe(7);
    expect(resolveConfig({}, { EDGEFORM_INGRESS_RELAYS_PER_CLIENT: '0' }).ingressRelaysPerClient).toBe(0);
    expect(() => resolveConfig({ ingressRelaysPerClient: '-1' }, {})).toThrow(/--ingress-relays-per-client/);
  });
});
