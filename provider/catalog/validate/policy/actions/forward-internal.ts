// forward-internal: hands the request to an internal endpoint (a URL under .internal), whose
// own policy then answers it. The ingress does the forwarding (server/ingress/cloud-endpoints.ts);
// the engine only says where to. Added with cloud endpoints (issue 36, docs/endpoints.md).
import { parseEndpointUrl } from '../../endpoint-url.js';
import { onlyFields, problem, text } from '../config.js';
import { defineAction } from './define.js';

export interface ForwardInternalAction { url: string; on_error: 'halt' | 'continue' }

export const forwardInternal = defineAction<ForwardInternalAction>({
  type: 'forward-internal',
  phases: ['on_http_request'],
  fields: ['url', 'on_error'],
  check(c) {
    onlyFields(c, this.fields);
    const url = text(c, 'url', { required: true, max: 2048 });
    const onError = c.config.on_error ?? 'halt';
    if (onError !== 'halt' && onError !== 'continue') problem(c, 'on_error', 'on_error is halt (the default) or continue');
    if (url === undefined) return undefined;
    const u = parseEndpointUrl(url);
    if (typeof u === 'string') return problem(c, 'url', `url ${u}`);
    if (!u.internal) return problem(c, 'url', `forward-internal goes to an internal endpoint, a host under .internal; ${u.host} is not one`);
    if (onError !== 'halt' && onError !== 'continue') return undefined;
    return { url: u.url, on_error: onError };
  },
});
