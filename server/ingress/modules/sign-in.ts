// saml, and oauth providers other than github: sign-in with them is the next release's work. Until then a route that
// carries one answers 501 with a code saying so, and never reaches its backend unprotected.
import type { FilterFactory } from '../types.js';
import { errorAnswer } from '../http/error-page.js';

const LABEL = { oauth: 'OAuth', oidc: 'OpenID Connect', saml: 'SAML' } as const;

export const signInNotYet = (module: keyof typeof LABEL): FilterFactory => () => ({
  async handle(ex) {
    ex.answer(errorAnswer('ERR_SERVICE_784', `This route requires ${LABEL[module]} sign-in, which edgeform's ingress does not perform yet (a later release adds it); the request was not sent to the backend.`));
  },
});
