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

  it('stops starting operations when its signal is aborted: those in flight finish, the rest are listed as not done', async () => {
    const controller = new AbortController();
    const made: string[] = [];
    const c = {
      async create(_kind: unknown, body: { description: string }) {
        // The second create (p3: ready from the start, after p0) is in flight when the interrupt comes.
        if (body.description === 'p3') controller.abort();
        await new Promise((r) => setTimeout(r, 10));
        made.push(body.description);
        return { id: `ipp_${body.description}` };
      },
    } as unknown as ApiClient;
    const result = await execute(c, planOf([op(0, []), op(1, [0]), op(2, [1]), op(3, [])]), { parallelism: 1, signal: controller.signal });
    expect(made).toEqual(['p0', 'p3']);
    expect(result.done.map((d) => d.address)).toEqual(['IPPolicy/p0', 'IPPolicy/p3']);
    expect(result.notDone).toEqual(['IPPolicy/p1', 'IPPolicy/p2']);
  });

  it('aborted before it starts, it makes no call and finishes at once', async () => {
    const c = client([]);
    const controller = new AbortController();
    controller.abort();
    const result = await execute(c.client, planOf([op(0, []), op(1, [0])]), { parallelism: 2, signal: controller.signal });
    expect(c.made).toEqual([]);
    expect(result.notDone).toEqual(['IPPolicy/p0', 'IPPolicy/p1']);
  });
});
