// Cloud endpoints served by the ingress (issue 36), on a real server over real sockets: the
// endpoint's policy answers at its URL (a rule by path, the last rule for the rest), an
// internal endpoint is not reachable from outside, a pool shares requests among its members
// and loses a deleted one on the next request, and an edge at the name still wins.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { edgeAnswering, edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let port: number;
let ca: string;

beforeAll(async () => {
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] });
  port = ingressPort(s, 443);
  ca = localCa(s);
  // An edge elsewhere keeps the port answering (a port with nothing at all on it refuses connections).
  await edgeAnswering(s, 'elsewhere.example.com', 'elsewhere');
}, 60_000);

afterAll(async () => {
  await s?.close();
});

const answer = (body: string, status = 200, headers: Record<string, string> = {}) => ({ type: 'custom-response', config: { status_code: status, body, headers } });
const policy = (...rules: unknown[]) => JSON.stringify({ on_http_request: rules });

describe('a cloud endpoint', () => {
  it('answers from its policy: a rule by path, the last rule for everything else', async () => {
    const made = await s.post('/endpoints', {
      url: 'https://cloud.example.com',
      traffic_policy: policy(
        { name: 'health', expressions: ["req.path == '/health'"], actions: [answer('ok', 200, { 'x-from': 'health' })] },
        { expressions: ["req.path.startsWith('/old')"], actions: [{ type: 'redirect', config: { to: 'https://cloud.example.com/new', status_code: 301 } }] },
        { actions: [{ type: 'deny', config: { status_code: 404 } }] },
      ),
    });
    expect(made.status, made.text).toBe(201);
    const health = await edgeRequest({ port, host: 'cloud.example.com', path: '/health', ca });
    expect(health.status).toBe(200);
    expect(health.text).toBe('ok');
    expect(health.headers['x-from']).toBe('health');
    const old = await edgeRequest({ port, host: 'cloud.example.com', path: '/old/page', ca });
    expect(old.status).toBe(301);
    expect(old.headers.location).toBe('https://cloud.example.com/new');
    expect((await edgeRequest({ port, host: 'cloud.example.com', path: '/other', ca })).status).toBe(404);
    // A change of policy is live on the next request; a deleted endpoint is gone on the next.
    await s.patch(`/endpoints/${made.body.id}`, { traffic_policy: policy({ actions: [answer('v2')] }) });
    expect((await edgeRequest({ port, host: 'cloud.example.com', path: '/health', ca })).text).toBe('v2');
    await s.del(`/endpoints/${made.body.id}`);
    const gone = await edgeRequest({ port, host: 'cloud.example.com', path: '/health', ca });
    expect(gone.status).toBe(404);
    expect(gone.headers['edgeform-error-code']).toBe('ERR_SERVICE_740');
  });

  it('an internal endpoint is not reachable from outside', async () => {
    const made = await s.post('/endpoints', { url: 'https://api.internal', traffic_policy: policy({ actions: [answer('secret')] }) });
    expect(made.status, made.text).toBe(201);
    const r = await edgeRequest({ port, host: 'api.internal', path: '/', ca });
    expect(r.status).toBe(404);
    expect(r.text).not.toContain('secret');
  });

  it('a pool of two shares requests, and a deleted member leaves it on the next request', async () => {
    const url = 'https://pool.example.com';
    const a = await s.post('/endpoints', { url, pooling_enabled: true, traffic_policy: policy({ actions: [answer('a')] }) });
    const b = await s.post('/endpoints', { url, pooling_enabled: true, traffic_policy: policy({ actions: [answer('b')] }) });
    expect([a.status, b.status]).toEqual([201, 201]);
    const seen: string[] = [];
    for (let i = 0; i < 10; i++) seen.push((await edgeRequest({ port, host: 'pool.example.com', ca })).text);
    expect(seen.filter((x) => x === 'a').length).toBe(5);
    expect(seen.filter((x) => x === 'b').length).toBe(5);
    await s.del(`/endpoints/${a.body.id}`);
    for (let i = 0; i < 5; i++) expect((await edgeRequest({ port, host: 'pool.example.com', ca })).text).toBe('b');
  });

  it('forward-internal hands a request to an internal endpoint (a pool, in turn), whose policy answers', async () => {
    const fwd = (url: string) => ({ type: 'forward-internal', config: { url } });
    const a = await s.post('/endpoints', { url: 'https://users.internal', pooling_enabled: true, traffic_policy: policy({ actions: [answer('users a', 200, { 'x-member': 'a' })] }) });
    const b = await s.post('/endpoints', { url: 'https://users.internal', pooling_enabled: true, traffic_policy: policy({ actions: [answer('users b', 200, { 'x-member': 'b' })] }) });
    expect([a.status, b.status]).toEqual([201, 201]);
    const front = await s.post('/endpoints', {
      url: 'https://front.example.com',
      traffic_policy: policy(
        { expressions: ["req.path.startsWith('/users')"], actions: [fwd('https://users.internal')] },
        { expressions: ["req.path.startsWith('/missing')"], actions: [fwd('https://missing.internal')] },
        { expressions: ["req.path.startsWith('/loop')"], actions: [fwd('https://loop.internal')] },
        { actions: [answer('front')] },
      ),
    });
    expect(front.status, front.text).toBe(201);
    await s.post('/endpoints', { url: 'https://loop.internal', traffic_policy: policy({ actions: [fwd('https://loop.internal')] }) });
    const users = [await edgeRequest({ port, host: 'front.example.com', path: '/users/1', ca }), await edgeRequest({ port, host: 'front.example.com', path: '/users/2', ca })];
    expect(users.map((r) => r.status)).toEqual([200, 200]);
    expect(users.map((r) => r.text).sort()).toEqual(['users a', 'users b']);
    expect((await edgeRequest({ port, host: 'front.example.com', path: '/', ca })).text).toBe('front');
    const missing = await edgeRequest({ port, host: 'front.example.com', path: '/missing', ca });
    expect([missing.status, missing.headers['edgeform-error-code']]).toEqual([502, 'ERR_SERVICE_761']);
    const loop = await edgeRequest({ port, host: 'front.example.com', path: '/loop', ca });
    expect([loop.status, loop.headers['edgeform-error-code']]).toEqual([502, 'ERR_SERVICE_762']);
    // A member gone leaves the pool on the next request.
    await s.del(`/endpoints/${a.body.id}`);
    for (let i = 0; i < 3; i++) expect((await edgeRequest({ port, host: 'front.example.com', path: '/users', ca })).text).toBe('users b');
    // Still never reachable from outside.
    expect((await edgeRequest({ port, host: 'users.internal', path: '/users', ca })).status).toBe(404);
    // An edge route's traffic_policy forwards the same way (a step in moving an edge onto endpoints).
    const e = await s.post('/edges/https', { hostports: ['edge-forward.example.com:443'] });
    const route = await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', traffic_policy: { value: policy({ actions: [fwd('https://users.internal')] }) } });
    expect(route.status, route.text).toBe(201);
    const viaEdge = await edgeRequest({ port, host: 'edge-forward.example.com', path: '/users', ca });
    expect([viaEdge.status, viaEdge.text, viaEdge.headers['x-member']]).toEqual([200, 'users b', 'b']);
  });

  it('forward-internal goes only to internal URLs (refused at create otherwise)', async () => {
    const r = await s.post('/endpoints', { url: 'https://bad-forward.example.com', traffic_policy: policy({ actions: [{ type: 'forward-internal', config: { url: 'https://public.example.com' } }] }) });
    expect(r.status).toBe(400);
    expect(r.body.msg).toMatch(/must name an internal endpoint \(a host ending in \.internal/);
  });

  it('an edge created later at the same name wins (edges before endpoints, as with agents\' endpoints)', async () => {
    const made = await s.post('/endpoints', { url: 'https://both.example.com', traffic_policy: policy({ actions: [answer('endpoint')] }) });
    expect(made.status).toBe(201);
    expect((await edgeRequest({ port, host: 'both.example.com', ca })).text).toBe('endpoint');
    const bk = await s.post('/backends/http_response', { body: 'edge', status_code: 200 });
    const e = await s.post('/edges/https', { hostports: ['both.example.com:443'] });
    await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: bk.body.id } });
    expect((await edgeRequest({ port, host: 'both.example.com', ca })).text).toBe('edge');
  });
});
