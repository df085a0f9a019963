// rate-limit (SPEC): the bucket is the bucket_key values; over capacity the request ends with
// 429 and retry-after, and later rules do not run; the result is left in
// actions.service.rate_limit.* for later expressions. With `enforce: false` (the service's
// documented field, default true) an over-capacity request is only reported, not refused.
import type { RateLimitAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { respond, type Runner } from './run.js';

export function rateLimit(config: RateLimitAction, scope: string): Runner {
  // Buckets survive an edit of the policy that keeps the limit's name and rate.
  const prefix = `${scope}\u0000${config.name}\u0000${config.rate}\u0000`;
  const widthMs = config.rate * 1000;
  const { keys, capacity } = config;
  return (ctx) => {
    const values = keys.map((k) => (k.kind === 'host' ? ctx.vars.req!.host : k.kind === 'client_ip' ? ctx.vars.conn.client_ip : (ctx.vars.req!.headers[k.name] ?? []).join(',')));
    const bucket = values.join(',');
    const wait = ctx.state.windows.take(prefix + values.join('\u0000'), capacity, widthMs, ctx.now);
    const out = ctx.vars.actions.service.rate_limit;
    out.bucket_key = bucket;
    out.limited = wait > 0;
    out.error = { code: '', message: '' };
    if (wait > 0 && !config.enforce) return { did: `rate-limit ${config.name}: bucket "${bucket}" over capacity ${capacity} per ${config.rate}s; not enforced (enforce: false), continues` };
    if (wait === 0) return { did: `rate-limit ${config.name}: bucket "${bucket}" under capacity ${capacity} per ${config.rate}s; continues` };
    return {
      ended: respond(429, 'Too Many Requests\n', { 'retry-after': String(wait) }),
      did: `rate-limit ${config.name}: bucket "${bucket}" over capacity ${capacity} per ${config.rate}s; 429, retry-after ${wait}s`,
    };
  };
}
