/**
 * Production server settings (issue 18, point 3) that statusq cannot set back in its own sessions and must work
 * within, each on a private MariaDB started with that setting (never the shared server): a required primary
 * key, table names folded to lower case, and a max_allowed_packet of 16 KB and of 1 KB (MariaDB's minimum).
 * What statusq creates, looks up and sends must fit them, or a table is refused, a name is not found or the
 * server drops the connection over a statement; so the cases do each there, and the conformance race and the
 * groups the setting can break pass there. The settings statusq's sessions override (lock wait timeout,
 * autocommit, group_concat_max_len) are in mysql.server-session-settings.test.ts. Within this file the servers
 * start one after another (each describe's beforeAll), since the machine has 2 cores.
 */
import { describe, expect, it } from 'vitest';
import { withDeadline } from '@statusq/conformance';
import mysql from 'mysql2/promise';
import { ConfigError, Queue, StoreError, Worker, initTable, migrateTable } from '@statusq/core';
import { statementBytes } from '@statusq/core/adapter';
import { connect, optionsFromUrl, type MysqlStore } from './index.js';
import { toStoreError } from './mysql-errors.js';
import { mysqlFixtures } from './testing.js';
import { mysqlSuite } from './test/mysql-test-db.js';
import { conformanceOn, dropFresh, freshDatabase, privateServer } from './test/setting-servers.js';

