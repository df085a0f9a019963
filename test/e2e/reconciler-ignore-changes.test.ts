// ignore_changes, as Terraform's ignore_changes and Argo CD's ignoreDifferences: the listed
// fields are set on create and never planned again, whether they moved in the manifest or
// live; paths are checked offline, with a suggestion.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manifestDir, runCli } from '../helpers/cli.js';
import { activeChanges, stackRunner, toYaml } from '../helpers/reconciler.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const edge = (n: number, ignore?: string[]) => toYaml([
  { kind: 'HTTPResponseBackend', name: 'ok', body: 'ok' },
  {
    kind: 'HTTPSEdge', name: 'web', description: `web ${n}`, hostports: ['ignore.example.com:443'], ...(ignore ? { ignore_changes: ignore } : {}),
    routes: [{ match_type: 'path_prefix', match: '/', description: `root ${n}`, backend: { backend_id: 'HTTPResponseBackend/ok' }, circuit_breaker: { error_threshold_percentage: n / 10 } }],
  },
]);

describe('reconciler: ignore_changes', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(() => s.close());

  it('sets the fields on create and never plans them again, in the manifest or live', async () => {
    const me = stackRunner(s, { EDGEFORM_STACK: 'ignoring' });
    const ignore = ['description', 'routes[*].circuit_breaker'];
    await me.apply(['-f', manifestDir({ 'e.yaml': edge(1, ignore) })]);
    const live = (await s.get('/edges/https')).body.https_edges[0];
    expect(live.description).toBe('web 1');
    expect(live.routes[0].circuit_breaker.error_threshold_percentage).toBe(0.1);
    // Changed in the manifest and by hand: no change planned.
    await s.patch(`/edges/https/${live.id}`, { description: 'edited by hand' });
    const plan = await me.planJson(['-f', manifestDir({ 'e.yaml': edge(2, ignore).replace('root 2', 'root 1') })]);
    expect(activeChanges(plan)).toEqual({});
    // Another field of the route changes: updated, the ignored module left as it is live.
    await me.apply(['-f', manifestDir({ 'e.yaml': edge(3, ignore) })]);
    const after = (await s.get(`/edges/https/${live.id}`)).body;
    expect(after.routes[0].description).toBe('root 3');
    expect(after.routes[0].circuit_breaker.error_threshold_percentage).toBe(0.1);
    expect(after.description).toBe('edited by hand');
    // Without ignore_changes, both are planned again.
    const plain = await me.planJson(['-f', manifestDir({ 'e.yaml': edge(3) })]);
    expect(Object.keys(activeChanges(plain)).sort()).toEqual(['HTTPSEdge/web', 'HTTPSEdge/web.routes["/"]']);
  });

  it('checks the paths offline, with a suggestion', async () => {
    const r = await runCli(['validate', '-f', manifestDir({ 'e.yaml': edge(1, ['descripton', 'routes[*].circuit_braker', 'routes[*].match']) })]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('ignore_changes: "descripton" is not a field of HTTPSEdge (did you mean description?)');
    expect(r.stderr).toContain('(did you mean routes[*].circuit_breaker?)');
    expect(r.stderr).toContain('routes[*].match: match names each of the routes; it cannot be ignored');
    const notList = await runCli(['validate', '-f', manifestDir({ 'e.yaml': 'kind: IPPolicy\nname: x\nignore_changes: description\n' })]);
    expect(notList.stderr).toContain('ignore_changes must be a list of field paths');
  });
});
