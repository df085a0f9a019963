// Issue 16, traffic through `edgeform agent`, exactly as the issue's user runs it:
//   edgeform serve --ingress 443=127.0.0.1:P --ingress 20000=127.0.0.1:Q &
//   edgeform apply -f web.yaml --auto-approve
//   edgeform agent --authtoken "$CRED" --label app=web --forwards-to 127.0.0.1:3000 &
//   curl --cacert data/ingress-ca.pem --connect-to app.example.com:443:127.0.0.1:P https://app.example.com/api
// A tunnel_group route to local upstreams (balanced across two agents, X-Forwarded-*,
// streaming bodies, WebSockets), none online and a refusing upstream (502 with a code), a
// request in flight finishing on its configuration, TCP edges (with ip_restriction and
// on_tcp_connect), TLS edges terminated at the edge and passed through to the upstream or
// the agent, and SIGTERM draining the ingress.
import { createHash, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { startAgent, type AgentProcess } from '../helpers/agent.js';
import { agentToken, many, startIngress, type Ingress } from '../helpers/ingress.js';
import { curl, edgeErrorCode, edgeRequest, exchange, nextMessage, tlsConnect, webSocket, wsOpen, type EdgeRequest } from '../helpers/ingress-client.js';
import { freePort } from '../helpers/ports.js';
import { Pki, type Issued } from '../helpers/pki.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs, tempDir } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const MiB = 1024 * 1024;
let ing: Ingress;
let port: number;
let ca: string;
let pki: Pki;
let upstreamCa: Issued;
let upstreamCert: Issued;
let clientCa: Issued;
let client: Issued;
const servers: (net.Server | http.Server)[] = [];
const agents: AgentProcess[] = [];
/** Requests to /slow wait here until the test lets them answer. */
const held: (() => void)[] = [];

/** The issue's upstream: answers /api, tells who it is, echoes headers and bodies, holds /slow, speaks WebSocket. */
function webUpstream(name: string): http.Server {
  const s = http.createServer((req, res) => {
    const p = (req.url ?? '/').split('?')[0];
    if (p === '/api') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('api via agent');
    if (p === '/who') return void res.end(name);
    if (p === '/headers') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(req.headers));
    if (p === '/stream') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      return void req.pipe(res);
    }
    if (p === '/big') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let sent = 0;
      const more = () => {
        while (sent < 16) {
          sent++;
          if (!res.write(Buffer.alloc(MiB / 2, sent))) return void res.once('drain', more);
        }
        res.end();
      };
      return more();
    }
    if (p === '/slow') return void held.push(() => res.end('slow done'));
    res.end(`${name} ${p}`);
  });
  // A WebSocket echo, enough of RFC 6455 for short unfragmented messages.
  s.on('upgrade', (req, socket) => {
    const accept = createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    socket.on('data', (buf: Buffer) => {
      const opcode = buf[0] & 0x0f;
      const len = buf[1] & 0x7f;
      const mask = buf.subarray(2, 6);
      const payload = Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]));
      if (opcode === 8) return void socket.end();
      socket.write(Buffer.concat([Buffer.from([0x80 | opcode, len]), payload]));
    });
    socket.on('error', () => {});
  });
  return s;
}

async function listen<T extends net.Server>(s: T): Promise<number> {
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as AddressInfo).port;
}

