// The OpenAPI 3.1 document, generated from the route table (and so from the catalog).
import { toJsonSchema as jsonSchema } from '../provider/catalog/json-schema.js';
import { ERRORS } from './http/errors.js';
import type { ApiRoute } from './resources/routes.js';

const errorBody = {
  type: 'object',
  required: ['error_code', 'status_code', 'msg', 'details'],
  properties: {
    error_code: { type: 'string', enum: Object.keys(ERRORS) },
    status_code: { type: 'integer' },
    msg: { type: 'string' },
    details: {
      type: 'object',
      required: ['operation_id'],
      properties: { operation_id: { type: 'string' }, field: { type: 'string' }, reason: { type: 'string' } },
      additionalProperties: true,
    },
  },
};

export function openapiDocument(routes: ApiRoute[], serverUrl: string, version: string) {
  const paths: Record<string, Record<string, unknown>> = {};
  const schemas: Record<string, unknown> = { Error: errorBody };
  for (const route of routes) {
    if (route.kind && route.response && route.response === route.kind.read) schemas[route.kind.kind] ??= jsonSchema(route.kind.read, 'output');
    const params = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    const query = route.query.map((q) => ({
      name: q,
      in: 'query',
      required: false,
      schema: q === 'limit' ? { type: 'integer', minimum: 1, maximum: 100, default: 100 } : { type: 'string' },
      ...(q === 'beforeId' ? { deprecated: true, description: 'Alias of before_id.' } : {}),
    }));
    const responseSchema = route.response
      ? route.kind && route.response === route.kind.read
        ? { $ref: `#/components/schemas/${route.kind.kind}` }
        : jsonSchema(route.response, 'output')
      : undefined;
    const success = route.status === 204
      ? { description: 'No content' }
      : {
          description: 'Success',
          content: {
            'application/json': {
              schema: route.envelope
                ? {
                    type: 'object',
                    required: [route.envelope, 'uri', 'next_page_uri'],
                    properties: { [route.envelope]: { type: 'array', items: responseSchema }, uri: { type: 'string' }, next_page_uri: { type: ['string', 'null'] } },
                  }
                : responseSchema,
            },
          },
        };
    paths[route.path] ??= {};
    paths[route.path][route.method.toLowerCase()] = {
      operationId: `${route.method.toLowerCase()}${route.path.replace(/\{(\w+)\}/g, 'By_$1').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      summary: route.summary,
      tags: [route.tag],
      parameters: [{ $ref: '#/components/parameters/ServiceVersion' }, ...params, ...query],
      ...(route.request ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(route.request, 'input') } } } } : {}),
      // SPEC shows these with an empty JSON object as the body; the server ignores whatever is sent.
      ...(route.ignoresBody ? { requestBody: { required: false, description: 'Ignored; SPEC sends an empty JSON object.', content: { 'application/json': { schema: { type: 'object' } } } } } : {}),
      responses: {
        [String(route.status)]: success,
        default: { description: 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
      },
    };
  }
  paths['/healthz'] = {
    get: { operationId: 'getHealthz', summary: 'Database reachability (no authentication)', tags: ['Server'], security: [], responses: { 200: { description: 'Healthy' }, 503: { description: 'Database unreachable, or its disk full (storage: "full")' } } },
  };
  paths['/openapi.json'] = {
    get: { operationId: 'getOpenapi', summary: 'This document (no authentication)', tags: ['Server'], security: [], responses: { 200: { description: 'OpenAPI 3.1 document' } } },
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'edgeform: Tunnel, Edge and Traffic-Control Management API',
      version,
      description: 'Every request but /healthz and /openapi.json needs Authorization: Bearer <token> and Service-Version: 2. Errors share one body; see docs/api.md.',
    },
    servers: [{ url: serverUrl }],
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      parameters: { ServiceVersion: { name: 'Service-Version', in: 'header', required: true, schema: { type: 'string', enum: ['2'] } } },
      schemas,
    },
  };
}
