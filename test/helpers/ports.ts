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
