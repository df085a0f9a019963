// Run outcomes to a webhook (`--notify URL`), as Argo CD notifications and Flux alerts:
// one JSON POST per run, signed with HMAC-SHA256 of the raw body when a secret is given
// (`Edgeform-Signature: sha256=<hex>`, the form the server's event deliveries use). A
// notification that cannot be delivered is a warning, never the run's failure.
import { createHmac } from 'node:crypto';
import type { Outcome } from './continuous/run.js';

export const NOTIFY_SIGNATURE_HEADER = 'Edgeform-Signature';
export const NOTIFY_OUTCOMES: readonly Outcome[] = ['success', 'failure', 'drift_repaired', 'drift_found'];

export interface Notification {
  source: 'edgeform';
  command: 'reconcile' | 'apply';
  stack: string;
  outcome: Outcome;
  /** When the run started (ISO 8601). */
  time: string;
  dry_run: boolean;
  /** Changes carried out. */
  applied: { add: number; change: number; destroy: number };
  drift_found: number;
  /** Addresses found changed outside edgeform. */
  drift: string[];
  api_calls: number;
  duration_ms: number;
  errors: string[];
}

export const signNotification = (secret: string, body: string) => `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;

export interface NotifyTarget {
  url: string;
  secret?: string;
  /** Outcomes sent (default all four). */
  on?: readonly Outcome[];
}

/** POSTs the notification (3 tries, 10 s each); resolves with a warning when it could not be delivered. */
export async function sendNotification(t: NotifyTarget, n: Notification): Promise<string | undefined> {
  if (t.on && !t.on.includes(n.outcome)) return undefined;
  const body = JSON.stringify(n);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'edgeform-notify' };
  if (t.secret) headers[NOTIFY_SIGNATURE_HEADER.toLowerCase()] = signNotification(t.secret, body);
  let why = '';
  for (let attempt = 1; attempt <= 3; attempt++) {
    try {
      const { request } = await import('undici');
      const res = await request(t.url, { method: 'POST', headers, body, headersTimeout: 10_000, bodyTimeout: 10_000 });
      await res.body.dump();
      if (res.statusCode < 300) return undefined;
      why = `HTTP ${res.statusCode}`;
      if (res.statusCode < 500 && res.statusCode !== 429) break;
    } catch (e) {
      why = (e as Error).message;
    }
    if (attempt < 3) await new Promise((r) => setTimeout(r, 500 * attempt));
  }
  return `the notification to ${redact(t.url)} was not delivered (${why})`;
}

/** A webhook URL may carry a token in its query or user info: warnings show only where it goes. */
const redact = (url: string) => {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return 'the --notify URL';
  }
};
