// Encryption at rest for write-only values (private keys, module secrets): AES-256-GCM
// under the server key. The key comes from EDGEFORM_SECRET_KEY or a key file, never from
// the database, which records only a check value of it (secret-key.ts decides which key).
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';

/** What the check value is an HMAC of: fixed, so equal keys give equal checks. */
const CHECK_LABEL = 'edgeform secret key check v1';

export class SecretBox {
  private constructor(
    private readonly key: Buffer,
    /** The key being rotated away from: opens what some instance still sealed with it. */
    private readonly previous?: SecretBox,
  ) {}

  static fromKey(text: string): SecretBox {
    const raw = /^[0-9a-f]{64}$/i.test(text.trim()) ? Buffer.from(text.trim(), 'hex') : Buffer.from(text.trim(), 'base64');
    if (raw.length !== 32) throw new Error('the secret key must be 32 bytes, written as 64 hex digits or base64');
    return new SecretBox(raw);
  }

  /** The same key, opening values sealed under `previous` too. */
  withPrevious(previous: SecretBox | undefined): SecretBox {
    return previous ? new SecretBox(this.key, previous) : this;
  }

  /** `v1:<hex HMAC-SHA256 of a fixed label under the key>`: tells keys apart without revealing them. */
  check(): string {
    return `v1:${createHmac('sha256', this.key).update(CHECK_LABEL).digest('hex')}`;
  }

  /** The key as a key file holds it (64 hex digits). */
  exportKey(): string {
    return this.key.toString('hex');
  }

  /** A 32-byte key for one purpose (`info`), derived from the server key (HKDF-SHA256); never stored. */
  derive(info: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), `edgeform ${info}`, 32));
  }

  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64'), cipher.getAuthTag().toString('base64'), body.toString('base64')].join('.');
  }

  open(sealed: string): string {
    try {
      return this.openOwn(sealed);
    } catch (e) {
      if (this.previous) return this.previous.open(sealed);
      throw e;
    }
  }

  /** True when this key (not a previous one) opens the value. */
  canOpen(sealed: string): boolean {
    try {
      this.openOwn(sealed);
      return true;
    } catch {
      return false;
    }
  }

  private openOwn(sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1') throw new Error(`unknown sealed format ${version}`);
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
  }
}
