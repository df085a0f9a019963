// PEM splitting and the SSH wire encoding: the edge cases real files bring.
import { describe, expect, it } from 'vitest';
import { readPem } from '../../server/crypto/pem.js';
import { SshReader, SshWireError, SshWriter } from '../../server/crypto/ssh-wire.js';

const block = (label: string, b64 = 'AQID', headers = '') => `-----BEGIN ${label}-----\n${headers}${b64}\n-----END ${label}-----\n`;

describe('readPem', () => {
  it('reads blocks in order and ignores text between them (bundles carry "subject=" lines)', () => {
    const r = readPem(`subject=CN = a\n${block('CERTIFICATE')}issuer=CN = b\n\n${block('CERTIFICATE', 'BAUG')}`);
    expect(r.ok && r.blocks.map((b) => [b.label, b.der.toString('hex')])).toEqual([['CERTIFICATE', '010203'], ['CERTIFICATE', '040506']]);
  });

  it('accepts CRLF line endings and base64 split over lines', () => {
    const r = readPem('-----BEGIN CERTIFICATE-----\r\nAQ\r\nID\r\n-----END CERTIFICATE-----\r\n');
    expect(r.ok && r.blocks[0].der.toString('hex')).toBe('010203');
  });

  it('reads RFC 1421 headers (legacy encrypted keys say so there)', () => {
    const r = readPem(block('RSA PRIVATE KEY', 'AQID', 'Proc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n'));
    expect(r.ok && r.blocks[0].headers).toEqual({ 'Proc-Type': '4,ENCRYPTED', 'DEK-Info': 'AES-128-CBC,00' });
    expect(r.ok && r.blocks[0].der.toString('hex')).toBe('010203');
  });

  it.each([
    { reason: 'no block at all', text: 'just text', msg: /no PEM block/ },
    { reason: 'different BEGIN and END labels', text: '-----BEGIN CERTIFICATE-----\nAQID\n-----END PRIVATE KEY-----\n', msg: /begins as CERTIFICATE but ends as PRIVATE KEY/ },
    { reason: 'a BEGIN without END', text: `${block('CERTIFICATE')}-----BEGIN CERTIFICATE-----\nAQID\n`, msg: /without its partner/ },
    { reason: 'characters outside base64', text: block('CERTIFICATE', 'AQ*D'), msg: /block 1 \(CERTIFICATE\) is not valid base64/ },
    { reason: 'base64 of the wrong length', text: block('CERTIFICATE', 'AQI'), msg: /not valid base64/ },
    { reason: 'an empty block', text: block('CERTIFICATE', ''), msg: /not valid base64/ },
  ])('refuses $reason', ({ text, msg }) => {
    const r = readPem(text);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toMatch(msg);
  });
});

describe('SSH wire encoding', () => {
  it.each([
    { reason: 'zero is the empty string', magnitude: '', wire: '00000000' },
    { reason: 'leading zero bytes are dropped', magnitude: '000102', wire: '000000020102' },
    { reason: 'a set top bit gets a zero byte (RFC 4251: positive)', magnitude: '80', wire: '000000020080' },
    { reason: 'RFC 4251 example 0x9a378f9b2e332a7', magnitude: '09a378f9b2e332a7', wire: '0000000809a378f9b2e332a7' },
  ])('mpint: $reason', ({ magnitude, wire }) => {
    const out = new SshWriter().mpint(Buffer.from(magnitude, 'hex')).toBuffer();
    expect(out.toString('hex')).toBe(wire);
    expect(new SshReader(out).mpint().toString('hex')).toBe(magnitude.replace(/^(00)+/, ''));
  });

  it('round-trips uint32, uint64 and strings', () => {
    const buf = new SshWriter().uint32(7).uint64(2n ** 64n - 1n).string('ssh-ed25519').string(Buffer.from([1, 2])).toBuffer();
    const r = new SshReader(buf);
    expect(r.uint32()).toBe(7);
    expect(buf.subarray(4, 12).toString('hex')).toBe('ffffffffffffffff');
    expect(buf.subarray(12).toString('hex')).toBe('0000000b7373682d65643235353139000000020102');
  });

  it('refuses truncated data and negative mpints', () => {
    expect(() => new SshReader(Buffer.from('00000005616263', 'hex')).string()).toThrow(SshWireError);
    expect(() => new SshReader(Buffer.from('000001', 'hex')).uint32()).toThrow(SshWireError);
    expect(() => new SshReader(Buffer.from('0000000180', 'hex')).mpint()).toThrow(/negative/);
  });
});
