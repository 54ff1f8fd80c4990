/**
 * What tests of statusq on SQLite use (`@statusq/adapter-sqlite/testing`): the conformance suite's fixture
 * tables and plan reader, and `sqliteConformance`, everything `runConformance` needs from this adapter, so
 * that a project's own conformance file is `runConformance(sqliteConformance)`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { connect } from './index.js';
import { sqliteFixtures, sqliteQueryPlans } from './sqlite-fixtures.js';

export { sqliteFixtures, sqliteQueryPlans };

export const sqliteConformance = {
  name: 'sqlite',
  /** This package's entry, which the suite's child processes import. */
  adapterModule: fileURLToPath(new URL('./index.js', import.meta.url)),
  /** Every test gets its own database file in a fresh temp directory, removed afterwards with its -wal and -shm files. */
  url: () => `sqlite:${join(mkdtempSync(join(tmpdir(), 'statusq-sqlite-')), 'test.db')}`,
  dropDatabase: (url: string) => rmSync(dirname(url.slice('sqlite:'.length)), { recursive: true, force: true }),
  createStore: (url: string) => connect(url),
  fixtures: sqliteFixtures,
  queryPlans: sqliteQueryPlans,
  /** SQLite keeps a VARCHAR(10) value of any length. */
  enforcesTextLength: false,
  writeLock: {
    // Gives up on another process's write lock after 20 ms: the Busy case needs to meet SQLITE_BUSY quickly.
    createImpatientStore: (url: string) => connect(url, { busyTimeoutMs: 20 }),
    take: ['BEGIN IMMEDIATE'],
    release: ['COMMIT'],
    nativeCode: /^SQLITE_BUSY/,
  },
  /** The better-sqlite3 Database enqueue's `transaction` takes (inside BEGIN ... COMMIT). */
  callerConnections: (url: string) => [
    {
      label: 'better-sqlite3 Database',
      open: async () => {
        const db = new Database(url.slice('sqlite:'.length), { timeout: 5000 });
        return {
          handle: db as unknown,
          run: async (sql: string, params: readonly unknown[] = []) => void db.prepare(sql).run(...params),
          close: async () => void db.close(),
        };
      },
    },
  ],
  knexConfig: (url: string) => ({ client: 'better-sqlite3', connection: { filename: url.slice('sqlite:'.length) }, useNullAsDefault: true }),
};
