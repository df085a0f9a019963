// Starts the API server: database (migrated), bootstrap, routes, listener.
import type { FastifyInstance } from 'fastify';
import { createRequire } from 'node:module';
import { bootstrap, type Bootstrap } from './bootstrap.js';
import type { ServerConfig } from './config.js';
import { DeliveryWorker } from './events/delivery.js';
import { buildApp } from './http/app.js';
import { drainable, DRAIN_DEFAULTS } from './http/drain.js';
import { openapiDocument } from './openapi.js';
import './resources/register.js';
import type { ServerContext } from './resources/context.js';
import { apiRoutes } from './resources/routes.js';
import { openDatabase, type Database } from './store/db.js';
import { configuredKey, secretBoxFor } from './store/secret-key.js';

const { version } = createRequire(import.meta.url)('../package.json') as { version: string };

export interface RunningServer {
  app: FastifyInstance;
  db: Database;
  /** The public base URL. */
  url: string;
  /** The address actually listened on. */
  listening: string;
  bootstrap: Bootstrap;
  close(): Promise<void>;
}

export async function startServer(config: ServerConfig): Promise<RunningServer> {
  const log = config.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  // A malformed key is refused before the database is touched.
  configuredKey(config);
  const db = await openDatabase(config.databaseUrl);
  try {
    const box = await secretBoxFor(db, config, (msg) => log(JSON.stringify({ time: new Date().toISOString(), level: 'info', msg })));
    const boot = await bootstrap(db, { token: config.bootstrapToken, tokenFile: config.bootstrapTokenFile });
    const routes = apiRoutes();
    const server: ServerContext = { db, box, publicUrl: config.publicUrl ?? '' };
    let openapi: unknown;
    let closing = false;
    const app = buildApp({
      isClosing: () => closing,
      server,
      routes,
      apiRateLimit: config.apiRateLimit,
      apiRateWindowMs: config.apiRateWindowMs,
      authFailureLimit: config.authFailureLimit,
      log: config.log,
      openapi: () => (openapi ??= openapiDocument(routes, server.publicUrl, version)),
    });
    const drain = drainable(app.server, { ...DRAIN_DEFAULTS, ...config.drain });
    await app.listen({ host: config.host, port: config.port });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host.includes(':') ? `[${config.host}]` : config.host;
    const listening = `http://${host}:${port}`;
    server.publicUrl = config.publicUrl ?? listening;
    const worker = new DeliveryWorker(server, log, `edgeform/${version}`, config.delivery);
    server.afterCommit = () => worker.kick();
    worker.start();
    return {
      app,
      db,
      url: server.publicUrl,
      listening,
      bootstrap: boot,
      async close() {
        closing = true;
        await drain();
        await app.close();
        await worker.stop();
        await db.close();
      },
    };
  } catch (e) {
    await db.close();
    throw e;
  }
}
