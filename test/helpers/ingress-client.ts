// Clients of the real `--ingress` listeners, as curl --connect-to would be: TLS to a loopback
// port with the server name of an edge's host, trusting the server's local CA (or a given CA),
// over HTTP/1.1 or HTTP/2; and raw TCP/TLS connections for TCP and TLS edges.
import fs from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type { TestServer } from './server.js';

export interface IngressReply { status: number; headers: Record<string, string | string[] | undefined>; body: string; peerCertificate?: tls.PeerCertificate }

/** The loopback port of the listener that stands for `publicPort`. */
export function ingressPort(s: TestServer, publicPort: number): number {
  const l = s.server.ingress?.listeners.find((x) => x.publicPort === publicPort);
  if (!l) throw new Error(`no ingress listener for public port ${publicPort}`);
  return l.port;
}

export const localCa = (s: TestServer) => fs.readFileSync(s.server.ingress!.caFile, 'utf8');

export interface HttpsOptions {
  servername?: string;
  /** The Host header, when it should differ from the server name. */
  host?: string;
  ca?: string;
  maxVersion?: tls.SecureVersion;
  cert?: string;
  key?: string;
  headers?: Record<string, string>;
}

/** One HTTP/1.1 request over TLS to the listener (a new connection each time). */
export function httpsGet(port: number, name: string, path: string, o: HttpsOptions = {}): Promise<IngressReply> {
  return new Promise((resolve, reject) => {
    const req = https.get({
      host: '127.0.0.1', port, path, servername: o.servername ?? name, ca: o.ca, maxVersion: o.maxVersion, cert: o.cert, key: o.key,
      headers: { host: o.host ?? name, ...o.headers }, agent: false,
    }, (res) => {
      const peerCertificate = (res.socket as tls.TLSSocket).getPeerCertificate();
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, peerCertificate }));
    });
    req.on('error', reject);
  });
}

/** One HTTP/2 request (ALPN h2) to the listener. */
export function h2Get(port: number, name: string, path: string, ca: string): Promise<IngressReply & { alpn: string | false | null }> {
  return new Promise((resolve, reject) => {
    const client = http2.connect(`https://${name}`, { createConnection: () => tls.connect({ host: '127.0.0.1', port, servername: name, ca, ALPNProtocols: ['h2'] }) });
    client.on('error', reject);
    const stream = client.request({ ':path': path });
    let headers: Record<string, string | string[] | undefined> = {};
    let body = '';
    stream.setEncoding('utf8');
    stream.on('response', (h) => { headers = h as typeof headers; });
    stream.on('data', (c) => { body += c; });
    stream.on('end', () => {
      const alpn = (client.socket as tls.TLSSocket).alpnProtocol ?? false;
      client.close();
      resolve({ status: Number(headers[':status']), headers, body, alpn });
    });
    stream.on('error', reject);
  });
}

/** What a raw connection gets back for what it sends, until the server closes it or `ms` of quiet pass. */
export function exchange(socket: net.Socket, send: string | undefined, ms = 2000): Promise<{ data: string; closed: boolean; error?: string }> {
  return new Promise((resolve) => {
    let data = '';
    let timer: NodeJS.Timeout;
    const done = (closed: boolean, error?: string) => { clearTimeout(timer); resolve({ data, closed, error }); };
    const quiet = () => { clearTimeout(timer); timer = setTimeout(() => done(false), ms); };
    socket.setEncoding('utf8');
    socket.on('data', (c) => { data += c; quiet(); });
    socket.on('close', () => done(true));
    socket.on('error', (e) => done(true, (e as NodeJS.ErrnoException).code ?? e.message));
    quiet();
    if (send !== undefined) socket.write(send);
  });
}

/** A TLS connection to the listener (resolves once the handshake is done, rejects if it fails or takes over 20 s). */
export function tlsConnect(port: number, o: tls.ConnectionOptions = {}): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ...o }, () => { clearTimeout(timer); resolve(socket); });
    const timer = setTimeout(() => socket.destroy(new Error('handshake took over 20 s')), 20_000);
    socket.once('error', (e) => { clearTimeout(timer); reject(e); });
    socket.once('close', () => { clearTimeout(timer); reject(new Error('closed during the handshake')); });
  });
}
