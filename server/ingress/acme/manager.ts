// Gets, renews and stores the edges' certificates from an ACME directory. Once a second it
// compares the names the table wants (names.ts) with the server-issued certificates the
// table holds: a name without one, or whose certificate is two thirds through its lifetime,
// is ordered, one order per name at a time across instances (a lease row). The certificate
// is written through the engine as a TLS certificate with issued_at set (its key sealed
// like an upload's, the created/updated events of any write); a renewal replaces the chain
// under the same id. A failed order waits, doubling from EDGEFORM_ACME_RETRY_SECONDS to an
// hour or what the directory's Retry-After asks, and is the event
// tls_certificate_order_failed.v0; the certificate it was to replace serves meanwhile.
import https from 'node:https';
import tls from 'node:tls';
import acme from 'acme-client';
import { tlsCertificate } from '../../../provider/catalog/certificates.js';
import { eventDestination, eventSubscription } from '../../../provider/catalog/events.js';
import { rfc3339 } from '../../events/outbox.js';
import type { Metrics } from '../../http/metrics.js';
import type { IssuingCtx } from '../../resources/certificates.js';
import type { ServerContext } from '../../resources/context.js';
import { createResource, findStored, replaceResource } from '../../resources/engine.js';
import { newId, newIdBody } from '../../store/ids.js';
import type { LiveTable } from '../live-table.js';
import type { CertificateEntry } from '../types.js';
import { accountKey } from './account.js';
import { Challenges } from './challenges.js';
import { wantedNames, type Method } from './names.js';
import { MAX_RETRY_SECONDS, type AcmeSettings } from './settings.js';
import { deleteSetting, takeLease } from './settings-rows.js';

/** Orders under way on one instance at once; more wait for the next tick. */
export const MAX_ORDERS = 4;
/** How long one order may hold its name's lease; a crashed instance's lease frees after it. */
const LEASE_MS = 10 * 60_000;
/** Each request to the directory gives up after this long (a slow directory is a failed order). */
const REQUEST_TIMEOUT_MS = 30_000;
/** How often the table is compared with the certificates. */
const TICK_MS = 1000;
/** The names wanted are worked out again at least this often with no table change. */
const WANTED_EVERY_MS = 30_000;
/** A name another instance is ordering is looked at again after this long. */
const LEASED_RETRY_MS = 5000;
/** The event of a failed order (provider/catalog/index.ts lists it with the others). */
export const ORDER_FAILED_EVENT = 'tls_certificate_order_failed.v0';

interface NameState {
  failures: number;
  nextAttemptAt: number;
  ordering: boolean;
}

/** The renewal moment of a certificate: two thirds through its lifetime. */
export const renewAt = (c: Pick<CertificateEntry, 'notBefore' | 'notAfter'>) => c.notBefore.getTime() + ((c.notAfter.getTime() - c.notBefore.getTime()) * 2) / 3;

export interface AcmeManagerOptions {
  settings: AcmeSettings;
  ctx: ServerContext;
  table: LiveTable;
  /** The public ports that have a listener (443: TLS-ALPN-01, else 80: HTTP-01). */
  listenerPorts: number[];
  metrics: Metrics;
  log: (f: Record<string, unknown>) => void;
}

export class AcmeManager {
  readonly challenges: Challenges;
  private readonly instance = newIdBody();
  private readonly states = new Map<string, NameState>();
  private readonly saidKept = new Set<string>();
  private readonly orders = new Set<Promise<void>>();
  private client?: Promise<acme.Client>;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** The last Retry-After the directory sent with an error, in seconds. */
  private retryAfter = 0;
  private readonly ports: Set<number>;
  private wanted?: { version: number; at: number; names: ReturnType<typeof wantedNames> };
  private issued?: { version: number; byName: Map<string, CertificateEntry> };

