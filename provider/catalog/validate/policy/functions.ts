// The service's macro library, registered in each phase's CEL environment (cel.ts): header,
// query and cookie helpers, CIDR tests, and the namespaced helpers (hash.md5(...),
// base64.decode(...), ...). The CEL library has no namespaced functions: `hash.md5(x)` parses
// as a call of md5 on a value named hash, so each namespace is a variable of a type of its
// own whose methods these are (the engine gives every evaluation the namespace values).
// Every function is pure and bounded by its input, which the engine bounds (a header's size,
// a body's bound); the few that make new data (lists.range, string.format) refuse sizes over
// MAX_MADE.
import crypto from 'node:crypto';
import net from 'node:net';
import zlib from 'node:zlib';
import type { Environment } from '@marcbachmann/cel-js';
import { ipToBigInt } from '../cidr.js';

/** The lookups the request and response helpers read: the engine points them at the message being evaluated. */
export interface MessageLookups {
  reqHeader(name: string): readonly string[] | undefined;
  resHeader(name: string): readonly string[] | undefined;
  query(name: string): readonly string[] | undefined;
  reqCookie(name: string): Record<string, unknown> | undefined;
  resCookie(name: string): Record<string, unknown> | undefined;
}

export const lookups: MessageLookups = { reqHeader: () => undefined, resHeader: () => undefined, query: () => undefined, reqCookie: () => undefined, resCookie: () => undefined };

/** The most elements or characters a function may make (lists.range, string.format, flatten). */
export const MAX_MADE = 100_000;

export class HashNamespace {}
export class Base64Namespace {}
export class JsonNamespace {}
export class UrlNamespace {}
export class QueryStringNamespace {}
export class RandNamespace {}
export class ListsNamespace {}
export class StringsNamespace {}
export class BasicAuthNamespace {}

/** The namespace values, as every evaluation's variables hold them. */
export const NAMESPACES = {
  hash: new HashNamespace(),
  base64: new Base64Namespace(),
  json: new JsonNamespace(),
  url: new UrlNamespace(),
  queryString: new QueryStringNamespace(),
  rand: new RandNamespace(),
  lists: new ListsNamespace(),
  strings: new StringsNamespace(),
  basic_auth: new BasicAuthNamespace(),
};
const NAMESPACE_TYPES: Record<keyof typeof NAMESPACES, string> = {
  hash: 'edgeform.HashNamespace',
  base64: 'edgeform.Base64Namespace',
  json: 'edgeform.JsonNamespace',
  url: 'edgeform.UrlNamespace',
  queryString: 'edgeform.QueryStringNamespace',
  rand: 'edgeform.RandNamespace',
  lists: 'edgeform.ListsNamespace',
  strings: 'edgeform.StringsNamespace',
  basic_auth: 'edgeform.BasicAuthNamespace',
};

const NONE: readonly string[] = Object.freeze([]);

// ---- hashes ------------------------------------------------------------------------------

const CRC64_ISO = (() => {
  const table = new BigUint64Array(256);
  const poly = 0xd800000000000000n;
  for (let i = 0; i < 256; i++) {
    let crc = BigInt(i);
    for (let j = 0; j < 8; j++) crc = crc & 1n ? (crc >> 1n) ^ poly : crc >> 1n;
    table[i] = crc;
  }
  return table;
})();

/** CRC-64 with the ISO polynomial, as Go's hash/crc64 with crc64.ISO (the service's). */
function crc64(data: Buffer): Buffer {
  let crc = 0xffffffffffffffffn;
  for (const b of data) crc = CRC64_ISO[Number((crc ^ BigInt(b)) & 0xffn)] ^ (crc >> 8n);
  crc ^= 0xffffffffffffffffn;
  const out = Buffer.alloc(8);
  out.writeBigUInt64BE(crc);
  return out;
}

const M64 = 0xffffffffffffffffn;
const P1 = 11400714785074694791n;
const P2 = 14029467366897019727n;
const P3 = 1609587929392839161n;
const P4 = 9650029242287828579n;
const P5 = 2870177450012600261n;
const rotl = (x: bigint, r: bigint) => ((x << r) | (x >> (64n - r))) & M64;
const round = (acc: bigint, input: bigint) => (rotl((acc + input * P2) & M64, 31n) * P1) & M64;
const merge = (acc: bigint, val: bigint) => (((acc ^ round(0n, val)) * P1 + P4) & M64);

