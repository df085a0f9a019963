// custom-response: ends the request with the configured status, headers and body.
import type { CustomResponseAction } from '../../../provider/catalog/validate/policy/actions/index.js';
import type { Runner } from './run.js';

export function customResponse(config: CustomResponseAction): Runner {
  const headers = Object.fromEntries(Object.entries(config.headers).map(([k, v]) => [k.toLowerCase(), v]));
  return () => ({ ended: { response: { status: config.status_code, headers, body: config.body } }, did: `custom-response: ${config.status_code}` });
}
