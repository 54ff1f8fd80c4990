/**
 * What only MySQL/MariaDB shows in its sessions: settings on every pooled connection, ids and counts, the native
 * error kinds from real conflicts, deadlines, and connections killed idle or under a running worker. These are
 * what a pooled production client meets and one healthy connection never shows. The claim itself (its packets,
 * gate and plans) is in mysql.server-claims.test.ts. Each test has its own database.
 */
import { expect, it } from 'vitest';
import { Queue, StoreError, initTable } from '@statusq/core';
import { Ledger, withDeadline } from '@statusq/conformance';
import { connect, optionsFromUrl, type MysqlStore } from './index.js';
import { adminQuery, mysqlEnvEachTest, mysqlSuite, rawConnection } from './test/mysql-test-db.js';

const FAST = { pollMinMs: 2, pollMaxMs: 20 } as const;
const fresh = mysqlEnvEachTest();

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => undefined,
    (error: unknown) => error,
  );
}

mysqlSuite('mysql adapter on a real server', () => {
  it('every pooled connection runs with time_zone +00:00 and READ COMMITTED; the server and its SKIP LOCKED support are detected', async () => {
    const e = await fresh();
    const store = (await e.store()) as MysqlStore;
    expect(store.server.skipLocked).toBe(true);
    expect(store.claimStrategy).toBe('native');
    expect(store.capabilities).toEqual({ batchClaim: true, skipLocked: true, returning: false, listenNotify: false, idleProbe: true, insertReturning: false, insertOnConflictDoNothing: false, groupedResults: true });
    // Several statements at once force several pooled connections.
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        store.execute({ sql: 'SELECT @@session.time_zone AS tz, @@session.tx_isolation AS iso, CONNECTION_ID() AS cid, SLEEP(0.05) AS s', params: [] }).catch(() =>
          // MySQL 8 renamed tx_isolation.
          store.execute({ sql: 'SELECT @@session.time_zone AS tz, @@session.transaction_isolation AS iso, CONNECTION_ID() AS cid, SLEEP(0.05) AS s', params: [] }),
        ),
      ),
    );
    const rows = results.map((r) => r.rows[0]!);
    expect(new Set(rows.map((r) => r.cid)).size).toBeGreaterThan(1);
    for (const r of rows) expect(r).toMatchObject({ tz: '+00:00', iso: 'READ-COMMITTED' });
    const forced = (await connect(`${e.url}?claimStrategy=conditional-update`)) as MysqlStore;
    expect(forced.claimStrategy).toBe('conditional-update');
    expect(forced.capabilities).toMatchObject({ batchClaim: false, skipLocked: false });
    await forced.close();
    await e.closeStores();
  });

  it('an id a BEFORE INSERT trigger may set is not known to be unfilled (nothing refused on a guess); AUTO_INCREMENT and a DEFAULT fill it; a bare id does not', async () => {
    const e = await fresh();
    const store = await e.store();
    const run = (sql: string) => store.execute({ sql, params: [] });
    const columns = 'date DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), status TINYINT NULL, payload TEXT NULL';
    await run(`CREATE TABLE numbered (id INT NOT NULL PRIMARY KEY, ${columns})`);
    await run('CREATE TRIGGER numbered_ids BEFORE INSERT ON numbered FOR EACH ROW SET NEW.id = COALESCE(NEW.id, 7)');
    await run(`CREATE TABLE counted (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, ${columns})`);
    await run(`CREATE TABLE defaulted (id CHAR(36) NOT NULL DEFAULT (UUID()) PRIMARY KEY, ${columns})`);
    await run(`CREATE TABLE bare (id INT NOT NULL PRIMARY KEY, ${columns})`);
    const filled = async (table: string) => (await Queue.open(store, { table })).idColumn.filledOnInsert;
    expect([await filled('numbered'), await filled('counted'), await filled('defaulted'), await filled('bare')]).toEqual([undefined, true, true, false]);
    await e.closeStores();
  });

  it('BIGINT ids come back as numbers when safe and as exact strings beyond 2^53; counts are numbers; a Date-derived ISO string binds as DATETIME', async () => {
    const e = await fresh();
    const store = await e.store();
    const queue = await Queue.open(store, (await initTable(store, 'jobs')) && { table: 'jobs' });
    await store.execute({ sql: 'INSERT INTO jobs (id, payload) VALUES (?, ?), (?, ?)', params: [7, '{}', '9007199254740993', '{}'] });
    const { rows } = await store.execute({ sql: 'SELECT id FROM jobs ORDER BY id', params: [] });
    expect(rows.map((r) => r.id)).toEqual([7, '9007199254740993']);
    const claimed = await queue.claim({ limit: 5, token: 't' });
    expect(claimed.rows.map((r) => r.id).sort()).toEqual([7, '9007199254740993'].sort());
    const [settled] = await queue.apply([queue.sql.complete('9007199254740993', 't', null)]);
    expect(settled!.affected).toBe(1);
    expect(await queue.counts()).toEqual({ pending: 0, processing: 1, done: 1, abuse: 0, failed: 0, other: 0 });
    const n = (await store.execute({ sql: 'SELECT COUNT(*) AS n FROM jobs', params: [] })).rows[0]!.n;
    expect(n).toBe(2);
    const at = new Date(Date.UTC(2024, 0, 2, 3, 4, 5, 678));
    await store.execute({ sql: 'UPDATE jobs SET date = ? WHERE id = 7', params: [at.toISOString()] });
    const back = (await store.execute({ sql: 'SELECT date FROM jobs WHERE id = 7', params: [] })).rows[0]!.date;
    expect((back as Date).getTime()).toBe(at.getTime());
    await e.closeStores();
  });

  it('real conflicts map to StoreError kinds: deadlock 1213 and lock wait timeout 1205 are WriteConflict (and counted), a duplicate key UniqueViolation', async () => {
    const e = await fresh();
    const store = (await e.store()) as MysqlStore;
    await initTable(store, 'jobs');
    await store.execute({ sql: 'INSERT INTO jobs (id, payload) VALUES (1, ?), (2, ?)', params: ['a', 'b'] });

    const dup = await rejection(store.execute({ sql: 'INSERT INTO jobs (id, payload) VALUES (1, ?)', params: ['again'] }));
    expect(dup).toBeInstanceOf(StoreError);
    expect(dup).toMatchObject({ kind: 'UniqueViolation', nativeCode: 1062 });

    // A deadlock, made on purpose: a raw connection holds row 2 and then wants row 1 while a store batch
    // holds row 1 and wants row 2. The store never re-runs it: the victim's error reaches the caller.
    const impatient = (await connect(e.url, { lockWaitTimeoutSeconds: 1 })) as MysqlStore;
    const other = await rawConnection(e.url);
    try {
      await other.query('START TRANSACTION');
      await other.query('UPDATE jobs SET payload = ? WHERE id = 2', ['x']);
      const batch = impatient.executeBatch([
        { sql: 'UPDATE jobs SET payload = ? WHERE id = 1', params: ['y'] },
        { sql: 'SELECT SLEEP(0.2) AS s', params: [] },
        { sql: 'UPDATE jobs SET payload = ? WHERE id = 2', params: ['y'] },
      ]);
      const otherSide = (async () => {
        await new Promise((resolve) => setTimeout(resolve, 50));
        return other.query('UPDATE jobs SET payload = ? WHERE id = 1', ['x']).then(
          () => null,
          (error: unknown) => error,
        );
      })();
      const [mine, theirs] = await Promise.all([rejection(batch), otherSide]);
      await other.query('ROLLBACK');
      const errors = [mine, theirs].filter(Boolean);
      expect(errors).toHaveLength(1);
      // Whichever side InnoDB chose as the victim, the native error is 1213.
      if (mine) {
        expect(mine).toMatchObject({ kind: 'WriteConflict', nativeCode: 1213, retryable: true });
        expect(impatient.stats.deadlocks).toBe(1);
      } else expect((theirs as { errno: number }).errno).toBe(1213);

      // A lock wait timeout: the raw connection holds row 1 past the store's 1 s timeout.
      await other.query('START TRANSACTION');
      await other.query('UPDATE jobs SET payload = ? WHERE id = 1', ['z']);
      const waited = await rejection(impatient.execute({ sql: 'UPDATE jobs SET payload = ? WHERE id = 1', params: ['w'] }));
      await other.query('ROLLBACK');
      expect(waited).toMatchObject({ kind: 'WriteConflict', nativeCode: 1205 });
      expect(impatient.stats.lockWaitTimeouts).toBe(1);
    } finally {
      await other.end();
      await impatient.close();
    }
    await e.closeStores();
  });

  it('a connection killed while idle in the pool is dropped: at most the next call meets ConnectionLost, then calls work again', async () => {
    const e = await fresh();
    const store = (await e.store()) as MysqlStore;
    const cid = (await store.execute({ sql: 'SELECT CONNECTION_ID() AS cid', params: [] })).rows[0]!.cid as number;
    await adminQuery(`KILL CONNECTION ${Number(cid)}`);
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const result = await store.execute({ sql: 'SELECT CONNECTION_ID() AS cid', params: [] }).then(
        (r) => `ok ${r.rows[0]!.cid === cid ? 'same' : 'new'}`,
        (error: unknown) => (error instanceof StoreError ? `${error.kind} ${String(error.nativeCode)}` : String(error)),
      );
      outcomes.push(result);
    }
    expect(outcomes.filter((o) => o.startsWith('ok'))).toEqual(outcomes.slice(outcomes.length - outcomes.filter((o) => o.startsWith('ok')).length));
    expect(outcomes.filter((o) => !o.startsWith('ok')).every((o) => o.startsWith('ConnectionLost'))).toBe(true);
    expect(outcomes.filter((o) => !o.startsWith('ok')).length).toBeLessThanOrEqual(1);
    expect(outcomes.at(-1)).toBe('ok new');
    await e.closeStores();
  });

  it('deadlines from the URL: a statement slower than queryTimeout rejects with ConnectionLost in time and its connection is dropped; a schema change gets schemaTimeout', async () => {
    const e = await fresh();
    const store = (await e.store('store with short deadlines', `${e.url}?queryTimeout=500&maxConnections=1`)) as MysqlStore;
    const connectionId = async () => Number((await store.execute({ sql: 'SELECT CONNECTION_ID() AS cid', params: [] })).rows[0]!.cid);
    const before = await connectionId();
    const started = Date.now();
    const error = await rejection(store.execute({ sql: 'SELECT SLEEP(5)', params: [] }));
    const elapsed = Date.now() - started;
    expect(error).toBeInstanceOf(StoreError);
    expect((error as StoreError).kind).toBe('ConnectionLost');
    expect((error as StoreError).nativeCode).toBe('QUERY_TIMEOUT');
    expect(elapsed).toBeLessThan(4000);
    // The late answer could only arrive on the old connection, which is gone: the next call runs on a new one.
    expect(await connectionId()).not.toBe(before);
    expect(store.stats.connectionsLost).toBe(1);
    // Twice the query deadline, yet a schema change (default schemaTimeout 10 min) is not cut short.
    await store.execute({ sql: 'CREATE TABLE slow_ddl AS SELECT SLEEP(1) AS slept', params: [] });
    expect((await store.execute({ sql: 'SELECT COUNT(*) AS n FROM slow_ddl', params: [] })).rows).toEqual([{ n: 1 }]);
    await e.closeStores();
  });

  it('connections killed under a running worker (KILL CONNECTION, twice): the worker goes on, no job is lost, none runs or settles twice', async () => {
    const e = await fresh();
    const setup = await e.store('setup store');
    await initTable(setup, 'jobs');
    const queue = await Queue.open(setup, { table: 'jobs' });
    const jobs = 2000;
    await queue.enqueue(Array.from({ length: jobs }, (_, n) => ({ n })));
    const ids = (await setup.execute({ sql: 'SELECT id FROM jobs', params: [] })).rows.map((r) => String(r.id));
    const database = optionsFromUrl(e.url).database!;
    const ledger = new Ledger();
    const store = (await e.store('worker store')) as MysqlStore;
    let killed = 0;
    let killing: Promise<void> = Promise.resolve();
    const killAll = async () => {
      const victims = await adminQuery<Array<{ ID: number }>>('SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()', [database]);
      for (const { ID } of victims) {
        await adminQuery(`KILL CONNECTION ${Number(ID)}`).catch(() => undefined);
        killed++;
      }
    };
    const w = await e.startWorker(
      {
        store,
        table: { table: 'jobs' },
        concurrency: 8,
        batch: 8,
        // Claims whose COMMIT was lost with the connection stay processing until their lease expires.
        leaseMs: 1500,
        reapIntervalMs: 200,
        maxAttempts: 5,
        exitWhenEmpty: true,
        ...FAST,
        handler: async (job) => {
          ledger.record(job);
          await new Promise((resolve) => setImmediate(resolve));
        },
      },
      'worker',
      (worker) =>
        worker.on('completed', () => {
          const done = worker.counters.completed;
          if (done === 300 || done === 1200) killing = killing.then(killAll);
        }),
    );
    const counters = await withDeadline(w.done, 100_000, 'the worker to drain the queue across killed connections');
    await killing;
    expect(killed).toBeGreaterThan(0);
    expect(ledger.notExactlyOnce(ids)).toEqual([]);
    expect(await queue.counts()).toEqual({ pending: 0, processing: 0, done: jobs, abuse: 0, failed: 0, other: 0 });
    // A settle whose COMMIT was lost is retried and then finds the row already done: claimLost, not a second settle.
    expect(counters.completed + counters.claimLost).toBe(jobs);
    expect(store.stats.connectionsLost).toBeGreaterThan(0);
    const kinds = new Set(w.errors.map((x) => (x.error instanceof StoreError ? x.error.kind : String(x.error))));
    for (const kind of kinds) expect(['ConnectionLost']).toContain(kind);
    await e.closeStores();
  });
});

