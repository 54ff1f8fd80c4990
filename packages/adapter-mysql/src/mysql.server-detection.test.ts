/**
 * Version and capability detection on real servers (issue 18, point 4), and the wire protocol statusq speaks.
 *
 * MySQL 8 cannot be installed on these machines, and neither can a MariaDB older than 10.6; but MariaDB reports
 * whatever version string `--version=...` gives it (MariaDB >= 10.2.1), so a private server that says it is
 * 10.5 drives the adapter down the path of a server without SKIP LOCKED for real: the store must pick the
 * conditional-update claim on its own and the conformance race must still run every job exactly once.
 *
 * Vitess-based hosts (PlanetScale) reject the binary protocol's prepared statements; statusq never prepares one
 * (every statement is COM_QUERY with client-side escaping, mysql2's `query`), which the server's own counters show.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker, initTable } from '@statusq/core';
import { runConformance } from '@statusq/conformance';
import { connect, type MysqlStore } from './index.js';
import { mysqlConformance } from './testing.js';
import { mysqlSuite } from './test/mysql-test-db.js';
import { startPrivateMariadb, type PrivateMariadb } from './test/private-mariadb.js';

const STARTUP_MS = 60_000;

/** A private server for the describe block around it: started before its tests, stopped after. */
function privateServerFor(query: string, serverArgs: string[]): () => PrivateMariadb {
  let server: PrivateMariadb | undefined;
  beforeAll(async () => {
    server = await startPrivateMariadb(query, { serverArgs });
  }, STARTUP_MS);
  afterAll(() => server?.stop(), STARTUP_MS);
  return () => {
    if (!server) throw new Error('the private MariaDB server did not start');
    return server;
  };
}

mysqlSuite('mysql server detection', () => {
  describe('a server that reports MariaDB 10.5 (no SKIP LOCKED)', () => {
    const server = privateServerFor('', ['--version=10.5.99-MariaDB-statusq-test']);

    it('is detected as such, and the store chooses the conditional-update claim by itself', async () => {
      const store = (await connect(server().url)) as MysqlStore;
      try {
        expect(store.server).toMatchObject({ flavor: 'mariadb', major: 10, minor: 5, skipLocked: false });
        expect(store.claimStrategy).toBe('conditional-update');
        expect(store.nativeClaim).toBeUndefined();
        expect(store.capabilities).toMatchObject({ batchClaim: false, skipLocked: false });
        const checks = await store.inspection.serverChecks!();
        expect(checks.find((c) => c.name === 'version')).toMatchObject({ status: 'warn', fix: 'MariaDB 10.6 or later' });
      } finally {
        await store.close();
      }
    });

    runConformance({
      ...mysqlConformance,
      name: 'mysql on a server reporting 10.5, conditional-update claim',
      url: () => server().createDatabase(),
      dropDatabase: (url) => server().dropDatabase(url),
      groups: ['state-machine', 'race'],
      scale: 0.5,
    });
  });

  describe('a server older than statusq supports', () => {
    const server = privateServerFor('', ['--version=10.1.48-MariaDB-statusq-test']);

    it('is refused at open with an Unsupported error naming the version needed, and no connection is left open', async () => {
      const error = await connect(server().url).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toMatchObject({ kind: 'Unsupported', nativeCode: 'SERVER_VERSION', check: { name: 'version', status: 'fail', fix: 'MariaDB 10.6 or later (10.2.2 at the least)' } });
      expect(String((error as Error).message)).toContain('needs MariaDB 10.2.2 or later');
      const rows = (await server().admin("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE USER = 'root' AND ID <> CONNECTION_ID()")) as Array<{ n: number }>;
      expect(Number(rows[0]!.n)).toBe(0);
    });
  });

  describe('the wire protocol', () => {
    const server = privateServerFor('', []);

    it('enqueue, claims, settles, a retry, counts and the doctor\'s reads never prepare a statement (text protocol only)', async () => {
      const url = await server().createDatabase();
      const statusCounters = async () => {
        const rows = (await server().admin("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_execute', 'Questions')")) as Array<{ Variable_name: string; Value: string }>;
        return Object.fromEntries(rows.map((r) => [r.Variable_name, Number(r.Value)]));
      };
      const before = await statusCounters();
      const store = (await connect(url)) as MysqlStore;
      try {
        await initTable(store, 'jobs');
        const queue = await Queue.open(store, { table: 'jobs' });
        await queue.enqueue(Array.from({ length: 200 }, (_, n) => ({ n })));
        let failedOnce = false;
        const worker = await Worker.create({
          store,
          table: { table: 'jobs' },
          concurrency: 8,
          exitWhenEmpty: true,
          maxAttempts: 2,
          retryDelayMs: 0,
          leaseMs: 30_000,
          handler: async (job) => {
            if ((job.payload as { n: number }).n === 7 && !failedOnce) {
              failedOnce = true;
              throw new Error('first attempt fails, so a retry is scheduled');
            }
            return { ok: true };
          },
        });
        const counters = await worker.run();
        expect(counters.completed).toBe(200);
        expect(await queue.counts()).toMatchObject({ pending: 0, processing: 0, done: 200 });
        await queue.monitoringCounts();
        await store.inspection.serverFacts();
        await store.inspection.serverChecks!();
      } finally {
        await store.close();
      }
      const after = await statusCounters();
      // The run sent hundreds of statements; not one of them through the binary protocol.
      expect(after.Questions! - before.Questions!).toBeGreaterThan(200);
      expect(after.Com_stmt_prepare! - before.Com_stmt_prepare!).toBe(0);
      expect(after.Com_stmt_execute! - before.Com_stmt_execute!).toBe(0);
      await server().dropDatabase(url);
    });
  });
});
