// Issue 30: the service's own SDK (@ngrok/ngrok, unmodified, pinned) connects to a real
// `edgeform serve --agent-listen 127.0.0.1:0 --ingress 443=...` over the version-2 agent
// protocol, as an application embedding it would:
//   ngrok.forward({ addr, authtoken, server_addr: 'localhost:P', session_ca_cert: <data/ingress-ca.pem> })
//   curl --cacert data/ingress-ca.pem --connect-to <host>:443:127.0.0.1:Q <the URL it printed>
// The session's fields, an https endpoint answered through the ingress at its printed URL, a
// labelled tunnel serving a tunnel-group route, commands, resume after a dropped connection, a
// protection edgeform does not enforce refused (the enforced ones: sdk-agent-protections), and
// `edgeform agent`'s ephemeral endpoint.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type AgentProcess } from '../helpers/agent.js';
import { agentToken, startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeRequest, h2Get, nextMessage, webSocket, wsOpen } from '../helpers/ingress-client.js';
import { Pki } from '../helpers/pki.js';
import { twoFreePorts } from '../helpers/ports.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

let ing: Ingress;
let agentPort: number;
let ca: string;
let token: string;
let upstream: http.Server;
let upstreamPort: number;
let tcpFirst: number;
let echo: net.Server;
const sessions: ngrok.Session[] = [];
const agents: AgentProcess[] = [];
const relays: net.Server[] = [];

/** Bounded: every SDK call here settles or fails within this. */
function within<T>(p: Promise<T>, ms = 15_000, what = 'the SDK call'): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms).unref())]);
}

/** A session builder pointed at the test server, trusting its local CA, that does not retry for ever. */
function builder(addr = `localhost:${agentPort}`) {
  return new ngrok.SessionBuilder()
    .authtoken(token)
    .serverAddr(addr)
    .caCert(Buffer.from(ca))
    .metadata('sdk session metadata');
}

async function connect(b: ngrok.SessionBuilder): Promise<ngrok.Session> {
  const s = await within(b.connect(), 15_000, 'connect()');
  sessions.push(s);
  return s;
}

const sdkSessions = async () => (await ing.api('GET', '/tunnel_sessions')).body.tunnel_sessions as any[];

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    if (req.url === '/echo') return void req.pipe(res);
    if (req.url === '/headers') return void res.writeHead(200, { 'x-secret': 'upstream only' }).end(JSON.stringify(req.headers));
    res.end(`upstream ${req.method} ${req.url} host=${req.headers.host}`);
  });
  // A WebSocket echo, enough of RFC 6455 for short unfragmented messages.
  upstream.on('upgrade', (req, socket) => {
    const accept = createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
    socket.on('data', (buf: Buffer) => {
      const len = buf[1] & 0x7f;
      const mask = buf.subarray(2, 6);
      const payload = Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]));
      if ((buf[0] & 0x0f) === 8) return void socket.end();
      socket.write(Buffer.concat([Buffer.from([0x80 | (buf[0] & 0x0f), len]), payload]));
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamPort = (upstream.address() as AddressInfo).port;
  // Two public ports for agents' TCP endpoints (one for the SDK's, one for edgeform agent's).
  tcpFirst = await twoFreePorts();
  echo = net.createServer((c) => c.pipe(c));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  ing = await startIngress([443], {}, ['--agent-listen', '127.0.0.1:0', '--agent-tcp-ports', `${tcpFirst}-${tcpFirst + 1}`]);
  const line = ing.lines().find((l) => typeof l.agent_listen === 'string');
  if (!line) throw new Error(`no agent listener line in ${JSON.stringify(ing.lines())}`);
  agentPort = Number(String(line.agent_listen).split(':').pop());
  // The agent listener opens the local CA at start: the file is there before any ingress handshake.
  ca = fs.readFileSync(path.join(ing.dataDir, 'ingress-ca.pem'), 'utf8');
  token = await agentToken(ing);
});

afterAll(async () => {
  for (const s of sessions) await within(s.close(), 5000, 'close()').catch(() => {});
  for (const a of agents) a.kill();
  for (const r of relays) r.close();
  upstream?.close();
  echo?.close();
  killServers();
  removeTempDirs();
});

