// `edgeform validate | plan | apply | destroy | export`: the reconciler's commands.
// Exit codes: 0 success (plan: no changes with --detailed-exitcode), 1 error, 2 changes
// present (plan --detailed-exitcode) or a usage error, 3 no changes but leftovers: resources
// the stack manages that no manifest declares (plan --detailed-exitcode).
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { Command, InvalidArgumentError, Option } from 'commander';
import { ApiClientError, networkErrorCode, NO_SUCH_PATH, type ApiClient } from '../provider/client/index.js';
import { manifestKind, manifestKinds } from '../reconciler/manifest/kinds.js';
import { ManifestError } from '../reconciler/manifest/problems.js';
import { execute, type ProgressEvent } from '../reconciler/apply/execute.js';
import { applyJson, planJson } from '../reconciler/render/json.js';
import { renderPlanMarkdown } from '../reconciler/render/markdown.js';
import { failureText, progressDone, progressFailed, progressStart, progressStill, renderApplyResult, renderPlan, styleFor, type Style } from '../reconciler/render/text.js';
import { isNoop, type Plan } from '../reconciler/plan/types.js';
import { clientFor, loadDesired, planWith, readPlan, savePlan, checkSavedPlan, splitExcludes, withSecretsBack, type Target } from '../reconciler/session.js';
import { exportManifests } from '../reconciler/export.js';
import { exportAsEndpoints } from '../reconciler/export-endpoints.js';
import { INTERRUPTED, stdoutState } from './interrupts.js';
import { applyNotification, notify, notifyOptions, notifyTargetOf, type ApplySeen } from './notify.js';
import { commandLine, LockError, lockOptions, startRun, type Run } from './lock.js';
import { chooseStack, StackNameError, STACK_PATTERN, unnamedStackMessage } from '../reconciler/stack-name.js';
import { unmanagedResources, unmanagedText } from '../reconciler/plan/unmanaged.js';

/** Where a command writes and reads; the process streams, or captured ones in tests. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
  outStyle: Style;
  errStyle: Style;
  /** How often an operation still running says so (ms; default 10 s, as Terraform). */
  stillEvery?: number;
  /** A terminal to ask for confirmation on, or undefined. */
  ask?: (question: string) => Promise<string>;
  /** Progress goes to a terminal (stdout; stderr under --json): each finished change says `[N/M]`. */
  counting?: { out: boolean; err: boolean };
}

/**
 * Says so when the server's rate limit is what the run waits on (at most every 10 s): a long
 * apply otherwise looks stuck, and the setting that bounds it is the server's.
 */
export function sayRateLimited(client: ApiClient, out: Io): void {
  let last = 0;
  client.onRateLimited = (waitMs, e) => {
    if (Date.now() - last < 10_000) return;
    last = Date.now();
    const limit = e.code === 'ERR_SERVICE_226' ? "the server's API rate limit for this key (its --api-rate-limit / EDGEFORM_API_RATE_LIMIT, 600 requests a minute by default)" : `the server (${e.code ?? 429}: ${e.serverMessage})`;
    out.err(`${out.errStyle.yellow('Waiting')} ${Math.ceil(waitMs / 1000)}s for ${limit}; the calls go on after it\n`);
  };
}

export function processIo(noColor = false): Io {
  const interactive = process.stdin.isTTY && process.stdout.isTTY;
  return {
    out: (t) => (stdoutState.closed ? process.stderr.write(t) : process.stdout.write(t)),
    err: (t) => process.stderr.write(t),
    outStyle: styleFor(process.stdout, noColor),
    errStyle: styleFor(process.stderr, noColor),
    counting: { out: !!process.stdout.isTTY, err: !!process.stderr.isTTY },
    ask: interactive
      ? (q) =>
          new Promise((resolve) => {
            const rl = readline.createInterface({ input: process.stdin, output: process.stdout });
            rl.question(q, (a) => {
              rl.close();
              resolve(a);
            });
          })
      : undefined,
  };
}

