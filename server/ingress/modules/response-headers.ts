// response_headers: removes, then adds, headers of the answer the client gets (the upstream's,
// or the edge's own, e.g. an http_response backend's).
import type { FilterFactory } from '../types.js';
import { applyEdits, headerEdits } from './header-edits.js';

export const responseHeaders: FilterFactory = (config) => {
  const edits = headerEdits(config);
  return {
    handle(ex, next) {
      ex.onResponseHead((head) => applyEdits(head.headers, edits));
      return next();
    },
  };
};
