// `edgeform serve`: the API server on its embedded SQLite database (or PostgreSQL).
import cluster from 'node:cluster';
import { Command, Option } from 'commander';
import { resolveConfig, type ServerConfig } from '../server/config.js';
import { startServer, type RunningServer } from '../server/main.js';
import { providerOf } from '../server/store/db.js';
import { DEFAULT_START_TIMEOUT_MS, PG_DEFAULTS } from '../server/store/pg-pool.js';
import { logLine, writeLogLine } from '../server/log-lines.js';
import { DEFAULT_RELAY_POOL } from '../server/gateway/relay-pool.js';
import { DEFAULT_BUFFER_MIB, DEFAULT_UNREAD_MIB } from '../server/ingress/buffer-budget.js';
import { DEFAULT_RELAYS_PER_CLIENT } from '../server/ingress/client-relays.js';
import { DEFAULT_UPSTREAM_IDLE_MS } from '../server/ingress/http/exchange.js';
import { DEFAULT_BODY_IDLE_MS, DEFAULT_CONNECTIONS_PER_CLIENT } from '../server/ingress/listen.js';
import { startupProblem } from './serve-errors.js';
import { runIngressWorker } from '../server/cluster/worker.js';
import { SecretKeyUnchanged } from '../server/store/secret-key.js';

