// Providers whose signature (or its timestamp) travels inside the body or over the URL rather
// than beside a plain body: Mailgun, Linear, Braintree, Treezor, Twilio and SignalWire.
import { createHash } from 'node:crypto';
import { checkTime, DEFAULT_TOLERANCE, decodeSig, digest, formFields, hmac, sameBytes, urlAndSortedForm } from './hmac.js';
import { invalid, missing, OK, type Scheme, type WebhookRequest } from './types.js';

function jsonBody(r: WebhookRequest): any {
  try {
    return JSON.parse(r.body.toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Mailgun: HMAC-SHA256 (hex) of timestamp + token with the webhook signing key, in `signature` of the JSON body (or form fields). */
export const mailgun: Scheme = {
  verify(r, secret) {
    const fromJson = jsonBody(r)?.signature;
    const form = fromJson ? undefined : Object.fromEntries(formFields(r.body));
    const { timestamp, token, signature } = (fromJson ?? form ?? {}) as Record<string, string | undefined>;
    if (!timestamp || !token || !signature) return missing('the body carries no Mailgun signature (timestamp, token, signature)');
    const t = checkTime(String(timestamp), 's', DEFAULT_TOLERANCE, r.now);
    if (!t.ok) return t;
    const got = decodeSig(String(signature), 'hex');
    return got && sameBytes(got, digest('sha256', secret, `${timestamp}${token}`)) ? OK : invalid('the signature does not match the configured signing key');
  },
};

/** Linear: HMAC-SHA256 (hex) of the body in Linear-Signature; the body's webhookTimestamp (ms) within a minute, as Linear advises. */
export const linear: Scheme = {
  async verify(r, secret) {
    const v = await hmac({ extract: (q) => (q.headers['linear-signature'] ? { sigs: [q.headers['linear-signature']!] } : 'the linear-signature header is missing'), alg: 'sha256', enc: 'hex' }).verify(r, secret);
    if (!v.ok) return v;
    const ts = jsonBody(r)?.webhookTimestamp;
    if (typeof ts !== 'number') return missing('the body has no webhookTimestamp');
    return checkTime(String(ts), 'ms', 60, r.now);
  },
};

/** Braintree: form fields bt_signature (`public_key|hex` pairs joined by &) and bt_payload; HMAC-SHA1 keyed by SHA-1 of the private key. */
export const braintree: Scheme = {
  verify(r, secret) {
    const f = Object.fromEntries(formFields(r.body));
    if (!f.bt_signature || !f.bt_payload) return missing('the bt_signature and bt_payload form fields are required');
    const key = createHash('sha1').update(secret).digest();
    const expected = digest('sha1', key, f.bt_payload);
    const match = f.bt_signature.split('&').some((pair) => {
      const b = decodeSig(pair.slice(pair.indexOf('|') + 1), 'hex');
      return b !== undefined && sameBytes(b, expected);
    });
    return match ? OK : invalid('bt_signature does not match bt_payload and the configured private key');
  },
};

/** Treezor: object_payload_signature = base64 HMAC-SHA256 of object_payload re-encoded as Treezor does (slashes and non-ASCII escaped). */
export const treezor: Scheme = {
  verify(r, secret) {
    const b = jsonBody(r);
    if (!b || b.object_payload === undefined || typeof b.object_payload_signature !== 'string') return missing('the body has no object_payload and object_payload_signature');
    const text = JSON.stringify(b.object_payload)
      .replace(/\//g, '\\/')
      .replace(/[^\x20-\x7F]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
    const got = decodeSig(b.object_payload_signature, 'base64');
    return got && sameBytes(got, digest('sha256', secret, text)) ? OK : invalid('object_payload_signature does not match the payload and the configured secret');
  },
};

/**
 * Twilio (and SignalWire's compatible API): base64 HMAC-SHA1 with the auth token of the URL
 * followed by the sorted form fields; a JSON body is instead bound by the URL's bodySHA256.
 */
export const twilioLike = (...headers: string[]): Scheme => ({
  verify(r, secret) {
    const name = headers.find((h) => r.headers[h]);
    if (!name) return missing(`the ${headers.join(' or ')} header is missing`);
    const got = decodeSig(r.headers[name]!, 'base64');
    const bodySha = new URL(r.url).searchParams.get('bodySHA256');
    if (bodySha !== null && bodySha !== createHash('sha256').update(r.body).digest('hex')) return invalid('the body does not match the bodySHA256 the URL carries');
    const message = bodySha !== null ? r.url : urlAndSortedForm(r);
    return got && sameBytes(got, digest('sha1', secret, message)) ? OK : invalid('the signature does not match the URL, the parameters and the configured auth token');
  },
});
