// Issue 16, the HTTPS side without agents: `edgeform serve --ingress 443=127.0.0.1:<port>`
// as a real process, a manifest applied with `edgeform apply -f`, and requests over real
// sockets as curl sends them. Certificates chosen by SNI (uploaded, wildcard, most specific,
// newest; else issued by the local CA at <data-dir>/ingress-ca.pem), routing by host, port
// and path, the http_response and weighted backends (2,000 requests against a binomial
// tolerance), mutual TLS, min_version, HTTP/2, a change applied taking effect on the next
// request, OAuth/OIDC/SAML answering 501, and bad input that must never leak an edge.
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { IDP_METADATA } from '../helpers/edge-fixtures.js';
import { many, startIngress, type Ingress } from '../helpers/ingress.js';
import { curl, edgeErrorCode, edgeRequest, exchange, h2Get, tlsConnect, type EdgeRequest } from '../helpers/ingress-client.js';
import { freePort } from '../helpers/ports.js';
import { Pki, type Issued } from '../helpers/pki.js';
import { killServers, serve, serveToExit } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

let ing: Ingress;
let pki: Pki;
let port: number;
let otherPort: number;
let localCa: string;
const certs: Record<string, Issued> = {};
/** Clients that start and then stall, opened once the server is up and checked at the end. */
const slow: { what: string; data: string; closed: boolean }[] = [];

/** Every body an edge here can answer with: none may appear where no edge should answer. */
const CONTENT = ['hello from app', 'api prefix', 'api v2 prefix', 'users exact', 'short and stout', 'www content', 'local content', 'mtls content', 'modern content', 'multi default', 'alt host', 'alt special', 'version one', 'version two', 'BODY-A', 'BODY-B', 'BODY-NEVER'];
const expectNoEdgeContent = (text: string) => { for (const c of CONTENT) expect(text).not.toContain(c); };

const backend = (name: string, body: string, extra: Record<string, unknown> = {}) => ({ kind: 'HTTPResponseBackend', name, body, status_code: 200, ...extra });
/** A route to `to`: an HTTPResponseBackend's name, or a `Kind/name` reference. */
const route = (match: string, to: string, extra: Record<string, unknown> = {}, match_type = 'path_prefix') =>
  ({ match_type, match, backend: { backend_id: to.includes('/') ? to : `HTTPResponseBackend/${to}` }, ...extra });

function manifest(changeBody: string): string {
  const docs = [
    { kind: 'IPPolicy', name: 'self-deny', rules: [{ cidr: '127.0.0.1/32', action: 'deny' }] },
    { kind: 'CertificateAuthority', name: 'clients', ca_pem: certs.clientCa.cert },
    backend('hello', 'hello from app', { headers: { 'x-app': 'hello' } }),
    backend('api', 'api prefix'),
    backend('api-v2', 'api v2 prefix'),
    backend('users', 'users exact'),
    backend('teapot', 'short and stout', { status_code: 418, headers: { 'Content-Type': 'text/plain', 'X-Kettle': 'stout' } }),
    backend('a', 'BODY-A'),
    backend('b', 'BODY-B'),
    backend('never', 'BODY-NEVER'),
    { kind: 'WeightedBackend', name: 'split', backends: { 'HTTPResponseBackend/a': 1, 'HTTPResponseBackend/b': 3, 'HTTPResponseBackend/never': 0 } },
    backend('www', 'www content'),
    backend('local', 'local content'),
    backend('mtls', 'mtls content'),
    backend('modern', 'modern content'),
    backend('multi', 'multi default'),
    backend('alt-host', 'alt host'),
    backend('alt-special', 'alt special'),
    backend('change', changeBody),
    {
      kind: 'HTTPSEdge',
      name: 'app',
      hostports: ['app.example.com:443'],
      routes: [
        route('/', 'hello'),
        route('/api', 'api'),
        route('/api/v2', 'api-v2'),
        route('/api/users', 'users', {}, 'exact_path'),
        route('/teapot', 'teapot', {}, 'exact_path'),
        route('/split', 'WeightedBackend/split'),
        route('/ip-off', 'hello', { ip_restriction: { enabled: false, ip_policy_ids: ['IPPolicy/self-deny'] } }),
        route('/ip-on', 'hello', { ip_restriction: { ip_policy_ids: ['IPPolicy/self-deny'] } }),
        route('/oauth', 'hello', { oauth: { provider: { github: {} } } }),
        route('/oidc', 'hello', { oidc: { issuer: 'https://login.example.com', client_id: 'staff', client_secret: 'oidc-secret-value' } }),
        route('/saml', 'hello', { saml: { idp_metadata: IDP_METADATA } }),
        route('/change', 'change', {}, 'exact_path'),
      ],
    },
    { kind: 'HTTPSEdge', name: 'www', hostports: ['www.example.com:443', 'other.example.com:8443'], routes: [route('/', 'www')] },
    { kind: 'HTTPSEdge', name: 'local', hostports: ['local.test:443'], routes: [route('/', 'local')] },
    { kind: 'HTTPSEdge', name: 'newest', hostports: ['new.example.com:443'], routes: [route('/', 'hello')] },
    { kind: 'HTTPSEdge', name: 'mtls', hostports: ['mtls.example.com:443'], mutual_tls: { certificate_authority_ids: ['CertificateAuthority/clients'] }, routes: [route('/', 'mtls')] },
    { kind: 'HTTPSEdge', name: 'modern', hostports: ['modern.example.com:443'], tls_termination: { min_version: '1.3' }, routes: [route('/only', 'modern', {}, 'exact_path')] },
    {
      kind: 'HTTPSEdge',
      name: 'multi',
      hostports: ['multi.example.com:443', 'alt.example.com:443'],
      routes: [route('/', 'multi'), route('alt.example.com', 'alt-host'), route('alt.example.com/special', 'alt-special')],
    },
  ];
  return docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
}

