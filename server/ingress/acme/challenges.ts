// The challenges being answered: HTTP-01 key authorizations by token and TLS-ALPN-01
// certificates by name. Kept here in memory and in the database, so that whichever instance
// the directory reaches answers (the one that placed the order may not be it).
import { SEALED_SETTING_PREFIX } from '../../store/sealed-settings.js';
import tls from 'node:tls';
import type { ServerContext } from '../../resources/context.js';
import { deleteSetting, putSetting, readSetting } from './settings-rows.js';

const httpKey = (token: string) => `acme_http01:${token}`;
const alpnKey = (name: string) => `${SEALED_SETTING_PREFIX}acme_alpn01:${name}`;
/** A token is base64url (RFC 8555 8.3); anything else is not looked up. */
const TOKEN = /^[A-Za-z0-9_-]{1,128}$/;

export class Challenges {
  private http = new Map<string, string>();
  private alpn = new Map<string, { cert: string; key: string }>();
  constructor(private ctx: ServerContext) {}

  async putHttp(token: string, keyAuthorization: string) {
    this.http.set(token, keyAuthorization);
    await putSetting(this.ctx, httpKey(token), keyAuthorization);
  }

  async removeHttp(token: string) {
    this.http.delete(token);
    await deleteSetting(this.ctx, httpKey(token));
  }

  /** The key authorization for a token, from memory or the database. */
  async httpAnswer(token: string): Promise<string | undefined> {
    if (!TOKEN.test(token)) return undefined;
    return this.http.get(token) ?? (await readSetting(this.ctx, httpKey(token)));
  }

  async putAlpn(name: string, cert: string, key: string) {
    this.alpn.set(name, { cert, key });
    await putSetting(this.ctx, alpnKey(name), this.ctx.box.seal(JSON.stringify({ cert, key })));
  }

  async removeAlpn(name: string) {
    this.alpn.delete(name);
    await deleteSetting(this.ctx, alpnKey(name));
  }

  /** The TLS-ALPN-01 certificate's context for a name, from memory or the database. */
  async alpnContext(name: string): Promise<tls.SecureContext | undefined> {
    let pair = this.alpn.get(name);
    if (!pair) {
      const sealed = await readSetting(this.ctx, alpnKey(name));
      if (sealed) pair = JSON.parse(this.ctx.box.open(sealed)) as { cert: string; key: string };
    }
    return pair ? tls.createSecureContext({ cert: pair.cert, key: pair.key }) : undefined;
  }
}
