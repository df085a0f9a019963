// Issue 30: "A session the SDK resumes after a dropped connection keeps its id", wherever it
// reconnects. The resume cookie's key is a sealed setting of the database, so a server that
// restarted (same database) and another instance of one PostgreSQL database both accept the
// cookie: the session keeps its id, and its tunnel its id and URL. The SDK reaches the server
// through a relay the test controls: it holds a connection until a listener is up (the SDK's
// reconnect backoff is 50 ms, then 2.5 s, then 125 s), and it can point at another instance.
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { startPostgres } from '../../scripts/pg-cluster.mjs';
import { credentialToken, sessions, tunnels } from '../helpers/agent.js';
import { pgAvailable } from '../helpers/databases.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { startTestServer, TEST_SECRET_KEY, type TestServer } from '../helpers/server.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

if (!pgAvailable) console.warn('\n*** SKIPPING the SDK resume suite on PostgreSQL: initdb is not on the PATH ***\n');

const within = <T>(p: Promise<T>, ms = 15_000, what = 'the SDK call') =>
  Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms).unref())]);

/** A TCP relay to whatever agent listener `target()` names now; a connection waits (up to 60 s) for one to accept. */
class Relay {
  readonly server: net.Server;
  readonly open = new Set<net.Socket>();
  accepted = 0;
  constructor(public target: () => number | undefined) {
    this.server = net.createServer((c) => {
      this.accepted++;
      this.open.add(c);
      c.on('close', () => this.open.delete(c));
      c.on('error', () => {});
      c.pause();
      const deadline = Date.now() + 60_000;
      const dial = () => {
        const port = this.target();
        if (c.destroyed) return;
        if (!port) return void (Date.now() < deadline ? setTimeout(dial, 50) : c.destroy());
        const up = net.connect(port, '127.0.0.1');
        up.once('error', () => {
          up.destroy();
          if (!c.destroyed && Date.now() < deadline) setTimeout(dial, 50);
          else c.destroy();
        });
        up.once('connect', () => {
          up.on('error', () => c.destroy());
          c.on('close', () => up.destroy());
          up.on('close', () => c.destroy());
          c.pipe(up).pipe(c);
          c.resume();
        });
      };
      dial();
    });
  }
  async listen() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return (this.server.address() as AddressInfo).port;
  }
  /** Cuts the SDK's side only: the server learns of the drop from the SDK's reconnect. */
  cutClients() {
    for (const c of this.open) {
      c.unpipe();
      c.destroy();
    }
  }
  close() {
    this.server.close();
    for (const c of this.open) c.destroy();
  }
}

const agentPortOf = (s: TestServer) => {
  const a = s.server.agentListener?.address;
  return a ? Number(a.split(':').pop()) : undefined;
};
const ingressPortOf = (s: TestServer) => Number(s.server.ingress!.listeners[0].address.split(':').pop());

let upstream: http.Server;
let upstreamPort: number;
const held: ngrok.Session[] = [];
const relays: Relay[] = [];

beforeAll(async () => {
  upstream = http.createServer((req, res) => res.end(`resumed upstream ${req.url}`));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamPort = (upstream.address() as AddressInfo).port;
});

afterAll(async () => {
  for (const s of held) await within(s.close(), 5000).catch(() => {});
  for (const r of relays) r.close();
  upstream?.close();
  removeTempDirs();
});

async function sdkThrough(relay: Relay, token: string, ca: string, metadata: string) {
  const port = await relay.listen();
  const session = await within(new ngrok.SessionBuilder().authtoken(token).serverAddr(`localhost:${port}`).caCert(Buffer.from(ca)).metadata(metadata)
    .handleDisconnection(() => true).handleRestartCommand(() => {}).handleStopCommand(() => {}).connect(), 15_000, 'connect()');
  held.push(session);
  const listener = await within(session.httpEndpoint().listenAndForward(`http://127.0.0.1:${upstreamPort}`), 15_000, 'listen');
  return { session, listener };
}

