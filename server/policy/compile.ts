// compilePolicy: a document (YAML or JSON text) into the form evaluate() runs, through the
// same checker the API, `edgeform validate` and `terraform validate` use.
import { compileTrafficPolicy, type Phase, type PolicyIssue } from '../../provider/catalog/validate/traffic-policy.js';
import type { CelProgram } from '../../provider/catalog/validate/policy/cel.js';
import { runnerOf } from './actions/index.js';
import type { Template } from '../../provider/catalog/validate/policy/template.js';
import type { MakeContext, Runner } from './actions/run.js';

export interface RunnableRule {
  index: number;
  name?: string;
  expressions: { text: string; program: CelProgram }[];
  actions: { type: string; run: Runner; templates: Map<string, Template> }[];
}

export interface CompiledPolicy {
  phases: Partial<Record<Phase, RunnableRule[]>>;
}

export interface CompileOptions {
  /** Phases allowed where the policy is attached (all when absent). */
  phases?: readonly Phase[];
  /** Names this policy's rate-limit buckets apart from other policies' in one state (e.g. the route id). */
  scope?: string;
  /** The server's runners for route modules' actions (MakeContext.moduleRunner). */
  moduleRunner?: MakeContext['moduleRunner'];
  /** Run module-* actions without a server's runner in their offline forms (`edgeform policy test`). */
  offline?: boolean;
}

export function compilePolicy(text: string, opts: CompileOptions = {}): { problems: PolicyIssue[] } | CompiledPolicy {
  const r = compileTrafficPolicy(text, { phases: opts.phases });
  if (!r.ok) return { problems: r.issues };
  const phases: CompiledPolicy['phases'] = {};
  const make: MakeContext = { scope: opts.scope ?? '', moduleRunner: opts.moduleRunner, offline: opts.offline };
  const problems: PolicyIssue[] = [];
  for (const [phase, rules] of Object.entries(r.compiled) as [Phase, NonNullable<(typeof r.compiled)[Phase]>][]) {
    phases[phase] = rules.map((rule, i) => ({
      ...rule,
      actions: rule.actions.map((a, j) => {
        try {
          return { type: a.type, run: runnerOf(a, make), templates: a.templates };
        } catch (e) {
          // A runner that cannot be made here (a module action where no route module can run): refused, never skipped.
          problems.push({ path: `${phase}[${i}].actions[${j}].type`, message: (e as Error).message });
          return { type: a.type, run: () => ({ did: '' }), templates: a.templates };
        }
      }),
    }));
  }
  return problems.length ? { problems } : { phases };
}

export const isCompiled = (r: ReturnType<typeof compilePolicy>): r is CompiledPolicy => 'phases' in r;
