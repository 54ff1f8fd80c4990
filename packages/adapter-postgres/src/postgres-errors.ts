import { StoreError } from '@statusq/core/adapter';

/** Node socket errors that mean the connection (or the server) is gone. */
const SOCKET_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ECONNABORTED']);

/**
 * pg's own messages for a client whose connection died or was closed under it, or that gave up waiting for one
 * (its connect timeout, or a `query_timeout` given in the URL).
 */
const LOST_MESSAGE =
  /Connection terminated|connection error and is not queryable|Client was closed and is not queryable|timeout exceeded when trying to connect|timeout expired|Query read timeout|Connection ended|read ECONNRESET/i;

/**
 * The one place PostgreSQL's native errors become StoreError kinds; the SQLSTATE (or Node error code) is kept
 * as `nativeCode`.
 * - 40001 serialization_failure, 40P01 deadlock_detected, 55P03 lock_not_available: WriteConflict (the
 *   transaction was rolled back; try again).
 * - 08xxx connection exceptions, 57P01/57P02/57P03 (admin shutdown, crash shutdown, cannot connect now),
 *   53300 too_many_connections, socket errors, pg's "Connection terminated" and its timeouts: ConnectionLost
 *   (the pool replaces the client; the next call works again).
 * - 23505 unique_violation: UniqueViolation.
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
    if (code === '23505') return new StoreError('UniqueViolation', `unique constraint violated: ${message}`, code, { cause: error });
    if (/^[0-9A-Z]{5}$/.test(code)) return new StoreError('Unknown', `PostgreSQL error: ${message}`, code, { cause: error });
  }
  if (error instanceof Error && LOST_MESSAGE.test(message)) {
    return new StoreError('ConnectionLost', `PostgreSQL connection lost: ${message}`, 'CONNECTION_TERMINATED', { cause: error });
  }
  return error;
}

/** Whether the client that raised `error` must be thrown away rather than returned to the pool. */
export function isConnectionError(error: unknown): boolean {
  const mapped = toStoreError(error);
  return mapped instanceof StoreError && mapped.kind === 'ConnectionLost';
}
