// Every webhook provider the catalog accepts, each one row: where its signature travels, what
// it signs, with which hash and encoding, and the timestamp tolerance it documents (else
// DEFAULT_TOLERANCE, as the service does). Shared shapes are in hmac.ts; the few schemes that
// are not an HMAC over headers and body have their own small files.
import type { WEBHOOK_PROVIDERS } from '../../../../provider/catalog/route-modules.js';
import type { ErrorCode } from '../../../http/errors.js';
import { paypal, sns } from './certs.js';
import { braintree, linear, mailgun, treezor, twilioLike } from './body-fields.js';
import { after, before, oktaVerification, passGetWith, twitterCrc, worldlineVerification, zoomUrlValidation } from './handshakes.js';
import { cat, DEFAULT_TOLERANCE, firstPresent, hmac, kvHeader, kvValue, sigHeader, urlAndSortedForm, type Extract } from './hmac.js';
import { basicAuth, tokenHeader } from './shared-secret.js';
import { mondayJwt, plaidJwt, sendgridEcdsa } from './signed-tokens.js';
import type { Scheme, WebhookRequest } from './types.js';

export type WebhookProvider = (typeof WEBHOOK_PROVIDERS)[number];

const body = (r: WebhookRequest) => r.body;
const tsDotBody = (r: WebhookRequest, ts?: string) => cat(`${ts}.`, r.body);
const v0 = (r: WebhookRequest, ts?: string) => cat(`v0:${ts}:`, r.body);

/** Body HMACs in one header: the most common scheme. */
const bodyHmac = (header: string, alg: 'sha1' | 'sha256' | 'sha512', enc: 'hex' | 'base64', prefix = ''): Scheme =>
  hmac({ extract: sigHeader(header, prefix), alg, enc, message: body });

/** Stripe's shape (`t=<s>,v1=<hex>` over `t.body`), which several providers copy. */
const stripeLike = (header: string, sigKey = 'v1', tolerance = DEFAULT_TOLERANCE, enc: 'hex' | 'base64url' = 'hex', unit: 's' | 'ms' = 's'): Scheme =>
  hmac({ extract: kvHeader(header, 't', sigKey), alg: 'sha256', enc, message: tsDotBody, time: { unit, tolerance } });

/** Meta's apps (Graph API, Messenger, Instagram, WhatsApp): sha256= of the body, or the legacy sha1=; hub.challenge GETs go to the app. */
const meta: Scheme = before(
  firstPresent(
    { when: 'x-hub-signature-256', scheme: bodyHmac('x-hub-signature-256', 'sha256', 'hex', 'sha256=') },
    { when: 'x-hub-signature', scheme: bodyHmac('x-hub-signature', 'sha1', 'hex', 'sha1=') },
  ),
  passGetWith('hub.challenge'),
);

/** Svix and the Standard Webhooks it defined (Clerk sends through Svix): `v1,<base64>` over `id.timestamp.body`, key = the whsec_ secret's bytes. */
const svixExtract = (prefix: 'svix' | 'webhook'): Extract => (r) => {
  const [id, ts, sig] = ['id', 'timestamp', 'signature'].map((n) => r.headers[`${prefix}-${n}`]);
  if (!id || !ts || !sig) return `the ${prefix}-id, ${prefix}-timestamp and ${prefix}-signature headers are required`;
  return { ts, sigs: sig.split(' ').filter((s) => s.startsWith('v1,')).map((s) => s.slice(3)) };
};
const svixScheme = (prefix: 'svix' | 'webhook') =>
  hmac({
    extract: svixExtract(prefix),
    alg: 'sha256',
    enc: 'base64',
    key: (secret) => Buffer.from(secret.replace(/^whsec_/, ''), 'base64'),
    message: (r, ts) => cat(`${r.headers[`${prefix}-id`]}.${ts}.`, r.body),
    time: { unit: 's', tolerance: 300 },
  });
const svix = firstPresent({ when: 'svix-signature', scheme: svixScheme('svix') }, { when: 'webhook-signature', scheme: svixScheme('webhook') });

