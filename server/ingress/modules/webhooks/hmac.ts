// The shape most providers share: an HMAC (or plain hash) of some message built from the body,
// a timestamp and the URL, sent in a header in hex or base64, perhaps with a prefix, perhaps in
// a `t=...,v1=...` list. A provider is one row of data over these parts (providers.ts).
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { invalid, missing, OK, stale, type Scheme, type Verdict, type WebhookRequest } from './types.js';

export type Alg = 'sha1' | 'sha256' | 'sha512';
export type Enc = 'hex' | 'base64' | 'base64url';

/** Where the signatures (any one may match) and the signed timestamp are found. */
export type Extract = (r: WebhookRequest) => { sigs: string[]; ts?: string } | string;

export interface HmacScheme {
  extract: Extract;
  alg: Alg;
  enc: Enc;
  /** The signed message; `ts` is the extracted timestamp text. Default: the body. */
  message?: (r: WebhookRequest, ts: string | undefined) => Buffer | string;
  /** The HMAC key from the configured secret. Default: its UTF-8 bytes. */
  key?: (secret: string) => Buffer | string;
  /** 'hash': a plain digest of secret-bearing text (HubSpot v1/v2) instead of an HMAC. */
  mode?: 'hmac' | 'hash';
  /** A signed timestamp: its unit and the tolerance (seconds either way) the provider documents. */
  time?: { unit: 's' | 'ms' | 'iso'; tolerance: number };
}

/** When the provider documents no tolerance for a signed timestamp: three minutes, as the service does. */
export const DEFAULT_TOLERANCE = 180;

export const header = (r: WebhookRequest, name: string) => r.headers[name];

/** A header holding one signature, optionally behind a prefix such as `sha256=`. */
export const sigHeader = (name: string, prefix = '', tsHeader?: string): Extract => (r) => {
  const v = r.headers[name];
  if (v === undefined || v === '') return `the ${name} header is missing`;
  if (tsHeader && !r.headers[tsHeader]) return `the ${tsHeader} header is missing`;
  const sigs = v.split(/,\s*/).filter((s) => s.toLowerCase().startsWith(prefix.toLowerCase())).map((s) => s.slice(prefix.length).trim());
  return { sigs, ts: tsHeader ? r.headers[tsHeader] : undefined };
};

/** A `k=v` list header (`t=...,v1=...`); every value of `sigKey` is a candidate. */
export const kvHeader = (name: string, tsKey: string | undefined, sigKey: string, sep: RegExp = /,\s*/): Extract => (r) => {
  const v = r.headers[name];
  if (!v) return `the ${name} header is missing`;
  const parts = v.split(sep).map((p) => [p.slice(0, p.indexOf('=')).trim(), p.slice(p.indexOf('=') + 1).trim()] as const);
  const ts = tsKey ? parts.find(([k]) => k === tsKey)?.[1] : undefined;
  if (tsKey && !ts) return `the ${name} header has no ${tsKey}= timestamp`;
  return { sigs: parts.filter(([k]) => k === sigKey).map(([, s]) => s), ts };
};

export const kvValue = (v: string | undefined, key: string, sep: RegExp = /,\s*/) =>
  v?.split(sep).map((p) => p.trim()).find((p) => p.startsWith(`${key}=`))?.slice(key.length + 1);

export function decodeSig(sig: string, enc: Enc): Buffer | undefined {
  const s = sig.trim();
  if (enc === 'hex') return /^(?:[0-9a-f]{2})+$/i.test(s) ? Buffer.from(s, 'hex') : undefined;
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(s)) return undefined;
  return Buffer.from(s, enc === 'base64url' ? 'base64url' : 'base64');
}

/** Constant time for equal lengths; a length mismatch is no secret (every digest of an algorithm has one length). */
export const sameBytes = (a: Buffer, b: Buffer) => a.length === b.length && timingSafeEqual(a, b);

/** Whether `text` equals `secret`, in time independent of where they differ. */
export function sameText(text: string | undefined, secret: string): boolean {
  if (text === undefined) return false;
  const h = (s: string) => createHash('sha256').update(s).digest();
  return sameBytes(h(text), h(secret));
}

export function checkTime(ts: string, unit: 's' | 'ms' | 'iso', tolerance: number, now: number): Verdict {
  const ms = unit === 'iso' ? Date.parse(ts) : /^\d{1,16}$/.test(ts.trim()) ? Number(ts) * (unit === 's' ? 1000 : 1) : NaN;
  if (!Number.isFinite(ms)) return invalid(`the signed timestamp "${ts.slice(0, 40)}" is not a ${unit === 'iso' ? 'date' : `number of ${unit === 's' ? 'seconds' : 'milliseconds'}`}`);
  if (Math.abs(now - ms) > tolerance * 1000) return stale(`the signed timestamp is more than ${tolerance} s from this server's clock`);
  return OK;
}

export function digest(alg: Alg, key: Buffer | string, message: Buffer | string, mode: 'hmac' | 'hash' = 'hmac'): Buffer {
  if (mode === 'hash') return createHash(alg).update(key).update(message).digest();
  return createHmac(alg, key).update(message).digest();
}

export function hmac(s: HmacScheme): Scheme {
  return {
    verify(r, secret) {
      const got = s.extract(r);
      if (typeof got === 'string') return missing(got);
      if (got.sigs.length === 0) return missing('the signature header carries no signature of the expected version');
      if (s.time) {
        if (got.ts === undefined) return missing('the signed timestamp is missing');
        const t = checkTime(got.ts, s.time.unit, s.time.tolerance, r.now);
        if (!t.ok) return t;
      }
      const expected = digest(s.alg, s.key ? s.key(secret) : secret, s.message ? s.message(r, got.ts) : r.body, s.mode);
      const match = got.sigs.some((sig) => {
        const b = decodeSig(sig, s.enc);
        return b !== undefined && sameBytes(b, expected);
      });
      return match ? OK : invalid('the signature does not match the body and the configured secret');
    },
  };
}

/** The first scheme whose signature header is present decides (GitHub-style sha256, then legacy sha1). */
export function firstPresent(...alts: { when: string; scheme: Scheme }[]): Scheme {
  return {
    verify(r, secret) {
      const alt = alts.find((a) => r.headers[a.when] !== undefined);
      return alt ? alt.scheme.verify(r, secret) : missing(`none of the headers ${alts.map((a) => a.when).join(', ')} is present`);
    },
  };
}

/** Concatenation helpers for messages. */
export const cat = (...parts: (Buffer | string | undefined)[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : (p ?? Buffer.alloc(0)))));

/** Form fields of an application/x-www-form-urlencoded body, in order. */
export function formFields(body: Buffer): [string, string][] {
  return [...new URLSearchParams(body.toString('utf8')).entries()];
}

/** Twilio's and Mandrill's message: the URL, then each POST field name and value, sorted by name. */
export function urlAndSortedForm(r: WebhookRequest): string {
  const isForm = /application\/x-www-form-urlencoded/i.test(r.headers['content-type'] ?? '');
  if (!isForm) return r.url;
  const fields = formFields(r.body).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return r.url + fields.map(([k, v]) => k + v).join('');
}
