/**
 * What tests of statusq on MySQL/MariaDB use (`@statusq/adapter-mysql/testing`): the conformance suite's
 * fixture tables and plan reader, throwaway databases, and `mysqlConformance`, everything `runConformance`
 * needs from this adapter: a project's own conformance file is `runConformance(mysqlConformance)`.
 */
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import mysqlCallbacks from 'mysql2';
import type { SqlValue } from '@statusq/core/adapter';
import { connect, optionsFromUrl } from './index.js';
import { mysqlFixtures, mysqlQueryPlans } from './mysql-fixtures.js';
import { createDatabase, dropDatabase } from './mysql-test-databases.js';

export { mysqlFixtures, mysqlQueryPlans };
export { BASE_URL, adminQuery, createDatabase, dropDatabase, mysqlUnavailable, urlFor } from './mysql-test-databases.js';

export const mysqlConformance = {
  name: 'mysql',
  /** This package's entry, which the suite's child processes import. */
  adapterModule: fileURLToPath(new URL('./index.js', import.meta.url)),
  /** Each test in a database of its own on STATUSQ_MYSQL_URL's server, dropped afterwards. */
  url: () => createDatabase(),
  dropDatabase: (url: string) => dropDatabase(url),
  createStore: (url: string) => connect(url),
  fixtures: mysqlFixtures,
  queryPlans: mysqlQueryPlans,
  /** The mysql2 handles enqueue's `transaction` takes: a connection of each API, and a pool's connection. */
  callerConnections: (url: string) => [
    {
      label: 'mysql2/promise connection',
      open: async () => {
        const conn = await mysql.createConnection(connectionOptions(url));
        return { handle: conn as unknown, run: async (sql: string, params: readonly SqlValue[] = []) => void (await conn.query(sql, [...params])), close: () => conn.end() };
      },
    },
    {
      label: 'mysql2/promise pool connection',
      open: async () => {
        const pool = mysql.createPool({ ...connectionOptions(url), connectionLimit: 1 });
        const conn = await pool.getConnection();
        return {
          handle: conn as unknown,
          run: async (sql: string, params: readonly SqlValue[] = []) => void (await conn.query(sql, [...params])),
          close: async () => {
            conn.release();
            await pool.end();
          },
        };
      },
    },
    {
      label: 'mysql2 callback connection',
      open: async () => {
        const conn = mysqlCallbacks.createConnection(connectionOptions(url));
        return {
          handle: conn as unknown,
          run: (sql: string, params: readonly SqlValue[] = []) => new Promise<void>((resolve, reject) => conn.query(sql, [...params], (error) => (error ? reject(error) : resolve()))),
          close: () => new Promise<void>((resolve) => conn.end(() => resolve())),
        };
      },
    },
  ],
  knexConfig: (url: string) => ({ client: 'mysql2', connection: connectionOptions(url), pool: { min: 0, max: 2 } }),
};

/** The server, credentials and database of a test database's URL, without statusq's own URL parameters. */
function connectionOptions(url: string) {
  const { host, port, user, password, database } = optionsFromUrl(url);
  return { host, port, user, password, database };
}
