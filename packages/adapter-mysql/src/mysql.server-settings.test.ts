/**
 * Production server settings (issue 18, point 3), each on a private MariaDB started with that setting (never
 * the shared server): the conformance race, and the groups the setting can break, pass there. The servers
 * start one after another (each describe's beforeAll), since the machine has 2 cores.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runConformance, withDeadline, type ConformanceGroup } from '@statusq/conformance';
import mysql from 'mysql2/promise';
import { ConfigError, Queue, StoreError, Worker, initTable, migrateTable } from '@statusq/core';
import { statementBytes } from '@statusq/core/adapter';
import { connect, optionsFromUrl, type MysqlStore } from './index.js';
import { toStoreError } from './mysql-errors.js';
import { mysqlConformance, mysqlFixtures } from './testing.js';
import { mysqlSuite } from './test/mysql-test-db.js';
import { startPrivateMariadb, type PrivateMariadb, type PrivateMariadbSettings } from './test/private-mariadb.js';

const adapterModule = fileURLToPath(new URL('../dist/index.js', import.meta.url));

/** A private server for one describe block, started in its beforeAll and stopped in its afterAll. */
function privateServer(settings: PrivateMariadbSettings): () => PrivateMariadb {
  let server: PrivateMariadb | undefined;
  beforeAll(async () => {
    server = await startPrivateMariadb('', settings);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  }, 60_000);
  return () => {
    if (!server) throw new Error('the private server did not start');
    return server;
  };
}

/** A fresh database on the private server, in the URL's account (which `setup` granted `statusq\_%`). */
async function freshDatabase(server: PrivateMariadb, query = ''): Promise<string> {
  const name = `statusq_${randomBytes(6).toString('hex')}`;
  await server.admin(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  url.search = query;
  return url.toString();
}

async function dropFresh(server: PrivateMariadb, url: string): Promise<void> {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!/^statusq_[0-9a-f]+$/.test(name)) throw new Error(`refusing to drop ${name}: not a test database`);
  await server.admin(`DROP DATABASE IF EXISTS \`${name}\``);
}

/** The conformance suite's `groups` on the private server, each test in a database of its own there. */
function conformanceOn(server: () => PrivateMariadb, name: string, groups: ConformanceGroup[]): void {
  runConformance({
    ...mysqlConformance,
    name,
    adapterModule,
    url: () => freshDatabase(server()),
    dropDatabase: (url) => dropFresh(server(), url),
    // Half the default job counts (1,500 racing jobs per claim strategy) keeps each setting's run short.
    scale: 0.5,
    groups,
  });
}

