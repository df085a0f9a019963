// The executor always finishes: a failure far up a chain skips everything below it, and a
// plan whose operations wait on each other (which the planner never makes) is reported
// rather than waited on forever.
import { describe, expect, it } from 'vitest';
import type { ApiClient } from '../../provider/client/index.js';
import { execute } from '../../reconciler/apply/execute.js';
import type { Change, Operation, Plan } from '../../reconciler/plan/types.js';

const op = (index: number, after: number[]): Operation => ({ index, method: 'create', kind: 'IPPolicy', body: { description: `p${index}` }, assigns: `IPPolicy/p${index}`, after, address: `IPPolicy/p${index}`, touches: [] });
const change = (o: Operation): Change => ({ address: o.address, kind: 'IPPolicy', name: `p${o.index}`, actions: ['create'], before: null, after: {}, patch: [], operations: [o.index] });
const planOf = (operations: Operation[]): Plan => ({ stack: 's', apiUrl: 'http://x', createdAt: '', mode: 'apply', changes: operations.map(change), operations, orphans: [], fingerprints: {}, apiCalls: 0 });

/** A client whose creates fail for the given bodies and succeed otherwise. */
function client(failing: string[]) {
  const made: string[] = [];
  const c = {
    async create(_kind: unknown, body: { description: string }) {
      if (failing.includes(body.description)) throw new Error(`refused ${body.description}`);
      made.push(body.description);
      return { id: `ipp_${body.description}` };
    },
  };
  return { client: c as unknown as ApiClient, made };
}

describe('execute', () => {
  it.each([
    { case: 'a chain of three under a failure', ops: [op(0, []), op(1, [0]), op(2, [1]), op(3, [2])], failing: ['p0'], made: [], skipped: ['IPPolicy/p1', 'IPPolicy/p2', 'IPPolicy/p3'] },
    { case: 'a diamond under a failure, beside independent work', ops: [op(0, []), op(1, [0]), op(2, [0]), op(3, [1, 2]), op(4, [])], failing: ['p0'], made: ['p4'], skipped: ['IPPolicy/p1', 'IPPolicy/p2', 'IPPolicy/p3'] },
  ])('finishes, skipping what depends on a failure: $case', async ({ ops, failing, made, skipped }) => {
    const c = client(failing);
    const result = await execute(c.client, planOf(ops), { parallelism: 2 });
    expect(result.failures.map((f) => f.address)).toEqual(failing.map((d) => `IPPolicy/${d}`));
    expect(result.skipped.sort()).toEqual(skipped);
    expect(c.made).toEqual(made);
  });

  it('reports operations that wait on each other instead of hanging', async () => {
    const c = client([]);
    const result = await execute(c.client, planOf([op(0, []), op(1, [2]), op(2, [1])]), { parallelism: 4 });
    expect(c.made).toEqual(['p0']);
    expect(result.failures.map((f) => [f.address, f.message])).toEqual([
      ['IPPolicy/p1', expect.stringContaining('a cycle in the plan')],
      ['IPPolicy/p2', expect.stringContaining('a cycle in the plan')],
    ]);
  });
});
