// 1 GiB each way through server -> agent -> upstream, generated on the fly (no file), checked
// by length and a running SHA-256 on the receiving side, while the server's and the agent's
// processes keep their memory bounded: nothing on the way buffers a body, every hop waits
// for the next (HTTP/2 flow control between server and agent, socket backpressure around).
// The server runs in its own process (test/helpers/gateway-process.ts), with a plain HTTP
// front into gateway.openStream standing in for the ingress; and again through the ingress's
// HTTP handler, over a pooled upstream connection (server/gateway/relay-pool.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type AgentProcess } from '../helpers/agent.js';

const GiB = 1024 ** 3;
const CHUNK = 256 * 1024;
/** Peak RSS growth allowed to each process while 1 GiB goes through (buffering it would need 1 GiB). */
const MAX_GROWTH_MB = 150;

/** Feeds `total` bytes to `write` in chunks of one random block stamped with the chunk's index, hashing them. */
async function generate(total: number, write: (chunk: Buffer) => boolean, waitDrain: () => Promise<void>) {
  const block = randomBytes(CHUNK);
  const hash = createHash('sha256');
  for (let sent = 0, i = 0; sent < total; i++) {
    const chunk = Buffer.from(block.subarray(0, Math.min(CHUNK, total - sent)));
    chunk.writeUInt32BE(i, 0);
    hash.update(chunk);
    sent += chunk.length;
    // The drain listener goes on in the same tick as the write: a drain comes a tick later at the earliest.
    if (!write(chunk)) await waitDrain();
  }
  return hash.digest('hex');
}

/** RSS now and its peak so far (MB), from /proc. */
function memoryOf(pid: number) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)![1]);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

let server: ChildProcess;
let front: string;
let ingress: string;
let agent: AgentProcess;
let upstream: http.Server;
let tunnel: string;
/** What the upstream last received: length and digest. */
let received: Promise<{ bytes: number; sha256: string }> | undefined;
/** What the upstream last sent. */
let sentDigest: Promise<string> | undefined;

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    if (req.url === '/sink') {
      received = new Promise((resolve) => {
        const hash = createHash('sha256');
        let bytes = 0;
        req.on('data', (c: Buffer) => { hash.update(c); bytes += c.length; });
        req.on('end', () => {
          const r = { bytes, sha256: hash.digest('hex') };
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(r));
          resolve(r);
        });
      });
    } else if (req.url?.startsWith('/source/')) {
      const n = Number(req.url.slice('/source/'.length));
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(n) });
      sentDigest = generate(n, (c) => res.write(c), () => new Promise((r) => res.once('drain', r)));
      void sentDigest.then(() => res.end());
    } else res.writeHead(404).end();
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  server = spawn(process.execPath, ['--import', 'tsx', path.resolve(import.meta.dirname, '../helpers/gateway-process.ts')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const ready = await new Promise<{ url: string; front: string; ingress: string; token: string }>((resolve, reject) => {
    let out = '';
    server.stdout!.on('data', (c) => { out += c; if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0])); });
    server.on('exit', (code) => reject(new Error(`the server process exited (${code})`)));
  });
  front = ready.front;
  ingress = ready.ingress;
  agent = startAgent(['--api-url', ready.url, '--authtoken', ready.token, '--label', 'app=big', '--forwards-to', `127.0.0.1:${(upstream.address() as AddressInfo).port}`]);
  await agent.waitFor('online: tn_');
  tunnel = /online: (tn_\w+)/.exec(agent.output())![1];
  // A first small request through each hop, so the baseline has every code path loaded.
  const warm = await fetch(`${front}/${tunnel}/source/1000`);
  expect((await warm.arrayBuffer()).byteLength).toBe(1000);
}, 120_000);

