// rate-limit, every rule of SPEC's "Rate-limit traffic-policy action".
import { parseDuration } from '../../traffic-policy.js';
import { onlyFields, problem } from '../config.js';
import { defineAction, HTTP_PHASES } from './define.js';

/** What a bucket is keyed by: one value per bucket_key entry. */
export type BucketKey = { kind: 'host' } | { kind: 'client_ip' } | { kind: 'header'; name: string };

export interface RateLimitAction {
  name: string;
  capacity: number;
  /** The rate period in seconds. */
  rate: number;
  bucket_key: string[];
  keys: BucketKey[];
  /** false: count and report (actions.service.rate_limit.limited) but let every request through; default true. */
  enforce: boolean;
}

export const MAX_CAPACITY = 2_000_000_000;
const RANGE = '1..2,000,000,000';
const HEADER_TOKEN = "[!#$%&*+\\-.^_`|~0-9A-Za-z]+";
const BUCKET_KEY = new RegExp(`^(?:(req\\.host)|(conn\\.client_ip)|req\\.headers\\[(['"])(${HEADER_TOKEN})\\3\\]|getReqHeader\\((['"])(${HEADER_TOKEN})\\5\\))$`);

export function parseBucketKey(entry: string): BucketKey | undefined {
  const m = BUCKET_KEY.exec(entry.trim());
  if (!m) return undefined;
  if (m[1]) return { kind: 'host' };
  if (m[2]) return { kind: 'client_ip' };
  return { kind: 'header', name: (m[4] ?? m[6]).toLowerCase() };
}

export const rateLimit = defineAction<RateLimitAction>({
  type: 'rate-limit',
  phases: HTTP_PHASES,
  fields: ['name', 'algorithm', 'capacity', 'rate', 'bucket_key', 'enforce'],
  expressionFields: ['bucket_key'],
  check(c) {
    onlyFields(c, this.fields);
    const { name, algorithm, capacity, rate, bucket_key: entries, enforce } = c.config;
    let ok = true;
    const fail = (key: string | number | undefined, message: string) => (ok = false, problem(c, key, message));
    if (typeof name !== 'string' || name.length === 0) fail('name', 'name is required (a string)');
    else if ([...name].length >= 1024) fail('name', 'name must be fewer than 1024 characters');
    if (algorithm !== 'sliding_window') fail('algorithm', 'algorithm is required and must be "sliding_window"');
    if (capacity === undefined) fail('capacity', `capacity is required: an integer in ${RANGE}`);
    else if (typeof capacity !== 'number' || !Number.isInteger(capacity)) fail('capacity', `capacity ${JSON.stringify(capacity)} is not an integer in ${RANGE}`);
    else if (capacity < 1 || capacity > MAX_CAPACITY) fail('capacity', `capacity ${capacity} is out of range ${RANGE}`);
    const seconds = typeof rate === 'string' ? parseDuration(rate) : undefined;
    if (rate === undefined) fail('rate', 'rate is required: a duration such as "60s", "10m" or "1h"');
    else if (seconds === undefined) fail('rate', `rate ${JSON.stringify(rate)} is not a duration such as "60s", "10m" or "1h"`);
    else if (seconds % 10 !== 0 || seconds < 60 || seconds > 86400) fail('rate', `rate "${String(rate)}" must be a multiple of 10s from 60s to 24h`);
    if (enforce !== undefined && typeof enforce !== 'boolean') fail('enforce', `enforce ${JSON.stringify(enforce)} must be true or false (false only reports what would be limited)`);
    const keys: BucketKey[] = [];
    if (!Array.isArray(entries) || entries.length === 0 || entries.length > 10) {
      fail('bucket_key', 'bucket_key is required: a list of 1 to 10 entries');
    } else {
      entries.forEach((k, i) => {
        // SPEC names the four forms; the service takes any expression (a ternary in its docs), which SPEC does not.
        const key = typeof k === 'string' ? parseBucketKey(k) : undefined;
        if (key) keys.push(key);
        else c.issues.push({ path: `${c.path}.bucket_key[${i}]`, message: `bucket_key entry ${JSON.stringify(k)} must be req.host, conn.client_ip, req.headers['<name>'] or getReqHeader('<Name>') (SPEC; the service also takes other expressions, edgeform does not)` }), (ok = false);
      });
    }
    return ok ? { name: name as string, capacity: capacity as number, rate: seconds!, bucket_key: entries as string[], keys, enforce: enforce !== false } : undefined;
  },
});
