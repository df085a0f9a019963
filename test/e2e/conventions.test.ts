// DECISIONS.md "Wire conventions", end to end: version header, authentication, content
// type, bodies, errors, status codes, query parameters, unknown paths and methods, ids,
// uris, timestamps, nulls, PATCH, the rate limit and the request log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, expectInvalid, ID, RFC3339 } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { rawHttp } from '../helpers/raw-http.js';

let s: TestServer;
beforeAll(async () => { s = await startTestServer(); });
afterAll(async () => { await s.close(); });

describe('version header', () => {
  it.each([
    { reason: 'missing', headers: {}, version: null, code: 'ERR_SERVICE_218' as const },
    { reason: 'another version', headers: {}, version: '1', code: 'ERR_SERVICE_217' as const },
    { reason: 'not a number', headers: {}, version: 'two', code: 'ERR_SERVICE_217' as const },
    { reason: 'empty', headers: {}, version: '', code: 'ERR_SERVICE_217' as const },
  ])('$reason: 400 $code', async ({ version, code }) => {
    const r = await s.get('/ip_policies', { version });
    const body = expectError(r, 400, code);
    expect(body.msg).toContain('Service-Version: 2');
  });

  it('an 8 KB value is not repeated whole in the 400: its first 64 characters and its length', async () => {
    const version = `3${'x'.repeat(8191)}`;
    const body = expectError(await s.get('/ip_policies', { version }), 400, 'ERR_SERVICE_217');
    expect(body.msg).toBe(`Service-Version "${version.slice(0, 64)}"… (8,192 characters) is not supported; send Service-Version: 2`);
    expect(JSON.stringify(body).length).toBeLessThan(1024);
  });

  it('a short value is quoted whole', async () => {
    expect(expectError(await s.get('/ip_policies', { version: '3' }), 400, 'ERR_SERVICE_217').msg).toBe('Service-Version "3" is not supported; send Service-Version: 2');
  });

  it.each([
    { reason: 'neither header', token: null, version: null, status: 401, code: 'ERR_SERVICE_201' as const },
    { reason: 'an unknown token and no version', token: 'not-a-key', version: null, status: 401, code: 'ERR_SERVICE_202' as const },
    { reason: 'a valid token and no version', token: undefined, version: null, status: 400, code: 'ERR_SERVICE_218' as const },
  ])('checks credentials before the version header: $reason gives $status $code', async ({ token, version, status, code }) => {
    expectError(await s.get('/ip_policies', { token, version }), status, code);
  });

  it('is matched case-insensitively by name', async () => {
    const r = await s.get('/ip_policies', { version: null, headers: { 'SERVICE-VERSION': '2' } });
    expect(r.status).toBe(200);
  });

  it.each(['/healthz', '/openapi.json'])('%s needs neither the header nor a token', async (path) => {
    const r = await s.get(path, { version: null, token: null });
    expect(r.status).toBe(200);
  });

  it('/healthz reports the database reachable', async () => {
    const r = await s.get('/healthz', { version: null, token: null });
    expect(r.body).toEqual({ status: 'ok', database: 'ok' });
  });
});

