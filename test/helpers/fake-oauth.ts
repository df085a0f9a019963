// A local stand-in for any of the eight OAuth providers, serving that provider's documented
// paths (from the edge's provider table, under one loopback origin as EDGEFORM_OAUTH_<P>_URL
// alone puts them) and answering user-info in that provider's documented shape (SHAPES below,
// written from each provider's reference, not from the edge's readers). The authorize
// endpoint approves the "current user" at once and sends the browser back with a code and the
// state; the token endpoint checks what RFC 6749 4.1.3 asks (client, code once, the same
// redirect_uri, grant_type) and the PKCE verifier when the provider takes one.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { OAUTH_PROVIDER_TABLE, oauthEndpoints, oauthSettings, settingName, type OAuthProviderName } from '../../server/ingress/auth/oauth-providers.js';

export interface FakeOAuthUser {
  id: number;
  login: string;
  name: string;
  email?: string;
  /** Whether the provider vouches for `email` (default true). */
  verified?: boolean;
  /** GitHub only: /user/emails, /user/orgs, /user/teams. */
  emails?: { email: string; primary: boolean; verified: boolean }[];
  orgs?: string[];
  teams?: string[];
}

/** User-info answers as each provider documents them. */
const SHAPES: Record<OAuthProviderName, (u: FakeOAuthUser) => unknown> = {
  github: (u) => ({ id: u.id, login: u.login, name: u.name, email: null, type: 'User' }),
  facebook: (u) => ({ id: String(u.id), name: u.name, ...(u.email && u.verified !== false ? { email: u.email } : {}) }),
  microsoft: (u) => ({ '@odata.context': 'https://graph.microsoft.com/v1.0/$metadata#users/$entity', id: `00000000-0000-0000-0000-${String(u.id).padStart(12, '0')}`, displayName: u.name, mail: u.email ?? null, userPrincipalName: `${u.login}@contoso.onmicrosoft.com` }),
  google: (u) => ({ sub: String(u.id), name: u.name, given_name: u.name.split(' ')[0], email: u.email, email_verified: u.verified !== false }),
  linkedin: (u) => ({ sub: `li-${u.id}`, name: u.name, given_name: u.name.split(' ')[0], email: u.email, email_verified: u.verified !== false, locale: { country: 'US', language: 'en' } }),
  gitlab: (u) => ({ id: u.id, username: u.login, name: u.name, state: 'active', email: u.email, confirmed_at: u.verified === false ? null : '2024-01-01T00:00:00.000Z' }),
  twitch: (u) => ({ data: [{ id: String(u.id), login: u.login, display_name: u.name, type: '', broadcaster_type: '', ...(u.email ? { email: u.email } : {}) }] }),
  amazon: (u) => ({ user_id: `amzn1.account.${u.id}`, name: u.name, email: u.email }),
};

/** GitHub's REST calls beyond /user (path under the API base). */
function githubMore(path: string, u: FakeOAuthUser): unknown {
  switch (path) {
    case '/user/emails': return u.emails ?? (u.email ? [{ email: u.email, primary: true, verified: u.verified !== false }] : []);
    case '/user/orgs': return (u.orgs ?? []).map((login) => ({ login }));
    case '/user/teams': return (u.teams ?? []).map((t) => ({ slug: t.split('/')[1], organization: { login: t.split('/')[0] } }));
    default: return undefined;
  }
}

export interface FakeOAuth {
  provider: OAuthProviderName;
  base: string;
  /** The API base as EDGEFORM_OAUTH_<P>_URL alone makes it (GitHub: <base>/api/v3). */
  api: string;
  /** The settings that point the edge at this fake. */
  env: Record<string, string>;
  signInAs(u: FakeOAuthUser): void;
  /** The last authorization request the browser made. */
  lastAuthorize?: URL;
  tokenCalls: number;
  userinfoCalls: number;
  /** 'down': every call answers 503; 'silent': calls are accepted and never answered. */
  mode: 'ok' | 'down' | 'silent';
  /** Forgets every access token issued (expired or revoked). */
  revokeTokens(): void;
  close(): Promise<void>;
}

interface Grant { user: FakeOAuthUser; redirectUri: string; challenge?: string }

