// Event destinations and subscriptions.
import { z } from 'zod';
import { defineKind } from './define.js';
import { description, metadata, refIds, secret, url } from './fields.js';

export const eventDestination = defineKind({
  kind: 'EventDestination',
  type: 'event_destination',
  prefix: 'ed',
  path: '/event_destinations',
  envelope: 'event_destinations',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'Where subscribed events go: an HTTP endpoint (signed with HMAC-SHA256 when a secret is set) or the server\'s own log.',
  events: true,
  actions: ['events'],
  body: {
    description: description(),
    metadata: metadata(),
    format: z.enum(['json']).default('json').describe('Event encoding; json.'),
    target: z
      .strictObject({
        http: z
          .strictObject({
            url: url().describe('URL each event is POSTed to.'),
            secret: secret(z.string().min(1).max(255).optional()).describe('HMAC-SHA256 key for the Service-Signature header.'),
          })
          .nullable()
          .optional()
          .describe('POSTs each event to a URL, signed when a secret is set.'),
        log: z.strictObject({}).nullable().optional().describe('Keeps each event on the server, listed by GET /event_destinations/{id}/events.'),
      })
      .superRefine((t, ctx) => {
        const set = Object.entries(t).filter(([, v]) => v != null).map(([k]) => k);
        if (set.length !== 1) ctx.addIssue({ code: 'custom', message: `set exactly one target (http or log); got ${set.length ? set.join(', ') : 'none'}` });
      })
      .describe('Exactly one of http or log.'),
  },
});

/** Filled by the catalog index: every `<type>_<action>.v0` event type. */
export const eventTypes: string[] = [];

export const eventSubscription = defineKind({
  kind: 'EventSubscription',
  type: 'event_subscription',
  prefix: 'esb',
  path: '/event_subscriptions',
  envelope: 'event_subscriptions',
  operations: ['create', 'read', 'list', 'update', 'delete'],
  summary: 'Routes events of chosen types to event destinations.',
  events: true,
  body: {
    description: description('chars'),
    metadata: metadata('chars'),
    sources: z
        .array(
          z.strictObject({
            type: z.string().superRefine((v, ctx) => {
              if (!eventTypes.includes(v)) {
                ctx.addIssue({ code: 'custom', message: `unknown event type "${v}"; types have the form <resource>_<created|updated|deleted>.v0, e.g. ip_policy_created.v0` });
              }
            }).describe('Event type, <resource>_<created|updated|deleted>.v0, e.g. ip_policy_created.v0.'),
          }),
        )
        .min(1, 'name at least one source')
        .max(64)
        .superRefine((list, ctx) => {
          const seen = new Set<string>();
          list.forEach((s, i) => {
            if (seen.has(s.type)) ctx.addIssue({ code: 'custom', path: [i, 'type'], message: `event type ${s.type} is listed twice` });
            seen.add(s.type);
          });
        })
        .describe('Event types that trigger the subscription; each reads back with its own uri.'),
    destination_ids: refIds(['EventDestination'], { readAs: 'destinations', onDelete: 'restrict', min: 1, max: 32, what: 'destination' }).describe('Event destinations the events go to.'),
  },
});
