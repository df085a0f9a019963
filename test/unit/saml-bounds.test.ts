// The shape check a SAMLResponse passes before it is parsed (server/ingress/auth/saml-bounds.ts):
// each bound refuses one over it and admits one at it, and a signed response as IdPs send it
// (here the test IdP's, with 200 group values) is well inside them all.
import { describe, expect, it } from 'vitest';
import { SAML_XML_LIMITS, samlXmlOverLimits } from '../../server/ingress/auth/saml-bounds.js';
import { startSamlIdp } from '../helpers/saml-idp.js';

const wrap = (inner: string) => `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" ID="_r">${inner}</samlp:Response>`;
const nested = (depth: number) => wrap(`${'<a>'.repeat(depth - 1)}${'</a>'.repeat(depth - 1)}`);
const attrs = (n: number) => wrap(`<a ${Array.from({ length: n }, (_, i) => `x${i}="1"`).join(' ')}/>`);
const named = (name: string, n: number) => wrap(`<ds:${name} xmlns:ds="urn:ds"/>`.repeat(n));

describe('SAMLResponse bounds', () => {
  it.each([
    ['depth', nested(SAML_XML_LIMITS.maxDepth), nested(SAML_XML_LIMITS.maxDepth + 1), /nests elements over 32 deep/],
    ['attributes on one element', attrs(SAML_XML_LIMITS.maxAttributesPerElement - 2), attrs(SAML_XML_LIMITS.maxAttributesPerElement + 1), /an element with 33 attributes/],
    ['Signature elements', named('Signature', 2), named('Signature', 3), /over 2 Signature elements/],
    ['Reference elements', named('Reference', 2), named('Reference', 3), /over 2 Reference elements/],
    ['Transform elements', named('Transform', 6), named('Transform', 7), /over 6 Transform elements/],
    ['namespace declarations', wrap('<a xmlns:b="urn:b"/>'.repeat(60)), wrap('<a xmlns:b="urn:b"/>'.repeat(64)), /over 64 namespaces/],
    ['elements', wrap('<a/>'.repeat(9_999)), wrap('<a/>'.repeat(10_000)), /over 10000 elements/],
    ['bytes', wrap('x'.repeat(200 * 1024)), wrap('x'.repeat(256 * 1024)), /bytes; at most 262144/],
  ])('%s: at the bound it passes, past it the refusal says which', (_what, at, over, says) => {
    expect(samlXmlOverLimits(at)).toBeUndefined();
    expect(samlXmlOverLimits(over)).toMatch(says);
  });

  it('quotes hide what looks like markup; comments and CDATA are skipped; a DOCTYPE is refused', () => {
    expect(samlXmlOverLimits(wrap(`<a v="${'<b>'.repeat(100)}" w='${'x=1 '.repeat(100)}'/><!-- ${'<c>'.repeat(100)} --><![CDATA[${'<d>'.repeat(100)}]]>`))).toBeUndefined();
    expect(samlXmlOverLimits(`<!DOCTYPE x>${wrap('')}`)).toMatch(/markup declaration/);
  });

  it('a signed response with 200 group values is inside every bound', async () => {
    const idp = await startSamlIdp();
    try {
      const groups = Array.from({ length: 200 }, (_, i) => `group-${i}`);
      const xml = Buffer.from(idp.respond({ acs: 'https://sp.example/acs', audience: 'https://sp.example', attributes: { groups, email: ['ada@example.com'] } }), 'base64').toString();
      expect(xml).toContain('Signature');
      expect(samlXmlOverLimits(xml)).toBeUndefined();
    } finally {
      await idp.close();
    }
  });
});
