// What one client can make the server hold in memory, measured as the resident set (VmRSS) of a
// real `edgeform serve --ingress` process while the attack runs, with `edgeform agent` relaying
// to a local upstream (docs/ingress.md, "Limits and what they protect"):
// - an HTTP/2 client that never opens its flow-control window, asking for large answers on
//   hundreds of streams (each used to hold the agent's 4 MiB window: 128 relays, 512 MB);
// - webhook_verification: 10 MiB bodies on many connections (each used to be buffered whole,
//   signed or not), and unsigned ones, refused now before their body is read;
// - websocket_tcp_converter: partial frames on many connections (each used to hold up to 16 MiB).
// The server runs with --ingress-unread-mib 64 and --ingress-buffer-mib 64; the bound asserted
// is the process's growth over its resident set before the attack.
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type AgentProcess } from '../helpers/agent.js';
import { agentToken, startIngress, type Ingress } from '../helpers/ingress.js';
import { exchange, tlsConnect } from '../helpers/ingress-client.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';

const MB = 1_000_000;
/** How much the server's resident set may grow during an attack (the bounds are 64 MiB each, plus what Node keeps). */
const GROWTH_BOUND = 250 * MB;

let ing: Ingress;
let ca: string;
let port: number;
let agent: AgentProcess;
let upstream: http.Server;
const chunk = Buffer.alloc(64 * 1024, 'x');

/** The server process's resident set, in bytes. */
function rss(): number {
  const status = fs.readFileSync(`/proc/${ing.serving.child.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

/** Runs `attack` while sampling the resident set every 100 ms; returns the most it grew over `before`. */
async function peakGrowth(attack: () => Promise<void>): Promise<{ before: number; peak: number }> {
  const before = rss();
  let peak = before;
  const sampler = setInterval(() => { peak = Math.max(peak, rss()); }, 100);
  try {
    await attack();
  } finally {
    clearInterval(sampler);
  }
  peak = Math.max(peak, rss());
  return { before, peak: peak - before };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  // An upstream whose answers are 100 MB, written as fast as they are taken.
  upstream = http.createServer((req, res) => {
    req.resume();
    let n = 0;
    const pump = () => {
      while (n < 1600) {
        n++;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  });
  upstream.on('clientError', () => {});
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  ing = await startIngress([443], {}, ['--ingress-unread-mib', '64', '--ingress-buffer-mib', '64']);
  ca = await ing.ca();
  port = ing.port(443);
  const token = await agentToken(ing);
  agent = startAgent(['--api-url', ing.url, '--authtoken', token, '--label', 'app=mem', '--forwards-to', `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  const group = await ing.api('POST', '/backends/tunnel_group', { labels: { app: 'mem' } });
  const edge = await ing.api('POST', '/edges/https', { hostports: ['mem.example.com:443'] });
  const routes = [
    { match_type: 'path_prefix', match: '/', backend: { backend_id: group.body.id } },
    { match_type: 'path_prefix', match: '/hook', backend: { backend_id: group.body.id }, webhook_verification: { provider: 'github', secret: 'not-sent-by-the-attacker' } },
    { match_type: 'path_prefix', match: '/ws', backend: { backend_id: group.body.id }, websocket_tcp_converter: {} },
  ];
  for (const r of routes) {
    const made = await ing.api('POST', `/edges/https/${edge.body.id}/routes`, r);
    expect(made.status).toBe(201);
  }
}, 90_000);

afterAll(async () => {
  agent?.kill();
  killServers();
  upstream?.closeAllConnections();
  upstream?.close();
  removeTempDirs();
});

const connect = () => tls.connect({ host: '127.0.0.1', port, servername: 'mem.example.com', ca, ALPNProtocols: ['h2'] });

