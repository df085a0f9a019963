// Agent-side resources: read-only views of what connected agents created.
import { z } from 'zod';
import { defineKind } from './define.js';
import { ref, timestamp } from './fields.js';

export const tunnelSession = defineKind({
  kind: 'TunnelSession',
  type: 'tunnel_session',
  prefix: 'ts',
  path: '/tunnel_sessions',
  envelope: 'tunnel_sessions',
  operations: ['read', 'list'],
  actions: ['restart', 'stop', 'update'],
  summary: 'An online agent session (read-only; agents create them).',
  events: true,
  computed: {
    agent_version: z.string(),
    credential: ref(),
    ip: z.string(),
    metadata: z.string(),
    os: z.string(),
    region: z.string(),
    started_at: timestamp(),
    transport: z.string(),
  },
});

export const tunnel = defineKind({
  kind: 'Tunnel',
  type: 'tunnel',
  prefix: 'tn',
  path: '/tunnels',
  envelope: 'tunnels',
  operations: ['read', 'list'],
  summary: 'An online tunnel (read-only; agents create them).',
  omitUnset: true,
  events: true,
  computed: {
    public_url: z.string().optional(),
    started_at: timestamp(),
    metadata: z.string(),
    proto: z.string().optional(),
    region: z.string(),
    tunnel_session: ref(),
    endpoint: ref().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    backends: z.array(ref()).optional(),
    forwards_to: z.string(),
  },
});

/** Agents' endpoints are rows of the one endpoint collection (endpoints.ts), with type agent. */
export { cloudEndpoint as endpoint } from './endpoints.js';
