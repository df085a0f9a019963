// SAML sign-in at the edge, end to end: the real server with --ingress, a local IdP that signs
// real SAML Responses with xml-crypto (saml-idp.ts), edgeform agent carrying the routes to an
// upstream that echoes the identity headers, and a browser-like client taking each hop: the
// signed AuthnRequest to the IdP, the IdP's POST to the route's ACS under the public base URL
// (the API server), its 307 relay to the edge's host, the ticket GET and the session. Also: the
// SP metadata served and parseable, IdP-initiated login, SLO, and every refusal (tampered,
// unsigned, foreign key, wrong audience, expired, replayed, unsolicited, group, NameID
// format, malformed) answered with a page and a code, never a 500 and never the backend.
import { X509Certificate } from 'node:crypto';
import { DOMParser } from '@xmldom/xmldom';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Browser, type BrowserReply } from '../helpers/browser.js';
import { formOf, startSamlIdp, type SamlTestIdp } from '../helpers/saml-idp.js';
import { clockAhead, startSignInEdge, type SignInEdge } from '../helpers/sign-in-edge.js';
import type { TestServer } from '../helpers/server.js';
import { until } from '../helpers/wait.js';

const HOST = 'saml.example.com';
const APP = `https://${HOST}`;
const MD = 'urn:oasis:names:tc:SAML:2.0:metadata';

let edge: SignInEdge;
let s: TestServer;
let idp: SamlTestIdp;
let ingress: { port: number; ca: string };
let seen: SignInEdge['seen'];
/** Route ids and their SAML read forms. */
const routes: Record<string, { id: string; saml: Record<string, string> }> = {};

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const formBody = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

/** POSTs a form as a browser does, re-POSTing it on each 307 (the API server's relay to the edge host). */
async function submit(b: Browser, action: string, fields: Record<string, string>): Promise<BrowserReply> {
  let url = action;
  let r = await b.request(url, { method: 'POST', headers: FORM, body: formBody(fields) });
  for (let i = 0; i < 3 && r.status === 307; i++) {
    url = new URL(r.headers.location!, url).href;
    r = await b.request(url, { method: 'POST', headers: FORM, body: formBody(fields) });
  }
  return r;
}

/** Opens `path`, lets the IdP sign in, posts its form to the ACS and follows to the end. */
async function signIn(path: string, b = new Browser(ingress)) {
  const start = await b.request(`${APP}${path}`);
  expect(start.status).toBe(302);
  const login = await b.request(start.headers.location!);
  const form = formOf(login.body);
  const posted = await submit(b, form.action, form.fields);
  const ticketUrl = posted.headers.location ? new URL(posted.headers.location, posted.url).href : '';
  const arrived = posted.status === 303 ? await b.follow(ticketUrl) : posted;
  return { b, start, form, posted, ticketUrl, arrived };
}

function expectRefused(r: BrowserReply, code: string, status = 403) {
  expect(r.status).toBe(status);
  expect(r.headers['edgeform-error-code']).toBe(code);
  expect(r.body).toContain(code);
}

beforeAll(async () => {
  idp = await startSamlIdp();
  edge = await startSignInEdge(HOST, 'saml');
  ({ s, ingress, seen } = edge);
  const add = async (name: string, match: string, saml: Record<string, unknown>) => {
    const id = await edge.route(match, { saml: { idp_metadata: idp.metadata, ...saml } });
    const edgeId = (await s.get('/edges/https')).body.https_edges.find((e: { hostports: string[] }) => e.hostports.includes(`${HOST}:443`)).id;
    routes[name] = { id, saml: (await s.get(`/edges/https/${edgeId}/routes/${id}`)).body.saml };
  };
  await add('main', '/', { force_authn: true, authorized_groups: ['engineers'], maximum_duration: 3600 });
  await add('open', '/open', { allow_idp_initiated: true });
  await add('admins', '/admins', { authorized_groups: ['admins'] });
  await add('email', '/email', { nameid_format: 'emailAddress' });
  idp.spCert = routes.main.saml.request_signing_certificate_pem;
  const probe = new Browser(ingress);
  await until(async () => (await probe.request(`${APP}/email/x`)).status === 302);
}, 60_000);

afterAll(async () => {
  await edge?.close();
  await idp?.close();
});

