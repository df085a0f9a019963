// remove-headers: removes headers from the request (on_http_request) or the response
// (on_http_response).
import { headerNames, onlyFields } from '../config.js';
import { defineAction, HTTP_PHASES } from './define.js';

export interface RemoveHeadersAction { headers: string[] }

export const removeHeaders = defineAction<RemoveHeadersAction>({
  type: 'remove-headers',
  phases: HTTP_PHASES,
  fields: ['headers'],
  check(c) {
    onlyFields(c, this.fields);
    const headers = headerNames(c, 'headers');
    return headers && { headers: headers.map((h) => h.toLowerCase()) };
  },
});
