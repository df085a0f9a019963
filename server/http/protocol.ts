// Requests Node's HTTP server answers or drops itself, before Fastify routes them: an
// unsupported Expect (a bare 417), CONNECT (the socket destroyed, no answer) and an HTTP/1.1
// request without Host (a bare 400). Each gets the API's error body and operation id instead.
import type { Server } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { newIdBody } from '../store/ids.js';
import { ApiError } from './errors.js';
import { endWithError, errorBody, OPERATION_HEADER } from './reply.js';

const opId = () => `op_${newIdBody()}`;

export function answerProtocolErrors(app: FastifyInstance) {
  const server = app.server as Server;
  server.on('checkExpectation', (req, res) => {
    const id = opId();
    const api = new ApiError('ERR_SERVICE_315', `Expect: ${String(req.headers.expect).slice(0, 100)} is not supported; send no Expect header, or Expect: 100-continue`);
    const body = JSON.stringify(errorBody(api, id));
    res.writeHead(api.status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), [OPERATION_HEADER]: id, Connection: 'close' });
    res.end(body);
  });
  server.on('connect', (_req, socket) => {
    endWithError(socket, new ApiError('ERR_SERVICE_310', 'CONNECT is not supported: this server is not a proxy', {}, { Allow: 'GET, POST, PUT, PATCH, DELETE' }), opId());
  });
  // Node's own check answers a bare 400; the app's onRequest hook answers in the API's shape (missingHost).
  (server as Server & { requireHostHeader: boolean }).requireHostHeader = false;
}

/** The error for an HTTP/1.1 request without Host (Node's check is off: answerProtocolErrors), if this is one. */
export function missingHost(request: FastifyRequest): ApiError | undefined {
  if (request.headers.host !== undefined || request.raw.httpVersion !== '1.1') return undefined;
  return new ApiError('ERR_SERVICE_109', 'the request has no Host header, which HTTP/1.1 requires');
}
