// Providers whose signature is a JWT (monday.com: HS256 with the signing secret; Plaid: ES256
// with the verification key) or an ECDSA signature (SendGrid) over the body.
import { createHash, createPublicKey, verify as verifySig, type KeyObject } from 'node:crypto';
import { checkTime, DEFAULT_TOLERANCE, digest, sameBytes } from './hmac.js';
import { invalid, missing, OK, type Scheme, type Verdict } from './types.js';

function splitJwt(token: string): { header: any; claims: any; signed: string; sig: Buffer } | undefined {
  const parts = token.split('.');
  if (parts.length !== 3) return undefined;
  try {
    const json = (s: string) => JSON.parse(Buffer.from(s, 'base64url').toString('utf8'));
    return { header: json(parts[0]), claims: json(parts[1]), signed: `${parts[0]}.${parts[1]}`, sig: Buffer.from(parts[2], 'base64url') };
  } catch {
    return undefined;
  }
}

/** A public key from PEM, or JWK JSON (Plaid's /webhook_verification_key/get returns a JWK), or base64 DER (SendGrid's dashboard). */
export function publicKey(secret: string): KeyObject | undefined {
  try {
    const s = secret.trim();
    if (s.startsWith('-----BEGIN')) return createPublicKey(s);
    if (s.startsWith('{')) return createPublicKey({ key: JSON.parse(s), format: 'jwk' });
    return createPublicKey({ key: Buffer.from(s, 'base64'), format: 'der', type: 'spki' });
  } catch {
    return undefined;
  }
}

/** monday.com: the Authorization header is a JWT signed (HS256) with the app's signing secret. */
export const mondayJwt: Scheme = {
  verify(r, secret) {
    // Its URL challenge carries only {"challenge": ...}, answered by echoing it.
    if (r.method === 'POST' && !r.headers.authorization) {
      try {
        const b = JSON.parse(r.body.toString('utf8'));
        if (b && typeof b.challenge === 'string' && Object.keys(b).length === 1) {
          return { ok: true, answer: { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ challenge: b.challenge }) } };
        }
      } catch { /* not the challenge */ }
    }
    const token = (r.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
    if (!token) return missing('the Authorization header (a JWT) is missing');
    const jwt = splitJwt(token);
    if (!jwt || jwt.header.alg !== 'HS256') return invalid('the Authorization header is not an HS256 JWT');
    if (!sameBytes(jwt.sig, digest('sha256', secret, jwt.signed))) return invalid('the JWT signature does not match the configured signing secret');
    if (typeof jwt.claims.exp === 'number' && jwt.claims.exp * 1000 < r.now) return { ok: false, reason: 'stale', detail: 'the JWT has expired' };
    return OK;
  },
};

/** Plaid: Plaid-Verification is an ES256 JWT whose claims carry iat (at most 5 minutes old) and the body's SHA-256. */
export const plaidJwt: Scheme = {
  verify(r, secret) {
    const token = r.headers['plaid-verification'];
    if (!token) return missing('the Plaid-Verification header is missing');
    const jwt = splitJwt(token);
    if (!jwt || jwt.header.alg !== 'ES256') return invalid('Plaid-Verification is not an ES256 JWT');
    const key = publicKey(secret);
    if (!key) return invalid('the configured secret is not a verification key (JWK JSON or PEM)');
    const okSig = verifySig('sha256', Buffer.from(jwt.signed), { key, dsaEncoding: 'ieee-p1363' }, jwt.sig);
    if (!okSig) return invalid('the JWT signature does not match the configured verification key');
    if (typeof jwt.claims.iat !== 'number') return missing('the JWT has no iat claim');
    const t = checkTime(String(jwt.claims.iat), 's', 300, r.now);
    if (!t.ok) return t;
    const bodySha = createHash('sha256').update(r.body).digest('hex');
    return jwt.claims.request_body_sha256 === bodySha ? OK : invalid('the body does not match the JWT request_body_sha256 claim');
  },
};

/** SendGrid Event Webhook: ECDSA (P-256, SHA-256) over timestamp + body, base64 DER in a header; the secret is the verification key. */
export const sendgridEcdsa: Scheme = {
  verify(r, secret): Verdict {
    const sig = r.headers['x-twilio-email-event-webhook-signature'];
    const ts = r.headers['x-twilio-email-event-webhook-timestamp'];
    if (!sig || !ts) return missing('the X-Twilio-Email-Event-Webhook-Signature and -Timestamp headers are required');
    const t = checkTime(ts, 's', DEFAULT_TOLERANCE, r.now);
    if (!t.ok) return t;
    const key = publicKey(secret);
    if (!key) return invalid('the configured secret is not a verification key (base64 DER or PEM)');
    const good = verifySig('sha256', Buffer.concat([Buffer.from(ts), r.body]), key, Buffer.from(sig, 'base64'));
    return good ? OK : invalid('the ECDSA signature does not match the body and the configured verification key');
  },
};
