// deny: ends the request with a status (403 unless given); on a TCP connection, closes it.
import { onlyFields, statusCode } from '../config.js';
import { ALL_PHASES, defineAction } from './define.js';

export interface DenyAction { status_code: number }

export const deny = defineAction<DenyAction>({
  type: 'deny',
  phases: ALL_PHASES,
  fields: ['status_code'],
  check(c) {
    onlyFields(c, this.fields);
    const status = statusCode(c, 'status_code', [400, 599], 403);
    return status === undefined ? undefined : { status_code: status };
  },
});