describe('a session resumed after a server restart keeps its id (SQLite)', () => {
  let s: TestServer;
  /** The server serving now (another one on the same folder after the key rotation). */
  let current: TestServer | undefined;
  let running = true;
  let ca: string;
  const options = { secretKey: TEST_SECRET_KEY, agentHeartbeatMs: 2000, agentListen: { host: '127.0.0.1', port: 0 }, ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] };
  afterAll(async () => { await current?.close().catch(() => {}); });

  it('the SDK reconnects to the restarted server with its cookie: same session id, same started_at, same tunnel id and URL, answering', async () => {
    s = current = await startTestServer(options);
    const { token } = await credentialToken(s);
    ca = fs.readFileSync(s.server.agentListener!.caFile, 'utf8');
    const relay = new Relay(() => (running && current ? agentPortOf(current) : undefined));
    relays.push(relay);
    const { listener } = await sdkThrough(relay, token, ca, 'restarted server');
    await until(async () => (await tunnels(s)).some((t) => t.public_url === listener.url()), 10_000, () => 'the bound tunnel is not listed');
    const [before] = await sessions(s);
    const [tunnelBefore] = await tunnels(s);
    expect(tunnelBefore.public_url).toBe(listener.url());

    running = false;
    await s.restart();
    running = true;
    // The graceful stop ended the session's rows; the SDK's resume writes them again with the same ids.
    await until(async () => (await sessions(s)).length === 1 && (await tunnels(s)).length === 1, 20_000, () => 'the SDK did not resume on the restarted server');
    const [after] = await sessions(s);
    expect(after.id).toBe(before.id);
    expect(after.started_at).toBe(before.started_at);
    expect(after.metadata).toBe('restarted server');
    const [tunnelAfter] = await tunnels(s);
    expect([tunnelAfter.id, tunnelAfter.public_url]).toEqual([tunnelBefore.id, tunnelBefore.public_url]);
    const host = new URL(listener.url()!).hostname;
    const r = await edgeRequest({ port: ingressPortOf(s), host, path: '/after-restart', ca });
    expect([r.status, r.text]).toEqual([200, 'resumed upstream /after-restart']);
    expect(s.logs.some((l) => /agent session resumed \(version 2\)/.test(l))).toBe(true);
  });

  it('a restart command still gives the reconnecting SDK a new session id (the cookie of a restarted session no longer resumes it)', async () => {
    const [first] = await sessions(s);
    expect((await s.post(`/tunnel_sessions/${first.id}/restart`, {})).status).toBe(204);
    await until(async () => (await sessions(s)).some((x) => x.id !== first.id), 20_000, () => 'no new session after restart');
    expect((await sessions(s)).map((x) => x.id)).not.toContain(first.id);
  });

  it('the resume key is a sealed setting: after a secret-key rotation it is re-sealed, and the session still resumes with its id', { timeout: 120_000 }, async () => {
    const [before] = await sessions(s);
    // The session is listed once its row is written, before the SDK has its cookie; it has it
    // once it binds its tunnel again on that session. Stopping the server in between would
    // leave the SDK with the previous, restarted session's cookie, which no longer resumes.
    await until(() => s.logs.some((l) => /agent tunnel bound \(version 2\)/.test(l) && l.includes(before.id)), 20_000, () => `the SDK did not bind its tunnel on ${before.id}`);
    const row = await s.server.db.prisma.setting.findUnique({ where: { key: 'sealed:agent_resume_key' } });
    expect(row?.value).toBeTruthy();
    running = false;
    await s.stop();
    const nextKey = 'ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100';
    current = await startTestServer({ ...options, dir: s.dir, secretKey: nextKey, secretKeyPrevious: TEST_SECRET_KEY });
    running = true;
    const after = current;
    const resealed = (await after.server.db.prisma.setting.findUnique({ where: { key: 'sealed:agent_resume_key' } }))!.value;
    expect(resealed).not.toBe(row!.value);
    // A start with a key rotation can take several seconds on a loaded machine; the relay holds the SDK's attempt meanwhile.
    await until(() => after.logs.some((l) => /agent session resumed \(version 2\)/.test(l)), 60_000, () => `the SDK did not resume after the rotation; the server logged:\n${after.logs.filter((l) => /agent|session|resume/i.test(l)).slice(-20).join('\n')}`);
    await until(async () => (await sessions(after)).length === 1, 10_000, () => 'the session is not listed');
    expect((await sessions(after))[0].id).toBe(before.id);
  });
});

