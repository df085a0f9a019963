// saml: requires a SAML sign-in (auth/saml.ts) before the route's backend is reached. The
// route also answers its SP URLs when a request for them reaches it on the edge's host
// (`/saml/<route id>[/metadata]`, `/acs`, `/slo`), as the API server does at the public base
// URL (server/http/saml-endpoints.ts): whichever host the IdP and browser are sent to works.
import { samlProvider } from '../auth/saml.js';
import { SAML_PATH_PREFIX, serviceProviderMetadata } from '../auth/saml-metadata.js';
import { CALLBACK_PATH } from '../auth/callback-route.js';
import { LOGOUT_PATH, signInFilter } from '../auth/sign-in-filter.js';
import { errorAnswer } from '../http/error-page.js';
import type { FilterFactory } from '../types.js';

export const saml: FilterFactory = (config, route, deps) => {
  let provider: ReturnType<typeof samlProvider>;
  try {
    provider = samlProvider(config, route, deps);
  } catch (e) {
    const why = String((e as Error)?.message ?? e);
    return { async handle(ex) { ex.answer(errorAnswer('ERR_SERVICE_817', `This route's SAML sign-in cannot run (${why}); the request was not sent to the backend.`)); } };
  }
  const inner = signInFilter(config, route, deps, provider);
  const own = `${SAML_PATH_PREFIX}${route.id}`;
  return {
    async handle(ex, next) {
      const path = ex.path.split('?')[0];
      if (path === own || path === `${own}/metadata`) {
        ex.answer({ status: 200, headers: { 'content-type': 'application/samlmetadata+xml; charset=utf-8', 'cache-control': 'no-store' }, body: serviceProviderMetadata(provider.urls, config.nameid_format, provider.signing) });
        return;
      }
      // The ACS and SLO are the callback and logout paths under another name.
      if (path === `${own}/acs` && ex.method === 'POST') ex.path = CALLBACK_PATH;
      if (path === `${own}/slo`) ex.path = LOGOUT_PATH;
      return inner.handle(ex, next);
    },
  };
};
