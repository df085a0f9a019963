// What a broken or hostile agent can do to the gateway: each case gets a clear error on the
// agent's side, and the server keeps serving everyone else (a healthy agent's session is
// checked after every case).
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, fakeAgent, sessions, startAgent, validHello, type AgentProcess } from '../helpers/agent.js';
import { rawHttp } from '../helpers/raw-http.js';
import { until } from '../helpers/wait.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let token: string;
let healthy: AgentProcess;
let healthySession: string;

beforeAll(async () => {
  s = await startTestServer({ agentHeartbeatMs: 1000, agentHelloTimeoutMs: 1500 });
  token = (await credentialToken(s)).token;
  healthy = startAgent(['--api-url', s.url, '--authtoken', token, '--label', 'app=healthy', '--forwards-to', '127.0.0.1:1']);
  await healthy.waitFor('online: tn_');
  healthySession = (await sessions(s))[0].id;
});
afterAll(async () => {
  healthy?.kill();
  await s.close();
});

/** A raw upgrade request; resolves with the status and JSON body of a refusal. */
function upgrade(pathname: string, headers: Record<string, string | undefined>): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${s.url}${pathname}`, { headers: { Connection: 'Upgrade', ...headers } as Record<string, string> });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('upgrade', (_r, sock) => { sock.destroy(); resolve({ status: 101, body: undefined }); });
    req.on('error', reject);
    req.end();
  });
}

const stillHealthy = async () => {
  expect((await sessions(s)).map((x) => x.id)).toContain(healthySession);
  expect(healthy.child.exitCode).toBeNull();
};

describe('refused before the upgrade, in the API error shape', () => {
  it.each([
    { reason: 'no token', path: '/_edgeform/agent', headers: { Upgrade: 'edgeform-agent/2', 'Service-Version': '2' }, status: 401, code: 'ERR_SERVICE_201' },
    { reason: 'a wrong token', path: '/_edgeform/agent', headers: { Upgrade: 'edgeform-agent/2', 'Service-Version': '2', Authorization: 'Bearer wrong' }, status: 401, code: 'ERR_SERVICE_202' },
    { reason: 'no version header', path: '/_edgeform/agent', headers: { Upgrade: 'edgeform-agent/2', Authorization: 'Bearer x' }, status: 400, code: 'ERR_SERVICE_218' },
    { reason: 'another upgrade protocol', path: '/_edgeform/agent', headers: { Upgrade: 'websocket', 'Service-Version': '2' }, status: 400, code: 'ERR_SERVICE_109' },
    { reason: 'an upgrade elsewhere', path: '/ip_policies', headers: { Upgrade: 'websocket' }, status: 404, code: 'ERR_SERVICE_301' },
  ])('$reason: $status $code', async ({ path, headers, status, code }) => {
    const r = await upgrade(path, headers);
    expect(r.status).toBe(status);
    expect(r.body).toMatchObject({ error_code: code, status_code: status, msg: expect.any(String), details: { operation_id: expect.stringMatching(/^op_/) } });
    await stillHealthy();
  });
});

describe('malformed upgrade requests on a raw socket', () => {
  const upgradeHead = () => `Connection: Upgrade\r\nUpgrade: edgeform-agent/2\r\nService-Version: 2\r\nAuthorization: Bearer ${token}\r\n`;
  it.each([
    { reason: 'a 100 KB header', request: () => `GET /_edgeform/agent HTTP/1.1\r\nHost: x\r\n${upgradeHead()}X-Big: ${'a'.repeat(100_000)}\r\n\r\n`, status: 431, code: 'ERR_SERVICE_331' },
    { reason: '3,000 headers', request: () => `GET /_edgeform/agent HTTP/1.1\r\nHost: x\r\n${upgradeHead()}${Array.from({ length: 3000 }, (_, i) => `X-${i}: a\r\n`).join('')}\r\n`, status: 431, code: 'ERR_SERVICE_331' },
    { reason: 'a malformed request line', request: () => `GET /_edgeform/agent HTTP/9\r\nHost: x\r\n${upgradeHead()}\r\n`, status: 400, code: 'ERR_SERVICE_109' },
    { reason: 'binary garbage', request: () => '\u00fe'.repeat(5000), status: 400, code: 'ERR_SERVICE_109' },
  ])('$reason: $status $code in the API error shape, nothing else affected', async ({ request, status, code }) => {
    const r = await rawHttp(s.url, request());
    expect(r.status, r.head).toBe(status);
    expect(r.body).toMatchObject({ error_code: code, status_code: status, details: { operation_id: expect.stringMatching(/^op_/) } });
    await stillHealthy();
  });
});

describe('after the upgrade', () => {
  const closingOf = async (answer: Parameters<typeof fakeAgent>[2]) => {
    const fake = await fakeAgent(s.url, token, answer);
    await until(() => fake.seen.some((x) => x.path === '/_edgeform/closing') || fake.socket.destroyed, 10_000);
    fake.close();
    return fake.seen.find((x) => x.path === '/_edgeform/closing')?.body;
  };

  it('a malformed hello: told why (ERR_SERVICE_110), closed, no session', async () => {
    const closing = await closingOf((p) => (p === '/_edgeform/hello' ? [200, { ...validHello(), os: 42 }] : [204, undefined]));
    expect(closing).toMatchObject({ error_code: 'ERR_SERVICE_110', msg: expect.stringMatching(/os/) });
    await stillHealthy();
    expect(await sessions(s)).toHaveLength(1);
  });

  it('a hello over 256 KiB: ERR_SERVICE_111', async () => {
    const closing = await closingOf((p) => (p === '/_edgeform/hello' ? [200, { ...validHello(), metadata: 'x'.repeat(300 * 1024) }] : [204, undefined]));
    expect(closing).toMatchObject({ error_code: 'ERR_SERVICE_111' });
    await stillHealthy();
  });

  it('a slow-loris agent that never says hello is closed after the hello timeout', async () => {
    const closing = await closingOf(() => undefined);
    expect(closing).toMatchObject({ error_code: 'ERR_SERVICE_110', msg: expect.stringMatching(/no hello within/) });
    await stillHealthy();
    expect(await sessions(s)).toHaveLength(1);
  });

  it('agents that disconnect while the server waits for their hello leave no session and no trouble', async () => {
    for (let i = 0; i < 5; i++) {
      let fake: Awaited<ReturnType<typeof fakeAgent>> | undefined;
      fake = await fakeAgent(s.url, token, (p) => {
        if (p === '/_edgeform/hello') setTimeout(() => fake?.socket.destroy(), i * 20);
        return p === '/_edgeform/hello' ? undefined : [204, undefined];
      });
      await until(() => fake!.socket.destroyed, 5000);
    }
    await stillHealthy();
    expect(await sessions(s)).toHaveLength(1);
    const r = await s.post('/ip_policies', { description: 'after the disconnects' });
    expect(r.status, r.text).toBe(201);
  });

  it('garbage instead of HTTP/2 after the upgrade: the connection is dropped, nothing else is', async () => {
    const sock = net.connect(Number(new URL(s.url).port), '127.0.0.1');
    await new Promise((r) => sock.on('connect', r));
    sock.write(`GET /_edgeform/agent HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: edgeform-agent/2\r\nService-Version: 2\r\nAuthorization: Bearer ${token}\r\n\r\n`);
    let text = '';
    sock.on('data', (c) => { text += c; });
    await until(() => text.includes('101'), 5000);
    sock.write(Buffer.alloc(70_000, 0xff));
    await until(() => sock.destroyed || sock.readableEnded, 10_000);
    sock.destroy();
    await stillHealthy();
    expect(await sessions(s)).toHaveLength(1);
  });

  it('an oversized HTTP/2 frame from the agent ends only that connection', async () => {
    const fake = await fakeAgent(s.url, token, (p) => (p === '/_edgeform/hello' ? [200, validHello()] : [204, undefined]));
    await until(async () => (await sessions(s)).length === 2);
    // A DATA frame header announcing 16 MiB (over the 16 KiB maximum frame size) on stream 1.
    fake.socket.write(Buffer.from([0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]));
    await until(async () => (await sessions(s)).length === 1, 10_000);
    await stillHealthy();
    fake.close();
  });
});
