// A loopback proxy in front of a test server that a test steers: it holds creates (POSTs)
// at a gate the test opens, so that a run is known to be mid-apply while the test acts
// (starts a second run, interrupts, kills); and it can play a server without edgeform's
// extensions (404 ERR_SERVICE_301 under /_edgeform/).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GateProxy {
  url: string;
  /** POSTs forwarded so far (answered or not). */
  readonly posts: number;
  /** Lets every held and later POST through. */
  open(): void;
  close(): Promise<void>;
}

export interface GateOptions {
  /** POSTs let through before the gate holds the rest (default 0). */
  passFirst?: number;
  /** Answer /_edgeform/ paths as a server without the extension does. */
  withoutExtensions?: boolean;
  /** Start with the gate open. */
  open?: boolean;
}

export async function gateProxy(upstream: string, opts: GateOptions = {}): Promise<GateProxy> {
  const target = new URL(upstream);
  let posts = 0;
  let opened = !!opts.open;
  const held: (() => void)[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const upstreams = new Set<http.ClientRequest>();
  const forward = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstreams.add(up);
    up.on('close', () => upstreams.delete(up));
    up.on('error', () => res.destroy());
    // A client gone mid-request (killed) must not leave a half-sent request on the server.
    req.on('aborted', () => up.destroy());
    res.on('close', () => { if (!res.writableFinished) up.destroy(); });
    req.pipe(up);
  };
  const server = http.createServer((req, res) => {
    if (opts.withoutExtensions && req.url?.startsWith('/_edgeform/')) {
      req.resume();
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error_code: 'ERR_SERVICE_301', status_code: 404, msg: `no such path: ${req.method} ${req.url}`, details: { operation_id: 'op_proxy' } }));
      return;
    }
    if (req.method !== 'POST') return forward(req, res);
    posts++;
    if (opened || posts <= (opts.passFirst ?? 0)) return forward(req, res);
    req.pause();
    held.push(() => {
      req.resume();
      forward(req, res);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get posts() { return posts; },
    open() {
      opened = true;
      for (const go of held.splice(0)) go();
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        for (const u of upstreams) u.destroy();
        server.close(() => r());
      }),
  };
}
