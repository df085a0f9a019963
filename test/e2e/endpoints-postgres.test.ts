// Cloud endpoints on PostgreSQL (a throwaway cluster): the one-URL rule holds under a race
// (the URL's name lock orders the writers: of ten concurrent creates of one URL without
// pooling exactly one is made, the others 409), while ten pooled creates all succeed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { postgresAvailable, startPostgres } from '../../scripts/pg-cluster.mjs';
import { startTestServer, type TestServer } from '../helpers/server.js';

const available: boolean = postgresAvailable();
if (!available) console.warn('\n*** SKIPPING the endpoints-on-PostgreSQL suite: initdb is not on the PATH ***\n');

const POLICY = JSON.stringify({ on_http_request: [{ actions: [{ type: 'deny' }] }] });

describe.skipIf(!available)('cloud endpoints on PostgreSQL', () => {
  let pg: { createDatabase(name: string): Promise<string>; stop(): void };
  let s: TestServer;
  beforeAll(async () => {
    pg = await startPostgres();
    s = await startTestServer({ databaseUrl: await pg.createDatabase('endpoints') });
  });
  afterAll(async () => {
    await s?.close().catch(() => {});
    pg?.stop();
  });

  it('ten concurrent creates of one URL without pooling: one is made, nine are 409', async () => {
    const replies = await Promise.all(Array.from({ length: 10 }, () => s.post('/endpoints', { url: 'https://race.example.com', traffic_policy: POLICY })));
    expect(replies.map((r) => r.status).sort()).toEqual([201, ...Array(9).fill(409)]);
    const listed = await s.get(`/endpoints?filter=${encodeURIComponent('obj.url == "https://race.example.com"')}`);
    expect(listed.body.endpoints).toHaveLength(1);
  });

  it('ten concurrent pooled creates of one URL all succeed', async () => {
    const replies = await Promise.all(Array.from({ length: 10 }, () => s.post('/endpoints', { url: 'https://pool.internal', pooling_enabled: true, traffic_policy: POLICY })));
    expect(replies.map((r) => r.status)).toEqual(Array(10).fill(201));
  });
});
