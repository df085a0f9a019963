// Event delivery test kit: local HTTP receivers (wait for delivery with eventually, wait.ts).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received { headers: http.IncomingHttpHeaders; body: string; json: any }

/** A local HTTP receiver; `respond` picks each reply's status. */
export async function receiver(respond: (n: number, json: any) => number = () => 204) {
  const received: Received[] = [];
  let attempts = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const json = JSON.parse(body);
      const status = respond(++attempts, json);
      if (status < 300) received.push({ headers: req.headers, body, json });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return { url, received, attempts: () => attempts, close: () => new Promise<void>((r) => server.close(() => r())) };
}