afterAll(async () => {
  agent?.kill();
  server?.kill('SIGKILL');
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

/** Runs `transfer` and returns each process's peak RSS growth over its RSS before (MB). */
async function growthDuring(transfer: () => Promise<void>) {
  const before = { server: memoryOf(server.pid!), agent: memoryOf(agent.child.pid!) };
  await transfer();
  const after = { server: memoryOf(server.pid!), agent: memoryOf(agent.child.pid!) };
  const growth = { server: after.server.peak - before.server.rss, agent: after.agent.peak - before.agent.rss };
  console.log(`peak RSS growth, MB: server ${growth.server.toFixed(0)}, agent ${growth.agent.toFixed(0)} (RSS before: ${before.server.rss.toFixed(0)}, ${before.agent.rss.toFixed(0)})`);
  return growth;
}

/** Where a transfer goes: into gateway.openStream (a stream of its own), or through the ingress's handler (a pooled connection). */
interface Route { url: (p: string) => string; headers: Record<string, string>; before: () => Promise<void>; after: () => Promise<void> }

const relayedCounts = async (): Promise<{ pooled: number; stream: number }> => (await fetch(`${front}/_relayed`)).json() as never;
const viaStream: Route = { url: (p) => `${front}/${tunnel}${p}`, headers: {}, before: async () => {}, after: async () => {} };
let pooledBefore = 0;
const viaPool: Route = {
  url: (p) => `${ingress}${p}`,
  headers: { host: 'big.example.com' },
  // Small requests until one went over a pooled connection: the big one then takes it.
  before: async () => {
    const start = (await relayedCounts()).pooled;
    for (let i = 0; i < 50 && (await relayedCounts()).pooled === start; i++) {
      const length = await new Promise<number>((resolve, reject) => {
        http.get(`${ingress}/source/10`, { headers: { host: 'big.example.com' } }, (res) => {
          let n = 0;
          res.on('data', (c: Buffer) => { n += c.length; });
          res.on('end', () => resolve(n));
        }).on('error', reject);
      });
      expect(length).toBe(10);
    }
    pooledBefore = (await relayedCounts()).pooled;
    expect(pooledBefore).toBeGreaterThan(start);
  },
  after: async () => { expect((await relayedCounts()).pooled).toBe(pooledBefore + 1); },
};

describe.each([['as its own stream', viaStream], ['over a pooled upstream connection', viaPool]] as const)('1 GiB through the tunnel, streamed, %s', (_name, via) => {
  it('an upload reaches the upstream whole, and neither the server nor the agent holds it', async () => {
    let sent = '';
    await via.before();
    const growth = await growthDuring(async () => {
      const req = http.request(via.url('/sink'), { method: 'PUT', headers: { ...via.headers, 'content-type': 'application/octet-stream', 'content-length': String(GiB) } });
      const answered = new Promise<string>((resolve, reject) => {
        req.on('response', (res) => { let t = ''; res.setEncoding('utf8'); res.on('data', (c) => { t += c; }); res.on('end', () => resolve(t)); });
        req.on('error', reject);
      });
      sent = await generate(GiB, (c) => req.write(c), () => new Promise((r) => req.once('drain', r)));
      req.end();
      expect(JSON.parse(await answered)).toEqual({ bytes: GiB, sha256: sent });
    });
    expect(await received).toEqual({ bytes: GiB, sha256: sent });
    expect(growth.server).toBeLessThan(MAX_GROWTH_MB);
    expect(growth.agent).toBeLessThan(MAX_GROWTH_MB);
    await via.after();
  }, 180_000);

  it('a download reaches the client whole, and neither the server nor the agent holds it', async () => {
    let got = { bytes: 0, sha256: '' };
    await via.before();
    const growth = await growthDuring(async () => {
      got = await new Promise((resolve, reject) => {
        http.get(via.url(`/source/${GiB}`), { headers: via.headers }, (res) => {
          const hash = createHash('sha256');
          let bytes = 0;
          res.on('data', (c: Buffer) => { hash.update(c); bytes += c.length; });
          res.on('end', () => resolve({ bytes, sha256: hash.digest('hex') }));
          res.on('error', reject);
        }).on('error', reject);
      });
    });
    expect(got).toEqual({ bytes: GiB, sha256: await sentDigest });
    expect(growth.server).toBeLessThan(MAX_GROWTH_MB);
    expect(growth.agent).toBeLessThan(MAX_GROWTH_MB);
    await via.after();
  }, 180_000);
});
