// A signed-in session at the edge: who (subject, email, name), since when, last seen. It lives
// only in its sealed cookie (cookies.ts), so every instance of the server accepts it and a
// restart keeps it. inactivity_timeout and maximum_duration are checked against deps.now().
import type { FullDoc } from '../types.js';

export interface Identity {
  subject: string;
  email?: string;
  name?: string;
  /** What the provider needs to check the user again later (OAuth's auth_check_interval): kept sealed in the session. */
  recheck?: Record<string, string>;
}

export interface Session extends Identity {
  /** When the user signed in, and when the session was last used (ms since the epoch). */
  created: number;
  seen: number;
  /** When the user was last checked against the provider. */
  checked?: number;
}

/** When the route leaves them 0 (docs/ingress.md). */
export const DEFAULT_INACTIVITY_SECONDS = 24 * 3600;
export const DEFAULT_MAXIMUM_SECONDS = 7 * 24 * 3600;

export interface SessionLimits {
  inactivityMs: number;
  maximumMs: number;
}

export function limitsOf(config: FullDoc[string]): SessionLimits {
  return {
    inactivityMs: (Number(config?.inactivity_timeout) || DEFAULT_INACTIVITY_SECONDS) * 1000,
    maximumMs: (Number(config?.maximum_duration) || DEFAULT_MAXIMUM_SECONDS) * 1000,
  };
}

/** Why a session cannot be used now, or undefined when it can. */
export function sessionEnded(s: Session, limits: SessionLimits, now: number): string | undefined {
  if (typeof s.subject !== 'string' || !s.subject || typeof s.created !== 'number' || typeof s.seen !== 'number') return 'malformed';
  if (now - s.created >= limits.maximumMs) return 'maximum_duration';
  if (now - s.seen >= limits.inactivityMs) return 'inactivity_timeout';
  return undefined;
}

/** Seconds the cookie should live: to the end of the maximum duration. */
export const cookieAgeSeconds = (s: Session, limits: SessionLimits, now: number) => Math.ceil((s.created + limits.maximumMs - now) / 1000);

/** The headers the upstream receives (and the edge strips from every incoming request). */
export const IDENTITY_HEADER_PREFIX = 'edgeform-auth-';
export function identityHeaders(s: Identity, provider: string): Record<string, string> {
  const clean = (v: string) => v.replace(/[\r\n\0]/g, ' ').slice(0, 1024);
  return {
    'edgeform-auth-provider': provider,
    'edgeform-auth-subject': clean(s.subject),
    ...(s.email ? { 'edgeform-auth-email': clean(s.email) } : {}),
    ...(s.name ? { 'edgeform-auth-name': encodeURIComponent(s.name).slice(0, 1024) } : {}),
  };
}
