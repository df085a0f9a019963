// The pure parts of the ingress core: compileTable (store rows -> routing table), the
// ClientHello reader (server name from raw bytes, across records), and the certificate choice.
import tls from 'node:tls';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { selectCertificate } from '../../server/ingress/certificates.js';
import { parseClientHello } from '../../server/ingress/client-hello.js';
import { addressKey } from '../../server/ingress/ip-rules.js';
import { compileTable, type SnapshotRow } from '../../server/ingress/table.js';
import type { CertificateEntry } from '../../server/ingress/types.js';

const at = (n: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, n));
const row = (id: string, kind: string, n: number, doc: Record<string, any>, extra: Partial<SnapshotRow> = {}): SnapshotRow => ({ id, kind, parentId: null, createdAt: at(n), doc, computed: {}, ...extra });

describe('compileTable', () => {
  const rows: SnapshotRow[] = [
    row('edghts_a', 'HTTPSEdge', 1, { hostports: ['App.Example.com:443', 'app.example.com:8443'] }),
    row('edghtsrt_2', 'HTTPSEdgeRoute', 3, { match_type: 'path_prefix', match: '/b' }, { parentId: 'edghts_a' }),
    row('edghtsrt_1', 'HTTPSEdgeRoute', 2, { match_type: 'exact_path', match: '/a' }, { parentId: 'edghts_a' }),
    row('edgtcp_old', 'TCPEdge', 4, { hostports: ['1.tcp.example.com:20000'] }),
    row('edgtcp_new', 'TCPEdge', 5, { hostports: ['2.tcp.example.com:20000'] }),
    row('edgtls_x', 'TLSEdge', 6, { hostports: ['app.example.com:443'] }),
    row('edgtls_y', 'TLSEdge', 7, { hostports: ['tls.example.com:443', 'tls.example.com:9443'] }),
    row('edgtcp_z', 'TCPEdge', 8, { hostports: ['x.example.com:443'] }),
    row('bkdhr_1', 'HTTPResponseBackend', 1, { body: 'hi', status_code: 200 }),
    row('ipp_1', 'IPPolicy', 1, {}),
    row('ipp_empty', 'IPPolicy', 1, {}),
    row('ipr_1', 'IPPolicyRule', 2, { ip_policy_id: 'ipp_1', cidr: '10.0.0.0/8', action: 'deny' }),
    row('ca_1', 'CertificateAuthority', 1, { ca_pem: 'PEM' }),
    row('cert_1', 'TLSCertificate', 1, { certificate_pem: 'C', private_key_pem: 'K' }, { computed: { subject_alternative_names: { dns_names: ['*.Example.com'], ips: [] }, not_before: '2026-01-01T00:00:00Z', not_after: '2027-01-01T00:00:00Z' } }),
    row('usr_1', 'User', 1, {}),
  ];
  const table = compileTable(rows, 7);

  it.each([
    ['a host is found by its lower-case name on each of its ports', () => table.ports.get(443)?.hosts.get('app.example.com')?.doc.id, 'edghts_a'],
    ['the same edge serves its second port', () => table.ports.get(8443)?.hosts.get('app.example.com')?.doc.id, 'edghts_a'],
    ['routes come with their edge, oldest first, each naming the edge', () => (table.ports.get(443)?.hosts.get('app.example.com')?.doc.routes as any[]).map((r) => `${r.id}@${r.edge_id}`).join(','), 'edghtsrt_1@edghts_a,edghtsrt_2@edghts_a'],
    ['a port with an HTTPS edge is an HTTPS port (a TLS edge on the same hostport is left out)', () => `${table.ports.get(443)?.kind} ${table.ports.get(443)?.hosts.get('app.example.com')?.doc.id}`, 'https edghts_a'],
    ['a TLS edge shares an HTTPS port by name', () => table.ports.get(443)?.hosts.get('tls.example.com')?.doc.id, 'edgtls_y'],
    ['a port of TLS edges only is a TLS port', () => table.ports.get(9443)?.kind, 'tls'],
    ['a TCP edge on a port other edges hold is left out', () => String(table.ports.get(443)?.hosts.has('x.example.com')), 'false'],
    ['a TCP port carries its oldest edge only', () => [...(table.ports.get(20000)?.hosts.values() ?? [])].map((e) => e.doc.id).join(','), 'edgtcp_old'],
    ['backends keep their kind', () => table.backends.get('bkdhr_1')?.kind, 'HTTPResponseBackend'],
    ['an IP policy holds its rules; one without rules has none', () => [table.ipPolicies.get('ipp_1')?.size, table.ipPolicies.get('ipp_1')?.holds(addressKey('10.1.2.3')!, 'deny'), table.ipPolicies.get('ipp_empty')?.size], [1, true, 0]],
    ['certificates carry their lower-case SANs and validity', () => `${table.certificates[0].dnsNames}|${table.certificates[0].notAfter.toISOString()}`, '*.example.com|2027-01-01T00:00:00.000Z'],
    ['certificate authorities by id', () => table.certificateAuthorities.get('ca_1'), 'PEM'],
    ['the version is the one given', () => table.version, 7],
  ])('%s', (_why, got, want) => {
    expect(got()).toEqual(want);
  });

  it('is pure: compiling the same rows twice gives equal tables and leaves the rows as they were', () => {
    const before = JSON.stringify(rows);
    expect(compileTable(rows, 7)).toEqual(table);
    expect(JSON.stringify(rows)).toBe(before);
  });
});

