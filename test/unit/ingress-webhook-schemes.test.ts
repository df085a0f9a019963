// Every webhook provider's scheme, with signatures computed here from each provider's own
// documentation (node:crypto directly, none of the module's helpers): a correct one is
// accepted; a wrong secret, an altered body, a stale timestamp and a missing signature are
// refused. Runs through the real filter on a fake Exchange.
import { createHash, createHmac, createPrivateKey, generateKeyPairSync, sign as cryptoSign, type KeyObject } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WEBHOOK_PROVIDERS } from '../../provider/catalog/route-modules.js';
import { certSource, certUrlProblem } from '../../server/ingress/modules/webhooks/certs.js';
import { webhookVerification } from '../../server/ingress/modules/webhook-verification.js';
import { fakeDeps, run, type FakeRequest } from '../helpers/fake-exchange.js';
import { Pki, type Issued } from '../helpers/pki.js';

const NOW = Date.UTC(2026, 10, 24, 12, 0, 0);
const PATH = '/hooks?x=1';
const URL_SIGNED = `https://app.example.com${PATH}`;
const JSON_BODY = '{"event":"ping","id":1}';

type Enc = 'hex' | 'base64' | 'base64url';
const mac = (alg: string, key: string | Buffer, msg: string | Buffer, enc: Enc) => createHmac(alg, key).update(msg).digest(enc);
const iso = (t: number) => new Date(t * 1000).toISOString();

interface Keys { rsa: Issued; ec: { priv: KeyObject; pub: KeyObject } }
interface Ctx { secret: string; t: number; keys: Keys }
interface Row {
  sign: (c: Ctx) => FakeRequest;
  /** The signed timestamp's tolerance in seconds (the stale case signs tolerance + 60 s ago). */
  tolerance?: number;
  /** The configured secret, when it is not the shared string (keys, encoded secrets). */
  secret?: (k: Keys, seed?: string) => string;
  /** The signature does not cover the body (shared-secret and token schemes). */
  bodyUnsigned?: true;
  /** The body the missing-signature case sends. */
  bare?: FakeRequest;
  refusal?: number;
}

const json = (body: string, headers: Record<string, string>): FakeRequest => ({ body, headers: { 'content-type': 'application/json', ...headers } });
const form = (body: string, headers: Record<string, string>): FakeRequest => ({ body, headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers } });
const plain = (header: string, alg: string, enc: Enc, prefix = ''): Row => ({ sign: ({ secret }) => json(JSON_BODY, { [header]: prefix + mac(alg, secret, JSON_BODY, enc) }) });
const stripeStyle = (header: string, sigKey: string, tolerance: number): Row => ({
  sign: ({ secret, t }) => json(JSON_BODY, { [header]: `t=${t},${sigKey}=${mac('sha256', secret, `${t}.${JSON_BODY}`, 'hex')}` }),
  tolerance,
});
const meta = plain('x-hub-signature-256', 'sha256', 'hex', 'sha256=');
const svix: Row = {
  secret: (_k, seed = '0123456789abcdef0123456789abcdef') => `whsec_${Buffer.from(seed).toString('base64')}`,
  sign: ({ secret, t }) => {
    const key = Buffer.from(secret.replace('whsec_', ''), 'base64');
    return json(JSON_BODY, { 'svix-id': 'msg_1', 'svix-timestamp': String(t), 'svix-signature': `v1,${mac('sha256', key, `msg_1.${t}.${JSON_BODY}`, 'base64')}` });
  },
  tolerance: 300,
};
const hygraph: Row = {
  sign: ({ secret, t }) => {
    const ms = t * 1000;
    const sig = mac('sha256', secret, JSON.stringify({ Body: JSON_BODY, EnvironmentName: 'master', TimeStamp: ms }), 'base64');
    return json(JSON_BODY, { 'gcms-signature': `sign=${sig}, env=master, t=${ms}` });
  },
  tolerance: 180,
};
const mandrill: Row = {
  sign: ({ secret }) => {
    const events = '[{"event":"ping"}]';
    return form(`mandrill_events=${encodeURIComponent(events)}`, { 'x-mandrill-signature': mac('sha1', secret, `${URL_SIGNED}mandrill_events${events}`, 'base64') });
  },
};
const twilioBody = 'To=%2B15550001&Body=ping&CallSid=CA1';
const twilioLike = (header: string): Row => ({
  sign: ({ secret }) => form(twilioBody, { [header]: mac('sha1', secret, `${URL_SIGNED}BodypingCallSidCA1To+15550001`, 'base64') }),
});
const basic: Row = {
  secret: (_k, seed = 's3cret') => `hook-user::${seed}`,
  sign: ({ secret }) => json(JSON_BODY, { authorization: `Basic ${Buffer.from(secret.replace('::', ':')).toString('base64')}` }),
  bodyUnsigned: true,
};
const jwt = (header: object, claims: object, signer: (data: string) => Buffer) => {
  const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const data = `${enc(header)}.${enc(claims)}`;
  return `${data}.${signer(data).toString('base64url')}`;
};
const snsMessage = (c: Ctx) => {
  const m: Record<string, string> = {
    Type: 'Notification', MessageId: 'm-1', TopicArn: 'arn:aws:sns:us-east-1:1:t', Subject: 'hello', Message: 'ping',
    Timestamp: iso(c.t), SignatureVersion: '2', SigningCertURL: 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem',
  };
  const text = ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type'].map((k) => `${k}\n${m[k]}\n`).join('');
  m.Signature = cryptoSign('sha256', Buffer.from(text), createPrivateKey(c.keys.rsa.key)).toString('base64');
  return JSON.stringify(m);
};

