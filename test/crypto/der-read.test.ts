// The DER reader, case by case: what it accepts, what it refuses, and why.
import { describe, expect, it } from 'vitest';
import { bitStringBits, childrenOf, DerError, integerHex, oidText, parseDer, readTlv, stringOf, TAG, timeOf, type Tlv } from '../../server/crypto/der-read.js';

const hex = (h: string) => Buffer.from(h.replace(/\s+/g, ''), 'hex');
const universal = (tag: number, value: Buffer): Tlv => ({ cls: 0, constructed: false, tag, value, raw: value });

describe('readTlv and parseDer', () => {
  it.each([
    { reason: 'short length', der: '04 03 616263', tag: 4, cls: 0, constructed: false, value: '616263' },
    { reason: 'long length, one byte', der: `04 81 80 ${'00'.repeat(128)}`, tag: 4, cls: 0, constructed: false, value: '00'.repeat(128) },
    { reason: 'long length, two bytes', der: `04 82 0100 ${'ab'.repeat(256)}`, tag: 4, cls: 0, constructed: false, value: 'ab'.repeat(256) },
    { reason: 'constructed SEQUENCE', der: '30 03 020101', tag: 16, cls: 0, constructed: true, value: '020101' },
    { reason: 'context-specific [3] constructed', der: 'a3 02 0500', tag: 3, cls: 2, constructed: true, value: '0500' },
    { reason: 'high tag number form', der: '9f 81 01 01 ff', tag: 129, cls: 2, constructed: false, value: 'ff' },
    { reason: 'empty value', der: '05 00', tag: 5, cls: 0, constructed: false, value: '' },
  ])('reads $reason', ({ der, tag, cls, constructed, value }) => {
    const tlv = parseDer(hex(der));
    expect(tlv).toMatchObject({ tag, cls, constructed });
    expect(tlv.value.toString('hex')).toBe(value);
    expect(tlv.raw.toString('hex')).toBe(der.replace(/\s+/g, ''));
  });

  it.each([
    { reason: 'indefinite length (BER, not DER)', der: '30 80 0000' },
    { reason: 'a value shorter than its length', der: '04 05 6162' },
    { reason: 'a length field cut short', der: '04 82 01' },
    { reason: 'a length over four bytes', der: '04 85 0000000001 00' },
    { reason: 'a lone tag byte', der: '04' },
    { reason: 'trailing bytes after the element', der: '05 00 00' },
    { reason: 'a tag number over four bytes', der: '1f 81 81 81 81 01 00' },
  ])('refuses $reason', ({ der }) => {
    expect(() => parseDer(hex(der))).toThrow(DerError);
  });

  it('walks siblings and children', () => {
    const buf = hex('30 06 020101 020102 05 00');
    const { tlv, next } = readTlv(buf, 0);
    expect(next).toBe(8);
    expect(childrenOf(tlv).map((c) => c.value.toString('hex'))).toEqual(['01', '02']);
    expect(readTlv(buf, next).tlv.tag).toBe(TAG.NULL);
    expect(() => childrenOf(parseDer(hex('020101')))).toThrow(/constructed/);
  });
});

