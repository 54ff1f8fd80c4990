import { raceDeadline } from './deadline.js';
import { splitTableName, validateTableName } from '../protocol/identifiers.js';
import type { ExecResult, Row, Statement } from './store.js';
import type { ColumnInfo } from '../protocol/columns.js';

/**
 * What a server adapter says about one pooled connection of its driver, so that borrowing it for a call
 * (withPooledConnection) and a transaction on it (inTransaction) are written once for every adapter.
 */
export interface PooledConnectionOps<C> {
  /** Gives the connection back to its pool, or destroys it when `lost`: it must never serve another call. */
  release(connection: C, lost: boolean): void;
  /** Cuts the connection's socket at once (a frozen network never delivers a polite goodbye). */
  cut(connection: C): void;
  /** Whether an error means the connection itself is gone. */
  isLost(error: unknown): boolean;
  /** The adapter's one mapping of native errors to StoreError kinds. */
  mapError(error: unknown): unknown;
  /** What a call past its deadline rejects with (a StoreError of kind ConnectionLost naming the deadline). */
  timeoutError(deadlineMs: number): Error;
}

/**
 * Runs `body` on a borrowed connection within `deadlineMs`, then gives the connection back exactly once: to
 * the pool after success or an ordinary error, destroyed after an error that lost it. Past the deadline the
 * socket is cut and the connection destroyed before the call rejects: what was sent may still be answered,
 * and that answer must never reach another call.
 */
export function withPooledConnection<C, T>(connection: C, body: (connection: C) => Promise<T>, deadlineMs: number, ops: PooledConnectionOps<C>): Promise<T> {
  let released = false;
  const release = (lost: boolean) => {
    if (released) return;
    released = true;
    ops.release(connection, lost);
  };
  const call = (async () => {
    try {
      const result = await body(connection);
      release(false);
      return result;
    } catch (error) {
      release(ops.isLost(error));
      throw ops.mapError(error);
    }
  })();
  return raceDeadline(call, deadlineMs, () => {
    ops.cut(connection);
    release(true);
    return ops.timeoutError(deadlineMs);
  });
}

/**
 * `begin`, `body`, COMMIT on one connection; on failure ROLLBACK and rethrow. A connection that cannot even
 * roll back is dead: its error is the one thrown, so the caller destroys the connection instead of pooling
 * one with a transaction still open.
 */
export async function inTransaction<T>(query: (sql: string) => Promise<unknown>, body: () => Promise<T>, isLost: (error: unknown) => boolean, begin = 'BEGIN'): Promise<T> {
  await query(begin);
  try {
    const result = await body();
    await query('COMMIT');
    return result;
  } catch (error) {
    if (isLost(error)) throw error;
    const rollbackError = await query('ROLLBACK').then(
      () => null,
      (e: unknown) => e,
    );
    throw rollbackError !== null && isLost(rollbackError) ? rollbackError : error;
  }
}

/**
 * Runs statements one after another; `position.failing` is the index of the one that failed (undefined
 * once all ran), for `atStatement` after the adapter has mapped the error.
 */
export async function runInOrder(statements: readonly Statement[], run: (statement: Statement) => Promise<ExecResult>, position: { failing?: number | undefined }): Promise<ExecResult[]> {
  const results: ExecResult[] = [];
  for (const [i, statement] of statements.entries()) {
    position.failing = i;
    results.push(await run(statement));
  }
  position.failing = undefined;
  return results;
}

/**
 * `Store.describeTable` from a catalog query: `query` selects one row per column of table `name` in `schema`
 * (null: the connection's default), in column order; `toColumn` reads one. Null when the table does not exist.
 */
export async function describeFromCatalog(
  runner: { execute(statement: Statement): Promise<ExecResult> },
  table: string,
  query: (schema: string | null, name: string) => Statement,
  toColumn: (row: Row) => ColumnInfo,
): Promise<ColumnInfo[] | null> {
  const [schema, name] = splitTableName(validateTableName(table));
  const { rows } = await runner.execute(query(schema, name));
  return rows.length === 0 ? null : rows.map(toColumn);
}
