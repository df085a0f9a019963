// Issue 30, bad input on the version-2 agent listener: malformed frames, unknown frame types,
// oversized frames, streams before Auth, window abuse, stream floods, endless JSON and a peer
// that never authenticates are each bounded and closed with a logged reason; the server keeps
// serving, and a real SDK session beside them keeps answering.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import tls from 'node:tls';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readJson } from '../../server/gateway/v2/json.js';
import { agentToken, startIngress, type Ingress } from '../helpers/ingress.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { killServers } from '../helpers/serve.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

let ing: Ingress;
let agentPort: number;
let ca: string;
let upstream: http.Server;
let session: ngrok.Session;
let host: string;
let token: string;

const frame = (type: number, flags: number, id: number, body: Buffer = Buffer.alloc(0), length = body.length) => {
  const h = Buffer.alloc(8);
  h.writeUIntBE(length, 0, 3);
  h[3] = (type << 4) | flags;
  h.writeUInt32BE(id, 4);
  return Buffer.concat([h, body]);
};
const u32 = (n: number) => { const b = Buffer.alloc(4); b.writeUInt32BE(n >>> 0); return b; };
const SYN = 2;

interface Raw { socket: tls.TLSSocket; received: () => Buffer; closed: Promise<void> }

function raw(): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = tls.connect({ host: '127.0.0.1', port: agentPort, servername: 'localhost', ca }, () => resolve({ socket, received: () => Buffer.concat(chunks), closed }));
    socket.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise<void>((r) => socket.on('close', () => r()));
    socket.on('error', reject);
  });
}

/** Resolves once the server closed the connection; fails past `ms`. */
async function closedWithin(r: Raw, ms = 15_000) {
  await Promise.race([r.closed, new Promise((_, reject) => setTimeout(() => reject(new Error(`not closed within ${ms} ms`)), ms).unref())]);
}

/** The frames of a received byte run: [type, flags, stream, body]. */
function frames(b: Buffer): [number, number, number, Buffer][] {
  const out: [number, number, number, Buffer][] = [];
  for (let at = 0; at + 8 <= b.length;) {
    const len = b.readUIntBE(at, 3);
    out.push([b[at + 3] >> 4, b[at + 3] & 0xf, b.readUInt32BE(at + 4), b.subarray(at + 8, at + 8 + len)]);
    at += 8 + len;
  }
  return out;
}

const logged = (pattern: RegExp) => ing.lines().some((l) => typeof l.msg === 'string' && pattern.test(l.msg));

