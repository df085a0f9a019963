// The ownership stamp: edgeform's only memory of what it manages. It lives in a resource's
// `metadata`, next to the user's own metadata (docs/manifest.md, "The ownership stamp"):
// a JSON object whose `edgeform` key names the stack and document, and carries a salted
// hash of what was applied (`h`, to tell drift from configuration changes) and a keyed
// fingerprint of its write-only values (`s`, made by the server: secret-fingerprints.ts),
// so secrets are compared without being stored or guessable from what readers see.
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { canonical } from '../../provider/catalog/canonical-json.js';

export interface Stamp {
  stack: string;
  /** `Kind/name` of the document (top-level resources only). */
  name?: string;
  /** Hash of the normalised document as applied. */
  h?: string;
  /** Hash of the write-only values as applied. */
  s?: string;
  /** The user's metadata when it is not a JSON object. */
  text?: string;
  /**
   * prevent_destroy, as last applied: the protection outlives the document, so deleting the
   * document from the manifests does not silently lift it (hashicorp/terraform#17599).
   */
  p?: true;
}

/** `s` of a resource adopted with its write-only values unknown: they are taken as declared until the next update sends them. */
export const ADOPTED = 'adopted';
/**
 * `s` written against a server without the fingerprint extension: the values were sent but
 * nothing readers could test guesses against is kept, so they are taken as declared.
 */
export const UNKNOWN = 'unknown';
/** The prefix of a keyed `s` (server/extensions/fingerprints.ts). */
export const KEYED = 'k1.';

/**
 * Whether the declared write-only values differ from those the live stamp records.
 * `want` is the keyed fingerprint of the declared values, or UNKNOWN when the server cannot
 * make one. A live `s` in the old unkeyed form (an edgeform before keyed fingerprints) is
 * compared with `legacy()`, the old hash of the declared values, so an unchanged secret
 * plans no change; the next update of the resource writes the keyed form. The old hash is
 * never written again.
 */
export function secretsChanged(live: string | undefined, want: string | undefined, legacy: () => string): boolean {
  if (live === want) return false;
  if (want === undefined || live === undefined) return live !== want && !(want === UNKNOWN && live === undefined);
  if (live === ADOPTED || live === UNKNOWN) return false;
  if (!live.startsWith(KEYED)) return live !== legacy();
  return want !== UNKNOWN;
}

/** Whether a live `s` is in the old unkeyed form, which readers of the metadata can test guesses against. */
export const isLegacySecretFingerprint = (s: string | undefined) => !!s && s !== ADOPTED && s !== UNKNOWN && !s.startsWith(KEYED);

export interface DecodedMetadata {
  stamp?: Stamp;
  /** The user's metadata without the stamp. */
  user: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => v != null && typeof v === 'object' && !Array.isArray(v);

function parseObject(text: string): Record<string, unknown> | undefined {
  if (!text.trimStart().startsWith('{')) return undefined;
  try {
    const v = JSON.parse(text);
    return isObject(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

export function decodeMetadata(metadata: string | null | undefined): DecodedMetadata {
  const text = metadata ?? '';
  const obj = parseObject(text);
  const stamp = obj?.edgeform;
  if (!obj || !isObject(stamp) || typeof stamp.stack !== 'string') return { user: text };
  const { edgeform: _, ...rest } = obj;
  const s = stamp as unknown as Stamp;
  const user = typeof s.text === 'string' ? s.text : Object.keys(rest).length ? JSON.stringify(rest) : '';
  return { stamp: { stack: s.stack, name: s.name, h: s.h, s: s.s, ...(s.p === true ? { p: true as const } : {}) }, user };
}

/** The metadata to send: the user's metadata with the stamp merged in. */
export function encodeMetadata(user: string, stamp: Stamp): string {
  const clean: Stamp = { stack: stamp.stack };
  if (stamp.name) clean.name = stamp.name;
  if (stamp.h) clean.h = stamp.h;
  if (stamp.s) clean.s = stamp.s;
  if (stamp.p) clean.p = true;
  const obj = user === '' ? {} : parseObject(user);
  if (obj && !('edgeform' in obj)) return JSON.stringify({ edgeform: clean, ...obj });
  return JSON.stringify({ edgeform: { ...clean, text: user } });
}

/** Whether two user metadata values mean the same: equal text, or equal JSON objects. */
export function sameUserMetadata(a: string, b: string): boolean {
  if (a === b) return true;
  const pa = parseObject(a);
  const pb = parseObject(b);
  return pa !== undefined && pb !== undefined && isDeepStrictEqual(pa, pb);
}

export { canonical };

/**
 * A salted, truncated SHA-256 of a value. The salt (stack and address) keeps equal values
 * in different resources from hashing alike. Never for write-only values: the salt is
 * readable, so anyone could test guesses against the hash (stamps of older edgeforms did:
 * secretsChanged reads them).
 */
export function fingerprint(salt: string, value: unknown): string {
  return createHash('sha256').update(`edgeform\u0000${salt}\u0000`).update(canonical(value)).digest('base64url').slice(0, 22);
}