const ROWS: Record<(typeof WEBHOOK_PROVIDERS)[number], Row> = {
  aftership: plain('aftership-hmac-sha256', 'sha256', 'base64'),
  airship: { sign: ({ secret, t }) => json(JSON_BODY, { 'x-ua-timestamp': String(t), 'x-ua-signature': mac('sha256', secret, `${t}:${JSON_BODY}`, 'hex') }), tolerance: 180 },
  autodesk_forge: plain('x-adsk-signature', 'sha1', 'hex', 'sha1hash='),
  bitbucket: plain('x-hub-signature', 'sha256', 'hex', 'sha256='),
  box: { sign: ({ secret, t }) => json(JSON_BODY, { 'box-delivery-timestamp': iso(t), 'box-signature-primary': mac('sha256', secret, JSON_BODY + iso(t), 'base64') }), tolerance: 600 },
  braintree: {
    sign: ({ secret }) => {
      const payload = 'PG5vdGlmaWNhdGlvbj5waW5n-ping';
      const sig = mac('sha1', createHash('sha1').update(secret).digest(), payload, 'hex');
      return form(`bt_signature=${encodeURIComponent(`pubkey|${sig}`)}&bt_payload=${encodeURIComponent(payload)}`, {});
    },
    bare: form('bt_payload=ping', {}),
  },
  buildkite: { sign: ({ secret, t }) => json(JSON_BODY, { 'x-buildkite-signature': `timestamp=${t},signature=${mac('sha256', secret, `${t}.${JSON_BODY}`, 'hex')}` }), tolerance: 180 },
  calendly: stripeStyle('calendly-webhook-signature', 'v1', 180),
  castle: plain('x-castle-signature', 'sha256', 'base64'),
  chargify: plain('x-chargify-webhook-signature-hmac-sha-256', 'sha256', 'hex'),
  circleci: { sign: ({ secret }) => json(JSON_BODY, { 'circleci-signature': `v1=${mac('sha256', secret, JSON_BODY, 'hex')}` }) },
  clearbit: plain('x-request-signature', 'sha1', 'hex', 'sha1='),
  clerk: svix,
  coinbase: plain('x-cc-webhook-signature', 'sha256', 'hex'),
  contentful: {
    sign: ({ secret, t }) => {
      const headers = { 'x-contentful-timestamp': String(t * 1000), 'x-contentful-topic': 'ContentManagement.Entry.publish', 'x-contentful-signed-headers': 'x-contentful-timestamp,x-contentful-topic' };
      const canonical = `POST\n${PATH}\nx-contentful-timestamp:${t * 1000};x-contentful-topic:ContentManagement.Entry.publish\n${JSON_BODY}`;
      return json(JSON_BODY, { ...headers, 'x-contentful-signature': mac('sha256', secret, canonical, 'hex') });
    },
    tolerance: 30,
  },
  docusign: plain('x-docusign-signature-1', 'sha256', 'base64'),
  dropbox: plain('x-dropbox-signature', 'sha256', 'hex'),
  facebook_graph_api: meta,
  facebook_messenger: meta,
  frameio: { sign: ({ secret, t }) => json(JSON_BODY, { 'x-frameio-request-timestamp': String(t), 'x-frameio-signature': `v0=${mac('sha256', secret, `v0:${t}:${JSON_BODY}`, 'hex')}` }), tolerance: 300 },
  github: plain('x-hub-signature-256', 'sha256', 'hex', 'sha256='),
  gitlab: { sign: ({ secret }) => json(JSON_BODY, { 'x-gitlab-token': secret }), bodyUnsigned: true },
  go1: stripeStyle('go1-signature', 'v1', 180),
  graphcms: hygraph,
  heroku: plain('heroku-webhook-hmac-sha256', 'sha256', 'base64'),
  hostedhooks: stripeStyle('hostedhooks-signature', 's', 180),
  hubspot: {
    sign: ({ secret, t }) => json(JSON_BODY, { 'x-hubspot-request-timestamp': String(t * 1000), 'x-hubspot-signature-v3': mac('sha256', secret, `POST${URL_SIGNED}${JSON_BODY}${t * 1000}`, 'base64') }),
    tolerance: 300,
  },
  hygraph,
  instagram_graph_api: meta,
  intercom: plain('x-hub-signature', 'sha1', 'hex', 'sha1='),
  launchdarkly: plain('x-ld-signature', 'sha256', 'hex'),
  linear: {
    sign: ({ secret, t }) => {
      const body = JSON.stringify({ action: 'ping', webhookTimestamp: t * 1000 });
      return json(body, { 'linear-signature': mac('sha256', secret, body, 'hex') });
    },
    tolerance: 60,
  },
  mailchimp: mandrill,
  mailgun: {
    sign: ({ secret, t }) => json(JSON.stringify({ signature: { timestamp: String(t), token: 'tok-1', signature: mac('sha256', secret, `${t}tok-1`, 'hex') }, 'event-data': { event: 'ping' } }), {}),
    tolerance: 180,
    bodyUnsigned: true,
    bare: json('{"event-data":{"event":"ping"}}', {}),
  },
  mandrill,
  microsoft_teams: {
    secret: (_k, seed = 'teams-outgoing-webhook-key-32byt') => Buffer.from(seed).toString('base64'),
    sign: ({ secret }) => json(JSON_BODY, { authorization: `HMAC ${mac('sha256', Buffer.from(secret, 'base64'), JSON_BODY, 'base64')}` }),
  },
  modern_treasury: plain('x-signature', 'sha256', 'hex'),
  monday: {
    sign: ({ secret, t }) => json(JSON_BODY, { authorization: jwt({ alg: 'HS256', typ: 'JWT' }, { accountId: 1, exp: t + 30 }, (d) => createHmac('sha256', secret).update(d).digest()) }),
    tolerance: 30,
    bodyUnsigned: true,
  },
  mongodb: plain('x-hook-signature', 'sha256', 'hex', 'sha256='),
  mux: stripeStyle('mux-signature', 'v1', 300),
  nylas: plain('x-nylas-signature', 'sha256', 'hex'),
  okta: { sign: ({ secret }) => json(JSON_BODY, { authorization: secret }), bodyUnsigned: true },
  opsgenie: basic,
  orbit: plain('x-orbit-signature', 'sha256', 'hex'),
  pagerduty: { sign: ({ secret }) => json(JSON_BODY, { 'x-pagerduty-signature': `v1=${'ab'.repeat(32)},v1=${mac('sha256', secret, JSON_BODY, 'hex')}` }) },
  paypal: {
    sign: ({ secret, t, keys }) => {
      const data = `tx-1|${iso(t)}|${secret}|${crc32(Buffer.from(JSON_BODY)) >>> 0}`;
      return json(JSON_BODY, {
        'paypal-transmission-id': 'tx-1', 'paypal-transmission-time': iso(t), 'paypal-auth-algo': 'SHA256withRSA',
        'paypal-cert-url': 'https://api.paypal.com/v1/notifications/certs/CERT-1',
        'paypal-transmission-sig': cryptoSign('sha256', Buffer.from(data), createPrivateKey(keys.rsa.key)).toString('base64'),
      });
    },
    tolerance: 180,
  },
  pinwheel: { sign: ({ secret, t }) => json(JSON_BODY, { 'x-timestamp': String(t), 'x-pinwheel-signature': `v2=${mac('sha256', secret, `v2:${t}:${JSON_BODY}`, 'hex')}` }), tolerance: 180 },
  plaid: {
    secret: (k) => JSON.stringify(k.ec.pub.export({ format: 'jwk' })),
    sign: ({ t, keys }) => {
      const claims = { iat: t, request_body_sha256: createHash('sha256').update(JSON_BODY).digest('hex') };
      return json(JSON_BODY, { 'plaid-verification': jwt({ alg: 'ES256', kid: 'k1', typ: 'JWT' }, claims, (d) => cryptoSign('sha256', Buffer.from(d), { key: keys.ec.priv, dsaEncoding: 'ieee-p1363' })) });
    },
    tolerance: 300,
  },
  postmark: basic,
  pusher: { sign: ({ secret }) => json(JSON_BODY, { 'x-pusher-key': 'app-key', 'x-pusher-signature': mac('sha256', secret, JSON_BODY, 'hex') }) },
  sanity: { sign: ({ secret, t }) => json(JSON_BODY, { 'sanity-webhook-signature': `t=${t * 1000},v1=${mac('sha256', secret, `${t * 1000}.${JSON_BODY}`, 'base64url')}` }), tolerance: 180 },
  segment: plain('x-signature', 'sha1', 'hex'),
  sendgrid: {
    secret: (k) => k.ec.pub.export({ format: 'der', type: 'spki' }).toString('base64'),
    sign: ({ t, keys }) => json(JSON_BODY, {
      'x-twilio-email-event-webhook-timestamp': String(t),
      'x-twilio-email-event-webhook-signature': cryptoSign('sha256', Buffer.from(`${t}${JSON_BODY}`), keys.ec.priv).toString('base64'),
    }),
    tolerance: 180,
  },
  sentry: plain('sentry-hook-signature', 'sha256', 'hex'),
  shopify: plain('x-shopify-hmac-sha256', 'sha256', 'base64'),
  signalwire: twilioLike('x-signalwire-signature'),
  slack: { sign: ({ secret, t }) => json(JSON_BODY, { 'x-slack-request-timestamp': String(t), 'x-slack-signature': `v0=${mac('sha256', secret, `v0:${t}:${JSON_BODY}`, 'hex')}` }), tolerance: 300 },
  sns: { sign: (c) => json(snsMessage(c), {}), bare: json('{"Type":"Notification","Message":"ping"}', {}) },
  sonatype: plain('x-nexus-webhook-signature', 'sha1', 'hex'),
  square: { sign: ({ secret }) => json(JSON_BODY, { 'x-square-hmacsha256-signature': mac('sha256', secret, URL_SIGNED + JSON_BODY, 'base64') }) },
  stripe: stripeStyle('stripe-signature', 'v1', 300),
  svix,
  terraform: plain('x-tfe-notification-signature', 'sha512', 'hex'),
  tiktok: stripeStyle('tiktok-signature', 's', 180),
  treezor: {
    sign: ({ secret }) => {
      const escaped = '{"event":"ping","name":"\\u00e9\\/x"}';
      return json(`{"object_payload":{"event":"ping","name":"é/x"},"object_payload_signature":"${mac('sha256', secret, escaped, 'base64')}"}`, {});
    },
    bare: json('{"object_payload":{"event":"ping"}}', {}),
  },
  trello: { sign: ({ secret }) => json(JSON_BODY, { 'x-trello-webhook': mac('sha1', secret, JSON_BODY + URL_SIGNED, 'base64') }) },
  twilio: twilioLike('x-twilio-signature'),
  twitter: plain('x-twitter-webhooks-signature', 'sha256', 'base64', 'sha256='),
  typeform: plain('typeform-signature', 'sha256', 'base64', 'sha256='),
  vmware: basic,
  webex: plain('x-spark-signature', 'sha1', 'hex'),
  whatsapp: meta,
  worldline: { sign: ({ secret }) => json(JSON_BODY, { 'x-gcs-keyid': 'key-1', 'x-gcs-signature': mac('sha256', secret, JSON_BODY, 'base64') }) },
  xero: { ...plain('x-xero-signature', 'sha256', 'base64'), refusal: 401 },
  zendesk: { sign: ({ secret, t }) => json(JSON_BODY, { 'x-zendesk-webhook-signature-timestamp': iso(t), 'x-zendesk-webhook-signature': mac('sha256', secret, iso(t) + JSON_BODY, 'base64') }), tolerance: 180 },
  zoom: { sign: ({ secret, t }) => json(JSON_BODY, { 'x-zm-request-timestamp': String(t), 'x-zm-signature': `v0=${mac('sha256', secret, `v0:${t}:${JSON_BODY}`, 'hex')}` }), tolerance: 180 },
};

