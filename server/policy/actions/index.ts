// The runner of each action type, made once per compiled action. The registry is open:
// another part of the server adds or replaces a runner with registerRunner (and its config
// check with registerAction in provider/catalog/validate/policy/actions/index.ts).
import type { CompiledAction } from '../../../provider/catalog/validate/traffic-policy.js';
import { addHeaders } from './add-headers.js';
import { customResponse } from './custom-response.js';
import { deny } from './deny.js';
import { rateLimit } from './rate-limit.js';
import { redirect } from './redirect.js';
import { removeHeaders } from './remove-headers.js';
import { restrictIps } from './restrict-ips.js';
import type { MakeContext, Runner, RunnerFactory } from './run.js';
import * as service from './service.js';
import { urlRewrite } from './url-rewrite.js';
import { MODULE_ACTION_TYPES, moduleRunnerFactory } from './modules.js';

const RUNNERS = new Map<string, RunnerFactory>([
  ['rate-limit', rateLimit],
  ['deny', deny],
  ['custom-response', customResponse],
  ['add-headers', addHeaders],
  ['remove-headers', removeHeaders],
  ['redirect', redirect],
  ['url-rewrite', urlRewrite],
  ['restrict-ips', restrictIps],
  ['basic-auth', service.basicAuth],
  ['circuit-breaker', service.circuitBreaker],
  ['close-connection', service.closeConnection],
  ['compress-response', service.compressResponse],
  ['forward-internal', service.forwardInternal],
  ['http-request', service.httpRequest],
  ['jwt-validation', service.jwtValidation],
  ['log', service.log],
  ['request-body-find-replace', service.requestBodyFindReplace],
  ['response-body-find-replace', service.responseBodyFindReplace],
  ['set-vars', service.setVars],
  ['sse-find-replace', service.sseFindReplace],
  ['verify-webhook', service.verifyWebhook],
  ...MODULE_ACTION_TYPES.map((type) => [type, moduleRunnerFactory(type)] as [string, RunnerFactory]),
]);

/** Adds (or replaces) the runner of an action type. */
export function registerRunner(type: string, factory: RunnerFactory): void {
  RUNNERS.set(type, factory);
}

export function runnerOf(action: CompiledAction, make: MakeContext): Runner {
  const factory = RUNNERS.get(action.type);
  if (!factory) throw new Error(`no runner for action type ${action.type}`);
  return factory(action.config, make);
}
