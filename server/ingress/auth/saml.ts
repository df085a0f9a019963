// SAML 2.0 at the edge with @node-saml/node-saml. SP-initiated: an AuthnRequest signed with
// the route's request-signing key (HTTP-Redirect binding), its ID self-verifying (an HMAC of
// the route and time) so any instance can check InResponseTo. The IdP POSTs its response to
// the route's ACS (the API server relays it to the edge host, saml-endpoints.ts); the edge
// verifies it (signature against idp_metadata's certificates, issuer, audience = entity_id,
// time window, nameid_format, authorized_groups, never seen before), then sends the browser
// with a GET to the callback carrying a sealed one-minute ticket: SameSite=Lax cookies are not
// sent with a cross-site POST, so only that GET can check the sign-in against this browser's
// flow cookie (InResponseTo must be the request this browser started), or, with no
// InResponseTo, accept an IdP-initiated login when allow_idp_initiated.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { SAML, SamlStatusError, ValidateInResponseTo, type CacheProvider, type Profile, type SamlConfig } from '@node-saml/node-saml';
import type { ErrorCode } from '../../http/errors.js';
import type { Exchange, FullDoc, IngressDeps } from '../types.js';
import { CALLBACK_PATH, STATE_ROUTE_SEPARATOR } from './callback-route.js';
import { CookieSealer } from './cookies.js';
import { nameIdFormatShort, nameIdFormatUrn, parseIdpMetadata, samlUrls, type SamlUrls } from './saml-metadata.js';
import { samlXmlOverLimits } from './saml-bounds.js';
import { MAX_REMEMBER_MS, usedAssertions } from './saml-replay.js';
import { SAML_VERIFY, verifySamlResponse } from './saml-verify.js';
import type { Identity } from './session.js';
import { SignInRefused, type SignInProvider } from './sign-in-filter.js';

/** The route's request-signing identity (server/resources/edges.ts makes it; the table opens it). */
export interface SamlSigning { certificate_pem: string; private_key_pem: string }

/** The largest POSTed SAMLResponse form read. */
const FORM_LIMIT = 512 * 1024;
/** How long the ticket from the ACS to the callback GET is good for. */
const TICKET_MS = 60_000;
const CLOCK_SKEW_MS = 60_000;
/** How long an AuthnRequest may wait for its response (as the flow cookie). */
const REQUEST_MS = 10 * 60 * 1000;

/**
 * Attribute names whose values are the user's groups for authorized_groups (docs/ingress.md):
 * the common spellings of Shibboleth, Okta, Keycloak, Entra ID and AD FS.
 */
