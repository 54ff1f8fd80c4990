import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, Scheduler, StoreError, loadHandler, SchemaError, initTable, migrateTable, type Handler, type Store, type WorkerOptions } from '@statusq/core';
import { FAST, Ledger, countsOf, deferred, readRows, statusOf, waitFor, withDeadline, type StartedWorker, type TestEnv } from '../harness.js';
import { ensureSideTable, kindIndexName } from '@statusq/core/adapter';
import { withLatency } from '../latency.js';
import { childScript } from '../child-handle.js';
import type { ChildWorkerArgs, ChildWorkerResult } from '../child-worker.js';
import { createTableA } from '../tables.js';
import { mostAtOnce, paceViolations, runLedgerModule } from '../run-times.js';
import { generateTableARows } from '@statusq/test-fixtures';

/** A managed table with a kind column and its index. */
async function kindJobs(store: Store, table = 'jobs'): Promise<Queue> {
  await initTable(store, table, { with: ['kinds'] });
  return Queue.open(store, { table });
}

/**
 * Runs the jobs table's rows of kinds report and email through `processes` worker processes of 8 slots and 4
 * workers in this process, all with `limits`, each loading `handlerPath`; returns `read()` once all drained.
 */
async function runKindFleet<T>(env: TestEnv, handlerPath: string, limits: Pick<WorkerOptions, 'kindConcurrency' | 'kindRate'>, processes: number, read: () => T): Promise<T> {
  // Made here: the latency wrappers of this process's workers carry no schema support.
  const setup = await env.store('side tables');
  await ensureSideTable(setup, 'jobs', 'statusq_kind_limits');
  await ensureSideTable(setup, 'jobs', 'statusq_rate_limits');
  const worker = { ...FAST, ...limits, exitWhenEmpty: true };
  const children = Array.from({ length: processes }, (_, i) =>
    env.spawnChild(childScript('child-worker.js'), { adapterModule: env.adapterModulePath, url: env.url, table: { table: 'jobs' }, handlerPath, concurrency: 8, worker } satisfies ChildWorkerArgs, {}, `kind worker process ${i + 1}`),
  );
  const { handlers } = await loadHandler(handlerPath);
  const local: StartedWorker[] = [];
  for (let i = 0; i < 4; i++) local.push(await env.startWorker({ store: withLatency(await env.store(`worker store ${i + 1}`)), table: { table: 'jobs' }, handlers, concurrency: 4, ...worker }));
  await Promise.all(children.map((child) => child.result<ChildWorkerResult>(100_000)));
  await withDeadline(Promise.all(local.map((w) => w.done)), 100_000, 'the workers in this process');
  // A server with row locks may roll back one claim of two that deadlock; the worker reports it and claims again.
  expect(local.flatMap((w) => w.errors).filter((e) => !(e.error instanceof StoreError && e.error.kind === 'WriteConflict'))).toEqual([]);
  return read();
}

