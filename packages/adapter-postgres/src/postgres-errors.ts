import { StoreError } from '@statusq/core/adapter';

/** Node socket errors that mean the connection (or the server) is gone. */
const SOCKET_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED']);

/**
 * pg's own messages for a client whose connection died or was closed under it, or that gave up waiting for one
 * (its connect timeout, or a `query_timeout` given in the URL).
 */
const LOST_MESSAGE =
  /Connection terminated|connection error and is not queryable|Client was closed and is not queryable|timeout exceeded when trying to connect|timeout expired|Query read timeout|Connection ended|read ECONNRESET/i;

/** A hot standby's own wording for what it cannot do while it replays the primary's WAL. */
const DURING_RECOVERY = /during recovery/i;

/**
 * The one place PostgreSQL's native errors become StoreError kinds; the SQLSTATE (or Node error code) is kept
 * as `nativeCode`.
 * - 40001 serialization_failure, 40P01 deadlock_detected, 55P03 lock_not_available: WriteConflict (the
 *   transaction was rolled back; try again).
 * - 08xxx connection exceptions, 57P01/57P02/57P03 (admin shutdown, crash shutdown, cannot connect now),
 *   53300 too_many_connections, socket errors, pg's "Connection terminated" and its timeouts: ConnectionLost
 *   (the pool replaces the client; the next call works again).
 * - 23505 unique_violation: UniqueViolation.
 * - 25006 read_only_sql_transaction: ReadOnly, the worker's bounded wait for a failover. Both ways a server
 *   refuses writes answer it: a hot standby (`cannot execute UPDATE in a read-only transaction`, also for
 *   SELECT ... FOR UPDATE and nextval) and `default_transaction_read_only = on` (a primary fenced during a
 *   switchover, or set by an operator). A standby's other refusals (`cannot execute LOCK TABLE during
 *   recovery`, 0A000 / 55000 naming recovery) are ReadOnly as well.
 * - Any other SQLSTATE: Unknown.
 */
export function toStoreError(error: unknown): unknown {
  if (error instanceof StoreError) return error;
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  if (typeof code === 'string') {
    if (code === '40001' || code === '40P01' || code === '55P03') {
      return new StoreError('WriteConflict', `PostgreSQL write conflict: ${message}`, code, { cause: error });
    }
    if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300' || SOCKET_CODES.has(code)) {
      return new StoreError('ConnectionLost', `PostgreSQL connection lost: ${message}`, code, { cause: error });
    }
    if (code === '25006' || ((code === '0A000' || code === '55000') && DURING_RECOVERY.test(message))) {
      return new StoreError('ReadOnly', `the PostgreSQL server is read-only (a hot standby, or a failover in progress; check pg_is_in_recovery() and default_transaction_read_only): ${message}`, code, { cause: error });
    }
    if (code === '23505') return new StoreError('UniqueViolation', `unique constraint violated: ${message}`, code, { cause: error });
    if (/^[0-9A-Z]{5}$/.test(code)) return new StoreError('Unknown', `PostgreSQL error: ${message}`, code, { cause: error });
  }
  if (error instanceof Error && LOST_MESSAGE.test(message)) {
    return new StoreError('ConnectionLost', `PostgreSQL connection lost: ${message}`, 'CONNECTION_TERMINATED', { cause: error });
  }
  return error;
}

/**
 * Whether `error` is the server refusing writes. The store throws the client away rather than pooling it:
 * after a failover the old primary (now a standby, or fenced read-only) keeps every pooled session, and only a
 * new connection reaches the new primary behind the same address (a DNS name, a VIP, a pgbouncer).
 */
export function isReadOnlyRefusal(error: unknown): boolean {
  const mapped = toStoreError(error);
  return mapped instanceof StoreError && mapped.kind === 'ReadOnly';
}

/** Whether the client that raised `error` must be thrown away rather than returned to the pool. */
export function isConnectionError(error: unknown): boolean {
  const mapped = toStoreError(error);
  return mapped instanceof StoreError && mapped.kind === 'ConnectionLost';
}

/**
 * Whether the server refused a named prepared statement itself, before running it, so the same statement
 * unnamed is safe to send at once:
 * - 26000 invalid_sql_statement_name (`prepared statement "..." does not exist`) and 42P05
 *   duplicate_prepared_statement: the session behind the connection is not the one that prepared it, as
 *   behind a transaction-mode pooler that does not track prepared statements (PgBouncer before 1.21, or
 *   with max_prepared_statements = 0), or something ran DEALLOCATE on it;
 * - 0A000 `cached plan must not change result type`: the table changed shape (ALTER TABLE) under a
 *   prepared `RETURNING *`, which PostgreSQL will not re-plan into different columns.
 */
export function refusesPreparedStatement(error: unknown): boolean {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  if (code === '26000' || code === '42P05') return true;
  return code === '0A000' && error instanceof Error && /cached plan must not change result type/i.test(error.message);
}
