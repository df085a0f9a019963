// A minimal DER (ASN.1 distinguished encoding) writer: just the types X.509 certificates
// need. node:crypto parses certificates but cannot build them, so we encode by hand.

/** One encoded TLV. */
export type Der = Buffer;

function lengthOf(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

export const tlv = (tag: number, content: Buffer): Der => Buffer.concat([Buffer.from([tag]), lengthOf(content.length), content]);

export const sequence = (...items: Der[]) => tlv(0x30, Buffer.concat(items));
export const set = (...items: Der[]) => tlv(0x31, Buffer.concat([...items].sort(Buffer.compare)));
export const nul = () => tlv(0x05, Buffer.alloc(0));
export const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0]));
export const octetString = (b: Buffer) => tlv(0x04, b);
/** A BIT STRING of whole bytes (no unused bits). */
export const bitString = (b: Buffer) => tlv(0x03, Buffer.concat([Buffer.from([0]), b]));
export const utf8String = (s: string) => tlv(0x0c, Buffer.from(s, 'utf8'));
export const printableString = (s: string) => tlv(0x13, Buffer.from(s, 'ascii'));
export const ia5String = (s: string) => tlv(0x16, Buffer.from(s, 'ascii'));
/** `[n]` EXPLICIT, constructed. */
export const explicit = (n: number, inner: Der) => tlv(0xa0 | n, inner);
/** `[n]` IMPLICIT over a primitive value. */
export const implicitPrimitive = (n: number, content: Buffer) => tlv(0x80 | n, content);

/** A non-negative INTEGER from big-endian bytes (a leading zero keeps it positive). */
export function unsignedInteger(bytes: Buffer): Der {
  let b = bytes;
  while (b.length > 1 && b[0] === 0 && b[1] < 0x80) b = b.subarray(1);
  if (b.length === 0) b = Buffer.from([0]);
  return tlv(0x02, b[0] & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

export const smallInteger = (n: number) => {
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return unsignedInteger(Buffer.from(bytes));
};

export function oid(dotted: string): Der {
  const parts = dotted.split('.').map(Number);
  const out = [40 * parts[0] + parts[1]];
  for (const p of parts.slice(2)) {
    const chunk: number[] = [p & 0x7f];
    for (let v = Math.floor(p / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift((v & 0x7f) | 0x80);
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

/** UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 4.1.2.5). */
export function time(d: Date): Der {
  const iso = d.toISOString().replace(/\.\d{3}Z$/, 'Z').replace(/[-:T]/g, '');
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(iso.slice(2), 'ascii')) : tlv(0x18, Buffer.from(iso, 'ascii'));
}
