/**
 * What the PostgreSQL adapter's own suites share (postgres.test.ts, postgres.statements.test.ts): they run only
 * where the server answers, each test in a database of its own, and what a test opened is stopped and closed
 * after it even when it failed, so a failed case leaves no connection or worker behind to break the next.
 */
import { afterEach, beforeEach, it } from 'vitest';
import type { Store, Worker } from '@statusq/core';
import { connect, type PostgresStore, type PostgresStoreOptions } from '../index.js';
import { createTestDatabase, databasesRequired, dropTestDatabase, postgresUnavailable } from '../testing.js';

const unavailable = await postgresUnavailable();

/**
 * Registers `suite` where the server answers. Elsewhere one test takes its place: failing with the reason when
 * STATUSQ_REQUIRE_DATABASES=1, else skipped with `[needs postgres]`, `what` and the reason in its title.
 */
export function whenPostgresAnswers(what: string, suite: () => void): void {
  if (unavailable !== null) {
    if (databasesRequired()) {
      it('PostgreSQL server is reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
        throw new Error(unavailable);
      });
    } else {
      it.skip(`[needs postgres] ${what}: ${unavailable}`, () => undefined);
    }
  } else {
    suite();
  }
}

/** The running test's database, and what it opened there. */
export interface TestDatabase {
  /** The URL of the running test's database. */
  url(): string;
  /** A store on that database (with `options`), closed after the test. */
  store(options?: Omit<PostgresStoreOptions, 'connectionString'>): Promise<PostgresStore>;
  /** Stores the test opened by itself: closed after it. */
  opened: Store[];
  /** Workers the test started: stopped after it, before the stores close. */
  running: Worker[];
}

/** For a describe block: each of its tests gets a database of its own, dropped after it once its workers stopped and its stores closed. */
export function databaseEachTest(): TestDatabase {
  let url: string | undefined;
  const opened: Store[] = [];
  const running: Worker[] = [];
  beforeEach(async () => {
    url = await createTestDatabase();
  });
  afterEach(async () => {
    for (const w of running.splice(0)) await w.stop(100).catch(() => undefined);
    for (const s of opened.splice(0)) await s.close().catch(() => undefined);
    if (url !== undefined) await dropTestDatabase(url);
    url = undefined;
  });
  const current = (): string => {
    if (url === undefined) throw new Error('no test database: url() and store() are for a running test');
    return url;
  };
  return {
    url: current,
    store: async (options = {}) => {
      const s = await connect(current(), options);
      opened.push(s);
      return s;
    },
    opened,
    running,
  };
}
