/**
 * How the claim meets a real MySQL/MariaDB server, which the shared conformance suite cannot see from outside:
 * the rows it returns against what the table then holds, the claim gate's lock across sessions, rows another
 * session holds skipped by primary key, the plans of its candidate SELECTs and of the relay's, and the packets
 * it sends (one round trip or two, as the server's general log records them). A claim that waits, scans or
 * takes extra round trips still returns the right rows, so each case reads the server's own account (its
 * locks, plans and log). Sessions, errors and killed connections are in mysql.server.test.ts. Each test has
 * its own database.
 */
import { expect, it } from 'vitest';
import type mysql from 'mysql2/promise';
import { Queue, Relay, initTable } from '@statusq/core';
import { dispatchIndexName, pendingIndexName, type Broker, type StoreWarning } from '@statusq/core/adapter';
import { CLAIM_CLOCK, TransitionSql, candidateStatements, type Statement, type StatementRunner, type Store } from '@statusq/core/adapter';
import { waitFor } from '@statusq/conformance';
import { connect, type MysqlStore } from './index.js';
import { mysqlClaimWritesQuery, mysqlNativeClaim } from './mysql-claim-sql.js';
import { mysqlQueryPlans } from './testing.js';
import { probePipeline } from './mysql-pipeline.js';
import { mysqlEnvEachTest, mysqlSuite, rawConnection } from './test/mysql-test-db.js';

const fresh = mysqlEnvEachTest();

