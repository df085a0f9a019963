// A signed-in session at the edge: who (subject, email, name), since when, last seen, and an
// id. It lives in its sealed cookie (cookies.ts), so every instance of the server accepts it
// and a restart keeps it. inactivity_timeout and maximum_duration are checked against
// deps.now(). Signing out revokes the session's id (SignedOut below): the cookie the browser
// had, or any copy of it, no longer works, though it would still open.
import type { FullDoc } from '../types.js';

export interface Identity {
  subject: string;
  email?: string;
  name?: string;
  /** What the provider needs to check the user again later (OAuth's auth_check_interval): kept sealed in the session. */
  recheck?: Record<string, string>;
}

export interface Session extends Identity {
  /** The session's id, the same in every renewed cookie: what signing out revokes. */
  sid: string;
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
  // A session without an id (made before sessions had one) could not be signed out of: signed in again.
  if (typeof s.subject !== 'string' || !s.subject || typeof s.created !== 'number' || typeof s.seen !== 'number' || typeof s.sid !== 'string') return 'malformed';
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

/** Sessions signed out of that one instance remembers at most (docs/ingress.md, "Sessions"). */
export const MAX_SIGNED_OUT = 100_000;

/**
 * Sessions signed out of, by id, each remembered until its cookie could no longer be used
 * anyway (its sign-in plus the route's maximum_duration), so memory is bounded by the
 * sign-outs of one maximum_duration and by MAX_SIGNED_OUT. Full of live entries, nothing is
 * forgotten early (that would bring a signed-out session back): every session signed in
 * before that moment is ended instead, on every route of this instance, and the list starts
 * again. Kept in this process: another instance of the server does not know of a sign-out
 * here (docs/ingress.md says so).
 */
export class SignedOut {
  private readonly until = new Map<string, number>();
  /** Sessions signed in before this (ms) are ended: the list was full. */
  private endedBefore = 0;

  constructor(private readonly max = MAX_SIGNED_OUT) {}

  signOut(sid: string, until: number, now: number) {
    if (until <= now) return;
    if (this.until.size >= this.max) for (const [k, t] of this.until) if (t <= now) this.until.delete(k);
    if (this.until.size >= this.max) {
      this.endedBefore = now + 1;
      this.until.clear();
      return;
    }
    this.until.set(sid, until);
  }

  /** Whether a session was signed out of (or signed in before the list last filled). */
  has(s: Pick<Session, 'sid' | 'created'>, now: number): boolean {
    if (s.created < this.endedBefore) return true;
    const t = this.until.get(s.sid);
    if (t === undefined) return false;
    if (t > now) return true;
    this.until.delete(s.sid);
    return false;
  }

  get size() {
    return this.until.size;
  }
}

/** One per server process: every sign-in route's sessions (ids are random, 128 bits). */
export const signedOut = new SignedOut();
