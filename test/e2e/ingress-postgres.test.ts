// The ingress with two server instances on one PostgreSQL database (a throwaway cluster): a
// change made through one instance's API is served by the other's listener (NOTIFY, then a
// reload), and two instances racing to put edges of different kinds on one port cannot both
// succeed (the port is locked in the write transaction).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { startTestServer, TEST_SECRET_KEY, type TestServer } from '../helpers/server.js';
import { eventually } from '../helpers/wait.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the ingress-on-PostgreSQL suite: initdb is not on the PATH ***\n');

describe.skipIf(!available)('the ingress on PostgreSQL', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    pg = await startPostgres();
    const databaseUrl = await pg.createDatabase('ingress');
    const ingress = [{ publicPort: 443, host: '127.0.0.1', port: 0 }];
    a = await startTestServer({ databaseUrl, secretKey: TEST_SECRET_KEY, ingress });
    b = await startTestServer({ databaseUrl, secretKey: TEST_SECRET_KEY, ingress: ingress.map((l) => ({ ...l })) });
  });
  afterAll(async () => {
    await a?.close().catch(() => {});
    await b?.close().catch(() => {});
    pg?.stop();
  });

  it('serves on one instance what was changed through the other', async () => {
    const backend = (await a.post('/backends/http_response', { body: 'v1' })).body.id;
    const edge = (await a.post('/edges/https', { hostports: ['shared.example.com:443'] })).body.id;
    await a.post(`/edges/https/${edge}/routes`, { match_type: 'path_prefix', match: '/', backend: { backend_id: backend } });
    const fromB = () => edgeRequest({ port: ingressPort(b, 443), host: 'shared.example.com', ca: localCa(b) });
    await eventually(async () => expect((await fromB()).text).toBe('v1'), 5000);
    await a.patch(`/backends/http_response/${backend}`, { body: 'v2' });
    await eventually(async () => expect((await fromB()).text).toBe('v2'), 5000);
    // The instance that wrote serves the change on its next request.
    expect((await edgeRequest({ port: ingressPort(a, 443), host: 'shared.example.com', ca: localCa(a) })).text).toBe('v2');
  });

  it('lets only one of two racing instances put its kind of edge on a free port', async () => {
    for (let i = 0; i < 5; i++) {
      const port = 30000 + i;
      const [https, tcp] = await Promise.all([
        a.post('/edges/https', { hostports: [`race${i}.example.com:${port}`] }),
        b.post('/edges/tcp', { hostports: [`race${i}.tcp.example.com:${port}`] }),
      ]);
      expect([https.status, tcp.status].sort()).toEqual([201, 409]);
      expect([https.body.error_code, tcp.body.error_code]).toContain('ERR_SERVICE_700');
    }
  });
});
