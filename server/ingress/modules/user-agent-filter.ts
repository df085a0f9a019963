// user_agent_filter: the User-Agent header against the route's RE2 patterns (unanchored, as
// RE2's find). Deny beats allow; with any allow pattern, a user agent none of them matches is
// refused. Patterns run on re2js, in time linear in the header, as the catalog validates them:
// a hostile pattern or header cannot hold the ingress.
import { RE2JS } from 're2js';
import type { FilterFactory, IngressDeps } from '../types.js';
import { errorAnswer } from '../http/error-page.js';

type Matcher = (ua: string) => boolean;

/**
 * The catalog checks patterns with a mapping onto JavaScript's dialect, so one may pass there
 * and still not compile on RE2. Such a deny pattern refuses everything (we cannot tell what it
 * would let through); such an allow pattern matches nothing. Either is logged once per table.
 */
function compile(patterns: readonly string[], kind: 'allow' | 'deny', deps: IngressDeps, routeId: string): Matcher[] {
  return patterns.map((source) => {
    try {
      const re = RE2JS.compile(source);
      return (ua: string) => re.test(ua);
    } catch (e) {
      deps.log({ level: 'warn', msg: 'user_agent_filter pattern does not compile on RE2', route: routeId, kind, pattern: source, reason: (e as Error).message });
      return () => kind === 'deny';
    }
  });
}

export const userAgentFilter: FilterFactory = (config, route, deps) => {
  const allow = compile(config?.allow ?? [], 'allow', deps, route.id);
  const deny = compile(config?.deny ?? [], 'deny', deps, route.id);
  return {
    async handle(ex, next) {
      const header = ex.req.headers['user-agent'];
      const ua = Array.isArray(header) ? header.join(', ') : (header ?? '');
      const refused = deny.some((m) => m(ua)) || (allow.length > 0 && !allow.some((m) => m(ua)));
      if (refused) {
        ex.answer(errorAnswer('ERR_SERVICE_781', "The request's User-Agent is not allowed by this route's user agent filter."));
        return;
      }
      await next();
    },
  };
};