  constructor(private o: AcmeManagerOptions) {
    this.challenges = new Challenges(o.ctx);
    this.ports = new Set(o.listenerPorts);
    configureHttp(o.settings, (s) => { this.retryAfter = s; });
    o.metrics.certificateExpiryOf = () => this.expiries();
  }

  start() {
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
    this.tick();
  }

  /** Stops ordering; orders under way are waited for up to `deadlineMs`. */
  async stop(deadlineMs = 5000) {
    this.stopped = true;
    clearInterval(this.timer);
    await Promise.race([Promise.allSettled([...this.orders]), new Promise((r) => setTimeout(r, deadlineMs).unref())]);
  }

  /** The newest server-issued certificate for exactly this name, if any (indexed once per table version). */
  private issuedFor(name: string): CertificateEntry | undefined {
    const table = this.o.table.now;
    if (this.issued?.version !== table.version) {
      const byName = new Map<string, CertificateEntry>();
      for (const c of table.certificates) {
        if (!c.issuedAt) continue;
        for (const n of c.dnsNames) {
          const best = byName.get(n);
          if (!best || c.notAfter > best.notAfter) byName.set(n, c);
        }
      }
      this.issued = { version: table.version, byName };
    }
    return this.issued.byName.get(name);
  }

  private expiries(): Map<string, number> {
    const out = new Map<string, number>();
    for (const name of this.states.keys()) {
      const c = this.issuedFor(name);
      if (c) out.set(name, Math.floor(c.notAfter.getTime() / 1000));
    }
    return out;
  }

  private tick() {
    if (this.stopped) return;
    const now = Date.now();
    // Worked out again when the table changes, else every WANTED_EVERY_MS (an upload expiring).
    const table = this.o.table.now;
    if (!this.wanted || this.wanted.version !== table.version || now - this.wanted.at >= WANTED_EVERY_MS) {
      this.wanted = { version: table.version, at: now, names: wantedNames(table, this.ports, now) };
    }
    const wanted = this.wanted.names;
    for (const [name, why] of wanted.kept) {
      if (this.saidKept.has(name)) continue;
      if (this.saidKept.size > 10_000) this.saidKept.clear();
      this.saidKept.add(name);
      this.o.log({ level: 'info', msg: `acme: ${name} keeps a local-CA certificate: ${why}`, hostname: name });
    }
    // A name no edge serves any more is not renewed (its certificate stays until deleted).
    for (const name of this.states.keys()) if (!wanted.names.has(name) && !this.states.get(name)!.ordering) this.states.delete(name);
    for (const [name, method] of wanted.names) {
      let state = this.states.get(name);
      if (!state) this.states.set(name, (state = { failures: 0, nextAttemptAt: 0, ordering: false }));
      if (state.ordering || now < state.nextAttemptAt || this.orders.size >= MAX_ORDERS) continue;
      const current = this.issuedFor(name);
      if (current && now < renewAt(current)) continue;
      state.ordering = true;
      const order = this.order(name, method, state, current).finally(() => {
        state.ordering = false;
        this.orders.delete(order);
      });
      this.orders.add(order);
    }
  }

