// Saved plans that hold no secret (open Terraform complaints: hashicorp/terraform#34297,
// #29778): `plan --out` takes the write-only values out of the operations it saves and keeps,
// for each, a fingerprint keyed by the server (secret-fingerprints.ts: no reader of the file
// can test guesses against it offline). `apply PLANFILE` reads the manifests again (their
// ${env:...} and ${file:...} interpolated anew), checks each value against its fingerprint,
// and puts it back; a value that differs is refused, naming the resource and the field.
import { kindOf } from '../../provider/catalog/index.js';
import { mergeSecrets, splitSecrets } from '../../provider/catalog/walk.js';
import type { Manifest } from '../manifest/validate.js';
import { secretItems } from '../live/secret-fingerprints.js';
import type { Plan } from './types.js';

type Doc = Record<string, any>;

/** One write-only value taken out of a saved plan. */
export interface SavedSecret {
  /** The operation whose body held it. */
  op: number;
  /** The document or child it is declared in, and its path there (`oidc.client_secret`). */
  address: string;
  path: string;
  /** Keyed by the server over the stack, `address#path` and the value; null when the server cannot make one. */
  fingerprint: string | null;
}

/** The value's path within the operation's body: a module operation's body is the module itself. */
const bodyPath = (module: string | undefined, path: string) => (module ? path.slice(module.length + 1) : path);

/** The plan with write-only values taken out of its operations, and what was taken. */
export function stripSecrets(plan: Plan): { plan: Plan; taken: Array<Omit<SavedSecret, 'fingerprint'> & { value: unknown }> } {
  const taken: Array<Omit<SavedSecret, 'fingerprint'> & { value: unknown }> = [];
  const operations = plan.operations.map((op) => {
    if (!op.body) return op;
    const fields = kindOf(op.kind).fields;
    const shape = op.module ? { [op.module]: fields[op.module] } : fields;
    const [pub, secrets] = splitSecrets(shape, op.module ? { [op.module]: op.body } : op.body);
    if (!Object.keys(secrets).length) return op;
    for (const [path, value] of Object.entries(secrets)) taken.push({ op: op.index, address: op.address, path, value });
    return { ...op, body: op.module ? pub[op.module] : pub };
  });
  return { plan: { ...plan, operations }, taken };
}

/** The declared write-only values of every document and child that has some, by address. */
export const declaredSecrets = (manifest: Manifest) => new Map(secretItems(manifest).map((i) => [i.address, i.values]));

/** The item the server fingerprints for one value: its own address, so values are told apart. */
export const fingerprintItem = (s: { address: string; path: string }, value: unknown) => ({ address: `${s.address}#${s.path}`, values: { [s.path]: value } });

/** Puts the values back into the operations; the values must be checked against the fingerprints first. */
export function restoreSecrets(plan: Plan, saved: readonly SavedSecret[], values: ReadonlyMap<SavedSecret, unknown>): Plan {
  const byOp = new Map<number, Record<string, unknown>>();
  for (const s of saved) {
    const op = plan.operations[s.op];
    (byOp.get(s.op) ?? byOp.set(s.op, {}).get(s.op)!)[bodyPath(op.module, s.path)] = values.get(s);
  }
  return { ...plan, operations: plan.operations.map((op) => (byOp.has(op.index) ? { ...op, body: mergeSecrets(op.body as Doc, byOp.get(op.index)!) } : op)) };
}
