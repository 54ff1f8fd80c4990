/**
 * MariaDB Galera's own errors, on a private one-node Galera cluster (Debian's galera-4 provider, wsrep on,
 * started with a new cluster of its own; never the shared server): a transaction aborted by Galera is
 * WriteConflict 1213 and retried like an InnoDB deadlock, and a node that is not ready for clients (1047) is
 * ConnectionLost, so its connection is dropped and the next call connects afresh. The multi-node behaviour
 * (certification conflicts between nodes, a node killed and rejoined) is the Galera section of `pnpm scale`.
 */
import { existsSync } from 'node:fs';
import { freePort } from '@statusq/test-fixtures';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, StoreError, initTable } from '@statusq/core';
import type { StoreWarning } from '@statusq/core/adapter';
import mysql from 'mysql2/promise';
import { connect, type MysqlStore } from './index.js';
import { mysqlSuite } from './test/mysql-test-db.js';
import { startPrivateMariadb, type PrivateMariadb } from './test/private-mariadb.js';

/** Debian's galera-4 package; scripts/services.sh installs it. */
const GALERA_PROVIDER = '/usr/lib/galera/libgalera_smm.so';


async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

async function bfAborts(server: PrivateMariadb): Promise<number> {
  const rows = (await server.admin("SHOW GLOBAL STATUS LIKE 'wsrep_local_bf_aborts'")) as Array<{ Value: string }>;
  return Number(rows[0]?.Value ?? 0);
}

mysqlSuite('mysql on MariaDB Galera (a private one-node cluster)', () => {
  describe.skipIf(!existsSync(GALERA_PROVIDER))(`Galera errors [needs ${GALERA_PROVIDER}]`, () => {
    let server: PrivateMariadb | undefined;
    let url = '';
    beforeAll(async () => {
      const port = await freePort();
      server = await startPrivateMariadb('', {
        serverArgs: [
          '--wsrep-on=ON',
          `--wsrep-provider=${GALERA_PROVIDER}`,
          // An empty address starts a new cluster of one.
          '--wsrep-cluster-address=gcomm://',
          `--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:${port};gcache.size=16M`,
          '--wsrep-node-address=127.0.0.1',
          '--binlog-format=ROW',
          '--innodb-autoinc-lock-mode=2',
        ],
      });
      const rows = (await server.admin("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_cluster_size')")) as Array<{ Variable_name: string; Value: string }>;
      expect(Object.fromEntries(rows.map((r) => [r.Variable_name, r.Value]))).toEqual({ wsrep_ready: 'ON', wsrep_cluster_size: '1' });
      url = await server.createDatabase();
    }, 90_000);
    afterAll(async () => {
      await server?.stop();
    }, 60_000);

    it('a transaction Galera aborts (brute force, by a replicated DDL on its table) is WriteConflict 1213, retryable, counted as a deadlock; the next call works', async () => {
      const store = (await connect(url)) as MysqlStore;
      const ddl = await mysql.createConnection(url);
      ddl.on('error', () => undefined);
      try {
        await initTable(store, 'jobs');
        await store.execute({ sql: 'INSERT INTO jobs (id, payload) VALUES (1, ?), (2, ?)', params: ['a', 'b'] });
        const abortsBefore = await bfAborts(server!);
        // The batch holds row 1 (and the table's metadata lock) while it sleeps; the ALTER, replicated in total
        // order, does not wait for it: Galera aborts the local transaction, which learns at its next statement.
        const batch = rejection(
          store.executeBatch([
            { sql: 'UPDATE jobs SET payload = ? WHERE id = 1', params: ['x'] },
            { sql: 'SELECT SLEEP(1) AS s', params: [] },
            { sql: 'UPDATE jobs SET payload = ? WHERE id = 2', params: ['x'] },
          ]),
        );
        await new Promise((resolve) => setTimeout(resolve, 200));
        await ddl.query('ALTER TABLE jobs ADD COLUMN note INT NULL');
        const error = await batch;
        expect(error).toBeInstanceOf(StoreError);
        expect(error).toMatchObject({ kind: 'WriteConflict', nativeCode: 1213, retryable: true });
        expect(store.stats.deadlocks).toBe(1);
        expect(await bfAborts(server!)).toBeGreaterThan(abortsBefore);
        // Rolled back whole: neither row changed, and the store goes on.
        const { rows } = await store.execute({ sql: 'SELECT payload FROM jobs ORDER BY id', params: [] });
        expect(rows.map((r) => String(r.payload))).toEqual(['a', 'b']);
      } finally {
        await ddl.end().catch(() => ddl.destroy());
        await store.close();
      }
    });

    it('a node that refuses clients (1047, "WSREP has not yet prepared node"): ConnectionLost, its connection dropped, and calls work again once it serves', async () => {
      const store = (await connect(url)) as MysqlStore;
      // A statement that reads a table: one that reads none (SELECT 1) a refusing node still answers.
      const count = { sql: 'SELECT COUNT(*) AS n FROM waiting', params: [] };
      try {
        await store.execute({ sql: 'CREATE TABLE waiting (id INT PRIMARY KEY)', params: [] });
        await store.execute(count);
        // What a node outside the primary component answers; wsrep_reject_queries makes a healthy one answer it.
        await server!.admin('SET GLOBAL wsrep_reject_queries = ALL');
        let refusal: unknown;
        try {
          refusal = await rejection(store.execute(count));
        } finally {
          await server!.admin('SET GLOBAL wsrep_reject_queries = NONE');
        }
        expect(refusal).toBeInstanceOf(StoreError);
        expect(refusal).toMatchObject({ kind: 'ConnectionLost', nativeCode: 1047, retryable: true });
        expect((refusal as Error).message).toMatch(/WSREP/);
        expect(store.stats.connectionsLost).toBe(1);
        expect((await store.execute(count)).rows).toEqual([{ n: 0 }]);
      } finally {
        await store.close();
      }
    });

    it('the claim on a Galera node: GET_LOCK is granted (MariaDB 10.11.19; 10.4.29 and 10.6.13 refused it with wsrep on, MDEV-30473, and a store there claims ungated), so claims pass the gate, node-local; its statements are sent one at a time, never in packets', async () => {
      const warnings: StoreWarning[] = [];
      const store = (await connect(url, { onWarning: (warning) => warnings.push(warning) })) as MysqlStore;
      try {
        expect(store.claimGate.active).toBe(true);
        // An abort Galera delivers between two statements of one packet would go unreported: none are sent.
        expect(store.pipelineRefusal).toMatch(/^a Galera node \(wsrep_on\)/);
        await initTable(store, 'gated');
        const queue = await Queue.open(store, { table: 'gated' });
        await queue.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }]);
        for (let round = 0; round < 2; round++) await queue.claim({ limit: 2, token: `t${round}` });
        expect((await queue.counts()).processing).toBe(3);
        expect(store.stats.claimGateTimeouts).toBe(0);
        expect(warnings).toEqual([]);
        const checks = await store.inspection.serverChecks!();
        expect(checks.find((check) => check.name === 'claim_gate')).toMatchObject({ status: 'pass' });
        expect(checks.find((check) => check.name === 'claim_round_trips')).toMatchObject({ status: 'warn', detail: expect.stringMatching(/Galera/) });
      } finally {
        await store.close();
      }
    });
  });
});