export function serveCommand(setCode: (code: number) => void) {
  return new Command('serve')
    .description('Run the API server. Applies pending migrations and, on an empty database, creates the admin user and its first API key.')
    .addOption(new Option('--host <host>', 'address to listen on').env('EDGEFORM_HOST').default('127.0.0.1'))
    .addOption(new Option('--port <port>', 'port to listen on (0 picks a free one)').env('EDGEFORM_PORT').default('8080'))
    .addOption(new Option('--database <url>', 'file:<path> for SQLite or postgresql://... (default file:<data-dir>/edgeform.db)').env('EDGEFORM_DATABASE_URL'))
    .addOption(new Option('--public-url <url>', 'base of every uri and next_page_uri (default http://<host>:<port>)').env('EDGEFORM_PUBLIC_URL'))
    .addOption(new Option('--api-rate-limit <n>', 'requests per minute per API key; 0 turns the limit off').env('EDGEFORM_API_RATE_LIMIT').default('600'))
    .addOption(new Option('--auth-failure-limit <n>', 'failed authentications per minute per client address before 429; 0 turns the limit off').env('EDGEFORM_AUTH_FAILURE_LIMIT').default('30'))
    .addOption(new Option('--region <name>', 'the region of agent sessions started here').env('EDGEFORM_REGION').default('local'))
    .addOption(new Option('--agent-heartbeat-interval <seconds>', 'agent heartbeat interval: a vanished agent\'s session is gone within it').env('EDGEFORM_AGENT_HEARTBEAT_INTERVAL').default('10'))
    .addOption(new Option('--agent-max-sessions-per-credential <n>', 'agent sessions one credential may hold at once (all instances together); past it an agent is refused with ERR_SERVICE_840; 0 turns the limit off').env('EDGEFORM_AGENT_MAX_SESSIONS_PER_CREDENTIAL').default('100'))
    .addOption(new Option('--agent-relay-pool <n>', 'pooled upstream connections per tunnel of an agent session that relayed HTTP requests reuse (HTTP/1.1 through the agent); 0: each request is its own HTTP/2 stream').env('EDGEFORM_AGENT_RELAY_POOL').default(String(DEFAULT_RELAY_POOL)))
    .addOption(new Option('--endpoint-domain <domain>', 'domain under which ephemeral tunnels get their hostnames').env('EDGEFORM_ENDPOINT_DOMAIN').default('edgeform.localhost'))
    .addOption(new Option('--agent-listen <ADDRESS:PORT>', 'TLS listener for the service\'s agent SDKs (the version-2 agent protocol; docs/agents.md); none by default').env('EDGEFORM_AGENT_LISTEN'))
    .addOption(new Option('--ssh-listen <ADDRESS:PORT>', 'listener for ssh -R tunnels (OpenSSH as an agent, SSH credentials; docs/agents.md); none by default').env('EDGEFORM_SSH_LISTEN'))
    .addOption(new Option('--peer-listen <ADDRESS:PORT>', 'listener for the other instances on this database (HTTP/2 over mutual TLS, keyed by the secret key): they reach this one\'s tunnels through it (docs/agents.md, "Several instances"); none by default').env('EDGEFORM_PEER_LISTEN'))
    .addOption(new Option('--peer-url <url>', 'https://HOST:PORT the other instances reach --peer-listen at (default https://<its address>:<port>)').env('EDGEFORM_PEER_URL'))
    .addOption(new Option('--peer-timeout <seconds>', 'connect and ping bound of each connection to another instance; past it that instance\'s tunnels are skipped until it answers').env('EDGEFORM_PEER_TIMEOUT').default('5'))
    .addOption(new Option('--peer-choice <choice>', 'how a tunnel-group backend chooses among the matching tunnels of every instance: round-robin over all, or prefer-local (this instance\'s first, another\'s only when none is up here)').choices(['round-robin', 'prefer-local']).env('EDGEFORM_PEER_CHOICE').default('round-robin'))
    .addOption(new Option('--drain-grace <seconds>', 'on SIGTERM, how long /healthz answers 503 (agents told to reconnect elsewhere) before new connections are refused (default 10 with --peer-listen, else 0)').env('EDGEFORM_DRAIN_GRACE'))
    .addOption(new Option('--agent-hostname <names>', 'names in the agent listener\'s certificate (from the local CA, <data-dir>/ingress-ca.pem), comma-separated').env('EDGEFORM_AGENT_HOSTNAME').default('localhost'))
    .addOption(new Option('--agent-tcp-ports <FIRST-LAST>', 'public ports of agents\' TCP endpoints, each listened on at the first --ingress listener\'s address (at most 1000); none by default').env('EDGEFORM_AGENT_TCP_PORTS'))
    .addOption(new Option('--ingress <PUBLIC_PORT=ADDRESS:PORT>', 'serve the edges\' hostports on PUBLIC_PORT at ADDRESS:PORT (repeatable; EDGEFORM_INGRESS takes several, comma-separated; none by default)').argParser((v: string, prev: string[] = []) => [...prev, v]))
    .addOption(new Option('--ingress-http <PUBLIC_PORT=ADDRESS:PORT>', 'a plain-HTTP listener for PUBLIC_PORT: agents\' http endpoints answer there, other names redirect to https (repeatable; EDGEFORM_INGRESS_HTTP takes several, comma-separated; none by default)').argParser((v: string, prev: string[] = []) => [...prev, v]))
    .addOption(new Option('--ingress-relays-per-client <n>', 'requests and streams one client address (an IPv6 /64) relays through agents at once; past it 429; 0 turns the limit off').env('EDGEFORM_INGRESS_RELAYS_PER_CLIENT').default(String(DEFAULT_RELAYS_PER_CLIENT)))
    .addOption(new Option('--event-retention <duration>', 'delivered events older than this are pruned, e.g. 72h, 30m, 7d; 0 keeps them for ever (events not yet delivered are always kept)').env('EDGEFORM_EVENT_RETENTION').default('72h'))
    .addOption(new Option('--database-pool-size <n>', 'PostgreSQL: connections in the server\'s pool').env('EDGEFORM_DATABASE_POOL_SIZE').default(String(PG_DEFAULTS.poolSize)))
    .addOption(new Option('--database-acquire-timeout <seconds>', 'PostgreSQL: how long a request waits for a pooled connection before 503').env('EDGEFORM_DATABASE_ACQUIRE_TIMEOUT').default(String(PG_DEFAULTS.acquireTimeoutMs / 1000)))
    .addOption(new Option('--database-lock-timeout <seconds>', 'PostgreSQL: how long a write waits for a row lock another client holds before 503 (lock_timeout; 0 turns it off)').env('EDGEFORM_DATABASE_LOCK_TIMEOUT').default(String(PG_DEFAULTS.lockTimeoutMs / 1000)))
    .addOption(new Option('--database-statement-timeout <seconds>', 'PostgreSQL: how long one statement may run before it is cancelled and answered 503 (statement_timeout; 0 turns it off)').env('EDGEFORM_DATABASE_STATEMENT_TIMEOUT').default(String(PG_DEFAULTS.statementTimeoutMs / 1000)))
    .addOption(new Option('--database-start-timeout <seconds>', 'PostgreSQL: how long a start waits for a database that is not answering yet (starting, recovering, restarting)').env('EDGEFORM_DATABASE_START_TIMEOUT').default(String(DEFAULT_START_TIMEOUT_MS / 1000)))
    .addOption(new Option('--ingress-connections-per-client <n>', 'open connections one client address (an IPv6 /64) may hold on each ingress listener; past it new ones are closed; 0 turns the limit off').env('EDGEFORM_INGRESS_CONNECTIONS_PER_CLIENT').default(String(DEFAULT_CONNECTIONS_PER_CLIENT)))
    .addOption(new Option('--ingress-body-idle-timeout <seconds>', 'a request body that sends no byte for this long is cut (408); 0: never').env('EDGEFORM_INGRESS_BODY_IDLE_TIMEOUT').default(String(DEFAULT_BODY_IDLE_MS / 1000)))
    .addOption(new Option('--ingress-upstream-idle-timeout <seconds>', 'how long an upstream may send nothing (its answer\'s head, the rest of its body, its answer to an upgrade) before 504 or the answer is cut; 0: never for bodies and upgrades').env('EDGEFORM_INGRESS_UPSTREAM_IDLE_TIMEOUT').default(String(DEFAULT_UPSTREAM_IDLE_MS / 1000)))
    .addOption(new Option('--ingress-buffer-mib <n>', 'request bodies (webhook_verification, sign-in callbacks) and partial WebSocket frames the ingress buffers at once, in MiB; past it 503; 0 turns the limit off').env('EDGEFORM_INGRESS_BUFFER_MIB').default(String(DEFAULT_BUFFER_MIB)))
    .addOption(new Option('--ingress-unread-mib <n>', 'relayed answers the ingress holds for clients that do not read them, in MiB; past it the connections holding most are closed; 0 turns the limit off').env('EDGEFORM_INGRESS_UNREAD_MIB').default(String(DEFAULT_UNREAD_MIB)))
    .addOption(new Option('--workers <n>', 'processes serving the ingress listeners (sharing their sockets; the API, the database and agents\' connections stay in the first); auto: one per core; default 1, one process').env('EDGEFORM_WORKERS'))
    .addOption(new Option('--acme-directory <url>', 'an ACME directory (such as Let\'s Encrypt\'s) that issues certificates for the names HTTPS and TLS edges serve; none by default: the local CA').env('EDGEFORM_ACME_DIRECTORY'))
    .addOption(new Option('--acme-email <address>', 'the contact address of the ACME account').env('EDGEFORM_ACME_EMAIL'))
    .addOption(new Option('--acme-ca-file <path>', 'PEM file of a root to trust for the ACME directory besides the system\'s (a test directory such as Pebble)').env('EDGEFORM_ACME_CA_FILE'))
    .addOption(new Option('--data-dir <dir>', 'where the default database, key file and bootstrap token live').env('EDGEFORM_DATA_DIR').default('data'))
    .addHelpText('after', `
Environment only:
  EDGEFORM_BOOTSTRAP_TOKEN       token for the first API key (instead of a generated one)
  EDGEFORM_BOOTSTRAP_TOKEN_FILE  where a generated first token is written (default <data-dir>/bootstrap-token)
  EDGEFORM_SECRET_KEY            32-byte key (hex or base64) encrypting secrets at rest
  EDGEFORM_SECRET_KEY_FILE       key file used when EDGEFORM_SECRET_KEY is unset (default <data-dir>/secret.key, created 0600 for a new database)
  EDGEFORM_SECRET_KEY_PREVIOUS   the key being replaced: secrets are re-sealed under the new key at start
  EDGEFORM_SECRET_KEY_PREVIOUS_FILE  a file holding the key being replaced
  EDGEFORM_EVENT_DELIVERY_TIMEOUT_MS  deadline of one event delivery (default 10000)
  EDGEFORM_INGRESS               ingress listeners, comma-separated (as --ingress)
  EDGEFORM_INGRESS_HTTP          plain-HTTP ingress listeners, comma-separated (as --ingress-http)
  EDGEFORM_INGRESS_MAX_CONNECTIONS  connections each ingress listener holds at most (default 10000)
  EDGEFORM_ACME_RETRY_SECONDS    first wait before a failed ACME order is tried again, doubling to an hour (default 60)`)
    .action(async (opts) => {
      let config: ServerConfig;
      try {
        config = resolveConfig(opts);
        providerOf(config.databaseUrl);
      } catch (e) {
        // A bad flag or environment value is a usage error (exit 2), as the README says.
        process.stderr.write(`Error: ${(e as Error).message} (run "edgeform serve --help" for the settings)\n`);
        return setCode(2);
      }
      // An ingress worker of `--workers N` (server/cluster/): it serves the listeners and nothing else.
      if (cluster.isWorker) return runIngressWorker(config);
      // Workers serve ingress listeners; ACME's challenges are answered by the process that orders (one process with ACME, for now).
      const forkWorkers = (config.workers ?? 1) > 1 && !!config.ingress?.length && !config.acme;
      let server: RunningServer;
      try {
        server = await startServer({ ...config, forkWorkers });
      } catch (e) {
        process.stderr.write(`Error: ${startupProblem(e, config)}\n`);
        // The previous key is the current one: a setting to change, like a bad flag (exit 2).
        return setCode(e instanceof SecretKeyUnchanged ? 2 : 1);
      }
      // Through the server's own line writer, so these lines and its log lines keep their order.
      const info = (msg: string, extra: object = {}) => writeLogLine(logLine({ msg, ...extra }));
      if (server.db.migrated.length) info(`applied migrations: ${server.db.migrated.join(', ')}`);
      info(`edgeform listening on ${server.listening}`, { url: server.url, database: server.db.where });
      if (server.ingress?.workers) info(`ingress served by ${server.ingress.workers.length} worker processes`, { workers: server.ingress.workers });
      else if ((config.workers ?? 1) > 1 && config.ingress?.length && config.acme) info('ingress served by this process alone: --workers above 1 is not yet combined with --acme-directory', { workers: 1 });
      for (const l of server.ingress?.listeners ?? []) {
        if (l.plain) info(`ingress (plain HTTP) for public port ${l.publicPort} listening on ${l.address}`, { public_port: l.publicPort, address: l.address, plain_http: true });
        else info(`ingress for public port ${l.publicPort} listening on ${l.address}`, { public_port: l.publicPort, address: l.address, ca: server.ingress!.caFile });
      }
      if (server.sshListener) {
        info(`ssh listener on ${server.sshListener.address}, host key ${server.sshListener.fingerprint}`, { ssh_listen: server.sshListener.address, host_key_fingerprint: server.sshListener.fingerprint });
      }
      if (server.agentListener) {
        info(`agent listener (version-2 protocol) on ${server.agentListener.address}`, { agent_listen: server.agentListener.address, hostnames: server.agentListener.opts.hostnames, ca: server.agentListener.caFile });
      }
      if (server.bootstrap.created) {
        if (server.bootstrap.tokenFile) {
          info(`created the admin user and its first API key; the token is in ${server.bootstrap.tokenFile} (readable only by you)`);
          process.stderr.write(`\nFirst API key token (shown once): ${(await import('node:fs')).readFileSync(server.bootstrap.tokenFile, 'utf8').trim()}\n\n`);
        } else if (server.bootstrap.token) {
          info(`created the admin user and its first API key; ${server.bootstrap.tokenFileKept} already holds another database's first token and was left as it is, so this token is shown only here (set EDGEFORM_BOOTSTRAP_TOKEN_FILE to write it elsewhere)`);
          process.stderr.write(`\nFirst API key token (shown once): ${server.bootstrap.token}\n\n`);
        } else {
          info('created the admin user and its first API key with the token from EDGEFORM_BOOTSTRAP_TOKEN');
        }
      }
      await new Promise<void>((resolve) => {
        const stop = async (signal: string) => {
          // close() stops the listener before its first await, so the line below is only seen
          // once new connections are refused (a reader acting on it raced the close before).
          const grace = config.drainGraceMs ?? 0;
          const closed = signal === 'SIGTERM' ? server.drainAndClose(grace) : server.close();
          info(`received ${signal}; ${signal === 'SIGTERM' && grace ? `draining for ${grace / 1000} s, then ` : ''}finishing in-flight requests`);
          await closed;
          info('stopped');
          resolve();
        };
        process.once('SIGTERM', () => void stop('SIGTERM'));
        process.once('SIGINT', () => void stop('SIGINT'));
      });
      setCode(0);
    });
}
