// One `ssh -R` connection: public-key login against the SSH credentials, one remote forward
// (`-R`), one command (`http --url …`), then a tunnel session with transport `ssh` whose one
// tunnel the ingress serves like any agent's. What the user sees is written on the session
// channel: the URL, then a line per request; refusals in words on stderr with exit status 2.
// The server's commands: stop ends the connection; restart and update are refused (409), as an
// ssh client can do neither.
import { createHash, randomBytes, randomInt } from 'node:crypto';
import type { ClientHttp2Stream } from 'node:http2';
import ssh2, { type AuthContext, type ClientInfo, type Connection, type ServerChannel } from 'ssh2';
import type { Action } from '../../../agent/protocol.js';
import { sshKeyIdentity } from '../../../provider/catalog/accounts.js';
import { tunnelSession } from '../../../provider/catalog/tunnels.js';
import { ApiError, notFound } from '../../http/errors.js';
import { clientKey } from '../../http/rate-limit.js';
import type { FullDoc } from '../../ingress/types.js';
import { newId } from '../../store/ids.js';
import { bindAllowed, refusal } from '../acl.js';
import { readUserCertificate, verifySshSignature } from '../../crypto/ssh-certificate-read.js';
import { SshReader } from '../../crypto/ssh-wire.js';
import { authenticateSshCertificate, authenticateSshKey, type AgentCredential } from '../auth.js';
import type { AttachedSession } from '../gateway.js';
import { createSession, deleteSessions, SessionLimit, type TunnelRow } from '../live-rows.js';
import { RelayedRequest } from '../v2/relay.js';
import { ChannelStream } from './channel-stream.js';
import { HELP, parseCommand, type SshCommand } from './command.js';
import type { SshGateway } from './listener.js';

/** Public keys (and signatures) one connection may try before it is closed: a key flood ends here. */
export const MAX_AUTH_ATTEMPTS = 10;
const CERT_SUFFIX = '-cert-v01@openssh.com';
/** How long an exec waits for the `-R` forward it serves. */
const FORWARD_WAIT_MS = 10_000;
/** Bytes of request lines waiting for a client that does not read its terminal: past it lines are dropped. */
const MAX_PENDING_OUTPUT = 64 * 1024;
/** Bind names that mean "no name given" (`-R 0:…`, `-R localhost:…`). */
const UNNAMED = new Set(['', 'localhost', '0.0.0.0', '127.0.0.1', '::', '::1', '*']);

