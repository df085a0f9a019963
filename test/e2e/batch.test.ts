// POST /_edgeform/batch (docs/api.md, "Batches"), on a real server: operations run in
// order, each as its request alone would (status, body, error with its own operation id, its
// own request-log line), one failure stopping nothing else; the batch's own bounds; and how
// it counts against the per-key API rate limit (one request per 10 operations).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

const BATCH = '/_edgeform/batch';

describe('a batch', () => {
  let s: TestServer;
  const logs: string[] = [];

  beforeAll(async () => {
    s = await startTestServer({ log: (l) => logs.push(l) });
  }, 60_000);

  afterAll(async () => {
    await s?.close();
  });

  it('runs creates, updates, module replacements and deletes in order, each answered as alone, and logged on its own line', async () => {
    const policy = (await s.post('/ip_policies', { description: 'before' })).body;
    const edge = (await s.post('/edges/https', { hostports: ['batch.example.com:443'] })).body;
    const route = (await s.post(`/edges/https/${edge.id}/routes`, { match_type: 'path_prefix', match: '/' })).body;
    const doomed = (await s.post('/ip_policies', {})).body;
    const r = await s.post(BATCH, {
      operations: [
        { method: 'POST', path: '/ip_policy_rules', body: { ip_policy_id: policy.id, cidr: '10.0.0.0/8', action: 'deny' } },
        { method: 'PATCH', path: `/ip_policies/${policy.id}`, body: { description: 'after' } },
        { method: 'PUT', path: `/edges/https/${edge.id}/routes/${route.id}/ip_restriction`, body: { ip_policy_ids: [policy.id] } },
        { method: 'DELETE', path: `/ip_policies/${doomed.id}` },
        { method: 'POST', path: '/ip_policies/', body: {} },
      ],
    });
    expect(r.status).toBe(200);
    const results = r.body.results;
    expect(results.map((x: any) => x.status)).toEqual([201, 200, 200, 204, 201]);
    expect(results[0].body).toMatchObject({ cidr: '10.0.0.0/8', action: 'deny', ip_policy: { id: policy.id } });
    expect(results[1].body.description).toBe('after');
    expect(results[2].body.ip_policies.map((p: any) => p.id)).toEqual([policy.id]);
    expect(results[3].body).toBeUndefined();
    expect(results[4].body.id).toMatch(/^ipp_/);
    // Each as alone: readable afterwards, the deleted one gone.
    expect((await s.get(`/ip_policy_rules/${results[0].body.id}`)).status).toBe(200);
    expect((await s.get(`/ip_policies/${policy.id}`)).body.description).toBe('after');
    expect((await s.get(`/ip_policies/${doomed.id}`)).status).toBe(404);
    // One request-log line per operation, with its own operation id and the batch's.
    const batchId = r.headers.get('service-operation-id');
    const lines = logs.map((l) => JSON.parse(l)).filter((e) => e.batch_operation_id === batchId);
    expect(lines.map((e) => `${e.method} ${e.status} ${e.operation_id}`)).toEqual(results.map((x: any, i: number) => `${['POST', 'PATCH', 'PUT', 'DELETE', 'POST'][i]} ${x.status} ${x.operation_id}`));
    expect(new Set(results.map((x: any) => x.operation_id)).size).toBe(5);
  });

  it('answers each failing operation with the error its request alone would get, and runs the rest', async () => {
    const policy = (await s.post('/ip_policies', {})).body;
    await s.post('/ip_policy_rules', { ip_policy_id: policy.id, cidr: '192.0.2.0/24', action: 'allow' });
    const r = await s.post(BATCH, {
      operations: [
        { method: 'POST', path: '/ip_policy_rules', body: { ip_policy_id: policy.id, cidr: '192.0.2.0/24', action: 'allow' } },
        { method: 'POST', path: '/ip_policies', body: { colour: 'blue' } },
        { method: 'POST', path: '/ip_policy_rules', body: { ip_policy_id: policy.id, cidr: 'not a cidr', action: 'allow' } },
        { method: 'PATCH', path: '/ip_policies/ipp_0000000000000000000000000000', body: {} },
        { method: 'DELETE', path: '/ip_policies/edghts_0000000000000000000000000000' },
        { method: 'POST', path: '/no_such_things', body: {} },
        { method: 'PUT', path: `/ip_policies/${policy.id}`, body: {} },
        { method: 'POST', path: BATCH, body: { operations: [] } },
        { method: 'POST', path: '/_edgeform/fingerprints', body: { stack: 'x', items: [] } },
        { method: 'DELETE', path: `/ip_policies/${policy.id}?force=1` },
        { method: 'DELETE', path: `/ip_policies/${policy.id}`, body: {} },
        { method: 'POST', path: '/ip_policy_rules', body: { ip_policy_id: policy.id, cidr: '198.51.100.0/24', action: 'deny' } },
      ],
    });
    expect(r.status).toBe(200);
    const results = r.body.results;
    expect(results.map((x: any) => `${x.status} ${x.body?.error_code ?? ''}`)).toEqual([
      '409 ERR_SERVICE_320', '400 ERR_SERVICE_102', '400 ERR_SERVICE_103', '404 ERR_SERVICE_300', '400 ERR_SERVICE_105', '404 ERR_SERVICE_301',
      '405 ERR_SERVICE_310', '400 ERR_SERVICE_114', '400 ERR_SERVICE_114', '400 ERR_SERVICE_104', '400 ERR_SERVICE_103', '201 ',
    ]);
    // SPEC's error body, with this operation's id.
    for (const x of results.slice(0, -1)) {
      expect(x.body).toMatchObject({ error_code: expect.any(String), status_code: x.status, msg: expect.any(String), details: { operation_id: x.operation_id } });
    }
    expect(results[2].body.details.field).toBe('cidr');
    expect(results[6].body.details.allow).toContain('PATCH');
    // The same as a request alone.
    const alone = await s.post('/ip_policies', { colour: 'blue' });
    expect({ status: alone.status, code: alone.body.error_code, msg: alone.body.msg }).toEqual({ status: results[1].status, code: results[1].body.error_code, msg: results[1].body.msg });
    expect((await s.get(`/ip_policies/${policy.id}`)).status).toBe(200);
  });

  it('is refused whole, running nothing, when it is not a batch of 1 to 100 operations', async () => {
    const before = (await s.get('/ip_policies?limit=100')).body.ip_policies.length;
    const one = { method: 'POST', path: '/ip_policies', body: {} };
    const cases: [unknown, string, string][] = [
      [{ operations: [] }, 'ERR_SERVICE_103', 'operations'],
      [{ operations: Array(101).fill(one) }, 'ERR_SERVICE_103', 'operations'],
      [{}, 'ERR_SERVICE_103', 'operations'],
      [{ operations: [one, { method: 'GET', path: '/ip_policies' }] }, 'ERR_SERVICE_103', 'operations[1].method'],
      [{ operations: [one, { method: 'POST' }] }, 'ERR_SERVICE_103', 'operations[1].path'],
      [{ operations: [one, { ...one, extra: 1 }] }, 'ERR_SERVICE_102', 'operations[1].extra'],
      [{ operations: [one], atomic: true }, 'ERR_SERVICE_102', 'atomic'],
    ];
    for (const [body, code, field] of cases) {
      const r = await s.post(BATCH, body);
      expect([r.status, r.body.error_code, r.body.details.field]).toEqual([400, code, field]);
    }
    const huge = await s.post(BATCH, { operations: [{ method: 'POST', path: '/ip_policies', body: { metadata: 'x'.repeat(1024 * 1024) } }] });
    expect([huge.status, huge.body.error_code]).toEqual([413, 'ERR_SERVICE_330']);
    expect((await s.get('/ip_policies?limit=100')).body.ip_policies.length).toBe(before);
  });
});

