// Issue 30: the SDK's sessions on two instances of one PostgreSQL database. Both instances
// list the session the SDK holds on one of them; restart and stop sent to the other instance
// reach the SDK (LISTEN/NOTIFY) and are carried out where its connection is; its endpoint
// answers through the ingress of the instance it is connected to, and through the other's
// (issue 33: the other instance relays to it over the peer channel).
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { credentialToken, sessions } from '../helpers/agent.js';
import { edgeRequest } from '../helpers/ingress-client.js';
import { startTestServer, TEST_SECRET_KEY, type TestServer } from '../helpers/server.js';
import { removeTempDirs } from '../helpers/temp.js';
import { until } from '../helpers/wait.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the SDK PostgreSQL suite: initdb is not on the PATH ***\n');

const within = <T>(p: Promise<T>, ms = 15_000) => Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms).unref())]);

describe.skipIf(!available)('SDK sessions on several instances (PostgreSQL)', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  let a: TestServer;
  let b: TestServer;
  let upstream: http.Server;
  const held: ngrok.Session[] = [];

  beforeAll(async () => {
    pg = await startPostgres();
    const url = await pg.createDatabase('sdk_agents');
    const options = { databaseUrl: url, agentHeartbeatMs: 2000, secretKey: TEST_SECRET_KEY, agentListen: { host: '127.0.0.1', port: 0 }, ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }], peerListen: { host: '127.0.0.1', port: 0 } };
    a = await startTestServer(options);
    b = await startTestServer(options);
    upstream = http.createServer((req, res) => res.end(`pg upstream ${req.url}`));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    for (const s of held) await within(s.close(), 5000).catch(() => {});
    upstream?.close();
    await a?.close().catch(() => {});
    await b?.close().catch(() => {});
    pg?.stop();
    removeTempDirs();
  });

  it('the session is listed by both; its endpoint answers on both instances; restart and stop sent to the other instance are carried out', async () => {
    const { token } = await credentialToken(a);
    const ca = fs.readFileSync(a.server.agentListener!.caFile, 'utf8');
    const got: string[] = [];
    const session = await within(new ngrok.SessionBuilder().authtoken(token).serverAddr(`localhost:${a.server.agentListener!.address.split(':').pop()}`)
      .caCert(Buffer.from(ca)).metadata('on pg')
      .handleRestartCommand(() => { got.push('restart'); }).handleStopCommand(() => { got.push('stop'); }).connect());
    held.push(session);
    const l = await within(session.httpEndpoint().listenAndForward(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`));
    const host = new URL(l.url()!).hostname;
    const r = await edgeRequest({ port: Number(a.server.ingress!.listeners[0].address.split(':').pop()), host, path: '/pg', ca });
    expect(r.text).toBe('pg upstream /pg');
    const throughB = () => edgeRequest({ port: Number(b.server.ingress!.listeners[0].address.split(':').pop()), host, path: '/pg-b', ca }).catch(() => undefined);
    await until(async () => (await throughB())?.text === 'pg upstream /pg-b', 20_000, () => 'the SDK endpoint held by instance a does not answer through instance b');
    const [first] = await sessions(a);
    expect((await sessions(b)).map((x) => x.id)).toEqual([first.id]);
    expect(first.transport).toBe('service/v2');

    expect((await b.post(`/tunnel_sessions/${first.id}/restart`, {})).status).toBe(204);
    await until(async () => (await sessions(b)).some((x) => x.id !== first.id), 20_000, () => 'no new session after restart');
    const [second] = await sessions(b);
    expect(second.id).not.toBe(first.id);
    expect((await b.post(`/tunnel_sessions/${second.id}/stop`, {})).status).toBe(204);
    await until(async () => (await sessions(a)).length === 0, 10_000, () => 'the stopped session is still listed');
    expect(got).toEqual(['restart', 'stop']);
  });
});
