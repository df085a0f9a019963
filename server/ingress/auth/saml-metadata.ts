// Both sides of SAML metadata for a route: what the edge reads from the IdP's entity
// descriptor (`idp_metadata`: its entity id, where to send AuthnRequests and LogoutRequests,
// the certificates its assertions are signed with), and the service provider's own
// descriptor that the route serves at its metadata_url (entity id, ACS, SLO, signing cert).
import { generateServiceProviderMetadata } from '@node-saml/node-saml';
import { DOMParser } from '@xmldom/xmldom';

const MD = 'urn:oasis:names:tc:SAML:2.0:metadata';
const DS = 'http://www.w3.org/2000/09/xmldsig#';
const REDIRECT = 'urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect';
const SHORT_FORMATS = ['persistent', 'transient', 'emailAddress', 'unspecified'];

export interface IdpMetadata {
  entityId: string;
  /** SingleSignOnService with the HTTP-Redirect binding (the edge sends AuthnRequests there). */
  ssoUrl?: string;
  /** SingleLogoutService with the HTTP-Redirect binding, when the IdP has one. */
  sloUrl?: string;
  /** PEM certificates of KeyDescriptors for signing (or for no stated use). */
  certificates: string[];
}

/** The SP's URLs for a route, all under the server's public base URL (the read form shows them). */
export interface SamlUrls {
  entity_id: string;
  metadata_url: string;
  assertion_consumer_service_url: string;
  single_logout_url: string;
}

/** Where the module's URLs point: `<public base URL>/saml/<route id>[/metadata|/acs|/slo]`. */
export const SAML_PATH_PREFIX = '/saml/';
export function samlUrls(publicUrl: string, routeId: string): SamlUrls {
  const base = `${publicUrl}${SAML_PATH_PREFIX}${routeId}`;
  return { entity_id: base, metadata_url: `${base}/metadata`, assertion_consumer_service_url: `${base}/acs`, single_logout_url: `${base}/slo` };
}

/** The full URN of a configured nameid_format (which accepts short names too). */
export function nameIdFormatUrn(format: string | undefined): string {
  const f = format || 'persistent';
  if (f.startsWith('urn:')) return f;
  return `urn:oasis:names:tc:SAML:${f === 'persistent' || f === 'transient' ? '2.0' : '1.1'}:nameid-format:${f}`;
}

/** persistent, transient, emailAddress or unspecified: the same format under either namespace. */
export const nameIdFormatShort = (format: string | null | undefined) => {
  const last = String(format || 'unspecified').split(':').pop()!;
  return SHORT_FORMATS.includes(last) ? last : String(format);
};

const pem = (b64: string) => `-----BEGIN CERTIFICATE-----\n${(b64.replace(/\s+/g, '').match(/.{1,64}/g) ?? []).join('\n')}\n-----END CERTIFICATE-----\n`;

const cache = new Map<string, IdpMetadata>();

/** The IdP descriptor; throws with a sentence when it lacks what sign-in needs to start. */
export function parseIdpMetadata(xml: string): IdpMetadata {
  const hit = cache.get(xml);
  if (hit) return hit;
  const problems: string[] = [];
  const doc = new DOMParser({ errorHandler: { error: (m: string) => problems.push(m), fatalError: (m: string) => problems.push(m) } }).parseFromString(xml, 'text/xml');
  const root = doc?.documentElement;
  if (problems.length || !root || root.localName !== 'EntityDescriptor') throw new Error(`idp_metadata is not a readable EntityDescriptor${problems.length ? ` (${problems[0]})` : ''}`);
  const idp = Array.from(root.getElementsByTagNameNS(MD, 'IDPSSODescriptor'))[0];
  if (!idp) throw new Error('idp_metadata has no IDPSSODescriptor');
  const location = (name: string) => Array.from(idp.getElementsByTagNameNS(MD, name)).find((e) => e.getAttribute('Binding') === REDIRECT)?.getAttribute('Location') || undefined;
  const certificates = Array.from(idp.getElementsByTagNameNS(MD, 'KeyDescriptor'))
    .filter((k) => !k.getAttribute('use') || k.getAttribute('use') === 'signing')
    .flatMap((k) => Array.from(k.getElementsByTagNameNS(DS, 'X509Certificate')))
    .map((c) => pem(c.textContent ?? ''));
  const out: IdpMetadata = { entityId: root.getAttribute('entityID') ?? '', ssoUrl: location('SingleSignOnService'), sloUrl: location('SingleLogoutService'), certificates };
  if (cache.size > 256) cache.clear();
  cache.set(xml, out);
  return out;
}

/** Signed metadata by its inputs: it is served without an API key, so one RSA signature per route, not per request. */
const signed = new Map<string, string>();

/** The SP's EntityDescriptor, signed with the route's request-signing key, for the IdP to trust the route. */
export function serviceProviderMetadata(urls: SamlUrls, nameIdFormat: string | undefined, signing: { certificate_pem: string; private_key_pem: string }): string {
  const key = JSON.stringify([urls, nameIdFormat, signing.certificate_pem]);
  let xml = signed.get(key);
  if (xml === undefined) {
    if (signed.size >= 1024) signed.clear();
    signed.set(key, (xml = signMetadata(urls, nameIdFormat, signing)));
  }
  return xml;
}

function signMetadata(urls: SamlUrls, nameIdFormat: string | undefined, signing: { certificate_pem: string; private_key_pem: string }): string {
  return generateServiceProviderMetadata({
    issuer: urls.entity_id,
    callbackUrl: urls.assertion_consumer_service_url,
    logoutCallbackUrl: urls.single_logout_url,
    identifierFormat: nameIdFormatUrn(nameIdFormat),
    wantAssertionsSigned: true,
    publicCerts: signing.certificate_pem,
    privateKey: signing.private_key_pem,
    signatureAlgorithm: 'sha256',
    signMetadata: true,
  });
}