/** A failure the user can act on: printed as `Error: ...` with exit code 1. */
export class UserError extends Error {}
/** A command used wrongly (a missing or bad option): exit code 2, like commander's own usage errors. */
export class UsageError extends UserError {}

const collect = (v: string, prior: string[] = []) => [...prior, v];

/** Where the API is and the key to it. */
export function apiOptions(cmd: Command) {
  return cmd
    .addOption(new Option('--api-url <url>', 'API base URL').env('EDGEFORM_API_URL').default('http://127.0.0.1:8080'))
    .addOption(new Option('--api-key <token>', 'API key token (prefer the environment variable: flags show in process lists)').env('EDGEFORM_API_KEY'));
}

export function targetOptions(cmd: Command) {
  return apiOptions(cmd)
    .addOption(new Option('--stack <name>', 'stack whose resources this run manages (its name is stamped into their metadata); default: the "stack:" of an edgeform.yaml beside the manifests, else "default"').env('EDGEFORM_STACK'))
    .option('--no-color', 'no colour, even on a terminal');
}

export const manifestOption = (cmd: Command) =>
  cmd.option('-f, --file <path>', 'manifest file or directory of *.yaml files (repeatable)', collect, [] as string[])
    .option('--cdktf <dir>', 'a synthesized CDKTF stack (a folder with cdk.tf.json, or cdktf.out) instead of, or besides, manifests (repeatable)', collect, [] as string[])
    .option('--exclude <glob|address>', "skip manifest files and folders matching the glob (repeatable; 'ci/**', 'docker-compose*.yml'; hidden ones such as .github/ are always skipped in folders); on plan and apply, a resource address (Kind/name, Kind/name.routes[\"/api\"], Kind/*) leaves that resource and what needs it out of the plan", collect, [] as string[]);

/** --target and --replace, on plan and apply. */
const targetingOptions = (cmd: Command) =>
  cmd.option('--target <address>', 'plan only this resource (Kind/name, Kind/name.routes["/api"], Kind/*) and what it needs (repeatable); for exceptional situations', collect, [] as string[])
    .option('--replace <address>', 'replace this document though it has not changed: delete and create (or create before delete where its natural key allows), e.g. to rotate an API key (repeatable)', collect, [] as string[]);

/** What --target/--exclude/--replace ask of a plan. */
const targetingOf = (opts: Record<string, any>) => ({ targets: opts.target ?? [], excludes: splitExcludes(opts.exclude).addresses, replace: opts.replace ?? [] });

export function targetOf(opts: Record<string, any>): Target {
  if (!opts.apiKey) throw new UserError('no API key: set EDGEFORM_API_KEY (or --api-key) to a token; "edgeform serve" prints the first one on its first start');
  if (!/^https?:\/\/[^/]/i.test(opts.apiUrl) || !URL.canParse(opts.apiUrl)) throw new UsageError(`--api-url / EDGEFORM_API_URL must be the server's http(s) base URL, such as http://127.0.0.1:8080, not ${JSON.stringify(opts.apiUrl)}`);
  if (opts.stack !== undefined && !STACK_PATTERN.test(opts.stack)) throw new UsageError(`stack name "${opts.stack}" must be 1-64 letters, digits, '.', '_' or '-'`);
  const chosen = stackOf(opts);
  return { apiUrl: opts.apiUrl, apiKey: opts.apiKey, stack: chosen.stack, parallelism: opts.parallelism ? Number(opts.parallelism) : undefined, batchSize: opts.batchSize ? Number(opts.batchSize) : undefined };
}

/** The run's stack: --stack, else the edgeform.yaml beside the manifests, else the implicit default. */
function stackOf(opts: Record<string, any>) {
  try {
    return chooseStack(opts.stack, opts.file ?? []);
  } catch (e) {
    if (e instanceof StackNameError && e.usage) throw new UsageError(e.message);
    throw e;
  }
}

