// The sign-in callback has one fixed path per host (/_edgeform/auth/callback), whatever the
// route's match, so an identity provider needs one redirect URI per host. The route it belongs
// to is named in `state` (`<route id>~<random>`); the state is still checked against the
// route's sealed sign-in cookie, so naming another route gains nothing.
import type { FullDoc } from '../types.js';
import type { RouteMatcher } from '../http/select-route.js';

export const CALLBACK_PATH = '/_edgeform/auth/callback';
export const STATE_ROUTE_SEPARATOR = '~';
const SIGN_IN_MODULES = ['oauth', 'oidc', 'saml'];

export function callbackRoute(matchers: readonly RouteMatcher[], path: string, query: string): FullDoc | undefined {
  if (path !== CALLBACK_PATH) return undefined;
  const state = new URLSearchParams(query.replace(/^\?/, '')).get('state') ?? '';
  const id = state.slice(0, Math.max(0, state.indexOf(STATE_ROUTE_SEPARATOR)));
  if (!id) return undefined;
  const route = matchers.find((m) => m.route.id === id)?.route;
  return route && SIGN_IN_MODULES.some((m) => route[m] && route[m].enabled !== false) ? route : undefined;
}
