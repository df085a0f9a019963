// `edgeform policy show ROUTE_ID_OR_FILE`: a route (or a TCP/TLS edge) as the traffic policy the
// ingress runs for it (server/policy/route.ts): each enabled module a rule of its module-*
// action in the documented order, the route's own traffic_policy rules at their place. The
// output is a policy `edgeform policy test` takes as it is, so a user can try what their edge
// does. IP restrictions name their policies by id, as the ingress reads them (live); the
// policies' rules as they are now are written beside each id so `policy test` can run them.
import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { parseAllDocuments, stringify } from 'yaml';
import type { TrafficPolicy } from '../provider/catalog/validate/traffic-policy.js';
import { routePolicy, streamPolicy } from '../server/policy/route.js';
import { apiOptions, explain, UsageError, type Io } from './reconcile.js';

type Doc = Record<string, any>;

class ShowError extends Error {}

/** What is shown: the route (or edge) found, where it came from, and its IP policies' rules by id. */
interface Found {
  kind: 'route' | 'tcp' | 'tls';
  doc: Doc;
  label: string;
  rules: Map<string, { cidr: string; action: 'allow' | 'deny' }[]>;
}

const ROUTE_ID = /^edghtsrt_[A-Za-z0-9]+$/;
const EDGE_ID = /^(edghts|edgtcp|edgtls)_[A-Za-z0-9]+$/;

/** An id the API knows (a route, EDGE_ID/ROUTE_ID, a TCP or TLS edge), rather than a file. */
function isId(arg: string) {
  const [first, second] = arg.split('/');
  return ROUTE_ID.test(arg) || /^(edgtcp|edgtls)_[A-Za-z0-9]+$/.test(arg) || (second !== undefined && EDGE_ID.test(first) && ROUTE_ID.test(second));
}

// ---- a manifest file ---------------------------------------------------------------------

/** A manifest file's documents, or those of every *.yaml / *.yml file of a folder (its IPPolicy documents may be beside the edge's). */
function manifestDocs(file: string): Doc[] {
  let texts: string[];
  try {
    texts = fs.statSync(file).isDirectory()
      ? fs.readdirSync(file).filter((f) => /\.ya?ml$/i.test(f)).sort().map((f) => fs.readFileSync(path.join(file, f), 'utf8'))
      : [fs.readFileSync(file, 'utf8')];
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file; give a manifest file (or folder), a route id (edghtsrt_...), EDGE_ID/ROUTE_ID, or a TCP or TLS edge id (edgtcp_..., edgtls_...)' : (e as Error).message}`);
  }
  return texts.flatMap((t) => parseAllDocuments(t).map((d) => d.toJS() as Doc)).filter((d) => d && typeof d === 'object');
}

function fromFile(file: string, choose: string | undefined): Found {
  const docs = manifestDocs(file);
  const rules = new Map<string, { cidr: string; action: 'allow' | 'deny' }[]>();
  for (const d of docs) if (d.kind === 'IPPolicy' && d.name) rules.set(`IPPolicy/${d.name}`, (d.rules ?? []).map((r: Doc) => ({ cidr: r.cidr, action: r.action })));
  const candidates: Found[] = [];
  for (const d of docs) {
    if (d.kind === 'HTTPSEdge') for (const r of d.routes ?? []) candidates.push({ kind: 'route', doc: r, label: `HTTPSEdge/${d.name} ${r.match}`, rules });
    if (d.kind === 'TCPEdge') candidates.push({ kind: 'tcp', doc: d, label: `TCPEdge/${d.name}`, rules });
    if (d.kind === 'TLSEdge') candidates.push({ kind: 'tls', doc: d, label: `TLSEdge/${d.name}`, rules });
  }
  if (!candidates.length) throw new ShowError(`${file} has no HTTPSEdge route, TCPEdge or TLSEdge; give a manifest that defines one, or a route id`);
  if (choose === undefined) {
    if (candidates.length === 1) return candidates[0];
    throw new UsageError(`${file} defines ${candidates.length} routes and edges; choose one with --route, one of: ${candidates.map((c) => JSON.stringify(c.label)).join(', ')}`);
  }
  const picked = candidates.filter((c) => c.label === choose || c.label.endsWith(` ${choose}`) || c.label.split(' ')[0] === choose && c.kind !== 'route');
  if (picked.length === 1) return picked[0];
  throw new UsageError(`--route ${JSON.stringify(choose)} ${picked.length ? 'matches more than one' : 'matches none'} of ${file}'s routes and edges: ${candidates.map((c) => JSON.stringify(c.label)).join(', ')}`);
}

// ---- the API -----------------------------------------------------------------------------

async function client(opts: Doc) {
  if (!opts.apiKey) throw new UsageError('no API key: set EDGEFORM_API_KEY (or --api-key) to read the route from the API, or give a manifest file instead');
  if (!/^https?:\/\/[^/]/i.test(opts.apiUrl) || !URL.canParse(opts.apiUrl)) throw new UsageError(`--api-url / EDGEFORM_API_URL must be the server's http(s) base URL, such as http://127.0.0.1:8080, not ${JSON.stringify(opts.apiUrl)}`);
  const { ApiClient } = await import('../provider/client/index.js');
  return new ApiClient({ baseUrl: opts.apiUrl, apiKey: opts.apiKey, concurrency: 4, attempts: 2, userAgent: 'edgeform-policy-show' });
}

