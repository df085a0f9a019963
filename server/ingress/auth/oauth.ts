// OAuth 2.0 sign-in at the edge for any row of the provider table (oauth-providers.ts): the
// browser to the provider's authorize endpoint (with a PKCE S256 challenge where the
// provider supports it), the code exchanged at its token endpoint with the app's client id
// and secret, then its user-info endpoint for who the user is; the route's allow lists
// decide. With auth_check_interval the access token is kept sealed in the session and the
// user-info call is repeated at each check.
import * as client from 'openid-client';
import type { FullDoc } from '../types.js';
import { OAUTH_PROVIDER_TABLE, oauthEndpoints, type OAuthSettings, type ProviderUser } from './oauth-providers.js';
import type { Identity } from './session.js';
import { SignInAgain, SignInRefused, type SignInProvider } from './sign-in-filter.js';

export interface OAuthApp { clientId: string; clientSecret: string }

/** What a provider adds to its user-info answer (GitHub: verified emails, organisations, teams). */
export interface OAuthExtras {
  scopes?: readonly string[];
  more?(get: ApiGet, user: ProviderUser): Promise<Partial<ProviderUser> & { orgs?: string[]; teams?: string[] }>;
}

/** A GET of the provider's API with the user's token: JSON, or a thrown error (401: TokenRefused). */
export type ApiGet = <T>(url: string) => Promise<T>;

class TokenRefused extends Error {}

const lower = (v: unknown) => ((v as string[] | undefined) ?? []).map((s) => String(s).toLowerCase());

/** Whether the user passes the route's lists: the email lists together, the organisation and team lists together; each set group must pass. */
export function oauthAllows(m: FullDoc[string], u: { emails: string[]; orgs?: string[]; teams?: string[] }): boolean {
  const addresses = lower(m.email_addresses);
  const domains = lower(m.email_domains).map((d) => d.replace(/^@/, ''));
  const orgs = lower(m.organizations);
  const teams = lower(m.teams);
  const emails = u.emails.map((e) => e.toLowerCase());
  const byEmail = addresses.length + domains.length === 0 || emails.some((e) => addresses.includes(e) || domains.includes(e.slice(e.lastIndexOf('@') + 1)));
  const byOrg = orgs.length + teams.length === 0 || (u.orgs ?? []).some((o) => orgs.includes(o.toLowerCase())) || (u.teams ?? []).some((t) => teams.includes(t.toLowerCase()));
  return byEmail && byOrg;
}