/** HubSpot decodes these escapes in the URI it signs (v3). */
const hubspotUri = (url: string) =>
  url.replace(/%(3A|2F|3F|40|21|24|27|28|29|2A|2C|3B)/gi, (m) => decodeURIComponent(m));
const hubspot = firstPresent(
  {
    when: 'x-hubspot-signature-v3',
    scheme: hmac({
      extract: sigHeader('x-hubspot-signature-v3', '', 'x-hubspot-request-timestamp'),
      alg: 'sha256',
      enc: 'base64',
      message: (r, ts) => cat(r.method, hubspotUri(r.url), r.body, ts),
      time: { unit: 'ms', tolerance: 300 },
    }),
  },
  {
    // v1: SHA-256 of secret + body; v2: of secret + method + URI + body (a plain hash, no HMAC).
    when: 'x-hubspot-signature',
    scheme: hmac({
      extract: sigHeader('x-hubspot-signature'),
      alg: 'sha256',
      enc: 'hex',
      mode: 'hash',
      message: (r) => (r.headers['x-hubspot-signature-version'] === 'v2' ? cat(r.method, r.url, r.body) : r.body),
    }),
  },
);

/** Contentful: `method\npath\nsigned headers\nbody`, the signed headers named in x-contentful-signed-headers; 30 s TTL (its toolkit's default). */
const contentful = hmac({
  extract: (r) => {
    const sig = r.headers['x-contentful-signature'];
    const signed = r.headers['x-contentful-signed-headers'];
    const ts = r.headers['x-contentful-timestamp'];
    if (!sig || !signed || !ts) return 'the x-contentful-signature, -signed-headers and -timestamp headers are required';
    if (!signed.toLowerCase().split(',').map((s) => s.trim()).includes('x-contentful-timestamp')) return 'x-contentful-timestamp is not among the signed headers';
    return { sigs: [sig], ts };
  },
  alg: 'sha256',
  enc: 'hex',
  message: (r) => {
    const u = new URL(r.url);
    const names = r.headers['x-contentful-signed-headers']!.split(',').map((s) => s.trim().toLowerCase());
    return cat(`${r.method}\n${u.pathname}${u.search}\n${names.map((n) => `${n}:${r.headers[n] ?? ''}`).join(';')}\n`, r.body);
  },
  time: { unit: 'ms', tolerance: 30 },
});

/** Hygraph (GraphCMS): gcms-signature `sign=<base64>, env=<name>, t=<ms>` over a JSON of body, environment and time. */
const hygraph = hmac({
  extract: (r) => {
    const v = r.headers['gcms-signature'];
    const sign = kvValue(v, 'sign');
    const t = kvValue(v, 't');
    if (!v || !sign || !t || kvValue(v, 'env') === undefined) return 'the gcms-signature header (sign=, env=, t=) is missing or incomplete';
    return { sigs: [sign], ts: t };
  },
  alg: 'sha256',
  enc: 'base64',
  message: (r, ts) => JSON.stringify({ Body: r.body.toString('utf8'), EnvironmentName: kvValue(r.headers['gcms-signature'], 'env'), TimeStamp: Number(ts) }),
  time: { unit: 'ms', tolerance: DEFAULT_TOLERANCE },
});

/** Box: either key signs body + delivery timestamp; Box rejects deliveries over 10 minutes old. */
const boxHeader = (h: string) =>
  hmac({ extract: sigHeader(h, '', 'box-delivery-timestamp'), alg: 'sha256', enc: 'base64', message: (r, ts) => cat(r.body, ts), time: { unit: 'iso', tolerance: 600 } });
const box: Scheme = {
  async verify(r, secret) {
    const primary = await boxHeader('box-signature-primary').verify(r, secret);
    if (primary.ok || !r.headers['box-signature-secondary']) return primary;
    return boxHeader('box-signature-secondary').verify(r, secret);
  },
};

