/**
 * The idle probe (mysql-idle-probe.ts): how an idle worker on MySQL/MariaDB learns of new rows without claiming
 * in a loop. Real server, real workers; each test has its own database.
 */
import { expect, it } from 'vitest';
import { ConfigError, Queue, initTable, type Store } from '@statusq/core';
import { waitFor, withDeadline } from '@statusq/conformance';
import { connect, type MysqlStore } from './index.js';
import { DEFAULT_IDLE_PROBE_MS } from './mysql-idle-probe.js';
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
    // Idle: the first empty claim, then probe rounds only.
    await waitFor('the worker to go idle', () => worker.counters.emptyClaims >= 1 && store.stats.idleProbes >= 1);
    const claimsWhenIdle = worker.counters.claimCalls;
    const rounds = store.stats.idleProbes;
    await waitFor('six more probe rounds', () => store.stats.idleProbes >= rounds + 6, { timeoutMs: 5_000 });
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
    const started = performance.now();
    await store.waitForWork!(6 * DEFAULT_IDLE_PROBE_MS, signal, queue.table);
    expect(performance.now() - started).toBeGreaterThanOrEqual(6 * DEFAULT_IDLE_PROBE_MS - 5);
    expect(store.stats.idleProbes).toBeGreaterThanOrEqual(5);

    const waiting = store.waitForWork!(60_000, signal, queue.table);
    await queue.enqueue([{ n: 'now' }]);
    await withDeadline(waiting, 5_000, 'the wait to end once a due row is there');
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
    await waitFor('a probe round', () => store.stats.idleProbes >= 1);
    controller.abort();
    await withDeadline(aborted, 500, 'the aborted wait to return');

    const waiting = store.waitForWork!(60_000, new AbortController().signal, queue.table);
    await waitFor('the probe to be asking', async () => (await connectionsTo(e.url, '%statusq_due%')).length === 1);
    await withDeadline(store.close(), 5_000, 'close() during a probe round');
    await withDeadline(waiting, 2_000, 'the wait to end when its store closes');
    await waitFor('the server to drop every connection of the store', async () => (await connectionsTo(e.url)).length === 0, { timeoutMs: 5_000 });
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
