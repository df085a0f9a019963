// Bearer tokens: 32 random bytes in base62, stored only as a SHA-256 digest.
import { hash, randomBytes } from 'node:crypto';

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

/**
 * A token's SHA-256 digest in hex. Every API request takes one (the caller cache is keyed by
 * it): Node's one-shot `hash` (20.12 on; package.json asks for 20.19) makes no Hash object
 * and costs a third of createHash's chain.
 */
export const digestOf = (token: string) => hash('sha256', token, 'hex');

