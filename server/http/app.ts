// The Fastify application: wire conventions (operation ids, version header, auth, rate
// limit, content type, errors, request log) around the route table.
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { authenticate, inactiveBotKey, invalidKey, type Authenticated } from '../resources/accounts.js';
import type { Ctx, ServerContext } from '../resources/context.js';
import type { ApiRoute, Method, NestedOperations } from '../resources/routes.js';
import { newIdBody } from '../store/ids.js';
import { ApiError } from './errors.js';
import type { Metrics } from './metrics.js';
import { parseJsonBody } from './body.js';
import { answered } from './drain.js';
import { requestLogLine, writeLogLine } from '../log-lines.js';
import { answerProtocolErrors, missingHost } from './protocol.js';
import { authFailureCounter, clientKey, RateLimiter } from './rate-limit.js';
import { SAML_PATH_PREFIX, samlEndpoints } from './saml-endpoints.js';
import { DiskFullState, diskFullHealth } from './disk-full.js';
import { answerClientError, API_KEY_HEADER, DATABASE_RETRY_AFTER_S, describeError, fromDatabaseError, fromFrameworkError, fromRouterError, internalError, OPERATION_HEADER, sendError } from './reply.js';

export const VERSION_HEADER = 'service-version';

/** The most characters of a header value an error repeats: an 8 KB header is not echoed back whole. */
const ECHO_MAX = 64;