const buildkite = firstPresent(
  { when: 'x-buildkite-signature', scheme: hmac({ extract: kvHeader('x-buildkite-signature', 'timestamp', 'signature'), alg: 'sha256', enc: 'hex', message: tsDotBody, time: { unit: 's', tolerance: DEFAULT_TOLERANCE } }) },
  { when: 'x-buildkite-token', scheme: tokenHeader('x-buildkite-token') },
);

const square = firstPresent(
  { when: 'x-square-hmacsha256-signature', scheme: hmac({ extract: sigHeader('x-square-hmacsha256-signature'), alg: 'sha256', enc: 'base64', message: (r) => cat(r.url, r.body) }) },
  { when: 'x-square-signature', scheme: hmac({ extract: sigHeader('x-square-signature'), alg: 'sha1', enc: 'base64', message: (r) => cat(r.url, r.body) }) },
);

const mandrill = hmac({ extract: sigHeader('x-mandrill-signature'), alg: 'sha1', enc: 'base64', message: urlAndSortedForm });

const docusign = hmac({
  extract: (r) => {
    const sigs = Array.from({ length: 10 }, (_, i) => r.headers[`x-docusign-signature-${i + 1}`]).filter((s): s is string => !!s);
    return sigs.length ? { sigs } : 'the x-docusign-signature-1 header is missing';
  },
  alg: 'sha256',
  enc: 'base64',
});

