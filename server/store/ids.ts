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
let timeWritten = false;
/** The random part's digits, most significant first; kept as numbers so that one id after another is a carry, not BigInt arithmetic. */
const digits = new Array<number>(RANDOM_DIGITS).fill(0);
const CODES = Buffer.from(ALPHABET, 'latin1');
/**
 * The id's text as bytes, read out as one string: every API request takes an id (its
 * operation id), and adding its 27 characters to a string one by one made 27 strings of
 * garbage (a twentieth of a GET's allocations).
 */
const text = Buffer.alloc(TIME_DIGITS + RANDOM_DIGITS);

function writeTime(ms: number) {
  for (let i = TIME_DIGITS - 1; i >= 0; i--) {
    text[i] = CODES[ms % 62];
    ms = Math.floor(ms / 62);
  }
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
  if (ms !== lastMs || !timeWritten) writeTime(ms);
  timeWritten = true;
  lastMs = ms;
  for (let i = 0; i < RANDOM_DIGITS; i++) text[TIME_DIGITS + i] = CODES[digits[i]];
  return text.toString('latin1');
}

export const newId = (prefix: string) => `${prefix}_${newIdBody()}`;

// SPEC: identifier bodies are opaque. Only the prefix says which collection an id belongs
// to (another prefix is 400); any body after the right prefix is an id, known or not (404).
// Control characters and lone surrogates are never part of one: PostgreSQL cannot compare them.
const BODY = /^[^\s/?#\p{Cc}\p{Cs}]{1,100}$/u;
/** Whether a string is shaped like an id of the given prefix. */
export const isIdOf = (prefix: string, id: string) => id.startsWith(`${prefix}_`) && BODY.test(id.slice(prefix.length + 1));
