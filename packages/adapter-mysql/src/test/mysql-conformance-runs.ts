/**
 * The shared conformance suite on MySQL/MariaDB as this package's test files run it, with the native
 * skip-locked claim (the default on MySQL >= 8.0.1 and MariaDB >= 10.6) or the portable conditional-update
 * claim forced at the adapter (`?claimStrategy=conditional-update`, the fallback for older servers). Every
 * test gets its own database. The outage cases (a restart, every connection killed) run on a private MariaDB
 * server of their own (test/private-mariadb.ts), never on the shared one. Child processes import the built
 * adapter (dist/index.js), so build first.
 */
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import { routeThrough, runConformance, type ConformanceGroup, type ConformanceOptions } from '@statusq/conformance';
import type { MysqlStore } from '../index.js';
import { mysqlConformance } from '../testing.js';
import { createDatabase, dropDatabase } from './mysql-test-db.js';
import { startPrivateMariadb } from './private-mariadb.js';

const adapterModule = fileURLToPath(new URL('../../dist/index.js', import.meta.url));

export type MysqlClaimStrategy = 'native' | 'conditional-update';

export function mysqlConformanceRun(strategy: MysqlClaimStrategy, groups: readonly ConformanceGroup[], more: Partial<ConformanceOptions> = {}): void {
  runConformance({
    ...mysqlConformance,
    name: `mysql, ${strategy} claim${more.claimState === 'beside' ? ', claim state beside the table' : ''}`,
    adapterModule,
    url: () => createDatabase(`claimStrategy=${strategy}`),
    groups,
    dropDatabase,
    disposableServer: () => startPrivateMariadb(`claimStrategy=${strategy}`),
    throughProxy: (url, { connectTimeoutMs, queryTimeoutMs }) =>
      routeThrough(url, 3306, { connectTimeout: String(connectTimeoutMs), queryTimeout: String(queryTimeoutMs) }),
    // The fallback runs the same cases at half the job counts (still thousands of racing claims), which
    // keeps the whole MySQL suite within a few minutes on a 2-core machine.
    scale: strategy === 'native' ? 1 : 0.5,
    // The 32-worker race runs where SKIP LOCKED keeps it fast; the fallback races at the default size.
    ...(strategy === 'native' && {
      raceScale: {
        workers: 32,
        jobs: 10_000,
        check: ({ strategy: workerStrategy, jobs, stores }) => {
          if (workerStrategy !== 'native') return;
          // The store never re-runs a deadlock or lock wait timeout (core's retry policy does); it counts
          // them, and there must not have been a storm of them.
          const deadlocks = stores.reduce((n, s) => n + (s as MysqlStore).stats.deadlocks, 0);
          const timeouts = stores.reduce((n, s) => n + (s as MysqlStore).stats.lockWaitTimeouts, 0);
          console.info(`[mysql] ${jobs} jobs: ${deadlocks} deadlocks (retried by the worker), ${timeouts} lock wait timeouts`);
          expect((deadlocks / jobs) * 1000).toBeLessThan(1);
          expect(timeouts).toBe(0);
        },
      },
    }),
    ...more,
  });
}
