// Providers that send no signature but a shared secret: a token header (GitLab, Okta) or HTTP
// Basic credentials set on the webhook URL (Postmark, Opsgenie, VMware Workspace ONE).
import { sameText } from './hmac.js';
import { missing, invalid, OK, type Scheme } from './types.js';

export const tokenHeader = (name: string): Scheme => ({
  verify(r, secret) {
    const v = r.headers[name];
    if (!v) return missing(`the ${name} header is missing`);
    return sameText(v, secret) ? OK : invalid(`the ${name} header does not equal the configured secret`);
  },
});

/** The secret is `username:password` (or `username::password`, as the service spells it). */
export const basicAuth: Scheme = {
  verify(r, secret) {
    const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(r.headers.authorization ?? '');
    if (!m) return missing('the Authorization header with Basic credentials is missing');
    const want = secret.includes('::') ? secret.replace('::', ':') : secret;
    return sameText(Buffer.from(m[1], 'base64').toString('utf8'), want) ? OK : invalid('the Basic credentials do not match the configured secret');
  },
};
