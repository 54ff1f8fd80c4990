/**
 * The idle probe (mysql-idle-probe.ts): how an idle worker on MySQL/MariaDB learns of new rows without claiming
 * in a loop. Real server, real workers; each test has its own database.
 */
import mysql from 'mysql2/promise';
import { expect, it } from 'vitest';
import { ConfigError, Queue, initTable, type Store } from '@statusq/core';
import { pendingIndexName } from '@statusq/core/adapter';
import { waitFor, withDeadline } from '@statusq/conformance';
import { connect, type MysqlStore } from './index.js';
import { DEFAULT_IDLE_PROBE_MS, MysqlIdleProbe, ROUND_MS, idleProbeSetup } from './mysql-idle-probe.js';
import { adminQuery, mysqlEnvEachTest, mysqlSuite } from './test/mysql-test-db.js';

const fresh = mysqlEnvEachTest();

/** A managed table `jobs` with every optional column. */
async function createJobs(store: Store): Promise<Queue> {
  await initTable(store, 'jobs');
  return Queue.open(store, { table: 'jobs' });
}

/** Connections the server holds open on `url`'s database, from another session. */
async function connectionsTo(url: string, infoLike = '%'): Promise<number[]> {
  const database = new URL(url).pathname.slice(1);
  const rows = await adminQuery<Array<{ ID: number }>>('SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND COALESCE(INFO, \'\') LIKE ?', [database, infoLike]);
  return rows.map((r) => Number(r.ID));
}

