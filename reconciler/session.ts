// One reconciler run: manifests in, live state read, plan made; and saved plans written
// and checked. The CLI and the tests drive these; nothing here prints.
import fs from 'node:fs';
import path from 'node:path';
import { ApiClient } from '../provider/client/index.js';
import { kindOf } from '../provider/catalog/index.js';
import { manifestKinds } from './manifest/kinds.js';
import { loadManifests, type FileOptions } from './manifest/load.js';
import { cdktfDocuments } from './sources/cdktf.js';
import { ManifestError, Problems } from './manifest/problems.js';
import { validateManifests, type Manifest } from './manifest/validate.js';
import { refresh, type LiveState } from './live/refresh.js';
import { kindsToRead } from './live/stack-kinds.js';
import { fetchSecretFingerprints, secretItems, type FingerprintCache } from './live/secret-fingerprints.js';
import { liveFingerprint, makePlan, planFingerprints, type PlanOptions, type PlanResult } from './plan/plan.js';
import type { Plan } from './plan/types.js';
import { callerKeyProblems } from './plan/caller-key.js';
import { targetPlan } from './plan/target.js';
import { declaredSecrets, fingerprintItem, restoreSecrets, stripSecrets, type SavedSecret } from './plan/saved-secrets.js';

export interface Target {
  apiUrl: string;
  apiKey: string;
  stack: string;
  /** Requests in flight at once (apply's --parallelism). */
  parallelism?: number;
  /** Writes per batch at most (apply's --batch-size; 1: one request per write). */
  batchSize?: number;
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

export interface Planned extends PlanResult {
  live: LiveState;
  kinds: string[];
}

/** Narrowing of a plan: --target and --exclude addresses. */
export interface Targeting {
  targets?: readonly string[];
  excludes?: readonly string[];
}

/**
 * `--exclude` takes manifest files (a glob, since before targeting existed) and addresses
 * (as Terraform's -exclude): a value whose first segment is a manifest kind (`HTTPSEdge/web`,
 * `IPPolicy/*`) is an address, anything else a glob.
 */
export function splitExcludes(values: readonly string[] = []): { addresses: string[]; globs: string[] } {
  const kinds = new Set(manifestKinds.map((k) => k.kind));
  const isAddress = (v: string) => kinds.has(v.split('/')[0]) && v.includes('/');
  return { addresses: values.filter(isAddress), globs: values.filter((v) => !isAddress(v)) };
}

export async function planWith(client: ApiClient, manifest: Manifest, opts: Omit<PlanOptions, 'apiCalls'> & Targeting, fingerprintCache?: FingerprintCache): Promise<Planned> {
  const before = client.calls;
  const kinds = await kindsToRead(client, opts.stack, manifest.documents.map((d) => d.kind));
  const live = await refresh(client, kinds);
  // Secrets matter only to a plan that may update: refresh-only reports drift, destroy deletes.
  const items = opts.mode === 'apply' ? secretItems(manifest) : [];
  const secrets = items.length ? await fetchSecretFingerprints(client, opts.stack, items, fingerprintCache) : { warnings: [] };
  const made = makePlan(manifest, live, { ...opts, apiCalls: client.calls - before, callerKeyId: client.keyId, secretFingerprints: secrets.byAddress });
  const narrowed = targetPlan(made.plan, opts.targets ?? [], opts.excludes ?? []);
  const result = { ...made, plan: narrowed.plan, problems: [...made.problems, ...narrowed.problems] };
  return { ...result, warnings: [...secrets.warnings, ...(made.warnings ?? []), ...narrowed.warnings], live, kinds: kinds.map((k) => k.kind) };
}

// ------------------------------------------------------------------------------ saved plans

export interface SavedPlan {
  format: 'edgeform-plan';
  /** 1: write-only values in the operations (older edgeforms); 2: fingerprints of them instead. */
  version: 1 | 2;
  kinds: string[];
  plan: Plan;
  /** Where the manifests were (absolute), to interpolate the write-only values again at apply. */
  sources?: ManifestSources;
  secrets?: SavedSecret[];
}

export interface ManifestSources {
  files: string[];
  cdktf: string[];
  exclude: string[];
}

/**
 * Writes a plan for `apply FILE`, owner-only. It holds no secret: write-only values are
 * replaced by server-keyed fingerprints, and apply reads them again from the manifests.
 */
export async function savePlan(file: string, planned: Planned, client: ApiClient, sources: ManifestSources) {
  const { plan, taken } = stripSecrets(planned.plan);
  const fingerprints = taken.length ? await fetchSecretFingerprints(client, plan.stack, taken.map((t) => fingerprintItem(t, t.value))) : { byAddress: new Map<string, string>(), warnings: [] };
  const secrets: SavedSecret[] = taken.map(({ op, address, path: at }) => ({ op, address, path: at, fingerprint: fingerprints.byAddress?.get(`${address}#${at}`) ?? null }));
  const abs = (list: string[]) => list.map((p) => path.resolve(p));
  const saved: SavedPlan = {
    format: 'edgeform-plan',
    version: 2,
    kinds: planned.kinds,
    plan,
    sources: { files: abs(sources.files), cdktf: abs(sources.cdktf), exclude: sources.exclude },
    secrets,
  };
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
  if (saved?.format !== 'edgeform-plan' || (saved.version !== 1 && saved.version !== 2)) throw new Error(`${file} is not a plan saved by "edgeform plan --out"`);
  return saved;
}

/**
 * The saved plan's operations with their write-only values back, read again from the
 * manifests it was made from; each checked against the fingerprint saved with the plan.
 * Throws, naming the resource and field, when one is no longer declared or differs.
 */
export async function withSecretsBack(client: ApiClient, saved: SavedPlan): Promise<{ plan: Plan; warnings: string[] }> {
  const secrets = saved.secrets ?? [];
  if (!secrets.length) return { plan: saved.plan, warnings: [] };
  const src = saved.sources!;
  let manifest: Manifest;
  try {
    manifest = loadDesired(src.files, src.cdktf, { exclude: src.exclude });
  } catch (e) {
    throw new Error(`the saved plan holds no secrets; they are read again from the manifests it was made from (${[...src.files, ...src.cdktf].join(', ')}), which cannot be read now: ${(e as Error).message}`);
  }
  const declared = declaredSecrets(manifest);
  const values = new Map<SavedSecret, unknown>();
  for (const s of secrets) {
    const value = declared.get(s.address)?.[s.path];
    if (value === undefined) throw new Error(`the saved plan sends ${s.address} ${s.path}, which the manifests no longer declare; run plan again`);
    values.set(s, value);
  }
  const warnings: string[] = [];
  if (secrets.some((s) => s.fingerprint !== null)) {
    const now = await fetchSecretFingerprints(client, saved.plan.stack, secrets.map((s) => fingerprintItem(s, values.get(s))));
    warnings.push(...now.warnings);
    for (const s of secrets) {
      const f = now.byAddress?.get(`${s.address}#${s.path}`);
      if (s.fingerprint !== null && f !== undefined && f !== s.fingerprint) {
        throw new Error(`the value of ${s.address} ${s.path} differs from the one the plan was made with (an environment variable or file it is read from changed since); run plan again`);
      }
    }
  }
  if (secrets.some((s) => s.fingerprint === null)) warnings.push('the server could not fingerprint write-only values when the plan was saved, so those read again from the manifests could not be checked against it');
  return { plan: restoreSecrets(saved.plan, secrets, values), warnings };
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
