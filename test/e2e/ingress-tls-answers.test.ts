// What a TLS ingress listener answers when there is nothing to route yet (issue 29), over real
// loopback sockets: a listener with no edges completes the handshake with a local-CA
// certificate and answers the 404 page (it reset the handshake); a handshake without a server
// name gets a certificate for the address reached and the 404 page, never an edge's content
// (an edge's name takes its own handshake, mutual TLS included); plain HTTP sent to the TLS
// port gets 400 naming https:// (it got an empty reply), decided from the first byte.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curl, edgeAnswering, edgeRequest, exchange, h2Get, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { Pki } from '../helpers/pki.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let port: number;
let ca: string;
const pki = new Pki();

beforeAll(async () => {
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }, { publicPort: 8443, host: '127.0.0.1', port: 0 }] });
  port = ingressPort(s, 443);
  ca = localCa(s);
});

afterAll(async () => {
  await s?.close();
  pki.close();
});

const noEdge = (r: { status: number; headers: Record<string, unknown>; text: string }) => {
  expect(r.status, r.text).toBe(404);
  expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_740');
  expect(r.text).toContain('ERR_SERVICE_740');
};

describe('a listener with no edges yet', () => {
  it('completes the handshake with a local-CA certificate for the name and answers the 404 page (HTTP/1.1 and HTTP/2)', async () => {
    const r = await edgeRequest({ port, host: 'app.example.com', path: '/anything', ca });
    noEdge(r);
    expect(r.peer?.subjectaltname).toBe('DNS:app.example.com');
    const h2 = await h2Get(port, 'app.example.com', '/', ca);
    expect(h2.status).toBe(404);
    expect(h2.headers['edgeform-error-code']).toBe('ERR_SERVICE_740');
  });

  it('answers curl as the docs write it', async () => {
    const r = await curl(['-i', '--cacert', s.server.ingress!.caFile, '--connect-to', `app.example.com:443:127.0.0.1:${port}`, 'https://app.example.com/']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^HTTP\/2 404/);
    expect(r.stdout).toContain('ERR_SERVICE_740');
  });

  it('answers a handshake without a server name with a certificate for the address reached, then the 404 page', async () => {
    // No servername: Node (like curl for https://127.0.0.1/) sends no SNI for an IP address and checks the IP SAN.
    const r = await edgeRequest({ port, host: '127.0.0.1', servername: null, ca });
    noEdge(r);
    expect(r.peer?.subjectaltname).toBe('IP Address:127.0.0.1');
    // The Host's port must be the public port (ERR_SERVICE_860), so curl is pointed at 127.0.0.1:443.
    const c = await curl(['-i', '--cacert', s.server.ingress!.caFile, '--connect-to', `127.0.0.1:443:127.0.0.1:${port}`, 'https://127.0.0.1/']);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout).toContain('ERR_SERVICE_740');
  });
});

describe('plain HTTP sent to the TLS listener', () => {
  it('gets 400 ERR_SERVICE_705 naming the https:// URL, and the connection closed', async () => {
    const r = await exchange(net.connect(port, '127.0.0.1'), 'GET /path?q=1 HTTP/1.1\r\nHost: app.example.com\r\n\r\n', { boundMs: 10_000 });
    expect(r.text).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(r.text).toMatch(/\r\nedgeform-error-code: ERR_SERVICE_705\r\n/);
    expect(r.text).toContain('the plain HTTP request was sent to an HTTPS port');
    expect(r.text).toContain('https://app.example.com/path?q=1');
    expect(r.closed).toBe(true);
  });

  it('is told from the first byte: a request line still arriving is answered too', async () => {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    socket.write('G');
    const r = await exchange(socket, undefined, { boundMs: 10_000 });
    expect(r.text).toMatch(/^HTTP\/1\.1 400 [^]*ERR_SERVICE_705/);
  });

  it('names the public port when it is not 443, and answers curl http:// with the page', async () => {
    const r = await curl(['-i', '--connect-to', `app.example.com:8443:127.0.0.1:${ingressPort(s, 8443)}`, 'http://app.example.com:8443/x']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 400/);
    expect(r.stdout).toContain('https://app.example.com:8443/x');
  });

  it('a host that is not a plain name is not repeated back', async () => {
    const r = await exchange(net.connect(port, '127.0.0.1'), 'GET / HTTP/1.1\r\nHost: <script>\r\n\r\n', { boundMs: 10_000 });
    expect(r.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(r.text).not.toContain('<script>');
  });

  it('bytes that are neither TLS nor HTTP are still closed unanswered', async () => {
    const r = await exchange(net.connect(port, '127.0.0.1'), Buffer.from([0, 1, 2, 3, 4, 5, 6, 7]), { boundMs: 10_000 });
    expect(r).toMatchObject({ text: '', closed: true });
  });
});

describe('beside edges', () => {
  let mtlsCa: ReturnType<Pki['issue']>;
  beforeAll(async () => {
    await edgeAnswering(s, 'open.example.com', 'open content');
    mtlsCa = pki.issue('p256', { subject: [['CN', 'client root']], ca: true, keyUsage: ['keyCertSign'] });
    const caRes = await s.post('/certificate_authorities', { ca_pem: mtlsCa.cert });
    expect(caRes.status, JSON.stringify(caRes.body)).toBe(201);
    const b = await s.post('/backends/http_response', { body: 'secret content' });
    const e = await s.post('/edges/https', { hostports: ['mtls.example.com:443'], mutual_tls: { certificate_authority_ids: [caRes.body.id] } });
    expect(e.status, JSON.stringify(e.body)).toBe(201);
    await s.post(`/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: b.body.id } });
  });

  it('an edge still answers; an unknown name still gets the 404 page', async () => {
    expect((await edgeRequest({ port, host: 'open.example.com', ca })).text).toBe('open content');
    noEdge(await edgeRequest({ port, host: 'nobody.example.com', ca }));
  });

  it('a connection without a server name reaches no edge: 421 for an edge\'s host, mutual TLS included, never its content', async () => {
    for (const host of ['mtls.example.com', 'open.example.com']) {
      const r = await edgeRequest({ port, host, servername: null, insecure: true });
      expect(r.status, r.text).toBe(421);
      expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_701');
      expect(r.text).not.toMatch(/secret content|open content/);
    }
    noEdge(await edgeRequest({ port, host: 'nobody.example.com', servername: null, insecure: true }));
  });

  it('mutual TLS is still asked of the edge\'s name', async () => {
    await expect(tlsConnect(port, { servername: 'mtls.example.com', ca }).then(async (sock) => {
      const r = await exchange(sock, 'GET / HTTP/1.1\r\nHost: mtls.example.com\r\n\r\n', { boundMs: 5000 });
      if (r.text.includes('secret content')) throw new Error('the mutual TLS edge answered without a client certificate');
      throw new Error('closed');
    })).rejects.toThrow(/closed|socket|certificate|alert/i);
  });

  it('the metrics count each outcome', async () => {
    const r = await s.get('/metrics', { token: null, version: null });
    expect(r.text).toMatch(/edgeform_ingress_connections_total\{port="443",outcome="refused_plain_http"\} [1-9]/);
    expect(r.text).toMatch(/edgeform_ingress_connections_total\{port="443",outcome="https_no_sni"\} [1-9]/);
  });
});
