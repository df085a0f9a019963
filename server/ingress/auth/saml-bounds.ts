// What a POSTed SAMLResponse may hold before it is parsed. An XML document is read by a DOM
// parser, canonicalised and its signatures checked, and each of those costs more than the
// bytes do: deep nesting, thousands of attributes on one element, many namespace
// declarations (each copied into every canonicalised descendant), many Signature, Reference
// or Transform elements. One crafted 120 KiB response used to hold the event loop 15 s. So
// the document's shape is checked first, in one linear pass over its text with no parser
// (a few milliseconds at the largest size allowed), and what stays expensive, the parse and
// signature check, runs on a worker thread with a deadline (saml-verify.ts).

/** Bounds of a SAMLResponse's XML (docs/ingress.md, "Limits of sign-in and policy input"). */
export interface SamlXmlLimits {
  /** The decoded document's size in bytes. An IdP's response is a few KiB; hundreds of group values stay well under. */
  maxBytes: number;
  /** Elements nested in one another. A SAML response nests about 8 deep. */
  maxDepth: number;
  /** Elements in the document (each AttributeValue is one). */
  maxElements: number;
  /** Attributes on one element. */
  maxAttributesPerElement: number;
  /** Attributes in the document. */
  maxAttributes: number;
  /** Namespace declarations (xmlns, xmlns:x) in the document. */
  maxNamespaces: number;
  /** Signature elements: the response's and the assertion's. */
  maxSignatures: number;
  /** Reference elements (each is a digest over a canonicalised element). */
  maxReferences: number;
  /** Transform elements (each a pass over its Reference's element). */
  maxTransforms: number;
}

export const SAML_XML_LIMITS: SamlXmlLimits = {
  maxBytes: 256 * 1024,
  maxDepth: 32,
  maxElements: 10_000,
  maxAttributesPerElement: 32,
  maxAttributes: 20_000,
  maxNamespaces: 64,
  maxSignatures: 2,
  maxReferences: 2,
  maxTransforms: 6,
};

const isSpace = (c: number) => c === 32 || c === 9 || c === 10 || c === 13;

/**
 * Which bound `xml` exceeds, as a phrase for the refusal ("nests 40 elements deep; at most
 * 32"), or undefined when it is within them all. Markup declarations (DOCTYPE, ENTITY) are
 * refused before this; unclosed markup ends the pass (the parser refuses it).
 */
export function samlXmlOverLimits(xml: string, limits: SamlXmlLimits = SAML_XML_LIMITS): string | undefined {
  const bytes = Buffer.byteLength(xml);
  if (bytes > limits.maxBytes) return `is ${bytes} bytes; at most ${limits.maxBytes}`;
  const n = xml.length;
  let depth = 0;
  let elements = 0;
  let attributes = 0;
  let namespaces = 0;
  const named = { Signature: 0, Reference: 0, Transform: 0 };
  let i = 0;
  while ((i = xml.indexOf('<', i)) >= 0) {
    const c = xml.charCodeAt(i + 1);
    if (c === 47 /* / */) {
      depth--;
      i = xml.indexOf('>', i);
      if (i < 0) break;
      continue;
    }
    if (c === 33 /* ! */) {
      const end = xml.startsWith('<!--', i) ? xml.indexOf('-->', i + 4) : xml.startsWith('<![CDATA[', i) ? xml.indexOf(']]>', i + 9) : -1;
      if (end < 0) return xml.startsWith('<!--', i) || xml.startsWith('<![CDATA[', i) ? undefined : 'has a markup declaration';
      i = end + 3;
      continue;
    }
    if (c === 63 /* ? */) {
      const end = xml.indexOf('?>', i + 2);
      if (end < 0) break;
      i = end + 2;
      continue;
    }
    // A start tag: its name, then its attributes up to the '>' outside quotes.
    let j = i + 1;
    while (j < n && !isSpace(xml.charCodeAt(j)) && xml[j] !== '>' && xml[j] !== '/') j++;
    const name = xml.slice(i + 1, j);
    const local = name.slice(name.indexOf(':') + 1);
    if (local === 'Signature' || local === 'Reference' || local === 'Transform') named[local]++;
    if (++elements > limits.maxElements) return `has over ${limits.maxElements} elements`;
    let own = 0;
    let quote = 0;
    let k = j;
    for (; k < n; k++) {
      const ch = xml.charCodeAt(k);
      if (quote) {
        if (ch === quote) quote = 0;
        continue;
      }
      if (ch === 34 || ch === 39) quote = ch;
      else if (ch === 61 /* = */) own++;
      else if (ch === 62 /* > */) break;
      else if (ch === 120 /* x */ && isSpace(xml.charCodeAt(k - 1)) && xml.startsWith('xmlns', k)) namespaces++;
    }
    if (own > limits.maxAttributesPerElement) return `has an element with ${own} attributes; at most ${limits.maxAttributesPerElement}`;
    attributes += own;
    if (attributes > limits.maxAttributes) return `has over ${limits.maxAttributes} attributes`;
    if (namespaces > limits.maxNamespaces) return `declares over ${limits.maxNamespaces} namespaces`;
    if (named.Signature > limits.maxSignatures) return `has over ${limits.maxSignatures} Signature elements`;
    if (named.Reference > limits.maxReferences) return `has over ${limits.maxReferences} Reference elements`;
    if (named.Transform > limits.maxTransforms) return `has over ${limits.maxTransforms} Transform elements`;
    if (k >= n) break;
    if (xml.charCodeAt(k - 1) !== 47 /* / */ && ++depth > limits.maxDepth) return `nests elements over ${limits.maxDepth} deep`;
    i = k + 1;
  }
  return undefined;
}
