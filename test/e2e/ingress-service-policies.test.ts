// Policies copied from the service's docs (test/fixtures/service-policies/) on a route, through
// the HTTP ingress over real sockets: interpolated responses, basic-auth, response body
// rewriting and compression applied to the answer as it streams, the log action in the
// server's log, close-connection ending the connection.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { route, startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';

const doc = (name: string) => fs.readFileSync(path.resolve(import.meta.dirname, '../fixtures/service-policies', `${name}.yml`), 'utf8');
const policy = (value: string) => ({ traffic_policy: { enabled: true, value } });
const be = (id: string) => ({ backend: { enabled: true, backend_id: id } });
const JSON_BODY = JSON.stringify({ items: Array.from({ length: 200 }, (_, i) => ({ id: i, ssn: '123-45-6789' })) });
const GITHUB = `on_http_request:
  - actions:
      - type: verify-webhook
        config: {provider: github, secret: hook-secret}
      - type: custom-response
        config: {status_code: 200, body: "verified \${actions.ngrok.verify_webhook.verified}"}
`;
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
        route('edghtsrt_gitlab', '/gitlab', { ...be('bkdhr_ok'), ...policy(doc('actions_verify-webhook_examples_basic-example-0')) }),
        route('edghtsrt_github', '/github', { ...be('bkdhr_ok'), ...policy(GITHUB) }),
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

  it('verify-webhook (the docs\' gitlab example): the token header decides; 403 without it', async () => {
    expect((await ing.get('/gitlab', { method: 'POST', body: '{}' })).status).toBe(403);
    expect((await ing.get('/gitlab', { method: 'POST', body: '{}', headers: { 'x-gitlab-token': 'wrong' } })).status).toBe(403);
    const ok = await ing.get('/gitlab', { method: 'POST', body: '{}', headers: { 'x-gitlab-token': 'secret!' } });
    expect(ok.status).toBe(200);
    expect(ok.text).toBe('GitLab webhook verified');
  });

  it('verify-webhook (github): the body is read and its HMAC checked', async () => {
    const body = JSON.stringify({ action: 'opened', number: 7 });
    const sig = `sha256=${crypto.createHmac('sha256', 'hook-secret').update(body).digest('hex')}`;
    const ok = await ing.get('/github', { method: 'POST', body, headers: { 'x-hub-signature-256': sig, 'content-type': 'application/json' } });
    expect(ok.status).toBe(200);
    expect(ok.text).toBe('verified true');
    const tampered = await ing.get('/github', { method: 'POST', body: body.replace('7', '8'), headers: { 'x-hub-signature-256': sig } });
    expect(tampered.status).toBe(403);
  });

  it('close-connection: the connection ends without an answer', async () => {
    await expect(ing.get('/close')).rejects.toThrow();
  });
});

describe('http-request (a side call with a timeout)', () => {
  it('calls the URL, its answer readable by later rules; a call that does not answer in time follows on_error', async () => {
    const { compilePolicy, evaluate, isCompiled, PolicyState } = await import('../../server/policy/index.js');
    const seen: string[] = [];
    const side = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url} ${req.headers['x-user']}`);
      if (req.url?.startsWith('/slow')) return void setTimeout(() => res.end('late'), 2000);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"allowed": true}');
    });
    await new Promise<void>((r) => side.listen(0, '127.0.0.1', r));
    const port = (side.address() as AddressInfo).port;
    try {
      const text = (path: string, onError: string) => `on_http_request:
  - actions:
      - type: http-request
        config: {url: "http://127.0.0.1:${port}${path}", method: POST, headers: {x-user: "\${req.headers['x-user'][0]}"}, query_params: [{q: "\${req.method}"}], timeout: 300ms, on_error: ${onError}}
  - expressions: ["actions.ngrok.http_request.res.status_code == 200 && json.decode(actions.ngrok.http_request.res.body)['allowed']"]
    actions: [{type: custom-response, config: {status_code: 200, body: allowed}}]
`;
      const input = { now: Date.now(), conn: { client_ip: '127.0.0.1', server_port: 443 }, req: { method: 'GET', url: 'https://app.example.com/', headers: { 'x-user': 'ana' } } };
      const ok = compilePolicy(text('/check', 'halt'));
      if (!isCompiled(ok)) throw new Error(JSON.stringify(ok.problems));
      const r = await evaluate(ok, 'on_http_request', input, new PolicyState()).pending!;
      expect(r.outcome).toMatchObject({ response: { status: 200, body: 'allowed' } });
      expect(seen).toEqual(['POST /check?q=GET ana']);
      const slowHalt = compilePolicy(text('/slow', 'halt'));
      if (!isCompiled(slowHalt)) throw new Error('compile');
      const halted = await evaluate(slowHalt, 'on_http_request', input, new PolicyState()).pending!;
      expect(halted.outcome).toMatchObject({ response: { status: 502 } });
      expect(halted.rules[0].actions[0].did).toBe('http-request: no answer within 300 ms; 502 (on_error: halt)');
      const slowGo = compilePolicy(text('/slow', 'continue'));
      if (!isCompiled(slowGo)) throw new Error('compile');
      const went = await evaluate(slowGo, 'on_http_request', input, new PolicyState()).pending!;
      expect(went.outcome).toBe('continue');
      expect(went.actions.ngrok.http_request.error.message).toBe('no answer within 300 ms');
    } finally {
      side.closeAllConnections();
      await new Promise((r) => side.close(r));
    }
  });
});

describe('sse-find-replace', () => {
  it("the docs' on_event_stream_message phase is refused saying where its actions go; in on_http_response each data line of the event stream is rewritten", async () => {
    const { compilePolicy, isCompiled } = await import('../../server/policy/index.js');
    const service = `on_event_stream_message:
  - actions:
      - type: sse-find-replace
        config:
          replacements:
            - field: data
              from: "\\\\d{3}-\\\\d{2}-\\\\d{4}"
              to: "[SSN REDACTED]"
`;
    const refused = compilePolicy(service);
    expect(isCompiled(refused) ? [] : refused.problems.map((p) => p.message)).toEqual([expect.stringMatching(/^the phase on_event_stream_message is not supported here: put its sse-find-replace actions in on_http_response/)]);
    const here = compilePolicy(service.replace('on_event_stream_message', 'on_http_response'));
    expect(isCompiled(here)).toBe(true);
    const sse = await startHttpIngress(tableOf({
      edges: [{ id: 'edghts_sse', hostports: ['app.example.com:443'], routes: [route('edghtsrt_sse', '/', { ...be('bkdhr_sse'), ...policy(service.replace('on_event_stream_message', 'on_http_response')) })] }],
      backends: [{ id: 'bkdhr_sse', kind: 'HTTPResponseBackend', status_code: 200, body: 'event: note\ndata: ssn 123-45-6789\n\ndata: {"n": 2}\nid: 123-45-6789\n\n', headers: { 'content-type': 'text/event-stream' } }],
    }));
    try {
      const r = await sse.get('/');
      expect(r.text).toBe('event: note\ndata: ssn [SSN REDACTED]\n\ndata: {"n": 2}\nid: 123-45-6789\n\n');
    } finally {
      await sse.close();
    }
  });
});
