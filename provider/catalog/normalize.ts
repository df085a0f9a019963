// Normalisation shared by the reconciler and the Terraform provider: both compare what a
// user declared with what the server holds, and must agree on what counts as a change.
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import type { KindEntry } from './define.js';
import { defOf, fieldOf, shapeOf, traitsOf, unwrap } from './traits.js';
import { fromReadFields } from './walk.js';

type Doc = Record<string, any>;

export type Normalized = { ok: true; value: Doc } | { ok: false; issues: z.core.$ZodIssue[] };

/** A desired create body as the server would store it: defaults filled, values canonical. */
export function normalizeDesired(kind: KindEntry, body: Doc): Normalized {
  const r = kind.create.safeParse(body);
  return r.success ? { ok: true, value: r.data } : { ok: false, issues: r.error.issues };
}

/** The input form of a live read form (Refs become ids; computed and write-only dropped). */
export function liveInput(kind: KindEntry, read: Doc): Doc {
  const input = fromReadFields(kind.fields, read);
  // Parsed again, so values stored before a canonical form changed (a PEM's final newline)
  // compare as what the server would store now; key order is kept stable too.
  const r = kind.create.safeParse(input);
  return r.success ? r.data : parsedByField(kind.fields, input);
}

/**
 * A read lacks the write-only values a create requires (a private key; a client secret
 * beside its client id), so the whole body does not parse: parse each field that does,
 * going into objects whose own rules fail for the same reason.
 */
function parsedByField(shape: Record<string, z.ZodType>, value: Doc): Doc {
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => {
      const schema = fieldOf(shape, k);
      const p = schema?.safeParse(v);
      if (!schema || p!.success) return [k, schema ? p!.data : v];
      const sub = shapeOf(schema);
      return [k, sub && v && typeof v === 'object' && !Array.isArray(v) ? parsedByField(sub, v) : v];
    }),
  );
}

function elementShape(schema: z.ZodType) {
  const s = unwrap(schema);
  const d = defOf(s) as unknown as { type: string; element?: z.ZodType };
  return d.type === 'array' && d.element ? shapeOf(d.element) : undefined;
}

/**
 * Removes what a plan cannot compare: write-only values (compared by fingerprint instead),
 * computed fields, and server-defaulted fields the desired document leaves unset.
 */
export function comparable(shape: Record<string, z.ZodType>, desired: Doc | null | undefined, live: Doc | null | undefined): [Doc | null, Doc | null] {
  if (desired == null || live == null) return [desired ?? null, live ?? null];
  const d: Doc = {};
  const l: Doc = {};
  for (const [name, schema] of Object.entries(shape)) {
    const t = traitsOf(schema);
    if (t.writeOnly || t.computed) continue;
    if (t.serverDefault && desired[name] === undefined) continue;
    const sub = shapeOf(schema);
    const el = elementShape(schema);
    let dv = desired[name];
    let lv = live[name];
    if (sub && dv && lv && typeof dv === 'object' && typeof lv === 'object') {
      [dv, lv] = comparable(sub, dv, lv);
    } else if (el && Array.isArray(dv) && Array.isArray(lv) && dv.length === lv.length) {
      const pairs = dv.map((x: Doc, i: number) => comparable(el, x, lv[i]));
      dv = pairs.map((p) => p[0]);
      lv = pairs.map((p) => p[1]);
    }
    if (dv !== undefined) d[name] = dv;
    if (lv !== undefined) l[name] = lv;
  }
  return [d, l];
}

/** Write-only values of a desired document, by path, for fingerprinting. */
export function writeOnlyValues(shape: Record<string, z.ZodType>, doc: Doc, base = ''): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(shape)) {
    const v = doc?.[name];
    if (v == null) continue;
    const path = base ? `${base}.${name}` : name;
    if (traitsOf(schema).writeOnly) out[path] = v;
    const sub = shapeOf(schema);
    if (sub && typeof v === 'object' && !Array.isArray(v)) Object.assign(out, writeOnlyValues(sub, v, path));
  }
  return out;
}

/**
 * Whether two input values of one field normalise to the same stored value: a CIDR, a
 * header name or a hostport that the server canonicalises. Null and absent are the same.
 */
export function sameNormalized(schema: z.ZodType, a: unknown, b: unknown): boolean {
  if (isDeepStrictEqual(a, b)) return true;
  const pa = schema.safeParse(a ?? undefined);
  const pb = schema.safeParse(b ?? undefined);
  return pa.success && pb.success && isDeepStrictEqual(pa.data, pb.data);
}

/**
 * The value to keep for a field: the declared form when it normalises equal to the live
 * one (so `10.1.2.3` stays as written although the server holds `10.1.2.3/32`), else live.
 */
export const preferDeclared = (schema: z.ZodType, declared: unknown, live: unknown) =>
  declared != null && sameNormalized(schema, declared, live) ? declared : live;
