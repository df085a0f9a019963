// The runner of each action type, made once per compiled action.
import type { CompiledAction } from '../../../provider/catalog/validate/traffic-policy.js';
import { addHeaders } from './add-headers.js';
import { customResponse } from './custom-response.js';
import { deny } from './deny.js';
import { forwardInternal } from './forward-internal.js';
import { rateLimit } from './rate-limit.js';
import { redirect } from './redirect.js';
import { removeHeaders } from './remove-headers.js';
import { restrictIps } from './restrict-ips.js';
import type { Runner } from './run.js';
import { urlRewrite } from './url-rewrite.js';

const RUNNERS: Record<string, (config: any, scope: string) => Runner> = {
  'rate-limit': rateLimit,
  deny,
  'custom-response': customResponse,
  'add-headers': addHeaders,
  'remove-headers': removeHeaders,
  redirect,
  'url-rewrite': urlRewrite,
  'restrict-ips': restrictIps,
  // Cloud endpoints (issue 36): the ingress forwards; see forward-internal.ts.
  'forward-internal': forwardInternal,
};

export function runnerOf(action: CompiledAction, scope: string): Runner {
  const make = RUNNERS[action.type];
  if (!make) throw new Error(`no runner for action type ${action.type}`);
  return make(action.config, scope);
}
