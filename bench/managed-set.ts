// The managed set the benchmarks plan against: manifests for N declared resources, built
// from units of ten that look like a real deployment (IP policies with rules, a backend,
// an HTTPS edge whose routes carry several modules, a secret among them), and the
// out-of-band changes that make 1% of them drift.
import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import type { ApiClient } from '../provider/client/index.js';
import { kindOf } from '../provider/catalog/index.js';
import type { LiveState } from '../reconciler/live/refresh.js';

type Doc = Record<string, any>;

/** Declared resources per unit: 2 policies + 4 rules + 1 backend + 1 edge + 2 routes. */
export const UNIT = 10;

/** The documents of unit `i` (3 documents, 10 declared resources with their children). */
export function unitDocuments(i: number): Doc[] {
  const a = (i >> 8) & 255;
  const b = i & 255;
  return [
    {
      kind: 'IPPolicy',
      name: `office-${i}`,
      description: `office networks of site ${i}`,
      rules: [
        { cidr: `10.${a}.${b}.0/24`, action: 'allow', description: 'LAN' },
        { cidr: `172.16.${b}.${a}/32`, action: 'deny', description: 'printer' },
      ],
    },
    {
      kind: 'IPPolicy',
      name: `partners-${i}`,
      metadata: '{"owner":"partnerships"}',
      rules: [
        { cidr: `198.51.${b}.0/24`, action: 'allow' },
        { cidr: `2001:db8:${i.toString(16)}::/48`, action: 'allow', description: 'partner v6' },
      ],
    },
    { kind: 'HTTPResponseBackend', name: `maintenance-${i}`, body: 'down for maintenance', status_code: 503, headers: { 'Content-Type': 'text/plain', 'Retry-After': '120' } },
    {
      kind: 'HTTPSEdge',
      name: `web-${i}`,
      description: `site ${i}`,
      hostports: [`app-${i}.example.com:443`],
      tls_termination: { min_version: '1.3' },
      routes: [
        {
          match_type: 'path_prefix',
          match: '/',
          description: 'site',
          backend: { backend_id: `HTTPResponseBackend/maintenance-${i}` },
          ip_restriction: { ip_policy_ids: [`IPPolicy/office-${i}`, `IPPolicy/partners-${i}`] },
          request_headers: { add: { 'X-Site': String(i) }, remove: ['X-Debug'] },
          response_headers: { add: { 'Strict-Transport-Security': 'max-age=63072000' } },
          compression: {},
          circuit_breaker: { error_threshold_percentage: 0.25, volume_threshold: 50 },
        },
        {
          match_type: 'exact_path',
          match: '/hooks/github',
          backend: { backend_id: `HTTPResponseBackend/maintenance-${i}` },
          webhook_verification: { provider: 'github', secret: `whsec_site_${i}_0123456789` },
          user_agent_filter: { allow: ['^GitHub-Hookshot/'] },
        },
      ],
    },
  ];
}

/** Writes manifests declaring `n` resources (a multiple of UNIT) into `dir`, 100 documents a file. */
export function writeManifests(dir: string, n: number): { units: number; documents: number } {
  const units = Math.ceil(n / UNIT);
  fs.mkdirSync(dir, { recursive: true });
  const perFile = 100;
  let batch: Doc[] = [];
  let file = 0;
  const flush = () => {
    if (!batch.length) return;
    fs.writeFileSync(path.join(dir, `set-${String(file++).padStart(4, '0')}.yaml`), batch.map((d) => stringify(d)).join('---\n'));
    batch = [];
  };
  let documents = 0;
  for (let i = 0; i < units; i++) {
    for (const d of unitDocuments(i)) {
      batch.push(d);
      documents++;
      if (batch.length >= perFile) flush();
    }
  }
  flush();
  return { units, documents };
}

/** One resource of the live set, addressed the way a Terraform state holds it (kind, id, parent). */
export interface StateEntry {
  kind: string;
  id: string;
  parent?: string;
}

/** Every resource of a live state that `stack` stamped, children included: what a Terraform state would list. */
export function stateOf(live: LiveState, stack: string): StateEntry[] {
  const out: StateEntry[] = [];
  for (const list of live.byKind.values()) {
    for (const l of list) {
      // Plans read every kind: the server's own bootstrap key is no part of the stack.
      if (l.stamp?.stack !== stack) continue;
      out.push({ kind: l.entry.kind, id: l.id });
      for (const kids of Object.values(l.children)) for (const k of kids) out.push({ kind: k.spec.entry.kind, id: k.id, parent: l.id });
    }
  }
  return out;
}

/**
 * Changes 1% of the declared resources out of band, spread over the set and over the kinds
 * of change a person makes by hand: PATCHes of top-level resources and of children, a
 * module replaced, a module removed. Returns how many resources drifted.
 */
export async function driftOnePercent(client: ApiClient, live: LiveState, units: number): Promise<number> {
  const count = Math.max(1, Math.round((units * UNIT) / 100));
  const step = Math.max(1, Math.floor(units / count));
  const byName = (kind: string, name: string) => {
    const found = (live.byKind.get(kind) ?? []).find((l) => l.stamp?.name === `${kind}/${name}`);
    if (!found) throw new Error(`${kind}/${name} is not live; the set was not applied`);
    return found;
  };
  const policy = kindOf('IPPolicy');
  const rule = kindOf('IPPolicyRule');
  const backend = kindOf('HTTPResponseBackend');
  const edge = kindOf('HTTPSEdge');
  const route = kindOf('HTTPSEdgeRoute');
  const changes: Array<(i: number) => Promise<unknown>> = [
    (i) => client.update(policy, byName('IPPolicy', `office-${i}`).id, { description: 'changed by hand' }),
    (i) => client.update(rule, byName('IPPolicy', `partners-${i}`).children.rules[0].id, { description: 'changed by hand' }),
    (i) => client.update(backend, byName('HTTPResponseBackend', `maintenance-${i}`).id, { status_code: 200 }),
    (i) => {
      const e = byName('HTTPSEdge', `web-${i}`);
      return client.putModule(route, 'circuit_breaker', e.children.routes[0].id, { error_threshold_percentage: 0.9 }, e.id);
    },
    (i) => client.update(edge, byName('HTTPSEdge', `web-${i}`).id, { description: 'changed by hand' }),
    (i) => {
      const e = byName('HTTPSEdge', `web-${i}`);
      return client.deleteModule(route, 'user_agent_filter', e.children.routes[1].id, e.id);
    },
  ];
  for (let c = 0; c < count; c++) await changes[c % changes.length]((c * step) % units);
  return count;
}