export function kindCases(env: () => TestEnv): void {
  describe('kinds (migrate --with kinds, enqueue kind, handlers by kind)', () => {
    it('routes by kind under racing workers: each worker runs only the kinds it has handlers for, each row once; rows of other kinds and without a kind stay pending', async () => {
      const setup = await env().store('setup store');
      const queue = await kindJobs(setup);
      const perKind = 120;
      const ids = {
        email: await queue.enqueue(Array.from({ length: perKind }, (_, n) => ({ to: `user${n}@example.com` })), { kind: 'email' }),
        report: await queue.enqueue(Array.from({ length: perKind }, (_, n) => ({ day: n })), { kind: 'report' }),
        // No worker has a handler for these: they must stay pending.
        archive: await queue.enqueue(Array.from({ length: 20 }, (_, n) => ({ n })), { kind: 'archive' }),
        none: await queue.enqueue(Array.from({ length: 20 }, (_, n) => ({ n }))),
      };
      const ledger = new Ledger();
      const wrongKind: string[] = [];
      const recording = (kind: string, check: (payload: unknown) => boolean): Handler => async (job, ctx) => {
        ledger.record(job, ctx.workerId);
        if (job.kind !== kind || !check(job.payload)) wrongKind.push(`${String(job.id)} (${String(job.kind)}) ran as ${kind}`);
        await new Promise((resolve) => setImmediate(resolve));
      };
      const handlers = {
        email: recording('email', (p) => typeof (p as { to?: unknown }).to === 'string'),
        report: recording('report', (p) => typeof (p as { day?: unknown }).day === 'number'),
      };
      // Sixteen workers on stores of their own: some with one kind, some with both, all racing from one start.
      const go = deferred();
      const workers: StartedWorker[] = [];
      const mixes: Array<Record<string, Handler>> = [{ email: handlers.email }, { report: handlers.report }, handlers, { email: handlers.email, report: handlers.report }];
      for (let i = 0; i < 16; i++) {
        const store = withLatency(await env().store(`worker store ${i + 1}`));
        workers.push(await env().startWorker({ store, table: { table: 'jobs' }, handlers: mixes[i % mixes.length]!, concurrency: 4, exitWhenEmpty: true, ...FAST }, undefined, undefined, go.promise));
      }
      go.resolve();
      await withDeadline(Promise.all(workers.map((w) => w.done)), 60_000, 'the kind workers to drain their kinds');

      expect(wrongKind).toEqual([]);
      expect(ledger.notExactlyOnce([...ids.email, ...ids.report])).toEqual([]);
      expect(ledger.order.filter((run) => [...ids.archive, ...ids.none].map(String).includes(run.id))).toEqual([]);
      // A server with row locks may roll back one claim of two that deadlock; the worker reports it and claims again.
      expect(workers.flatMap((w) => w.errors).filter((e) => !(e.error instanceof StoreError && e.error.kind === 'WriteConflict'))).toEqual([]);
      expect(await countsOf(setup, 'jobs')).toMatchObject({ pending: 40, processing: 0, done: 2 * perKind });
      const kindOf = new Map((await readRows(setup, 'jobs')).filter((row) => statusOf(row) === null).map((row) => [String(row.id), row.kind ?? null]));
      expect([...kindOf.values()].sort()).toEqual([...Array<string>(20).fill('archive'), ...Array<null>(20).fill(null)]);
      await env().closeStores();
    });

    it('a fleet-wide limit per kind holds under 4 worker processes of 8 slots and 4 workers in this one: never more than 2 report rows running at once, every row once, and the unlimited kind is not held up', { timeout: 120_000 }, async () => {
      const setup = await env().store('setup store');
      const queue = await kindJobs(setup);
      const reports = await queue.enqueue(Array.from({ length: 40 }, (_, n) => ({ n })), { kind: 'report' });
      const emails = await queue.enqueue(Array.from({ length: 80 }, (_, n) => ({ n })), { kind: 'email' });
      // A run lasts long enough (15 ms) for runs of one kind to overlap when nothing holds them apart.
      const ledger = runLedgerModule(env().tempDir(), { label: 'job.kind', runMs: 15, kinds: ['report', 'email'] });
      const runs = await runKindFleet(env(), ledger.handlerPath, { kindConcurrency: { report: 2 } }, 4, ledger.read);
      const ofKind = (kind: string) => runs.filter((run) => run.label === kind);
      expect(mostAtOnce(ofKind('report'))).toBeLessThanOrEqual(2);
      expect(mostAtOnce(ofKind('report'))).toBeGreaterThanOrEqual(1);
      // Not held to the report limit: emails ran several at once.
      expect(mostAtOnce(ofKind('email'))).toBeGreaterThan(2);
      expect(runs.map((run) => String(run.id)).sort()).toEqual([...reports, ...emails].map(String).sort());
      expect(await countsOf(setup, 'jobs')).toMatchObject({ pending: 0, processing: 0, done: 120 });
      await env().closeStores();
    });

    it('a fleet-wide rate per kind holds across 2 worker processes and 4 workers here: report rows start at most 20 a second, while email rows are not paced', { timeout: 120_000 }, async () => {
      const setup = await env().store('setup store');
      const queue = await kindJobs(setup);
      const reports = await queue.enqueue(Array.from({ length: 16 }, (_, n) => ({ n })), { kind: 'report' });
      const emails = await queue.enqueue(Array.from({ length: 40 }, (_, n) => ({ n })), { kind: 'email' });
      const ledger = runLedgerModule(env().tempDir(), { label: 'job.kind', runMs: 2, kinds: ['report', 'email'] });
      const runs = await runKindFleet(env(), ledger.handlerPath, { kindRate: { report: '20/s' } }, 2, ledger.read);
      const starts = (kind: string) => runs.filter((run) => run.label === kind).map((run) => run.start);
      // At 20/s a start every 50 ms, and up to 2 at once after an idle spell (a tenth of a second's worth).
      expect(paceViolations(starts('report'), 50, 2, 150)).toEqual([]);
      // Emails are not held to it: they started closer together than that pace allows.
      expect(paceViolations(starts('email'), 50, 2, 0)).not.toEqual([]);
      expect(runs.map((run) => String(run.id)).sort()).toEqual([...reports, ...emails].map(String).sort());
      await expect(env().startWorker({ store: setup, table: { table: 'jobs' }, handlers: { report: async () => undefined }, kindRate: 'report=fast', ...FAST })).rejects.toThrow(ConfigError);
      await expect(env().startWorker({ store: setup, table: { table: 'jobs' }, handler: async () => undefined, kindRate: { report: '1/s' }, ...FAST })).rejects.toThrow(/kindRate paces kinds: it needs handlers by kind/);
      await env().closeStores();
    });

    it('migrate --with kinds adds the kind column and its index, once; an application\'s own text column can be the kind column instead', async () => {
      const store = await env().store();
      await initTable(store, 'plain');
      const first = await migrateTable(store, { table: 'plain', with: ['kinds'] });
      expect(first.addedColumns).toEqual(['kind']);
      expect(first.createdKindIndex).toBe(store.schema?.createKindIndex ? kindIndexName('plain') : null);
      const second = await migrateTable(store, { table: 'plain', with: ['kinds'] });
      expect([second.addedColumns, second.createdKindIndex]).toEqual([[], null]);
      const plain = await Queue.open(store, { table: 'plain' });
      expect(plain.table.features.kinds).toBe(true);

      // The seed's table_a as the fixtures make it has a text column `kind` of its own (ok, poison, ...): it is the
      // kind column by its name, and migrate --with kinds adds only the index. Its rows' kinds route them.
      await createTableA(env().fixtures, store, generateTableARows(6, { poisonEvery: 3, abuseEvery: 0 }), { migrate: ['leases'] });
      const tableA = await migrateTable(store, { table: 'table_a', with: ['kinds'] });
      expect(tableA.addedColumns).toEqual([]);
      const poison = await (await Queue.open(store, { table: 'table_a' })).forKinds(['poison']).claim({ limit: 10, token: 't' });
      expect(poison.rows.map((row) => Number(row.id)).sort()).toEqual([3, 6]);

      // Another column of the application's says what each row is: named as the kind column instead.
      const q = (name: string) => store.dialect.quoteIdentifier(name);
      await store.execute({ sql: `ALTER TABLE ${q('plain')} ADD ${q('url_type')} VARCHAR(40)`, params: [] });
      const own = await migrateTable(store, { table: 'plain', with: ['kinds'], kindColumn: 'url_type' });
      expect(own.addedColumns).toEqual([]);
      const typed = await Queue.open(store, { table: 'plain', columns: { kind: 'url_type' } });
      expect(typed.table.columns.kind).toBe('url_type');
      await expect(migrateTable(store, { table: 'plain', with: ['kinds'], kindColumn: 'nope' })).rejects.toThrow(SchemaError);
      await expect(migrateTable(store, { table: 'plain', with: ['leases'], kindColumn: 'url_type' })).rejects.toThrow(ConfigError);
      await env().closeStores();
    });

    it('a schedule with a kind enqueues rows of that kind, which a worker with that kind runs; a kind on a table without the column, or a malformed one, is refused when the scheduler is made', async () => {
      const store = await env().store();
      await kindJobs(store);
      await ensureSideTable(store, 'jobs', 'statusq_schedules');
      const scheduler = await Scheduler.create({ store, table: { table: 'jobs' }, schedules: [{ name: 'daily-report', cron: '* * * * * *', kind: 'report', payload: { from: 'schedule' } }] });
      const running = scheduler.run();
      await waitFor('a scheduled row', async () => (await countsOf(store, 'jobs')).pending >= 1, { timeoutMs: 10_000, intervalMs: 50 });
      await scheduler.stop();
      await running;
      const kinds = new Set((await readRows(store, 'jobs')).map((row) => row.kind));
      expect([...kinds]).toEqual(['report']);
      const ran: string[] = [];
      const worker = await env().startWorker({ store, table: { table: 'jobs' }, handlers: { report: async (job) => void ran.push(String(job.kind)) }, exitWhenEmpty: true, ...FAST });
      await withDeadline(worker.done, 10_000, 'the report worker');
      expect(ran.length).toBeGreaterThan(0);
      expect(new Set(ran)).toEqual(new Set(['report']));

      await initTable(store, 'plain');
      await expect(Scheduler.create({ store, table: { table: 'plain' }, schedules: [{ name: 'r', cron: '* * * * *', kind: 'report' }] })).rejects.toThrow(/has no kind column, which schedule r's kind needs \(statusq migrate --with kinds adds it\)/);
      await expect(Scheduler.create({ store, table: { table: 'jobs' }, schedules: [{ name: 'r', cron: '* * * * *', kind: 'two words' }] })).rejects.toThrow(ConfigError);
      await env().closeStores();
    });

    it('refuses bad input before touching a row: a malformed kind, a kind on a table without the column, handlers that are not functions, both handler and handlers, handlers by kind on a table without kinds', async () => {
      const store = await env().store();
      const queue = await kindJobs(store);
      for (const kind of ['', 'has space', "quote'd", 'x'.repeat(101), 7 as unknown as string]) {
        await expect(queue.enqueue([{ n: 1 }], { kind })).rejects.toThrow(ConfigError);
      }
      await initTable(store, 'plain');
      const plain = await Queue.open(store, { table: 'plain' });
      await expect(plain.enqueue([{ n: 1 }], { kind: 'email' })).rejects.toThrow(/has no kind column, which a job's kind needs \(statusq migrate --with kinds adds it\)/);
      const base = { store, table: { table: 'jobs' }, ...FAST };
      await expect(env().startWorker({ ...base, handlers: { email: 'not a function' as unknown as Handler } })).rejects.toThrow(/handlers\.email must be a function/);
      await expect(env().startWorker({ ...base, handlers: {} })).rejects.toThrow(/at least one/);
      await expect(env().startWorker({ ...base, handler: async () => undefined, handlers: { email: async () => undefined } })).rejects.toThrow(/either handler .* or handlers/);
      await expect(env().startWorker({ ...base, handlers: { 'bad kind': async () => undefined } })).rejects.toThrow(ConfigError);
      await expect(env().startWorker({ ...base, table: { table: 'plain' }, handlers: { email: async () => undefined } })).rejects.toThrow(/has no kind column, which handlers by kind need/);
      expect(await countsOf(store, 'jobs')).toMatchObject({ pending: 0, processing: 0 });
      await env().closeStores();
    });
  });
}