/** A header value quoted for an error message, its first ECHO_MAX characters when longer, saying how long it was. */
function quoteStart(header: string | string[]): string {
  const value = typeof header === 'string' ? header : header.join(', ');
  if (value.length <= ECHO_MAX) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, ECHO_MAX))}… (${value.length.toLocaleString('en-US')} characters)`;
}
const PUBLIC = new Set(['/healthz', '/openapi.json', '/metrics']);

/** Whether a request target's path (query and trailing slashes aside) needs no key: the public paths and the SAML SP URLs. */
function isPublic(url: string): boolean {
  const q = url.indexOf('?');
  let end = q < 0 ? url.length : q;
  while (end > 1 && url.charCodeAt(end - 1) === 47 /* / */) end--;
  const path = end === url.length ? url : url.slice(0, end);
  return PUBLIC.has(path) || path.startsWith(SAML_PATH_PREFIX);
}
const METHODS: Method[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
/** Client addresses whose failed authentications are counted at once; the oldest is forgotten past it. */

declare module 'fastify' {
  interface FastifyRequest {
    /** The handler's context (the server's, and the caller), once authenticated. */
    ctx?: Ctx;
    /** performance.now() when the request arrived. */
    startedAt: number;
    /** The route's template, set by its handler ('' until then: the request log's metrics ask Fastify). */
    routeTemplate: string;
  }
}

export interface AppOptions {
  server: ServerContext;
  routes: ApiRoute[];
  apiRateLimit: number;
  /** The rate limit's window in ms (default a minute). */
  apiRateWindowMs?: number;
  /** Failed authentications per minute per client address; 0 turns the limit off. */
  authFailureLimit?: number;
  /** The failed-authentication counter per address, shared with the agent endpoint (server/main.ts); made here when not given. */
  authFailures?: RateLimiter;
  /** Where request log lines go (one JSON object per line). */
  log?: (line: string) => void;
  openapi: () => unknown;
  /** True once shutdown has begun (before Fastify's own close): requests get 503 with Connection: close. */
  isClosing?: () => boolean;
  /** Draining on SIGTERM: /healthz answers 503 so a load balancer stops sending (the API still answers meanwhile). */
  isDraining?: () => boolean;
  /** Prometheus metrics: API requests are counted here and GET /metrics renders them (docs/ingress.md). */
  metrics?: Metrics;
  /** Whether the database's disk was found full lately (disk-full.ts): writes answer 503 ERR_SERVICE_507, /healthz says so. */
  diskFull?: DiskFullState;
}

const fastifyPath = (p: string) => p.replace(/\{(\w+)\}/g, ':$1');

export function buildApp(opts: AppOptions): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: 1024 * 1024,
    genReqId: () => `op_${newIdBody()}`,
    requestIdHeader: false,
    // Fastify's own 503 body does not have the API's error shape; the onRequest hook answers instead.
    return503OnClosing: false,
    routerOptions: { ignoreTrailingSlash: true },
    frameworkErrors: (error, request, reply) => sendError(request, reply, fromRouterError(error)),
    clientErrorHandler: (error, socket) => answerClientError(error as { code?: string }, socket, `op_${newIdBody()}`),
  });
  answerProtocolErrors(app);
  const limiter = new RateLimiter(opts.apiRateLimit, opts.apiRateWindowMs);
  /** Counts `n` requests for the key, or throws the 429 (or, for a weight no window can ever hold, the 400 saying so). */
  const limit = (keyId: string, n: number) => {
    const capacity = limiter.capacity;
    if (capacity !== undefined && n > capacity) {
      throw new ApiError('ERR_SERVICE_229', `this request counts as ${n} requests against the API rate limit, more than the ${capacity} a key may make in its window (--api-rate-limit / EDGEFORM_API_RATE_LIMIT); send a smaller batch`, { weight: n, limit: capacity });
    }
    const wait = limiter.take(keyId, Date.now(), n);
    if (wait > 0) throw new ApiError('ERR_SERVICE_226', `too many requests for this API key; retry in ${wait} s`, { retry_after: wait }, { 'Retry-After': String(wait) });
  };
  const diskFull = opts.diskFull ?? new DiskFullState();
  const failures = opts.authFailures ?? authFailureCounter(opts.authFailureLimit ?? 0, opts.apiRateWindowMs);
  /** A presented token that did not authenticate: 401, or 429 once the address has failed too often. */
  const refuse = (request: FastifyRequest, error: ApiError) => {
    const wait = failures.take(clientKey(request.ip));
    if (wait > 0) return new ApiError('ERR_SERVICE_227', `too many failed authentications from this address; retry in ${wait} s`, { retry_after: wait }, { 'Retry-After': String(wait) });
    return error;
  };
  const log = opts.log ?? writeLogLine;

  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });

  app.decorateRequest('ctx', undefined);
  app.decorateRequest('startedAt', 0);
  app.decorateRequest('routeTemplate', '');

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, text, done) => {
    try {
      done(null, parseJsonBody(String(text), req.headers['content-type']));
    } catch (e) {
      done(e as ApiError, undefined);
    }
  });

  // A handler's context: the server's, and the caller. Made once per authenticated caller
  // (a cached one answers many requests) rather than copied per request; the server's
  // context is its prototype, so what is added to it later is seen.
  const contexts = new WeakMap<Authenticated, Ctx>();
  const contextOf = (found: Authenticated): Ctx => {
    let ctx = contexts.get(found);
    if (!ctx) {
      ctx = Object.create(opts.server) as Ctx;
      ctx.caller = { keyId: found.keyId, ownerId: found.ownerId, admin: found.admin };
      contexts.set(found, ctx);
    }
    return ctx;
  };

  /** The checks after authentication; `found` is who the token is, if anyone. */
  const admit = (request: FastifyRequest, reply: FastifyReply, found: Authenticated | undefined) => {
    // A valid key is never refused for its address's failures: a guesser sharing it (a NAT, a proxy) cannot lock others out.
    if (!found) throw refuse(request, invalidKey());
    if (!found.active) throw refuse(request, inactiveBotKey());
    // Credentials first: a caller without a valid key learns nothing else about the request,
    // and a bare request is told it needs authenticating (401), not which header it lacks.
    const version = request.headers[VERSION_HEADER];
    if (version === undefined) throw new ApiError('ERR_SERVICE_218', 'the Service-Version header is missing; send Service-Version: 2');
    if (version !== '2') throw new ApiError('ERR_SERVICE_217', `Service-Version ${quoteStart(version)} is not supported; send Service-Version: 2`);
    // A route that counts more than one request (the batch) takes its weight once its body is read.
    if (!(request.routeOptions.config as { weighted?: boolean } | undefined)?.weighted) limit(found.keyId, 1);
    request.ctx = contextOf(found);
    // Which key this is, so a client can avoid deleting the key it runs on (docs/api.md).
    reply.header(API_KEY_HEADER, found.keyId);
  };

  // One callback-style hook does every check before routing: a cached caller (most requests)
  // is admitted without a promise, and each further hook was a pass through Fastify's hook runner.
  app.addHook('onRequest', (request, reply, done) => {
    let pending: Promise<Authenticated | undefined> | undefined;
    try {
      request.startedAt = performance.now();
      const h = request.headers;
      // A request with no body has no content type to judge: a DELETE or POST that names one
      // (text/plain, a form) but sends nothing is read as sending nothing.
      if (h['content-type'] !== undefined && h['transfer-encoding'] === undefined && (h['content-length'] === undefined || h['content-length'] === '0')) delete h['content-type'];
      const noHost = missingHost(request);
      if (noHost) throw noHost;
      reply.header(OPERATION_HEADER, request.id);
      // A request on a kept-alive connection after SIGTERM: refuse it so the client retries elsewhere.
      if (closing || opts.isClosing?.()) throw new ApiError('ERR_SERVICE_503', 'the server is shutting down; retry', {}, { Connection: 'close', 'Retry-After': '1' });
      // The SAML SP URLs are called by identity providers and browsers (saml-endpoints.ts).
      if (isPublic(request.url)) return done();
      const auth = request.headers.authorization;
      const bearer = auth && /^Bearer\s+(\S+)\s*$/i.exec(auth);
      if (!bearer) throw new ApiError('ERR_SERVICE_201', 'send Authorization: Bearer <API key token>', {}, { 'WWW-Authenticate': 'Bearer' });
      const found = authenticate(opts.server, bearer[1]);
      if (!(found instanceof Promise)) {
        admit(request, reply, found);
        return done();
      }
      pending = found;
    } catch (e) {
      return done(e as Error);
    }
    pending.then((found) => {
      try {
        admit(request, reply, found);
      } catch (e) {
        return done(e as Error);
      }
      done();
    }, (e: Error) => done(e));
  });

  app.addHook('onResponse', (request, reply, done) => {
    const ms = performance.now() - request.startedAt;
    const status = reply.statusCode;
    // The route's template (never the path a client chose) keeps the metric's labels bounded.
    opts.metrics?.observeApi(request.method, request.routeTemplate || (request.routeOptions.url ?? 'unmatched'), status, ms / 1000);
    const query = request.url.indexOf('?');
    answered(request.raw.socket);
    log(requestLogLine(status >= 500 ? 'error' : 'info', request.method, query < 0 ? request.url : request.url.slice(0, query), status, ms, request.id));
    done();
  });

  /** The API error a thrown error is answered with; a database outage or a fault is logged (to stderr) with the operation id. */
  const errorOf = (error: unknown, operationId: string): ApiError => {
    if (error instanceof ApiError) return error;
    const mapped = fromFrameworkError(error as { code?: string; statusCode?: number; message: string });
    if (mapped) return mapped;
    const unavailable = diskFull.classify(error) ?? fromDatabaseError(error);
    // A database outage is one condition, not a fault per request: a warning without the stack.
    const described = describeError(error);
    const line = unavailable ? { level: 'warn', operation_id: operationId, msg: 'the database is unavailable; answered 503', error: { name: described.name, code: described.code, reason: described.reason } } : { level: 'error', operation_id: operationId, error: described };
    process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), ...line })}\n`);
    return unavailable ?? internalError();
  };

  app.setErrorHandler((error, request, reply) => sendError(request, reply, errorOf(error, request.id)));

  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, new ApiError('ERR_SERVICE_301', `no such path: ${request.method} ${request.url.split('?')[0]}`)),
  );

  // Off the write pool (Database.check): a locked row or a full pool does not stall it.
  app.get('/healthz', async (_request, reply) => {
    if (diskFull.fullSince()) return reply.code(503).send(diskFullHealth(diskFull));
    if (opts.isDraining?.()) return reply.code(503).header('Retry-After', '1').send({ status: 'draining' });
    const bus = opts.server.gateway?.busState;
    // On SQLite (one instance) there is no bus to report.
    const notifications = bus && bus.state !== 'local' ? { notifications: bus.state } : {};
    try {
      await opts.server.db.check();
      return { status: 'ok', database: 'ok', ...notifications };
    } catch {
      return reply.code(503).header('Retry-After', String(DATABASE_RETRY_AFTER_S)).send({ status: 'unavailable', database: 'unreachable', ...notifications });
    }
  });
  app.get('/openapi.json', async () => opts.openapi());
  app.register(samlEndpoints, { server: opts.server });
  app.get('/metrics', async (_request, reply) => {
    if (!opts.metrics) throw new ApiError('ERR_SERVICE_301', 'no such path: GET /metrics');
    const { contentType, text } = await opts.metrics.render();
    return reply.type(contentType).send(text);
  });

  /** Operations a request carries out (a batch's), each answered, logged and counted in the metrics as a request of its own. */
  const nestedFor = (request: FastifyRequest): NestedOperations => ({
    operationId: request.id,
    errorOf,
    done: (method, path, template, status, ms, operationId) => {
      opts.metrics?.observeApi(method, template, status, ms / 1000);
      const line = requestLogLine(status >= 500 ? 'error' : 'info', method, path, status, ms, operationId);
      log(`${line.slice(0, -1)},"batch_operation_id":${JSON.stringify(request.id)}}`);
    },
  });

  const byPath = new Map<string, Set<Method>>();
  for (const route of opts.routes) {
    const url = fastifyPath(route.path);
    byPath.set(url, (byPath.get(url) ?? new Set()).add(route.method));
    app.route({
      method: route.method,
      url,
      ...(route.weight ? { config: { weighted: true } } : {}),
      // Without a content type or length Fastify reads no body, so none can be refused.
      ...(route.ignoresBody ? { preParsing: async (request: FastifyRequest) => {
        for (const h of ['content-type', 'content-length', 'transfer-encoding']) delete request.headers[h];
      } } : {}),
      handler: async (request: FastifyRequest, reply) => {
        request.routeTemplate = url;
        const query = request.query as Record<string, string | string[] | undefined>;
        const unknown: string[] = [];
        for (const q in query) if (!route.query.includes(q)) unknown.push(q);
        if (unknown.length) {
          throw new ApiError('ERR_SERVICE_104', `unknown query parameter ${unknown.map((q) => `"${q}"`).join(', ')}; supported: ${route.query.join(', ') || 'none'}`, { field: unknown[0] });
        }
        const ctx = request.ctx!;
        if (route.weight) limit(ctx.caller.keyId, route.weight(request.body, ctx));
        const out = await route.handle(ctx, {
          params: request.params as Record<string, string>,
          query,
          body: route.method === 'GET' || route.method === 'DELETE' ? undefined : request.body,
          ...(route.weight ? { nested: nestedFor(request) } : {}),
        });
        reply.code(route.status);
        return route.status === 204 ? reply.send() : out;
      },
    });
  }
  for (const [url, methods] of byPath) {
    const allow = [...methods].join(', ');
    // HEAD is answered wherever GET is (Fastify adds it); OPTIONS, TRACE and every other method Fastify knows are refused alike.
    const others = [...new Set([...METHODS, ...app.supportedMethods])].filter((m) => !methods.has(m as Method) && !(m === 'HEAD' && methods.has('GET')));
    if (!others.length) continue;
    app.route({
      method: others,
      url,
      handler: async (request, reply) =>
        sendError(request, reply, new ApiError('ERR_SERVICE_310', `${request.method} is not allowed on ${request.url.split('?')[0]}; allowed: ${allow}`, {}, { Allow: allow })),
    });
  }
  return app;
}
