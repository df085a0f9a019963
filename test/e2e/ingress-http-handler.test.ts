// The ingress's HTTP handler over real sockets, driven from a plain node:http listener with a
// hand-made table: 404 pages with codes, http_response and weighted backends, the access log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { route, startHttpIngress, tableOf, type HttpIngress } from '../helpers/ingress-http.js';

const hello = { id: 'bkdhr_hello', kind: 'HTTPResponseBackend', status_code: 201, body: 'hello from the edge', headers: { 'X-Served-By': 'edge' } };
const other = { id: 'bkdhr_other', kind: 'HTTPResponseBackend', status_code: 200, body: 'other', headers: {} };
const never = { id: 'bkdhr_never', kind: 'HTTPResponseBackend', status_code: 200, body: 'never', headers: {} };
const split = { id: 'bkdwd_split', kind: 'WeightedBackend', backends: { bkdhr_hello: 3, bkdhr_other: 1, bkdhr_never: 0 } };
const zero = { id: 'bkdwd_zero', kind: 'WeightedBackend', backends: { bkdhr_never: 0 } };
const loop = { id: 'bkdwd_loop', kind: 'WeightedBackend', backends: { bkdwd_loop: 1 } };
const backend = (id: string, enabled = true) => ({ backend: { enabled, backend_id: id } });

let ing: HttpIngress;
beforeAll(async () => {
  ing = await startHttpIngress(tableOf({
    edges: [
      { id: 'edghts_app', hostports: ['app.example.com:443'], routes: [
        route('edghtsrt_hello', '/hello', backend('bkdhr_hello'), 'exact_path'),
        route('edghtsrt_split', '/split', backend('bkdwd_split')),
        route('edghtsrt_zero', '/zero', backend('bkdwd_zero')),
        route('edghtsrt_loop', '/loop', backend('bkdwd_loop')),
        route('edghtsrt_none', '/none'),
        route('edghtsrt_off', '/off', backend('bkdhr_hello', false)),
        route('edghtsrt_gone', '/gone', backend('bkdhr_deleted')),
      ] },
      { id: 'edghts_secret', hostports: ['secret.example.com:443'], routes: [route('edghtsrt_secret', '/', backend('bkdhr_other'))] },
    ],
    backends: [hello, other, never, split, zero, loop],
  }));
});
afterAll(() => ing.close());

describe('the HTTP side of the ingress', () => {
  it('an http_response backend answers its status, headers (names in lower case) and body', async () => {
    const r = await ing.get('/hello');
    expect(r.status).toBe(201);
    expect(r.text).toBe('hello from the edge');
    expect(r.headers['x-served-by']).toBe('edge');
    expect(r.headers['edgeform-error-code']).toBeUndefined();
  });

  it('an unknown host gets a 404 page with a code, never another edge\'s content', async () => {
    const r = await ing.get('/', { host: 'nobody.example.com' });
    expect(r.status).toBe(404);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_740');
    expect(r.text).toContain('ERR_SERVICE_740');
    expect(r.text).not.toContain('other');
  });

  it('a path no route matches gets a 404 page with its own code', async () => {
    const r = await ing.get('/hello/more');
    expect(r.status).toBe(404);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_741');
  });

  it('a dotted or escaped path cannot reach a route it does not name', async () => {
    expect((await ing.get('/x/../hello')).status).toBe(201);
    expect((await ing.get('/%68ello')).status).toBe(201);
  });

  it.each([
    ['no backend module', '/none', 'ERR_SERVICE_745'],
    ['a disabled backend module', '/off', 'ERR_SERVICE_745'],
    ['a backend the table no longer has', '/gone', 'ERR_SERVICE_745'],
    ['a weighted backend whose every weight is 0', '/zero', 'ERR_SERVICE_746'],
    ['a weighted backend that names itself', '/loop', 'ERR_SERVICE_746'],
  ])('%s: 502 with a code', async (_why, path, code) => {
    const r = await ing.get(path);
    expect(r.status).toBe(502);
    expect(r.headers['edgeform-error-code']).toBe(code);
  });

  it('a weighted backend splits by weight per request and never picks a weight of 0', async () => {
    const counts: Record<string, number> = {};
    for (let i = 0; i < 400; i++) {
      const r = await ing.get('/split');
      counts[r.text] = (counts[r.text] ?? 0) + 1;
    }
    expect(counts.never).toBeUndefined();
    // 3:1 over 400 draws: 300 expected, sd ~8.7; 5 sd either side.
    expect(counts['hello from the edge']).toBeGreaterThan(256);
    expect(counts['hello from the edge']).toBeLessThan(344);
    expect(counts['hello from the edge'] + counts.other).toBe(400);
  });

  it('writes one access-log line per request: edge, route, status, bytes, client ip, code; no query', async () => {
    ing.logs.length = 0;
    await ing.get('/hello?token=s3cret');
    await ing.get('/nothing');
    const lines = ing.logs.filter((l) => l.msg === 'ingress request');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ edge: 'edghts_app', route: 'edghtsrt_hello', status: 201, bytes: 19, client_ip: '127.0.0.1', path: '/hello' });
    expect(typeof lines[0].duration_ms).toBe('number');
    expect(JSON.stringify(lines)).not.toContain('s3cret');
    expect(lines[1]).toMatchObject({ status: 404, code: 'ERR_SERVICE_741' });
  });
});

