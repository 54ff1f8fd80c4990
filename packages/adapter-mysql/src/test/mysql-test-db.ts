/**
 * The adapter's own suites run only where a MySQL/MariaDB server answers (see mysql-test-databases.ts, which
 * the `./testing` entry publishes): skipped with `[needs mysqlServer]` in every title and the reason printed,
 * or, when STATUSQ_REQUIRE_DATABASES=1 (CI), one failing test that says why.
 */
import { describe, it } from 'vitest';
import { mysqlUnavailable } from '../mysql-test-databases.js';

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
