// The `--ingress` listeners on a real server over loopback sockets: TLS with the local CA or
// an uploaded certificate chosen by SNI, HTTP/1.1 and HTTP/2 by ALPN, min_version refused,
// a host other than the connection's name refused (421), no SNI reaching no edge, changes live on the
// next request, HTTPS and TLS edges sharing a port by name, the 409 for a TCP edge's port, and /metrics.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { edgeRequest, exchange, h2Get, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { Pki } from '../helpers/pki.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let port: number;
let ca: string;
let backendId: string;
const pki = new Pki();

beforeAll(async () => {
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }, { publicPort: 8443, host: '127.0.0.1', port: 0 }] });
  port = ingressPort(s, 443);
  ca = localCa(s);
  const b = await s.post('/backends/http_response', { body: 'hello from the edge', status_code: 200, headers: { 'x-from': 'edge' } });
  backendId = b.body.id;
  const e = await s.post('/edges/https', { hostports: ['app.example.com:443', 'strict.example.com:443'] });
  await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: backendId } });
  const strict = await s.post('/edges/https', { hostports: ['tls13.example.com:443'], tls_termination: { min_version: '1.3' } });
  await s.post(`/edges/https/${strict.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: backendId } });
});

afterAll(async () => {
  await s?.close();
  pki.close();
});

describe('the local certificate authority', () => {
  it('is kept in the database sealed under the secret key, its certificate written to ingress-ca.pem for clients (no key file)', async () => {
    expect(s.server.ingress!.caFile).toBe(path.join(s.dir, 'ingress-ca.pem'));
    expect(ca).toContain('BEGIN CERTIFICATE');
    expect(fs.existsSync(path.join(s.dir, 'ingress-ca-key.pem'))).toBe(false);
    const row = await s.server.db.prisma.setting.findUnique({ where: { key: 'sealed:ingress_ca' } });
    expect(row?.value).toBeTruthy();
    expect(row!.value).not.toContain('PRIVATE KEY');
    expect(row!.value).not.toContain('BEGIN CERTIFICATE');
  });

  it('is the CA an earlier version left in the data folder, copied into the database on the first start', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-legacy-ca-'));
    // The name an earlier version gave its CA (its leaves name it as their issuer).
    const old = pki.issue('p256', { subject: [['O', 'edgeform'], ['CN', 'edgeform local ingress CA']], ca: true, keyUsage: ['critical', 'keyCertSign', 'cRLSign'] });
    fs.writeFileSync(path.join(dir, 'ingress-ca.pem'), old.cert);
    fs.writeFileSync(path.join(dir, 'ingress-ca-key.pem'), old.key, { mode: 0o600 });
    const s2 = await startTestServer({ dir, ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] });
    try {
      expect(localCa(s2)).toBe(old.cert);
      expect(await s2.server.db.prisma.setting.findUnique({ where: { key: 'sealed:ingress_ca' } })).toBeTruthy();
      const e = await s2.post('/edges/https', { hostports: ['legacy.example.com:443'] });
      await s2.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: (await s2.post('/backends/http_response', { body: 'legacy', status_code: 200 })).body.id } });
      expect((await edgeRequest({ port: ingressPort(s2, 443), host: 'legacy.example.com', ca: old.cert })).text).toBe('legacy');
    } finally {
      await s2.close();
    }
  });

  it('issues the certificate an HTTPS edge answers with when no upload covers its name', async () => {
    const r = await edgeRequest({ port, host: 'app.example.com', path: '/api', ca });
    expect(r).toMatchObject({ status: 200, text: 'hello from the edge' });
    expect(r.headers['x-from']).toBe('edge');
    expect(r.peer?.subjectaltname).toBe('DNS:app.example.com');
  });
});

describe('TLS and HTTP versions', () => {
  it('speaks HTTP/2 when the client offers h2', async () => {
    const r = await h2Get(port, 'app.example.com', '/', ca);
    expect(r).toMatchObject({ status: 200, body: 'hello from the edge', alpn: 'h2' });
  });

  it('refuses a handshake below the edge\'s min_version and accepts one at it', async () => {
    await expect(edgeRequest({ port, host: 'tls13.example.com', ca, maxVersion: 'TLSv1.2' })).rejects.toThrow();
    expect((await edgeRequest({ port, host: 'tls13.example.com', ca })).status).toBe(200);
    // The default (1.2) still admits TLS 1.2 on the other edge.
    expect((await edgeRequest({ port, host: 'app.example.com', ca, maxVersion: 'TLSv1.2' })).status).toBe(200);
  });

  it('answers a handshake without a server name with no edge\'s content, and plain HTTP with 400 naming https (ingress-tls-answers has the rest)', async () => {
    const silent = await exchange(net.connect(port, '127.0.0.1'), undefined, { quietMs: 500 });
    expect(silent.text).toBe('');
    const noSni = await tlsConnect(port, { ca, rejectUnauthorized: false });
    const r = await exchange(noSni, 'GET / HTTP/1.1\r\nHost: app.example.com\r\nConnection: close\r\n\r\n');
    expect(r.text).toMatch(/^HTTP\/1\.1 421 /);
    expect(r.text).not.toContain('hello from the edge');
    const plain = await exchange(net.connect(port, '127.0.0.1'), 'GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n', { quietMs: 2000 });
    expect(plain.text).toMatch(/^HTTP\/1\.1 400 [^]*ERR_SERVICE_705/);
    expect(plain.closed).toBe(true);
  });

  it('answers 404 with a code for a name no edge serves, and 421 for a host other than the connection\'s name', async () => {
    const unknown = await edgeRequest({ port, host: 'nobody.example.com', ca });
    expect(unknown.status).toBe(404);
    expect(unknown.text).not.toContain('hello from the edge');
    const crossed = await edgeRequest({ port, host: 'tls13.example.com', servername: 'app.example.com', ca });
    expect(crossed.status).toBe(421);
    expect(crossed.headers['edgeform-error-code']).toBe('ERR_SERVICE_701');
  });
});

describe('changes', () => {
  it('take effect on the next request after the API answered', async () => {
    for (const body of ['first', 'second', 'third']) {
      expect((await s.patch(`/backends/http_response/${backendId}`, { body })).status).toBe(200);
      expect((await edgeRequest({ port, host: 'app.example.com', ca })).text).toBe(body);
    }
  });

  it('a new edge on a port is served at once; a TCP edge on that port is refused with 409', async () => {
    const e = await s.post('/edges/https', { hostports: ['new.example.com:8443'] });
    await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'exact_path', match: '/x', backend: { backend_id: backendId } });
    expect((await edgeRequest({ port: ingressPort(s, 8443), host: 'new.example.com', path: '/x', ca })).status).toBe(200);
    const tcp = await s.post('/edges/tcp', { hostports: ['1.tcp.example.com:8443'] });
    expect(tcp.status).toBe(409);
    expect(tcp.body).toMatchObject({ error_code: 'ERR_SERVICE_700', details: { field: 'hostports', conflicting_id: e.body.id } });
    const tls = await s.post('/edges/tls', { hostports: ['other.example.com:9000'] });
    expect(tls.status).toBe(201);
    // HTTPS and TLS edges share a port by name (issue 32): each name reaches its own edge.
    const moved = await s.patch(`/edges/tls/${tls.body.id}`, { hostports: ['other.example.com:8443'] });
    expect(moved.status).toBe(200);
    const tlsSocket = await tlsConnect(ingressPort(s, 8443), { servername: 'other.example.com', ca, ALPNProtocols: ['h2', 'http/1.1'] });
    // The TLS edge's terminator speaks no HTTP: no ALPN protocol chosen, where the HTTPS edge's would choose one.
    expect(tlsSocket.alpnProtocol).toBe(false);
    tlsSocket.destroy();
    const httpsSocket = await tlsConnect(ingressPort(s, 8443), { servername: 'new.example.com', ca, ALPNProtocols: ['h2', 'http/1.1'] });
    expect(httpsSocket.alpnProtocol).toBe('h2');
    httpsSocket.destroy();
    expect((await edgeRequest({ port: ingressPort(s, 8443), host: 'new.example.com', path: '/x', ca })).status).toBe(200);
    // Still one edge per hostport, whatever its kind.
    expect((await s.post('/edges/tls', { hostports: ['new.example.com:8443'] })).body.error_code).toBe('ERR_SERVICE_320');
    // Two TCP edges cannot share a port either (raw TCP names no host), nor a TCP edge and another kind.
    expect((await s.post('/edges/tcp', { hostports: ['1.tcp.example.com:20000'] })).status).toBe(201);
    expect((await s.post('/edges/tcp', { hostports: ['2.tcp.example.com:20000'] })).body.error_code).toBe('ERR_SERVICE_700');
    expect((await s.post('/edges/tls', { hostports: ['3.tcp.example.com:20000'] })).body.error_code).toBe('ERR_SERVICE_700');
  });
});

describe('/metrics', () => {
  it('serves Prometheus text for the API and the ingress without a token', async () => {
    const r = await s.get('/metrics', { token: null, version: null });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/plain');
    expect(r.text).toMatch(/edgeform_api_requests_total\{method="POST",route="\/backends\/http_response",status="201"\} \d+/);
    expect(r.text).toMatch(/edgeform_ingress_requests_total\{edge="edghts_[^"]+",status="200"\} \d+/);
    expect(r.text).toMatch(/edgeform_ingress_connections_total\{port="443",outcome="https_no_sni"\} [1-9]/);
    expect(r.text).not.toContain('app.example.com');
  });
});

// Last: the wildcard uploaded here covers the names the tests above reach with the local CA.
describe('uploaded certificates', () => {
  it('chooses the uploaded certificate whose SANs match, an exact name before a wildcard', async () => {
    const root = pki.issue('p256', { subject: [['CN', 'upload root']], ca: true, keyUsage: ['keyCertSign'] });
    const wild = pki.issue('p256', { subject: [['CN', 'wild']], sans: ['DNS:*.example.com'] }, root);
    const exact = pki.issue('p256', { subject: [['CN', 'exact']], sans: ['DNS:strict.example.com'] }, root);
    for (const c of [wild, exact]) {
      const r = await s.post('/tls_certificates', { certificate_pem: c.cert, private_key_pem: c.key });
      expect(r.status).toBe(201);
    }
    const viaWild = await edgeRequest({ port, host: 'app.example.com', ca: root.cert });
    expect(viaWild.peer?.subject.CN).toBe('wild');
    const viaExact = await edgeRequest({ port, host: 'strict.example.com', ca: root.cert });
    expect(viaExact.peer?.subject.CN).toBe('exact');
    // A wildcard covers one label only: a deeper name falls back to the local CA.
    const deeper = await edgeRequest({ port, host: 'a.b.example.com', ca });
    expect(deeper.peer?.issuer.CN).toBe('edgeform local ingress CA');
  });
});
