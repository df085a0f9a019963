// One connection to the server: the Upgrade, then the agent serves HTTP/2 on the socket and
// answers what the server asks (hello, bound, commands, bundle, closing) and the streams it
// relays. Resolves with how the connection ended; run.ts decides what comes next.
import http from 'node:http';
import http2, { type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { AgentConfig } from './config.js';
import { relayHttp, relayTcp } from './forward.js';
import { AGENT_CODES, AGENT_PATH, CONTROL, MAX_CONTROL_BODY, TUNNEL_HEADER, UPGRADE_TOKEN, type Bound, type Closing, type CommandRequest, type Hello, type HelloRequest } from './protocol.js';
import type { Updater } from './updater.js';

export type Outcome =
  | { kind: 'lost'; reason: string; established: boolean }
  /** `next`: what the user can do about it, when it is not the token (run.ts has the default). */
  | { kind: 'refused'; msg: string; next?: string }
  | { kind: 'stop' }
  | { kind: 'restart' };

const H2_WINDOW = 4 * 1024 * 1024;

/** Reads a small JSON body; undefined when it is too large or not JSON. */
function readJson(stream: NodeJS.ReadableStream): Promise<any> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_CONTROL_BODY) chunks.push(c);
    });
    stream.on('end', () => {
      if (size > MAX_CONTROL_BODY) return resolve(undefined);
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null'));
      } catch {
        resolve(undefined);
      }
    });
    stream.on('error', () => resolve(undefined));
  });
}

function reply(stream: ServerHttp2Stream, status: number, body?: unknown) {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond({ ':status': status, ...(body === undefined ? {} : { 'content-type': 'application/json' }) });
  stream.end(body === undefined ? undefined : JSON.stringify(body));
}