function manifest(version: string): string {
  const tg = (name: string) => ({ kind: 'TunnelGroupBackend', name, labels: { app: name } });
  const docs = [
    ...['web', 'nobody', 'refused', 'echo', 'tlsup'].map(tg),
    { kind: 'IPPolicy', name: 'deny-self', rules: [{ cidr: '127.0.0.1/32', action: 'deny' }] },
    { kind: 'CertificateAuthority', name: 'clients', ca_pem: clientCa.cert },
    {
      kind: 'HTTPSEdge',
      name: 'web',
      hostports: ['app.example.com:443'],
      routes: [
        { match_type: 'path_prefix', match: '/', backend: { backend_id: 'TunnelGroupBackend/web' } },
        { match_type: 'path_prefix', match: '/nobody', backend: { backend_id: 'TunnelGroupBackend/nobody' } },
        { match_type: 'path_prefix', match: '/refused', backend: { backend_id: 'TunnelGroupBackend/refused' } },
        { match_type: 'exact_path', match: '/slow', backend: { backend_id: 'TunnelGroupBackend/web' }, response_headers: { add: { 'x-version': version } } },
      ],
    },
    { kind: 'TCPEdge', name: 'echo', hostports: ['tcp.example.com:20000'], backend: { backend_id: 'TunnelGroupBackend/echo' } },
    { kind: 'TCPEdge', name: 'guarded', hostports: ['tcp.example.com:20001'], backend: { backend_id: 'TunnelGroupBackend/echo' }, ip_restriction: { ip_policy_ids: ['IPPolicy/deny-self'] } },
    {
      kind: 'TCPEdge',
      name: 'policed',
      hostports: ['tcp.example.com:20002'],
      backend: { backend_id: 'TunnelGroupBackend/echo' },
      traffic_policy: { value: JSON.stringify({ on_tcp_connect: [{ name: 'no loopback', expressions: ["conn.client_ip == '127.0.0.1'"], actions: [{ type: 'log', config: { metadata: { refused: '${conn.client_ip} to ${conn.server_port}' } } }, { type: 'deny' }] }] }) },
    },
    { kind: 'TLSEdge', name: 'mqtt', hostports: ['mqtt.example.com:8883'], backend: { backend_id: 'TunnelGroupBackend/echo' }, tls_termination: { terminate_at: 'edge' } },
    {
      kind: 'TLSEdge',
      name: 'mutual',
      hostports: ['mtls.example.com:8883'],
      backend: { backend_id: 'TunnelGroupBackend/echo' },
      mutual_tls: { certificate_authority_ids: ['CertificateAuthority/clients'] },
      tls_termination: { terminate_at: 'edge', min_version: '1.3' },
    },
    { kind: 'TLSEdge', name: 'pass', hostports: ['pass.example.com:8883'], backend: { backend_id: 'TunnelGroupBackend/tlsup' }, tls_termination: { terminate_at: 'upstream' } },
    { kind: 'TLSEdge', name: 'at-agent', hostports: ['agent.example.com:8883'], backend: { backend_id: 'TunnelGroupBackend/tlsup' }, tls_termination: { terminate_at: 'agent' } },
  ];
  return docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');
}

const get = (p: string, o: Partial<EdgeRequest> = {}) => edgeRequest({ port, host: 'app.example.com', path: p, ca, ...o });
const digest = (b: Buffer) => createHash('sha256').update(b).digest('hex');

beforeAll(async () => {
  pki = new Pki();
  upstreamCa = pki.issue('p256', { subject: [['CN', 'upstream CA']], ca: true, keyUsage: ['critical', 'keyCertSign'] });
  upstreamCert = pki.issue('p256', { subject: [['CN', 'pass.example.com']], sans: ['DNS:pass.example.com', 'DNS:agent.example.com'], ca: false, extendedKeyUsage: ['serverAuth'] }, upstreamCa);
  clientCa = pki.issue('p256', { subject: [['CN', 'client CA']], ca: true, keyUsage: ['critical', 'keyCertSign'] });
  client = pki.issue('p256', { subject: [['CN', 'device 7']], ca: false, extendedKeyUsage: ['clientAuth'] }, clientCa);
  const web1 = await listen(webUpstream('one'));
  const web2 = await listen(webUpstream('two'));
  const echo = await listen(net.createServer((c) => { c.on('error', () => {}); c.pipe(c); }));
  const tlsEcho = await listen(tls.createServer({ cert: upstreamCert.cert, key: upstreamCert.key }, (c) => { c.on('error', () => {}); c.pipe(c); }));
  const closed = await freePort();

  ing = await startIngress([443, 20000, 20001, 20002, 8883]);
  port = ing.port(443);
  await ing.apply(manifest('one'));
  const cred = await agentToken(ing);
  const env = { EDGEFORM_API_URL: ing.url };
  // As the issue types it, and a second agent with the same label.
  agents.push(startAgent(['--authtoken', cred, '--label', 'app=web', '--forwards-to', `127.0.0.1:${web1}`], env));
  agents.push(startAgent(['--authtoken', cred, '--label', 'app=web', '--forwards-to', `127.0.0.1:${web2}`], env));
  const config = path.join(tempDir('edgeform-agent-config-'), 'agent.yml');
  fs.writeFileSync(config, stringify({
    tunnels: {
      echo: { labels: { app: 'echo' }, forwards_to: `127.0.0.1:${echo}` },
      tlsup: { labels: { app: 'tlsup' }, forwards_to: `127.0.0.1:${tlsEcho}` },
      refused: { labels: { app: 'refused' }, forwards_to: `127.0.0.1:${closed}` },
    },
  }));
  agents.push(startAgent(['--authtoken', cred, '--config', config], env));
  await until(async () => (await ing.api('GET', '/tunnels')).body.tunnels.length === 5, 30_000, () => `tunnels: ${agents.map((a) => a.output()).join('\n')}`);
  ca = await ing.ca();
});

