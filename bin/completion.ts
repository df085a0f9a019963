// `edgeform completion bash|zsh|fish`: a completion script for the shell, generated from the
// command tree itself, so every command and flag added later completes without a second list.
import { Command, type Option } from 'commander';
import { UsageError, type Io } from './reconcile.js';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
type Shell = (typeof SHELLS)[number];

interface Node { path: string[]; commands: string[]; flags: string[]; descriptions: Record<string, string> }

/** Every command of the tree with its subcommands and long flags, depth first. */
function walk(cmd: Command, path: string[] = []): Node[] {
  const flags = (cmd.options as Option[]).flatMap((o) => [o.long, o.short].filter((f): f is string => !!f));
  flags.push('--help');
  const descriptions: Record<string, string> = {};
  for (const c of cmd.commands) descriptions[c.name()] = c.description().split('\n')[0].replace(/\.$/, '');
  for (const o of cmd.options as Option[]) if (o.long) descriptions[o.long] = o.description;
  const here: Node = { path, commands: cmd.commands.map((c) => c.name()), flags, descriptions };
  return [here, ...cmd.commands.flatMap((c) => walk(c, [...path, c.name()]))];
}

const sq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The `case` arms (bash and zsh alike) that follow the words typed so far down the command
 * tree: `cmdpath` becomes the deepest command they name.
 */
const pathCases = (nodes: Node[]) =>
  nodes.filter((n) => n.path.length).map((n) => `      ${sq(n.path.join(' '))}) cmdpath=${sq(n.path.join(' '))} ;;`).join('\n');

function bash(nodes: Node[]): string {
  const cases = nodes
    .map((n) => `    ${sq(n.path.join(' '))}) words=${sq([...n.commands, ...n.flags].join(' '))} ;;`)
    .join('\n');
  return `# edgeform completion for bash: source <(edgeform completion bash)
_edgeform() {
  local cur cmdpath words i w
  cur="\${COMP_WORDS[COMP_CWORD]}"
  cmdpath=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="\${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    case "\${cmdpath:+$cmdpath }$w" in
${pathCases(nodes)}
    esac
  done
  case "$cmdpath" in
${cases}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
  [[ \${#COMPREPLY[@]} -eq 0 ]] && COMPREPLY=($(compgen -f -- "$cur"))
  return 0
}
complete -o filenames -F _edgeform edgeform
`;
}

function zsh(nodes: Node[]): string {
  const cases = nodes
    .map((n) => {
      const items = [...n.commands, ...n.flags].map((w) => sq(`${w.replace(/:/g, '\\:')}:${(n.descriptions[w] ?? '').replace(/[:']/g, ' ')}`));
      return `    ${sq(n.path.join(' '))}) items=(${items.join(' ')}) ;;`;
    })
    .join('\n');
  return `#compdef edgeform
# edgeform completion for zsh: edgeform completion zsh > "\${fpath[1]}/_edgeform"
_edgeform() {
  local -a items
  local cmdpath="" w
  for w in \${words[2,CURRENT-1]}; do
    [[ "$w" == -* ]] && continue
    case "\${cmdpath:+$cmdpath }$w" in
${pathCases(nodes)}
    esac
  done
  case "$cmdpath" in
${cases}
  esac
  _describe 'edgeform' items || _files
}
compdef _edgeform edgeform
`;
}

function fish(nodes: Node[]): string {
  const lines = ['# edgeform completion for fish: edgeform completion fish > ~/.config/fish/completions/edgeform.fish', 'complete -c edgeform -f'];
  for (const n of nodes) {
    // fish sees the path as the subcommands typed so far.
    const cond = n.path.length === 0 ? '__fish_use_subcommand' : `__fish_seen_subcommand_from ${n.path[n.path.length - 1]}`;
    for (const c of n.commands) lines.push(`complete -c edgeform -n ${sq(cond)} -a ${sq(c)} -d ${sq(n.descriptions[c] ?? '')}`);
    for (const f of n.flags.filter((f) => f.startsWith('--'))) lines.push(`complete -c edgeform -n ${sq(cond)} -l ${sq(f.slice(2))} -d ${sq(n.descriptions[f] ?? '')}`);
  }
  return `${lines.join('\n')}\n`;
}

export function completionScript(program: Command, shell: Shell): string {
  const nodes = walk(program);
  return { bash, zsh, fish }[shell](nodes);
}

export function completionCommand(setCode: (code: number) => void, io: () => Io, program: () => Command): Command {
  return new Command('completion')
    .argument('<shell>', `the shell: ${SHELLS.join(', ')}`)
    .description('Print a shell completion script for commands and flags.\n\n  bash:  source <(edgeform completion bash)        (or write it to /etc/bash_completion.d/edgeform)\n  zsh:   edgeform completion zsh > "${fpath[1]}/_edgeform"\n  fish:  edgeform completion fish > ~/.config/fish/completions/edgeform.fish')
    .action((shell: string) => {
      const out = io();
      if (!(SHELLS as readonly string[]).includes(shell)) {
        out.err(`${out.errStyle.red('Error:')} ${new UsageError(`unknown shell "${shell}"; one of ${SHELLS.join(', ')}`).message}\n`);
        setCode(2);
        return;
      }
      out.out(completionScript(program(), shell as Shell));
      setCode(0);
    });
}
