// A module's refusal: the status and code from the one registry, and the API's JSON error
// shape as the body, so a client reads an edge refusal as it reads any edgeform error.
import { ERRORS, type ErrorCode } from '../../http/errors.js';
import type { EdgeAnswer } from '../types.js';

export function refuse(code: ErrorCode, msg: string, headers: Record<string, string> = {}): EdgeAnswer {
  const status = ERRORS[code].status;
  const body = JSON.stringify({ error_code: code, status_code: status, msg, details: {} });
  return { status, code, headers: { 'content-type': 'application/json', ...headers }, body };
}
