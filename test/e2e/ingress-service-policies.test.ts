// Policies copied from the service's docs (test/fixtures/service-policies/) on a route, through
// the HTTP ingress over real sockets: interpolated responses, basic-auth, response body
// rewriting and compression applied to the answer as it streams, the log action in the
// server's log, close-connection ending the connection.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { route, startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';

const doc = (name: string) => fs.readFileSync(path.resolve(import.meta.dirname, '../fixtures/service-policies', `${name}.yml`), 'utf8');
const policy = (value: string) => ({ traffic_policy: { enabled: true, value } });
const be = (id: string) => ({ backend: { enabled: true, backend_id: id } });
const JSON_BODY = JSON.stringify({ items: Array.from({ length: 200 }, (_, i) => ({ id: i, ssn: '123-45-6789' })) });
const CLOSE = `on_http_request:
  - expressions: ["req.url.path == '/close'"]
    actions: [{type: close-connection}]
`;

let ing: HttpIngress;

beforeAll(async () => {
  ing = await startHttpIngress(
    tableOf({
      edges: [{ id: 'edghts_docs', hostports: ['app.example.com:443'], routes: [
        route('edghtsrt_custom', '/api/example', { ...be('bkdhr_ok'), ...policy(doc('actions_custom-response_examples_http-json-single-interpolation-0')) }),
        route('edghtsrt_auth', '/auth', { ...be('bkdhr_ok'), ...policy(doc('actions_basic-auth_examples_basic-example-0')) }),
        route('edghtsrt_redact', '/redact', { ...be('bkdhr_json'), ...policy(doc('actions_response-body-find-replace-2')) }),
        route('edghtsrt_gzip', '/api/', { ...be('bkdhr_json'), ...policy(doc('actions_compress-response_examples_compressing-api-responses-based-on-url-path-0')) }),
        route('edghtsrt_log', '/log', { ...be('bkdhr_ok'), ...policy(doc('actions_log_examples_basic-example-0')) }),
        route('edghtsrt_vars', '/vars', { ...be('bkdhr_ok'), ...policy(doc('actions_set-vars_examples_basic-example-0')) }),
        route('edghtsrt_close', '/close', { ...be('bkdhr_ok'), ...policy(CLOSE) }),
      ] }],
      backends: [
        { id: 'bkdhr_ok', kind: 'HTTPResponseBackend', status_code: 200, body: 'from upstream', headers: {} },
        { id: 'bkdhr_json', kind: 'HTTPResponseBackend', status_code: 200, body: JSON_BODY, headers: { 'content-type': 'application/json' } },
      ],
    }),
  );
});

afterAll(async () => {
  await ing?.close();
});

describe("the service's documented policies through the ingress", () => {
  it('custom-response with ${conn.ts.start}: a JSON body with the connection start as RFC 3339', async () => {
    const r = await ing.get('/api/example');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    const start = JSON.parse(r.text)['connection-start'];
    expect(start).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
  });

  it('basic-auth: 401 with the realm, then the documented answer with a listed credential', async () => {
    const none = await ing.get('/auth');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Basic realm="sample-realm", charset="UTF-8"');
    const ok = await ing.get('/auth', { headers: { authorization: `Basic ${Buffer.from('user:password1').toString('base64')}` } });
    expect(ok.status).toBe(200);
    expect(ok.text).toBe('Successfully Authenticated!');
  });

  it('response-body-find-replace: the SSNs of the upstream answer never reach the client', async () => {
    const r = await ing.get('/redact');
    expect(r.status).toBe(200);
    expect(r.text).not.toContain('123-45-6789');
    expect(JSON.parse(r.text).items[199]).toEqual({ id: 199, ssn: '[SSN REDACTED]' });
  });

  it('compress-response: gzip on /api/ for a client that accepts it; the body inflates to the upstream answer', async () => {
    const r = await ing.get('/api/items', { headers: { 'accept-encoding': 'gzip' } });
    expect(r.status).toBe(200);
    expect(r.headers['content-encoding']).toBe('gzip');
    expect(zlib.gunzipSync(r.body).toString('utf8')).toBe(JSON_BODY);
    const plain = await ing.get('/api/items');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.text).toBe(JSON_BODY);
  });

  it('log: the metadata, interpolated with the route id, in the server log', async () => {
    expect((await ing.get('/log')).status).toBe(200);
    expect(ing.logs.find((l) => l.msg === 'traffic policy log action')).toMatchObject({ route: 'edghtsrt_log', metadata: { message: 'Log action executed.', endpoint_id: 'edghtsrt_log' } });
  });

  it('set-vars: the variables read back in the interpolated custom response', async () => {
    const r = await ing.get('/vars');
    expect(r.text).toBe('bar 1.5 1 value value2');
  });

  it('close-connection: the connection ends without an answer', async () => {
    await expect(ing.get('/close')).rejects.toThrow();
  });
});