export const PROVIDERS: Record<WebhookProvider, Scheme> = {
  aftership: bodyHmac('aftership-hmac-sha256', 'sha256', 'base64'),
  airship: hmac({ extract: sigHeader('x-ua-signature', '', 'x-ua-timestamp'), alg: 'sha256', enc: 'hex', message: (r, ts) => cat(`${ts}:`, r.body), time: { unit: 's', tolerance: DEFAULT_TOLERANCE } }),
  autodesk_forge: bodyHmac('x-adsk-signature', 'sha1', 'hex', 'sha1hash='),
  bitbucket: bodyHmac('x-hub-signature', 'sha256', 'hex', 'sha256='),
  box,
  braintree,
  buildkite,
  calendly: stripeLike('calendly-webhook-signature', 'v1', 180),
  castle: bodyHmac('x-castle-signature', 'sha256', 'base64'),
  chargify: bodyHmac('x-chargify-webhook-signature-hmac-sha-256', 'sha256', 'hex'),
  circleci: hmac({ extract: kvHeader('circleci-signature', undefined, 'v1'), alg: 'sha256', enc: 'hex' }),
  clearbit: bodyHmac('x-request-signature', 'sha1', 'hex', 'sha1='),
  clerk: svix,
  coinbase: bodyHmac('x-cc-webhook-signature', 'sha256', 'hex'),
  contentful,
  docusign,
  dropbox: before(bodyHmac('x-dropbox-signature', 'sha256', 'hex'), passGetWith('challenge')),
  facebook_graph_api: meta,
  facebook_messenger: meta,
  frameio: hmac({ extract: sigHeader('x-frameio-signature', 'v0=', 'x-frameio-request-timestamp'), alg: 'sha256', enc: 'hex', message: v0, time: { unit: 's', tolerance: 300 } }),
  github: bodyHmac('x-hub-signature-256', 'sha256', 'hex', 'sha256='),
  gitlab: tokenHeader('x-gitlab-token'),
  go1: stripeLike('go1-signature'),
  graphcms: hygraph,
  heroku: bodyHmac('heroku-webhook-hmac-sha256', 'sha256', 'base64'),
  hostedhooks: stripeLike('hostedhooks-signature', 's'),
  hubspot,
  hygraph,
  instagram_graph_api: meta,
  intercom: bodyHmac('x-hub-signature', 'sha1', 'hex', 'sha1='),
  launchdarkly: bodyHmac('x-ld-signature', 'sha256', 'hex'),
  linear,
  mailchimp: mandrill,
  mailgun,
  mandrill,
  microsoft_teams: hmac({ extract: sigHeader('authorization', 'HMAC '), alg: 'sha256', enc: 'base64', key: (s) => Buffer.from(s, 'base64') }),
  modern_treasury: bodyHmac('x-signature', 'sha256', 'hex'),
  monday: mondayJwt,
  mongodb: bodyHmac('x-hook-signature', 'sha256', 'hex', 'sha256='),
  mux: stripeLike('mux-signature', 'v1', 300),
  nylas: before(bodyHmac('x-nylas-signature', 'sha256', 'hex'), passGetWith('challenge')),
  okta: after(tokenHeader('authorization'), oktaVerification),
  opsgenie: basicAuth,
  orbit: bodyHmac('x-orbit-signature', 'sha256', 'hex'),
  pagerduty: hmac({ extract: sigHeader('x-pagerduty-signature', 'v1='), alg: 'sha256', enc: 'hex' }),
  paypal,
  pinwheel: hmac({ extract: sigHeader('x-pinwheel-signature', 'v2=', 'x-timestamp'), alg: 'sha256', enc: 'hex', message: (r, ts) => cat(`v2:${ts}:`, r.body), time: { unit: 's', tolerance: DEFAULT_TOLERANCE } }),
  plaid: plaidJwt,
  postmark: basicAuth,
  pusher: bodyHmac('x-pusher-signature', 'sha256', 'hex'),
  sanity: stripeLike('sanity-webhook-signature', 'v1', DEFAULT_TOLERANCE, 'base64url', 'ms'),
  segment: bodyHmac('x-signature', 'sha1', 'hex'),
  sendgrid: sendgridEcdsa,
  sentry: bodyHmac('sentry-hook-signature', 'sha256', 'hex'),
  shopify: bodyHmac('x-shopify-hmac-sha256', 'sha256', 'base64'),
  signalwire: twilioLike('x-signalwire-signature', 'x-twilio-signature'),
  slack: hmac({ extract: sigHeader('x-slack-signature', 'v0=', 'x-slack-request-timestamp'), alg: 'sha256', enc: 'hex', message: v0, time: { unit: 's', tolerance: 300 } }),
  sns,
  sonatype: bodyHmac('x-nexus-webhook-signature', 'sha1', 'hex'),
  square,
  stripe: stripeLike('stripe-signature', 'v1', 300),
  svix,
  terraform: bodyHmac('x-tfe-notification-signature', 'sha512', 'hex'),
  tiktok: stripeLike('tiktok-signature', 's'),
  treezor,
  trello: hmac({ extract: sigHeader('x-trello-webhook'), alg: 'sha1', enc: 'base64', message: (r) => cat(r.body, r.url) }),
  twilio: twilioLike('x-twilio-signature'),
  twitter: before(bodyHmac('x-twitter-webhooks-signature', 'sha256', 'base64', 'sha256='), twitterCrc),
  typeform: bodyHmac('typeform-signature', 'sha256', 'base64', 'sha256='),
  vmware: basicAuth,
  webex: bodyHmac('x-spark-signature', 'sha1', 'hex'),
  whatsapp: meta,
  worldline: before(bodyHmac('x-gcs-signature', 'sha256', 'base64'), worldlineVerification),
  xero: bodyHmac('x-xero-signature', 'sha256', 'base64'),
  zendesk: hmac({ extract: sigHeader('x-zendesk-webhook-signature', '', 'x-zendesk-webhook-signature-timestamp'), alg: 'sha256', enc: 'base64', message: (r, ts) => cat(ts, r.body), time: { unit: 'iso', tolerance: DEFAULT_TOLERANCE } }),
  zoom: after(hmac({ extract: sigHeader('x-zm-signature', 'v0=', 'x-zm-request-timestamp'), alg: 'sha256', enc: 'hex', message: v0, time: { unit: 's', tolerance: DEFAULT_TOLERANCE } }), zoomUrlValidation),
};

/** The refusal code per provider where the provider documents a status: Xero's intent to receive expects 401. */
export const REFUSAL: Partial<Record<WebhookProvider, ErrorCode>> = { xero: 'ERR_SERVICE_786' };