/** --prune and destroy delete: refused on the implicit stack every directory shares. */
export function needsNamedStack(opts: Record<string, any>, what: string) {
  if (!stackOf(opts).named) throw new UsageError(unnamedStackMessage(what));
}

function desiredOf(opts: Record<string, any>) {
  const files: string[] = opts.file ?? [];
  const cdktf: string[] = opts.cdktf ?? [];
  if (!files.length && !cdktf.length) throw new UsageError('no manifests: give -f PATH (a file or a directory of *.yaml files) or --cdktf DIR (a CDKTF synth output)');
  return loadDesired(files, cdktf, { exclude: splitExcludes(opts.exclude).globs });
}

/** Turns what went wrong into one actionable line. */
export function explain(e: unknown, apiUrl?: string): string {
  if (e instanceof ManifestError) return e.message;
  if (e instanceof ApiClientError) {
    if (e.status === 401) return `the API refused the key (401 ${e.code ?? ''}): ${e.serverMessage}; check EDGEFORM_API_KEY`;
    // The server knows no such path: the URL most likely carries a path of its own (".../v1").
    if (e.status === 404 && e.code === NO_SUCH_PATH) return `${e.message}; set --api-url or EDGEFORM_API_URL to the server's base URL, with no path (such as http://127.0.0.1:8080), not ${apiUrl}`;
    return `${e.message}`;
  }
  const code = networkErrorCode(e);
  const why = code && UNREACHABLE[code];
  if (why) return `cannot reach the API at ${apiUrl} (${why}): is the edgeform server running at ${apiUrl}? Start it with "edgeform serve", or set --api-url or EDGEFORM_API_URL to where it runs`;
  return (e as Error).message;
}

/** Network errors that mean nothing answered at the address, in words. */
const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'the host name could not be resolved',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'the connection timed out',
  UND_ERR_CONNECT_TIMEOUT: 'the connection timed out',
  ECONNRESET: 'the connection was closed without an answer',
  UND_ERR_SOCKET: 'the connection was closed without an answer',
  UND_ERR_CLOSED: 'the connection was closed without an answer',
  EPROTO: 'the connection failed (an HTTPS server at an http:// URL?)',
  ERR_SSL_WRONG_VERSION_NUMBER: 'the TLS handshake failed: a plain-HTTP server at an https:// URL?',
};

/** What the user should know that does not stop the run, on stderr (stdout may be one JSON document). */
function warnAll(io: Io, warnings: readonly string[] = []) {
  for (const w of warnings) io.err(`${io.errStyle.yellow('Warning:')} ${w}\n`);
}

/** As Terraform's `apply -json`: the question cannot share stdout with the one JSON document. */
function jsonNeedsApproval(opts: Record<string, any>, command: string) {
  if (opts.json && !opts.autoApprove) throw new UsageError(`${command} --json needs --auto-approve: the confirmation prompt cannot share stdout with the JSON document (review with "edgeform plan --json" first, or save a plan with "plan --out FILE" and apply that file)`);
}

async function confirm(io: Io, opts: Record<string, any>, what: string): Promise<boolean> {
  if (opts.autoApprove) return true;
  if (!io.ask) throw new UserError(`${what} needs confirmation, and there is no terminal to ask on; pass --auto-approve (or save a plan with "plan --out FILE" and apply that file)`);
  io.out(`\n${io.outStyle.bold('Do you want to perform these actions?')}\n  edgeform will perform the actions described above.\n  Only 'yes' will be accepted to approve.\n\n`);
  const answer = (await io.ask('  Enter a value: ')).trim();
  if (answer !== 'yes') {
    io.out(`\n${what} cancelled.\n`);
    return false;
  }
  io.out('\n');
  return true;
}

