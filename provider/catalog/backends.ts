// Backends: where edge traffic goes.
import { z } from 'zod';
import { defineKind } from './define.js';
import { description, headerMap, ITEM_LIMITS, labelMap, metadata, ref, refKeyedMap } from './fields.js';
import { BACKEND_KINDS } from './modules.js';

const crud = ['create', 'read', 'list', 'update', 'delete'] as const;

export const tunnelGroupBackend = defineKind({
  kind: 'TunnelGroupBackend',
  type: 'tunnel_group_backend',
  prefix: 'bkdtg',
  path: '/backends/tunnel_group',
  envelope: 'backends',
  operations: crud,
  summary: 'Sends traffic to the online tunnels whose labels match.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    labels: labelMap().describe('Labels a tunnel must carry to serve this backend.'),
  },
  computed: { tunnels: z.array(ref()).describe('Online tunnels whose labels match.') },
});

export const httpResponseBackend = defineKind({
  kind: 'HTTPResponseBackend',
  type: 'http_response_backend',
  prefix: 'bkdhr',
  path: '/backends/http_response',
  envelope: 'backends',
  operations: crud,
  summary: 'Answers every request with a fixed status, headers and body.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    body: z.string().max(65536).default('').describe('Body of the response.'),
    headers: headerMap().nullable().default({}).describe('Response headers; names are returned in lower case. Null is the same as no headers.'),
    status_code: z.number().int().min(100).max(599).default(200).describe('HTTP status code, 100..599 (default 200).'),
  },
  normalize: (d) => ({ ...d, headers: d.headers ?? {} }),
});

export const weightedBackend = defineKind({
  kind: 'WeightedBackend',
  type: 'weighted_backend',
  prefix: 'bkdwd',
  path: '/backends/weighted',
  envelope: 'backends',
  operations: crud,
  summary: 'Splits traffic among child backends by weight.',
  events: true,
  body: {
    description: description(),
    metadata: metadata(),
    backends: refKeyedMap(BACKEND_KINDS, z.number().int().min(0, 'weights are 0..10000').max(10000, 'weights are 0..10000'), { onDelete: 'restrict', acyclic: true, max: ITEM_LIMITS.weights })
      .default({})
      .describe('Child backend id to weight (0..10000). Children must exist; a weighted backend may not contain itself, directly or through other weighted backends.'),
  },
});
