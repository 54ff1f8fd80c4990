/**
 * The adapter's own suites run only where a MySQL/MariaDB server answers (see mysql-test-databases.ts, which
 * the `./testing` entry publishes): skipped with `[needs mysqlServer]` in every title and the reason printed,
 * or, when STATUSQ_REQUIRE_DATABASES=1 (CI), one failing test that says why. Each test gets a database of its
 * own, and a raw connection to it when it must play a session outside statusq (hold a lock, read a log).
 */
import { afterEach, describe, it } from 'vitest';
import mysql from 'mysql2/promise';
import { TestEnv } from '@statusq/conformance';
import { connect, optionsFromUrl } from '../index.js';
import { createDatabase, dropDatabase, mysqlUnavailable } from '../mysql-test-databases.js';
import { mysqlFixtures } from '../testing.js';

export { BASE_URL, adminQuery, createDatabase, dropDatabase, urlFor } from '../mysql-test-databases.js';

const REQUIRED = process.env.STATUSQ_REQUIRE_DATABASES === '1';

export const unreachable = await mysqlUnavailable();

/**
 * Registers `body` under `title` when the server is reachable. Otherwise: skipped, with `[needs
 * mysqlServer]` in every title and the reason printed; or, when STATUSQ_REQUIRE_DATABASES=1, one failing
 * test that says why.
 */
export function mysqlSuite(title: string, body: () => void): void {
  if (unreachable === null) {
    describe(title, body);
  } else if (REQUIRED) {
    describe(title, () => {
      it('needs a reachable MySQL/MariaDB server (STATUSQ_REQUIRE_DATABASES=1)', () => {
        throw new Error(unreachable!);
      });
    });
  } else {
    console.warn(`skipping ${title}: ${unreachable}`);
    describe.skip(`${title} [needs mysqlServer]`, body);
  }
}

/**
 * For a test file's top level: `fresh()` gives each test a TestEnv on a database of its own, which afterEach
 * disposes and drops, failing a passed test that left a store open or a worker running.
 */
export function mysqlEnvEachTest(): () => Promise<TestEnv> {
  let env: TestEnv | undefined;
  afterEach(async (context) => {
    const test = env;
    env = undefined;
    if (!test) return;
    const leaks = context.task.result?.state === 'pass' ? test.leaks() : [];
    await test.dispose();
    await dropDatabase(test.url);
    if (leaks.length > 0) throw new Error(`leak check failed: ${leaks.join('; ')}`);
  });
  return async () => {
    const url = await createDatabase();
    env = new TestEnv({ name: 'mysql', adapterModule: new URL('../../dist/index.js', import.meta.url).href, url: () => url, createStore: (u) => connect(u), fixtures: mysqlFixtures }, url);
    return env;
  };
}

/** A raw mysql2 connection to the test database, outside any store (for provoking conflicts). */
export async function rawConnection(url: string): Promise<mysql.Connection> {
  const { host, port, user, password, database } = optionsFromUrl(url);
  return mysql.createConnection({ host, port, user, password, database });
}
