import type { JobId, ServerCheck } from './values.js';

/** The brand every statusq error carries: the names of its classes, most derived first. Shared by every copy. */
const ERROR_KINDS = Symbol.for('statusq.error.kinds');

/**
 * Every error statusq raises on purpose is a StatusqError with a stable `code`, so callers (and the CLI,
 * which turns them into one-line messages and exit code 2) can tell bad input from database trouble
 * without parsing messages.
 */
export class StatusqError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    const kinds: string[] = [];
    for (let c: unknown = new.target; typeof c === 'function' && c !== Error; c = Object.getPrototypeOf(c)) kinds.push((c as { name: string }).name);
    Object.defineProperty(this, ERROR_KINDS, { value: kinds, enumerable: false });
  }

  /**
   * `instanceof` that holds across copies of @statusq/core (an adapter resolved to its own copy, two
   * versions in one tree): an error is an instance of a statusq error class when it was built by a class of
   * that name, in any copy. Brand, not prototype.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    const kinds = typeof value === 'object' && value !== null ? (value as Record<symbol, unknown>)[ERROR_KINDS] : undefined;
    return Array.isArray(kinds) && kinds.includes(this.name);
  }
}

/** Invalid configuration: an option out of range, an unknown flag value, a malformed identifier. */
export class ConfigError extends StatusqError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONFIG', message, options);
  }
}

/** The database does not hold what the configuration names: a missing table or column. */
export class SchemaError extends StatusqError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SCHEMA', message, options);
  }
}

/** A status change the state machine does not allow (for example done -> pending). */
export class IllegalTransitionError extends StatusqError {
  readonly from: string;
  readonly to: string;
  constructor(from: string, to: string, cause: string, hint?: string) {
    super('ILLEGAL_TRANSITION', `illegal status transition ${from} -> ${to} (${cause})${hint ? `: ${hint}` : ''}`);
    this.from = from;
    this.to = to;
  }
}

/** A handler module that cannot be used: missing file, no default export, default export not a function. */
export class HandlerError extends StatusqError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('HANDLER', message, options);
  }
}

/** A handler produced something statusq cannot store, such as a result that is not JSON-serialisable. */
export class HandlerResultError extends StatusqError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('HANDLER_RESULT', message, options);
  }
}

/** A job ran past its jobTimeoutMs (`work --job-timeout`). The attempt counts as failed and may be retried. */
export class JobTimeoutError extends StatusqError {
  constructor(message: string) {
    super('JOB_TIMEOUT', message);
  }
}

/**
 * The job's claim is no longer its worker's: its lease was taken over, the row was requeued or cancelled
 * (`cancelled: <reason>` in the message), the job ran past its timeout, or the worker handed it back on stop.
 * ctx.transaction rejects with it after rolling back everything the callback wrote; the row is left as whoever
 * holds it now decides.
 */
export class ClaimLostError extends StatusqError {
  constructor(message: string) {
    super('CLAIM_LOST', message);
  }
}

/**
 * ctx.transaction used where it cannot run: a second time in one job, after the handler returned, with a store that
 * cannot lend a transaction and no knex given, or with something that is not a knex instance. Nothing was written;
 * the row settles as the handler's outcome says.
 */
export class JobTransactionError extends StatusqError {
  constructor(message: string) {
    super('JOB_TRANSACTION', message);
  }
}

/**
 * What went wrong in the database, in terms the worker can act on. Each adapter maps its driver's native
 * errors to these kinds in one file and keeps the native code in `nativeCode`.
 * - Busy: the database is locked by another writer right now (a file database's busy error); try again shortly.
 * - WriteConflict: deadlock, serialization failure or lock wait timeout; the transaction was rolled back.
 * - ConnectionLost: the connection is gone; reconnect and try again.
 * - UniqueViolation: an insert collided with an existing key.
 * - ReadOnly: the server refuses writes for now (a replica, a standby, or a primary a failover turned
 *   read-only); the worker waits a bounded time for it to become writable again.
 * - Unsupported: the server is set up in a way statusq cannot run safely on (the message names the setting
 *   and the fix; `check` is that setting as `statusq doctor` lists it); never retried.
 * - Unknown: anything else; not retried.
 */
export type StoreErrorKind = 'Busy' | 'WriteConflict' | 'ConnectionLost' | 'UniqueViolation' | 'ReadOnly' | 'Unsupported' | 'Unknown';

export class StoreError extends StatusqError {
  readonly kind: StoreErrorKind;
  readonly nativeCode: string | number | undefined;
  /** In a rejected `executeBatch`: which statement failed (0-based), when the adapter could tell. */
  statementIndex: number | undefined = undefined;
  /**
   * Unsupported: the server setting behind the refusal, judged as StoreInspection.serverChecks would judge it
   * (status `fail`, with its fix), so `statusq doctor` can list it although the store never opened.
   */
  readonly check: ServerCheck | undefined;
  constructor(kind: StoreErrorKind, message: string, nativeCode?: string | number, options?: { cause?: unknown; check?: ServerCheck }) {
    super(`STORE_${kind.toUpperCase()}`, message, options && withoutCheck(options));
    this.kind = kind;
    this.nativeCode = nativeCode;
    this.check = options?.check;
  }

  /** Kinds after which the same operation may simply be tried again. */
  get retryable(): boolean {
    return this.kind === 'Busy' || this.kind === 'WriteConflict' || this.kind === 'ConnectionLost';
  }
}

function withoutCheck({ check: _check, ...rest }: { cause?: unknown; check?: ServerCheck }): { cause?: unknown } {
  return rest;
}

/**
 * Records on the error a rejected `executeBatch` throws which of its statements failed, so a caller can name
 * the row behind it (enqueue names the file line). Adapters call it once the error is mapped to a StoreError.
 */
export function atStatement(error: unknown, index: number | undefined): unknown {
  if (error instanceof StoreError && index !== undefined) error.statementIndex = index;
  return error;
}

/**
 * The database rejected a row of `Queue.enqueue`. `kind` and `nativeCode` are the rejection's own; `item` is
 * the rejected item (0-based; undefined when the database did not say which row of its transaction failed),
 * `committed` how many rows earlier transactions committed (0 unless enqueueing in chunks or with keys) and
 * `ids` the ids of the items before it in item order, as enqueue would have returned them (with keys, a
 * duplicate's is the live row's). In the caller's transaction nothing is committed by
 * statusq: `committed` is 0, and the caller rolls its transaction back.
 */
export class EnqueueError extends StoreError {
  readonly item: number | undefined;
  readonly committed: number;
  readonly ids: ReadonlyArray<JobId | null>;
  constructor(message: string, cause: StoreError, item: number | undefined, committed: number, ids: ReadonlyArray<JobId | null> = []) {
    super(cause.kind, message, cause.nativeCode, { cause });
    this.item = item;
    this.committed = committed;
    this.ids = ids;
  }
}

/** Whether `error` is a StoreError from any copy of @statusq/core (the same as `instanceof StoreError`). */
export function isStoreError(error: unknown): error is StoreError {
  return error instanceof StoreError;
}

export function isRetryableStoreError(error: unknown): error is StoreError {
  return error instanceof StoreError && error.retryable;
}

/** A short, single-line description of any thrown value, for `last_error` and logs. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`.replace(/\s+/g, ' ').trim();
  if (typeof error === 'string') return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
