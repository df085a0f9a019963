// Issue 36: TCP and TLS cloud endpoints served by the ingress. A `tcp://host:PORT` endpoint takes
// the connections of the --ingress listener for public port PORT (no edge there), a `tls://host`
// one the connections whose server name is host (the TLS passes through); each connection's
// on_tcp_connect decides: restrict-ips and deny close it, forward-internal splices it to an
// internal TCP or TLS endpoint bound by `edgeform agent --url tcp://NAME.internal:PORT`.
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentialToken, startAgent, type AgentProcess } from '../helpers/agent.js';
import { edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { Pki } from '../helpers/pki.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

let s: TestServer;
let token: string;
let pki: Pki;
const servers: net.Server[] = [];
const agents: AgentProcess[] = [];

beforeAll(async () => {
  s = await startTestServer({
    agentHeartbeatMs: 2000,
    ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }, { publicPort: 5432, host: '127.0.0.1', port: 0 }, { publicPort: 5433, host: '127.0.0.1', port: 0 }, { publicPort: 5434, host: '127.0.0.1', port: 0 }],
  });
  token = (await credentialToken(s)).token;
  pki = new Pki();
}, 60_000);

afterAll(async () => {
  for (const a of agents) a.kill();
  for (const x of servers) x.close();
  await s?.close().catch(() => {});
  pki?.close();
  removeTempDirs();
});

async function listening(server: net.Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  return (server.address() as AddressInfo).port;
}

/** Connects, writes `text`, and gives what came back before the connection closed (bounded). */
function roundTrip(connect: () => net.Socket, text: string, ms = 10_000): Promise<{ got: string; closed: boolean }> {
  return new Promise((resolve) => {
    const c = connect();
    let got = '';
    const timer = setTimeout(() => { c.destroy(); resolve({ got, closed: false }); }, ms);
    c.on('error', () => {});
    c.setEncoding('utf8');
    c.on('data', (d: string) => {
      got += d;
      if (got.length >= text.length) { clearTimeout(timer); c.destroy(); resolve({ got, closed: false }); }
    });
    c.on('close', () => { clearTimeout(timer); resolve({ got, closed: true }); });
    c.write(text);
  });
}

const policy = (...rules: unknown[]) => JSON.stringify({ on_tcp_connect: rules });
const fwd = (url: string) => ({ type: 'forward-internal', config: { url } });

describe('TCP and TLS cloud endpoints', () => {
  it('on_tcp_connect decides each connection: forward-internal to an agent\'s internal endpoint, restrict-ips and deny close it', async () => {
    const echoPort = await listening(net.createServer((c) => c.pipe(c)));
    const a = startAgent(['tcp', String(echoPort), '--url', 'tcp://db.internal:5432', '--api-url', s.url, '--authtoken', token]);
    agents.push(a);
    await a.waitFor('online: tn_');
    // A TLS upstream behind an internal tls endpoint: the client's TLS reaches it untouched.
    const ca = pki.issue('p256', { subject: [['CN', 'tcp test CA']], ca: true, keyUsage: ['critical', 'keyCertSign'] });
    const leaf = pki.issue('p256', { subject: [['CN', 'secure.example.com']], sans: ['DNS:secure.example.com'], ca: false, extendedKeyUsage: ['serverAuth'] }, ca);
    const tlsPort = await listening(tls.createServer({ cert: leaf.cert, key: leaf.key }, (c) => c.end('from the tls upstream')));
    const b = startAgent(['tls', String(tlsPort), '--url', 'tls://secure.internal', '--api-url', s.url, '--authtoken', token]);
    agents.push(b);
    await b.waitFor('online: tn_');

    const made = [
      await s.post('/endpoints', { url: 'tcp://db.example.com:5432', traffic_policy: policy({ actions: [{ type: 'restrict-ips', config: { allow: ['127.0.0.0/8'] } }, fwd('tcp://db.internal:5432')] }) }),
      await s.post('/endpoints', { url: 'tcp://closed.example.com:5433', traffic_policy: policy({ actions: [{ type: 'restrict-ips', config: { deny: ['127.0.0.0/8'] } }, fwd('tcp://db.internal:5432')] }) }),
      await s.post('/endpoints', { url: 'tls://secure.example.com', traffic_policy: policy({ expressions: ['conn.client_ip == "127.0.0.1"'], actions: [fwd('tls://secure.internal')] }, { actions: [{ type: 'deny' }] }) }),
      await s.post('/endpoints', { url: 'tls://denied.example.com', traffic_policy: policy({ actions: [{ type: 'deny' }] }) }),
    ];
    for (const m of made) expect(m.status, m.text).toBe(201);

    const through = await roundTrip(() => net.connect(ingressPort(s, 5432), '127.0.0.1'), 'ping over tcp');
    expect(through.got).toBe('ping over tcp');
    // restrict-ips (deny) closes the connection before it reaches anything.
    expect(await roundTrip(() => net.connect(ingressPort(s, 5433), '127.0.0.1'), 'ping')).toEqual({ got: '', closed: true });
    await until(() => s.logs.some((l) => l.includes('"kind":"cloud-tcp"') && l.includes('"public_port":5433') && l.includes('"refused":"traffic_policy"')), 5000, () => 'no access-log line of the refused connection');
    expect(s.logs.find((l) => l.includes('"kind":"cloud-tcp"') && l.includes('"public_port":5432'))).toContain('"forwarded_to":"tcp://db.internal:5432"');

    const secure = await new Promise<string>((resolve, reject) => {
      const c = tls.connect({ host: '127.0.0.1', port: ingressPort(s, 443), servername: 'secure.example.com', ca: ca.cert });
      let got = '';
      c.setEncoding('utf8');
      c.on('data', (d: string) => { got += d; });
      c.on('end', () => resolve(got));
      c.on('error', reject);
      setTimeout(() => { c.destroy(); reject(new Error(`no answer within 10 s (got ${JSON.stringify(got)})`)); }, 10_000).unref();
    });
    expect(secure).toBe('from the tls upstream');
    // deny closes a TLS connection before any handshake: the client sees the socket end.
    const denied = await new Promise<string>((resolve) => {
      const c = tls.connect({ host: '127.0.0.1', port: ingressPort(s, 443), servername: 'denied.example.com', ca: ca.cert });
      c.on('secureConnect', () => resolve('handshake'));
      c.on('error', (e) => resolve((e as NodeJS.ErrnoException).code ?? e.message));
      c.on('close', () => resolve('closed'));
    });
    expect(denied).not.toBe('handshake');
    await until(() => s.logs.some((l) => l.includes('"kind":"cloud-tls"') && l.includes('"server_name":"denied.example.com"') && l.includes('"refused":"traffic_policy"')), 5000, () => 'no access-log line of the denied TLS connection');
  });
});

