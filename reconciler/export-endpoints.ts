// `edgeform export --as-endpoints`: HTTPS edges written as the cloud endpoints that serve the
// same requests (issue 36, docs/endpoints.md "Moving edges onto endpoints"). A first step:
// each hostport becomes a cloud endpoint whose policy has one rule per route, in the edge's
// order of choice (exact paths, then longer prefixes), answering as the route's
// http_response backend does, and a last rule that denies with 404 as an edge with no
// matching route does. What has no counterpart yet (other backends, modules, routes that
// name a host) is left out with a note, never silently.
import { stringify } from 'yaml';
import type { ApiClient } from '../provider/client/index.js';
import { kindOf } from '../provider/catalog/index.js';
import { refresh } from './live/refresh.js';
import type { ExportResult } from './export.js';

type Doc = Record<string, any>;

/** A CEL string literal. */
const cel = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

const slug = (s: string) => s.toLowerCase().replace(/[^a-z0-9.-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 100);

export async function exportAsEndpoints(client: ApiClient, opts: { stack: string }): Promise<ExportResult> {
  const edgeKind = kindOf('HTTPSEdge');
  const responseKind = kindOf('HTTPResponseBackend');
  const live = await refresh(client, [edgeKind, responseKind]);
  const responses = new Map((live.byKind.get(responseKind.kind) ?? []).map((l) => [l.id, l.read]));
  const notes: string[] = [];
  const docs: string[] = [];
  for (const edge of [...(live.byKind.get(edgeKind.kind) ?? [])].reverse()) {
    if (edge.stamp && edge.stamp.stack !== opts.stack) {
      notes.push(`${edge.id} is managed by stack "${edge.stamp.stack}"; export it from there`);
      continue;
    }
    for (const m of ['mutual_tls'] as const) if (edge.read[m]) notes.push(`${edge.id}: ${m} has no endpoint counterpart yet; left out`);
    const routes = [...(edge.children.routes ?? [])].map((c) => c.read);
    // The edge's order of choice (server/ingress/http/select-route.ts): exact paths first, then the longest prefix.
    const ordered = routes.filter((r) => String(r.match).startsWith('/')).sort((a, b) =>
      Number(b.match_type === 'exact_path') - Number(a.match_type === 'exact_path') || String(b.match).length - String(a.match).length);
    for (const r of routes) if (!String(r.match).startsWith('/')) notes.push(`${edge.id} route ${r.id} (${r.match}) names a host; left out`);
    const rules: Doc[] = [];
    for (const r of ordered) {
      for (const [k, v] of Object.entries(r)) {
        if (['id', 'uri', 'created_at', 'edge_id', 'match', 'match_type', 'description', 'metadata', 'backend'].includes(k) || v == null) continue;
        if (typeof v === 'object' && !Array.isArray(v)) notes.push(`${edge.id} route ${r.id} (${r.match}): module ${k} has no endpoint counterpart yet; left out`);
      }
      const backend = r.backend?.enabled === false ? undefined : r.backend?.backend?.id ?? r.backend?.backend_id;
      const answer = backend ? responses.get(backend) : undefined;
      if (!answer) {
        notes.push(`${edge.id} route ${r.id} (${r.match}): ${backend ? `backend ${backend} is not an http_response backend, which` : 'no backend, which'} has no endpoint counterpart yet; left out`);
        continue;
      }
      const expression = r.match_type === 'exact_path' ? `req.path == ${cel(r.match)}` : r.match === '/' ? undefined : `req.path.startsWith(${cel(r.match)})`;
      rules.push({
        name: `route ${r.match}`,
        ...(expression ? { expressions: [expression] } : {}),
        actions: [{ type: 'custom-response', config: { status_code: answer.status_code, headers: answer.headers ?? {}, body: answer.body ?? '' } }],
      });
    }
    rules.push({ name: 'no route matches', actions: [{ type: 'deny', config: { status_code: 404 } }] });
    const policy = stringify({ on_http_request: rules }, { lineWidth: 0 });
    for (const hp of (edge.read.hostports ?? []) as string[]) {
      const at = hp.lastIndexOf(':');
      const host = hp.slice(0, at);
      const port = Number(hp.slice(at + 1));
      const doc = {
        kind: 'CloudEndpoint',
        name: slug(`${host}${port === 443 ? '' : `-${port}`}`),
        url: `https://${host}${port === 443 ? '' : `:${port}`}`,
        description: `from HTTPS edge ${edge.id}`,
        traffic_policy: policy,
      };
      docs.push(stringify(doc, { lineWidth: 0 }));
    }
  }
  return { yaml: docs.join('---\n'), count: docs.length, adopted: 0, notes };
}
