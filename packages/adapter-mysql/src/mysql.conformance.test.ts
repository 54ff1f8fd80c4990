/**
 * The shared conformance suite on MySQL/MariaDB, twice: with the native skip-locked claim (the default on
 * MySQL >= 8.0.1 and MariaDB >= 10.6) and with the portable conditional-update claim forced at the adapter
 * (`?claimStrategy=conditional-update`, the fallback for older servers). Every test gets its own database.
 * The outage cases (a restart, every connection killed) run on a private MariaDB server of their own
 * (test/private-mariadb.ts), never on the shared one. Child processes import the built adapter
 * (dist/index.js), so build first: `npx tsc -p .`.
 */
import { fileURLToPath } from 'node:url';
import { routeThrough, runConformance } from '@statusq/conformance';
import { connect } from './index.js';
import { createDatabase, dropDatabase, mysqlSuite } from './test/mysql-test-db.js';
import { startPrivateMariadb } from './test/private-mariadb.js';

const adapterModule = fileURLToPath(new URL('../dist/index.js', import.meta.url));

mysqlSuite('mysql', () => {
  for (const strategy of ['skip-locked', 'conditional-update'] as const) {
    runConformance({
      name: `mysql, ${strategy} claim`,
      adapterModule,
      url: () => createDatabase(`claimStrategy=${strategy}`),
      createStore: (url) => connect(url),
      dropDatabase,
      disposableServer: () => startPrivateMariadb(`claimStrategy=${strategy}`),
      throughProxy: (url, { connectTimeoutMs, queryTimeoutMs }) =>
        routeThrough(url, 3306, { connectTimeout: String(connectTimeoutMs), queryTimeout: String(queryTimeoutMs) }),
      // The fallback runs the same cases at half the job counts (still thousands of racing claims), which
      // keeps the whole MySQL suite within a few minutes on a 2-core machine.
      scale: strategy === 'skip-locked' ? 1 : 0.5,
    });
  }
});
