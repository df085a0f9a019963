// Which backend serves one request or connection: a weighted backend picks a child by weight
// (0 never), a tunnel-group backend one online tunnel of this server whose labels include
// all of its labels, in turn. The HTTP side and the TCP/TLS edges (i-core) share this choice.
import type { ErrorCode } from '../../http/errors.js';
import { backendAnswer } from '../http/error-page.js';
import type { EdgeAnswer, FullDoc, IngressDeps, IngressTable } from '../types.js';
import { pickWeighted } from './weighted.js';
import { pickTunnel } from './tunnel-group.js';

export type ResolvedBackend =
  | { type: 'tunnel'; backend: FullDoc; tunnelId: string }
  | { type: 'response'; backend: FullDoc }
  | { type: 'error'; code: ErrorCode; message: string; answer: EdgeAnswer };

/** Weighted backends nested deeper than this are treated as a loop. */
const MAX_DEPTH = 8;

/** `message` names ids and labels: the access log's detail, never the client's page (backendAnswer). */
const fail = (code: ErrorCode, message: string): ResolvedBackend => ({ type: 'error', code, message, answer: backendAnswer(code, message) });

function kindOf(doc: FullDoc & { kind?: string }): 'tunnel' | 'response' | 'weighted' | undefined {
  const k = doc.kind ?? '';
  if (k === 'TunnelGroupBackend' || doc.id.startsWith('bkdtg_')) return 'tunnel';
  if (k === 'HTTPResponseBackend' || doc.id.startsWith('bkdhr_')) return 'response';
  if (k === 'WeightedBackend' || doc.id.startsWith('bkdwd_')) return 'weighted';
  return undefined;
}

export function resolveBackend(table: IngressTable, backendId: string | undefined, deps: IngressDeps, random: () => number = Math.random): ResolvedBackend {
  let id = backendId;
  for (let depth = 0; depth <= MAX_DEPTH; depth++) {
    const doc = id ? table.backends.get(id) : undefined;
    if (!doc) return fail('ERR_SERVICE_745', id ? `the backend ${id} no longer exists` : 'this route has no enabled backend');
    switch (kindOf(doc)) {
      case 'response':
        return { type: 'response', backend: doc };
      case 'tunnel': {
        const tunnelId = pickTunnel(doc, deps.gateway.labeledTunnels(), undefined, deps.gateway.preferred?.());
        if (!tunnelId) return fail('ERR_SERVICE_742', `no online tunnel of any instance has the labels ${labelText(doc.labels)} of backend ${doc.id}; start edgeform agent with --label ${labelText(doc.labels)}`);
        return { type: 'tunnel', backend: doc, tunnelId };
      }
      case 'weighted': {
        const child = pickWeighted(doc.backends ?? {}, random);
        if (!child) return fail('ERR_SERVICE_746', `the weighted backend ${doc.id} has no child with a weight above 0`);
        id = child;
        continue;
      }
      default:
        return fail('ERR_SERVICE_745', `the backend ${doc.id} is of a kind the edge cannot serve`);
    }
  }
  return fail('ERR_SERVICE_746', `weighted backends nest more than ${MAX_DEPTH} deep from ${backendId}`);
}

const labelText = (labels: Record<string, string> | undefined) => Object.entries(labels ?? {}).map(([k, v]) => `${k}=${v}`).join(',');
