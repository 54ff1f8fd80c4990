/**
 * The shared conformance suite on PostgreSQL as this package's test files run it: every test gets its own
 * database (CREATE DATABASE statusq_<random>, dropped afterwards with any connection left on it). The server
 * is STATUSQ_POSTGRES_URL (default postgres://postgres:postgres@127.0.0.1:5432/postgres). Unreachable: the
 * suite skips, or fails when STATUSQ_REQUIRE_DATABASES=1. The outage cases (a restart, every connection
 * killed) run on a private server of their own (test/private-postgres.ts), never on that one; the
 * frozen-network cases reach the test database through a TCP proxy of their own. Child processes import the
 * built adapter (dist/index.js): build first.
 */
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { routeThrough, runConformance, type ConformanceGroup, type ConformanceOptions } from '@statusq/conformance';
import { connect } from '../index.js';
import { databasesRequired, postgresConformance, postgresUnavailable } from '../testing.js';
import { startPrivatePostgres } from './private-postgres.js';

const unavailable = await postgresUnavailable();

export function postgresConformanceRun(groups: readonly ConformanceGroup[], more: Partial<ConformanceOptions> = {}): void {
  if (unavailable === null) {
    runConformance({
      ...postgresConformance,
      ...more,
      adapterModule: fileURLToPath(new URL('../../dist/index.js', import.meta.url)),
      disposableServer: startPrivatePostgres,
      groups,
      raceScale: {
        workers: 32,
        jobs: 10_000,
        concurrency: 8,
        // One pooled connection per worker (plus its listening one): 32 default pools would pass max_connections.
        createStore: (url) => connect(url, { maxConnections: 1 }),
        check: ({ strategy, workers, results }) => {
          // With SKIP LOCKED no worker waits out another's lock, so most of the 32 get work.
          if (strategy === 'native') expect(results.filter((c) => c.completed > 0).length).toBeGreaterThan(workers / 2);
        },
      },
      throughProxy: (url, { connectTimeoutMs, queryTimeoutMs }) =>
        routeThrough(url, 5432, { connectTimeout: String(connectTimeoutMs), queryTimeout: String(queryTimeoutMs) }),
    });
  } else if (databasesRequired()) {
    it('PostgreSQL server is reachable (STATUSQ_REQUIRE_DATABASES=1)', () => {
      throw new Error(unavailable);
    });
  } else {
    it.skip(`[needs postgres] conformance suite: ${unavailable}`, () => undefined);
  }
}
