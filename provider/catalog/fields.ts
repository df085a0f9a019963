// Field builders shared by the kind files. Each call makes a fresh schema, so traits
// attached to one field never leak onto another.
import { z } from 'zod';
import { withTraits, type OnDelete, type Traits } from './traits.js';
import { parseCidr } from './validate/cidr.js';
import { headerNameProblem, headerValueProblem } from './validate/http.js';
import { regexProblem } from './validate/regex.js';
import { canonicalHostport, hostportProblem } from './validate/hostport.js';
import { parseTrafficPolicy, type Phase } from './validate/traffic-policy.js';

const utf8 = new TextEncoder();
const bytes = (s: string) => utf8.encode(s).length;

/**
 * A string bounded in bytes (UTF-8) or characters (Unicode code points, as JSON Schema's
 * maxLength counts them; an emoji is one character, not two UTF-16 units), as SPEC words each limit.
 */
export function bounded(max: number, unit: 'bytes' | 'chars' = 'bytes') {
  // max() (UTF-16 units, never more than the UTF-8 bytes) gives JSON Schema its maxLength and
  // refuses most long values; the byte count catches the rest without saying it twice.
  if (unit === 'bytes') return z.string().max(max, `must be at most ${max} bytes`).refine((v) => v.length > max || bytes(v) <= max, `must be at most ${max} bytes (UTF-8)`);
  return z.string().refine((v) => [...v].length <= max, `must be at most ${max} characters`).meta({ maxLength: max });
}

export const description = (unit: 'bytes' | 'chars' = 'bytes') =>
  bounded(255, unit).default('').describe(`Human-readable description, at most 255 ${unit === 'bytes' ? 'bytes' : 'characters'}.`);

export const metadata = (unit: 'bytes' | 'chars' = 'bytes') =>
  bounded(4096, unit).default('').describe(`Arbitrary user-defined data, at most 4096 ${unit === 'bytes' ? 'bytes' : 'characters'}.`);

/** Prefixes of every kind, filled in by `defineKind`; reference checks read it at parse time. */
export const prefixOfKind = new Map<string, string>();

const idOf = (to: readonly string[]) =>
  z.string().superRefine((v, ctx) => {
    const prefixes = to.map((k) => prefixOfKind.get(k)).filter(Boolean);
    if (!prefixes.some((p) => v.startsWith(`${p}_`) && v.length > p!.length + 1)) {
      ctx.addIssue({ code: 'custom', message: `"${v}" is not an id of ${to.join(' or ')} (ids start with ${prefixes.map((p) => `${p}_`).join(' or ')})` });
    }
  });

export interface RefOptions { readAs?: string; onDelete: OnDelete; replace?: boolean; acyclic?: boolean }

/** A field holding the id of another resource. */
export function refId(to: readonly string[], opts: RefOptions) {
  return withTraits(idOf(to), { ref: { to, readAs: opts.readAs, onDelete: opts.onDelete }, ...(opts.replace ? { replace: true } : {}) });
}

/** A field holding a list of ids of other resources; empty by default unless `min` > 0. */
export function refIds(to: readonly string[], opts: RefOptions & { min?: number; max?: number; what?: string }) {
  let list = boundedList(idOf(to), opts.max ?? ITEM_LIMITS.ids);
  if (opts.min) list = list.min(opts.min, `name at least ${opts.min} ${opts.what ?? 'id'}`);
  const withRef = withTraits(list, { ref: { to, readAs: opts.readAs, onDelete: opts.onDelete }, ...(opts.replace ? { replace: true } : {}) });
  return opts.min ? withRef : withRef.default([]);
}

/** A map whose keys are ids of other resources, at most `max` of them. */
export function refKeyedMap<V extends z.ZodType>(to: readonly string[], value: V, opts: RefOptions & { max: number }) {
  const map = z.record(idOf(to), value).refine((m) => Object.keys(m).length <= opts.max, `at most ${opts.max} entries`).meta({ maxProperties: opts.max });
  return withTraits(map, { ref: { to, onDelete: opts.onDelete, inKeys: true, ...(opts.acyclic ? { acyclic: true } : {}) } });
}

/** The read form of a reference. */
export const ref = () => z.object({ id: z.string(), uri: z.string() });

export const traitsOn = <T extends z.ZodType>(schema: T, t: Traits) => withTraits(schema, t);
export const replaceable = <T extends z.ZodType>(schema: T) => withTraits(schema, { replace: true });
export const secret = <T extends z.ZodType>(schema: T, read: 'null' | 'omit' = 'null') => withTraits(schema, { writeOnly: read });
/** Server-set: in the read form only (JSON Schema `readOnly`, so documents show it is never sent). */
export const computed = <T extends z.ZodType>(schema: T) => withTraits(schema.meta({ readOnly: true }) as T, { computed: true });
/** Marks each server-set field of a kind's `computed` shape as derived from these body fields alone (plans keep it while they stay). */
export const following = <T extends z.ZodRawShape>(fields: readonly string[], shape: T): T =>
  Object.fromEntries(Object.entries(shape).map(([k, v]) => [k, withTraits(v as z.ZodType, { follows: fields })])) as unknown as T;
/** Marks each server-set field of a kind's `computed` shape as one that no in-place update changes. */
export const stable = <T extends z.ZodRawShape>(shape: T): T =>
  Object.fromEntries(Object.entries(shape).map(([k, v]) => [k, withTraits(v as z.ZodType, { stable: true })])) as unknown as T;

export const uint32 = () => z.number().int().min(0).max(4_294_967_295);
export const timestamp = () => z.string().describe('RFC 3339 timestamp in UTC.');