/** A token endpoint answer: JSON as RFC 6749 5.1 says, or the form encoding older GitHub answers in. */
async function tokenAnswer(res: Response): Promise<Record<string, unknown>> {
  const text = await res.text();
  if ((res.headers.get('content-type') ?? '').includes('application/x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(text));
  try {
    const body = JSON.parse(text) as unknown;
    if (body && typeof body === 'object' && !Array.isArray(body)) return body as Record<string, unknown>;
  } catch { /* below */ }
  throw new Error(`the token endpoint answered ${res.status} with something other than JSON`);
}

/** `config` is the route's oauth module (auth_check_interval), `m` its provider member (scopes and allow lists). */
export function oauthProvider(config: FullDoc[string], m: FullDoc[string], app: OAuthApp, s: OAuthSettings, timeoutMs: () => number): SignInProvider {
  const spec = OAUTH_PROVIDER_TABLE[s.provider];
  const extras = spec.extras?.(m, s.api) ?? {};
  const ends = oauthEndpoints(s);
  const scopes = [...new Set([...spec.scopes, ...(extras.scopes ?? []), ...((m.scopes as string[]) ?? [])])];
  const keepToken = Number(config?.auth_check_interval) > 0;
  const fetchOpts = (init: RequestInit = {}): RequestInit => ({ ...init, redirect: 'error', signal: AbortSignal.timeout(timeoutMs()) });

  const get = (token: string): ApiGet => async <T>(url: string) => {
    const res = await fetch(url, fetchOpts({ headers: { accept: 'application/json', 'user-agent': 'edgeform-ingress', ...spec.apiHeaders?.(app.clientId), authorization: `Bearer ${token}` } }));
    if (res.status === 401) throw new TokenRefused(`${spec.label} no longer accepts the access token (${new URL(url).pathname})`);
    if (!res.ok) throw new Error(`${spec.label} answered ${res.status} to ${new URL(url).pathname}`);
    return (await res.json()) as T;
  };

  /** Who holds `token`, refused (ERR_SERVICE_804) unless the route's lists admit them. */
  async function lookup(token: string): Promise<Identity> {
    const api = get(token);
    const base = spec.user(await api<Record<string, unknown>>(ends.userinfo));
    const more = extras.more ? await extras.more(api, base) : {};
    const user = { ...base, ...more };
    if (!user.subject) throw new Error(`${spec.label}'s user-info answer has no user id`);
    const label = user.login ?? user.emails[0] ?? user.name ?? user.subject;
    if (!oauthAllows(m, user)) throw new SignInRefused('ERR_SERVICE_804', `The ${spec.label} user ${label} is not allowed by this route.`);
    return { subject: user.subject, email: user.emails[0], name: user.name };
  }

  async function exchange(code: string, redirectUri: string, verifier?: string): Promise<string> {
    const params = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: app.clientId, client_secret: app.clientSecret, ...(verifier ? { code_verifier: verifier } : {}) });
    const res = spec.tokenByGet
      ? await fetch(`${ends.token}?${params}`, fetchOpts({ headers: { accept: 'application/json' } }))
      : await fetch(ends.token, fetchOpts({ method: 'POST', headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' }, body: params.toString() }));
    if (res.status >= 500) throw new Error(`${spec.label}'s token endpoint answered ${res.status}`);
    const body = await tokenAnswer(res);
    const token = typeof body.access_token === 'string' ? body.access_token : undefined;
    if (!token) {
      const why = typeof body.error === 'string' ? body.error : typeof (body.error as { message?: unknown })?.message === 'string' ? String((body.error as { message: string }).message) : `status ${res.status}, no access token`;
      throw new SignInRefused('ERR_SERVICE_802', `${spec.label} did not accept the sign-in code (${why.slice(0, 200)}); open the page you wanted again.`);
    }
    return token;
  }

  return {
    name: s.provider,
    async start(redirectUri, { state }) {
      const url = new URL(ends.authorize);
      const verifier = spec.pkce ? client.randomPKCECodeVerifier() : undefined;
      for (const [k, v] of Object.entries({
        response_type: 'code', client_id: app.clientId, redirect_uri: redirectUri, scope: scopes.join(' '), state,
        ...(verifier ? { code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' } : {}),
        ...spec.authorizeParams,
      })) url.searchParams.set(k, v);
      const flow: Record<string, string> = verifier ? { verifier } : {};
      return { url: url.href, flow };
    },
    async finish(callbackUrl, flow, redirectUri): Promise<Identity> {
      const error = callbackUrl.searchParams.get('error');
      if (error) throw new SignInRefused('ERR_SERVICE_802', `${spec.label} refused the sign-in (${error.slice(0, 100)}).`);
      const code = callbackUrl.searchParams.get('code');
      if (!code) throw new SignInRefused('ERR_SERVICE_802', `${spec.label} sent the browser back without a code; open the page you wanted again.`);
      const token = await exchange(code, redirectUri, flow.verifier);
      try {
        const who = await lookup(token);
        return keepToken ? { ...who, recheck: { token } } : who;
      } catch (e) {
        if (e instanceof TokenRefused) throw new SignInRefused('ERR_SERVICE_802', `${spec.label} did not accept its own access token; open the page you wanted again.`);
        throw e;
      }
    },
    async recheck(data) {
      try {
        await lookup(String(data.token));
      } catch (e) {
        // An expired or revoked token is not a refusal of the user: sign in again, and the lists are checked then.
        if (e instanceof TokenRefused) throw new SignInAgain(e.message);
        throw e;
      }
    },
  };
}
