/**
 * Enqueue in the application's own MySQL/MariaDB transaction (Store.runnerFor): on a knex transaction, or on
 * the mysql2 connection that began it (promise or callback API, a pool's connection too). Recognised by
 * shape, so an application's own copy of mysql2 or knex works too.
 */
import { ConfigError, KNEX_PLACEHOLDER, callerRunner, knexTransactionOf, unrecognisedHandle, type CallerRunner } from '@statusq/core/adapter';
import { toStoreError } from './mysql-errors.js';
import { bindValue, mysqlExecResult } from './mysql-results.js';

const ACCEPTED = 'a knex transaction (trx) on MySQL, or the mysql2 connection that began a transaction (mysql2 or mysql2/promise, a pool connection too)';

/** mysql2's callback connection, which `mysql2/promise` wraps as `.connection`. */
interface Mysql2Connection {
  query(options: { sql: string; values: unknown[] }, callback: (error: unknown, result: unknown) => void): unknown;
}

function record(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;
}

/** The callback connection of a mysql2 connection of either API, or null. */
function mysql2ConnectionOf(handle: unknown): Mysql2Connection | null {
  const outer = record(handle);
  const inner = record(outer?.connection);
  const conn = inner && typeof inner.query === 'function' && 'threadId' in inner ? inner : outer;
  if (!conn || typeof conn.query !== 'function' || typeof conn.beginTransaction !== 'function' || !('threadId' in conn)) return null;
  return conn as unknown as Mysql2Connection;
}

function isMysql2Pool(handle: unknown): boolean {
  const pool = record(handle);
  return pool !== null && typeof pool.getConnection === 'function' && typeof pool.query === 'function';
}

/** See the file comment; anything else is a ConfigError. */
export function mysqlRunnerFor(handle: unknown): CallerRunner {
  const raw = knexTransactionOf(handle, 'mysql');
  if (raw) {
    // knex's raw on mysql2 resolves to mysql2's [result, fields].
    return callerRunner(async (statement) => mysqlExecResult(((await raw(statement.sql, statement.params.map(bindValue))) as unknown[])[0]), toStoreError, { placeholder: KNEX_PLACEHOLDER });
  }
  if (isMysql2Pool(handle)) throw new ConfigError('enqueue: a mysql2 pool runs each query on any of its connections, outside any transaction; pass the connection of pool.getConnection() that began one');
  const conn = mysql2ConnectionOf(handle);
  if (!conn) throw unrecognisedHandle(handle, ACCEPTED);
  const query = (sql: string, values: unknown[]): Promise<unknown> =>
    new Promise((resolve, reject) => {
      conn.query({ sql, values }, (error, result) => (error ? reject(error) : resolve(result)));
    });
  return callerRunner(async (statement) => mysqlExecResult(await query(statement.sql, statement.params.map(bindValue))), toStoreError, {
    // mysql2 keeps no transaction state on the connection, but every OK packet carries the server's status
    // flags: `DO 0` (one round trip, no rows) fetches them, on MySQL and MariaDB alike.
    inTransaction: async () => transactionOpen(await query('DO 0', [])),
    notInTransaction: 'the mysql2 connection has no open transaction, so each row would commit on its own; run BEGIN on it first (and COMMIT after enqueue)',
  });
}

/** SERVER_STATUS_IN_TRANS and SERVER_STATUS_AUTOCOMMIT, of the status flags in a MySQL OK packet. */
const IN_TRANS = 0x0001;
const AUTOCOMMIT = 0x0002;

/**
 * Whether the session's next INSERT waits for a COMMIT, by the status flags of an OK packet: inside BEGIN ...
 * COMMIT, or with autocommit off (its transaction starts with that INSERT).
 */
function transactionOpen(result: unknown): boolean {
  const status = record(result)?.serverStatus;
  if (typeof status !== 'number') throw new ConfigError('enqueue: the mysql2 connection reported no server status, so statusq cannot tell whether it is inside a transaction');
  return (status & IN_TRANS) !== 0 || (status & AUTOCOMMIT) === 0;
}
