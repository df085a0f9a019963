// Ids: the kind's prefix, an underscore and 27 base62 characters that sort by creation
// time (9 characters of milliseconds, then 18 random ones). Within one process ids are
// strictly increasing even inside one millisecond, so "newest first" is exact.
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_SPACE = 62n ** 18n;

function base62(n: bigint, width: number): string {
  let out = '';
  for (let i = 0; i < width; i++) {
    out = ALPHABET[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out;
}

let lastMs = 0;
let lastRandom = 0n;

export function newIdBody(): string {
  let ms = Date.now();
  let random: bigint;
  if (ms <= lastMs) {
    ms = lastMs;
    random = lastRandom + 1n;
    if (random >= RANDOM_SPACE) { ms += 1; random = 0n; }
  } else {
    random = BigInt(`0x${randomBytes(13).toString('hex')}`) % RANDOM_SPACE;
  }
  lastMs = ms;
  lastRandom = random;
  return base62(BigInt(ms), 9) + base62(random, 18);
}

export const newId = (prefix: string) => `${prefix}_${newIdBody()}`;

// SPEC: identifier bodies are opaque. Only the prefix says which collection an id belongs
// to (another prefix is 400); any body after the right prefix is an id, known or not (404).
// Control characters and lone surrogates are never part of one: PostgreSQL cannot compare them.
const BODY = /^[^\s/?#\p{Cc}\p{Cs}]{1,100}$/u;
/** Whether a string is shaped like an id of the given prefix. */
export const isIdOf = (prefix: string, id: string) => id.startsWith(`${prefix}_`) && BODY.test(id.slice(prefix.length + 1));
