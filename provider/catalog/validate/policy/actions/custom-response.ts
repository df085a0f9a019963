// custom-response: ends the request with the status, headers and body given.
import { headerMap, onlyFields, statusCode, text } from '../config.js';
import { defineAction, HTTP_PHASES } from './define.js';

export interface CustomResponseAction { status_code: number; headers: Record<string, string>; body: string }

export const customResponse = defineAction<CustomResponseAction>({
  type: 'custom-response',
  phases: HTTP_PHASES,
  fields: ['status_code', 'headers', 'body'],
  check(c) {
    onlyFields(c, this.fields);
    const status = statusCode(c, 'status_code', [200, 599], 200);
    const headers = headerMap(c, 'headers', false);
    const body = text(c, 'body') ?? '';
    return status === undefined || headers === undefined || (c.config.body !== undefined && typeof c.config.body !== 'string') ? undefined : { status_code: status, headers, body };
  },
});
