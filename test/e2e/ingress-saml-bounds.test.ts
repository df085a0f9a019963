// Issue 28 item 2: no SAMLResponse holds the event loop. Crafted documents (deep nesting, an
// element with thousands of attributes, hundreds of namespace declarations, many Signature,
// Reference and Transform elements) posted to a saml route's ACS are refused with
// ERR_SERVICE_818 before they are parsed; a document within the bounds is parsed and its
// signature checked on a worker thread, under a deadline (ERR_SERVICE_819 past it). While each
// is handled, a request to another edge is answered, and the event loop's longest stall
// (perf_hooks.monitorEventLoopDelay) stays under 200 ms: a bound on correctness (nothing runs
// on the loop for long), far above what a request costs, not a speed figure.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SAML_VERIFY } from '../../server/ingress/auth/saml-verify.js';
import { Browser, type BrowserReply } from '../helpers/browser.js';
import { edgeAnswering, edgeRequest } from '../helpers/ingress-client.js';
import { startSamlIdp, type SamlTestIdp } from '../helpers/saml-idp.js';
import { startSignInEdge, type SignInEdge } from '../helpers/sign-in-edge.js';
import { until } from '../helpers/wait.js';

const HOST = 'saml.example.com';
const APP = `https://${HOST}`;
const MAX_STALL_MS = 200;

let edge: SignInEdge;
let idp: SamlTestIdp;
let acs = '';
let audience = '';

const HEAD = '<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="_r1" Version="2.0" IssueInstant="2026-01-01T00:00:00Z">';
const TAIL = '</samlp:Response>';
const ds = (inner: string) => `<ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignedInfo>${inner}</ds:SignedInfo><ds:SignatureValue>AA==</ds:SignatureValue></ds:Signature>`;
const reference = (transforms: number) => `<ds:Reference URI="#_a1"><ds:Transforms>${'<ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/>'.repeat(transforms)}</ds:Transforms><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/><ds:DigestValue>AA==</ds:DigestValue></ds:Reference>`;
/** About 120 KiB each, every one past one bound. */
const CRAFTED: Record<string, string> = {
  'deep nesting': `${HEAD}${'<saml:Assertion ID="_a1">'.repeat(3000)}${'</saml:Assertion>'.repeat(3000)}${TAIL}`,
  'an element with 8,000 attributes': `${HEAD}<saml:Assertion ID="_a1" ${Array.from({ length: 8000 }, (_, i) => `a${i}="x"`).join(' ')}></saml:Assertion>${TAIL}`,
  'hundreds of namespace declarations': `${HEAD}<saml:Assertion ID="_a1">${Array.from({ length: 600 }, (_, i) => `<x${i}:e xmlns:x${i}="urn:x:${i}"><saml:Attribute Name="n"/></x${i}:e>`).join('')}</saml:Assertion>${TAIL}`,
  'many References and Transforms': `${HEAD}${ds(Array.from({ length: 200 }, () => reference(10)).join(''))}<saml:Assertion ID="_a1"/>${TAIL}`,
  'many Signatures': `${HEAD}${Array.from({ length: 300 }, () => ds(reference(2))).join('')}<saml:Assertion ID="_a1"/>${TAIL}`,
  'too many bytes': `${HEAD}<saml:Assertion ID="_a1"><saml:Issuer>${'x'.repeat(300 * 1024)}</saml:Issuer></saml:Assertion>${TAIL}`,
};

