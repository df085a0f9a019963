// request_headers: removes, then adds, headers of what goes upstream. It runs last of the
// request edits (MODULE_ORDER), so its additions win.
import type { FilterFactory } from '../types.js';
import { applyEdits, headerEdits } from './header-edits.js';

export const requestHeaders: FilterFactory = (config) => {
  const edits = headerEdits(config);
  return {
    handle(ex, next) {
      applyEdits(ex.upstreamHeaders, edits);
      return next();
    },
  };
};
