// webhook_verification: the request must carry the configured provider's valid signature, as
// that provider documents it (webhooks/providers.ts), timestamp tolerance included; otherwise
// 403 (Xero: 401, which its intent-to-receive check expects). The body is read once, bounded,
// and then sent upstream from the buffer; the secret never reaches a log or an answer.
import type { FilterFactory } from '../types.js';
import { errorAnswer } from '../http/error-page.js';
import { PROVIDERS, REFUSAL, type WebhookProvider } from './webhooks/providers.js';
import type { WebhookRequest } from './webhooks/types.js';

/** Webhook bodies larger than this are refused (413, ERR_SERVICE_748) rather than buffered. */
export const WEBHOOK_BODY_LIMIT = 10 * 1024 * 1024;

function joinHeaders(h: Record<string, string | string[] | undefined>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(h)) out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
  return out;
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
      // Past the limit readBody rejects with the edge's 413 (ERR_SERVICE_748), which the chain answers.
      const body = await ex.readBody(WEBHOOK_BODY_LIMIT);
      const port = ex.publicPort === (ex.scheme === 'https' ? 443 : 80) ? '' : `:${ex.publicPort}`;
      const r: WebhookRequest = {
        method: ex.method.toUpperCase(),
        url: `${ex.scheme}://${ex.host}${port}${ex.req.url ?? ex.path}`,
        headers: joinHeaders(ex.req.headers as Record<string, string | string[] | undefined>),
        body,
        now: deps.now(),
      };
      let verdict;
      try {
        verdict = await scheme.verify(r, secret);
      } catch (e) {
        // A scheme that cannot read what it was sent refuses; it never waves the request through.
        verdict = { ok: false as const, reason: 'invalid' as const, detail: 'the signature could not be checked' };
        deps.log({ level: 'warn', msg: 'webhook verification failed to run', route: route.id, provider, reason: (e as Error).message });
      }
      if (!verdict.ok) {
        const code = verdict.reason === 'stale' ? 'ERR_SERVICE_783' : (REFUSAL[provider] ?? 'ERR_SERVICE_782');
        ex.answer(errorAnswer(code, `Webhook verification (${provider}) refused the request: ${verdict.detail}.`));
        return;
      }
      if (verdict.answer) {
        ex.answer(verdict.answer);
        return;
      }
      await next();
    },
  };
};