/** POSTs `xml` as the SAMLResponse to the route's ACS, as a browser does: re-POSTed on the API server's 307 to the edge's host. */
async function post(b: Browser, xml: string): Promise<BrowserReply> {
  const body = new URLSearchParams({ SAMLResponse: Buffer.from(xml).toString('base64') }).toString();
  let url = acs;
  let r = await b.request(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
  for (let i = 0; i < 3 && r.status === 307; i++) {
    url = new URL(r.headers.location!, url).href;
    r = await b.request(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
  }
  return r;
}

/**
 * Runs `work` while asking the other edge for its page every 20 ms; returns work's answer,
 * the longest event-loop stall seen meanwhile and how many answers the other edge gave.
 */
async function whileMeasured<T>(work: () => Promise<T>): Promise<{ result: T; stallMs: number; otherAnswers: number }> {
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  let running = true;
  let otherAnswers = 0;
  const other = (async () => {
    while (running) {
      const r = await edgeRequest({ port: edge.ingress.port, host: 'other.example.com', ca: edge.ingress.ca });
      if (r.text === 'other edge') otherAnswers++;
      await new Promise((res) => setTimeout(res, 20));
    }
  })();
  try {
    const result = await work();
    running = false;
    await other;
    return { result, stallMs: h.max / 1e6, otherAnswers };
  } finally {
    running = false;
    h.disable();
  }
}

beforeAll(async () => {
  idp = await startSamlIdp();
  edge = await startSignInEdge(HOST, 'saml-bounds');
  const id = await edge.route('/', { saml: { idp_metadata: idp.metadata, allow_idp_initiated: true } });
  const edgeId = (await edge.s.get('/edges/https')).body.https_edges.find((e: { hostports: string[] }) => e.hostports.includes(`${HOST}:443`)).id;
  const saml = (await edge.s.get(`/edges/https/${edgeId}/routes/${id}`)).body.saml;
  acs = saml.assertion_consumer_service_url;
  audience = saml.entity_id;
  await edgeAnswering(edge.s, 'other.example.com', 'other edge');
  const probe = new Browser(edge.ingress);
  await until(async () => (await probe.request(`${APP}/x`)).status === 302);
}, 60_000);

afterAll(async () => {
  await edge?.close();
  await idp?.close();
});

describe('a SAMLResponse over the bounds', () => {
  for (const [what, xml] of Object.entries(CRAFTED)) {
    it(`${what} (${Math.round(xml.length / 1024)} KiB): refused 400 ERR_SERVICE_818 before parsing; the loop never stalls and the other edge answers meanwhile`, async () => {
      const { result, stallMs, otherAnswers } = await whileMeasured(() => post(new Browser(edge.ingress), xml));
      expect(result.status).toBe(400);
      expect(result.headers['edgeform-error-code']).toBe('ERR_SERVICE_818');
      expect(stallMs).toBeLessThan(MAX_STALL_MS);
      expect(otherAnswers).toBeGreaterThan(0);
    });
  }
});

describe('a SAMLResponse within the bounds', () => {
  it('is verified on a worker thread: a valid IdP-initiated response signs in, a tampered one is refused (807), and the loop never stalls', async () => {
    const good = Buffer.from(idp.respond({ acs, audience }), 'base64').toString();
    const { result, stallMs, otherAnswers } = await whileMeasured(() => post(new Browser(edge.ingress), good));
    expect(result.status).toBe(303);
    expect(stallMs).toBeLessThan(MAX_STALL_MS);
    expect(otherAnswers).toBeGreaterThan(0);
    const tampered = Buffer.from(idp.respond({ acs, audience, nameId: 'user-ada' }), 'base64').toString().replace('user-ada', 'user-eve');
    const refused = await post(new Browser(edge.ingress), tampered);
    expect(refused.status).toBe(403);
    expect(refused.headers['edgeform-error-code']).toBe('ERR_SERVICE_807');
  });

  it('past the verification deadline it is refused 503 ERR_SERVICE_819 and the worker replaced; the next one is verified again', async () => {
    const deadline = SAML_VERIFY.deadlineMs;
    SAML_VERIFY.deadlineMs = 1;
    try {
      const r = await post(new Browser(edge.ingress), Buffer.from(idp.respond({ acs, audience }), 'base64').toString());
      expect(r.status).toBe(503);
      expect(r.headers['edgeform-error-code']).toBe('ERR_SERVICE_819');
    } finally {
      SAML_VERIFY.deadlineMs = deadline;
    }
    const again = await post(new Browser(edge.ingress), Buffer.from(idp.respond({ acs, audience }), 'base64').toString());
    expect(again.status).toBe(303);
  });
});
