// webhook_verification: the request must carry the configured provider's valid signature, as
// that provider documents it (webhooks/providers.ts), timestamp tolerance included; otherwise
// 403 (Xero: 401, which its intent-to-receive check expects). A request without the provider's
// signature headers is refused before its body is read; otherwise the body is read once, bounded
// (per request, per connection and per server: buffer-budget.ts), and then sent upstream from the
// buffer; the secret never reaches a log or an answer.
import type { Exchange, FilterFactory, IngressDeps } from '../types.js';
import { errorAnswer } from '../http/error-page.js';
import { PROVIDERS, REFUSAL, type WebhookProvider } from './webhooks/providers.js';
import type { Scheme, Verdict, WebhookRequest } from './webhooks/types.js';

/** Webhook bodies larger than this are refused (413, ERR_SERVICE_748) rather than buffered. */
export const WEBHOOK_BODY_LIMIT = 10 * 1024 * 1024;

function joinHeaders(h: Record<string, string | string[] | undefined>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(h)) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

const EMPTY = Buffer.alloc(0);

/** Providers whose signature (or part of what it needs) travels in the body: their requests are read before they are checked. */
const BODY_SIGNED = new Set<string>(['braintree', 'linear', 'mailgun', 'sns', 'treezor']);

async function verdictOf(scheme: Scheme, r: WebhookRequest, secret: string, routeId: string, provider: string, deps: IngressDeps): Promise<Verdict> {
  try {
    return await scheme.verify(r, secret);
  } catch (e) {
    // A scheme that cannot read what it was sent refuses; it never waves the request through.
    deps.log({ level: 'warn', msg: 'webhook verification failed to run', route: routeId, provider, reason: (e as Error).message });
    return { ok: false, reason: 'invalid', detail: 'the signature could not be checked' };
  }
}

function refuse(ex: Exchange, provider: WebhookProvider, verdict: Verdict & { ok: false }) {
  const code = verdict.reason === 'stale' ? 'ERR_SERVICE_783' : (REFUSAL[provider] ?? 'ERR_SERVICE_782');
  ex.answer(errorAnswer(code, `Webhook verification (${provider}) refused the request: ${verdict.detail}.`));
}

export const webhookVerification: FilterFactory = (config, route, deps) => {
  const provider = String(config?.provider ?? '').toLowerCase() as WebhookProvider;
  const scheme = PROVIDERS[provider];
  const secret: string = config?.secret ?? '';
  return {
    async handle(ex, next) {
      if (!scheme) {
        // The catalog refuses unknown providers; a row written before a provider was removed fails closed.
        ex.answer(errorAnswer('ERR_SERVICE_782', `Webhook provider "${provider}" is not known to this server; the request was refused.`));
        return;
      }
      const port = ex.publicPort === (ex.scheme === 'https' ? 443 : 80) ? '' : `:${ex.publicPort}`;
      const r: WebhookRequest = {
        method: ex.method.toUpperCase(),
        url: `${ex.scheme}://${ex.host}${port}${ex.req.url ?? ex.path}`,
        headers: joinHeaders(ex.req.headers as Record<string, string | string[] | undefined>),
        body: EMPTY,
        now: deps.now(),
      };
      // A request without the provider's signature headers is refused before a byte of its body
      // is read: an unsigned 10 MiB body is never buffered (providers that sign in the body excepted).
      if (!BODY_SIGNED.has(provider)) {
        const early = await verdictOf(scheme, r, secret, route.id, provider, deps);
        if (!early.ok && early.reason === 'missing') return refuse(ex, provider, early);
      }
      // Past the limit readBody rejects with the edge's 413 (ERR_SERVICE_748), past the
      // connection's or server's buffer bounds 429 or 503 (buffer-budget.ts); the chain answers.
      r.body = await ex.readBody(WEBHOOK_BODY_LIMIT);
      const verdict = await verdictOf(scheme, r, secret, route.id, provider, deps);
      if (!verdict.ok) return refuse(ex, provider, verdict);
      if (verdict.answer) {
        ex.answer(verdict.answer);
        return;
      }
      await next();
    },
  };
};
