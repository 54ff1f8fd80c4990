import { describe, expect, it } from 'vitest';
import { ConfigError, Queue, SchemaError, StoreError, migrateTable, type Handler, type JobId, type Store } from '@statusq/core';
import { keyIndexName } from '@statusq/core/adapter';
import { generateTableARows } from '@statusq/test-fixtures';
import { FAST, Ledger, countsOf, idKey, readRows, waitFor, withDeadline, withLatency, type TestEnv } from '../harness.js';
import { skipFor } from '../skips.js';
import { createJobs, createTableA, timeValue } from '../tables.js';

/** Rows of `table` holding `key`, whatever their status. */
async function rowsWithKey(store: Store, key: string, table = 'jobs'): Promise<Array<Record<string, unknown>>> {
  return (await readRows(store, table)).filter((row) => row.dedupe_key === key);
}

/** One guarded settle of a claimed row, as a worker sends it. */
async function settle(queue: Queue, id: JobId, token: string, how: 'complete' | 'giveUp' | 'abuse' | 'retry'): Promise<void> {
  const sql = queue.sql;
  const statement =
    how === 'complete' ? sql.complete(id, token, null) : how === 'giveUp' ? sql.giveUp(id, token, 'boom') : how === 'abuse' ? sql.abuse(id, token, 'spam') : sql.retry(id, token, 'again', 0);
  expect((await queue.apply([statement]))[0]!.affected, `${how} of ${String(id)}`).toBe(1);
}