/** Every item of a list, page by page. */
async function listAll(api: { call: (m: string, p: string) => Promise<Doc> }, collection: string, key: string, filter?: string): Promise<Doc[]> {
  const out: Doc[] = [];
  let before: string | undefined;
  for (;;) {
    const q = new URLSearchParams({ limit: '100', ...(filter ? { filter } : {}), ...(before ? { before_id: before } : {}) });
    const page = await api.call('GET', `${collection}?${q}`);
    const items = (page[key] ?? []) as Doc[];
    out.push(...items);
    if (!page.next_page_uri || !items.length) return out;
    before = items[items.length - 1].id;
  }
}

async function fromApi(arg: string, opts: Doc): Promise<Found> {
  const api = await client(opts);
  try {
    let found: Found | undefined;
    const [first, second] = arg.split('/');
    if (second !== undefined && EDGE_ID.test(first) && ROUTE_ID.test(second)) {
      found = { kind: 'route', doc: await api.call('GET', `/edges/https/${first}/routes/${second}`), label: second, rules: new Map() };
    } else if (ROUTE_ID.test(arg)) {
      for (const edge of await listAll(api, '/edges/https', 'https_edges')) {
        const route = (edge.routes ?? []).find((r: Doc) => r.id === arg);
        if (route) found = { kind: 'route', doc: route, label: arg, rules: new Map() };
      }
      if (!found) throw new ShowError(`no HTTPS edge of ${opts.apiUrl} has a route ${arg}; list them with GET /edges/https, or give EDGE_ID/ROUTE_ID`);
    } else if (/^edgtcp_/.test(arg)) {
      found = { kind: 'tcp', doc: await api.call('GET', `/edges/tcp/${arg}`), label: arg, rules: new Map() };
    } else {
      found = { kind: 'tls', doc: await api.call('GET', `/edges/tls/${arg}`), label: arg, rules: new Map() };
    }
    // The IP policies' rules as they are now, for `policy test` (the ingress reads them live).
    for (const id of ipPolicyIds(found.doc)) {
      const rules = await listAll(api, '/ip_policy_rules', 'ip_policy_rules', `obj.ip_policy.id == ${JSON.stringify(id)}`);
      found.rules.set(id, rules.map((r) => ({ cidr: r.cidr, action: r.action })));
    }
    return found;
  } catch (e) {
    if (e instanceof UsageError || e instanceof ShowError) throw e;
    throw new ShowError(explain(e, opts.apiUrl));
  } finally {
    await api.close();
  }
}

function ipPolicyIds(doc: Doc): string[] {
  const m = doc.ip_restriction;
  if (!m || m.enabled === false) return [];
  return m.ip_policy_ids ?? (m.ip_policies ?? []).map((p: Doc) => p.id);
}

// ---- the policy --------------------------------------------------------------------------

/** The route's chain as a policy, its ip_restriction written with each policy's rules beside its id. */
export function shownPolicy(found: Found): TrafficPolicy {
  const doc = { ...found.doc };
  const ids = ipPolicyIds(doc);
  if (ids.length) {
    const { ip_policy_ids: _ids, ip_policies: _p, ...rest } = doc.ip_restriction;
    doc.ip_restriction = { ...rest, ip_policies: ids.map((id) => ({ id, rules: found.rules.get(id) ?? [] })) };
  }
  const shape = found.kind === 'route' ? routePolicy(doc) : streamPolicy(doc);
  if ('problems' in shape) throw new ShowError(`the ${found.kind === 'route' ? 'route' : 'edge'}'s traffic_policy does not compile: ${shape.problems.map((p) => (p.path ? `${p.path}: ${p.message}` : p.message)).join('; ')}`);
  return shape.policy;
}

export function policyShowCommand(setCode: (code: number) => void, io: () => Io): Command {
  const cmd = new Command('show')
    .description("Print a route (from the API, or from a manifest file) as the traffic policy the ingress runs for it: each module a module-* action in the documented order, the route's own traffic_policy rules at their place. `edgeform policy test` takes the output as it is.")
    .argument('<route-id-or-file>', 'a route id (edghtsrt_...), EDGE_ID/ROUTE_ID, a TCP or TLS edge id, or a manifest file')
    .option('--route <which>', "in a manifest file with several routes: the route's match (/api), \"HTTPSEdge/NAME /api\", or a TCPEdge/TLSEdge by kind/name")
    .option('--json', 'print one JSON document: {"route", "policy"}');
  apiOptions(cmd);
  return cmd.action(async (arg: string, opts: Doc) => {
    const out = io();
    try {
      const found = isId(arg) ? await fromApi(arg, opts) : fromFile(arg, opts.route);
      const policy = shownPolicy(found);
      const unknown = ipPolicyIds(found.doc).filter((id) => !found.rules.has(id));
      // The ingress reads these live; without their rules `policy test` would take them as empty and let every client through.
      if (unknown.length) out.err(`${out.errStyle.yellow('Warning:')} ${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not in ${arg}: written with no rules, so policy test lets every client past ${unknown.length === 1 ? 'it' : 'them'}; give the folder that holds ${unknown.length === 1 ? 'its IPPolicy document' : 'their IPPolicy documents'}, or the route's id\n`);
      if (opts.json) out.out(`${JSON.stringify({ route: found.label, policy })}\n`);
      else {
        const empty = !Object.keys(policy).length;
        out.out(`# ${found.label}: the chain the ingress runs, as a traffic policy (edgeform policy test FILE takes it as it is)\n${empty ? '# no module is enabled: requests go straight to the backend\n{}\n' : stringify(policy, { lineWidth: 0 })}`);
      }
      setCode(0);
    } catch (e) {
      const message = (e as Error).message;
      if (opts.json) out.out(`${JSON.stringify({ error: message })}\n`);
      out.err(`${out.errStyle.red('Error:')} ${message}\n`);
      setCode(e instanceof UsageError ? 2 : 1);
    }
  });
}
