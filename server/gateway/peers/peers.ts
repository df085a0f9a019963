// Every instance's tunnels, seen from this one (docs/agents.md, "Several instances"). Each
// instance with `--peer-listen` writes its `--peer-url` into the PeerInstance table and renews
// it every lease tick; every instance on the database (with a peer listener or not) reads the
// fresh rows on the same tick and keeps one link (link.ts) to each other instance, whose watch
// tells it that instance's tunnels as they change. A crashed instance's link breaks at once
// (its connection closes) or within the ping bound (its host vanished); its row goes stale
// after three ticks and is no longer dialed.
import type { ServerContext } from '../../resources/context.js';
import type { PeerCredentials } from './credentials.js';
import { PeerLink } from './link.js';
import type { SharedTunnel } from './protocol.js';

export interface PeersOptions {
  instanceId: string;
  /** The URL advertised to the others (`--peer-url`); none: this instance reaches others' tunnels but serves none of its own to them. */
  url?: string;
  /** Lease tick (ms): the row is renewed and the others read this often; stale after three. */
  tickMs: number;
  /** Connect and ping bound of each link (ms; `--peer-timeout`). */
  timeoutMs: number;
  log: (fields: Record<string, unknown>) => void;
}

export interface RemoteTunnel { link: PeerLink; t: SharedTunnel }

export class Peers {
  private links = new Map<string, PeerLink>();
  private timer?: NodeJS.Timeout;
  private running = false;
  /** Tunnels of the other instances, by id; rebuilt when a link's snapshot changes. */
  tunnels = new Map<string, RemoteTunnel>();
  labeled = new Map<string, Readonly<Record<string, string>>>();
  hosts = new Map<string, string>();
  /** Streams sent over links since dropped (their own counts are gone with them). */
  private sentBefore = 0;
  /** Pool members (and internal endpoints) of the other instances by pool key (SharedTunnel.pool). */
  pools = new Map<string, string[]>();
  /** Whether this instance still advertises itself (false once it drains). */
  private advertising = false;

  constructor(private ctx: ServerContext, private creds: PeerCredentials, private opts: PeersOptions, private changed: () => void) {}

  async start() {
    if (this.opts.url) {
      await this.ctx.db.prisma.peerInstance.upsert({
        where: { instanceId: this.opts.instanceId },
        create: { instanceId: this.opts.instanceId, url: this.opts.url, seenAt: new Date() },
        update: { url: this.opts.url, seenAt: new Date() },
      });
      this.advertising = true;
    }
    await this.tick().catch((e) => this.opts.log({ level: 'warn', msg: `peers: ${(e as Error).message}` }));
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = true;
      this.tick().catch((e) => this.opts.log({ level: 'warn', msg: `peers: ${(e as Error).message}` })).finally(() => { this.running = false; });
    }, this.opts.tickMs);
    this.timer.unref();
  }

  private async tick() {
    const prisma = this.ctx.db.prisma;
    if (this.advertising) await prisma.peerInstance.updateMany({ where: { instanceId: this.opts.instanceId }, data: { seenAt: new Date() } });
    const fresh = await prisma.peerInstance.findMany({ where: { seenAt: { gte: new Date(Date.now() - 3 * this.opts.tickMs) } } });
    const want = new Map(fresh.filter((r) => r.instanceId !== this.opts.instanceId).map((r) => [r.instanceId, r.url]));
    for (const [id, link] of this.links) {
      const url = want.get(id);
      if (url === link.url) continue;
      // A withdrawn row (the instance drains): its link stays while it is up, so requests in
      // flight through it finish; it is not dialed again once it closes.
      if (url === undefined && link.up) continue;
      link.stop();
      this.sentBefore += link.sent;
      this.links.delete(id);
    }
    const now = Date.now();
    for (const [id, url] of want) {
      let link = this.links.get(id);
      if (!link) {
        link = new PeerLink(id, url, this.creds, { timeoutMs: this.opts.timeoutMs, pingMs: this.opts.tickMs, log: this.opts.log }, () => this.rebuild());
        this.links.set(id, link);
      }
      if (link.closed && now >= link.retryAt) link.connect();
    }
    this.rebuild();
    // Rows of instances long gone (crashed): no one else removes them.
    if (Math.random() < 0.05) await prisma.peerInstance.deleteMany({ where: { seenAt: { lt: new Date(Date.now() - 100 * this.opts.tickMs) } } });
  }

  private rebuild() {
    const tunnels = new Map<string, RemoteTunnel>();
    const labeled = new Map<string, Readonly<Record<string, string>>>();
    const hosts = new Map<string, string>();
    const pools = new Map<string, string[]>();
    for (const link of this.links.values()) {
      if (!link.up) continue;
      for (const t of link.tunnels) {
        tunnels.set(t.id, { link, t });
        if (t.labels) labeled.set(t.id, t.labels);
        if (t.host) hosts.set(t.host, t.id);
        if (t.pool) pools.set(t.pool, [...(pools.get(t.pool) ?? []), t.id]);
      }
    }
    const same = tunnels.size === this.tunnels.size && [...tunnels].every(([id, r]) => this.tunnels.get(id)?.link === r.link && this.tunnels.get(id)?.t === r.t);
    if (same) return;
    this.tunnels = tunnels;
    this.labeled = labeled;
    this.hosts = hosts;
    this.pools = pools;
    this.changed();
  }

  /** Stops advertising this instance: the others stop dialing it within three ticks (draining). */
  async withdraw() {
    if (!this.advertising) return;
    this.advertising = false;
    await this.ctx.db.prisma.peerInstance.deleteMany({ where: { instanceId: this.opts.instanceId } }).catch(() => {});
  }

  async stop() {
    clearInterval(this.timer);
    await this.withdraw();
    for (const link of this.links.values()) link.stop();
    this.links.clear();
    this.rebuild();
  }

  /** For /metrics: links up and down, the other instances' tunnels reachable, requests and connections sent to them so far. */
  stats(): { up: number; down: number; tunnels: number; sent: number } {
    let up = 0;
    let sent = this.sentBefore;
    for (const l of this.links.values()) {
      if (l.up) up++;
      sent += l.sent;
    }
    return { up, down: this.links.size - up, tunnels: this.tunnels.size, sent };
  }

  /** Links up now (for /metrics and tests). */
  get connected(): number {
    let n = 0;
    for (const l of this.links.values()) if (l.up) n++;
    return n;
  }
}