/** The bytes a real client sends first, captured from node:tls. */
async function clientHelloOf(servername?: string): Promise<Buffer> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const got = new Promise<Buffer>((resolve) => server.once('connection', (c) => c.once('data', (d: Buffer) => { resolve(d); c.destroy(); })));
  const client = tls.connect({ host: '127.0.0.1', port: (server.address() as net.AddressInfo).port, servername, rejectUnauthorized: false });
  client.on('error', () => {});
  const bytes = await got;
  client.destroy();
  server.close();
  return bytes;
}

describe('parseClientHello', () => {
  it('reads the server name a real client sends, in lower case', async () => {
    expect(parseClientHello(await clientHelloOf('App.Example.COM'))).toEqual({ servername: 'app.example.com', alpn: [] });
  });

  it('says there is none when the client sends no server name', async () => {
    expect(parseClientHello(await clientHelloOf(undefined))).toEqual({ servername: undefined, alpn: [] });
  });

  it('asks for more bytes until the hello is complete, also when it is split across records', async () => {
    const hello = await clientHelloOf('split.example.com');
    expect(parseClientHello(hello.subarray(0, 40))).toBeNull();
    // The same handshake message in two TLS records.
    const body = hello.subarray(5);
    const record = (part: Buffer) => Buffer.concat([Buffer.from([22, 3, 1, part.length >> 8, part.length & 255]), part]);
    const split = Buffer.concat([record(body.subarray(0, 30)), record(body.subarray(30))]);
    expect(parseClientHello(split.subarray(0, 40))).toBeNull();
    expect(parseClientHello(split)).toEqual({ servername: 'split.example.com', alpn: [] });
  });

  it.each([
    ['plain HTTP', Buffer.from('GET / HTTP/1.1\r\n\r\n')],
    ['a TLS record that is not a handshake', Buffer.from([23, 3, 3, 0, 1, 0])],
    ['a handshake that is not a ClientHello', Buffer.from([22, 3, 3, 0, 4, 2, 0, 0, 0])],
    ['a declared hello larger than the bound', Buffer.from([22, 3, 3, 0, 4, 1, 1, 0, 0])],
  ])('refuses %s', (_why, bytes) => {
    expect(parseClientHello(bytes)).toBe('not_tls');
  });
});

describe('selectCertificate', () => {
  const cert = (id: string, names: string[], from: number, to: number, created = from): CertificateEntry => ({
    id, dnsNames: names, ips: [], notBefore: at(from), notAfter: at(to), createdAt: at(created), certificatePem: '', privateKeyPem: '',
  });
  const now = at(50).getTime();
  it.each([
    ['an exact name beats a wildcard, even an older one', [cert('wild', ['*.example.com'], 10, 100), cert('exact', ['app.example.com'], 1, 100)], 'app.example.com', 'exact'],
    ['among equal matches the one valid from later wins', [cert('old', ['app.example.com'], 1, 100), cert('new', ['app.example.com'], 20, 100)], 'app.example.com', 'new'],
    ['an expired or not yet valid one is never chosen', [cert('expired', ['app.example.com'], 1, 40), cert('future', ['app.example.com'], 60, 100)], 'app.example.com', undefined],
    ['a wildcard covers one label, not two', [cert('wild', ['*.example.com'], 1, 100)], 'a.b.example.com', undefined],
    ['a wildcard does not cover its bare domain', [cert('wild', ['*.example.com'], 1, 100)], 'example.com', undefined],
    ['a wildcard covers one label', [cert('wild', ['*.example.com'], 1, 100)], 'a.example.com', 'wild'],
  ])('%s', (_why, certs, name, want) => {
    expect(selectCertificate(certs, name, now)?.id).toBe(want);
  });
});
