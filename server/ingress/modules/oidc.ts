// oidc: requires an OpenID Connect sign-in (auth/oidc.ts) before the route's backend is reached.
import { oidcProvider } from '../auth/oidc.js';
import { signInFilter } from '../auth/sign-in-filter.js';
import type { FilterFactory } from '../types.js';

export const oidc: FilterFactory = (config, route, deps) => signInFilter(config, route, deps, oidcProvider(config, deps));
