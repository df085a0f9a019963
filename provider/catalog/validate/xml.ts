// Just enough XML to tell whether SAML IdP metadata is a well-formed EntityDescriptor
// document: balanced elements, one root, and the root's local name. It never expands an
// entity; a DTD is refused outright (metadata needs none, and whatever reads the document
// after us must not meet a billion laughs), as are documents past the size and depth bounds.
import { DOCUMENT_LIMITS } from './bounded-parse.js';

/** SAML metadata: 256 KiB (the catalog's limit) and 64 levels of elements (real metadata has about 8). */
export const XML_LIMITS = { maxChars: 262144, maxDepth: DOCUMENT_LIMITS.maxDepth };

export function xmlRootProblem(text: string, expectedRoot: string, limits = XML_LIMITS): string | undefined {
  if (text.length > limits.maxChars) return `the document is larger than ${limits.maxChars} characters`;
  if (/<!(DOCTYPE|ENTITY)/i.test(text)) return 'a DOCTYPE or ENTITY declaration is not accepted (metadata needs none, and entities can expand without bound)';
  const stack: string[] = [];
  let root: string | undefined;
  let i = 0;
  const tag = /<(\/?)([A-Za-z_][\w.\-]*(?::[A-Za-z_][\w.\-]*)?)((?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>/y;
  while (i < text.length) {
    const lt = text.indexOf('<', i);
    if (lt < 0) {
      if (text.slice(i).trim() && stack.length === 0) return 'text outside the root element';
      break;
    }
    if (stack.length === 0 && text.slice(i, lt).trim()) return 'text outside the root element';
    if (text.startsWith('<?', lt)) { i = text.indexOf('?>', lt) + 2; if (i < 2) return 'unterminated processing instruction'; continue; }
    if (text.startsWith('<!--', lt)) { i = text.indexOf('-->', lt) + 3; if (i < 3) return 'unterminated comment'; continue; }
    if (text.startsWith('<![CDATA[', lt)) { i = text.indexOf(']]>', lt) + 3; if (i < 3) return 'unterminated CDATA section'; continue; }
    if (text.startsWith('<!', lt)) { i = text.indexOf('>', lt) + 1; if (i < 1) return 'unterminated declaration'; continue; }
    tag.lastIndex = lt;
    const m = tag.exec(text);
    if (!m) return `malformed tag at offset ${lt}`;
    const [, closing, name, , selfClosing] = m;
    if (closing) {
      if (stack.pop() !== name) return `unexpected closing tag </${name}>`;
    } else {
      if (stack.length === 0) {
        if (root !== undefined) return 'more than one root element';
        root = name;
      }
      if (!selfClosing && stack.push(name) > limits.maxDepth) return `elements are nested more than ${limits.maxDepth} levels deep`;
    }
    i = tag.lastIndex;
  }
  if (stack.length) return `element <${stack.at(-1)}> is not closed`;
  if (!root) return 'no root element';
  const local = root.includes(':') ? root.split(':')[1] : root;
  return local === expectedRoot ? undefined : `the root element is <${root}>, expected <${expectedRoot}>`;
}
