// A browser-like client for sign-in tests: a cookie jar per host (Max-Age=0 or a past Expires
// deletes), redirects returned rather than followed (redirect: 'manual') so a test can follow,
// inspect or tamper with each hop. https:// URLs of edge hosts go to the ingress listener on
// loopback with that server name (as curl --connect-to); http:// URLs (a local identity
// provider) are fetched as they are.
import http from 'node:http';
import https from 'node:https';

export interface BrowserReply { status: number; headers: http.IncomingHttpHeaders; body: string; url: string }

export class Browser {
  /** host -> cookie name -> value */
  readonly jar = new Map<string, Map<string, string>>();

  constructor(private readonly ingress: { port: number; ca: string }) {}

  cookiesOf(host: string): Map<string, string> {
    let m = this.jar.get(host);
    if (!m) this.jar.set(host, (m = new Map()));
    return m;
  }

  private remember(host: string, setCookie: string[] | undefined) {
    for (const line of setCookie ?? []) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const gone = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a) || (/^\s*expires=/i.test(a) && Date.parse(a.split('=')[1]) < Date.now()));
      if (gone || value === '') this.cookiesOf(host).delete(name);
      else this.cookiesOf(host).set(name, value);
    }
  }

  request(url: string, o: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<BrowserReply> {
    const u = new URL(url);
    const cookie = [...this.cookiesOf(u.host).entries()].map(([k, v]) => `${k}=${v}`).join('; ');
    const headers: Record<string, string> = { host: u.host, ...(cookie ? { cookie } : {}), ...o.headers };
    if (o.body !== undefined) headers['content-length'] = String(Buffer.byteLength(o.body));
    return new Promise((resolve, reject) => {
      const onRes = (res: http.IncomingMessage) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => { body += c; });
        res.on('end', () => {
          this.remember(u.host, res.headers['set-cookie']);
          resolve({ status: res.statusCode!, headers: res.headers, body, url });
        });
      };
      const common = { path: u.pathname + u.search, method: o.method ?? 'GET', headers, agent: false as const };
      const req = u.protocol === 'https:'
        ? https.request({ ...common, host: '127.0.0.1', port: this.ingress.port, servername: u.hostname, ca: this.ingress.ca }, onRes)
        : http.request({ ...common, host: u.hostname, port: u.port }, onRes);
      req.on('error', reject);
      req.end(o.body);
    });
  }

  /** Follows redirects from `url` (at most `max`) until one matches `stop` or a non-redirect answer. */
  async follow(url: string, stop: (next: string) => boolean = () => false, max = 20): Promise<BrowserReply> {
    let r = await this.request(url);
    for (let i = 0; i < max && r.status >= 300 && r.status < 400 && r.headers.location; i++) {
      const next = new URL(r.headers.location, r.url).href;
      if (stop(next)) return r;
      r = await this.request(next);
    }
    return r;
  }
}
