// Issue 36: agents bind internal and pooled endpoints. A cloud endpoint forwards (forward-internal)
// to an internal endpoint bound by `edgeform agent --binding internal` and to one bound by the
// service's SDK (@ngrok/ngrok, `.binding('internal')`); neither is reachable from outside. Two
// agents with --pooling-enabled at one URL share its requests; one without pooling (agent or
// SDK) is refused with 409 ERR_SERVICE_320; a member that goes leaves the pool at once and
// every request is still answered; the SDK joins with poolingEnabled. forward-internal's
// on_error: continue runs the next actions while the target is missing or its agent gone.
// One server for the file (beforeAll).
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const within = <T>(p: Promise<T>, ms = 15_000, what = 'the SDK call') =>
  Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms).unref())]);

let s: TestServer;
let session: ngrok.Session;
let ca: string;
let port: number;
let token: string;
const upstreams: http.Server[] = [];
const agents: AgentProcess[] = [];

/** An upstream answering its name and the path. */
async function upstream(name: string): Promise<number> {
  const u = http.createServer((req, res) => res.end(`${name} ${req.url}`));
  await new Promise<void>((r) => u.listen(0, '127.0.0.1', r));
  upstreams.push(u);
  return (u.address() as AddressInfo).port;
}

function agent(...args: string[]): AgentProcess {
  const a = startAgent([...args, '--api-url', s.url, '--authtoken', token]);
  agents.push(a);
  return a;
}

const get = (host: string, path = '/') => edgeRequest({ port, host, path, ca });
const agentEndpoints = async (url: string) => ((await s.get(`/endpoints?filter=${encodeURIComponent(`obj.type == "agent" && obj.url == "${url}"`)}`)).body.endpoints as any[]);

beforeAll(async () => {
  s = await startTestServer({
    agentHeartbeatMs: 2000, agentListen: { host: '127.0.0.1', port: 0 },
    ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }],
  });
  port = Number(s.server.ingress!.listeners[0].address.split(':').pop());
  ca = fs.readFileSync(s.server.agentListener!.caFile, 'utf8');
  token = (await credentialToken(s)).token;
  session = await within(new ngrok.SessionBuilder().authtoken(token).serverAddr(`localhost:${s.server.agentListener!.address.split(':').pop()}`).caCert(Buffer.from(ca)).connect(), 15_000, 'connect()');
}, 60_000);

afterAll(async () => {
  await within(session?.close(), 5000).catch(() => {});
  for (const a of agents) a.kill();
  for (const u of upstreams) u.close();
  await s?.close().catch(() => {});
  removeTempDirs();
});

describe('internal endpoints of agents', () => {
  it('a cloud endpoint forwards to one bound by edgeform agent and one bound by the SDK; neither answers from outside', async () => {
    const cliPort = await upstream('cli');
    const sdkPort = await upstream('sdk');
    const a = agent('http', String(cliPort), '--url', 'https://cli.internal', '--binding', 'internal');
    await a.waitFor('online: tn_');
    const l = await within(session.httpEndpoint().domain('sdk.internal').binding('internal').listenAndForward(`http://127.0.0.1:${sdkPort}`), 15_000, 'listen');
    expect(l.url()).toBe('https://sdk.internal');
    const fwd = (url: string) => ({ type: 'forward-internal', config: { url } });
    const made = await s.post('/endpoints', {
      url: 'https://front.example.com',
      traffic_policy: JSON.stringify({
        on_http_request: [
          { expressions: ["req.path.startsWith('/cli')"], actions: [fwd('https://cli.internal')] },
          { expressions: ["req.path.startsWith('/sdk')"], actions: [fwd('https://sdk.internal')] },
          { actions: [{ type: 'deny', config: { status_code: 404 } }] },
        ],
      }),
    });
    expect(made.status, made.text).toBe(201);
    const viaCli = await get('front.example.com', '/cli/x');
    expect([viaCli.status, viaCli.text]).toEqual([200, 'cli /cli/x']);
    const viaSdk = await get('front.example.com', '/sdk/y');
    expect([viaSdk.status, viaSdk.text]).toEqual([200, 'sdk /sdk/y']);
    // From outside, an internal name is an unknown one.
    for (const host of ['cli.internal', 'sdk.internal']) {
      const r = await get(host, '/cli/x');
      expect(r.status).toBe(404);
      expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_740');
    }
    // Both are listed as agent endpoints bound internal.
    for (const url of ['https://cli.internal', 'https://sdk.internal']) {
      const [e] = await agentEndpoints(url);
      expect(e).toMatchObject({ type: 'agent', url, bindings: ['internal'], pooling_enabled: false });
    }
    // An internal binding needs a name under .internal.
    const refused = await within(session.httpEndpoint().domain('public.example.com').binding('internal').listenAndForward(`http://127.0.0.1:${sdkPort}`).then(() => 'bound', (e: Error) => e.message));
    expect(refused).toMatch(/ERR_SERVICE_103/);
    await l.close();
    // Gone with its listener: forward-internal finds nothing there.
    await until(async () => (await agentEndpoints('https://sdk.internal')).length === 0);
    expect((await get('front.example.com', '/sdk/y')).status).toBe(502);
  });
});

