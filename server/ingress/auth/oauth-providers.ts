// The eight OAuth providers of an `oauth` route as one table: each provider's documented
// authorize, token and user-info endpoints, its default scopes, and how its user-info answer
// says who the user is. auth/oauth.ts is the one implementation that runs any row.
//
// A provider's endpoints hang off up to three bases, each a server setting (docs/ingress.md):
//   EDGEFORM_OAUTH_<P>_URL        the sign-in pages (authorize), e.g. a self-managed GitLab
//   EDGEFORM_OAUTH_<P>_TOKEN_URL  the token endpoint's base
//   EDGEFORM_OAUTH_<P>_API_URL    the user-info API's base
// Setting only _URL moves every endpoint under it (the API to <url><apiUnder>, for GitHub
// Enterprise and GitLab), which is what a self-hosted instance or a test double needs.
import type { OAUTH_PROVIDERS } from '../../../provider/catalog/route-modules.js';
import type { FullDoc } from '../types.js';
import { githubExtras } from './github.js';
import type { OAuthExtras } from './oauth.js';

export type OAuthProviderName = (typeof OAUTH_PROVIDERS)[number];

/** Who the user is, as read from one provider's user-info answer. */
export interface ProviderUser {
  subject?: string;
  /** Only addresses the provider vouches for (verified); the allow lists are checked against these. */
  emails: string[];
  name?: string;
  /** The user's handle where the provider has one (GitHub's login), to name them in a refusal. */
  login?: string;
}

export interface OAuthProviderSpec {
  label: string;
  /** Default bases: the sign-in pages, the token endpoint ('url'/'api': the same as that base), the user-info API. */
  url: string;
  token: string;
  api: string;
  /** Where the API lives under _URL when only _URL is set (GitHub Enterprise, self-managed GitLab). */
  apiUnder?: string;
  /** Paths under those bases. */
  paths: { authorize: string; token: string; userinfo: string };
  scopes: readonly string[];
  /** Sends a PKCE (S256) challenge with the authorization request. */
  pkce: boolean;
  /** Facebook documents the code exchange as a GET with query parameters; every other provider takes a POSTed form. */
  tokenByGet?: boolean;
  /** More authorization parameters the provider documents. */
  authorizeParams?: Readonly<Record<string, string>>;
  /** Headers of user-info calls besides `Authorization: Bearer` (Twitch's Client-Id). */
  apiHeaders?: (clientId: string) => Record<string, string>;
  /** Reads the user from the user-info answer (JSON). */
  user(info: Record<string, unknown>): ProviderUser;
  /** More calls and lists beyond user-info, from the route's provider member and the API base (GitHub's). */
  extras?(m: FullDoc[string], api: string): OAuthExtras;
}

const str = (v: unknown) => (typeof v === 'string' && v ? v : typeof v === 'number' ? String(v) : undefined);
const list = (v: unknown) => (typeof v === 'string' && v.includes('@') ? [v] : []);