/**
 * Item limits of the lists and maps a client sends (docs/api.md, "Limits"): far above what a
 * real configuration holds, low enough that one resource, and so a page of a hundred, stays
 * small. Each becomes a zod check and JSON Schema's maxItems / maxProperties, so the server,
 * `edgeform validate`, Terraform and the OpenAPI document all refuse the same.
 */
export const ITEM_LIMITS = {
  /** Headers added, headers removed, headers of a fixed response. */
  headers: 64,
  /** Labels a tunnel-group backend matches. */
  labels: 64,
  /** Lists of short strings: scopes, email addresses and domains, groups, teams, principals, user-agent patterns. */
  strings: 256,
  /** Lists of resource ids (IP policies, certificate authorities). */
  ids: 256,
  /** A weighted backend's children. */
  weights: 64,
  /** SSH certificate options and extensions. */
  sshOptions: 64,
} as const;

/** A list of at most `max` items: refused past it (a 400 naming the field), and maxItems in JSON Schema. */
export const boundedList = <T extends z.ZodType>(item: T, max: number) => z.array(item).max(max, `at most ${max} entries`);

/**
 * A map of at most `max` entries (maxProperties in JSON Schema), keys and values bounded
 * in bytes. Apply other checks to the result before any transform.
 */
export const boundedMap = <V extends z.ZodType<string>>(max: number, opts: { key?: number; value?: V | number } = {}) => {
  const value = typeof opts.value === 'object' ? opts.value : bounded(opts.value ?? 4096);
  return z.record(bounded(opts.key ?? 255), value).refine((m) => Object.keys(m).length <= max, `at most ${max} entries`).meta({ maxProperties: max });
};

/** Labels: at most ITEM_LIMITS.labels entries, keys and values at most 255 bytes. */
export const labelMap = () => boundedMap(ITEM_LIMITS.labels, { value: 255 }).default({});

/** RFC 3339 input, stored in UTC with second precision and a `Z`. */
export const rfc3339 = () =>
  z.iso.datetime({ offset: true, message: 'must be an RFC 3339 timestamp, e.g. 2026-01-02T15:04:05Z' }).transform((v) => new Date(v).toISOString().replace(/\.\d{3}Z$/, 'Z'));

export const cidr = () =>
  z
    .string()
    .transform((v, ctx) => {
      const r = parseCidr(v);
      if (!r.ok) {
        ctx.addIssue({ code: 'custom', message: r.message });
        return z.NEVER;
      }
      return r.value;
    })
    .describe('IPv4 or IPv6 network in CIDR notation (a bare address means a single host).');

export const hostport = () =>
  z
    .string()
    .superRefine((v, ctx) => {
      const p = hostportProblem(v);
      if (p) ctx.addIssue({ code: 'custom', message: p });
    })
    .transform(canonicalHostport);

const lowerKeys = (m: Record<string, string>) => Object.fromEntries(Object.entries(m).map(([k, v]) => [k.toLowerCase(), v]));

/** A header map's names and values together: the header block a server (this one too) accepts. */
export const HEADER_BLOCK_BYTES = 16384;

/**
 * Header name to value: at most ITEM_LIMITS.headers, HEADER_BLOCK_BYTES in all; names are
 * case-insensitive and stored lower case.
 */
export const headerMap = () =>
  boundedMap(ITEM_LIMITS.headers, { key: 256, value: 8192 })
    .superRefine((m, ctx) => {
      const seen = new Map<string, string>();
      for (const [k, v] of Object.entries(m)) {
        const p = headerNameProblem(k) ?? headerValueProblem(v);
        if (p) ctx.addIssue({ code: 'custom', message: p, path: [k] });
        const prior = seen.get(k.toLowerCase());
        if (prior !== undefined) ctx.addIssue({ code: 'custom', message: `"${prior}" and "${k}" are the same header (names are case-insensitive); give it once`, path: [k] });
        seen.set(k.toLowerCase(), k);
      }
      const total = Object.entries(m).reduce((n, [k, v]) => n + bytes(k) + bytes(v), 0);
      if (total > HEADER_BLOCK_BYTES) ctx.addIssue({ code: 'custom', message: `names and values add up to ${total} bytes, over ${HEADER_BLOCK_BYTES} (servers refuse larger header blocks)` });
    })
    .transform(lowerKeys);

export const headerNames = () =>
  boundedList(
    z.string().max(256).superRefine((v, ctx) => {
      const p = headerNameProblem(v);
      if (p) ctx.addIssue({ code: 'custom', message: p });
    }).transform((v) => v.toLowerCase()),
    ITEM_LIMITS.headers,
  );

/** A regular expression (RE2 syntax) that must compile. */
export const regex = () =>
  z.string().max(1024).superRefine((v, ctx) => {
    const p = regexProblem(v);
    if (p) ctx.addIssue({ code: 'custom', message: `"${v}" is not a valid regular expression (RE2 syntax): ${p}` });
  });

/** A traffic-policy document (YAML or JSON text), validated rule by rule; only `phases` may appear. */
export const trafficPolicyText = (phases?: readonly Phase[]) =>
  z.string().max(65536).superRefine((v, ctx) => {
    const r = parseTrafficPolicy(v, { phases });
    if (!r.ok) for (const issue of r.issues) ctx.addIssue({ code: 'custom', message: issue.message, params: { policyPath: issue.path } });
  });

export const cookiePrefix = () =>
  z.string().max(64).regex(/^[A-Za-z0-9.]*$/, 'may contain only letters, digits and periods').default('service.');

export const url = () => z.string().url().max(2048);
