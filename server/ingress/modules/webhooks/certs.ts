// Providers that sign with a certificate the request names by URL: Amazon SNS (SigningCertURL)
// and PayPal (PAYPAL-CERT-URL). The URL must be https on the provider's own hosts, or any
// attacker could name a certificate of their own; each host pattern can be replaced by a
// setting (tests run a local https server, there being no internet), documented in
// docs/ingress.md. Certificates are cached per URL (a bounded set), so one download serves
// every later message.
import { createPublicKey, verify as verifySig, type KeyObject } from 'node:crypto';
import https from 'node:https';
import { crc32 } from 'node:zlib';
import { checkTime, DEFAULT_TOLERANCE } from './hmac.js';
import { invalid, missing, OK, type Scheme, type Verdict, type WebhookRequest } from './types.js';

export const CERT_HOSTS = {
  // SNS hosts only: `sns.<region>.amazonaws.com` with a region such as us-east-1, us-gov-west-1
  // or cn-north-1 (then .com.cn). Any label once passed, and AWS serves other services'
  // content (sns.s3.amazonaws.com is an S3 bucket named sns, which anyone may own).
  sns: { env: 'EDGEFORM_WEBHOOK_SNS_CERT_HOST', default: '^sns\\.[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]+\\.amazonaws\\.com(\\.cn)?$' },
  paypal: { env: 'EDGEFORM_WEBHOOK_PAYPAL_CERT_HOST', default: '^api(-m)?(\\.sandbox)?\\.paypal\\.com$' },
} as const;

const MAX_CERT_BYTES = 64 * 1024;
const FETCH_TIMEOUT_MS = 5000;
const CACHE_LIMIT = 64;

/** Downloads a certificate over https (system trust, plus NODE_EXTRA_CA_CERTS). Replaceable in unit tests. */
export const certSource = {
  fetch(url: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = https.get(url, { timeout: FETCH_TIMEOUT_MS }, (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          reject(new Error(`certificate download answered ${res.statusCode}`));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_CERT_BYTES) req.destroy(new Error('certificate larger than 64 KiB'));
          else chunks.push(c);
        });
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error('certificate download timed out')));
      req.on('error', reject);
    });
  },
};

const cache = new Map<string, Promise<KeyObject>>();

/** Why `url` may not name a signing certificate of `provider`, or undefined when it may. */
export function certUrlProblem(provider: keyof typeof CERT_HOSTS, url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'the certificate URL is not a URL';
  }
  if (u.protocol !== 'https:') return 'the certificate URL is not https';
  const pattern = new RegExp(process.env[CERT_HOSTS[provider].env] || CERT_HOSTS[provider].default, 'i');
  if (!pattern.test(u.hostname)) return `the certificate host ${u.hostname} is not one of ${provider}'s (${pattern.source})`;
  if (provider === 'sns' && !u.pathname.endsWith('.pem')) return 'the SNS certificate URL does not name a .pem file';
  return undefined;
}

async function certKey(url: string): Promise<KeyObject> {
  let p = cache.get(url);
  if (!p) {
    p = certSource.fetch(url).then((pem) => createPublicKey(pem));
    p.catch(() => cache.delete(url)); // a failed download is retried by the next message
    if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!);
    cache.set(url, p);
  }
  return p;
}

async function verifyWithCert(provider: keyof typeof CERT_HOSTS, url: string, alg: string, data: Buffer, sig: Buffer): Promise<Verdict> {
  const problem = certUrlProblem(provider, url);
  if (problem) return invalid(problem);
  let key: KeyObject;
  try {
    key = await certKey(url);
  } catch (e) {
    return invalid(`the signing certificate could not be read: ${(e as Error).message}`);
  }
  return verifySig(alg, data, key, sig) ? OK : invalid('the signature does not match the signing certificate');
}

/** The fields AWS signs, by message type, in the order it signs them. */
const SNS_FIELDS: Record<string, string[]> = {
  Notification: ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type'],
  SubscriptionConfirmation: ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'],
  UnsubscribeConfirmation: ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'],
};

/**
 * Amazon SNS: the JSON body carries the signature (SignatureVersion 1: SHA1withRSA, 2:
 * SHA256withRSA) and SigningCertURL. AWS documents no age limit, and a retried delivery keeps
 * its first Timestamp, so the timestamp is signed but not bounded (as AWS's own validators do).
 */
export const sns: Scheme = {
  async verify(r: WebhookRequest) {
    let m: Record<string, unknown>;
    try {
      m = JSON.parse(r.body.toString('utf8'));
    } catch {
      return missing('the body is not an SNS message (JSON)');
    }
    if (!m || typeof m !== 'object' || typeof m.Signature !== 'string' || typeof m.SigningCertURL !== 'string') {
      return missing('the SNS message has no Signature or SigningCertURL');
    }
    const fields = SNS_FIELDS[String(m.Type)];
    if (!fields) return invalid(`unknown SNS message Type ${String(m.Type).slice(0, 40)}`);
    const alg = m.SignatureVersion === '2' ? 'RSA-SHA256' : m.SignatureVersion === '1' ? 'RSA-SHA1' : undefined;
    if (!alg) return invalid('SignatureVersion must be 1 or 2');
    const text = fields.filter((f) => typeof m[f] === 'string').map((f) => `${f}\n${m[f]}\n`).join('');
    return verifyWithCert('sns', m.SigningCertURL, alg, Buffer.from(text, 'utf8'), Buffer.from(m.Signature, 'base64'));
  },
};

/** PayPal: SHA256withRSA over `transmission-id|transmission-time|webhook-id|crc32(body)`; the secret is the webhook id. */
export const paypal: Scheme = {
  async verify(r, secret) {
    const h = (n: string) => r.headers[`paypal-${n}`];
    const [id, time, sig, certUrl] = [h('transmission-id'), h('transmission-time'), h('transmission-sig'), h('cert-url')];
    if (!id || !time || !sig || !certUrl) return missing('the PAYPAL-TRANSMISSION-ID, -TIME, -SIG and PAYPAL-CERT-URL headers are required');
    const algo = (h('auth-algo') ?? 'SHA256withRSA').toUpperCase();
    if (algo !== 'SHA256WITHRSA') return invalid(`PAYPAL-AUTH-ALGO ${algo.slice(0, 40)} is not supported (SHA256withRSA)`);
    const t = checkTime(time, 'iso', DEFAULT_TOLERANCE, r.now);
    if (!t.ok) return t;
    const data = Buffer.from(`${id}|${time}|${secret}|${crc32(r.body) >>> 0}`);
    return verifyWithCert('paypal', certUrl, 'RSA-SHA256', data, Buffer.from(sig, 'base64'));
  },
};
