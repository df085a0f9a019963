// Endpoint handshakes: requests a provider sends, unsigned or signed, to prove the endpoint is
// the subscriber's before it sends events. The service answers four at the edge (Twitter's CRC,
// Worldline's verification, Xero's intent to receive through its 401, Zoom's URL validation);
// edgeform does too, plus Okta's one-time verification. GET challenges that only the
// application can answer (Dropbox, Meta's hub.challenge, Nylas) pass through to it.
import type { EdgeAnswer } from '../../types.js';
import { digest } from './hmac.js';
import { OK, type Scheme, type Verdict, type WebhookRequest } from './types.js';

const json = (value: unknown): EdgeAnswer => ({ status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) });
const query = (r: WebhookRequest) => new URL(r.url).searchParams;

/** `before` decides unsigned handshakes; anything else goes to `scheme`. */
export const before = (scheme: Scheme, h: (r: WebhookRequest, secret: string) => Verdict | undefined): Scheme => ({
  verify: (r, secret) => h(r, secret) ?? scheme.verify(r, secret),
});

/** `after` answers a handshake only once the scheme has verified it. */
export const after = (scheme: Scheme, h: (r: WebhookRequest, secret: string) => EdgeAnswer | undefined): Scheme => ({
  async verify(r, secret) {
    const v = await scheme.verify(r, secret);
    if (!v.ok) return v;
    const answer = h(r, secret);
    return answer ? { ok: true, answer } : v;
  },
});

/** GET requests carrying one of these query parameters go to the application unverified. */
export const passGetWith = (...params: string[]) => (r: WebhookRequest): Verdict | undefined =>
  r.method === 'GET' && params.some((p) => query(r).has(p)) ? OK : undefined;

export const twitterCrc = (r: WebhookRequest, secret: string): Verdict | undefined => {
  const token = r.method === 'GET' ? query(r).get('crc_token') : null;
  if (token === null) return undefined;
  return { ok: true, answer: json({ response_token: `sha256=${digest('sha256', secret, token).toString('base64')}` }) };
};

export const worldlineVerification = (r: WebhookRequest): Verdict | undefined => {
  const v = r.method === 'GET' ? r.headers['x-gcs-webhooks-endpoint-verification'] : undefined;
  return v === undefined ? undefined : { ok: true, answer: { status: 200, headers: { 'content-type': 'text/plain' }, body: v } };
};

export const zoomUrlValidation = (r: WebhookRequest, secret: string): EdgeAnswer | undefined => {
  try {
    const b = JSON.parse(r.body.toString('utf8'));
    if (b?.event !== 'endpoint.url_validation' || typeof b.payload?.plainToken !== 'string') return undefined;
    const plainToken: string = b.payload.plainToken;
    return json({ plainToken, encryptedToken: digest('sha256', secret, plainToken).toString('hex') });
  } catch {
    return undefined;
  }
};

export const oktaVerification = (r: WebhookRequest): EdgeAnswer | undefined => {
  const v = r.method === 'GET' ? r.headers['x-okta-verification-challenge'] : undefined;
  return v === undefined ? undefined : json({ verification: v });
};
