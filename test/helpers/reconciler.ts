// Running the reconciler's commands against a test server, as a user would, keeping every
// output so a test can check afterwards that no secret ever appeared in one.
import path from 'node:path';
import { stringify } from 'yaml';
import { runCli, type CliResult } from './cli.js';
import type { TestServer } from './server.js';

/** What plan prints when live state matches the manifests. */
export const NO_CHANGES = 'No changes. Your infrastructure matches the configuration.';

/** Manifest documents as one multi-document YAML text. */
export const toYaml = (docs: Record<string, any>[]) => docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');

/** The example manifest (the README's quick start); its secret comes from GH_SECRET. */
export const QUICKSTART = path.resolve(import.meta.dirname, '../../examples/manifests/quickstart');

export interface StackRunner {
  env: Record<string, string | undefined>;
  /** Every stdout and stderr so far. */
  outputs: string[];
  run(args: string[], extraEnv?: Record<string, string | undefined>, answer?: string): Promise<CliResult>;
  /** `plan --json` that must succeed; the parsed document. */
  planJson(args: string[], extraEnv?: Record<string, string | undefined>): Promise<any>;
  /** `apply --auto-approve` that must succeed. */
  apply(args: string[]): Promise<CliResult>;
}

export function stackRunner(s: TestServer, env: Record<string, string | undefined> = {}): StackRunner {
  const runner: StackRunner = {
    env: { EDGEFORM_API_URL: s.url, EDGEFORM_API_KEY: s.token, ...env },
    outputs: [],
    async run(args, extraEnv = {}, answer) {
      const r = await runCli(args, { ...runner.env, ...extraEnv }, answer);
      runner.outputs.push(r.stdout, r.stderr);
      return r;
    },
    async planJson(args, extraEnv) {
      const r = await runner.run(['plan', ...args, '--json'], extraEnv);
      if (r.code !== 0) throw new Error(`plan ${args.join(' ')} exited ${r.code}: ${r.stdout}${r.stderr}`);
      return r.json();
    },
    async apply(args) {
      const r = await runner.run(['apply', ...args, '--auto-approve']);
      if (r.code !== 0) throw new Error(`apply ${args.join(' ')} exited ${r.code}: ${r.stdout}${r.stderr}`);
      return r;
    },
  };
  return runner;
}

/** The changes of a JSON plan that do something, by address. */
export function activeChanges(plan: any): Record<string, any> {
  return Object.fromEntries(plan.resource_changes.filter((c: any) => c.change.actions[0] !== 'no-op').map((c: any) => [c.address, c]));
}

type Doc = Record<string, any>;

const POLICIES = 20;
const EDGES = 8;
/** Policies with two rules, backends, and edges whose three routes refer to both: 100 resources. */
export function bigManifest(): string {
  const docs: Doc[] = [];
  for (let i = 0; i < POLICIES; i++) {
    docs.push({ kind: 'IPPolicy', name: `site-${i}`, description: `site ${i}`, rules: [{ cidr: `10.${i}.1.0/24`, action: 'allow' }, { cidr: `10.${i}.2.0/24`, action: 'deny' }] });
  }
  for (let i = 0; i < EDGES; i++) {
    docs.push({ kind: 'HTTPResponseBackend', name: `page-${i}`, body: `page ${i}` });
    docs.push({
      kind: 'HTTPSEdge',
      name: `edge-${i}`,
      hostports: [`e${i}.example.com:443`],
      routes: ['/', '/api', '/static'].map((match, j) => ({
        match_type: 'path_prefix',
        match,
        backend: { backend_id: `HTTPResponseBackend/page-${i}` },
        ip_restriction: { ip_policy_ids: [`IPPolicy/site-${(i + j) % POLICIES}`] },
      })),
    });
  }
  return docs.map((d) => stringify(d)).join('---\n');
}
/** Resources bigManifest declares. */
export const DECLARED = POLICIES * 3 + EDGES * 5;

/** What exists, counted so that a duplicate shows (a 429 of a server with a small rate limit waits for its Retry-After, up to 10 times). */
export async function census(s: TestServer) {
  const get = async (path: string) => {
    for (let attempt = 1; ; attempt++) {
      const r = await s.get(path);
      if (r.status !== 429 || attempt >= 10) return r;
      await new Promise((res) => setTimeout(res, Number(r.headers.get('retry-after') ?? 1) * 1000));
    }
  };
  const edges = (await get('/edges/https?limit=100')).body.https_edges;
  return {
    policies: (await get('/ip_policies?limit=100')).body.ip_policies.length,
    rules: (await get('/ip_policy_rules?limit=100')).body.ip_policy_rules.length,
    backends: (await get('/backends/http_response?limit=100')).body.backends.length,
    edges: edges.length,
    routes: edges.map((e: Doc) => e.routes.map((r: Doc) => r.match).join(' ')).sort(),
  };
}
/** The census once bigManifest is applied. */
export const COMPLETE = { policies: POLICIES, rules: POLICIES * 2, backends: EDGES, edges: EDGES, routes: Array(EDGES).fill('/ /api /static') };