describe("restrict-ips' ip_policies in an endpoint's policy", () => {
  it('the named IP policies decide (a change of their rules is live), on HTTP and TCP; an id that does not exist is refused', async () => {
    const ipp = (await s.post('/ip_policies', { description: 'loopback' })).body;
    const rule = await s.post('/ip_policy_rules', { ip_policy_id: ipp.id, cidr: '127.0.0.0/8', action: 'deny' });
    expect(rule.status, rule.text).toBe(201);
    const restrict = { type: 'restrict-ips', config: { ip_policies: [ipp.id] } };
    const web = await s.post('/endpoints', { url: 'https://guarded.example.com', traffic_policy: JSON.stringify({ on_http_request: [{ actions: [restrict, { type: 'custom-response', config: { status_code: 200, body: 'in' } }] }] }) });
    expect(web.status, web.text).toBe(201);
    const get = () => edgeRequest({ port: ingressPort(s, 443), host: 'guarded.example.com', ca: localCa(s) });
    expect((await get()).status).toBe(403);
    // The rule becomes an allow: the next request passes.
    await s.del(`/ip_policy_rules/${rule.body.id}`);
    await s.post('/ip_policy_rules', { ip_policy_id: ipp.id, cidr: '127.0.0.1/32', action: 'allow' });
    await until(async () => (await get()).status === 200, 5000, () => 'the allow rule did not take effect');
    expect((await get()).text).toBe('in');
    // An allow list the client is outside of refuses it.
    const other = (await s.post('/ip_policies', { description: 'elsewhere' })).body;
    await s.post('/ip_policy_rules', { ip_policy_id: other.id, cidr: '192.0.2.0/24', action: 'allow' });
    const tcp = await s.post('/endpoints', { url: 'tcp://guarded.example.com:5434', traffic_policy: JSON.stringify({ on_tcp_connect: [{ actions: [{ type: 'restrict-ips', config: { ip_policies: [other.id] } }, fwd('tcp://db.internal:5432')] }] }) });
    expect(tcp.status, tcp.text).toBe(201);
    expect(await roundTrip(() => net.connect(ingressPort(s, 5434), '127.0.0.1'), 'ping')).toEqual({ got: '', closed: true });
    await until(() => s.logs.some((l) => l.includes('"public_port":5434') && l.includes('"refused":"traffic_policy"')), 5000, () => 'no access-log line of the refused connection');
    const missing = await s.post('/endpoints', { url: 'https://nowhere.example.com', traffic_policy: JSON.stringify({ on_http_request: [{ actions: [{ type: 'restrict-ips', config: { ip_policies: ['ipp_doesnotexist'] } }, { type: 'deny' }] }] }) });
    expect([missing.status, missing.body.error_code]).toEqual([400, 'ERR_SERVICE_107']);
  });
});
