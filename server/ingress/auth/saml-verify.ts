// SAML responses verified off the event loop: a small pool of worker threads
// (saml-verify-worker.mjs) parse each POSTed SAMLResponse and check its signatures, each
// task under a deadline from the moment it is queued. A task past its deadline is refused
// and its worker terminated (a new one starts for the next task), so no document, however
// costly, holds the loop or a worker for longer. Bounds: SAML_VERIFY (docs/ingress.md).
import { Worker } from 'node:worker_threads';
import type { SamlConfig } from '@node-saml/node-saml';

export const SAML_VERIFY = {
  /** Worker threads verifying responses at once. */
  workers: 2,
  /** Responses waiting for a worker; past it a response is refused at once. */
  maxQueued: 64,
  /** From queued to verified; past it the response is refused and its worker replaced. */
  deadlineMs: 5_000,
};

export interface VerifyTask {
  /** node-saml's options, without functions (the worker makes the InResponseTo check). */
  options: Omit<SamlConfig, 'cacheProvider' | 'generateUniqueId'>;
  response: string;
  routeId: string;
  /** The key of the route's AuthnRequest IDs, hex (saml.ts requestIds). */
  idKey: string;
}

export type VerifyResult =
  | { profile: Record<string, unknown> | null; assertion?: { ID?: string; IssueInstant?: string; NotOnOrAfter?: string } }
  | { error: { message: string; status: boolean } }
  | { busy: true }
  | { timeout: true };

interface Pending { id: number; task: VerifyTask; resolve: (r: VerifyResult) => void; timer: NodeJS.Timeout; worker?: Slot }
interface Slot { worker: Worker; task?: Pending }

const WORKER_URL = new URL('./saml-verify-worker.mjs', import.meta.url);

class VerifyPool {
  private slots: Slot[] = [];
  private queue: Pending[] = [];
  private next = 1;

  run(task: VerifyTask): Promise<VerifyResult> {
    if (this.queue.length >= SAML_VERIFY.maxQueued) return Promise.resolve({ busy: true });
    return new Promise((resolve) => {
      const p: Pending = { id: this.next++, task, resolve, timer: setTimeout(() => this.expire(p), SAML_VERIFY.deadlineMs) };
      p.timer.unref();
      this.queue.push(p);
      this.pump();
    });
  }

  private expire(p: Pending) {
    const q = this.queue.indexOf(p);
    if (q >= 0) this.queue.splice(q, 1);
    if (p.worker) this.retire(p.worker);
    p.resolve({ timeout: true });
  }

  private retire(slot: Slot) {
    this.slots.splice(this.slots.indexOf(slot), 1);
    slot.task = undefined;
    void slot.worker.terminate();
    this.pump();
  }

  private spawn(): Slot {
    const slot: Slot = { worker: new Worker(WORKER_URL) };
    slot.worker.unref();
    slot.worker.on('message', (m: VerifyResult & { id: number }) => {
      const p = slot.task;
      if (!p || p.id !== m.id) return;
      clearTimeout(p.timer);
      slot.task = undefined;
      const { id: _, ...result } = m;
      p.resolve(result as VerifyResult);
      this.pump();
    });
    slot.worker.on('error', () => {
      const p = slot.task;
      this.retire(slot);
      if (p) {
        clearTimeout(p.timer);
        p.resolve({ error: { message: 'the SAML verifier failed', status: false } });
      }
    });
    this.slots.push(slot);
    return slot;
  }

  private pump() {
    while (this.queue.length) {
      const slot = this.slots.find((s) => !s.task) ?? (this.slots.length < SAML_VERIFY.workers ? this.spawn() : undefined);
      if (!slot) return;
      const p = this.queue.shift()!;
      slot.task = p;
      p.worker = slot;
      slot.worker.postMessage({ id: p.id, ...p.task });
    }
  }
}

let pool: VerifyPool | undefined;

/** Verifies a SAMLResponse on the pool's workers (made on first use). */
export const verifySamlResponse = (task: VerifyTask): Promise<VerifyResult> => (pool ??= new VerifyPool()).run(task);
