// The ownership stamp: edgeform's only memory of what it manages. It lives in a resource's
// `metadata`, next to the user's own metadata (docs/manifest.md, "The ownership stamp"):
// a JSON object whose `edgeform` key names the stack and document, and carries salted
// hashes of what was applied (`h`, to tell drift from configuration changes) and of its
// write-only values (`s`, so secrets are compared without being stored).
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';

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
}

/** `s` of a resource adopted with its write-only values unknown: they are taken as declared until the next update sends them. */
export const ADOPTED = 'adopted';

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
  return { stamp: { stack: s.stack, name: s.name, h: s.h, s: s.s }, user };
}

/** The metadata to send: the user's metadata with the stamp merged in. */
export function encodeMetadata(user: string, stamp: Stamp): string {
  const clean: Stamp = { stack: stamp.stack };
  if (stamp.name) clean.name = stamp.name;
  if (stamp.h) clean.h = stamp.h;
  if (stamp.s) clean.s = stamp.s;
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

/** Canonical JSON: keys sorted, so equal documents hash equal. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isObject(value)) {
    return `{${Object.keys(value).sort().filter((k) => value[k] !== undefined).map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * A salted, truncated SHA-256 of a value. The salt (stack and address) keeps equal secrets
 * in different resources from hashing alike; the values themselves are never stored.
 */
export function fingerprint(salt: string, value: unknown): string {
  return createHash('sha256').update(`edgeform\u0000${salt}\u0000`).update(canonical(value)).digest('base64url').slice(0, 22);
}
