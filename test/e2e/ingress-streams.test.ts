// TCP and TLS edges on the real `--ingress` listeners, through a real `edgeform agent` to
// upstreams on loopback: raw TCP; TLS passed through untouched by SNI (the upstream's own
// certificate reaches the client); TLS terminated at the edge; mutual TLS accepted and
// refused; min_version refused; ip_restriction refusing a connection; one access-log line per
// connection.
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { exchange, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { Pki, type Issued } from '../helpers/pki.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

let s: TestServer;
let echo: net.Server;
let tlsUpstream: tls.Server;
const agents: AgentProcess[] = [];
const pki = new Pki();
let upstreamRoot: Issued;
let clientRoot: Issued;
let tcpEdge: string;
let ca: string;

const listen = async <T extends net.Server>(server: T) => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as AddressInfo).port;
};

/** Sends `text` on a connection and returns what came back before it went quiet or closed; then closes it. */
/** Sends `text` and waits for its echo, or for the connection to close (a refusal), up to exchange's 10 s bound: no quiet period a loaded machine could outlast. */
async function roundTrip(socket: net.Socket, text: string) {
  const r = await exchange(socket, text, { want: Buffer.byteLength(text) });
  socket.destroy();
  return r;
}

beforeAll(async () => {
  s = await startTestServer({ agentHeartbeatMs: 1000, ingress: [{ publicPort: 20000, host: '127.0.0.1', port: 0 }, { publicPort: 20001, host: '127.0.0.1', port: 0 }, { publicPort: 9443, host: '127.0.0.1', port: 0 }] });
  ca = localCa(s);
  echo = net.createServer((c) => c.pipe(c));
  upstreamRoot = pki.issue('p256', { subject: [['CN', 'upstream root']], ca: true, keyUsage: ['keyCertSign'] });
  const upstreamLeaf = pki.issue('p256', { subject: [['CN', 'the upstream itself']], sans: ['DNS:pass.example.com'] }, upstreamRoot);
  tlsUpstream = tls.createServer({ cert: upstreamLeaf.cert, key: upstreamLeaf.key }, (c) => c.pipe(c));
  clientRoot = pki.issue('p256', { subject: [['CN', 'client root']], ca: true, keyUsage: ['keyCertSign'] });
  const echoPort = await listen(echo);
  const tlsPort = await listen(tlsUpstream);
  const cred = await credentialToken(s);
  for (const [label, to] of [['app=echo', `127.0.0.1:${echoPort}`], ['app=tls', `127.0.0.1:${tlsPort}`]]) {
    const a = startAgent(['--api-url', s.url, '--authtoken', cred.token, '--label', label, '--forwards-to', to]);
    agents.push(a);
    await a.waitFor('online: tn_');
  }
  const tg = async (labels: Record<string, string>) => (await s.post('/backends/tunnel_group', { labels })).body.id;
  const echoBackend = await tg({ app: 'echo' });
  const tlsBackend = await tg({ app: 'tls' });
  tcpEdge = (await s.post('/edges/tcp', { hostports: ['1.tcp.example.com:20000'], backend: { backend_id: echoBackend } })).body.id;
  const deny = (await s.post('/ip_policies', {})).body.id;
  await s.post('/ip_policy_rules', { ip_policy_id: deny, cidr: '127.0.0.0/8', action: 'deny' });
  await s.post('/edges/tcp', { hostports: ['2.tcp.example.com:20001'], backend: { backend_id: echoBackend }, ip_restriction: { ip_policy_ids: [deny] } });
  const caId = (await s.post('/certificate_authorities', { ca_pem: clientRoot.cert })).body.id;
  const tlsEdges = [
    { hostports: ['pass.example.com:9443'], backend: { backend_id: tlsBackend }, tls_termination: { terminate_at: 'upstream' } },
    { hostports: ['term.example.com:9443'], backend: { backend_id: echoBackend } },
    { hostports: ['strict.example.com:9443'], backend: { backend_id: echoBackend }, tls_termination: { terminate_at: 'edge', min_version: '1.3' } },
    { hostports: ['mtls.example.com:9443'], backend: { backend_id: echoBackend }, mutual_tls: { certificate_authority_ids: [caId] } },
  ];
  for (const body of tlsEdges) expect((await s.post('/edges/tls', body)).status).toBe(201);
});

