// One reconciler run: manifests in, live state read, plan made; and saved plans written
// and checked. The CLI and the tests drive these; nothing here prints.
import fs from 'node:fs';
import path from 'node:path';
import { ApiClient } from '../provider/client/index.js';
import { kindOf, type KindEntry } from '../provider/catalog/index.js';
import { manifestKinds } from './manifest/kinds.js';
import { loadManifests, type FileOptions } from './manifest/load.js';
import { cdktfDocuments } from './sources/cdktf.js';
import { ManifestError, Problems } from './manifest/problems.js';
import { validateManifests, type Manifest } from './manifest/validate.js';
import { refresh, type LiveState } from './live/refresh.js';
import { fetchSecretFingerprints, secretItems, type FingerprintCache } from './live/secret-fingerprints.js';
import { liveFingerprint, makePlan, planFingerprints, type PlanOptions, type PlanResult } from './plan/plan.js';
import type { Plan } from './plan/types.js';
import { callerKeyProblems } from './plan/caller-key.js';

export interface Target {
  apiUrl: string;
  apiKey: string;
  stack: string;
  /** Requests in flight at once (apply's --parallelism). */
  parallelism?: number;
}

export function clientFor(t: Target): ApiClient {
  return new ApiClient({ baseUrl: t.apiUrl, apiKey: t.apiKey, concurrency: t.parallelism ?? 10, userAgent: 'edgeform-reconciler' });
}

/** Reads and checks manifests (and synthesized CDKTF stacks); throws ManifestError listing every problem. */
export function loadDesired(paths: readonly string[], cdktfDirs: readonly string[] = [], files: FileOptions = {}): Manifest {
  const problems = new Problems();
  const raw = [...loadManifests(paths, problems, files), ...cdktfDirs.flatMap((d) => cdktfDocuments(d, problems))];
  const manifest = validateManifests(raw, problems);
  if (!problems.empty) throw new ManifestError(problems);
  return manifest;
}

/**
 * The kinds a plan reads: every kind a stack can manage, declared or not. A kind no
 * document declares any more still holds what the stack applied (an edge, with its
 * hostports): reading only the declared kinds hid it, and the plan said "No changes". It
 * costs one list call per kind that has nothing to list.
 */
export function kindsToRead(): KindEntry[] {
  return [...manifestKinds];
}

export interface Planned extends PlanResult {
  live: LiveState;
  kinds: string[];
}

export async function planWith(client: ApiClient, manifest: Manifest, opts: Omit<PlanOptions, 'apiCalls'>, fingerprintCache?: FingerprintCache): Promise<Planned> {
  const before = client.calls;
  const kinds = kindsToRead();
  const live = await refresh(client, kinds);
  // Secrets matter only to a plan that may update: refresh-only reports drift, destroy deletes.
  const items = opts.mode === 'apply' ? secretItems(manifest) : [];
  const secrets = items.length ? await fetchSecretFingerprints(client, opts.stack, items, fingerprintCache) : { warnings: [] };
  const result = makePlan(manifest, live, { ...opts, apiCalls: client.calls - before, callerKeyId: client.keyId, secretFingerprints: secrets.byAddress });
  return { ...result, warnings: [...secrets.warnings, ...(result.warnings ?? [])], live, kinds: kinds.map((k) => k.kind) };
}

// ------------------------------------------------------------------------------ saved plans

export interface SavedPlan {
  format: 'edgeform-plan';
  version: 1;
  kinds: string[];
  plan: Plan;
}

/** Writes a plan for `apply FILE`. It holds the values to send, secrets included: owner-only permissions. */
export function savePlan(file: string, planned: Planned) {
  const saved: SavedPlan = { format: 'edgeform-plan', version: 1, kinds: planned.kinds, plan: planned.plan };
  try {
    fs.writeFileSync(file, `${JSON.stringify(saved)}\n`, { mode: 0o600 });
    fs.chmodSync(file, 0o600);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? `no folder ${path.dirname(path.resolve(file))}` : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a folder' : (e as Error).message;
    throw new Error(`cannot save the plan to ${file} (${why}); give --out a file in a folder that exists and you can write to`);
  }
}

export function readPlan(file: string): SavedPlan {
  let saved: SavedPlan;
  // `kubectl apply -f` habits: a manifest given where a saved plan goes.
  if (/\.ya?ml$/i.test(file) || (fs.existsSync(file) && fs.statSync(file).isDirectory())) {
    throw new Error(`${file} is a manifest, not a plan saved by "edgeform plan --out"; to apply manifests, give them with -f: edgeform apply -f ${file}`);
  }
  try {
    saved = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`cannot read the saved plan ${file}: ${(e as Error).message}; make one with "edgeform plan -f PATH --out ${file}"`);
  }
  if (saved?.format !== 'edgeform-plan' || saved.version !== 1) throw new Error(`${file} is not a plan saved by "edgeform plan --out"`);
  return saved;
}

/**
 * Why a saved plan cannot be applied now: the resources that changed since it was made
 * (`stale`; none: it can be applied exactly), and what it would do to the API key it is now
 * applied with (`problems`: it may have been made with another key).
 */
export async function checkSavedPlan(client: ApiClient, saved: SavedPlan): Promise<{ stale: string[]; problems: string[] }> {
  const live = await refresh(client, saved.kinds.map(kindOf));
  const problems = callerKeyProblems(saved.plan.changes, saved.plan.operations, live, client.keyId);
  const now = planFingerprints(saved.plan.changes, live);
  const stale: string[] = [];
  for (const [address, was] of Object.entries(saved.plan.fingerprints)) {
    if (was === null) {
      // Planned as a create: it must still not exist.
      const [kind] = address.split('/');
      const exists = (live.byKind.get(kind) ?? []).some((l) => l.stamp?.stack === saved.plan.stack && l.stamp.name === address);
      if (exists) stale.push(`${address} (now exists)`);
    } else if (now[address] !== was) {
      stale.push(`${address} (${now[address] === 'missing' ? 'deleted' : 'changed'})`);
    }
  }
  return { stale, problems };
}

export { liveFingerprint };