describe.skipIf(!pgAvailable)('a session resumed on another instance keeps its id (PostgreSQL)', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    pg = await startPostgres();
    const url = await pg.createDatabase('sdk_resume');
    // A lease is stale after three fifths of the heartbeat interval, when the other instance sweeps
    // it: 2 s (1.2 s) was within the event-loop stalls of a loaded 2-core machine.
    const options = { databaseUrl: url, agentHeartbeatMs: 5000, secretKey: TEST_SECRET_KEY, agentListen: { host: '127.0.0.1', port: 0 }, ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] };
    a = await startTestServer(options);
    b = await startTestServer(options);
  });
  afterAll(async () => {
    await a?.close().catch(() => {});
    await b?.close().catch(() => {});
    pg?.stop();
  });

  it('the SDK moves from instance a to instance b: the same session id and tunnel, listed once by both; a lets go of it without deleting it', async () => {
    const { token } = await credentialToken(a);
    const ca = fs.readFileSync(a.server.agentListener!.caFile, 'utf8');
    expect(fs.readFileSync(b.server.agentListener!.caFile, 'utf8')).toBe(ca);
    let to = a;
    const relay = new Relay(() => agentPortOf(to));
    relays.push(relay);
    const { listener } = await sdkThrough(relay, token, ca, 'moved');
    const [before] = await sessions(b);
    const [tunnelBefore] = await tunnels(b);
    expect((await sessions(a)).map((x) => x.id)).toEqual([before.id]);

    // The SDK's connection to a is cut on the SDK's side; a still holds it (silent) when the SDK reaches b.
    to = b;
    const accepted = relay.accepted;
    relay.cutClients();
    await until(() => relay.accepted > accepted, 15_000, () => 'the SDK did not reconnect');
    await until(() => b.logs.some((l) => /agent session resumed \(version 2\)/.test(l)), 20_000, () => 'the SDK did not resume its session on b');
    // The takeover deleted the tunnel rows a wrote; the SDK binds its tunnel again on b (its token vouches for the id and URL).
    await until(() => b.logs.some((l) => /agent tunnel bound \(version 2\)/.test(l)), 20_000, () => 'the tunnel was not bound again on b');
    // a lets go of the session once it sees b holds it, without deleting its rows.
    await until(() => a.logs.some((l) => /let go of here/.test(l)), 15_000, () => 'a did not let go of the session');
    for (const s of [a, b]) {
      const list = await sessions(s);
      expect(list.map((x) => x.id)).toEqual([before.id]);
      expect(list[0]).toMatchObject({ transport: 'service/v2', metadata: 'moved', started_at: before.started_at });
      expect((await tunnels(s)).map((t) => [t.id, t.public_url])).toEqual([[tunnelBefore.id, listener.url()]]);
    }
    const host = new URL(listener.url()!).hostname;
    const r = await edgeRequest({ port: ingressPortOf(b), host, path: '/on-b', ca });
    expect([r.status, r.text]).toEqual([200, 'resumed upstream /on-b']);
    // Commands sent to a reach the SDK where it is now (b holds the lease).
    expect((await a.post(`/tunnel_sessions/${before.id}/restart`, {})).status).toBe(204);
    await until(async () => (await sessions(a)).some((x) => x.id !== before.id), 20_000, () => 'no new session after restart');
    expect((await sessions(b)).map((x) => x.id)).not.toContain(before.id);
    // A stop carried out on b refuses the SDK's reconnects on a too (the record is in the database).
    const [second] = await sessions(b);
    to = a;
    expect((await b.post(`/tunnel_sessions/${second.id}/stop`, {})).status).toBe(204);
    await until(() => a.logs.some((l) => /Auth refused: ERR_SERVICE_113/.test(l)), 20_000, () => 'a did not refuse the stopped session\'s reconnect');
    expect(await sessions(a)).toEqual([]);
  });
});