/** A request to the 443 listener, trusting both the test PKI and the local CA. */
const get = (host: string, p = '/', o: Partial<EdgeRequest> = {}) => edgeRequest({ port, host, path: p, ca: [certs.ca.cert, localCa], ...o });
const sha256 = (pem: string) => new X509Certificate(pem).fingerprint256;

beforeAll(async () => {
  pki = new Pki();
  certs.ca = pki.issue('p256', { subject: [['CN', 'edgeform test server CA']], ca: true, keyUsage: ['critical', 'keyCertSign', 'cRLSign'] });
  const leaf = (cn: string, sans: string[]) => pki.issue('p256', { subject: [['CN', cn]], sans, ca: false, keyUsage: ['digitalSignature'], extendedKeyUsage: ['serverAuth'] }, certs.ca);
  certs.wildcard = leaf('*.example.com', ['DNS:*.example.com']);
  certs.exact = leaf('app.example.com', ['DNS:app.example.com']);
  certs.older = leaf('new.example.com', ['DNS:new.example.com']);
  const olderAt = Date.now();
  certs.clientCa = pki.issue('p256', { subject: [['CN', 'edgeform test client CA']], ca: true, keyUsage: ['critical', 'keyCertSign'] });
  certs.client = pki.issue('p256', { subject: [['CN', 'client one']], ca: false, extendedKeyUsage: ['clientAuth'] }, certs.clientCa);
  certs.rogueCa = pki.issue('p256', { subject: [['CN', 'rogue CA']], ca: true, keyUsage: ['critical', 'keyCertSign'] });
  certs.rogue = pki.issue('p256', { subject: [['CN', 'rogue client']], ca: false, extendedKeyUsage: ['clientAuth'] }, certs.rogueCa);
  ing = await startIngress([443, 8443]);
  port = ing.port(443);
  otherPort = ing.port(8443);
  // The newer certificate for new.example.com is issued (and uploaded) at least a second later.
  await new Promise((r) => setTimeout(r, Math.max(0, 1100 - (Date.now() - olderAt))));
  certs.newer = leaf('new.example.com', ['DNS:new.example.com']);
  for (const name of ['wildcard', 'exact', 'older', 'newer']) {
    const r = await ing.api('POST', '/tls_certificates', { certificate_pem: certs[name].cert + certs.ca.cert, private_key_pem: certs[name].key, description: name });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
  await ing.apply(manifest('version one'));
  localCa = await ing.ca();
  // A slowloris: half a request head, then nothing; and a connection that never says hello.
  const watch = (what: string, s: net.Socket) => {
    const entry = { what, data: '', closed: false };
    slow.push(entry);
    s.on('data', (c) => { entry.data += c; });
    s.on('error', () => {});
    s.on('close', () => { entry.closed = true; });
  };
  const loris = await tlsConnect(port, { servername: 'app.example.com', ca: certs.ca.cert });
  loris.write('GET / HTTP/1.1\r\nHost: app.example.com\r\nX-Slow: 1');
  watch('half a request head', loris);
  const mute = net.connect(port, '127.0.0.1');
  watch('no ClientHello', mute);
});

afterAll(() => {
  killServers();
  pki?.close();
  removeTempDirs();
});

describe('certificates by SNI', () => {
  it('serves the uploaded certificate for the exact name over the wildcard that also covers it', async () => {
    const r = await get('app.example.com');
    expect(r.status).toBe(200);
    expect(r.peer?.fingerprint256).toBe(sha256(certs.exact.cert));
  });

  it('serves the wildcard certificate for a name only the wildcard covers', async () => {
    const r = await get('www.example.com');
    expect(r.text).toBe('www content');
    expect(r.peer?.fingerprint256).toBe(sha256(certs.wildcard.cert));
  });

  it('of two certificates for the same name, serves the newer', async () => {
    const r = await get('new.example.com');
    expect(r.status).toBe(200);
    expect(r.peer?.fingerprint256).toBe(sha256(certs.newer.cert));
  });

  it('issues a certificate from the local CA for a name no upload covers, which <data-dir>/ingress-ca.pem verifies', async () => {
    const r = await edgeRequest({ port, host: 'local.test', ca: localCa });
    expect(r.status).toBe(200);
    expect(r.text).toBe('local content');
    const leaf = new X509Certificate(r.peer!.raw);
    expect(leaf.subjectAltName).toContain('DNS:local.test');
    expect(leaf.verify(new X509Certificate(localCa).publicKey)).toBe(true);
    // Not trusted by a client that trusts only the test PKI.
    await expect(edgeRequest({ port, host: 'local.test', ca: certs.ca.cert })).rejects.toThrow();
  });

  it('keeps the local CA key in the database, not the data folder (issue 32: one CA for every instance)', () => {
    const keys = fs.readdirSync(ing.dataDir).filter((f) => /^ingress-ca/.test(f) && f !== 'ingress-ca.pem');
    expect(keys, `files: ${fs.readdirSync(ing.dataDir).join(', ')}`).toEqual([]);
    expect(fs.readFileSync(path.join(ing.dataDir, 'ingress-ca.pem'), 'utf8')).not.toMatch(/PRIVATE KEY/);
  });

  it('answers the README command: curl --cacert <data-dir>/ingress-ca.pem --connect-to', async () => {
    const r = await curl(['--cacert', path.join(ing.dataDir, 'ingress-ca.pem'), '--connect-to', `local.test:443:127.0.0.1:${port}`, 'https://local.test/any/path']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('local content');
  });

  it('speaks HTTP/2 by ALPN, to node:http2 and to curl --http2', async () => {
    const r = await h2Get(port, 'local.test', '/x', localCa);
    expect(r.alpn).toBe('h2');
    expect(r).toMatchObject({ status: 200, body: 'local content' });
    const c = await curl(['--http2', '-o', '/dev/null', '-w', '%{http_version} %{http_code}', '--cacert', path.join(ing.dataDir, 'ingress-ca.pem'), '--connect-to', `local.test:443:127.0.0.1:${port}`, 'https://local.test/']);
    expect(c.stdout).toBe('2 200');
    const h1 = await curl(['--http1.1', '-o', '/dev/null', '-w', '%{http_version} %{http_code}', '--cacert', path.join(ing.dataDir, 'ingress-ca.pem'), '--connect-to', `local.test:443:127.0.0.1:${port}`, 'https://local.test/']);
    expect(h1.stdout).toBe('1.1 200');
  });
});

describe('mutual TLS and min_version', () => {
  it('accepts a client certificate from one of the edge\'s authorities', async () => {
    const r = await get('mtls.example.com', '/', { cert: certs.client.cert, key: certs.client.key });
    expect(r.status).toBe(200);
    expect(r.text).toBe('mtls content');
  });

  it('refuses the handshake without a client certificate, or with one from another authority', async () => {
    await expect(get('mtls.example.com')).rejects.toThrow();
    await expect(get('mtls.example.com', '/', { cert: certs.rogue.cert, key: certs.rogue.key })).rejects.toThrow();
    // The refusal is the edge's own: the edge next door on the same port takes no certificate.
    expect((await get('www.example.com')).text).toBe('www content');
  });

  it('refuses a TLS 1.2 client on an edge with min_version 1.3, and serves a TLS 1.3 one', async () => {
    await expect(get('modern.example.com', '/only', { maxVersion: 'TLSv1.2' })).rejects.toThrow();
    const ok = await get('modern.example.com', '/only', { minVersion: 'TLSv1.3' });
    expect(ok.text).toBe('modern content');
    // The default (1.2) still lets a TLS 1.2 client reach another edge.
    expect((await get('www.example.com', '/', { maxVersion: 'TLSv1.2' })).text).toBe('www content');
  });
});

describe('routing', () => {
  it.each([
    ['/', 'hello from app', 'the / prefix'],
    ['/anything/else', 'hello from app', 'the / prefix'],
    ['/api', 'api prefix', 'prefix /api'],
    ['/api/x', 'api prefix', 'prefix /api, longer than /'],
    ['/api/v2', 'api v2 prefix', 'the longest prefix, /api/v2'],
    ['/api/v2/things?x=1', 'api v2 prefix', 'the longest prefix; the query is not part of the path'],
    ['/api/users', 'users exact', 'exact_path equal'],
    ['/api/users?page=2', 'users exact', 'exact_path equal; the query is not part of the path'],
    ['/api/users/7', 'api prefix', 'exact_path does not match a longer path: the longest prefix does'],
    ['/teapot/not', 'hello from app', 'exact_path /teapot does not match /teapot/not'],
  ])('%s answers %s (%s)', async (p, body) => {
    const r = await get('app.example.com', p);
    expect(r.status).toBe(200);
    expect(r.text).toBe(body);
  });

  it('selects by a route match that names a host, or host plus path', async () => {
    expect((await get('alt.example.com', '/special/x')).text).toBe('alt special');
    expect((await get('alt.example.com', '/other')).text).toBe('alt host');
    expect((await get('multi.example.com', '/special/x')).text).toBe('multi default');
  });

  it('answers an unknown host with 404, a code and a short page, never another edge\'s content', async () => {
    const r = await get('nobody.example.org', '/', { insecure: true });
    edgeErrorCode(r, 404);
    expect(r.body.length).toBeLessThan(2048);
    expectNoEdgeContent(r.text);
    // A Host no edge serves, behind the SNI of one that exists: still nothing of that edge.
    const fronted = await get('nobody.example.org', '/', { servername: 'app.example.com' });
    expect([404, 421]).toContain(fronted.status);
    expectNoEdgeContent(fronted.text);
  });

  it('selects the edge by port too: app.example.com on the 8443 listener, where another edge is served, is unknown', async () => {
    expect((await edgeRequest({ port: otherPort, host: 'other.example.com', ca: certs.ca.cert })).text).toBe('www content');
    const r = await edgeRequest({ port: otherPort, host: 'app.example.com', insecure: true });
    edgeErrorCode(r, 404);
    expectNoEdgeContent(r.text);
  });

  it('answers a path no route matches with 404 and a code', async () => {
    const r = await get('modern.example.com', '/elsewhere');
    edgeErrorCode(r, 404);
    expectNoEdgeContent(r.text);
  });
});

describe('backends', () => {
  it('http_response answers its status, headers and body', async () => {
    const r = await get('app.example.com', '/teapot');
    expect(r.status).toBe(418);
    expect(r.headers['x-kettle']).toBe('stout');
    expect(r.headers['content-type']).toBe('text/plain');
    expect(r.text).toBe('short and stout');
    expect((await get('app.example.com', '/')).headers['x-app']).toBe('hello');
  });

  it('weighted splits 1:3 per request within five binomial standard deviations over 2,000 requests, and never picks weight 0', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 8, ca: [certs.ca.cert, localCa] });
    try {
      const N = 2000;
      const replies = await many(N, 8, () => get('app.example.com', '/split', { agent }));
      const count = (b: string) => replies.filter((r) => r.text === b).length;
      expect(replies.every((r) => r.status === 200)).toBe(true);
      expect(count('BODY-NEVER')).toBe(0);
      expect(count('BODY-A') + count('BODY-B')).toBe(N);
      const p = 1 / 4;
      const sigma = Math.sqrt(N * p * (1 - p)); // 19.4
      expect(Math.abs(count('BODY-A') - N * p)).toBeLessThanOrEqual(5 * sigma);
    } finally {
      agent.destroy();
    }
  });
});

