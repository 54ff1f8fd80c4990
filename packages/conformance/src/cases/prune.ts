import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, SchemaError, migrateTable, pruneRows, type Store } from '@statusq/core';
import { generateTableARows } from '@statusq/test-fixtures';
import { countsOf, idKey, readRows, type TestEnv } from '../harness.js';
import { raceToEmpty } from '../racing-workers.js';
import { createJobs, createTableA, enqueueJobs } from '../tables.js';

const DAY = 86_400_000;

/** Sets rows `from`..`to` to `status` (a code, or null), finished `finishedAgoMs` ago (null: no finished_at), queued `queuedAgoMs` ago. */
async function place(queue: Queue, from: number, to: number, state: { status: number | null; finishedAgoMs: number | null; queuedAgoMs?: number }): Promise<void> {
  const store = queue.store;
  const d = store.dialect;
  const q = (n: string) => d.quoteIdentifier(n);
  const params: Array<number | null> = [state.status];
  const ph = () => d.placeholder(params.length);
  const sets = [`${q('status')} = ${ph()}`];
  if (state.finishedAgoMs === null) sets.push(`${q('finished_at')} = NULL`);
  else {
    params.push(-state.finishedAgoMs);
    sets.push(`${q('finished_at')} = ${d.nowPlusMs(ph())}`);
  }
  if (state.queuedAgoMs !== undefined) {
    params.push(-state.queuedAgoMs);
    sets.push(`${q('date')} = ${d.nowPlusMs(ph())}`);
  }
  params.push(from);
  const low = ph();
  params.push(to);
  await store.execute({ sql: `UPDATE ${q('jobs')} SET ${sets.join(', ')} WHERE ${q('id')} >= ${low} AND ${q('id')} <= ${ph()}`, params });
}

