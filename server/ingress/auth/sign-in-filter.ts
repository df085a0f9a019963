// The filter every sign-in module shares: a valid session passes with the identity headers
// added; no session sends the browser to the provider (GET/HEAD) or refuses (other methods);
// the callback and logout paths, fixed under the edge's own host, are answered here. What is
// particular to OIDC, OAuth or SAML is a SignInProvider.
import { randomBytes } from 'node:crypto';
import type { ErrorCode } from '../../http/errors.js';
import { errorAnswer } from '../http/error-page.js';
import type { Exchange, FullDoc, HttpFilter, IngressDeps } from '../types.js';
import { CALLBACK_PATH, STATE_ROUTE_SEPARATOR } from './callback-route.js';
import { CookieSealer, cookieHeaderWithout, readCookies, setCookie } from './cookies.js';
import { cookieAgeSeconds, identityHeaders, limitsOf, sessionEnded, signedOut, type Identity, type Session } from './session.js';

/** Under the route's own path: `/_edgeform/auth/logout`, or `/app/_edgeform/auth/logout` for a route on `/app`. */
export const LOGOUT_PATH = '/_edgeform/auth/logout';
/** How long a started sign-in may take before its callback is refused. */
const FLOW_MS = 10 * 60 * 1000;

/** A refusal with its code, shown to the user as a page. */
export class SignInRefused extends Error {
  constructor(readonly code: ErrorCode, message: string) {
    super(message);
  }
}

/** Thrown by a re-check when the session cannot be checked any more (an expired or revoked token): the user signs in again. */
export class SignInAgain extends Error {}

export interface SignInProvider {
  readonly name: string;
  /** Where to send the browser, and what its callback will need (kept in the sealed flow cookie). */
  start(redirectUri: string, flow: { state: string }): Promise<{ url: string; flow: Record<string, string> }>;
  /** The signed-in user from the callback URL, or a thrown SignInRefused. */
  finish(callbackUrl: URL, flow: Record<string, string>, redirectUri: string): Promise<Identity>;
  /** Checks a signed-in user again (auth_check_interval); throws SignInRefused when no longer allowed. */
  recheck?(data: Record<string, string>): Promise<void>;
  /**
   * Answers the callback path in place of the state check and finish() (SAML: the IdP POSTs
   * there, and the browser comes back with a GET). `flow` is this browser's sealed flow, if
   * any. Returns who signed in and where to send them, or undefined once it answered itself.
   */
  callback?(ex: Exchange, flow: Record<string, string> | undefined): Promise<{ identity: Identity; back: string } | undefined>;
}

interface Flow extends Record<string, string | number> {
  state: string;
  back: string;
  at: number;
}

const pathOnly = (p: string) => p.split('?')[0];
const sameSiteBack = (p: string) => (p.startsWith('/') && !p.startsWith('//') && !p.startsWith('/\\') ? p : '/');

function redirectTo(ex: Exchange, location: string, cookies: string[]) {
  ex.answer({ status: 302, headers: { location, 'cache-control': 'no-store', 'set-cookie': cookies, 'content-type': 'text/plain; charset=utf-8' }, body: `Redirecting to ${location}\n` });
}

