// OAuth with GitHub at the edge, as GitHub documents its web application flow: the browser to
// <base>/login/oauth/authorize, the code exchanged at <base>/login/oauth/access_token, then the
// REST API (<api>/user, /user/emails, /user/orgs, /user/teams) for who the user is and whether
// the route's allow lists admit them. <base> and <api> default to github.com and
// api.github.com; EDGEFORM_OAUTH_GITHUB_URL and EDGEFORM_OAUTH_GITHUB_API_URL point them at
// GitHub Enterprise (or a test double).
import type { FullDoc } from '../types.js';
import { SignInRefused, type SignInProvider } from './sign-in-filter.js';
import type { Identity } from './session.js';


export interface GithubSettings {
  base: string;
  api: string;
  /** The managed app (EDGEFORM_OAUTH_GITHUB_CLIENT_ID/_SECRET), used by routes without client_id. */
  managed?: { clientId: string; clientSecret: string };
}

export function githubSettings(env: NodeJS.ProcessEnv = process.env): GithubSettings {
  const trim = (u: string) => u.replace(/\/+$/, '');
  const id = env.EDGEFORM_OAUTH_GITHUB_CLIENT_ID;
  const secret = env.EDGEFORM_OAUTH_GITHUB_CLIENT_SECRET;
  return {
    base: trim(env.EDGEFORM_OAUTH_GITHUB_URL || 'https://github.com'),
    api: trim(env.EDGEFORM_OAUTH_GITHUB_API_URL || 'https://api.github.com'),
    ...(id && secret ? { managed: { clientId: id, clientSecret: secret } } : {}),
  };
}

async function call<T>(url: string, init: RequestInit, timeoutMs: number): Promise<T> {
  const res = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(timeoutMs) });
  if (!res.ok) throw new Error(`GitHub answered ${res.status} to ${new URL(url).pathname}`);
  return (await res.json()) as T;
}

/** Whether the user passes the route's lists: the email lists together, the organization and team lists together; each set group must pass. */
export function githubAllows(m: FullDoc[string], u: { emails: string[]; orgs: string[]; teams: string[] }): boolean {
  const addresses = ((m.email_addresses as string[]) ?? []).map((e) => e.toLowerCase());
  const domains = ((m.email_domains as string[]) ?? []).map((d) => d.toLowerCase().replace(/^@/, ''));
  const orgs = ((m.organizations as string[]) ?? []).map((o) => o.toLowerCase());
  const teams = ((m.teams as string[]) ?? []).map((t) => t.toLowerCase());
  const emails = u.emails.map((e) => e.toLowerCase());
  const byEmail = addresses.length + domains.length === 0 || emails.some((e) => addresses.includes(e) || domains.includes(e.slice(e.lastIndexOf('@') + 1)));
  const byOrg = orgs.length + teams.length === 0 || u.orgs.some((o) => orgs.includes(o.toLowerCase())) || u.teams.some((t) => teams.includes(t.toLowerCase()));
  return byEmail && byOrg;
}

export function githubProvider(m: FullDoc[string], app: { clientId: string; clientSecret: string }, s: GithubSettings, timeoutMs: () => number): SignInProvider {
  const needsOrgs = (m.organizations?.length ?? 0) + (m.teams?.length ?? 0) > 0;
  const scopes = new Set(['read:user', 'user:email', ...(needsOrgs ? ['read:org'] : []), ...((m.scopes as string[]) ?? [])]);
  /** Who holds `token`, refused (ERR_SERVICE_804) unless the route's lists admit them. */
  async function lookup(accessToken: string): Promise<Identity> {
    const headers = { accept: 'application/vnd.github+json', authorization: `Bearer ${accessToken}`, 'x-github-api-version': '2022-11-28', 'user-agent': 'edgeform-ingress' };
    const res = await fetch(`${s.api}/user`, { headers, redirect: 'error', signal: AbortSignal.timeout(timeoutMs()) });
    if (res.status === 401) throw new SignInRefused('ERR_SERVICE_804', 'GitHub no longer accepts this sign-in (the app\'s access was revoked); sign in again.');
    if (!res.ok) throw new Error(`GitHub answered ${res.status} to /user`);
    const user = (await res.json()) as { id: number; login: string; name?: string | null };
    const emails = await call<{ email: string; primary: boolean; verified: boolean }[]>(`${s.api}/user/emails`, { headers }, timeoutMs());
    const verified = emails.filter((e) => e.verified);
    const orgs = needsOrgs ? (await call<{ login: string }[]>(`${s.api}/user/orgs?per_page=100`, { headers }, timeoutMs())).map((o) => o.login) : [];
    const teams = needsOrgs ? (await call<{ slug: string; organization: { login: string } }[]>(`${s.api}/user/teams?per_page=100`, { headers }, timeoutMs())).map((t) => `${t.organization.login}/${t.slug}`) : [];
    if (!githubAllows(m, { emails: verified.map((e) => e.email), orgs, teams })) {
      throw new SignInRefused('ERR_SERVICE_804', `The GitHub user ${user.login} is not allowed by this route.`);
    }
    const primary = verified.find((e) => e.primary) ?? verified[0];
    return { subject: String(user.id), email: primary?.email, name: user.name || user.login };
  }

  return {
    name: 'github',
    async start(redirectUri, { state }) {
      const url = new URL(`${s.base}/login/oauth/authorize`);
      url.search = new URLSearchParams({ client_id: app.clientId, redirect_uri: redirectUri, scope: [...scopes].join(' '), state, allow_signup: 'false' }).toString();
      return { url: url.href, flow: {} };
    },
    async finish(callbackUrl, _flow, redirectUri): Promise<Identity> {
      if (callbackUrl.searchParams.get('error')) throw new SignInRefused('ERR_SERVICE_802', `GitHub refused the sign-in (${callbackUrl.searchParams.get('error')}).`);
      const token = await call<{ access_token?: string; error?: string }>(`${s.base}/login/oauth/access_token`, {
        method: 'POST',
        headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ client_id: app.clientId, client_secret: app.clientSecret, code: callbackUrl.searchParams.get('code') ?? '', redirect_uri: redirectUri }).toString(),
      }, timeoutMs());
      if (!token.access_token) throw new SignInRefused('ERR_SERVICE_802', `GitHub did not accept the sign-in code (${token.error ?? 'no access token'}); open the page you wanted again.`);
      return { ...(await lookup(token.access_token)), recheck: { token: token.access_token } };
    },
    async recheck(data) {
      await lookup(data.token);
    },
  };
}