describe('authentication', () => {
  it.each<{ reason: string; headers: Record<string, string>; token: string | null }>([
    { reason: 'no Authorization header', headers: {}, token: null },
    { reason: 'a scheme other than Bearer', headers: { authorization: 'Basic dXNlcjpwYXNz' }, token: null },
    { reason: 'Bearer without a token', headers: { authorization: 'Bearer ' }, token: null },
    { reason: 'a token no key has', headers: {}, token: 'not-a-token-of-any-key' },
  ])('$reason: 401 with WWW-Authenticate: Bearer', async ({ headers, token }) => {
    const r = await s.get('/ip_policies', { token, headers });
    expectError(r, 401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('accepts the scheme name in any case', async () => {
    const r = await s.get('/ip_policies', { token: null, headers: { authorization: `bearer ${s.token}` } });
    expect(r.status).toBe(200);
  });
});

describe('request bodies', () => {
  it.each([
    { reason: 'text/plain', contentType: 'text/plain', raw: '{}' },
    { reason: 'form encoding', contentType: 'application/x-www-form-urlencoded', raw: 'description=x' },
    { reason: 'no content type', contentType: null, raw: '{}' },
  ])('a body that is not application/json ($reason): 400', async ({ contentType, raw }) => {
    const r = await s.post('/ip_policies', undefined, { raw, contentType });
    expectError(r, 400, 'ERR_SERVICE_101');
  });

  it('accepts application/json with a charset parameter', async () => {
    const r = await s.post('/ip_policies', undefined, { raw: '{"description":"charset"}', contentType: 'application/json; charset=utf-8' });
    expect(r.status).toBe(201);
  });

  it.each([
    { reason: 'an array', raw: '[]' },
    { reason: 'null', raw: 'null' },
    { reason: 'a string', raw: '"text"' },
    { reason: 'a number', raw: '42' },
    { reason: 'a boolean', raw: 'true' },
    { reason: 'not JSON at all', raw: '{"description":' },
  ])('a body that is not a JSON object ($reason): 400', async ({ raw }) => {
    expectError(await s.post('/ip_policies', undefined, { raw }), 400, 'ERR_SERVICE_100');
    expectError(await s.patch('/ip_policies/ipp_0000000000000000000000000000', undefined, { raw }), 400, 'ERR_SERVICE_100');
  });

  it('an unknown field: 400 naming it and listing the supported fields', async () => {
    const r = await s.post('/ip_policies', { description: 'x', colour: 'red' });
    const body = expectInvalid(r, 'colour', 'ERR_SERVICE_102');
    expect(body.msg).toContain('"colour"');
    expect(body.msg).toContain('description, metadata');
    expect(body.details.supported_fields).toEqual(['description', 'metadata']);
  });

  it('a field of the wrong type: 400 naming the field', async () => {
    const r = await s.post('/ip_policies', { description: 7 });
    const body = expectInvalid(r, 'description');
    expect(body.details.reason).toMatch(/string/);
  });

  it('a body over 1 MiB: 413', async () => {
    const r = await s.post('/ip_policies', { metadata: 'x'.repeat(1024 * 1024) });
    expectError(r, 413, 'ERR_SERVICE_330');
  });

  it('a body of exactly 1 MiB is read (and then judged on its fields)', async () => {
    const raw = JSON.stringify({ metadata: 'x'.repeat(1024 * 1024 - 15) });
    expect(Buffer.byteLength(raw)).toBe(1024 * 1024);
    expectInvalid(await s.post('/ip_policies', undefined, { raw }), 'metadata');
  });

  it('GET and DELETE with Content-Type: application/json and no body are fine', async () => {
    const created = await s.post('/ip_policies', {});
    const json = { headers: { 'content-type': 'application/json' } };
    expect((await s.get(`/ip_policies/${created.body.id}`, json)).status).toBe(200);
    expect((await s.get('/ip_policies', json)).status).toBe(200);
    const del = await s.del(`/ip_policies/${created.body.id}`, json);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
  });

  it('a POST with no body at all is an empty object', async () => {
    const r = await s.request('POST', '/ip_policies', undefined, { headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(201);
  });
});

describe('query parameters and paths', () => {
  it.each([
    { reason: 'an unknown parameter', query: '?colour=red', field: 'colour' },
    { reason: 'limit 0', query: '?limit=0', field: 'limit' },
    { reason: 'limit over 100', query: '?limit=101', field: 'limit' },
    { reason: 'a negative limit', query: '?limit=-1', field: 'limit' },
    { reason: 'a fractional limit', query: '?limit=1.5', field: 'limit' },
    { reason: 'a limit that is not a number', query: '?limit=ten', field: 'limit' },
    { reason: 'limit given twice', query: '?limit=1&limit=2', field: 'limit' },
    { reason: 'before_id of another collection', query: '?before_id=ak_0000000000000000000000000000', field: 'before_id' },
    { reason: 'before_id that is not an id', query: '?before_id=yesterday', field: 'before_id' },
  ])('$reason: 400', async ({ query, field }) => {
    const r = await s.get(`/ip_policies${query}`);
    expectInvalid(r, field, 'ERR_SERVICE_104');
  });

  it('an unknown query parameter is refused on every kind of operation', async () => {
    expectError(await s.post('/ip_policies?dry_run=1', {}), 400, 'ERR_SERVICE_104');
    expectError(await s.get('/ip_policies/ipp_0000000000000000000000000000?expand=rules'), 400, 'ERR_SERVICE_104');
  });

  it('an unknown path: 404', async () => {
    const r = await s.get('/ip_polices');
    const body = expectError(r, 404, 'ERR_SERVICE_301');
    expect(body.msg).toContain('/ip_polices');
  });

  it('a trailing slash is the same path', async () => {
    expect((await s.get('/ip_policies/')).status).toBe(200);
  });

  it.each([
    { method: 'PUT', path: '/ip_policies', allow: 'POST, GET' },
    { method: 'DELETE', path: '/ip_policies', allow: 'POST, GET' },
    { method: 'POST', path: '/ip_policies/ipp_0000000000000000000000000000', allow: 'GET, PATCH, DELETE' },
    { method: 'PUT', path: '/ip_policies/ipp_0000000000000000000000000000', allow: 'GET, PATCH, DELETE' },
    { method: 'POST', path: '/tunnels', allow: 'GET' },
  ])('$method $path: 405 with Allow: $allow', async ({ method, path, allow }) => {
    const r = await s.request(method, path, method === 'DELETE' ? undefined : {});
    expectError(r, 405, 'ERR_SERVICE_310');
    expect(r.headers.get('allow')).toBe(allow);
  });
});

describe('successful responses', () => {
  it('carry an operation id, absolute uris, RFC 3339 UTC timestamps and "" for unset strings', async () => {
    const r = await s.post('/ip_policies', {});
    expect(r.status).toBe(201);
    expect(r.headers.get('service-operation-id')).toMatch(/^op_[0-9A-Za-z]{27}$/);
    expect(r.body.id).toMatch(ID);
    expect(r.body.uri).toBe(`${s.url}/ip_policies/${r.body.id}`);
    expect(r.body.created_at).toMatch(RFC3339);
    expect(Math.abs(Date.parse(r.body.created_at) - Date.now())).toBeLessThan(60_000);
    expect(r.body).toMatchObject({ description: '', metadata: '' });
  });

  it('every operation id is distinct', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) ids.add((await s.get('/ip_policies?limit=1')).headers.get('service-operation-id')!);
    expect(ids.size).toBe(20);
  });

  it('list envelopes carry the absolute collection uri', async () => {
    const r = await s.get('/ip_policies?limit=1');
    expect(r.body.uri).toBe(`${s.url}/ip_policies`);
    expect(Object.keys(r.body).sort()).toEqual(['ip_policies', 'next_page_uri', 'uri']);
  });

  it('accepts beforeId as an alias of before_id', async () => {
    const a = await s.post('/ip_policies', {});
    const b = await s.post('/ip_policies', {});
    const r = await s.get(`/ip_policies?beforeId=${b.body.id}&limit=1`);
    expect(r.body.ip_policies.map((p: { id: string }) => p.id)).toEqual([a.body.id]);
  });
});

describe('PATCH', () => {
  it('changes only the fields given; null and absent leave a field as it was', async () => {
    const created = await s.post('/ip_policies', { description: 'before', metadata: 'keep' });
    const id = created.body.id;
    const r = await s.patch(`/ip_policies/${id}`, { description: 'after' });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ ...created.body, description: 'after' });
    const n = await s.patch(`/ip_policies/${id}`, { description: null });
    expect(n.body.description).toBe('after');
    const empty = await s.patch(`/ip_policies/${id}`, {});
    expect(empty.body).toEqual(r.body);
    expect((await s.get(`/ip_policies/${id}`)).body).toEqual(r.body);
  });

  it('may repeat the path id; a different id is 400', async () => {
    const created = await s.post('/ip_policies', {});
    const id = created.body.id;
    expect((await s.patch(`/ip_policies/${id}`, { id, description: 'same id' })).status).toBe(200);
    expectInvalid(await s.patch(`/ip_policies/${id}`, { id: 'ipp_0000000000000000000000000000' }), 'id', 'ERR_SERVICE_108');
  });

  it('an empty string clears a description', async () => {
    const created = await s.post('/ip_policies', { description: 'x' });
    expect((await s.patch(`/ip_policies/${created.body.id}`, { description: '' })).body.description).toBe('');
  });
});

describe('the API rate limit', () => {
  let limited: TestServer;
  beforeAll(async () => { limited = await startTestServer({ apiRateLimit: 3 }); });
  afterAll(async () => { await limited.close(); });

  it('refuses the request over the per-minute limit with 429 and Retry-After, per key', async () => {
    for (let i = 0; i < 3; i++) expect((await limited.get('/ip_policies')).status).toBe(200);
    const r = await limited.get('/ip_policies');
    const body = expectError(r, 429, 'ERR_SERVICE_226');
    const after = Number(r.headers.get('retry-after'));
    expect(Number.isInteger(after)).toBe(true);
    expect(after).toBeGreaterThanOrEqual(1);
    expect(after).toBeLessThanOrEqual(60);
    expect(body.details.retry_after).toBe(after);
    // Health checks are not API requests and are never limited.
    expect((await limited.get('/healthz', { token: null, version: null })).status).toBe(200);
  });

  it('counts each key separately', async () => {
    const fresh = await startTestServer({ apiRateLimit: 2 });
    try {
      const key = await fresh.post('/api_keys', {});
      expect(key.status).toBe(201);
      expect((await fresh.get('/ip_policies')).status).toBe(200);
      expect((await fresh.get('/ip_policies')).status).toBe(429);
      expect((await fresh.get('/ip_policies', { token: key.body.token })).status).toBe(200);
    } finally {
      await fresh.close();
    }
  });
});

describe('the request log', () => {
  it('writes one JSON line per request with method, path, status, duration and operation id', async () => {
    const r = await s.get('/ip_policies?limit=2');
    const opId = r.headers.get('service-operation-id');
    const line = s.logs.map((l) => JSON.parse(l)).find((l) => l.operation_id === opId);
    expect(line).toMatchObject({ method: 'GET', path: '/ip_policies', status: 200, level: 'info' });
    expect(typeof line.duration_ms).toBe('number');
    expect(RFC3339.test(line.time.replace(/\.\d+Z$/, 'Z'))).toBe(true);
  });

  it('is written, and counted in /metrics under the route template, whether the handler or a check before it answered', async () => {
    const fresh = await startTestServer();
    try {
      const policy = await fresh.post('/ip_policies', {});
      const answers = [
        await fresh.get(`/ip_policies/${policy.body.id}`),
        await fresh.get(`/ip_policies/${policy.body.id}`),
        await fresh.get(`/ip_policies/${policy.body.id}`, { token: null }),
        await fresh.get(`/ip_policies/${policy.body.id}?limit=1`),
        await fresh.get('/no_such_collection'),
      ];
      expect(answers.map((r) => r.status)).toEqual([200, 200, 401, 400, 404]);
      for (const r of answers) {
        const line = fresh.logs.map((l) => JSON.parse(l)).find((l) => l.operation_id === r.headers.get('service-operation-id'));
        expect(line).toMatchObject({ level: 'info', method: 'GET', status: r.status });
        expect(line.path).not.toContain('?');
        expect(Object.keys(line)).toEqual(['time', 'level', 'method', 'path', 'status', 'duration_ms', 'operation_id']);
      }
      const metrics = (await fresh.get('/metrics', { token: null, version: null })).text;
      const count = (labels: string) => Number(new RegExp(`^edgeform_api_requests_total\\{${labels}\\} (\\d+)$`, 'm').exec(metrics)?.[1]);
      expect(count('method="GET",route="/ip_policies/:id",status="200"')).toBe(2);
      expect(count('method="GET",route="/ip_policies/:id",status="401"')).toBe(1);
      expect(count('method="GET",route="/ip_policies/:id",status="400"')).toBe(1);
      expect(count('method="GET",route="unmatched",status="404"')).toBe(1);
      expect(metrics).toMatch(/^edgeform_api_request_duration_seconds_count\{method="GET",route="\/ip_policies\/:id"\} 4$/m);
    } finally {
      await fresh.close();
    }
  });

  it('never contains a token, a query string or a body', async () => {
    const marker = 'body-marker-7f3a';
    const key = await s.post('/api_keys', { description: marker });
    await s.get('/ip_policies', { token: key.body.token });
    await s.get('/ip_policies', { token: 'wrong-token-marker-91b2' });
    await s.post('/ip_policies', { metadata: marker });
    await s.get(`/ip_policies?before_id=ipp_${'q'.repeat(27)}`);
    const all = s.logs.join('\n');
    for (const secret of [s.token, key.body.token, 'wrong-token-marker-91b2', marker, 'qqqqqqqq']) expect(all).not.toContain(secret);
    for (const line of s.logs) expect(() => JSON.parse(line)).not.toThrow();
  });
});

const raw = (bytes: string) => rawHttp(s.url, bytes);

describe('requests that are not well-formed still get the error body', () => {
  it.each([
    { reason: 'bad percent-encoding in the path', path: '/ip_policies/%E0%A4%A', status: 400, code: 'ERR_SERVICE_109' },
    { reason: 'a path segment over 100 characters', path: `/ip_policies/ipp_${'a'.repeat(200)}`, status: 400, code: 'ERR_SERVICE_109' },
  ])('$reason: $status $code', async ({ path, status, code }) => {
    expectError(await s.get(path), status, code as 'ERR_SERVICE_109');
  });

  it.each([
    { reason: 'not HTTP at all', bytes: 'HELLO THERE\r\n\r\n', status: 400, code: 'ERR_SERVICE_109' },
    { reason: 'headers over 16 KiB', bytes: `GET /ip_policies HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, status: 431, code: 'ERR_SERVICE_331' },
  ])('$reason: $status $code', async ({ bytes, status, code }) => {
    const r = await raw(bytes);
    expect(r.status).toBe(status);
    expect(r.body).toEqual({ error_code: code, status_code: status, msg: expect.any(String), details: { operation_id: expect.stringMatching(/^op_/) } });
    expect(r.headers['service-operation-id']).toBe(r.body.details.operation_id);
  });
});