/** XXH64 with seed 0 (the service's hash.xxhash64). */
function xxhash64(data: Buffer): Buffer {
  const len = data.length;
  let i = 0;
  let h: bigint;
  if (len >= 32) {
    let v1 = (P1 + P2) & M64;
    let v2 = P2;
    let v3 = 0n;
    let v4 = (M64 + 1n - P1) & M64;
    for (; i + 32 <= len; i += 32) {
      v1 = round(v1, data.readBigUInt64LE(i));
      v2 = round(v2, data.readBigUInt64LE(i + 8));
      v3 = round(v3, data.readBigUInt64LE(i + 16));
      v4 = round(v4, data.readBigUInt64LE(i + 24));
    }
    h = (rotl(v1, 1n) + rotl(v2, 7n) + rotl(v3, 12n) + rotl(v4, 18n)) & M64;
    h = merge(merge(merge(merge(h, v1), v2), v3), v4);
  } else {
    h = P5;
  }
  h = (h + BigInt(len)) & M64;
  for (; i + 8 <= len; i += 8) h = ((rotl(h ^ round(0n, data.readBigUInt64LE(i)), 27n) * P1) + P4) & M64;
  if (i + 4 <= len) {
    h = ((rotl(h ^ ((BigInt(data.readUInt32LE(i)) * P1) & M64), 23n) * P2) + P3) & M64;
    i += 4;
  }
  for (; i < len; i++) h = (rotl(h ^ ((BigInt(data[i]) * P5) & M64), 11n) * P1) & M64;
  h ^= h >> 33n;
  h = (h * P2) & M64;
  h ^= h >> 29n;
  h = (h * P3) & M64;
  h ^= h >> 32n;
  const out = Buffer.alloc(8);
  out.writeBigUInt64BE(h);
  return out;
}

const DIGESTS: Record<string, (data: Buffer) => Buffer> = {
  md5: (d) => crypto.createHash('md5').update(d).digest(),
  sha1: (d) => crypto.createHash('sha1').update(d).digest(),
  sha256: (d) => crypto.createHash('sha256').update(d).digest(),
  sha512: (d) => crypto.createHash('sha512').update(d).digest(),
  crc32: (d) => {
    const out = Buffer.alloc(4);
    out.writeUInt32BE(zlib.crc32(d) >>> 0);
    return out;
  },
  crc64,
  xxhash64,
};

function encodeDigest(digest: Buffer, encoding = 'hex'): string {
  if (encoding === 'hex') return digest.toString('hex');
  if (encoding === 'base64') return digest.toString('base64');
  throw new Error(`unknown hash encoding "${encoding}"; encodings are hex and base64`);
}

const bytesOf = (v: string | Uint8Array) => (typeof v === 'string' ? Buffer.from(v, 'utf8') : Buffer.from(v.buffer, v.byteOffset, v.byteLength));

// ---- CIDRs -------------------------------------------------------------------------------

interface Range { version: 4 | 6; network: bigint; mask: bigint }
const ranges = new Map<string, Range>();

function rangeOf(cidr: string): Range {
  const known = ranges.get(cidr);
  if (known) return known;
  const slash = cidr.indexOf('/');
  const addr = slash < 0 ? cidr : cidr.slice(0, slash);
  const version = net.isIPv4(addr) ? 4 : net.isIPv6(addr) ? 6 : 0;
  if (version === 0) throw new Error(`"${cidr}" is not a CIDR such as 192.0.2.0/24`);
  const bits = version === 4 ? 32 : 128;
  const len = slash < 0 ? bits : Number(cidr.slice(slash + 1));
  if (!Number.isInteger(len) || len < 0 || len > bits || (slash >= 0 && !/^\d+$/.test(cidr.slice(slash + 1)))) throw new Error(`"${cidr}" is not a CIDR such as 192.0.2.0/24`);
  const mask = ((1n << BigInt(bits)) - 1n) ^ ((1n << BigInt(bits - len)) - 1n);
  // The network of the prefix, host bits cleared: the service accepts 66.249.66.1/24.
  const range: Range = { version, network: ipToBigInt(addr, version) & mask, mask };
  if (ranges.size >= 1024) ranges.clear();
  ranges.set(cidr, range);
  return range;
}

