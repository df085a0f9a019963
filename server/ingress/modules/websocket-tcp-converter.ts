// websocket_tcp_converter: a WebSocket from the client becomes a TCP stream to the backend:
// the edge answers the handshake itself, each data frame's payload goes to the backend as
// bytes, and the backend's bytes come back as binary frames. Requests that are not WebSocket
// upgrades go on to the backend as HTTP.
import type { Duplex } from 'node:stream';
import type { BufferBudget } from '../buffer-budget.js';
import { edgeError } from '../http/exchange.js';
import type { FilterFactory } from '../types.js';
import { acceptKey, encodeFrame, FrameDecoder, OP } from './websocket-frames.js';

function closeFrame(code: number) {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(code);
  return encodeFrame(OP.close, b);
}

function convert(client: Duplex, head: Buffer, backend: Duplex, budget: BufferBudget | undefined) {
  let open = true;
  // The partial frame held counts against the server's buffer bound (buffer-budget.ts); past
  // it the connection closes with 1013 (try again later). A frame is at most MAX_FRAME.
  let held = 0;
  const finish = (code: number) => {
    if (!open) return;
    open = false;
    budget?.give(client, held);
    held = 0;
    client.end(closeFrame(code));
    backend.destroy();
  };
  // The client is read no faster than the backend takes its data and the client itself takes
  // the pongs to its pings (a client pinging without reading would fill memory with pongs).
  const full = new Set<Duplex>();
  const hold = (stream: Duplex) => {
    client.pause();
    if (full.has(stream)) return;
    full.add(stream);
    stream.once('drain', () => { full.delete(stream); if (!full.size) client.resume(); });
  };
  const decoder = new FrameDecoder({
    data: (payload) => { if (!backend.write(payload)) hold(backend); },
    ping: (payload) => { if (!client.write(encodeFrame(OP.pong, payload))) hold(client); },
    close: (code) => finish(code === 1009 || code === 1002 ? code : 1000),
  });
  const onData = (c: Buffer) => {
    if (!open) return;
    if (!decoder.push(c)) return void client.off('data', onData);
    if (!budget || !open) return;
    const now = decoder.buffered;
    if (now > held) {
      if (budget.take(client, now - held) !== undefined) return finish(1013);
    } else budget.give(client, held - now);
    held = now;
  };
  client.on('data', onData);
  if (head.length) onData(head);
  backend.on('data', (c: Buffer) => { if (open && !client.write(encodeFrame(OP.binary, c))) { backend.pause(); client.once('drain', () => backend.resume()); } });
  backend.on('end', () => finish(1000));
  backend.on('error', () => finish(1011));
  client.on('close', () => {
    open = false;
    budget?.give(client, held);
    held = 0;
    backend.destroy();
  });
  client.on('error', () => backend.destroy());
}

export const websocketTcpConverter: FilterFactory = () => ({
  async handle(ex, next) {
    const up = ex.upgrade;
    if (!up || String(ex.req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return next();
    const key = ex.req.headers['sec-websocket-key'];
    if (typeof key !== 'string' || Buffer.from(key, 'base64').length !== 16 || ex.req.headers['sec-websocket-version'] !== '13') {
      throw edgeError('ERR_SERVICE_751', 'a WebSocket handshake needs Sec-WebSocket-Key (16 bytes, base64) and Sec-WebSocket-Version: 13');
    }
    const backend = await ex.connectBackend();
    up.taken = true;
    up.socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptKey(key)}\r\n\r\n`);
    convert(up.socket, up.head, backend, ex.deps.buffers);
  },
});