export async function startFakeOAuth(provider: OAuthProviderName, app: { clientId: string; clientSecret: string }): Promise<FakeOAuth> {
  const spec = OAUTH_PROVIDER_TABLE[provider];
  let current: FakeOAuthUser | undefined;
  const codes = new Map<string, Grant>();
  const tokens = new Map<string, FakeOAuthUser>();
  const json = (res: http.ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  // GitHub answers token errors with 200 and an `error` member; the others with 400 (RFC 6749 5.2).
  const tokenError = (res: http.ServerResponse, error: string) => json(res, provider === 'github' ? 200 : 400, { error });
  let paths = { authorize: '', token: '', userinfo: '', api: '' };
  const fake: FakeOAuth = {
    provider, base: '', api: '', env: {}, tokenCalls: 0, userinfoCalls: 0, mode: 'ok',
    signInAs: (u) => { current = u; },
    revokeTokens: () => tokens.clear(),
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };

  function authorize(url: URL, res: http.ServerResponse) {
    fake.lastAuthorize = url;
    const q = url.searchParams;
    if (q.get('client_id') !== app.clientId || !current || (provider !== 'github' && q.get('response_type') !== 'code')) return json(res, 400, { error: 'invalid_request' });
    if (spec.pkce && (q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge'))) return json(res, 400, { error: 'invalid_request', error_description: 'PKCE required' });
    const code = randomBytes(8).toString('hex');
    codes.set(code, { user: current, redirectUri: q.get('redirect_uri') ?? '', challenge: q.get('code_challenge') ?? undefined });
    const back = new URL(q.get('redirect_uri')!);
    back.searchParams.set('code', code);
    back.searchParams.set('state', q.get('state') ?? '');
    res.writeHead(302, { location: back.href }).end();
  }

  function token(p: URLSearchParams, res: http.ServerResponse) {
    fake.tokenCalls++;
    const grant = codes.get(p.get('code') ?? '');
    codes.delete(p.get('code') ?? '');
    if (p.get('client_id') !== app.clientId || p.get('client_secret') !== app.clientSecret) return tokenError(res, provider === 'github' ? 'incorrect_client_credentials' : 'invalid_client');
    if (provider !== 'github' && p.get('grant_type') !== 'authorization_code') return tokenError(res, 'unsupported_grant_type');
    if (!grant || grant.redirectUri !== p.get('redirect_uri')) return tokenError(res, provider === 'github' ? 'bad_verification_code' : 'invalid_grant');
    if (grant.challenge && createHash('sha256').update(p.get('code_verifier') ?? '').digest('base64url') !== grant.challenge) return tokenError(res, 'invalid_grant');
    const accessToken = `${provider}_${randomBytes(8).toString('hex')}`;
    tokens.set(accessToken, grant.user);
    // Twitch documents `scope` as an array; the others as a space-separated string.
    const scope = provider === 'twitch' ? spec.scopes : spec.scopes.join(' ');
    return json(res, 200, { access_token: accessToken, token_type: 'bearer', expires_in: 3600, scope });
  }

  const server = http.createServer((req, res) => {
    if (fake.mode === 'silent') return;
    if (fake.mode === 'down') return json(res, 503, { error: 'temporarily_unavailable' });
    const url = new URL(req.url ?? '/', fake.base);
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (url.pathname === paths.authorize && req.method === 'GET') return authorize(url, res);
      if (url.pathname === paths.token) {
        if (spec.tokenByGet ? req.method !== 'GET' : req.method !== 'POST') return json(res, 405, { error: 'invalid_request' });
        return token(spec.tokenByGet ? url.searchParams : new URLSearchParams(body), res);
      }
      const user = tokens.get(String(req.headers.authorization ?? '').replace(/^Bearer /, ''));
      if (!user) return json(res, 401, { error: 'invalid_token' });
      if (provider === 'twitch' && req.headers['client-id'] !== app.clientId) return json(res, 401, { error: 'Unauthorized', status: 401, message: 'Client ID and OAuth token do not match' });
      if (url.pathname === paths.userinfo) {
        fake.userinfoCalls++;
        return json(res, 200, SHAPES[provider](user));
      }
      const more = provider === 'github' && url.pathname.startsWith(paths.api) ? githubMore(url.pathname.slice(paths.api.length), user) : undefined;
      return more === undefined ? json(res, 404, { message: 'Not Found' }) : json(res, 200, more);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  fake.env = { [settingName(provider, 'URL')]: fake.base };
  const s = oauthSettings(provider, fake.env);
  const ends = oauthEndpoints(s);
  fake.api = s.api;
  paths = { authorize: new URL(ends.authorize).pathname, token: new URL(ends.token).pathname, userinfo: new URL(ends.userinfo).pathname, api: new URL(s.api).pathname };
  return fake;
}
