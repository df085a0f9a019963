// The executor always finishes: a failure far up a chain skips everything below it, and a
// plan whose operations wait on each other (which the planner never makes) is reported
// rather than waited on forever (one request per write: batchSize 1). In batches: writes
// ready together share one, never with what they wait for, each settled by its own answer,
// and a server without batches gets one request per write.
import { describe, expect, it } from 'vitest';
import { ApiClientError, NO_SUCH_PATH, type ApiClient } from '../../provider/client/index.js';
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
    const result = await execute(c.client, planOf(ops), { parallelism: 2, batchSize: 1 });
    expect(result.failures.map((f) => f.address)).toEqual(failing.map((d) => `IPPolicy/${d}`));
    expect(result.skipped.sort()).toEqual(skipped);
    expect(c.made).toEqual(made);
  });

  it('reports operations that wait on each other instead of hanging', async () => {
    const c = client([]);
    const result = await execute(c.client, planOf([op(0, []), op(1, [2]), op(2, [1])]), { parallelism: 4, batchSize: 1 });
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
    const result = await execute(c, planOf([op(0, []), op(1, [0]), op(2, [1]), op(3, [])]), { parallelism: 1, batchSize: 1, signal: controller.signal });
    expect(made).toEqual(['p0', 'p3']);
    expect(result.done.map((d) => d.address)).toEqual(['IPPolicy/p0', 'IPPolicy/p3']);
    expect(result.notDone).toEqual(['IPPolicy/p1', 'IPPolicy/p2']);
  });

  it('aborted before it starts, it makes no call and finishes at once', async () => {
    const c = client([]);
    const controller = new AbortController();
    controller.abort();
    const result = await execute(c.client, planOf([op(0, []), op(1, [0])]), { parallelism: 2, batchSize: 1, signal: controller.signal });
    expect(c.made).toEqual([]);
    expect(result.notDone).toEqual(['IPPolicy/p0', 'IPPolicy/p1']);
  });

  it('in batches: writes ready together share a batch of at most 100, never with what they wait for; an operation\'s error blocks only its dependents', async () => {
    const batches: string[][] = [];
    const alone: string[] = [];
    const c = {
      collection: () => '/ip_policies',
      async batch(operations: { method: string; path: string; body: { description: string } }[]) {
        batches.push(operations.map((o) => o.body.description));
        return operations.map((o, k) => (o.body.description === 'p1'
          ? { status: 400, operation_id: `op_${k}`, body: { error_code: 'ERR_SERVICE_103', status_code: 400, msg: 'description: no', details: { operation_id: `op_${k}`, field: 'description' } } }
          : { status: 201, operation_id: `op_${k}`, body: { id: `ipp_${o.body.description}` } }));
      },
      operationError: (op: { method: string; path: string }, r: { status: number; body: any }) => new ApiClientError(op.method, op.path, r.status, r.body.error_code, r.body.msg, r.body.details.operation_id, r.body.details),
      async create(_kind: unknown, body: { description: string }) {
        alone.push(body.description);
        return { id: `ipp_${body.description}` };
      },
    } as unknown as ApiClient;
    // 150 independent creates; p150 waits for p0, p151 for p1 (which fails), p152 for p150.
    const ops = [...Array.from({ length: 150 }, (_v, i) => op(i, [])), op(150, [0]), op(151, [1]), op(152, [150])];
    const result = await execute(c, planOf(ops), { parallelism: 1 });
    // p150 (ready once p0 was made) joined the second; p152 went alone, the only one ready then; p151 never went.
    expect(batches.map((b) => b.length)).toEqual([100, 51]);
    expect(batches[0]).toEqual(Array.from({ length: 100 }, (_v, i) => `p${i}`));
    expect(batches[1].sort()).toEqual([...Array.from({ length: 50 }, (_v, i) => `p${100 + i}`), 'p150'].sort());
    expect(alone).toEqual(['p152']);
    expect(result.failures.map((f) => [f.address, f.errorCode, f.status])).toEqual([['IPPolicy/p1', 'ERR_SERVICE_103', 400]]);
    expect(result.skipped).toEqual(['IPPolicy/p151']);
    expect(result.done).toHaveLength(151);
  });

  it('a server without batches (404 ERR_SERVICE_301) gets one request per write from then on', async () => {
    let batchCalls = 0;
    const made: string[] = [];
    const c = {
      collection: () => '/ip_policies',
      async batch() {
        batchCalls++;
        throw new ApiClientError('POST', '/_edgeform/batch', 404, NO_SUCH_PATH, 'no such path', 'op_x');
      },
      async create(_kind: unknown, body: { description: string }) {
        made.push(body.description);
        return { id: `ipp_${body.description}` };
      },
    } as unknown as ApiClient;
    const result = await execute(c, planOf(Array.from({ length: 30 }, (_v, i) => op(i, []))), { parallelism: 2 });
    expect(batchCalls).toBe(1);
    expect(made.sort()).toEqual(Array.from({ length: 30 }, (_v, i) => `p${i}`).sort());
    expect(result.failures).toEqual([]);
  });
});