async function runPlanned(io: Io, plan: Plan, t: Target, opts: Record<string, any>, client: ReturnType<typeof clientFor>, run: Run, seen?: ApplySeen): Promise<number> {
  const json = !!opts.json;
  // On a terminal, how far the run is: 40,000 lines of progress say nothing of that.
  const counting = json ? io.counting?.err : io.counting?.out;
  let finished = 0;
  const count = () => (counting ? `[${++finished}/${Math.max(plan.changes.length, finished)}] ` : '');
  const progress = (e: ProgressEvent) => {
    const write = json ? io.err : io.out;
    const s = json ? io.errStyle : io.outStyle;
    if (e.type === 'start') write(`${progressStart(e.change)}\n`);
    else if (e.type === 'done') write(`${count()}${progressDone(e.change, e.seconds, e.id, e.tokenFile)}\n`);
    // On stderr beside a --json document the error in full, since that is the only text; on stdout in brief,
    // as the run's summary below lists each error in full (it was printed twice).
    else if (e.type === 'failed') write(`${count()}${s.red(json ? `Error: ${failureText(e.failure)}` : progressFailed(e.change, e.failure))}\n`);
    else if (e.type === 'still') write(`${progressStill(e.change, e.seconds)}\n`);
  };
  run.interrupts.phase = 'executing';
  const result = await execute(client, plan, { parallelism: t.parallelism ?? 10, batchSize: t.batchSize, onProgress: progress, stillEvery: io.stillEvery, signal: run.interrupts.signal });
  run.interrupts.phase = 'finishing';
  if (seen) seen.result = result;
  if (json) io.out(`${JSON.stringify(applyJson(plan, result, client.calls))}\n`);
  else io.out(`\n${renderApplyResult(plan.mode, result, io.outStyle)}`);
  if (result.notDone && run.interrupts.interrupted) return INTERRUPTED;
  return result.failures.length || result.notDone ? 1 : 0;
}

export function parallelismOption(cmd: Command) {
  return cmd.addOption(
    new Option('--parallelism <n>', 'API operations in flight at once').default('10').argParser((v) => {
      const n = Number(v);
      // A usage error (exit 2), as commander reports other bad options.
      if (!Number.isInteger(n) || n < 1 || n > 256) throw new InvalidArgumentError("It must be an integer from 1 to 256.");
      return String(n);
    }),
  ).addOption(
    new Option('--batch-size <n>', 'writes sent together in one request at most (POST /_edgeform/batch; 1: one request per write)').default('100').argParser((v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1 || n > 100) throw new InvalidArgumentError('It must be an integer from 1 to 100.');
      return String(n);
    }),
  );
}