afterAll(async () => {
  for (const a of agents) a.kill();
  await new Promise((r) => echo?.close(r));
  await new Promise((r) => tlsUpstream?.close(r));
  await s?.close();
  pki.close();
});

describe('TCP edges', () => {
  it('carry a connection\'s bytes both ways through the agent, and log one line for it', async () => {
    const r = await roundTrip(net.connect(ingressPort(s, 20000), '127.0.0.1'), 'ping over tcp');
    expect(r.text).toBe('ping over tcp');
    await until(() => s.logs.some((l) => l.includes('"msg":"ingress connection"') && l.includes(tcpEdge) && l.includes('"bytes_in":13')), 5000);
    const line = JSON.parse(s.logs.find((l) => l.includes('"msg":"ingress connection"') && l.includes(tcpEdge))!);
    expect(line).toMatchObject({ kind: 'tcp', edge: tcpEdge, public_port: 20000, client_ip: '127.0.0.1', bytes_in: 13, bytes_out: 13 });
    expect(line.tunnel).toMatch(/^tn_/);
  });

  it('close a connection their ip_restriction denies, without reaching the upstream', async () => {
    const r = await roundTrip(net.connect(ingressPort(s, 20001), '127.0.0.1'), 'let me in');
    expect(r).toMatchObject({ text: '', closed: true });
    await until(() => s.logs.some((l) => l.includes('"refused":"ip_restriction"')), 5000);
  });
});

describe('TLS edges', () => {
  it('pass TLS through untouched by SNI when terminate_at is upstream: the client sees the upstream\'s certificate', async () => {
    const socket = await tlsConnect(ingressPort(s, 9443), { servername: 'pass.example.com', ca: upstreamRoot.cert });
    expect(socket.getPeerCertificate().subject.CN).toBe('the upstream itself');
    expect((await roundTrip(socket, 'through to the upstream')).text).toBe('through to the upstream');
  });

  it('terminate at the edge with the local CA\'s certificate and carry the plaintext', async () => {
    const socket = await tlsConnect(ingressPort(s, 9443), { servername: 'term.example.com', ca });
    expect(socket.getPeerCertificate().issuer.CN).toBe('edgeform local ingress CA');
    expect((await roundTrip(socket, 'decrypted at the edge')).text).toBe('decrypted at the edge');
  });

  it('refuse a handshake below min_version', async () => {
    await expect(tlsConnect(ingressPort(s, 9443), { servername: 'strict.example.com', ca, maxVersion: 'TLSv1.2' })).rejects.toThrow();
    const ok = await tlsConnect(ingressPort(s, 9443), { servername: 'strict.example.com', ca });
    expect(ok.getProtocol()).toBe('TLSv1.3');
    ok.destroy();
  });

  it('accept a client certificate from the edge\'s certificate authority and refuse none or another\'s', async () => {
    const good = pki.issue('p256', { subject: [['CN', 'good client']], extendedKeyUsage: ['clientAuth'] }, clientRoot);
    const strangerRoot = pki.issue('p256', { subject: [['CN', 'stranger root']], ca: true, keyUsage: ['keyCertSign'] });
    const stranger = pki.issue('p256', { subject: [['CN', 'stranger']], extendedKeyUsage: ['clientAuth'] }, strangerRoot);
    const port = ingressPort(s, 9443);
    const accepted = await tlsConnect(port, { servername: 'mtls.example.com', ca, cert: good.cert, key: good.key });
    expect((await roundTrip(accepted, 'signed in by certificate')).text).toBe('signed in by certificate');
    for (const client of [{}, { cert: stranger.cert, key: stranger.key }]) {
      // TLS 1.3 finishes the client's side before the server checks its certificate: the refusal is the connection closing unanswered.
      const refused = await tlsConnect(port, { servername: 'mtls.example.com', ca, ...client }).then((sock) => roundTrip(sock, 'let me in'), (e: Error) => ({ text: '', closed: true, error: e.message }));
      expect(refused.text).toBe('');
      expect(refused.closed).toBe(true);
    }
  });

  it('close a connection for a name no TLS edge on the port serves', async () => {
    await expect(tlsConnect(ingressPort(s, 9443), { servername: 'nobody.example.com', ca })).rejects.toThrow();
  });
});
