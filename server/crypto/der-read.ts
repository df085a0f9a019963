// A minimal DER reader (der.ts is the writer): enough of X.690 to walk a certificate's
// names, validity and extensions. node:crypto's X509Certificate parses certificates but
// does not expose key usages, extended key usages or raw names, so those are read here.
// Every read is bounds-checked and throws DerError on malformed input; nothing is guessed.

export class DerError extends Error {}

/** One tag-length-value element. `value` is a view into the input. */
export interface Tlv {
  /** 0 universal, 1 application, 2 context-specific, 3 private. */
  cls: number;
  constructed: boolean;
  /** Tag number within its class. */
  tag: number;
  value: Buffer;
  /** The whole element, header included (what a signature covers). */
  raw: Buffer;
}

export const UNIVERSAL = 0;
export const CONTEXT = 2;

export const TAG = {
  BOOLEAN: 1,
  INTEGER: 2,
  BIT_STRING: 3,
  OCTET_STRING: 4,
  NULL: 5,
  OID: 6,
  UTF8_STRING: 12,
  SEQUENCE: 16,
  SET: 17,
  PRINTABLE_STRING: 19,
  T61_STRING: 20,
  IA5_STRING: 22,
  UTC_TIME: 23,
  GENERALIZED_TIME: 24,
  UNIVERSAL_STRING: 28,
  BMP_STRING: 30,
} as const;

/** Reads the element that starts at `offset`; returns it and the offset after it. */
export function readTlv(buf: Buffer, offset = 0): { tlv: Tlv; next: number } {
  let p = offset;
  const need = (n: number) => {
    if (p + n > buf.length) throw new DerError('truncated DER element');
  };
  need(2);
  const first = buf[p++];
  let tag = first & 0x1f;
  if (tag === 0x1f) {
    tag = 0;
    for (let i = 0; ; i++) {
      need(1);
      const b = buf[p++];
      if (i === 4) throw new DerError('DER tag number too large');
      tag = tag * 128 + (b & 0x7f);
      if (!(b & 0x80)) break;
    }
  }
  need(1);
  let length = buf[p++];
  if (length === 0x80) throw new DerError('indefinite length is not DER');
  if (length & 0x80) {
    const n = length & 0x7f;
    if (n > 4) throw new DerError('DER length too large');
    need(n);
    length = 0;
    for (let i = 0; i < n; i++) length = length * 256 + buf[p++];
  }
  need(length);
  const tlv: Tlv = { cls: first >> 6, constructed: (first & 0x20) !== 0, tag, value: buf.subarray(p, p + length), raw: buf.subarray(offset, p + length) };
  return { tlv, next: p + length };
}

/** Parses exactly one element filling the whole buffer. */
export function parseDer(buf: Buffer): Tlv {
  const { tlv, next } = readTlv(buf, 0);
  if (next !== buf.length) throw new DerError('trailing bytes after DER element');
  return tlv;
}

/** The elements inside a constructed element. */
export function childrenOf(tlv: Tlv): Tlv[] {
  if (!tlv.constructed) throw new DerError('expected a constructed DER element');
  const out: Tlv[] = [];
  for (let p = 0; p < tlv.value.length; ) {
    const { tlv: child, next } = readTlv(tlv.value, p);
    out.push(child);
    p = next;
  }
  return out;
}

/** Asserts a universal element of the given tag and returns it. */
export function expectTag(tlv: Tlv | undefined, tag: number, what: string): Tlv {
  if (!tlv || tlv.cls !== UNIVERSAL || tlv.tag !== tag) throw new DerError(`expected ${what}`);
  return tlv;
}

export const isContext = (tlv: Tlv | undefined, tag: number): boolean => !!tlv && tlv.cls === CONTEXT && tlv.tag === tag;

