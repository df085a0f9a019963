// Shutting down without resetting anyone: on SIGTERM the listener stops accepting, but the
// open keep-alive connections stay open until each has been idle for a moment, so a request
// a client sends on one meanwhile is answered (503 with Connection: close, by the app)
// instead of meeting a reset. Requests in flight finish; stragglers are cut at the deadline.
import type { Server } from 'node:http';
import net from 'node:net';

export interface DrainOptions {
  /** A connection with nothing in flight for this long is closed (the client sees a clean close). */
  idleMs: number;
  /** After this, every connection left is destroyed. */
  deadlineMs: number;
}

export const DRAIN_DEFAULTS: DrainOptions = { idleMs: 1000, deadlineMs: 30_000 };

interface Connection { active: number; idleSince: number; ending: boolean }

/** Tracks the server's connections; `drain()` stops accepting and resolves once none is left. */
export function drainable(server: Server, opts: DrainOptions = DRAIN_DEFAULTS) {
  const connections = new Map<net.Socket, Connection>();
  server.on('connection', (socket: net.Socket) => {
    connections.set(socket, { active: 0, idleSince: Date.now(), ending: false });
    socket.once('close', () => connections.delete(socket));
  });
  // An upgraded connection (an agent's) belongs to whoever took it over, which closes it in
  // its own time: cut as idle here, it would take the ingress's streams in flight with it.
  server.on('upgrade', (req) => connections.delete(req.socket));
  server.on('request', (req, res) => {
    const c = connections.get(req.socket);
    if (!c) return;
    c.active++;
    res.once('close', () => {
      c.active--;
      c.idleSince = Date.now();
    });
  });

  return async function drain() {
    // net.Server's close stops accepting without http.Server's closing of idle connections,
    // which resets a request already on its way over one of them.
    if (server.listening) net.Server.prototype.close.call(server);
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