beforeAll(async () => {
  upstream = http.createServer((req, res) => res.end(`ok ${req.url}`));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  ing = await startIngress([443], { EDGEFORM_AGENT_LISTEN: '127.0.0.1:0', EDGEFORM_AGENT_MAX_SESSIONS_PER_CREDENTIAL: '1', EDGEFORM_AUTH_FAILURE_LIMIT: '3' });
  agentPort = Number(String(ing.lines().find((l) => typeof l.agent_listen === 'string')!.agent_listen).split(':').pop());
  ca = fs.readFileSync(path.join(ing.dataDir, 'ingress-ca.pem'), 'utf8');
  token = await agentToken(ing);
  session = await new ngrok.SessionBuilder().authtoken(token).serverAddr(`localhost:${agentPort}`).caCert(Buffer.from(ca)).connect();
  const l = await session.httpEndpoint().listenAndForward(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
  host = new URL(l.url()!).hostname;
});

afterAll(async () => {
  await session?.close().catch(() => {});
  upstream?.close();
  killServers();
  removeTempDirs();
});

describe('the version-2 listener bounds hostile input', () => {
  it('an unknown frame type closes the connection with a logged reason', async () => {
    const r = await raw();
    r.socket.write(frame(9, 0, 3, Buffer.from('xx')));
    await closedWithin(r);
    const away = frames(r.received()).find((f) => f[0] === 3);
    expect(away?.[3].subarray(8).toString()).toMatch(/unknown frame type 9/);
    await until(() => logged(/unknown frame type 9/), 5000, () => 'no log line names the reason');
  });

  it('a DATA frame longer than the stream window is refused from its header, before its body is buffered', async () => {
    const r = await raw();
    r.socket.write(frame(1, SYN, 3, Buffer.alloc(0), 16_000_000));
    await closedWithin(r);
    expect(frames(r.received()).find((f) => f[0] === 3)?.[3].subarray(8).toString()).toMatch(/over the 262144-byte stream window/);
  });

  it('malformed RST and WNDINC frames (wrong length, stream 0) close the connection', async () => {
    const r1 = await raw();
    r1.socket.write(frame(0, 0, 3, Buffer.alloc(2)));
    await closedWithin(r1);
    const r2 = await raw();
    r2.socket.write(frame(2, 0, 0, u32(5)));
    await closedWithin(r2);
  });

  it('a stream other than Auth or heartbeat before Auth closes the connection', async () => {
    const r = await raw();
    r.socket.write(frame(1, SYN, 3, u32(1)));
    await closedWithin(r);
    await until(() => logged(/stream type 1 before Auth/), 5000, () => 'no log line names the reason');
  });

  it('data past the stream window is window abuse and closes the connection', async () => {
    const r = await raw();
    r.socket.write(frame(1, SYN, 3, u32(0)));
    // Auth, never ending: 256 KiB of JSON opening brackets is the whole window; one more byte overruns it.
    for (let i = 0; i < 4; i++) r.socket.write(frame(1, 0, 3, Buffer.alloc(65_536, '[')));
    r.socket.write(frame(1, 0, 3, Buffer.from('[')));
    await closedWithin(r);
    const text = frames(r.received()).filter((f) => f[0] === 3).map((f) => f[3].subarray(8).toString()).join();
    expect(text).toMatch(/more than the 262144-byte window|over 262144 bytes/);
  });

  it('streams past the limit the agent may open are refused one by one; the connection stays', async () => {
    const r = await raw();
    // Heartbeat streams are allowed before Auth; 70 of them, 64 at most at once.
    for (let i = 0; i < 70; i++) r.socket.write(frame(1, SYN, 3 + 2 * i, u32(0xffffffff)));
    await until(() => frames(r.received()).filter((f) => f[0] === 0).length >= 6, 5000, () => `refusals: ${frames(r.received()).filter((f) => f[0] === 0).length}`);
    const refused = frames(r.received()).filter((f) => f[0] === 0);
    expect(refused.map((f) => f[3].readUInt32BE(0))).toEqual(Array(6).fill(5));
    expect(r.socket.destroyed).toBe(false);
    // A reused (not increasing) stream id is a protocol error.
    r.socket.write(frame(1, SYN, 3, u32(0xffffffff)));
    await closedWithin(r);
  });

  it('a peer that connects and never authenticates is closed after the Auth timeout', async () => {
    const r = await raw();
    await closedWithin(r, 20_000);
    await until(() => logged(/no Auth within/), 5000, () => 'no log line names the reason');
  });

  it('the SDK session beside them still answers', async () => {
    const res = await edgeRequest({ port: ing.port(443), host, path: '/after', ca });
    expect(res.text).toBe('ok /after');
  });
});

describe('the limits edgeform agent has apply to the SDK', () => {
  const refusal = (b: ngrok.SessionBuilder) => Promise.race([
    b.serverAddr(`localhost:${agentPort}`).caCert(Buffer.from(ca)).handleDisconnection(() => false).connect().then(() => 'connected', (e: Error) => e.message),
    new Promise<string>((r) => setTimeout(() => r('no answer within 15 s'), 15_000).unref()),
  ]);

  it('a second session of a credential allowed one is refused (ERR_SERVICE_840)', async () => {
    expect(await refusal(new ngrok.SessionBuilder().authtoken(token))).toMatch(/ERR_SERVICE_840/);
  });

  it('the acl is checked label by label and hostname by hostname (ERR_SERVICE_212)', async () => {
    const cred = await ing.api('POST', '/credentials', { acl: ['bind:app=allowed', 'bind:*.ok.example.com'] });
    const s = await new ngrok.SessionBuilder().authtoken(cred.body.token).serverAddr(`localhost:${agentPort}`).caCert(Buffer.from(ca)).connect();
    try {
      const up = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
      const denied = await s.labeledListener().label('app', 'other').listenAndForward(up).then(() => 'bound', (e: Error) => e.message);
      expect(denied).toMatch(/ERR_SERVICE_212/);
      const allowed = await s.labeledListener().label('app', 'allowed').listenAndForward(up);
      expect(allowed.id()).toMatch(/^tn_/);
      expect(await s.httpEndpoint().domain('x.elsewhere.example.com').listenAndForward(up).then(() => 'bound', (e: Error) => e.message)).toMatch(/ERR_SERVICE_212/);
      expect((await s.httpEndpoint().domain('x.ok.example.com').listenAndForward(up)).url()).toBe('https://x.ok.example.com');
    } finally {
      await s.close().catch(() => {});
    }
  });

  it('failed authentications count against the address (ERR_SERVICE_227 past the limit)', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) seen.push(await refusal(new ngrok.SessionBuilder().authtoken(`wrong-${i}`)));
    expect(seen.slice(0, 3).every((m) => /ERR_SERVICE_202/.test(m))).toBe(true);
    expect(seen[3]).toMatch(/ERR_SERVICE_227/);
  });
});

describe('readJson', () => {
  it('an endless JSON value is cut at the cap', async () => {
    const s = new PassThrough();
    const read = readJson(s, 5000, 1024).then(() => 'parsed', (e: Error) => e.message);
    s.write('{"a":"' + 'x'.repeat(2000));
    expect(await read).toMatch(/over 1024 bytes/);
  });

  it('one value without a delimiter or an end, split across chunks, with braces inside strings', async () => {
    const s = new PassThrough();
    const read = readJson(s, 5000);
    s.write('{"A":"}{\\"","B":[1,');
    s.write('{"c":2}]}');
    expect(await read).toEqual({ A: '}{"', B: [1, { c: 2 }] });
  });

  it('a message that never completes fails after its time', async () => {
    const s = new PassThrough();
    expect(await readJson(s, 100).then(() => 'parsed', (e: Error) => e.message)).toMatch(/within 100 ms/);
  });
});
