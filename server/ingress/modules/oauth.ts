// oauth: requires a sign-in with the route's OAuth provider (one of the eight of
// auth/oauth-providers.ts, run by auth/oauth.ts) before its backend is reached. A route
// without client_id uses the server's managed app for that provider, or is refused with
// ERR_SERVICE_805; a provider setting that is not an https URL is refused with ERR_SERVICE_820.
import { oauthProvider } from '../auth/oauth.js';
import { OAUTH_PROVIDER_TABLE, oauthSettings, settingName, type OAuthProviderName } from '../auth/oauth-providers.js';
import { signInFilter } from '../auth/sign-in-filter.js';
import { errorAnswer } from '../http/error-page.js';
import type { FilterFactory, HttpFilter } from '../types.js';

const refuseAll = (answer: ReturnType<typeof errorAnswer>, log?: () => void): HttpFilter => ({
  async handle(ex) {
    log?.();
    ex.answer(answer);
  },
});

export const oauth: FilterFactory = (config, route, deps) => {
  const name = (Object.keys(OAUTH_PROVIDER_TABLE) as OAuthProviderName[]).find((p) => config?.provider?.[p]);
  // The API accepts exactly one provider; a stored route without one is refused, never passed.
  if (!name) return refuseAll(errorAnswer('ERR_SERVICE_805', 'This OAuth route names no identity provider; set one of the providers in its oauth module.'));
  const m = config.provider[name];
  const label = OAUTH_PROVIDER_TABLE[name].label;
  const settings = oauthSettings(name);
  if (settings.invalid) {
    return refuseAll(
      errorAnswer('ERR_SERVICE_820', `This route signs in with ${label}, and the server setting ${settings.invalid} is not an https URL (plain http only on a loopback address); the server's operator must correct it.`),
      () => deps.log({ level: 'warn', msg: 'ingress oauth: a provider setting is not an https URL', route: route.id, setting: settings.invalid }),
    );
  }
  const app = m.client_id ? { clientId: String(m.client_id), clientSecret: String(m.client_secret) } : settings.managed;
  if (!app) {
    return refuseAll(errorAnswer('ERR_SERVICE_805', `This route signs in with ${label} through the server's managed app, and this server has none: set the route's client_id and client_secret, or set ${settingName(name, 'CLIENT_ID')} and ${settingName(name, 'CLIENT_SECRET')} on the server.`));
  }
  return signInFilter(config, route, deps, oauthProvider(config, m, app, settings, () => deps.signInTimeoutMs ?? 10_000));
};