  private async order(name: string, method: Method, state: NameState, current: CertificateEntry | undefined) {
    const lease = `acme_lease:${name}`;
    let held = false;
    try {
      held = await takeLease(this.o.ctx, lease, this.instance, Date.now() + LEASE_MS);
      if (!held) {
        state.nextAttemptAt = Date.now() + LEASED_RETRY_MS;
        return;
      }
      this.o.log({ level: 'info', msg: `acme: ordering a certificate for ${name} (${method})`, hostname: name, renewal: !!current });
      const pem = await this.obtain(name, method);
      if (this.stopped) return;
      const stored = await this.store(name, pem, current);
      state.failures = 0;
      state.nextAttemptAt = 0;
      this.o.metrics.acmeOrders.inc({ result: current ? 'renewed' : 'issued' });
      this.o.log({ level: 'info', msg: `acme: ${current ? 'renewed' : 'issued'} the certificate for ${name}`, hostname: name, certificate_id: stored });
    } catch (e) {
      state.failures++;
      // A directory that lost its state (restarted) no longer knows the account: register again next time.
      this.client = undefined;
      const backoff = Math.min(this.o.settings.retrySeconds * 2 ** (state.failures - 1), MAX_RETRY_SECONDS);
      const wait = Math.max(backoff, Math.min(this.retryAfter, 86_400));
      this.retryAfter = 0;
      state.nextAttemptAt = Date.now() + wait * 1000;
      const error = describe(e);
      this.o.metrics.acmeOrders.inc({ result: 'failed' });
      this.o.log({ level: 'warn', msg: `acme: the order for ${name} failed (attempt ${state.failures}); next try in ${wait} s: ${error}`, hostname: name });
      await this.orderFailed(name, current?.id, error, state).catch((err) => this.o.log({ level: 'warn', msg: `acme: recording the failed order for ${name} failed: ${describe(err)}` }));
    } finally {
      if (held) await deleteSetting(this.o.ctx, lease, undefined).catch(() => {});
    }
  }

  private account(): Promise<acme.Client> {
    this.client ??= (async () => {
      const key = await accountKey(this.o.ctx, this.o.settings.directoryUrl, this.o.log);
      // Polls for a challenge's and an order's status: quick at first, at most 10 s apart.
      const client = new acme.Client({ directoryUrl: this.o.settings.directoryUrl, accountKey: key, backoffAttempts: 12, backoffMin: 500, backoffMax: 10_000 });
      // Registered once here, before any order (orders at once each registering raced: all
      // but the first found the account existing and sent an update the directory refuses).
      const email = this.o.settings.email;
      try {
        await client.createAccount({ termsOfServiceAgreed: true, ...(email ? { contact: [`mailto:${email}`] } : {}) });
      } catch (e) {
        // An existing account (a restart) is found, then "updated" with nothing new, which a
        // directory may refuse; its URL is known by then, which is all an order needs.
        try {
          client.getAccountUrl();
        } catch {
          throw e;
        }
      }
      return client;
    })();
    this.client.catch(() => { this.client = undefined; });
    return this.client;
  }

  /** One order, start to certificate chain (PEM, leaf first); its private key beside it. */
  private async obtain(name: string, method: Method): Promise<{ cert: string; key: string }> {
    const client = await this.account();
    const key = await acme.crypto.createPrivateEcdsaKey('P-256');
    const [, csr] = await acme.crypto.createCsr({ altNames: [name] }, key);
    const cert = await client.auto({
      csr,
      email: this.o.settings.email,
      termsOfServiceAgreed: true,
      challengePriority: [method],
      // The client would first fetch the challenge itself through the system's DNS: not what
      // the directory sees, and against a test directory it only hangs.
      skipChallengeVerification: true,
      challengeCreateFn: async (authz, challenge, keyAuthorization) => {
        if (challenge.type === 'http-01') return this.challenges.putHttp(challenge.token, keyAuthorization);
        if ((challenge.type as string) === 'tls-alpn-01') {
          const [k, c] = await acme.crypto.createAlpnCertificate(authz, keyAuthorization);
          return this.challenges.putAlpn(authz.identifier.value.toLowerCase(), c.toString(), k.toString());
        }
        throw new Error(`the directory offered ${challenge.type}, which this server does not answer`);
      },
      challengeRemoveFn: async (authz, challenge) => {
        if (challenge.type === 'http-01') await this.challenges.removeHttp(challenge.token);
        if ((challenge.type as string) === 'tls-alpn-01') await this.challenges.removeAlpn(authz.identifier.value.toLowerCase());
      },
    });
    return { cert, key: key.toString() };
  }

