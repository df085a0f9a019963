// A small SAML 2.0 identity provider for sign-in tests, on loopback: its signing key and
// certificate from openssl (pki.ts), metadata naming an HTTP-Redirect SingleSignOnService,
// and at /sso a login that reads the SP's AuthnRequest (inflated, its redirect-binding
// signature checked against the SP's certificate) and answers the auto-POST form of a SAML
// Response whose assertion it signs with xml-crypto. `respond` makes Responses on demand, so a
// test can forge, alter, expire or misaddress one.
import { createVerify, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { inflateRawSync } from 'node:zlib';
import { SignedXml } from 'xml-crypto';
import { Pki } from './pki.js';

export const IDP_ENTITY = 'https://idp.test/saml';
const NS_PERSISTENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent';

export interface AuthnRequestSeen {
  id: string;
  xml: string;
  forceAuthn: boolean;
  acs: string;
  issuer: string;
  relayState?: string;
  /** Whether SigAlg/Signature verified against the SP certificate the test gave. */
  signatureValid: boolean;
}

export interface ResponseSpec {
  acs: string;
  audience: string;
  inResponseTo?: string;
  nameId?: string;
  nameIdFormat?: string;
  attributes?: Record<string, string[]>;
  /** Offsets from now in seconds (defaults -60 and +300). */
  notBefore?: number;
  notOnOrAfter?: number;
  /** 'assertion' (default), or 'none' for an unsigned one. */
  sign?: 'assertion' | 'none';
  /** Sign with this key/cert instead of the IdP's (a forger's). */
  key?: { key: string; cert: string };
  issuer?: string;
}

export interface SamlTestIdp {
  url: string;
  metadata: string;
  cert: string;
  requests: AuthnRequestSeen[];
  /** The user /sso signs in, and the attributes it sends. */
  user: { nameId: string; attributes: Record<string, string[]> };
  /** The SP certificate AuthnRequest signatures are checked against. */
  spCert?: string;
  /** The base64 SAMLResponse for `spec`. */
  respond(spec: ResponseSpec): string;
  /** A key and self-signed certificate the IdP metadata does not name. */
  stranger(): { key: string; cert: string };
  close(): Promise<void>;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const iso = (offsetSeconds: number) => new Date(Date.now() + offsetSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const b64 = (pem: string) => pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');

function sign(xml: string, signer: { key: string; cert: string }): string {
  const sig = new SignedXml({
    privateKey: signer.key,
    publicCert: signer.cert,
    signatureAlgorithm: 'http://www.w3.org/2001/04/xmldsig-more#rsa-sha256',
    canonicalizationAlgorithm: 'http://www.w3.org/2001/10/xml-exc-c14n#',
  });
  sig.addReference({
    xpath: "//*[local-name(.)='Assertion']",
    transforms: ['http://www.w3.org/2000/09/xmldsig#enveloped-signature', 'http://www.w3.org/2001/10/xml-exc-c14n#'],
    digestAlgorithm: 'http://www.w3.org/2001/04/xmlenc#sha256',
  });
  sig.computeSignature(xml, { location: { reference: "//*[local-name(.)='Assertion']/*[local-name(.)='Issuer']", action: 'after' } });
  return sig.getSignedXml();
}

export function responseXml(spec: ResponseSpec, idp: { key: string; cert: string }): string {
  const id = `_r${randomBytes(12).toString('hex')}`;
  const aid = `_a${randomBytes(12).toString('hex')}`;
  const irt = spec.inResponseTo ? ` InResponseTo="${esc(spec.inResponseTo)}"` : '';
  const attrs = Object.entries(spec.attributes ?? {})
    .map(([name, vals]) => `<saml:Attribute Name="${esc(name)}">${vals.map((v) => `<saml:AttributeValue>${esc(v)}</saml:AttributeValue>`).join('')}</saml:Attribute>`)
    .join('');
  const xml = `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="${id}" Version="2.0" IssueInstant="${iso(0)}" Destination="${esc(spec.acs)}"${irt}>`
    + `<saml:Issuer>${esc(spec.issuer ?? IDP_ENTITY)}</saml:Issuer>`
    + '<samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status>'
    + `<saml:Assertion ID="${aid}" Version="2.0" IssueInstant="${iso(0)}">`
    + `<saml:Issuer>${esc(spec.issuer ?? IDP_ENTITY)}</saml:Issuer>`
    + `<saml:Subject><saml:NameID Format="${esc(spec.nameIdFormat ?? NS_PERSISTENT)}">${esc(spec.nameId ?? 'user-ada')}</saml:NameID>`
    + `<saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData${irt} NotOnOrAfter="${iso(spec.notOnOrAfter ?? 300)}" Recipient="${esc(spec.acs)}"/></saml:SubjectConfirmation></saml:Subject>`
    + `<saml:Conditions NotBefore="${iso(spec.notBefore ?? -60)}" NotOnOrAfter="${iso(spec.notOnOrAfter ?? 300)}"><saml:AudienceRestriction><saml:Audience>${esc(spec.audience)}</saml:Audience></saml:AudienceRestriction></saml:Conditions>`
    + `<saml:AuthnStatement AuthnInstant="${iso(0)}" SessionIndex="${aid}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>`
    + (attrs ? `<saml:AttributeStatement>${attrs}</saml:AttributeStatement>` : '')
    + '</saml:Assertion></samlp:Response>';
  return spec.sign === 'none' ? xml : sign(xml, spec.key ?? idp);
}

/** The fields of the first form of an HTML page (the IdP's auto-POST). */
export function formOf(html: string): { action: string; fields: Record<string, string> } {
  const unesc = (s: string) => s.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
  const action = unesc(/<form[^>]*action="([^"]*)"/.exec(html)?.[1] ?? '');
  const fields: Record<string, string> = {};
  for (const m of html.matchAll(/<input[^>]*name="([^"]*)"[^>]*value="([^"]*)"/g)) fields[m[1]] = unesc(m[2]);
  return { action, fields };
}

export async function startSamlIdp(): Promise<SamlTestIdp> {
  const pki = new Pki();
  const signer = pki.issue('rsa2048', { subject: [['CN', 'test idp signing']] });
  const requests: AuthnRequestSeen[] = [];
  let idp!: SamlTestIdp;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url!, 'http://idp.invalid');
    if (url.pathname !== '/sso' || !url.searchParams.get('SAMLRequest')) return void res.writeHead(404).end();
    const xml = inflateRawSync(Buffer.from(url.searchParams.get('SAMLRequest')!, 'base64')).toString('utf8');
    // The redirect binding signs the query's own encoded text: SAMLRequest, RelayState, SigAlg in that order.
    const raw = (req.url!.split('?')[1] ?? '').split('&');
    const part = (name: string) => raw.find((p) => p.startsWith(`${name}=`));
    const signed = ['SAMLRequest', 'RelayState', 'SigAlg'].map(part).filter(Boolean).join('&');
    let signatureValid = false;
    if (idp.spCert && url.searchParams.get('Signature')) {
      signatureValid = createVerify('RSA-SHA256').update(signed).verify(idp.spCert, Buffer.from(url.searchParams.get('Signature')!, 'base64'));
    }
    const seen: AuthnRequestSeen = {
      id: /\sID="([^"]+)"/.exec(xml)?.[1] ?? '',
      xml,
      forceAuthn: /\sForceAuthn="true"/.test(xml),
      acs: /AssertionConsumerServiceURL="([^"]+)"/.exec(xml)?.[1] ?? '',
      issuer: /<saml:Issuer[^>]*>([^<]+)</.exec(xml)?.[1] ?? '',
      relayState: url.searchParams.get('RelayState') ?? undefined,
      signatureValid,
    };
    requests.push(seen);
    const response = Buffer.from(responseXml({ acs: seen.acs, audience: seen.issuer, inResponseTo: seen.id, nameId: idp.user.nameId, attributes: idp.user.attributes }, signer)).toString('base64');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(
      `<html><body onload="document.forms[0].submit()"><form method="post" action="${esc(seen.acs)}">`
      + `<input type="hidden" name="SAMLResponse" value="${esc(response)}"/>`
      + (seen.relayState !== undefined ? `<input type="hidden" name="RelayState" value="${esc(seen.relayState)}"/>` : '')
      + '</form></body></html>',
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const metadata = `<?xml version="1.0"?><md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="${IDP_ENTITY}">`
    + '<md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol" WantAuthnRequestsSigned="true">'
    + `<md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${b64(signer.cert)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`
    + `<md:SingleLogoutService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${url}/slo"/>`
    + `<md:NameIDFormat>${NS_PERSISTENT}</md:NameIDFormat>`
    + `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${url}/sso"/>`
    + '</md:IDPSSODescriptor></md:EntityDescriptor>';
  idp = {
    url, metadata, cert: signer.cert, requests,
    user: { nameId: 'user-ada', attributes: { email: ['ada@example.com'], displayName: ['Ada Lovelace'], groups: ['engineers'] } },
    respond: (spec) => Buffer.from(responseXml({ nameId: idp.user.nameId, attributes: idp.user.attributes, ...spec }, signer)).toString('base64'),
    stranger: () => {
      const s = pki.issue('rsa2048', { subject: [['CN', 'not the idp']] });
      return { key: s.key, cert: s.cert };
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      pki.close();
    },
  };
  return idp;
}
