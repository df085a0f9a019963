// The planner's work grows linearly with the live set: each document's resource is found
// through an index (stamp name, natural key), not by scanning the kind's list, which made
// a plan quadratic (bench/README.md). Wall time belongs in bench/; here the planner's reads
// of live resources are counted, which is deterministic: a scan per document reads every
// resource of the kind once per document.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestKinds } from '../../reconciler/manifest/kinds.js';
import { refresh, type LiveResource, type LiveState } from '../../reconciler/live/refresh.js';
import { makePlan } from '../../reconciler/plan/plan.js';
import { clientFor, loadDesired } from '../../reconciler/session.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { manifestDir } from '../helpers/cli.js';
import { toYaml } from '../helpers/reconciler.js';

type Doc = Record<string, any>;

const POLICIES = 300;
const EDGES = 100;
const stamp = (address: string) => JSON.stringify({ edgeform: { stack: 'default', name: address } });

/** The live state with every resource behind a proxy that counts the planner's property reads. */
function counted(live: LiveState) {
  const reads = { count: 0 };
  const proxies = new Map<LiveResource, LiveResource>();
  const proxy = (l: LiveResource) => {
    let p = proxies.get(l);
    if (!p) {
      p = new Proxy(l, { get: (t, k, r) => (reads.count++, Reflect.get(t, k, r)) });
      proxies.set(l, p);
    }
    return p;
  };
  const state: LiveState = {
    kinds: live.kinds,
    byKind: new Map([...live.byKind].map(([k, list]) => [k, list.map(proxy)])),
    byId: new Map([...live.byId].map(([id, l]) => [id, proxy(l)])),
  };
  return { state, reads, resources: proxies.size };
}

describe('reconciler: plan work is linear in the live set', () => {
  let s: TestServer;

  beforeAll(async () => {
    s = await startTestServer();
    // Stamped as this stack's documents, as an apply leaves them (made directly: faster).
    for (let i = 0; i < POLICIES; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => s.post('/ip_policies', { description: `p${i + j}`, metadata: stamp(`IPPolicy/p${i + j}`) })));
    }
    await Promise.all(Array.from({ length: EDGES }, (_, i) => s.post('/edges/https', { hostports: [`e${i}.example.com:443`], metadata: stamp(`HTTPSEdge/e${i}`) })));
  });
  afterAll(async () => {
    await s?.close();
  });

  it('reads each live resource a bounded number of times, whatever the number of documents', async () => {
    const docs: Doc[] = [
      ...Array.from({ length: POLICIES }, (_, i) => ({ kind: 'IPPolicy', name: `p${i}`, description: `p${i}` })),
      ...Array.from({ length: EDGES }, (_, i) => ({ kind: 'HTTPSEdge', name: `e${i}`, hostports: [`e${i}.example.com:443`] })),
      // New edges: looked up by stamp, then by natural key, before they are planned as creates.
      ...Array.from({ length: EDGES }, (_, i) => ({ kind: 'HTTPSEdge', name: `new${i}`, hostports: [`new${i}.example.com:443`] })),
    ];
    const manifest = loadDesired([manifestDir({ 'many.yaml': toYaml(docs) })]);
    const client = clientFor({ apiUrl: s.url, apiKey: s.token, stack: 'default' });
    try {
      const live = await refresh(client, manifestKinds.filter((k) => k.kind === 'IPPolicy' || k.kind === 'HTTPSEdge'));
      const { state, reads, resources } = counted(live);
      expect(resources).toBe(POLICIES + EDGES);
      const { plan, problems } = makePlan(manifest, state, { stack: 'default', apiUrl: s.url, mode: 'apply' });
      expect(problems).toEqual([]);
      const active = plan.changes.filter((c) => c.actions[0] !== 'no-op');
      expect(active.map((c) => c.actions[0])).toEqual(Array(EDGES).fill('create'));
      // Found by scanning, each document would read every resource of its kind: about
      // 300 x 300 / 2 reads for the policies alone. Found through an index, a few reads each.
      expect(reads.count / resources).toBeLessThan(40);
    } finally {
      await client.close();
    }
  });
});
