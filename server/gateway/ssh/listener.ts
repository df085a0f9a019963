// The `ssh -R` listener (`--ssh-listen ADDRESS:PORT`): OpenSSH as an agent. The host key is
// made on first start and kept sealed in the database (sealed-settings.ts), so it is the same
// after a restart and on every instance; its fingerprint is printed at start. Connections are
// accepted on a plain TCP server of our own and handed to ssh2, so that a client that never
// finishes its handshake, or one address opening hundreds, is bounded before ssh2 sees it.
import net, { type AddressInfo } from 'node:net';
import ssh2 from 'ssh2';
import type { RateLimiter } from '../../http/rate-limit.js';
import { clientKey } from '../../http/rate-limit.js';
import type { ServerContext } from '../../resources/context.js';
import { sealedSetting } from '../../store/sealed-settings.js';
import type { Gateway } from '../gateway.js';
import { SSH_FINGERPRINT_SETTING } from './host-key-fingerprint.js';
import { SshConnection, sshFingerprint } from './session.js';

export interface SshOptions {
  host: string;
  port: number;
  region: string;
  endpointDomain: string;
  heartbeatMs: number;
  maxSessionsPerCredential: number;
  authFailures?: RateLimiter;
  /** From connecting to a bound tunnel (authentication, -R, the command): past it the connection is closed. */
  setupTimeoutMs: number;
  /** Connections at once, all addresses together. */
  maxConnections: number;
  /** Ports of TCP endpoints (`--agent-tcp-ports`); without it a tcp command is refused. */
  tcpPorts?: { first: number; last: number };
  /** Connections at once from one client address (an IPv6 /64). */
  maxConnectionsPerAddress: number;
}

export const SSH_DEFAULTS = { setupTimeoutMs: 30_000, maxConnections: 10_000, maxConnectionsPerAddress: 32 };

const HOST_KEY_SETTING = 'ssh_host_key';

export class SshGateway {
  private tcp?: net.Server;
  private ssh?: ssh2.Server;
  private perAddress = new Map<string, number>();
  private connections = new Set<SshConnection>();
  /** Setup deadlines of connections, by remote address and port (what ssh2 tells of a connection). */
  private deadlines = new Map<string, NodeJS.Timeout>();
  stopping = false;
  address = '';
  /** The host key's fingerprint (`SHA256:…`), for users to check on their first connection. */
  fingerprint = '';
  readonly opts: SshOptions;

  constructor(readonly ctx: ServerContext, readonly gateway: Gateway, opts: Partial<SshOptions> & Omit<SshOptions, keyof typeof SSH_DEFAULTS>, readonly log: (f: Record<string, unknown>) => void) {
    this.opts = { ...SSH_DEFAULTS, ...opts };
  }

  async start() {
    const { value: hostKey, created } = await sealedSetting(this.ctx.db, this.ctx.box, HOST_KEY_SETTING, () => ssh2.utils.generateKeyPairSync('ed25519').private);
    const parsed = ssh2.utils.parseKey(hostKey);
    if (parsed instanceof Error) throw new Error(`the stored SSH host key cannot be read: ${parsed.message}`);
    this.fingerprint = sshFingerprint(parsed.getPublicSSH());
    if (created) this.log({ level: 'info', msg: `made the SSH host key ${this.fingerprint}; it is kept sealed in the database` });
    const fp = { key: SSH_FINGERPRINT_SETTING, value: this.fingerprint };
    await this.ctx.db.prisma.setting.upsert({ where: { key: fp.key }, create: fp, update: { value: fp.value } });
    const keepalive = Math.max(500, Math.floor(this.opts.heartbeatMs / 2));
    this.ssh = new ssh2.Server({ hostKeys: [hostKey], ident: 'edgeform', keepaliveInterval: keepalive, keepaliveCountMax: 2 } as ssh2.ServerConfig, (client, info) => {
      const conn = new SshConnection(this, client, info);
      this.connections.add(conn);
      client.once('close', () => this.connections.delete(conn));
    });
    this.ssh.on('error', (e: Error) => this.log({ level: 'warn', msg: `ssh listener: ${e.message}` }));
    this.tcp = net.createServer((socket) => this.accept(socket));
    this.tcp.maxConnections = this.opts.maxConnections;
    await new Promise<void>((resolve, reject) => {
      this.tcp!.once('error', reject);
      this.tcp!.listen(this.opts.port, this.opts.host, () => resolve());
    });
    const a = this.tcp.address() as AddressInfo;
    this.address = `${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  }

  /** Bounds a connection before ssh2 sees it: per address, and a deadline for the whole setup. */
  private accept(socket: net.Socket) {
    socket.on('error', () => {});
    const key = clientKey(socket.remoteAddress ?? '');
    const held = this.perAddress.get(key) ?? 0;
    if (this.stopping || held >= this.opts.maxConnectionsPerAddress) {
      this.log({ level: 'warn', msg: this.stopping ? 'ssh connection refused: the server is stopping' : `ssh connection refused: ${key} holds ${held} connections (at most ${this.opts.maxConnectionsPerAddress})`, ip: key });
      socket.destroy();
      return;
    }
    this.perAddress.set(key, held + 1);
    socket.once('close', () => {
      const left = (this.perAddress.get(key) ?? 1) - 1;
      if (left > 0) this.perAddress.set(key, left);
      else this.perAddress.delete(key);
    });
    // Cleared by the connection once its tunnel is bound (SshConnection.bound).
    const deadline = setTimeout(() => {
      this.log({ level: 'info', msg: `ssh connection closed: no tunnel bound within ${this.opts.setupTimeoutMs / 1000} s`, ip: key });
      socket.destroy();
    }, this.opts.setupTimeoutMs);
    deadline.unref();
    const id = `${socket.remoteAddress}|${socket.remotePort}`;
    this.deadlines.set(id, deadline);
    socket.once('close', () => {
      clearTimeout(deadline);
      this.deadlines.delete(id);
    });
    this.ssh!.injectSocket(socket);
  }

  /** A connection bound its tunnel: from here the keepalives (heartbeat interval) watch it. */
  setUp(info: { ip: string; port: number }) {
    const id = `${info.ip}|${info.port}`;
    clearTimeout(this.deadlines.get(id));
    this.deadlines.delete(id);
  }

  async stop() {
    this.stopping = true;
    this.tcp?.close();
    await Promise.all([...this.connections].map((c) => c.shutdown('the server is shutting down; run ssh again to reconnect')));
  }
}
