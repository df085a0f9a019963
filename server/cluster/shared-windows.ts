// One set of rate-limit buckets (and one circuit breaker per route) for every ingress worker (`--workers`): a traffic policy's
// rate-limit of 5 per minute allows 5 requests in all, not 5 per worker. The buckets live in
// the primary (a SlidingWindows, policy/sliding-window.ts); a worker's `take` is a synchronous
// question over a pair of named pipes (the policy engine decides a rate-limit without
// awaiting, so the question is asked as the engine asks it: the worker blocks on the answer,
// which the primary gives from its event loop, a few microseconds when it is idle).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { SlidingWindows, type WindowStats } from '../policy/sliding-window.js';
import { CircuitBreaker, type BreakerConfig } from '../ingress/modules/circuit-state.js';

const { O_RDWR, O_NONBLOCK } = fs.constants;

/** The primary's side: `workers` pipe pairs at `base-<i>.req` / `base-<i>.res`, answered from `windows`. */
export async function serveWindows(base: string, workers: number, windows = new SlidingWindows()) {
  // The circuit breakers of routes served by workers, by route and settings (as circuit-breaker.ts keeps them per server).
  const breakers = new Map<string, CircuitBreaker>();
  const breaker = (key: string, cfg: BreakerConfig) => {
    let b = breakers.get(key);
    if (!b) breakers.set(key, (b = new CircuitBreaker(cfg)));
    return b;
  };
  /** One question: a rate-limit take, or a breaker's allow / record. */
  const answer = (q: unknown[]): number => {
    if (q[0] === 'allow') {
      const [, key, cfg, now] = q as [string, string, BreakerConfig, number];
      const b = breaker(key, cfg);
      return b.allow(now) ? 0 : b.retryAfter(now);
    }
    if (q[0] === 'record') {
      const [, key, cfg, now, error] = q as [string, string, BreakerConfig, number, number];
      breaker(key, cfg).record(now, error === 1);
      return 0;
    }
    const [key, capacity, widthMs, now, n] = q as [string, number, number, number, number];
    return windows.take(key, capacity, widthMs, now, n);
  };
  const sockets: net.Socket[] = [];
  const fds: number[] = [];
  for (let i = 0; i < workers; i++) {
    for (const end of ['req', 'res']) {
      const file = `${base}-${i}.${end}`;
      fs.rmSync(file, { force: true });
      const made = spawnSync('mkfifo', ['-m', '600', file]);
      if (made.status !== 0) throw new Error(`mkfifo ${file} failed: ${made.stderr}`);
    }
    // Read and write ends held open here (O_RDWR): neither open waits for the worker.
    const res = fs.openSync(`${base}-${i}.res`, O_RDWR);
    fds.push(res);
    const req = new net.Socket({ fd: fs.openSync(`${base}-${i}.req`, O_RDWR | O_NONBLOCK), readable: true, writable: false });
    sockets.push(req);
    let pending = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      pending += chunk;
      let nl: number;
      let out = '';
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        let wait: number;
        try {
          wait = answer(JSON.parse(line) as unknown[]);
        } catch {
          wait = -1;
        }
        out += `${wait}\n`;
      }
      if (out) fs.writeSync(res, out);
    });
    req.on('error', () => {});
  }
  return {
    windows,
    pathFor: (i: number) => `${base}-${i}`,
    close() {
      for (const s of sockets) s.destroy();
      for (const fd of fds) fs.closeSync(fd);
      for (let i = 0; i < workers; i++) for (const end of ['req', 'res']) fs.rmSync(`${base}-${i}.${end}`, { force: true });
    },
  };
}

/** A worker's end of the pipes: one question at a time, answered by the primary. */
export class PrimaryAsker {
  private readonly req: number;
  private readonly res: number;
  private readonly buf = Buffer.alloc(64);

  constructor(path: string) {
    this.req = fs.openSync(`${path}.req`, O_RDWR);
    this.res = fs.openSync(`${path}.res`, O_RDWR);
  }

  ask(q: unknown[]): number {
    fs.writeSync(this.req, `${JSON.stringify(q)}\n`);
    let text = '';
    while (!text.endsWith('\n')) {
      const got = fs.readSync(this.res, this.buf, 0, this.buf.length, null);
      if (got <= 0) throw new Error('the primary closed the rate-limit channel');
      text += this.buf.toString('latin1', 0, got);
    }
    const wait = Number(text);
    if (wait < 0) throw new RangeError('the primary refused a question');
    return wait;
  }
}

/** A worker's buckets: each `take` answered by the primary's. */
export class RemoteWindows extends SlidingWindows {
  constructor(private readonly asker: PrimaryAsker) {
    super(1);
  }

  override take(key: string, capacity: number, widthMs: number, now: number, n = 1): number {
    if (n > capacity) throw new RangeError(`${n} units can never fit a capacity of ${capacity}`);
    return this.asker.ask([key, capacity, widthMs, now, n]);
  }

  override stats(): WindowStats {
    return { buckets: 0, evictions: 0, expired: 0 };
  }
}

/** A worker's circuit breaker of a route: the primary's, so errors seen by every worker trip it. */
export class RemoteBreaker {
  private wait = 0;
  constructor(private readonly asker: PrimaryAsker, private readonly key: string, private readonly cfg: BreakerConfig) {}

  allow(now: number): boolean {
    this.wait = this.asker.ask(['allow', this.key, this.cfg, now]);
    return this.wait === 0;
  }

  retryAfter(): number {
    return Math.max(1, this.wait);
  }

  record(now: number, error: boolean) {
    this.asker.ask(['record', this.key, this.cfg, now, error ? 1 : 0]);
  }
}
