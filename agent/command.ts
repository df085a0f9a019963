// `edgeform agent`: the command-line surface of the agent (also the bundle's entry).
import { Command, Option } from 'commander';
import { ConfigError, resolveAgentConfig, type AgentConfig } from './config.js';
import { runAgent, successor } from './run.js';
import { AGENT_VERSION } from './version.js';

const stamp = () => new Date().toISOString();

export function agentCommand(setCode: (code: number) => void) {
  return new Command('agent')
    .description('Connect to an edgeform server and serve tunnels: labeled ones (--label, --forwards-to) for tunnel-group backends, or an ephemeral one (http 3000).')
    .argument('[type]', 'an ephemeral tunnel: http, https, tcp or tls')
    .argument('[address]', 'where an ephemeral tunnel forwards to: a port (3000), host:port or a URL')
    .addOption(new Option('--api-url <url>', 'the edgeform server (default http://127.0.0.1:8080)').env('EDGEFORM_API_URL'))
    .addOption(new Option('--authtoken <token>', 'token of a tunnel credential (POST /credentials)').env('EDGEFORM_AUTHTOKEN'))
    .option('--label <key=value>', 'a label of the tunnel (repeatable); tunnel-group backends with these labels send it traffic', (v: string, prev: string[] = []) => [...prev, v])
    .option('--forwards-to <address>', 'where the labeled tunnel sends traffic: host:port or a URL')
    .option('--url <url>', 'the endpoint\'s URL (type and address given): https://app.example.com, or an internal one such as https://api.internal or tcp://db.internal:5432')
    .addOption(new Option('--binding <binding>', 'public (the default), or internal: reached only through forward-internal from a cloud endpoint\'s policy (the URL must be under .internal)').choices(['public', 'internal']))
    .option('--pooling-enabled', 'share the URL with other endpoints that enable pooling: each request (or connection) goes to one of them in turn; without it a URL another endpoint holds is refused (409)')
    .option('--metadata <string>', 'metadata of the session and of the command-line tunnel (e.g. JSON)')
    .option('--config <file>', 'YAML file with api_url, authtoken, metadata, update_check, state_dir and tunnels (see docs/agents.md)')
    .option('--no-update-check', 'refuse updates from the server (update then fails with ERR_SERVICE_323)')
    .addOption(new Option('--state-dir <dir>', 'where staged updates are kept (default ~/.edgeform/agent)').env('EDGEFORM_AGENT_STATE_DIR'))
    .option('--json', 'log one JSON object per line (time, level, msg) for machines, instead of text')
    .version(AGENT_VERSION, '-v, --version', 'print the agent\'s version')
    .addHelpText('after', `
Examples:
  edgeform agent --api-url http://127.0.0.1:8080 --authtoken "$TOKEN" --label app=web --forwards-to 127.0.0.1:3000
  edgeform agent --authtoken "$TOKEN" http 3000
  edgeform agent --authtoken "$TOKEN" http 3000 --url https://api.internal --pooling-enabled
  edgeform agent --config agent.yml

Exit codes: 0 stopped (stop command, SIGTERM, SIGINT); 1 the server refused the token; 2 a usage error.`)
    .action(async (type: string | undefined, address: string | undefined, opts) => {
      let cfg: AgentConfig;
      try {
        cfg = resolveAgentConfig(opts, { proto: type, addr: address });
      } catch (e) {
        if (!(e instanceof ConfigError)) throw e;
        process.stderr.write(`Error: ${e.message}\n(run "edgeform agent --help" for usage)\n`);
        return setCode(2);
      }
      const json = (level: string, msg: string) => `${JSON.stringify({ time: stamp(), level, msg })}\n`;
      const log = (msg: string) => process.stdout.write(opts.json ? json('info', msg) : `${stamp()} ${msg}\n`);
      const logError = (msg: string) => process.stderr.write(opts.json ? json('error', msg) : `${stamp()} error: ${msg}\n`);
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.on(signal, () => {
          // After a restart this process only waits for its successor: pass the signal on.
          if (successor) return void successor.kill(signal);
          log(`stopping (${signal})`);
          process.exit(0);
        });
      }
      const code = await runAgent(cfg, log, logError);
      setCode(code);
      // Nothing should be left running; if something is, it must not keep a stopped agent alive.
      setTimeout(() => process.exit(code), 1000).unref();
    });
}