let keys: Keys;
let otherKeys: Keys;
const pki = new Pki();
const ecPair = () => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return { priv: privateKey, pub: publicKey };
};
const realFetch = certSource.fetch;

beforeAll(() => {
  keys = { rsa: pki.issue('rsa2048', { subject: [['CN', 'sns.amazonaws.com']] }), ec: ecPair() };
  otherKeys = { rsa: pki.issue('rsa2048', { subject: [['CN', 'attacker']] }), ec: ecPair() };
  // No internet here: the certificate URLs of SNS and PayPal answer with the test's certificate.
  certSource.fetch = async () => keys.rsa.cert;
});
afterAll(() => {
  certSource.fetch = realFetch;
});

const SECRET = 'whsec-shared-7f3a';
const tNow = Math.floor(NOW / 1000);

async function verify(provider: string, configured: string, req: FakeRequest) {
  const filter = webhookVerification({ enabled: true, provider, secret: configured }, { id: 'rt' }, fakeDeps(NOW));
  return run(filter, { method: 'POST', url: PATH, ...req });
}

describe.each(Object.entries(ROWS))('webhook provider %s', (provider, row) => {
  const configured = () => row.secret?.(keys) ?? SECRET;
  const refused = row.refusal ?? 403;

  it('accepts a correct signature and passes the request on', async () => {
    const r = await verify(provider, configured(), row.sign({ secret: configured(), t: tNow, keys }));
    expect(r.answer).toBeUndefined();
    expect(r.reached).toBe(true);
  });

  it('refuses a signature made with another secret', async () => {
    const wrong = row.secret ? row.secret(otherKeys, 'another-secret-of-32-bytes-long!') : 'not-the-secret';
    const r = await verify(provider, configured(), row.sign({ secret: wrong, t: tNow, keys: otherKeys }));
    expect(r.reached).toBe(false);
    expect(r.status).toBe(refused);
  });

  it('refuses a request without its signature', async () => {
    const signed = row.sign({ secret: configured(), t: tNow, keys });
    const bare = row.bare ?? { body: signed.body, headers: { 'content-type': signed.headers!['content-type'] } };
    const r = await verify(provider, configured(), bare);
    expect(r.reached).toBe(false);
    expect(r.status).toBe(refused);
  });

  if (!row.bodyUnsigned) {
    it('refuses an altered body', async () => {
      const signed = row.sign({ secret: configured(), t: tNow, keys });
      const body = String(signed.body);
      expect(body).toContain('ping');
      const r = await verify(provider, configured(), { ...signed, body: body.replace('ping', 'pong') });
      expect(r.reached).toBe(false);
      expect(r.status).toBe(refused);
    });
  }

  if (row.tolerance !== undefined) {
    it(`refuses a timestamp more than ${row.tolerance} s old, and accepts one just inside`, async () => {
      const old = await verify(provider, configured(), row.sign({ secret: configured(), t: tNow - row.tolerance! - 60, keys }));
      expect(old).toMatchObject({ reached: false, status: 403, code: 'ERR_SERVICE_783' });
      const inside = await verify(provider, configured(), row.sign({ secret: configured(), t: tNow - row.tolerance! + 20, keys }));
      expect(inside.reached).toBe(true);
    });
  }
});

