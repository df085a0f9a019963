// Loopback ports for tests.
import net, { type AddressInfo } from 'node:net';

/** A loopback port nothing listens on right now (the kernel's pick, released at once): to listen on, or to find nothing there. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** The first of two consecutive free loopback ports (a range for `--agent-tcp-ports`). */
export async function twoFreePorts(): Promise<number> {
  for (let i = 0; i < 20; i++) {
    const p = await freePort();
    const free = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(p + 1, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (free) return p;
  }
  throw new Error('no two consecutive free ports in 20 tries');
}
