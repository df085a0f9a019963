// Drift without polling: continuous reconcile asks the server to tell it of changes. It
// creates an `http` event destination pointed at its own receiver (POST /events on
// --metrics-address), signed with a secret only this process knows, and one subscription to
// the created/updated/deleted events of every kind a stack can manage. An event about a
// resource of this stack (or of no stack: a child may carry no stamp) starts a run at once;
// the interval stays as the fallback. Both are removed when the process stops, and any left
// by an earlier process for the same stack and URL (killed) are removed when it starts.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ApiClient } from '../../provider/client/index.js';
import { eventDestination, eventSubscription } from '../../provider/catalog/events.js';
import { childSpecsOf, manifestKinds } from '../manifest/kinds.js';
import { decodeMetadata } from '../live/stamp.js';
import type { Route } from './metrics.js';

/** Where the receiver listens on --metrics-address. */
export const EVENTS_PATH = '/events';
/** The metadata key that marks a destination or subscription as this feature's. */
const MARK = 'edgeform_reconcile';

type Doc = Record<string, any>;

/** `<type>_created|updated|deleted.v0` of every kind (and child kind) a manifest can declare. */
export function eventTypes(): string[] {
  const types = new Set<string>();
  for (const k of manifestKinds) {
    if (k.spec.events) types.add(k.type);
    for (const c of childSpecsOf(k.kind)) if (c.entry.spec.events) types.add(c.entry.type);
  }
  return [...types].flatMap((t) => ['created', 'updated', 'deleted'].map((a) => `${t}_${a}.v0`));
}

export interface EventFeed {
  route: Route;
  destinationId: string;
  subscriptionId: string;
  /** Deletes the subscription and the destination (never throws; returns what went wrong). */
  close(): Promise<string | undefined>;
}

export interface FeedOptions {
  stack: string;
  /** The URL the server POSTs to (this process's receiver). */
  url: string;
  /** Called for each new event that may concern the stack: its type and the resource's id. */
  onEvent: (type: string, id: string) => void;
}

const markOf = (r: Doc): Doc | undefined => {
  try {
    return (JSON.parse(r.metadata ?? '') as Doc)?.[MARK];
  } catch {
    return undefined;
  }
};

/** Removes the destinations and subscriptions an earlier process left for this stack and URL. */
async function removeLeftovers(client: ApiClient, opts: FeedOptions) {
  const mine = (r: Doc) => markOf(r)?.stack === opts.stack && markOf(r)?.url === opts.url;
  for (const s of (await client.list(eventSubscription)).filter(mine)) await client.delete(eventSubscription, s.id);
  for (const d of (await client.list(eventDestination)).filter(mine)) await client.delete(eventDestination, d.id);
}

export async function subscribe(client: ApiClient, opts: FeedOptions): Promise<EventFeed> {
  await removeLeftovers(client, opts);
  const secret = randomBytes(32).toString('hex');
  const metadata = JSON.stringify({ [MARK]: { stack: opts.stack, url: opts.url } });
  const description = `edgeform reconcile: stack ${opts.stack}`.slice(0, 255);
  const destination: Doc = await client.call('POST', '/event_destinations', { description, metadata, target: { http: { url: opts.url, secret } } });
  let subscription: Doc;
  try {
    subscription = await client.call('POST', '/event_subscriptions', { description, metadata, sources: eventTypes().map((type) => ({ type })), destination_ids: [destination.id] });
  } catch (e) {
    await client.delete(eventDestination, destination.id).catch(() => undefined);
    throw e;
  }
  const own = new Set([destination.id, subscription.id]);
  const seen = new Set<string>();
  const route: Route = (req, body, res) => {
    const given = String(req.headers['service-signature'] ?? '');
    const want = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
    if (req.method !== 'POST' || given.length !== want.length || !timingSafeEqual(Buffer.from(given), Buffer.from(want))) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not signed by the server this reconciler subscribed to' }));
      return;
    }
    res.writeHead(204).end();
    // At least once: a retried delivery is seen once.
    const eventId = String(req.headers['service-event-id'] ?? '');
    if (seen.has(eventId)) return;
    seen.add(eventId);
    if (seen.size > 10_000) seen.delete(seen.values().next().value as string);
    let event: Doc;
    try {
      event = JSON.parse(body.toString('utf8'));
    } catch {
      return;
    }
    const object: Doc = event?.object ?? {};
    if (own.has(object.id)) return;
    const stamp = decodeMetadata(typeof object.metadata === 'string' ? object.metadata : undefined).stamp;
    // Another stack's resource is none of this run's business.
    if (stamp && stamp.stack !== opts.stack) return;
    opts.onEvent(String(event.type), String(object.id));
  };
  return {
    route,
    destinationId: destination.id,
    subscriptionId: subscription.id,
    async close() {
      try {
        await client.delete(eventSubscription, subscription.id);
        await client.delete(eventDestination, destination.id);
        return undefined;
      } catch (e) {
        return `could not remove the event subscription ${subscription.id} and destination ${destination.id} (${(e as Error).message}); the next start of reconcile for stack "${opts.stack}" at the same URL removes them`;
      }
    },
  };
}
