// Why `edgeform serve` could not start, as one line that names the setting to change: an
// operator reading "EADDRINUSE" or "ECONNREFUSED 127.0.0.1:5432" has to guess which of
// the flags it came from.
import type { ServerConfig } from '../server/config.js';

interface SystemError extends Error {
  code?: string;
  syscall?: string;
  path?: string;
  hostname?: string;
  address?: string;
  port?: number;
  /** Set on errors that wrap another (undici, Prisma adapters). */
  cause?: unknown;
  /** The ingress listener whose listen failed (server/ingress/listen.ts sets it). */
  ingressListener?: { publicPort: number; host: string; port: number; plain?: boolean };
}

const DATA = '--data-dir / EDGEFORM_DATA_DIR (or --database file:<path>)';
const DATABASE = '--database / EDGEFORM_DATABASE_URL';

const FILE_REASONS: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'read-only file system',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EEXIST: 'a part of the path is a file, not a folder',
  ENOSPC: 'no space left on the device',
  EISDIR: 'it is a folder',
};

/** The database URL as the banner shows it: no password. */
const redacted = (url: string) => url.replace(/\/\/[^@/]*@/, '//***@');

/** The deepest error with a code: the one that says what actually happened. */
function rootOf(e: unknown): SystemError {
  let at = e as SystemError;
  while (at?.cause && typeof at.cause === 'object' && !at.code) at = at.cause as SystemError;
  return at ?? (new Error(String(e)) as SystemError);
}

export function startupProblem(e: unknown, config: ServerConfig, env: NodeJS.ProcessEnv = process.env): string {
  const err = rootOf(e);
  const code = err.code ?? '';
  const message = err.message ?? String(e);
  const postgres = /^postgres(ql)?:/.test(config.databaseUrl);

  // An ingress listener's port, not the API's: name the --ingress value that asked for it.
  // The listener tags its error (a name such as localhost is reported by the address it resolved
  // to, which matched no --ingress value, and the line named the API's --port instead).
  const api = err.port === config.port && (!err.address || err.address === config.host);
  const ingress = err.ingressListener
    ?? (err.syscall === 'listen' && !api ? config.ingress?.find((l) => l.port === err.port && (!err.address || l.host === err.address)) : undefined);
  if (ingress) {
    const flag = ingress.plain ? '--ingress-http / EDGEFORM_INGRESS_HTTP' : '--ingress / EDGEFORM_INGRESS';
    const value = `${ingress.publicPort}=${ingress.host.includes(':') ? `[${ingress.host}]` : ingress.host}:${ingress.port}`;
    const where = `${ingress.host}:${ingress.port}`;
    const higher = ingress.plain ? 8080 : 8443;
    if (code === 'EADDRINUSE') return `cannot listen on ${where} for the ingress (${flag} ${value}): the port is already in use (another edgeform, or another program); stop it, or give the listener another ADDRESS:PORT in ${flag}`;
    if (code === 'EACCES') return `cannot listen on ${where} for the ingress (${flag} ${value}): ports below 1024 need privileges; listen on a higher port (PUBLIC_PORT can stay ${ingress.publicPort}: ${flag.split(' ')[0]} ${ingress.publicPort}=${ingress.host}:${higher} serves the edges' :${ingress.publicPort} hostports there)`;
    return `cannot listen on ${where} for the ingress (${flag} ${value}): ${ingress.host} is not an address of this machine (${code || message}); give the listener one of its addresses, 127.0.0.1 or 0.0.0.0`;
  }
  if (err.syscall === 'listen' || (err.syscall === 'getaddrinfo' && err.hostname === config.host)) {
    const where = `${config.host}:${config.port}`;
    if (code === 'EADDRINUSE') return `cannot listen on ${where}: the port is already in use (another edgeform, or another program); stop it, or pick another port with --port / EDGEFORM_PORT (0 picks a free one)`;
    if (code === 'EACCES') return `cannot listen on ${where}: ports below 1024 need privileges; use a higher --port / EDGEFORM_PORT, or put a proxy in front`;
    return `cannot listen on ${where}: ${config.host} is not an address of this machine (${code || message}); set --host / EDGEFORM_HOST to one of its addresses, 127.0.0.1 or 0.0.0.0`;
  }
  if (err.syscall && err.path && FILE_REASONS[code]) {
    // The two files that have a setting of their own are named by it.
    const under = (file: string) => err.path === file || file.startsWith(`${err.path}/`);
    const setting = under(config.bootstrapTokenFile) && env.EDGEFORM_BOOTSTRAP_TOKEN_FILE ? 'EDGEFORM_BOOTSTRAP_TOKEN_FILE'
      : under(config.secretKeyFile) && env.EDGEFORM_SECRET_KEY_FILE ? 'EDGEFORM_SECRET_KEY_FILE'
      : `a writable folder with ${DATA}`;
    return `cannot write ${err.path} (${FILE_REASONS[code]}); choose ${setting}`;
  }
  if (/^SQLITE_(CANTOPEN|READONLY|PERM|IOERR)/.test(code)) {
    return `cannot open the SQLite database ${config.databaseUrl.replace(/^file:/, '')} for writing (${message}); check its permissions, or choose another with ${DATA}`;
  }
  if (code === 'SQLITE_NOTADB') {
    return `${config.databaseUrl.replace(/^file:/, '')} is not a SQLite database; point ${DATABASE} at an edgeform database, or at a new file`;
  }
  if (/secret key must be 32 bytes/.test(message)) {
    const valid = 'it must be 32 bytes, written as 64 hex digits or base64';
    if (env.EDGEFORM_SECRET_KEY) return `EDGEFORM_SECRET_KEY is not a valid key: ${valid}; set it to the key the database was written with (a new key cannot read the secrets already stored)`;
    return `the key file ${config.secretKeyFile} (EDGEFORM_SECRET_KEY_FILE) does not hold a valid key: ${valid}; restore the key the database was written with (a new key cannot read the secrets already stored), or, for a new database, remove the file to have one generated`;
  }
  if (postgres) {
    const db = redacted(config.databaseUrl);
    if (code === 'ECONNREFUSED' || code === 'ETIMEDOUT' || code === 'EHOSTUNREACH') return `cannot reach PostgreSQL for ${db} (${code}): is it running and listening there? Check ${DATABASE}`;
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `cannot reach PostgreSQL for ${db}: the host ${err.hostname ?? ''} is not known (${code}); check ${DATABASE}`;
    // PostgreSQL's SQLSTATE classes 28 (authorization) and 3D (no such database).
    if (/^(28|3D)/.test(code)) return `PostgreSQL refused ${db}: ${message}; check the user, password and database name in ${DATABASE}`;
  }
  return message;
}
