// url-rewrite: rewrites the URL sent upstream; later expressions see the new req.url,
// req.path and req.query, and actions.service.url_rewrite.url holds it.
import type { UrlRewriteAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import { actionOutput, rewriteUrl } from '../context.js';
import { expand, type Runner } from './run.js';

export function urlRewrite(config: UrlRewriteAction): Runner {
  return (ctx) => {
    const req = ctx.vars.req!;
    const rewritten = config.from.replace(req.url$, expand(ctx, config.to));
    if (rewritten === req.url$) return { did: `url-rewrite: ${req.url$} does not match from; unchanged` };
    try {
      rewriteUrl(req, rewritten);
    } catch {
      return { did: `url-rewrite: "${rewritten}" is not a URL; unchanged` };
    }
    ctx.mutations.request.url = rewritten;
    actionOutput(ctx.vars, 'url_rewrite').url = rewritten;
    return { did: `url-rewrite: upstream URL ${rewritten}` };
  };
}
