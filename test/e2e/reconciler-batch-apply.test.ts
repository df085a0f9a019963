// A 5,000-resource apply against a server with its default settings (issue 29): 600
// requests a minute per key, 1,000 secret fingerprints an hour. One request per write took
// 530 s, waiting on the rate limit; the apply now sends its writes in batches
// (docs/api.md, "Batches"), which count one request per 10 operations, so the whole apply
// stays within one minute's allowance: the server never answers 429, and each resource is
// created once, in a batch. How long it takes is measured by bench/batch-apply.ts, not here.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNIT, writeManifests } from '../../bench/managed-set.js';
import { resolveConfig } from '../../server/config.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { stackRunner } from '../helpers/reconciler.js';

const N = 5000;

describe('a 5,000-resource apply with the server\'s default settings', () => {
  let s: TestServer;
  const logs: string[] = [];
  let dir: string;

  beforeAll(async () => {
    const defaults = resolveConfig({}, {});
    expect(defaults.apiRateLimit).toBe(600);
    s = await startTestServer({ apiRateLimit: defaults.apiRateLimit, fingerprintRateLimit: defaults.fingerprintRateLimit, log: (l) => logs.push(l) });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgeform-batch-apply-'));
    writeManifests(dir, N);
  }, 60_000);

  afterAll(async () => {
    await s?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('finishes within the rate limit, every write in a batch and each resource made once', async () => {
    const r = stackRunner(s);
    const applied = await r.run(['apply', '-f', dir, '--auto-approve']);
    expect(applied.code, applied.stderr.slice(-3000)).toBe(0);
    expect(applied.stdout).toContain(`Apply complete! Resources: ${N} added, 0 changed, 0 destroyed.`);
    const entries = logs.map((l) => JSON.parse(l));
    // Never waited on the rate limit.
    expect(entries.filter((e) => e.status === 429)).toEqual([]);
    expect(applied.stdout + applied.stderr).not.toContain('rate limit');
    // Each create on its own line, once, in a batch: 2 policies, 4 rules, a backend, an edge and 2 routes per unit.
    const creates = entries.filter((e) => e.method === 'POST' && e.status === 201);
    expect(creates.length).toBe(N);
    expect(creates.filter((e) => e.batch_operation_id).length).toBe(N);
    const batches = entries.filter((e) => e.path === '/_edgeform/batch' && e.status === 200);
    expect(batches.length).toBeLessThanOrEqual(Math.ceil(N / 100) + 10);
    // The lists agree, and a plan right after has nothing to do.
    const count = async (kind: string) => s.server.db.read.resource.count({ where: { kind } });
    expect(await count('IPPolicy')).toBe((N / UNIT) * 2);
    expect(await count('IPPolicyRule')).toBe((N / UNIT) * 4);
    expect(await count('HTTPSEdgeRoute')).toBe((N / UNIT) * 2);
    const plan = await r.planJson(['-f', dir]);
    expect(plan.changes).toBe(false);
  }, 600_000);
});