describe('the SDK connects over the version-2 protocol', () => {
  it('forward() binds an https endpoint whose printed URL answers through the ingress, and the session has its fields', async () => {
    const listener = await within(ngrok.forward({
      addr: upstreamPort, authtoken: token, server_addr: `localhost:${agentPort}`, session_ca_cert: ca, session_metadata: 'forward metadata',
    }), 15_000, 'forward()');
    const url = listener.url()!;
    expect(url).toMatch(/^https:\/\/[a-z0-9]+\.edgeform\.localhost$/);
    const host = new URL(url).hostname;
    const r = await edgeRequest({ port: ing.port(443), host, path: '/hello', ca });
    expect(r.text).toBe(`upstream GET /hello host=${host}`);
    expect(r.status).toBe(200);
    const posted = await edgeRequest({ port: ing.port(443), host, path: '/echo', method: 'POST', body: 'x'.repeat(300_000), ca });
    expect(posted.body.length).toBe(300_000);

    const list = await sdkSessions();
    const s = list.find((x) => x.metadata === 'forward metadata');
    expect(s).toMatchObject({ transport: 'service/v2', agent_version: '1.7.0', os: 'linux', ip: '127.0.0.1', region: 'local' });
    expect(s.credential.id).toMatch(/^cr_/);
    expect(s.started_at).toMatch(/^\d{4}-/);
    const tunnels = (await ing.api('GET', '/tunnels')).body.tunnels as any[];
    const t = tunnels.find((x) => x.public_url === url);
    expect(t).toMatchObject({ proto: 'https', tunnel_session: { id: s.id } });
    expect(t.endpoint.id).toMatch(/^ep_/);
    await within(ngrok.disconnect(url), 5000, 'disconnect()');
    await until(async () => !(await ing.api('GET', '/tunnels')).body.tunnels.some((x: any) => x.public_url === url), 10_000, () => 'the unbound tunnel is still listed');
  });

  it('HTTP/2 clients and WebSockets reach the upstream through an SDK endpoint, and a large answer streams back', async () => {
    const session = await connect(builder());
    const l = await within(session.httpEndpoint().listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen');
    const host = new URL(l.url()!).hostname;
    const h2 = await h2Get(ing.port(443), host, '/over-h2', ca);
    // The client's :authority, as it sent it, is the upstream's Host.
    expect([h2.alpn, h2.status, h2.body]).toEqual(['h2', 200, `upstream GET /over-h2 host=${host}:443`]);
    const ws = webSocket(ing.port(443), host, ca, '/chat');
    try {
      await wsOpen(ws);
      const reply = nextMessage(ws);
      ws.send('hello through the sdk');
      expect(await reply).toBe('hello through the sdk');
    } finally {
      ws.close();
    }
    // 3 MiB up and back: over ten times the stream window each way.
    const big = Buffer.alloc(3 * 1024 * 1024, 7);
    const echoed = await edgeRequest({ port: ing.port(443), host, path: '/echo', method: 'POST', body: big, ca });
    expect(echoed.body.equals(big)).toBe(true);
  });

  it('a session whose connection goes silent is gone within the heartbeat interval', async () => {
    const sockets: net.Socket[] = [];
    const relay = net.createServer((c) => {
      const up = net.connect(agentPort, '127.0.0.1');
      sockets.push(c, up);
      c.pipe(up).pipe(c);
      c.on('error', () => {});
      up.on('error', () => {});
    });
    relays.push(relay);
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    await connect(builder(`localhost:${(relay.address() as AddressInfo).port}`).metadata('goes silent').handleDisconnection(() => false));
    await until(async () => (await sdkSessions()).some((x) => x.metadata === 'goes silent'), 10_000, () => 'no session');
    // Nothing flows any more either way, and nothing is closed: a vanished network.
    for (const s of sockets) { s.unpipe(); s.pause(); }
    // Interval 2 s: the probe notices within 1 s, the resume window is one interval.
    await until(async () => !(await sdkSessions()).some((x) => x.metadata === 'goes silent'), 10_000, () => 'the silent session is still listed');
  });

  it('a labelled listener serves a tunnel-group route', async () => {
    const session = await connect(builder());
    const l = await within(session.labeledListener().label('app', 'sdkweb').metadata('labelled').listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'labeled listen');
    expect(l.id()).toMatch(/^tn_/);
    await ing.apply([
      'kind: TunnelGroupBackend\nname: sdkweb\nlabels: { app: sdkweb }',
      'kind: HTTPSEdge\nname: sdkweb\nhostports: ["sdk-web.example.com:443"]\nroutes:\n  - { match_type: path_prefix, match: /, backend: { backend_id: TunnelGroupBackend/sdkweb } }',
    ].join('\n---\n'));
    const r = await edgeRequest({ port: ing.port(443), host: 'sdk-web.example.com', path: '/via-label', ca });
    expect(r.text).toBe('upstream GET /via-label host=sdk-web.example.com');
    const t = (await ing.api('GET', '/tunnels')).body.tunnels.find((x: any) => x.id === l.id());
    expect(t).toMatchObject({ labels: { app: 'sdkweb' }, metadata: 'labelled' });
  });

  it('a protection edgeform does not enforce (mutual TLS) is refused with an error the SDK shows, and nothing is bound', async () => {
    const session = await connect(builder().metadata('refused'));
    const err = await within(session.httpEndpoint().mutualTlsca(Buffer.from('a CA')).listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen').then(() => undefined, (e: Error) => e);
    expect(err?.message).toMatch(/does not enforce mutual_tls/);
    expect(err?.message).toMatch(/ERR_SERVICE_112/);
    const s = (await sdkSessions()).find((x) => x.metadata === 'refused');
    expect((await ing.api('GET', '/tunnels')).body.tunnels.filter((t: any) => t.tunnel_session.id === s.id)).toEqual([]);
  });

  it('protections that are route modules run on the endpoint: header edits, user-agent filter, traffic policy', async () => {
    const session = await connect(builder());
    const l = await within(session.httpEndpoint()
      .requestHeader('x-from-edge', 'yes').responseHeader('x-answered-by', 'edge').removeResponseHeader('x-secret')
      .denyUserAgent('^badbot')
      .trafficPolicy(JSON.stringify({ on_http_request: [{ expressions: ["req.path == '/blocked'"], actions: [{ type: 'custom-response', config: { status_code: 418, body: 'blocked by policy' } }] }] }))
      .listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen');
    const host = new URL(l.url()!).hostname;
    const ok = await edgeRequest({ port: ing.port(443), host, path: '/headers', ca });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text)['x-from-edge']).toBe('yes');
    expect(ok.headers['x-answered-by']).toBe('edge');
    expect(ok.headers['x-secret']).toBeUndefined();
    expect((await edgeRequest({ port: ing.port(443), host, path: '/', ca, headers: { 'user-agent': 'badbot/1' } })).status).toBe(403);
    const blocked = await edgeRequest({ port: ing.port(443), host, path: '/blocked', ca });
    expect([blocked.status, blocked.text]).toEqual([418, 'blocked by policy']);
  });

  it('a protection whose settings cannot run refuses the bind', async () => {
    const session = await connect(builder());
    const err = await within(session.httpEndpoint().webhookVerification('no-such-provider', 'sekrit').listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen').then(() => undefined, (e: Error) => e);
    expect(err?.message).toMatch(/ERR_SERVICE_112/);
  });

  it('a TCP endpoint gets a port of --agent-tcp-ports, on which the ingress relays raw bytes', async () => {
    const session = await connect(builder());
    const l = await within(session.tcpEndpoint().listenAndForward(`tcp://127.0.0.1:${(echo.address() as AddressInfo).port}`), 15_000, 'tcp listen');
    const url = new URL(l.url()!);
    expect(url.protocol).toBe('tcp:');
    expect(url.hostname).toBe('edgeform.localhost');
    expect([tcpFirst, tcpFirst + 1]).toContain(Number(url.port));
    expect(await echoThrough(Number(url.port), 'hello over tcp')).toBe('hello over tcp');
  });

  it('a tls endpoint passes the client\'s TLS through to the upstream, which terminates it', async () => {
    const pki = new Pki();
    const upCa = pki.issue('p256', { subject: [['CN', 'sdk upstream CA']], ca: true, keyUsage: ['critical', 'keyCertSign'] });
    const upCert = pki.issue('p256', { subject: [['CN', 'tls-sdk.example.com']], sans: ['DNS:tls-sdk.example.com'], ca: false, extendedKeyUsage: ['serverAuth'] }, upCa);
    const tlsUp = tls.createServer({ cert: upCert.cert, key: upCert.key }, (c) => c.end('terminated at the upstream'));
    relays.push(tlsUp as unknown as net.Server);
    await new Promise<void>((r) => tlsUp.listen(0, '127.0.0.1', r));
    const session = await connect(builder());
    const l = await within(session.tlsEndpoint().domain('tls-sdk.example.com').listenAndForward(`tcp://127.0.0.1:${(tlsUp.address() as AddressInfo).port}`), 15_000, 'tls listen');
    expect(l.url()).toBe('tls://tls-sdk.example.com');
    const text = await within(new Promise<string>((resolve, reject) => {
      const c = tls.connect({ host: '127.0.0.1', port: ing.port(443), servername: 'tls-sdk.example.com', ca: upCa.cert }, () => undefined);
      let got = '';
      c.on('data', (d) => { got += d; });
      c.on('end', () => resolve(got));
      c.on('error', reject);
    }), 10_000, 'the TLS connection');
    expect(text).toBe('terminated at the upstream');
    pki.close();
  });

  it('a dropped connection is resumed with the same session id and the same URL', async () => {
    // A relay between the SDK and the listener that the test can cut.
    const open = new Set<net.Socket>();
    const relay = net.createServer((c) => {
      const up = net.connect(agentPort, '127.0.0.1');
      open.add(c);
      // The server's side stays open: it learns of the drop only from the SDK's reconnect.
      c.on('close', () => open.delete(c));
      c.pipe(up).pipe(c);
      c.on('error', () => up.destroy());
      up.on('error', () => c.destroy());
    });
    relays.push(relay);
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    let drops = 0;
    const session = await connect(builder(`localhost:${(relay.address() as AddressInfo).port}`).metadata('resumed').handleDisconnection(() => { drops++; return true; }));
    const l = await within(session.httpEndpoint().listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen');
    const before = (await sdkSessions()).find((x) => x.metadata === 'resumed');
    for (const c of open) c.destroy();
    await until(() => drops > 0 && open.size > 0, 15_000, () => 'the SDK did not reconnect');
    const host = new URL(l.url()!).hostname;
    await until(async () => (await edgeRequest({ port: ing.port(443), host, path: '/again', ca })).status === 200, 15_000, () => 'the endpoint does not answer after the resume');
    const after = (await sdkSessions()).filter((x) => x.metadata === 'resumed');
    expect(after.map((x) => x.id)).toEqual([before.id]);
  });

  it('restart, update and stop reach the SDK; stop ends the session and refuses its reconnects', async () => {
    const got: string[] = [];
    const session = await connect(builder().metadata('commanded')
      .handleRestartCommand(() => { got.push('restart'); })
      .handleUpdateCommand(() => { got.push('update'); })
      .handleStopCommand(() => { got.push('stop'); }));
    await within(session.httpEndpoint().listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen');
    const first = (await sdkSessions()).find((x) => x.metadata === 'commanded');
    expect((await ing.api('POST', `/tunnel_sessions/${first.id}/update`, {})).status).toBe(204);
    expect((await ing.api('POST', `/tunnel_sessions/${first.id}/restart`, {})).status).toBe(204);
    await until(async () => (await sdkSessions()).some((x) => x.metadata === 'commanded' && x.id !== first.id), 20_000, () => 'no new session after restart');
    const second = (await sdkSessions()).find((x) => x.metadata === 'commanded');
    expect(second.id).not.toBe(first.id);
    expect((await ing.api('POST', `/tunnel_sessions/${second.id}/stop`, {})).status).toBe(204);
    await until(async () => !(await sdkSessions()).some((x) => x.metadata === 'commanded'), 10_000, () => 'the stopped session is still listed');
    expect(got).toEqual(['update', 'restart', 'stop']);
  });

  it('a command the application did not register a handler for is a 409 naming the reason', async () => {
    await connect(builder().metadata('no handlers'));
    const s = (await sdkSessions()).find((x) => x.metadata === 'no handlers');
    const r = await ing.api('POST', `/tunnel_sessions/${s.id}/restart`, {});
    expect(r.status).toBe(409);
    expect(r.body.msg).toMatch(/has not defined a callback/);
  });

  it('a wrong authtoken is refused with the error in the SDK', async () => {
    const err = await within(new ngrok.SessionBuilder().authtoken('not-a-token').serverAddr(`localhost:${agentPort}`).caCert(Buffer.from(ca)).handleDisconnection(() => false).connect(), 15_000, 'connect').then(() => undefined, (e: Error) => e);
    expect(err?.message).toMatch(/ERR_SERVICE_202/);
  });
});

/** A port whose next one is free too (bounded tries). */
/** Sends `text` to the ingress's TCP port and reads as many bytes back (bounded). */
function echoThrough(port: number, text: string): Promise<string> {
  return within(new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => c.write(text));
    let got = '';
    c.on('data', (d) => { got += d; if (got.length >= text.length) { c.destroy(); resolve(got); } });
    c.on('error', reject);
  }), 10_000, 'the TCP echo');
}

describe('edgeform agent\'s ephemeral endpoints answer through the ingress', () => {
  it('an https tunnel of `edgeform agent` answers at the URL it printed', async () => {
    const a = startAgent(['--authtoken', token, '--api-url', ing.url, 'https', String(upstreamPort)]);
    agents.push(a);
    await a.waitFor(/https:\/\/[a-z0-9]+\.edgeform\.localhost/, 20_000);
    const url = /https:\/\/[a-z0-9]+\.edgeform\.localhost/.exec(a.stdout)![0];
    const host = new URL(url).hostname;
    const r = await edgeRequest({ port: ing.port(443), host, path: '/from-agent', ca });
    expect(r.text).toBe(`upstream GET /from-agent host=${host}`);
  });

  it('a tcp tunnel of `edgeform agent` answers on the port it printed', async () => {
    const a = startAgent(['--authtoken', token, '--api-url', ing.url, 'tcp', `127.0.0.1:${(echo.address() as AddressInfo).port}`]);
    agents.push(a);
    await a.waitFor(/tcp:\/\/edgeform\.localhost:\d+/, 20_000);
    const port = Number(/tcp:\/\/edgeform\.localhost:(\d+)/.exec(a.stdout)![1]);
    expect([tcpFirst, tcpFirst + 1]).toContain(port);
    expect(await echoThrough(port, 'agent tcp')).toBe('agent tcp');
  });
});
