// A version-2 agent connection that closes (a restart, a stop, a lost network) fails every
// stream still open. One nobody listens to any more, as an HTTP client leaves its connection
// once the answer is read, must not throw that error out of the event loop: in edgeform serve
// it was an uncaught exception (seen in CI after a restart command through the SDK).
import net, { type AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { MUX_LIMITS, MuxSession } from '../../server/gateway/v2/muxado.js';

const closers: (() => void)[] = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

async function socketPair(): Promise<[net.Socket, net.Socket]> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<net.Socket>((r) => server.once('connection', r));
  const client = net.connect((server.address() as AddressInfo).port, '127.0.0.1');
  const other = await accepted;
  closers.push(() => { client.destroy(); other.destroy(); server.close(); });
  return [client, other];
}

describe('closing a muxado session', () => {
  it('fails open streams without an uncaught error, and a listening reader still sees why', async () => {
    const [ours] = await socketPair();
    const mux = new MuxSession(ours as unknown as TLSSocket, MUX_LIMITS, () => {}, () => {});
    const unheard = mux.open();
    const heard = mux.open();
    const seen = new Promise<Error>((r) => heard.once('error', r));
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    try {
      mux.close('restarted by the API');
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      process.off('uncaughtException', onUncaught);
    }
    expect(uncaught).toEqual([]);
    expect(unheard.destroyed).toBe(true);
    expect((await seen).message).toMatch(/restarted by the API/);
  });
});
