// Secret fingerprints: a server extension outside SPEC's resources (docs/api.md, "Secret
// fingerprints"). The reconciler stamps each resource's `metadata` with a fingerprint of
// the write-only values it applied, to see later that the manifest's secret changed. Any
// key can read `metadata`, so the fingerprint must be keyed by something readers do not
// hold: an HMAC under a key derived from the server's secret key, which only this endpoint
// uses. A guess can then be tested only here, online, within a per-key budget, like a login.
import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { canonical } from '../../provider/catalog/canonical-json.js';
import { ApiError } from '../http/errors.js';
import { parseInput } from '../http/validation.js';
import type { SecretBox } from '../store/secret-box.js';
import { extraRoute } from '../resources/routes.js';
import { SlidingWindows } from '../policy/sliding-window.js';

export const FINGERPRINTS_PATH = '/_edgeform/fingerprints';
/** The prefix of a keyed fingerprint (`k1.` + 22 base64url characters). */
export const KEYED_PREFIX = 'k1.';
const MAX_ITEMS = 100;
/** Write-only values of one document or child: a route holds a handful (client secrets, webhook secrets). */
const MAX_VALUES = 64;

const request = z.strictObject({
  stack: z.string().min(1).max(64).describe('The stack the values belong to.'),
  items: z
    .array(
      z.strictObject({
        address: z.string().min(1).max(1000).describe('The address of the document or child the values belong to, such as HTTPSEdge/web.routes["/"].'),
        values: z
          .record(z.string().max(1000), z.unknown())
          .refine((m) => Object.keys(m).length <= MAX_VALUES, `at most ${MAX_VALUES} values`)
          .meta({ maxProperties: MAX_VALUES })
          .describe('The write-only values, by path: never stored or logged.'),
      }),
    )
    .min(1)
    .max(MAX_ITEMS)
    .describe(`Up to ${MAX_ITEMS} sets of values to fingerprint.`),
});
const response = z.object({ fingerprints: z.array(z.string()).describe('One fingerprint per item, in order.') });

const keys = new WeakMap<SecretBox, Buffer>();

export function keyedFingerprint(box: SecretBox, stack: string, address: string, values: unknown): string {
  let key = keys.get(box);
  if (!key) keys.set(box, (key = box.derive('secret fingerprints v1')));
  const mac = createHmac('sha256', key).update(`${stack}\u0000${address}\u0000`).update(canonical(values)).digest('base64url');
  return `${KEYED_PREFIX}${mac.slice(0, 22)}`;
}

/**
 * Each API key's budget of fingerprints: `perHour` in any sliding hour, counted by the
 * window the API rate limit uses. In memory per server instance, as the API rate limit is.
 */
const budget = new SlidingWindows();
const HOUR_MS = 3_600_000;

extraRoute({
  method: 'POST',
  path: FINGERPRINTS_PATH,
  summary: 'Fingerprint write-only values with a key only the server holds (edgeform extension)',
  tag: 'Extensions',
  request,
  status: 200,
  response,
  handle: async (ctx, req) => {
    if (!req.body || typeof req.body !== 'object' || Array.isArray(req.body)) throw new ApiError('ERR_SERVICE_100', 'the request body must be a JSON object');
    const body = parseInput(request, req.body);
    const limit = ctx.fingerprintRateLimit ?? 0;
    if (body.items.length > limit && limit > 0) {
      throw new ApiError('ERR_SERVICE_228', `items: ${body.items.length} fingerprints exceed this server's budget of ${limit} per API key per hour; ask for fewer at once`, { field: 'items' });
    }
    const wait = limit > 0 ? budget.take(ctx.caller.keyId, limit, HOUR_MS, Date.now(), body.items.length) : 0;
    if (wait > 0) {
      throw new ApiError('ERR_SERVICE_228', `too many secret fingerprints for this API key (${limit} per hour); retry in ${wait} s`, { retry_after: wait }, { 'Retry-After': String(wait) });
    }
    return { fingerprints: body.items.map((i) => keyedFingerprint(ctx.box, body.stack, i.address, i.values)) };
  },
});
