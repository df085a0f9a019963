// The command an `ssh -R` user runs on the server (`ssh -R 0:localhost:3000 v2@host http --url
// app.example.com`), as the service documents it: a tunnel type, then flags in the agent's
// spelling. OpenSSH sends the words joined by spaces; they are split here as a shell would
// (quotes and backslashes), then read into what the session binds. Anything not understood is
// refused with a sentence and the help text, never ignored.

export const PROTOS = ['http', 'https', 'tcp', 'tls'] as const;
export type SshProto = (typeof PROTOS)[number];

export interface SshCommand {
  proto: SshProto;
  /** The hostname asked for (`--url`, `--hostname`, `--subdomain` under the endpoint domain), if any. */
  hostname?: string;
  /** Request headers to add and remove before the upstream (http and https only): the request_headers module. */
  addHeaders: Record<string, string>;
  removeHeaders: string[];
}

/** The longest command accepted: a command line is a few flags, not a document. */
export const MAX_COMMAND_BYTES = 4096;

export const HELP = `edgeform over ssh: publish a local port through this server.

  ssh -p PORT -R 0:localhost:LOCAL_PORT v2@HOST http [--url HOSTNAME]
  ssh -p PORT -R 0:localhost:LOCAL_PORT v2@HOST https [--url HOSTNAME]
  ssh -p PORT -R 0:localhost:LOCAL_PORT v2@HOST tls --url HOSTNAME
  ssh -p PORT -R 0:localhost:LOCAL_PORT v2@HOST tcp

The hostname may also be given as the -R bind name: -R app.example.com:443:localhost:3000.
Flags (http and https):
  --url URL                       the hostname to serve (https://app.example.com or app.example.com)
  --subdomain NAME                NAME under this server's endpoint domain
  --request-header-add 'NAME: V'  add a header to every request (repeatable)
  --request-header-remove NAME    remove a header from every request (repeatable)
The key you log in with must be registered: POST /ssh_credentials {"public_key": "..."}.
`;

export type Parsed = { ok: true; command: SshCommand } | { ok: false; message: string };

const refuse = (message: string): Parsed => ({ ok: false, message });

/** Splits a command line as a POSIX shell would, without expansions: quotes and backslashes only. */
export function splitWords(line: string): string[] | undefined {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === '\\' && i + 1 < line.length && '"\\$`'.includes(line[i + 1])) word += line[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === '\\') {
      if (i + 1 < line.length) word += line[++i];
      inWord = true;
    } else if (c === ' ' || c === '\t' || c === '\n') {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) return undefined;
  if (inWord) words.push(word);
  return words;
}

const HOSTNAME = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** A hostname from `--url` (a URL or a bare name; its port and path are not ours to choose). */
function hostOf(value: string, proto: SshProto): string | Parsed {
  let host = value.trim().toLowerCase();
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//.exec(host);
  if (scheme) {
    if (scheme[1] !== proto && !(proto === 'http' && scheme[1] === 'https') && !(proto === 'https' && scheme[1] === 'http')) {
      return refuse(`--url ${value}: a ${scheme[1]} URL cannot be served by the ${proto} command`);
    }
    host = host.slice(scheme[0].length);
  }
  host = host.replace(/\/.*$/, '').replace(/:\d+$/, '');
  if (!HOSTNAME.test(host)) return refuse(`--url ${value}: ${JSON.stringify(host)} is not a hostname`);
  return host;
}

/**
 * Reads the command. `endpointDomain` turns `--subdomain` into a hostname. Flags take their
 * value after a space or an `=`, with one dash or two (the service's older docs use one).
 */
export function parseCommand(line: string, endpointDomain: string): Parsed {
  if (Buffer.byteLength(line) > MAX_COMMAND_BYTES) return refuse(`the command is longer than ${MAX_COMMAND_BYTES} bytes`);
  const words = splitWords(line);
  if (!words) return refuse('the command has an unclosed quote');
  if (!words.length) return refuse('no tunnel type given: run http, https, tls or tcp');
  const [first, ...rest] = words;
  if (first === 'help' || first === '--help' || first === '-h') return refuse('');
  if (!(PROTOS as readonly string[]).includes(first)) return refuse(`${JSON.stringify(first)} is not a tunnel type: run http, https, tls or tcp`);
  const proto = first as SshProto;
  const command: SshCommand = { proto, addHeaders: {}, removeHeaders: [] };
  for (let i = 0; i < rest.length; i++) {
    const m = /^--?([a-z-]+)(?:=(.*))?$/s.exec(rest[i]);
    if (!m) return refuse(`unexpected argument ${JSON.stringify(rest[i])}; flags start with --`);
    const flag = m[1];
    const value = () => (m[2] !== undefined ? m[2] : rest[++i]);
    const httpOnly = () => (proto === 'http' || proto === 'https' ? undefined : refuse(`--${flag} applies to http and https tunnels, not ${proto}`));
    switch (flag) {
      case 'url':
      case 'hostname':
      case 'domain': {
        if (proto === 'tcp') return refuse(`--${flag}: a tcp tunnel gets a port of this server, not a hostname`);
        const v = value();
        if (v === undefined) return refuse(`--${flag} needs a value`);
        const host = hostOf(v, proto);
        if (typeof host !== 'string') return host;
        command.hostname = host;
        break;
      }
      case 'subdomain': {
        if (proto === 'tcp') return refuse('--subdomain: a tcp tunnel gets a port of this server, not a hostname');
        const v = value()?.toLowerCase();
        if (!v || !/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(v)) return refuse(`--subdomain needs one DNS label, not ${JSON.stringify(v ?? '')}`);
        command.hostname = `${v}.${endpointDomain}`;
        break;
      }
      case 'request-header-add': {
        const bad = httpOnly();
        if (bad) return bad;
        const v = value();
        const h = v === undefined ? undefined : /^([^:]+):\s*(.*)$/s.exec(v);
        if (!h || !HEADER_NAME.test(h[1].trim())) return refuse(`--request-header-add takes 'NAME: VALUE', not ${JSON.stringify(v ?? '')}`);
        command.addHeaders[h[1].trim()] = h[2];
        break;
      }
      case 'request-header-remove': {
        const bad = httpOnly();
        if (bad) return bad;
        const v = value();
        if (!v || !HEADER_NAME.test(v)) return refuse(`--request-header-remove takes a header name, not ${JSON.stringify(v ?? '')}`);
        command.removeHeaders.push(v);
        break;
      }
      default:
        return refuse(`--${flag} is not supported over ssh by this server (supported: --url, --subdomain, --request-header-add, --request-header-remove); protections belong on an edge or in a traffic policy`);
    }
  }
  if (proto === 'tls' && !command.hostname) return refuse('a tls tunnel needs a hostname: --url app.example.com (or -R app.example.com:443:localhost:PORT)');
  return { ok: true, command };
}
