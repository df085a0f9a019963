// The idle timeout of HTTP/1.1 connections (ListenerLimits.idleTimeoutMs, 60 s by default;
// 600 ms here) is kept by a sweep over the connections rather than a socket timer re-armed on
// every read and write: a connection that moves no byte for that long is closed, one whose
// bytes keep coming is not, however long it takes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TLSSocket } from 'node:tls';
import { edgeAnswering, ingressPort, localCa, tlsConnect } from '../helpers/ingress-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

let s: TestServer;
let port: number;
let ca: string;

beforeAll(async () => {
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }], ingressLimits: { idleTimeoutMs: 600 } });
  port = ingressPort(s, 443);
  ca = localCa(s);
  await edgeAnswering(s, 'app.example.com', 'app content');
});

afterAll(async () => {
  await s?.close().catch(() => {});
});

function watch(socket: TLSSocket) {
  const seen = { text: '', closed: false };
  socket.on('data', (c: Buffer) => { seen.text += c.toString(); });
  socket.on('close', () => { seen.closed = true; });
  socket.on('error', () => {});
  return seen;
}

describe('idle HTTP/1.1 connections', () => {
  it('closes a connection that moves no byte for the idle time (sooner than the 5 s keep-alive)', async () => {
    const socket = await tlsConnect(port, { servername: 'app.example.com', ca });
    const seen = watch(socket);
    socket.write('GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n');
    await until(() => seen.text.includes('app content'), 5000);
    await until(() => seen.closed, 3000, () => 'the idle connection was not closed');
  });

  it('keeps a connection whose bytes keep coming past the idle time, and closes it once they stop', async () => {
    const socket = await tlsConnect(port, { servername: 'app.example.com', ca });
    const seen = watch(socket);
    socket.write('POST / HTTP/1.1\r\nHost: app.example.com\r\nContent-Length: 100000\r\n\r\n');
    // A byte every 100 ms for 2 s: more than three idle times in all, never one without a byte.
    for (let i = 0; i < 20; i++) {
      socket.write('x');
      await new Promise((r) => setTimeout(r, 100));
      expect(seen.closed, `closed after ${i + 1} bytes`).toBe(false);
    }
    expect(seen.text).toContain('app content');
    await until(() => seen.closed, 3000, () => 'the stalled connection was not closed');
  });
});
