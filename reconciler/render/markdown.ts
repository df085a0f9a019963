// The review renderer (`plan --format markdown`): a comment a pipeline posts on a pull
// request, as Atlantis and tfcmt do. Counts first, changes made outside edgeform in their own
// section, then one collapsible <details> per resource holding the text renderer's lines in a
// diff block. Write-only values are already masked in the plan; nothing else is shown.
import type { Change, Plan } from '../plan/types.js';
import { isNoop, summarize } from '../plan/types.js';
import { plain, renderChange, verbOf } from './text.js';

const SYMBOL: Record<ReturnType<typeof verbOf>, string> = { create: '+', update: '~', delete: '-', replace: '-/+', 'no-op': ' ' };
const VERB: Record<ReturnType<typeof verbOf>, string> = { create: 'create', update: 'update', delete: 'destroy', replace: 'replace', 'no-op': 'no change' };

const escapeHtml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** A fence longer than any run of backticks in the text, so a value cannot close it. */
function fenced(lang: string, text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(longest + 1);
  return `${fence}${lang}\n${text}\n${fence}`;
}

/** The text renderer's lines with the change symbol moved to the first column, as a diff block colours them. */
function diffLines(c: Change): string {
  return renderChange(c, plain)
    .map((l) => {
      const m = /^(\s*)([+~-]|-\/\+)( .*)$/.exec(l);
      if (!m) return ` ${l}`;
      const sym = m[2] === '~' ? '!' : m[2] === '-/+' ? '!' : m[2];
      return `${sym}${m[1]}${m[3]}`;
    })
    .join('\n');
}

function section(c: Change): string[] {
  const verb = verbOf(c);
  const title = `<code>${SYMBOL[verb].trim() || '·'}</code> <b>${escapeHtml(c.address)}</b> ${c.deletedOutside ? 'deleted outside edgeform' : VERB[verb]}${c.drift ? ' (changed outside edgeform)' : ''}`;
  return ['<details>', `<summary>${title}</summary>`, '', fenced('diff', diffLines(c)), '', '</details>'];
}

export function renderPlanMarkdown(plan: Plan): string {
  const active = plan.changes.filter((c) => !isNoop(c));
  const drift = active.filter((c) => c.drift || c.deletedOutside);
  const other = active.filter((c) => !(c.drift || c.deletedOutside));
  const { add, change, destroy } = summarize(active);
  const out: string[] = [`## edgeform plan for stack \`${plan.stack}\``, ''];
  if (!active.length) out.push(`**No changes.** Live state matches the manifests.`, '');
  else {
    out.push(`**Plan: ${add} to add, ${change} to change, ${destroy} to destroy.**`, '');
    out.push('| add | change | destroy | changed outside edgeform |', '|---:|---:|---:|---:|', `| ${add} | ${change} | ${destroy} | ${drift.length} |`, '');
  }
  if (drift.length) {
    out.push(`### Changed outside edgeform (${drift.length})`, '', 'These differ from what edgeform last applied; the plan puts them back.', '');
    for (const c of drift) out.push(...section(c), '');
  }
  if (other.length) {
    out.push(`### Changes (${other.length})`, '');
    for (const c of other) out.push(...section(c), '');
  }
  if (plan.orphans.length) {
    out.push(`### Managed but no longer declared (${plan.orphans.length})`, '', 'Left alone without `--prune`:', '');
    for (const o of plan.orphans) out.push(`- \`${o}\``);
    out.push('');
  }
  out.push(`<sub>${plan.apiCalls} API calls · edgeform plan</sub>`, '');
  return out.join('\n');
}
