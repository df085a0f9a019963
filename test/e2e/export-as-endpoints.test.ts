// `edgeform export --as-endpoints` (issue 36): an HTTPS edge whose routes answer from
// http_response backends is written as a cloud endpoint; once the edge is gone and the
// export applied, the same requests get the same answers (status, the backends' headers,
// body) through the ingress. What has no counterpart yet is named in a note.
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { edgeRequest, ingressPort, localCa } from '../helpers/ingress-client.js';
import { manifestDir } from '../helpers/cli.js';
import { type StackRunner, stackRunner } from '../helpers/reconciler.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let s: TestServer;
let r: StackRunner;
let port: number;
let ca: string;
let edgeId: string;

const HOST = 'migrate.example.com';
const PATHS = ['/', '/health', '/health/deep', '/api', '/api/v1/users', '/static/x.css', '/other'];

beforeAll(async () => {
  s = await startTestServer({ ingress: [{ publicPort: 443, host: '127.0.0.1', port: 0 }] });
  r = stackRunner(s);
  port = ingressPort(s, 443);
  ca = localCa(s);
  const backend = async (body: string, status: number, headers: Record<string, string>) => (await s.post('/backends/http_response', { body, status_code: status, headers })).body.id;
  const home = await backend('home', 200, { 'Content-Type': 'text/html', 'X-Page': 'home' });
  const health = await backend('ok', 200, { 'Cache-Control': 'no-store' });
  const api = await backend('{"api":true}', 201, { 'Content-Type': 'application/json' });
  const gone = await backend('moved away', 410, {});
  const edge = await s.post('/edges/https', { hostports: [`${HOST}:443`] });
  edgeId = edge.body.id;
  const route = (match_type: string, match: string, id: string) => s.post(`/edges/https/${edgeId}/routes`, { match_type, match, backend: { backend_id: id } });
  await route('path_prefix', '/', home);
  await route('exact_path', '/health', health);
  await route('path_prefix', '/api', api);
  await route('path_prefix', '/api/v1', gone);
  // A route whose module has no counterpart yet: named in a note.
  await s.post(`/edges/https/${edgeId}/routes`, { match_type: 'path_prefix', match: '/static', backend: { backend_id: home }, compression: {} });
}, 60_000);

afterAll(async () => {
  await s?.close();
});

const answers = async () => {
  const out: Record<string, { status: number; body: string; headers: Record<string, unknown> }> = {};
  for (const p of PATHS) {
    const a = await edgeRequest({ port, host: HOST, path: p, ca });
    out[p] = { status: a.status, body: a.text, headers: { 'content-type': a.headers['content-type'], 'x-page': a.headers['x-page'], 'cache-control': a.headers['cache-control'] } };
  }
  return out;
};

describe('export --as-endpoints', () => {
  it('the exported cloud endpoint answers every routed request as the edge did', async () => {
    const before = await answers();
    expect(before['/'].body).toBe('home');
    expect(before['/health'].body).toBe('ok');
    expect(before['/health/deep'].body).toBe('home');
    expect(before['/api/v1/users'].status).toBe(410);
    const ex = await r.run(['export', '--as-endpoints']);
    expect(ex.code, ex.stderr).toBe(0);
    const docs = parseAllDocuments(ex.stdout).map((d) => d.toJS());
    expect(docs).toEqual([expect.objectContaining({ kind: 'CloudEndpoint', url: `https://${HOST}`, traffic_policy: expect.any(String) })]);
    expect(ex.stderr).toMatch(/route \S+ \(\/static\): module compression has no endpoint counterpart yet/);
    expect((await s.del(`/edges/https/${edgeId}`)).status).toBe(204);
    const applied = await r.run(['apply', '-f', manifestDir({ 'endpoints.yaml': ex.stdout }), '--auto-approve']);
    expect(applied.code, applied.stdout + applied.stderr).toBe(0);
    const after = await answers();
    // Every path a route answered is answered alike; /other fell to the '/' route on the edge too.
    for (const p of PATHS) expect(after[p], p).toEqual(before[p]);
  });
});