mysqlSuite('mysql on production server settings (private MariaDB per setting)', () => {
  describe('innodb_lock_wait_timeout = 1 on the server', () => {
    const server = privateServer({ serverArgs: ['--innodb-lock-wait-timeout=1'] });

    it("every pooled connection runs with statusq's own lock wait timeout, not the server's 1 s", async () => {
      const s = server();
      expect((await s.admin('SELECT @@global.innodb_lock_wait_timeout AS t')) as unknown[]).toEqual([{ t: 1 }]);
      const url = await freshDatabase(s);
      const store = await connect(url);
      const custom = await connect(`${url}?lockWaitTimeout=7`);
      try {
        // Several at once force several pooled connections.
        const sql = { sql: 'SELECT @@session.innodb_lock_wait_timeout AS t, CONNECTION_ID() AS cid, SLEEP(0.05) AS s', params: [] };
        for (const [st, want] of [[store, 10], [custom, 7]] as const) {
          const rows = (await Promise.all(Array.from({ length: 6 }, () => st.execute(sql)))).map((r) => r.rows[0]!);
          expect(new Set(rows.map((r) => r.cid)).size).toBeGreaterThan(1);
          for (const r of rows) expect(Number(r.t)).toBe(want);
        }
        // Connections opened after the server dropped every one get the same set-up.
        const sessions = (await s.admin('SELECT ID AS id FROM information_schema.PROCESSLIST WHERE DB = ?', [optionsFromUrl(url).database])) as Array<{ id: number }>;
        expect(sessions.length).toBeGreaterThan(1);
        for (const { id } of sessions) await s.admin(`KILL CONNECTION ${Number(id)}`).catch(() => undefined);
        // The first call on a killed pooled connection meets ConnectionLost (the store drops it); once more takes a fresh one.
        const again = await Promise.all(Array.from({ length: 3 }, () => store.execute(sql).catch(() => store.execute(sql))));
        for (const r of again) expect(Number(r.rows[0]!.t)).toBe(10);
        expect(await store.inspection.serverChecks!()).toContainEqual({ name: 'innodb_lock_wait_timeout', status: 'pass', detail: "server default 1 s; statusq's sessions use 10 s (lockWaitTimeoutSeconds)" });
      } finally {
        await store.close();
        await custom.close();
        await dropFresh(s, url);
      }
    });

    it("a settle waiting on another session's row lock waits statusq's timeout (2 s here), not the server's 1 s, then fails as WriteConflict", async () => {
      const s = server();
      const url = await freshDatabase(s);
      const store = (await connect(`${url}?lockWaitTimeout=2`)) as MysqlStore;
      const { host, port, database } = optionsFromUrl(url);
      const holder = await mysql.createConnection({ host, port, user: 'root', database });
      try {
        await initTable(store, 'jobs');
        const queue = await Queue.open(store, { table: 'jobs' });
        const [id] = await queue.enqueue([{ a: 1 }]);
        await holder.query('START TRANSACTION');
        await holder.query('SELECT id FROM jobs WHERE id = ? FOR UPDATE', [id]);
        const started = performance.now();
        const error = await store.execute({ sql: 'UPDATE jobs SET status = 9 WHERE id = ? AND status IS NULL', params: [id as number] }).then(() => null, (e: unknown) => e);
        const waitedMs = performance.now() - started;
        console.info(`[innodb_lock_wait_timeout=1] statusq's session (2 s) waited ${Math.round(waitedMs)} ms`);
        expect(error).toMatchObject({ kind: 'WriteConflict', nativeCode: 1205 });
        expect(waitedMs).toBeGreaterThan(1900);
        expect(store.stats.lockWaitTimeouts).toBe(1);
      } finally {
        await holder.end();
        await store.close();
        await dropFresh(s, url);
      }
    });

    conformanceOn(server, 'mysql, innodb_lock_wait_timeout=1', ['race', 'state-machine']);
  });

  describe("autocommit = 0 for the application's account (init_connect)", () => {
    // init_connect runs for accounts without SUPER (or CONNECTION ADMIN) only: the app account, granted its databases only.
    const server = privateServer({
      serverArgs: ['--init-connect=SET autocommit=0'],
      setup: ["CREATE USER 'app'@'%'", "GRANT ALL ON `statusq\\_%`.* TO 'app'@'%'"],
      account: 'app',
    });

    it("statusq's sessions run with autocommit on although the server turns it off for the account", async () => {
      const s = server();
      const url = await freshDatabase(s);
      // The server really does turn it off for this account: a plain mysql2 session sees autocommit 0.
      const { host, port, user, database } = optionsFromUrl(url);
      const plain = await mysql.createConnection({ host, port, user, database });
      try {
        const [rows] = await plain.query('SELECT @@autocommit AS a');
        expect(rows).toEqual([{ a: 0 }]);
      } finally {
        await plain.end();
      }
      const store = (await connect(url)) as MysqlStore;
      try {
        expect(store.settings.autocommit).toBe(true);
        const sql = { sql: 'SELECT @@autocommit AS a, CONNECTION_ID() AS cid, SLEEP(0.05) AS s', params: [] };
        const rows = (await Promise.all(Array.from({ length: 6 }, () => store.execute(sql)))).map((r) => r.rows[0]!);
        expect(new Set(rows.map((r) => r.cid)).size).toBeGreaterThan(1);
        for (const r of rows) expect(Number(r.a)).toBe(1);
        expect(await store.inspection.serverChecks!()).toContainEqual({
          name: 'autocommit',
          status: 'pass',
          detail: 'the server turns autocommit off (init_connect = "SET autocommit=0"); statusq turns it back on in each of its own sessions',
        });
      } finally {
        await store.close();
        await dropFresh(s, url);
      }
    });

    conformanceOn(server, 'mysql, autocommit=0 by init_connect', ['race', 'state-machine']);
  });

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
        expect(await migrateTable(store, { table: 'Table_A', with: ['leases', 'retries', 'results'] })).toEqual({ table: 'Table_A', addedColumns: [], createdIndex: null, createdPriorityIndex: null, createdKeyIndex: null, createdDispatchIndex: null, addedStatus: false, beside: null });
        const jobs = await Queue.open(store, { table: 'Jobs' });
        expect(jobs.table.features).toEqual({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true, priority: false, dedupe: true, progress: false, dispatch: false });
        const tableA = await Queue.open(store, { table: 'Table_A' });
        expect(tableA.table.features).toEqual({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true, priority: false, dedupe: false, progress: false, dispatch: false });
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

  describe("group_concat_max_len = 4, MariaDB's minimum (it cuts JSON_ARRAYAGG short)", () => {
    const server = privateServer({ serverArgs: ['--group-concat-max-len=4'] });

    it("the one-packet claim of 1,000 rows with 16-digit ids claims exactly those rows: statusq's sessions raise the limit for themselves", async () => {
      const url = await freshDatabase(server());
      const store = (await connect(url)) as MysqlStore;
      try {
        await initTable(store, 'jobs');
        const queue = await Queue.open(store, { table: 'jobs' });
        await queue.enqueue(Array.from({ length: 1000 }, (_, i) => ({ i })));
        await store.execute({ sql: 'UPDATE jobs SET id = id + ?', params: [1e15] });
        expect(Number((await store.execute({ sql: 'SELECT @@global.group_concat_max_len AS v', params: [] })).rows[0]!.v)).toBe(4);
        const { rows } = await queue.claim({ limit: 1000, token: 'all' });
        const { rows: table } = await store.execute({ sql: 'SELECT id, status, worker_id FROM jobs ORDER BY id', params: [] });
        expect(rows).toHaveLength(1000);
        expect(new Set(rows.map((row) => String(row.id)))).toEqual(new Set(table.map((row) => String(row.id))));
        expect(table.every((row) => Number(row.status) === 9 && row.worker_id === 'all')).toBe(true);
        expect(store.pipelineRefusal).toBeNull();
      } finally {
        await store.close();
        await dropFresh(server(), url);
      }
    });
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
