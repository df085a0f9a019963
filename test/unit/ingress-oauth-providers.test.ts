// The OAuth provider table as each provider documents it: the default authorize, token and
// user-info URLs and scopes written out literally (a typo in the table fails here, where the
// end-to-end tests against fakes that serve the table's own paths could not see it); how the
// EDGEFORM_OAUTH_<P>_* settings move the bases; and how each provider's user-info answer
// names the user (verified emails only).
import { describe, expect, it } from 'vitest';
import { OAUTH_PROVIDERS } from '../../provider/catalog/route-modules.js';
import { OAUTH_PROVIDER_TABLE, oauthEndpoints, oauthSettings } from '../../server/ingress/auth/oauth-providers.js';

const DOCUMENTED = {
  github: ['https://github.com/login/oauth/authorize', 'https://github.com/login/oauth/access_token', 'https://api.github.com/user', 'read:user user:email'],
  facebook: ['https://www.facebook.com/v23.0/dialog/oauth', 'https://graph.facebook.com/v23.0/oauth/access_token', 'https://graph.facebook.com/v23.0/me?fields=id,name,email', 'email public_profile'],
  microsoft: ['https://login.microsoftonline.com/common/oauth2/v2.0/authorize', 'https://login.microsoftonline.com/common/oauth2/v2.0/token', 'https://graph.microsoft.com/v1.0/me', 'openid profile email User.Read'],
  google: ['https://accounts.google.com/o/oauth2/v2/auth', 'https://oauth2.googleapis.com/token', 'https://openidconnect.googleapis.com/v1/userinfo', 'openid email profile'],
  linkedin: ['https://www.linkedin.com/oauth/v2/authorization', 'https://www.linkedin.com/oauth/v2/accessToken', 'https://api.linkedin.com/v2/userinfo', 'openid profile email'],
  gitlab: ['https://gitlab.com/oauth/authorize', 'https://gitlab.com/oauth/token', 'https://gitlab.com/api/v4/user', 'read_user'],
  twitch: ['https://id.twitch.tv/oauth2/authorize', 'https://id.twitch.tv/oauth2/token', 'https://api.twitch.tv/helix/users', 'user:read:email'],
  amazon: ['https://www.amazon.com/ap/oa', 'https://api.amazon.com/auth/o2/token', 'https://api.amazon.com/user/profile', 'profile'],
} as const;

