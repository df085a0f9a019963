// Creates whose outcome is unknown. A POST that was sent but never answered (the
// connection reset or closed by a server restarting, a gateway's 502/503/504) may or may
// not have made the resource; sent again blindly, it makes a duplicate. The resource is
// looked up first, the way plan finds it (its stamp, or its natural key within its parent,
// or a bot's name), and the create is sent again only if it is not there.
import { ApiClientError, networkErrorCode, type ApiClient } from '../../provider/client/index.js';
import type { KindEntry } from '../../provider/catalog/index.js';
import { childSpecsOf, manifestKind, manifestKinds } from '../manifest/kinds.js';
import { refresh } from '../live/refresh.js';

type Doc = Record<string, any>;

/** Network errors after which the request may have reached the server: sent, then no answer. */
const UNANSWERED = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT']);

/** Whether a failed create may nonetheless have made its resource. */
export function outcomeUnknown(e: unknown): boolean {
  if (e instanceof ApiClientError) return e.status === 502 || e.status === 503 || e.status === 504;
  const code = networkErrorCode(e);
  return code !== undefined && UNANSWERED.has(code);
}

/** The live resource an unanswered create made, if it made one; `known` are ids the plan already knew (the half a replacement keeps, say). */
export async function findCreated(client: ApiClient, kind: KindEntry, body: Doc, parentId: string | undefined, known: ReadonlySet<string>): Promise<Doc | undefined> {
  if (manifestKind(kind.kind)) {
    const live = await refresh(client, [kind]);
    const same = (read: Doc) =>
      typeof body.metadata === 'string' ? read.metadata === body.metadata : typeof body.name === 'string' && read.name === body.name;
    return (live.byKind.get(kind.kind) ?? []).find((l) => !known.has(l.id) && same(l.read))?.read;
  }
  const parentKind = manifestKinds.find((k) => childSpecsOf(k.kind).some((c) => c.entry.kind === kind.kind));
  const spec = parentKind && childSpecsOf(parentKind.kind).find((c) => c.entry.kind === kind.kind);
  if (!parentKind || !spec || !parentId) return undefined;
  const live = await refresh(client, [parentKind]);
  const children = live.byId.get(parentId)?.children[spec.key] ?? [];
  // Unique within its parent (the server refuses a second), so the key alone identifies it.
  return children.find((c) => !known.has(c.id) && c.key === String(body[spec.naturalKey]))?.read;
}

export interface CreateOutcome {
  made: Doc;
  /** Found after an unanswered create, not returned by one: values returned only once are lost. */
  found: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Sends a create; when its outcome is unknown, looks the resource up before sending it
 * again (up to `attempts` sends), so that an apply through a server restart makes no duplicate.
 */
export async function createOnce(client: ApiClient, kind: KindEntry, body: Doc, pathParent: string | undefined, parentId: string | undefined, known: ReadonlySet<string>, attempts = 4): Promise<CreateOutcome> {
  for (let attempt = 1; ; attempt++) {
    try {
      return { made: await client.create(kind, body, pathParent), found: false };
    } catch (e) {
      if (!outcomeUnknown(e) || attempt >= attempts) throw e;
      // A restarting server needs a moment; the lookup's GETs retry on their own as well.
      await sleep(250 * 2 ** (attempt - 1));
      const found = await findCreated(client, kind, body, parentId, known);
      if (found) return { made: found, found: true };
    }
  }
}
