// A loopback proxy in front of a test server that a test steers. It can hold creates (POSTs)
// at a gate the test opens, so that a run is known to be mid-apply while the test acts
// (starts a second run, interrupts, kills); play a server without edgeform's extensions
// (404 ERR_SERVICE_301 under /_edgeform/); and answer chosen paths itself, as an older or
// other server seen through the same URL.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TestProxy {
  url: string;
  /** POSTs forwarded so far (answered or not). */
  readonly posts: number;
  /** Lets every held and later POST through. */
  open(): void;
  close(): Promise<void>;
}

export interface ProxyOptions {
  /** Start with the gate open (default: closed, every POST after `passFirst` is held). */
  open?: boolean;
  /** POSTs let through before the gate holds the rest (default 0). */
  passFirst?: number;
  /** Answer /_edgeform/ paths as a server without the extension does. */
  withoutExtensions?: boolean;
  /** A reply for the requests the proxy answers itself (undefined: forward); sees the whole request body. */
  answer?: (req: ProxiedRequest) => Reply | undefined;
}

export interface ProxiedRequest {
  method: string;
  /** Without the query. */
  path: string;
  /** With the query, as sent. */
  url: string;
  body: string;
}

/** A status, a JSON body and any more headers. */
export interface Reply { status: number; body: unknown; headers?: Record<string, string> }

const withoutExtensions = ({ method, path }: ProxiedRequest): Reply | undefined =>
  path.startsWith('/_edgeform/')
    ? { status: 404, body: { error_code: 'ERR_SERVICE_301', status_code: 404, msg: `no such path: ${method} ${path}`, details: { operation_id: 'op_proxy' } } }
    : undefined;

export async function startProxy(upstream: string, opts: ProxyOptions = {}): Promise<TestProxy> {
  const target = new URL(upstream);
  let posts = 0;
  let opened = !!opts.open;
  const held: (() => void)[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const upstreams = new Set<http.ClientRequest>();
  /** Forwards the request; `body` when it was read already (to be answered). */
  const forward = (req: http.IncomingMessage, res: http.ServerResponse, body?: Buffer) => {
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
    if (body) up.end(body);
    else req.pipe(up);
  };
  const reply = (res: http.ServerResponse, r: Reply) => {
    res.writeHead(r.status, { 'content-type': 'application/json', ...r.headers });
    res.end(JSON.stringify(r.body));
  };
  const server = http.createServer((req, res) => {
    const url = req.url ?? '/';
    const request = { method: req.method ?? 'GET', path: url.split('?')[0], url, body: '' };
    const mine = opts.withoutExtensions ? withoutExtensions(request) : undefined;
    if (mine) {
      req.resume();
      return reply(res, mine);
    }
    if (opts.answer) {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const own = opts.answer!({ ...request, body: body.toString() });
        if (own) reply(res, own);
        else gate(req, res, body);
      });
      return;
    }
    gate(req, res);
  });
  /** Holds a POST at the gate unless it is open (or among the first let through). */
  const gate = (req: http.IncomingMessage, res: http.ServerResponse, body?: Buffer) => {
    if (req.method !== 'POST') return forward(req, res, body);
    posts++;
    if (opened || posts <= (opts.passFirst ?? 0)) return forward(req, res, body);
    req.pause();
    held.push(() => {
      req.resume();
      forward(req, res, body);
    });
  };
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