describe('modules at the edge', () => {
  it('skips a module with enabled: false, and applies the same module enabled', async () => {
    expect((await get('app.example.com', '/ip-off')).text).toBe('hello from app');
    const on = await get('app.example.com', '/ip-on');
    edgeErrorCode(on, 403);
    expectNoEdgeContent(on.text);
  });

  // saml whose idp_metadata has no signing certificate: 502 (ERR_SERVICE_817).
  it('/saml answers 502 with a code, never the unprotected backend', async () => {
    const r = await get('app.example.com', '/saml');
    expect(edgeErrorCode(r, 502)).toBe('ERR_SERVICE_817');
    expectNoEdgeContent(r.text);
  });

  // oauth without a client_id on a server with no managed app: 501.
  it.each(['/oauth'])('%s answers 501 with a code, never the unprotected backend', async (p) => {
    const r = await get('app.example.com', p);
    edgeErrorCode(r, 501);
    expectNoEdgeContent(r.text);
  });

  it('/oidc with an issuer that cannot be reached answers 502 with a code, never the unprotected backend', async () => {
    const r = await get('app.example.com', '/oidc');
    edgeErrorCode(r, 502);
    expectNoEdgeContent(r.text);
  });
});

describe('changes', () => {
  it('a change applied with edgeform apply is live on the next request', async () => {
    expect((await get('app.example.com', '/change')).text).toBe('version one');
    await ing.apply(manifest('version two'));
    expect((await get('app.example.com', '/change')).text).toBe('version two');
  });

  it('refuses with 409 a hostport of another kind on a port HTTPS edges hold', async () => {
    const r = await ing.api('POST', '/edges/tcp', { hostports: ['db.example.com:443'] });
    expect(r.status, JSON.stringify(r.body)).toBe(409);
    expect(r.body.error_code).toMatch(/^ERR_SERVICE_\d+$/);
  });
});

