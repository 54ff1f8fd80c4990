/**
 * What only PostgreSQL has on the connection, beyond the shared conformance suite: connections killed under a
 * running worker and under a call in flight, the pool size and deadlines the URL sets, and LISTEN/NOTIFY
 * wake-ups through the schema's trigger, again after the listening connection was killed. These are failures a
 * pooled client meets in production that one healthy connection never shows. The statements themselves
 * (plans, id lists, prepared statements, types, errors) are in postgres.statements.test.ts. Each test runs in its
 * own database; an unreachable server skips the file (fails with STATUSQ_REQUIRE_DATABASES=1).
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, StoreError, Worker, initTable, migrateTable } from '@statusq/core';
import { Ledger, deferred, withDeadline, waitFor } from '@statusq/conformance';
import { connect, notifyChannel, type PostgresStore } from './index.js';
import { settleChannel } from './postgres-dialect.js';
import { databaseEachTest, whenPostgresAnswers } from './test/postgres-test-db.js';

const POLL = { pollMinMs: 2, pollMaxMs: 50 } as const;

whenPostgresAnswers('PostgreSQL-specific tests', () => {
  describe('PostgreSQL adapter', () => {
    const { url, store, opened, running } = databaseEachTest();

    it('ConnectionLost: the worker\'s connections are killed (pg_terminate_backend) three times mid-run; it reconnects and every job ends done, none lost', async () => {
      const JOBS = 3000;
      const admin = await store();
      await initTable(admin, 'jobs');
      const q = (n: string) => admin.dialect.quoteIdentifier(n);
      await admin.execute({ sql: `INSERT INTO ${q('jobs')} (${q('payload')}) SELECT json_build_object('n', g)::text FROM generate_series(1, ${JOBS}) g`, params: [] });
      const ids = (await admin.execute({ sql: `SELECT ${q('id')} AS id FROM ${q('jobs')}`, params: [] })).rows.map((r) => r.id);
      const victim = await store({ maxConnections: 3, pool: { application_name: 'statusq_victim' } });
      const kills: number[] = [];
      const kill = async () => {
        const { rows } = await admin.execute({
          sql: `SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'statusq_victim'`,
          params: [],
        });
        kills.push(Number(rows[0]!.n));
      };
      const ledger = new Ledger();
      const thresholds = new Set([JOBS / 4, JOBS / 2, (3 * JOBS) / 4]);
      const lost: unknown[] = [];
      const w = await Worker.create({
        store: victim,
        table: { table: 'jobs' },
        concurrency: 8,
        exitWhenEmpty: true,
        // A claim whose reply was lost with its connection comes back through the reaper.
        leaseMs: 2000,
        reapIntervalMs: 200,
        ...POLL,
        handler: async (job) => {
          ledger.record(job);
          // The job is in flight while its worker's connections die.
          if (thresholds.delete(ledger.order.length)) await kill();
        },
      });
      running.push(w);
      w.on('error', ({ error }) => {
        if (!(error instanceof StoreError && error.kind === 'ConnectionLost')) lost.push(error);
      });
      const connectionErrors: StoreError[] = [];
      w.on('error', ({ error }) => {
        if (error instanceof StoreError && error.kind === 'ConnectionLost') connectionErrors.push(error);
      });
      const counters = await withDeadline(w.run(), 90_000, 'the worker to finish after its connections were killed');

      expect(kills).toHaveLength(3);
      expect(kills.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
      expect(lost).toEqual([]);
      const counts = await (await Queue.open(admin, { table: 'jobs' })).counts();
      expect(counts).toEqual({ pending: 0, processing: 0, done: JOBS, abuse: 0, failed: 0, other: 0 });
      // Every job ran; a job ran twice only if a claim's reply died with its connection (the row came back by
      // lease), at most one claim batch per kill.
      const missing = ids.filter((id) => ledger.count(id) === 0);
      expect(missing).toEqual([]);
      const twice = ids.filter((id) => ledger.count(id) > 1);
      expect(twice.length).toBeLessThanOrEqual(3 * 8);
      expect(ids.filter((id) => ledger.count(id) > 2)).toEqual([]);
      // Each row was settled done exactly once: completions (plus settles found already applied after a lost
      // COMMIT reply, counted as claim-lost) cover every job, and the rows say done.
      expect(counters.completed + counters.claimLost).toBeGreaterThanOrEqual(JOBS);
      expect(counters.completed).toBeLessThanOrEqual(JOBS + twice.length);
      // The store works again after the kills.
      expect((await victim.execute({ sql: 'SELECT 1 AS one', params: [] })).rows).toEqual([{ one: 1 }]);
      console.info(`[postgres] connection kills: ${kills.join(', ')} backends; ${connectionErrors.length} ConnectionLost events; ${twice.length} jobs ran twice`);
    });

    it('ConnectionLost: a killed connection rejects the call in flight with kind ConnectionLost and native code 57P01; the next call works', async () => {
      const admin = await store();
      const s = await store({ maxConnections: 1, pool: { application_name: 'statusq_victim' } });
      const sleeping = s.execute({ sql: 'SELECT pg_sleep(30)', params: [] }).then(
        () => null,
        (e: unknown) => e,
      );
      await waitFor('the sleeping query to show up', async () => {
        const { rows } = await admin.execute({ sql: `SELECT pid FROM pg_stat_activity WHERE application_name = 'statusq_victim' AND query LIKE 'SELECT pg_sleep%'`, params: [] });
        return rows.length > 0;
      });
      await admin.execute({ sql: `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'statusq_victim'`, params: [] });
      const error = await withDeadline(sleeping, 10_000, 'the killed query to reject');
      expect(error).toBeInstanceOf(StoreError);
      expect((error as StoreError).kind).toBe('ConnectionLost');
      expect((error as StoreError).retryable).toBe(true);
      expect(['57P01', 'CONNECTION_TERMINATED']).toContain(String((error as StoreError).nativeCode));
      expect((await s.execute({ sql: 'SELECT 2 AS two', params: [] })).rows).toEqual([{ two: 2 }]);
      // An unreachable server is ConnectionLost as well.
      const nowhere = await connect('postgres://postgres@127.0.0.1:1/none', { connectTimeoutMs: 2000 });
      opened.push(nowhere);
      const refused = await nowhere.execute({ sql: 'SELECT 1', params: [] }).catch((e: unknown) => e);
      expect((refused as StoreError).kind).toBe('ConnectionLost');
    });

    it('maxConnections from the URL bounds the pool (the other parameters still reach pg); connectionLimit is refused, naming maxConnections', async () => {
      const s = await connect(`${url()}?maxConnections=1&application_name=statusq_pool`);
      opened.push(s);
      const calls = await Promise.all(
        Array.from({ length: 3 }, () => s.execute({ sql: "SELECT pg_backend_pid() AS pid, current_setting('application_name') AS name, pg_sleep(0.05) AS s", params: [] })),
      );
      expect(new Set(calls.map((c) => c.rows[0]!.pid)).size).toBe(1);
      expect(calls[0]!.rows[0]!.name).toBe('statusq_pool');
      const wide = await connect(`${url()}?maxConnections=3`);
      opened.push(wide);
      const wideCalls = await Promise.all(Array.from({ length: 3 }, () => wide.execute({ sql: 'SELECT pg_backend_pid() AS pid, pg_sleep(0.1) AS s', params: [] })));
      expect(new Set(wideCalls.map((c) => c.rows[0]!.pid)).size).toBe(3);
      await expect(connect(`${url()}?connectionLimit=2`)).rejects.toThrow(/connectionLimit in the PostgreSQL URL was renamed maxConnections/);
      await expect(connect(`${url()}?maxConnections=0`)).rejects.toThrow(/maxConnections in the PostgreSQL URL must be a positive integer/);
      // A parameter neither statusq nor pg reads was dropped without a word (issue 40's probe); pg's own still pass.
      for (const bad of ['bogus=1', 'sslpassword=x', 'application-name=x']) {
        await expect(connect(`${url()}?sslmode=disable&${bad}`), bad).rejects.toThrow(new RegExp(`^unknown parameter "${bad.split('=')[0]}" in the PostgreSQL URL; it takes application_name, binary, `));
      }
    });

    it('deadlines from the URL: a statement slower than queryTimeout rejects with ConnectionLost in time and its connection is dropped; a schema change gets schemaTimeout; other parameters still reach pg; a bad value is a ConfigError', async () => {
      const s = await connect(`${url()}?queryTimeout=500&application_name=statusq_deadline`, { maxConnections: 1 });
      opened.push(s);
      const pidOf = async () => Number((await s.execute({ sql: 'SELECT pg_backend_pid() AS pid', params: [] })).rows[0]!.pid);
      const before = await pidOf();
      const started = Date.now();
      const error = await s.execute({ sql: 'SELECT pg_sleep(5)', params: [] }).catch((e: unknown) => e);
      const elapsed = Date.now() - started;
      expect(error).toBeInstanceOf(StoreError);
      expect((error as StoreError).kind).toBe('ConnectionLost');
      expect((error as StoreError).nativeCode).toBe('QUERY_TIMEOUT');
      expect(elapsed).toBeLessThan(4000);
      // The late answer could only arrive on the old connection, which is gone: the next call runs on a new one.
      expect(await pidOf()).not.toBe(before);
      expect((await s.execute({ sql: "SELECT current_setting('application_name') AS name", params: [] })).rows).toEqual([{ name: 'statusq_deadline' }]);
      // Twice the query deadline, yet a schema change (default schemaTimeout 10 min) is not cut short.
      await s.execute({ sql: 'CREATE TABLE slow_ddl AS SELECT pg_sleep(1)::text AS slept', params: [] });
      expect((await s.execute({ sql: 'SELECT COUNT(*) AS n FROM slow_ddl', params: [] })).rows).toEqual([{ n: 1 }]);
      await expect(connect(`${url()}?queryTimeout=soon`)).rejects.toThrow(/queryTimeout in the PostgreSQL URL must be a positive whole number of milliseconds/);
      await expect(connect(url(), { connectTimeoutMs: 0 })).rejects.toBeInstanceOf(ConfigError);
    });

    it('LISTEN/NOTIFY: init installs the trigger; waitForWork wakes on INSERT and on a requeue back to pending, and again after its connection was killed', async () => {
      const writer = await store();
      await initTable(writer, 'jobs', { with: ['await'] });
      const writerQueue = await Queue.open(writer, { table: 'jobs' });
      const { rows: triggers } = await writer.execute({
        sql: `SELECT tgname, encode(tgargs, 'escape') AS args FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal ORDER BY tgname`,
        params: [],
      });
      const channel = notifyChannel('jobs');
      expect(triggers.map((t) => [t.tgname, String(t.args).replace(/\\000$/, '')])).toEqual([
        ['statusq_notify_insert', channel],
        ['statusq_notify_settle', `${settleChannel('jobs')}\\000id`],
        ['statusq_notify_update', channel],
      ]);
      // A second init changes nothing, triggers included.
      expect((await initTable(writer, 'jobs')).migrated).toEqual({ table: 'jobs', addedColumns: [], createdIndex: null, createdPriorityIndex: null, createdKeyIndex: null, createdDispatchIndex: null, createdKindIndex: null, createdGroupIndex: null, addedStatus: false, beside: null });

      const waiter = await store();
      await Queue.open(waiter, { table: 'jobs' });
      await waiter.listen();
      expect(waiter.listeningChannels).toEqual([channel]);
      const never = new AbortController();
      const wakeOn = async (what: string, action: () => Promise<unknown>) => {
        const started = Date.now();
        const waiting = waiter.waitForWork(60_000, never.signal);
        await action();
        await withDeadline(waiting, 10_000, `waitForWork to wake on ${what}`);
        return Date.now() - started;
      };
      await wakeOn('an INSERT', () => writerQueue.enqueue([{ n: 1 }]));
      const claimed = await writerQueue.claim({ limit: 1, token: 'w' });
      await writerQueue.apply([writerQueue.sql.giveUp(claimed.rows[0]!.id as number, 'w', 'nope')]);
      await wakeOn('a requeue', () => writerQueue.requeue('failed'));

      // Kill the listening connection: the next wait reopens it (and returns at once, since rows may have
      // arrived unheard), after which NOTIFY wakes it again.
      await writer.execute({ sql: `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'`, params: [] });
      await waitFor('the store to notice its listening connection died', () => waiter.listeningChannels.length === 0);
      await waiter.listen();
      expect(waiter.listeningChannels).toEqual([channel]);
      await waiter.waitForWork(60_000, never.signal);
      await wakeOn('an INSERT after reconnecting', () => writerQueue.enqueue([{ n: 2 }]));
    });

    it('LISTEN/NOTIFY: an idle worker polling every 30 s picks up a new row at once', async () => {
      const writer = await store();
      const writerQueue = await Queue.open(writer, { table: (await initTable(writer, 'jobs')).table });
      const handled: number[] = [];
      const first = deferred();
      const w = await Worker.create({
        store: await store(),
        table: { table: 'jobs' },
        concurrency: 1,
        pollMinMs: 30_000,
        pollMaxMs: 30_000,
        handler: async (job) => {
          handled.push((job.payload as { n: number }).n);
          first.resolve();
        },
      });
      running.push(w);
      const done = w.run();
      // The worker has claimed nothing and sleeps; wait until its listener is up so the INSERT is heard.
      await waitFor('the worker to listen', () => (w.queue.store as PostgresStore).listeningChannels.length > 0);
      await writerQueue.enqueue([{ n: 7 }]);
      await withDeadline(first.promise, 10_000, 'the worker to be woken by NOTIFY (polling would take 30 s)');
      expect(handled).toEqual([7]);
      await w.stop(5000);
      await done;
    });

    it('settle NOTIFY (init --with await): waitForChange names the settled rows by id on a channel of its own, which wakes no idle worker; a table without the settle trigger still resolves waitFor (polling), and migrate --with await adds the trigger', async () => {
      const writer = await store();
      await initTable(writer, 'jobs', { with: ['await'] });
      const writerQueue = await Queue.open(writer, { table: 'jobs' });
      const [first, second, third] = await writerQueue.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }]);
      await writerQueue.claim({ limit: 3, token: 'w' });

      const waiter = await store();
      const waiterQueue = await Queue.open(waiter, { table: 'jobs' });
      await waiter.listen();
      const never = new AbortController();
      // Consumes what the listener's opening announced, so the next waitForWork waits for a NOTIFY.
      await waiter.waitForWork(60_000, never.signal);
      let workWoken = false;
      const stopWork = new AbortController();
      const working = waiter.waitForWork(60_000, stopWork.signal).then(() => (workWoken = !stopWork.signal.aborted));
      // The settle channel's LISTEN taking effect names no row: whatever settled before it must be read.
      expect(await withDeadline(waiter.waitForChange(60_000, never.signal, waiterQueue.table), 10_000, 'the settle channel to be listened on')).toBeNull();
      expect(waiter.listeningChannels).toEqual([notifyChannel('jobs'), settleChannel('jobs')]);
      const settled = waiter.waitForChange(60_000, never.signal, waiterQueue.table);
      await writerQueue.apply([writerQueue.sql.complete(first!, 'w', null), writerQueue.sql.giveUp(second!, 'w', 'nope')]);
      expect(new Set(await withDeadline(settled, 10_000, 'the settle NOTIFY'))).toEqual(new Set([String(first), String(second)]));
      // Both channels arrive on one connection, in order: a work wake-up from the settle would have run by now.
      await new Promise((resolve) => setImmediate(resolve));
      expect(workWoken).toBe(false);
      stopWork.abort();
      await working;

      await writer.execute({ sql: 'DROP TRIGGER statusq_notify_settle ON jobs', params: [] });
      const outcome = waiterQueue.waitFor(third!, { timeoutMs: 60_000 });
      await writerQueue.apply([writerQueue.sql.complete(third!, 'w', JSON.stringify({ ok: 3 }))]);
      expect(await withDeadline(outcome, 10_000, 'waitFor to read the row by polling')).toEqual({ status: 'done', result: { ok: 3 }, lastError: null });
      const listenless = await store({ listen: false });
      expect(listenless.waitForChange).toBeUndefined();
      expect(await (await Queue.open(listenless, { table: 'jobs' })).waitFor(first!, { timeoutMs: 0 })).toEqual({ status: 'done', result: undefined, lastError: null });

      const settleTriggers = async () => (await writer.execute({ sql: `SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs'::regclass AND tgname = 'statusq_notify_settle'`, params: [] })).rows;
      await migrateTable(writer, { table: 'jobs' });
      expect(await settleTriggers()).toHaveLength(0);
      await migrateTable(writer, { table: 'jobs', with: ['await'] });
      expect(await settleTriggers()).toHaveLength(1);
    });

    it('channel names: derived from the table, validated, at most 63 characters', () => {
      expect(settleChannel('jobs')).toBe('statusq:settled:jobs');
      expect(settleChannel(`a${'b'.repeat(62)}`).length).toBeLessThanOrEqual(63);
      expect(notifyChannel('jobs')).toBe('statusq_jobs');
      expect(notifyChannel('app.jobs')).toBe('statusq_app.jobs');
      const long = notifyChannel(`a${'b'.repeat(62)}`);
      expect(long.length).toBeLessThanOrEqual(63);
      expect(notifyChannel(`a${'b'.repeat(62)}`)).toBe(long);
      expect(() => notifyChannel('bad"name')).toThrow(/invalid table name/);
    });
  });
});
