// The machine renderer: one JSON document, shaped like `terraform show -json` where the
// concepts match (`resource_changes[].change.actions`), plus the API calls made.
import type { ExecuteResult } from '../apply/execute.js';
import type { Plan } from '../plan/types.js';
import { summarize } from '../plan/types.js';
import { isNoop } from '../plan/types.js';

export function planJson(plan: Plan, extra: Record<string, unknown> = {}) {
  return {
    format_version: '1.0',
    stack: plan.stack,
    mode: plan.mode,
    resource_changes: plan.changes.map((c) => ({
      address: c.address,
      kind: c.kind,
      name: c.name,
      ...(c.movedFrom ? { previous_address: c.movedFrom } : {}),
      ...(c.id ? { id: c.id } : {}),
      change: {
        actions: c.actions,
        before: c.before,
        after: c.after,
        ...(c.replacePaths?.length ? { replace_paths: c.replacePaths } : {}),
        ...(c.sensitiveChanged ? { sensitive_changed: true } : {}),
      },
      ...(c.removedFrom ? { action_reason: 'delete_because_removed_from_parent', parent_address: c.removedFrom } : {}),
      ...(c.drift ? { drift: true } : {}),
      ...(c.adopt ? { adopt: true } : {}),
      ...(c.deletedWith ? { deleted_with: c.deletedWith } : {}),
      ...(c.replaceReason ? { replace_reason: c.replaceReason } : {}),
      ...(c.deletedOutside ? { deleted_outside: true } : {}),
      ...(c.tokenFile && c.actions.includes('create') ? { token_file: c.tokenFile } : {}),
    })),
    orphans: plan.orphans,
    summary: summarize(plan.changes.filter((c) => !isNoop(c))),
    changes: plan.changes.some((c) => !isNoop(c)),
    api_calls: plan.apiCalls,
    ...extra,
  };
}

export function applyJson(plan: Plan, result: ExecuteResult, apiCalls: number) {
  return planJson(plan, {
    applied: summarize(result.done),
    failures: result.failures.map((f) => ({
      address: f.address,
      method: f.operation.method,
      message: f.message,
      status: f.status ?? null,
      error_code: f.errorCode ?? null,
      operation_id: f.operationId ?? null,
    })),
    skipped: result.skipped,
    ...(result.notDone ? { interrupted: true, not_done: result.notDone } : {}),
    api_calls: apiCalls,
  });
}
