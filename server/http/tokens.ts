// Bearer tokens: 32 random bytes in base62, stored only as a SHA-256 digest.
import { createHash, randomBytes } from 'node:crypto';

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

