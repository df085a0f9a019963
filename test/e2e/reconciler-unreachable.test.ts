// A wrong --api-url fails at once with a next step, while a server that answered and then
// went away for a moment (a restart in the middle of an apply) is waited for. The client
// retries network errors only once the address has answered in this run: before that, a
// refused or dropped connection is far likelier a wrong address than a restart, and eight
// seconds of retries only delay the message. Retries on 429 and 5xx are unchanged.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/ports.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { bigManifest, census, COMPLETE as complete, stackRunner, type StackRunner } from '../helpers/reconciler.js';

/** Something at the address that accepts connections and drops them without a word (not the API). */
async function dropper() {
  const state = { connections: 0 };
  const server = net.createServer((socket) => {
    state.connections++;
    socket.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, state, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/**
 * A proxy in front of the server that closes every connection after its answer, and stops
 * listening for `downMs` once it answers its `downAfter`th request: connections made
 * meanwhile are refused, as while a server restarts.
 */
async function restartingProxy(upstream: string, downAfter: number, downMs: number) {
  const state = { answered: 0, wentDown: false };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k))) as Record<string, string>;
      const up = await fetch(`${upstream}${req.url}`, { method: req.method, headers, body: chunks.length ? Buffer.concat(chunks) : undefined });
      const body = Buffer.from(await up.arrayBuffer());
      // Stop listening before this answer goes out: with one request at a time, the next
      // connection is refused cleanly (none is half-accepted, which would be a reset).
      if (++state.answered === downAfter) {
        state.wentDown = true;
        server.close();
        setTimeout(() => server.listen(port, '127.0.0.1'), downMs);
      }
      res.writeHead(up.status, { ...Object.fromEntries([...up.headers].filter(([k]) => !['content-length', 'transfer-encoding', 'connection', 'keep-alive'].includes(k))), connection: 'close' });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, state, close: () => new Promise<void>((r) => (server.listening ? server.close(() => r()) : r())) };
}

describe('reconciler: an unreachable API', () => {
  let s: TestServer;
  let r: StackRunner;
  let dir: string;

  beforeAll(async () => {
    s = await startTestServer();
    r = stackRunner(s, { EDGEFORM_STACK: 'unreachable' });
    dir = manifestDir({ 'big.yaml': bigManifest() });
  });
  afterAll(async () => {
    await s?.close();
  });

  it.each([
    { command: ['plan'], reason: 'the first call of a plan' },
    { command: ['apply', '--auto-approve'], reason: 'an apply reads before it writes' },
    { command: ['destroy', '--auto-approve'], reason: 'so does destroy' },
  ])('$command.0 at an address that refuses connections: exit 1, saying where it looked and what to do ($reason)', async ({ command }) => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const out = await r.run([...command, '-f', dir, '--api-url', url]);
    expect(out.code).toBe(1);
    expect(out.stderr).toBe(`Error: cannot reach the API at ${url} (connection refused): is the edgeform server running at ${url}? Start it with "edgeform serve", or set --api-url or EDGEFORM_API_URL to where it runs\n`);
    expect(out.stdout).toBe('');
  });

  it('export at an address that refuses connections: the same error, in one JSON document with --json for plan', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const exported = await r.run(['export', '--api-url', url]);
    expect(exported.code).toBe(1);
    expect(exported.stderr).toContain(`cannot reach the API at ${url} (connection refused)`);
    const json = await r.run(['plan', '-f', dir, '--json', '--api-url', url]);
    expect(json.code).toBe(1);
    expect(json.json().error).toContain(`is the edgeform server running at ${url}?`);
  });

  it('at an address that accepts connections and drops them: one connection, no retries, and the same kind of message', async () => {
    const d = await dropper();
    try {
      const out = await r.run(['plan', '-f', dir, '--api-url', d.url]);
      expect(out.code).toBe(1);
      expect(out.stderr).toContain(`cannot reach the API at ${d.url} (the connection was closed without an answer)`);
      expect(out.stderr).toContain(`is the edgeform server running at ${d.url}?`);
      // The plan's first request (which kinds hold the stack's resources) is dropped: one connection, not retried.
      expect(d.state.connections).toBe(1);
    } finally {
      await d.close();
    }
  });

  it('a server that answered and then refuses connections for a moment (a restart mid-apply): the apply waits for it and finishes', async () => {
    // Down after the refresh's reads and a few creates, for about a second. One request at
    // a time (one write per request: --batch-size 1), so that none is cut off half-way (a create cut off is not retried: it may
    // have happened; reconciler-interrupted.test.ts covers that).
    const proxy = await restartingProxy(s.url, 20, 1000);
    try {
      const out = await r.run(['apply', '-f', dir, '--auto-approve', '--parallelism', '1', '--batch-size', '1', '--api-url', proxy.url]);
      expect(proxy.state.wentDown).toBe(true);
      expect(out.code, out.stdout + out.stderr).toBe(0);
      expect(await census(s)).toEqual(complete);
    } finally {
      await proxy.close();
    }
  });
});
