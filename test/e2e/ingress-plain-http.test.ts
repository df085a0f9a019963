// Issue 30: an agent's http endpoint answers exactly at the URL it printed. `edgeform serve
// --ingress-http PUBLIC=ADDRESS:PORT` opens a plain-HTTP listener (none by default): agents'
// http endpoints answer there, names served over TLS (https endpoints, HTTPS edges) are
// redirected to https, anything else gets the 404 page; the printed URL carries the scheme
// and port the server serves. Here the plain listener's public port is its loopback port, so
// curl (which resolves *.localhost to loopback itself) fetches the printed URL as it is:
// `edgeform agent http`, and the real @ngrok/ngrok SDK with an http endpoint. A server without
// a plain listener prints https:// for an http endpoint, served on its TLS listener.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endpointUrlMaker } from '../../server/gateway/gateway.js';
import { startAgent, type AgentProcess } from '../helpers/agent.js';
import { agentToken, startIngress, type Ingress } from '../helpers/ingress.js';
import { curl, edgeRequest } from '../helpers/ingress-client.js';
import { freePort } from '../helpers/ports.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';

let ing: Ingress;
let plainPort: number;
let agentPort: number;
let ca: string;
let token: string;
let upstream: http.Server;
let upstreamPort: number;
const agents: AgentProcess[] = [];
const sessions: ngrok.Session[] = [];

function within<T>(p: Promise<T>, ms = 15_000, what = 'the SDK call'): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms).unref())]);
}

