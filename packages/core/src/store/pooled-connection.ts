import { raceDeadline } from './deadline.js';
import { splitTableName, validateTableName } from '../protocol/identifiers.js';
import type { ExecResult, LentTransaction, Row, Statement, StatementRunner } from './store.js';
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

/** How a server adapter begins, ends and runs statements on one of its pooled connections (lendPooledConnection). */
export interface LendingOps<C> extends PooledConnectionOps<C> {
  /** Runs one SQL text without parameters (BEGIN, COMMIT, ROLLBACK). */
  query(connection: C, sql: string): Promise<unknown>;
  run(connection: C, statement: Statement): Promise<ExecResult>;
  /** The adapter's BEGIN. Default `BEGIN`. */
  readonly begin?: string;
}

/**
 * Store.lendTransaction on a borrowed connection: `begin`, the body, COMMIT (ROLLBACK when anything failed), and
 * the connection given back exactly once, destroyed when it was lost or cut. Unlike withPooledConnection the body
 * has no deadline: it is the application's code, which its job timeout bounds. Each of the store's own statements
 * has `deadlineMs`, past which the socket is cut (the server then rolls back). A body's own failure reaches the
 * caller as it was thrown; the store's statements' failures go through `ops.mapError`.
 */
export async function lendPooledConnection<C, T>(connection: C, body: (tx: LentTransaction) => Promise<T>, deadlineMs: number, ops: LendingOps<C>): Promise<T> {
  let released = false;
  let lost = false;
  const release = () => {
    if (released) return;
    released = true;
    ops.release(connection, lost);
  };
  const own = async <R>(call: () => Promise<R>): Promise<R> => {
    try {
      return await raceDeadline(call(), deadlineMs, () => {
        ops.cut(connection);
        lost = true;
        return ops.timeoutError(deadlineMs);
      });
    } catch (error) {
      if (ops.isLost(error)) lost = true;
      throw ops.mapError(error);
    }
  };
  const runner: StatementRunner = { execute: (statement) => own(() => ops.run(connection, statement)) };
  try {
    await own(() => ops.query(connection, ops.begin ?? 'BEGIN'));
    let result: T;
    try {
      result = await body({ handle: connection, runner });
    } catch (error) {
      if (ops.isLost(error)) lost = true;
      // A connection that cannot roll back is dropped (lost), which ends the transaction on the server.
      if (!lost) await own(() => ops.query(connection, 'ROLLBACK')).catch(() => undefined);
      throw error;
    }
    await own(() => ops.query(connection, 'COMMIT'));
    return result;
  } finally {
    release();
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
