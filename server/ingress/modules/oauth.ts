// oauth: requires a sign-in with the route's OAuth provider before its backend is reached.
// GitHub is performed (auth/github.ts); the seven others still answer 501 (ERR_SERVICE_784).
// A route without client_id uses the server's managed app, or is refused with ERR_SERVICE_805.
import { githubProvider, githubSettings } from '../auth/github.js';
import { signInFilter } from '../auth/sign-in-filter.js';
import { errorAnswer } from '../http/error-page.js';
import type { FilterFactory } from '../types.js';
import { signInNotYet } from './sign-in.js';

export const oauth: FilterFactory = (config, route, deps) => {
  const github = config?.provider?.github;
  if (!github) return signInNotYet('oauth')(config, route, deps);
  const settings = githubSettings();
  const app = github.client_id ? { clientId: String(github.client_id), clientSecret: String(github.client_secret) } : settings.managed;
  if (!app) {
    return {
      async handle(ex) {
        ex.answer(errorAnswer('ERR_SERVICE_805', 'This route signs in with GitHub through the server\'s managed app, and this server has none: set the route\'s client_id and client_secret, or set EDGEFORM_OAUTH_GITHUB_CLIENT_ID and EDGEFORM_OAUTH_GITHUB_CLIENT_SECRET on the server.'));
      },
    };
  }
  return signInFilter(config, route, deps, githubProvider(github, app, settings, () => deps.signInTimeoutMs ?? 10_000));
};