function addressOf(ip: string): { version: 4 | 6; value: bigint } | undefined {
  let addr = ip;
  if (/^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(addr)) addr = addr.slice(7);
  const version = net.isIPv4(addr) ? 4 : net.isIPv6(addr) ? 6 : 0;
  return version === 0 ? undefined : { version, value: ipToBigInt(addr, version) };
}

export function inCidrRange(ip: string, cidr: string): boolean {
  const r = rangeOf(cidr);
  const a = addressOf(ip);
  return !!a && a.version === r.version && (a.value & r.mask) === r.network;
}

const PRIVATE = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'];
/** RFC 1918 and RFC 4193 addresses (as Go's net.IP.IsPrivate, which the service's isPrivateIp follows). */
export const isPrivateIp = (ip: string) => PRIVATE.some((c) => inCidrRange(ip, c));

// ---- query strings, URLs, JSON -------------------------------------------------------------

function decodeQuery(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [k, v] of new URLSearchParams(text)) {
    const list = out.get(k);
    if (list) list.push(v);
    else out.set(k, [v]);
  }
  return out;
}

/** Go's url.Values.Encode: keys sorted, each value escaped as a query component. */
function encodeQuery(map: Map<string, unknown> | Record<string, unknown>): string {
  const entries = map instanceof Map ? [...map.entries()] : Object.entries(map);
  entries.sort(([a], [b]) => (String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0));
  const parts: string[] = [];
  for (const [k, v] of entries) {
    for (const value of Array.isArray(v) ? v : [v]) parts.push(`${queryEscape(String(k))}=${queryEscape(String(value))}`);
  }
  return parts.join('&');
}

/** Go's url.QueryEscape: space as +, everything but unreserved characters escaped. */
const queryEscape = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`).replace(/%20/g, '+');

function queryUnescape(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    throw new Error(`"${s.slice(0, 100)}" is not a valid escaped string`);
  }
}

const isQueryString = (s: string) => /^[^=&\s]+=[^&\s]*(&[^=&\s]+=[^&\s]*)*$/.test(s);

function isUrl(s: string): boolean {
  if (!URL.canParse(s)) return false;
  const u = new URL(s);
  return /^[a-z][a-z0-9+.-]*:$/i.test(u.protocol) && (u.host !== '' || u.protocol === 'mailto:');
}

/** A URL as a map of the fields of Go's net/url.URL, in the service's lower-case names. */
function parseUrl(s: string): Map<string, unknown> {
  if (!URL.canParse(s)) throw new Error(`"${s.slice(0, 100)}" is not a URL`);
  const u = new URL(s);
  return new Map<string, unknown>([
    ['scheme', u.protocol.replace(/:$/, '')],
    ['user', u.username ? (u.password ? `${u.username}:${u.password}` : u.username) : ''],
    ['host', u.host],
    ['hostname', u.hostname],
    ['port', u.port],
    ['path', decodeURIComponent(u.pathname)],
    ['raw_path', u.pathname],
    ['raw_query', u.search.slice(1)],
    ['fragment', u.hash.slice(1)],
    ['query', decodeQuery(u.search.slice(1))],
  ]);
}

/** A JSON value as CEL values: integers as int, other numbers as double, objects as maps. */
function fromJson(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) && Number.isSafeInteger(v) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map(fromJson);
  if (v && typeof v === 'object') return new Map(Object.entries(v).map(([k, x]) => [k, fromJson(x)]));
  return v;
}

/** A CEL value as JSON text: ints as numbers, bytes as base64, timestamps as RFC 3339. */
export function toJson(v: unknown): string {
  return JSON.stringify(v, (_k, x) => {
    if (typeof x === 'bigint') return Number(x);
    if (x instanceof Map) return Object.fromEntries(x);
    if (x instanceof Uint8Array) return Buffer.from(x).toString('base64');
    return x;
  });
}

function decodeJson(s: string): unknown {
  try {
    return fromJson(JSON.parse(s));
  } catch {
    throw new Error(`the string is not JSON: ${JSON.stringify(s.slice(0, 60))}`);
  }
}

function decodeBase64(s: string): Buffer {
  const t = s.trim();
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(t) && !/^[A-Za-z0-9_-]*$/.test(t)) throw new Error(`"${s.slice(0, 60)}" is not base64`);
  if (/^[A-Za-z0-9+/]*$/.test(t) && t.length % 4 !== 0) throw new Error(`"${s.slice(0, 60)}" is not base64 (its length is not a multiple of 4)`);
  return Buffer.from(t, /[-_]/.test(t) ? 'base64url' : 'base64');
}

// ---- lists and strings -----------------------------------------------------------------------

function flatten(list: unknown[], depth: bigint): unknown[] {
  if (depth < 0n) throw new Error('flatten depth must not be negative');
  let out = list;
  for (let d = 0n; d < depth; d++) {
    const next: unknown[] = [];
    for (const x of out) {
      if (Array.isArray(x)) next.push(...x);
      else next.push(x);
      if (next.length > MAX_MADE) throw new Error(`flatten would make more than ${MAX_MADE} elements`);
    }
    out = next;
  }
  return out;
}

function sortList(list: unknown[]): unknown[] {
  if (list.length === 0) return [];
  const kind = typeof list[0];
  if (!['string', 'bigint', 'number', 'boolean'].includes(kind) || list.some((x) => typeof x !== kind)) throw new Error('sort needs a list of one comparable type (strings, ints, doubles or bools)');
  return [...list].sort((a, b) => ((a as never) < (b as never) ? -1 : (a as never) > (b as never) ? 1 : 0));
}

function distinct(list: unknown[]): unknown[] {
  const seen = new Set<string>();
  return list.filter((x) => {
    const key = `${typeof x}:${toJson(x)}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** The service's string.format: %s %d %f %x %X %o %b %e and %%, as Go's fmt does them. */