describe('oauth provider table', () => {
  it('has a row for each of the eight providers of DECISIONS.md, and nothing else', () => {
    expect(Object.keys(OAUTH_PROVIDER_TABLE).sort()).toEqual([...OAUTH_PROVIDERS].sort());
  });

  it.each(OAUTH_PROVIDERS)('%s: the documented endpoints and scopes by default', (p) => {
    const [authorize, token, userinfo, scopes] = DOCUMENTED[p];
    expect(oauthEndpoints(oauthSettings(p, {}))).toEqual({ authorize, token, userinfo });
    expect(OAUTH_PROVIDER_TABLE[p].scopes.join(' ')).toBe(scopes);
    expect(oauthSettings(p, {}).invalid).toBeUndefined();
  });

  it('_URL alone moves every endpoint of a self-hosted instance under it', () => {
    expect(oauthEndpoints(oauthSettings('gitlab', { EDGEFORM_OAUTH_GITLAB_URL: 'https://git.example.com/' }))).toEqual({
      authorize: 'https://git.example.com/oauth/authorize', token: 'https://git.example.com/oauth/token', userinfo: 'https://git.example.com/api/v4/user',
    });
    expect(oauthEndpoints(oauthSettings('github', { EDGEFORM_OAUTH_GITHUB_URL: 'https://ghe.example.com' })).userinfo).toBe('https://ghe.example.com/api/v3/user');
    expect(oauthEndpoints(oauthSettings('google', { EDGEFORM_OAUTH_GOOGLE_URL: 'http://127.0.0.1:9' })).token).toBe('http://127.0.0.1:9/token');
  });

  it('_TOKEN_URL and _API_URL move one base each; a Microsoft tenant is part of _URL', () => {
    const s = oauthSettings('amazon', { EDGEFORM_OAUTH_AMAZON_API_URL: 'https://api.amazon.co.uk' });
    expect(oauthEndpoints(s)).toEqual({ authorize: 'https://www.amazon.com/ap/oa', token: 'https://api.amazon.co.uk/auth/o2/token', userinfo: 'https://api.amazon.co.uk/user/profile' });
    expect(oauthEndpoints(oauthSettings('google', { EDGEFORM_OAUTH_GOOGLE_TOKEN_URL: 'https://token.example.com' })).token).toBe('https://token.example.com/token');
    expect(oauthEndpoints(oauthSettings('microsoft', { EDGEFORM_OAUTH_MICROSOFT_URL: 'https://login.microsoftonline.com/contoso.onmicrosoft.com' })).authorize)
      .toBe('https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize');
  });

  it.each([
    ['http://gitlab.example.com', 'EDGEFORM_OAUTH_GITLAB_URL'],
    ['ftp://127.0.0.1', 'EDGEFORM_OAUTH_GITLAB_URL'],
    ['not a url', 'EDGEFORM_OAUTH_GITLAB_URL'],
  ])('%s is refused as %s (https, or http on loopback only)', (v, name) => {
    expect(oauthSettings('gitlab', { EDGEFORM_OAUTH_GITLAB_URL: v }).invalid).toBe(name);
  });

  it('the managed app needs both its id and its secret', () => {
    expect(oauthSettings('twitch', { EDGEFORM_OAUTH_TWITCH_CLIENT_ID: 'id' }).managed).toBeUndefined();
    expect(oauthSettings('twitch', { EDGEFORM_OAUTH_TWITCH_CLIENT_ID: 'id', EDGEFORM_OAUTH_TWITCH_CLIENT_SECRET: 's' }).managed).toEqual({ clientId: 'id', clientSecret: 's' });
  });

  it.each<[keyof typeof DOCUMENTED, Record<string, unknown>, { subject: string; emails: string[]; name: string }]>([
    ['google', { sub: '10769150350006150715113082367', email: 'jsmith@example.com', email_verified: true, name: 'J Smith' }, { subject: '10769150350006150715113082367', emails: ['jsmith@example.com'], name: 'J Smith' }],
    ['google', { sub: '1', email: 'x@example.com', email_verified: false, name: 'X' }, { subject: '1', emails: [], name: 'X' }],
    ['gitlab', { id: 7, username: 'jo', name: '', email: 'jo@example.com', confirmed_at: null }, { subject: '7', emails: [], name: 'jo' }],
    ['twitch', { data: [{ id: '141981764', login: 'twitchdev', display_name: 'TwitchDev', email: 'dev@example.com' }] }, { subject: '141981764', emails: ['dev@example.com'], name: 'TwitchDev' }],
    ['microsoft', { id: 'abc', displayName: 'Adele Vance', mail: null, userPrincipalName: 'AdeleV@contoso.com' }, { subject: 'abc', emails: ['AdeleV@contoso.com'], name: 'Adele Vance' }],
    ['amazon', { user_id: 'amzn1.account.K2LI23KL2LK2', email: 'mhashimoto-04@plaxo.com', name: 'Mork Hashimoto' }, { subject: 'amzn1.account.K2LI23KL2LK2', emails: ['mhashimoto-04@plaxo.com'], name: 'Mork Hashimoto' }],
    ['facebook', { id: '12345', name: 'Ada' }, { subject: '12345', emails: [], name: 'Ada' }],
  ])('%s user-info %j', (p, info, want) => {
    expect(OAUTH_PROVIDER_TABLE[p].user(info)).toMatchObject(want);
  });
});