mysqlSuite('mysql idle probe', () => {
  it('an idle worker does not claim in a loop: it claims when the probe sees a row another store enqueued, and runs it', async () => {
    const e = await fresh();
    const store = (await e.store()) as MysqlStore;
    expect(store.capabilities.idleProbe).toBe(true);
    const queue = await createJobs(store);
    const ran: unknown[] = [];
    const { worker } = await e.startWorker({ store, table: { table: 'jobs' }, concurrency: 4, handler: (job) => void ran.push(job.payload) });
    // Idle: the first empty claim, then probe rounds only (each one statement sleeping on the server).
    await waitFor('the worker to go idle', async () => worker.counters.emptyClaims >= 1 && (await connectionsTo(e.url, '%statusq_due%')).length === 1);
    const claimsWhenIdle = worker.counters.claimCalls;
    const rounds = store.stats.idleProbes;
    await waitFor('two whole rounds that found nothing', () => store.stats.idleProbes >= rounds + 2, { timeoutMs: 3 * ROUND_MS + 5_000 });
    expect(worker.counters.claimCalls).toBe(claimsWhenIdle);

    const other = await Queue.open(await e.store('enqueuing store'), { table: 'jobs' });
    await other.enqueue([{ n: 1 }, { n: 2 }]);
    await waitFor('both rows to run', () => ran.length === 2, { timeoutMs: 10_000 });
    expect(ran).toEqual(expect.arrayContaining([{ n: 1 }, { n: 2 }]));
    // The handler has returned; the settle commits after it.
    await waitFor('both rows to be settled', async () => (await queue.counts()).done === 2, { timeoutMs: 5_000 });
    expect(await queue.counts()).toMatchObject({ done: 2, pending: 0, processing: 0 });
    expect(store.stats.idleProbeFailures).toBe(0);
    await worker.stop();
    await e.closeStores();
  });

  it('the probe asks what a claim would take: a row scheduled for later does not end the wait, a due one does', async () => {
    const e = await fresh();
    const store = (await e.store()) as MysqlStore;
    const queue = await createJobs(store);
    const signal = new AbortController().signal;
    await store.execute({ sql: 'INSERT INTO jobs (payload, next_attempt_at) VALUES (?, NOW(3) + INTERVAL 1 HOUR)', params: ['later'] });
    // A whole round (every step checked) ends without a due row, and the wait goes on. Counted by the rounds the
    // store finished, not by the clock: on a loaded machine a round takes longer than ROUND_MS (clean-clone CI
    // once saw none finish within ROUND_MS + 300 ms).
    const waiting = store.waitForWork!(120_000, signal, queue.table);
    let ended = false;
    void waiting.then(() => (ended = true));
    await waitFor('a whole round of the probe to find nothing due', () => store.stats.idleProbes >= 1, { timeoutMs: 10 * ROUND_MS });
    expect(ended).toBe(false);
    expect(store.stats.idleProbeFailures).toBe(0);

    await queue.enqueue([{ n: 'now' }]);
    await withDeadline(waiting, 5_000, 'the wait to end once a due row is there');
    await e.closeStores();
  });

  it('a row that comes due during a round ends that round: each step reads the server clock (SYSDATE), not the time the statement began (NOW)', async () => {
    const e = await fresh();
    const store = (await e.store()) as MysqlStore;
    const queue = await createJobs(store);
    // Due half a second from now, a quarter into the round the wait starts next; a step reading the
    // statement's start time would see it as not yet due until the round after.
    await store.execute({ sql: 'INSERT INTO jobs (payload, next_attempt_at) VALUES (?, NOW(3) + INTERVAL 0.5 SECOND)', params: ['soon'] });
    const rounds = store.stats.idleProbes;
    await withDeadline(store.waitForWork!(60_000, new AbortController().signal, queue.table), 3 * ROUND_MS, 'the wait to end once the row is due');
    expect(store.stats.idleProbes).toBe(rounds + 1);
    expect((await queue.claim({ limit: 5, token: null })).rows).toHaveLength(1);
    await e.closeStores();
  });

  it('a probe connection killed mid-wait ends that wait; the next wait opens a new connection and still sees rows', async () => {
    const e = await fresh();
    const store = (await e.store()) as MysqlStore;
    const queue = await createJobs(store);
    const signal = new AbortController().signal;
    const waiting = store.waitForWork!(60_000, signal, queue.table);
    const [probe] = await waitFor('the probe to be asking', async () => {
      const ids = await connectionsTo(e.url, '%statusq_due%');
      return ids.length === 1 ? ids : null;
    });
    await adminQuery(`KILL CONNECTION ${probe!}`);
    await withDeadline(waiting, 5_000, 'the wait to end after its connection was killed');
    expect(store.stats.idleProbeFailures).toBe(1);

    const again = store.waitForWork!(60_000, signal, queue.table);
    const [next] = await waitFor('a new probe connection', async () => {
      const ids = await connectionsTo(e.url, '%statusq_due%');
      return ids.length === 1 ? ids : null;
    });
    expect(next).not.toBe(probe);
    await queue.enqueue([{ n: 1 }]);
    await withDeadline(again, 5_000, 'the new probe to see the row');
    await e.closeStores();
  });

  it('an aborted wait returns at once, and close() during a wait ends it and leaves no connection open on the server', async () => {
    const e = await fresh();
    const store = (await e.store()) as MysqlStore;
    const queue = await createJobs(store);
    const controller = new AbortController();
    const aborted = store.waitForWork!(60_000, controller.signal, queue.table);
    const [asking] = await waitFor('the probe to be asking', async () => {
      const ids = await connectionsTo(e.url, '%statusq_due%');
      return ids.length === 1 ? ids : null;
    });
    controller.abort();
    await withDeadline(aborted, 500, 'the aborted wait to return');

    // The round goes on; the next waits share it: still one statement on the server, on the same connection.
    const waiting = [store.waitForWork!(60_000, new AbortController().signal, queue.table), store.waitForWork!(60_000, new AbortController().signal, queue.table)];
    expect(await connectionsTo(e.url, '%statusq_due%')).toEqual([asking]);
    await withDeadline(store.close(), 5_000, 'close() during a probe round');
    await withDeadline(Promise.all(waiting), 2_000, 'the waits to end when their store closes');
    // close() killed the sleeping statement's thread (its round had two seconds to go), and the pool quit.
    await waitFor('the server to drop every connection of the store', async () => (await connectionsTo(e.url)).length === 0, { timeoutMs: 1_000 });
  });

  it('one statement waits on the server: it ends at the step that sees a row (committed or not), not at the end of its round; one connection per table', async () => {
    const e = await fresh();
    const store = await e.store();
    const jobs = await createJobs(store);
    await initTable(store, 'other_jobs');
    const other = await Queue.open(store, { table: 'other_jobs' });
    const server = (store as MysqlStore).server;
    const stats = { idleProbes: 0, idleProbeFailures: 0 };
    const open = async () => {
      const connection = await mysql.createConnection({ uri: e.url });
      for (const sql of ["SET time_zone = '+00:00'", ...idleProbeSetup(server)]) await connection.query(sql);
      return connection;
    };
    // A round of a minute: a wait that ends within seconds ended because a step saw the row.
    const probe = new MysqlIdleProbe(open, 50, 10_000, stats, async (id) => void (await adminQuery(`KILL ${Number(id)}`)), 60_000);
    expect(probe.steps).toBe(100);
    const signal = new AbortController().signal;
    try {
      const waits = [probe.wait(jobs.table, 120_000, signal), probe.wait(other.table, 120_000, signal)];
      await waitFor('one statement per table', async () => (await connectionsTo(e.url, '%statusq_due%')).length === 2);
      // Inserted in a transaction left open: the probe reads uncommitted rows, so this ends the first wait.
      const inserter = await mysql.createConnection({ uri: e.url });
      try {
        await inserter.query('START TRANSACTION');
        await inserter.query('INSERT INTO jobs (payload) VALUES (?)', ['{"n":1}']);
        await withDeadline(waits[0]!, 5_000, 'the wait on jobs to end at the step after the insert');
        await inserter.query('ROLLBACK');
      } finally {
        await inserter.end();
      }
      expect(stats).toEqual({ idleProbes: 1, idleProbeFailures: 0 });
      await other.enqueue([{ n: 2 }]);
      await withDeadline(waits[1]!, 5_000, 'the wait on other_jobs to end once its row is there');
      expect(stats).toEqual({ idleProbes: 2, idleProbeFailures: 0 });
    } finally {
      await probe.close();
    }
    await e.closeStores();
  });

  it("EXPLAIN: each step's check reads the pending index (a dependent subquery per step, never a scan of the table), with many finished rows present", async () => {
    const e = await fresh();
    const store = await e.store();
    const queue = await createJobs(store);
    await queue.enqueue(Array.from({ length: 3000 }, (_, n) => ({ n })));
    await store.execute({ sql: 'UPDATE jobs SET status = 1', params: [] });
    await store.execute({ sql: 'ANALYZE TABLE jobs', params: [] });
    const probe = new MysqlIdleProbe(() => Promise.reject(new Error('not opened')), DEFAULT_IDLE_PROBE_MS, 10_000, { idleProbes: 0, idleProbeFailures: 0 }, () => Promise.resolve());
    const statement = probe.statementFor(queue.table);
    const { rows } = await store.execute({ sql: `EXPLAIN ${statement.sql}`, params: statement.params });
    const onJobs = rows.filter((r) => r.table === 'jobs');
    expect(onJobs, JSON.stringify(rows)).toHaveLength(1);
    expect(onJobs[0]).toMatchObject({ select_type: 'DEPENDENT SUBQUERY', key: pendingIndexName('jobs') });
    expect(onJobs[0]!.type).not.toBe('ALL');
    await e.closeStores();
  });

  it('idleProbeMs 0 (option or URL) turns the probe off: idle workers poll with claims; bad values are refused', async () => {
    const e = await fresh();
    const off = (await e.store('probe off', `${e.url}?idleProbeMs=0`)) as MysqlStore;
    expect(off.capabilities.idleProbe).toBe(false);
    expect(off.waitForWork).toBeUndefined();
    const slow = (await e.store('slow probe', e.url, (u) => connect(u, { idleProbeMs: 250 }))) as MysqlStore;
    expect(slow.capabilities.idleProbe).toBe(true);
    for (const bad of ['-1', 'abc', '', '1.5', '60001']) {
      await expect(connect(`${e.url}?idleProbeMs=${bad}`)).rejects.toBeInstanceOf(ConfigError);
    }
    await expect(connect(e.url, { idleProbeMs: Number.NaN })).rejects.toThrow(/idleProbeMs must be a whole number/);
    await e.closeStores();
  });
});