describe('values', () => {
  it.each([
    { reason: 'key usage extension id', value: '551d0f', oid: '2.5.29.15' },
    { reason: 'multi-byte arcs (sha256WithRSAEncryption)', value: '2a864886f70d01010b', oid: '1.2.840.113549.1.1.11' },
    { reason: 'first arc 2 with a second arc over 39', value: '883703', oid: '2.999.3' },
    { reason: 'first arc 0', value: '0927', oid: '0.9.39' },
    { reason: 'an arc beyond 2^53 (2^63 + 127)', value: '2b 8180808080808080807f', oid: '1.3.9223372036854775935' },
  ])('OID: $reason', ({ value, oid }) => {
    expect(oidText(hex(value))).toBe(oid);
  });

  it('refuses a truncated or empty OID', () => {
    expect(() => oidText(hex('2a86'))).toThrow(DerError);
    expect(() => oidText(Buffer.alloc(0))).toThrow(DerError);
  });

  it.each([
    { reason: 'a sign byte before a high bit', value: '00ff', hex: 'ff' },
    { reason: 'zero', value: '00', hex: '0' },
    { reason: 'an inner zero byte kept', value: '0100', hex: '100' },
    { reason: 'a 20-byte serial', value: '3472eab284386d2d1f4d28e50e472cbc909e095b', hex: '3472eab284386d2d1f4d28e50e472cbc909e095b' },
  ])('INTEGER as hex: $reason', ({ value, hex: want }) => {
    expect(integerHex(hex(value))).toBe(want);
  });

  it.each([
    { reason: 'digitalSignature and keyEncipherment (5 unused bits)', value: '05a0', bits: [true, false, true] },
    { reason: 'keyCertSign and cRLSign (1 unused bit)', value: '0106', bits: [false, false, false, false, false, true, true] },
    { reason: 'decipherOnly in a second byte', value: '07 0080', bits: [false, false, false, false, false, false, false, false, true] },
    { reason: 'no bits', value: '00', bits: [] },
  ])('BIT STRING: $reason', ({ value, bits }) => {
    expect(bitStringBits(hex(value))).toEqual(bits);
  });

  it('refuses a BIT STRING with more than 7 unused bits', () => {
    expect(() => bitStringBits(hex('08ff'))).toThrow(DerError);
  });

  it.each([
    { reason: 'UTF8String', tag: TAG.UTF8_STRING, value: Buffer.from('Société', 'utf8'), text: 'Société' },
    { reason: 'PrintableString', tag: TAG.PRINTABLE_STRING, value: Buffer.from('US'), text: 'US' },
    { reason: 'IA5String', tag: TAG.IA5_STRING, value: Buffer.from('a@b.c'), text: 'a@b.c' },
    { reason: 'T61String read as Latin-1', tag: TAG.T61_STRING, value: hex('e9'), text: 'é' },
    { reason: 'BMPString (UTF-16BE)', tag: TAG.BMP_STRING, value: hex('00e9 20ac'), text: 'é€' },
    { reason: 'UniversalString (UTF-32BE)', tag: TAG.UNIVERSAL_STRING, value: hex('0001f600'), text: '😀' },
  ])('string: $reason', ({ tag, value, text }) => {
    expect(stringOf(universal(tag, value))).toBe(text);
  });

  it('refuses a non-string or a malformed BMPString', () => {
    expect(() => stringOf(universal(TAG.INTEGER, hex('01')))).toThrow(DerError);
    expect(() => stringOf(universal(TAG.BMP_STRING, hex('00')))).toThrow(DerError);
  });

  it.each([
    { reason: 'UTCTime in the 2000s', tag: TAG.UTC_TIME, text: '491231235959Z', iso: '2049-12-31T23:59:59.000Z' },
    { reason: 'UTCTime 50 means 1950', tag: TAG.UTC_TIME, text: '500101000000Z', iso: '1950-01-01T00:00:00.000Z' },
    { reason: 'GeneralizedTime', tag: TAG.GENERALIZED_TIME, text: '20500101000000Z', iso: '2050-01-01T00:00:00.000Z' },
    { reason: 'GeneralizedTime with a fraction (dropped)', tag: TAG.GENERALIZED_TIME, text: '20260102030405.123Z', iso: '2026-01-02T03:04:05.000Z' },
    { reason: 'a leap day', tag: TAG.GENERALIZED_TIME, text: '20280229120000Z', iso: '2028-02-29T12:00:00.000Z' },
  ])('time: $reason', ({ tag, text, iso }) => {
    expect(timeOf(universal(tag, Buffer.from(text))).toISOString()).toBe(iso);
  });

  it.each([
    { reason: 'a local time without Z', tag: TAG.UTC_TIME, text: '260102030405' },
    { reason: 'February 30', tag: TAG.GENERALIZED_TIME, text: '20260230000000Z' },
    { reason: 'hour 24', tag: TAG.GENERALIZED_TIME, text: '20260101240000Z' },
    { reason: 'a GeneralizedTime under the UTCTime tag', tag: TAG.UTC_TIME, text: '20260101000000Z' },
  ])('time refused: $reason', ({ tag, text }) => {
    expect(() => timeOf(universal(tag, Buffer.from(text)))).toThrow(DerError);
  });
});
