// The SIGTERM drain (server/http/drain.ts) on a real loopback server: a response in flight
// when draining begins is finished before its connection is closed, a connection idle long
// enough is closed at once, and drain() resolves when none is left.
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { drainable } from '../../server/http/drain.js';

const servers: http.Server[] = [];
afterEach(() => { for (const s of servers.splice(0)) s.closeAllConnections(); });

/** A server whose /slow answers when `release` is called; every other path at once. */
async function start(opts: { idleMs: number; deadlineMs: number }) {
  let release!: () => void;
  const released = new Promise<void>((r) => { release = r; });
  const server = http.createServer((req, res) => {
    if (req.url === '/slow') void released.then(() => res.end('slow'));
    else res.end('fast');
  });
  servers.push(server);
  const drain = drainable(server, opts);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as net.AddressInfo).port, drain, release };
}

/** A raw keep-alive connection: what it received, and whether the server closed it. */
function connect(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  const got = { text: '', closed: false };
  socket.on('data', (d) => { got.text += d.toString('latin1'); });
  socket.on('end', () => { got.closed = true; });
  socket.on('error', () => {});
  const send = (path: string) => socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  const until = async (what: () => boolean) => {
    for (let i = 0; i < 200 && !what(); i++) await new Promise((r) => setTimeout(r, 10));
    return what();
  };
  return { socket, got, send, until };
}

describe('drainable', () => {
  it('finishes a response in flight when draining begins, then closes its connection once idle', async () => {
    const s = await start({ idleMs: 50, deadlineMs: 5000 });
    const c = connect(s.port);
    c.send('/slow');
    await new Promise((r) => setTimeout(r, 50));
    let drained = false;
    const done = s.drain().then(() => { drained = true; });
    await new Promise((r) => setTimeout(r, 150));
    // Idle for longer than idleMs since the request began, but still answering: kept open.
    expect(c.got.closed).toBe(false);
    expect(drained).toBe(false);
    s.release();
    expect(await c.until(() => c.got.text.endsWith('slow'))).toBe(true);
    expect(await c.until(() => c.got.closed)).toBe(true);
    await done;
    expect(c.got.text).toMatch(/^HTTP\/1\.1 200 OK/);
  });

  it('closes a connection that had been idle long enough before draining at once, and one used after draining began once idle again', async () => {
    const s = await start({ idleMs: 400, deadlineMs: 5000 });
    const idle = connect(s.port);
    idle.send('/fast');
    expect(await idle.until(() => idle.got.text.endsWith('fast'))).toBe(true);
    const busy = connect(s.port);
    await new Promise((r) => setTimeout(r, 500));
    busy.send('/fast');
    expect(await busy.until(() => busy.got.text.endsWith('fast'))).toBe(true);
    const done = s.drain();
    expect(await idle.until(() => idle.got.closed)).toBe(true);
    // Its last request began just before draining: not idle for idleMs yet.
    expect(busy.got.closed).toBe(false);
    busy.send('/fast');
    expect(await busy.until(() => (busy.got.text.match(/fast/g) ?? []).length === 2)).toBe(true);
    expect(await busy.until(() => busy.got.closed)).toBe(true);
    await done;
  });
});
