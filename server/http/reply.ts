// The error body every failure shares, and the request-scoped operation id.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, ERRORS } from './errors.js';

export function sendError(request: FastifyRequest, reply: FastifyReply, error: ApiError) {
  for (const [k, v] of Object.entries(error.headers)) reply.header(k, v);
  return reply
    .code(error.status)
    .type('application/json')
    .send({
      error_code: error.code,
      status_code: error.status,
      msg: error.message,
      details: { operation_id: request.id, ...error.details },
    });
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

export const internalError = () => new ApiError('ERR_SERVICE_500', `${ERRORS.ERR_SERVICE_500.summary} Retry, and report the operation id if it persists.`);
