// add-headers: sets headers on the request (on_http_request, sent upstream) or on the
// response (on_http_response, sent to the client), replacing values of the same name.
import { headerMap, onlyFields } from '../config.js';
import { defineAction, HTTP_PHASES } from './define.js';

export interface AddHeadersAction { headers: Record<string, string> }

export const addHeaders = defineAction<AddHeadersAction>({
  type: 'add-headers',
  phases: HTTP_PHASES,
  fields: ['headers'],
  check(c) {
    onlyFields(c, this.fields);
    const headers = headerMap(c, 'headers', true);
    return headers && { headers };
  },
});
