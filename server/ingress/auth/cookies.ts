// Sealed cookies of sign-in at the edge: AES-256-GCM under a key derived from the server's
// secret key (SecretBox.derive), the cookie's name and route bound in as associated data, so a
// cookie is both secret and signed: one altered byte, or one moved to another route, opens
// to nothing. Parsing and Set-Cookie lines (HttpOnly, Secure, SameSite=Lax) live here too.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

export class CookieSealer {
  constructor(private readonly key: Buffer) {}

  seal(bindTo: string, value: unknown): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(bindTo));
    const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return `v1.${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url')}`;
  }

  /** The value, or undefined for anything not sealed by this key for `bindTo`. */
  open<T>(bindTo: string, text: string | undefined): T | undefined {
    if (!text?.startsWith('v1.') || text.length > 8192) return undefined;
    try {
      const raw = Buffer.from(text.slice(3), 'base64url');
      if (raw.length < 29) return undefined;
      const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, 12));
      decipher.setAAD(Buffer.from(bindTo));
      decipher.setAuthTag(raw.subarray(12, 28));
      const plain = Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
      return JSON.parse(plain) as T;
    } catch {
      return undefined;
    }
  }
}

export function readCookies(headers: IncomingHttpHeaders): Map<string, string> {
  const out = new Map<string, string>();
  const raw = headers.cookie;
  for (const line of Array.isArray(raw) ? raw : raw ? [raw] : []) {
    for (const part of line.split(';')) {
      const eq = part.indexOf('=');
      if (eq <= 0) continue;
      const name = part.slice(0, eq).trim();
      if (!out.has(name)) out.set(name, part.slice(eq + 1).trim());
    }
  }
  return out;
}

/** A Set-Cookie line for the whole host; `maxAge` 0 deletes the cookie. */
export function setCookie(name: string, value: string, maxAgeSeconds?: number): string {
  const age = maxAgeSeconds === undefined ? '' : `; Max-Age=${Math.max(0, Math.floor(maxAgeSeconds))}`;
  return `${name}=${value}; Path=/; HttpOnly; Secure; SameSite=Lax${age}`;
}

/** The Cookie header without the named cookies (the edge's own never go upstream). */
export function cookieHeaderWithout(header: string | string[] | undefined, names: ReadonlySet<string>): string | undefined {
  if (!header) return undefined;
  const kept = (Array.isArray(header) ? header.join('; ') : header)
    .split(';')
    .map((p) => p.trim())
    .filter((p) => p && !names.has(p.slice(0, Math.max(0, p.indexOf('=')))));
  return kept.length ? kept.join('; ') : undefined;
}
