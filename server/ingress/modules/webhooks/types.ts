// What a webhook scheme sees of a request, and what it decides.
import type { EdgeAnswer } from '../../types.js';

export interface WebhookRequest {
  method: string;
  /** The URL the sender signed: https://host[:port]/path?query as the client sent it. */
  url: string;
  /** Header values by lower-case name, repeated ones joined with ", ". */
  headers: Record<string, string | undefined>;
  body: Buffer;
  /** Now in milliseconds (IngressDeps.now, so tests can move the clock). */
  now: number;
}

export type Verdict =
  /** Verified. `answer`: the provider's endpoint handshake, answered at the edge (Twitter CRC, Zoom URL validation, ...). */
  | { ok: true; answer?: EdgeAnswer }
  | { ok: false; reason: 'missing' | 'invalid' | 'stale'; detail: string };

export interface Scheme {
  verify(r: WebhookRequest, secret: string): Verdict | Promise<Verdict>;
}

export const missing = (detail: string): Verdict => ({ ok: false, reason: 'missing', detail });
export const invalid = (detail: string): Verdict => ({ ok: false, reason: 'invalid', detail });
export const stale = (detail: string): Verdict => ({ ok: false, reason: 'stale', detail });
export const OK: Verdict = { ok: true };
