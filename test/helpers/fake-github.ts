// A local stand-in for GitHub's OAuth web flow and the REST calls the edge makes, as GitHub
// documents them: the generic fake of fake-oauth.ts on GitHub's row (/login/oauth/authorize,
// /login/oauth/access_token answering errors with 200) and, under the API base (<base>/api/v3,
// as for GitHub Enterprise), /user, /user/emails, /user/orgs and /user/teams with a Bearer token.
import { startFakeOAuth, type FakeOAuth, type FakeOAuthUser } from './fake-oauth.js';

export type FakeGithubUser = FakeOAuthUser & Required<Pick<FakeOAuthUser, 'emails' | 'orgs' | 'teams'>>;

export type FakeGithub = FakeOAuth;

export const startFakeGithub = (app: { clientId: string; clientSecret: string }): Promise<FakeGithub> => startFakeOAuth('github', app);