describe('bad input', () => {
  it('a handshake with no SNI is answered or closed, never with an edge\'s content', async () => {
    let text = '';
    try {
      const s = await tlsConnect(port, { rejectUnauthorized: false });
      text = (await exchange(s, 'GET / HTTP/1.1\r\nHost: nobody.example.org\r\nConnection: close\r\n\r\n')).data.toString();
      s.destroy();
    } catch {
      // Refusing the handshake is an answer too.
    }
    expectNoEdgeContent(text);
    if (text) expect(text).toMatch(/^HTTP\/1\.1 (400|404|421) /);
    expect((await get('app.example.com', '/')).text).toBe('hello from app');
  });

  it('malformed HTTP gets 400 or a closed connection', async () => {
    const s = await tlsConnect(port, { servername: 'app.example.com', ca: certs.ca.cert });
    const { data } = await exchange(s, 'THIS IS NOT HTTP\r\n\0\0\r\n\r\n');
    s.destroy();
    const text = data.toString();
    expectNoEdgeContent(text);
    if (text) expect(text).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('oversized headers get 431 (or 400, or a close), never the backend', async () => {
    const big = { 'x-big': 'a'.repeat(100_000) };
    let status = 0;
    let text = '';
    try {
      const r = await get('app.example.com', '/', { headers: big });
      status = r.status;
      text = r.text;
    } catch {
      status = -1; // closed
    }
    expect([431, 400, -1]).toContain(status);
    expectNoEdgeContent(text);
    const manyHeaders = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`x-h${i}`, 'v']));
    let status2 = 0;
    try {
      status2 = (await get('app.example.com', '/', { headers: manyHeaders })).status;
    } catch {
      status2 = -1;
    }
    expect([431, 400, -1]).toContain(status2);
  });

  it('a flood of idle connections and half-done handshakes leaves the server answering once they go', async () => {
    const sockets: net.Socket[] = [];
    await Promise.all(Array.from({ length: 300 }, () => new Promise<void>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      sockets.push(s);
      s.on('error', () => resolve());
      s.on('connect', () => {
        // Half of them start a ClientHello and stop.
        if (sockets.length % 2) s.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]));
        resolve();
      });
      s.setTimeout(5000, () => resolve());
    })));
    for (const s of sockets) s.destroy();
    await new Promise((r) => setTimeout(r, 100));
    expect((await get('app.example.com', '/')).text).toBe('hello from app');
    expect(ing.serving.child.exitCode).toBe(null);
  });
});