mysqlSuite('mysql on production server settings (private MariaDB per setting)', () => {
  describe('innodb_force_primary_key = ON (MariaDB for sql_require_primary_key)', () => {
    const server = privateServer({ serverArgs: ['--innodb-force-primary-key=ON'] });

    it('the server refuses a table without a primary key', async () => {
      await expect(server().admin('CREATE TABLE statusq_outage.no_key (a INT) ENGINE=InnoDB')).rejects.toThrow(/primary key/i);
    });

    it('initTable creates a primary key; migrateTable works, on MariaDB even on a table without one; the doctor says the setting is on', async () => {
      const url = await freshDatabase(server());
      const store = (await connect(url)) as MysqlStore;
      const database = optionsFromUrl(url).database!;
      try {
        expect(await initTable(store, 'jobs')).toMatchObject({ created: true });
        const keys = (await server().admin("SELECT COUNT(*) AS n FROM information_schema.TABLE_CONSTRAINTS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'jobs' AND CONSTRAINT_TYPE = 'PRIMARY KEY'", [database])) as Array<{ n: number }>;
        expect(Number(keys[0]!.n)).toBe(1);
        // A table made before the setting was turned on (a dynamic variable on MariaDB): unique id, no primary key.
        await server().admin('SET GLOBAL innodb_force_primary_key = OFF');
        try {
          await server().admin(`CREATE TABLE \`${database}\`.legacy (id BIGINT NOT NULL, date DATETIME(3) NOT NULL, status TINYINT NULL, UNIQUE KEY legacy_id (id)) ENGINE=InnoDB`);
        } finally {
          await server().admin('SET GLOBAL innodb_force_primary_key = ON');
        }
        // MariaDB's setting checks CREATE TABLE only (measured: the ALTERs of migrate run). MySQL 8's
        // sql_require_primary_key refuses them too (3750), which mysql-errors.ts makes Unsupported with the fix.
        const migrated = await migrateTable(store, { table: 'legacy', with: ['leases'] });
        expect(migrated.addedColumns).toEqual(['claimed_at', 'worker_id']);
        expect(migrated.createdIndex).not.toBeNull();
        expect(toStoreError({ errno: 3750, sqlMessage: 'Unable to create or change a table without a primary key, when the system variable sql_require_primary_key is set.' })).toMatchObject({
          kind: 'Unsupported',
          message: expect.stringMatching(/give the table a PRIMARY KEY/),
        });
        const checks = await store.inspection.serverChecks!();
        expect(checks.find((c) => c.name === 'primary_key_required')).toMatchObject({ status: 'pass', detail: expect.stringMatching(/^innodb_force_primary_key = ON: every table statusq creates has a primary key/) });
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });

    conformanceOn(server, 'mysql, innodb_force_primary_key=ON', ['race', 'schema']);
  });

  describe('lower_case_table_names = 1', () => {
    const server = privateServer({ installArgs: ['--lower-case-table-names=1'], serverArgs: ['--lower-case-table-names=1'] });

    it('a table configured as Jobs (initTable) or Table_A (the application\'s, migrated) is found, claimed and settled by both claims', async () => {
      const url = await freshDatabase(server());
      const store = (await connect(url)) as MysqlStore;
      try {
        expect(store.settings.lowerCaseTableNames).toBe(1);
        expect(await initTable(store, 'Jobs')).toMatchObject({ table: 'Jobs', created: true });
        expect(await initTable(store, 'Jobs')).toMatchObject({ created: false, migrated: { addedColumns: [], createdIndex: null, createdPriorityIndex: null, createdKeyIndex: null, createdDispatchIndex: null, addedStatus: false } });
        // The server keeps the name in lower case; statusq's catalog look-ups still find it by the configured one.
        expect(await server().admin('SELECT TABLE_NAME AS t FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?', [optionsFromUrl(url).database])).toEqual([{ t: 'jobs' }]);
        for (const s of mysqlFixtures.tableA('Table_A')) await store.execute({ sql: s, params: [] });
        await store.execute({ sql: "INSERT INTO Table_A (id, date, url, kind) VALUES (1, NOW(3), 'u', 'k'), (2, NOW(3), 'u', 'k'), (3, NOW(3), 'u', 'k')", params: [] });
        const migrated = await migrateTable(store, { table: 'Table_A', with: ['leases', 'retries', 'results'] });
        expect(migrated.addedColumns.length).toBeGreaterThan(0);
        expect(await migrateTable(store, { table: 'Table_A', with: ['leases', 'retries', 'results'] })).toEqual({ table: 'Table_A', addedColumns: [], createdIndex: null, createdPriorityIndex: null, createdKeyIndex: null, createdDispatchIndex: null, createdKindIndex: null, createdGroupIndex: null, addedStatus: false, beside: null });
        const jobs = await Queue.open(store, { table: 'Jobs' });
        expect(jobs.table.features).toEqual({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true, priority: false, dedupe: true, progress: false, dispatch: false, kinds: false, groups: false, tracing: false });
        const tableA = await Queue.open(store, { table: 'Table_A' });
        expect(tableA.table.features).toEqual({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true, priority: false, dedupe: false, progress: false, dispatch: false, kinds: true, groups: false, tracing: false });
        for (const [queue, claimStrategy, n] of [[jobs, 'native', 100], [jobs, 'conditional-update', 100], [tableA, 'native', 0]] as const) {
          if (n > 0) await queue.enqueue(Array.from({ length: n }, (_, i) => ({ i })));
          const errors: unknown[] = [];
          const worker = await Worker.create({ store, table: { table: queue.table.table }, claimStrategy, concurrency: 8, exitWhenEmpty: true, pollMinMs: 2, pollMaxMs: 20, handler: async () => ({ ok: 1 }) });
          worker.on('error', (e) => errors.push(e));
          const counters = await withDeadline(worker.run(), 30_000, `a worker to drain ${queue.table.table}`);
          expect(errors).toEqual([]);
          expect(counters).toMatchObject({ claimed: n || 3, completed: n || 3, claimLost: 0 });
        }
        expect(await jobs.counts()).toEqual({ pending: 0, processing: 0, done: 200, abuse: 0, failed: 0, other: 0 });
        expect(await tableA.counts()).toEqual({ pending: 0, processing: 0, done: 3, abuse: 0, failed: 0, other: 0 });
        const checks = await store.inspection.serverChecks!();
        expect(checks.find((c) => c.name === 'lower_case_table_names')).toMatchObject({ status: 'pass', detail: expect.stringMatching(/^1: table names are stored in lower case/) });
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });

    conformanceOn(server, 'mysql, lower_case_table_names=1', ['race', 'schema']);
  });

  describe('max_allowed_packet = 16K', () => {
    const server = privateServer({ serverArgs: ['--max-allowed-packet=16K'] });
    const PACKET = 16 * 1024;

    /** A managed table `jobs` of `n` pending jobs on a fresh database, and its URL. */
    async function jobsTable(n: number, idOffset = 0): Promise<{ url: string; store: MysqlStore; queue: Queue }> {
      const url = await freshDatabase(server());
      const store = (await connect(url)) as MysqlStore;
      await initTable(store, 'jobs');
      const queue = await Queue.open(store, { table: 'jobs' });
      await queue.enqueue(Array.from({ length: n }, (_, i) => ({ i })));
      // Long ids make each id list long: 16-digit ids take 18 bytes each in `IN (...)`.
      if (idOffset > 0) await store.execute({ sql: 'UPDATE jobs SET id = id + ?', params: [idOffset] });
      return { url, store, queue };
    }

    it('the store reads the packet and bounds its statements by it; a statement over it is Unsupported, refused before it reaches the server', async () => {
      const { url, store } = await jobsTable(0);
      try {
        expect(store.settings.maxAllowedPacket).toBe(PACKET);
        expect(store.statementLimit.bytes).toBeLessThanOrEqual(PACKET - 2);
        const error = await store.execute({ sql: 'SELECT ? AS v', params: ['x'.repeat(PACKET)] }).then(() => null, (e: unknown) => e);
        expect(error).toBeInstanceOf(StoreError);
        expect(error).toMatchObject({ kind: 'Unsupported', retryable: false });
        expect((error as Error).message).toMatch(/max_allowed_packet = 16384.*SET GLOBAL max_allowed_packet = 64M/);
        // The connection was never put at risk, and the next statement runs.
        expect(store.stats.connectionsLost).toBe(0);
        expect((await store.execute({ sql: 'SELECT ? AS v', params: ['x'.repeat(8000)] })).rows[0]!.v).toHaveLength(8000);
        // The server itself, sent the same: 1153, mapped to Unsupported too (raw mysql2, past the store's check).
        const { host, port, user, database } = optionsFromUrl(url);
        const raw = await mysql.createConnection({ host, port, user, database });
        raw.on('error', () => undefined);
        const native = await raw.query(`SELECT '${'x'.repeat(PACKET)}' AS v`).then(() => null, (e: unknown) => e);
        raw.destroy();
        expect(native).toMatchObject({ errno: 1153 });
        expect(toStoreError(native)).toMatchObject({ kind: 'Unsupported', nativeCode: 1153 });
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });

    it('a claim batch and a grouped completion of 1,200 long ids (about 21 KB each as one statement) are split into statements that fit, and every job ends done', async () => {
      const jobs = 1200;
      const { url, store, queue } = await jobsTable(jobs, 1e15);
      try {
        const { rows } = await store.execute({ sql: 'SELECT id FROM jobs ORDER BY id', params: [] });
        const ids = rows.map((r) => r.id as number);
        // Without splitting, both would be refused: this test really crosses the packet.
        expect(statementBytes(queue.sql.claimByIds(ids, 'w:token', false, '2026-01-01 00:00:00.000'))).toBeGreaterThan(PACKET);
        expect(statementBytes(queue.sql.completeMany(ids, 'w:token'))).toBeGreaterThan(PACKET);
        const errors: unknown[] = [];
        const worker = await Worker.create({ store, table: { table: 'jobs' }, concurrency: jobs, batch: jobs, settleBatch: jobs, exitWhenEmpty: true, pollMinMs: 2, pollMaxMs: 20, handler: async () => ({ ok: 1 }) });
        worker.on('error', (e) => errors.push(e));
        const counters = await withDeadline(worker.run(), 60_000, 'the worker to drain 1,200 jobs');
        expect(errors).toEqual([]);
        expect(counters).toMatchObject({ claimed: jobs, completed: jobs, failed: 0, claimLost: 0 });
        expect(await queue.counts()).toEqual({ pending: 0, processing: 0, done: jobs, abuse: 0, failed: 0, other: 0 });
        expect(store.stats.connectionsLost).toBe(0);
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });

    it("a handler result too large for one statement fails that job with the reason in last_error; the batch's other jobs complete", async () => {
      const { url, store, queue } = await jobsTable(20);
      try {
        const big = (await store.execute({ sql: 'SELECT MIN(id) AS id FROM jobs', params: [] })).rows[0]!.id;
        const errors: unknown[] = [];
        const worker = await Worker.create({
          store,
          table: { table: 'jobs' },
          concurrency: 20,
          batch: 20,
          exitWhenEmpty: true,
          pollMinMs: 2,
          pollMaxMs: 20,
          handler: async (job) => (job.id === big ? { blob: 'x'.repeat(PACKET) } : { ok: 1 }),
        });
        worker.on('error', (e) => errors.push(e));
        await withDeadline(worker.run(), 30_000, 'the worker to drain 20 jobs');
        expect(await queue.counts()).toEqual({ pending: 0, processing: 0, done: 19, abuse: 0, failed: 1, other: 0 });
        const { rows } = await store.execute({ sql: 'SELECT status, result, last_error FROM jobs WHERE id = ?', params: [big as number] });
        expect(rows[0]).toMatchObject({ status: 0, result: null });
        expect(String(rows[0]!.last_error)).toMatch(/too large to store/);
        expect(errors).toEqual([]);
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });

    it('enqueue takes a chunk of 3,000 rows, and refuses a row too large for one statement with a ConfigError naming it, writing nothing', async () => {
      const { url, store, queue } = await jobsTable(3000);
      try {
        expect((await queue.counts()).pending).toBe(3000);
        // A payload column: its bound (half the packet, escapes doubling) refuses the payload.
        const payload = await queue.enqueue([{ a: 1 }, { blob: 'x'.repeat(PACKET) }]).then(() => null, (e: unknown) => e);
        expect(payload).toBeInstanceOf(ConfigError);
        expect((payload as Error).message).toMatch(/item 2: the payload does not fit column payload/);
        // An application's table without a payload column: the INSERT's own size.
        await store.execute({ sql: 'CREATE TABLE app (id BIGINT AUTO_INCREMENT PRIMARY KEY, date DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), status TINYINT NULL, body LONGTEXT NULL) ENGINE=InnoDB', params: [] });
        const app = await Queue.open(store, { table: 'app' });
        const rowError = await app.enqueue([{ body: 'small' }, { body: "it's ".repeat(PACKET / 4) }]).then(() => null, (e: unknown) => e);
        expect(rowError).toBeInstanceOf(ConfigError);
        expect((rowError as Error).message).toMatch(/item 2: the row takes \d+ bytes as one statement, more than the \d+ the database takes \(max_allowed_packet = 16384; SET GLOBAL max_allowed_packet = 64M/);
        expect((await app.counts()).pending).toBe(0);
        expect((await queue.counts()).pending).toBe(3000);
        expect(store.stats.connectionsLost).toBe(0);
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });

    it('statusq doctor warns about the packet, with the fix', async () => {
      const url = await freshDatabase(server());
      const store = (await connect(url)) as MysqlStore;
      try {
        const checks = await store.inspection.serverChecks!();
        expect(checks.find((c) => c.name === 'max_allowed_packet')).toMatchObject({ status: 'warn', detail: expect.stringMatching(/^16384 bytes: payloads and results above 6144 bytes are refused/), fix: expect.stringMatching(/^SET GLOBAL max_allowed_packet = 64M/) });
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });

    conformanceOn(server, 'mysql, max_allowed_packet=16K', ['race', 'state-machine', 'outcomes', 'retries']);
  });

  describe("max_allowed_packet = 1K, MariaDB's minimum (and net_buffer_length 1K, without which MariaDB takes up to 16 KB)", () => {
    const server = privateServer({ serverArgs: ['--max-allowed-packet=1K', '--net-buffer-length=1K'] });

    it('the store reads the packet; the value columns hold 256 bytes', async () => {
      const url = await freshDatabase(server());
      const store = (await connect(url)) as MysqlStore;
      try {
        expect(store.settings.maxAllowedPacket).toBe(1024);
        await initTable(store, 'jobs');
        expect((await Queue.open(store, { table: 'jobs' })).table.limits).toEqual({ payload: { bytes: 256 }, result: { bytes: 256 }, lastError: { bytes: 256 }, dedupeKey: { chars: 255, bytes: 256 } });
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });

    conformanceOn(server, 'mysql, max_allowed_packet=1K', ['race']);
  });
});