beforeAll(async () => {
  upstream = http.createServer((req, res) => res.end(`upstream ${req.method} ${req.url} host=${req.headers.host} proto=${req.headers['x-forwarded-proto']}`));
  // A WebSocket echo, enough of RFC 6455 for one short masked message.
  upstream.on('upgrade', (req, socket) => {
    const accept = createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\nX-Seen-Proto: ${req.headers['x-forwarded-proto']}\r\n\r\n`);
    socket.on('data', (buf: Buffer) => {
      const len = buf[1] & 0x7f;
      const mask = buf.subarray(2, 6);
      socket.write(Buffer.concat([Buffer.from([0x81, len]), Buffer.from(buf.subarray(6, 6 + len).map((b, i) => b ^ mask[i % 4]))]));
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamPort = (upstream.address() as AddressInfo).port;
  plainPort = await freePort();
  // Two ingress workers, as `edgeform serve` has by default on this 2-core machine: the agents'
  // connections are held by the primary, and each worker must see their endpoints (the SDK's
  // sessions included: gateway.tunnelLive once counted them out, and the workers answered 404).
  ing = await startIngress([443], {}, ['--agent-listen', '127.0.0.1:0', '--ingress-http', `${plainPort}=127.0.0.1:${plainPort}`, '--workers', '2']);
  const line = ing.lines().find((l) => typeof l.agent_listen === 'string');
  if (!line) throw new Error(`no agent listener line in ${JSON.stringify(ing.lines())}`);
  agentPort = Number(String(line.agent_listen).split(':').pop());
  ca = fs.readFileSync(path.join(ing.dataDir, 'ingress-ca.pem'), 'utf8');
  token = await agentToken(ing);
});

afterAll(async () => {
  for (const s of sessions) await within(s.close(), 5000, 'close()').catch(() => {});
  for (const a of agents) a.kill();
  upstream?.close();
  killServers();
  removeTempDirs();
});

describe('a plain-HTTP listener (--ingress-http)', () => {
  it('is logged at start as plain HTTP', () => {
    expect(ing.lines().some((l) => l.plain_http === true && l.public_port === plainPort && l.msg === `ingress (plain HTTP) for public port ${plainPort} listening on 127.0.0.1:${plainPort}`)).toBe(true);
  });

  it('`edgeform agent http` prints an http:// URL with the listener\'s port, and curl gets the upstream at it as printed', async () => {
    const a = startAgent(['--authtoken', token, '--api-url', ing.url, 'http', String(upstreamPort)]);
    agents.push(a);
    const printed = new RegExp(`http://[a-z0-9]+\\.edgeform\\.localhost:${plainPort}(?![0-9])`);
    await a.waitFor(printed, 20_000);
    const url = printed.exec(a.stdout)![0];
    const r = await curl(['-i', `${url}/from-agent?x=1`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(r.stdout).toContain(`upstream GET /from-agent?x=1 host=${new URL(url).host} proto=http`);
    // The API lists the same URL.
    const tunnels = (await ing.api('GET', '/tunnels')).body.tunnels as any[];
    expect(tunnels.some((t) => t.public_url === url && t.proto === 'http')).toBe(true);
  });

  it('the SDK\'s http endpoint (scheme HTTP) answers at the URL it printed', async () => {
    const session = await within(new ngrok.SessionBuilder().authtoken(token).serverAddr(`localhost:${agentPort}`).caCert(Buffer.from(ca)).connect(), 15_000, 'connect()');
    sessions.push(session);
    const l = await within(session.httpEndpoint().scheme('HTTP').listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen');
    const url = l.url()!;
    expect(url).toMatch(new RegExp(`^http://[a-z0-9]+\\.edgeform\\.localhost:${plainPort}$`));
    const r = await curl([`${url}/from-sdk`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`upstream GET /from-sdk host=${new URL(url).host} proto=http`);
    // Node's own client too, at the URL's port (its resolver does not know *.localhost).
    const body = await new Promise<string>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: Number(new URL(url).port), path: '/node', headers: { host: new URL(url).host } }, (res) => {
        let t = '';
        res.on('data', (c) => { t += c; });
        res.on('end', () => resolve(t));
      }).on('error', reject);
    });
    expect(body).toBe(`upstream GET /node host=${new URL(url).host} proto=http`);
  });

  it('a WebSocket upgrade to an http endpoint is carried through in the clear', async () => {
    const session = await within(new ngrok.SessionBuilder().authtoken(token).serverAddr(`localhost:${agentPort}`).caCert(Buffer.from(ca)).connect(), 15_000, 'connect()');
    sessions.push(session);
    const l = await within(session.httpEndpoint().scheme('HTTP').listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen');
    const url = new URL(l.url()!);
    const socket = net.connect(plainPort, '127.0.0.1');
    socket.on('error', () => {});
    const got = new Promise<string>((resolve, reject) => {
      let seen = Buffer.alloc(0);
      const timer = setTimeout(() => reject(new Error(`no echo within 10 s: ${seen.toString('latin1')}`)), 10_000);
      socket.on('data', (c: Buffer) => {
        seen = Buffer.concat([seen, c]);
        const at = seen.indexOf('\r\n\r\n');
        if (at < 0) return;
        if (seen.length === at + 4) return void socket.write(Buffer.concat([Buffer.from([0x81, 0x85, 1, 2, 3, 4]), Buffer.from([...Buffer.from('hello')].map((b, i) => b ^ [1, 2, 3, 4][i % 4]))]));
        if (seen.length >= at + 4 + 7) {
          clearTimeout(timer);
          resolve(seen.toString('latin1'));
        }
      });
    });
    socket.write(`GET /ws HTTP/1.1\r\nHost: ${url.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
    const text = await got;
    socket.destroy();
    expect(text).toMatch(/^HTTP\/1\.1 101 /);
    expect(text).toMatch(/\r\nx-seen-proto: http\r\n/i);
    expect(text.endsWith('hello')).toBe(true);
  });

  it('an https endpoint\'s name on the plain listener is redirected to its https URL, which answers', async () => {
    const session = await within(new ngrok.SessionBuilder().authtoken(token).serverAddr(`localhost:${agentPort}`).caCert(Buffer.from(ca)).connect(), 15_000, 'connect()');
    sessions.push(session);
    const l = await within(session.httpEndpoint().listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen');
    const url = l.url()!;
    expect(url).toMatch(/^https:\/\/[a-z0-9]+\.edgeform\.localhost$/);
    const host = new URL(url).hostname;
    const r = await curl(['-i', `http://${host}:${plainPort}/p?q=1`]);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 308/);
    expect(r.stdout).toMatch(new RegExp(`\\r\\nlocation: https://${host.replace(/\./g, '\\.')}/p\\?q=1\\r\\n`, 'i'));
    expect(r.stdout).not.toContain('upstream');
    expect((await edgeRequest({ port: ing.port(443), host, path: '/over-tls', ca })).text).toBe(`upstream GET /over-tls host=${host} proto=https`);
  });

  it('an HTTPS edge\'s name is redirected to https; an unknown name gets the 404 page; edges are never served in the clear', async () => {
    const b = await ing.api('POST', '/backends/http_response', { body: 'edge content' });
    const e = await ing.api('POST', '/edges/https', { hostports: ['edge.example.com:443'] });
    expect((await ing.api('POST', `/edges/https/${e.body.id}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: b.body.id } })).status).toBe(201);
    const r = await curl(['-i', '--connect-to', `edge.example.com:${plainPort}:127.0.0.1:${plainPort}`, `http://edge.example.com:${plainPort}/x`]);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 308/);
    expect(r.stdout).toMatch(/\r\nlocation: https:\/\/edge\.example\.com\/x\r\n/i);
    expect(r.stdout).not.toContain('edge content');
    const none = await curl(['-i', '--connect-to', `nobody.example.com:${plainPort}:127.0.0.1:${plainPort}`, `http://nobody.example.com:${plainPort}/`]);
    expect(none.stdout).toMatch(/^HTTP\/1\.1 404/);
    expect(none.stdout).toContain('ERR_SERVICE_740');
  });

  it('a Host naming another port is refused as on the TLS listeners', async () => {
    const r = await curl(['-i', '-H', 'Host: x.edgeform.localhost:1', `http://127.0.0.1:${plainPort}/`]);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 400/);
    expect(r.stdout).toContain('ERR_SERVICE_860');
  });
});

describe('without a plain-HTTP listener', () => {
  it('an http endpoint prints the https:// URL of the TLS listener, which answers', async () => {
    const other = await startIngress([443], {}, []);
    const t = await agentToken(other);
    const a = startAgent(['--authtoken', t, '--api-url', other.url, 'http', String(upstreamPort)]);
    agents.push(a);
    const printed = /https:\/\/[a-z0-9]+\.edgeform\.localhost(?![:0-9])/;
    await a.waitFor(printed, 20_000);
    const url = printed.exec(a.stdout)![0];
    expect(a.stdout).not.toMatch(/http:\/\/[a-z0-9]+\.edgeform\.localhost/);
    const host = new URL(url).hostname;
    const r = await edgeRequest({ port: other.port(443), host, path: '/tls', ca: fs.readFileSync(path.join(other.dataDir, 'ingress-ca.pem'), 'utf8') });
    expect(r.text).toBe(`upstream GET /tls host=${host} proto=https`);
  });
});

describe('the URL an endpoint is printed with', () => {
  it.each([
    [[443], [80], 'http', 'http://a.example'],
    [[443], [80], 'https', 'https://a.example'],
    [[8443], [8080], 'http', 'http://a.example:8080'],
    [[8443], [8080], 'https', 'https://a.example:8443'],
    [[8443, 443], [8080, 80], 'http', 'http://a.example'],
    [[8443], [], 'http', 'https://a.example:8443'],
    [[8443], [], 'tls', 'tls://a.example:8443'],
    [[], [], 'http', 'http://a.example'],
  ])('tls ports %j, plain ports %j, %s: %s', (tls, plain, proto, url) => {
    expect(endpointUrlMaker(tls, plain)(proto, 'a.example')).toBe(url);
  });
});