describe('operations', () => {
  it('writes one JSON access-log line per request: edge, route, status, duration, bytes, client IP; never a secret', async () => {
    const edges = (await ing.api('GET', '/edges/https')).body.https_edges as any[];
    const app = edges.find((e) => e.hostports.includes('app.example.com:443'));
    const teapot = app.routes.find((r: any) => r.match === '/teapot');
    await get('app.example.com', '/teapot?marker=access-log');
    const line = ing.lines().find((l) => JSON.stringify(l).includes(teapot.id) && Object.values(l).includes(418));
    expect(line, ing.serving.stdout().slice(-3000)).toBeDefined();
    const keys = Object.keys(line!).join(' ');
    for (const k of [/edge/, /route/, /status/, /duration/, /bytes/, /ip/i]) expect(keys).toMatch(k);
    expect(JSON.stringify(line)).toContain(app.id);
    expect(JSON.stringify(line)).toContain('127.0.0.1');
    expect(ing.serving.stdout()).not.toContain('oidc-secret-value');
    expect(ing.serving.stdout()).not.toContain('short and stout');
  });

  it('exposes Prometheus metrics at /metrics for the API and the ingress', async () => {
    const r = await fetch(`${ing.url}/metrics`, { headers: { authorization: `Bearer ${ing.token}`, 'service-version': '2' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await r.text();
    expect(text).toMatch(/^# (HELP|TYPE) /m);
    expect(text).toMatch(/ingress/);
    expect(text).toMatch(/http|api/);
    // The 2,000 requests of the weighted split are counted against the app edge, with their status.
    const app = ((await ing.api('GET', '/edges/https')).body.https_edges as any[]).find((e) => e.hostports.includes('app.example.com:443'));
    const counted = text.split('\n').filter((l) => !l.startsWith('#') && l.includes(`"${app.id}"`) && l.includes('"200"')).map((l) => Number(l.split(' ').at(-1)));
    expect(Math.max(0, ...counted), text.slice(0, 3000)).toBeGreaterThanOrEqual(2000);
  });
});

describe('listener settings', () => {
  it('EDGEFORM_INGRESS takes the same values comma-separated, one listener each', async () => {
    const [a, b] = [await freePort(), await freePort()];
    const s = await serve(['--data-dir', tempDir()], { EDGEFORM_INGRESS: `443=127.0.0.1:${a},20000=127.0.0.1:${b}`, EDGEFORM_BOOTSTRAP_TOKEN: ing.token });
    for (const p of [a, b]) {
      const open = await new Promise<boolean>((resolve) => {
        const c = net.connect(p, '127.0.0.1');
        c.once('connect', () => { c.destroy(); resolve(true); });
        c.once('error', () => resolve(false));
      });
      expect(open, `port ${p}`).toBe(true);
    }
    await s.waitFor(new RegExp(`ingress for public port 20000 listening on 127\\.0\\.0\\.1:${b}`));
    // An answer from the server: its start-up code (which installs the SIGTERM handler after
    // printing the listening line) has run to its end.
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
    s.child.kill('SIGTERM');
    const code = await s.exited;
    expect(code, `stdout ends: ${s.stdout().slice(-600)}\nstderr: ${s.stderr().slice(-1500)}`).toBe(0);
  });

  it.each([['443=127.0.0.1:notaport'], ['70000=127.0.0.1:8443']])(
    'refuses --ingress %s with exit 2 and a line naming the setting',
    async (value) => {
      const r = await serveToExit(['--port', '0', '--data-dir', tempDir(), '--ingress', value]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/--ingress|EDGEFORM_INGRESS/);
    },
  );
});

describe('slow clients', () => {
  it('are closed by the server (the header and ClientHello timeouts), never sent an edge\'s content', async () => {
    for (const c of slow) {
      await until(() => c.closed, 40_000, () => `the connection with ${c.what} is still open`);
      expectNoEdgeContent(c.data);
      if (c.data) expect(c.data).toMatch(/^HTTP\/1\.1 (400|408) /);
    }
    expect((await get('app.example.com', '/')).text).toBe('hello from app');
  });
});
