// The agent's life: connect, keep the session, reconnect with jittered exponential backoff
// when the connection drops (a server restart is ridden out), exit 1 at once when the
// server refuses the token, exit 0 on stop, and re-execute itself on restart.
import { spawn, type ChildProcess } from 'node:child_process';
import type { AgentConfig } from './config.js';
import { connectOnce } from './session.js';
import { Updater, type Staged } from './updater.js';
import { AGENT_VERSION } from './version.js';

const BASE_MS = 250;
const MAX_MS = 30_000;

/** Full-range jitter over an exponential step: agents that lost one server do not return in step. */
export const backoffMs = (attempt: number) => {
  const step = Math.min(MAX_MS, BASE_MS * 2 ** attempt);
  return Math.round(step / 2 + Math.random() * (step / 2));
};

export type Log = (msg: string) => void;

/** The successor started by a restart: signals to this process go to it (command.ts). */
export let successor: ChildProcess | undefined;

export async function runAgent(cfg: AgentConfig, log: Log, logError: Log): Promise<number> {
  const updater = new Updater(AGENT_VERSION, cfg.updateCheck, cfg.stateDir, log);
  log(`edgeform agent ${AGENT_VERSION} connecting to ${cfg.apiUrl} with ${cfg.tunnels.length} tunnel${cfg.tunnels.length === 1 ? '' : 's'}`);
  let connected = false;
  let hinted = false;
  for (let attempt = 0; ;) {
    const o = await connectOnce(cfg, AGENT_VERSION, updater, log);
    if (o.kind === 'stop') {
      log('stopped by the stop command');
      return 0;
    }
    if (o.kind === 'refused') {
      logError(`${o.msg}\n${o.next ?? 'The agent does not retry a refused credential: check the token (edgeform agent --authtoken, EDGEFORM_AUTHTOKEN), or create a credential with POST /credentials and start the agent with its token.'}`);
      return 1;
    }
    if (o.kind === 'restart') return reexec(updater.staged(), log);
    if (o.established) {
      attempt = 0;
      connected = true;
    }
    const wait = backoffMs(attempt++);
    log(`${o.established ? 'connection lost' : 'cannot connect'}: ${o.reason}; retrying in ${(wait / 1000).toFixed(1)} s`);
    // Never connected: more likely a wrong address than a server restarting; say which setting names it, once.
    if (!connected && !hinted) {
      hinted = true;
      logError(`no edgeform server has answered at ${cfg.apiUrl} (${o.reason}): check --api-url / EDGEFORM_API_URL (the server's API address, e.g. http://127.0.0.1:8080) and that the server runs; retrying until one answers`);
    }
    await new Promise((r) => setTimeout(r, wait));
  }
}

/**
 * Node has no exec(): the agent starts its successor (the staged build after an update, else
 * itself) with the same arguments and standard streams, forwards signals to it, and exits
 * with its code, so whoever started the agent still sees one process to wait for.
 */
function reexec(staged: Staged | undefined, log: Log): Promise<number> {
  const args = staged ? [staged.file, ...process.argv.slice(2)] : [...process.execArgv, process.argv[1], ...process.argv.slice(2)];
  const env = { ...process.env };
  if (staged) delete env.EDGEFORM_AGENT_VERSION;
  log(staged ? `restarting into the staged update ${staged.version}` : 'restarting');
  const child = spawn(process.execPath, args, { stdio: 'inherit', env });
  successor = child;
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
    child.on('error', (e) => { log(`restart failed: ${e.message}`); resolve(1); });
  });
}
