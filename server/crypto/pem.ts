// PEM (RFC 7468) text to labelled DER blocks. Text between blocks is ignored, as
// openssl and Go ignore it (bundles often carry "subject=..." lines). Messages name the
// block by position and label and never quote its contents: a misplaced private key must
// not come back in an error.

export interface PemBlock {
  label: string;
  der: Buffer;
  /** RFC 1421 headers (e.g. `Proc-Type: 4,ENCRYPTED` on legacy encrypted keys). */
  headers: Record<string, string>;
}

export type PemResult = { ok: true; blocks: PemBlock[] } | { ok: false; message: string };

const BEGIN = /-----BEGIN ([A-Z0-9 ]+)-----/g;
const END = /-----END ([A-Z0-9 ]+)-----/g;

/**
 * Each BEGIN line with the first END line after it. Searched forward only, so the time is
 * linear in the text: a lazy regular expression over the whole block rescanned the rest of
 * the text from every BEGIN without an END (quadratic; 0.3 s of CPU for one 64 KiB field).
 */
function* pemBlocks(text: string) {
  BEGIN.lastIndex = 0;
  for (let begin = BEGIN.exec(text); begin; begin = BEGIN.exec(text)) {
    END.lastIndex = BEGIN.lastIndex;
    const end = END.exec(text);
    if (!end) return;
    yield { index: begin.index, length: END.lastIndex - begin.index, label: begin[1], inner: text.slice(BEGIN.lastIndex, end.index), endLabel: end[1] };
    BEGIN.lastIndex = END.lastIndex;
  }
}

export function readPem(text: string): PemResult {
  const blocks: PemBlock[] = [];
  let consumed = '';
  let last = 0;
  for (const m of pemBlocks(text)) {
    const n = blocks.length + 1;
    consumed += text.slice(last, m.index);
    last = m.index + m.length;
    const { label, inner, endLabel } = m;
    if (label !== endLabel) return { ok: false, message: `PEM block ${n} begins as ${label} but ends as ${endLabel}` };
    const headers: Record<string, string> = {};
    let body = inner;
    const split = inner.match(/^\s*((?:[A-Za-z-]+:[^\n]*\r?\n)+)\r?\n([\s\S]*)$/);
    if (split) {
      for (const line of split[1].split(/\r?\n/).filter(Boolean)) {
        const at = line.indexOf(':');
        headers[line.slice(0, at).trim()] = line.slice(at + 1).trim();
      }
      body = split[2];
    }
    const b64 = body.replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0 || b64.length === 0) {
      return { ok: false, message: `PEM block ${n} (${label}) is not valid base64` };
    }
    blocks.push({ label, der: Buffer.from(b64, 'base64'), headers });
  }
  consumed += text.slice(last);
  if (/-----(BEGIN|END) /.test(consumed)) return { ok: false, message: 'has a PEM BEGIN or END line without its partner' };
  if (!blocks.length) return { ok: false, message: 'holds no PEM block (expected -----BEGIN ...----- and -----END ...----- lines)' };
  return { ok: true, blocks };
}