describe('over HTTP/2 (TLS, ALPN h2), as the real listener speaks it', () => {
  let h2: HttpIngress;
  beforeAll(async () => {
    h2 = await startHttpIngress(tableOf({
      edges: [{ id: 'edghts_app', hostports: ['app.example.com:443'], routes: [
        route('edghtsrt_hello', '/hello', { backend: { enabled: true, backend_id: 'bkdhr_big' }, compression: { enabled: true }, response_headers: { enabled: true, add: { 'x-h2': 'yes' }, remove: [] } }),
      ] }],
      backends: [{ id: 'bkdhr_big', kind: 'HTTPResponseBackend', status_code: 200, body: 'x'.repeat(5000), headers: { 'content-type': 'text/plain' } }],
    }), {}, { tls: true });
  });
  afterAll(() => h2?.close());

  async function h2get(path: string, headers: Record<string, string> = {}) {
    const http2 = await import('node:http2');
    const session = http2.connect(h2.url, { rejectUnauthorized: false, servername: 'app.example.com' });
    try {
      const stream = session.request({ ':path': path, ':authority': 'app.example.com', ...headers });
      const chunks: Buffer[] = [];
      const head = await new Promise<Record<string, any>>((resolve, reject) => { stream.once('response', resolve); stream.once('error', reject); });
      for await (const c of stream) chunks.push(c as Buffer);
      return { head, body: Buffer.concat(chunks) };
    } finally {
      session.close();
    }
  }

  it('answers, edits and compresses a response over an HTTP/2 stream', async () => {
    const { gunzipSync } = await import('node:zlib');
    const r = await h2get('/hello', { 'accept-encoding': 'gzip' });
    expect(r.head[':status']).toBe(200);
    expect(r.head['x-h2']).toBe('yes');
    expect(r.head['content-encoding']).toBe('gzip');
    expect(gunzipSync(r.body).toString()).toBe('x'.repeat(5000));
  });

  it('a 404 page over HTTP/2 carries its code', async () => {
    const r = await h2get('/nope');
    expect(r.head[':status']).toBe(404);
    expect(r.head['edgeform-error-code']).toBe('ERR_SERVICE_741');
  });
});

describe('a fault while the handler chooses the route', () => {
  // An agents' endpoint lookup that throws stands for any fault before the exchange exists
  // (the compiled edge, the route, an endpoint's modules): without the handler's guard the
  // request was never answered (a throw out of the request listener) and an upgrade's was a
  // rejected promise nobody awaited.
  let faulty: HttpIngress;
  beforeAll(async () => {
    faulty = await startHttpIngress(tableOf({ edges: [] }), {
      gateway: { labeledTunnels: () => new Map(), endpointTunnel: () => { throw new Error('endpoint map broken'); }, endpointRoute: () => undefined, hasEndpoints: true } as never,
    });
  });
  afterAll(() => faulty?.close());

  it('a request is answered 500 with the error page and its code, and the fault is logged', async () => {
    const r = await faulty.get('/x', { host: 'nobody.example.com' });
    expect(r.status).toBe(500);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_754');
    expect(r.text).toContain('ERR_SERVICE_754');
    expect(r.text).not.toContain('endpoint map broken');
    expect(faulty.logs.some((l) => l.level === 'error' && /endpoint map broken/.test(l.msg))).toBe(true);
    expect(faulty.logs.some((l) => l.msg === 'ingress request' && l.status === 500 && l.code === 'ERR_SERVICE_754')).toBe(true);
  });

  it('an upgrade is answered 500 too, and the connection closed', async () => {
    const { rawHttp } = await import('../helpers/raw-http.js');
    const r = await rawHttp(faulty.url, 'GET /ws HTTP/1.1\r\nHost: nobody.example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n');
    expect(r.status).toBe(500);
    expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_754');
  });
});
