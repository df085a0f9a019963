// The event outbox: an event is written in the same transaction as the change that causes
// it, with one Delivery row per destination subscribed to its type (and not at all when
// no subscription wants it). The delivery worker
// (delivery.ts) sends them after the commit, or writes them to the server's log for `log`
// destinations, which also keep them readable.
import { eventDestination, eventSubscription } from '../../provider/catalog/events.js';
import { kindOfId, type KindEntry } from '../../provider/catalog/index.js';
import type { ResourceRow } from '../store/hot-reads.js';
import type { EventWrites, Writes } from '../store/hot-writes.js';
import { newId } from '../store/ids.js';

type Doc = Record<string, any>;
export type EventAction = 'created' | 'updated' | 'deleted';

/** RFC 3339 in UTC without fractions: toISOString() always ends in ".sssZ" (a regular expression per timestamp was a read's largest share after the statement). */
export const rfc3339 = (d: Date) => `${d.toISOString().slice(0, -5)}Z`;

/** The UTC forms both databases give timestamps as text in: SQLite's as written ("+00:00"), PostgreSQL's to_char ("Z"). */
const UTC_TEXT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|\+00:00)$/;

/** rfc3339 of a stored timestamp's text (TextRow): cut to its seconds when it is UTC text as the databases give it, else through a Date. */
export const readTime = (text: string) => (UTC_TEXT.test(text) ? `${text.slice(0, 19)}Z` : rfc3339(new Date(text)));

/** Records `<type>_<action>.v0` for a kind that emits events; `object` is the read form. */
export async function emit(tx: EventWrites, kind: KindEntry, action: EventAction, object: Doc) {
  if (!kind.spec.events) return;
  const type = `${kind.type}_${action}.v0`;
  const subscriptions = await (early.get(tx) ?? tx.ofKind(eventSubscription.kind));
  const targets = new Set<string>();
  for (const s of subscriptions) {
    const body = (s.data as { body: Doc }).body;
    if ((body.sources as { type: string }[]).some((src) => src.type === type)) for (const d of body.destination_ids as string[]) targets.add(d);
  }
  // Subscriptions only ever see events from their creation on, so an event nobody wants is not kept.
  if (!targets.size) return;
  const destinations = (await tx.resources([...targets])).filter((d) => d.kind === eventDestination.kind);
  const now = new Date();
  const seq = await tx.insertEvent({ id: newId('ev'), type, resourceId: object.id, payload: { type, created_at: rfc3339(now), object }, createdAt: now });
  // A `log` destination's events too: the delivery worker writes each to the server's log once committed.
  await tx.insertDeliveries(destinations.map((d) => ({ destinationId: d.id, eventSeq: seq, nextAttemptAt: now })));
}

const early = new WeakMap<EventWrites, Promise<ResourceRow[]>>();

/**
 * For a write transaction of `kind` that will emit: reads the subscriptions now, with the
 * transaction's first statements (on PostgreSQL in the same round trip as the caller's lock,
 * instead of one of its own before the COMMIT), and returns the writes to use from here on,
 * whose emit uses that answer. The event goes to the subscriptions committed when the
 * transaction began rather than when it emitted (each is a moment within the transaction; a
 * subscription committed in between was concurrent with the write either way). Once the
 * transaction itself writes a subscription or deletes a row (which may take subscriptions with
 * it), emit reads them again.
 */
export function readSubscriptionsEarly(w: Writes, kind: KindEntry): Writes {
  if (!kind.spec.events) return w;
  const subscriptions = w.ofKind(eventSubscription.kind);
  // A transaction that fails before it emits never looks at the answer.
  subscriptions.catch(() => {});
  const stale = () => early.delete(out);
  const out: Writes = {
    ...w,
    insert(row) {
      if (row.kind === eventSubscription.kind) stale();
      return w.insert(row);
    },
    update(id, updatedAt, data, sealed) {
      if (kindOfId(id)?.kind === eventSubscription.kind) stale();
      return w.update(id, updatedAt, data, sealed);
    },
    remove(id) {
      stale();
      return w.remove(id);
    },
  };
  early.set(out, subscriptions);
  return out;
}

/** A `log` destination keeps its events for GET /event_destinations/{id}/events instead of sending them. */
export const isLogTarget = (body: Doc) => (body.target as Doc | undefined)?.log != null;

/** The JSON an event is delivered and listed as. */
export const eventBody = (e: { id: string; payload: unknown }) => ({ id: e.id, ...(e.payload as Doc) });