  /** Writes the certificate through the engine: a new resource, or the same one renewed. */
  private async store(name: string, pem: { cert: string; key: string }, current: CertificateEntry | undefined): Promise<string> {
    const ctx: IssuingCtx = { ...this.o.ctx, caller: { keyId: '', ownerId: '', admin: true }, issuedAt: new Date() };
    if (current && (await findStored(this.o.ctx, current.id))) {
      await replaceResource(ctx, tlsCertificate, current.id, { certificate_pem: pem.cert, private_key_pem: pem.key });
      return current.id;
    }
    const out = await createResource(ctx, tlsCertificate, {
      certificate_pem: pem.cert,
      private_key_pem: pem.key,
      description: `Issued through ACME for ${name}`,
      metadata: JSON.stringify({ acme: { hostname: name } }),
    });
    return out.id as string;
  }

  /** tls_certificate_order_failed.v0 to the subscriptions that want it, in the outbox like any event. */
  private async orderFailed(name: string, certificateId: string | undefined, error: string, state: NameState) {
    let deliveries = false;
    await this.o.ctx.db.writes.transaction(async (w) => {
      const subscriptions = await w.ofKind(eventSubscription.kind);
      const targets = new Set<string>();
      for (const s of subscriptions) {
        const body = (s.data as { body: Record<string, any> }).body;
        if ((body.sources as { type: string }[]).some((src) => src.type === ORDER_FAILED_EVENT)) for (const d of body.destination_ids as string[]) targets.add(d);
      }
      if (!targets.size) return;
      const destinations = (await w.resources([...targets])).filter((d) => d.kind === eventDestination.kind);
      const now = new Date();
      const object = { id: certificateId ?? null, hostname: name, error, attempts: state.failures, next_attempt_at: rfc3339(new Date(state.nextAttemptAt)) };
      const seq = await w.insertEvent({ id: newId('ev'), type: ORDER_FAILED_EVENT, resourceId: certificateId ?? name, payload: { type: ORDER_FAILED_EVENT, created_at: rfc3339(now), object }, createdAt: now });
      await w.insertDeliveries(destinations.map((d) => ({ destinationId: d.id, eventSeq: seq, nextAttemptAt: now })));
      deliveries = destinations.length > 0;
    });
    if (deliveries) this.o.ctx.afterCommit?.({ deliveries: true });
  }
}

/** An ACME problem's detail, or the error's message; never a key. */
function describe(e: unknown): string {
  const message = String((e as Error)?.message ?? e);
  // acme-client, out of retries for a request that got no answer, fails reading the answer it never had.
  if (e instanceof TypeError && /reading 'config'|reading 'status'/.test(message)) return 'the directory could not be reached (no answer: connection refused, reset or timed out)';
  return message.slice(0, 500);
}

/**
 * acme-client's HTTP settings (one axios instance per process): the directory's own root
 * trusted besides the system's, a deadline per request, one quick retry of a request that
 * failed for the network or a 5xx (the orders' own backoff does the rest), and every
 * Retry-After an error came with reported.
 */
function configureHttp(s: AcmeSettings, onRetryAfter: (seconds: number) => void) {
  const ax = acme.axios;
  ax.defaults.timeout = REQUEST_TIMEOUT_MS;
  if (s.caPem) ax.defaults.httpsAgent = new https.Agent({ ca: [...tls.rootCertificates, s.caPem], keepAlive: true });
  (ax.defaults as unknown as { acmeSettings: Record<string, number> }).acmeSettings.retryMaxAttempts = 1;
  (ax.defaults as unknown as { acmeSettings: Record<string, number> }).acmeSettings.retryDefaultDelay = 1;
  ax.interceptors.response.use((res) => {
    const ra = res?.headers?.['retry-after'];
    if (res && res.status >= 400 && ra) {
      const n = /^\d+$/.test(String(ra)) ? Number(ra) : Math.ceil((Date.parse(String(ra)) - Date.now()) / 1000);
      if (Number.isFinite(n) && n > 0) onRetryAfter(n);
    }
    return res;
  });
}