async function ids(store: Store, table = 'jobs'): Promise<number[]> {
  return (await readRows(store, table)).map((row) => Number(row.id)).sort((a, b) => a - b);
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

export function pruneCases(env: () => TestEnv): void {
  describe('retention (pruneRows, statusq prune)', () => {
    /** 30 rows: 1-10 done 2 days ago, 11-15 failed, 16-18 abuse, 19-20 done just now, 21-25 pending, 26-28 processing, 29-30 done without finished_at but queued 2 days ago. */
    async function thirtyRows(store: Store): Promise<Queue> {
      const queue = await createJobs(store);
      await enqueueJobs(queue, range(1, 30).map((n) => ({ n })));
      await place(queue, 1, 10, { status: 1, finishedAgoMs: 2 * DAY });
      await place(queue, 11, 15, { status: 0, finishedAgoMs: 2 * DAY });
      await place(queue, 16, 18, { status: 2, finishedAgoMs: 2 * DAY });
      await place(queue, 19, 20, { status: 1, finishedAgoMs: 0 });
      await place(queue, 26, 28, { status: 9, finishedAgoMs: null, queuedAgoMs: 2 * DAY });
      await place(queue, 29, 30, { status: 1, finishedAgoMs: null, queuedAgoMs: 2 * DAY });
      return queue;
    }

    it('removes the finished rows of the given states older than the cut-off, in batches; pending, processing, younger and other states stay, and so do rows without finished_at unless byOrderColumn', async () => {
      const store = await env().store();
      const queue = await thirtyRows(store);
      const dry = await pruneRows(queue, { statuses: ['done', 'failed'], olderThanMs: DAY, dryRun: true });
      expect(dry).toMatchObject({ removed: 15, batches: 0, dryRun: true, ageColumn: 'finished_at', withoutFinishedAt: 2 });
      expect(await ids(store)).toEqual(range(1, 30));

      const totals: number[] = [];
      const report = await pruneRows(queue, { statuses: ['done', 'failed'], olderThanMs: DAY, batch: 4, onBatch: (n) => totals.push(n) });
      expect(report).toMatchObject({ removed: 15, batches: 4, dryRun: false, archive: null, interrupted: false, withoutFinishedAt: null });
      expect(totals).toEqual([4, 8, 12, 15]);
      expect(await ids(store)).toEqual([...range(16, 30)]);
      expect(await countsOf(store, 'jobs')).toEqual({ pending: 5, processing: 3, done: 4, abuse: 3, failed: 0, other: 0 });
      expect((await pruneRows(queue, { statuses: ['done', 'failed'], olderThanMs: DAY })).removed).toBe(0);
      // Asked for: the two done rows without finished_at, queued two days ago, go by their order column.
      expect(await pruneRows(queue, { statuses: ['done'], olderThanMs: DAY, byOrderColumn: true, dryRun: true })).toMatchObject({ removed: 2, ageColumn: 'finished_at, else date', withoutFinishedAt: null });
      expect(await pruneRows(queue, { statuses: ['done'], olderThanMs: DAY, byOrderColumn: true })).toMatchObject({ removed: 2, ageColumn: 'finished_at, else date' });
      expect(await ids(store)).toEqual([...range(16, 28)]);
      await env().closeStores();
    });

    it("an application table's order column is no age: without finished_at prune is a ConfigError unless byOrderColumn, and rows worked a second ago with old dates stay once it has the column", async () => {
      const store = await env().store();
      const old = new Date(Date.now() - 3 * DAY);
      await createTableA(env().fixtures, store, [...generateTableARows(2, { newest: old, poisonEvery: 0, abuseEvery: 0 }), ...generateTableARows(2, { firstId: 3, poisonEvery: 0, abuseEvery: 0 })]);
      const q = (n: string) => store.dialect.quoteIdentifier(n);
      await store.execute({ sql: `UPDATE ${q('table_a')} SET ${q('status')} = 1`, params: [] });
      const plain = await Queue.open(store, { table: 'table_a' });
      for (const dryRun of [true, false]) {
        await expect(pruneRows(plain, { statuses: ['done'], olderThanMs: DAY, dryRun })).rejects.toThrow(ConfigError);
        await expect(pruneRows(plain, { statuses: ['done'], olderThanMs: DAY, dryRun })).rejects.toThrow(
          'prune: table_a has no finished_at column, so when its rows finished is not known; migrate --with results adds it, or --by-order-column (byOrderColumn) judges age by date, when each row was queued',
        );
      }
      expect(await ids(store, 'table_a')).toEqual([1, 2, 3, 4]);
      expect(await pruneRows(plain, { statuses: ['done'], olderThanMs: DAY, byOrderColumn: true, dryRun: true })).toMatchObject({ removed: 2, ageColumn: 'date', withoutFinishedAt: null });

      // With finished_at: rows 1 and 2 finished just now, though queued three days ago; 3 and 4 have none.
      await migrateTable(store, { table: 'table_a', with: ['results'] });
      await store.execute({ sql: `UPDATE ${q('table_a')} SET ${q('finished_at')} = ${store.dialect.nowPlusMs(store.dialect.placeholder(1))} WHERE ${q('id')} <= 2`, params: [0] });
      const migrated = await Queue.open(store, { table: 'table_a' });
      expect(await pruneRows(migrated, { statuses: ['done'], olderThanMs: DAY, dryRun: true })).toMatchObject({ removed: 0, ageColumn: 'finished_at', withoutFinishedAt: 2 });
      expect(await pruneRows(migrated, { statuses: ['done'], olderThanMs: DAY })).toMatchObject({ removed: 0 });
      expect(await ids(store, 'table_a')).toEqual([1, 2, 3, 4]);
      await env().closeStores();
    });

    it('--archive moves the rows whole to a table it makes when missing, and refuses one that lacks a column', async () => {
      const store = await env().store();
      const queue = await thirtyRows(store);
      const before = new Map((await readRows(store, 'jobs')).map((row) => [idKey(row.id), row]));
      const report = await pruneRows(queue, { statuses: ['done', 'abuse', 'failed'], olderThanMs: DAY, batch: 7, archive: 'jobs_archive', byOrderColumn: true });
      expect(report).toMatchObject({ removed: 20, batches: 3, archive: 'jobs_archive', createdArchive: true });
      const archived = await readRows(store, 'jobs_archive');
      expect(archived.map((row) => Number(row.id)).sort((a, b) => a - b)).toEqual([...range(1, 18), 29, 30]);
      for (const row of archived) expect(row, `row ${idKey(row.id)}`).toMatchObject({ payload: before.get(idKey(row.id))!.payload, status: before.get(idKey(row.id))!.status });
      expect(await ids(store)).toEqual(range(19, 28));
      // Again, into the table it made, with no age limit: the two done rows finished a second ago.
      await place(queue, 19, 20, { status: 1, finishedAgoMs: 1000 });
      expect(await pruneRows(queue, { statuses: ['done'], olderThanMs: 0, archive: 'jobs_archive' })).toMatchObject({ removed: 2, createdArchive: false });
      const q = (n: string) => store.dialect.quoteIdentifier(n);
      await store.execute({ sql: `CREATE TABLE ${q('thin_archive')} (${q('id')} INTEGER PRIMARY KEY, ${q('status')} INTEGER)`, params: [] });
      await place(queue, 21, 21, { status: 1, finishedAgoMs: 2 * DAY });
      await expect(pruneRows(queue, { statuses: ['done'], olderThanMs: DAY, archive: 'thin_archive' })).rejects.toThrow(SchemaError);
      await expect(pruneRows(queue, { statuses: ['done'], olderThanMs: DAY, archive: 'thin_archive' })).rejects.toThrow(/archive table thin_archive lacks columns date, payload/);
      expect(await ids(store)).toEqual(range(21, 28));
      await env().closeStores();
    });

    it('pending and processing rows, bad ages, batches and names are ConfigErrors before anything runs', async () => {
      const store = await env().store();
      const queue = await thirtyRows(store);
      const bad: Array<[Parameters<typeof pruneRows>[1], RegExp]> = [
        [{ statuses: ['pending'], olderThanMs: DAY }, /prune removes finished rows only \(done, abuse, failed\); "pending" rows are still to run or running/],
        [{ statuses: ['done', 'processing'], olderThanMs: DAY }, /"processing" rows are still to run or running/],
        [{ statuses: [], olderThanMs: DAY }, /give the statuses to remove/],
        [{ statuses: ['done'], olderThanMs: -1 }, /older-than must be a non-negative number/],
        [{ statuses: ['done'], olderThanMs: DAY, batch: 0 }, /batch must be a whole number from 1 to 10000/],
        [{ statuses: ['done'], olderThanMs: DAY, pauseMs: -1 }, /pause must be a non-negative number of milliseconds/],
        [{ statuses: ['done'], olderThanMs: DAY, archive: 'bad name' }, /invalid table name/],
        [{ statuses: ['done'], olderThanMs: DAY, archive: 'jobs' }, /the archive table must be another table/],
      ];
      for (const [options, message] of bad) {
        await expect(pruneRows(queue, options), String(message)).rejects.toThrow(ConfigError);
        await expect(pruneRows(queue, options)).rejects.toThrow(message);
      }
      expect(await ids(store)).toEqual(range(1, 30));
      await env().closeStores();
    });

    it('racing workers burn down pending rows while a prune removes 2,000 old finished ones: every pending row runs exactly once, and no row finished during the run is pruned', { timeout: 90_000 }, async () => {
      const setup = await env().store('setup store');
      const queue = await createJobs(setup);
      await enqueueJobs(queue, range(1, 2000).map((n) => ({ n, old: true })));
      await place(queue, 1, 2000, { status: 1, finishedAgoMs: 2 * DAY });
      const pending = await enqueueJobs(queue, range(1, 300).map((n) => ({ n })));
      const pruner = await Queue.open(await env().store('prune store'), { table: 'jobs' });
      const [race, report] = await Promise.all([
        raceToEmpty(env(), { workers: 4, concurrency: 4, deadlineMs: 60_000, what: 'the workers to run every pending row' }),
        pruneRows(pruner, { statuses: ['done'], olderThanMs: DAY, batch: 50 }),
      ]);
      expect(report.removed).toBe(2000);
      expect(race.ledger.notExactlyOnce(pending)).toEqual([]);
      for (const w of race.workers) expect(w.errors).toEqual([]);
      expect(await countsOf(setup, 'jobs')).toEqual({ pending: 0, processing: 0, done: 300, abuse: 0, failed: 0, other: 0 });
      expect((await ids(setup)).map(String)).toEqual([...pending].sort((a, b) => Number(a) - Number(b)));
      await env().closeStores();
    });
  });
}
