// Backends end to end: the three kinds' CRUD under one list envelope, HTTP-response
// headers, weights, children that must exist and may not lead back to their parent, and
// deletion refused while a route, an edge or a weighted backend still uses a backend.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectInvalid, ID, RFC3339, unknownId } from '../helpers/api.js';
import { freshHostport } from '../helpers/edge-fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

type Doc = Record<string, any>;
let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

const create = async (path: string, body: Doc = {}) => {
  const r = await s.post(path, body);
  expect(r.status, r.text).toBe(201);
  return r.body as Doc;
};
const tunnelGroup = () => create('/backends/tunnel_group', { labels: { app: 'x' } });
const httpResponse = () => create('/backends/http_response', { body: 'x' });
const weighted = (backends: Record<string, number>) => create('/backends/weighted', { backends });

const KINDS = [
  {
    path: '/backends/tunnel_group',
    prefix: 'bkdtg',
    body: { description: 'web', metadata: 'm', labels: { app: 'web', env: 'prod' } },
    read: { description: 'web', metadata: 'm', labels: { app: 'web', env: 'prod' }, tunnels: [] },
    defaults: { description: '', metadata: '', labels: {}, tunnels: [] },
    patch: { labels: { app: 'api' } },
  },
  {
    path: '/backends/http_response',
    prefix: 'bkdhr',
    body: { description: 'maintenance', metadata: 'm', body: '<h1>Down</h1>', headers: { 'content-type': 'text/html' }, status_code: 503 },
    read: { description: 'maintenance', metadata: 'm', body: '<h1>Down</h1>', headers: { 'content-type': 'text/html' }, status_code: 503 },
    defaults: { description: '', metadata: '', body: '', headers: {}, status_code: 200 },
    patch: { status_code: 200, body: 'up' },
  },
  {
    path: '/backends/weighted',
    prefix: 'bkdwd',
    body: { description: 'canary', metadata: 'm', backends: {} },
    read: { description: 'canary', metadata: 'm', backends: {} },
    defaults: { description: '', metadata: '', backends: {} },
    patch: { description: 'split' },
  },
];

describe.each(KINDS.map((k) => [k.path, k] as const))('%s', (path, k) => {
  it('full CRUD under the backends envelope; PATCH takes any create field', async () => {
    const created = await s.post(path, k.body);
    expect(created.status).toBe(201);
    const id = created.body.id;
    expect(id).toMatch(ID);
    expect(id.startsWith(`${k.prefix}_`)).toBe(true);
    expect(created.body).toEqual({ id, uri: `${s.url}${path}/${id}`, created_at: expect.stringMatching(RFC3339), ...k.read });
    expect((await s.get(`${path}/${id}`)).body).toEqual(created.body);
    const list = await s.get(path);
    expect(Object.keys(list.body).sort()).toEqual(['backends', 'next_page_uri', 'uri']);
    expect(list.body.backends[0]).toEqual(created.body);
    expect(list.body.backends.every((b: Doc) => b.id.startsWith(`${k.prefix}_`))).toBe(true);
    const patched = await s.patch(`${path}/${id}`, k.patch);
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...created.body, ...k.patch });
    expect((await s.del(`${path}/${id}`)).status).toBe(204);
    expectError(await s.get(`${path}/${id}`), 404, 'ERR_SERVICE_300');
    expectError(await s.del(`${path}/${id}`), 404, 'ERR_SERVICE_300');
  });

  it('an empty body takes the defaults', async () => {
    const created = await create(path);
    expect(created).toEqual({ id: created.id, uri: created.uri, created_at: created.created_at, ...k.defaults });
  });

  it('an id of another backend kind in the path is 400', async () => {
    const other = KINDS.find((x) => x !== k)!;
    expectError(await s.get(`${path}/${unknownId(other.prefix)}`), 400, 'ERR_SERVICE_105');
  });
});

