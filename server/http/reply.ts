// The error body every failure shares, and the request-scoped operation id.
import { STATUS_CODES } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, ERRORS } from './errors.js';
import { isDatabaseUnavailable } from '../store/unavailable.js';

export const OPERATION_HEADER = 'Service-Operation-Id';
/** On every authenticated response: the id of the API key that authenticated the request. */
export const API_KEY_HEADER = 'Service-Api-Key-Id';

/** The error body of DECISIONS.md: code, status, sentence, details with the operation id. */
export const errorBody = (error: ApiError, operationId: string) => ({
  error_code: error.code,
  status_code: error.status,
  msg: error.message,
  details: { operation_id: operationId, ...error.details },
});

export function sendError(request: FastifyRequest, reply: FastifyReply, error: ApiError) {
  for (const [k, v] of Object.entries(error.headers)) reply.header(k, v);
  // Also set here: errors the router raises (a malformed path) never pass the onRequest hook.
  reply.header(OPERATION_HEADER, request.id);
  return reply
    .code(error.status)
    .type('application/json')
    .send(errorBody(error, request.id));
}

/** Errors the router raises before any route or hook runs. */
export function fromRouterError(error: { code?: string }): ApiError {
  return new ApiError(
    'ERR_SERVICE_109',
    error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path segment is longer than 100 characters; no id is that long' : 'the path is not valid (check its percent-encoding)',
  );
}

/**
 * Requests Node's HTTP parser refuses (not HTTP at all, headers over 16 KiB) never reach
 * Fastify; they still get the API's error body, on a connection that is then closed.
 */
export function answerClientError(error: { code?: string }, socket: import('node:stream').Duplex, operationId: string) {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const api = error.code === 'HPE_HEADER_OVERFLOW'
    ? new ApiError('ERR_SERVICE_331', 'the request headers are larger than 16 KiB')
    : new ApiError('ERR_SERVICE_109', 'the request is not valid HTTP/1.1');
  endWithError(socket, api, operationId);
}

/** Writes an error response straight onto a socket Fastify never sees, then closes it. */
export function endWithError(socket: import('node:stream').Duplex, api: ApiError, operationId: string) {
  const body = JSON.stringify(errorBody(api, operationId));
  const extra = Object.entries(api.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.end(
    `HTTP/1.1 ${api.status} ${STATUS_CODES[api.status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `${OPERATION_HEADER}: ${operationId}\r\n${extra}Connection: close\r\n\r\n${body}`,
  );
}

/** Fastify's own errors (body parsing, limits) in the API's terms. */
export function fromFrameworkError(error: { code?: string; statusCode?: number; message: string }): ApiError | undefined {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('ERR_SERVICE_330', 'the request body is larger than 1 MiB');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return new ApiError('ERR_SERVICE_101', 'the request body must be JSON with Content-Type: application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('ERR_SERVICE_100', 'the request body is not valid JSON');
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return new ApiError('ERR_SERVICE_100', error.message);
  }
  return undefined;
}

/**
 * A database outage (unreachable, restarting, too many connections, a bound on a wait
 * reached: server/store/unavailable.ts) is the server's condition, not the request's: 503,
 * retryable, and nothing of the cause.
 */
export function fromDatabaseError(error: unknown): ApiError | undefined {
  if (isDatabaseUnavailable(error)) {
    return new ApiError('ERR_SERVICE_503', 'the database is unavailable; retry shortly', {}, { 'Retry-After': String(DATABASE_RETRY_AFTER_S) });
  }
  return undefined;
}

/** What Retry-After says while the database is away (seconds). */
export const DATABASE_RETRY_AFTER_S = 5;

/**
 * What the operator log says about an unexpected error: its name, code, the last line of
 * its message (the reason) and its stack frames. Prisma puts the query's arguments (the
 * request body, maybe secrets) in the middle of its messages, so those lines never appear.
 */
export function describeError(error: unknown) {
  const e = error as { name?: string; code?: string; message?: string; stack?: string };
  const reason = String(e?.message ?? error).trim().split('\n').filter((l) => l.trim()).at(-1)?.trim().slice(0, 500);
  const frames = String(e?.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l)).slice(0, 15).map((l) => l.trim());
  return { name: e?.name, code: e?.code, reason, stack: frames };
}

export const internalError = () => new ApiError('ERR_SERVICE_500', `${ERRORS.ERR_SERVICE_500.summary} Retry, and report the operation id if it persists.`);
