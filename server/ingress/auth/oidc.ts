// OpenID Connect at the edge with openid-client: the issuer's discovery document, the
// authorization-code flow with PKCE (S256), state and nonce, and the ID token verified
// (signature against the issuer's JWKS, issuer, audience, nonce, expiry) before a session is
// made. An issuer over plain http is accepted only on a loopback address (for local tests).
// An agent's endpoint may also give allow lists (email_addresses, email_domains: the SDK's
// allow_emails and allow_domains; not in the API's oidc module): they are checked as the oauth
// module checks its own, against the user's email when the provider does not say it is unverified.
import * as client from 'openid-client';
import type { FullDoc, IngressDeps } from '../types.js';
import { oauthAllows } from './oauth.js';
import { SignInRefused, type SignInProvider } from './sign-in-filter.js';

/** Seconds the edge waits for the provider (discovery, token, JWKS, UserInfo) before ERR_SERVICE_803. */
const timeoutSeconds = (deps: IngressDeps) => (deps.signInTimeoutMs ?? 10_000) / 1000;
/** Discovery results kept per issuer and client; a failure is forgotten so the next request retries. */
const configs = new Map<string, Promise<client.Configuration>>();

const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost']);
export const isLoopbackHttp = (u: URL) => u.protocol === 'http:' && (LOOPBACK.has(u.hostname) || u.hostname.startsWith('127.'));

function discover(issuer: string, clientId: string, secret: string, timeout: number): Promise<client.Configuration> {
  const key = JSON.stringify([issuer, clientId, secret, timeout]);
  let p = configs.get(key);
  if (!p) {
    const url = new URL(issuer);
    const insecure = isLoopbackHttp(url);
    p = client.discovery(url, clientId, { client_secret: secret }, client.ClientSecretPost(secret), {
      timeout,
      ...(insecure ? { execute: [client.allowInsecureRequests] } : {}),
    });
    p.then((c) => { c.timeout = timeout; }, () => configs.delete(key));
    configs.set(key, p);
  }
  return p;
}

/** What the provider said no to (as opposed to not answering): a refusal with ERR_SERVICE_802. */
function refusedByProtocol(e: unknown): boolean {
  return e instanceof client.ResponseBodyError || e instanceof client.AuthorizationResponseError || e instanceof client.ClientError;
}

export function oidcProvider(config: FullDoc[string], deps: IngressDeps): SignInProvider {
  const issuer = String(config.issuer);
  const listed = (config.email_addresses?.length ?? 0) + (config.email_domains?.length ?? 0) > 0;
  // With allow lists the email is needed: the email scope is asked for too.
  const scopes = [...new Set(['openid', ...(listed ? ['email'] : []), ...((config.scopes as string[] | undefined) ?? [])])];
  return {
    name: 'oidc',
    async start(redirectUri, { state }) {
      const conf = await discover(issuer, config.client_id, config.client_secret, timeoutSeconds(deps));
      const verifier = client.randomPKCECodeVerifier();
      const nonce = client.randomNonce();
      const url = client.buildAuthorizationUrl(conf, {
        redirect_uri: redirectUri, scope: scopes.join(' '), state, nonce,
        code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
      });
      return { url: url.href, flow: { verifier, nonce } };
    },
    async finish(callbackUrl, flow) {
      const conf = await discover(issuer, config.client_id, config.client_secret, timeoutSeconds(deps));
      try {
        const tokens = await client.authorizationCodeGrant(conf, callbackUrl, { pkceCodeVerifier: flow.verifier, expectedNonce: flow.nonce, expectedState: flow.state, idTokenExpected: true });
        const claims = tokens.claims();
        if (!claims?.sub) throw new SignInRefused('ERR_SERVICE_802', 'The identity provider returned no ID token subject.');
        let info: Record<string, unknown> = claims;
        // Many providers put email and name only in UserInfo (OIDC Core 5.4); ask it then.
        if ((claims.email === undefined || claims.name === undefined || listed && claims.email_verified === undefined) && conf.serverMetadata().userinfo_endpoint) {
          info = { ...(await client.fetchUserInfo(conf, tokens.access_token, claims.sub)), ...claims };
        }
        const text = (v: unknown) => (typeof v === 'string' ? v : undefined);
        const email = text(info.email);
        if (listed && !oauthAllows(config, { emails: email && info.email_verified !== false ? [email] : [] })) {
          throw new SignInRefused('ERR_SERVICE_804', `The user ${email ?? claims.sub} is not allowed by this endpoint (its allowed emails and email domains${email && info.email_verified === false ? '; the provider says this email is not verified' : ''}).`);
        }
        return { subject: claims.sub, email, name: text(info.name) };
      } catch (e) {
        if (e instanceof SignInRefused) throw e;
        if (refusedByProtocol(e)) {
          deps.log({ level: 'warn', msg: 'ingress oidc: the provider answer did not verify', reason: (e as Error).message });
          throw new SignInRefused('ERR_SERVICE_802', 'The identity provider\'s answer did not verify, so the sign-in was refused; open the page you wanted again.');
        }
        throw e;
      }
    },
  };
}
