// Bearer tokens: 32 random bytes in base62, stored only as a SHA-256 digest.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export function newToken(): string {
  let n = BigInt(`0x${randomBytes(32).toString('hex')}`);
  let out = '';
  while (out.length < 43) {
    out = ALPHABET[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out;
}

export const digestOf = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');

/** Constant-time comparison of a presented token's digest with a stored one. */
export function digestMatches(token: string, digest: string): boolean {
  const a = Buffer.from(digestOf(token), 'hex');
  const b = Buffer.from(digest, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}
