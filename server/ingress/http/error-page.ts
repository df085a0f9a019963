// The page an edge's client gets when the edge itself refuses or fails: short plain text
// with the status, a sentence and the code, which is also in `edgeform-error-code` (and in
// the access log). Never another edge's content, never internals.
import { STATUS_CODES } from 'node:http';
import { ERRORS, type ErrorCode } from '../../http/errors.js';
import type { EdgeAnswer } from '../types.js';

export const ERROR_CODE_HEADER = 'edgeform-error-code';

export function errorAnswer(code: ErrorCode, message: string, headers: Record<string, string> = {}, detail?: string): EdgeAnswer {
  const status = ERRORS[code].status;
  const body = `${status} ${STATUS_CODES[status] ?? ''}\n\n${message}\n\n${code}\n`;
  const a: EdgeAnswer = { status, code, body, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', ...headers } };
  if (detail !== undefined) a.detail = detail;
  return a;
}

/**
 * An answer about the route's backend (none online, unreachable, too slow): the page says
 * what the code's summary says, and `detail`, which names backend and tunnel ids or labels,
 * goes to the access log only. An anonymous client learns the code, not the service's insides.
 */
export const backendAnswer = (code: ErrorCode, detail: string, headers: Record<string, string> = {}): EdgeAnswer => errorAnswer(code, ERRORS[code].summary, headers, detail);
