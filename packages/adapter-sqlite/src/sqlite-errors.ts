import { StoreError } from '@statusq/core/adapter';

/**
 * The one place SQLite's native errors become StoreError kinds. The native code (SQLITE_BUSY, ...) is kept.
 * SQLITE_BUSY/LOCKED mean another connection holds the write lock beyond the busy timeout: the worker
 * simply tries again. SQLITE_READONLY and its extended codes (a file or directory the process may not
 * write, a database opened read-only, a WAL file it cannot lock or create): ReadOnly, which the worker waits
 * for a bounded time and then reports (a file made writable again within it is picked up).
 */
export function toStoreError(error: unknown): unknown {
  if (error instanceof StoreError) return error;
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  const message = error instanceof Error ? error.message : String(error);
  if (typeof code === 'string') {
    if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return new StoreError('Busy', `SQLite is busy: ${message}`, code, { cause: error });
    if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
      return new StoreError('UniqueViolation', `unique constraint violated: ${message}`, code, { cause: error });
    }
    if (code.startsWith('SQLITE_READONLY')) return new StoreError('ReadOnly', `the SQLite database is read-only (check the file's and its directory's permissions): ${message}`, code, { cause: error });
    if (code.startsWith('SQLITE_CANTOPEN') || code.startsWith('SQLITE_IOERR') || code === 'SQLITE_NOTADB') {
      return new StoreError('ConnectionLost', `SQLite database unavailable: ${message}`, code, { cause: error });
    }
    if (code.startsWith('SQLITE_')) return new StoreError('Unknown', `SQLite error: ${message}`, code, { cause: error });
  }
  if (error instanceof TypeError && /database connection is not open/i.test(message)) {
    return new StoreError('ConnectionLost', 'the SQLite connection is closed', 'CLOSED', { cause: error });
  }
  return error;
}