/** Dotted-decimal text of an OBJECT IDENTIFIER's contents. */
export function oidText(value: Buffer): string {
  if (!value.length) throw new DerError('empty OBJECT IDENTIFIER');
  const arcs: bigint[] = [];
  let cur = 0n;
  for (let i = 0; i < value.length; i++) {
    cur = (cur << 7n) | BigInt(value[i] & 0x7f);
    if (!(value[i] & 0x80)) {
      arcs.push(cur);
      cur = 0n;
    } else if (i === value.length - 1) {
      throw new DerError('truncated OBJECT IDENTIFIER');
    }
  }
  const first = arcs[0] < 80n ? arcs[0] / 40n : 2n;
  return [first, arcs[0] - first * 40n, ...arcs.slice(1)].join('.');
}

/** The unsigned magnitude of an INTEGER as lowercase hex without leading zeros ("0" for zero). */
export function integerHex(value: Buffer): string {
  if (!value.length) throw new DerError('empty INTEGER');
  const hex = value.toString('hex').replace(/^0+/, '');
  return hex || '0';
}

/** The bits of a BIT STRING, most significant first (bit 0 is the first named bit). */
export function bitStringBits(value: Buffer): boolean[] {
  if (!value.length || value[0] > 7) throw new DerError('malformed BIT STRING');
  const unused = value[0];
  const bits: boolean[] = [];
  for (let i = 1; i < value.length; i++) for (let b = 7; b >= 0; b--) bits.push(((value[i] >> b) & 1) === 1);
  return bits.slice(0, bits.length - unused);
}

/** The text of a directory string (UTF8, Printable, IA5, T61, BMP or Universal). */
export function stringOf(tlv: Tlv): string {
  if (tlv.cls !== UNIVERSAL) throw new DerError('expected a string');
  switch (tlv.tag) {
    case TAG.UTF8_STRING:
      return tlv.value.toString('utf8');
    case TAG.PRINTABLE_STRING:
    case TAG.IA5_STRING:
    case 18: // NumericString
    case 26: // VisibleString
      return tlv.value.toString('latin1');
    case TAG.T61_STRING:
      // Certificates in the wild put Latin-1 here; that reading is what browsers do too.
      return tlv.value.toString('latin1');
    case TAG.BMP_STRING: {
      if (tlv.value.length % 2) throw new DerError('malformed BMPString');
      const swapped = Buffer.from(tlv.value);
      swapped.swap16();
      return swapped.toString('utf16le');
    }
    case TAG.UNIVERSAL_STRING: {
      if (tlv.value.length % 4) throw new DerError('malformed UniversalString');
      let s = '';
      for (let i = 0; i < tlv.value.length; i += 4) s += String.fromCodePoint(tlv.value.readUInt32BE(i));
      return s;
    }
    default:
      throw new DerError(`unsupported string type ${tlv.tag}`);
  }
}

/** A UTCTime or GeneralizedTime as a Date (whole seconds, UTC; fractions dropped). */
export function timeOf(tlv: Tlv): Date {
  const text = tlv.value.toString('latin1');
  let m: RegExpMatchArray | null;
  let year: number;
  if (tlv.tag === TAG.UTC_TIME && (m = text.match(/^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/))) {
    // RFC 5280 4.1.2.5.1: two-digit years 50..99 are 19xx, 00..49 are 20xx.
    year = Number(m[1]) >= 50 ? 1900 + Number(m[1]) : 2000 + Number(m[1]);
  } else if (tlv.tag === TAG.GENERALIZED_TIME && (m = text.match(/^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(?:\.\d+)?Z$/))) {
    year = Number(m[1]);
  } else {
    throw new DerError(`malformed time "${text}"`);
  }
  const [, , mo, d, h, mi, s] = m.map(Number);
  const date = new Date(Date.UTC(2000, mo - 1, d, h, mi, s));
  date.setUTCFullYear(year, mo - 1, d);
  if (date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d || h > 23 || mi > 59 || s > 59) throw new DerError(`malformed time "${text}"`);
  return date;
}
