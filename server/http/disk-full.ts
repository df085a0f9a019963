// A full disk under the database: SQLite's SQLITE_FULL, PostgreSQL's disk_full (SQLSTATE
// 53100). A write that fails for want of space is the server's condition, not the request's:
// 503 ERR_SERVICE_507 with Retry-After instead of 500, and /healthz reports it (503, storage
// "full") from the first such failure until a write commits again, or for FULL_REPORTED_MS
// after the last one: an instance taken out of rotation gets no writes to prove the space is
// back, so the report lapses and the next failing write renews it.
import { ApiError } from './errors.js';

/** How long /healthz reports a full disk after the last write that failed for it. */
export const FULL_REPORTED_MS = 30_000;

/** SQLITE_FULL's primary result code, as Prisma's SQLite adapter reports it (extendedCode). */
const SQLITE_FULL = 13;

/** True for an error (or one it wraps) that says the database's disk is full. */
export function isDiskFull(error: unknown): boolean {
  for (let e = error as Record<string, any> | undefined, depth = 0; e && typeof e === 'object' && depth < 5; e = e.cause, depth++) {
    if (e.code === 'SQLITE_FULL' || e.code === '53100' || e.originalCode === '53100' || e.meta?.code === '53100') return true;
    if (e.kind === 'sqlite' && (Number(e.extendedCode) & 0xff) === SQLITE_FULL) return true;
    if (e.kind === 'postgres' && e.code === '53100') return true;
    const meta = e.meta?.driverAdapterError?.cause;
    if (meta && meta !== e && isDiskFull(meta)) return true;
    if (/database or disk is full|SQLITE_FULL|No space left on device|could not extend file/.test(String(e.message ?? ''))) return true;
  }
  return false;
}

/** Whether the database's disk was full lately, for /healthz. */
export class DiskFullState {
  private lastFullAt = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** The error as the API answers it when it is a full disk (and remembers it), else undefined. */
  classify(error: unknown): ApiError | undefined {
    if (!isDiskFull(error)) return undefined;
    this.lastFullAt = this.now();
    return new ApiError('ERR_SERVICE_507', 'the database\'s disk is full, so nothing can be written; retry once the operator has freed space (reads still work)', {}, { 'Retry-After': '30' });
  }

  /** A write committed: there is space again. */
  committed() {
    this.lastFullAt = 0;
  }

  /** When the disk was last found full, while that is still reported; else undefined. */
  fullSince(): Date | undefined {
    return this.lastFullAt && this.now() - this.lastFullAt < FULL_REPORTED_MS ? new Date(this.lastFullAt) : undefined;
  }
}

/** /healthz's body while the disk is reported full: the database answers, but nothing can be written. */
export const diskFullHealth = (state: DiskFullState) => ({ status: 'unavailable', database: 'ok', storage: 'full', storage_full_since: state.fullSince()?.toISOString() });
