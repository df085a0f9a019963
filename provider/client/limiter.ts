// One limiter shared by every call of a client: bounded concurrency, and a pause for
// everyone when the server says to slow down (429 Retry-After).

export class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private pausedUntil = 0;

  constructor(private readonly concurrency: number) {}

  /** Holds every caller until `ms` from now (the longest pause wins). */
  pause(ms: number) {
    this.pausedUntil = Math.max(this.pausedUntil, Date.now() + ms);
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.concurrency) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      for (let wait = this.pausedUntil - Date.now(); wait > 0; wait = this.pausedUntil - Date.now()) {
        await new Promise((r) => setTimeout(r, wait));
      }
      return await fn();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}
