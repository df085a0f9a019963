// Encryption at rest for write-only values (private keys, module secrets): AES-256-GCM
// under the server key. The key comes from EDGEFORM_SECRET_KEY, or from a key file that
// is generated with owner-only permissions on first start; never from the database.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export class SecretBox {
  private constructor(private readonly key: Buffer) {}

  static fromKey(text: string): SecretBox {
    const raw = /^[0-9a-f]{64}$/i.test(text.trim()) ? Buffer.from(text.trim(), 'hex') : Buffer.from(text.trim(), 'base64');
    if (raw.length !== 32) throw new Error('the secret key must be 32 bytes, written as 64 hex digits or base64');
    return new SecretBox(raw);
  }

  /** Reads the key file, creating it (mode 0600) with a fresh random key when absent. */
  static fromFile(file: string): SecretBox {
    if (!fs.existsSync(file)) {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
    }
    return SecretBox.fromKey(fs.readFileSync(file, 'utf8'));
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
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1') throw new Error(`unknown sealed format ${version}`);
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
  }
}