describe('tunnel-group backends', () => {
  it('list no tunnels until agents connect', async () => {
    expect((await tunnelGroup()).tunnels).toEqual([]);
  });

  it.each([
    { reason: 'labels not a map', body: { labels: ['app=x'] }, field: 'labels' },
    { reason: 'a label value that is not a string', body: { labels: { app: 1 } }, field: 'labels.app' },
  ])('400 for $reason', async ({ body, field }) => {
    expectInvalid(await s.post('/backends/tunnel_group', body), field);
  });
});

describe('HTTP-response backends', () => {
  it('returns header names in lower case, keeping values as given', async () => {
    const b = await create('/backends/http_response', { headers: { 'Content-Type': 'Text/Plain', 'X-Request-ID': 'AbC' } });
    expect(b.headers).toEqual({ 'content-type': 'Text/Plain', 'x-request-id': 'AbC' });
    const patched = await s.patch(`/backends/http_response/${b.id}`, { headers: { 'Cache-Control': 'no-store' } });
    expect(patched.body.headers).toEqual({ 'cache-control': 'no-store' });
  });

  it('headers may be null, read as no headers', async () => {
    expect((await create('/backends/http_response', { headers: null })).headers).toEqual({});
  });

  it.each([
    { reason: 'a header name with a space', body: { headers: { 'Content Type': 'x' } }, field: 'headers.Content Type' },
    { reason: 'a header name with a colon', body: { headers: { 'x:y': 'x' } }, field: 'headers.x:y' },
    { reason: 'a header value with a line break', body: { headers: { 'x-a': 'a\nb' } }, field: 'headers.x-a' },
    { reason: 'one header twice, in different case', body: { headers: { 'X-A': 'a', 'x-a': 'b' } }, field: 'headers.x-a' },
    { reason: 'status_code 99', body: { status_code: 99 }, field: 'status_code' },
    { reason: 'status_code 600', body: { status_code: 600 }, field: 'status_code' },
    { reason: 'status_code not an integer', body: { status_code: 200.5 }, field: 'status_code' },
    { reason: 'body not a string', body: { body: { html: 1 } }, field: 'body' },
  ])('400 for $reason, on create and PATCH', async ({ body, field }) => {
    expectInvalid(await s.post('/backends/http_response', body), field);
    const b = await httpResponse();
    expectInvalid(await s.patch(`/backends/http_response/${b.id}`, body), field);
    expect((await s.get(`/backends/http_response/${b.id}`)).body).toEqual(b);
  });
});

