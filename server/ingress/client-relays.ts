// How many requests and streams one client address has relayed through agents at once. A
// relay holds an agent's upstream connection and an HTTP/2 stream (with its window) until the
// client has read the whole answer, so a few hundred clients that never read could hold every
// upstream connection of an agent. Past the limit a request is refused at the edge (429 with
// Retry-After, ERR_SERVICE_846), before any stream to an agent is opened; a TCP or TLS edge's
// connection is closed. IPv6 clients count per /64, the block one host is given (clientKey,
// the key the API's per-address limits use too).
import { clientKey } from '../http/rate-limit.js';

/** The default of `--ingress-relays-per-client`: above one HTTP/2 connection's 100 streams, below an agent's 256 upstream connections. */
export const DEFAULT_RELAYS_PER_CLIENT = 128;

export class ClientRelays {
  private held = new Map<string, number>();

  /** `max` 0 counts nothing and refuses nothing. */
  constructor(readonly max: number) {}

  /**
   * A slot for a relay of `ip`: the function that gives it back (call it once, when the relay
   * ends), or undefined when the client holds `max` already.
   */
  take(ip: string): (() => void) | undefined {
    if (this.max === 0) return noop;
    const key = clientKey(ip);
    const now = this.held.get(key) ?? 0;
    if (now >= this.max) return undefined;
    this.held.set(key, now + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = (this.held.get(key) ?? 1) - 1;
      if (left > 0) this.held.set(key, left);
      else this.held.delete(key);
    };
  }

  /** Relays the client (its key) holds now. */
  holding(ip: string): number {
    return this.held.get(clientKey(ip)) ?? 0;
  }
}

const noop = () => {};