export function dedupeCases(env: () => TestEnv): void {
  describe('deduplication keys (enqueue key, migrate --with dedupe)', () => {
    it('32 enqueuers of one key at the same moment insert exactly one row, and all 32 report its id (31 as duplicates)', { timeout: 60_000 }, async () => {
      const setup = await env().store('setup store');
      await createJobs(setup);
      const queues: Queue[] = [];
      for (let i = 0; i < 32; i++) queues.push(await Queue.open(withLatency(await env().store(`enqueuer ${i + 1}`)), { table: 'jobs' }));
      const outcomes = (await withDeadline(Promise.all(queues.map((queue, i) => queue.enqueueDetailed([{ enqueuer: i }], { key: 'invoice-42' }))), 45_000, 'the 32 enqueuers')).flat();
      expect(outcomes.filter((o) => !o.duplicate)).toHaveLength(1);
      const rows = await rowsWithKey(setup, 'invoice-42');
      expect(rows).toHaveLength(1);
      expect(new Set(outcomes.map((o) => idKey(o.id)))).toEqual(new Set([idKey(rows[0]!.id)]));
      expect(await countsOf(setup, 'jobs')).toMatchObject({ pending: 1 });
      await env().closeStores();
    });

    it('a key stays taken while its row is pending, processing or waiting for a retry, and is free again once the row is done, failed or abuse', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const enqueue = async (n: number) => (await queue.enqueueDetailed([{ n }], { key: 'sync-user-7' }))[0]!;
      const claim = async (token: string) => {
        const { rows } = await queue.claim({ limit: 1, token });
        expect(rows, `claim ${token}`).toHaveLength(1);
        return rows[0]!.id as JobId;
      };

      const first = await enqueue(1);
      expect(first.duplicate).toBe(false);
      expect(await enqueue(2)).toEqual({ id: first.id, duplicate: true });
      expect(idKey(await claim('t1'))).toBe(idKey(first.id));
      expect(await enqueue(3)).toEqual({ id: first.id, duplicate: true });
      await settle(queue, first.id!, 't1', 'retry');
      expect(await enqueue(4)).toEqual({ id: first.id, duplicate: true });
      await claim('t2');
      await settle(queue, first.id!, 't2', 'complete');

      const second = await enqueue(5);
      expect(second.duplicate).toBe(false);
      expect(idKey(second.id)).not.toBe(idKey(first.id));
      await claim('t3');
      await settle(queue, second.id!, 't3', 'giveUp');
      const third = await enqueue(6);
      expect(third.duplicate).toBe(false);
      expect(await queue.markAbuse(third.id!, 'spam')).toBe(true);
      const fourth = await enqueue(7);
      expect(fourth.duplicate).toBe(false);
      // One live row, and every earlier one kept with its key and final state.
      expect((await rowsWithKey(store, 'sync-user-7')).map((r) => [idKey(r.id), r.status === null ? null : Number(r.status)])).toEqual([
        [idKey(first.id), 1],
        [idKey(second.id), 0],
        [idKey(third.id), 2],
        [idKey(fourth.id), null],
      ]);

      // Keys compare exactly, on every database: another case or a different key is another row.
      const others = await queue.enqueueDetailed([{ n: 8 }, { n: 9 }, { n: 10 }, { n: 11 }], { key: (item) => ['SYNC-USER-7', 'sync-user-7', 'sync-user-8', null][(item as { n: number }).n - 8] });
      expect(others.map((o) => o.duplicate)).toEqual([false, true, false, false]);
      expect(idKey(others[1]!.id)).toBe(idKey(fourth.id));
      // Without a key, rows repeat freely.
      expect((await queue.enqueueDetailed([{ n: 1 }, { n: 1 }])).map((o) => o.duplicate)).toEqual([false, false]);
      await env().closeStores();
    });

    it('racing workers and enqueuers: a key never has two rows running at once, every inserted row runs exactly once, every duplicate names a row that ran', { timeout: 90_000 }, async () => {
      const setup = await env().store('setup store');
      await createJobs(setup);
      const ledger = new Ledger();
      const running = new Map<string, number>();
      const overlaps: string[] = [];
      const handler: Handler = async (job, ctx) => {
        ledger.record(job, ctx.workerId);
        const key = String(job.row.dedupe_key);
        running.set(key, (running.get(key) ?? 0) + 1);
        if (running.get(key)! > 1) overlaps.push(`${key} twice at once (row ${idKey(job.id)})`);
        for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
        running.set(key, running.get(key)! - 1);
      };
      const workers = [];
      for (let i = 0; i < 3; i++) {
        const store = withLatency(await env().store(`worker store ${i + 1}`));
        workers.push(await env().startWorker({ store, table: { table: 'jobs' }, concurrency: 4, ...FAST, handler }));
      }
      const KEYS = 5;
      const ROUNDS = 25;
      const enqueuers: Queue[] = [];
      for (let i = 0; i < 6; i++) enqueuers.push(await Queue.open(withLatency(await env().store(`enqueuer ${i + 1}`)), { table: 'jobs' }));
      const outcomes = (
        await withDeadline(
          Promise.all(
            enqueuers.map(async (queue, e) => {
              const mine = [];
              for (let round = 0; round < ROUNDS; round++) mine.push(...(await queue.enqueueDetailed([{ e, round }], { key: `k${(e + round) % KEYS}` })));
              return mine;
            }),
          ),
          60_000,
          'the enqueuers',
        )
      ).flat();
      await waitFor('the workers to finish every row', async () => {
        const counts = await countsOf(setup, 'jobs');
        return counts.pending === 0 && counts.processing === 0;
      }, { timeoutMs: 30_000 });
      await Promise.all(workers.map((w) => w.worker.stop()));

      const inserted = outcomes.filter((o) => !o.duplicate).map((o) => idKey(o.id));
      expect(overlaps).toEqual([]);
      expect(ledger.notExactlyOnce(inserted)).toEqual([]);
      expect(await countsOf(setup, 'jobs')).toEqual({ pending: 0, processing: 0, done: inserted.length, abuse: 0, failed: 0, other: 0 });
      // A duplicate reports a row that was live at the time: one of the rows inserted, which all ran.
      for (const o of outcomes.filter((x) => x.duplicate)) expect(inserted).toContain(idKey(o.id));
      // Both kinds happened, or the race proved nothing.
      expect(inserted.length).toBeGreaterThanOrEqual(KEYS);
      expect(outcomes.length - inserted.length).toBeGreaterThan(0);
      // On a store whose keyed INSERT locks the key index as it checks it, the INSERT can deadlock with a claim of
      // the row that holds the key; the server rolls one back (WriteConflict) and it is retried. Nothing else may have gone wrong.
      for (const w of workers) expect(w.errors.filter((e) => !(e.error instanceof StoreError && e.error.kind === 'WriteConflict'))).toEqual([]);
      await env().closeStores();
    });

    it('migrate --with dedupe on table_a: the column and its key index; a row may set dedupe_key itself; without the column or without the index a keyed enqueue is a SchemaError that writes nothing', async () => {
      const store = await env().store();
      await createTableA(env().fixtures, store, generateTableARows(3));
      const plain = await Queue.open(store, { table: 'table_a' });
      const row = (id: number) => ({ id, date: timeValue(plain, new Date()), url: `https://example.com/${id}`, kind: 'x' });
      await expect(plain.enqueue([row(100)], { key: 'a' })).rejects.toThrow(new SchemaError("table table_a has no dedupe_key column, which a deduplication key needs (statusq migrate --with dedupe adds it)"));

      // The column without its index (added by hand): keys would not be race-safe, so they are refused.
      const q = (n: string) => store.dialect.quoteIdentifier(n);
      await store.execute({ sql: `ALTER TABLE ${q('table_a')} ADD ${q('dedupe_key')} VARCHAR(255)`, params: [] });
      const unindexed = await Queue.open(store, { table: 'table_a' });
      await expect(unindexed.enqueue([row(100)], { key: 'a' })).rejects.toThrow(SchemaError);
      await expect(unindexed.enqueue([row(100)], { key: 'a' })).rejects.toThrow(new RegExp(`not its key index ${keyIndexName('table_a')}.*migrate --with dedupe`));
      expect((await readRows(store, 'table_a')).map((r) => Number(r.id))).toEqual([1, 2, 3]);

      const report = await migrateTable(store, { table: 'table_a', with: ['dedupe'] });
      expect(report.addedColumns).toEqual([]);
      expect(report.createdKeyIndex).toBe(keyIndexName('table_a'));
      expect((await migrateTable(store, { table: 'table_a', with: ['dedupe'] })).createdKeyIndex).toBeNull();
      const queue = await Queue.open(store, { table: 'table_a' });
      expect(queue.table.features.dedupe).toBe(true);
      const outcome = async (...args: Parameters<Queue['enqueueDetailed']>) => (await queue.enqueueDetailed(...args)).map((o) => [idKey(o.id), o.duplicate]);
      expect(await outcome([{ ...row(100), dedupe_key: 'order-1' }])).toEqual([['100', false]]);
      expect(await outcome([{ ...row(101), dedupe_key: 'order-1' }])).toEqual([['100', true]]);
      expect(await outcome([row(102)], { key: 'order-1' })).toEqual([['100', true]]);
      await expect(queue.enqueue([{ ...row(103), dedupe_key: 'x' }], { key: 'y' })).rejects.toThrow(/sets dedupe_key itself, and enqueue's key option gives one too/);
      expect((await readRows(store, 'table_a')).map((r) => Number(r.id))).toEqual([1, 2, 3, 100]);

      // Another unique index of the application's table is not mistaken for the key: its violation is an error.
      await store.execute({ sql: `CREATE UNIQUE INDEX ${q('table_a_url')} ON ${q('table_a')} (${q('url')})`, params: [] });
      await expect(queue.enqueue([{ ...row(104), url: 'https://example.com/100' }], { key: 'order-2' })).rejects.toMatchObject({ kind: 'UniqueViolation', item: 0, committed: 0 });
      expect(await rowsWithKey(store, 'order-2', 'table_a')).toEqual([]);

      // Two live rows sharing a key cannot get a unique index: migrate says so, and adds no key index.
      await store.execute({ sql: `CREATE TABLE ${q('shared_keys')} (${q('id')} INTEGER PRIMARY KEY, ${q('date')} VARCHAR(32) NOT NULL, ${q('status')} INTEGER, ${q('dedupe_key')} VARCHAR(255))`, params: [] });
      await store.execute({ sql: `INSERT INTO ${q('shared_keys')} (${q('id')}, ${q('date')}, ${q('dedupe_key')}) VALUES (1, '2026-01-01', 'same'), (2, '2026-01-02', 'same')`, params: [] });
      await expect(migrateTable(store, { table: 'shared_keys', with: ['dedupe'] })).rejects.toThrow(/two or more pending or processing rows share a value of dedupe_key/);
      // Once one of them has finished, the same migrate goes through (nothing half-made stood in its way).
      await store.execute({ sql: `UPDATE ${q('shared_keys')} SET ${q('status')} = 1 WHERE ${q('id')} = 1`, params: [] });
      expect((await migrateTable(store, { table: 'shared_keys', with: ['dedupe'] })).createdKeyIndex).toBe(keyIndexName('shared_keys'));
      await env().closeStores();
    });

    it('requeue of a failed row whose key a live row holds is refused whole, naming the key column; once the key is free it goes through', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const [old] = await queue.enqueue([{ n: 1 }], { key: 'nightly' });
      await queue.claim({ limit: 1, token: 't1' });
      await settle(queue, old!, 't1', 'giveUp');
      const [live] = await queue.enqueue([{ n: 2 }], { key: 'nightly' });
      const refused = queue.requeue('failed');
      await expect(refused).rejects.toThrow(StoreError);
      await expect(queue.requeue('failed')).rejects.toThrow(/nothing was requeued, because a row among them has a dedupe_key that a pending or processing row/);
      expect(await countsOf(store, 'jobs')).toMatchObject({ pending: 1, failed: 1 });
      await queue.claim({ limit: 1, token: 't2' });
      await settle(queue, live!, 't2', 'complete');
      expect(await queue.requeue('failed')).toBe(1);
      expect(await countsOf(store, 'jobs')).toMatchObject({ pending: 1, done: 1, failed: 0 });
      await env().closeStores();
    });

    it('bad keys are ConfigErrors that write nothing', async () => {
      const store = await env().store();
      const queue = await createJobs(store);
      const bad: Array<[unknown[], Parameters<Queue['enqueue']>[1], RegExp]> = [
        [[{ n: 1 }], { key: '' }, /a deduplication key is 1 to 255 characters without surrounding whitespace, got ""/],
        [[{ n: 1 }], { key: ' padded' }, /without surrounding whitespace, got " padded"/],
        [[{ n: 1 }], { key: 'x'.repeat(256) }, /1 to 255 characters/],
        [[{ n: 1 }], { key: 42 as unknown as string }, /key must be a string or a function of the item, got number/],
        [[{ n: 1 }], { key: () => 7 as unknown as string }, /got 7/],
        [[{ n: 1 }, { n: 2 }], { key: 'one' }, /a key string names one row, and 2 items were given/],
        [[{ n: 1 }], { key: 'k', chunk: 1 }, /give chunk or keys, not both/],
        [[{ n: 1 }], { key: 'k', transaction: {} }, /deduplication keys are not taken in the caller's transaction/],
      ];
      for (const [items, options, message] of bad) {
        await expect(queue.enqueue(items, options), String(message)).rejects.toThrow(ConfigError);
        await expect(queue.enqueue(items, options)).rejects.toThrow(message);
      }
      // Every key is checked before the first row is written.
      await expect(queue.enqueue([{ n: 1 }, { n: 2 }], { key: (item) => ((item as { n: number }).n === 2 ? '' : 'fine') })).rejects.toThrow(/item 2: a deduplication key/);
      expect(await countsOf(store, 'jobs')).toEqual({ pending: 0, processing: 0, done: 0, abuse: 0, failed: 0, other: 0 });
      await env().closeStores();
    });

    it('[needs queryPlans] the duplicate lookup reads the key index, on a table of many finished keyed rows', async (ctx) => {
      const plans = env().options.queryPlans;
      if (!plans) return skipFor(ctx, 'queryPlans');
      const store = await env().store();
      const queue = await createJobs(store);
      const ids = await queue.enqueue(Array.from({ length: 5000 }, (_, n) => ({ n })));
      const q = (n: string) => store.dialect.quoteIdentifier(n);
      const ph = (i: number) => store.dialect.placeholder(i);
      // Keys set in one transaction: keyed enqueues commit one at a time, which 5,000 of would only make slow.
      await store.executeBatch(ids.map((id, n) => ({ sql: `UPDATE ${q('jobs')} SET ${q('dedupe_key')} = ${ph(1)}, ${q('status')} = ${ph(2)} WHERE ${q('id')} = ${ph(3)}`, params: [`k-${n}`, n < 40 ? null : 1, id!] })));
      await plans.analyze(store, 'jobs');
      const plan = await plans.explain(store, queue.sql.liveKeyHolder('k-3'), { asIfLarge: true });
      expect(plan.index, plan.text).toBe(keyIndexName('jobs'));
      expect(plan.sorts, plan.text).toBe(false);
      await env().closeStores();
    });
  });
}
