// Shutting down without resetting anyone: on SIGTERM the listener stops accepting, but the
// open keep-alive connections stay open until each has been idle for a moment, so a request
// a client sends on one meanwhile is answered (503 with Connection: close, by the app)
// instead of meeting a reset. Requests in flight finish; stragglers are cut at the deadline.
//
// While the server runs, a request costs this module a few field writes: a listener on every
// response ('close') kept each request's objects alive through V8's young-generation
// collections until the next full one (bench/README.md, "GET one below 85 µs"). Whether a
// connection is busy is read from its last response when draining begins, when it last
// answered from the app's request-log hook (answered()), and only the responses still in
// flight then, or arriving after, get a listener.
import type { Server, ServerResponse } from 'node:http';
import net from 'node:net';

export interface DrainOptions {
  /** A connection with nothing in flight for this long is closed (the client sees a clean close). */
  idleMs: number;
  /** After this, every connection left is destroyed. */
  deadlineMs: number;
}

export const DRAIN_DEFAULTS: DrainOptions = { idleMs: 1000, deadlineMs: 30_000 };

interface Connection {
  /** The connection's latest response (HTTP/1.1 answers in order: while it is unfinished, the connection is busy). */
  res?: ServerResponse;
  /** When it last began a request or finished an answer (ms since the epoch); a connection that never had one: when it opened. */
  lastActiveAt: number;
  /** Draining only: requests in flight, and since when none has been. */
  active: number;
  idleSince: number;
  ending: boolean;
}

const tracked = new WeakMap<net.Socket, Connection>();

/** The app tells the drain that a response on this connection has just been sent (its onResponse hook). */
export function answered(socket: net.Socket | null | undefined): void {
  const c = socket && tracked.get(socket);
  if (c) c.lastActiveAt = Date.now();
}

/** Tracks the server's connections; `drain()` stops accepting and resolves once none is left. */
export function drainable(server: Server, opts: DrainOptions = DRAIN_DEFAULTS) {
  const connections = new Map<net.Socket, Connection>();
  let draining = false;
  /** Counts a response as in flight until it closes (from the moment draining begins). */
  const watch = (c: Connection, res: ServerResponse) => {
    c.active++;
    res.once('close', () => {
      c.active--;
      c.idleSince = Date.now();
    });
  };
  server.on('connection', (socket: net.Socket) => {
    const c: Connection = { lastActiveAt: Date.now(), active: 0, idleSince: 0, ending: false };
    connections.set(socket, c);
    tracked.set(socket, c);
    socket.once('close', () => connections.delete(socket));
  });
  // An upgraded connection (an agent's) belongs to whoever took it over, which closes it in
  // its own time: cut as idle here, it would take the ingress's streams in flight with it.
  server.on('upgrade', (req) => connections.delete(req.socket));
  server.on('request', (req, res) => {
    const c = connections.get(req.socket);
    if (!c) return;
    c.res = res;
    c.lastActiveAt = Date.now();
    if (draining) watch(c, res);
  });

  return async function drain() {
    // net.Server's close stops accepting without http.Server's closing of idle connections,
    // which resets a request already on its way over one of them.
    if (server.listening) net.Server.prototype.close.call(server);
    draining = true;
    for (const c of connections.values()) {
      // Idle since it last answered (the app says when: answered()); without the app's word, since its last request began.
      c.idleSince = c.lastActiveAt;
      if (c.res && !c.res.writableFinished) watch(c, c.res);
    }
    const deadline = Date.now() + opts.deadlineMs;
    while (connections.size) {
      const now = Date.now();
      for (const [socket, c] of connections) {
        if (now > deadline) socket.destroy();
        else if (!c.ending && c.active === 0 && now - c.idleSince >= opts.idleMs) {
          c.ending = true;
          socket.end();
        }
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  };
}
