// What a `log` event destination does with each event: one JSON line in the server's log
// (besides keeping it for GET /event_destinations/{id}/events). Events never carry a token
// or a secret (write-only fields read back as null), so the line holds none either.
import { eventBody } from './outbox.js';

/** The log line for one event delivered to a `log` destination. */
export function logTargetLine(destinationId: string, event: { id: string; payload: unknown }): string {
  const body: Record<string, unknown> = eventBody(event);
  return JSON.stringify({ time: new Date().toISOString(), level: 'info', msg: 'event', destination_id: destinationId, event_id: event.id, event_type: body.type, event: body });
}