describe('webhook verification beyond one signature', () => {
  it('covers every provider the catalog accepts', () => {
    expect(Object.keys(ROWS).sort()).toEqual([...WEBHOOK_PROVIDERS].sort());
  });

  it('matches the provider name case-insensitively', async () => {
    expect((await verify('GitHub', SECRET, ROWS.github.sign({ secret: SECRET, t: tNow, keys }))).reached).toBe(true);
  });

  it('a refusal is the edge error page with its code and why, and never echoes the secret', async () => {
    const r = await verify('stripe', SECRET, ROWS.stripe.sign({ secret: 'nope', t: tNow, keys }));
    expect(r.code).toBe('ERR_SERVICE_782');
    expect(String(r.answer!.body)).toContain('ERR_SERVICE_782');
    expect(String(r.answer!.body)).toContain('signature does not match');
    expect(String(r.answer!.body)).not.toContain(SECRET);
  });

  it('Meta apps: the legacy X-Hub-Signature (sha1) is accepted when the sha256 one is absent', async () => {
    const r = await verify('facebook_messenger', SECRET, json(JSON_BODY, { 'x-hub-signature': `sha1=${mac('sha1', SECRET, JSON_BODY, 'hex')}` }));
    expect(r.reached).toBe(true);
  });

  it('Meta, Dropbox and Nylas challenge GETs go to the application', async () => {
    for (const [provider, query] of [['facebook_graph_api', 'hub.mode=subscribe&hub.challenge=42&hub.verify_token=t'], ['dropbox', 'challenge=abc'], ['nylas', 'challenge=abc']]) {
      const r = await verify(provider, SECRET, { method: 'GET', url: `/hooks?${query}` });
      expect(r.reached, provider).toBe(true);
    }
    expect((await verify('dropbox', SECRET, { method: 'GET', url: '/hooks' })).status).toBe(403);
  });

  it("answers Twitter's CRC at the edge", async () => {
    const r = await verify('twitter', SECRET, { method: 'GET', url: '/hooks?crc_token=abc123' });
    expect(r).toMatchObject({ reached: false, status: 200 });
    expect(JSON.parse(String(r.answer!.body))).toEqual({ response_token: `sha256=${mac('sha256', SECRET, 'abc123', 'base64')}` });
  });

  it("answers Zoom's URL validation once it is signed, and refuses an unsigned one", async () => {
    const body = JSON.stringify({ event: 'endpoint.url_validation', payload: { plainToken: 'pt-1' } });
    const sig = `v0=${mac('sha256', SECRET, `v0:${tNow}:${body}`, 'hex')}`;
    const r = await verify('zoom', SECRET, json(body, { 'x-zm-request-timestamp': String(tNow), 'x-zm-signature': sig }));
    expect(JSON.parse(String(r.answer!.body))).toEqual({ plainToken: 'pt-1', encryptedToken: mac('sha256', SECRET, 'pt-1', 'hex') });
    expect((await verify('zoom', SECRET, json(body, {}))).status).toBe(403);
  });

  it("echoes Worldline's endpoint verification and Okta's challenge (Okta only with its secret)", async () => {
    const w = await verify('worldline', SECRET, { method: 'GET', headers: { 'x-gcs-webhooks-endpoint-verification': 'w-42' } });
    expect(w).toMatchObject({ status: 200, answer: { body: 'w-42' } });
    const o = await verify('okta', SECRET, { method: 'GET', headers: { 'x-okta-verification-challenge': 'ch-1', authorization: SECRET } });
    expect(JSON.parse(String(o.answer!.body))).toEqual({ verification: 'ch-1' });
    expect((await verify('okta', SECRET, { method: 'GET', headers: { 'x-okta-verification-challenge': 'ch-1' } })).status).toBe(403);
  });

  it('SNS: a certificate URL off the AWS hosts is refused without a download', async () => {
    let fetched = 0;
    const saved = certSource.fetch;
    certSource.fetch = async () => {
      fetched++;
      return keys.rsa.cert;
    };
    try {
      const body = snsMessage({ secret: '', t: tNow, keys }).replace('sns.us-east-1.amazonaws.com', 'sns.us-east-1.amazonaws.com.evil.example');
      const r = await verify('sns', '', json(body, {}));
      expect(r.status).toBe(403);
      expect(String(r.answer!.body)).toContain('not one of sns');
      expect(fetched).toBe(0);
    } finally {
      certSource.fetch = saved;
    }
  });

  it('SNS: the certificate host must be sns.<region>.amazonaws.com: an S3 bucket (sns.s3.amazonaws.com) or another label is refused without a download', async () => {
    let fetched = 0;
    const saved = certSource.fetch;
    certSource.fetch = async () => {
      fetched++;
      return keys.rsa.cert;
    };
    try {
      for (const host of ['sns.s3.amazonaws.com', 'sns.s3-external-1.amazonaws.com', 'sns.evil.amazonaws.com', 'sns.us-east-1.s3.amazonaws.com', 'sns.x.amazonaws.com']) {
        const r = await verify('sns', '', json(snsMessage({ secret: '', t: tNow, keys }).replace('sns.us-east-1.amazonaws.com', host), {}));
        expect(r.status, host).toBe(403);
        expect(String(r.answer!.body), host).toContain('not one of sns');
      }
      expect(fetched).toBe(0);
      for (const host of ['sns.us-east-1.amazonaws.com', 'sns.eu-central-2.amazonaws.com', 'sns.us-gov-west-1.amazonaws.com', 'sns.cn-north-1.amazonaws.com.cn', 'sns.ap-southeast-1.amazonaws.com']) {
        expect(certUrlProblem('sns', `https://${host}/SimpleNotificationService-abc.pem`), host).toBeUndefined();
      }
    } finally {
      certSource.fetch = saved;
    }
  });

  it('SNS: a SubscriptionConfirmation signed with SignatureVersion 1 (SHA1withRSA) over its own field list', async () => {
    const m: Record<string, string> = {
      Type: 'SubscriptionConfirmation', MessageId: 'm-2', Token: 'tok', TopicArn: 'arn:aws:sns:us-east-1:1:t', Message: 'ping to confirm',
      SubscribeURL: 'https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription', Timestamp: iso(tNow), SignatureVersion: '1',
      SigningCertURL: 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem',
    };
    const text = ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'].map((k) => `${k}\n${m[k]}\n`).join('');
    m.Signature = cryptoSign('sha1', Buffer.from(text), createPrivateKey(keys.rsa.key)).toString('base64');
    expect((await verify('sns', '', json(JSON.stringify(m), {}))).reached).toBe(true);
    expect((await verify('sns', '', json(JSON.stringify({ ...m, Token: 'other' }), {}))).status).toBe(403);
  });

  it('SNS: the allowed certificate host is a setting (for tests on a machine without the internet)', async () => {
    const saved = process.env.EDGEFORM_WEBHOOK_SNS_CERT_HOST;
    process.env.EDGEFORM_WEBHOOK_SNS_CERT_HOST = '^localhost$';
    try {
      // SigningCertURL is not among the signed fields: only the host check decides which URL may name the certificate.
      const local = snsMessage({ secret: '', t: tNow, keys }).replace('sns.us-east-1.amazonaws.com', 'localhost:9443');
      expect((await verify('sns', '', json(local, {}))).reached).toBe(true);
      expect((await verify('sns', '', json(snsMessage({ secret: '', t: tNow, keys }), {}))).status).toBe(403);
    } finally {
      if (saved === undefined) delete process.env.EDGEFORM_WEBHOOK_SNS_CERT_HOST;
      else process.env.EDGEFORM_WEBHOOK_SNS_CERT_HOST = saved;
    }
  });

  it('reads the body bounded at 10 MiB (the exchange answers 413 past it) and never reaches the backend', async () => {
    // Signed (wrongly): a request without the provider's signature header is refused before its body is read.
    await expect(verify('github', SECRET, json('x'.repeat(10 * 1024 * 1024 + 1), { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` }))).rejects.toThrow(/over limit/);
  });

  it('refuses a request without the provider\'s signature header before reading its body', async () => {
    const r = await verify('github', SECRET, json('x'.repeat(10 * 1024 * 1024 + 1), {}));
    expect(r.status).toBe(403);
    expect(r.reached).toBe(false);
  });

  it('an unknown provider fails closed', async () => {
    expect((await verify('nosuch', SECRET, json(JSON_BODY, {}))).status).toBe(403);
  });
});