function format(pattern: string, args: unknown[]): string {
  let i = 0;
  const out = pattern.replace(/%(\.\d+)?([sdfxXobe%])/g, (_m, precision: string | undefined, verb: string) => {
    if (verb === '%') return '%';
    if (i >= args.length) throw new Error(`format: too few arguments for "${pattern.slice(0, 60)}"`);
    const a = args[i++];
    const num = typeof a === 'bigint' ? a : typeof a === 'boolean' ? (a ? 1n : 0n) : typeof a === 'number' ? a : undefined;
    switch (verb) {
      case 's':
        return typeof a === 'string' ? a : a instanceof Uint8Array ? Buffer.from(a).toString() : toJson(a);
      case 'd':
        if (typeof num !== 'bigint') throw new Error('format: %d needs an integer');
        return num.toString();
      case 'f':
        return Number(num ?? NaN).toFixed(precision ? Number(precision.slice(1)) : 6);
      case 'e':
        return Number(num ?? NaN).toExponential(precision ? Number(precision.slice(1)) : 6).replace(/e([+-])(\d)$/, 'e$10$2');
      case 'x':
      case 'X': {
        const s = typeof a === 'string' ? Buffer.from(a).toString('hex') : typeof num === 'bigint' ? num.toString(16) : Number(num).toString(16);
        return verb === 'X' ? s.toUpperCase() : s;
      }
      case 'o':
        return typeof num === 'bigint' ? num.toString(8) : Number(num).toString(8);
      default:
        return typeof num === 'bigint' ? num.toString(2) : Number(num).toString(2);
    }
  });
  if (out.length > MAX_MADE) throw new Error(`format would make more than ${MAX_MADE} characters`);
  return out;
}

/** Go's strconv.Quote for the common escapes. */
function quote(s: string): string {
  const map: Record<string, string> = { '\u0007': '\\a', '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\v': '\\v', '"': '\\"', '\\': '\\\\' };
  return `"${[...s].map((c) => map[c] ?? (c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f ? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}` : c)).join('')}"`;
}

function charAt(s: string, i: bigint): string {
  const chars = [...s];
  if (i < 0n || i > BigInt(chars.length)) throw new Error(`charAt: index ${i} out of range`);
  return chars[Number(i)] ?? '';
}

/** The longest string replace may make: an empty `from` puts `to` between every character, so a header and a header's worth of `to` made 64 million. */
export const MAX_REPLACED = 1_000_000;

function replace(s: string, from: string, to: string, n = -1n): string {
  const matches = from === '' ? s.length + 1 : Math.floor(s.length / from.length);
  const most = n < 0n ? matches : Math.min(matches, Number(n));
  if (s.length + most * Math.max(0, to.length - from.length) > MAX_REPLACED) throw new Error(`replace would make more than ${MAX_REPLACED.toLocaleString('en-US')} characters`);
  if (n < 0n) return s.split(from).join(to);
  let out = s;
  let at = 0;
  for (let k = 0n; k < n; k++) {
    const i = out.indexOf(from, at);
    if (i < 0) break;
    out = out.slice(0, i) + to + out.slice(i + from.length);
    at = i + to.length + (from === '' ? 1 : 0);
  }
  return out;
}

