// One slow destination must not stall the others: black holes (TCP servers on loopback that
// accept and never answer) beside one healthy receiver. The healthy one gets its events
// while every black-hole send is still waiting; the black holes' sends end at the deadline
// and are retried with backoff; connections to one black hole stay under the per-origin cap.
// On PostgreSQL, two instances share the outbox: each event reaches the healthy receiver
// once, in order, while a black hole holds a claim of its own.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { receiver } from '../helpers/events.js';
import { eventually } from '../helpers/wait.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const TIMEOUT_MS = 1500;
const CAP = 2;

/**
 * Accepts connections and never writes a byte; counts how many the client holds open at once.
 * The count is taken a moment after each accept: a connection the client gave up just before
 * opening the next one may not have had its close read here yet.
 */
async function blackHole() {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  let maxOpen = 0;
  const server = net.createServer((socket) => {
    accepted++;
    sockets.add(socket);
    setTimeout(() => { maxOpen = Math.max(maxOpen, sockets.size); }, 100);
    socket.on('error', () => {});
    socket.on('end', () => sockets.delete(socket));
    socket.on('close', () => sockets.delete(socket));
    socket.resume();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/hook`;
  return {
    url,
    accepted: () => accepted,
    maxOpen: () => maxOpen,
    close: () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }),
  };
}

let s: TestServer;
let holes: Awaited<ReturnType<typeof blackHole>>[];
let healthy: Awaited<ReturnType<typeof receiver>>;
beforeAll(async () => {
  s = await startTestServer({ delivery: { timeoutMs: TIMEOUT_MS, backoffMs: 200, maxBackoffMs: 5_000, pollMs: 100, connectionsPerOrigin: CAP } });
  holes = await Promise.all([blackHole(), blackHole(), blackHole()]);
  healthy = await receiver();
});
afterAll(async () => {
  await s.close();
  await Promise.all([...holes.map((h) => h.close()), healthy.close()]);
});

const failures = (destinationId: string) =>
  s.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === 'event delivery failed; will retry' && l.destination_id === destinationId);

describe('event delivery with destinations that never answer', () => {
  it('delivers to the healthy destination while the black holes hang, retries them with backoff, and caps connections per origin', async () => {
    const destination = async (url: string) => (await s.post('/event_destinations', { target: { http: { url } } })).body.id as string;
    // Four destinations share the first black hole (one origin): more senders than the cap.
    const shared = await Promise.all([0, 1, 2, 3].map(() => destination(holes[0].url)));
    const single = await Promise.all(holes.slice(1).map((h) => destination(h.url)));
    const good = await destination(healthy.url);
    const stuck = [...shared, ...single];
    const sub = await s.post('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [...stuck, good] });
    expect(sub.status, sub.text).toBe(201);

    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await s.post('/ip_policies', { description: `p${i}` })).body.id);
    await eventually(async () => expect(healthy.received.map((r) => r.json.object.id)).toEqual(ids));
    // Every black hole has a send open and none has ended yet: the healthy one did not wait for them.
    for (const h of holes) expect(h.accepted()).toBeGreaterThan(0);
    expect(stuck.flatMap(failures)).toEqual([]);

    // Each black-hole send ends at its deadline and is retried after 200 ms, then 400 ms.
    await eventually(async () => {
      for (const id of stuck) expect(failures(id).length).toBeGreaterThanOrEqual(2);
    }, 30_000);
    for (const id of stuck) {
      const [first, second] = failures(id);
      expect(first).toMatchObject({ attempt: 1, retry_in_ms: 200, error: `no response within ${TIMEOUT_MS} ms`, event_id: expect.stringMatching(/^ev_/) });
      expect(second).toMatchObject({ attempt: 2, retry_in_ms: 400, event_id: first.event_id });
    }
    // A timed-out send gave its connection up: the retry connected anew.
    for (const h of holes.slice(1)) expect(h.accepted()).toBeGreaterThanOrEqual(2);
    expect(holes[0].maxOpen()).toBeLessThanOrEqual(CAP);
    expect(holes[0].maxOpen()).toBeGreaterThan(0);
    // Nothing was delivered twice to the healthy one while the others were retried.
    expect(healthy.received).toHaveLength(ids.length);
  }, 60_000);
});

const pgAvailable: boolean = postgresAvailable();
if (!pgAvailable) console.warn('\n*** SKIPPING the PostgreSQL delivery test: initdb is not on the PATH ***\n');

describe.skipIf(!pgAvailable)('event delivery from two instances on one PostgreSQL database', () => {
  it('delivers each event once and in order, neither instance waiting for the other or for the black hole', async () => {
    const pg = await startPostgres();
    const hole = await blackHole();
    const hook = await receiver();
    const servers: TestServer[] = [];
    try {
      const url = await pg.createDatabase('edgeform_delivery');
      const config = { databaseUrl: url, secretKey: randomBytes(32).toString('hex'), delivery: { timeoutMs: 20_000, backoffMs: 200, pollMs: 100 } };
      servers.push(await startTestServer(config));
      servers.push(await startTestServer(config));
      const [a, b] = servers;
      const good = (await a.post('/event_destinations', { target: { http: { url: hook.url } } })).body.id;
      const stuck = (await b.post('/event_destinations', { target: { http: { url: hole.url } } })).body.id;
      expect((await a.post('/event_subscriptions', { sources: [{ type: 'ip_policy_created.v0' }], destination_ids: [stuck, good] })).status).toBe(201);
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push((await servers[i % 2].post('/ip_policies', { description: `p${i}` })).body.id);
      await eventually(async () => expect(hook.received.map((r) => r.json.object.id)).toEqual(ids));
      // The black hole's first send is still waiting (its deadline is 20 s), held by one instance only.
      expect(hole.accepted()).toBe(1);
      expect([...a.logs, ...b.logs].filter((l) => l.includes('event delivery failed'))).toEqual([]);
      // Nothing more arrives: each event was sent once.
      await new Promise((r) => setTimeout(r, 500));
      expect(hook.received).toHaveLength(ids.length);
    } finally {
      for (const s of servers) await s.close();
      await Promise.all([hole.close(), hook.close()]);
      pg.stop();
    }
  }, 120_000);
});
