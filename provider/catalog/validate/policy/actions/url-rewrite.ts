// url-rewrite: rewrites the URL sent upstream: the part of the request's URL that `from`
// (RE2) matches is replaced with `to` ($1, $<name> for groups); no match, no change.
import { onlyFields, text } from '../config.js';
import { defineAction } from './define.js';
import type { Re2Pattern } from '../../regex.js';
import { fromPattern } from './redirect.js';

export interface UrlRewriteAction { from: Re2Pattern; to: string }

export const urlRewrite = defineAction<UrlRewriteAction>({
  type: 'url-rewrite',
  phases: ['on_http_request'],
  fields: ['from', 'to'],
  check(c) {
    onlyFields(c, this.fields);
    const from = fromPattern(c, true);
    const to = text(c, 'to', { required: true, max: 2048 });
    return from && to !== undefined ? { from, to } : undefined;
  },
});