export function signInFilter(config: FullDoc[string], route: FullDoc, deps: IngressDeps, provider: SignInProvider): HttpFilter {
  if (!deps.box) throw new Error('sign-in needs the server key, which this ingress was started without');
  const sealer = new CookieSealer(deps.box.derive('ingress sign-in cookies'));
  const prefix = String(config?.cookie_prefix ?? 'service.');
  const sessionCookie = `${prefix}session`;
  const flowCookie = `${prefix}signin`;
  const limits = limitsOf(config);
  const checkEveryMs = (Number(config?.auth_check_interval) || 0) * 1000;
  const sessionBind = `session:${route.id}`;
  const flowBind = `signin:${route.id}`;
  const refuse = (ex: Exchange, code: ErrorCode, message: string, why: string, extra: string[] = []) => {
    deps.log({ level: 'warn', msg: 'ingress sign-in refused', route: route.id, module: provider.name, code, reason: why });
    ex.answer(errorAnswer(code, message, extra.length ? { 'set-cookie': extra[0] } : {}));
  };
  const redirectUri = (ex: Exchange) => `https://${ex.host}${ex.publicPort === 443 ? '' : `:${ex.publicPort}`}${CALLBACK_PATH}`;

  async function startSignIn(ex: Exchange, extra: string[] = []) {
    if (ex.method !== 'GET' && ex.method !== 'HEAD') {
      refuse(ex, 'ERR_SERVICE_800', 'This route requires sign-in: open it in a browser to sign in first.', 'no session on a non-GET request', extra);
      return;
    }
    const state = `${route.id}${STATE_ROUTE_SEPARATOR}${randomBytes(24).toString('base64url')}`;
    let started;
    try {
      started = await provider.start(redirectUri(ex), { state });
    } catch (e) {
      return providerFailed(ex, e);
    }
    const flow: Flow = { ...started.flow, state, back: sameSiteBack(ex.path), at: deps.now() };
    redirectTo(ex, started.url, [...extra, setCookie(flowCookie, sealer.seal(flowBind, flow), FLOW_MS / 1000)]);
  }

  function providerFailed(ex: Exchange, e: unknown) {
    if (e instanceof SignInRefused) return refuse(ex, e.code, e.message, e.message, [setCookie(flowCookie, '', 0)]);
    return refuse(ex, 'ERR_SERVICE_803', 'The identity provider could not be reached or answered unexpectedly; try again later.', String((e as Error)?.message ?? e), [setCookie(flowCookie, '', 0)]);
  }

  async function callback(ex: Exchange, cookies: Map<string, string>) {
    const url = new URL(ex.path, redirectUri(ex));
    const flow = sealer.open<Flow>(flowBind, cookies.get(flowCookie));
    const clear = [setCookie(flowCookie, '', 0)];
    if (provider.callback) {
      const live = flow && typeof flow.at === 'number' && deps.now() - flow.at <= FLOW_MS ? (flow as unknown as Record<string, string>) : undefined;
      let done;
      try {
        done = await provider.callback(ex, live);
      } catch (e) {
        return providerFailed(ex, e);
      }
      return done && signedIn(ex, done.identity, done.back, clear);
    }
    if (!flow || typeof flow.at !== 'number' || deps.now() - flow.at > FLOW_MS) {
      return refuse(ex, 'ERR_SERVICE_801', 'This sign-in was not started from this browser or took too long; open the page you wanted again.', 'no valid sign-in cookie', clear);
    }
    if (url.searchParams.get('state') !== flow.state) {
      return refuse(ex, 'ERR_SERVICE_801', 'The sign-in callback does not match the sign-in this browser started; open the page you wanted again.', 'state mismatch', clear);
    }
    let who: Identity;
    try {
      who = await provider.finish(url, flow as unknown as Record<string, string>, redirectUri(ex));
    } catch (e) {
      return providerFailed(ex, e);
    }
    signedIn(ex, who, String(flow.back), clear);
  }

  function signedIn(ex: Exchange, who: Identity, back: string, clear: string[]) {
    const now = deps.now();
    const session: Session = { sid: randomBytes(16).toString('base64url'), subject: who.subject, email: who.email, name: who.name, recheck: who.recheck, created: now, seen: now, checked: now };
    deps.log({ level: 'info', msg: 'ingress sign-in', route: route.id, module: provider.name, subject: who.subject });
    redirectTo(ex, sameSiteBack(back), [...clear, setCookie(sessionCookie, sealer.seal(sessionBind, session), cookieAgeSeconds(session, limits, now))]);
  }

  return {
    async handle(ex, next) {
      const path = pathOnly(ex.path);
      const cookies = readCookies(ex.req.headers);
      if (path === CALLBACK_PATH) return callback(ex, cookies);
      if (path.endsWith(LOGOUT_PATH)) {
        // The session ends here, not only in this browser: its id is revoked until its cookie would have expired.
        const out = sealer.open<Session>(sessionBind, cookies.get(sessionCookie));
        if (out && typeof out.sid === 'string' && typeof out.created === 'number') signedOut.signOut(out.sid, out.created + limits.maximumMs, deps.now());
        ex.answer({ status: 200, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'set-cookie': [setCookie(sessionCookie, '', 0)] }, body: 'You are signed out.\n' });
        return;
      }
      // The edge's own cookies never reach the upstream.
      const cookie = cookieHeaderWithout(ex.upstreamHeaders.cookie, new Set([sessionCookie, flowCookie]));
      if (cookie) ex.upstreamHeaders.cookie = cookie;
      else delete ex.upstreamHeaders.cookie;
      if (config?.options_passthrough && ex.method === 'OPTIONS') return next();
      const now = deps.now();
      const raw = cookies.get(sessionCookie);
      const session = sealer.open<Session>(sessionBind, raw);
      const ended = session ? (sessionEnded(session, limits, now) ?? (signedOut.has(session, now) ? 'signed out' : undefined)) : raw ? 'unreadable (altered, or sealed for another route or key)' : undefined;
      if (!session || ended) {
        if (ended) deps.log({ level: 'info', msg: 'ingress session not accepted', route: route.id, module: provider.name, reason: ended });
        return startSignIn(ex);
      }
      let checked = session.checked ?? session.created;
      if (checkEveryMs > 0 && provider.recheck && session.recheck && now - checked >= checkEveryMs) {
        try {
          await provider.recheck(session.recheck);
          checked = now;
        } catch (e) {
          const gone = [setCookie(sessionCookie, '', 0)];
          if (e instanceof SignInAgain) {
            deps.log({ level: 'info', msg: 'ingress session not accepted', route: route.id, module: provider.name, reason: `re-check: ${e.message}` });
            return startSignIn(ex, gone);
          }
          if (e instanceof SignInRefused) return refuse(ex, e.code, e.message, `re-check: ${e.message}`, gone);
          return refuse(ex, 'ERR_SERVICE_803', 'The identity provider could not be reached to check your sign-in again; try again later.', `re-check: ${(e as Error)?.message ?? e}`);
        }
      }
      Object.assign(ex.upstreamHeaders, identityHeaders(session, provider.name));
      const renewed = setCookie(sessionCookie, sealer.seal(sessionBind, { ...session, seen: now, checked }), cookieAgeSeconds(session, limits, now));
      ex.onResponseHead((h) => {
        const prior = h.headers['set-cookie'];
        h.headers['set-cookie'] = [...(Array.isArray(prior) ? prior : prior ? [prior] : []), renewed];
      });
      await next();
    },
  };
}