describe('a pool of agents', () => {
  it('two agents with pooling share requests; one without pooling is refused 409; a member that goes leaves at once', async () => {
    const url = 'https://pool.example.com';
    const first = agent('https', String(await upstream('a')), '--url', url, '--pooling-enabled');
    const second = agent('https', String(await upstream('b')), '--url', url, '--pooling-enabled');
    await first.waitFor('online: tn_');
    await second.waitFor('online: tn_');
    const members = await agentEndpoints(url);
    expect(members.map((e) => e.pooling_enabled)).toEqual([true, true]);
    const seen: string[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await get('pool.example.com', `/${i}`);
      expect(r.status).toBe(200);
      seen.push(r.text.split(' ')[0]);
    }
    expect(seen.filter((x) => x === 'a')).toHaveLength(5);
    expect(seen.filter((x) => x === 'b')).toHaveLength(5);

    // Without pooling, the URL is refused (the agent's tunnel, the SDK's bind), as for cloud endpoints.
    const lone = agent('https', String(await upstream('c')), '--url', url);
    await lone.waitFor('refused');
    expect(lone.output()).toMatch(/refused: .*pool\.example\.com is already served by tunnel tn_\w+.*unless every endpoint there enables pooling.*\(ERR_SERVICE_320\)/);
    lone.kill();
    const sdk = await within(session.httpEndpoint().domain('pool.example.com').listenAndForward('http://127.0.0.1:1').then(() => 'bound', (e: Error) => e.message));
    expect(sdk).toMatch(/ERR_SERVICE_320/);

    // A member goes: the pool is the other one alone, and every request is answered by it.
    first.kill('SIGTERM');
    await until(async () => (await agentEndpoints(url)).length === 1, 15_000, () => 'the stopped member stayed listed');
    for (let i = 0; i < 6; i++) {
      const r = await get('pool.example.com', `/after${i}`);
      expect([r.status, r.text]).toEqual([200, `b /after${i}`]);
    }
    // The SDK joins the pool with poolingEnabled: the two members share the requests again.
    const joined = await within(session.httpEndpoint().domain('pool.example.com').poolingEnabled(true).listenAndForward(`http://127.0.0.1:${await upstream('sdk')}`), 15_000, 'listen');
    expect(joined.url()).toBe(url);
    const after: string[] = [];
    for (let i = 0; i < 6; i++) after.push((await get('pool.example.com', '/')).text.split(' ')[0]);
    expect(after.sort()).toEqual(['b', 'b', 'b', 'sdk', 'sdk', 'sdk']);
    await joined.close();
  });
});

describe("forward-internal's on_error: continue", () => {
  it('a target that is missing or whose agent went runs the next actions (a custom error page); one online takes the request', async () => {
    const made = await s.post('/endpoints', {
      url: 'https://fallback.example.com',
      traffic_policy: JSON.stringify({
        on_http_request: [{ actions: [
          { type: 'forward-internal', config: { url: 'https://app.internal', on_error: 'continue' } },
          { type: 'custom-response', config: { status_code: 503, body: 'down for maintenance' } },
        ] }],
      }),
    });
    expect(made.status, made.text).toBe(201);
    const missing = await get('fallback.example.com', '/x');
    expect([missing.status, missing.text]).toEqual([503, 'down for maintenance']);
    const a = agent('http', String(await upstream('app')), '--url', 'https://app.internal');
    await a.waitFor('online: tn_');
    const online = await get('fallback.example.com', '/x');
    expect([online.status, online.text]).toEqual([200, 'app /x']);
    a.kill('SIGTERM');
    await until(async () => (await agentEndpoints('https://app.internal')).length === 0, 15_000, () => 'the stopped agent stayed listed');
    const gone = await get('fallback.example.com', '/x');
    expect([gone.status, gone.text]).toEqual([503, 'down for maintenance']);
  });
});
