// The SSH wire encoding (RFC 4251 section 5): uint32, uint64, string and mpint, written
// and read. Keys, signatures and certificates are all built from these.

export class SshWireError extends Error {}

export class SshWriter {
  private readonly parts: Buffer[] = [];

  uint32(n: number): this {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    this.parts.push(b);
    return this;
  }

  uint64(n: bigint): this {
    const b = Buffer.alloc(8);
    b.writeBigUInt64BE(n);
    this.parts.push(b);
    return this;
  }

  string(s: Buffer | string): this {
    const b = typeof s === 'string' ? Buffer.from(s, 'utf8') : s;
    return this.uint32(b.length).raw(b);
  }

  /** A non-negative integer from its big-endian magnitude: minimal, with a 0 byte when the top bit is set. */
  mpint(magnitude: Buffer): this {
    let i = 0;
    while (i < magnitude.length && magnitude[i] === 0) i++;
    const trimmed = magnitude.subarray(i);
    return this.string(trimmed.length && trimmed[0] & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed);
  }

  raw(b: Buffer): this {
    this.parts.push(b);
    return this;
  }

  toBuffer(): Buffer {
    return Buffer.concat(this.parts);
  }
}

export class SshReader {
  private p = 0;
  constructor(private readonly buf: Buffer) {}

  private take(n: number): Buffer {
    if (this.p + n > this.buf.length) throw new SshWireError('truncated SSH data');
    const out = this.buf.subarray(this.p, this.p + n);
    this.p += n;
    return out;
  }

  uint32(): number {
    return this.take(4).readUInt32BE();
  }

  uint64(): bigint {
    return this.take(8).readBigUInt64BE();
  }

  /** Bytes read so far. */
  get offset(): number {
    return this.p;
  }

  string(): Buffer {
    return this.take(this.uint32());
  }

  text(): string {
    return this.string().toString('utf8');
  }

  /** An mpint's magnitude (refusing negative values, which no key has). */
  mpint(): Buffer {
    const b = this.string();
    if (b.length && b[0] & 0x80) throw new SshWireError('negative mpint');
    let i = 0;
    while (i < b.length && b[i] === 0) i++;
    return b.subarray(i);
  }

  get done(): boolean {
    return this.p === this.buf.length;
  }
}