/** `SHA256:<base64>` of a public key blob, as `ssh-keygen -l` and OpenSSH print it. */
export const sshFingerprint = (blob: Buffer) => `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;

interface Forward { addr: string; port: number; accept?: (port?: number) => void; reject?: () => void }

/** The algorithm named inside a public key blob (`ssh-rsa` for every RSA signature algorithm). */
function blobAlgorithm(blob: Buffer): string | undefined {
  try {
    const algorithm = new SshReader(blob).text();
    return algorithm && algorithm.length <= 64 ? algorithm : undefined;
  } catch {
    return undefined;
  }
}

export class SshConnection implements AttachedSession {
  credential!: AgentCredential;
  private readonly ip: string;
  private readonly agentVersion: string;
  private attempts = 0;
  /** Fingerprints of offered keys that no SSH credential holds, for the words a refused user reads. */
  private unknownKeys = new Set<string>();
  private forward?: Forward;
  private forwardWaiters: (() => void)[] = [];
  private sessionOpened = false;
  private out?: ServerChannel;
  private sessionId?: string;
  private tunnelId?: string;
  private closed = false;
  private ended?: Promise<void>;

  constructor(private readonly gw: SshGateway, private readonly client: Connection, private readonly info: ClientInfo) {
    this.ip = (info.ip ?? '').replace(/^::ffff:/, '');
    this.agentVersion = (info.header?.identRaw ?? '').replace(/^SSH-2\.0-/, '').slice(0, 255);
    client.on('error', (e: Error) => this.gw.log({ level: 'info', msg: `ssh connection error: ${e.message}`, ip: this.ip, session: this.sessionId }));
    client.on('authentication', (ctx) => void this.authenticate(ctx).catch((e) => {
      this.gw.log({ level: 'error', msg: `ssh authentication failed: ${(e as Error).message}`, ip: this.ip });
      ctx.reject();
    }));
    client.on('request', (accept, reject, name, info) => this.request(accept, reject, name, info as { bindAddr: string; bindPort: number }));
    client.on('session', (accept, reject) => this.session(accept, reject));
    client.on('tcpip', (_accept, reject) => reject());
    client.on('openssh.streamlocal', (_accept, reject) => reject());
    client.on('close', () => void this.onClose());
  }

  private async authenticate(ctx: AuthContext) {
    if (this.closed) return ctx.reject();
    if (ctx.method === 'keyboard-interactive' && this.unknownKeys.size) {
      // Offered only after keys no credential holds: the one way to tell an interactive user why
      // (a refused public key has no words). It asks nothing and always fails.
      const keys = [...this.unknownKeys].slice(0, 5).join(', ');
      return ctx.prompt([], 'edgeform', `No SSH credential holds the key${this.unknownKeys.size === 1 ? '' : 's'} offered (${keys}). Register yours with POST /ssh_credentials {"public_key": "<contents of ~/.ssh/id_ed25519.pub>"}, or log in with a key that is registered.`, () => ctx.reject(['publickey']));
    }
    if (ctx.method !== 'publickey') return ctx.reject(this.unknownKeys.size ? ['publickey', 'keyboard-interactive'] : ['publickey']);
    if (++this.attempts > MAX_AUTH_ATTEMPTS) {
      this.gw.log({ level: 'warn', msg: `ssh connection closed: more than ${MAX_AUTH_ATTEMPTS} keys tried`, ip: this.ip });
      ctx.reject();
      this.client.end();
      return;
    }
    const algorithm = blobAlgorithm(ctx.key.data);
    if (algorithm?.endsWith(CERT_SUFFIX)) return this.certificateLogin(ctx);
    const found = algorithm ? await authenticateSshKey(this.gw.ctx.db.prisma as never, sshKeyIdentity(`${algorithm} ${ctx.key.data.toString('base64')}`)).catch((e) => e as Error) : undefined;
    if (!found || found instanceof Error) {
      // Only a signed attempt is a failed authentication: OpenSSH first asks whether each key
      // would do, and a user with several keys is not an attacker.
      if (ctx.signature) this.gw.opts.authFailures?.take(clientKey(this.ip));
      if (found instanceof Error && ctx.signature) this.gw.log({ level: 'info', msg: `ssh login refused: ${found.message}`, ip: this.ip });
      if (!found && this.unknownKeys.size < 16) this.unknownKeys.add(sshFingerprint(ctx.key.data));
      return ctx.reject(['publickey', 'keyboard-interactive']);
    }
    if (!ctx.signature) return ctx.accept();
    if (this.gw.opts.authFailures && this.gw.opts.authFailures.take(clientKey(this.ip)) > 0) {
      this.gw.log({ level: 'warn', msg: 'ssh login refused: too many failed authentications from this address', ip: this.ip });
      return ctx.reject();
    }
    const key = ssh2.utils.parseKey(`${algorithm} ${ctx.key.data.toString('base64')}`);
    if (key instanceof Error || !ctx.blob || !key.verify(ctx.blob, ctx.signature, ctx.hashAlgo)) return ctx.reject(['publickey']);
    this.credential = found;
    ctx.accept();
  }

  /** A login with an OpenSSH user certificate signed by one of the account's SSH CAs. */
  private async certificateLogin(ctx: ssh2.PublicKeyAuthContext) {
    const read = readUserCertificate(ctx.key.data);
    const found = read.ok ? await authenticateSshCertificate(this.gw.ctx.db.prisma as never, read.value, this.ip) : read.message;
    if (typeof found === 'string' || !read.ok) {
      if (ctx.signature) {
        this.gw.opts.authFailures?.take(clientKey(this.ip));
        this.gw.log({ level: 'info', msg: `ssh certificate login refused: ${found}`, ip: this.ip });
      }
      return ctx.reject(['publickey']);
    }
    if (!ctx.signature) return ctx.accept();
    // ssh2 leaves a certificate login's signature as the client sent it (`string algorithm,
    // string signature`: it strips only a prefix naming the certificate's own type), so it is
    // checked here, against the certified key.
    if (!ctx.blob || !verifySshSignature(read.value.keyBlob, ctx.blob, ctx.signature)) return ctx.reject(['publickey']);
    this.credential = found;
    ctx.accept();
  }

  /** The remote forward: one per connection; its answer waits for the command (it decides the port). */
  private request(accept: ((port?: number) => void) | undefined, reject: (() => void) | undefined, name: string, info: { bindAddr: string; bindPort: number }) {
    if (name === 'cancel-tcpip-forward') {
      accept?.();
      void this.shutdown('the -R forward was cancelled');
      return;
    }
    if (name !== 'tcpip-forward' || !this.credential) return reject?.();
    if (this.forward) {
      this.say('only one -R forward per connection: run one ssh per tunnel');
      return reject?.();
    }
    this.forward = { addr: String(info.bindAddr ?? '').toLowerCase(), port: Number(info.bindPort) || 0, accept, reject };
    for (const w of this.forwardWaiters.splice(0)) w();
  }

  private session(accept: () => ssh2.Session, reject: () => void) {
    if (this.sessionOpened || !this.credential) return reject();
    this.sessionOpened = true;
    const session = accept();
    session.on('pty', (ok) => ok?.());
    session.on('env', (ok) => ok?.());
    session.on('window-change', (ok) => ok?.());
    session.on('shell', (ok) => {
      const ch = ok();
      this.fail(ch, 'give a command: ssh -R 0:localhost:PORT user@host http');
    });
    session.on('exec', (ok, _no, info) => {
      const ch = ok();
      this.out = ch;
      ch.on('error', () => {});
      void this.exec(ch, info.command).catch((e) => {
        const msg = e instanceof ApiError ? `${e.message} (${e.code})` : 'the server could not bind the tunnel; its log has the details';
        if (!(e instanceof ApiError)) this.gw.log({ level: 'error', msg: `ssh bind failed: ${(e as Error).stack ?? e}`, ip: this.ip });
        this.fail(ch, msg);
      });
    });
  }

  private async exec(ch: ServerChannel, line: string) {
    const parsed = parseCommand(line, this.gw.opts.endpointDomain);
    if (!parsed.ok) return this.fail(ch, parsed.message, true);
    const fwd = await this.waitForward();
    if (!fwd) return this.fail(ch, `no remote forward: add -R 0:localhost:PORT to the ssh command (waited ${FORWARD_WAIT_MS / 1000} s)`);
    const cmd = parsed.command;
    const range = this.gw.opts.tcpPorts;
    if (cmd.proto === 'tcp') {
      if (!range) return this.fail(ch, 'this server serves no tcp tunnels (it runs without --agent-tcp-ports); use http, https or tls');
      if (fwd.port && (fwd.port < range.first || fwd.port > range.last)) return this.fail(ch, `port ${fwd.port} is not one this server gives tcp tunnels (${range.first}-${range.last}); use -R 0:localhost:PORT for any free one`);
    }
    const named = UNNAMED.has(fwd.addr) ? undefined : fwd.addr;
    if (named && cmd.hostname && named !== cmd.hostname) return this.fail(ch, `the -R name ${named} and --url ${cmd.hostname} differ: give one of them`);
    const host = cmd.proto === 'tcp' ? this.gw.opts.endpointDomain : cmd.hostname ?? named ?? `${randomBytes(6).toString('hex')}.${this.gw.opts.endpointDomain}`;
    if (cmd.proto === 'tls' && !cmd.hostname && !named) return this.fail(ch, 'a tls tunnel needs a hostname: --url app.example.com');
    const credential = this.credential;
    if (cmd.proto !== 'tcp' && !bindAllowed(credential.acl, {}, host)) throw new ApiError('ERR_SERVICE_212', refusal(credential.acl, { name: host }, host));
    const tcpUrl = () => `tcp://${host}:${fwd.port || randomInt(range!.first, range!.last + 1)}`;
    const publicUrl = cmd.proto === 'tcp' ? tcpUrl() : this.gw.gateway.endpointUrl(cmd.proto, host);
    const sessionId = newId(tunnelSession.prefix);
    const tunnelId = newId('tn');
    const row: TunnelRow = { id: tunnelId, name: host, metadata: '', forwardsTo: `${fwd.addr || 'localhost'}:${fwd.port}`, proto: cmd.proto, endpoint: { id: newId('ep'), publicUrl } };
    const tick = Math.max(20, Math.floor(this.gw.opts.heartbeatMs / 5));
    let taken;
    try {
      taken = await createSession(this.gw.ctx, this.gw.gateway.instanceId, {
        id: sessionId, credentialId: credential.credentialId, ip: this.ip, os: '', agentVersion: this.agentVersion, metadata: '',
        region: this.gw.opts.region, startedAt: new Date(), transport: 'ssh',
      }, [row], {
        // A TCP port taken by another session: another is drawn (unless the -R asked for that one).
        repick: (t) => (cmd.proto === 'tcp' && !fwd.port ? tcpUrl() : t.endpoint!.publicUrl), staleBefore: () => new Date(Date.now() - 3 * tick), staleAfterMs: 3 * tick, maxPerCredential: this.gw.opts.maxSessionsPerCredential,
      });
    } catch (e) {
      if (e instanceof SessionLimit) throw new ApiError('ERR_SERVICE_840', `the SSH credential ${credential.credentialId} already holds ${e.held} sessions, and the server allows at most ${e.limit} per credential; close one of them`);
      throw e;
    }
    if (taken.length) {
      await deleteSessions(this.gw.ctx, [sessionId]);
      throw new ApiError('ERR_SERVICE_320', cmd.proto === 'tcp'
        ? `the port ${row.endpoint!.publicUrl.split(':').pop()} is already served by another tunnel session; use -R 0:localhost:PORT for any free one`
        : `the hostname ${host} is already served by another tunnel session; one session at a time holds a hostname: choose another --url, or stop that session`);
    }
    const boundUrl = row.endpoint!.publicUrl;
    this.sessionId = sessionId;
    this.tunnelId = tunnelId;
    if (this.closed) return void (await this.onClose());
    const route = this.routeOf(tunnelId, cmd);
    this.gw.gateway.attach(sessionId, this);
    this.gw.gateway.addTunnel(sessionId, tunnelId, { publicUrl: boundUrl, proto: cmd.proto, route });
    this.gw.setUp(this.info);
    // OpenSSH matches each forwarded channel to its -R by the address and port it was answered with.
    if (!fwd.port) fwd.port = cmd.proto === 'tcp' ? Number(new URL(boundUrl).port) : cmd.proto === 'http' ? 80 : 443;
    fwd.accept?.(fwd.port);
    fwd.accept = undefined;
    this.gw.log({ level: 'info', msg: 'ssh tunnel session started', session: sessionId, credential: credential.credentialId, ip: this.ip, url: boundUrl });
    ch.write(`Forwarding ${boundUrl} -> the -R target of this ssh (session ${sessionId})\r\n`);
  }

  /** The request_headers module an http tunnel asked for, as a route document (or none). */
  private routeOf(tunnelId: string, cmd: SshCommand): FullDoc | undefined {
    if (!Object.keys(cmd.addHeaders).length && !cmd.removeHeaders.length) return undefined;
    return { id: tunnelId, request_headers: { enabled: true, add: cmd.addHeaders, remove: cmd.removeHeaders } } as unknown as FullDoc;
  }

  private waitForward(): Promise<Forward | undefined> {
    if (this.forward) return Promise.resolve(this.forward);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(undefined), FORWARD_WAIT_MS);
      t.unref();
      this.forwardWaiters.push(() => {
        clearTimeout(t);
        resolve(this.forward);
      });
    });
  }

  /** A line on the user's terminal (stderr for what went wrong); dropped when the client does not read (bounded). */
  private say(text: string, stream: 'stdout' | 'stderr' = 'stderr') {
    const ch = this.out;
    if (!ch || ch.destroyed || ch.writableLength > MAX_PENDING_OUTPUT) return;
    (stream === 'stderr' ? ch.stderr : ch).write(`${text}\r\n`);
  }

  /** Refuses in words, with exit status 2, and ends the connection. */
  private fail(ch: ServerChannel, message: string, withHelp = false) {
    if (message) ch.stderr.write(`edgeform: ${message}\r\n`);
    if (withHelp || !message) ch.stderr.write(HELP.replace(/\n/g, '\r\n'));
    // The forward stays unanswered: a refused one would end ssh at once (ExitOnForwardFailure)
    // with its own words instead of these.
    ch.exit(2);
    ch.end();
    setTimeout(() => this.client.end(), 100).unref();
  }

  /** Ends the session: a line on the terminal, exit status, then the connection. */
  shutdown(reason: string, status = 1): Promise<void> {
    if (this.out && !this.out.destroyed) {
      this.say(`edgeform: ${reason}`);
      this.out.exit(status);
      this.out.end();
    }
    setTimeout(() => this.client.end(), 100).unref();
    return this.onClose();
  }

  private onClose(): Promise<void> {
    this.closed = true;
    for (const w of this.forwardWaiters.splice(0)) w();
    if (this.ended) return this.ended;
    const sessionId = this.sessionId;
    if (!sessionId) return (this.ended = Promise.resolve());
    this.gw.gateway.detach(sessionId);
    if (this.tunnelId) this.gw.gateway.dropTunnel(this.tunnelId);
    this.gw.log({ level: 'info', msg: 'ssh tunnel session closed', session: sessionId });
    this.ended = deleteSessions(this.gw.ctx, [sessionId]).catch((e) => this.gw.log({ level: 'warn', msg: `could not delete session ${sessionId} (the sweeper will): ${(e as Error).message}` }));
    return this.ended;
  }

  // AttachedSession: what the gateway asks of a session it does not hold itself.

  async command(action: Action): Promise<void> {
    if (this.closed || !this.sessionId) throw notFound('tunnel session', this.sessionId ?? '');
    if (action !== 'stop') {
      throw new ApiError('ERR_SERVICE_332', `tunnel session ${this.sessionId} is an ssh session: an ssh client cannot ${action} on request; stop it (POST /tunnel_sessions/${this.sessionId}/stop) and run ssh again`);
    }
    this.gw.log({ level: 'info', msg: 'ssh tunnel session stopped by the API', session: this.sessionId });
    void this.shutdown(`stopped by the server's API (POST /tunnel_sessions/${this.sessionId}/stop)`, 0);
  }

  close(why?: ApiError) {
    void this.shutdown(why ? `${why.message} (${why.code})` : 'closed by the server');
  }

  private channel(): ChannelStream {
    if (this.closed || !this.forward) throw notFound('tunnel', this.tunnelId ?? '');
    const { addr, port } = this.forward;
    return new ChannelStream((cb) => this.client.forwardOut(addr || 'localhost', port, '127.0.0.1', 0, (err, ch) => cb(err ?? undefined, ch)));
  }

  openStream(tunnelId: string, req: { method: string; path: string; headers?: Record<string, string | string[] | undefined>; endStream?: boolean }): ClientHttp2Stream {
    if (tunnelId !== this.tunnelId) throw notFound('tunnel', tunnelId);
    const relayed = new RelayedRequest(this.channel() as never, req);
    relayed.once('response', (h: Record<string, unknown>) => this.say(`${req.method} ${req.path.slice(0, 200)} ${h[':status']}`, 'stdout'));
    return relayed as unknown as ClientHttp2Stream;
  }

  openTcp(tunnelId: string): ClientHttp2Stream {
    if (tunnelId !== this.tunnelId) throw notFound('tunnel', tunnelId);
    return this.channel() as unknown as ClientHttp2Stream;
  }
}