describe('weighted backends', () => {
  it('map child backends of every kind to weights from 0 to 10000', async () => {
    const [a, b, c] = [await tunnelGroup(), await httpResponse(), await weighted({})];
    const w = await weighted({ [a.id]: 0, [b.id]: 10000, [c.id]: 1 });
    expect(w.backends).toEqual({ [a.id]: 0, [b.id]: 10000, [c.id]: 1 });
    const patched = await s.patch(`/backends/weighted/${w.id}`, { backends: { [a.id]: 5 } });
    expect(patched.body.backends).toEqual({ [a.id]: 5 });
  });

  it.each([
    { reason: 'a negative weight', weight: -1 },
    { reason: 'a weight over 10000', weight: 10001 },
    { reason: 'a fractional weight', weight: 0.5 },
    { reason: 'a weight that is not a number', weight: '10' },
  ])('400 for $reason, naming the child', async ({ weight }) => {
    const a = await httpResponse();
    const body = expectInvalid(await s.post('/backends/weighted', { backends: { [a.id]: weight } }), `backends.${a.id}`);
    if (typeof weight === 'number' && Number.isInteger(weight)) expect(body.details.reason).toMatch(/0\.\.10000/);
  });

  it('children must exist (400 naming the id) and be backends (400 for another kind of id)', async () => {
    const missing = unknownId('bkdtg');
    const body = expectInvalid(await s.post('/backends/weighted', { backends: { [missing]: 1 } }), 'backends', 'ERR_SERVICE_107');
    expect(body.details.id).toBe(missing);
    expect(body.msg).toContain(missing);
    const policy = await create('/ip_policies');
    expectInvalid(await s.post('/backends/weighted', { backends: { [policy.id]: 1 } }), `backends.${policy.id}`);
    const w = await weighted({});
    expectInvalid(await s.patch(`/backends/weighted/${w.id}`, { backends: { [missing]: 1 } }), 'backends', 'ERR_SERVICE_107');
  });

  it.each([
    { reason: 'itself', chain: 1 },
    { reason: 'a child that contains it', chain: 2 },
    { reason: 'a grandchild that contains it', chain: 3 },
  ])('may not contain $reason (400 showing the cycle); nothing changes', async ({ chain }) => {
    // w[0] <- w[1] <- ... <- w[chain-1]: each contains the one before; then w[0] is PATCHed to contain the last.
    const ws: Doc[] = [await weighted({})];
    for (let i = 1; i < chain; i++) ws.push(await weighted({ [ws[i - 1].id]: 1 }));
    const leaf = await httpResponse();
    const body = expectInvalid(await s.patch(`/backends/weighted/${ws[0].id}`, { backends: { [leaf.id]: 1, [ws[chain - 1].id]: 1 } }), 'backends');
    expect(body.msg).toContain('cycle');
    expect(body.msg).toContain([ws[0].id, ...ws.slice(1).reverse().map((w) => w.id), ws[0].id].join(' -> '));
    expect((await s.get(`/backends/weighted/${ws[0].id}`)).body.backends).toEqual({});
  });

  it('a diamond (two paths to one child) is not a cycle', async () => {
    const leaf = await httpResponse();
    const [l, r] = [await weighted({ [leaf.id]: 1 }), await weighted({ [leaf.id]: 2 })];
    const top = await weighted({ [l.id]: 1, [r.id]: 1 });
    expect((await s.patch(`/backends/weighted/${top.id}`, { backends: { [l.id]: 1, [r.id]: 1, [leaf.id]: 1 } })).status).toBe(200);
  });
});

describe('deleting a backend still in use', () => {
  /** Puts a backend to use; returns the user's id and how to stop using it. */
  type Use = (b: Doc) => Promise<{ user: string; release: () => Promise<unknown> }>;
  const uses: { reason: string; use: Use }[] = [
    { reason: 'a weighted backend', use: async (b) => { const w = await weighted({ [b.id]: 1 }); return { user: w.id, release: () => s.del(`/backends/weighted/${w.id}`) }; } },
    {
      reason: 'an HTTPS route',
      use: async (b) => {
        const edge = await create('/edges/https', { hostports: [freshHostport()] });
        const route = await create(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: b.id } });
        return { user: route.id, release: () => s.del(`/edges/https/${edge.id}/routes/${route.id}/backend`) };
      },
    },
    { reason: 'a TCP edge', use: async (b) => { const e = await create('/edges/tcp', { backend: { backend_id: b.id } }); return { user: e.id, release: () => s.del(`/edges/tcp/${e.id}/backend`) }; } },
    {
      reason: 'a TLS edge',
      use: async (b) => {
        const e = await create('/edges/tls', { backend: { backend_id: b.id } });
        const other = await httpResponse();
        return { user: e.id, release: () => s.patch(`/edges/tls/${e.id}`, { backend: { backend_id: other.id } }) };
      },
    },
  ];

  it.each(uses)('by $reason: 409 naming it, then 204 once released', async ({ use }) => {
    for (const b of [await tunnelGroup(), await httpResponse(), await weighted({})]) {
      const path = b.uri.slice(s.url.length);
      const { user, release } = await use(b);
      const body = expectError(await s.del(path), 409, 'ERR_SERVICE_321');
      expect(body.details.referrers).toEqual([user]);
      expect(body.msg).toContain(user);
      expect((await s.get(path)).status).toBe(200);
      await release();
      expect((await s.del(path)).status).toBe(204);
    }
  });
});