export function connectOnce(cfg: AgentConfig, version: string, updater: Updater, log: (msg: string) => void): Promise<Outcome> {
  return new Promise((resolve) => {
    let settled = false;
    const finish = (o: Outcome) => {
      if (settled) return;
      settled = true;
      resolve(o);
    };
    const url = new URL(`${cfg.apiUrl}${AGENT_PATH}`);
    const req = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'GET',
      headers: { Connection: 'Upgrade', Upgrade: UPGRADE_TOKEN, Authorization: `Bearer ${cfg.authtoken}`, 'Service-Version': '2' },
      timeout: 10_000,
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 10 s')));
    req.on('error', (e) => finish({ kind: 'lost', reason: (e as NodeJS.ErrnoException).code ?? e.message, established: false }));
    req.on('response', async (res) => {
      const body = await readJson(res);
      const msg = typeof body?.msg === 'string' ? `${body.msg} (${body.error_code})` : `status ${res.statusCode}`;
      // Credentials and protocol problems do not fix themselves: retrying would only hammer the server.
      if (res.statusCode === 401 || res.statusCode === 403 || res.statusCode === 400) return finish({ kind: 'refused', msg: `the server refused the agent: ${msg}`, next: nextStep(body?.error_code) });
      if (res.statusCode === 404) return finish({ kind: 'refused', msg: `${cfg.apiUrl} does not accept agents (${msg}); check --api-url` });
      finish({ kind: 'lost', reason: `the server answered ${msg}`, established: false });
    });
    req.on('upgrade', (_res, socket: Socket, head: Buffer) => serve(socket, head));
    req.end();

    let heartbeatMs = 10_000;
    let established = false;
    let ending: Outcome | undefined;
    const tunnels = new Map<string, string>();

    let h2session: http2.ServerHttp2Session | undefined;

    function serve(socket: Socket, head: Buffer) {
      if (head.length) socket.unshift(head);
      socket.setNoDelay(true);
      const server = http2.createServer({ settings: { initialWindowSize: H2_WINDOW, enablePush: false }, maxSessionMemory: 64 });
      server.on('session', (session) => {
        h2session = session;
        session.on('connect', () => { try { session.setLocalWindowSize(H2_WINDOW * 4); } catch { /* closed */ } });
        // The server pings every half interval; silence for two and a half means it is gone.
        // (The socket's own idle timer sees nothing: HTTP/2 reads it natively.)
        let lastPing = Date.now();
        session.on('ping', () => { lastPing = Date.now(); });
        const watchdog = setInterval(() => { if (Date.now() - lastPing > heartbeatMs * 2.5) socket.destroy(); }, 250);
        session.on('close', () => clearInterval(watchdog));
        session.on('error', () => {});
        session.on('close', () => {
          socket.destroy();
          finish(ending ?? { kind: 'lost', reason: 'the connection closed', established });
        });
      });
      server.on('stream', (stream, headers) => onStream(stream, headers).catch(() => reply(stream, 500)));
      socket.on('error', () => {});
      socket.on('close', () => finish(ending ?? { kind: 'lost', reason: 'the connection closed', established }));
      server.emit('connection', socket);

      const end = (o: Outcome) => {
        ending = o;
        // GOAWAY, then the socket: the server drops the session at once.
        setImmediate(() => {
          try { h2session?.close(); } catch { /* already closed */ }
          socket.end();
          setTimeout(() => socket.destroy(), 200).unref();
        });
      };

      async function onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders) {
        stream.on('error', () => {});
        const method = headers[':method'];
        const path = headers[':path'] ?? '';
        if (method === 'CONNECT' || !path.startsWith('/_edgeform/')) {
          const forwardsTo = tunnels.get(String(headers[TUNNEL_HEADER] ?? ''));
          if (!forwardsTo) return reply(stream, 404, { msg: 'this agent has no such tunnel' });
          return method === 'CONNECT' ? relayTcp(stream, forwardsTo) : relayHttp(stream, headers, forwardsTo);
        }
        if (path === CONTROL.bundle) return reply(stream, (await updater.receive(stream)) ? 200 : 400);
        const body = await readJson(stream);
        switch (path) {
          case CONTROL.hello: {
            const asked = body as HelloRequest | undefined;
            if (asked && Number.isFinite(asked.heartbeat_ms) && asked.heartbeat_ms > 0) {
              heartbeatMs = asked.heartbeat_ms;
            }
            const hello: Hello = { agent_version: version, os: process.platform, metadata: cfg.metadata, update_check: cfg.updateCheck, tunnels: cfg.tunnels };
            return reply(stream, 200, hello);
          }
          case CONTROL.bound: {
            const bound = body as Bound;
            established = true;
            for (const t of bound.tunnels ?? []) {
              const cfgT = cfg.tunnels.find((c) => c.name === t.name);
              if (!t.error && cfgT && t.id) tunnels.set(t.id, cfgT.forwards_to);
            }
            // The server routes traffic to the tunnels once this answer reaches it, so it goes
            // out before "online" is printed: whoever reads that line finds them serving.
            reply(stream, 204);
            log(`session ${bound.session_id} established (heartbeat every ${heartbeatMs / 1000} s)`);
            for (const t of bound.tunnels ?? []) {
              if (t.error) log(`tunnel "${t.name}" refused: ${t.error.msg} (${t.error.error_code})`);
              else log(`tunnel "${t.name}" online: ${t.id}${t.public_url ? ` ${t.public_url}` : ''} -> ${cfg.tunnels.find((c) => c.name === t.name)?.forwards_to}`);
            }
            return;
          }
          case CONTROL.closing: {
            const c = body as Closing;
            reply(stream, 204);
            return end({ kind: 'refused', msg: `the server closed the session: ${c?.msg} (${c?.error_code})`, next: nextStep(c?.error_code) });
          }
          case CONTROL.command: {
            const answer = answerCommand(body as CommandRequest, process.platform, updater);
            reply(stream, answer.status, answer.body);
            if (answer.then) {
              log(`${answer.then} command received`);
              stream.on('close', () => end({ kind: answer.then! }));
            }
            return;
          }
          default:
            return reply(stream, 404, { msg: `unknown control path ${path}` });
        }
      }
    }
  });
}

/** What to do about a refusal that is not the token's fault, by its code. */
function nextStep(code: unknown): string | undefined {
  if (code === AGENT_CODES.sessionLimit) {
    return 'The agent does not retry: its credential has no session left. Stop one of the credential\'s other agents (a stopped agent\'s session ends at once, a vanished one\'s within the server\'s heartbeat interval) and start this one again, use another credential, or raise the server\'s --agent-max-sessions-per-credential (EDGEFORM_AGENT_MAX_SESSIONS_PER_CREDENTIAL).';
  }
  return undefined;
}

/** The agent's answer to a command, and what it does once the answer is sent. */
export function answerCommand(cmd: CommandRequest | undefined, platform: NodeJS.Platform, updater: Pick<Updater, 'accept'>): { status: number; body: unknown; then?: 'stop' | 'restart' } {
  switch (cmd?.action) {
    case 'stop':
      return { status: 200, body: {}, then: 'stop' };
    case 'restart':
      if (platform === 'win32') return { status: 409, body: { error_code: AGENT_CODES.restartUnsupported, msg: 'the agent runs on Windows, which cannot restart a process by exec; stop it and start it again' } };
      return { status: 200, body: {}, then: 'restart' };
    case 'update': {
      const refused = updater.accept(cmd.offer);
      return refused ? { status: 409, body: refused } : { status: 200, body: {} };
    }
    default:
      return { status: 400, body: { msg: `unknown command ${JSON.stringify(cmd?.action)}` } };
  }
}
