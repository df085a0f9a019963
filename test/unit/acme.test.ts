// The pure parts of the ACME work: the settings checked at start, the ALPN list read from a
// real ClientHello, which names want a certificate (and which keep the local CA, and why),
// and the renewal moment.
import net from 'node:net';
import tls from 'node:tls';
import { describe, expect, it } from 'vitest';
import { parseClientHello } from '../../server/ingress/client-hello.js';

const offeredAlpn = (buf: Buffer) => {
  const hello = parseClientHello(buf);
  return hello && hello !== 'not_tls' ? hello.alpn : [];
};
import { renewAt } from '../../server/ingress/acme/manager.js';
import { wantedNames } from '../../server/ingress/acme/names.js';
import { acmeSettings } from '../../server/ingress/acme/settings.js';
import { resolveConfig } from '../../server/config.js';
import { compileTable, type SnapshotRow } from '../../server/ingress/table.js';

describe('ACME settings', () => {
  it('are none without a directory, so npm start stays offline', () => {
    expect(resolveConfig({}, {}).acme).toBeUndefined();
  });
  it('take the flags before the environment', () => {
    const c = resolveConfig({ acmeDirectory: 'https://acme.example.com/dir' }, { EDGEFORM_ACME_DIRECTORY: 'https://other.example.com/dir', EDGEFORM_ACME_EMAIL: 'ops@example.com', EDGEFORM_ACME_RETRY_SECONDS: '5' });
    expect(c.acme).toEqual({ directoryUrl: 'https://acme.example.com/dir', email: 'ops@example.com', caPem: undefined, retrySeconds: 5 });
  });
  it.each([
    [['http://acme.example.com/dir', undefined, undefined], /must be an https URL/],
    [['not a url', undefined, undefined], /must be an https URL/],
    [[undefined, 'ops@example.com', undefined], /need --acme-directory/],
    [['https://acme.example.com/dir', 'not-an-address', undefined], /must be an email address/],
    [['https://acme.example.com/dir', undefined, '/nonexistent/ca.pem'], /cannot read \/nonexistent\/ca.pem: ENOENT/],
  ] as const)('refuse %j', (args, message) => {
    expect(() => acmeSettings(args[0], args[1], args[2], 60)).toThrow(message);
  });
  it('allow plain http on a loopback address (a test directory)', () => {
    expect(acmeSettings('http://127.0.0.1:14000/dir', undefined, undefined, 60)?.directoryUrl).toBe('http://127.0.0.1:14000/dir');
  });
});

/** The ClientHello Node sends with these options, captured from a socket. */
function capturedHello(o: tls.ConnectionOptions): Promise<Buffer> {
  return new Promise((resolve) => {
    const server = net.createServer((s) => s.once('data', (b) => { resolve(b); s.destroy(); server.close(); }));
    server.listen(0, '127.0.0.1', () => {
      const c = tls.connect({ host: '127.0.0.1', port: (server.address() as net.AddressInfo).port, ...o });
      c.on('error', () => {});
    });
  });
}

describe('the ALPN protocols of a ClientHello (parseClientHello)', () => {
  it('reads the protocols of a real ClientHello, and none when it offers none', async () => {
    expect(offeredAlpn(await capturedHello({ servername: 'a.example.com', ALPNProtocols: ['acme-tls/1'] }))).toEqual(['acme-tls/1']);
    expect(offeredAlpn(await capturedHello({ servername: 'a.example.com', ALPNProtocols: ['h2', 'http/1.1'] }))).toEqual(['h2', 'http/1.1']);
    expect(offeredAlpn(await capturedHello({ servername: 'a.example.com' }))).toEqual([]);
    expect(offeredAlpn(Buffer.from('GET / HTTP/1.1\r\n'))).toEqual([]);
  });
});

describe('wantedNames', () => {
  const at = new Date('2026-01-01T00:00:00Z');
  const row = (id: string, kind: string, doc: Record<string, any>, computed: Record<string, any> = {}): SnapshotRow => ({ id, kind, parentId: null, createdAt: at, doc, computed });
  const table = compileTable([
    row('edghts_a', 'HTTPSEdge', { hostports: ['app.example.com:443', 'app.example.com:8443', 'up.example.com:443', '*.wild.example.com:443', 'localhost:443', 'intranet:443', '10.0.0.1:443'] }),
    row('edgtls_t', 'TLSEdge', { hostports: ['term.example.com:443'] }),
    row('edgtls_p', 'TLSEdge', { hostports: ['pass.example.com:443'], tls_termination: { terminate_at: 'upstream' } }),
    row('edgtcp_c', 'TCPEdge', { hostports: ['tcp.example.com:20000'] }),
    row('cert_up', 'TLSCertificate', { certificate_pem: 'C', private_key_pem: 'K' }, { subject_alternative_names: { dns_names: ['up.example.com'], ips: [] }, not_before: '2025-01-01T00:00:00Z', not_after: '2030-01-01T00:00:00Z', issued_at: null }),
  ], 1);
  const now = Date.parse('2026-06-01T00:00:00Z');

  it('orders for HTTPS names and edge-terminated TLS names no upload covers, by TLS-ALPN-01 when a 443 listener stands', () => {
    const w = wantedNames(table, new Set([443, 80]), now);
    expect([...w.names]).toEqual([['app.example.com', 'tls-alpn-01'], ['term.example.com', 'tls-alpn-01']]);
    expect(Object.fromEntries(w.kept)).toEqual({
      '*.wild.example.com': 'a wildcard needs the DNS-01 challenge, which this server does not answer',
      localhost: 'no public directory issues for this name',
      intranet: 'no public directory issues for this name',
      '10.0.0.1': 'an IP address',
    });
  });

  it('uses HTTP-01 with only a port 80 listener, and orders nothing without either', () => {
    expect(wantedNames(table, new Set([80, 8443]), now).names.get('app.example.com')).toBe('http-01');
    const none = wantedNames(table, new Set([8443]), now);
    expect(none.names.size).toBe(0);
    expect(none.kept.get('app.example.com')).toMatch(/no --ingress listener stands for public port 443/);
  });

  it('orders for a name whose upload has expired', () => {
    expect(wantedNames(table, new Set([443]), Date.parse('2031-01-01T00:00:00Z')).names.has('up.example.com')).toBe(true);
  });
});

describe('renewAt', () => {
  it('is two thirds through the lifetime', () => {
    expect(renewAt({ notBefore: new Date(0), notAfter: new Date(90_000) })).toBe(60_000);
  });
});