describe('saml sign-in at the edge', () => {
  it('the read form\'s URLs are under the public base URL and the SP metadata is served there, signed and parseable', async () => {
    const { saml, id } = routes.main;
    expect(saml.entity_id).toBe(`${s.url}/saml/${id}`);
    expect(saml.metadata_url).toBe(`${saml.entity_id}/metadata`);
    for (const url of [saml.metadata_url, saml.entity_id, `${APP}/saml/${id}/metadata`]) {
      const r = await new Browser(ingress).request(url);
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toContain('samlmetadata+xml');
      const doc = new DOMParser().parseFromString(r.body, 'text/xml');
      const root = doc.documentElement!;
      expect(root.localName).toBe('EntityDescriptor');
      expect(root.getAttribute('entityID')).toBe(saml.entity_id);
      const acs = Array.from(root.getElementsByTagNameNS(MD, 'AssertionConsumerService'))[0];
      expect(acs.getAttribute('Location')).toBe(saml.assertion_consumer_service_url);
      expect(acs.getAttribute('Binding')).toBe('urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST');
      expect(Array.from(root.getElementsByTagNameNS(MD, 'SingleLogoutService'))[0].getAttribute('Location')).toBe(saml.single_logout_url);
      expect(Array.from(root.getElementsByTagNameNS(MD, 'NameIDFormat'))[0].textContent).toBe('urn:oasis:names:tc:SAML:2.0:nameid-format:persistent');
      const cert = Array.from(root.getElementsByTagNameNS('http://www.w3.org/2000/09/xmldsig#', 'X509Certificate')).map((c) => c.textContent!.replace(/\s+/g, ''));
      expect(cert).toContain(new X509Certificate(saml.request_signing_certificate_pem).raw.toString('base64'));
      expect(Array.from(root.getElementsByTagNameNS('http://www.w3.org/2000/09/xmldsig#', 'Signature'))).toHaveLength(1);
    }
    const none = await new Browser(ingress).request(`${s.url}/saml/rt_000000000000000000000000000/metadata`);
    expect(none.status).toBe(404);
    expect(JSON.parse(none.body).error_code).toBe('ERR_SERVICE_816');
  });

  it('SP-initiated: a signed AuthnRequest with ForceAuthn, then the upstream gets the identity', async () => {
    const before = seen.length;
    const { start, posted, arrived, b } = await signIn('/private?x=1');
    expect(seen.length).toBe(before + 1);
    const to = new URL(start.headers.location!);
    expect(`${to.origin}${to.pathname}`).toBe(`${idp.url}/sso`);
    expect(to.searchParams.get('SigAlg')).toBe('http://www.w3.org/2001/04/xmldsig-more#rsa-sha256');
    const req = idp.requests.at(-1)!;
    expect(req.signatureValid).toBe(true);
    expect(req.forceAuthn).toBe(true);
    expect(req.acs).toBe(routes.main.saml.assertion_consumer_service_url);
    expect(req.issuer).toBe(routes.main.saml.entity_id);
    expect(req.relayState).toBe(APP);
    expect(posted.status).toBe(303);
    expect(arrived.status).toBe(200);
    const got = JSON.parse(arrived.body);
    expect(got.path).toBe('/private?x=1');
    expect(got.headers).toMatchObject({ 'edgeform-auth-provider': 'saml', 'edgeform-auth-subject': 'user-ada', 'edgeform-auth-email': 'ada@example.com', 'edgeform-auth-name': encodeURIComponent('Ada Lovelace') });
    expect(b.cookiesOf(HOST).has('service.session')).toBe(true);
    const again = await b.request(`${APP}/other`);
    expect(again.status).toBe(200);
  });

  it('force_authn false leaves ForceAuthn out of the AuthnRequest', async () => {
    const r = await new Browser(ingress).request(`${APP}/open/page`);
    expect(r.status).toBe(302);
    await new Browser(ingress).request(r.headers.location!);
    expect(idp.requests.at(-1)!.forceAuthn).toBe(false);
    expect(idp.requests.at(-1)!.issuer).toBe(routes.open.saml.entity_id);
  });

  it('IdP-initiated login is accepted where allow_idp_initiated, to the RelayState target, and refused elsewhere', async () => {
    const open = routes.open.saml;
    const b = new Browser(ingress);
    const response = idp.respond({ acs: open.assertion_consumer_service_url, audience: open.entity_id });
    const posted = await submit(b, open.assertion_consumer_service_url, { SAMLResponse: response, RelayState: `${APP}/open/dashboard` });
    expect(posted.status).toBe(303);
    const arrived = await b.follow(new URL(posted.headers.location!, posted.url).href);
    expect(arrived.status).toBe(200);
    expect(JSON.parse(arrived.body).path).toBe('/open/dashboard');

    // The same response again: a replay.
    expectRefused(await submit(new Browser(ingress), open.assertion_consumer_service_url, { SAMLResponse: response, RelayState: `${APP}/open/dashboard` }), 'ERR_SERVICE_810');

    const main = routes.main.saml;
    const before = seen.length;
    const unsolicited = await submit(new Browser(ingress), main.assertion_consumer_service_url, { SAMLResponse: idp.respond({ acs: main.assertion_consumer_service_url, audience: main.entity_id, attributes: { groups: ['engineers'] } }) });
    expectRefused(unsolicited, 'ERR_SERVICE_811');
    expect(seen.length).toBe(before);
  });

  it('a replayed ticket and a response for a sign-in another browser started are refused', async () => {
    const done = await signIn('/private');
    expect(done.arrived.status).toBe(200);
    const replay = new Browser(ingress);
    replay.cookiesOf(HOST).set('service.signin', 'whatever');
    expectRefused(await replay.request(done.ticketUrl), 'ERR_SERVICE_810');

    // Browser A starts; browser B brings A's response: B's flow is not the one answered.
    const a = new Browser(ingress);
    const start = await a.request(`${APP}/private`);
    const form = formOf((await a.request(start.headers.location!)).body);
    const b = new Browser(ingress);
    const posted = await submit(b, form.action, form.fields);
    expect(posted.status).toBe(303);
    const before = seen.length;
    expectRefused(await b.request(new URL(posted.headers.location!, posted.url).href), 'ERR_SERVICE_801');
    expect(b.cookiesOf(HOST).has('service.session')).toBe(false);
    expect(seen.length).toBe(before);
  });

  it('tampered, unsigned, foreign-signed, misaddressed and expired assertions are refused with their codes', async () => {
    const open = routes.open.saml;
    const acs = open.assertion_consumer_service_url;
    const good = { acs, audience: open.entity_id };
    const before = seen.length;
    const tampered = Buffer.from(Buffer.from(idp.respond(good), 'base64').toString('utf8').replace('>user-ada<', '>user-root<')).toString('base64');
    const cases: [string, string, string][] = [
      ['an altered assertion', tampered, 'ERR_SERVICE_807'],
      ['an unsigned assertion', idp.respond({ ...good, sign: 'none' }), 'ERR_SERVICE_807'],
      ['an assertion signed with a key the metadata does not name', idp.respond({ ...good, key: idp.stranger() }), 'ERR_SERVICE_807'],
      ['an assertion for another audience', idp.respond({ ...good, audience: 'https://other-sp.example.com/saml' }), 'ERR_SERVICE_808'],
      ['an expired assertion', idp.respond({ ...good, notBefore: -7200, notOnOrAfter: -600 }), 'ERR_SERVICE_809'],
      ['an assertion not yet valid', idp.respond({ ...good, notBefore: 3600, notOnOrAfter: 7200 }), 'ERR_SERVICE_809'],
      ['an assertion from another issuer', idp.respond({ ...good, issuer: 'https://evil.example.com' }), 'ERR_SERVICE_807'],
    ];
    for (const [why, response, code] of cases) {
      const r = await submit(new Browser(ingress), acs, { SAMLResponse: response });
      expect({ why, status: r.status, code: r.headers['edgeform-error-code'] }).toEqual({ why, status: 403, code });
    }
    expect(seen.length).toBe(before);
  });

  it('malformed posts are refused with ERR_SERVICE_806, on the API host\'s ACS and on the edge\'s own', async () => {
    const acs = routes.open.saml.assertion_consumer_service_url;
    const cases: [string, Record<string, string>][] = [
      ['no SAMLResponse', { RelayState: '/' }],
      ['not base64', { SAMLResponse: 'this is %%% not base64!' }],
      ['base64 of text', { SAMLResponse: Buffer.from('hello').toString('base64') }],
      ['broken XML', { SAMLResponse: Buffer.from('<samlp:Response><unclosed').toString('base64') }],
      ['a DOCTYPE', { SAMLResponse: Buffer.from('<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>').toString('base64') }],
      ['another XML document', { SAMLResponse: Buffer.from('<html><body/></html>').toString('base64') }],
    ];
    const before = seen.length;
    for (const [why, fields] of cases) {
      for (const url of [acs, `${APP}/saml/${routes.main.id}/acs`]) {
        const r = await submit(new Browser(ingress), url, fields);
        expect({ why, url, status: r.status, code: r.headers['edgeform-error-code'] }).toEqual({ why, url, status: 400, code: 'ERR_SERVICE_806' });
      }
    }
    expect(seen.length).toBe(before);
  });

  it('a user in none of authorized_groups, and a NameID in another format, are refused', async () => {
    const before = seen.length;
    const admins = await signIn('/admins/x');
    expectRefused(admins.posted, 'ERR_SERVICE_812');
    const email = await signIn('/email/x');
    expectRefused(email.posted, 'ERR_SERVICE_813');
    expect(seen.length).toBe(before);
  });

  it('the single logout URL ends the session on the edge host', async () => {
    const { b, arrived } = await signIn('/private');
    expect(arrived.status).toBe(200);
    const slo = await b.request(routes.main.saml.single_logout_url);
    expect(slo.status).toBe(303);
    expect(slo.headers.location).toBe(`${APP}/_edgeform/auth/logout`);
    const out = await b.request(slo.headers.location!);
    expect(out.status).toBe(200);
    expect(b.cookiesOf(HOST).has('service.session')).toBe(false);
    const after = await b.request(`${APP}/private`);
    expect(after.status).toBe(302);
    expect(after.headers.location!.startsWith(`${idp.url}/sso`)).toBe(true);
  });

  it('a session past maximum_duration is sent to the IdP again (shifted clock)', async () => {
    const { b, arrived } = await signIn('/private');
    expect(arrived.status).toBe(200);
    await clockAhead(s, 3601 * 1000, async () => {
      const r = await b.request(`${APP}/private`);
      expect(r.status).toBe(302);
      expect(r.headers.location!.startsWith(`${idp.url}/sso`)).toBe(true);
    });
  });

});