mysqlSuite('mysql adapter on a real server', () => {
  it('the claim returns each row exactly as the database holds it afterwards: on a managed table from the locked candidates, and on a table whose server-side writes it cannot know (ON UPDATE column, UPDATE trigger, second-precision claimed_at) by reading back', async () => {
    const e = await fresh();
    const store = (await e.store()) as MysqlStore;
    await initTable(store, 'jobs');
    const managed = await Queue.open(store, { table: 'jobs' });
    await managed.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }]);
    await store.execute({
      sql:
        'CREATE TABLE app_rows (id INT AUTO_INCREMENT PRIMARY KEY, date DATETIME(3) NOT NULL, status INT NULL, claimed_at DATETIME NULL, worker_id VARCHAR(255) NULL, ' +
        'updated_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3), touched INT NOT NULL DEFAULT 0)',
      params: [],
    });
    await store.execute({ sql: 'CREATE TRIGGER app_rows_touch BEFORE UPDATE ON app_rows FOR EACH ROW SET NEW.touched = OLD.touched + 1', params: [] });
    await store.execute({ sql: "INSERT INTO app_rows (date, updated_at) VALUES (NOW(3), '2020-01-01 00:00:00.000'), (NOW(3), '2020-01-01 00:00:00.000')", params: [] });
    const app = await Queue.open(store, { table: 'app_rows' });
    for (const [queue, table] of [[managed, 'jobs'], [app, 'app_rows']] as const) {
      const { rows } = await queue.claim({ limit: 10, token: `token-${table}` });
      expect(rows.length, table).toBeGreaterThan(0);
      const after = await store.execute({ sql: `SELECT * FROM ${table} WHERE status = 9 ORDER BY id`, params: [] });
      const claimed = [...rows].sort((a, b) => Number(a.id) - Number(b.id));
      expect(claimed, table).toEqual(after.rows);
    }
    // The managed table (whose generated key column a claim leaves alone) needs no read-back round trip; the application table does.
    const surprises = async (queue: Queue) => Number((await store.execute(mysqlClaimWritesQuery(queue.table))).rows[0]!.surprises);
    expect(await surprises(managed)).toBe(0);
    expect(await surprises(app)).toBeGreaterThan(0);
    // The application table's server-side writes happened, and the claim reported them.
    const [row] = (await store.execute({ sql: 'SELECT touched, updated_at FROM app_rows ORDER BY id LIMIT 1', params: [] })).rows;
    expect(row!.touched).toBe(1);
    expect((row!.updated_at as Date).getUTCFullYear()).toBeGreaterThan(2020);
    await e.closeStores();
  });

  it('the claim gate holds claims across sessions: a claim waits while another session holds the gate lock of its table, goes on once it is given back, runs ungated past the wait bound; claimGate=0 takes none; the doctor says which', async () => {
    const e = await fresh();
    const gated = (await connect(`${e.url}?claimGate=1`)) as MysqlStore;
    const ungated = (await connect(`${e.url}?claimGate=0`)) as MysqlStore;
    const holder = await rawConnection(e.url);
    try {
      await initTable(gated, 'jobs');
      const queue = await Queue.open(gated, { table: 'jobs' });
      await queue.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }]);
      // The one lock a claimGate=1 store of this database takes for `jobs` (mysql-claim-gate.ts names it).
      const lock = "CONCAT('statusq.claim.', LEFT(SHA1(CONCAT(DATABASE(), '.', 'jobs')), 24), '.', 0)";
      const [taken] = await holder.query<mysql.RowDataPacket[]>(`SELECT GET_LOCK(${lock}, 0) AS held`);
      expect(taken[0]!.held).toBe(1);
      let settled = false;
      const claim = queue.claim({ limit: 1, token: 'first' }).finally(() => (settled = true));
      await waitFor('the claim waiting on the gate lock', async () => {
        const [rows] = await holder.query<mysql.RowDataPacket[]>("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE STATE = 'User lock' AND INFO LIKE '%GET_LOCK%'");
        return Number(rows[0]!.n) === 1;
      });
      expect(settled).toBe(false);
      expect((await queue.counts()).processing).toBe(0);
      await holder.query(`DO RELEASE_LOCK(${lock})`);
      expect((await claim).rows).toHaveLength(1);
      expect(gated.stats.claimGateTimeouts).toBe(0);
      // The claim gave the lock back: another session takes it at once.
      const [again] = await holder.query<mysql.RowDataPacket[]>(`SELECT GET_LOCK(${lock}, 0) AS held`);
      expect(again[0]!.held).toBe(1);
      // Held past the wait bound (GATE_WAIT_SECONDS): the claim goes on without the gate and counts it.
      expect((await queue.claim({ limit: 1, token: 'second' })).rows).toHaveLength(1);
      expect(gated.stats.claimGateTimeouts).toBe(1);
      // No gate: the claim neither waits for the held lock nor counts a timeout.
      expect(ungated.claimGate.active).toBe(false);
      expect((await (await Queue.open(ungated, { table: 'jobs' })).claim({ limit: 1, token: 'third' })).rows).toHaveLength(1);
      expect(ungated.stats.claimGateTimeouts).toBe(0);
      const gateCheck = async (store: MysqlStore) => (await store.inspection.serverChecks!()).find((check) => check.name === 'claim_gate');
      expect(await gateCheck(gated)).toMatchObject({ status: 'pass', detail: expect.stringMatching(/^at most 1 claims of a table at once/) });
      expect(await gateCheck(ungated)).toMatchObject({ status: 'pass', detail: 'no claim gate (claimGate=0 asked for none)' });
    } finally {
      await holder.end();
      await gated.close();
      await ungated.close();
      await e.closeStores();
    }
  });

  it('a claim whose UPDATE fails (a trigger refuses it) rolls back and leaves no gate lock held on its pooled connection, in two packets and statement by statement', async () => {
    const e = await fresh();
    const holder = await rawConnection(e.url);
    try {
      for (const multipleStatements of [true, false]) {
        const store = (await connect(`${e.url}?claimGate=1&maxConnections=1`, { mysql2: { multipleStatements } })) as MysqlStore;
        try {
          await store.execute({ sql: 'DROP TABLE IF EXISTS jobs', params: [] });
          await initTable(store, 'jobs');
          const queue = await Queue.open(store, { table: 'jobs' });
          await queue.enqueue([{ n: 1 }, { n: 2 }]);
          await store.execute({ sql: "CREATE TRIGGER jobs_refuse BEFORE UPDATE ON jobs FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'no claims today'", params: [] });
          await expect(queue.claim({ limit: 2, token: 'refused' })).rejects.toThrow(/no claims today/);
          const lock = "CONCAT('statusq.claim.', LEFT(SHA1(CONCAT(DATABASE(), '.', 'jobs')), 24), '.', 0)";
          const [used] = await holder.query<mysql.RowDataPacket[]>(`SELECT IS_USED_LOCK(${lock}) AS owner`);
          expect(used[0]!.owner, `multipleStatements ${multipleStatements}`).toBeNull();
          expect((await queue.counts()).pending, `multipleStatements ${multipleStatements}`).toBe(2);
          await store.execute({ sql: 'DROP TRIGGER jobs_refuse', params: [] });
          expect((await queue.claim({ limit: 2, token: 'allowed' })).rows).toHaveLength(2);
        } finally {
          await store.close();
        }
      }
    } finally {
      await holder.end();
      await e.closeStores();
    }
  });

  it('the one-packet claim reads the table by primary key only, never scanning it: a row another session holds locked is skipped, not waited on (lock wait timeout 1 s), even on a table of three rows with no pending index (where MariaDB would scan the table first)', async () => {
    const e = await fresh();
    // A claim that waited on the held row would fail after 1 s with WriteConflict (lock wait timeout).
    const store = (await connect(`${e.url}?lockWaitTimeout=1`)) as MysqlStore;
    const holder = await rawConnection(e.url);
    try {
      // An application's table as it is: no statusq index, three pending rows, no statistics yet.
      await holder.query('CREATE TABLE few_jobs (id BIGINT PRIMARY KEY AUTO_INCREMENT, date DATETIME(3) NOT NULL, status TINYINT NULL)');
      await holder.query("INSERT INTO few_jobs (date) VALUES ('2026-01-01 00:00:01'), ('2026-01-01 00:00:02'), ('2026-01-01 00:00:03')");
      const queue = await Queue.open(store, { table: 'few_jobs' });
      await holder.query('START TRANSACTION');
      await holder.query('SELECT id FROM few_jobs WHERE id = 3 FOR UPDATE');
      // The newest row is held: the claim skips it and takes the next.
      const { rows } = await queue.claim({ limit: 1, token: null });
      expect(rows.map((row) => [Number(row.id), row.status])).toEqual([[2, 9]]);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
      await store.close();
      await e.closeStores();
    }
  });

  // The plain candidate SELECTs on the pending index are the conformance case `[needs queryPlans]`.
  it('EXPLAIN: every locking candidate SELECT of the claim (newest, oldest, aged; FOR UPDATE SKIP LOCKED) uses the pending index without a filesort, with many finished rows present', async () => {
    const e = await fresh();
    const store = await e.store();
    await initTable(store, 'jobs');
    const queue = await Queue.open(store, { table: 'jobs' });
    await queue.enqueue(Array.from({ length: 5000 }, (_, n) => ({ n })));
    await store.execute({ sql: 'UPDATE jobs SET status = 1 WHERE id > 20', params: [] });
    await mysqlQueryPlans.analyze(store, 'jobs');
    const index = pendingIndexName('jobs');
    for (const direction of ['newest', 'oldest'] as const) {
      const sql = new TransitionSql({ ...queue.table, direction }, store.dialect);
      for (const agingMs of [undefined, 3_600_000]) {
        for (const statement of candidateStatements(sql, { limit: 50, token: null, agingMs }, { columns: 'row', lock: mysqlNativeClaim.lockCandidates, clock: CLAIM_CLOCK })) {
          const plan = await mysqlQueryPlans.explain(store, statement);
          const label = `${direction} aging=${String(agingMs)}: ${statement.sql}: ${plan.text}`;
          expect(plan.index, label).toBe(index);
          expect(plan.sorts, label).toBe(false);
        }
      }
    }
    await e.closeStores();
  });

  it("the relay names the dispatch index (FORCE INDEX) where the table has it, and EXPLAIN shows both selections reading it with a backlog waiting in the broker; a table without the index relays unhinted", async () => {
    const e = await fresh();
    const store = await e.store();
    await initTable(store, 'jobs', { with: ['dispatch'] });
    const queue = await Queue.open(store, { table: 'jobs' });
    await queue.enqueue(Array.from({ length: 3000 }, (_, n) => ({ n })));
    await store.execute({ sql: 'UPDATE jobs SET dispatched_at = NOW(3) WHERE id > 50', params: [] });
    await mysqlQueryPlans.analyze(store, 'jobs');
    const index = dispatchIndexName('jobs');
    const statement = queue.sql.dispatchCandidates(256, 300_000, index);
    const { rows: plan } = await store.execute({ sql: `EXPLAIN ${statement.sql}`, params: statement.params });
    const reads = plan.filter((row) => row.table === 'jobs');
    expect(reads.map((row) => row.key), JSON.stringify(plan)).toEqual([index, index]);
    for (const table of ['jobs', 'own_jobs']) {
      if (table === 'own_jobs') {
        // The column added by hand, without statusq's index: a hint would be an error (1176), so none is given.
        await initTable(store, table);
        await store.execute({ sql: 'ALTER TABLE own_jobs ADD COLUMN dispatched_at DATETIME(3) NULL', params: [] });
        await (await Queue.open(store, { table })).enqueue([{ n: 1 }, { n: 2 }]);
      }
      const seen: string[] = [];
      const spied = new Proxy(store, {
        get(target, key) {
          if (key === 'execute') return (s: Statement) => (seen.push(s.sql), target.execute(s));
          const value: unknown = Reflect.get(target, key, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const published: unknown[] = [];
      const broker: Broker = { name: 'test', address: 'test://', publish: async (messages) => void published.push(...messages), consume: () => Promise.reject(new Error('not here')), deadLetter: async () => undefined, depth: async () => null, close: async () => undefined };
      const relay = await Relay.create({ store: spied, table: { table }, to: broker, pollMinMs: 1, pollMaxMs: 5 });
      const run = relay.run();
      await waitFor('the relay to publish the undispatched rows', () => published.length >= (table === 'jobs' ? 50 : 2));
      await relay.stop();
      await run;
      const selections = seen.filter((sql) => sql.includes('never_dispatched'));
      expect(selections.length, table).toBeGreaterThan(0);
      for (const sql of selections) expect(sql.includes(`FORCE INDEX (\`${dispatchIndexName(table)}\`)`), `${table}: ${sql}`).toBe(table === 'jobs');
    }
    await e.closeStores();
  });

  it('the native claim takes one round trip on an integer id (the ids stay on the server), two on a text id: GET_LOCK travels with START TRANSACTION and the candidate SELECT, the UPDATE and RELEASE_LOCK with the COMMIT (as the server\'s general log records each packet); the doctor says so', async () => {
    const e = await fresh();
    const store = (await connect(`${e.url}?maxConnections=1`)) as MysqlStore;
    const admin = await rawConnection(e.url);
    const [settings] = await admin.query<mysql.RowDataPacket[]>('SELECT @@global.general_log AS on_, @@global.log_output AS output');
    try {
      await initTable(store, 'jobs');
      // The same queue on a text id: its ids are not sent through JSON, so its claim reads them first.
      await admin.query('CREATE TABLE text_jobs (id VARCHAR(36) PRIMARY KEY, date DATETIME(3) NOT NULL, status TINYINT NULL, worker_id VARCHAR(64) NULL, KEY text_jobs_pending (status, date))');
      await admin.query("INSERT INTO text_jobs (id, date) VALUES ('a', '2026-01-01 00:00:01'), ('b', '2026-01-01 00:00:02'), ('c', '2026-01-01 00:00:03')");
      const queue = await Queue.open(store, { table: 'jobs' });
      const textQueue = await Queue.open(store, { table: 'text_jobs', columns: { workerId: 'worker_id' } });
      const [first, second, third] = await queue.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }]);
      await queue.claim({ limit: 1, token: 'warm' });
      await textQueue.claim({ limit: 1, token: 'warm' });
      const thread = Number((await store.execute({ sql: 'SELECT CONNECTION_ID() AS id', params: [] })).rows[0]!.id);
      await admin.query("SET GLOBAL log_output = 'TABLE', GLOBAL general_log = 1");
      const { rows } = await queue.claim({ limit: 2, token: 'one-trip' });
      const { rows: textRows } = await textQueue.claim({ limit: 2, token: 'two-trips' });
      await admin.query('SET GLOBAL general_log = 0');
      // Newest first, as the UPDATE left them: the read in the packet comes after it.
      expect(rows.map((row) => [Number(row.id), row.status, row.worker_id])).toEqual([
        [Number(second), 9, 'one-trip'],
        [Number(first), 9, 'one-trip'],
      ]);
      expect(third).toBeDefined();
      expect(textRows.map((row) => [row.id, row.status, row.worker_id])).toEqual([
        ['b', 9, 'two-trips'],
        ['a', 9, 'two-trips'],
      ]);
      const [packets] = await admin.query<mysql.RowDataPacket[]>(
        "SELECT CONVERT(argument USING utf8mb4) AS text FROM mysql.general_log WHERE thread_id = ? AND command_type = 'Query' ORDER BY event_time",
        [thread],
      );
      const statements = packets.map((packet) => String(packet.text).split(';\n').map((sql) => sql.trim().split(/[\s(]/)[0] + (sql.includes('GET_LOCK') ? ' GET_LOCK' : sql.includes('RELEASE_LOCK') ? ' RELEASE_LOCK' : sql.includes('JSON_ARRAYAGG') ? ' INTO' : '')));
      expect(statements).toEqual([
        ['START', 'SELECT GET_LOCK', 'SELECT INTO', 'UPDATE', 'SELECT', 'DO RELEASE_LOCK', 'COMMIT'],
        ['START', 'SELECT GET_LOCK', 'SELECT'],
        ['UPDATE', 'DO RELEASE_LOCK', 'COMMIT'],
      ]);
      expect(await store.inspection.serverChecks!()).toContainEqual(expect.objectContaining({ name: 'claim_round_trips', status: 'pass' }));
    } finally {
      await admin.query(`SET GLOBAL general_log = ${Number(settings[0]!.on_) ? 1 : 0}, GLOBAL log_output = ?`, [String(settings[0]!.output)]);
      await admin.end();
      await store.close();
      await e.closeStores();
    }
  });

  it('a wrapper of the store whose transactions forward only execute (no defer) still claims on an integer id: the claim takes its two-packet form, each row once', async () => {
    const e = await fresh();
    const store = (await connect(e.url)) as MysqlStore;
    try {
      await initTable(store, 'jobs');
      const wrapped: Store = Object.assign(Object.create(store) as MysqlStore, {
        transaction: <T>(body: (tx: StatementRunner) => Promise<T>) => store.transaction((tx) => body({ execute: (statement) => tx.execute(statement) })),
      });
      const queue = await Queue.open(wrapped, { table: 'jobs' });
      const ids = await queue.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }]);
      const first = await queue.claim({ limit: 2, token: 'one' });
      const second = await queue.claim({ limit: 2, token: 'two' });
      // Newest first, initTable's queue order.
      expect(first.rows.map((row) => [Number(row.id), row.status, row.worker_id])).toEqual([
        [Number(ids[2]), 9, 'one'],
        [Number(ids[1]), 9, 'one'],
      ]);
      expect(second.rows.map((row) => [Number(row.id), row.worker_id])).toEqual([[Number(ids[0]), 'two']]);
      expect((await queue.claim({ limit: 2, token: 'three' })).rows).toEqual([]);
    } finally {
      await store.close();
      await e.closeStores();
    }
  });

  it('multi-statement packets turned off (mysql2 multipleStatements: false) or refused (a connection without them answers the probe with a syntax error): the claim sends a statement per round trip through the gate, and the doctor says why', async () => {
    const e = await fresh();
    const warnings: StoreWarning[] = [];
    const store = (await connect(e.url, { mysql2: { multipleStatements: false }, onWarning: (warning) => warnings.push(warning) })) as MysqlStore;
    const plain = await rawConnection(e.url);
    try {
      // Turned off on purpose: nothing to warn of.
      expect(warnings).toEqual([]);
      expect(store.pipelineRefusal).toBe('turned off: mysql2 multipleStatements false');
      // What the probe makes of a connection that may not send them (as behind a proxy that strips the flag).
      expect(await probePipeline(plain, () => false)).toMatchObject({ verdict: 'refused', why: expect.stringMatching(/SQL syntax/) });
      await initTable(store, 'jobs');
      const queue = await Queue.open(store, { table: 'jobs' });
      await queue.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }]);
      expect((await queue.claim({ limit: 2, token: 'one' })).rows).toHaveLength(2);
      expect((await queue.claim({ limit: 2, token: 'two' })).rows).toHaveLength(1);
      expect((await queue.claim({ limit: 2, token: 'three' })).rows).toHaveLength(0);
      expect(store.claimGate.active).toBe(true);
      expect(await store.inspection.serverChecks!()).toContainEqual(expect.objectContaining({ name: 'claim_round_trips', status: 'warn', detail: expect.stringMatching(/^multi-statement packets not used \(turned off/) }));
    } finally {
      await plain.end();
      await store.close();
      await e.closeStores();
    }
  });
});
