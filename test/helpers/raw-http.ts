// Raw HTTP/1.1 over a socket, for requests fetch will not send (CONNECT, TRACE, no Host, a
// bad Expect, malformed bytes). The server closes the connection or the request asks it to.
import net from 'node:net';

export interface RawReply {
  status: number;
  /** The status line and header lines as received. */
  head: string;
  /** Header values by lower-case name. */
  headers: Record<string, string>;
  /** The body parsed as JSON, or its text when it is not JSON. */
  body: any;
}

/** Sends `bytes` to the server at `url` and reads until the server closes (at most 5 s). */
export async function rawHttp(url: string, bytes: string): Promise<RawReply> {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
  await new Promise((r) => socket.once('connect', r));
  let out = '';
  socket.on('data', (c) => { out += c; });
  socket.on('error', () => {});
  const closed = new Promise((r) => socket.once('close', r));
  const timer = setTimeout(() => socket.destroy(), 5000);
  socket.write(bytes);
  await closed;
  clearTimeout(timer);
  const at = out.indexOf('\r\n\r\n');
  const head = at < 0 ? out : out.slice(0, at);
  const text = at < 0 ? '' : out.slice(at + 4);
  const headers = Object.fromEntries(head.split('\r\n').slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  let body: any = text;
  try { body = JSON.parse(text); } catch { /* not JSON: keep the text */ }
  return { status: Number(head.split(' ')[1]), head, headers, body };
}
