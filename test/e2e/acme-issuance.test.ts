// Real certificates through ACME, end to end: `edgeform serve --acme-directory` against
// Pebble over loopback, Pebble validating through the ingress's own listeners (its tlsPort
// and httpPort are the loopback ports standing for public ports 443 and 80). One server with
// a 443 listener gets its certificate by TLS-ALPN-01, one with only port 80 and an edge on
// 8443 by HTTP-01; each served chain is verified against Pebble's root from its management
// endpoint, and the certificate is a /tls_certificates resource with issued_at set.
import { X509Certificate } from 'node:crypto';
import http from 'node:http';
import { stringify } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { startPebble, stopPebbles } from '../helpers/pebble.js';
import { freePort } from '../helpers/ports.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

afterAll(() => {
  killServers();
  stopPebbles();
  removeTempDirs();
});

const manifest = (name: string, hostport: string, body: string) =>
  [
    { kind: 'HTTPResponseBackend', name, body, status_code: 200 },
    { kind: 'HTTPSEdge', name, hostports: [hostport], routes: [{ match_type: 'path_prefix', match: '/', backend: { backend_id: `HTTPResponseBackend/${name}` } }] },
  ].map((d) => stringify(d, { lineWidth: 0 })).join('---\n');

/** The server-issued certificate for `name` in /tls_certificates, once there. */
async function issuedFor(ing: Ingress, name: string, timeoutMs = 120_000): Promise<any> {
  let found: any;
  await until(async () => {
    const r = await ing.api('GET', '/tls_certificates');
    found = r.body.tls_certificates.find((c: any) => c.issued_at && c.subject_alternative_names.dns_names.includes(name));
    return !!found;
  }, timeoutMs, () => `no certificate for ${name} was issued:\n${ing.serving.stdout()}`);
  return found;
}

describe('ACME against Pebble', () => {
  it('an HTTPS edge on 443 gets its certificate by TLS-ALPN-01; the served chain verifies against Pebble\'s root', async () => {
    const [p443, unused80] = [await freePort(), await freePort()];
    const pebble = await startPebble({ httpPort: unused80, tlsPort: p443 });
    const ing = await startIngress([443], {}, ['--acme-directory', pebble.directory, '--acme-ca-file', pebble.caFile, '--acme-email', 'ops@example.com'], { 443: p443 });
    await ing.apply(manifest('alpn', 'alpn.acme.test:443', 'hello over a real certificate'));
    const cert = await issuedFor(ing, 'alpn.acme.test');
    expect(cert.issuer_common_name).toMatch(/^Pebble Intermediate CA/);
    expect(cert.private_key_pem).toBeUndefined();
    const root = await pebble.root();
    const r = await edgeRequest({ port: p443, host: 'alpn.acme.test', ca: root });
    expect(r.status).toBe(200);
    expect(r.text).toBe('hello over a real certificate');
    expect(new X509Certificate(r.peer!.raw).serialNumber.toLowerCase().replace(/^0+/, '')).toBe(cert.serial_number);
    const lines = ing.lines();
    expect(lines.some((l) => /acme: ordering a certificate for alpn\.acme\.test \(tls-alpn-01\)/.test(String(l.msg)))).toBe(true);
    const metrics = await (await fetch(`${ing.url}/metrics`)).text();
    expect(metrics).toMatch(/edgeform_acme_orders_total\{result="issued"\} 1/);
    expect(metrics).toMatch(new RegExp(`edgeform_certificate_expiry_timestamp_seconds\\{name="alpn.acme.test"\\} ${Math.floor(Date.parse(cert.not_after) / 1000)}`));
    // The other challenge kind was never asked for: nothing answered on a port 80 listener.
    expect(pebble.log()).not.toMatch(/http-01/i);
  }, 240_000);

  it('with only a port 80 listener, a name served on 8443 gets its certificate by HTTP-01 (Pebble sends Host: name:80)', async () => {
    const [p80, unusedTls] = [await freePort(), await freePort()];
    const pebble = await startPebble({ httpPort: p80, tlsPort: unusedTls });
    const ing = await startIngress([80, 8443], {}, ['--acme-directory', pebble.directory, '--acme-ca-file', pebble.caFile], { 80: p80 });
    await ing.apply(manifest('web', 'web.acme.test:8443', 'hello on 8443'));
    const cert = await issuedFor(ing, 'web.acme.test');
    expect(cert.issuer_common_name).toMatch(/^Pebble Intermediate CA/);
    const r = await edgeRequest({ port: ing.port(8443), host: 'web.acme.test', ca: await pebble.root() });
    expect(r.status).toBe(200);
    expect(r.text).toBe('hello on 8443');
    expect(ing.lines().some((l) => /acme: ordering a certificate for web\.acme\.test \(http-01\)/.test(String(l.msg)))).toBe(true);
    // Port 80 speaks plain HTTP only for challenges: anything else is a 404, and a token never issued too.
    const plain = await new Promise<number>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: p80, path: '/.well-known/acme-challenge/never-issued', headers: { host: 'web.acme.test' } }, (res) => { res.resume(); resolve(res.statusCode!); }).on('error', reject);
    });
    expect(plain).toBe(404);
  }, 240_000);

  it('a wildcard keeps the local CA, with a log line naming it', async () => {
    const [p443, unused80] = [await freePort(), await freePort()];
    const pebble = await startPebble({ httpPort: unused80, tlsPort: p443 });
    const ing = await startIngress([443], {}, ['--acme-directory', pebble.directory, '--acme-ca-file', pebble.caFile], { 443: p443 });
    await ing.apply(manifest('star', '*.star.acme.test:443', 'wildcard'));
    await until(() => ing.lines().some((l) => l.msg === 'acme: *.star.acme.test keeps a local-CA certificate: a wildcard needs the DNS-01 challenge, which this server does not answer'), 20_000, () => ing.serving.stdout());
    expect((await ing.api('GET', '/tls_certificates')).body.tls_certificates).toEqual([]);
  }, 240_000);
});
