// Requests that answered 500, a bare status, or nothing at all, on SQLite and on PostgreSQL
// (a throwaway cluster): body keys named like Object.prototype members, NUL and lone
// surrogates in strings (SQLite stored them, PostgreSQL failed), and requests Node's HTTP
// server handled itself (Expect, CONNECT, no Host, TRACE). Each is a 4xx in the API's error
// shape, with the same answer on both databases, and the server keeps working.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { expectError, expectInvalid } from '../helpers/api.js';
import { freshHostport } from '../helpers/edge-fixtures.js';
import { rawHttp } from '../helpers/raw-http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the PostgreSQL half of hostile-requests: initdb is not on the PATH ***\n');

type Doc = Record<string, any>;
const PROTO_NAMES = ['toString', 'constructor', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', '__defineGetter__'];

describe.each([
  { db: 'SQLite', skip: false },
  { db: 'PostgreSQL', skip: !available },
])('$db', ({ db, skip }) => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void } | undefined;
  let s: TestServer;
  let edgeId: string;
  let routePath: string;
  beforeAll(async () => {
    if (skip) return;
    if (db === 'PostgreSQL') pg = await startPostgres();
    s = await startTestServer(pg ? { databaseUrl: await pg.createDatabase('hostile') } : {});
    edgeId = (await s.post('/edges/https', { hostports: [freshHostport()] })).body.id;
    routePath = `/edges/https/${edgeId}/routes/${(await s.post(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: '/m' })).body.id}`;
  }, 120_000);
  afterAll(async () => {
    await s?.close().catch(() => {});
    pg?.stop();
  });

  let n = 0;
  const route = (extra: Doc) => s.post(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: `/p${++n}`, ...extra });
  const raw = (text: string) => s.post('/ip_policies', undefined, { raw: text });

  describe.skipIf(skip)('body keys named like Object.prototype members', () => {
    it.each(PROTO_NAMES)('%s: an unknown field at the top, in a module, in a module PUT and a PATCH (400 naming it)', async (name) => {
      expectInvalid(await raw(`{"${name}": "x"}`), name, 'ERR_SERVICE_102');
      expectInvalid(await s.post(`/edges/https/${edgeId}/routes`, undefined, { raw: `{"match_type":"path_prefix","match":"/q${++n}","compression":{"${name}":true}}` }), `compression.${name}`, 'ERR_SERVICE_102');
      expectInvalid(await s.put(`${routePath}/compression`, undefined, { raw: `{"${name}": true}` }), name, 'ERR_SERVICE_102');
      expectInvalid(await s.put(`${routePath}/request_headers`, undefined, { raw: `{"add": {}, "${name}": []}` }), name, 'ERR_SERVICE_102');
      const policy = (await s.post('/ip_policies', {})).body.id;
      expectInvalid(await s.patch(`/ip_policies/${policy}`, undefined, { raw: `{"${name}": 1}` }), name, 'ERR_SERVICE_102');
    });

    it.each(PROTO_NAMES)('%s: an ordinary key in a labels or headers map, stored and read back', async (name) => {
      const backend = await s.post('/backends/tunnel_group', undefined, { raw: `{"labels": {"${name}": "v", "app": "web"}}` });
      expect(backend.status, backend.text).toBe(201);
      expect((await s.get(`/backends/tunnel_group/${backend.body.id}`)).body.labels).toEqual({ [name]: 'v', app: 'web' });
      const r = await s.post(`/edges/https/${edgeId}/routes`, undefined, { raw: `{"match_type":"path_prefix","match":"/h${++n}","request_headers":{"add":{"${name}":"1"},"remove":["${name}"]}}` });
      expect(r.status, r.text).toBe(201);
      expect(r.body.request_headers).toMatchObject({ add: { [name.toLowerCase()]: '1' }, remove: [name.toLowerCase()] });
    });

    it.each([
      { reason: 'at the top', body: '{"__proto__": {"description": "x"}}', field: '__proto__' },
      { reason: 'in labels, where it vanished (201 with labels {})', body: '{"labels": {"__proto__": "v"}}', field: 'labels.__proto__', path: '/backends/tunnel_group' },
      { reason: 'in a module', body: `{"match_type":"path_prefix","match":"/x","request_headers":{"add":{"__proto__":"1"}}}`, field: 'request_headers.add.__proto__', path: 'routes' },
    ])('__proto__ $reason: 400 naming it', async ({ body, field, path }) => {
      const at = path === 'routes' ? `/edges/https/${edgeId}/routes` : path ?? '/ip_policies';
      expectInvalid(await s.post(at, undefined, { raw: body }), field);
    });
  });

  describe.skipIf(skip)('NUL and lone surrogates in strings (PostgreSQL cannot store them)', () => {
    const BAD = [
      { what: 'a NUL', text: 'a\u0000b' },
      { what: 'a lone high surrogate', text: 'a\ud800b' },
      { what: 'a lone low surrogate', text: '\udc00' },
    ];
    const PLACES: Array<{ where: string; send: (t: string) => Promise<any>; field: string }> = [
      { where: 'a description', send: (t) => s.post('/ip_policies', { description: t }), field: 'description' },
      { where: 'metadata on PATCH', send: async (t) => s.patch(`/ip_policies/${(await s.post('/ip_policies', {})).body.id}`, { metadata: t }), field: 'metadata' },
      { where: 'a label value', send: (t) => s.post('/backends/tunnel_group', { labels: { app: t } }), field: 'labels.app' },
      { where: 'a label key', send: (t) => s.post('/backends/tunnel_group', { labels: { [t]: 'v' } }), field: 'labels.<the key>' },
      { where: 'a header value in a module', send: (t) => route({ request_headers: { add: { 'x-a': t } } }), field: 'request_headers.add.x-a' },
      { where: 'a route match', send: (t) => route({ match: `/${t}` }), field: 'match' },
      { where: 'a module PUT', send: (t) => s.put(`${routePath}/request_headers`, { remove: [t] }), field: 'remove[0]' },
      { where: 'a fixed response body', send: (t) => s.post('/backends/http_response', { body: t, status_code: 200 }), field: 'body' },
    ];
    const cases = BAD.flatMap((b) => PLACES.map((p) => ({ ...b, ...p })));
    it.each(cases)('$what in $where: 400 naming the field', async ({ text, send, field }) => {
      expectInvalid(await send(text), field.replace('<the key>', text));
    });

    it('an id in the path or in before_id with a control character is not an id (400, not a database error)', async () => {
      expectError(await s.get('/ip_policies/ipp_%00abc'), 400, 'ERR_SERVICE_105');
      expectError(await s.get('/ip_policies?before_id=ipp_%00abc'), 400, 'ERR_SERVICE_104');
      expectError(await s.del('/ip_policies/ipp_%01'), 400, 'ERR_SERVICE_105');
    });

    it('well-formed text outside the BMP is stored and read back', async () => {
      const r = await s.post('/ip_policies', { description: 'emoji 😀 and 𝄞' });
      expect(r.status, r.text).toBe(201);
      expect((await s.get(`/ip_policies/${r.body.id}`)).body.description).toBe('emoji 😀 and 𝄞');
    });
  });

  describe.skipIf(skip)('requests Node answered on its own: the API error body and operation id', () => {
    const auth = () => `Authorization: Bearer ${s.token}\r\nService-Version: 2\r\n`;
    const CASES: Array<{ reason: string; bytes: () => string; status: number; code: string; allow?: string }> = [
      { reason: 'Expect: foo (was a bare 417)', bytes: () => `GET /ip_policies HTTP/1.1\r\nHost: x\r\n${auth()}Expect: foo\r\n\r\n`, status: 417, code: 'ERR_SERVICE_315' },
      { reason: 'CONNECT (was a destroyed socket)', bytes: () => 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', status: 405, code: 'ERR_SERVICE_310', allow: 'GET, POST, PUT, PATCH, DELETE' },
      { reason: 'no Host on HTTP/1.1 (was a bare 400)', bytes: () => `GET /ip_policies HTTP/1.1\r\n${auth()}Connection: close\r\n\r\n`, status: 400, code: 'ERR_SERVICE_109' },
      { reason: 'TRACE', bytes: () => `TRACE /ip_policies HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`, status: 405, code: 'ERR_SERVICE_310', allow: 'POST, GET' },
      { reason: 'a method Node does not know', bytes: () => `BREW /ip_policies HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`, status: 400, code: 'ERR_SERVICE_109' },
      { reason: 'a header value with a control character', bytes: () => `GET /ip_policies HTTP/1.1\r\nHost: x\r\nX-A: a\u0001b\r\n${auth()}Connection: close\r\n\r\n`, status: 400, code: 'ERR_SERVICE_109' },
      { reason: 'Content-Length and Transfer-Encoding together', bytes: () => `POST /ip_policies HTTP/1.1\r\nHost: x\r\n${auth()}Content-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, status: 400, code: 'ERR_SERVICE_109' },
      { reason: 'a body in UTF-16 by its Content-Type', bytes: () => `POST /ip_policies HTTP/1.1\r\nHost: x\r\n${auth()}Content-Type: application/json; charset=utf-16\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`, status: 400, code: 'ERR_SERVICE_101' },
      { reason: 'bad percent-encoding in the query', bytes: () => `GET /ip_policies?limit=%zz HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`, status: 400, code: 'ERR_SERVICE_104' },
      { reason: 'a repeated query parameter', bytes: () => `GET /ip_policies?limit=1&limit=2 HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`, status: 400, code: 'ERR_SERVICE_104' },
      { reason: 'a query parameter named __proto__', bytes: () => `GET /ip_policies?__proto__=1 HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`, status: 400, code: 'ERR_SERVICE_104' },
      { reason: 'a path whose percent-encoding is a lone surrogate', bytes: () => `GET /ip_policies/ipp_%ED%A0%80 HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`, status: 400, code: 'ERR_SERVICE_109' },
      { reason: 'headers over 16 KiB', bytes: () => `GET /ip_policies HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 2000 }, (_, i) => `X-${i}: 12345678\r\n`).join('')}\r\n`, status: 431, code: 'ERR_SERVICE_331' },
    ];
    it.each(CASES)('$reason: $status $code', async ({ bytes, status, code, allow }) => {
      const r = await rawHttp(s.url, bytes());
      expect(r.status, r.head).toBe(status);
      expect(r.headers['content-type']).toMatch(/^application\/json/);
      expect(r.body).toMatchObject({ error_code: code, status_code: status, msg: expect.any(String), details: { operation_id: expect.stringMatching(/^op_[0-9A-Za-z]{27}$/) } });
      expect(r.headers['service-operation-id']).toBe(r.body.details.operation_id);
      if (allow) expect(r.headers.allow).toBe(allow);
    });

    it('Expect: 100-continue still works, and the server answers after all of the above', async () => {
      const r = await rawHttp(s.url, `POST /ip_policies HTTP/1.1\r\nHost: x\r\n${auth()}Expect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
      expect(r.head).toMatch(/^HTTP\/1\.1 100 Continue/);
      expect((await s.get('/ip_policies?limit=1')).status).toBe(200);
      expect(s.logs.filter((l) => JSON.parse(l).status >= 500)).toEqual([]);
    });
  });
});