export const GROUP_ATTRIBUTES = [
  'groups', 'group', 'memberOf', 'isMemberOf', 'urn:oid:1.3.6.1.4.1.5923.1.5.1.1',
  'http://schemas.microsoft.com/ws/2008/06/identity/claims/groups', 'http://schemas.xmlsoap.org/claims/Group',
];
const EMAIL_ATTRIBUTES = ['email', 'mail', 'emailAddress', 'urn:oid:0.9.2342.19200300.100.1.3', 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress'];
const NAME_ATTRIBUTES = ['displayName', 'name', 'cn', 'urn:oid:2.16.840.1.113730.3.1.241', 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name'];

/** An XML document whose root element is a (samlp:)Response, after an optional declaration and comments. */
const SAML_RESPONSE_ROOT = /^(?:<\?xml[^>]*\?>\s*)?(?:<!--(?:[^-]|-(?!->))*-->\s*)*<(?:[A-Za-z_][\w.-]*:)?Response[\s>/]/;

interface Ticket { s: string; e?: string; n?: string; irt?: string; relay?: string; id: string; at: number }

const refused = (code: ErrorCode, message: string) => new SignInRefused(code, message);
const values = (v: unknown): string[] => (Array.isArray(v) ? v : v === undefined || v === null ? [] : [v]).filter((x): x is string => typeof x === 'string');
const firstOf = (p: Profile, names: string[]) => names.flatMap((n) => values(p[n]))[0];

/** Self-verifying AuthnRequest IDs: `_<time hex><mac>`, valid REQUEST_MS for this route only. */
function requestIds(routeId: string, key: Buffer, now: () => number) {
  const mac = (t: string) => createHmac('sha256', key).update(`${routeId}.${t}`).digest('hex').slice(0, 32);
  return {
    make: () => {
      const t = now().toString(16);
      return `_${t}${mac(t)}`;
    },
    /** When the ID was made (ms), or undefined when this route did not make it. */
    check(id: string): number | undefined {
      const m = /^_([0-9a-f]{8,12})([0-9a-f]{32})$/.exec(id);
      if (!m || !timingSafeEqual(Buffer.from(mac(m[1])), Buffer.from(m[2]))) return undefined;
      return parseInt(m[1], 16);
    },
  };
}

/** Which refusal a node-saml error is. */
function classify(e: unknown): SignInRefused {
  if (e instanceof SignInRefused) return e;
  if (e instanceof SamlStatusError) return refused('ERR_SERVICE_814', `The identity provider refused the sign-in (${e.message.replace(/^SAML provider returned /, '')}).`);
  const m = String((e as Error)?.message ?? e);
  if (/audience|AudienceRestriction/i.test(m)) return refused('ERR_SERVICE_808', 'The SAML assertion is for another service provider (its audience is not this route\'s entity_id); the sign-in was refused.');
  if (/expired|not yet valid|subject confirmation/i.test(m)) return refused('ERR_SERVICE_809', 'The SAML assertion is outside its validity window (expired, not yet valid, or too old); sign in again.');
  if (/InResponseTo/i.test(m)) return refused('ERR_SERVICE_801', 'The SAML response answers a sign-in this route did not start, or one that took over 10 minutes; open the page you wanted again.');
  if (/signature|signed/i.test(m)) return refused('ERR_SERVICE_807', 'The SAML response is not signed by the route\'s identity provider (no signature, an altered document, or another key); the sign-in was refused.');
  return refused('ERR_SERVICE_806', 'The SAML response could not be read (not base64, not XML, or no assertion); the sign-in was refused.');
}

/** Where an IdP-initiated RelayState (a target URL) sends the browser: its path on this host, else `/`. */
function relayBack(relay: string | undefined, host: string): string {
  if (!relay) return '/';
  if (relay.startsWith('/') && !relay.startsWith('//') && !relay.startsWith('/\\')) return relay;
  try {
    const u = new URL(relay);
    return u.protocol === 'https:' && u.hostname.toLowerCase() === host ? `${u.pathname}${u.search}` : '/';
  } catch {
    return '/';
  }
}

export interface SamlProvider extends SignInProvider {
  readonly urls: SamlUrls;
  readonly signing: SamlSigning;
  /** Reads and verifies a POSTed SAMLResponse, then answers with the redirect to the ticket GET. */
  acs(ex: Exchange): Promise<void>;
}

export function samlProvider(config: FullDoc[string], route: FullDoc, deps: IngressDeps): SamlProvider {
  const signing = config.request_signing as SamlSigning | undefined;
  if (!signing?.private_key_pem || !deps.publicUrl || !deps.box) throw new Error('the SAML route has no request-signing key or the ingress has no public base URL');
  const urls = samlUrls(deps.publicUrl, route.id);
  const idKey = deps.box.derive('ingress saml request ids');
  const ids = requestIds(route.id, idKey, deps.now);
  const tickets = new CookieSealer(deps.box.derive('ingress saml tickets'));
  const ticketBind = `saml-ticket:${route.id}`;
  const format = nameIdFormatUrn(config.nameid_format);
  const wanted: string[] = (config.authorized_groups as string[] | undefined) ?? [];
  // Checks InResponseTo statelessly: an ID is valid when this route made it within REQUEST_MS.
  const cacheProvider: CacheProvider = {
    saveAsync: async (_k, value) => ({ value, createdAt: deps.now() }),
    getAsync: async (id) => {
      const t = ids.check(id);
      return t === undefined ? null : new Date(t).toISOString();
    },
    removeAsync: async (k) => k,
  };
  const idpOf = () => {
    try {
      return parseIdpMetadata(String(config.idp_metadata));
    } catch (e) {
      throw refused('ERR_SERVICE_817', `The route's idp_metadata cannot be used to sign in (${(e as Error).message}); fix idp_metadata.`);
    }
  };
  const options = (generateUniqueId: () => string): SamlConfig => {
    const idp = idpOf();
    if (!idp.certificates.length) throw refused('ERR_SERVICE_817', 'The route\'s idp_metadata has no signing certificate, so no assertion can be verified; add the IdP\'s KeyDescriptor to idp_metadata.');
    return {
      entryPoint: idp.ssoUrl, idpCert: idp.certificates, idpIssuer: idp.entityId || undefined,
      issuer: urls.entity_id, audience: urls.entity_id, callbackUrl: urls.assertion_consumer_service_url,
      logoutUrl: idp.sloUrl ?? idp.ssoUrl, logoutCallbackUrl: urls.single_logout_url,
      privateKey: signing.private_key_pem, publicCert: signing.certificate_pem, signatureAlgorithm: 'sha256',
      identifierFormat: format, forceAuthn: config.force_authn === true, disableRequestedAuthnContext: true,
      wantAssertionsSigned: true, wantAuthnResponseSigned: false,
      validateInResponseTo: ValidateInResponseTo.ifPresent, requestIdExpirationPeriodMs: REQUEST_MS, cacheProvider,
      acceptedClockSkewMs: CLOCK_SKEW_MS, maxAssertionAgeMs: MAX_REMEMBER_MS, generateUniqueId,
    };
  };

  /** The identity in a verified profile, or the refusal of what the route does not accept. */
  function accept(p: Profile, idpEntityId: string): { identity: Identity; irt?: string; id: string; expires: number } {
    if (idpEntityId && p.issuer !== idpEntityId) throw refused('ERR_SERVICE_807', `The SAML assertion was issued by ${JSON.stringify(String(p.issuer ?? '').slice(0, 200))}, not the route's identity provider; the sign-in was refused.`);
    if (!p.nameID) throw refused('ERR_SERVICE_813', 'The SAML assertion names no subject (NameID); the sign-in was refused.');
    const got = nameIdFormatShort(p.nameIDFormat);
    if (nameIdFormatShort(format) !== 'unspecified' && got !== nameIdFormatShort(format)) {
      throw refused('ERR_SERVICE_813', `The SAML assertion's NameID format is ${got}, and the route expects ${nameIdFormatShort(format)} (nameid_format); the sign-in was refused.`);
    }
    const irt = typeof p.inResponseTo === 'string' && p.inResponseTo ? p.inResponseTo : undefined;
    if (!irt && config.allow_idp_initiated !== true) throw refused('ERR_SERVICE_811', 'The identity provider started this sign-in itself, which the route does not allow (allow_idp_initiated is false); open the page you wanted to sign in from it.');
    if (wanted.length) {
      const groups = GROUP_ATTRIBUTES.flatMap((n) => values(p[n]));
      if (!groups.some((g) => wanted.includes(g))) throw refused('ERR_SERVICE_812', 'The signed-in user is in none of the route\'s authorized_groups (by the assertion\'s group attribute); the sign-in was refused.');
    }
    const assertion = (p.getAssertion?.() as { Assertion?: { $?: Record<string, string>; Conditions?: { $?: Record<string, string> }[] } } | undefined)?.Assertion;
    const id = assertion?.$?.ID;
    if (!id) throw refused('ERR_SERVICE_806', 'The SAML assertion has no ID; the sign-in was refused.');
    const issued = Date.parse(assertion.$?.IssueInstant ?? '');
    const notAfter = Date.parse(assertion.Conditions?.[0]?.$?.NotOnOrAfter ?? '');
    const expires = Math.min(Number.isFinite(notAfter) ? notAfter : Infinity, Number.isFinite(issued) ? issued + MAX_REMEMBER_MS : Infinity, deps.now() + MAX_REMEMBER_MS) + CLOCK_SKEW_MS;
    const email = firstOf(p, EMAIL_ATTRIBUTES) ?? (got === 'emailAddress' ? p.nameID : undefined);
    return { identity: { subject: p.nameID, email, name: firstOf(p, NAME_ATTRIBUTES) }, irt, id: `${p.issuer}|${id}`, expires };
  }

  function remember(key: string, until: number) {
    const r = usedAssertions.use(`${route.id}|${key}`, until, deps.now());
    if (r === 'replayed') throw refused('ERR_SERVICE_810', 'This SAML assertion was already used to sign in (a replayed response); open the page you wanted again.');
    if (r === 'full') throw refused('ERR_SERVICE_815', 'The edge is remembering too many recent SAML sign-ins to accept another now; try again in a few minutes.');
  }

  async function verify(form: URLSearchParams): Promise<Ticket> {
    const response = form.get('SAMLResponse') ?? '';
    if (!response || !/^[A-Za-z0-9+/=\s]+$/.test(response)) throw refused('ERR_SERVICE_806', 'The POST carries no base64 SAMLResponse; the sign-in was refused.');
    const xml = Buffer.from(response, 'base64').toString('utf8').trim();
    if (!SAML_RESPONSE_ROOT.test(xml.slice(0, 4096)) || /<!(DOCTYPE|ENTITY)/i.test(xml)) throw refused('ERR_SERVICE_806', 'The SAMLResponse is not a SAML Response document (or declares a DOCTYPE); the sign-in was refused.');
    const over = samlXmlOverLimits(xml);
    if (over) throw refused('ERR_SERVICE_818', `The SAMLResponse ${over} (the edge's bounds on SAML documents, docs/ingress.md); the sign-in was refused.`);
    const idp = idpOf();
    // Parsed and its signatures checked on a worker thread, under a deadline (saml-verify.ts).
    const { cacheProvider: _c, generateUniqueId: _g, ...plain } = options(ids.make);
    const r = await verifySamlResponse({ options: plain, response, routeId: route.id, idKey: idKey.toString('hex') });
    if ('busy' in r || 'timeout' in r) throw refused('ERR_SERVICE_819', `The edge could not verify the SAMLResponse ${'busy' in r ? `now (over ${SAML_VERIFY.maxQueued} are waiting)` : `within ${SAML_VERIFY.deadlineMs / 1000} s`}; the sign-in was refused. Try again.`);
    if ('error' in r) throw r.error.status ? refused('ERR_SERVICE_814', `The identity provider refused the sign-in (${r.error.message.replace(/^SAML provider returned /, '')}).`) : classify(new Error(r.error.message));
    if (!r.profile) throw refused('ERR_SERVICE_806', 'The SAML response carries no assertion; the sign-in was refused.');
    const a = r.assertion;
    const profile = { ...r.profile, getAssertion: () => (a ? { Assertion: { $: { ID: a.ID, IssueInstant: a.IssueInstant }, Conditions: [{ $: { NotOnOrAfter: a.NotOnOrAfter } }] } } : {}) } as unknown as Profile;
    const ok = accept(profile, idp.entityId);
    remember(ok.id, ok.expires);
    const relay = form.get('RelayState') ?? undefined;
    return { s: ok.identity.subject, e: ok.identity.email, n: ok.identity.name, irt: ok.irt, relay: relay?.slice(0, 2048), id: randomBytes(12).toString('base64url'), at: deps.now() };
  }

  async function acs(ex: Exchange) {
    const form = new URLSearchParams((await ex.readBody(FORM_LIMIT)).toString('latin1'));
    const ticket = await verify(form);
    const location = `${CALLBACK_PATH}?state=${encodeURIComponent(`${route.id}${STATE_ROUTE_SEPARATOR}saml`)}&ticket=${tickets.seal(ticketBind, ticket)}`;
    ex.answer({ status: 303, headers: { location, 'cache-control': 'no-store', 'content-type': 'text/plain; charset=utf-8' }, body: `Redirecting to ${CALLBACK_PATH}\n` });
  }

  return {
    name: 'saml',
    urls,
    signing,
    async start(redirectUri) {
      const id = ids.make();
      const saml = new SAML(options(() => id));
      if (!saml.options.entryPoint) throw refused('ERR_SERVICE_817', 'The route\'s idp_metadata has no SingleSignOnService with the HTTP-Redirect binding, so sign-in cannot start; fix idp_metadata.');
      // RelayState: the edge's origin, short (SAML bindings cap it at 80 bytes), so the ACS relay knows which host to return to.
      const url = await saml.getAuthorizeUrlAsync(new URL(redirectUri).origin, undefined, {});
      return { url, flow: { requestId: id } };
    },
    async finish() {
      throw refused('ERR_SERVICE_801', 'This SAML sign-in callback carries no ticket; open the page you wanted again.');
    },
    acs,
    async callback(ex, flow) {
      if (ex.method === 'POST') {
        await acs(ex);
        return undefined;
      }
      const url = new URL(ex.path, 'https://edge.invalid');
      const t = tickets.open<Ticket>(ticketBind, url.searchParams.get('ticket') ?? undefined);
      if (!t || typeof t.at !== 'number' || deps.now() - t.at > TICKET_MS || typeof t.s !== 'string') {
        throw refused('ERR_SERVICE_801', 'This SAML sign-in callback has no valid ticket, or took over a minute; open the page you wanted again.');
      }
      remember(`ticket|${t.id}`, t.at + TICKET_MS);
      let back: string;
      if (t.irt) {
        if (flow?.requestId !== t.irt) throw refused('ERR_SERVICE_801', 'This SAML response answers a sign-in this browser did not start; open the page you wanted again.');
        back = String(flow.back ?? '/');
      } else {
        if (config.allow_idp_initiated !== true) throw refused('ERR_SERVICE_811', 'The identity provider started this sign-in itself, which the route does not allow (allow_idp_initiated is false).');
        back = relayBack(t.relay, ex.host);
      }
      return { identity: { subject: t.s, email: t.e, name: t.n }, back };
    },
  };
}
