// Ids: the kind's prefix, an underscore and 27 base62 characters that sort by creation
// time (9 characters of milliseconds, then 18 random ones). Within one process ids are
// strictly increasing even inside one millisecond, so "newest first" is exact.
import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const TIME_DIGITS = 9;
const RANDOM_DIGITS = 18;

/** Random bytes drawn in bulk: one call per 4,096 bytes rather than one per id. */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;
function randomByte(): number {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  return pool[poolAt++];
}

/** A uniformly random base62 digit (bytes of 248 and over are drawn again: 248 = 4 x 62). */
function randomDigit(): number {
  for (;;) {
    const b = randomByte();
    if (b < 248) return b % 62;
  }
}

let lastMs = 0;
let timePart = '';
/** The random part's digits, most significant first; kept as numbers so that one id after another is a carry, not BigInt arithmetic. */
const digits = new Array<number>(RANDOM_DIGITS).fill(0);

function timeDigits(ms: number): string {
  let out = '';
  for (let i = 0; i < TIME_DIGITS; i++) {
    out = ALPHABET[ms % 62] + out;
    ms = Math.floor(ms / 62);
  }
  return out;
}

export function newIdBody(): string {
  let ms = Date.now();
  if (ms <= lastMs) {
    ms = lastMs;
    // The next random part: add one, carrying; past the last one, the next millisecond from zero.
    let i = RANDOM_DIGITS - 1;
    while (i >= 0 && digits[i] === 61) digits[i--] = 0;
    if (i >= 0) digits[i]++;
    else ms += 1;
  } else {
    for (let i = 0; i < RANDOM_DIGITS; i++) digits[i] = randomDigit();
  }
  if (ms !== lastMs || !timePart) timePart = timeDigits(ms);
  lastMs = ms;
  let out = timePart;
  for (let i = 0; i < RANDOM_DIGITS; i++) out += ALPHABET[digits[i]];
  return out;
}

export const newId = (prefix: string) => `${prefix}_${newIdBody()}`;

// SPEC: identifier bodies are opaque. Only the prefix says which collection an id belongs
// to (another prefix is 400); any body after the right prefix is an id, known or not (404).
// Control characters and lone surrogates are never part of one: PostgreSQL cannot compare them.
const BODY = /^[^\s/?#\p{Cc}\p{Cs}]{1,100}$/u;
/** Whether a string is shaped like an id of the given prefix. */
export const isIdOf = (prefix: string, id: string) => id.startsWith(`${prefix}_`) && BODY.test(id.slice(prefix.length + 1));