export const OAUTH_PROVIDER_TABLE: Record<OAuthProviderName, OAuthProviderSpec> = {
  // https://docs.github.com/en/apps/oauth-apps/building-oauth-apps/authorizing-oauth-apps
  // Emails come from /user/emails (verified ones only), organisations and teams from
  // /user/orgs and /user/teams: auth/github.ts.
  github: {
    label: 'GitHub', url: 'https://github.com', token: 'url', api: 'https://api.github.com', apiUnder: '/api/v3',
    paths: { authorize: '/login/oauth/authorize', token: '/login/oauth/access_token', userinfo: '/user' },
    scopes: ['read:user', 'user:email'], pkce: false,
    authorizeParams: { allow_signup: 'false' },
    apiHeaders: () => ({ accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' }),
    user: (u) => ({ subject: str(u.id), emails: [], name: str(u.name) ?? str(u.login), login: str(u.login) }),
    extras: githubExtras,
  },
  // https://developers.facebook.com/docs/facebook-login/guides/advanced/manual-flow
  // /me returns `email` only when the user has a confirmed one and granted the permission.
  facebook: {
    label: 'Facebook', url: 'https://www.facebook.com/v23.0', token: 'api', api: 'https://graph.facebook.com/v23.0',
    paths: { authorize: '/dialog/oauth', token: '/oauth/access_token', userinfo: '/me?fields=id,name,email' },
    scopes: ['email', 'public_profile'], pkce: false, tokenByGet: true,
    user: (u) => ({ subject: str(u.id), emails: list(u.email), name: str(u.name) }),
  },
  // https://learn.microsoft.com/en-us/entra/identity-platform/v2-oauth2-auth-code-flow and
  // Microsoft Graph's GET /me. The tenant is part of the base: .../common (work, school and
  // personal accounts), or .../<tenant id> to admit one directory only.
  microsoft: {
    label: 'Microsoft', url: 'https://login.microsoftonline.com/common', token: 'url', api: 'https://graph.microsoft.com',
    paths: { authorize: '/oauth2/v2.0/authorize', token: '/oauth2/v2.0/token', userinfo: '/v1.0/me' },
    scopes: ['openid', 'profile', 'email', 'User.Read'], pkce: true,
    authorizeParams: { response_mode: 'query' },
    user: (u) => ({ subject: str(u.id), emails: list(u.mail ?? u.userPrincipalName), name: str(u.displayName) }),
  },
  // https://developers.google.com/identity/protocols/oauth2/web-server and
  // https://developers.google.com/identity/openid-connect/openid-connect (the discovery document's endpoints).
  google: {
    label: 'Google', url: 'https://accounts.google.com', token: 'https://oauth2.googleapis.com', api: 'https://openidconnect.googleapis.com',
    paths: { authorize: '/o/oauth2/v2/auth', token: '/token', userinfo: '/v1/userinfo' },
    scopes: ['openid', 'email', 'profile'], pkce: true,
    user: (u) => ({ subject: str(u.sub), emails: u.email_verified === true || u.email_verified === 'true' ? list(u.email) : [], name: str(u.name) }),
  },
  // https://learn.microsoft.com/en-us/linkedin/consumer/integrations/self-serve/sign-in-with-linkedin-v2
  linkedin: {
    label: 'LinkedIn', url: 'https://www.linkedin.com', token: 'url', api: 'https://api.linkedin.com',
    paths: { authorize: '/oauth/v2/authorization', token: '/oauth/v2/accessToken', userinfo: '/v2/userinfo' },
    scopes: ['openid', 'profile', 'email'], pkce: false,
    user: (u) => ({ subject: str(u.sub), emails: u.email_verified === true || u.email_verified === 'true' ? list(u.email) : [], name: str(u.name) }),
  },
  // https://docs.gitlab.com/api/oauth2/ and https://docs.gitlab.com/api/users/ (GET /user).
  // `email` is the primary address; `confirmed_at: null` marks one not yet confirmed.
  gitlab: {
    label: 'GitLab', url: 'https://gitlab.com', token: 'url', api: 'https://gitlab.com/api/v4', apiUnder: '/api/v4',
    paths: { authorize: '/oauth/authorize', token: '/oauth/token', userinfo: '/user' },
    scopes: ['read_user'], pkce: true,
    user: (u) => ({ subject: str(u.id), emails: u.confirmed_at === null ? [] : list(u.email), name: str(u.name) ?? str(u.username), login: str(u.username) }),
  },
  // https://dev.twitch.tv/docs/authentication/getting-tokens-oauth/#authorization-code-grant-flow
  // and https://dev.twitch.tv/docs/api/reference/#get-users (`email` is the verified address).
  twitch: {
    label: 'Twitch', url: 'https://id.twitch.tv', token: 'url', api: 'https://api.twitch.tv',
    paths: { authorize: '/oauth2/authorize', token: '/oauth2/token', userinfo: '/helix/users' },
    scopes: ['user:read:email'], pkce: false,
    apiHeaders: (clientId) => ({ 'client-id': clientId }),
    user: (u) => {
      const first = (Array.isArray(u.data) ? u.data[0] : undefined) as Record<string, unknown> | undefined;
      return { subject: str(first?.id), emails: list(first?.email), name: str(first?.display_name) ?? str(first?.login), login: str(first?.login) };
    },
  },
  // https://developer.amazon.com/docs/login-with-amazon/authorization-code-grant.html and
  // .../obtain-customer-profile.html. Other regions: API_URL https://api.amazon.co.uk or https://api.amazon.co.jp.
  amazon: {
    label: 'Amazon', url: 'https://www.amazon.com', token: 'api', api: 'https://api.amazon.com',
    paths: { authorize: '/ap/oa', token: '/auth/o2/token', userinfo: '/user/profile' },
    scopes: ['profile'], pkce: false,
    user: (u) => ({ subject: str(u.user_id), emails: list(u.email), name: str(u.name) }),
  },
};

export interface OAuthSettings {
  provider: OAuthProviderName;
  /** The three bases, without a trailing slash. */
  url: string;
  token: string;
  api: string;
  /** The managed app (EDGEFORM_OAUTH_<P>_CLIENT_ID/_SECRET), used by routes without client_id. */
  managed?: { clientId: string; clientSecret: string };
  /** A base that is not https (http only on loopback): the route refuses with ERR_SERVICE_820. */
  invalid?: string;
}

/** The setting names of one provider, e.g. EDGEFORM_OAUTH_GITLAB_URL. */
export const settingName = (p: OAuthProviderName, what: 'URL' | 'TOKEN_URL' | 'API_URL' | 'CLIENT_ID' | 'CLIENT_SECRET') => `EDGEFORM_OAUTH_${p.toUpperCase()}_${what}`;

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|\[::1\]|localhost)$/;

function badBase(u: string): boolean {
  try {
    const url = new URL(u);
    return !(url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK.test(url.hostname))) || url.search !== '' || url.hash !== '';
  } catch {
    return true;
  }
}

export function oauthSettings(p: OAuthProviderName, env: NodeJS.ProcessEnv = process.env): OAuthSettings {
  const spec = OAUTH_PROVIDER_TABLE[p];
  const trim = (u: string) => u.replace(/\/+$/, '');
  const set = (what: 'URL' | 'TOKEN_URL' | 'API_URL') => env[settingName(p, what)]?.trim() || undefined;
  const own = set('URL');
  const url = trim(own ?? spec.url);
  const api = trim(set('API_URL') ?? (own ? url + (spec.apiUnder ?? '') : spec.api));
  const token = trim(set('TOKEN_URL') ?? (spec.token === 'url' ? url : spec.token === 'api' ? api : own ? url : spec.token));
  const id = env[settingName(p, 'CLIENT_ID')];
  const secret = env[settingName(p, 'CLIENT_SECRET')];
  const invalid = ([['URL', url], ['TOKEN_URL', token], ['API_URL', api]] as const).find(([, v]) => badBase(v));
  return {
    provider: p, url, token, api,
    ...(id && secret ? { managed: { clientId: id, clientSecret: secret } } : {}),
    ...(invalid ? { invalid: settingName(p, invalid[0]) } : {}),
  };
}

/** The three endpoint URLs of a provider under its settings. */
export function oauthEndpoints(s: OAuthSettings): { authorize: string; token: string; userinfo: string } {
  const { paths } = OAUTH_PROVIDER_TABLE[s.provider];
  return { authorize: s.url + paths.authorize, token: s.token + paths.token, userinfo: s.api + paths.userinfo };
}
