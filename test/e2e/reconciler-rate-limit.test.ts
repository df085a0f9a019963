// 429 storms are ridden out: the server allows a key far fewer requests than the apply
// needs; the client pauses every request for Retry-After and retries, and no create
// reaches the server twice. The apply sends its writes in batches (docs/api.md, "Batches"),
// which count one request per 10 operations: at 3 requests a second a batch of more than 30
// is refused whole (ERR_SERVICE_229), and the apply sends smaller ones.
import { describe, expect, it } from 'vitest';
import { startTestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { bigManifest, census, COMPLETE as complete, DECLARED, stackRunner } from '../helpers/reconciler.js';

describe('reconciler: 429 storms', () => {
  it('rides out a per-key rate limit far below what the apply needs, with no create made twice', async () => {
    const logs: string[] = [];
    // 3 requests a second for the key; the apply needs about 20, its 100 writes in batches.
    const s = await startTestServer({ apiRateLimit: 3, apiRateWindowMs: 1000, log: (l) => logs.push(l) });
    try {
      const dir = manifestDir({ 'big.yaml': bigManifest() });
      const r = stackRunner(s);
      const applied = await r.run(['apply', '-f', dir, '--auto-approve']);
      expect(applied.code, applied.stdout + applied.stderr).toBe(0);
      expect(applied.stdout).toContain(`Apply complete! Resources: ${DECLARED} added, 0 changed, 0 destroyed.`);
      const entries = logs.map((l) => JSON.parse(l));
      const refused = entries.filter((e) => e.status === 429);
      expect(refused.length).toBeGreaterThan(2);
      expect(refused.some((e) => e.path === '/_edgeform/batch')).toBe(true);
      // Each create's own line (a batch logs one per operation, naming the batch): each made once, all in batches.
      const creates = entries.filter((e) => e.method === 'POST' && e.status === 201);
      expect(creates.length).toBe(DECLARED);
      expect(creates.filter((e) => e.batch_operation_id).length).toBe(DECLARED);
      await new Promise((res) => setTimeout(res, 1100));
      expect(await census(s)).toEqual(complete);
      const plan = await r.planJson(['-f', dir]);
      expect(plan.changes).toBe(false);
    } finally {
      await s.close();
    }
  });
});
