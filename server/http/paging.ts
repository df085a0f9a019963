// List paging: limit 1..100 (default 100), before_id (alias beforeId), newest first.
import { isIdOf } from '../store/ids.js';
import { ApiError } from './errors.js';

export const LIST_QUERY = ['limit', 'before_id', 'beforeId'];

export function pageOf(query: Record<string, string | string[] | undefined>, prefix: string) {
  const rawLimit = query.limit;
  let limit = 100;
  if (rawLimit !== undefined) {
    if (typeof rawLimit !== 'string' || !/^\d{1,3}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > 100) {
      throw new ApiError('ERR_SERVICE_104', 'limit: must be an integer from 1 to 100', { field: 'limit', reason: 'must be an integer from 1 to 100' });
    }
    limit = Number(rawLimit);
  }
  const before = query.before_id ?? query.beforeId;
  if (before !== undefined && (typeof before !== 'string' || !isIdOf(prefix, before))) {
    throw new ApiError('ERR_SERVICE_104', `before_id: must be an id of this collection (${prefix}_...)`, { field: 'before_id', reason: `must start with ${prefix}_` });
  }
  return { limit, beforeId: before as string | undefined };
}

export function envelope(key: string, items: unknown[], collectionUri: string, more: boolean, lastId: string | undefined, limit: number) {
  return {
    [key]: items,
    uri: collectionUri,
    next_page_uri: more && lastId ? `${collectionUri}?before_id=${encodeURIComponent(lastId)}&limit=${limit}` : null,
  };
}