describe('memory one client can make the server hold', { timeout: 120_000 }, () => {
  it('an HTTP/2 client that never opens its window: the server closes it, and its resident set stays bounded', async () => {
    const sessions: http2.ClientHttp2Session[] = [];
    let closedByServer = 0;
    const { peak } = await peakGrowth(async () => {
      const started = Date.now();
      // Sessions of 100 streams each, opened again as the server closes them, for 8 s.
      while (Date.now() - started < 8000) {
        const open = sessions.filter((s) => !s.destroyed && !s.closed);
        for (let i = open.length; i < 2; i++) {
          const session = http2.connect('https://mem.example.com', { settings: { initialWindowSize: 0 }, createConnection: connect });
          session.on('error', () => {});
          session.once('close', () => { if (Date.now() - started < 8000) closedByServer++; });
          sessions.push(session);
          for (let j = 0; j < 100; j++) {
            const stream = session.request({ ':path': `/big/${i}/${j}` });
            stream.on('error', () => {});
            stream.pause();
          }
        }
        await sleep(200);
      }
    });
    for (const s of sessions) s.destroy();
    expect(closedByServer).toBeGreaterThan(0);
    expect(peak).toBeLessThan(GROWTH_BOUND);
  });

  it('webhook_verification: an unsigned request is refused before its body is sent; 10 MiB signed-looking bodies on 40 connections stay within the buffer bound (503 ERR_SERVICE_862 past it)', async () => {
    // Unsigned: the head alone gets the 403; not a byte of the announced 10 MiB is read.
    const unsigned = await tlsConnect(port, { servername: 'mem.example.com', ca });
    const refused = await exchange(unsigned, `POST /hook HTTP/1.1\r\nhost: mem.example.com\r\ncontent-length: ${10 * 1024 * 1024}\r\n\r\n`, { quietMs: 2000 });
    unsigned.destroy();
    expect(refused.text).toMatch(/^HTTP\/1\.1 403/);
    expect(refused.text).toContain('ERR_SERVICE_782');

    const body = Buffer.alloc(10 * 1024 * 1024 - 1, 'a');
    const statuses: string[] = [];
    const { peak } = await peakGrowth(async () => {
      await Promise.all(Array.from({ length: 40 }, async () => {
        const socket = await tlsConnect(port, { servername: 'mem.example.com', ca });
        const head = `POST /hook HTTP/1.1\r\nhost: mem.example.com\r\nx-hub-signature-256: sha256=${'0'.repeat(64)}\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`;
        socket.write(head);
        // 400 MiB over TLS on a loaded 2-core CI machine: an answer may take well over 10 s to come.
        const r = await exchange(socket, body, { boundMs: 90_000 });
        socket.destroy();
        statuses.push(r.text.slice(0, 12));
        if (/^HTTP\/1\.1 503/.test(r.text)) expect(r.text).toContain('ERR_SERVICE_862');
      }));
    });
    // None was let through: 403 (wrong signature) once buffered, 503 when the buffer bound was spent.
    expect(statuses.filter((s) => /^HTTP\/1\.1 (403|503)/.test(s)).length, JSON.stringify(statuses)).toBeGreaterThan(30);
    expect(statuses.some((s) => /^HTTP\/1\.1 2/.test(s))).toBe(false);
    expect(statuses.some((s) => s.includes('503'))).toBe(true);
    expect(peak).toBeLessThan(GROWTH_BOUND);
  });

  it('websocket_tcp_converter: a frame over 1 MiB closes with 1009, and partial frames on 100 connections stay within the buffer bound (1013 past it)', async () => {
    const handshake = `GET /ws HTTP/1.1\r\nhost: mem.example.com\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: ${Buffer.alloc(16, 1).toString('base64')}\r\nsec-websocket-version: 13\r\n\r\n`;
    /** A masked binary frame's head announcing `length` bytes. */
    const frameHead = (length: number) => {
      const h = Buffer.alloc(14);
      h[0] = 0x82;
      h[1] = 0x80 | 127;
      h.writeBigUInt64BE(BigInt(length), 2);
      return h;
    };
    const opened = async () => {
      const socket = await tlsConnect(port, { servername: 'mem.example.com', ca, ALPNProtocols: ['http/1.1'] });
      const r = await exchange(socket, handshake, { want: 12 });
      expect(r.text).toMatch(/^HTTP\/1\.1 101/);
      return socket;
    };
    const big = await opened();
    const tooBig = await exchange(big, frameHead(2 * 1024 * 1024), { quietMs: 2000 });
    big.destroy();
    // The close frame: opcode 8, code 1009.
    expect(tooBig.data.subarray(-4).toString('hex')).toBe('880203f1');

    const closes = new Map<string, number>();
    const { peak } = await peakGrowth(async () => {
      await Promise.all(Array.from({ length: 100 }, async () => {
        const socket = await opened();
        // Most of a 1 MiB frame, never finished.
        const r = await exchange(socket, Buffer.concat([frameHead(1024 * 1024), Buffer.alloc(1024 * 1024 - 100, 7)]), { quietMs: 3000 });
        socket.destroy();
        const code = r.data.length >= 4 ? r.data.subarray(-4).toString('hex') : 'none';
        closes.set(code, (closes.get(code) ?? 0) + 1);
      }));
    });
    // Past the 64 MiB bound the connections closed with 1013 (0x3f5).
    expect(closes.get('880203f5') ?? 0).toBeGreaterThan(0);
    expect(peak).toBeLessThan(GROWTH_BOUND);
  });
});