function range(n: bigint): bigint[] {
  if (n < 0n || n > BigInt(MAX_MADE)) throw new Error(`lists.range takes 0 to ${MAX_MADE}`);
  return Array.from({ length: Number(n) }, (_, i) => BigInt(i));
}

function randInt(min: bigint, max: bigint): bigint {
  if (min > max) throw new Error('rand.int: min is greater than max');
  const span = max - min + 1n;
  if (span <= BigInt(Number.MAX_SAFE_INTEGER)) return min + BigInt(crypto.randomInt(0, Number(span) > 2 ** 48 - 1 ? 2 ** 48 - 1 : Number(span)));
  return min + (crypto.randomBytes(8).readBigUInt64BE() % span);
}

/** Registers every function of the library in `env` for `phase`'s helpers (request helpers not on TCP, response helpers only on responses). */
export function registerFunctions(env: Environment, http: boolean, response: boolean): void {
  const fn = (signature: string, handler: (...args: any[]) => unknown) => env.registerFunction(signature, handler as never);
  for (const [name, type] of Object.entries(NAMESPACE_TYPES)) {
    env.registerType(type, NAMESPACES[name as keyof typeof NAMESPACES].constructor as never);
    env.registerVariable(name, type);
  }
  const H = NAMESPACE_TYPES.hash;
  for (const [name, digest] of Object.entries(DIGESTS)) {
    fn(`${H}.${name}(string): string`, (_ns, s: string) => encodeDigest(digest(bytesOf(s))));
    fn(`${H}.${name}(string, string): string`, (_ns, s: string, enc: string) => encodeDigest(digest(bytesOf(s)), enc));
    fn(`${H}.${name}(bytes): string`, (_ns, s: Uint8Array) => encodeDigest(digest(bytesOf(s))));
    fn(`${H}.${name}(bytes, string): string`, (_ns, s: Uint8Array, enc: string) => encodeDigest(digest(bytesOf(s)), enc));
    fn(`string.${name}(): string`, (s: string) => encodeDigest(digest(bytesOf(s))));
    fn(`string.${name}(string): string`, (s: string, enc: string) => encodeDigest(digest(bytesOf(s)), enc));
  }
  const B = NAMESPACE_TYPES.base64;
  fn(`${B}.decode(string): bytes`, (_ns, s: string) => new Uint8Array(decodeBase64(s)));
  fn(`${B}.encode(bytes): string`, (_ns, b: Uint8Array) => bytesOf(b).toString('base64'));
  fn(`${B}.encode(string): string`, (_ns, s: string) => Buffer.from(s).toString('base64'));
  fn('string.decodeBase64(): string', (s: string) => decodeBase64(s).toString('utf8'));
  fn('string.encodeBase64(): string', (s: string) => Buffer.from(s).toString('base64'));
  fn(`${NAMESPACE_TYPES.basic_auth}.encode(string, string): string`, (_ns, u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`);
  const J = NAMESPACE_TYPES.json;
  fn(`${J}.decode(string): dyn`, (_ns, s: string) => decodeJson(s));
  fn(`${J}.encode(dyn): string`, (_ns, v: unknown) => toJson(v));
  fn('string.decodeJson(): dyn', (s: string) => decodeJson(s));
  fn('string.isJson(): bool', (s: string) => {
    try {
      JSON.parse(s);
      return true;
    } catch {
      return false;
    }
  });
  fn('list.encodeJson(): string', (l: unknown[]) => toJson(l));
  fn('map.encodeJson(): string', (m: unknown) => toJson(m));
  const Q = NAMESPACE_TYPES.queryString;
  fn(`${Q}.decode(string): map<string, list<string>>`, (_ns, s: string) => decodeQuery(s));
  fn(`${Q}.encode(map<string, dyn>): string`, (_ns, m: Map<string, unknown>) => encodeQuery(m));
  fn('string.decodeQueryString(): map<string, list<string>>', (s: string) => decodeQuery(s));
  fn('string.isQueryString(): bool', isQueryString);
  fn('map.encodeQueryString(): string', (m: Map<string, unknown>) => encodeQuery(m));
  const U = NAMESPACE_TYPES.url;
  fn(`${U}.escape(string): string`, (_ns, s: string) => queryEscape(s));
  fn(`${U}.unescape(string): string`, (_ns, s: string) => queryUnescape(s));
  fn(`${U}.parse(string): map<string, dyn>`, (_ns, s: string) => parseUrl(s));
  fn('string.escapeUrl(): string', (s: string) => queryEscape(s));
  fn('string.unescapeUrl(): string', (s: string) => queryUnescape(s));
  fn('string.parseUrl(): map<string, dyn>', (s: string) => parseUrl(s));
  fn('string.isURL(): bool', isUrl);
  const R = NAMESPACE_TYPES.rand;
  fn(`${R}.double(): double`, () => Math.random());
  fn(`${R}.int(int, int): int`, (_ns, a: bigint, b: bigint) => randInt(a, b));
  fn(`${NAMESPACE_TYPES.lists}.range(int): list<int>`, (_ns, n: bigint) => range(n));
  fn(`${NAMESPACE_TYPES.strings}.quote(string): string`, (_ns, s: string) => quote(s));
  fn('string.charAt(int): string', charAt);
  fn('string.format(list): string', format);
  fn('string.replace(string, string): string', (s: string, a: string, b: string) => replace(s, a, b));
  fn('string.replace(string, string, int): string', replace);
  fn('string.lower(): string', (s: string) => s.toLowerCase());
  fn('string.upper(): string', (s: string) => s.toUpperCase());
  fn('string.reverse(): string', (s: string) => [...s].reverse().join(''));
  fn('string.split(): list<string>', (s: string) => s.split(/\s+/).filter((x) => x !== ''));
  fn('string.isPrivateIp(): bool', (s: string) => isPrivateIp(s));
  fn('list.slice(int, int): list', (l: unknown[], a: bigint, b: bigint) => {
    if (a < 0n || b < a || b > BigInt(l.length)) throw new Error(`slice(${a}, ${b}) is out of range for a list of ${l.length}`);
    return l.slice(Number(a), Number(b));
  });
  fn('list.flatten(): list', (l: unknown[]) => flatten(l, 1n));
  fn('list.flatten(int): list', flatten);
  fn('list.sort(): list', sortList);
  fn('list.distinct(): list', distinct);
  // The service's examples call contains on a header's list of values: true when any value contains the text.
  fn('list<string>.contains(string): bool', (l: string[], s: string) => l.some((x) => x.includes(s)));
  fn('timestamp(google.protobuf.Timestamp): google.protobuf.Timestamp', (t: Date) => t);
  fn('inCidrRange(string, string): bool', inCidrRange);
  fn('inCidrRanges(string, list<string>): bool', (ip: string, cidrs: string[]) => cidrs.some((c) => inCidrRange(ip, c)));
  if (http) {
    fn('getReqHeader(string): list<string>', (name: string) => lookups.reqHeader(name.toLowerCase()) ?? NONE);
    fn('hasReqHeader(string): bool', (name: string) => (lookups.reqHeader(name.toLowerCase())?.length ?? 0) > 0);
    fn('getQueryParam(string): list<string>', (name: string) => lookups.query(name) ?? NONE);
    fn('hasQueryParam(string): bool', (name: string) => (lookups.query(name)?.length ?? 0) > 0);
    fn('getReqCookie(string): map<string, string>', (name: string) => {
      const c = lookups.reqCookie(name);
      if (!c) throw new Error(`the request has no cookie ${name}`);
      return c;
    });
    fn('hasReqCookie(string): bool', (name: string) => !!lookups.reqCookie(name));
  }
  if (response) {
    fn('getResHeader(string): list<string>', (name: string) => lookups.resHeader(name.toLowerCase()) ?? NONE);
    fn('hasResHeader(string): bool', (name: string) => (lookups.resHeader(name.toLowerCase())?.length ?? 0) > 0);
    fn('getResCookie(string): map<string, dyn>', (name: string) => {
      const c = lookups.resCookie(name);
      if (!c) throw new Error(`the response has no cookie ${name}`);
      return c;
    });
    fn('hasResCookie(string): bool', (name: string) => !!lookups.resCookie(name));
  }
}
