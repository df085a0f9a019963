// basic_auth: HTTP Basic authentication (RFC 7617) against the credentials an agent gave for its
// endpoint (the SDK's basicAuth, or the legacy Auth "user:password"; gateway/v2/bind.ts). No
// route module of the API has it: only agents' endpoints run it. A request without a credential
// that matches gets 401 with `WWW-Authenticate: Basic realm="edgeform"` (ERR_SERVICE_788), which
// makes a browser ask for one; one that matches goes on, its Authorization header untouched.
// Each credential is kept as a SHA-256 digest of "user:password", and the presented one is
// compared with every one of them in constant time (no early exit), so the answer's timing
// tells neither a username nor how much of a password matched.
import { createHash, timingSafeEqual } from 'node:crypto';
import { errorAnswer } from '../http/error-page.js';
import type { FilterFactory } from '../types.js';

/** The service's bounds: at most 10 credentials, passwords of 8 to 128 characters, usernames of at most 128. */
export const BASIC_AUTH_LIMITS = { credentials: 10, password: [8, 128] as const, username: 128 };

export const REALM = 'edgeform';

/** An Authorization header longer than this is refused without being decoded. */
const MAX_HEADER = 1024;

const digest = (userPass: string | Buffer) => createHash('sha256').update(userPass).digest();

/** The credential an Authorization header presents, as its digest, or undefined when it presents none. */
function presented(header: string | string[] | undefined): Buffer | undefined {
  if (typeof header !== 'string' || header.length > MAX_HEADER) return undefined;
  const m = /^basic[ \t]+([A-Za-z0-9+/]+=*)[ \t]*$/i.exec(header);
  if (!m) return undefined;
  const decoded = Buffer.from(m[1], 'base64');
  return decoded.includes(0x3a) ? digest(decoded) : undefined;
}

export const basicAuth: FilterFactory = (config) => {
  const digests = ((config?.credentials ?? []) as { username: string; password: string }[]).map((c) => digest(`${c.username}:${c.password}`));
  // No credential configured: nothing can match, so everything is refused (never waved through).
  const refusal = errorAnswer('ERR_SERVICE_788', 'This endpoint requires a username and password (HTTP basic authentication).', { 'www-authenticate': `Basic realm="${REALM}", charset="UTF-8"` });
  return {
    async handle(ex, next) {
      const got = presented(ex.req.headers.authorization);
      let ok = 0;
      if (got) for (const d of digests) ok |= timingSafeEqual(got, d) ? 1 : 0;
      if (!ok) {
        ex.answer(refusal);
        return;
      }
      await next();
    },
  };
};