export function reconcileCommands(setCode: (code: number) => void, io: () => Io): Command[] {
  const wrap = (fn: (opts: Record<string, any>, ...args: any[]) => Promise<number>) => async (...args: any[]) => {
    const cmd = args[args.length - 1] as Command;
    const opts = cmd.opts();
    try {
      setCode(await fn(opts, ...args.slice(0, -2), cmd));
    } catch (e) {
      const out = io();
      // --json readers get one document whatever went wrong (a refused plan included).
      if (opts.json) out.out(`${JSON.stringify({ error: explain(e, opts.apiUrl), ...(e instanceof ManifestError ? { problems: e.problems.list } : {}), ...(e instanceof LockError ? { lock: e.lock } : {}) })}\n`);
      out.err(`${out.errStyle.red('Error:')} ${explain(e, opts.apiUrl)}\n`);
      // With --detailed-exitcode, 2 means "changes present": a CI job must not read a mistake as that.
      setCode(e instanceof UsageError && !opts.detailedExitcode ? 2 : 1);
    }
  };

  const validate = manifestOption(new Command('validate'))
    .description('Check manifests offline: kinds, names, every field against the catalog, references and natural keys.')
    .option('--json', 'print one JSON document')
    .option('--no-color', 'no colour, even on a terminal')
    .action(
      wrap(async (opts) => {
        const out = io();
        try {
          const m = desiredOf(opts);
          if (opts.json) out.out(`${JSON.stringify({ valid: true, documents: m.documents.length, problems: [] })}\n`);
          else out.out(`${out.outStyle.green('Success!')} ${m.documents.length} document${m.documents.length === 1 ? '' : 's'} valid.\n`);
          return 0;
        } catch (e) {
          if (!(e instanceof ManifestError)) throw e;
          if (opts.json) out.out(`${JSON.stringify({ valid: false, problems: e.problems.list })}\n`);
          else out.err(`${e.problems.text()}\n${out.errStyle.red(`${e.problems.list.length} problem${e.problems.list.length === 1 ? '' : 's'} found.`)}\n`);
          return 1;
        }
      }),
    );

  const plan = targetingOptions(targetOptions(manifestOption(new Command('plan'))))
    .description('Show what apply would change: live state read through list endpoints, diffed field by field.')
    .option('--prune', 'also delete resources this stack manages that are no longer declared')
    .option('--adopt', 'take over unmanaged resources that hold a declared natural key (edge hostports) or id')
    .option('--out <file>', 'save the plan for "edgeform apply FILE" (owner-only; it holds no secret: write-only values are kept as fingerprints and read again from the manifests by apply)')
    .option('--json', 'print one JSON document (resource_changes[], api_calls)')
    .addOption(new Option('--format <format>', 'text, json (as --json) or markdown (a summary to post on a pull request: counts, one collapsible section per resource, secrets masked, drift apart)').choices(['text', 'json', 'markdown']).default('text'))
    .option('--detailed-exitcode', 'exit 0 with no changes, 1 on error, 2 with changes, 3 with no changes but leftovers (resources the stack manages that no manifest declares)')
    .option('--refresh-only', 'only report what changed outside edgeform since the last apply')
    .option('--show-unmanaged', 'also list live resources of the declared kinds that no stack manages (from the lists already read: no extra API call)')
    .action(
      wrap(async (opts) => {
        if (opts.format === 'json') opts.json = true;
        if (opts.json && opts.format === 'markdown') throw new UsageError('give --json or --format markdown, not both');
        const t = targetOf(opts);
        if (opts.prune) needsNamedStack(opts, 'plan --prune');
        const manifest = desiredOf(opts);
        const client = clientFor(t);
        try {
          const out = io();
          const planned = await planWith(client, manifest, { stack: t.stack, apiUrl: t.apiUrl, mode: opts.refreshOnly ? 'refresh-only' : 'apply', prune: opts.prune, adopt: opts.adopt, ...targetingOf(opts) });
          warnAll(out, planned.warnings);
          if (planned.problems.length) throw new UserError(`the plan cannot be carried out:\n  ${planned.problems.join('\n  ')}`);
          if (opts.out) await savePlan(opts.out, planned, client, { files: opts.file ?? [], cdktf: opts.cdktf ?? [], exclude: splitExcludes(opts.exclude).globs });
          const unmanaged = opts.showUnmanaged ? unmanagedResources(manifest, planned.live, planned.plan) : undefined;
          if (opts.json) out.out(`${JSON.stringify(planJson(planned.plan, unmanaged ? { unmanaged } : {}))}\n`);
          else if (opts.format === 'markdown') out.out(renderPlanMarkdown(planned.plan));
          else {
            out.out(renderPlan(planned.plan, out.outStyle));
            if (unmanaged) out.out(unmanagedText(unmanaged));
            if (opts.out) out.out(`\nSaved the plan to ${opts.out}. To carry it out exactly: edgeform apply ${opts.out}\n`);
          }
          if (!opts.detailedExitcode) return 0;
          // Leftovers are not changes (apply leaves them without --prune), yet a pipeline watching for drift must see them.
          return planned.plan.changes.some((c) => !isNoop(c)) ? 2 : planned.plan.orphans.length ? 3 : 0;
        } finally {
          await client.close();
        }
      }),
    );

  const apply = targetingOptions(notifyOptions(lockOptions(parallelismOption(targetOptions(manifestOption(new Command('apply')))))))
    .argument('[plan-file]', 'a plan saved with "plan --out": applied exactly, refused if anything it touches changed since')
    .description('Make the API calls that bring live state to the manifests (or carry out a saved plan).')
    .option('--prune', 'also delete resources this stack manages that are no longer declared')
    .option('--adopt', 'take over unmanaged resources that hold a declared natural key (edge hostports) or id')
    .option('--auto-approve', 'do not ask for confirmation')
    .option('--json', 'print one JSON document (progress goes to stderr)')
    .action(
      wrap(async (opts, planFile: string | undefined, cmd: Command) => {
        const seen: ApplySeen = { started: Date.now() };
        const t = targetOf(opts);
        const out = io();
        const client = clientFor(t);
        sayRateLimited(client, out);
        let run: Run | undefined;
        let code = 1;
        try {
          code = await applyRun(seen);
          return code;
        } catch (e) {
          seen.error = explain(e, t.apiUrl);
          throw e;
        } finally {
          await notify(out, notifyTargetOf(opts), applyNotification(t.stack, seen, code, client.calls));
        }
        async function applyRun(seen: ApplySeen): Promise<number> {
          // The lock is taken after the offline checks, before the first call: a run that waited for another plans on what that one left.
          const lock = async () => (run = await startRun(out, t, opts, commandLine(cmd)));
          try {
            let plan: Plan;
            if (planFile) {
              if (opts.file?.length || opts.cdktf?.length) throw new UsageError('give either a saved plan file or manifests (-f, --cdktf), not both');
              if (opts.target?.length || opts.replace?.length) throw new UsageError('--target and --replace shape a new plan; a saved plan is applied as it was made (make it with plan --target/--replace --out)');
              const saved = readPlan(planFile);
              // Unnamed here, the stack is the one the plan was made for.
              if (opts.stack === undefined) t.stack = saved.plan.stack;
              if (saved.plan.stack !== t.stack) throw new UserError(`the plan was made for stack "${saved.plan.stack}", not "${t.stack}"; pass --stack ${saved.plan.stack}`);
              if (saved.plan.apiUrl.replace(/\/+$/, '') !== t.apiUrl.replace(/\/+$/, '')) throw new UserError(`the plan was made against ${saved.plan.apiUrl}, not ${t.apiUrl}`);
              await lock();
              const { stale, problems } = await checkSavedPlan(client, saved);
              if (stale.length) throw new UserError(`the saved plan is stale: ${stale.join(', ')} changed since it was made; run plan again`);
              if (problems.length) throw new UserError(`the plan cannot be carried out:\n  ${problems.join('\n  ')}`);
              const back = await withSecretsBack(client, saved);
              warnAll(out, back.warnings);
              plan = back.plan;
              seen.plan = plan;
              if (!opts.json) out.out(renderPlan(plan, out.outStyle) + '\n');
            } else {
              jsonNeedsApproval(opts, 'apply');
              if (opts.prune) needsNamedStack(opts, 'apply --prune');
              const manifest = desiredOf(opts);
              await lock();
              const planned = await planWith(client, manifest, { stack: t.stack, apiUrl: t.apiUrl, mode: 'apply', prune: opts.prune, adopt: opts.adopt, ...targetingOf(opts) });
              warnAll(out, planned.warnings);
              if (planned.problems.length) throw new UserError(`the plan cannot be carried out:\n  ${planned.problems.join('\n  ')}`);
              plan = planned.plan;
              seen.plan = plan;
              if (!plan.changes.some((c) => !isNoop(c))) {
                if (opts.json) out.out(`${JSON.stringify(applyJson(plan, { failures: [], skipped: [], done: [] }, client.calls))}\n`);
                else out.out(renderPlan(plan, out.outStyle) + `\n${out.outStyle.green(out.outStyle.bold('Apply complete! Resources: 0 added, 0 changed, 0 destroyed.'))}\n`);
                return 0;
              }
              if (!opts.json) out.out(renderPlan(plan, out.outStyle));
              if (!(await confirm(out, opts, 'Apply'))) return 1;
            }
            return await runPlanned(out, plan, t, opts, client, run!, seen);
          } finally {
            await run?.end();
            await client.close();
          }
        }
      }),
    );

  const destroy = lockOptions(parallelismOption(targetOptions(manifestOption(new Command('destroy')))))
    .description('Delete every resource this stack manages (prevent_destroy in the manifests blocks it).')
    .option('--auto-approve', 'do not ask for confirmation')
    .option('--json', 'print one JSON document (progress goes to stderr)')
    .action(
      wrap(async (opts, cmd: Command) => {
        jsonNeedsApproval(opts, 'destroy');
        const t = targetOf(opts);
        needsNamedStack(opts, 'destroy');
        const out = io();
        const manifest = desiredOf(opts);
        const client = clientFor(t);
        sayRateLimited(client, out);
        let run: Run | undefined;
        try {
          run = await startRun(out, t, opts, commandLine(cmd));
          const planned = await planWith(client, manifest, { stack: t.stack, apiUrl: t.apiUrl, mode: 'destroy' });
          if (planned.problems.length) throw new UserError(`cannot destroy:\n  ${planned.problems.join('\n  ')}`);
          if (!planned.plan.changes.length) {
            if (opts.json) out.out(`${JSON.stringify(applyJson(planned.plan, { failures: [], skipped: [], done: [] }, client.calls))}\n`);
            else out.out(`No changes. Stack "${t.stack}" manages no resources.\n`);
            return 0;
          }
          if (!opts.json) out.out(renderPlan(planned.plan, out.outStyle));
          if (!(await confirm(out, opts, 'Destroy'))) return 1;
          return await runPlanned(out, planned.plan, t, opts, client, run);
        } finally {
          await run?.end();
          await client.close();
        }
      }),
    );

  const exp = targetOptions(new Command('export'))
    .description('Write manifests for live resources, so that plan on them right away shows no changes.')
    .option('--kind <kind>', `only this kind (repeatable): ${manifestKinds.map((k) => k.kind).join(', ')}`, collect, [] as string[])
    .option('--adopt', 'stamp the exported resources into the stack, so it manages them from now on')
    .option('--as-endpoints', 'write HTTPS edges as the cloud endpoints that serve the same requests (docs/endpoints.md)')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(
      wrap(async (opts) => {
        const t = targetOf(opts);
        const out = io();
        for (const k of opts.kind ?? []) if (!manifestKind(k)) throw new UsageError(`unknown kind ${k}; one of ${manifestKinds.map((m) => m.kind).join(', ')}`);
        const client = clientFor(t);
        try {
          if (opts.asEndpoints && (opts.adopt || opts.kind?.length)) throw new UsageError('--as-endpoints writes new documents from HTTPS edges: it takes neither --adopt nor --kind');
          const result = opts.asEndpoints ? await exportAsEndpoints(client, { stack: t.stack }) : await exportManifests(client, { stack: t.stack, kinds: opts.kind ?? [], adopt: !!opts.adopt });
          if (opts.output) {
            fs.mkdirSync(path.dirname(path.resolve(opts.output)), { recursive: true });
            fs.writeFileSync(opts.output, result.yaml);
            out.err(`Wrote ${result.count} document${result.count === 1 ? '' : 's'} to ${opts.output}.\n`);
          } else out.out(result.yaml);
          for (const note of result.notes) out.err(`${out.errStyle.yellow('Note:')} ${note}\n`);
          if (opts.adopt) out.err(`Adopted ${result.adopted} resource${result.adopted === 1 ? '' : 's'} into stack "${t.stack}".\n`);
          return 0;
        } finally {
          await client.close();
        }
      }),
    );

  return [validate, plan, apply, destroy, exp];
}
