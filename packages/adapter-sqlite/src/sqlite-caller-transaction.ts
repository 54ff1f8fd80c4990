/**
 * Enqueue in the application's own SQLite transaction (Store.runnerFor): on a knex transaction, or on the
 * application's better-sqlite3 Database while it is inside BEGIN ... COMMIT. Recognised by shape, so an
 * application's own copy of better-sqlite3 or knex works too.
 */
import { ConfigError, KNEX_PLACEHOLDER, callerRunner, integerIdOf, knexTransactionOf, unrecognisedHandle, type CallerRunner, type ExecResult, type Row } from '@statusq/core/adapter';
import { toStoreError } from './sqlite-errors.js';
import { runPrepared, type PreparedSqlite } from './sqlite-statements.js';

const ACCEPTED = 'a knex transaction (trx) on SQLite, or a better-sqlite3 Database inside a transaction (BEGIN ... COMMIT)';

interface BetterSqliteDatabase {
  prepare(sql: string): PreparedSqlite;
  readonly inTransaction: boolean;
  readonly open: boolean;
}

function isBetterSqlite(handle: unknown): handle is BetterSqliteDatabase {
  if (typeof handle !== 'object' || handle === null) return false;
  const db = handle as Partial<Record<keyof BetterSqliteDatabase, unknown>>;
  return typeof db.prepare === 'function' && typeof db.inTransaction === 'boolean' && typeof db.open === 'boolean';
}

/** See the file comment; anything else is a ConfigError. */
export function sqliteRunnerFor(handle: unknown): CallerRunner {
  const raw = knexTransactionOf(handle, 'sqlite3');
  if (raw) return callerRunner(async (statement) => fromKnex(await raw(statement.sql, statement.params)), toStoreError, { placeholder: KNEX_PLACEHOLDER });
  if (!isBetterSqlite(handle)) throw unrecognisedHandle(handle, ACCEPTED);
  const db = handle;
  if (!db.inTransaction) throw new ConfigError('enqueue: the better-sqlite3 Database has no open transaction; run BEGIN on it first (and COMMIT after enqueue)');
  return callerRunner(async (statement) => {
    // db.transaction(fn) commits when fn returns and cannot await: a row after the first would land outside it.
    if (!db.inTransaction) throw new ConfigError('enqueue: the better-sqlite3 transaction ended while enqueue ran; db.transaction(fn) cannot await, use BEGIN ... COMMIT around the await');
    return ids(runPrepared(db.prepare(statement.sql), statement.params));
  }, toStoreError);
}

/** knex's raw result on SQLite: the rows of a statement that returns rows, else the driver's run result. */
function fromKnex(result: unknown): ExecResult {
  if (Array.isArray(result)) return ids({ rows: result as Row[], affected: result.length });
  return { rows: [], affected: Number((result as { changes?: unknown } | undefined)?.changes ?? 0) };
}

/** An application Database with safeIntegers on returns bigints; ids come back as the store reads them, numbers, where exact. */
function ids(result: ExecResult): ExecResult {
  for (const row of result.rows) {
    const id = row.id;
    if (typeof id === 'bigint') row.id = integerIdOf(id);
  }
  return result;
}