describe('a batch and the API rate limit', () => {
  it('counts one request per 10 operations: 100 operations count 10, and a batch the window cannot hold is refused', async () => {
    const s = await startTestServer({ apiRateLimit: 25, apiRateWindowMs: 60_000 });
    try {
      const ops = (n: number) => ({ operations: Array.from({ length: n }, () => ({ method: 'POST', path: '/ip_policies', body: {} })) });
      // 10 + 10 + 1 (a batch of 3) + 1 (a request alone) = 22 of 25.
      expect((await s.post(BATCH, ops(100))).status).toBe(200);
      expect((await s.post(BATCH, ops(91))).status).toBe(200);
      expect((await s.post(BATCH, ops(3))).status).toBe(200);
      expect((await s.get('/ip_policies?limit=1')).status).toBe(200);
      // 10 more do not fit: 429 with Retry-After, and nothing of it ran.
      const over = await s.post(BATCH, ops(100));
      expect([over.status, over.body.error_code]).toEqual([429, 'ERR_SERVICE_226']);
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      // Three more do.
      expect((await s.post(BATCH, ops(30))).status).toBe(200);
      expect((await s.get('/ip_policies?limit=1')).status).toBe(429);
      expect(await policyCount(s)).toBe(100 + 91 + 3 + 30);
    } finally {
      await s.close();
    }
    const small = await startTestServer({ apiRateLimit: 5, apiRateWindowMs: 60_000 });
    try {
      const r = await small.post(BATCH, { operations: Array.from({ length: 60 }, () => ({ method: 'POST', path: '/ip_policies', body: {} })) });
      expect([r.status, r.body.error_code, r.body.details.weight, r.body.details.limit]).toEqual([400, 'ERR_SERVICE_229', 6, 5]);
      expect(r.body.msg).toContain('--api-rate-limit');
      expect((await small.post(BATCH, { operations: Array.from({ length: 50 }, () => ({ method: 'POST', path: '/ip_policies', body: {} })) })).status).toBe(200);
    } finally {
      await small.close();
    }
  });
});

/** How many IP policies the server holds (read straight from its database: the key's allowance is spent). */
function policyCount(s: TestServer): Promise<number> {
  return s.server.db.read.resource.count({ where: { kind: 'IPPolicy' } });
}
