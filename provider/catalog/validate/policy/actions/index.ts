// Every action type a policy may use, in the order the docs list them. A type not here is
// refused at validation, naming these.
import { addHeaders } from './add-headers.js';
import { customResponse } from './custom-response.js';
import type { ActionDef } from './define.js';
import { deny } from './deny.js';
import { rateLimit } from './rate-limit.js';
import { redirect } from './redirect.js';
import { removeHeaders } from './remove-headers.js';
import { restrictIps } from './restrict-ips.js';
import { urlRewrite } from './url-rewrite.js';
import * as service from './service.js';
import { moduleActions } from './modules.js';

export const ACTIONS = [
  rateLimit, deny, customResponse, addHeaders, removeHeaders, redirect, urlRewrite, restrictIps,
  service.basicAuth, service.circuitBreakerAction, service.closeConnection, service.compressResponse, service.forwardInternal,
  service.httpRequest, service.jwtValidation, service.log, service.requestBodyFindReplace, service.responseBodyFindReplace,
  service.setVars, service.sseFindReplace, service.verifyWebhook,
  service.oauthAction, service.openidConnect, service.owaspRequest, service.owaspResponse, service.samlAction, service.terminateTls,
  ...moduleActions,
] as const;

export const ACTION_TYPES = ACTIONS.map((a) => a.type);

export const actionByType = new Map<string, ActionDef<unknown>>(ACTIONS.map((a) => [a.type, a as ActionDef<unknown>]));

/**
 * Adds an action type (another part of the server defines one: an endpoint's forward-internal
 * variant): its config check here, its runner with registerRunner in server/policy/actions/.
 */
export function registerAction(def: ActionDef<unknown>): void {
  if (!actionByType.has(def.type)) (ACTION_TYPES as string[]).push(def.type);
  actionByType.set(def.type, def);
}

export type { RateLimitAction, BucketKey } from './rate-limit.js';
export type { DenyAction } from './deny.js';
export type { CustomResponseAction } from './custom-response.js';
export type { AddHeadersAction } from './add-headers.js';
export type { RemoveHeadersAction } from './remove-headers.js';
export type { RedirectAction } from './redirect.js';
export type { UrlRewriteAction } from './url-rewrite.js';
export type { RestrictIpsAction } from './restrict-ips.js';
export type * from './service.js';