afterAll(async () => {
  for (const a of agents) a.kill();
  for (const s of servers) {
    (s as http.Server).closeAllConnections?.();
    s.close();
  }
  killServers();
  pki?.close();
  removeTempDirs();
});

describe('HTTPS through edgeform agent (tunnel_group)', () => {
  it('answers the issue\'s curl command through the agent to the local upstream', async () => {
    const r = await curl(['--cacert', path.join(ing.dataDir, 'ingress-ca.pem'), '--connect-to', `app.example.com:443:127.0.0.1:${port}`, 'https://app.example.com/api']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('api via agent');
  });

  it('sets X-Forwarded-For, -Proto and -Host', async () => {
    const seen = JSON.parse((await get('/headers')).text);
    expect(seen['x-forwarded-for']).toBe('127.0.0.1');
    expect(seen['x-forwarded-proto']).toBe('https');
    expect(seen['x-forwarded-host']).toBe('app.example.com');
  });

  it('balances across the online tunnels whose labels match', async () => {
    const names = new Set((await many(40, 4, () => get('/who'))).map((r) => r.text));
    expect([...names].sort()).toEqual(['one', 'two']);
  });

  it('streams bodies both ways (8 MiB up and back, 8 MiB down), intact', async () => {
    const body = Buffer.alloc(8 * MiB);
    for (let i = 0; i < body.length; i += 4096) body.write(`block ${i}`, i);
    const up = await get('/stream', { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
    expect(up.status).toBe(200);
    expect(up.body.length).toBe(body.length);
    expect(digest(up.body)).toBe(digest(body));
    const down = await get('/big');
    expect(down.body.length).toBe(8 * MiB);
    expect(down.body[0]).toBe(1);
    expect(down.body[down.body.length - 1]).toBe(16);
  });

  it('passes a WebSocket through to the upstream', async () => {
    const ws = webSocket(port, 'app.example.com', ca, '/chat');
    try {
      await wsOpen(ws);
      const reply = nextMessage(ws);
      ws.send('hello upstream');
      expect(await reply).toBe('hello upstream');
    } finally {
      ws.close();
    }
  });

  it('answers 502 with a code when no tunnel matches, and when the upstream refuses', async () => {
    const none = await get('/nobody');
    const code = edgeErrorCode(none, 502);
    const refused = await get('/refused');
    const code2 = edgeErrorCode(refused, 502);
    expect(code2).not.toBe(code);
  });

  it('finishes a request in flight on the configuration it started with; the next one sees the change', async () => {
    const inFlight = get('/slow');
    await until(() => held.length === 1, 15_000, () => 'the upstream never got /slow');
    const edge = (await ing.api('GET', '/edges/https')).body.https_edges[0];
    const slow = edge.routes.find((r: any) => r.match === '/slow');
    const put = await ing.api('PUT', `/edges/https/${edge.id}/routes/${slow.id}/response_headers`, { add: { 'x-version': 'two' } });
    expect(put.status).toBe(200);
    held.shift()!();
    const first = await inFlight;
    expect(first.text).toBe('slow done');
    expect(first.headers['x-version']).toBe('one');
    const next = get('/slow');
    await until(() => held.length === 1, 15_000, () => 'the upstream never got the second /slow');
    held.shift()!();
    expect((await next).headers['x-version']).toBe('two');
  });
});

describe('TCP edges through the agent', () => {
  it('forwards a TCP connection to the upstream', async () => {
    const s = net.connect(ing.port(20000), '127.0.0.1');
    const { data } = await exchange(s, 'ping over tcp', { want: 13 });
    s.destroy();
    expect(data.toString()).toBe('ping over tcp');
  });

  it.each([[20001, 'ip_restriction'], [20002, 'an on_tcp_connect deny']])('port %i closes the connection refused by %s, sending nothing', async (pub) => {
    const s = net.connect(ing.port(pub), '127.0.0.1');
    const r = await exchange(s, 'ping over tcp');
    s.destroy();
    expect(r.closed).toBe(true);
    expect(r.data.length).toBe(0);
  });

  it("an on_tcp_connect log action's line reaches the server's log, interpolated", async () => {
    const s = net.connect(ing.port(20002), '127.0.0.1');
    await exchange(s, 'ping');
    s.destroy();
    await until(() => ing.lines().some((l) => l.msg === 'traffic policy log action'), 10_000);
    expect(ing.lines().find((l) => l.msg === 'traffic policy log action')).toMatchObject({ metadata: { refused: '127.0.0.1 to 20002' } });
  });
});

describe('TLS edges through the agent', () => {
  it('terminates at the edge with a local-CA certificate and forwards the plaintext', async () => {
    const s = await tlsConnect(ing.port(8883), { servername: 'mqtt.example.com', ca });
    expect(new X509Certificate(s.getPeerCertificate().raw).subjectAltName).toContain('DNS:mqtt.example.com');
    const { data } = await exchange(s, 'mqtt hello', { want: 10 });
    s.destroy();
    expect(data.toString()).toBe('mqtt hello');
  });

  it('with mutual_tls and min_version 1.3: a client certificate of the edge\'s authority gets through; none, or TLS 1.2, is refused', async () => {
    const s = await tlsConnect(ing.port(8883), { servername: 'mtls.example.com', ca, cert: client.cert, key: client.key });
    const { data } = await exchange(s, 'device hello', { want: 12 });
    s.destroy();
    expect(data.toString()).toBe('device hello');
    // Without a certificate TLS 1.3 finishes the client's side first; the edge then closes unanswered.
    let echoed = '';
    try {
      const bare = await tlsConnect(ing.port(8883), { servername: 'mtls.example.com', ca });
      echoed = (await exchange(bare, 'no cert')).data.toString();
      bare.destroy();
    } catch {
      // refused in the handshake
    }
    expect(echoed).toBe('');
    await expect(tlsConnect(ing.port(8883), { servername: 'mtls.example.com', ca, cert: client.cert, key: client.key, maxVersion: 'TLSv1.2' })).rejects.toThrow();
  });

  it.each(['pass.example.com', 'agent.example.com'])('passes the TLS stream for %s through untouched: the client sees the upstream\'s certificate', async (host) => {
    const s = await tlsConnect(ing.port(8883), { servername: host, ca: upstreamCa.cert });
    expect(s.getPeerCertificate().fingerprint256).toBe(new X509Certificate(upstreamCert.cert).fingerprint256);
    const { data } = await exchange(s, 'end to end', { want: 10 });
    s.destroy();
    expect(data.toString()).toBe('end to end');
  });

  it('closes a handshake for a name no TLS edge serves, with nothing of another edge', async () => {
    let text = '';
    try {
      const s = await tlsConnect(ing.port(8883), { servername: 'nobody.example.org', rejectUnauthorized: false });
      text = (await exchange(s, 'hello?')).data.toString();
      s.destroy();
    } catch {
      // refused: fine
    }
    expect(text).not.toContain('hello?');
  });
});

describe('SIGTERM', () => {
  it('drains the ingress: the listener stops accepting, the request in flight finishes, the server exits 0', async () => {
    const inFlight = get('/slow');
    await until(() => held.length === 1, 15_000, () => 'the upstream never got /slow');
    ing.serving.child.kill('SIGTERM');
    await ing.serving.waitFor(/received SIGTERM/);
    // New connections to the ingress are refused while the request is still in flight.
    const refused = await new Promise<boolean>((resolve) => {
      const probe = net.connect(port, '127.0.0.1');
      probe.once('connect', () => { probe.destroy(); resolve(false); });
      probe.once('error', () => resolve(true));
    });
    expect(refused).toBe(true);
    held.shift()!();
    const r = await inFlight;
    expect(r.status, r.text).toBe(200);
    expect(r.text).toBe('slow done');
    expect(await ing.serving.exited).toBe(0);
    await expect(get('/api')).rejects.toThrow(/ECONNREFUSED/);
  });
});
